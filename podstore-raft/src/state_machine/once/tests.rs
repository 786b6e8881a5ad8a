//! The request-id table's tests: at most once whatever the chunking, the window, the bound on
//! clients.

use openraft::RaftTypeConfig;
use openraft::alias::{EntryOf, LogIdOf};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::vote::RaftLeaderIdExt;

use super::*;
use crate::TypeConfig;
use crate::state_machine::{StateMachine, apply_entries};

fn entry(index: u64, client: u64, seq: u64, request: Request) -> EntryOf<TypeConfig> {
    let log_id = LogIdOf::<TypeConfig>::new(
        <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
        index,
    );
    let id = RequestId { client, seq };
    let request = Box::new(request);
    EntryOf::<TypeConfig>::new_normal(log_id, Request::Once { id, request })
}

fn put(key: &str, value: &str) -> Request {
    Request::Put {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
    }
}

fn open(dir: &std::path::Path) -> StateMachine {
    StateMachine::open(dir.join("sm"), dir.join("snapshots")).unwrap()
}

/// Every key and value of the store but the applied id (the same entries applied in other
/// chunks leave the same store).
fn contents(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
    store
        .range::<Vec<u8>>(..)
        .entries()
        .map(|e| {
            let e = e.unwrap();
            let value = store.get(e.key()).unwrap().unwrap();
            (e.into_key(), value)
        })
        .filter(|(k, _)| k.as_slice() != b"m/applied")
        .collect()
}

/// A retry under the same id answers the first outcome (its index too) and applies nothing;
/// another request under it is refused; the answers and the store are the same whether the
/// entries are applied in one chunk, one by one, or cut anywhere.
#[test]
fn a_request_id_is_applied_once_whatever_the_chunking() {
    let absent = |k: &str| Request::PutIf {
        key: k.as_bytes().to_vec(),
        value: b"x".to_vec(),
        expect: Expect::Absent,
    };
    let delete = |k: &str| Request::Delete {
        key: k.as_bytes().to_vec(),
    };
    let entries = vec![
        entry(1, 7, 1, put("a", "first")),
        entry(2, 7, 1, put("a", "first")),
        entry(3, 7, 1, put("a", "another")),
        entry(4, 7, 2, absent("x")),
        entry(5, 7, 2, absent("x")),
        entry(6, 8, 1, absent("x")),
        entry(7, 7, 3, delete("a")),
        entry(8, 7, 3, delete("a")),
        entry(9, 8, 2, delete("a")),
    ];
    let replayed = |index, response| Response::Replayed {
        index,
        response: Box::new(response),
    };
    let want = vec![
        Response::Done,
        replayed(1, Response::Done),
        Response::RequestIdRefused(String::new()),
        Response::Done,
        replayed(4, Response::Done),
        Response::ConditionFailed { current: Some(4) },
        Response::Existed(true),
        replayed(7, Response::Existed(true)),
        Response::Existed(false),
    ];
    let mut stores = Vec::new();
    for cut in [vec![], vec![1, 2, 3, 4, 5, 6, 7, 8], vec![2], vec![5, 7]] {
        let dir = tempfile::tempdir().unwrap();
        let sm = open(dir.path());
        let store = sm.store();
        let mut got = Vec::new();
        let mut from = 0;
        for end in cut.iter().copied().chain([entries.len()]) {
            got.extend(apply_entries(&store, entries[from..end].to_vec()).unwrap());
            from = end;
        }
        for (g, w) in got.iter().zip(&want) {
            match (g, w) {
                (Response::RequestIdRefused(_), Response::RequestIdRefused(_)) => {}
                _ => assert_eq!(g, w, "cut at {cut:?}"),
            }
        }
        assert_eq!(got.len(), want.len());
        assert_eq!(sm.get(b"a").unwrap(), None);
        assert_eq!(sm.get_versioned(b"x").unwrap().unwrap().1, 4);
        stores.push(contents(&store));
        drop(dir);
    }
    assert!(stores.windows(2).all(|w| w[0] == w[1]));
}

/// A client's records stay within the window as its sequence numbers move up (one by one,
/// or by a jump); an id below the window is refused, one within it still replayed; and the
/// records are in snapshots: a node that installed one answers a retry as the first did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_window_is_bounded_and_survives_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open(dir.path());
    let store = sm.store();
    let n = REQUEST_ID_WINDOW + 10;
    let entries: Vec<_> = (1..=n).map(|s| entry(s, 3, s, put("k", "v"))).collect();
    for e in entries {
        apply_entries(&store, vec![e]).unwrap();
    }
    assert_eq!(records_in(&store), REQUEST_ID_WINDOW as usize);
    let late = apply_entries(&store, vec![entry(n + 1, 3, 5, put("k", "v"))]).unwrap();
    assert!(
        matches!(&late[0], Response::RequestIdRefused(_)),
        "{late:?}"
    );
    let retry = apply_entries(&store, vec![entry(n + 2, 3, n, put("k", "v"))]).unwrap();
    assert_eq!(
        retry[0],
        Response::Replayed {
            index: n,
            response: Box::new(Response::Done)
        }
    );
    // A jump far ahead: the whole old window leaves.
    let jump = 10 * REQUEST_ID_WINDOW;
    apply_entries(&store, vec![entry(n + 3, 3, jump, put("k", "w"))]).unwrap();
    assert_eq!(records_in(&store), 1);
    // Another client's ids are its own.
    apply_entries(&store, vec![entry(n + 4, 4, 1, put("j", "v"))]).unwrap();
    assert_eq!(records_in(&store), 2);

    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let mut other = open(other_dir.path());
    other
        .install_snapshot(&snap.meta, snap.snapshot)
        .await
        .unwrap();
    let retry = apply_entries(&other.store(), vec![entry(n + 5, 4, 1, put("j", "v"))]).unwrap();
    assert_eq!(
        retry[0],
        Response::Replayed {
            index: n + 4,
            response: Box::new(Response::Done)
        }
    );
}

/// Clients are bounded: one more than [`REQUEST_ID_CLIENTS`] makes the state machine forget
/// the client whose latest write is the oldest (a retry from it is then applied again); a
/// client that keeps writing is never forgotten, and a retry within its window still
/// answers the first outcome. The same whether the entries are applied in one chunk, one by
/// one, or cut elsewhere: every node forgets the same clients.
#[test]
fn clients_are_bounded_by_forgetting_the_least_recent_alike_on_every_node() {
    let n = REQUEST_ID_CLIENTS + 6;
    // Client 0 writes (seq 1, 2, ...) before every tenth new client; clients 1..=n once.
    let mut entries = Vec::new();
    let (mut steady, mut steady_index) = (0, 0);
    for c in 1..=n {
        if c % 10 == 1 {
            steady += 1;
            let index = entries.len() as u64 + 1;
            steady_index = index;
            entries.push(entry(index, 0, steady, put("steady", &steady.to_string())));
        }
        let index = entries.len() as u64 + 1;
        entries.push(entry(index, c, 1, put(&format!("k{c}"), "v")));
    }
    let last = entries.len() as u64;
    // Retries: client 1's first write (forgotten: applied again), the newest client's and
    // client 0's latest (remembered: replayed).
    let retries = vec![
        entry(last + 1, n, 1, put(&format!("k{n}"), "v")),
        entry(last + 2, 0, steady, put("steady", &steady.to_string())),
        entry(last + 3, 1, 1, put("k1", "v")),
    ];
    let mut stores = Vec::new();
    let one_by_one: Vec<usize> = (1..entries.len()).collect();
    for cut in [vec![], vec![700], vec![1, 2, 1030], one_by_one] {
        let dir = tempfile::tempdir().unwrap();
        let sm = open(dir.path());
        let store = sm.store();
        let mut from = 0;
        for end in cut.iter().copied().chain([entries.len()]) {
            apply_entries(&store, entries[from..end].to_vec()).unwrap();
            from = end;
        }
        let clients = clients_in(&store);
        assert_eq!(
            clients.len() as u64,
            REQUEST_ID_CLIENTS,
            "cut at {:?}",
            cut.first()
        );
        // The oldest new clients went: one per client past the bound (client 0 stayed).
        let forgotten: Vec<u64> = (1..=n).filter(|c| !clients.contains(c)).collect();
        assert_eq!(forgotten, (1..=7).collect::<Vec<_>>());
        assert!(clients.contains(&0));
        // No records of a forgotten client are left.
        assert_eq!(
            records_in(&store) as u64,
            REQUEST_ID_CLIENTS - 1 + steady.min(REQUEST_ID_WINDOW)
        );
        let got = apply_entries(&store, retries.clone()).unwrap();
        let replayed = |index| Response::Replayed {
            index,
            response: Box::new(Response::Done),
        };
        assert_eq!(got[0], replayed(last));
        assert_eq!(got[1], replayed(steady_index));
        assert_eq!(
            got[2],
            Response::Done,
            "a forgotten client's retry is applied anew"
        );
        stores.push(contents(&store));
    }
    assert!(stores.windows(2).all(|w| w[0] == w[1]));
}

/// Writes `client`'s request ids into `store` in the layout of the build before the ring of
/// slots (`r/m`, `r/l`, `r/i`; `r/o` and `r/n` as now), as that build wrote them: `records`
/// are (seq, log index, request, answer); `latest` the index of its latest write (`None`: a
/// client recorded before the order of clients existed).
fn write_previous_layout(
    store: &Store,
    client: u64,
    records: &[(u64, u64, Request, Response)],
    latest: Option<u64>,
) {
    let key = |prefix: &[u8], rest: &[u64]| {
        let mut k = prefix.to_vec();
        k.extend_from_slice(&client.to_be_bytes());
        for r in rest {
            k.extend_from_slice(&r.to_be_bytes());
        }
        k
    };
    let highest = records.iter().map(|r| r.0).max().unwrap();
    store
        .put(key(b"r/m", &[]), encode(&highest).unwrap())
        .unwrap();
    for (seq, index, request, response) in records {
        let record = encode(&(*index, digest(request), response)).unwrap();
        store.put(key(b"r/i", &[*seq]), record).unwrap();
    }
    if let Some(latest) = latest {
        store
            .put(key(b"r/l", &[]), encode(&latest).unwrap())
            .unwrap();
        store
            .put(order_key(latest, client), client.to_be_bytes())
            .unwrap();
        let count: u64 = store
            .get(CLIENTS_KEY)
            .unwrap()
            .map_or(0, |b| decode(&b).unwrap());
        store
            .put(CLIENTS_KEY, encode(&(count + 1)).unwrap())
            .unwrap();
    }
}

/// How many keys `store` holds in the previous layout (`r/i`, `r/l`, `r/m`).
fn previous_layout_keys(store: &Store) -> usize {
    [&b"r/i"[..], b"r/l", b"r/m"]
        .iter()
        .map(|p| store.prefix(p).count())
        .sum()
}

/// A node restarted on a data directory written by the build before the ring of slots: its
/// request-id table is rewritten at open, and answers as before: a retry replays the first
/// outcome (its index too), another request under a remembered id and an id below the window
/// are refused, a client recorded before the order of clients existed is counted when it
/// next writes. A snapshot holding the previous layout (sent by a node not upgraded yet) is
/// rewritten when installed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_in_the_previous_layout_is_upgraded_at_open_and_at_install() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let store = sm.store();
    apply_entries(&store, vec![entry(1, 1, 1, put("a", "v"))]).unwrap();
    let w = REQUEST_ID_WINDOW;
    // Client 5: the ids 3..=W+2 remembered (1 and 2 left the window), applied at 10.. .
    let five: Vec<_> = (3..=w + 2)
        .map(|s| (s, 7 + s, put(&format!("k{s}"), "v"), Response::Done))
        .collect();
    write_previous_layout(&store, 5, &five, Some(w + 9));
    // Client 6: recorded before the order existed.
    let six = [(1, 5000, put("six", "v"), Response::Inserted(true))];
    write_previous_layout(&store, 6, &six, None);
    assert_eq!(previous_layout_keys(&store), w as usize + 4);
    drop(store);
    drop(sm);

    let sm = open(dir.path());
    let store = sm.store();
    assert_eq!(previous_layout_keys(&store), 0);
    assert_eq!(clients_in(&store), [1, 5, 6]);
    assert_eq!(records_in(&store), 1 + w as usize + 1);
    let n = 6000;
    let got = apply_entries(
        &store,
        vec![
            entry(n, 5, 3, put("k3", "v")),
            entry(n + 1, 5, w + 2, put("k", "another")),
            entry(n + 2, 5, 2, put("k2", "v")),
            entry(n + 3, 6, 1, put("six", "v")),
            entry(n + 4, 5, w + 3, put("new", "v")),
            entry(n + 5, 6, 2, put("six", "w")),
        ],
    )
    .unwrap();
    let replayed = |index, response| Response::Replayed {
        index,
        response: Box::new(response),
    };
    assert_eq!(got[0], replayed(10, Response::Done));
    assert!(matches!(got[1], Response::RequestIdRefused(_)), "{got:?}");
    assert!(matches!(got[2], Response::RequestIdRefused(_)), "{got:?}");
    assert_eq!(got[3], replayed(5000, Response::Inserted(true)));
    assert_eq!(got[4], Response::Done);
    assert_eq!(got[5], Response::Done);
    // Client 6 counted at its write: three clients in the order, each once.
    let count: u64 = decode(&store.get(CLIENTS_KEY).unwrap().unwrap()).unwrap();
    assert_eq!(count, 3);
    assert_eq!(store.prefix(ORDER).count(), 3);
    // Client 5's window moved up by one: its oldest record left, in its slot.
    assert_eq!(records_in(&store), 1 + w as usize + 2);

    // A snapshot in the previous layout, installed.
    write_previous_layout(
        &store,
        9,
        &[(4, 77, put("nine", "v"), Response::Done)],
        Some(77),
    );
    let mut sm = sm;
    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let other_dir = tempfile::tempdir().unwrap();
    let mut other = open(other_dir.path());
    other
        .install_snapshot(&snap.meta, snap.snapshot)
        .await
        .unwrap();
    let other_store = other.store();
    assert_eq!(previous_layout_keys(&other_store), 0);
    let retry = apply_entries(&other_store, vec![entry(n + 6, 9, 4, put("nine", "v"))]).unwrap();
    assert_eq!(retry[0], replayed(77, Response::Done));
}

/// Ids applied out of order and a jump of two: an id in the window without a record is
/// applied once (its slot held an id that left the window), the slot an id jumped over is
/// emptied, and the records stay the window's.
#[test]
fn ids_out_of_order_and_jumps_keep_the_slots_to_the_window() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let store = sm.store();
    let w = REQUEST_ID_WINDOW;
    let entries: Vec<_> = (1..=w).map(|s| entry(s, 3, s, put("k", "v"))).collect();
    apply_entries(&store, entries).unwrap();
    assert_eq!(records_in(&store), w as usize);
    // W+2 before W+1: seq 1's slot (W+1's) emptied, seq 2's taken by W+2.
    let got = apply_entries(&store, vec![entry(w + 1, 3, w + 2, put("k", "a"))]).unwrap();
    assert_eq!(got[0], Response::Done);
    assert_eq!(records_in(&store), w as usize - 1);
    let got = apply_entries(
        &store,
        vec![
            entry(w + 2, 3, w + 1, put("k", "b")),
            entry(w + 3, 3, w + 1, put("k", "b")),
            entry(w + 4, 3, 2, put("k", "v")),
            entry(w + 5, 3, 3, put("k", "v")),
            entry(w + 6, 3, w + 2, put("k", "a")),
        ],
    )
    .unwrap();
    assert_eq!(got[0], Response::Done);
    assert_eq!(
        got[1],
        Response::Replayed {
            index: w + 2,
            response: Box::new(Response::Done)
        }
    );
    assert!(matches!(got[2], Response::RequestIdRefused(_)), "{got:?}");
    assert_eq!(
        got[3],
        Response::Replayed {
            index: 3,
            response: Box::new(Response::Done)
        }
    );
    assert_eq!(
        got[4],
        Response::Replayed {
            index: w + 1,
            response: Box::new(Response::Done)
        }
    );
    assert_eq!(records_in(&store), w as usize);
}

/// A `Many` under a request id (a client's coalesced request) is applied once as a whole and
/// leaves one record for all its writes, plus one for each write under an id of its own (of
/// its client's too: that record is not taken for an id the `Many`'s jumped over, nor is a new
/// client counted twice); a retry answers every write's first outcome (a write under its own
/// id, sent again in another request, replays its own); other writes under the id are refused.
#[test]
fn a_many_under_a_request_id_is_applied_once_with_one_record() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let inner = |client: u64, seq: u64, request: Request| Request::Once {
        id: RequestId { client, seq },
        request: Box::new(request),
    };
    let delete = Request::Delete {
        key: b"zz".to_vec(),
    };
    let writes = |a: &str| {
        Request::Many(
            vec![put("a", a), inner(3, 2, put("b", "b1")), delete.clone()]
                .into_iter()
                .chain((0..20).map(|i| put(&format!("m{i}"), "v")))
                .collect::<Vec<_>>()
                .into(),
        )
    };
    let plain = |index: u64, request: Request| {
        EntryOf::<TypeConfig>::new_normal(
            LogIdOf::<TypeConfig>::new(
                <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
                index,
            ),
            request,
        )
    };
    let store = sm.store();
    // Client 3 has written under id 1; its coalesced request takes id 3, a write in it id 2.
    // Client 4's first request holds a write under its own id.
    let first_entries = vec![
        entry(1, 3, 1, put("x", "x1")),
        entry(2, 3, 3, writes("a1")),
        entry(
            3,
            4,
            9,
            Request::Many(vec![inner(4, 8, put("y", "y1"))].into()),
        ),
    ];
    let answers = apply_entries(&store, first_entries).unwrap();
    let Response::Many(first) = &answers[1] else {
        panic!("{answers:?}");
    };
    assert_eq!(first.len(), 23);
    assert_eq!(
        &first[..3],
        [Response::Done, Response::Done, Response::Existed(false)]
    );
    assert_eq!(answers[2], Response::Many(vec![Response::Done]));
    let slots = |client: u64| {
        let mut p = SLOT.to_vec();
        p.extend_from_slice(&client.to_be_bytes());
        store.prefix(p).count()
    };
    assert_eq!(slots(3), 3, "ids 1 and 3, and 2 of the write in the Many");
    assert_eq!(slots(4), 2);
    let clients: u64 = decode(&store.get(CLIENTS_KEY).unwrap().unwrap()).unwrap();
    assert_eq!(clients, 2);

    let later = vec![
        // Written again since; the retry writes nothing back.
        plain(4, put("a", "a2")),
        entry(5, 3, 3, writes("a1")),
        // The same id on other writes.
        entry(6, 3, 3, writes("other")),
        // The inner write again, in another request.
        entry(
            7,
            3,
            4,
            Request::Many(vec![inner(3, 2, put("b", "b1"))].into()),
        ),
    ];
    let answers = apply_entries(&store, later).unwrap();
    assert_eq!(
        answers[1],
        Response::Replayed {
            index: 2,
            response: Box::new(Response::Many(first.clone())),
        }
    );
    assert!(
        matches!(answers[2], Response::RequestIdRefused(_)),
        "{answers:?}"
    );
    assert_eq!(
        answers[3],
        Response::Many(vec![Response::Replayed {
            index: 2,
            response: Box::new(Response::Done),
        }])
    );
    let a = sm.get_versioned(b"a").unwrap().unwrap();
    assert_eq!((&a.0[..], a.1), (&b"a2"[..], 4));
    assert_eq!(slots(3), 4);
}

/// The digest of a request is fed its fields as before a `Many` could have one (records
/// written then still match their retries), and tells apart `Many`s whose writes differ only
/// in where one ends and the next begins, or in their order.
#[test]
fn digests_are_unchanged_and_tell_manies_apart() {
    let mut h = crc32fast::Hasher::new();
    let mut len = 0u64;
    for f in [&b"put"[..], b"k", b"value"] {
        h.update(&(f.len() as u64).to_le_bytes());
        h.update(f);
        len += f.len() as u64 + 8;
    }
    assert_eq!(
        digest(&put("k", "value")),
        (u64::from(h.finalize()) << 32) ^ len
    );
    let many = |w: Vec<Request>| Request::Many(w.into());
    let a = many(vec![put("ab", "c"), put("d", "e")]);
    let b = many(vec![put("a", "bc"), put("d", "e")]);
    let c = many(vec![put("d", "e"), put("ab", "c")]);
    let d = many(vec![put("ab", "c")]);
    let all = [digest(&a), digest(&b), digest(&c), digest(&d)];
    for i in 0..all.len() {
        for j in i + 1..all.len() {
            assert_ne!(all[i], all[j], "{i} and {j}");
        }
    }
    assert_eq!(digest(&a), digest(&a.clone()));
}
