//! Integration tests of the public API of `podstore`, run in both I/O modes and, where it
//! changes the code path taken, with both durabilities.
//!
//! With `Durability::Sync` a value is read back from its segment file; with
//! `Durability::Buffered` a fresh value is usually still in the write buffer, so reads take the
//! in-memory path. Reopening a store always reads from disk.

#[path = "../common/mod.rs"]
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

// The tests, a module per part of the API (one test binary: every binary costs a link).
mod buffered;
mod concurrency;
mod earlier_build;
mod large;
mod open;
mod range;
mod reader;
mod values;
