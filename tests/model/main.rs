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
//! except in three properties: one without a cache, one with a cache small enough to evict all
//! the time (a cached value must never outlive its overwrite, delete or compaction move), and
//! one of 1 MiB, which keeps values above 128 KiB in pieces and evicts them all the time.
//! [`CASES`] cases per property, [`LONG_CASES`] under `PODSTORE_TEST_LONG`; `PROPTEST_CASES`
//! overrides both;
//! failures are saved to `tests/model/main.proptest-regressions` and replayed first on later runs.

#[path = "../common/mod.rs"]
mod common;
mod sequence;
use sequence::*;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use podstore::{Compression, Durability, Error, IoMode, MAX_KEY_LEN, Store};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

/// Default number of cases per property (override with `PROPTEST_CASES`).
const CASES: u32 = 8;
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

    /// As `sync_direct_matches_model`, with a read cache of 1 MiB: values above 128 KiB are
    /// kept in 64 KiB pieces of their stored bytes, which the cache evicts all the time (a
    /// piece must never outlive its value's overwrite, delete or compaction move).
    #[test]
    fn sync_direct_piece_cache_matches_model(ops in ops()) {
        run_cached(&ops, IoMode::Direct, Durability::Sync, Tuning::new(Compression::None, 1 << 20))?;
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

    /// As `sync_direct_lazy_overwrites_colliding_matches_model` with the default read cache,
    /// which keeps a table of hot values by key hash (`index/hot.rs`): with every overwrite
    /// lazy and keys sharing their hash four ways, a value kept there must never answer for
    /// another key, nor outlive an overwrite, a delete, a resolution or a compaction move.
    #[test]
    fn sync_direct_lazy_overwrites_colliding_with_hot_values_matches_model(ops in ops()) {
        let tuning = Tuning {
            hash_bits: 2,
            hold_resolver: true,
            ..Tuning::new(Compression::None, DEFAULT_CACHE)
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
