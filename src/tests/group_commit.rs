//! Who writes and syncs a durable write: a lone writer its own group (no hand-off to the flush
//! thread), concurrent writers in shared groups. Counted by the simulator, which records the
//! name of the thread of every fdatasync.

use std::collections::BTreeMap;
use std::thread;

use super::{key, new_sim, observe, open, options};
use crate::Durability;
use crate::io::sim::{CrashOn, SimConfig, Survival};

/// The syncs made by each thread during `work`.
fn syncs_during(sim: &crate::io::sim::Sim, work: impl FnOnce()) -> BTreeMap<String, u64> {
    let before = sim.stats().syncs_by_thread;
    work();
    let mut after = sim.stats().syncs_by_thread;
    for (name, n) in &before {
        *after.get_mut(name).expect("counts only grow") -= n;
    }
    after.retain(|_, n| *n > 0);
    after
}

#[test]
fn a_lone_durable_writer_syncs_its_own_writes() {
    // Buffered I/O: no zero-ahead, so the flush thread never holds the I/O when a put comes.
    let sim = new_sim(SimConfig {
        direct: false,
        ..SimConfig::default()
    });
    let store = open(&sim, options(Durability::Sync)).unwrap();
    store.put(key(1), super::value(0, 10)).unwrap(); // creates the segment
    let syncs = syncs_during(&sim, || {
        thread::scope(|s| {
            thread::Builder::new()
                .name("lone-writer".into())
                .spawn_scoped(s, || {
                    for i in 0..50 {
                        store.put(key(0), super::value(i, 100)).unwrap();
                    }
                })
                .unwrap();
        });
    });
    assert_eq!(
        syncs,
        BTreeMap::from([("lone-writer".to_string(), 50)]),
        "one fdatasync per put, each made by the putting thread"
    );
    // Acknowledged means durable: a power loss that keeps nothing unsynced keeps the last put.
    sim.crash_now();
    drop(store);
    let after = sim.after_crash(Survival::DropAll, 0);
    let store = open(&after, options(Durability::Sync)).unwrap();
    let seen = observe(&store).unwrap();
    assert_eq!(seen[&0], super::Seen::Version(49, 100));
}

#[test]
fn concurrent_durable_writers_stay_durable_whoever_syncs() {
    for direct in [false, true] {
        let sim = new_sim(SimConfig {
            direct,
            ..SimConfig::default()
        });
        let store = open(&sim, options(Durability::Sync)).unwrap();
        thread::scope(|s| {
            for t in 0..6u8 {
                let store = &store;
                s.spawn(move || {
                    for i in 0..40 {
                        store
                            .put(key(t), super::value(i, 200 + t as usize))
                            .unwrap();
                    }
                });
            }
        });
        // Crash at the next sync (nothing more is made durable): every acknowledged put is
        // there.
        sim.crash_at(CrashOn::Sync, 0);
        drop(store);
        let after = sim.after_crash(Survival::DropAll, 1);
        let store = open(&after, options(Durability::Sync)).unwrap();
        let seen = observe(&store).unwrap();
        for t in 0..6u8 {
            assert_eq!(
                seen[&t],
                super::Seen::Version(39, 200 + t as usize),
                "direct {direct}"
            );
        }
    }
}
