//! Reads counted by the simulator: a whole-value get of a record of up to 8 MiB is one read
//! call (header, key, value and chunk crcs together), from a sealed segment, from the active
//! one, and from a blob file; a range read of a large value does not read its record whole;
//! `metadata` is one read cold (the header and key) and none cached.

use std::path::Path;

use super::{LARGE, new_sim, open, options};
use crate::Durability;
use crate::io::sim::{OpKind, Sim, SimConfig};

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
