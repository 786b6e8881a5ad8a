//! Power loss in a store that holds values that expire (issue 39): a fixed workload of puts with
//! and without expiries (in the log and in blob files, alone and in a batch), overwrites of
//! lasting values by expiring ones, a clock jump past the expiries, and compactions that drop
//! the expired records (leaving tombstones where older records remain), crashed at every
//! mutating I/O (one survival mode per point by default, every mode under
//! `PODSTORE_TEST_LONG`). After each crash the store opens (a crash is not damage) and holds
//! exactly the state after the acknowledged steps (or one more: the step in flight), judged at
//! the clock of the moment: an expired value is absent, and an older value it overwrote never
//! comes back.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{LARGE, key, new_sim, observe, open, options, seen_state, value};
use crate::expiry::MockClock;
use crate::io::sim::{CrashOn, Sim, SimConfig, Survival};
use crate::{Batch, Durability, Options, PutOptions, Store};

const HOUR: Duration = Duration::from_secs(3600);

/// A step of the workload.
#[derive(Debug, Clone)]
enum Step {
    /// Put key, version, length; with `true`, expiring in an hour.
    Put(u8, u32, usize, bool),
    /// An atomic batch of such puts.
    Batch(Vec<(u8, u32, usize, bool)>),
    Delete(u8),
    Seal,
    /// The clock jumps two hours: every expiring value written before has expired.
    Advance,
    /// `compact_with` at this threshold: 1.0 takes only the segments whose every record is
    /// dead (or expired), so older records of their keys are left in others.
    Compact(f64),
}

fn workload() -> Vec<Step> {
    use Step::*;
    vec![
        Put(0, 1, 300, false),
        Put(7, 11, 1000, false), // keeps this segment from being all dead
        Put(1, 2, LARGE + 10, false),
        Put(2, 3, 5_000, true),
        Put(3, 4, LARGE + 100, true),
        Seal,
        // Lasting values overwritten by expiring ones: once those expire, the key has no value.
        Put(0, 5, 200, true),
        Put(1, 6, LARGE + 20, true),
        Seal,
        Batch(vec![(4, 7, 900, true), (5, 8, 700, false)]),
        Delete(6),
        Advance,
        // Drops the expired overwrite of key 0 while the first segment (with key 0's old
        // value) stays: a tombstone must stand in for it.
        Compact(1.0),
        Put(6, 9, 400, false),
        Put(2, 10, 100, true),
        Compact(0.05),
    ]
}

/// The options of the test store, on `clock`.
fn opts(clock: &MockClock) -> Options {
    options(Durability::Sync).testing_clock(clock.clone())
}

/// What the store must hold after the first `done` steps, at a clock that has jumped if
/// `advanced`: per key, its version and length.
fn expected(steps: &[Step], done: usize, advanced: bool) -> BTreeMap<u8, (u32, usize)> {
    let mut state: BTreeMap<u8, (u32, usize, bool)> = BTreeMap::new();
    for s in &steps[..done] {
        match s {
            Step::Put(k, v, len, exp) => {
                state.insert(*k, (*v, *len, *exp));
            }
            Step::Batch(puts) => {
                for (k, v, len, exp) in puts {
                    state.insert(*k, (*v, *len, *exp));
                }
            }
            Step::Delete(k) => {
                state.remove(k);
            }
            Step::Seal | Step::Advance | Step::Compact(_) => {}
        }
    }
    // Every expiring value is written an hour before it expires, and the jump is two hours:
    // one written before the jump has expired if the jump was made; one written after has not.
    let jump = steps[..done]
        .iter()
        .position(|s| matches!(s, Step::Advance))
        .unwrap_or(usize::MAX);
    let mut written_at = BTreeMap::new();
    for (i, s) in steps[..done].iter().enumerate() {
        match s {
            Step::Put(k, ..) => {
                written_at.insert(*k, i);
            }
            Step::Batch(puts) => {
                for (k, ..) in puts {
                    written_at.insert(*k, i);
                }
            }
            _ => {}
        }
    }
    state
        .into_iter()
        .filter(|(k, (_, _, exp))| !(*exp && advanced && written_at[k] < jump))
        .map(|(k, (v, len, _))| (k, (v, len)))
        .collect()
}

/// Runs the workload on `sim` until it ends or the machine goes off; returns how many steps
/// were acknowledged.
fn run(sim: &Sim, clock: &MockClock, steps: &[Step]) -> usize {
    let store = match open(sim, opts(clock)) {
        Ok(s) => s,
        Err(e) => {
            assert!(sim.crashed(), "open failed without a crash: {e}");
            return 0;
        }
    };
    let expiring = PutOptions::new().ttl(HOUR);
    let opts_of = |exp: bool| if exp { expiring } else { PutOptions::new() };
    for (i, s) in steps.iter().enumerate() {
        let r = match s {
            Step::Put(k, v, len, exp) => store
                .put_with(key(*k), value(*v, *len), &opts_of(*exp))
                .map(drop),
            Step::Batch(puts) => {
                let mut b = Batch::new();
                for (k, v, len, exp) in puts {
                    b.put_with(key(*k), value(*v, *len), &opts_of(*exp));
                }
                store.write(&b)
            }
            Step::Delete(k) => store.delete(key(*k)).map(drop),
            Step::Seal => store.seal().map(drop),
            Step::Advance => {
                clock.advance(2 * HOUR);
                Ok(())
            }
            Step::Compact(t) => store
                .compact_with(crate::CompactOptions::new().threshold(*t))
                .map(drop),
        };
        if let Err(e) = r {
            assert!(sim.crashed(), "step {i} {s:?} failed without a crash: {e}");
            drop(store);
            return i;
        }
    }
    if let Err(e) = store.close() {
        assert!(sim.crashed(), "close failed without a crash: {e}");
    }
    steps.len()
}

/// Crash at mutation `n` in mode `survival`, recover, check.
fn crash_and_check(steps: &[Step], n: u64, survival: Survival) -> Result<(), String> {
    let sim = new_sim(SimConfig::default());
    sim.seed(n);
    sim.crash_at(CrashOn::Mutation, n);
    let clock = MockClock::new();
    let done = run(&sim, &clock, steps);
    sim.crash_now();
    let survivor = sim.after_crash(survival, n ^ 0x5EED);
    // The same clock: the jump, if it was made, holds after the crash.
    let advanced = clock.offset_ms() > 0;
    let store = open(&survivor, opts(&clock)).map_err(|e| format!("open after the crash: {e}"))?;
    let seen = observe(&store)?;
    let allowed: Vec<_> = (done..=(done + 1).min(steps.len()))
        .map(|d| seen_state(&expected(steps, d, advanced)))
        .collect();
    if !allowed.contains(&seen) {
        return Err(format!(
            "{done} steps acknowledged, clock jumped: {advanced}; the store holds {seen:?}, \
             allowed {allowed:?}"
        ));
    }
    check_expiries(&store, steps, done)?;
    // And compaction after the recovery (at the moved clock) changes nothing visible.
    store
        .compact()
        .map_err(|e| format!("compact after recovery: {e}"))?;
    let again = observe(&store)?;
    if again != seen {
        return Err(format!(
            "compaction after recovery: {seen:?} became {again:?}"
        ));
    }
    store.close().map_err(|e| format!("close: {e}"))?;
    Ok(())
}

/// Every value present that was put to expire reports an expiry, and every other none.
fn check_expiries(store: &Store, steps: &[Step], done: usize) -> Result<(), String> {
    for k in 0..super::KEYS {
        let Some(meta) = store.metadata(key(k)).map_err(|e| e.to_string())? else {
            continue;
        };
        let version = store.get(key(k)).map_err(|e| e.to_string())?.map(|b| {
            u32::from_le_bytes(b.get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]))
        });
        let exp = steps[..(done + 1).min(steps.len())]
            .iter()
            .flat_map(|s| match s {
                Step::Put(k, v, _, e) => vec![(*k, *v, *e)],
                Step::Batch(p) => p.iter().map(|(k, v, _, e)| (*k, *v, *e)).collect(),
                _ => vec![],
            })
            .find(|&(kk, v, _)| kk == k && Some(v) == version)
            .map(|(_, _, e)| e);
        if exp.is_some_and(|e| e != meta.expires_at().is_some()) {
            return Err(format!(
                "key {k}: expiry {:?}, put with {exp:?}",
                meta.expires_at()
            ));
        }
    }
    Ok(())
}

#[test]
fn a_power_loss_at_every_io_never_brings_back_what_an_expired_value_hid() {
    let steps = workload();
    // The workload itself, without a crash, ends as the model says.
    let counted = new_sim(SimConfig::default());
    counted.crash_at(CrashOn::Mutation, u64::MAX);
    let clock = MockClock::new();
    assert_eq!(run(&counted, &clock, &steps), steps.len());
    let mutations = counted.mutating_calls();
    assert!(mutations > 40, "{mutations}");
    let store = open(&counted, opts(&clock)).unwrap();
    let want = expected(&steps, steps.len(), true);
    // Keys 5 (lasting, in the batch), 7 (lasting), 6 and 2 (written after the jump) are left.
    assert_eq!(want.keys().copied().collect::<Vec<_>>(), [2, 5, 6, 7]);
    assert_eq!(observe(&store).unwrap(), seen_state(&want));
    drop(store);
    let sample = super::long::Sample::new("powerloss_ttl");
    let long = super::long::long();
    let modes = Survival::ALL.len() as u64;
    let mut runs = 0;
    for n in 1..=mutations {
        for (i, &survival) in Survival::ALL.iter().enumerate() {
            if !long && (n % modes + sample.seed() % modes) % modes != i as u64 {
                continue;
            }
            crash_and_check(&steps, n, survival)
                .unwrap_or_else(|e| panic!("crash at mutation {n}, {survival:?}: {e}"));
            runs += 1;
        }
    }
    println!("expiry crash points: {mutations} mutations x {runs} runs");
}
