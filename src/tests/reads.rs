//! Reads counted by the simulator: a whole-value get of a record of up to 8 MiB is one read
//! call (header, key, value and chunk crcs together), from a sealed segment, from the active
//! one, and from a blob file; a range read of a large value does not read its record whole;
//! `metadata` is one read cold (the header and key) and none cached.

use std::path::Path;

use super::{LARGE, new_sim, open, options};
use crate::Durability;
use crate::io::sim::{Fault, FaultError, OpKind, Sim, SimConfig};

fn reads(sim: &Sim) -> u64 {
    sim.stats().calls.get(&OpKind::Read).copied().unwrap_or(0)
}

/// A value of `len` bytes that differs from the others (so a wrong record is noticed).
fn value(tag: u8, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31) ^ tag).collect()
}

#[test]
fn a_cold_get_of_a_value_up_to_8_mib_is_one_read() {
    let sim = new_sim(SimConfig::default());
    // No read cache: every get below is cold, and nothing it read is kept for the next.
    let opts = options(Durability::Sync).cache_capacity(0);
    let store = open(&sim, opts.clone()).unwrap();
    // In the log (below LARGE): small, several chunks; in a blob file (above): 1 MiB + 1.
    let lens = [100, LARGE - 1000, 3 * 4096 + 17, (1 << 20) + 1];
    for (i, &len) in lens.iter().enumerate() {
        store.put(format!("k{i}"), value(i as u8, len)).unwrap();
    }
    store.close().unwrap();
    let store = open(&sim, opts).unwrap();
    assert!(
        sim.file_names(Path::new(super::DIR))
            .iter()
            .any(|n| n.starts_with("blob-")),
        "the largest value is in a blob file"
    );
    for (i, &len) in lens.iter().enumerate() {
        let before = reads(&sim);
        let got = store.get(format!("k{i}")).unwrap().unwrap();
        assert_eq!(got, value(i as u8, len), "value {i}");
        assert_eq!(
            reads(&sim) - before,
            1,
            "reads for a cold get of {len} bytes"
        );
    }
    // Written after the reopen, into the active segment (on disk after the sync; nothing left
    // in the write buffers but the tail block's copy): still read correctly.
    store.put("fresh", value(9, 20_000)).unwrap();
    assert_eq!(store.get("fresh").unwrap().unwrap(), value(9, 20_000));
    // A 4 KiB range of the blob value reads its chunk (and crc table): a few reads, not the
    // record whole: the range read still goes by chunks.
    let before = reads(&sim);
    let at = 700_000u64;
    let part = store.get_range("k3", at..at + 4096).unwrap().unwrap();
    assert_eq!(part[..], value(3, lens[3])[at as usize..at as usize + 4096]);
    assert!(
        reads(&sim) - before >= 2,
        "a range read reads header, then chunks"
    );
}

/// `metadata` of a cold key is one read (the record's header and key, whatever the value's
/// length), and none once the read cache has the key or the value; `get_with_metadata` is one
/// read, like `get`, and agrees with `metadata`.
#[test]
fn metadata_is_one_read_cold_and_none_cached() {
    let sim = new_sim(SimConfig::default());
    // Cold means cold: no warm-up at open reading (and keeping) the values in the background.
    let opts = options(Durability::Sync).warm_cache(false);
    let store = open(&sim, opts.clone()).unwrap();
    let lens = [100, 3 * 4096 + 17, (1 << 20) + 1];
    let mut versions = Vec::new();
    for (i, &len) in lens.iter().enumerate() {
        versions.push(store.put(format!("k{i}"), value(i as u8, len)).unwrap());
    }
    store.close().unwrap();
    for cache in [0, 64 << 20] {
        let store = open(&sim, opts.clone().cache_capacity(cache)).unwrap();
        for (i, &len) in lens.iter().enumerate() {
            let key = format!("k{i}");
            let before = reads(&sim);
            let meta = store.metadata(&key).unwrap().unwrap();
            assert_eq!((meta.len(), meta.version()), (len as u64, versions[i]));
            assert_eq!(reads(&sim) - before, 1, "cold metadata of {len} bytes");
            let before = reads(&sim);
            assert_eq!(store.metadata(&key).unwrap().unwrap(), meta);
            let again = reads(&sim) - before;
            assert_eq!(again, if cache == 0 { 1 } else { 0 }, "metadata again");
            let before = reads(&sim);
            let (got, with) = store.get_with_metadata(&key).unwrap().unwrap();
            assert_eq!(got, value(i as u8, len));
            assert_eq!(with, meta);
            assert_eq!(reads(&sim) - before, 1, "get_with_metadata of {len} bytes");
        }
        store.close().unwrap();
    }
}

fn batches(sim: &Sim) -> u64 {
    sim.stats()
        .calls
        .get(&OpKind::ReadEach)
        .copied()
        .unwrap_or(0)
}

/// The first range read of a large value since open asks for the record's header and key,
/// the range's chunks and their crc sector in one batch (`read/ahead.rs`: with io_uring, one
/// device round trip); a range read of a value whose key the cache holds reads no header: its
/// chunks and crc sector in one batch, or its chunks alone (no batch) where the cache holds the
/// sector; a range near the value's end reads chunks and crcs in one read, so its batch
/// has two reads; a failed batch leaves the read to be made the usual way, still right.
#[test]
fn a_cold_range_read_of_a_large_value_issues_its_reads_together() {
    let sim = new_sim(SimConfig::default());
    let opts = options(Durability::Sync).warm_cache(false);
    let store = open(&sim, opts.clone()).unwrap();
    // A blob file's value, one in a log segment (a record above the 64 KiB read whole) and one
    // more of each, for the ranges near the end and the failed batch.
    let lens = [(1 << 20) + 1, 300_000, (1 << 20) + 5, (1 << 20) + 9];
    for (i, &len) in lens.iter().enumerate() {
        store.put(format!("k{i}"), value(i as u8, len)).unwrap();
    }
    store.close().unwrap();
    let store = open(&sim, opts).unwrap();
    let check = |i: usize, at: usize, len: usize| {
        let (b0, r0) = (batches(&sim), reads(&sim));
        let got = store
            .get_range(format!("k{i}"), at..at + len)
            .unwrap()
            .unwrap();
        assert_eq!(got, value(i as u8, lens[i])[at..at + len], "k{i} at {at}");
        (batches(&sim) - b0, reads(&sim) - r0)
    };
    // Cold, far from the end: header, chunks (two: the range straddles a chunk boundary) and
    // the crc sector, in one batch of three reads.
    assert_eq!(check(0, 300_000, 5000), (1, 3), "blob value, cold");
    assert_eq!(check(1, 10_000, 4096), (1, 3), "log value, cold");
    // The key is in the cache now: no header to read; the chunk and a crc sector not read
    // before, in one batch of two reads...
    assert_eq!(check(0, 700_000, 100), (1, 2), "blob value, key cached");
    // ...and a range whose crc sector the cache holds: its chunk, no batch.
    assert_eq!(
        check(0, 690_000, 100),
        (0, 1),
        "blob value, key and crcs cached"
    );
    // Near the end: the chunks and the table's end in one read, with the header: two.
    let end = lens[2] - 4096;
    assert_eq!(check(2, end, 4096), (1, 2), "the last 4 KiB, cold");
    // A batch that fails (counted, then failed before any of its reads) is dropped; the usual
    // reads, one after the other (header, crcs, chunks), answer.
    sim.inject(Fault {
        kind: OpKind::ReadEach,
        nth: batches(&sim),
        error: FaultError::Eio,
        sticky: false,
    });
    assert_eq!(
        check(3, 500_000, 4096),
        (1, 3),
        "failed batch: one read after another"
    );
    // An empty range or one past the end reads nothing ahead.
    assert_eq!(check(3, 900_000, 0).0, 0);
    assert!(store.get_range("k3", lens[3] as u64 + 1..).is_err());
}
