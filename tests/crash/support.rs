//! Helpers of the crash tests: values, options, checks, parallel cases.

use std::path::Path;

use podstore::{Durability, Error, IoMode, Options, Store};

use crate::common::store::{mode_name, quiet, show_key, small_with};
use crate::common::{Random, SplitMix};

/// Write block size of the test file system (ext4).
pub const BLOCK: u64 = 4096;

pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The value written as version `version` of `key`: derived from both, so it can be verified.
pub fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    SplitMix::new(fnv1a(key) ^ version.wrapping_mul(0x2545_F491_4F6C_DD1D)).bytes(len)
}

/// Small segments (several per test) and small write buffers (values larger than one).
pub fn options(mode: IoMode, durability: Durability) -> Options {
    small_with(mode, durability)
}

/// [`options`] for a store opened to be checked (recovered, read, verified, closed): durable
/// writes, and no background threads (see [`quiet`]): the sweeps open two stores a case, and a
/// close right after an open could wait out a ticker or compactor interval that has nothing to
/// do with what they check.
pub fn check_options(mode: IoMode) -> Options {
    quiet(options(mode, Durability::Sync))
}

/// Opens `dir` with [`check_options`].
pub fn open(dir: &Path, mode: IoMode) -> Store {
    Store::open_with(dir, check_options(mode))
        .unwrap_or_else(|e| panic!("open {} ({}): {e}", dir.display(), mode_name(mode)))
}

pub fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "absent".into(),
        Some(b) => format!("{} bytes (fnv {:016x})", b.len(), fnv1a(b)),
    }
}

/// Asserts that `key` reads back as `expected` (`None`: absent).
pub fn assert_reads(store: &Store, key: &[u8], expected: Option<&[u8]>, ctx: &str) {
    let got = store
        .get(key)
        .unwrap_or_else(|e| panic!("{ctx}: get {}: {e}", show_key(key)));
    assert!(
        got.as_deref() == expected,
        "{ctx}: key {}: got {}, expected {}",
        show_key(key),
        describe(got.as_deref()),
        describe(expected)
    );
}

/// Asserts that `get` of `key` fails with `Error::Corruption` in segment `segment`, at an offset
/// in `[lo, hi)`; returns the offset.
pub fn assert_corrupt(
    result: podstore::Result<Option<Vec<u8>>>,
    segment: u64,
    lo: u64,
    hi: u64,
    ctx: &str,
) -> u64 {
    match result {
        Err(Error::Corruption {
            segment: s, offset, ..
        }) => {
            assert_eq!(
                s, segment,
                "{ctx}: corruption reported in the wrong segment"
            );
            assert!(
                (lo..hi).contains(&offset),
                "{ctx}: corruption offset {offset} outside [{lo}, {hi})"
            );
            offset
        }
        Err(e) => panic!("{ctx}: expected Error::Corruption, got error {e}"),
        Ok(v) => panic!(
            "{ctx}: expected Error::Corruption, got {}",
            describe(v.as_deref())
        ),
    }
}
