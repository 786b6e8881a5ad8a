//! Writing 20 times the cap: the directory never holds more than the cap plus one segment
//! (summed from the file system by a thread that watches throughout), a reader never gets a
//! wrong byte or an older value, and after a reopen every value left is its key's newest.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use podstore::{Durability, Options, Store};

use crate::common::{Random, XorShift, long};
use crate::values::{check, dir_bytes, make, watch_dir_bytes};

const SEGMENT: u64 = 1 << 20;

fn key(k: u64) -> Vec<u8> {
    format!("key-{k:08}").into_bytes()
}

/// What a run writes: `durability`, values of `min..max` bytes, blob files from
/// `large_threshold` bytes, `cap` bytes of cap.
struct Workload {
    durability: Durability,
    min: usize,
    max: usize,
    large_threshold: u64,
    cap: u64,
    /// [`Options::second_chance`]: the reader's hits then keep values.
    second_chance: bool,
}

/// Writes 20 times `w.cap` (new keys, and overwrites of recent ones), with a reader thread
/// checking every value it gets and a watcher thread summing the directory's file sizes.
fn run(w: Workload) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(SEGMENT)
        .size_cap(Some(w.cap))
        .durability(w.durability)
        .large_value_threshold(w.large_threshold)
        .second_chance(w.second_chance)
        .cache_capacity(1 << 20);
    let store = Arc::new(Store::open_with(dir.path(), opts.clone()).unwrap());
    let total = 20 * w.cap;
    // Keys are numbered; `latest[k]`: the newest acknowledged write of key k (0: none yet).
    let slots = (total / w.min as u64 + 1) as usize;
    let latest: Arc<Vec<AtomicU64>> = Arc::new((0..slots).map(|_| AtomicU64::new(0)).collect());
    let keys = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let watcher = watch_dir_bytes(dir.path().to_path_buf(), done.clone());
    let reader = {
        let (store, latest, keys, done) =
            (store.clone(), latest.clone(), keys.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = XorShift::new(7);
            let (mut hits, mut misses) = (0u64, 0u64);
            while !done.load(Ordering::Acquire) {
                let n = keys.load(Ordering::Acquire);
                if n == 0 {
                    std::thread::yield_now();
                    continue;
                }
                // Mostly recent keys (likely still there), some old ones (likely evicted).
                let k = if rng.below(4) == 0 {
                    rng.below_u64(n)
                } else {
                    n - 1 - rng.below_u64(n.min(200))
                };
                let at_least = latest[k as usize].load(Ordering::Acquire);
                match store.get(key(k)).unwrap() {
                    Some(v) => {
                        let counter = check(&key(k), &v);
                        assert!(
                            counter >= at_least,
                            "key {k}: write {counter} after {at_least} was acknowledged"
                        );
                        hits += 1;
                    }
                    None => misses += 1,
                }
            }
            (hits, misses)
        })
    };

    let mut rng = XorShift::new(11);
    let mut written = 0u64;
    let mut counter = 0u64;
    let mut most_after_put = 0;
    while written < total {
        counter += 1;
        let n = keys.load(Ordering::Relaxed);
        // One write in four overwrites a recent key; the others add a key.
        let k = if n > 0 && rng.below(4) == 0 {
            n - 1 - rng.below_u64(n.min(500))
        } else {
            n
        };
        let len = w.min + rng.below(w.max - w.min);
        store.put(key(k), make(&key(k), counter, len)).unwrap();
        latest[k as usize].store(counter, Ordering::Release);
        if k == n {
            keys.store(n + 1, Ordering::Release);
        }
        written += len as u64;
        most_after_put = most_after_put.max(dir_bytes(dir.path()));
    }
    done.store(true, Ordering::Release);
    let most = watcher.join().unwrap().max(most_after_put);
    let (hits, misses) = reader.join().unwrap();
    let stats = store.stats();
    eprintln!(
        "wrote {written} bytes under a cap of {}: at most {most} on disk; evicted {} files, {} bytes, {} values; reader {hits} hits, {misses} misses",
        w.cap, stats.evicted_files, stats.evicted_bytes, stats.evicted_values
    );
    assert!(
        most <= w.cap + SEGMENT,
        "{most} bytes on disk, over the cap {} plus a segment",
        w.cap
    );
    assert!(stats.evicted_files > 0 && stats.evicted_bytes >= 15 * w.cap);
    // Eviction never wrote more than it freed (at most half).
    assert!(
        stats.second_chance_bytes <= stats.evicted_bytes / 2,
        "{stats:?}"
    );
    assert_eq!(stats.second_chances > 0, w.second_chance, "{stats:?}");
    assert!(hits > 0, "the reader never found a value");

    // Quiet now: a value is its key's newest or gone, before and after a reopen.
    let n = keys.load(Ordering::Relaxed);
    let check_all = |store: &Store| {
        let mut present = 0;
        for k in 0..n {
            if let Some(v) = store.get(key(k)).unwrap() {
                assert_eq!(
                    check(&key(k), &v),
                    latest[k as usize].load(Ordering::Relaxed),
                    "key {k}"
                );
                present += 1;
            }
        }
        present
    };
    let before = check_all(&store);
    Arc::try_unwrap(store).ok().unwrap().close().unwrap();
    let store = Store::open_with(dir.path(), opts).unwrap();
    let after = check_all(&store);
    assert!(
        after > 0 && before > 0,
        "values left: {before} before the reopen, {after} after"
    );
    assert!(dir_bytes(dir.path()) <= w.cap + SEGMENT);
}

#[test]
fn buffered_small_values_stay_within_the_cap() {
    run(Workload {
        durability: Durability::Buffered,
        min: 100,
        max: long::sized(8 << 10, 32 << 10),
        large_threshold: 1 << 20,
        cap: long::sized(4, 16) * SEGMENT,
        second_chance: false,
    });
}

#[test]
fn second_chances_stay_within_the_cap() {
    run(Workload {
        durability: Durability::Buffered,
        min: 100,
        max: long::sized(8 << 10, 32 << 10),
        large_threshold: 1 << 20,
        cap: long::sized(4, 16) * SEGMENT,
        second_chance: true,
    });
}

#[test]
fn durable_puts_with_blob_files_stay_within_the_cap() {
    run(Workload {
        durability: Durability::Sync,
        min: 64 << 10,
        max: 320 << 10,
        // Values from 128 KiB get a blob file each: about two thirds of them.
        large_threshold: 128 << 10,
        cap: long::sized(3, 8) * SEGMENT,
        second_chance: true,
    });
}

/// README's example ("Space"), in a temporary directory.
#[test]
fn the_readmes_example_holds() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(8 << 20)
        .size_cap(Some(64 << 20))
        .durability(Durability::Buffered);
    let cache = Store::open_with(dir.path(), opts).unwrap();
    for i in 0..2_000u32 {
        cache
            .put(format!("thumb/{i}"), vec![0u8; 64 << 10])
            .unwrap();
    }
    assert_eq!(cache.get("thumb/0").unwrap(), None);
    assert!(cache.get("thumb/1999").unwrap().is_some());
    assert!(cache.stats().disk_bytes <= 72 << 20);
    assert!(dir_bytes(dir.path()) <= 72 << 20);
}

/// A value read since it was written outlives its file's eviction (appended again under a new
/// version); values never read go with their files.
#[test]
fn a_value_read_since_written_gets_a_second_chance() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(SEGMENT)
        .size_cap(Some(4 * SEGMENT))
        .second_chance(true)
        .durability(Durability::Buffered);
    let store = Store::open_with(dir.path(), opts).unwrap();
    let hot = b"hot".to_vec();
    let first = store.put(&hot, make(&hot, 1, 4000)).unwrap();
    store.put("cold", make(b"cold", 1, 4000)).unwrap();
    let mut i = 0u64;
    while store.stats().evicted_bytes < 8 * SEGMENT {
        // Read since its last write (or its last second chance) before each new segment.
        if i.is_multiple_of(64) {
            assert_eq!(
                check(&hot, &store.get(&hot).unwrap().expect("hot evicted")),
                1
            );
        }
        let k = key(i);
        store.put(&k, make(&k, i, 16 << 10)).unwrap();
        i += 1;
    }
    assert_eq!(store.get("cold").unwrap(), None);
    let v = store.get(&hot).unwrap().expect("the hot value was evicted");
    assert_eq!(check(&hot, &v), 1);
    // Appended again: a new version, above what eviction dropped.
    let now = store.metadata(&hot).unwrap().unwrap().version();
    let s = store.stats();
    assert!(
        now > first && now.get() > s.evicted_through,
        "{now:?} {s:?}"
    );
    assert!(s.second_chances >= 3, "{s:?}");
    assert!(s.second_chance_bytes <= s.evicted_bytes / 2);
    store.close().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(check(&hot, &store.get(&hot).unwrap().unwrap()), 1);
}

/// The record of the hot set written at close (`HOTSET`, a copy of the cache's values, made
/// when the live values do not fit the cache) takes only the room the store's files leave under
/// the cap: a store near its cap whose cache holds more than that room closes within the cap,
/// and its next open serves every value.
#[test]
fn the_record_of_the_hot_set_stays_within_the_cap() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 8 * SEGMENT;
    let opts = Options::default()
        .segment_size(SEGMENT)
        .size_cap(Some(cap))
        .durability(Durability::Buffered)
        .cache_capacity(3 << 20);
    let store = Store::open_with(dir.path(), opts.clone()).unwrap();
    // About 6.2 MiB of 2 KiB values: under the cap less a segment, so nothing is evicted, and
    // more than the cache. The oldest 2.7 MiB of them read: the cache holds them, and a record
    // of them would take more than the 1.5 MiB or so left under the cap.
    let n = 3_000u64;
    for k in 0..n {
        store.put(key(k), make(&key(k), k + 1, 2048)).unwrap();
    }
    for k in 0..1_300 {
        assert!(store.get(key(k)).unwrap().is_some(), "key {k}");
    }
    assert_eq!(store.stats().evicted_files, 0);
    store.close().unwrap();
    let on_disk = dir_bytes(dir.path());
    let hotset = std::fs::metadata(dir.path().join("HOTSET")).map_or(0, |m| m.len());
    eprintln!("{on_disk} bytes on disk after close, HOTSET {hotset}, cap {cap}");
    assert!(
        on_disk <= cap,
        "{on_disk} bytes on disk, over the cap {cap}"
    );
    assert!(
        hotset > 0,
        "room was left under the cap, and no record used it"
    );

    let store = Store::open_with(dir.path(), opts).unwrap();
    for k in 0..n {
        let v = store.get(key(k)).unwrap().expect("present");
        assert_eq!(check(&key(k), &v), k + 1, "key {k}");
    }
    store.close().unwrap();
    assert!(dir_bytes(dir.path()) <= cap);
}
