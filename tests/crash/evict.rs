//! A crash at each step of an eviction (the size cap): failpoints abort the process there,
//! in a child that writes far past its cap with second chances on.

use std::path::Path;

use podstore::{Durability, IoMode, Options, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::parallel::for_each_parallel;
use crate::common::store::{MODES, mode_name, quiet};
use crate::kill9::op_value;
use crate::support::options;

const SEGMENT: u64 = 1 << 20;
const CAP: u64 = 4 * SEGMENT;
/// Keys written, in order; key `i` is written again (version 2) right after key `i + 7`.
const KEYS: u64 = 600;

fn ev_options(mode: IoMode) -> Options {
    options(mode, Durability::Sync)
        .segment_size(SEGMENT)
        .size_cap(Some(CAP))
        .second_chance(true)
        .large_value_threshold(96 << 10)
        .background_compaction(false)
}

fn ev_key(i: u64) -> String {
    format!("ev-{i}")
}

/// Every fifth value gets a blob file of its own.
fn ev_len(i: u64) -> usize {
    if i.is_multiple_of(5) {
        (100 << 10) + i as usize
    } else {
        (20 << 10) + (i as usize * 37) % 4096
    }
}

/// The writes of the workload, in order: (key number, version).
fn ev_writes() -> Vec<(u64, u64)> {
    let mut w = Vec::new();
    for i in 0..KEYS {
        w.push((i, 1));
        if i >= 7 && (i - 7).is_multiple_of(3) {
            w.push((i - 7, 2));
        }
    }
    w
}

/// Arms failpoint `name` (to fire after `skip` hits), then writes, reading every tenth key
/// back (so that second chances are given), and says which write each acknowledged put was.
pub fn evict_child(dir: &Path, name: &str, skip: u64, mode: IoMode) {
    let store = Store::open_with(dir, ev_options(mode)).unwrap();
    podstore::arm_failpoint(name, skip);
    for (n, (i, version)) in ev_writes().into_iter().enumerate() {
        let key = ev_key(i);
        store
            .put(key.as_bytes(), op_value(key.as_bytes(), version, ev_len(i)))
            .unwrap();
        emit(&format!("acked {n}"));
        if i.is_multiple_of(10) {
            store.get(&key).unwrap();
        }
    }
    emit("survived");
    store.close().unwrap();
}

/// For each eviction failpoint, at its first and a later hit: the child aborts there; the
/// store it leaves opens (a dropped file is not damage), serves each key's last acknowledged
/// value or nothing (never version 1 after version 2 was acknowledged), serves the writes of
/// the last segment's worth acknowledged (no eviction could have taken them), and stays
/// within the cap.
#[test]
fn crash_at_every_step_of_an_eviction() {
    let mut cases = Vec::new();
    for mode in MODES {
        for &name in podstore::EVICTION_FAILPOINTS {
            for skip in [0, 3] {
                cases.push((mode, name, skip));
            }
        }
    }
    for_each_parallel(&cases, |&(mode, name, skip)| {
        let ctx = format!("{} failpoint {name} after {skip} hits", mode_name(mode));
        let dir = TempDir::new().unwrap();
        let mut child = ChildProc::spawn(
            dir.path(),
            &format!("evict {name} {skip} {}", mode_name(mode)),
        );
        let mut acked = 0usize;
        while let Some(msg) = child.next_message() {
            assert_ne!(msg, "survived", "{ctx}: the failpoint never fired");
            acked = msg
                .strip_prefix("acked ")
                .unwrap()
                .parse::<usize>()
                .unwrap()
                + 1;
        }
        let status = child.child.wait().unwrap();
        assert!(!status.success(), "{ctx}: child exited cleanly: {status:?}");
        let writes = &ev_writes()[..acked];
        let store = Store::open_with(dir.path(), quiet(ev_options(mode)))
            .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let mut last = std::collections::HashMap::new();
        for (n, &(i, version)) in writes.iter().enumerate() {
            last.insert(i, (version, n));
        }
        // The writes of the last segment's worth of bytes acknowledged.
        let mut recent = 0u64;
        let mut must_have = std::collections::HashSet::new();
        for &(i, _) in writes.iter().rev() {
            recent += ev_len(i) as u64;
            if recent > SEGMENT {
                break;
            }
            must_have.insert(i);
        }
        // The put in flight when the child aborted (the failpoint is in the eviction its
        // write started, after the write itself): it may be there too.
        let in_flight = ev_writes().get(acked).copied();
        for i in 0..KEYS {
            let key = ev_key(i);
            let got = store.get(&key).unwrap();
            let ok =
                |version| got.as_deref() == Some(&op_value(key.as_bytes(), version, ev_len(i))[..]);
            match (&got, last.get(&i)) {
                (None, _) => assert!(!must_have.contains(&i), "{ctx}: {key}, written last, lost"),
                (Some(_), Some(&(version, _))) if ok(version) => {}
                (Some(_), _) => assert!(
                    in_flight.is_some_and(|(k, version)| k == i && ok(version)),
                    "{ctx}: {key}: not its last acknowledged value"
                ),
            }
        }
        assert!(store.verify().unwrap().is_clean(), "{ctx}: verify");
        store.close().unwrap();
        // The next open evicts as the cap says, and its files stay within it.
        let store = Store::open_with(dir.path(), quiet(ev_options(mode))).unwrap();
        store.put("after", b"x").unwrap();
        let s = store.stats();
        assert!(s.disk_bytes <= CAP + SEGMENT, "{ctx}: {s:?}");
        store.close().unwrap();
    });
}
