//! The record of the hot set (`HOTSET`): a close writes the read cache's values, and the next
//! open's warm-up keeps those the index still names, so that a restarted store serves from
//! memory what its last process was reading, not only the values written last.
//!
//! The values here are 5 KiB: larger than the warm-up's walk of the newest segments keeps (at
//! most 4 KiB, the values kept on write), so that a read served from memory after a reopen was
//! served by the record of the hot set and by nothing else, and one not served shows that the
//! record was not used.
//!
//! - what it does: the values read before a close are read from memory after the reopen;
//! - what it must never do: serve a value overwritten, deleted or moved by compaction after the
//!   record was written (a record left from an earlier close, the later close writing none), or
//!   trust a record that is damaged, cut short, copied, or moved from another store's
//!   directory (each ignored, the reads still right, from the disk).

mod common;

use common::store::{TestStore, small, wait_warm};
use podstore::{Durability, IoMode, Options, Store};

const N: usize = 600;
const LEN: usize = 5 << 10;
/// The keys read before the close: the hot set.
const HOT: std::ops::Range<usize> = 100..300;

fn value(k: usize, v: u32) -> Vec<u8> {
    let salt = (k as u32).wrapping_mul(0x9E37_79B1) ^ v.wrapping_mul(0x85EB_CA6B);
    (0..LEN as u32)
        .map(|i| (i.wrapping_mul(0x2545_F491).wrapping_add(salt) >> 24) as u8)
        .collect()
}

fn key(k: usize) -> Vec<u8> {
    format!("hot-{k:06}").into_bytes()
}

fn opts(mode: IoMode) -> Options {
    small()
        .io_mode(mode)
        .durability(Durability::Buffered)
        .background_compaction(false)
        .cache_capacity(32 << 20)
}

/// Writes keys `0..N`, reads the hot set, closes: the close records it.
fn fill_and_read(fx: &TestStore) {
    let store = fx.open();
    for k in 0..N {
        store.put(key(k), value(k, 0)).unwrap();
    }
    store.close().unwrap();
    let store = fx.open();
    for k in HOT {
        assert_eq!(store.get(key(k)).unwrap().unwrap(), value(k, 0));
    }
    store.close().unwrap();
}

/// Reads `keys` in a store just opened, once its warm-up ended, checking each against `want`:
/// the cache hits and misses the reads counted.
#[track_caller]
fn read_after_open(
    store: &Store,
    keys: impl IntoIterator<Item = usize>,
    want: impl Fn(usize) -> Option<Vec<u8>>,
) -> (u64, u64) {
    wait_warm(store);
    common::store::read_counting(store, keys, key, want)
}

fn hotset(fx: &TestStore) -> std::path::PathBuf {
    fx.path().join("HOTSET")
}

#[test]
fn a_restarted_store_reads_what_it_read_before_from_memory() {
    for mode in common::store::MODES {
        let fx = TestStore::new(opts(mode));
        fill_and_read(&fx);
        assert!(hotset(&fx).exists(), "the close recorded the hot set");
        let store = fx.open();
        let hot = HOT.len() as u64;
        let (hits, misses) = read_after_open(&store, HOT, |k| Some(value(k, 0)));
        assert_eq!(
            (hits, misses),
            (hot, 0),
            "{mode:?}: the hot set from memory"
        );
        // Keys not read before the close are read from the disk.
        let (hits, misses) = read_after_open(&store, 0..50, |k| Some(value(k, 0)));
        assert_eq!((hits, misses), (0, 50), "{mode:?}: the others cold");
        store.close().unwrap();

        // Without the record (what every test below checks against): the same reads miss.
        std::fs::remove_file(hotset(&fx)).unwrap();
        let store = fx.open();
        let (hits, misses) = read_after_open(&store, HOT, |k| Some(value(k, 0)));
        assert_eq!((hits, misses), (0, hot), "{mode:?}: no record, cold");
        store.close().unwrap();
    }
}

/// A record of the hot set left by an earlier close, while the store changed after it (opened
/// and closed with the warm restart off: its close records nothing): an overwritten, a deleted
/// and a moved value are never served from it; the values it names that did not change are.
#[test]
fn a_record_older_than_the_store_serves_nothing_stale() {
    for compact in [false, true] {
        let fx = TestStore::new(opts(IoMode::Direct));
        fill_and_read(&fx);
        let record = std::fs::read(hotset(&fx)).unwrap();
        // Any segment with a dead record qualifies for compaction.
        let changed_opts = fx.opts.clone().warm_cache(false).compaction_threshold(0.01);
        let changed = Store::open_with(fx.path(), changed_opts).unwrap();
        for k in HOT.step_by(3) {
            changed.put(key(k), value(k, 1)).unwrap();
        }
        for k in HOT.skip(1).step_by(3) {
            changed.delete(key(k)).unwrap();
        }
        if compact {
            // Compaction copies the live values of the segments it empties elsewhere: the rest
            // of the hot set moves (every segment holding the hot set has dead records now).
            changed.compact().unwrap();
            assert!(changed.stats().segments_compacted > 0);
        }
        changed.close().unwrap();
        assert_eq!(
            std::fs::read(hotset(&fx)).unwrap(),
            record,
            "the old record stays"
        );
        let want = |k: usize| match (k - HOT.start) % 3 {
            0 => Some(value(k, 1)),
            1 => None,
            _ => Some(value(k, 0)),
        };
        let store = fx.open();
        let s = wait_warm(&store);
        let unchanged = HOT.skip(2).step_by(3).count() as u64;
        if compact {
            let moved = store.stats().cache_warmed_values;
            assert!(moved < unchanged, "compacted: {s:?}");
        } else {
            assert_eq!(s.cache_warmed_values, unchanged, "{s:?}");
        }
        // Every value right, now and after reads that fill the cache.
        for _ in 0..3 {
            read_after_open(&store, HOT, want);
        }
        let (hits, _) = read_after_open(&store, HOT.skip(2).step_by(3), want);
        assert_eq!(hits, unchanged, "read again: from memory");
        store.close().unwrap();
    }
}

/// Damaged, cut short, copied, moved in from another store's directory: not trusted, the
/// reads still right (from the disk where the record is not used).
#[test]
fn a_damaged_cut_copied_or_foreign_record_is_ignored() {
    let hot = HOT.len() as u64;
    let want = |k: usize| Some(value(k, 0));
    let fx = TestStore::new(opts(IoMode::Direct));
    // Each case starts from a fresh record: the hot set read in a store whose warm-up ended
    // (whatever it found), then a close.
    let fresh = || {
        let store = fx.open();
        wait_warm(&store);
        for k in HOT {
            store.get(key(k)).unwrap();
        }
        store.close().unwrap();
        std::fs::read(hotset(&fx)).unwrap()
    };
    fill_and_read(&fx);
    let entries_at = 64 << 10;
    let reopen = || {
        let store = fx.open();
        let counted = read_after_open(&store, HOT, want);
        drop(store);
        counted
    };
    // A byte of the header.
    flip(&hotset(&fx), 20);
    assert_eq!(reopen(), (0, hot), "damaged header");
    // A byte of an entry in the middle: the entries before it are kept, none after.
    let record = fresh();
    flip(
        &hotset(&fx),
        entries_at + (record.len() as u64 - entries_at) / 2,
    );
    let (hits, misses) = reopen();
    assert!(
        hits > 0 && misses > 0,
        "damaged entry: {hits} hits, {misses} misses"
    );
    // Cut short.
    fresh();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(hotset(&fx))
        .unwrap();
    f.set_len(entries_at + 100).unwrap();
    drop(f);
    assert_eq!(reopen(), (0, hot), "cut short");
    // A copy (another inode), in place of the file the close wrote.
    let bytes = fresh();
    std::fs::remove_file(hotset(&fx)).unwrap();
    std::fs::write(hotset(&fx), &bytes).unwrap();
    assert_eq!(reopen(), (0, hot), "a copy");
    // The record of another store (of the same keys and values) moved into this one.
    let other = TestStore::new(opts(IoMode::Direct));
    fill_and_read(&other);
    std::fs::rename(hotset(&other), hotset(&fx)).unwrap();
    assert_eq!(reopen(), (0, hot), "another store's record");
    // And a fresh one is used again.
    fresh();
    assert_eq!(reopen(), (hot, 0), "a fresh record");
}

fn flip(path: &std::path::Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, offset).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], offset).unwrap();
}

/// A record larger than the next open's room: the warm-up keeps what the record holds first,
/// and the record holds the table of hot values' keys (those read again most recently) first.
/// 4 000 values of 5 KiB are read once and 100 of them again, a store closed with a cache that
/// holds all of them is opened with one that holds about half: the 100 are all read from
/// memory (in the cache's order, about half of them would be).
#[test]
fn a_record_larger_than_the_room_keeps_the_hot_values_first() {
    const ALL: usize = 4000;
    let hot = 1000..1100;
    let big = opts(IoMode::Buffered).cache_capacity(40 << 20);
    let fx = TestStore::new(big.clone());
    let store = fx.open();
    for k in 0..ALL {
        store.put(key(k), value(k, 0)).unwrap();
    }
    store.close().unwrap();
    let store = fx.open();
    wait_warm(&store);
    for k in 0..ALL {
        assert_eq!(store.get(key(k)).unwrap().unwrap(), value(k, 0));
    }
    for _ in 0..3 {
        for k in hot.clone() {
            assert_eq!(store.get(key(k)).unwrap().unwrap(), value(k, 0));
        }
    }
    let held = store.stats().cache_bytes;
    assert!(held > (ALL * LEN) as u64, "all {ALL} values cached: {held}");
    store.close().unwrap();
    assert!(hotset(&fx).exists());

    let half = opts(IoMode::Buffered).cache_capacity(12 << 20);
    let store = Store::open_with(fx.path(), half).unwrap();
    let warmed = wait_warm(&store).cache_warmed_values;
    assert!(
        (1000..3000).contains(&warmed),
        "about half of the record fits: {warmed} values kept"
    );
    let n = hot.len() as u64;
    let (hits, misses) = read_after_open(&store, hot, |k| Some(value(k, 0)));
    assert_eq!(
        (hits, misses),
        (n, 0),
        "the hot values, first in the record"
    );
    store.close().unwrap();
}
