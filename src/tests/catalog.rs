//! The catalog on the simulated file system: concurrent edits (its group commit).

use std::path::Path;

/// The catalog's group commit: threads recording edits at once all see them land, each once,
/// in a file that replays to the catalog's state; the syncs are shared (fewer than calls when
/// calls overlap).
#[test]
fn concurrent_catalog_edits_all_land_once() {
    use crate::format::catalog::{FileState, replay};
    use crate::io::file::{IoProfile, PlainFile};
    use crate::io::sim::{OpKind, SimConfig};
    use crate::segment::{CATALOG_NAME, Catalog, SegmentKind};

    let sim = super::new_sim(SimConfig {
        direct: false,
        ..SimConfig::default()
    });
    let profile = IoProfile {
        direct: false,
        mem_align: 4096,
        read_align: 1,
        block_size: 4096,
        storage: std::sync::Arc::new(sim.clone()),
        read_only: false,
    };
    let dir = Path::new(super::DIR);
    let catalog = Catalog::write_whole(dir, &profile, &[], 0, None, &Default::default())
        .map_err(|_| "write")
        .unwrap();
    let syncs =
        |sim: &crate::io::sim::Sim| sim.stats().calls.get(&OpKind::Sync).copied().unwrap_or(0);
    let before = syncs(&sim);
    const THREADS: u64 = 8;
    const EACH: u64 = 300;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let catalog = &catalog;
            s.spawn(move || {
                for i in 0..EACH {
                    let id = 1 + t * EACH + i;
                    catalog.created(&[(id, SegmentKind::Log)]).unwrap();
                    catalog.sealed(id, SegmentKind::Log, 4096 + i).unwrap();
                }
            });
        }
    });
    let calls = 2 * THREADS * EACH;
    let state = catalog.state();
    assert_eq!(state.files.len() as u64, THREADS * EACH);
    for t in 0..THREADS {
        for i in 0..EACH {
            let f = state.files[&(1 + t * EACH + i)];
            assert_eq!(f.state, FileState::Sealed { length: 4096 + i });
        }
    }
    // The file says the same (every edit once: a second creation would not replay).
    let file = PlainFile::open(&dir.join(CATALOG_NAME), &profile)
        .unwrap()
        .expect("a catalog");
    let bytes = file.read_all().unwrap();
    let replayed = replay(&bytes).unwrap();
    assert_eq!(replayed.files, state.files);
    assert_eq!(replayed.end_slot, 1 + calls);
    let used = syncs(&sim) - before;
    assert!(used <= calls, "{used} syncs for {calls} calls");
    println!("catalog group commit: {calls} calls, {used} syncs");
}

/// A crash at every mutating call of the first open of a new store (which writes its catalog),
/// in every survival mode and many seeds (a sample of them by default): the next open never finds a catalog it calls damaged.
#[test]
fn a_crash_while_a_new_store_writes_its_catalog_leaves_no_damage() {
    use crate::io::sim::{CrashOn, SimConfig, Survival};
    let counted = super::new_sim(SimConfig::default());
    let store = super::open(&counted, super::options(crate::Durability::Sync)).unwrap();
    drop(store);
    let mutations = counted.mutating_calls();
    // Seeds per crash point and mode: 20 (0..20) under PODSTORE_TEST_LONG, else 2 drawn from
    // the sample's seed (the survival modes are random only through them).
    let sample = super::long::Sample::new("a_crash_while_a_new_store_writes_its_catalog");
    let seeds = super::long::sized(2, 20);
    for n in 1..=mutations {
        for (m, &mode) in Survival::ALL.iter().enumerate() {
            for s in 0..seeds {
                let seed = if super::long::long() {
                    s
                } else {
                    sample.pick(n << 8 | s, 1 << 20)
                };
                let sim = super::new_sim(SimConfig::default());
                sim.crash_at(CrashOn::Mutation, n);
                let _ = super::open(&sim, super::options(crate::Durability::Sync));
                sim.crash_now();
                let after = sim.after_crash(mode, seed * 31 + m as u64);
                if let Err(e) = super::open(&after, super::options(crate::Durability::Sync)) {
                    panic!("crash at mutation {n} of {mutations}, {mode:?}, seed {seed}: {e}");
                }
            }
        }
    }
}

/// The same, when the first crash only kills the process (its unsynced writes and directory
/// changes stay pending), and the power loss comes at any call of the open that follows (which
/// writes the catalog again, under the same temporary name).
#[test]
fn a_kill_then_a_power_loss_while_the_catalog_is_written_leaves_no_damage() {
    use crate::io::sim::{CrashOn, SimConfig, Survival};
    let opts = || super::options(crate::Durability::Sync);
    let mutations = |sim: &crate::io::sim::Sim| sim.mutating_calls();
    let counted = super::new_sim(SimConfig::default());
    drop(super::open(&counted, opts()).unwrap());
    let first = mutations(&counted);
    // Seeds per point and mode: 24 (0..24) under PODSTORE_TEST_LONG, else 1 from the sample (a
    // new one every run), at half of the second open's points.
    let sample = super::long::Sample::new("a_kill_then_a_power_loss_while_the_catalog_is_written");
    let seeds = super::long::sized(1, 24);
    for n in 1..=first {
        let sim = super::new_sim(SimConfig::default());
        sim.crash_at(CrashOn::Mutation, n);
        let _ = super::open(&sim, opts());
        let killed = sim.after_process_kill();
        let before = mutations(&killed);
        drop(super::open(&killed.after_process_kill(), opts()));
        let second = mutations(&killed).saturating_sub(before).max(12);
        for m in 1..=second {
            // Every point of the second open in the long run; by default every other one
            // (which half rotates with the sample's seed).
            if !sample.picks(m, super::long::sized(2, 1)) {
                continue;
            }
            for (i, &mode) in Survival::ALL.iter().enumerate() {
                for s in 0..seeds {
                    let seed = if super::long::long() {
                        s
                    } else {
                        sample.pick(n << 16 | m << 8 | s, 1 << 20)
                    };
                    let survivor = sim.after_process_kill();
                    survivor.crash_at(CrashOn::Mutation, m);
                    let _ = super::open(&survivor, opts());
                    survivor.crash_now();
                    let after = survivor.after_crash(mode, seed * 7 + i as u64);
                    if let Err(e) = super::open(&after, opts()) {
                        panic!(
                            "kill at {n}, power loss at {m} of the next open, {mode:?}, seed {seed}: {e}"
                        );
                    }
                }
            }
        }
    }
}

/// A version-1 catalog's first eviction switches it to version 2 (op 4 is read only under a
/// version-2 header) through the crash-safe rewrite: a power loss at every mutating call of the
/// switch and of the append after it, in every survival mode, leaves a catalog that loads, is
/// either the version-1 one as it was (the eviction unacknowledged) or the version-2 one with
/// the watermark, and is the latter once the eviction was acknowledged. A whole catalog is
/// version 2 exactly when it keeps a watermark.
#[test]
fn the_switch_to_version_2_survives_a_power_loss_at_every_step() {
    use crate::format::catalog::{
        CATALOG_VERSION, CATALOG_VERSION_EVICT, CatalogState, Edit, FileState, Op,
    };
    use crate::io::file::IoProfile;
    use crate::io::sim::{CrashOn, Sim, SimConfig, Survival};
    use crate::segment::{Catalog, LoadedCatalog, SegmentKind, load};

    let dir = Path::new(super::DIR);
    let profile = |sim: &Sim| IoProfile {
        direct: false,
        mem_align: 4096,
        read_align: 1,
        block_size: 4096,
        storage: std::sync::Arc::new(sim.clone()),
        read_only: false,
    };
    let loaded = |sim: &Sim| -> CatalogState {
        match load(dir, &profile(sim)).unwrap() {
            LoadedCatalog::Found { state, .. } => state,
            LoadedCatalog::Absent => panic!("no catalog"),
            LoadedCatalog::Corrupt(d) => panic!("{d}"),
        }
    };
    let sealed = |length| FileState::Sealed { length };
    let files = [
        (1, SegmentKind::Log, sealed(4096)),
        (2, SegmentKind::Blob, sealed(8192)),
        (3, SegmentKind::Log, FileState::Created),
    ];
    let evict = Edit {
        id: 1,
        kind: SegmentKind::Log,
        op: Op::Evict { through: 50 },
    };
    // Up to the eviction (a removal recorded too: it stays recorded through the switch); then
    // the eviction, and an edit appended to the version-2 file. Says whether each was
    // acknowledged.
    let run = |sim: &Sim| -> (Option<CatalogState>, bool, bool) {
        let Ok(c) = Catalog::write_whole(dir, &profile(sim), &files, 3, None, &Default::default())
        else {
            return (None, false, false);
        };
        // Its unlink fails (the simulator has no such file) after the removal is recorded.
        let _ = c.remove(&[(2, SegmentKind::Blob)], true);
        let before = c.state();
        let evicted = c.record(&[evict]).is_ok();
        let sealed = evicted && c.sealed(3, SegmentKind::Log, 12288).is_ok();
        (Some(before), evicted, sealed)
    };

    let counted = super::new_sim(SimConfig::default());
    counted.crash_at(CrashOn::Mutation, u64::MAX);
    let (before, evicted, sealed_3) = run(&counted);
    let before = before.unwrap();
    assert!(evicted && sealed_3);
    assert_eq!(before.version, CATALOG_VERSION);
    assert_eq!(before.files[&2].state, FileState::Removed);
    let after = loaded(&counted);
    assert_eq!(after.version, CATALOG_VERSION_EVICT);
    assert_eq!(after.evicted, Some((1, SegmentKind::Log, 50)));
    assert_eq!(after.files[&1].state, FileState::Removed);
    assert_eq!(after.files[&2].state, FileState::Removed);
    assert_eq!(after.files[&3].state, sealed(12288));
    assert_eq!(after.max_id, 3);

    let total = counted.mutating_calls();
    let (mut old, mut new) = (0, 0);
    for n in 1..=total {
        for (m, &mode) in Survival::ALL.iter().enumerate() {
            let sim = super::new_sim(SimConfig::default());
            sim.crash_at(CrashOn::Mutation, n);
            let (before, evicted, sealed_3) = run(&sim);
            sim.crash_now();
            let survivor = sim.after_crash(mode, n * 7 + m as u64);
            let Some(before) = before else {
                // Cut while the first catalog was written: nothing of this test's yet.
                continue;
            };
            let got = loaded(&survivor);
            let what = format!("mutation {n} of {total}, {mode:?}");
            if got.version == CATALOG_VERSION {
                assert!(!evicted, "{what}: an acknowledged eviction lost");
                assert_eq!(got.evicted, None, "{what}");
                // As before the eviction (the removal of 2 may be what the crash cut).
                assert_eq!(got.files[&1].state, before.files[&1].state, "{what}");
                assert_eq!(got.files[&3].state, FileState::Created, "{what}");
                old += 1;
            } else {
                assert_eq!(got.version, CATALOG_VERSION_EVICT, "{what}");
                assert_eq!(got.evicted, Some((1, SegmentKind::Log, 50)), "{what}");
                assert_eq!(got.files[&1].state, FileState::Removed, "{what}");
                assert_eq!(got.files[&2].state, FileState::Removed, "{what}");
                let three = got.files[&3].state;
                assert!(
                    three == FileState::Created && !sealed_3 || three == sealed(12288),
                    "{what}: file 3 {three:?}"
                );
                new += 1;
            }
        }
    }
    assert!(
        old > 0 && new > 0,
        "{old} version-1 and {new} version-2 survivors"
    );

    // The whole catalog (open's rewrite, a checkpoint's) keeps version 2 with the watermark,
    // and writes version 1 without one.
    let sim = super::new_sim(SimConfig::default());
    let kept = Some((1, SegmentKind::Log, 50));
    for (evicted, version) in [(kept, CATALOG_VERSION_EVICT), (None, CATALOG_VERSION)] {
        Catalog::write_whole(
            dir,
            &profile(&sim),
            &files[2..],
            3,
            evicted,
            &Default::default(),
        )
        .map_err(|_| "write")
        .unwrap();
        let got = loaded(&sim);
        assert_eq!((got.version, got.evicted), (version, evicted));
    }
}
