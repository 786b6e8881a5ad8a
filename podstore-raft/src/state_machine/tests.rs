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
    assert_eq!(sm.get_cached(b"a").unwrap(), Some(b"a at 1".to_vec()));
    apply(&mut sm, vec![put(2, "a")]).await;
    // The new value or nothing (then `get` reads), never the old one.
    let cached = sm.get_cached(b"a").unwrap();
    assert!(
        cached.is_none() || cached == Some(b"a at 2".to_vec()),
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
