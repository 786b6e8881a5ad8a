//! Integration tests of the public API of `podstore`, run in both I/O modes and, where it
//! changes the code path taken, with both durabilities.
//!
//! With `Durability::Sync` a value is read back from its segment file; with
//! `Durability::Buffered` a fresh value is usually still in the write buffer, so reads take the
//! in-memory path. Reopening a store always reads from disk.

mod common;
use common::compat;
use common::files::store_files;
use common::store::{TestStore as Fixture, assert_bytes_eq, label};
use common::{Random, XorShift};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use podstore::{
    Durability, Error, IoMode, MAX_KEY_LEN, MAX_VALUE_LEN, Options, RecoveryReport, Store,
};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// Value lengths around the 4096-byte checksum chunk, plus empty, tiny and multi-chunk values.
const VALUE_SIZES: [usize; 6] = [0, 1, 4095, 4096, 4097, 100_000];

/// The live contents a store should have: key -> value.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn modes() -> [IoMode; 2] {
    common::store::MODES
}

fn durabilities() -> [Durability; 2] {
    [Durability::Sync, Durability::Buffered]
}

/// Default options in every combination of I/O mode and durability.
fn configs() -> impl Iterator<Item = Options> {
    modes().into_iter().flat_map(|mode| {
        durabilities()
            .into_iter()
            .map(move |durability| Options::default().io_mode(mode).durability(durability))
    })
}

/// `len` deterministic pseudo-random bytes; different seeds give different bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    XorShift::new(seed).bytes(len)
}

/// Number of store files in the store directory: log segments (`seg-<16 hex digits>.pod`) and
/// blob files (`blob-…`, one large value each), the files [`RecoveryReport::sealed_segments`]
/// counts after a clean close.
fn store_file_count(fx: &Fixture) -> usize {
    store_files(fx.path()).len()
}

/// The value of `key`, which must be present.
#[track_caller]
fn get_present(store: &Store, key: &[u8]) -> Vec<u8> {
    store
        .get(key)
        .expect("get")
        .unwrap_or_else(|| panic!("key {:?} is missing", String::from_utf8_lossy(key)))
}

/// The whole value of `key` read through a [`podstore::ValueReader`].
#[track_caller]
fn read_through_reader(store: &Store, key: &[u8]) -> Vec<u8> {
    let mut reader = store.reader(key).expect("reader").expect("key present");
    let mut out = Vec::new();
    reader.read_to_end(&mut out).expect("read_to_end");
    assert_eq!(out.len() as u64, reader.len(), "reader.len()");
    out
}

/// The next `n` bytes of `reader`, which must have them.
#[track_caller]
fn read_n(reader: &mut impl Read, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    reader.read_exact(&mut out).expect("read_exact");
    out
}

/// Asserts that `store` holds exactly `model`, through every read method.
#[track_caller]
fn assert_contents(store: &Store, model: &Model, what: &str) {
    assert_eq!(store.len(), model.len(), "{what}: len()");
    assert_eq!(store.is_empty(), model.is_empty(), "{what}: is_empty()");
    let keys: Vec<Vec<u8>> = store.keys().map(|k| k.unwrap()).collect();
    assert!(keys.is_sorted(), "{what}: keys() in ascending order");
    let want: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert!(keys == want, "{what}: keys() gave {keys:?}, want {want:?}");
    for (key, value) in model {
        let name = String::from_utf8_lossy(&key[..key.len().min(32)]).into_owned();
        assert!(
            store.contains(key).expect("contains"),
            "{what}: contains {name}"
        );
        assert_eq!(
            store.value_len(key).expect("value_len"),
            Some(value.len() as u64),
            "{what}: value_len {name}"
        );
        assert_bytes_eq(
            &get_present(store, key),
            value,
            &format!("{what}: get {name}"),
        );
    }
}

/// Writes every entry of `model` to `store`.
#[track_caller]
fn put_all(store: &Store, model: &Model) {
    for (key, value) in model {
        store.put(key, value).expect("put");
    }
}

/// `get_range(key, range)` checked against the HTTP/S3 rule applied to the original value: an
/// end past the value is clamped to its end; a start past the end, or an end before the start,
/// must be `OutOfRange` for this value's length.
#[track_caller]
fn check_range(store: &Store, key: &[u8], value: &[u8], range: impl RangeBounds<u64>, what: &str) {
    let range = (range.start_bound().cloned(), range.end_bound().cloned());
    let len = value.len() as u64;
    let start = match range.0 {
        Bound::Included(s) => Some(s),
        Bound::Excluded(s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.1 {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => e,
        Bound::Unbounded => len,
    };
    let want = match start {
        Some(s) if s <= len && s <= end => Some(&value[s as usize..end.min(len) as usize]),
        _ => None,
    };
    match (want, store.get_range(key, range)) {
        (Some(want), Ok(Some(got))) => {
            assert_bytes_eq(&got, want, &format!("{what}: get_range {range:?}"))
        }
        (None, Err(Error::OutOfRange { len, key: k, .. })) => {
            assert_eq!(
                len,
                value.len() as u64,
                "{what}: OutOfRange len for {range:?}"
            );
            assert_eq!(k, key, "{what}: OutOfRange names the key");
        }
        (want, got) => panic!(
            "{what}: get_range {range:?} of a {}-byte value: want {:?} bytes, got {:?}",
            value.len(),
            want.map(<[u8]>::len),
            got.map(|v| v.map(|v| v.len()))
        ),
    }
}

/// Offsets where a range read changes behaviour: both ends of the value, chunk boundaries and
/// offsets just past the end.
fn interesting_offsets(len: u64) -> Vec<u64> {
    let mut offsets = vec![
        0,
        1,
        4095,
        4096,
        4097,
        8191,
        8192,
        8193,
        len / 2,
        len.saturating_sub(4097),
        len.saturating_sub(4096),
        len.saturating_sub(1),
        len,
        len + 1,
        u64::MAX,
    ];
    offsets.retain(|&o| o <= len + 1 || o == u64::MAX);
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

/// Every start and end bound built from the interesting offsets.
fn interesting_bounds(len: u64) -> Vec<Bound<u64>> {
    let offsets = interesting_offsets(len);
    let included = offsets.iter().map(|&o| Bound::Included(o));
    let excluded = offsets.iter().map(|&o| Bound::Excluded(o));
    std::iter::once(Bound::Unbounded)
        .chain(included)
        .chain(excluded)
        .collect()
}

/// `get_range` of a present key, for ranges inside its value.
#[track_caller]
fn range_of(store: &Store, key: &[u8], range: impl RangeBounds<u64>) -> Vec<u8> {
    let range = (range.start_bound().cloned(), range.end_bound().cloned());
    store
        .get_range(key, range)
        .expect("get_range")
        .expect("key present")
}

#[track_caller]
fn assert_out_of_range(result: podstore::Result<Option<Vec<u8>>>, start: u64, end: u64, len: u64) {
    match result {
        Err(Error::OutOfRange {
            key,
            start: s,
            end: e,
            len: l,
        }) => {
            assert_eq!((s, e, l), (start, end, len), "OutOfRange fields");
            assert!(!key.is_empty(), "OutOfRange names the key");
        }
        other => panic!(
            "want OutOfRange {{ start: {start}, end: {end}, len: {len} }}, got {:?}",
            other.map(|v| v.map(|v| v.len()))
        ),
    }
}

/// Calls every method that takes a key with `key` and returns what each one answered
/// (`None` where the call succeeded).
fn errors_for_key(store: &Store, key: &[u8]) -> Vec<(&'static str, Option<Error>)> {
    vec![
        ("put", store.put(key, b"value").err()),
        ("get", store.get(key).err()),
        ("get_range", store.get_range(key, 0..1).err()),
        ("reader", store.reader(key).err()),
        ("value_len", store.value_len(key).err()),
        ("contains", store.contains(key).err()),
        ("delete", store.delete(key).err()),
    ]
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

// ---------------------------------------------------------------------------------------------
// Opening, options, locking
// ---------------------------------------------------------------------------------------------

#[test]
fn fresh_store_is_empty() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        assert_eq!(store.path(), fx.path(), "{what}");
        assert_contents(&store, &Model::new(), &what);
        assert_eq!(store.get(b"k").unwrap(), None, "{what}");
        assert_eq!(store.get_range(b"k", 0..1).unwrap(), None, "{what}");
        assert!(store.reader(b"k").unwrap().is_none(), "{what}");
        assert_eq!(store.recovery(), &RecoveryReport::default(), "{what}");
        store.flush().unwrap();
        store.close().unwrap();
    }
}

#[test]
fn open_with_default_options_resolves_auto_io_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_ne!(store.io_mode(), IoMode::Auto);
    store.put(b"k", b"v").unwrap();
    let store = {
        store.close().unwrap();
        Store::open(dir.path()).unwrap()
    };
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn options_out_of_range_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let invalid = [
        Options::default().segment_size((1 << 20) - 1),
        Options::default().write_buffer_size(64 * KIB - 1),
        Options::default().write_buffer_size(64 * MIB + 1),
    ];
    for opts in invalid {
        let result = Store::open_with(dir.path(), opts.clone());
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{opts:?} gave {result:?}"
        );
    }
    let smallest = Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 * KIB);
    let store = Store::open_with(dir.path(), smallest).unwrap();
    store.put(b"k", b"v").unwrap();
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn second_open_of_an_open_store_is_locked() {
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let first = fx.open();
        first.put(b"k", b"v").unwrap();
        let attempts = [
            Store::open_with(fx.path(), fx.opts.clone()),
            Store::open(fx.path()),
        ];
        for attempt in attempts {
            match attempt {
                Err(Error::Locked { path }) => assert_eq!(path, fx.path(), "{mode:?}"),
                other => panic!("{mode:?}: second open gave {other:?}, want Locked"),
            }
        }
        // The failed attempts changed nothing.
        assert_eq!(first.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));

        first.close().unwrap();
        let second = fx.open();
        assert_eq!(second.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        drop(second);
        let third = fx.open();
        assert_eq!(third.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and values
// ---------------------------------------------------------------------------------------------

#[test]
fn put_then_read_back_every_value_size() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model: Model = VALUE_SIZES
            .iter()
            .map(|&n| (key(n), pattern(n, n as u64)))
            .collect();
        for (key, value) in &model {
            store.put(key, value).unwrap();
            assert_bytes_eq(&get_present(&store, key), value, &what);
            assert_bytes_eq(&read_through_reader(&store, key), value, &what);
        }
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        for (key, value) in &model {
            assert_bytes_eq(&read_through_reader(&store, key), value, &what);
        }
    }
}

#[test]
fn empty_value() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let mut store = fx.open();
        store.put(b"empty", b"").unwrap();
        for pass in ["before reopen", "after reopen"] {
            let what = format!("{what} {pass}");
            assert_eq!(store.get(b"empty").unwrap(), Some(vec![]), "{what}");
            assert_eq!(store.value_len(b"empty").unwrap(), Some(0), "{what}");
            assert!(store.contains(b"empty").unwrap(), "{what}");
            assert_eq!(store.len(), 1, "{what}");
            assert_eq!(
                store.get_range(b"empty", 0..0).unwrap(),
                Some(vec![]),
                "{what}"
            );
            assert_eq!(
                store.get_range(b"empty", ..).unwrap(),
                Some(vec![]),
                "{what}"
            );
            assert_eq!(
                store.get_range(b"empty", 0..1).unwrap(),
                Some(vec![]),
                "{what}: an end past the value is clamped"
            );
            assert_out_of_range(store.get_range(b"empty", 1..), 1, 0, 0);

            let mut reader = store.reader(b"empty").unwrap().expect("present");
            assert_eq!(reader.len(), 0, "{what}");
            assert!(reader.is_empty(), "{what}");
            assert_eq!(reader.read(&mut [0u8; 16]).unwrap(), 0, "{what}");
            store = fx.reopen(store);
        }
    }
}

#[test]
fn key_of_max_len_works() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        // Arbitrary bytes, zeroes included.
        let max_key = pattern(MAX_KEY_LEN, 4096);
        let value = pattern(5000, 1);
        store.put(&max_key, &value).unwrap();
        let model = Model::from([(max_key.clone(), value.clone())]);
        assert_contents(&store, &model, &what);
        check_range(&store, &max_key, &value, 4000..4200, &what);

        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        assert!(store.delete(&max_key).unwrap(), "{what}");
        assert!(store.is_empty(), "{what}");
    }
}

#[test]
fn empty_and_too_long_keys_are_rejected_by_every_method() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", b"v").unwrap();

        for (method, err) in errors_for_key(&store, b"") {
            assert!(
                matches!(err, Some(Error::EmptyKey)),
                "{what}: {method} with an empty key gave {err:?}"
            );
        }
        let long = vec![b'x'; MAX_KEY_LEN + 1];
        for (method, err) in errors_for_key(&store, &long) {
            assert!(
                matches!(err, Some(Error::KeyTooLarge { len, max })
                    if len == MAX_KEY_LEN + 1 && max == MAX_KEY_LEN),
                "{what}: {method} with a {}-byte key gave {err:?}",
                long.len()
            );
        }
        // Nothing was written by the rejected calls.
        let model = Model::from([(b"k".to_vec(), b"v".to_vec())]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn value_longer_than_max_value_len_is_rejected() {
    let len = usize::try_from(MAX_VALUE_LEN + 1).expect("64-bit target");
    // A zeroed allocation is mapped lazily: this costs address space, not memory, as long as
    // nothing touches the bytes (put must reject the value by its length alone).
    if Vec::<u8>::new().try_reserve_exact(len).is_err() {
        eprintln!("skipped: cannot reserve {len} bytes of address space");
        return;
    }
    let value = vec![0u8; len];
    let fx = Fixture::new(Options::default());
    let store = Store::open_with(fx.path(), fx.opts.clone()).unwrap();
    match store.put(b"k", &value) {
        Err(Error::ValueTooLarge { len: l, max }) => {
            assert_eq!((l, max), (MAX_VALUE_LEN + 1, MAX_VALUE_LEN))
        }
        other => panic!("put of a {len}-byte value gave {other:?}"),
    }
    assert!(store.is_empty());
}

#[test]
fn overwrite_keeps_the_last_value() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"other", b"unchanged").unwrap();
        let versions = [
            pattern(10_000, 1),
            pattern(5, 2),
            Vec::new(),
            pattern(4097, 3),
        ];
        for value in &versions {
            store.put(b"k", value).unwrap();
            assert_bytes_eq(&get_present(&store, b"k"), value, &what);
            assert_eq!(store.value_len(b"k").unwrap(), Some(value.len() as u64));
            assert_eq!(store.len(), 2, "{what}: overwriting must not add a key");
        }
        let model = Model::from([
            (b"k".to_vec(), versions.last().unwrap().clone()),
            (b"other".to_vec(), b"unchanged".to_vec()),
        ]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn delete_removes_the_key_and_reports_whether_it_existed() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        assert!(
            !store.delete(b"a").unwrap(),
            "{what}: delete of a missing key"
        );
        assert!(
            store.is_empty(),
            "{what}: deleting a missing key must not add it"
        );

        store.put(b"a", pattern(9000, 1)).unwrap();
        store.put(b"b", b"bee").unwrap();
        assert!(store.delete(b"a").unwrap(), "{what}");
        assert_eq!(store.get(b"a").unwrap(), None, "{what}");
        assert_eq!(store.get_range(b"a", 0..1).unwrap(), None, "{what}");
        assert!(store.reader(b"a").unwrap().is_none(), "{what}");
        assert_eq!(store.value_len(b"a").unwrap(), None, "{what}");
        assert!(!store.contains(b"a").unwrap(), "{what}");
        assert!(!store.delete(b"a").unwrap(), "{what}: second delete");
        let model = Model::from([(b"b".to_vec(), b"bee".to_vec())]);
        assert_contents(&store, &model, &what);

        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        assert!(!store.delete(b"a").unwrap(), "{what}: delete after reopen");

        store.put(b"a", b"again").unwrap();
        let model = Model::from([
            (b"a".to_vec(), b"again".to_vec()),
            (b"b".to_vec(), b"bee".to_vec()),
        ]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after second reopen"));
    }
}

#[test]
fn len_is_empty_contains_and_keys_track_every_operation() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let mut model = Model::new();
        let mut rng = XorShift::new(42);
        for step in 0..150 {
            let key = key(rng.below(20));
            if rng.below(3) == 0 {
                let existed = model.remove(&key).is_some();
                assert_eq!(store.delete(&key).unwrap(), existed, "{what} step {step}");
            } else {
                let value = pattern(rng.below(6000), step);
                store.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            assert_contents(&store, &model, &format!("{what} step {step}"));
        }
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));

        for key in model.keys() {
            assert!(store.delete(key).unwrap(), "{what}");
        }
        assert_contents(&store, &Model::new(), &format!("{what} all deleted"));
        let store = fx.reopen(store);
        assert_contents(
            &store,
            &Model::new(),
            &format!("{what} all deleted, reopened"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// get_range
// ---------------------------------------------------------------------------------------------

#[test]
fn get_range_matches_slices_for_every_bound_combination() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        for &size in &VALUE_SIZES {
            let value = pattern(size, size as u64 + 7);
            let key = key(size);
            store.put(&key, &value).unwrap();
            let bounds = interesting_bounds(size as u64);
            for &start in &bounds {
                for &end in &bounds {
                    check_range(&store, &key, &value, (start, end), &what);
                }
            }
        }
    }
}

#[test]
fn get_range_examples() {
    use Bound::{Excluded, Included, Unbounded};
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let store = fx.open();
        let v = pattern(10_000, 5);
        let len = v.len() as u64;
        store.put(b"k", &v).unwrap();
        let range = |r: (Bound<u64>, Bound<u64>)| range_of(&store, b"k", r);

        assert_eq!(range_of(&store, b"k", ..), v);
        assert_eq!(range_of(&store, b"k", 0..1), &v[..1]);
        assert_eq!(range_of(&store, b"k", 0..0), b"");
        assert_eq!(range_of(&store, b"k", ..0), b"");
        assert_eq!(range_of(&store, b"k", 5000..5000), b"");
        assert_eq!(range_of(&store, b"k", len..len), b"");
        assert_eq!(range_of(&store, b"k", len..), b"");
        assert_eq!(range_of(&store, b"k", len - 1..len), &v[9999..]);
        assert_eq!(range_of(&store, b"k", len - 1..), &v[9999..]);
        assert_eq!(range_of(&store, b"k", ..=len - 1), v);
        assert_eq!(range_of(&store, b"k", ..4096), &v[..4096]);
        assert_eq!(range_of(&store, b"k", 4095..4097), &v[4095..4097]);
        assert_eq!(range_of(&store, b"k", 4096..8192), &v[4096..8192]);
        assert_eq!(range_of(&store, b"k", 100..=8300), &v[100..=8300]);
        assert_eq!(range((Excluded(4095), Included(4096))), &v[4096..=4096]);
        assert_eq!(range((Excluded(4095), Excluded(4097))), &v[4096..4097]);
        assert_eq!(range((Excluded(8000), Unbounded)), &v[8001..]);
        assert_eq!(range((Unbounded, Included(0))), &v[..1]);
    }
}

#[test]
fn get_range_clamps_the_end_and_refuses_a_start_past_the_end() {
    use Bound::{Excluded, Included, Unbounded};
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let store = fx.open();
        let len = 10_000u64;
        let v = pattern(len as usize, 1);
        store.put(b"k", &v).unwrap();
        let range = |r: (Bound<u64>, Bound<u64>)| store.get_range(b"k", r);

        // An end past the value is clamped to its end (HTTP/S3 range requests).
        assert_eq!(range_of(&store, b"k", len..len + 1), b"");
        assert_eq!(range_of(&store, b"k", 0..len + 1), v);
        assert_eq!(range_of(&store, b"k", len - 1..=len), &v[9999..]);
        assert_eq!(range_of(&store, b"k", ..=len), v);
        assert_eq!(range_of(&store, b"k", ..=u64::MAX), v);
        assert_eq!(range_of(&store, b"k", 0..4096 * 4), v);
        // The README's first range read, on a value shorter than the range.
        store.put("small", vec![3u8; 267]).unwrap();
        assert_eq!(
            store.get_range("small", 0..4096).unwrap().unwrap().len(),
            267
        );

        // A start past the end is an error naming the key.
        assert_out_of_range(store.get_range(b"k", len + 1..), len + 1, len, len);
        assert_out_of_range(store.get_range(b"k", 20_000..30_000), 20_000, 30_000, len);
        match store.get_range(b"k", 20_000..30_000) {
            Err(e @ Error::OutOfRange { .. }) => {
                assert!(e.to_string().contains("\"k\""), "{e}")
            }
            other => panic!("{other:?}"),
        }
        // Start past the end of the range, inside the value.
        assert_out_of_range(range((Included(5), Excluded(3))), 5, 3, len);
        assert_out_of_range(range((Included(4097), Excluded(4096))), 4097, 4096, len);
        // A start that overflows u64 once turned into a start..end pair.
        assert_out_of_range(range((Excluded(u64::MAX), Unbounded)), u64::MAX, len, len);

        // A missing key has no value to be out of.
        assert_eq!(store.get_range(b"missing", len..len + 1).unwrap(), None);
    }
}

// ---------------------------------------------------------------------------------------------
// ValueReader
// ---------------------------------------------------------------------------------------------

#[test]
fn reader_streams_a_64_mib_value_in_odd_sized_reads() {
    let value = pattern(64 * MIB, 64);
    let len = value.len() as u64;
    let read_sizes = [1, 7, 4093, 4097, 65_537, 1_000_003, 12_345];
    let mut buf = vec![0u8; read_sizes.iter().copied().max().unwrap()];
    for mode in modes() {
        // Buffered durability: the value's tail is still in the write buffer while its head is
        // on disk, so the reader crosses from one to the other.
        let fx = Fixture::new(
            Options::default()
                .io_mode(mode)
                .durability(Durability::Buffered),
        );
        let store = fx.open();
        store.put(b"big", &value).unwrap();
        let mut reader = store.reader(b"big").unwrap().expect("present");
        assert_eq!(reader.len(), len);

        let mut pos = 0;
        for &size in read_sizes.iter().cycle() {
            let n = reader.read(&mut buf[..size]).unwrap();
            if n == 0 {
                break;
            }
            assert!(
                n <= size,
                "{mode:?}: read {n} bytes into a {size}-byte buffer"
            );
            assert_bytes_eq(
                &buf[..n],
                &value[pos..pos + n],
                &format!("{mode:?} at {pos}"),
            );
            pos += n;
        }
        assert_eq!(pos, value.len(), "{mode:?}: bytes streamed");
        assert_eq!(
            reader.read(&mut buf).unwrap(),
            0,
            "{mode:?}: read at the end"
        );

        let mid = len / 2;
        for range in [0..1, 4095..4097, mid - 1..mid + 4097, len - 5000..len] {
            check_range(&store, b"big", &value, range, &format!("{mode:?}"));
        }
    }
}

#[test]
fn reader_seeks_from_start_end_and_current() {
    let value = pattern(100_000, 9);
    let len = value.len() as u64;
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", &value).unwrap();
        let mut r = store.reader(b"k").unwrap().expect("present");

        assert_eq!(r.seek(SeekFrom::Start(4090)).unwrap(), 4090, "{what}");
        assert_bytes_eq(&read_n(&mut r, 10), &value[4090..4100], &what);
        assert_eq!(r.stream_position().unwrap(), 4100, "{what}");

        assert_eq!(r.seek(SeekFrom::Current(-100)).unwrap(), 4000, "{what}");
        assert_bytes_eq(&read_n(&mut r, 200), &value[4000..4200], &what);
        assert_eq!(r.seek(SeekFrom::Current(50_000)).unwrap(), 54_200, "{what}");
        assert_bytes_eq(&read_n(&mut r, 8192), &value[54_200..62_392], &what);

        assert_eq!(r.seek(SeekFrom::End(-1)).unwrap(), len - 1, "{what}");
        let mut tail = Vec::new();
        r.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, &value[value.len() - 1..], "{what}");
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read at the end"
        );

        assert_eq!(r.seek(SeekFrom::End(0)).unwrap(), len, "{what}");
        assert_eq!(r.read(&mut [0u8; 10]).unwrap(), 0, "{what}: read at End(0)");
        assert_eq!(
            r.seek(SeekFrom::Start(len + 100)).unwrap(),
            len + 100,
            "{what}"
        );
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read past the end"
        );
        assert_eq!(r.seek(SeekFrom::End(100)).unwrap(), len + 100, "{what}");
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read past the end"
        );

        // Seeking before the start fails and leaves the cursor where it was.
        assert_eq!(r.seek(SeekFrom::Start(10)).unwrap(), 10);
        let before_start = [SeekFrom::Current(-11), SeekFrom::End(-(len as i64) - 1)];
        for target in before_start {
            let err = r.seek(target).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {target:?}");
            assert_eq!(r.stream_position().unwrap(), 10, "{what}: after {target:?}");
        }
        assert_eq!(r.seek(SeekFrom::End(-(len as i64))).unwrap(), 0, "{what}");
        assert_bytes_eq(&read_n(&mut r, 5000), &value[..5000], &what);

        // Positional reads ignore and keep the cursor.
        let mut at = [0u8; 10];
        r.read_exact_at(99_990, &mut at).unwrap();
        assert_eq!(at, value[99_990..], "{what}");
        assert_eq!(r.stream_position().unwrap(), 5000, "{what}");
        match r.read_exact_at(99_995, &mut at) {
            Err(Error::OutOfRange {
                key,
                start,
                end,
                len: l,
            }) => {
                assert_eq!((start, end, l), (99_995, 100_005, len), "{what}");
                assert_eq!(key, b"k", "{what}: OutOfRange names the key");
            }
            other => panic!("{what}: read_exact_at past the end gave {other:?}"),
        }
    }
}

#[test]
fn reader_keeps_reading_the_value_it_was_opened_on() {
    let old = pattern(100_000, 1);
    let new = pattern(7000, 2);
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", &old).unwrap();
        let mut before_overwrite = store.reader(b"k").unwrap().expect("present");
        store.put(b"k", &new).unwrap();
        let mut before_delete = store.reader(b"k").unwrap().expect("present");
        assert!(store.delete(b"k").unwrap());
        assert!(store.reader(b"k").unwrap().is_none(), "{what}");

        let mut got = Vec::new();
        before_overwrite.read_to_end(&mut got).unwrap();
        assert_bytes_eq(
            &got,
            &old,
            &format!("{what}: reader opened before the overwrite"),
        );
        got.clear();
        before_delete.read_to_end(&mut got).unwrap();
        assert_bytes_eq(
            &got,
            &new,
            &format!("{what}: reader opened before the delete"),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Large values, segments, reopening
// ---------------------------------------------------------------------------------------------

#[test]
fn values_larger_than_the_write_buffer() {
    let big = pattern(3 * MIB, 3);
    for opts in configs() {
        let opts = opts.write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model = Model::from([
            (b"a-before".to_vec(), pattern(100, 1)),
            (b"big".to_vec(), big.clone()),
            (b"z-after".to_vec(), pattern(70_000, 2)),
        ]);
        put_all(&store, &model);
        let check = |store: &Store, what: &str| {
            assert_contents(store, &model, what);
            assert_bytes_eq(&read_through_reader(store, b"big"), &big, what);
            let buffer = 64 * KIB as u64;
            for range in [
                buffer - 10..buffer + 10,
                5 * buffer - 1..7 * buffer + 1,
                0..3 * MIB as u64,
            ] {
                check_range(store, b"big", &big, range, what);
            }
        };
        check(&store, &what);
        let store = fx.reopen(store);
        check(&store, &format!("{what} after reopen"));
    }
}

#[test]
fn segments_roll_and_everything_survives_reopen() {
    for opts in configs() {
        let opts = opts.segment_size(1 << 20);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let mut model: Model = (0..40)
            .map(|i| (key(i), pattern(100_000, i as u64)))
            .collect();
        // Larger than a whole segment.
        model.insert(b"huge".to_vec(), pattern(5 * MIB / 2, 1000));
        put_all(&store, &model);
        // Overwrite and delete keys whose first records are in earlier segments.
        model.insert(key(0), pattern(3000, 2000));
        store.put(key(0), &model[&key(0)]).unwrap();
        model.remove(&key(1));
        assert!(store.delete(key(1)).unwrap());
        assert_contents(&store, &model, &what);

        let store = fx.reopen(store);
        // Log segments, and with Durability::Sync the blob file of the value larger than a
        // segment: recovery counts both as sealed.
        let files = store_file_count(&fx);
        assert!(
            files >= 5,
            "{what}: only {files} store files (log segments and blob files) for ~6.5 MiB"
        );
        let report = store.recovery();
        assert_eq!(report.sealed_segments, files, "{what}: {report:?}");
        assert!(report.recovered.is_empty(), "{what}: {report:?}");
        assert_eq!(report.removed_segments, 0, "{what}: {report:?}");
        assert_contents(&store, &model, &format!("{what} after reopen"));

        // Writing continues in new segments after a reopen.
        for i in 40..60 {
            let value = pattern(100_000, i as u64);
            store.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        }
        assert!(store.delete(key(2)).unwrap());
        model.remove(&key(2));
        let store = fx.reopen(store);
        assert!(
            store_file_count(&fx) > files,
            "{what}: no new segment after reopen"
        );
        assert_contents(&store, &model, &format!("{what} after second reopen"));
    }
}

#[test]
fn reopen_after_close_and_after_drop() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let mut model: Model = (0..20)
            .map(|i| (key(i), pattern(i * 1500, i as u64)))
            .collect();

        let store = fx.open();
        put_all(&store, &model);
        for i in [3, 7, 11] {
            assert!(store.delete(key(i)).unwrap());
            model.remove(&key(i));
        }
        store.close().unwrap();

        let store = fx.open();
        assert_contents(&store, &model, &format!("{what} after close"));
        assert!(
            store.recovery().recovered.is_empty(),
            "{what}: {:?}",
            store.recovery()
        );
        for i in 20..30 {
            let value = pattern(i * 700, i as u64);
            store.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        }
        assert!(store.delete(key(0)).unwrap());
        model.remove(&key(0));
        drop(store);

        let store = fx.open();
        assert_contents(&store, &model, &format!("{what} after drop"));
        assert!(
            store.recovery().recovered.is_empty(),
            "{what}: {:?}",
            store.recovery()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Durability::Buffered
// ---------------------------------------------------------------------------------------------

#[test]
fn buffered_writes_are_readable_before_flush_and_durable_after_it() {
    for mode in modes() {
        let opts = Options::default()
            .io_mode(mode)
            .durability(Durability::Buffered)
            .write_buffer_size(MIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model = Model::from([
            (b"small".to_vec(), pattern(100, 1)),
            (b"medium".to_vec(), pattern(200_000, 2)),
            // Larger than the write buffer: part handed to the flush thread, part still buffered.
            (b"spanning".to_vec(), pattern(3 * MIB / 2, 3)),
        ]);
        put_all(&store, &model);
        store.put(b"gone", b"deleted before the flush").unwrap();
        assert!(store.delete(b"gone").unwrap());

        let check = |store: &Store, what: &str| {
            assert_contents(store, &model, what);
            for (key, value) in &model {
                assert_bytes_eq(&read_through_reader(store, key), value, what);
                let len = value.len() as u64;
                check_range(store, key, value, len / 3..len, what);
            }
            assert_eq!(store.get(b"gone").unwrap(), None, "{what}");
        };
        check(&store, &format!("{what} before flush"));
        store.flush().unwrap();
        check(&store, &format!("{what} after flush"));

        // Stop without closing: only what flush() made durable is there after reopening.
        store.simulate_crash();
        let store = fx.open();
        assert_eq!(
            store.recovery().recovered.len(),
            1,
            "{:?}",
            store.recovery()
        );
        check(&store, &format!("{what} after crash and reopen"));
    }
}

#[test]
fn buffered_writes_lost_in_a_crash_are_a_suffix() {
    const FLUSHED: usize = 10;
    const TOTAL: usize = 300;
    for mode in modes() {
        let opts = Options::default()
            .io_mode(mode)
            .durability(Durability::Buffered)
            .write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let value = |i: usize| pattern(1000 + i, i as u64);
        for i in 0..TOTAL {
            store.put(key(i), value(i)).unwrap();
            if i + 1 == FLUSHED {
                store.flush().unwrap();
            }
        }
        store.simulate_crash();

        let store = fx.open();
        let present: Vec<bool> = (0..TOTAL)
            .map(|i| store.contains(key(i)).unwrap())
            .collect();
        let kept = present.iter().position(|&p| !p).unwrap_or(TOTAL);
        assert!(
            kept >= FLUSHED,
            "{what}: flushed writes lost, only {kept} kept"
        );
        assert!(
            present[kept..].iter().all(|&p| !p),
            "{what}: writes after the first lost one survived: {present:?}"
        );
        for i in 0..kept {
            assert_bytes_eq(&get_present(&store, &key(i)), &value(i), &what);
        }
        assert_eq!(store.len(), kept, "{what}");
    }
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

#[test]
fn concurrent_writers_read_their_own_writes() {
    const THREADS: usize = 8;
    const PER_THREAD: usize = 40;
    let key_of = |t: usize, i: usize| format!("thread-{t}/key-{i}").into_bytes();
    let value_of = |t: usize, i: usize| {
        let n = t * PER_THREAD + i;
        pattern(n * 1009 % 20_000, n as u64)
    };
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = Arc::new(fx.open());
        let writers: Vec<_> = (0..THREADS)
            .map(|t| {
                let store = Arc::clone(&store);
                let what = what.clone();
                thread::spawn(move || {
                    for i in 0..PER_THREAD {
                        let (key, value) = (key_of(t, i), value_of(t, i));
                        store.put(&key, &value).unwrap();
                        assert_bytes_eq(&get_present(&store, &key), &value, &what);
                        let half = value.len() as u64 / 2;
                        check_range(&store, &key, &value, half.., &what);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer thread panicked");
        }
        let model: Model = (0..THREADS)
            .flat_map(|t| (0..PER_THREAD).map(move |i| (key_of(t, i), value_of(t, i))))
            .collect();
        assert_contents(&store, &model, &what);

        let store = Arc::into_inner(store).expect("threads are done");
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn range_reads_run_while_other_keys_are_written() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 25;
    const MIN_READS: usize = 200;
    let hot = Arc::new(pattern(300_000, 99));
    let value_of = |w: usize, i: usize| pattern(20_000 + (w * PER_WRITER + i) * 1500, i as u64);
    for opts in configs() {
        // Small buffers and segments: the writers hand off buffers and roll segments while
        // the reader reads.
        let opts = opts.segment_size(1 << 20).write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = Arc::new(fx.open());
        store.put(b"hot", &hot[..]).unwrap();
        let done = Arc::new(AtomicBool::new(false));

        let reader = {
            let (store, hot, done, what) = (store.clone(), hot.clone(), done.clone(), what.clone());
            thread::spawn(move || {
                let mut rng = XorShift::new(7);
                let mut reads = 0;
                while !done.load(Ordering::Acquire) || reads < MIN_READS {
                    let start = rng.below(hot.len() + 1);
                    let end = start + rng.below(hot.len() - start + 1);
                    let got = store.get_range(b"hot", start as u64..end as u64).unwrap();
                    let got = got.expect("hot key present");
                    assert_bytes_eq(&got, &hot[start..end], &format!("{what} {start}..{end}"));
                    reads += 1;
                }
                reads
            })
        };
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = store.clone();
                thread::spawn(move || {
                    for i in 0..PER_WRITER {
                        store.put(key(w * PER_WRITER + i), value_of(w, i)).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().expect("writer thread panicked");
        }
        done.store(true, Ordering::Release);
        let reads = reader.join().expect("reader thread panicked");
        assert!(reads >= MIN_READS);

        let mut model: Model = (0..WRITERS)
            .flat_map(|w| (0..PER_WRITER).map(move |i| (key(w * PER_WRITER + i), value_of(w, i))))
            .collect();
        model.insert(b"hot".to_vec(), hot.to_vec());
        assert_contents(&store, &model, &what);
        let store = fx.reopen(Arc::into_inner(store).expect("threads are done"));
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

// ---------------------------------------------------------------------------------------------
// A store written by an earlier build (tests/common/compat.rs)
// ---------------------------------------------------------------------------------------------

/// Every file of `dir` with its bytes, by name.
fn dir_contents(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("list fixture")
        .map(|e| {
            let e = e.expect("directory entry");
            let name = e.file_name().into_string().expect("utf-8 name");
            (name, std::fs::read(e.path()).expect("read fixture file"))
        })
        .collect()
}

/// Checks the store against the fixture's expected contents, deleted keys included, and that
/// `verify` finds nothing.
#[track_caller]
fn check_fixture_contents(store: &Store, model: &Model, what: &str) {
    assert_contents(store, model, what);
    for key in compat::all_keys() {
        if !model.contains_key(&key) {
            assert_eq!(store.get(&key).expect("get"), None, "{what}: deleted key");
        }
    }
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{what}: verify: {report:?}");
}

/// The committed old-format stores (tests/fixtures/store-130d492, store-3e7568a) open, recover
/// their unsealed segment, read back every key, verify clean, serve ranges of their blob-file
/// value, take more writes and reopen. They are opened from copies: the committed files are
/// never written.
#[test]
fn old_format_fixture_opens_reads_and_takes_more_writes() {
    for dir in [compat::FIXTURE_DIR, compat::FIXTURE_DIR_WITH_CATALOG] {
        old_format_fixture_opens_reads_and_takes_more_writes_in(dir);
    }
}

fn old_format_fixture_opens_reads_and_takes_more_writes_in(fixture_dir: &str) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture_dir);
    let pristine = dir_contents(&fixture);
    let (logs, blobs) = common::files::count_files(&fixture);
    assert!(
        logs >= 3 && blobs >= 1,
        "fixture files: {:?}",
        pristine.keys()
    );
    let expected = compat::expected_contents();
    for mode in modes() {
        let what = format!("old-format fixture {fixture_dir}, {mode:?}");
        let dir = tempfile::tempdir().expect("temporary directory");
        for (name, bytes) in &pristine {
            std::fs::write(dir.path().join(name), bytes).expect("copy the fixture");
        }
        let opts = compat::options(mode);
        let store = Store::open_with(dir.path(), opts.clone()).expect("open the fixture");
        let report = store.recovery();
        assert_eq!(report.recovered.len(), 1, "{what}: {report:?}");
        assert_eq!(report.removed_segments, 0, "{what}: {report:?}");
        let mut model = expected.clone();
        check_fixture_contents(&store, &model, &what);

        // Ranges of the value in the blob file, across its 4 KiB chunks.
        let large = &model[compat::LARGE_KEY];
        assert!(
            large.len() as u64 >= compat::LARGE,
            "{what}: the large value"
        );
        let len = large.len() as u64;
        for (a, b) in [
            (0, 1),
            (4095, 4097),
            (10_000, 30_000),
            (len - 100, len),
            (0, len),
        ] {
            check_range(&store, compat::LARGE_KEY, large, a..b, &what);
        }

        // More writes on top of the old files, then a reopen.
        let mut rng = XorShift::new(7);
        for i in 0..5 {
            let (key, value) = (format!("new/{i}").into_bytes(), rng.bytes(3000 * i));
            store.put(&key, &value).expect("put");
            model.insert(key, value);
        }
        assert!(store.delete(b"raw/0").expect("delete"));
        model.remove(&b"raw/0"[..]);
        let value = rng.bytes(compat::LARGE as usize + 1);
        store.put(b"new/large", &value).expect("put a new blob");
        model.insert(b"new/large".to_vec(), value);
        store.close().expect("close");
        let store = Store::open_with(dir.path(), opts).expect("reopen");
        assert!(store.recovery().recovered.is_empty(), "{what}: reopened");
        check_fixture_contents(&store, &model, &format!("{what}, written and reopened"));
        store.close().expect("close");
    }
    assert!(
        dir_contents(&fixture) == pristine,
        "the committed fixture was modified"
    );
}

/// The trailer versions of the files of `kind` in `dir` that end in a footer, by file name.
fn footer_versions(dir: &std::path::Path, kind: common::files::FileKind) -> BTreeMap<String, u8> {
    common::files::written_files(dir, kind)
        .iter()
        .filter_map(|p| {
            let t = common::records::trailer(&std::fs::read(p).unwrap()).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, t.version))
        })
        .collect()
}

/// The old-format fixture's files carry footers of version 1; `compact` rewrites its log
/// segments, and the files it writes carry footers of version 2 (keys sorted). Every value
/// still reads, before and after a reopen, and `verify` finds nothing.
#[test]
fn compaction_rewrites_old_footers_as_version_2() {
    use common::files::FileKind;
    use podstore::format::footer::{FOOTER_V1, FOOTER_V2};
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(compat::FIXTURE_DIR);
    let pristine = dir_contents(&fixture);
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, bytes) in &pristine {
        std::fs::write(dir.path().join(name), bytes).expect("copy the fixture");
    }
    let old_logs = footer_versions(dir.path(), FileKind::Log);
    assert!(
        old_logs.len() >= 2 && old_logs.values().all(|&v| v == FOOTER_V1),
        "the fixture's sealed segments: {old_logs:?}"
    );
    let old_blobs = footer_versions(dir.path(), FileKind::Blob);
    assert!(!old_blobs.is_empty() && old_blobs.values().all(|&v| v == FOOTER_V1));
    let model = compat::expected_contents();
    // Every log segment with any dead byte is rewritten.
    let opts = compat::options(IoMode::Buffered)
        .compaction_threshold(f64::MIN_POSITIVE)
        .background_compaction(false);
    let store = Store::open_with(dir.path(), opts.clone()).expect("open the fixture");
    check_fixture_contents(&store, &model, "fixture before compaction");
    let report = store.compact().expect("compact");
    assert!(report.segments_compacted >= 1, "{report:?}");
    check_fixture_contents(&store, &model, "fixture after compaction");
    store.close().expect("close");
    let logs = footer_versions(dir.path(), FileKind::Log);
    // Every old segment held a dead byte (the fixture overwrites and deletes), so none is left.
    assert!(
        old_logs.keys().all(|n| !logs.contains_key(n)),
        "{old_logs:?} -> {logs:?}"
    );
    let new: Vec<u8> = logs
        .iter()
        .filter(|(n, _)| !pristine.contains_key(*n))
        .map(|(_, &v)| v)
        .collect();
    assert!(
        !new.is_empty() && new.iter().all(|&v| v == FOOTER_V2),
        "log segments after compaction: {logs:?}"
    );
    let store = Store::open_with(dir.path(), opts).expect("reopen");
    check_fixture_contents(&store, &model, "fixture compacted and reopened");
    store.close().expect("close");
}

/// Writes the old-format fixture into `$PODSTORE_FIXTURE_OUT` (a new directory): see
/// tests/common/compat.rs. Run only to make a fixture for a new format version.
#[test]
#[ignore = "writes a fixture; run by hand with PODSTORE_FIXTURE_OUT set"]
fn write_old_format_fixture() {
    let out = std::env::var_os("PODSTORE_FIXTURE_OUT").expect("PODSTORE_FIXTURE_OUT");
    let out = std::path::Path::new(&out);
    std::fs::create_dir(out).expect("PODSTORE_FIXTURE_OUT must name a directory to create");
    compat::write_fixture(out);
    for (name, bytes) in dir_contents(out) {
        eprintln!("{name}: {} bytes", bytes.len());
    }
}

/// Error messages name the file by its real name (a blob file is `blob-…`, not "segment"), and
/// a path that is a regular file says so.
#[test]
fn errors_name_the_blob_file_and_a_path_that_is_a_file() {
    let fx = Fixture::new(Options::default().io_mode(IoMode::Direct));
    let store = fx.open();
    let big = pattern(2 << 20, 7);
    store.put(b"big", &big).unwrap();
    let store = {
        store.close().unwrap();
        let blob = common::files::written_files(fx.path(), common::files::FileKind::Blob)
            .pop()
            .expect("a blob file");
        let mut bytes = std::fs::read(&blob).unwrap();
        bytes[1 << 20] ^= 0xff;
        std::fs::write(&blob, bytes).unwrap();
        fx.open()
    };
    let err = store.get(b"big").unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("blob-0000000000000"), "{msg}");
    assert!(matches!(
        err,
        Error::Corruption {
            file: podstore::FileKind::Blob,
            ..
        }
    ));
    let report = store.verify().unwrap();
    assert_eq!(report.damage[0].file, podstore::FileKind::Blob);
    drop(store);

    let file = fx.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let err = Store::open(&file).unwrap_err();
    assert!(
        err.to_string().contains("is a file, not a directory"),
        "{err}"
    );
}

/// The index keeps 23 bytes per key, whatever the key's length: counted from what it allocated
/// (`Stats::index_bytes`), for short and long keys, after puts and after a reopen (which sizes
/// every shard to fit).
#[test]
fn the_index_takes_23_bytes_per_key_whatever_the_key_length() {
    const KEYS: u64 = 20_000;
    for key_len in [16usize, 1000] {
        let fx = Fixture::new(
            podstore::Options::default()
                .io_mode(podstore::IoMode::Buffered)
                .durability(podstore::Durability::Buffered),
        );
        let store = fx.open();
        let empty = store.stats().index_bytes;
        for i in 0..KEYS {
            let mut key = format!("{i:016}").into_bytes();
            key.resize(key_len, b'.');
            store.put(&key, b"v").unwrap();
        }
        let grown = store.stats().index_bytes - empty;
        // Shards grow by 1/16 of their length at a time: with about 0.3 keys per shard here,
        // by one entry at a time.
        assert_eq!(grown, KEYS * 23, "key length {key_len}");
        let store = fx.reopen(store);
        assert_eq!(
            store.stats().index_bytes - empty,
            KEYS * 23,
            "key length {key_len}, reopened"
        );
    }
}
