//! Atomic batches.

use super::*;

const GROUPS: usize = 6;
const MEMBERS: usize = 4;

fn member_key(group: usize, member: usize) -> usize {
    group * MEMBERS + member
}

/// Runs writers that each write `batches` batches putting one version (their thread and batch
/// number) to all the keys of a group (or deleting all of them), and readers that check every
/// value they read is intact. Returns the contents once everyone is done.
fn write_group_batches(store: &Arc<Store>, writers: usize, batches: usize) -> Contents {
    let writers: Vec<_> = (0..writers)
        .map(|thread| {
            let store = Arc::clone(store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0xBA7C_0000 + thread as u64);
                for counter in 1..=batches {
                    let group = rng.below(GROUPS);
                    let mut batch = Batch::new();
                    let delete = rng.chance(10);
                    for member in 0..MEMBERS {
                        let key = member_key(group, member);
                        if delete {
                            batch.delete(key_name(key));
                        } else {
                            let len = match rng.below(100) {
                                0..90 => rng.in_range(MIN_VALUE_LEN..16 * KIB),
                                _ => rng.in_range(64 * KIB..300 * KIB),
                            };
                            let id = ValueId {
                                key,
                                thread,
                                counter,
                                len,
                            };
                            batch.put(key_name(key), id.bytes());
                        }
                    }
                    store.write(&batch).expect("write batch");
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|reader| {
            let store = Arc::clone(store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0x8EAD_0000 + reader);
                for _ in 0..400 {
                    let key = rng.below(GROUPS * MEMBERS);
                    if let Some(v) = store.get(key_name(key)).expect("get") {
                        decode_value(key, &v).unwrap_or_else(|e| panic!("concurrent get: {e}"));
                    }
                }
            })
        })
        .collect();
    for handle in writers.into_iter().chain(readers) {
        handle.join().expect("thread panicked");
    }
    read_contents(store, GROUPS * MEMBERS, "after the writers")
}

/// Asserts that the keys of every group are all absent or all carry one version.
#[track_caller]
fn assert_groups_atomic(contents: &Contents, what: &str) {
    let ids = decode_contents(contents, what);
    for group in 0..GROUPS {
        let versions: Vec<Option<(usize, usize)>> = (0..MEMBERS)
            .map(|m| {
                ids.get(&member_key(group, m))
                    .map(|id| (id.thread, id.counter))
            })
            .collect();
        assert!(
            versions.iter().all(|v| *v == versions[0]),
            "{what}: group {group} mixes versions (thread, batch) {versions:?}"
        );
    }
}

fn run_group_batches(what: &str, durability: Durability, ending: Ending) {
    let fx = Fixture::new(stress_options(IoMode::Direct, durability).segment_size(1 << 20));
    let store = Arc::new(fx.open());
    let before = write_group_batches(&store, 8, 40);
    assert_groups_atomic(&before, what);
    assert!(!before.is_empty(), "{what}: every group ended deleted");

    let store = reopen(
        &fx,
        Arc::into_inner(store).expect("threads are done"),
        ending,
    );
    let what = format!("{what} after {ending:?} and reopen");
    let after = read_contents(&store, GROUPS * MEMBERS, &what);
    assert_groups_atomic(&after, &what);
    if durability == Durability::Sync {
        // Every batch was durable when it returned.
        assert_same_contents(&after, &before, &what);
    }
    store.close().expect("close");
}

#[test]
fn batches_are_atomic_to_concurrent_readers_after_commit() {
    run_group_batches("sync batches", Durability::Sync, Ending::Close);
}

#[test]
fn sync_batches_survive_a_crash_whole() {
    run_group_batches("sync batches", Durability::Sync, Ending::Crash);
}

/// A crash loses the buffered batches still in the write buffer, possibly one cut in the middle
/// by a buffer boundary: recovery must drop such a batch whole.
#[test]
fn buffered_batches_stay_atomic_when_a_crash_loses_some() {
    run_group_batches("buffered batches", Durability::Buffered, Ending::Crash);
}
