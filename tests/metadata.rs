//! Object metadata (`Store::metadata`, `get_with_metadata`, `ValueReader::metadata`, the version
//! `put` and `finish` return) and conditional writes (`put_if`, `delete_if`, `finish_if`,
//! conditional batches): what they report across reopen, compaction, checkpoint and crashes,
//! and that conditions hold under concurrent writers.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Barrier;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::compat;
use common::store::{MODES, TestStore, quiet, small_with};
use podstore::{Batch, Condition, Durability, Error, IoMode, Options, Store, ValueMeta, Version};

/// Options for `mode`: small segments, no background threads (the tests compact and flush when
/// they mean to), the read cache on or off.
fn opts(mode: IoMode, durability: Durability, cache: bool) -> Options {
    let o = quiet(small_with(mode, durability)).large_value_threshold(64 << 10);
    if cache { o } else { o.cache_capacity(0) }
}

fn configs() -> impl Iterator<Item = (String, Options)> {
    MODES.into_iter().flat_map(|mode| {
        [(Durability::Sync, true), (Durability::Buffered, false)]
            .into_iter()
            .map(move |(d, cache)| {
                (
                    format!("{mode:?}/{d:?}/cache {cache}"),
                    opts(mode, d, cache),
                )
            })
    })
}

/// The value of the `i`th write of a key: its lengths cross a 4 KiB chunk, the whole-record
/// read (64 KiB) and the large-value threshold (a blob file).
fn value(i: usize) -> Vec<u8> {
    let len = [0usize, 10, 5000, 70_000, 100][i % 5];
    vec![(i % 251) as u8; len]
}

/// Every way of reading a key's metadata agrees with `want`.
#[track_caller]
fn check_meta(store: &Store, key: &[u8], want: &ValueMeta, what: &str) {
    assert_eq!(
        store.metadata(key).unwrap().as_ref(),
        Some(want),
        "{what}: metadata"
    );
    let (bytes, meta) = store.get_with_metadata(key).unwrap().expect("present");
    assert_eq!(&meta, want, "{what}: get_with_metadata");
    assert_eq!(bytes.len() as u64, want.len(), "{what}: value length");
    let reader = store.reader(key).unwrap().expect("present");
    assert_eq!(reader.metadata(), want, "{what}: reader");
    // Twice: the second from the read cache where it keeps the value or the key.
    assert_eq!(
        store.metadata(key).unwrap().as_ref(),
        Some(want),
        "{what}: metadata again"
    );
}

#[test]
fn versions_grow_and_metadata_reports_each_write() {
    for (what, opts) in configs() {
        let t = TestStore::new(opts);
        let store = t.open();
        let mut last: Option<Version> = None;
        for i in 0..10 {
            let before = SystemTime::now();
            let v = store.put("k", value(i)).unwrap();
            let after = SystemTime::now();
            assert!(last < Some(v), "{what}: version {v} after {last:?}");
            last = Some(v);
            let meta = store.metadata("k").unwrap().expect("present");
            assert_eq!(meta.version(), v, "{what}");
            assert_eq!(meta.len(), value(i).len() as u64, "{what}");
            // The time the write was accepted (the clock, to the microsecond; a write within
            // a microsecond of the one before it gets the next microsecond).
            let at = meta.written_at();
            assert!(
                at + Duration::from_millis(1) >= before && at <= after + Duration::from_millis(1),
                "{what}: written at {at:?}, put between {before:?} and {after:?}"
            );
            check_meta(&store, b"k", &meta, &what);
        }
        // A streamed value's version is the one `finish` returned.
        let mut w = store.writer("streamed").unwrap();
        w.write_all(&[3u8; 9000]).unwrap();
        let v = w.finish().unwrap();
        assert!(Some(v) > last, "{what}");
        let meta = store.metadata("streamed").unwrap().unwrap();
        assert_eq!((meta.version(), meta.len()), (v, 9000), "{what}");
        // A batch's values: versions in batch order, all after the writes before it.
        let mut batch = Batch::new();
        batch.put("b1", "x").put("b2", "y");
        store.write(&batch).unwrap();
        let (b1, b2) = (
            store.metadata("b1").unwrap().unwrap().version(),
            store.metadata("b2").unwrap().unwrap().version(),
        );
        assert!(v < b1 && b1 < b2, "{what}: {v} {b1} {b2}");
        assert_eq!(store.metadata("missing").unwrap(), None);
        assert!(store.get_with_metadata("missing").unwrap().is_none());
        assert!(store.delete("k").unwrap());
        assert_eq!(store.metadata("k").unwrap(), None, "{what}: deleted");
        store.close().unwrap();
    }
}

/// Every key's metadata.
fn all_meta(store: &Store) -> BTreeMap<Vec<u8>, ValueMeta> {
    store
        .keys()
        .map(|k| {
            let k = k.unwrap();
            let m = store.metadata(&k).unwrap().expect("listed");
            (k, m)
        })
        .collect()
}

#[test]
fn metadata_survives_reopen_compaction_and_checkpoint() {
    for (what, opts) in configs() {
        let t = TestStore::new(opts.clone().compaction_threshold(0.1));
        let store = t.open();
        for round in 0..3 {
            for k in 0..40 {
                store.put(format!("key/{k}"), value(k + round)).unwrap();
            }
        }
        for k in 0..20 {
            store.put(format!("key/{k}"), value(k)).unwrap();
        }
        for k in 30..35 {
            assert!(store.delete(format!("key/{k}")).unwrap());
        }
        let before = all_meta(&store);
        assert_eq!(before.len(), 35, "{what}");
        let store = t.reopen(store);
        assert_eq!(all_meta(&store), before, "{what}: reopened");

        let report = store.compact().unwrap();
        assert!(
            report.segments_compacted + report.blob_files_removed > 0,
            "{what}: nothing compacted: {report:?}"
        );
        assert_eq!(all_meta(&store), before, "{what}: compacted");
        let store = t.reopen(store);
        assert_eq!(all_meta(&store), before, "{what}: compacted and reopened");

        let copy = tempfile::tempdir().unwrap();
        let dest = copy.path().join("checkpoint");
        store.checkpoint(&dest).unwrap();
        let restored = Store::open_with(&dest, opts.clone()).unwrap();
        assert_eq!(all_meta(&restored), before, "{what}: checkpoint");
        restored.close().unwrap();
        store.close().unwrap();
    }
}

/// A reader may have seen a version that a crash then took back (a buffered write lost, or a
/// key deleted and its records compacted away): no later write of the key, after the crash and
/// a reopen, gets that version again.
#[test]
fn versions_never_repeat_for_a_key_across_crashes() {
    for mode in MODES {
        let t = TestStore::new(opts(mode, Durability::Buffered, true));
        let mut seen: BTreeMap<Version, Vec<u8>> = BTreeMap::new();
        let mut note = |store: &Store, key: &[u8]| {
            let (value, meta) = store.get_with_metadata(key).unwrap().expect("present");
            if let Some(old) = seen.insert(meta.version(), value.clone()) {
                assert_eq!(old, value, "{mode:?}: version {} reused", meta.version());
            }
        };
        for life in 0..4 {
            let store = t.open();
            for i in 0..30 {
                let key = format!("k{}", i % 3);
                store.put(&key, format!("life {life} write {i}")).unwrap();
                note(&store, key.as_bytes());
                if i == 10 {
                    store.flush().unwrap(); // part durable, the rest lost in the crash
                }
            }
            // A key written, read, deleted, and compacted away before the crash.
            store.put("gone", format!("life {life}")).unwrap();
            note(&store, b"gone");
            store.delete("gone").unwrap();
            store.flush().unwrap();
            store.seal().unwrap();
            store.compact().unwrap();
            store.put("k0", format!("life {life}, lost")).unwrap();
            note(&store, b"k0");
            store.simulate_crash();
        }
        let store = t.open();
        for key in ["k0", "k1", "k2", "gone"] {
            store.put(key, "after").unwrap();
            note(&store, key.as_bytes());
        }
        store.close().unwrap();
    }
}

#[test]
fn conditional_puts_and_deletes() {
    for (what, opts) in configs() {
        let t = TestStore::new(opts);
        let store = t.open();
        let v1 = store.put_if("k", "one", Condition::Absent).unwrap();
        let failed = store.put_if("k", "again", Condition::Absent).unwrap_err();
        assert!(
            matches!(&failed, Error::ConditionFailed { key, current: Some(c) } if key == b"k" && *c == v1),
            "{what}: {failed:?}"
        );
        let v2 = store.put_if("k", value(3), Condition::Version(v1)).unwrap();
        assert!(v2 > v1);
        // A stale version: refused, the value unchanged.
        let failed = store
            .put_if("k", "stale", Condition::Version(v1))
            .unwrap_err();
        assert!(
            matches!(failed, Error::ConditionFailed { current: Some(c), .. } if c == v2),
            "{what}"
        );
        assert_eq!(store.get("k").unwrap().unwrap(), value(3), "{what}");
        // A large value (a blob file) on a condition.
        let v3 = store
            .put_if("k", vec![9u8; 100_000], Condition::Version(v2))
            .unwrap();
        assert!(
            store
                .put_if("k", vec![8u8; 100_000], Condition::Version(v2))
                .is_err()
        );
        assert_eq!(store.get("k").unwrap().unwrap(), vec![9u8; 100_000]);
        // delete_if: the wrong version, a missing key, then the right one.
        assert!(matches!(
            store.delete_if("k", v2),
            Err(Error::ConditionFailed { current: Some(c), .. }) if c == v3
        ));
        assert!(matches!(
            store.delete_if("missing", v3),
            Err(Error::ConditionFailed { current: None, .. })
        ));
        store.delete_if("k", v3).unwrap();
        assert!(!store.contains("k").unwrap(), "{what}");
        assert!(matches!(
            store.put_if("k", "x", Condition::Version(v3)),
            Err(Error::ConditionFailed { current: None, .. })
        ));
        let v4 = store.put_if("k", "back", Condition::Absent).unwrap();
        assert!(v4 > v3);
        // finish_if: the streamed value is committed on its condition, else dropped.
        let mut w = store.writer("k").unwrap();
        w.write_all(&[1u8; 20_000]).unwrap();
        assert!(matches!(
            w.finish_if(Condition::Absent),
            Err(Error::ConditionFailed { current: Some(c), .. }) if c == v4
        ));
        let mut w = store.writer("k").unwrap();
        w.write_all(&[2u8; 20_000]).unwrap();
        let v5 = w.finish_if(Condition::Version(v4)).unwrap();
        assert_eq!(store.metadata("k").unwrap().unwrap().version(), v5);
        assert_eq!(store.get("k").unwrap().unwrap(), vec![2u8; 20_000]);
        // Nothing of the refused stream is left behind, after a reopen either.
        let store = t.reopen(store);
        assert_eq!(store.get("k").unwrap().unwrap(), vec![2u8; 20_000]);
        assert_eq!(store.metadata("k").unwrap().unwrap().version(), v5);
        store.close().unwrap();
    }
}

#[test]
fn conditional_batches_are_all_or_nothing() {
    for (what, opts) in configs() {
        let t = TestStore::new(opts);
        let store = t.open();
        let a = store.put("a", "1").unwrap();
        let b = store.put("b", "2").unwrap();
        let mut batch = Batch::new();
        batch
            .put_if("a", "10", Condition::Version(a))
            .put("plain", "p")
            .put_if("b", "20", Condition::Version(a)) // wrong: b's version is b
            .put_if("c", "30", Condition::Absent);
        let err = store.write(&batch).unwrap_err();
        assert!(
            matches!(&err, Error::ConditionFailed { key, current: Some(c) } if key == b"b" && *c == b),
            "{what}: {err:?}"
        );
        // Nothing of it was written.
        assert_eq!(store.get("a").unwrap().unwrap(), b"1");
        assert_eq!(store.get("b").unwrap().unwrap(), b"2");
        assert!(!store.contains("plain").unwrap());
        assert!(!store.contains("c").unwrap());
        assert_eq!(store.metadata("a").unwrap().unwrap().version(), a);

        let mut batch = Batch::new();
        batch
            .put_if("a", "10", Condition::Version(a))
            .delete_if("b", b)
            .put_if("c", "30", Condition::Absent);
        store.write(&batch).unwrap();
        assert_eq!(store.get("a").unwrap().unwrap(), b"10");
        assert!(!store.contains("b").unwrap());
        assert_eq!(store.get("c").unwrap().unwrap(), b"30");
        // Conditions are checked against the store, not earlier operations of the batch.
        let mut batch = Batch::new();
        batch.put("d", "1").put_if("d", "2", Condition::Version(a));
        assert!(store.write(&batch).is_err());
        assert!(!store.contains("d").unwrap(), "{what}");
        let store = t.reopen(store);
        assert_eq!(store.get("a").unwrap().unwrap(), b"10");
        assert!(!store.contains("b").unwrap());
        assert!(!store.contains("plain").unwrap());
        store.close().unwrap();
    }
}

/// Increments `key` by one, `times` times, each with a compare-and-swap retried until it wins;
/// returns the number of successful swaps.
fn increment(store: &Store, key: &[u8], times: usize, large: bool) -> usize {
    let mut won = 0;
    while won < times {
        let (bytes, meta) = store.get_with_metadata(key).unwrap().expect("present");
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        let mut next = (n + 1).to_le_bytes().to_vec();
        if large {
            next.resize(70_000, 0); // a blob file
        }
        match store.put_if(key, &next, Condition::Version(meta.version())) {
            Ok(_) => won += 1,
            Err(Error::ConditionFailed { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    won
}

/// N threads racing compare-and-swap increments of one key end with exactly N × k increments:
/// no swap is lost or applied on a stale version. Other threads meanwhile overwrite keys of
/// their own unconditionally (lazy overwrites with direct I/O) and write conditional batches.
#[test]
fn racing_compare_and_swap_increments_are_all_counted() {
    const THREADS: usize = 4;
    const TIMES: usize = 40;
    for (what, opts) in configs() {
        for large in [false, true] {
            let t = TestStore::new(opts.clone());
            let store = t.open();
            store.put("counter", 0u64.to_le_bytes()).unwrap();
            store.put("pair/a", 0u64.to_le_bytes()).unwrap();
            let barrier = Barrier::new(THREADS + 1);
            let won: usize = std::thread::scope(|s| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            increment(&store, b"counter", TIMES, large)
                        })
                    })
                    .collect();
                // Noise: unconditional overwrites of other keys and batches with conditions.
                s.spawn(|| {
                    barrier.wait();
                    for i in 0..200u64 {
                        store
                            .put(format!("noise/{}", i % 7), i.to_le_bytes())
                            .unwrap();
                    }
                });
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            assert_eq!(won, THREADS * TIMES, "{what}");
            let n = u64::from_le_bytes(
                store.get("counter").unwrap().unwrap()[..8]
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(n as usize, THREADS * TIMES, "{what}, large {large}");
            let store = t.reopen(store);
            let n = u64::from_le_bytes(
                store.get("counter").unwrap().unwrap()[..8]
                    .try_into()
                    .unwrap(),
            );
            assert_eq!(
                n as usize,
                THREADS * TIMES,
                "{what}, large {large}: reopened"
            );
            store.close().unwrap();
        }
    }
}

/// Threads moving units between accounts with conditional batches (both balances on their
/// versions): the total never changes, and every acknowledged transfer is in the result.
#[test]
fn racing_conditional_batches_conserve_a_total() {
    const ACCOUNTS: usize = 4;
    const THREADS: usize = 4;
    const TRANSFERS: usize = 30;
    for (what, opts) in configs() {
        let t = TestStore::new(opts);
        let store = t.open();
        let account = |i: usize| format!("account/{i}");
        for i in 0..ACCOUNTS {
            store.put(account(i), 100u64.to_le_bytes()).unwrap();
        }
        let read = |store: &Store, i: usize| {
            let (b, m) = store.get_with_metadata(account(i)).unwrap().unwrap();
            (u64::from_le_bytes(b[..].try_into().unwrap()), m.version())
        };
        let moved: Vec<Vec<(usize, usize)>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let store = &store;
                    s.spawn(move || {
                        let mut done = Vec::new();
                        let mut i = t;
                        while done.len() < TRANSFERS {
                            let (from, to) = (i % ACCOUNTS, (i * 7 + 1) % ACCOUNTS);
                            i += 1;
                            if from == to {
                                continue;
                            }
                            let (a, va) = read(store, from);
                            let (b, vb) = read(store, to);
                            let mut batch = Batch::new();
                            batch
                                .put_if(
                                    account(from),
                                    (a - 1).to_le_bytes(),
                                    Condition::Version(va),
                                )
                                .put_if(account(to), (b + 1).to_le_bytes(), Condition::Version(vb));
                            match store.write(&batch) {
                                Ok(()) => done.push((from, to)),
                                Err(Error::ConditionFailed { .. }) => {}
                                Err(e) => panic!("{e}"),
                            }
                        }
                        done
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut want = [100i64; ACCOUNTS];
        for (from, to) in moved.into_iter().flatten() {
            want[from] -= 1;
            want[to] += 1;
        }
        let store = t.reopen(store);
        for (i, w) in want.iter().enumerate() {
            assert_eq!(read(&store, i).0 as i64, *w, "{what}: account {i}");
        }
        store.close().unwrap();
    }
}

/// The old-format fixtures (written before versions were times) open as they are: their values
/// report `UNIX_EPOCH` as their time and their old sequence numbers as versions, which
/// compaction keeps; new writes get versions above every old one, with their real time.
#[test]
fn old_stores_report_the_epoch_and_keep_their_versions() {
    for fixture in [compat::FIXTURE_DIR, compat::FIXTURE_DIR_WITH_CATALOG] {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(&src).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        let opts = compat::options(IoMode::Buffered).compaction_threshold(0.01);
        let store = Store::open_with(dir.path(), opts.clone()).unwrap();
        let before = all_meta(&store);
        assert_eq!(before.len(), compat::expected_contents().len(), "{fixture}");
        for (key, meta) in &before {
            assert_eq!(meta.written_at(), UNIX_EPOCH, "{fixture}: {key:?}");
            assert!(
                meta.version().get() < 1 << 20,
                "{fixture}: {key:?} {meta:?}"
            );
        }
        let newest = before.values().map(|m| m.version()).max().unwrap();
        let now = SystemTime::now();
        let v = store.put("raw/1", "new").unwrap();
        assert!(v > newest);
        let meta = store.metadata("raw/1").unwrap().unwrap();
        assert!(
            meta.written_at() + Duration::from_secs(1) >= now,
            "{fixture}"
        );
        let report = store.compact().unwrap();
        assert!(report.segments_compacted > 0, "{fixture}: {report:?}");
        let store = {
            store.close().unwrap();
            Store::open_with(dir.path(), opts).unwrap()
        };
        let after = all_meta(&store);
        for (key, meta) in &before {
            if key.as_slice() != b"raw/1" {
                assert_eq!(after.get(key), Some(meta), "{fixture}: {key:?} compacted");
            }
        }
        assert_eq!(after[&b"raw/1"[..]], meta);
        store.close().unwrap();
    }
}

/// Keys sharing one fingerprint (`testing_hash_bits(0)`: only their records tell them apart):
/// threads racing compare-and-swap increments of their own keys and of a shared one, while plain
/// overwrites of other colliding keys leave lazy entries in the same run. Every key's count is
/// exact, and its metadata is its own record's.
#[test]
fn compare_and_swap_on_keys_sharing_a_fingerprint() {
    const THREADS: usize = 3;
    const TIMES: usize = 25;
    for mode in MODES {
        for cache in [0u64, 8 << 20] {
            let what = format!("{mode:?}, cache {cache}");
            let o = opts(mode, Durability::Sync, true)
                .testing_hash_bits(0)
                .cache_capacity(cache);
            let t = TestStore::new(o);
            let store = t.open();
            let own = |i: usize| format!("own/{i}{}", "x".repeat(i)).into_bytes();
            store.put(b"shared", 0u64.to_le_bytes()).unwrap();
            for i in 0..THREADS {
                store.put(own(i), 0u64.to_le_bytes()).unwrap();
            }
            std::thread::scope(|s| {
                for i in 0..THREADS {
                    let store = &store;
                    s.spawn(move || {
                        assert_eq!(increment(store, &own(i), TIMES, false), TIMES);
                        assert_eq!(increment(store, b"shared", TIMES, false), TIMES);
                    });
                }
                s.spawn(|| {
                    for n in 0..100u64 {
                        store
                            .put(format!("plain/{}", n % 4), n.to_le_bytes())
                            .unwrap();
                    }
                });
            });
            let count = |store: &Store, key: &[u8]| {
                u64::from_le_bytes(store.get(key).unwrap().unwrap()[..8].try_into().unwrap())
            };
            let store = t.reopen(store);
            assert_eq!(count(&store, b"shared"), (THREADS * TIMES) as u64, "{what}");
            let mut versions = Vec::new();
            for i in 0..THREADS {
                assert_eq!(count(&store, &own(i)), TIMES as u64, "{what}");
                versions.push(store.metadata(own(i)).unwrap().unwrap().version());
            }
            versions.push(store.metadata(b"shared").unwrap().unwrap().version());
            versions.sort();
            versions.dedup();
            assert_eq!(
                versions.len(),
                THREADS + 1,
                "{what}: each key its own record"
            );
            store.close().unwrap();
        }
    }
}
