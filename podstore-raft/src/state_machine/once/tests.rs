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
