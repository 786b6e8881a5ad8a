//! Large values in the read cache (issue 25): values too large to be kept whole are kept in
//! 64 KiB pieces of their stored bytes, verified when read. What a get or a range read keeps,
//! that a cold range read still reads only its chunks, that a piece is never stale (overwrite,
//! delete, compaction, reopen), that damage is still found where nothing was cached, and that
//! a scan of large values does not push out the hot small ones. The concurrent histories are
//! in tests/model (`sync_direct_piece_cache_matches_model`).

mod common;

use std::os::unix::fs::FileExt;

use common::files::{FileKind, written_files};
use common::store::{TestStore, assert_hot_survived};
use common::{Random, XorShift};
use podstore::{Error, IoMode, Options};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;
/// The cache's piece of a large value.
const PIECE: usize = 64 * KIB;

fn options(cache: u64) -> Options {
    common::store::small()
        .io_mode(IoMode::Direct)
        .cache_capacity(cache)
        .background_compaction(false)
}

fn value(tag: u64, len: usize) -> Vec<u8> {
    XorShift::new(0x1A46E ^ tag.wrapping_mul(0x9E37_79B9_7F4A_7C15)).bytes(len)
}

/// Flips one byte at `offset` of the only copy of `value` in the store's files (a blob file or
/// a log segment).
fn damage(dir: &std::path::Path, value: &[u8], offset: usize) {
    damage_at(dir, value, offset as isize)
}

/// [`damage`] at `offset` from the value's start, which may be negative: the record's key and
/// header lie before its value.
fn damage_at(dir: &std::path::Path, value: &[u8], offset: isize) {
    let files = [FileKind::Blob, FileKind::Log].map(|k| written_files(dir, k));
    for path in files.iter().flatten() {
        let bytes = std::fs::read(path).unwrap();
        if let Some(at) = bytes.windows(4096).position(|w| w == &value[..4096]) {
            let at = at.checked_add_signed(offset).unwrap();
            let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            file.write_at(&[bytes[at] ^ 0x5a], at as u64).unwrap();
            file.sync_all().unwrap();
            return;
        }
    }
    panic!("value not found in any file");
}

fn corrupt<T: std::fmt::Debug>(r: Result<T, Error>, what: &str) {
    assert!(matches!(r, Err(Error::Corruption { .. })), "{what}: {r:?}");
}

/// A get keeps a large value's pieces (it read them whole anyway); the next get, range read
/// and reader copy from them, even once the file is damaged (the bytes were verified when
/// read). After a reopen (an empty cache) the damage is found by every kind of read.
#[test]
fn a_large_value_read_whole_is_kept_in_pieces() {
    let fx = TestStore::new(options(16 << 20));
    let store = fx.open();
    let v = value(1, 3 * MIB + 1000);
    store.put("big", &v).unwrap();
    store.close().unwrap();

    let store = fx.open();
    assert_eq!(store.get("big").unwrap().unwrap(), v);
    let kept = store.stats().cache_bytes;
    assert!(kept >= v.len() as u64, "{kept} bytes cached");
    damage(fx.path(), &v, MIB + 5);
    let misses = store.stats().cache_misses;
    assert_eq!(store.get("big").unwrap().unwrap(), v, "from the pieces");
    assert_eq!(store.get_bytes("big").unwrap().unwrap(), v);
    let at = MIB - 100;
    assert_eq!(
        store.get_range("big", at..at + 8 * KIB).unwrap().unwrap(),
        &v[at..at + 8 * KIB]
    );
    let mut all = Vec::new();
    std::io::Read::read_to_end(&mut store.reader("big").unwrap().unwrap(), &mut all).unwrap();
    assert_eq!(all, v, "reader");
    assert_eq!(store.stats().cache_misses, misses, "nothing read again");
    store.close().unwrap();

    let store = fx.open();
    corrupt(store.get("big"), "get after reopen");
    corrupt(
        store.get_range("big", MIB..MIB + 16),
        "range over the damage",
    );
    assert_eq!(
        store
            .get_range("big", 2 * MIB..2 * MIB + 16)
            .unwrap()
            .unwrap(),
        &v[2 * MIB..2 * MIB + 16],
        "a range away from the damage"
    );
    // A failed read keeps nothing: it fails again.
    corrupt(store.get("big"), "get again");
    corrupt(store.get_bytes("big"), "get_bytes");
}

/// A range read of a large value fetches the chunks it touches and keeps them (no piece
/// around them), whether it is the value's first read since open or not: random ranges never
/// pay for a piece (issue 37), and the same range read again is a copy. A read that starts
/// where the last read of the value ended (a stream) fetches its whole piece while the cache
/// has room, and the next range read in that piece is served from memory.
#[test]
fn a_random_range_reads_its_chunks_and_a_stream_reads_around() {
    let fx = TestStore::new(options(16 << 20));
    let store = fx.open();
    let v = value(2, 10 * MIB);
    store.put("big", &v).unwrap();
    store.close().unwrap();

    let store = fx.open();
    let range = |at: usize| {
        let got = store.get_range("big", at..at + 4096).unwrap().unwrap();
        assert_eq!(got, &v[at..at + 4096], "at {at}");
        store.stats()
    };
    let cold = range(3 * MIB + 100);
    // The record's key, a sector of chunk crcs and the two chunks read; no piece.
    assert!(cold.cache_bytes < 12 * KIB as u64, "{cold:?}");
    // A value read before, at a random place: its two chunks again, no piece.
    let random = range(5 * MIB + 100);
    assert!(
        random.cache_bytes < cold.cache_bytes + 10 * KIB as u64,
        "{random:?}"
    );
    // The same range again: from the chunks kept (no miss).
    let again = range(5 * MIB + 100);
    assert_eq!(again.cache_misses, random.cache_misses, "{again:?}");
    // A stream: the next range where the last ended fetches its piece...
    let stream = range(5 * MIB + 4196);
    assert!(
        stream.cache_bytes >= random.cache_bytes + PIECE as u64 - 8 * KIB as u64,
        "{stream:?}"
    );
    // ...and the next range in the piece is served from memory.
    let near = range(5 * MIB + 30_000);
    assert_eq!(
        near.cache_misses, stream.cache_misses,
        "served from the piece"
    );
    // The piece was verified whole: damage in it, after it was kept, is not seen...
    damage(fx.path(), &v, 5 * MIB + 50_000);
    range(5 * MIB + 48_000);
    // ...while a piece not kept is read and checked.
    damage(fx.path(), &v, 7 * MIB + 50);
    corrupt(store.get_range("big", 7 * MIB..7 * MIB + 100), "uncached");
}

/// With no free room in the cache, a stream of range reads fetches only its chunks: read-around
/// never makes the cache evict for bytes nobody asked for.
#[test]
fn read_around_stops_when_the_cache_is_full() {
    const CAPACITY: u64 = 2 << 20;
    let fx = TestStore::new(options(CAPACITY).durability(podstore::Durability::Buffered));
    let store = fx.open();
    let v = value(3, 4 * MIB);
    store.put("big", &v).unwrap();
    for i in 0..3000u64 {
        store.put(format!("k{i}"), value(100 + i, 1000)).unwrap();
    }
    // Fill the cache: 3000 values of ~1.2 KiB each is ~1.7x the capacity.
    for i in 0..3000u64 {
        store.get(format!("k{i}")).unwrap().unwrap();
    }
    let full = store.stats();
    assert!(full.cache_evictions > 0, "{full:?}");
    let range = |at: usize| {
        let got = store.get_range("big", at..at + 4096).unwrap().unwrap();
        assert_eq!(got, &v[at..at + 4096]);
        store.stats()
    };
    // A stream of ranges, each where the last ended: each reads the chunk it reaches into,
    // none reads around (the next range's second chunk is a miss every time).
    let mut at = MIB + 100;
    let mut last = range(at);
    for _ in 0..20 {
        at += 4096;
        let s = range(at);
        assert!(
            s.cache_misses > last.cache_misses,
            "read around: {last:?} -> {s:?}"
        );
        last = s;
    }
    // 21 ranges kept at most 22 chunks and a crc sector (and the key): no piece.
    assert!(
        last.cache_evictions - full.cache_evictions <= 22 * 4 + 4,
        "read-around evicted: {full:?} -> {last:?}"
    );
}

/// Pieces are keyed by their record's place: after an overwrite, a delete, a compaction move or
/// a reopen every kind of read returns the current value.
#[test]
fn pieces_are_never_stale() {
    // Values above 512 KiB are kept in pieces: those in blob files (from 1 MiB) and those of
    // 512 KiB to 1 MiB, which go to the log and which compaction moves.
    let fx = TestStore::new(options(4 << 20).compaction_threshold(0.1));
    let store = fx.open();
    let len = 2 * MIB + 12_345;
    let (v1, v2, v3) = (value(10, len), value(11, len), value(12, 700 * KIB + 3));
    let check = |store: &podstore::Store, v: &[u8], what: &str| {
        for _ in 0..2 {
            assert_eq!(store.get("k").unwrap().unwrap(), v, "{what}: get");
            assert_eq!(store.get_bytes("k").unwrap().unwrap(), v, "{what}: bytes");
            for at in [0, 70_000, 300 * KIB + 3, v.len() - 5000] {
                assert_eq!(
                    store.get_range("k", at..at + 4096).unwrap().unwrap(),
                    &v[at..at + 4096],
                    "{what}: range at {at}"
                );
            }
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut store.reader("k").unwrap().unwrap(), &mut all).unwrap();
            assert_eq!(all, v, "{what}: reader");
        }
    };
    store.put("k", &v1).unwrap();
    check(&store, &v1, "first");
    store.put("k", &v2).unwrap();
    check(&store, &v2, "overwritten");
    // Into a log segment, between values deleted next, so that compaction moves it.
    for i in 0..10u64 {
        store.put(format!("f{i}"), value(i, 30 * KIB)).unwrap();
    }
    store.put("k", &v3).unwrap();
    for i in 10..20u64 {
        store.put(format!("f{i}"), value(i, 30 * KIB)).unwrap();
    }
    check(&store, &v3, "overwritten again");
    for i in 0..20u64 {
        store.delete(format!("f{i}")).unwrap();
    }
    store.seal().unwrap();
    let report = store.compact().unwrap();
    assert!(report.segments_compacted > 0, "{report:?}");
    check(&store, &v3, "compacted");
    store.close().unwrap();
    let store = fx.open();
    check(&store, &v3, "reopened");
    store.delete("k").unwrap();
    assert_eq!(store.get("k").unwrap(), None);
    assert_eq!(store.get_range("k", 0..10).unwrap(), None);
    assert!(store.reader("k").unwrap().is_none());
}

/// A scan over large values (six times the cache's capacity, each read once) does not push out
/// small values read again and again.
#[test]
fn a_scan_of_large_values_does_not_push_out_the_hot_values() {
    const CAPACITY: u64 = 4 << 20;
    let fx = TestStore::new(options(CAPACITY).durability(podstore::Durability::Buffered));
    let store = fx.open();
    for i in 0..50u64 {
        store.put(format!("hot{i}"), value(i, 1000)).unwrap();
    }
    for i in 0..12u64 {
        store
            .put(format!("big{i}"), value(100 + i, 2 * MIB))
            .unwrap();
    }
    for _ in 0..4 {
        for i in 0..50u64 {
            store.get(format!("hot{i}")).unwrap().unwrap();
        }
    }
    for i in 0..12u64 {
        assert_eq!(
            store.get(format!("big{i}")).unwrap().unwrap(),
            value(100 + i, 2 * MIB)
        );
    }
    assert_hot_survived(&store, (0..50u64).map(|i| format!("hot{i}")), 45);
}

/// With a large budget, a value of a few MiB read by a get is kept whole: `get_bytes` then
/// hands out the cache's own buffer (no copy, no read), and ranges copy from it.
#[test]
fn a_value_of_a_few_mib_is_kept_whole_and_shared() {
    // A quarter of a shard must hold it: 4 GiB (allocated only as the cache fills) is enough
    // for up to 256 shards (64 cores).
    let fx = TestStore::new(options(4 << 30));
    let store = fx.open();
    let v = value(20, 3 * MIB);
    store.put("big", &v).unwrap();
    store.close().unwrap();
    let store = fx.open();
    assert_eq!(store.get("big").unwrap().unwrap(), v);
    let misses = store.stats().cache_misses;
    let (a, b) = (
        store.get_bytes("big").unwrap().unwrap(),
        store.get_bytes("big").unwrap().unwrap(),
    );
    assert_eq!(a, v);
    assert_eq!(a.as_ptr(), b.as_ptr(), "both share the cache's buffer");
    let at = MIB + 7;
    assert_eq!(
        store.get_range("big", at..at + 4096).unwrap().unwrap(),
        &v[at..at + 4096]
    );
    assert_eq!(store.stats().cache_misses, misses, "nothing read again");
}

/// The first range read of a large value after open reads the record's header, the range's
/// chunks and their crcs together (io_uring where the kernel has it): ranges anywhere in values
/// in blob files and in log segments come back right, a damaged chunk or a damaged key found
/// that way is an error, and ranges away from the damage still read.
#[test]
fn cold_range_reads_issued_together_are_right_and_verified() {
    let fx = TestStore::new(options(16 << 20));
    let store = fx.open();
    // Blob files' values and log records above the 64 KiB read whole (small() sets the
    // threshold of blob files; both kinds are here).
    let lens = [
        3 * MIB + 17,
        200 * KIB + 3,
        MIB,
        100 * KIB,
        5 * MIB - 1,
        70 * KIB,
    ];
    let values: Vec<Vec<u8>> = (0..lens.len())
        .map(|i| value(40 + i as u64, lens[i]))
        .collect();
    for (i, v) in values.iter().enumerate() {
        store.put(format!("v{i}"), v).unwrap();
    }
    store.close().unwrap();
    let mut rng = XorShift::new(0xA11EAD);
    for _round in 0..6 {
        // Each reopen starts with an empty cache: every value's first range read is cold.
        let store = fx.open();
        for (i, v) in values.iter().enumerate() {
            let len = 1 + rng.below(3 * 4096 + 1);
            let at = match rng.below(3) {
                0 => 0,
                1 => v.len() - len,
                _ => rng.below(v.len() - len),
            };
            let got = store
                .get_range(format!("v{i}"), at..at + len)
                .unwrap()
                .unwrap();
            assert_eq!(got, &v[at..at + len], "v{i} at {at}, {len} bytes");
        }
        store.close().unwrap();
    }
    // A chunk damaged: a cold range over it fails, one elsewhere in the value reads.
    damage(fx.path(), &values[0], 2 * MIB + 5);
    let store = fx.open();
    corrupt(
        store.get_range("v0", 2 * MIB..2 * MIB + 4096),
        "cold range over a damaged chunk",
    );
    store.close().unwrap();
    let store = fx.open();
    assert_eq!(
        store.get_range("v0", MIB..MIB + 4096).unwrap().unwrap(),
        &values[0][MIB..MIB + 4096]
    );
    store.close().unwrap();
    // The key damaged (the byte before the value): the header's crc fails, whatever the range.
    damage_at(fx.path(), &values[4], -1);
    let store = fx.open();
    corrupt(
        store.get_range("v4", 10..20),
        "cold range of a record with a damaged key",
    );
}
