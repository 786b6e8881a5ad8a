//! Memory figures for the memory-budget tests (tests/memory.rs, tests/resident.rs): the
//! process's resident memory, and a workload that fills the read cache and checks every value.

use podstore::{Stats, Store};

use super::{Random, XorShift};

/// The process's resident memory, from `/proc/self/status` (`VmRSS`, the figure `statm` gives
/// in pages, here in KiB).
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

pub fn value(i: u64, len: usize) -> Vec<u8> {
    XorShift::new(0x3E30 ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).bytes(len)
}

pub fn key(i: u64) -> String {
    format!("key-{i:08}")
}

/// Writes `count` values of `len` bytes, then reads every one back `passes` times in a
/// shuffled order, checking each; returns the stats after.
pub fn write_and_read(store: &Store, count: u64, len: usize, passes: usize) -> Stats {
    for i in 0..count {
        store.put(key(i), value(i, len)).unwrap();
    }
    store.flush().unwrap();
    let mut rng = XorShift::new(7);
    for _ in 0..passes {
        for _ in 0..count {
            let i = rng.below_u64(count);
            assert_eq!(
                store.get(key(i)).unwrap().unwrap(),
                value(i, len),
                "{}",
                key(i)
            );
        }
    }
    store.stats()
}
