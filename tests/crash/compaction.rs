//! A crash at each step of the compaction protocol: failpoints abort the process there.

use std::path::Path;

use podstore::{Durability, IoMode, Options, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::parallel::for_each_parallel;
use crate::common::store::{MODES, mode_name, quiet};
use crate::kill9::{KeyState, LARGE_LEN, LARGE_THRESHOLD, assert_key_state, op_value};
use crate::support::options;

/// Keys of the failpoint workload.
const FP_KEYS: u64 = 240;

/// The value of failpoint-workload key `i` after the workload: `Some((version, len))`, or `None`
/// for a deleted key. Keys are written at version 1; every third is overwritten at version 2,
/// every third deleted; every tenth value is large (a blob file), so that overwrites and
/// deletes leave dead blob files as well as dead log records.
fn fp_final(i: u64) -> KeyState {
    let len = fp_len(i, 2);
    match i % 3 {
        0 => Some((2, len)),
        1 => None,
        _ => Some((1, fp_len(i, 1))),
    }
}

fn fp_key(i: u64) -> String {
    format!("fp-{i}")
}

fn fp_len(i: u64, version: u64) -> usize {
    if i.is_multiple_of(10) {
        (LARGE_LEN.0 + i * 97) as usize
    } else {
        ((i * 131 + version * 7919) % (12 << 10)) as usize
    }
}

fn fp_options(mode: IoMode) -> Options {
    options(mode, Durability::Sync)
        .large_value_threshold(LARGE_THRESHOLD)
        .compaction_threshold(0.25)
        .background_compaction(false)
}

/// Writes the failpoint workload, arms failpoint `name` (to fire after `skip` hits) and
/// compacts; says "survived" if the compaction returns.
pub fn failpoint_child(dir: &Path, name: &str, skip: u64, mode: IoMode) {
    let store = Store::open_with(dir, fp_options(mode)).unwrap();
    for i in 0..FP_KEYS {
        let key = fp_key(i);
        store
            .put(key.as_bytes(), op_value(key.as_bytes(), 1, fp_len(i, 1)))
            .unwrap();
    }
    for i in 0..FP_KEYS {
        let key = fp_key(i);
        match fp_final(i) {
            Some((2, len)) => {
                store
                    .put(key.as_bytes(), op_value(key.as_bytes(), 2, len))
                    .unwrap();
            }
            None => assert!(store.delete(key.as_bytes()).unwrap()),
            Some(_) => {}
        }
    }
    podstore::arm_failpoint(name, skip);
    let report = store.compact().unwrap();
    emit(&format!("survived {report:?}"));
    store.close().unwrap();
}

fn fp_verify(store: &Store, ctx: &str) {
    for i in 0..FP_KEYS {
        assert_key_state(store, &fp_key(i), fp_final(i), ctx);
    }
    assert_eq!(
        store.len() as u64,
        (0..FP_KEYS).filter(|&i| fp_final(i).is_some()).count() as u64,
        "{ctx}: live keys"
    );
}

/// For every compaction failpoint, for its first and a later hit: the child aborts there; the
/// store it leaves opens with every value intact and no deleted key back, compacts again, and
/// still holds after a further reopen.
#[test]
fn crash_at_every_step_of_compaction() {
    let mut cases = Vec::new();
    for mode in MODES {
        for &name in podstore::COMPACTION_FAILPOINTS {
            for skip in [0, 1] {
                cases.push((mode, name, skip));
            }
        }
    }
    // Each case has its own directory and child: independent, and bound by the children's
    // syncs, so they run a few at a time.
    for_each_parallel(&cases, |&(mode, name, skip)| {
        let ctx = format!("{} failpoint {name} after {skip} hits", mode_name(mode));
        let dir = TempDir::new().unwrap();
        let mut child = ChildProc::spawn(
            dir.path(),
            &format!("failpoint {name} {skip} {}", mode_name(mode)),
        );
        if let Some(msg) = child.next_message() {
            panic!("{ctx}: the failpoint never fired: {msg}");
        }
        let status = child.child.wait().unwrap();
        assert!(!status.success(), "{ctx}: child exited cleanly: {status:?}");
        let store = Store::open_with(dir.path(), quiet(fp_options(mode)))
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        fp_verify(&store, &format!("{ctx}, reopened"));
        store.compact().unwrap();
        fp_verify(&store, &format!("{ctx}, compacted again"));
        store.close().unwrap();
        let store = Store::open_with(dir.path(), quiet(fp_options(mode))).unwrap();
        fp_verify(&store, &format!("{ctx}, reopened again"));
        let stats = store.stats();
        assert!(
            stats.disk_bytes < 2 * stats.live_bytes + (2 << 20),
            "{ctx}: space not given back: {stats:?}"
        );
    });
}
