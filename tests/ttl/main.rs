//! Values that expire (issue 39): every read path, listing, conditional writes, reopen and
//! compaction treat an expired value as absent, judged by a clock the test moves
//! (`podstore::testing::MockClock`); `model.rs` checks random sequences against a model.

#[path = "../common/mod.rs"]
mod common;
mod model;

use std::io::Write;
use std::time::{Duration, SystemTime};

use common::store::{TestStore, quiet, small};
use podstore::testing::MockClock;
use podstore::{Batch, Condition, Error, IoMode, Options, PutOptions, Store};

const HOUR: Duration = Duration::from_secs(3600);

fn ttl(d: Duration) -> PutOptions {
    PutOptions::new().ttl(d)
}

/// A store on a clock the test moves, whose values of 128 KiB and more go to blob files.
fn store_with(opts: Options) -> (TestStore, MockClock) {
    let clock = MockClock::new();
    let opts = quiet(opts)
        .large_value_threshold(128 << 10)
        .testing_clock(clock.clone());
    (TestStore::new(opts), clock)
}

/// Runs `test` in both I/O modes.
fn in_both_modes(test: impl Fn(IoMode)) {
    for mode in [IoMode::Direct, IoMode::Buffered] {
        test(mode);
    }
}

/// Every read of `key` says it has no value.
fn assert_absent(store: &Store, key: &str) {
    assert_eq!(store.get(key).unwrap().map(|v| v.len()), None, "get {key}");
    assert_eq!(
        store.get_bytes(key).unwrap().map(|v| v.len()),
        None,
        "get_bytes {key}"
    );
    let mut buf = b"junk".to_vec();
    assert!(!store.get_into(key, &mut buf).unwrap(), "get_into {key}");
    assert_eq!(
        store.get_range(key, 0..1).unwrap().map(|v| v.len()),
        None,
        "get_range {key}"
    );
    assert!(store.reader(key).unwrap().is_none(), "reader {key}");
    assert_eq!(store.metadata(key).unwrap(), None, "metadata {key}");
    assert!(
        store.get_with_metadata(key).unwrap().is_none(),
        "get_with_metadata {key}"
    );
    assert!(!store.contains(key).unwrap(), "contains {key}");
    assert_eq!(store.value_len(key).unwrap(), None, "value_len {key}");
    assert_eq!(
        store.value_len_bound(key).unwrap(),
        None,
        "value_len_bound {key}"
    );
    assert!(store.get_cached(key).unwrap().is_none(), "get_cached {key}");
    assert!(
        store.keys().all(|k| k.unwrap() != key.as_bytes()),
        "listed {key}"
    );
}

/// Every read of `key` gives `value`.
fn assert_value(store: &Store, key: &str, value: &[u8]) {
    assert_eq!(store.get(key).unwrap().as_deref(), Some(value), "get {key}");
    assert_eq!(
        store.get_bytes(key).unwrap().as_deref(),
        Some(value),
        "get_bytes {key}"
    );
    let n = value.len().min(3) as u64;
    assert_eq!(
        store.get_range(key, 0..n).unwrap().as_deref(),
        Some(&value[..n as usize]),
        "get_range {key}"
    );
    let r = store.reader(key).unwrap().expect("reader");
    let mut buf = vec![0u8; value.len()];
    r.read_exact_at(0, &mut buf).unwrap();
    assert!(buf == value, "reader {key}");
    assert_eq!(
        store.metadata(key).unwrap().unwrap().len(),
        value.len() as u64
    );
    assert!(store.contains(key).unwrap());
    assert!(
        store.keys().any(|k| k.unwrap() == key.as_bytes()),
        "listed {key}"
    );
}

#[test]
fn an_expired_value_is_absent_to_every_read_at_its_instant() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        store.put_with("short", b"s", &ttl(HOUR)).unwrap();
        store.put("plain", b"p").unwrap();
        let big = vec![7u8; 300_000]; // a blob file of its own (above the large value threshold)
        store.put_with("big", &big, &ttl(HOUR)).unwrap();
        let at = store
            .metadata("short")
            .unwrap()
            .unwrap()
            .expires_at()
            .unwrap();
        assert_value(&store, "short", b"s");
        assert_value(&store, "big", &big);
        assert_eq!(store.len(), 3);
        let now = SystemTime::now();
        let to_at = at.duration_since(now).unwrap();
        // Ten seconds before its instant: still there (the exact instant is the unit tests'
        // business: this clock runs on while the test reads). Past it: gone.
        clock.advance(to_at - Duration::from_secs(10));
        assert_value(&store, "short", b"s");
        clock.advance(Duration::from_secs(20));
        assert_absent(&store, "short");
        // Put a little after `short`: it expires a little after it.
        clock.advance(HOUR);
        assert_absent(&store, "big");
        assert_value(&store, "plain", b"p");
        assert_eq!(store.len(), 1);
        assert!(
            !store.delete("short").unwrap(),
            "an expired key has nothing to delete"
        );
        // Reopened: still expired (the expiry is on disk, and comes back from footers and scans).
        let store = t.reopen(store);
        assert_absent(&store, "short");
        assert_absent(&store, "big");
        store.seal().unwrap();
        let store = t.reopen(store);
        assert_absent(&store, "short");
        assert_value(&store, "plain", b"p");
    });
}

#[test]
fn expiry_is_kept_through_reopen_seal_and_compaction() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        let opts = ttl(HOUR);
        for i in 0..50 {
            store
                .put_with(format!("k{i}"), vec![i as u8; 100 + i * 37], &opts)
                .unwrap();
        }
        store.put_with("big", vec![1u8; 300_000], &opts).unwrap();
        let want = store.metadata("k3").unwrap().unwrap().expires_at();
        assert!(want.is_some());
        store.seal().unwrap();
        let store = t.reopen(store);
        assert_eq!(store.metadata("k3").unwrap().unwrap().expires_at(), want);
        // Overwrite half, so that compaction moves the rest.
        for i in 0..25 {
            store.put(format!("k{i}"), b"new").unwrap();
        }
        store.seal().unwrap();
        store.compact().unwrap();
        for i in 25..50 {
            let key = format!("k{i}");
            assert_eq!(
                store.get(&key).unwrap().unwrap(),
                vec![i as u8; 100 + i * 37]
            );
            assert!(
                store
                    .metadata(&key)
                    .unwrap()
                    .unwrap()
                    .expires_at()
                    .is_some()
            );
        }
        assert_eq!(store.metadata("k0").unwrap().unwrap().expires_at(), None);
        clock.advance(2 * HOUR);
        for i in 25..50 {
            assert_absent(&store, &format!("k{i}"));
        }
        assert_value(&store, "k0", b"new");
        assert_absent(&store, "big");
        let store = t.reopen(store);
        assert_absent(&store, "k30");
        assert_eq!(store.len(), 25);
    });
}

#[test]
fn conditional_writes_see_an_expired_value_as_absent() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        let v = store.put_with("lock", b"a", &ttl(HOUR)).unwrap();
        assert!(!store.put_if_absent("lock", b"b").unwrap());
        assert!(matches!(
            store.put_if("lock", b"b", Condition::Absent),
            Err(Error::ConditionFailed { .. })
        ));
        clock.advance(HOUR);
        // Its version no longer holds: the key has no value.
        assert!(matches!(
            store.put_if("lock", b"b", Condition::Version(v)),
            Err(Error::ConditionFailed { current: None, .. })
        ));
        assert!(store.delete_if("lock", v).is_err());
        assert!(store.put_if_absent_with("lock", b"c", &ttl(HOUR)).unwrap());
        assert_eq!(store.get("lock").unwrap().unwrap(), b"c");
        clock.advance(HOUR);
        store.put_if("lock", b"d", Condition::Absent).unwrap();
        assert_eq!(store.get("lock").unwrap().unwrap(), b"d");
        assert_eq!(store.metadata("lock").unwrap().unwrap().expires_at(), None);
        // A batch's condition too.
        store.put_with("b", b"1", &ttl(HOUR)).unwrap();
        clock.advance(HOUR);
        let mut batch = Batch::new();
        batch.put_if("b", b"2", Condition::Absent);
        store.write(&batch).unwrap();
        assert_eq!(store.get("b").unwrap().unwrap(), b"2");
    });
}

#[test]
fn an_expired_overwrite_does_not_bring_the_older_value_back() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        store.put("k", b"forever").unwrap();
        store.seal().unwrap();
        store.put_with("k", b"brief", &ttl(HOUR)).unwrap();
        store.seal().unwrap();
        clock.advance(2 * HOUR);
        assert_absent(&store, "k");
        store.compact().unwrap();
        assert_absent(&store, "k");
        let store = t.reopen(store);
        assert_absent(&store, "k");
        store.compact().unwrap();
        let store = t.reopen(store);
        assert_absent(&store, "k");
    });
}

#[test]
fn batches_writers_and_the_default_ttl_expire() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode).default_ttl(Some(HOUR)));
        let store = t.open();
        store.put("default", b"d").unwrap();
        store
            .put_with("never", b"n", &PutOptions::new().no_expiry())
            .unwrap();
        let mut batch = Batch::new();
        batch.put_with("batched", b"b", &ttl(2 * HOUR)).put_with(
            "batched-never",
            b"b",
            &PutOptions::new().no_expiry(),
        );
        store.write(&batch).unwrap();
        let mut w = store.writer_with("streamed", &ttl(2 * HOUR)).unwrap();
        w.write_all(&vec![3u8; 200_000]).unwrap();
        w.finish().unwrap();
        let mut w = store.writer("streamed-default").unwrap();
        w.write_all(&vec![4u8; 200_000]).unwrap();
        w.finish().unwrap();
        for k in ["default", "batched", "streamed", "streamed-default"] {
            assert!(
                store.metadata(k).unwrap().unwrap().expires_at().is_some(),
                "{k}"
            );
        }
        for k in ["never", "batched-never"] {
            assert_eq!(
                store.metadata(k).unwrap().unwrap().expires_at(),
                None,
                "{k}"
            );
        }
        clock.advance(HOUR + Duration::from_secs(1));
        assert_absent(&store, "default");
        assert_absent(&store, "streamed-default");
        assert_value(&store, "batched", b"b");
        assert_value(&store, "streamed", &vec![3u8; 200_000]);
        let store = t.reopen(store);
        assert_value(&store, "streamed", &vec![3u8; 200_000]);
        clock.advance(HOUR);
        assert_absent(&store, "batched");
        assert_absent(&store, "streamed");
        assert_value(&store, "never", b"n");
        assert_value(&store, "batched-never", b"b");
    });
}

#[test]
fn an_expiry_past_the_year_9999_is_refused() {
    in_both_modes(|mode| {
        let (t, _clock) = store_with(small().io_mode(mode));
        let store = t.open();
        let far = SystemTime::UNIX_EPOCH + Duration::from_secs(300_000_000_000);
        let err = store
            .put_with("k", b"v", &PutOptions::new().expires_at(far))
            .unwrap_err();
        assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
        assert_eq!(store.get("k").unwrap(), None);
    });
}

#[test]
fn compaction_reclaims_expired_values_and_stats_count_them() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        let opts = ttl(HOUR);
        let value = vec![9u8; 2000];
        for i in 0..400 {
            store.put_with(format!("e{i:03}"), &value, &opts).unwrap();
        }
        store.put("keep", b"k").unwrap();
        store.put_with("big", vec![1u8; 300_000], &opts).unwrap();
        store.seal().unwrap();
        let before = store.stats();
        assert_eq!((before.expired_keys, before.expired_bytes), (0, 0));
        assert_eq!(before.live_keys, 402);
        clock.advance(HOUR);
        let expired = store.stats();
        assert_eq!(expired.expired_keys, 401);
        assert_eq!(expired.live_keys, 1);
        // 400 records of a 40-byte header, a 4-byte key, 2000 bytes and one chunk crc, and the
        // blob's record.
        let blob_record = 40 + 3 + 300_000 + 4 * 300_000u64.div_ceil(4096);
        assert_eq!(
            expired.expired_bytes,
            400 * (40 + 4 + 2000 + 4) + blob_record
        );
        let report = store.compact().unwrap();
        assert_eq!(report.expired_dropped, 400, "{report:?}");
        assert_eq!(report.records_copied, 1, "{report:?}");
        assert_eq!(report.blob_files_removed, 1, "{report:?}");
        let after = store.stats();
        assert_eq!((after.expired_keys, after.expired_bytes), (0, 0));
        assert_eq!(after.expired_reclaimed_bytes, expired.expired_bytes);
        assert_eq!(after.blob_files, 0);
        // Zeroes written ahead of the active segment's end are not data.
        let used = |s: &podstore::Stats| s.disk_bytes - s.preallocated_bytes;
        assert!(
            used(&after) < used(&before) / 10,
            "{} of {}",
            used(&after),
            used(&before)
        );
        assert_value(&store, "keep", b"k");
        assert_absent(&store, "e000");
        let store = t.reopen(store);
        assert_absent(&store, "e399");
        assert_absent(&store, "big");
        assert_eq!(store.len(), 1);
    });
}

#[test]
fn a_dropped_expired_put_leaves_a_tombstone_while_an_older_value_is_left() {
    in_both_modes(|mode| {
        let (t, clock) = store_with(small().io_mode(mode));
        let store = t.open();
        // The old value in one segment, the expiring overwrite in the next, then more writes
        // so that the overwrite's segment is compacted while the old one stays.
        store.put("k", vec![1u8; 1000]).unwrap();
        for i in 0..200 {
            store.put(format!("filler{i}"), vec![2u8; 2000]).unwrap();
        }
        store.seal().unwrap();
        store.put_with("k", b"brief", &ttl(HOUR)).unwrap();
        store
            .put_with("big", vec![3u8; 300_000], &ttl(HOUR))
            .unwrap();
        store.seal().unwrap();
        clock.advance(HOUR);
        // A threshold that takes the segment of expired values (all dead) and not the
        // fillers' (mostly live).
        let report = store
            .compact_with(podstore::CompactOptions::new().threshold(0.9))
            .unwrap();
        assert_eq!(report.records_copied, 0, "{report:?}");
        assert!(report.expired_dropped >= 1, "{report:?}");
        assert!(report.tombstones_copied >= 1, "{report:?}");
        assert_absent(&store, "k");
        let store = t.reopen(store);
        assert_absent(&store, "k");
        assert_absent(&store, "big");
        // Once the old value's segment is compacted too, the tombstone goes in turn.
        store
            .compact_with(podstore::CompactOptions::new().threshold(0.01))
            .unwrap();
        let store = t.reopen(store);
        assert_absent(&store, "k");
        assert_value(&store, "filler7", &[2u8; 2000]);
    });
}
