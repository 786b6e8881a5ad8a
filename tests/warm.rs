//! The warm restart (`Options::warm_cache`): a store opened again fills its read cache from its
//! newest segments in the background.
//!
//! - what it does: a reopened store serves its reads from memory (the cache's hit and miss
//!   counters, which a cold store's reads move the other way); a store larger than the cache
//!   warms its newest values and evicts nothing; it is off when asked, and on in a read-only
//!   store;
//! - what it must never do: serve a value that an overwrite, a delete or a compaction made stale,
//!   or unverified bytes (a damaged value or record header is skipped, and a read of it still
//!   fails), or hold up a close (a close during the warm-up returns before it would have ended);
//! - a model test: random puts, overwrites, deletes, compactions and reopens against a map, with
//!   every key read right after each reopen, while the warm-up runs (and read after each write).
//!
//! The stress test's `stress_mixed_ops_across_reopens_while_warming` (tests/stress.rs) runs the
//! concurrent history across close/open cycles.

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use common::store::{TestStore, small, wait_warm};
use podstore::{Compression, Durability, Error, IoMode, Options, Stats, Store};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

/// The value of key number `k` at version `v`: `len` bytes that depend on both.
fn value(k: usize, v: u32, len: usize) -> Vec<u8> {
    let salt = (k as u32).wrapping_mul(0x9E37_79B1) ^ v.wrapping_mul(0x85EB_CA6B);
    (0..len as u32)
        .map(|i| (i.wrapping_mul(0x2545_F491).wrapping_add(salt) >> 24) as u8)
        .collect()
}

fn key(k: usize) -> Vec<u8> {
    format!("key-{k:06}").into_bytes()
}

/// Options of the deterministic tests: small segments (several per store), a cache of
/// `capacity` bytes, no background compaction (nothing moves unless a test compacts).
fn opts(mode: IoMode, capacity: u64) -> Options {
    small()
        .io_mode(mode)
        .durability(Durability::Buffered)
        .background_compaction(false)
        .cache_capacity(capacity)
}

/// Writes keys `0..n` with values of `len` bytes (version 0), then closes the store.
fn fill(fx: &TestStore, n: usize, len: usize) {
    let store = fx.open();
    for k in 0..n {
        store.put(key(k), value(k, 0, len)).unwrap();
    }
    store.close().unwrap();
}

/// Reads `keys`, checking each value against `want`; returns how many cache hits and misses
/// the reads counted.
#[track_caller]
fn read_counting(
    store: &Store,
    keys: impl IntoIterator<Item = usize>,
    want: impl Fn(usize) -> Option<Vec<u8>>,
) -> (u64, u64) {
    common::store::read_counting(store, keys, key, want)
}

#[test]
fn a_reopened_store_serves_its_reads_from_memory() {
    for mode in common::store::MODES {
        const N: usize = 3000;
        let fx = TestStore::new(opts(mode, 32 << 20));
        let store = fx.open();
        for k in 0..N {
            store.put(key(k), value(k, 0, 1000)).unwrap();
        }
        // Overwritten (the old records stay on disk, dead), deleted, and too large to warm.
        for k in (0..N).step_by(3) {
            store.put(key(k), value(k, 1, 900)).unwrap();
        }
        for k in (1..N).step_by(7) {
            store.delete(key(k)).unwrap();
        }
        store.put(key(N), value(N, 0, 5000)).unwrap();
        store.close().unwrap();
        let want = |k: usize| {
            if k == N {
                Some(value(k, 0, 5000))
            } else if k % 7 == 1 {
                None
            } else if k.is_multiple_of(3) {
                Some(value(k, 1, 900))
            } else {
                Some(value(k, 0, 1000))
            }
        };
        let live_small = (0..N).filter(|&k| k % 7 != 1).count() as u64;

        let store = fx.open();
        let s = wait_warm(&store);
        assert_eq!(s.cache_warmed_values, live_small, "{mode:?}: {s:?}");
        assert!(s.cache_warm_read_bytes > 0, "{s:?}");
        assert_eq!(s.cache_evictions, 0, "{s:?}");
        let live = (0..N).filter(|&k| k % 7 != 1);
        let (hits, misses) = read_counting(&store, live, want);
        assert_eq!((hits, misses), (live_small, 0), "{mode:?}: every read warm");
        // The value too large to be warmed, and the deleted keys, read as they should.
        read_counting(&store, (1..N).step_by(7).chain([N]), want);
        store.close().unwrap();

        // The same store opened cold: every read misses.
        let cold = Store::open_with(fx.path(), fx.opts.clone().warm_cache(false)).unwrap();
        let s = cold.stats();
        assert!(!s.cache_warming && s.cache_warmed_values == 0, "{s:?}");
        let (hits, misses) = read_counting(&cold, (0..N).filter(|&k| k % 7 != 1), want);
        assert_eq!((hits, misses), (0, live_small), "{mode:?}: cold reads");
        cold.close().unwrap();
    }
}

#[test]
fn a_store_larger_than_the_cache_warms_its_newest_values_and_evicts_nothing() {
    const N: usize = 6000;
    let capacity = 2 << 20;
    let fx = TestStore::new(opts(IoMode::Direct, capacity));
    fill(&fx, N, 1000);
    let store = fx.open();
    let s = wait_warm(&store);
    assert_eq!(s.cache_evictions, 0, "{s:?}");
    assert!(s.cache_bytes <= capacity, "{s:?}");
    // Most of the room is used (a sixteenth is left for the shards' uneven filling).
    let weight = (8 + 10 + 1000 + 128) as u64;
    assert!(
        s.cache_warmed_values * weight > capacity / 2,
        "too little warmed: {s:?}"
    );
    assert!(s.cache_warmed_values < N as u64, "{s:?}");
    // The newest key is warm, the oldest is not.
    let want = |k| Some(value(k, 0, 1000));
    assert_eq!(read_counting(&store, [N - 1], want), (1, 0));
    assert_eq!(read_counting(&store, [0], want), (0, 1));
    store.close().unwrap();
}

/// Writes `n` keys with values of 1 to 4096 bytes (and every 97th one of 100 KiB, too large to
/// warm), overwrites every fifth and deletes every eleventh, closes, opens again and checks that
/// the warm-up kept exactly the live small values, and that each reads back from memory.
#[track_caller]
fn warms_every_live_small_value(opts: Options, n: usize) -> Stats {
    let len = |k: usize, v: u32| {
        if k.is_multiple_of(97) {
            100 << 10
        } else {
            1 + (k * 7919 + v as usize * 31) % 4096
        }
    };
    let fx = TestStore::new(opts);
    let store = fx.open();
    for k in 0..n {
        store.put(key(k), value(k, 0, len(k, 0))).unwrap();
    }
    for k in (0..n).step_by(5) {
        store.put(key(k), value(k, 1, len(k, 1))).unwrap();
    }
    for k in (0..n).step_by(11) {
        store.delete(key(k)).unwrap();
    }
    store.close().unwrap();
    let want = |k: usize| {
        let v = u32::from(k.is_multiple_of(5));
        (!k.is_multiple_of(11)).then(|| value(k, v, len(k, v)))
    };
    let small: Vec<usize> = (0..n)
        .filter(|&k| !k.is_multiple_of(11) && !k.is_multiple_of(97))
        .collect();
    let store = fx.open();
    let s = wait_warm(&store);
    assert_eq!(s.cache_warmed_values, small.len() as u64, "{s:?}");
    assert_eq!(s.cache_evictions, 0, "{s:?}");
    assert_eq!(
        read_counting(&store, small.iter().copied(), want),
        (small.len() as u64, 0)
    );
    read_counting(&store, 0..n, want);
    store.close().unwrap();
    s
}

#[test]
fn reads_racing_the_warm_up_do_not_stop_it() {
    // Readers that keep a value before the warm-up reaches it make the warm-up's keep replace an
    // entry under its own key (two readers that missed the same value do too), which the
    // cache's library reports as an eviction. The warm-up stops at the first eviction (the cache
    // is full: it never makes it evict), so before the cache told the two apart it stopped at
    // the next segment (or at once), having kept a part of the store or nothing: a restart read
    // from at once (a service, YCSB's run phase) ran cold. Every key is read here, newest first
    // (where the walk begins), from two threads, while it runs: it must still walk every segment
    // and keep every value.
    const N: usize = 6000;
    for mode in common::store::MODES {
        let fx = TestStore::new(opts(mode, 32 << 20));
        fill(&fx, N, 1000);
        let store = fx.open();
        std::thread::scope(|scope| {
            for t in 0..2 {
                let store = &store;
                scope.spawn(move || {
                    for k in (0..N).rev().filter(|k| k % 2 == t) {
                        let got = store.get(key(k)).unwrap();
                        assert_eq!(got, Some(value(k, 0, 1000)), "key {k}");
                    }
                });
            }
        });
        let s = wait_warm(&store);
        assert_eq!(s.cache_evictions, 0, "{mode:?}: {s:?}");
        assert!(s.log_segments > 2, "{s:?}");
        assert_eq!(s.cache_warmed_values, N as u64, "{mode:?}: {s:?}");
        // Every read after it is a hit.
        let (hits, misses) = read_counting(&store, 0..N, |k| Some(value(k, 0, 1000)));
        assert_eq!((hits, misses), (N as u64, 0), "{mode:?}");
        store.close().unwrap();
    }
}

#[test]
fn a_segment_larger_than_a_read_is_warmed_across_its_reads() {
    // One segment of about 14 MiB: several reads of 4 MiB, each made while the walk goes
    // through the one before, with records across their ends and large ones stepped over.
    for mode in common::store::MODES {
        let opts = opts(mode, 64 << 20).segment_size(64 << 20);
        let s = warms_every_live_small_value(opts, 6000);
        assert!(s.cache_warm_read_bytes > 12 << 20, "{mode:?}: {s:?}");
    }
}

#[test]
fn a_segment_with_many_live_values_is_walked_in_parts_side_by_side() {
    // About 36 000 live values in one segment: two parts or more of at least 16 Ki records (on
    // a machine with two cores or more), each walked by a thread of its own from a record the
    // index names, with its share of the room.
    let opts = opts(IoMode::Direct, 256 << 20).segment_size(256 << 20);
    let s = warms_every_live_small_value(opts, 40_000);
    assert!(s.cache_warm_read_bytes > 64 << 20, "{s:?}");
}

#[test]
fn segments_holding_few_of_the_keys_are_checked_key_by_key() {
    // 1 MiB segments, each with under a sixteenth of the live keys: every record is looked up
    // in the index (no copy of a segment's entries).
    warms_every_live_small_value(opts(IoMode::Direct, 64 << 20), 12_000);
}

#[test]
fn a_store_of_large_values_only_is_not_read_to_be_warmed() {
    let fx = TestStore::new(opts(IoMode::Direct, 64 << 20));
    fill(&fx, 200, 64 << 10);
    let segments = common::files::written_files(fx.path(), common::files::FileKind::Log);
    let store = fx.open();
    let s = wait_warm(&store);
    assert_eq!(s.cache_warmed_values, 0, "{s:?}");
    // The segments' trailers (a sector or two each), and at most one segment of 1 MiB (the
    // newest, partly filled: with under a sixteenth of the keys, its records are walked one by
    // one, checked in the index), not the 12 MiB of values.
    assert!(segments.len() > 10, "{segments:?}");
    assert!(
        s.cache_warm_read_bytes <= (1 << 20) + segments.len() as u64 * (8 << 10),
        "{} segments: {s:?}",
        segments.len()
    );
    store.close().unwrap();
}

#[test]
fn a_read_only_store_warms_and_the_switch_turns_it_off() {
    let fx = TestStore::new(opts(IoMode::Direct, 8 << 20));
    fill(&fx, 500, 300);
    let ro = Store::open_with(fx.path(), fx.opts.clone().read_only(true)).unwrap();
    assert_eq!(wait_warm(&ro).cache_warmed_values, 500);
    drop(ro);
    let off = Store::open_with(fx.path(), fx.opts.clone().warm_cache(false)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let s = off.stats();
    assert_eq!((s.cache_warming, s.cache_warmed_values), (false, 0));
    assert_eq!(s.cache_bytes, 0, "{s:?}");
    off.close().unwrap();
    // With the cache off there is nothing to warm.
    let no_cache = Store::open_with(fx.path(), fx.opts.clone().cache_capacity(0)).unwrap();
    assert_eq!(no_cache.stats().cache_warmed_values, 0);
    no_cache.close().unwrap();
}

/// Flips one byte of the file at `path`, at `offset`.
fn flip(path: &std::path::Path, offset: u64) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    f.read_exact_at(&mut b, offset).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], offset).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn damaged_records_are_not_warmed_and_still_fail_their_reads() {
    const N: usize = 3000;
    let fx = TestStore::new(opts(IoMode::Direct, 32 << 20));
    fill(&fx, N, 1000);
    // Two segments: a value damaged in one, a record's key (under its header crc) in another.
    let segments = common::files::written_files(fx.path(), common::files::FileKind::Log);
    assert!(segments.len() >= 3, "{segments:?}");
    let records = |i: usize| {
        podstore::inspect::file_records(&segments[i])
            .unwrap()
            .records
    };
    let key_of = |r: &podstore::inspect::RecordInfo| -> usize {
        String::from_utf8_lossy(&r.key[4..]).parse().unwrap()
    };
    let (in_value, in_header) = (records(0), records(1));
    let value_hit = &in_value[in_value.len() / 2];
    let header_hit = &in_header[in_header.len() / 2];
    let (bad_value, bad_header) = (key_of(value_hit), key_of(header_hit));
    // Past the 32-byte header and the key: a byte of the value; a byte of the key.
    flip(&segments[0], value_hit.offset + 32 + 10 + 500);
    flip(&segments[1], header_hit.offset + 32 + 5);
    // The records after the damaged header in its segment cannot be walked.
    let unwalked: Vec<usize> = in_header[in_header.len() / 2 + 1..]
        .iter()
        .map(key_of)
        .collect();

    let store = fx.open();
    let s = wait_warm(&store);
    let expected = N - 2 - unwalked.len();
    assert_eq!(s.cache_warmed_values, expected as u64, "{s:?}");
    for k in [bad_value, bad_header] {
        match store.get(key(k)) {
            Err(Error::Corruption { .. }) => {}
            other => panic!("key {k}: {other:?}, not a corruption error"),
        }
    }
    let want = |k| Some(value(k, 0, 1000));
    let warm = (0..N).filter(|k| ![bad_value, bad_header].contains(k) && !unwalked.contains(k));
    assert_eq!(read_counting(&store, warm, want), (expected as u64, 0));
    let (hits, misses) = read_counting(&store, unwalked.iter().copied(), want);
    assert_eq!((hits, misses), (0, unwalked.len() as u64));
    store.close().unwrap();
}

#[test]
fn a_close_during_the_warm_up_stops_it() {
    const N: usize = 12_000;
    let fx = TestStore::new(opts(IoMode::Direct, 256 << 20));
    fill(&fx, N, 2000);
    // The time a whole warm-up takes here.
    let store = fx.open();
    let began = Instant::now();
    let whole = wait_warm(&store);
    let warm_time = began.elapsed();
    assert_eq!(whole.cache_warmed_values, N as u64);
    store.close().unwrap();
    // A close right after open stops the warm-up after the read in progress, not at its end.
    let mut stopped_early = 0;
    for _ in 0..5 {
        let store = fx.open();
        let at_close = store.stats();
        let began = Instant::now();
        drop(store);
        let took = began.elapsed();
        if at_close.cache_warming && at_close.cache_warmed_values < N as u64 / 2 {
            assert!(
                took < warm_time / 2 + Duration::from_millis(50),
                "a drop took {took:?}, a whole warm-up {warm_time:?}"
            );
            stopped_early += 1;
        }
    }
    // Open returns before the warm-up has read half the store (it does not wait for it).
    assert!(stopped_early > 0, "the warm-up was never caught running");
}

// ---------------------------------------------------------------------------------------------
// The model test
// ---------------------------------------------------------------------------------------------

/// Keys of the model (read and written by the operations).
const KEYS: usize = 12;
/// Keys written once before the operations, so that every reopen has a warm-up that the
/// operations after it run alongside.
const FILLER: usize = 1500;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, usize),
    Delete(usize),
    Compact,
    Reopen,
    Get(usize),
}

fn op() -> impl Strategy<Value = Op> {
    // Mostly a few fixed lengths: a stale value of the same length as the live one is what
    // the cache's own length check cannot tell apart.
    let len = prop_oneof![
        Just(0usize),
        Just(100usize),
        Just(1000usize),
        Just(4096usize),
        1usize..4096,
        4097usize..20_000,
    ];
    prop_oneof![
        6 => (0..KEYS, len).prop_map(|(k, l)| Op::Put(k, l)),
        2 => (0..KEYS).prop_map(Op::Delete),
        1 => Just(Op::Compact),
        2 => Just(Op::Reopen),
        3 => (0..KEYS).prop_map(Op::Get),
    ]
}

/// A store configuration of the model test.
#[derive(Debug, Clone)]
struct Config {
    mode: IoMode,
    /// `None`: the default budget.
    capacity: Option<u64>,
    hash_bits: u32,
    compressed: bool,
}

fn config() -> impl Strategy<Value = Config> {
    (
        prop_oneof![Just(IoMode::Direct), Just(IoMode::Buffered)],
        prop_oneof![Just(None), Just(Some(256u64 << 10)), Just(Some(4u64 << 20))],
        prop_oneof![Just(64u32), Just(3u32)],
        any::<bool>(),
    )
        .prop_map(|(mode, capacity, hash_bits, compressed)| Config {
            mode,
            capacity,
            hash_bits,
            compressed,
        })
}

fn model_opts(c: &Config) -> Options {
    let mut o = small()
        .io_mode(c.mode)
        .durability(Durability::Sync)
        .background_compaction(false)
        .compaction_threshold(0.05)
        .testing_hash_bits(c.hash_bits)
        .compression(if c.compressed {
            Compression::Lz4
        } else {
            Compression::None
        });
    if let Some(bytes) = c.capacity {
        o = o.cache_capacity(bytes);
    }
    o
}

fn model_key(k: usize) -> Vec<u8> {
    // Lengths from 1 byte up, so that records sit at many offsets.
    let mut name = vec![b'm'; 1 + k * 37];
    name[0] = b'A' + k as u8;
    name
}

#[track_caller]
fn check(
    store: &Store,
    k: usize,
    model: &HashMap<usize, Vec<u8>>,
    when: &str,
) -> Result<(), TestCaseError> {
    let got = store
        .get(model_key(k))
        .map_err(|e| TestCaseError::fail(format!("{when}: get {k}: {e}")))?;
    prop_assert!(
        got.as_ref() == model.get(&k),
        "{when}: key {k}: got {:?} bytes, want {:?} (stale or wrong)",
        got.as_ref().map(|v| v.len()),
        model.get(&k).map(|v| v.len())
    );
    Ok(())
}

fn run_model(c: Config, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let fx = TestStore::new(model_opts(&c));
    // Filler first (buffered: quick), the model keys' writes after it.
    let filling =
        Store::open_with(fx.path(), fx.opts.clone().durability(Durability::Buffered)).unwrap();
    for i in 0..FILLER {
        filling
            .put(format!("filler-{i}"), vec![i as u8; 600])
            .unwrap();
    }
    filling.close().unwrap();
    let mut store = fx.open();
    let mut model: HashMap<usize, Vec<u8>> = HashMap::new();
    let mut version = 0u32;
    for (i, op) in ops.into_iter().enumerate() {
        let when = format!("op {i} ({op:?})");
        match op {
            Op::Put(k, len) => {
                version += 1;
                let v = value(k, version, len);
                store.put(model_key(k), &v).unwrap();
                model.insert(k, v);
                check(&store, k, &model, &format!("{when}: read-your-write"))?;
            }
            Op::Delete(k) => {
                store.delete(model_key(k)).unwrap();
                model.remove(&k);
                check(&store, k, &model, &format!("{when}: read-your-delete"))?;
            }
            Op::Compact => {
                store.compact().unwrap();
            }
            Op::Reopen => {
                store.close().unwrap();
                store = fx.open();
                // Every key read at once, while the warm-up runs.
                for k in 0..KEYS {
                    check(&store, k, &model, &format!("{when}: during the warm-up"))?;
                }
            }
            Op::Get(k) => check(&store, k, &model, &when)?,
        }
    }
    store.close().unwrap();
    let store = fx.open();
    let s = wait_warm(&store);
    for k in 0..KEYS {
        check(&store, k, &model, "after the last warm-up")?;
    }
    for i in (0..FILLER).step_by(97) {
        let got = store.get(format!("filler-{i}")).unwrap();
        prop_assert_eq!(got, Some(vec![i as u8; 600]), "filler {}", i);
    }
    if c.capacity.is_none() {
        prop_assert!(s.cache_warmed_values >= FILLER as u64, "{:?}", s);
    }
    store.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: common::long::cases("PROPTEST_CASES", 8, 64) as u32,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Random writes, deletes, compactions and reopens against a map: never stale across a
    /// warm-up, read-your-writes during one.
    #[test]
    fn warm_restarts_never_serve_stale_values(c in config(), ops in prop::collection::vec(op(), 1..60)) {
        run_model(c, ops)?;
    }
}
