//! A power loss while a close records the hot set (`HOTSET`, `store/hotset.rs`): the record is
//! written unsynced as `HOTSET.tmp`, its header last, then renamed over the last one, so a
//! crash can leave the old record, the new one whole, a new one cut short or with holes (its
//! header or entries lost), or none. Whatever it left, the next open's warm-up serves no value
//! an overwrite replaced, reads every key right, and keeps only entries the index names.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{DIR, new_sim, open, options};
use crate::io::sim::{CrashOn, SimConfig, Survival};
use crate::{Durability, Store};

const N: usize = 48;
/// Above what the warm-up's walk of the newest segments keeps (4 KiB): a value the warm-up
/// kept came from the record of the hot set.
const LEN: usize = 5 << 10;
/// Keys read before each close (the hot set); the first half of them overwritten before the
/// close that crashes.
const HOT: std::ops::Range<usize> = 8..40;
const OVERWRITTEN: std::ops::Range<usize> = 8..24;

fn key(k: usize) -> Vec<u8> {
    format!("hot-{k:04}").into_bytes()
}

fn value(k: usize, v: u8) -> Vec<u8> {
    (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ (k as u8) ^ v.wrapping_mul(0x5b))
        .collect()
}

fn want(k: usize) -> Vec<u8> {
    value(k, u8::from(OVERWRITTEN.contains(&k)))
}

fn wait_warm(store: &Store) -> crate::Stats {
    let began = Instant::now();
    loop {
        let s = store.stats();
        if !s.cache_warming {
            return s;
        }
        assert!(began.elapsed() < Duration::from_secs(60), "warm-up: {s:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the warm-up after a crash kept: the old record's values, the new one's, none, or part
/// of the new one's.
#[derive(Debug, Default)]
struct Outcomes {
    old: usize,
    new: usize,
    none: usize,
    partial: usize,
}

/// Where the power is lost.
#[derive(Debug, Clone, Copy)]
enum Point {
    /// At this mutation or sync of the close.
    At(CrashOn, u64),
    /// Once the close has returned (the record's writes and rename still unsynced).
    AfterClose,
    /// Never: the store is opened again as the close left it.
    Never,
}

#[test]
fn a_power_loss_while_the_hot_set_is_recorded_serves_nothing_stale() {
    let mut seen = Outcomes::default();
    // Every mutation and every sync of the close, until the close ends before the crash point;
    // then (`None`) a crash once the close has returned: the rename is its last mutation, so
    // only then can the new record survive.
    // By default every other point (which half rotates with the sample's seed; 12 s of the
    // default run with all of them), every point under PODSTORE_TEST_LONG. The sweep ends at
    // the first point tried that the close no longer reaches.
    let sample = super::long::Sample::new("hotset_power_loss_during_close");
    let every = super::long::sized(2, 1);
    for on in [CrashOn::Mutation, CrashOn::Sync] {
        for n in 0.. {
            if !sample.picks(n, every) {
                continue;
            }
            if !crash_during_close(Point::At(on, n), &mut seen) {
                break;
            }
        }
    }
    assert!(crash_during_close(Point::AfterClose, &mut seen));
    // The old record kept (the new one's rename lost) and none (the new one torn and ignored,
    // or both lost: neither was synced) both occur; the new one whole can only once the close
    // has returned (it survives such a crash in a few of the cases, by the draw of what
    // survives), and without a crash always does.
    assert!(seen.old > 0 && seen.none > 0, "{seen:?}");
    let crashed = std::mem::take(&mut seen);
    crash_during_close(Point::Never, &mut seen);
    assert_eq!(
        (seen.new, seen.old + seen.none + seen.partial),
        (1, 0),
        "{crashed:?}"
    );
}

/// Runs the case of a crash at `point` of the close that records the hot set, in every
/// survival mode; false if the close ended before reaching it.
fn crash_during_close(point: Point, seen: &mut Outcomes) -> bool {
    let opts = options(Durability::Buffered).cache_capacity(32 << 20);
    let mut reached = false;
    for (m, mode) in Survival::ALL.into_iter().enumerate() {
        // Seeds per point and mode: a third of them by default, all under PODSTORE_TEST_LONG.
        let seeds = if mode == Survival::RandomSectors {
            super::long::sized(2, 6)
        } else {
            super::long::sized(1, 2)
        };
        for seed in 0..seeds {
            if reached && matches!(point, Point::Never) {
                // Nothing is drawn without a crash: one case.
                return true;
            }
            let ctx = format!("{point:?}, {mode:?}, seed {seed}");
            let sim = new_sim(SimConfig::default());
            let store = open(&sim, opts.clone()).unwrap();
            for k in 0..N {
                store.put(key(k), value(k, 0)).unwrap();
            }
            store.close().unwrap();
            // A first record, of the hot set's first values.
            let store = open(&sim, opts.clone()).unwrap();
            wait_warm(&store);
            for k in HOT {
                assert_eq!(store.get(key(k)).unwrap().unwrap(), value(k, 0));
            }
            store.close().unwrap();
            assert!(sim.file_names(Path::new(DIR)).contains(&"HOTSET".into()));
            // Half of the hot set overwritten (durably), all of it read again, and the power
            // lost during the close that records it (or right after).
            let store = open(&sim, opts.clone()).unwrap();
            wait_warm(&store);
            for k in OVERWRITTEN {
                store.put(key(k), value(k, 1)).unwrap();
            }
            for k in HOT {
                assert_eq!(store.get(key(k)).unwrap().unwrap(), want(k), "{ctx}");
            }
            store.flush().unwrap();
            let after = match point {
                Point::At(on, n) => {
                    sim.crash_at(on, n);
                    let _ = store.close();
                    if !sim.crashed() {
                        continue;
                    }
                    sim.after_crash(mode, seed + 10 * m as u64)
                }
                Point::AfterClose => {
                    store.close().unwrap();
                    sim.crash_now();
                    sim.after_crash(mode, seed + 10 * m as u64)
                }
                Point::Never => {
                    store.close().unwrap();
                    sim
                }
            };
            reached = true;
            let store = open(&after, opts.clone()).unwrap_or_else(|e| panic!("{ctx}: {e}"));
            let stats = wait_warm(&store);
            // Only the record gives values of 5 KiB: the old one its 16 values not overwritten
            // since, the new one all 32.
            match stats.cache_warmed_values {
                0 => seen.none += 1,
                16 => seen.old += 1,
                32 => seen.new += 1,
                v if v < 32 => seen.partial += 1,
                v => panic!("{ctx}: {v} values warmed"),
            }
            for k in 0..N {
                let got = store.get(key(k)).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                assert_eq!(got.as_deref(), Some(&want(k)[..]), "{ctx}: key {k}");
            }
            let report = store.verify().unwrap();
            assert!(report.is_clean(), "{ctx}: {report:?}");
            store.close().unwrap();
        }
    }
    reached
}
