//! Power loss at every mutating I/O of a workload whose size cap evicts again and again
//! (log segments and blob files, beside a compaction): the open after the crash never refuses
//! the store (a dropped file is never taken for damage), never serves an older or deleted
//! value, and serves every value the store served both before and after the operation the
//! crash cut (one no eviction in flight was dropping: acknowledged and un-evicted).
//!
//! The workload is deterministic (no background thread, the simulator's file sizes), so a run
//! without a crash says what the store serves after each operation. By default a fifth of
//! the crash points run, each in one survival mode (both rotating with the sample's seed);
//! under `PODSTORE_TEST_LONG` every mode at every point.

use std::collections::BTreeMap;

use super::{KEYS, LARGE, key, new_sim, open, options, value};
use crate::io::sim::{CrashOn, Sim, SimConfig, Survival};
use crate::{Durability, Options, Store};

/// What the store serves: each key's value, if it has one.
type Served = BTreeMap<u8, Vec<u8>>;

#[derive(Debug, Clone, Copy)]
enum Op {
    Put(u8, usize),
    Delete(u8),
    Compact,
}

fn opts() -> Options {
    // 1 MiB segments: eviction keeps the files other than the active segment within 1 MiB.
    // Second chances on: every value is read after every operation, so eviction appends
    // again the live values of the files it drops (steps of their own to crash in).
    options(Durability::Sync)
        .size_cap(Some(2 << 20))
        .second_chance(true)
}

fn workload() -> Vec<Op> {
    let mut ops = Vec::new();
    for i in 0..36usize {
        let k = (i * 5 % KEYS as usize) as u8;
        ops.push(match i % 9 {
            // Blob files of half a MiB: the live set passes what the cap keeps, so eviction
            // drops live values (and, as every value is read, gives them second chances).
            0 | 4 => Op::Put(k, LARGE * 10 + i * 100),
            7 => Op::Delete(k),
            8 if i == 17 => Op::Compact,
            _ => Op::Put(k, LARGE - 8_000 + i * 100),
        });
    }
    ops
}

fn served(store: &Store) -> crate::Result<Served> {
    let mut all = Served::new();
    for k in 0..KEYS {
        if let Some(v) = store.get(key(k))? {
            all.insert(k, v);
        }
    }
    Ok(all)
}

/// Runs the workload until the simulator crashes; returns, for each operation run, the newest
/// acknowledged value of each key after it (`None`: deleted or never written), what the store
/// served after it (without a crash), and the index of the operation the crash cut.
#[allow(clippy::type_complexity)]
fn run(
    sim: &Sim,
) -> (
    Vec<BTreeMap<u8, Option<Vec<u8>>>>,
    Vec<Served>,
    Option<usize>,
) {
    let store = match open(sim, opts()) {
        Ok(store) => store,
        // The crash came in the first open (it writes the catalog): as if in the first
        // operation, which had not started.
        Err(_) if sim.crashed() => return (Vec::new(), Vec::new(), Some(0)),
        Err(e) => panic!("open: {e}"),
    };
    let mut latest: BTreeMap<u8, Option<Vec<u8>>> = BTreeMap::new();
    let (mut models, mut serves) = (Vec::new(), Vec::new());
    for (i, op) in workload().into_iter().enumerate() {
        let ok = match op {
            Op::Put(k, len) => {
                let v = value(i as u32 + 1, len);
                let ok = store.put(key(k), &v).is_ok();
                if ok {
                    latest.insert(k, Some(v));
                }
                ok
            }
            Op::Delete(k) => {
                let ok = store.delete(key(k)).is_ok();
                if ok {
                    latest.insert(k, None);
                }
                ok
            }
            Op::Compact => store.compact().is_ok(),
        };
        // An eviction's failure is logged, not returned by the put it follows: the simulator
        // says whether the crash came.
        if sim.crashed() || !ok {
            assert!(sim.crashed(), "op {i} failed without a crash");
            return (models, serves, Some(i));
        }
        // A crash in the flush thread (a seal the step submitted) can come during the reads.
        let now = match served(&store) {
            Ok(now) => now,
            Err(_) if sim.crashed() => return (models, serves, Some(i)),
            Err(e) => panic!("op {i}: get: {e}"),
        };
        models.push(latest.clone());
        serves.push(now);
    }
    let stats = store.stats();
    assert!(stats.evicted_files >= 4, "{stats:?}");
    assert!(stats.second_chances >= 2, "{stats:?}");
    let closed = store.close();
    if sim.crashed() {
        // Cut in the close: as if in an operation after the last, which writes nothing.
        return (models, serves, Some(workload().len()));
    }
    closed.unwrap();
    (models, serves, None)
}

#[test]
fn a_power_loss_at_every_io_of_an_eviction_loses_nothing_un_evicted() {
    let counted = new_sim(SimConfig::default());
    counted.crash_at(CrashOn::Mutation, u64::MAX);
    let (models, serves, cut) = run(&counted);
    assert!(cut.is_none());
    let mutations = counted.mutating_calls();
    let sample = super::long::Sample::new("a_power_loss_at_every_io_of_an_eviction");
    let long = super::long::long();
    let modes = Survival::ALL.len() as u64;
    let mut runs = 0;
    for n in 1..=mutations {
        for (m, &survival) in Survival::ALL.iter().enumerate() {
            // By default a fifth of the points (which ones varies with the seed), in one
            // mode each.
            if !long && (sample.pick(n, modes) != m as u64 || !sample.picks(n, 5)) {
                continue;
            }
            let sim = new_sim(SimConfig::default());
            sim.crash_at(CrashOn::Mutation, n);
            let (_, _, cut) = run(&sim);
            // A run's count of mutating calls varies by a few (the flush thread's groups): a
            // point past this run's end crashes nothing.
            let Some(i) = cut else {
                assert!(n + 40 > mutations, "mutation {n} of {mutations}: no crash");
                continue;
            };
            let survivor = sim.after_crash(survival, n);
            let store = open(&survivor, opts()).unwrap_or_else(|e| {
                panic!("mutation {n} (op {i}), {survival:?}: open failed: {e}")
            });
            let got = served(&store).unwrap();
            let none = BTreeMap::new();
            let before = if i == 0 { &none } else { &models[i - 1] };
            let after = models.get(i).unwrap_or(before);
            let touched = match workload().get(i) {
                Some(Op::Put(k, _) | Op::Delete(k)) => Some(*k),
                Some(Op::Compact) | None => None,
            };
            for (k, v) in &got {
                let b = before.get(k).cloned().flatten();
                let a = after.get(k).cloned().flatten();
                assert!(
                    Some(v) == b.as_ref() || (Some(*k) == touched && Some(v) == a.as_ref()),
                    "mutation {n} (op {i}), {survival:?}: key {k} serves a value neither \
                     acknowledged last nor being written"
                );
            }
            // Served before the cut operation and after it (in the run without a crash), and not
            // written by it: no eviction took it, so the crash must not have.
            let served_before = if i == 0 {
                BTreeMap::new()
            } else {
                serves[i - 1].clone()
            };
            let served_after = serves.get(i).unwrap_or(&served_before);
            for (k, v) in &served_before {
                if Some(*k) != touched && served_after.get(k) == Some(v) {
                    assert_eq!(
                        got.get(k),
                        Some(v),
                        "mutation {n} (op {i}), {survival:?}: key {k}, un-evicted, lost"
                    );
                }
            }
            store.put(key(0), b"after").unwrap();
            store.close().unwrap();
            runs += 1;
        }
    }
    println!("eviction crash points: {mutations} mutations x {runs} runs");
}
