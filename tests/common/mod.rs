//! Helpers shared by the integration tests: deterministic randomness.
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code)]

use std::ops::Range;

/// splitmix64: spreads a seed (or any counter) over the whole word.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A small deterministic pseudo-random generator (xorshift64).
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed`; different seeds give different sequences.
    pub fn new(seed: u64) -> XorShift {
        XorShift(splitmix64(seed) | 1)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `range` (not empty).
    pub fn in_range(&mut self, range: Range<usize>) -> usize {
        range.start + self.below(range.len())
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}
