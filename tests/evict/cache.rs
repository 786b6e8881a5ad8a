//! The read-through cache README recommends (refills by `offer`, `Admission::SecondOffer`,
//! second chances), with values that expire, under concurrency: worker threads get a skewed key
//! and offer the value on a miss, half the keys living a few milliseconds, while a reader
//! checks keys across all of them and a watcher sums the directory's file sizes. Every value
//! served is right (its bytes name its key and its write), never older than its key's newest
//! acknowledged write when the get began, and never expired before the get began; the
//! directory never holds more than the cap plus one segment; after a reopen every value left
//! is its key's newest acknowledged one. And each part of the setting was at work: evictions,
//! offers turned away, second chances, values expired.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use podstore::{Admission, Durability, Options, PutOptions, Store};

use crate::common::long::sized;
use crate::common::{Random, XorShift};
use crate::values::{check, dir_bytes, make, watch_dir_bytes};

const SEGMENT: u64 = 1 << 20;
const CAP: u64 = 4 * SEGMENT;
const WORKERS: u64 = 4;
/// Keys per worker: with values of 1-8 KiB, the workers' keys are about ten times the cap.
const KEYS: u64 = 2_000;
/// The time to live of the keys that expire (every even one).
const TTL: Duration = Duration::from_millis(25);
/// `deadline` of a write without expiry.
const NEVER: u64 = u64::MAX;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn key(id: u64) -> Vec<u8> {
    format!("thumb/{id:06}").into_bytes()
}

fn expires(id: u64) -> bool {
    id.is_multiple_of(2)
}

/// What the threads share: for each key, the newest acknowledged write (0: none); for each
/// write, a bound on its expiry (ms since the epoch, [`NEVER`] without one): the store judges a
/// value expired from its own clock's reading at the offer plus the time to live, at most the
/// clock's reading after the offer returned plus it.
struct Shared {
    store: Store,
    latest: Vec<AtomicU64>,
    deadline: Vec<AtomicU64>,
    counter: AtomicU64,
}

impl Shared {
    /// Gets key `id` and checks what it finds; `Some` of its write number on a hit.
    fn get_checked(&self, id: u64) -> Option<u64> {
        let at_least = self.latest[id as usize].load(Ordering::Acquire);
        let began = now_ms();
        let v = self.store.get(key(id)).unwrap()?;
        let c = check(&key(id), &v);
        assert!(
            c >= at_least,
            "key {id}: write {c} served after write {at_least} was acknowledged"
        );
        let deadline = self.deadline[c as usize].load(Ordering::Acquire);
        assert!(
            deadline > began,
            "key {id}: write {c} served though it expired at {deadline}, before the get began at {began}"
        );
        Some(c)
    }

    /// What a worker does on a miss: offers a new value of key `id` (its only writer); returns
    /// whether it was written.
    fn refill(&self, id: u64, len: usize) -> bool {
        let c = self.counter.fetch_add(1, Ordering::Relaxed);
        // Unbounded until the offer returns (a reader may find the value before then).
        self.deadline[c as usize].store(NEVER, Ordering::Release);
        let opts = if expires(id) {
            PutOptions::new().ttl(TTL)
        } else {
            PutOptions::new()
        };
        let written = self
            .store
            .offer_with(key(id), make(&key(id), c, len), &opts)
            .unwrap();
        if expires(id) {
            let bound = now_ms() + TTL.as_millis() as u64;
            self.deadline[c as usize].store(bound, Ordering::Release);
        }
        if written.is_some() {
            self.latest[id as usize].store(c, Ordering::Release);
        }
        written.is_some()
    }
}

/// A skewed draw in `0..n`: small numbers far more often than large ones.
fn skewed(rng: &mut XorShift, n: u64) -> u64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    (((n as f64).powf(u) - 1.0) as u64).min(n - 1)
}

#[test]
fn a_read_through_cache_with_admission_second_chances_and_expiry_serves_only_right_values() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(SEGMENT)
        .size_cap(Some(CAP))
        .durability(Durability::Buffered)
        .second_chance(true)
        .admission(Admission::SecondOffer)
        .cache_capacity(1 << 20);
    let ops: u64 = sized(6_000, 40_000);
    let writes = (WORKERS * ops + 1) as usize;
    let shared = Arc::new(Shared {
        store: Store::open_with(dir.path(), opts.clone()).unwrap(),
        latest: (0..WORKERS * KEYS).map(|_| AtomicU64::new(0)).collect(),
        deadline: (0..writes).map(|_| AtomicU64::new(NEVER)).collect(),
        // Write 0 stands for "none yet" in `latest`.
        counter: AtomicU64::new(1),
    });
    let done = Arc::new(AtomicBool::new(false));

    let watcher = watch_dir_bytes(dir.path().to_path_buf(), done.clone());
    let reader = {
        let (shared, done) = (shared.clone(), done.clone());
        std::thread::spawn(move || {
            let mut rng = XorShift::new(5);
            let mut hits = 0u64;
            while !done.load(Ordering::Acquire) {
                let id = rng.below_u64(WORKERS) * KEYS + skewed(&mut rng, KEYS);
                hits += shared.get_checked(id).is_some() as u64;
            }
            hits
        })
    };
    // Worker `w` refills keys `w * KEYS ..`; it gets only those, so that each key has one
    // writer and "its newest acknowledged write" is well defined.
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut rng = XorShift::new(100 + w);
                let (mut hits, mut written) = (0u64, 0u64);
                for _ in 0..ops {
                    let id = w * KEYS + skewed(&mut rng, KEYS);
                    if shared.get_checked(id).is_some() {
                        hits += 1;
                    } else {
                        let len = 1024 + rng.below(7 * 1024);
                        written += shared.refill(id, len) as u64;
                    }
                }
                (hits, written)
            })
        })
        .collect();
    let (mut hits, mut written) = (0, 0);
    for w in workers {
        let (h, n) = w.join().unwrap();
        hits += h;
        written += n;
    }
    done.store(true, Ordering::Release);
    let most = watcher.join().unwrap();
    let reader_hits = reader.join().unwrap();
    let s = shared.store.stats();
    eprintln!(
        "{} gets: {hits} hits, {written} refills written; reader {reader_hits} hits; at most \
         {most} bytes on disk; {s:?}",
        WORKERS * ops
    );
    assert!(
        most <= CAP + SEGMENT,
        "{most} bytes on disk, over the cap {CAP} plus a segment"
    );
    assert!(hits > 0 && reader_hits > 0, "nothing was ever found");
    assert!(s.evicted_files > 0, "never evicted: {s:?}");
    assert!(
        s.offers_not_admitted > 0,
        "the doorkeeper turned nothing away: {s:?}"
    );
    assert!(s.second_chances > 0, "no second chance: {s:?}");
    assert!(
        s.expired_keys > 0 || s.expired_reclaimed_bytes > 0,
        "nothing expired: {s:?}"
    );

    // Quiet now, and after a reopen: each value left is its key's newest acknowledged write,
    // unexpired.
    let shared = Arc::try_unwrap(shared).ok().unwrap();
    let Shared {
        store,
        latest,
        deadline,
        ..
    } = shared;
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts).unwrap();
    let mut left = 0;
    for id in 0..WORKERS * KEYS {
        let began = now_ms();
        if let Some(v) = store.get(key(id)).unwrap() {
            let c = check(&key(id), &v);
            assert_eq!(c, latest[id as usize].load(Ordering::Relaxed), "key {id}");
            assert!(
                deadline[c as usize].load(Ordering::Relaxed) > began,
                "key {id}"
            );
            left += 1;
        }
    }
    assert!(left > 0, "nothing left after the reopen");
    assert!(dir_bytes(dir.path()) <= CAP + SEGMENT);
}
