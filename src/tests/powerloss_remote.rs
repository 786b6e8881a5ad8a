//! Issue 38, phase 2: a power loss (or a process kill) at every mutating call of the step that
//! makes sealed files remote-only (the catalog's switch to version 3, its remote edits, the
//! punches) leaves a store that opens with every value readable, byte for byte.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::io::sim::{CrashOn, Sim, SimConfig, Survival};
use crate::remote::{MemoryRemote, Remote};
use crate::{Durability, Options};

/// The simulation's options with `remote`, every sealed file evicted once a manifest names it
/// (with `evict`), no cache (every get reads its file).
fn options(remote: &Arc<MemoryRemote>, evict: bool) -> Options {
    super::options(Durability::Sync)
        .cache_capacity(0)
        .warm_cache(false)
        .remote(remote.clone() as Arc<dyn Remote>, "p")
        .remote_flush_interval(None)
        .remote_retries(1)
        .remote_local_budget(evict.then_some(0))
}

/// A store of a few blob files and a log segment, uploaded and named by a manifest, closed;
/// its model.
fn written() -> (Sim, Arc<MemoryRemote>, BTreeMap<Vec<u8>, Vec<u8>>) {
    let sim = super::new_sim(SimConfig::default());
    let remote = Arc::new(MemoryRemote::new());
    let store = super::open(&sim, options(&remote, false)).unwrap();
    let mut model = BTreeMap::new();
    for k in 0..24u32 {
        let len = if k % 6 == 0 {
            100_000 + k as usize
        } else {
            3000 + 517 * k as usize
        };
        let v: Vec<u8> = (0..len).map(|i| (i as u32 ^ (k * 37)) as u8).collect();
        let key = format!("k{k}").into_bytes();
        store.put(&key, &v).unwrap();
        model.insert(key, v);
    }
    store.flush_remote().unwrap();
    drop(store);
    (sim, remote, model)
}

/// The eviction step: open with the budget, flush (which evicts), close.
fn evict(sim: &Sim, remote: &Arc<MemoryRemote>) -> crate::Result<u64> {
    let store = super::open(sim, options(remote, true))?;
    store.flush_remote()?;
    Ok(store.stats().remote_only_files)
}

#[test]
fn a_crash_at_every_step_of_an_eviction_leaves_every_value_readable() {
    // The step's mutating calls, counted on a run without a crash.
    let (counted, remote, model) = written();
    let base = counted.mutating_calls();
    assert!(evict(&counted, &remote).unwrap() >= 4, "files evicted");
    let steps = counted.mutating_calls() - base;
    let check = |sim: &Sim, remote: &Arc<MemoryRemote>, what: &str| {
        let store =
            super::open(sim, options(remote, true)).unwrap_or_else(|e| panic!("{what}: open: {e}"));
        for (k, v) in &model {
            let got = store.get(k).unwrap_or_else(|e| panic!("{what}: get: {e}"));
            assert!(got.as_deref() == Some(&v[..]), "{what}: {k:?}");
        }
    };
    check(&counted, &remote, "no crash");
    let sample = super::long::Sample::new("a_crash_at_every_step_of_an_eviction");
    let seeds = super::long::sized(1, 8);
    // By default every other step (which half rotates with the sample's seed; 8.3 s of the
    // default run with all of them on 2026-12-07), every step under PODSTORE_TEST_LONG.
    let every = super::long::sized(2, 1);
    for n in (1..=steps).filter(|&n| sample.picks(n, every)) {
        for (m, &mode) in Survival::ALL.iter().enumerate() {
            for s in 0..seeds {
                let seed = if super::long::long() {
                    s
                } else {
                    sample.pick(n << 8 | m as u64, 1 << 20)
                };
                let (sim, remote, _) = written();
                sim.crash_at(CrashOn::Mutation, sim.mutating_calls() + n);
                let _ = evict(&sim, &remote);
                sim.crash_now();
                let what = format!("crash at step {n} of {steps}, {mode:?}, seed {seed}");
                // A power loss; and a process kill (everything kept) then a reopen.
                check(&sim.after_crash(mode, seed), &remote, &what);
                if m == 0 && s == 0 {
                    let killed = sim.after_process_kill();
                    check(&killed, &remote, &format!("{what} (process kill)"));
                }
            }
        }
    }
}
