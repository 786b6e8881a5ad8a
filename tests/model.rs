//! Model-based property tests: random sequences of operations run against a [`Store`] and
//! against a `HashMap`, and every answer of the store is checked against the map.
//!
//! The store is opened with the smallest segments (1 MiB) and write buffers (64 KiB) it accepts,
//! so that values up to a few hundred KiB roll segments over and cross buffer hand-offs often.
//!
//! * With [`Durability::Sync`] every acknowledged write survives a crash: the model is exact
//!   across clean reopens and simulated crashes alike.
//! * With [`Durability::Buffered`] a crash may lose writes made after the last flush, but only
//!   a suffix of them: the recovered state must be the state at the last flush (or close, or
//!   recovery) with some prefix of the later writes applied.
//!
//! Sequences also hold `put_if_absent` and `compact` (at a low threshold, so that values move
//! often; the background compactor is off to keep runs reproducible).
//!
//! Each property runs in both I/O modes; one more runs with every value compressed (lz4, in
//! frames of 4 KiB so that values span many frames). The read cache has its default capacity,
//! except in two properties: one without a cache, one with a cache small enough to evict all
//! the time (a cached value must never outlive its overwrite, delete or compaction move).
//! [`CASES`] cases per property, [`LONG_CASES`] under `PODSTORE_TEST_LONG`; `PROPTEST_CASES`
//! overrides both;
//! failures are saved to `tests/model.proptest-regressions` and replayed first on later runs.

mod common;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use podstore::{Compression, Durability, Error, IoMode, MAX_KEY_LEN, Store};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

/// Default number of cases per property (override with `PROPTEST_CASES`).
const CASES: u32 = 40;
/// Cases per property under `PODSTORE_TEST_LONG`.
const LONG_CASES: u32 = 160;
/// Longest generated operation sequence.
const MAX_OPS: usize = 80;

// ---------------------------------------------------------------------------------------------
// Keys and values
// ---------------------------------------------------------------------------------------------

/// Lengths of the keys of the key space, one per key: from 1 byte to the longest allowed, so
/// that record headers, keys and values sit at every kind of offset relative to block bounds.
const KEY_LENS: [usize; 12] = [1, 2, 3, 5, 8, 16, 100, 255, 256, 1000, 4095, MAX_KEY_LEN];

/// The bytes of key number `k`: a distinct first letter, padded to its length.
fn key(k: u8) -> Vec<u8> {
    let mut bytes = vec![b'.'; KEY_LENS[k as usize]];
    bytes[0] = b'A' + k;
    bytes
}

/// A short name for a key in failure messages: its letter and length.
fn key_label(key: &[u8]) -> String {
    match key.first() {
        Some(&b) => format!("{}[{}B]", b as char, key.len()),
        None => "<empty>".into(),
    }
}

/// The value written by the put with version `version`: `len` bytes that depend on both the
/// position and the version, so that misplaced chunks and stale versions are both caught.
fn value(version: u32, len: usize) -> Vec<u8> {
    let salt = version.wrapping_mul(0x85EB_CA6B);
    (0..len as u32)
        .map(|i| (i.wrapping_mul(0x9E37_79B1).wrapping_add(salt) >> 24) as u8)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Operations and their strategies
// ---------------------------------------------------------------------------------------------

/// A position in a value, resolved against the value's length when the operation runs.
#[derive(Debug, Clone, Copy)]
enum At {
    /// This offset (past the end for short values).
    Abs(u64),
    /// `len - n`; a negative `n` is past the end, an `n` larger than the length means 0.
    FromEnd(i64),
}

impl At {
    fn resolve(self, len: u64) -> u64 {
        match self {
            At::Abs(offset) => offset,
            At::FromEnd(n) => u64::try_from(len as i64 - n).unwrap_or(0),
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Puts a value of `len` bytes (its content comes from a counter of puts).
    Put {
        key: u8,
        len: usize,
    },
    /// Checks `get`, `contains` and `value_len`.
    Get {
        key: u8,
    },
    /// Checks `get_range(key, start..end)`, including empty and out-of-range ranges.
    GetRange {
        key: u8,
        start: At,
        end: At,
    },
    Delete {
        key: u8,
    },
    Flush,
    /// `put_if_absent` of a value of `len` bytes.
    PutIfAbsent {
        key: u8,
        len: usize,
    },
    /// An atomic batch of puts (`Some(len)`) and deletes (`None`).
    Batch {
        ops: Vec<(u8, Option<usize>)>,
    },
    /// Checks `keys()`, `range(..)` over `bounds` and `prefix(..)` of `prefix` against the
    /// model, in ascending order.
    List {
        bounds: (Edge, Edge),
        prefix: Vec<u8>,
    },
    /// `compact` (which makes every earlier write durable), then a check of the contents.
    Compact,
    /// `close` and open again.
    Reopen,
    /// `simulate_crash` (like kill -9) and open again.
    CrashReopen,
}

/// One bound of a listed range: around key `k`'s bytes.
#[derive(Debug, Clone)]
enum Edge {
    Included(Vec<u8>),
    Excluded(Vec<u8>),
    Unbounded,
}

impl Edge {
    fn bound(&self) -> std::ops::Bound<&[u8]> {
        match self {
            Edge::Included(k) => std::ops::Bound::Included(k),
            Edge::Excluded(k) => std::ops::Bound::Excluded(k),
            Edge::Unbounded => std::ops::Bound::Unbounded,
        }
    }
}

/// A range bound: a key of the key space, a prefix of one, or a byte string between keys.
fn edge() -> impl Strategy<Value = Edge> {
    let bytes = prop_oneof![
        3 => key_index().prop_map(key),
        2 => (key_index(), 0..6usize).prop_map(|(k, n)| key(k)[..n.min(key(k).len())].to_vec()),
        1 => prop::collection::vec(any::<u8>(), 0..3),
    ];
    prop_oneof![
        2 => bytes.clone().prop_map(Edge::Included),
        2 => bytes.prop_map(Edge::Excluded),
        1 => Just(Edge::Unbounded),
    ]
}

fn key_index() -> impl Strategy<Value = u8> {
    0..KEY_LENS.len() as u8
}

/// Value lengths: empty, tiny, around the 4 KiB chunk and block size, around the 64 KiB write
/// buffer, anything up to 300 KiB, and now and then a value larger than a whole segment.
fn value_len() -> impl Strategy<Value = usize> {
    const KIB: usize = 1 << 10;
    const BUFFER: usize = 64 * KIB;
    prop_oneof![
        2 => Just(0),
        2 => Just(1),
        4 => 2..200usize,
        2 => Just(4095),
        2 => Just(4096),
        2 => Just(4097),
        1 => Just(BUFFER),
        1 => BUFFER - 100..BUFFER + 100,
        5 => 200..300 * KIB,
        1 => Just(1024 * KIB + 4097),
    ]
}

/// Range bounds: the start and end of the value, chunk boundaries, offsets near the end, and
/// arbitrary offsets (mostly past the end of small values).
fn position() -> impl Strategy<Value = At> {
    prop_oneof![
        3 => Just(At::Abs(0)),
        2 => prop_oneof![Just(1u64), Just(4095), Just(4096), Just(4097), Just(8192)]
            .prop_map(At::Abs),
        1 => (0..320u64 << 10).prop_map(At::Abs),
        3 => Just(At::FromEnd(0)),
        3 => prop_oneof![Just(1i64), Just(4096), 0..9000i64].prop_map(At::FromEnd),
        1 => (-3..0i64).prop_map(At::FromEnd),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (key_index(), value_len()).prop_map(|(key, len)| Op::Put { key, len }),
        12 => key_index().prop_map(|key| Op::Get { key }),
        14 => (key_index(), position(), position())
            .prop_map(|(key, start, end)| Op::GetRange { key, start, end }),
        10 => key_index().prop_map(|key| Op::Delete { key }),
        4 => Just(Op::Flush),
        4 => (key_index(), value_len()).prop_map(|(key, len)| Op::PutIfAbsent { key, len }),
        4 => prop::collection::vec((key_index(), prop::option::of(0..5000usize)), 1..5)
            .prop_map(|ops| Op::Batch { ops }),
        4 => (edge(), edge(), prop_oneof![
                key_index().prop_map(|k| key(k)[..1].to_vec()),
                key_index().prop_map(|k| key(k)[..2.min(key(k).len())].to_vec()),
                Just(Vec::new()),
                Just(b"A.".to_vec()),
            ])
            .prop_map(|(a, b, prefix)| Op::List { bounds: (a, b), prefix }),
        5 => Just(Op::Compact),
        3 => Just(Op::Reopen),
        4 => Just(Op::CrashReopen),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..=MAX_OPS)
}

fn config() -> ProptestConfig {
    let cases = common::long::cases("PROPTEST_CASES", CASES.into(), LONG_CASES.into()) as u32;
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

type Map = HashMap<Vec<u8>, Vec<u8>>;

/// A put (`Some(value)`) or a delete (`None`) of a key.
type Write = (Vec<u8>, Option<Vec<u8>>);

fn apply(map: &mut Map, (key, value): &Write) {
    match value {
        Some(v) => map.insert(key.clone(), v.clone()),
        None => map.remove(key),
    };
}

/// What the store must hold now, and what it may hold after a crash.
struct Model {
    durability: Durability,
    /// The contents every read must see.
    live: Map,
    /// The contents at the last point every write was durable: with `Durability::Sync` after
    /// every write, with `Durability::Buffered` at the last flush, close or recovery.
    durable: Map,
    /// Writes made since `durable`, in order. A crash keeps a prefix of them.
    unflushed: Vec<Write>,
}

impl Model {
    fn new(durability: Durability) -> Model {
        Model {
            durability,
            live: Map::new(),
            durable: Map::new(),
            unflushed: Vec::new(),
        }
    }

    /// Records an acknowledged write.
    fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let write = (key, value);
        apply(&mut self.live, &write);
        self.unflushed.push(write);
        if self.durability == Durability::Sync {
            self.all_durable();
        }
    }

    /// Every write so far is durable (a flush or a close returned).
    fn all_durable(&mut self) {
        for write in self.unflushed.drain(..) {
            apply(&mut self.durable, &write);
        }
    }

    /// After a crash: checks that the store `recovered` the durable state with some prefix of
    /// the writes made since applied, and makes that the model's state. Returns how many of
    /// those writes survived.
    fn crashed(&mut self, recovered: Map) -> Result<usize, String> {
        let mut candidate = self.durable.clone();
        for kept in 0..=self.unflushed.len() {
            if kept > 0 {
                apply(&mut candidate, &self.unflushed[kept - 1]);
            }
            if candidate == recovered {
                self.durable = candidate;
                self.live = recovered;
                self.unflushed.clear();
                return Ok(kept);
            }
        }
        Err(format!(
            "the recovered state is not the durable state plus a prefix of the {} writes made \
             since; against the durable state: {}; against the state after every write: {}",
            self.unflushed.len(),
            diff(&self.durable, &recovered),
            diff(&self.live, &recovered),
        ))
    }
}

/// A short description of how `got` differs from `expected`.
fn diff(expected: &Map, got: &Map) -> String {
    let mut lines = Vec::new();
    for (k, v) in expected {
        match got.get(k) {
            None => lines.push(format!(
                "{} missing (expected {} bytes)",
                key_label(k),
                v.len()
            )),
            Some(g) if g != v => lines.push(format!("{} {}", key_label(k), value_diff(v, g))),
            Some(_) => {}
        }
    }
    for (k, g) in got {
        if !expected.contains_key(k) {
            lines.push(format!("{} unexpected ({} bytes)", key_label(k), g.len()));
        }
    }
    lines.sort();
    if lines.is_empty() {
        "no difference".into()
    } else {
        lines.join("; ")
    }
}

/// A short description of how value `got` differs from `expected` (values may be large).
fn value_diff(expected: &[u8], got: &[u8]) -> String {
    match expected.iter().zip(got).position(|(a, b)| a != b) {
        _ if expected.len() != got.len() => {
            format!("has {} bytes, expected {}", got.len(), expected.len())
        }
        Some(i) => format!(
            "differs first at byte {i} of {} (got {:#04x}, expected {:#04x})",
            expected.len(),
            got[i],
            expected[i]
        ),
        None => "is equal".into(),
    }
}

// ---------------------------------------------------------------------------------------------
// Running a sequence
// ---------------------------------------------------------------------------------------------

/// The read cache's capacity for most properties: podstore's default.
const DEFAULT_CACHE: u64 = 64 << 20;

/// How a property's store is set up beyond its I/O mode and durability.
#[derive(Debug, Clone, Copy)]
struct Tuning {
    compression: Compression,
    /// Read cache capacity (0: none).
    cache: u64,
    /// Bits of each key hash the index keeps (64 in a store; fewer makes keys share
    /// fingerprints, so that the index must tell them apart by reading their records).
    hash_bits: u32,
    /// Keep the background resolver from removing the older index entries that overwrites
    /// leave (the test hook `testing_hold_resolver`), so that every get, listing, delete and
    /// compaction meets them; `len` still resolves them.
    hold_resolver: bool,
}

impl Tuning {
    fn new(compression: Compression, cache: u64) -> Tuning {
        Tuning {
            compression,
            cache,
            hash_bits: 64,
            hold_resolver: false,
        }
    }
}

fn open(
    dir: &Path,
    io_mode: IoMode,
    durability: Durability,
    Tuning {
        compression,
        cache,
        hash_bits,
        hold_resolver,
    }: Tuning,
) -> Result<Store, String> {
    let opts = common::store::small_with(io_mode, durability)
        .compression(compression)
        .cache_capacity(cache)
        .testing_hash_bits(hash_bits)
        .compression_frame_size(4096)
        // Compaction runs when the sequence says (deterministic); at a low threshold, so that
        // it moves values often.
        .background_compaction(false)
        .compaction_threshold(0.2);
    let store = Store::open_with(dir, opts).map_err(|e| format!("open: {e}"))?;
    store.testing_hold_resolver(hold_resolver);
    if store.io_mode() != io_mode {
        return Err(format!(
            "asked for {io_mode:?}, store uses {:?}",
            store.io_mode()
        ));
    }
    Ok(store)
}

/// Everything the store holds, read through `keys()` and `get()`.
fn contents(store: &Store) -> Result<Map, String> {
    let keys: Vec<Vec<u8>> = store
        .keys()
        .collect::<podstore::Result<_>>()
        .map_err(|e| format!("keys(): {e}"))?;
    if !keys.is_sorted() {
        return Err("keys() is not in ascending order".into());
    }
    let distinct: HashSet<&Vec<u8>> = keys.iter().collect();
    if distinct.len() != keys.len() {
        return Err(format!(
            "keys() yields duplicates: {} keys, {} distinct",
            keys.len(),
            distinct.len()
        ));
    }
    if store.len() != keys.len() {
        return Err(format!(
            "len() is {}, keys() yields {}",
            store.len(),
            keys.len()
        ));
    }
    let mut map = Map::new();
    for k in keys {
        match store.get(&k) {
            Ok(Some(v)) => map.insert(k, v),
            Ok(None) => {
                return Err(format!(
                    "keys() yields {}, get() finds nothing",
                    key_label(&k)
                ));
            }
            Err(e) => return Err(format!("get({}): {e}", key_label(&k))),
        };
    }
    Ok(map)
}

fn check_contents(store: &Store, expected: &Map) -> Result<(), String> {
    let got = contents(store)?;
    if &got != expected {
        return Err(format!(
            "contents differ from the model: {}",
            diff(expected, &got)
        ));
    }
    check_listing(store, expected)
}

/// Ordered listing against the model as a `BTreeMap`: the whole range, ranges of every bound
/// kind between keys of the key space, and prefixes (a key's first letter, its first two bytes,
/// a prefix no key has).
fn check_listing(store: &Store, expected: &Map) -> Result<(), String> {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    let model: std::collections::BTreeSet<&[u8]> = expected.keys().map(Vec::as_slice).collect();
    let listed = |it: podstore::Keys<'_>| -> Result<Vec<Vec<u8>>, String> {
        it.collect::<podstore::Result<_>>()
            .map_err(|e| format!("listing: {e}"))
    };
    let labels = |keys: &[Vec<u8>]| keys.iter().map(|k| key_label(k)).collect::<Vec<_>>();
    let check = |what: String, got: Vec<Vec<u8>>, want: Vec<Vec<u8>>| {
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "{what}: listed {:?}, the model has {:?}",
                labels(&got),
                labels(&want)
            ))
        }
    };
    let all: Vec<Vec<u8>> = model.iter().map(|k| k.to_vec()).collect();
    check(
        "range(..)".into(),
        listed(store.range::<&[u8]>(..))?,
        all.clone(),
    )?;
    // Backwards, and with the values (colliding fingerprints, compressed values, the cache).
    let mut back = all.clone();
    back.reverse();
    let rev = store.keys().rev().collect::<podstore::Result<Vec<_>>>();
    check(
        "keys().rev()".into(),
        rev.map_err(|e| format!("{e}"))?,
        back,
    )?;
    let mut entries = 0;
    for entry in store.keys().entries().rev() {
        let (k, v) = entry
            .and_then(|e| e.into_pair())
            .map_err(|e| format!("entries: {e}"))?;
        if expected.get(&k) != Some(&v) {
            return Err(format!("entries: {} has the wrong value", key_label(&k)));
        }
        entries += 1;
    }
    if entries != expected.len() {
        return Err(format!("entries: {entries} of {}", expected.len()));
    }
    let n = KEY_LENS.len() as u8;
    for a in 0..n {
        let b = (a + 4).min(n - 1);
        let (ka, kb) = (key(a), key(b));
        type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
        let bounds: [Bounds<'_>; 4] = [
            (Included(&ka), Excluded(&kb)),
            (Excluded(&ka), Included(&kb)),
            (Included(&ka), Unbounded),
            (Unbounded, Excluded(&ka)),
        ];
        for (lo, hi) in bounds {
            let want: Vec<Vec<u8>> = model
                .range::<[u8], _>((lo, hi))
                .map(|k| k.to_vec())
                .collect();
            let got = listed(store.range::<&[u8]>((lo, hi)))?;
            check(format!("range({lo:?}, {hi:?})"), got, want)?;
        }
        for p in [&ka[..1], &ka[..ka.len().min(2)], b"Z".as_slice()] {
            let want: Vec<Vec<u8>> = model
                .iter()
                .filter(|k| k.starts_with(p))
                .map(|k| k.to_vec())
                .collect();
            check(format!("prefix({p:?})"), listed(store.prefix(p))?, want)?;
        }
    }
    Ok(())
}

/// Runs `ops` on a fresh store and on the model, checking every answer. A final clean reopen
/// checks the contents once more.
fn run(
    ops: &[Op],
    io_mode: IoMode,
    durability: Durability,
    compression: Compression,
) -> Result<(), TestCaseError> {
    run_cached(
        ops,
        io_mode,
        durability,
        Tuning::new(compression, DEFAULT_CACHE),
    )
}

/// [`run`] with a read cache of `cache` bytes (0: none).
fn run_cached(
    ops: &[Op],
    io_mode: IoMode,
    durability: Durability,
    tuning: Tuning,
) -> Result<(), TestCaseError> {
    let dir = tempfile::Builder::new()
        .prefix("podstore-model-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map_err(|e| TestCaseError::fail(format!("temp dir: {e}")))?;
    let mut store = open(dir.path(), io_mode, durability, tuning).map_err(TestCaseError::fail)?;
    let mut model = Model::new(durability);
    let mut puts = 0u32;
    let final_reopen = Op::Reopen;
    for (i, op) in ops.iter().chain([&final_reopen]).enumerate() {
        store = step(
            store,
            dir.path(),
            &mut model,
            &mut puts,
            op,
            (io_mode, tuning),
        )
        .map_err(|e| TestCaseError::fail(format!("op #{i} {op:?}: {e}")))?;
        if store.len() != model.live.len() {
            return Err(TestCaseError::fail(format!(
                "after op #{i} {op:?}: len() is {}, the model has {} keys",
                store.len(),
                model.live.len()
            )));
        }
    }
    store
        .close()
        .map_err(|e| TestCaseError::fail(format!("final close: {e}")))
}

/// Runs one operation on the store and the model; returns the store (a new one after a reopen).
fn step(
    store: Store,
    dir: &Path,
    model: &mut Model,
    puts: &mut u32,
    op: &Op,
    (io_mode, tuning): (IoMode, Tuning),
) -> Result<Store, String> {
    match *op {
        Op::Put { key: k, len } => {
            *puts += 1;
            let v = value(*puts, len);
            store.put(key(k), &v).map_err(|e| format!("put: {e}"))?;
            model.write(key(k), Some(v));
        }
        Op::Get { key: k } => {
            let k = key(k);
            let expected = model.live.get(&k);
            let got = store.get(&k).map_err(|e| format!("get: {e}"))?;
            match (&got, expected) {
                (None, None) => {}
                (Some(g), Some(v)) if g == v => {}
                (Some(g), Some(v)) => return Err(format!("get: value {}", value_diff(v, g))),
                _ => {
                    return Err(format!(
                        "get: got {:?}, expected {:?}",
                        got.map(|g| g.len()),
                        expected.map(|v| v.len())
                    ));
                }
            }
            // The other two whole-value reads (the second read of a value comes from the
            // cache, when it has one) agree with `get`.
            let shared = store.get_bytes(&k).map_err(|e| format!("get_bytes: {e}"))?;
            if shared.as_deref() != got.as_deref() {
                return Err("get_bytes differs from get".into());
            }
            let mut buf = b"left over".to_vec();
            let found = store
                .get_into(&k, &mut buf)
                .map_err(|e| format!("get_into: {e}"))?;
            if (found, buf.as_slice()) != (got.is_some(), got.as_deref().unwrap_or_default()) {
                return Err("get_into differs from get".into());
            }
            let contains = store.contains(&k).map_err(|e| format!("contains: {e}"))?;
            if contains != expected.is_some() {
                return Err(format!("contains is {contains}"));
            }
            let len = store.value_len(&k).map_err(|e| format!("value_len: {e}"))?;
            if len != expected.map(|v| v.len() as u64) {
                return Err(format!(
                    "value_len is {len:?}, expected {:?}",
                    expected.map(|v| v.len())
                ));
            }
        }
        Op::GetRange { key: k, start, end } => {
            let k = key(k);
            let got = store.get_range(&k, resolve(model.live.get(&k), start, end));
            check_range(model.live.get(&k), start, end, got)?;
        }
        Op::Delete { key: k } => {
            let k = key(k);
            let existed = store.delete(&k).map_err(|e| format!("delete: {e}"))?;
            let expected = model.live.contains_key(&k);
            if existed != expected {
                return Err(format!("delete returned {existed}, expected {expected}"));
            }
            if existed {
                model.write(k, None);
            }
        }
        Op::Flush => {
            store.flush().map_err(|e| format!("flush: {e}"))?;
            model.all_durable();
        }
        Op::PutIfAbsent { key: k, len } => {
            *puts += 1;
            let v = value(*puts, len);
            let k = key(k);
            let inserted = store
                .put_if_absent(&k, &v)
                .map_err(|e| format!("put_if_absent: {e}"))?;
            let expected = !model.live.contains_key(&k);
            if inserted != expected {
                return Err(format!(
                    "put_if_absent returned {inserted}, expected {expected}"
                ));
            }
            if inserted {
                model.write(k, Some(v));
            }
        }
        Op::Batch { ref ops } => {
            let mut batch = podstore::Batch::new();
            let mut writes = Vec::new();
            for &(k, len) in ops {
                let value = len.map(|len| {
                    *puts += 1;
                    value(*puts, len)
                });
                match &value {
                    Some(v) => batch.put(key(k), v),
                    None => batch.delete(key(k)),
                };
                writes.push((key(k), value));
            }
            store
                .write(&batch)
                .map_err(|e| format!("write batch: {e}"))?;
            for (k, v) in writes {
                model.write(k, v);
            }
        }
        Op::List {
            bounds: (ref start, ref end),
            ref prefix,
        } => {
            let mut all: Vec<&Vec<u8>> = model.live.keys().collect();
            all.sort();
            let list = |keys: podstore::Keys, what: &str| {
                keys.collect::<podstore::Result<Vec<Vec<u8>>>>()
                    .map_err(|e| format!("{what}: {e}"))
            };
            let want: Vec<Vec<u8>> = all.iter().map(|k| k.to_vec()).collect();
            let got = list(store.keys(), "keys()")?;
            if got != want {
                return Err(format!("keys() gave {got:?}, want {want:?}"));
            }
            let bounds = (start.bound(), end.bound());
            let want: Vec<Vec<u8>> = all
                .iter()
                .filter(|k| <_ as std::ops::RangeBounds<[u8]>>::contains(&bounds, k.as_slice()))
                .map(|k| k.to_vec())
                .collect();
            let got = list(store.range::<&[u8]>(bounds), "range")?;
            if got != want {
                return Err(format!("range({bounds:?}) gave {got:?}, want {want:?}"));
            }
            let want: Vec<Vec<u8>> = all
                .iter()
                .filter(|k| k.starts_with(prefix))
                .map(|k| k.to_vec())
                .collect();
            let got = list(store.prefix(prefix), "prefix")?;
            if got != want {
                return Err(format!("prefix({prefix:?}) gave {got:?}, want {want:?}"));
            }
        }
        Op::Compact => {
            store.compact().map_err(|e| format!("compact: {e}"))?;
            model.all_durable();
            check_contents(&store, &model.live)?;
        }
        Op::Reopen => {
            store.close().map_err(|e| format!("close: {e}"))?;
            model.all_durable();
            let store = open(dir, io_mode, model.durability, tuning)?;
            let report = store.recovery();
            if !report.recovered.is_empty() || report.removed_segments != 0 {
                return Err(format!("recovery after a clean close: {report:?}"));
            }
            check_contents(&store, &model.live)?;
            return Ok(store);
        }
        Op::CrashReopen => {
            store.simulate_crash();
            let store = open(dir, io_mode, model.durability, tuning)?;
            model.crashed(contents(&store)?)?;
            return Ok(store);
        }
    }
    Ok(store)
}

/// The range `start..end` resolved against the current value of the key (any range will do
/// for a missing key).
fn resolve(value: Option<&Vec<u8>>, start: At, end: At) -> std::ops::Range<u64> {
    let len = value.map_or(0, |v| v.len() as u64);
    start.resolve(len)..end.resolve(len)
}

fn check_range(
    value: Option<&Vec<u8>>,
    start: At,
    end: At,
    got: podstore::Result<Option<Vec<u8>>>,
) -> Result<(), String> {
    let range = resolve(value, start, end);
    let Some(v) = value else {
        return match got {
            Ok(None) => Ok(()),
            Ok(Some(g)) => Err(format!("missing key: got {} bytes", g.len())),
            Err(e) => Err(format!("missing key: got error {e}")),
        };
    };
    let len = v.len() as u64;
    // HTTP/S3 range rule: an end past the value is clamped, a start past it is an error.
    let in_range = range.start <= range.end && range.start <= len;
    match got {
        Ok(Some(g)) if in_range => {
            let expected = &v[range.start as usize..range.end.min(len) as usize];
            if g != expected {
                return Err(format!("{range:?} of {len}: {}", value_diff(expected, &g)));
            }
            Ok(())
        }
        Err(Error::OutOfRange {
            start: s,
            end: e,
            len: l,
            ..
        }) if !in_range => {
            if (s, e, l) != (range.start, range.end, len) {
                return Err(format!(
                    "{range:?} of {len}: OutOfRange reports {s}..{e} of {l}"
                ));
            }
            Ok(())
        }
        Ok(g) => Err(format!(
            "{range:?} of {len}: got {:?} bytes, expected {}",
            g.map(|g| g.len()),
            if in_range { "data" } else { "OutOfRange" }
        )),
        Err(e) => Err(format!("{range:?} of {len}: error {e}")),
    }
}

// ---------------------------------------------------------------------------------------------
// The properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// Sync durability, O_DIRECT: the model is exact, across reopens and crashes.
    #[test]
    fn sync_direct_matches_model(ops in ops()) {
        run(&ops, IoMode::Direct, Durability::Sync, Compression::None)?;
    }

    /// Sync durability, O_DIRECT, every value compressed: the model is exact, across reopens
    /// and crashes.
    #[test]
    fn sync_direct_lz4_matches_model(ops in ops()) {
        run(&ops, IoMode::Direct, Durability::Sync, Compression::Lz4)?;
    }

    /// As `sync_direct_matches_model`, without a read cache: every read from disk.
    #[test]
    fn sync_direct_without_cache_matches_model(ops in ops()) {
        run_cached(&ops, IoMode::Direct, Durability::Sync, Tuning::new(Compression::None, 0))?;
    }

    /// As `sync_direct_lz4_matches_model`, with a read cache of 32 KiB, which evicts all the
    /// time (whole values of up to 4 KiB, frame tables, crc sectors).
    #[test]
    fn sync_direct_lz4_small_cache_matches_model(ops in ops()) {
        let tuning = Tuning::new(Compression::Lz4, 32 << 10);
        run_cached(&ops, IoMode::Direct, Durability::Sync, tuning)?;
    }

    /// As `sync_direct_matches_model` with an index that keeps 3 bits of each key hash: every
    /// key shares its fingerprint with about an eighth of the others, so every put, delete,
    /// `put_if_absent`, batch, compaction move and get must tell keys apart by their records.
    #[test]
    fn sync_direct_colliding_fingerprints_matches_model(ops in ops()) {
        let tuning = Tuning { hash_bits: 3, ..Tuning::new(Compression::None, DEFAULT_CACHE) };
        run_cached(&ops, IoMode::Direct, Durability::Sync, tuning)?;
    }

    /// Sync durability, O_DIRECT, two bits of hash (keys share fingerprints four ways), no read
    /// cache, and the resolver held: every overwrite is lazy (nothing tells its key's entry
    /// without a read) and leaves its older versions in the index, ahead of gets, listings,
    /// deletes, `put_if_absent` and compaction, across reopens and crashes.
    #[test]
    fn sync_direct_lazy_overwrites_colliding_matches_model(ops in ops()) {
        let tuning = Tuning {
            hash_bits: 2,
            hold_resolver: true,
            ..Tuning::new(Compression::None, 0)
        };
        run_cached(&ops, IoMode::Direct, Durability::Sync, tuning)?;
    }

    /// As `buffered_buffered_io_matches_model`, with every key sharing one fingerprint and no
    /// read cache: every lookup reads every record of the index's one slot.
    #[test]
    fn buffered_all_keys_colliding_matches_model(ops in ops()) {
        let tuning = Tuning { hash_bits: 0, ..Tuning::new(Compression::None, 0) };
        run_cached(&ops, IoMode::Buffered, Durability::Buffered, tuning)?;
    }

    /// Sync durability, buffered I/O: the model is exact, across reopens and crashes.
    #[test]
    fn sync_buffered_io_matches_model(ops in ops()) {
        run(&ops, IoMode::Buffered, Durability::Sync, Compression::None)?;
    }

    /// Buffered durability, O_DIRECT: a crash loses at most a suffix of the unflushed writes.
    #[test]
    fn buffered_direct_matches_model(ops in ops()) {
        run(&ops, IoMode::Direct, Durability::Buffered, Compression::None)?;
    }

    /// Buffered durability, buffered I/O: a crash loses at most a suffix of the unflushed writes.
    #[test]
    fn buffered_buffered_io_matches_model(ops in ops()) {
        run(&ops, IoMode::Buffered, Durability::Buffered, Compression::None)?;
    }
}
