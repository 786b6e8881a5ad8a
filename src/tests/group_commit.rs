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

#[test]
fn buffered_writes_past_the_group_caps_make_no_sync_until_a_durable_one_joins() {
    let sim = new_sim(SimConfig {
        direct: false,
        ..SimConfig::default()
    });
    // Small caps, so that a few writes reach them; a segment large enough for all of them (a
    // seal syncs).
    let opts = options(Durability::Buffered)
        .segment_size(16 << 20)
        .max_group_records(4)
        .max_group_bytes(8 << 10);
    let store = open(&sim, opts).unwrap();
    store.put(key(1), super::value(0, 10)).unwrap(); // creates the segment
    let total = |syncs: BTreeMap<String, u64>| syncs.values().sum::<u64>();
    let buffered = syncs_during(&sim, || {
        for i in 0..40 {
            store
                .put(key((i % 5) as u8), super::value(i, 3000))
                .unwrap();
        }
    });
    assert_eq!(
        total(buffered),
        0,
        "40 buffered puts (15 times the byte cap, 10 times the record cap): nobody waits, no sync"
    );
    // A durable write in a group that is over its caps syncs it at once, buffered bytes and all.
    let durable = syncs_during(&sim, || {
        let mut batch = crate::Batch::new();
        batch
            .put(key(7), super::value(7, 100))
            .durability(Durability::Sync);
        store.write(&batch).unwrap();
    });
    assert_eq!(total(durable), 1, "the durable write's group: one sync");
    // Everything before it is durable with it: a power loss that keeps nothing unsynced keeps
    // the buffered puts too.
    sim.crash_now();
    drop(store);
    let after = sim.after_crash(Survival::DropAll, 0);
    let store = open(&after, options(Durability::Buffered)).unwrap();
    let seen = observe(&store).unwrap();
    for k in 0..5u8 {
        assert_eq!(
            seen[&k],
            super::Seen::Version(35 + u32::from(k), 3000),
            "key {k}"
        );
    }
    assert_eq!(seen[&7], super::Seen::Version(7, 100));
}

#[test]
fn a_durable_put_survives_a_power_loss_right_after_it_returns_whatever_its_size() {
    // A group within the buffer is written durably in one call (a write and a sync of that
    // write alone, in the simulator); one larger than the buffer hands full buffers off
    // unsynced first, and those must be synced too. Every size, after every put, under every
    // survival mode: the puts acknowledged so far are all there.
    for direct in [false, true] {
        let sim = new_sim(SimConfig {
            direct,
            ..SimConfig::default()
        });
        // 64 KiB buffers (the smallest), values up to 150 KiB in the log (not in blob files).
        let opts = || options(Durability::Sync).large_value_threshold(256 << 10);
        let store = open(&sim, opts()).unwrap();
        let mut model = BTreeMap::new();
        for (i, len) in [100, 150_000, 5000, 90_000, 200, 70_000]
            .into_iter()
            .enumerate()
        {
            let k = (i % 3) as u8;
            store.put(key(k), super::value(i as u32, len)).unwrap();
            model.insert(k, (i as u32, len));
            for (m, mode) in Survival::ALL.into_iter().enumerate() {
                let after = sim.after_crash(mode, (i * 8 + m) as u64);
                let reopened = open(&after, opts()).unwrap();
                assert_eq!(
                    observe(&reopened).unwrap(),
                    super::seen_state(&model),
                    "direct {direct}, put {i} of {len} bytes, {mode:?}"
                );
            }
        }
    }
}
