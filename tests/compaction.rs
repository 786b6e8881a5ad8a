//! Deletes that give space back: accounting (`Store::stats`), compaction (`Store::compact` and
//! the background compactor), the tombstone rule, the space bound, readers during compaction,
//! and `put_if_absent`.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::files::count_files;
use common::{Random, XorShift};
use podstore::format::record::record_len;
use podstore::{Compression, Durability, IoMode, Options, Stats, Store};
use tempfile::TempDir;

fn opts() -> Options {
    common::store::small()
        .background_compaction(false)
        .compaction_threshold(0.25)
}

/// `len` pseudo-random (incompressible) bytes, different for every key and version.
fn value(key: &[u8], version: u32, len: usize) -> Vec<u8> {
    let seed = key.iter().fold(u64::from(version) << 32, |h, &b| {
        h.wrapping_mul(31) ^ b as u64
    });
    // Eight bytes a step: the tests write hundreds of MiB of these.
    XorShift::new(seed | 1).bytes(len)
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:06}").into_bytes()
}

fn check_all(store: &Store, model: &HashMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    assert_eq!(store.len(), model.len(), "{ctx}: live keys");
    for (k, v) in model {
        let got = store.get(k).unwrap_or_else(|e| panic!("{ctx}: get: {e}"));
        assert!(
            got.as_deref() == Some(v.as_slice()),
            "{ctx}: key {} wrong",
            String::from_utf8_lossy(k)
        );
    }
}

#[test]
fn stats_account_live_dead_and_tombstone_bytes() {
    let dir = TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    let empty = store.stats();
    assert_eq!(
        (empty.live_keys, empty.live_bytes, empty.tombstones),
        (0, 0, 0)
    );

    let len = 10_000usize;
    for i in 0..100 {
        store.put(key(i), value(&key(i), 0, len)).unwrap();
    }
    let one = record_len(key(0).len() as u64, len as u64);
    let s = store.stats();
    assert_eq!(s.live_keys, 100);
    assert_eq!(s.index_entries, 100);
    assert_eq!(s.live_bytes, 100 * one);
    assert_eq!(s.user_bytes_written, 100 * one);
    // 23 bytes per entry on top of the shard table, whatever the key's length.
    let empty = podstore::Store::open(tempfile::TempDir::new().unwrap().path())
        .unwrap()
        .stats()
        .index_bytes;
    assert_eq!(s.index_bytes, empty + 100 * 23, "{s:?}");
    assert_eq!(
        s.disk_bytes,
        s.live_bytes + s.dead_bytes + s.tombstone_bytes + s.preallocated_bytes
    );
    let dead_before = s.dead_bytes;

    // Overwrite half with shorter values, delete ten.
    for i in 0..50 {
        store.put(key(i), value(&key(i), 1, 100)).unwrap();
    }
    for i in 90..100 {
        assert!(store.delete(key(i)).unwrap());
    }
    let s = store.stats();
    let short = record_len(key(0).len() as u64, 100);
    let tombstone = record_len(key(0).len() as u64, 0);
    assert_eq!(s.live_keys, 90);
    assert_eq!(s.live_bytes, 50 * short + 40 * one);
    assert_eq!((s.tombstones, s.tombstone_bytes), (10, 10 * tombstone));
    assert_eq!(
        s.user_bytes_written,
        100 * one + 50 * short + 10 * tombstone
    );
    assert!(
        s.dead_bytes >= dead_before + 50 * one + 10 * one,
        "overwritten and deleted values count as dead: {s:?}"
    );
    assert_eq!(s.compaction_bytes_written, 0);
    assert_eq!(s.write_amplification(), 0.0);
    assert_eq!(s.io_mode, store.io_mode());

    // The same figures after a reopen (rebuilt from footers).
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    let r = store.stats();
    assert_eq!(
        (r.live_keys, r.live_bytes, r.tombstones, r.tombstone_bytes),
        (s.live_keys, s.live_bytes, s.tombstones, s.tombstone_bytes)
    );
    assert_eq!(r.user_bytes_written, 0, "counters start at open");
}

/// The space bound of the issue: after writing, then deleting or overwriting 90% of it and
/// compacting, bytes on disk are at most 1.2 × live bytes plus one segment.
#[test]
fn compaction_gives_space_back_within_the_bound() {
    for mode in [IoMode::Direct, IoMode::Buffered] {
        let dir = TempDir::new().unwrap();
        let segment = 8u64 << 20;
        let o = opts()
            .io_mode(mode)
            .segment_size(segment)
            .durability(Durability::Buffered)
            .flush_interval(None)
            .compaction_threshold(0.5);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let mut rng = XorShift::new(7);
        let mut model = HashMap::new();
        let n = 2048; // 64 KiB values: 128 MiB
        for i in 0..n {
            let v = value(&key(i), 0, 64 << 10);
            store.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        store.flush().unwrap();
        let written = store.stats().disk_bytes;
        // 90% of what was written becomes dead: half of it deleted, half overwritten.
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, rng.below(i + 1));
        }
        for (j, &i) in order.iter().take(n * 9 / 10).enumerate() {
            if j % 2 == 0 {
                store.delete(key(i)).unwrap();
                model.remove(&key(i));
            } else {
                let v = value(&key(i), 1, 64 << 10);
                store.put(key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
        store.flush().unwrap();
        let before = store.stats();
        let report = store.compact().unwrap();
        let after = store.stats();
        let bound = after.live_bytes as f64 * 1.2 + segment as f64;
        assert!(
            (after.disk_bytes as f64) <= bound,
            "{mode:?}: {} bytes on disk, bound {bound:.0} (live {}), before compaction {}, \
             written {written}; {report:?}",
            after.disk_bytes,
            after.live_bytes,
            before.disk_bytes
        );
        eprintln!(
            "{mode:?}: written {written}, before compaction {} on disk, after {} ({:.3} x live \
             {}), bound {bound:.0}; {report:?}",
            before.disk_bytes,
            after.disk_bytes,
            after.disk_bytes as f64 / after.live_bytes as f64,
            after.live_bytes
        );
        assert!(report.segments_compacted > 0, "{report:?}");
        assert_eq!(
            after.live_bytes, before.live_bytes,
            "compaction changes no live data"
        );
        assert!(after.compaction_bytes_written > 0);
        assert_eq!(after.compaction_bytes_written, report.bytes_copied);
        check_all(&store, &model, &format!("{mode:?} after compaction"));
        store.close().unwrap();
        let store = Store::open_with(dir.path(), o).unwrap();
        check_all(&store, &model, &format!("{mode:?} after reopen"));
        assert!(store.stats().disk_bytes <= after.disk_bytes + segment);
    }
}

/// A tombstone is copied forward while an older file may hold a value of its key, and
/// dropped once none can: the key never comes back, across compactions and reopens.
#[test]
fn deleted_keys_stay_deleted_and_tombstones_go_once_nothing_older_is_left() {
    let dir = TempDir::new().unwrap();
    let o = opts();
    let mut store = Store::open_with(dir.path(), o.clone()).unwrap();
    let filler = |store: &Store, prefix: &str, n: usize| {
        for i in 0..n {
            let k = format!("{prefix}-{i}");
            store
                .put(k.as_bytes(), value(k.as_bytes(), 0, 40 << 10))
                .unwrap();
        }
    };
    // Segment A: the victim key among live filler (A stays mostly live, so it is not compacted).
    store.put(b"victim", b"old value").unwrap();
    filler(&store, "a", 30);
    // Segment B and later: the delete, among filler that is deleted too (so B is compacted).
    assert!(store.delete(b"victim").unwrap());
    filler(&store, "b", 30);
    for i in 0..30 {
        store.delete(format!("b-{i}").as_bytes()).unwrap();
    }
    filler(&store, "c", 30); // seals B
    let r1 = store.compact().unwrap();
    assert!(r1.segments_compacted > 0, "{r1:?}");
    assert!(
        r1.tombstones_copied > 0,
        "the victim's tombstone must be kept while A exists: {r1:?}"
    );
    assert_eq!(store.get(b"victim").unwrap(), None);
    store.close().unwrap();
    store = Store::open_with(dir.path(), o.clone()).unwrap();
    assert_eq!(
        store.get(b"victim").unwrap(),
        None,
        "resurrected after reopen"
    );

    // Now make everything older dead: A goes, and so can the tombstones.
    for i in 0..30 {
        store.delete(format!("a-{i}").as_bytes()).unwrap();
        store.delete(format!("c-{i}").as_bytes()).unwrap();
    }
    filler(&store, "d", 60);
    let mut dropped = 0;
    for _ in 0..4 {
        let r = store.compact().unwrap();
        dropped += r.tombstones_dropped;
        assert_eq!(store.get(b"victim").unwrap(), None);
        store.close().unwrap();
        store = Store::open_with(dir.path(), o.clone()).unwrap();
        assert_eq!(
            store.get(b"victim").unwrap(),
            None,
            "resurrected after reopen"
        );
    }
    assert!(dropped > 0, "no tombstone was ever dropped");
    assert_eq!(store.len(), 60);
    let s = store.stats();
    assert!(
        s.tombstones < 30,
        "tombstones with nothing left to hide remain: {s:?}"
    );
}

#[test]
fn dead_blob_files_are_removed() {
    let dir = TempDir::new().unwrap();
    let o = opts().large_value_threshold(256 << 10);
    let store = Store::open_with(dir.path(), o).unwrap();
    for i in 0..12 {
        store.put(key(i), value(&key(i), 0, 300 << 10)).unwrap();
    }
    let (_, blobs) = count_files(dir.path());
    assert!(blobs >= 12, "{blobs} blob files");
    assert_eq!(store.stats().blob_files, 12);
    for i in 0..6 {
        store.delete(key(i)).unwrap();
    }
    for i in 6..9 {
        store.put(key(i), value(&key(i), 1, 10)).unwrap(); // now in the log
    }
    let r = store.compact().unwrap();
    assert_eq!(r.blob_files_removed, 9, "{r:?}");
    assert_eq!(store.stats().blob_files, 3);
    for i in 6..12 {
        let expected = value(
            &key(i),
            if i < 9 { 1 } else { 0 },
            if i < 9 { 10 } else { 300 << 10 },
        );
        assert_eq!(store.get(key(i)).unwrap().unwrap(), expected);
    }
    drop(store);
    // Spare blob files (created ahead, never used) are removed at close.
    assert_eq!(count_files(dir.path()).1, 3);
}

#[test]
fn compressed_values_move_compressed() {
    let dir = TempDir::new().unwrap();
    let o = opts().compression(Compression::Lz4);
    let store = Store::open_with(dir.path(), o).unwrap();
    let text: Vec<u8> = b"podstore keeps blobs; ".repeat(2000);
    for i in 0..60 {
        store.put(key(i), &text).unwrap();
        store
            .put(key(1000 + i), value(&key(i), 0, 30 << 10))
            .unwrap();
    }
    let stored = store.stored_len(key(0)).unwrap().unwrap();
    assert!(stored < text.len() as u64 / 4);
    for i in 0..60 {
        store.delete(key(1000 + i)).unwrap();
    }
    let r = store.compact().unwrap();
    assert!(r.records_copied > 0, "{r:?}");
    for i in 0..60 {
        assert_eq!(store.get(key(i)).unwrap().unwrap(), text);
        assert_eq!(store.stored_len(key(i)).unwrap(), Some(stored));
        assert_eq!(
            store.get_range(key(i), 30_000..30_010).unwrap().unwrap(),
            &text[30_000..30_010]
        );
    }
}

/// Readers and writers run on while values move: gets never fail or see a wrong value, and a
/// reader opened before the move reads on after the old file is removed.
#[test]
fn reads_and_writes_go_on_while_values_move() {
    let dir = TempDir::new().unwrap();
    let store = Arc::new(Store::open_with(dir.path(), opts()).unwrap());
    let stable: Vec<(Vec<u8>, Vec<u8>)> = (0..40)
        .map(|i| {
            let k = format!("stable-{i}").into_bytes();
            let v = value(&k, 0, 20 << 10);
            (k, v)
        })
        .collect();
    for (k, v) in &stable {
        store.put(k, v).unwrap();
    }
    let mut reader = store.reader(&stable[0].0).unwrap().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut threads = Vec::new();
    for t in 0..2 {
        let (store, stable, stop, reads) =
            (store.clone(), stable.clone(), stop.clone(), reads.clone());
        threads.push(std::thread::spawn(move || {
            let mut rng = XorShift::new(t + 1);
            while !stop.load(Ordering::Relaxed) {
                let (k, v) = &stable[rng.below(stable.len())];
                assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
                assert_eq!(
                    store.get_range(k, 5000..5100).unwrap().unwrap(),
                    &v[5000..5100]
                );
                reads.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    {
        let (store, stop) = (store.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let k = format!("churn-{}", i % 50).into_bytes();
                store.put(&k, value(&k, i, 30 << 10)).unwrap();
                i += 1;
            }
        }));
    }
    let mut compacted = 0;
    let started = Instant::now();
    while compacted < 6 && started.elapsed() < Duration::from_secs(60) {
        compacted += store.compact().unwrap().segments_compacted;
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    assert!(compacted >= 6, "only {compacted} segments compacted");
    assert!(reads.load(Ordering::Relaxed) > 0);
    // The first stable value was moved (its segment was compacted); the reader still reads it.
    let mut all = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut all).unwrap();
    assert_eq!(all, stable[0].1);
}

fn wait_for(mut cond: impl FnMut() -> bool, limit: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn churn(store: &Store) -> Stats {
    for i in 0..120 {
        store.put(key(i), value(&key(i), 0, 20 << 10)).unwrap();
    }
    for i in 0..110 {
        store.delete(key(i)).unwrap();
    }
    for i in 200..260 {
        store.put(key(i), value(&key(i), 0, 20 << 10)).unwrap();
    }
    store.stats()
}

#[test]
fn background_compaction_runs_unless_turned_off() {
    let dir = TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts().background_compaction(true)).unwrap();
    let before = churn(&store);
    // It may have run during the churn already: compare with what was written. (Waiting for
    // the space, not just for a first compaction: on a loaded machine the check could come
    // between two segments.)
    let gave_space_back = |s: &Stats| {
        s.segments_compacted > 0 && s.disk_bytes - s.preallocated_bytes < s.user_bytes_written
    };
    assert!(
        wait_for(|| gave_space_back(&store.stats()), Duration::from_secs(30)),
        "the background compactor did not give the space back: {before:?}, now {:?}",
        store.stats()
    );
    let after = store.stats();
    assert!(
        after.disk_bytes - after.preallocated_bytes < after.user_bytes_written,
        "{after:?}"
    );
    assert_eq!(store.len(), 70);

    let dir = TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    let before = churn(&store);
    std::thread::sleep(Duration::from_millis(1500));
    let after = store.stats();
    assert_eq!(after.segments_compacted, 0);
    assert_eq!(after.disk_bytes, before.disk_bytes);
}

#[test]
fn background_compaction_respects_its_rate() {
    let dir = TempDir::new().unwrap();
    let rate = 256u64 << 10; // 256 KiB/s
    let o = opts()
        .background_compaction(true)
        .compaction_rate(Some(rate));
    // The churn with the compactor off; then reopened with it on, so that the clock starts
    // before it can copy anything.
    churn(&Store::open_with(dir.path(), opts()).unwrap());
    let store = Store::open_with(dir.path(), o).unwrap();
    // Live data to copy: 10 values of 20 KiB in the first segments, at most ~1.3 MiB in all.
    let started = Instant::now();
    assert!(wait_for(
        || store.stats().segments_compacted > 0,
        Duration::from_secs(60)
    ));
    let s = store.stats();
    let floor = Duration::from_secs_f64(s.compaction_bytes_written as f64 / rate as f64 * 0.8);
    assert!(
        started.elapsed() >= floor,
        "{} bytes copied in {:?}, faster than the rate allows",
        s.compaction_bytes_written,
        started.elapsed()
    );
}

#[test]
fn put_if_absent_inserts_once() {
    let dir = TempDir::new().unwrap();
    let o = opts().large_value_threshold(128 << 10);
    let store = Store::open_with(dir.path(), o).unwrap();
    assert!(store.put_if_absent(b"k", b"first").unwrap());
    assert!(!store.put_if_absent(b"k", b"second").unwrap());
    assert_eq!(store.get(b"k").unwrap().unwrap(), b"first");
    assert!(store.delete(b"k").unwrap());
    assert!(store.put_if_absent(b"k", b"third").unwrap());
    assert_eq!(store.get(b"k").unwrap().unwrap(), b"third");

    // Many threads race for the same keys (small values and blob-file ones): each key is
    // inserted once, and its value is the winner's.
    let winners: Vec<Vec<(usize, usize)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let store = &store;
                s.spawn(move || {
                    let mut won = Vec::new();
                    for i in 0..40 {
                        let len = if i % 8 == 0 { 200 << 10 } else { 3000 };
                        let v = value(&key(i), t as u32, len);
                        if store.put_if_absent(key(i), &v).unwrap() {
                            won.push((i, t));
                        }
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut won: Vec<(usize, usize)> = winners.into_iter().flatten().collect();
    won.sort();
    assert_eq!(won.len(), 40, "each key inserted exactly once: {won:?}");
    for (i, t) in won {
        let len = if i % 8 == 0 { 200 << 10 } else { 3000 };
        assert_eq!(
            store.get(key(i)).unwrap().unwrap(),
            value(&key(i), t as u32, len)
        );
    }
}

#[test]
fn compaction_options_are_checked() {
    let dir = TempDir::new().unwrap();
    for bad in [
        opts().compaction_threshold(0.0),
        opts().compaction_threshold(1.5),
        opts().compaction_rate(Some(0)),
        opts().second_chance_budget(0.0),
        opts().second_chance_budget(1.5),
    ] {
        assert!(matches!(
            Store::open_with(dir.path(), bad),
            Err(podstore::Error::InvalidOptions(_))
        ));
    }
}

/// The small store: durable 100-byte puts (each padded to a block), all deleted, then
/// `compact()`. The active segment is never filled at the default 256 MiB, so `compact` must
/// seal and compact it: almost nothing is left on disk. (The store had 5,000 keys; 1,200
/// take the same path, in a quarter of the fdatasyncs: this test was 12 s of `cargo test`.)
#[test]
fn compact_gives_back_the_active_segment_of_a_small_store() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .background_compaction(false)
        .durability(Durability::Sync);
    let store = Store::open_with(dir.path(), opts).unwrap();
    for i in 0..1200u32 {
        store.put(format!("key/{i}"), [7u8; 100]).unwrap();
    }
    for i in 0..1200u32 {
        store.delete(format!("key/{i}")).unwrap();
    }
    let before = store.stats().disk_bytes;
    // 2,400 records, each a block of its own.
    assert!(before > 9 << 20, "{before}");
    let report = store.compact().unwrap();
    assert_eq!(report.segments_compacted, 1, "{report:?}");
    let after = store.stats().disk_bytes;
    // Every record dead and no other file: the segment goes, tombstones and all (0 bytes today).
    assert!(after <= 4096, "{after} bytes left on disk");
    assert_eq!(store.len(), 0);
    store.put("again", "works").unwrap();
    drop(store);
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.get("again").unwrap().unwrap(), b"works");
}

/// `seal` seals the active segment; `compact` leaves a mostly live active segment unsealed.
#[test]
fn seal_is_explicit_and_compact_seals_only_a_dead_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().background_compaction(false);
    let store = Store::open_with(dir.path(), opts).unwrap();
    assert!(!store.seal().unwrap(), "nothing written: nothing to seal");
    store.put("a", [1u8; 5000]).unwrap();
    store.compact().unwrap();
    store.put("b", [2u8; 5000]).unwrap();
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert!(store.seal().unwrap());
    store.put("c", "3").unwrap();
    let more = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(more, files + 1, "a write after seal starts a new segment");
    let store = {
        drop(store);
        Store::open(dir.path()).unwrap()
    };
    assert_eq!(store.len(), 3);
}

/// The four reasons `Stats` gives for dead bytes add up to them.
fn assert_dead_split(s: &Stats) {
    assert_eq!(
        s.reclaimable_bytes + s.below_threshold_bytes + s.active_dead_bytes + s.blob_overhead_bytes,
        s.dead_bytes,
        "{s:?}"
    );
}

#[test]
fn compact_with_a_lower_threshold_takes_what_the_default_leaves_and_stats_say_so() {
    let dir = TempDir::new().unwrap();
    // The default threshold (0.5); records packed (buffered), so that the sealed segment's dead
    // bytes are the deleted values, its header and its footer.
    let opts = common::store::small()
        .background_compaction(false)
        .durability(Durability::Buffered);
    let store = Store::open_with(dir.path(), opts).unwrap();
    let len = 8000usize;
    let mut model = HashMap::new();
    for i in 0..100 {
        store.put(key(i), value(&key(i), 0, len)).unwrap();
        model.insert(key(i), value(&key(i), 0, len));
    }
    for i in (0..100).step_by(7) {
        assert!(store.delete(key(i)).unwrap());
        model.remove(&key(i));
    }
    assert!(store.seal().unwrap());
    let one = record_len(key(0).len() as u64, len as u64);
    let deleted = 100 - model.len() as u64; // 15: about 15 % of the segment dead

    let s = store.stats();
    assert_eq!(s.compaction_threshold, 0.5);
    assert_eq!(s.reclaimable_bytes, 0, "{s:?}");
    assert_eq!(
        (s.active_dead_bytes, s.blob_overhead_bytes),
        (0, 0),
        "{s:?}"
    );
    assert!(
        s.below_threshold_bytes >= deleted * one
            && s.below_threshold_bytes < deleted * one + (64 << 10),
        "the deleted values (and the header and footer): {s:?}"
    );
    assert_dead_split(&s);

    // The store's threshold: nothing to do, as `reclaimable_bytes` said.
    let r = store.compact().unwrap();
    assert_eq!((r.segments_compacted, r.bytes_freed), (0, 0), "{r:?}");
    assert_eq!(store.stats().disk_bytes, s.disk_bytes);

    // A threshold of 0.1 for this call: the segment is rewritten, its dead bytes given back.
    let r = store
        .compact_with(podstore::CompactOptions::new().threshold(0.1))
        .unwrap();
    assert_eq!(r.segments_compacted, 1, "{r:?}");
    let given_back = r.bytes_freed - r.bytes_copied;
    assert!(
        given_back >= s.below_threshold_bytes
            && given_back <= s.below_threshold_bytes + s.tombstone_bytes,
        "given back {given_back}, predicted {} (+ dropped tombstones): {r:?}",
        s.below_threshold_bytes
    );
    let after = store.stats();
    assert_eq!(after.below_threshold_bytes, 0, "{after:?}");
    assert_dead_split(&after);
    check_all(&store, &model, "after compact_with");

    // The threshold is checked, and a read-only store refuses.
    for bad in [0.0, -0.5, 1.5, f64::NAN] {
        let opts = podstore::CompactOptions::new().threshold(bad);
        assert!(
            matches!(
                store.compact_with(opts),
                Err(podstore::Error::InvalidOptions(_))
            ),
            "{bad}"
        );
    }
    store.close().unwrap();
    let ro = Store::open_with(dir.path(), Options::default().read_only(true)).unwrap();
    assert!(matches!(
        ro.compact_with(podstore::CompactOptions::new().threshold(1.0)),
        Err(podstore::Error::ReadOnly)
    ));
}

#[test]
fn stats_split_dead_bytes_of_blob_files_and_the_active_segment() {
    let dir = TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    // A blob file (a large value put durably) holds a header and a footer besides its value.
    let big = value(b"big", 0, 2 << 20);
    store.put("big", &big).unwrap();
    store.put("small", value(b"small", 0, 100_000)).unwrap();
    let s = store.stats();
    assert_eq!(s.blob_files, 1);
    assert!(s.blob_overhead_bytes > 0, "{s:?}");
    assert_eq!(s.reclaimable_bytes, 0, "{s:?}");
    assert_dead_split(&s);

    // Overwritten: the whole blob file is reclaimable, and so is the active segment once a
    // quarter of it (the store's threshold here) is dead.
    store.put("big", "now small").unwrap();
    store.put("small", "now small too").unwrap();
    let s = store.stats();
    assert_eq!(s.blob_overhead_bytes, 0, "{s:?}");
    assert!(s.reclaimable_bytes > (2 << 20) + 100_000, "{s:?}");
    assert_eq!(s.active_dead_bytes, 0, "{s:?}");
    assert_dead_split(&s);
    let r = store.compact().unwrap();
    assert_eq!(
        (r.blob_files_removed, r.segments_compacted),
        (1, 1),
        "{r:?}"
    );
    assert!(
        r.bytes_freed - r.bytes_copied >= s.reclaimable_bytes,
        "{r:?} {s:?}"
    );
    assert_eq!(store.get("big").unwrap().unwrap(), b"now small");
}

/// A store that never fills a segment: each `compact` seals the active segment, whose header,
/// footer and block padding count as dead bytes. Rewriting it gave back nothing (a file of the
/// same size) and happened again at every call; a segment is now compacted only when a rewrite
/// would give bytes back, and `Stats` counts it as reclaimable by the same rule.
#[test]
fn a_small_store_is_not_rewritten_by_every_compact() {
    for mode in common::store::MODES {
        let dir = TempDir::new().unwrap();
        let o = Options::default()
            .io_mode(mode)
            .background_compaction(false);
        let store = Store::open_with(dir.path(), o).unwrap();
        for i in 0..10u32 {
            store
                .put(i.to_be_bytes(), value(&i.to_be_bytes(), 0, 100))
                .unwrap();
        }
        // The first call seals the active segment (its preallocated room is dead) and copies
        // its records into a segment of their size.
        store.compact().unwrap();
        for round in 0..3 {
            let stats = store.stats();
            assert_eq!(
                stats.reclaimable_bytes, 0,
                "{mode:?} round {round}: {stats:?}"
            );
            let report = store.compact().unwrap();
            assert_eq!(
                report.segments_compacted, 0,
                "{mode:?} round {round}: {report:?}"
            );
            assert_eq!(report.bytes_copied, 0, "{mode:?} round {round}: {report:?}");
        }
        // A store with something to give back still gets it.
        for i in 0..9u32 {
            store.delete(i.to_be_bytes()).unwrap();
        }
        let report = store.compact().unwrap();
        assert!(report.segments_compacted > 0, "{mode:?}: {report:?}");
        assert_eq!(
            store.get(9u32.to_be_bytes()).unwrap(),
            Some(value(&9u32.to_be_bytes(), 0, 100))
        );
        for i in 0..9u32 {
            assert_eq!(store.get(i.to_be_bytes()).unwrap(), None);
        }
    }
}
