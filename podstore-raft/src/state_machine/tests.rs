//! A snapshot install stopped after each of its steps (as a crash would stop it) leaves, once
//! the state machine is reopened from its directory, the old state or the new one, whole; and
//! the source snapshot, another node's, unchanged. And in-place reads from the read cache;
//! chunks applied on the task or on a blocking thread.

use std::collections::BTreeSet;

use openraft::alias::{EntryOf, LogIdOf};
use openraft::entry::RaftEntry;
use openraft::vote::RaftLeaderIdExt;
use openraft::{Membership, RaftTypeConfig};

use super::*;

fn log_id(index: u64) -> LogIdOf<TypeConfig> {
    LogIdOf::<TypeConfig>::new(
        <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
        index,
    )
}

fn put(index: u64, key: &str) -> EntryOf<TypeConfig> {
    EntryOf::<TypeConfig>::new_normal(
        log_id(index),
        Request::Put {
            key: key.as_bytes().to_vec(),
            value: format!("{key} at {index}").into_bytes(),
        },
    )
}

async fn apply(sm: &mut StateMachine, entries: Vec<EntryOf<TypeConfig>>) {
    let items = entries.into_iter().map(|e| Ok((e, None)));
    sm.apply(futures::stream::iter(items)).await.unwrap();
}

fn open(dir: &Path) -> StateMachine {
    StateMachine::open(dir.join("sm"), dir.join("snapshots")).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_stopped_after_any_step_leaves_old_or_new_state_whole() {
    // The leader's snapshot: a membership and keys new/0..new/19, applied up to 21.
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    let membership = Membership::new_with_defaults(vec![BTreeSet::from([1u64])], []);
    let mut entries = vec![EntryOf::<TypeConfig>::new_membership(log_id(1), membership)];
    entries.extend((0..20).map(|i| put(i + 2, &format!("new/{i}"))));
    apply(&mut leader, entries).await;
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(21)));
    let source_files: Vec<_> = fs::read_dir(snap.snapshot.data())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), fs::read(e.path()).unwrap())
        })
        .collect();

    for stop in Step::ALL {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut sm = open(dir.path());
            apply(&mut sm, vec![put(1, "old"), put(2, "old2")]).await;
            sm.get_snapshot_builder().await; // (no snapshot of its own needed)
            let meta = snap.meta.clone();
            let src = snap.snapshot.clone();
            let sm2 = sm.clone();
            let r = tokio::task::spawn_blocking(move || {
                sm2.install_steps(&meta, &src, &mut |step| {
                    if step == stop {
                        Err(io::Error::other("crash"))
                    } else {
                        Ok(())
                    }
                })
            })
            .await
            .unwrap();
            assert!(r.is_err(), "stopped after {stop:?}");
        }
        // "Restart": reopen from the directory.
        let sm = open(dir.path());
        let applied = sm.applied_index().unwrap();
        if stop < Step::Committed {
            assert_eq!(applied, Some(2), "stopped after {stop:?}: the old state");
            assert!(sm.get(b"old").unwrap().is_some());
            assert!(sm.get(b"new/0").unwrap().is_none());
        } else {
            assert_eq!(applied, Some(21), "stopped after {stop:?}: the new state");
            assert!(sm.get(b"old").unwrap().is_none());
            for i in 0..20 {
                let key = format!("new/{i}");
                assert_eq!(
                    sm.get(key.as_bytes()).unwrap(),
                    Some(format!("{key} at {}", i + 2).into_bytes())
                );
            }
        }
        // Only the live generation is left (open removes the others).
        let gens: Vec<_> = fs::read_dir(dir.path().join("sm"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("sm-"))
            .collect();
        assert_eq!(gens.len(), 1, "stopped after {stop:?}: {gens:?}");
    }

    // The leader's snapshot is as it was: the installs linked or copied, never moved or changed.
    let after: Vec<_> = fs::read_dir(snap.snapshot.data())
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name(), fs::read(e.path()).unwrap())
        })
        .collect();
    assert_eq!(after, source_files);
    assert_eq!(snap.snapshot.meta().unwrap(), snap.meta);
}

/// `get_cached` answers only what the read cache holds, and never an overwritten value: the
/// in-place read `Node::get` serves before it hands a miss to a blocking thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_cached_answers_from_memory_and_follows_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open(dir.path());
    apply(&mut sm, vec![put(1, "a")]).await;
    // Read once: kept (a value written is kept on write too; either way it is in memory now).
    assert_eq!(sm.get(b"a").unwrap(), Some(b"a at 1".to_vec()));
    let cached = |sm: &StateMachine| {
        let c = sm.get_cached(b"a").unwrap();
        c.map(|(v, version)| (v.to_vec(), version))
    };
    assert_eq!(cached(&sm), Some((b"a at 1".to_vec(), 1)));
    apply(&mut sm, vec![put(2, "a")]).await;
    // The new value or nothing (then `get` reads), never the old one.
    let cached = cached(&sm);
    assert!(
        cached.is_none() || cached == Some((b"a at 2".to_vec(), 2)),
        "{cached:?}"
    );
    assert_eq!(sm.get(b"a").unwrap(), Some(b"a at 2".to_vec()));
    assert_eq!(sm.get_cached(b"never").unwrap(), None);
    assert!(
        sm.get_cached(b"").is_err(),
        "an empty key is refused, as by get"
    );
}

/// Chunks that only write and are small are applied on the state machine's task, the others
/// (a delete or put_if_absent looks its key up; large values) on a blocking thread; either way
/// the data and the applied id are the same, on a current-thread runtime too. The first chunk
/// after open always goes to a blocking thread (it creates the store's active segment).
#[tokio::test]
async fn small_writes_apply_inline_and_reads_or_large_values_on_a_blocking_thread() {
    let item = |e: EntryOf<TypeConfig>| (e, None);
    let big = EntryOf::<TypeConfig>::new_normal(
        log_id(3),
        Request::Put {
            key: b"big".to_vec(),
            value: vec![5u8; INLINE_BYTES + 1],
        },
    );
    let delete =
        EntryOf::<TypeConfig>::new_normal(log_id(4), Request::Delete { key: b"a".to_vec() });
    let if_absent = EntryOf::<TypeConfig>::new_normal(
        log_id(5),
        Request::PutIfAbsent {
            key: b"b".to_vec(),
            value: b"not written".to_vec(),
        },
    );
    assert!(applies_inline(&[item(put(1, "a")), item(put(2, "b"))]));
    assert!(!applies_inline(&[item(put(1, "a")), item(big.clone())]));
    assert!(!applies_inline(&[item(delete.clone())]));
    assert!(!applies_inline(&[item(if_absent.clone())]));

    let dir = tempfile::tempdir().unwrap();
    let mut sm = open(dir.path());
    // The first chunk on a blocking thread (it creates the store's segment), the next inline.
    assert!(!sm.shared.written.load(Ordering::Relaxed));
    apply(&mut sm, vec![put(1, "a")]).await;
    assert!(sm.shared.written.load(Ordering::Relaxed));
    apply(&mut sm, vec![put(2, "b")]).await;
    apply(&mut sm, vec![big]).await;
    apply(&mut sm, vec![delete, if_absent]).await;
    assert_eq!(sm.get(b"a").unwrap(), None);
    assert_eq!(sm.get(b"b").unwrap(), Some(b"b at 2".to_vec()));
    assert_eq!(sm.value_len(b"big").unwrap(), Some(INLINE_BYTES as u64 + 1));
    assert_eq!(sm.applied_index().unwrap(), Some(5));
    drop(sm);
    // Reopened: the same (closed cleanly, so flushed).
    let sm = open(dir.path());
    assert!(!sm.shared.written.load(Ordering::Relaxed));
    assert_eq!(sm.get(b"b").unwrap(), Some(b"b at 2".to_vec()));
    assert_eq!(sm.applied_index().unwrap(), Some(5));
}

fn normal(index: u64, request: Request) -> EntryOf<TypeConfig> {
    EntryOf::<TypeConfig>::new_normal(log_id(index), request)
}

/// Applies `entries` as one chunk and returns what each answered.
async fn answers(sm: &mut StateMachine, entries: Vec<EntryOf<TypeConfig>>) -> Vec<Response> {
    let store = sm.store();
    tokio::task::spawn_blocking(move || apply_entries(&store, entries).unwrap())
        .await
        .unwrap()
}

/// A value's version is the index of the entry that wrote it; conditional writes compare it,
/// in one chunk (against the chunk's own earlier writes) as across chunks, and a failed one
/// writes nothing and names the current version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_writes_compare_the_log_index_that_wrote_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open(dir.path());
    let put_if = |i, key: &str, value: &str, expect| {
        let (key, value) = (key.as_bytes().to_vec(), value.as_bytes().to_vec());
        normal(i, Request::PutIf { key, value, expect })
    };
    let delete_if = |i, key: &str, version| {
        let key = key.as_bytes().to_vec();
        normal(i, Request::DeleteIf { key, version })
    };
    let first = answers(
        &mut sm,
        vec![
            put(1, "a"),
            put_if(2, "a", "stale", Expect::Version(7)),
            put_if(3, "a", "second", Expect::Version(1)),
            put_if(4, "a", "not new", Expect::Absent),
            put_if(5, "b", "new", Expect::Absent),
            put_if(6, "c", "none yet", Expect::Present),
            delete_if(7, "b", 4),
        ],
    )
    .await;
    let failed = |current| Response::ConditionFailed { current };
    assert_eq!(
        first,
        [
            Response::Done,
            failed(Some(1)),
            Response::Done,
            failed(Some(3)),
            Response::Done,
            failed(None),
            failed(Some(5)),
        ]
    );
    let read = |sm: &StateMachine, key: &str| {
        let v = sm.get_versioned(key.as_bytes()).unwrap();
        v.map(|(v, version)| (String::from_utf8(v.to_vec()).unwrap(), version))
    };
    assert_eq!(read(&sm, "a"), Some(("second".into(), 3)));
    assert_eq!(read(&sm, "b"), Some(("new".into(), 5)));
    assert_eq!(read(&sm, "c"), None);
    // A later chunk reads the versions from the store.
    let second = answers(
        &mut sm,
        vec![
            delete_if(8, "b", 5),
            delete_if(9, "b", 5),
            put_if(10, "a", "third", Expect::Present),
        ],
    )
    .await;
    assert_eq!(
        second,
        [Response::Existed(true), failed(None), Response::Done]
    );
    assert_eq!(read(&sm, "b"), None);
    assert_eq!(read(&sm, "a"), Some(("third".into(), 10)));
    // Ranges and lengths are of the value, not of its stored header.
    assert_eq!(sm.value_len(b"a").unwrap(), Some(5));
    match sm.read(b"a", Some((1, Some(99)))).unwrap() {
        Read::Value(v) => {
            assert_eq!(
                (&v.bytes[..], v.start, v.len, v.version),
                (&b"hird"[..], 1, 5, 10)
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        sm.read(b"a", Some((6, None))).unwrap(),
        Read::OutOfRange { len: 5 }
    );
    assert_eq!(
        sm.read(b"a", Some((3, Some(2)))).unwrap(),
        Read::OutOfRange { len: 5 }
    );
    assert_eq!(sm.read(b"zz", Some((0, None))).unwrap(), Read::Missing);
}

/// A listing gives the user's keys (not the store's metadata), in order, a page at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_pages_through_a_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let mut sm = open(dir.path());
    let keys = ["p/1", "p/2", "p/3", "pz", "q"];
    let entries = keys.iter().enumerate().map(|(i, k)| put(i as u64 + 1, k));
    apply(&mut sm, entries.collect()).await;
    let names = |l: &[Listed]| -> Vec<String> {
        l.iter()
            .map(|k| String::from_utf8(k.key.clone()).unwrap())
            .collect()
    };
    let (page, more) = sm.list(b"p/", None, 2).unwrap();
    assert_eq!(
        (names(&page), more),
        (vec!["p/1".into(), "p/2".into()], true)
    );
    assert_eq!(page[0].len, "p/1 at 1".len() as u64);
    let (page, more) = sm.list(b"p/", Some(b"p/2"), 2).unwrap();
    assert_eq!((names(&page), more), (vec!["p/3".to_string()], false));
    let (all, more) = sm.list(b"", None, 100).unwrap();
    assert_eq!(
        (names(&all), more),
        (keys.map(String::from).to_vec(), false)
    );
    // A token before the prefix starts at it; one past it lists nothing.
    assert_eq!(names(&sm.list(b"p/", Some(b"a"), 9).unwrap().0).len(), 3);
    assert!(sm.list(b"p/", Some(b"pa"), 9).unwrap().0.is_empty());
}

/// A state machine written by an earlier build (values without their version header) is
/// refused, not misread.
#[test]
fn a_state_machine_without_the_value_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path()));
    let store_dir = dir.path().join("sm").join("sm-0");
    let store = Store::open(&store_dir).unwrap();
    store.delete(FORMAT_KEY).unwrap();
    store.put(APPLIED, encode(&log_id(3)).unwrap()).unwrap();
    store.put(b"dold", b"no header").unwrap();
    store.close().unwrap();
    let e = StateMachine::open(dir.path().join("sm"), dir.path().join("snapshots")).unwrap_err();
    assert!(e.to_string().contains("earlier podstore-raft"), "{e}");
}

/// A chunk's batch is sized for its small writes (each with room for its version header and
/// request-id record), while a long value counts for at most `ROOM_PER_WRITE`: it is kept in a
/// buffer of its own, and reserving its size again would double a node's memory for it.
#[test]
fn a_chunks_batch_has_room_for_small_writes_not_for_long_values() {
    let small = || Request::Put {
        key: b"k".to_vec(),
        value: vec![1; 1000],
    };
    let many = Request::Many((0..50).map(|_| small()).collect::<Vec<_>>().into());
    let (ops, bytes) = values::room_for(&[normal(1, many), normal(2, small())]);
    assert_eq!(ops, 2 + 2 * 51);
    assert!(bytes >= 51 * (1001 + 1 + HEADER_LEN), "{bytes}");
    let long = Request::Put {
        key: b"k".to_vec(),
        value: vec![1; 8 << 20],
    };
    let (ops, bytes) = values::room_for(&[normal(3, long), put(4, "a")]);
    assert_eq!(ops, 2 + 2 * 2);
    assert!(bytes <= 2 * (values::ROOM_PER_WRITE + 128), "{bytes}");
}
