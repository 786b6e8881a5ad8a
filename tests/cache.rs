//! The read cache (`Options::cache_capacity`): what it serves, that it never serves an old or
//! damaged value, and that it stays within its capacity. The concurrent histories are in
//! tests/stress.rs (`stress_mixed_ops_with_a_small_cache_and_compaction`) and tests/model.rs
//! (with the cache on, off and small).

mod common;

use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::files::{FileKind, written_files};
use common::store::{TestStore, assert_hot_survived};
use common::{Random, XorShift};
use podstore::{Error, IoMode, Options, Store};

fn options(cache: u64) -> Options {
    common::store::small()
        .io_mode(IoMode::Direct)
        .cache_capacity(cache)
        .background_compaction(false)
}

fn value(tag: u64, len: usize) -> Vec<u8> {
    XorShift::new(0xCAC4E ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)).bytes(len)
}

/// Flips a byte in the middle of the only copy of `value` in the store's log segments.
fn damage(dir: &std::path::Path, value: &[u8]) {
    for path in written_files(dir, FileKind::Log) {
        let bytes = std::fs::read(&path).unwrap();
        if let Some(at) = bytes.windows(value.len()).position(|w| w == value) {
            let at = (at + value.len() / 2) as u64;
            let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            file.write_at(&[bytes[at as usize] ^ 0x5a], at).unwrap();
            file.sync_all().unwrap();
            return;
        }
    }
    panic!("value not found in any segment");
}

#[test]
fn a_repeated_get_is_served_from_memory_without_a_copy() {
    // No warm-up at open: it would race the first get to keep the value (a CI run saw the get
    // find it kept, no miss counted).
    let fx = TestStore::new(options(1 << 20).warm_cache(false));
    let store = fx.open();
    let v = value(1, 3000);
    store.put("k", &v).unwrap();
    store.close().unwrap();
    // A new store starts empty: the first get reads the value and keeps it.
    let store = fx.open();
    let before = store.stats();
    assert_eq!((before.cache_hits, before.cache_bytes), (0, 0));
    assert_eq!(store.get("k").unwrap().unwrap(), v);
    let after_miss = store.stats();
    assert_eq!(after_miss.cache_misses, 1);
    assert!(after_miss.cache_bytes > 3000);
    let a = store.get_bytes("k").unwrap().unwrap();
    let b = store.get_bytes("k").unwrap().unwrap();
    assert_eq!(a, v);
    assert_eq!(a.as_ptr(), b.as_ptr(), "both share the cache's buffer");
    let mut buf = Vec::new();
    assert!(store.get_into("k", &mut buf).unwrap());
    assert_eq!(buf, v);
    assert_eq!(
        store.get_range("k", 100..200).unwrap().unwrap(),
        &v[100..200]
    );
    let s = store.stats();
    assert_eq!((s.cache_hits, s.cache_misses), (4, 1));
}

#[test]
fn without_a_cache_nothing_is_kept_or_counted() {
    let fx = TestStore::new(options(0));
    let store = fx.open();
    store.put("k", value(2, 5000)).unwrap();
    for _ in 0..3 {
        assert_eq!(store.get("k").unwrap().unwrap(), value(2, 5000));
        assert_eq!(store.get_bytes("k").unwrap().unwrap(), value(2, 5000));
    }
    let s = store.stats();
    assert_eq!(
        (
            s.cache_hits,
            s.cache_misses,
            s.cache_evictions,
            s.cache_bytes
        ),
        (0, 0, 0, 0)
    );
}

/// A value that was read (verified) before its bytes on disk were damaged is served from the
/// cache; a value that was not cached (neither read nor written by this store) is read from disk, and its damage is reported by every
/// kind of read.
#[test]
fn damage_to_a_value_not_in_the_cache_is_still_detected() {
    let fx = TestStore::new(options(1 << 20));
    let store = fx.open();
    let (a, b) = (value(3, 9000), value(4, 9000));
    store.put("a", &a).unwrap();
    store.put("b", &b).unwrap();
    store.close().unwrap();
    // Reopened, so that neither is in the cache from its write; `a` is read (and kept).
    let store = fx.open();
    assert_eq!(store.get("a").unwrap().unwrap(), a);
    damage(fx.path(), &a);
    damage(fx.path(), &b);

    assert_eq!(
        store.get("a").unwrap().unwrap(),
        a,
        "verified before the damage"
    );
    let corrupt = |r: Result<(), Error>, what: &str| {
        assert!(matches!(r, Err(Error::Corruption { .. })), "{what}: {r:?}");
    };
    corrupt(store.get("b").map(drop), "get");
    corrupt(store.get_bytes("b").map(drop), "get_bytes");
    corrupt(store.get_into("b", &mut Vec::new()).map(drop), "get_into");
    corrupt(store.get_range("b", 4000..5000).map(drop), "get_range");
    // A failed read keeps nothing: the next one fails again.
    corrupt(store.get("b").map(drop), "get again");
    assert!(!store.verify().unwrap().is_clean());
    store.close().unwrap();

    // A new store starts with an empty cache: the damage to `a` shows too.
    let store = fx.open();
    corrupt(store.get("a").map(drop), "get a after reopen");
}

/// A key whose old value is cached, overwritten, then moved by compaction reads its new value
/// by every kind of read, and reads nothing once deleted.
#[test]
fn a_cached_key_overwritten_then_compacted_reads_its_new_value() {
    let fx = TestStore::new(options(1 << 20));
    let store = fx.open();
    let (old, new) = (value(5, 6000), value(6, 6000));
    store.put("k", &old).unwrap();
    for i in 0..200u32 {
        store
            .put(format!("filler{i}"), value(100 + i as u64, 4000))
            .unwrap();
    }
    assert_eq!(store.get("k").unwrap().unwrap(), old);
    assert_eq!(store.get_range("k", 10..20).unwrap().unwrap(), &old[10..20]);
    store.put("k", &new).unwrap();
    assert_eq!(store.get("k").unwrap().unwrap(), new, "read your write");
    assert_eq!(store.get_bytes("k").unwrap().unwrap(), new);
    for i in 0..200u32 {
        store.delete(format!("filler{i}")).unwrap();
    }
    let report = store.compact().unwrap();
    assert!(report.segments_compacted > 0, "{report:?}");
    let check = |what: &str| {
        assert_eq!(store.get("k").unwrap().unwrap(), new, "{what}: get");
        assert_eq!(
            store.get_bytes("k").unwrap().unwrap(),
            new,
            "{what}: get_bytes"
        );
        let mut buf = old.clone();
        assert!(store.get_into("k", &mut buf).unwrap());
        assert_eq!(buf, new, "{what}: get_into");
        assert_eq!(
            store.get_range("k", 10..20).unwrap().unwrap(),
            &new[10..20],
            "{what}: get_range"
        );
        let mut r = store.reader("k").unwrap().unwrap();
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut r, &mut all).unwrap();
        assert_eq!(all, new, "{what}: reader");
    };
    check("after compaction");
    check("after compaction, again (from the cache)");
    store.delete("k").unwrap();
    store.compact().unwrap();
    assert_eq!(store.get("k").unwrap(), None);
    assert_eq!(store.get_bytes("k").unwrap(), None);
    assert!(!store.get_into("k", &mut Vec::new()).unwrap());
}

/// Cached bytes, counted with each entry's bookkeeping, never exceed the capacity, however
/// many values of whatever sizes are read.
#[test]
fn the_cache_never_holds_more_than_its_capacity() {
    holds_at_most(256 << 10, 600);
}

/// As above with a cache of 16 MiB, which keeps a table of hot values (`index/hot.rs`) within
/// the same capacity: its entries, counted in full though they share the cache's buffers, and
/// the cache's own stay under it together.
#[test]
fn the_cache_and_its_hot_values_never_hold_more_than_its_capacity() {
    holds_at_most(16 << 20, 2400);
}

/// Reads `keys` values of 1 B to 24 KB (about 12 KB each) and a large one in a store whose cache
/// holds `capacity` bytes: `Stats::cache_bytes` never passes it, and the cache fills past half.
/// One round of random reads by default (one read of each of about two thirds of the keys,
/// more bytes than the capacity), three under `PODSTORE_TEST_LONG`.
fn holds_at_most(capacity: u64, keys: usize) {
    let fx = TestStore::new(options(capacity).durability(podstore::Durability::Buffered));
    let store = fx.open();
    assert_eq!(store.stats().cache_capacity, capacity);
    let mut rng = XorShift::new(7);
    let lens: Vec<usize> = (0..keys).map(|_| rng.in_range(1..24_000)).collect();
    for (i, &len) in lens.iter().enumerate() {
        store.put(format!("k{i}"), value(i as u64, len)).unwrap();
    }
    store.put("large", value(9999, 3 << 20)).unwrap();
    let mut most = 0;
    for round in 0..common::long::sized(1, 3) {
        for _ in 0..lens.len() {
            let i = rng.below(lens.len());
            let got = store.get(format!("k{i}")).unwrap().unwrap();
            assert_eq!(got.len(), lens[i]);
            let at = rng.below(3 << 20) as u64;
            store.get_range("large", at..at + 100).unwrap().unwrap();
            let s = store.stats();
            assert!(
                s.cache_bytes <= capacity,
                "round {round}: {} cached bytes",
                s.cache_bytes
            );
            most = most.max(s.cache_bytes);
        }
    }
    let s = store.stats();
    assert!(s.cache_evictions > 0, "{s:?}");
    assert!(s.cache_hits > 0, "{s:?}");
    assert!(
        most > capacity / 2,
        "the cache filled up to {most} bytes only"
    );
}

/// Where the crc of chunk `chunk` of the value of key "large" (5 bytes) lies in its blob file:
/// after the segment header (64), the record header (32), the key and the value.
fn crc_offset(value_len: usize, chunk: usize) -> u64 {
    (64 + 32 + 5 + value_len + 4 * chunk) as u64
}

/// The file sector (512 bytes) of the crc of chunk `chunk` of the value of key "large".
fn crc_sector(value_len: usize, chunk: usize) -> u64 {
    crc_offset(value_len, chunk) / 512
}

/// A range read of a large value keeps the file sector of checksums it read: the next range
/// read whose checksums lie in the same sector finds them in memory and reads only its chunks.
#[test]
fn range_reads_of_a_large_value_keep_its_checksums() {
    // A cache too small to keep pieces of large values (its largest entry, an eighth of it, is
    // under a piece's 64 KiB): the crc sectors alone (pieces: tests/large_reads.rs).
    let fx = TestStore::new(options(256 << 10));
    let store = fx.open();
    let len = 3 << 20;
    let v = value(10, len);
    store.put("large", &v).unwrap();
    let read = |chunk: usize| {
        let at = chunk * 4096;
        let got = store.get_range("large", at..at + 4096).unwrap().unwrap();
        assert_eq!(got, &v[at..at + 4096]);
        let s = store.stats();
        (s.cache_hits, s.cache_misses)
    };
    let near = (0..768)
        .find(|&c| c != 256 && crc_sector(len, c) == crc_sector(len, 256))
        .unwrap();
    let far = 512;
    assert_ne!(crc_sector(len, far), crc_sector(len, 256));
    // Each read also looks up the record's key (kept after the first read: the index keeps
    // only a fingerprint of it), then the crc sector.
    assert_eq!(read(256), (0, 2), "key and crc sector read");
    assert_eq!(
        read(near),
        (2, 2),
        "chunk {near}'s crc is in the sector kept"
    );
    assert_eq!(read(far), (3, 3), "another crc sector");
    assert_eq!(read(256), (5, 3));
}

/// One pass over many values read once does not push out values read again and again.
#[test]
fn a_scan_does_not_push_out_the_hot_values() {
    const CAPACITY: u64 = 512 << 10;
    let fx = TestStore::new(options(CAPACITY).durability(podstore::Durability::Buffered));
    let store = fx.open();
    for i in 0..2000u64 {
        store.put(format!("k{i}"), value(i, 1000)).unwrap();
    }
    let hot = 0..50u64;
    for _ in 0..4 {
        for i in hot.clone() {
            store.get(format!("k{i}")).unwrap().unwrap();
        }
    }
    // 1950 values of 1000 bytes: about four times the capacity.
    for i in 50..2000u64 {
        store.get(format!("k{i}")).unwrap().unwrap();
    }
    assert_hot_survived(&store, hot.map(|i| format!("k{i}")), 45);
}

/// Each thread writes its own keys and reads them back (twice, the second time from the
/// cache) while another thread compacts over and over: every read sees the thread's last write.
#[test]
fn read_your_writes_while_compaction_moves_cached_values() {
    const THREADS: u64 = 4;
    const ROUNDS: u64 = 150;
    let fx = TestStore::new(options(128 << 10).compaction_threshold(0.1));
    let store = Arc::new(fx.open());
    let done = Arc::new(AtomicBool::new(false));
    let compactor = {
        let (store, done) = (store.clone(), done.clone());
        thread::spawn(move || {
            let mut moved = 0;
            while !done.load(Ordering::Relaxed) {
                moved += store.compact().unwrap().segments_compacted;
            }
            moved
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let store: Arc<Store> = store.clone();
            thread::spawn(move || {
                let mut rng = XorShift::new(t);
                for round in 0..ROUNDS {
                    let key = format!("t{t}-{}", rng.below(8));
                    if rng.below(6) == 0 {
                        store.delete(&key).unwrap();
                        assert_eq!(store.get(&key).unwrap(), None, "{key}: deleted");
                        continue;
                    }
                    let v = value(t << 32 | round, rng.in_range(1..6000));
                    store.put(&key, &v).unwrap();
                    for pass in 0..2 {
                        let got = store.get_bytes(&key).unwrap().expect("own write");
                        assert!(got == v, "{key}: round {round}, pass {pass}: another value");
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(compactor.join().unwrap() > 0, "nothing was compacted");
}

/// A crc sector kept by the cache is not verified as a whole: a crc that was damaged when the
/// sector was read (here: damaged on disk, then repaired, as a flipped bit in transit would
/// look) fails only the read that uses it, which then drops the sector and reads again from
/// the file.
#[test]
fn a_damaged_crc_in_a_cached_sector_fails_no_later_read() {
    let fx = TestStore::new(options(1 << 20));
    let store = fx.open();
    let v = value(11, 3 << 20);
    store.put("large", &v).unwrap();
    let blob = &written_files(fx.path(), FileKind::Blob)[0];
    let crc_of = |chunk: usize| crc_offset(v.len(), chunk);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(blob)
        .unwrap();
    let mut good = [0u8; 4];
    file.read_exact_at(&mut good, crc_of(300)).unwrap();
    let flipped = [good[0] ^ 0xff, good[1], good[2], good[3]];
    file.write_at(&flipped, crc_of(300)).unwrap();
    file.sync_all().unwrap();
    // A read of a chunk whose crc shares chunk 300's file sector brings the bad one into the
    // cache.
    let neighbour = (0..768)
        .find(|&c| c != 300 && crc_sector(v.len(), c) == crc_sector(v.len(), 300))
        .unwrap();
    let at = neighbour * 4096;
    assert_eq!(
        store.get_range("large", at..at + 100).unwrap().unwrap(),
        &v[at..at + 100]
    );
    file.write_at(&good, crc_of(300)).unwrap();
    file.sync_all().unwrap();
    let at = 300 * 4096;
    assert_eq!(
        store.get_range("large", at..at + 100).unwrap().unwrap(),
        &v[at..at + 100],
        "the read with the kept bad crc is tried again from the file"
    );
}

/// What was just written is read from memory: a small value is kept when its put (or batch, or
/// `put_if_absent`) is acknowledged, so its first get reads nothing; an overwrite, a delete, a
/// compaction and a reopen never let a value kept on write answer for a newer one.
#[test]
fn a_written_value_is_read_from_memory_and_never_stale() {
    let fx = TestStore::new(options(1 << 20).compaction_threshold(0.1));
    let store = fx.open();
    let hits_and_misses = || {
        let s = store.stats();
        (s.cache_hits, s.cache_misses)
    };
    let (v1, v2, v3) = (value(20, 3000), value(21, 4096), value(22, 100));
    store.put("k", &v1).unwrap();
    assert_eq!(hits_and_misses(), (0, 0));
    assert_eq!(store.get("k").unwrap().unwrap(), v1);
    assert_eq!(
        hits_and_misses(),
        (1, 0),
        "the first get of a written value is a hit"
    );
    store.put("k", &v2).unwrap();
    assert_eq!(store.get("k").unwrap().unwrap(), v2, "read your write");
    assert_eq!(store.get_range("k", 10..20).unwrap().unwrap(), &v2[10..20]);
    let mut batch = podstore::Batch::new();
    batch.put("k", &v3).put("b", &v1);
    store.write(&batch).unwrap();
    assert!(store.put_if_absent("p", &v2).unwrap());
    assert!(!store.put_if_absent("p", &v3).unwrap());
    let (hits, misses) = hits_and_misses();
    assert_eq!(store.get("k").unwrap().unwrap(), v3);
    assert_eq!(store.get("b").unwrap().unwrap(), v1);
    assert_eq!(store.get("p").unwrap().unwrap(), v2);
    let (h, m) = hits_and_misses();
    assert_eq!(
        (h - hits, m - misses),
        (3, 0),
        "batch and put_if_absent values kept too"
    );
    // Larger than what a put keeps (4 KiB): read from disk (then kept by the read).
    let big = value(23, 4097);
    store.put("big", &big).unwrap();
    assert_eq!(store.get("big").unwrap().unwrap(), big);
    assert_eq!(hits_and_misses().1, m + 1);
    // Delete, then compaction moving the survivors, then a reopen.
    assert!(store.delete("k").unwrap());
    assert_eq!(store.get("k").unwrap(), None);
    for i in 0..300u64 {
        store.put(format!("f{i}"), value(100 + i, 4000)).unwrap();
        store.delete(format!("f{i}")).unwrap();
    }
    assert!(store.compact().unwrap().segments_compacted > 0);
    store.put("k", &v2).unwrap();
    assert_eq!(store.get("k").unwrap().unwrap(), v2);
    assert_eq!(store.get("b").unwrap().unwrap(), v1);
    store.close().unwrap();
    let store = fx.open();
    assert_eq!(store.get("k").unwrap().unwrap(), v2);
    assert_eq!(store.get("b").unwrap().unwrap(), v1);
    assert_eq!(store.get("p").unwrap().unwrap(), v2);
}

/// A hot set read again and again survives a load of new values ten times the cache's size,
/// written while the hot set is read: the new values enter the cold queue once the cache is
/// full, and leave it unread, without touching the hot ones.
#[test]
fn a_bulk_load_does_not_push_out_the_hot_values() {
    const CAPACITY: u64 = 1 << 20;
    // Durable writes (a buffered put keeps only the values of keys in use): the load in
    // batches, to be quick.
    let fx = TestStore::new(options(CAPACITY));
    let store = fx.open();
    // 64 values of 1000 bytes: about 70 KiB, 7 % of the capacity.
    let hot = 0..64u64;
    for i in hot.clone() {
        store.put(format!("hot{i}"), value(i, 1000)).unwrap();
    }
    let read_hot = |store: &Store| {
        let before = store.stats();
        for i in hot.clone() {
            assert_eq!(
                store.get(format!("hot{i}")).unwrap().unwrap(),
                value(i, 1000)
            );
        }
        let after = store.stats();
        after.cache_misses - before.cache_misses
    };
    for _ in 0..3 {
        assert_eq!(read_hot(&store), 0);
    }
    // 10 MiB of new values (and their entries' bookkeeping): ten times the capacity.
    let per_value = 1000 + 128;
    let count = 10 * CAPACITY / per_value;
    let mut missed = 0;
    for first in (0..count).step_by(100) {
        let mut batch = podstore::Batch::new();
        for i in first..(first + 100).min(count) {
            batch.put(format!("bulk{i}"), value(1000 + i, 1000));
        }
        store.write(&batch).unwrap();
        // Every 2000 values (2.2 MiB, twice the capacity): an LRU cache would have dropped
        // the hot values between two of these reads.
        if first % 2000 == 0 {
            missed += read_hot(&store);
        }
    }
    missed += read_hot(&store);
    let s = store.stats();
    assert!(
        s.cache_evictions > count / 2,
        "the load went through the cache: {s:?}"
    );
    assert_eq!(missed, 0, "hot values pushed out by the load: {s:?}");
    // And the load's values are readable (from disk, most of them).
    for i in (0..count).step_by(97) {
        assert_eq!(
            store.get(format!("bulk{i}")).unwrap().unwrap(),
            value(1000 + i, 1000)
        );
    }
}

/// A buffered put of a new key keeps nothing (a bulk load returns in microseconds, and a copy
/// into the cache would double that); a buffered overwrite keeps its value, as a durable put
/// of any key does.
#[test]
fn a_buffered_put_keeps_only_the_values_of_keys_in_use() {
    let fx = TestStore::new(options(1 << 20).durability(podstore::Durability::Buffered));
    let store = fx.open();
    store.put("new", value(30, 2000)).unwrap();
    assert_eq!(store.stats().cache_bytes, 0);
    store.put("new", value(31, 2000)).unwrap();
    assert!(store.stats().cache_bytes > 2000);
    let misses = store.stats().cache_misses;
    assert_eq!(store.get("new").unwrap().unwrap(), value(31, 2000));
    assert_eq!(store.stats().cache_misses, misses);
}

/// The table of hot values (on in a cache of 16 MiB or more: `index/hot.rs`) under a writer
/// that overwrites a few keys over and over while readers read them through every whole-value
/// get and a thread compacts: a read that starts after a put returned sees that put's value or
/// a newer one, and no reader ever sees a key's value go back.
#[test]
fn hot_values_never_go_back_while_overwritten_and_compacted() {
    use std::sync::atomic::AtomicU64;
    const KEYS: usize = 4;
    // Rounds of overwrites: 1000 by default, 3000 under PODSTORE_TEST_LONG.
    let rounds: u64 = common::long::sized(1000, 3000);
    let fx = TestStore::new(options(32 << 20).compaction_threshold(0.1));
    let store = Arc::new(fx.open());
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let done = Arc::new(AtomicBool::new(false));
    let key = |k: usize| format!("hot-{k}");
    // A value that names its round, padded so that compaction has bytes to move.
    let versioned = |round: u64| {
        let mut v = round.to_le_bytes().to_vec();
        v.resize(300, round as u8);
        v
    };
    for k in 0..KEYS {
        store.put(key(k), versioned(0)).unwrap();
    }
    let compactor = {
        let (store, done) = (store.clone(), done.clone());
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                store.compact().unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (store, acked, done) = (store.clone(), acked.clone(), done.clone());
            thread::spawn(move || {
                let mut seen = [0u64; KEYS];
                let mut buf = Vec::new();
                let mut reads = 0u64;
                while !done.load(Ordering::Relaxed) {
                    for (k, last) in seen.iter_mut().enumerate() {
                        let floor = acked[k].load(Ordering::SeqCst);
                        let got = match (reads + r) % 3 {
                            0 => store.get(key(k)).unwrap().expect("never deleted"),
                            1 => {
                                assert!(store.get_into(key(k), &mut buf).unwrap());
                                buf.clone()
                            }
                            _ => store.get_bytes(key(k)).unwrap().expect("kept").to_vec(),
                        };
                        let round = u64::from_le_bytes(got[..8].try_into().unwrap());
                        assert_eq!(got, versioned(round), "{}: a torn value", key(k));
                        assert!(
                            round >= floor,
                            "{}: round {round} after {floor} returned",
                            key(k)
                        );
                        assert!(
                            round >= *last,
                            "{}: round {round} after {last} was read",
                            key(k)
                        );
                        *last = round;
                        if let Some((v, _)) = store.get_cached(key(k)).unwrap() {
                            let cached = u64::from_le_bytes(v[..8].try_into().unwrap());
                            assert!(cached >= round, "{}: cached {cached} after {round}", key(k));
                        }
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    for round in 1..=rounds {
        let k = (round % KEYS as u64) as usize;
        store.put(key(k), versioned(round)).unwrap();
        acked[k].store(round, Ordering::SeqCst);
    }
    done.store(true, Ordering::Relaxed);
    compactor.join().unwrap();
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    let stats = store.stats();
    assert!(stats.cache_hits > 0, "{stats:?}");
}
