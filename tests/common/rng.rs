//! Deterministic pseudo-random generators: the same seed gives the same test data on every run.

use std::ops::Range;

/// splitmix64: spreads a seed (or any counter) over the whole word.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What the tests draw from a generator; every method derives from [`Random::next_u64`].
pub trait Random {
    /// The next 64 random bits.
    fn next_u64(&mut self) -> u64;

    /// A number in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// A number in `range` (not empty).
    fn in_range(&mut self, range: Range<usize>) -> usize {
        range.start + self.below(range.len())
    }

    /// True with probability `percent` / 100.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// Uniform in `0..n` (n > 0), as a `u64`.
    fn below_u64(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..hi` (lo < hi).
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below_u64(hi - lo)
    }

    /// `len` random bytes: the next words, little-endian, the last one cut short.
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// `len` bytes of text: words drawn from `vocabulary` (compressible, as real text is).
    fn words(&mut self, vocabulary: &[&str], len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 16);
        while out.len() < len {
            out.extend_from_slice(vocabulary[self.below(vocabulary.len())].as_bytes());
        }
        out.truncate(len);
        out
    }

    /// Random bytes whose first byte is not zero (so that they never read as padding).
    fn garbage(&mut self, len: usize) -> Vec<u8> {
        let mut g = self.bytes(len);
        if let Some(b) = g.first_mut() {
            *b |= 0x80;
        }
        g
    }
}

/// A small deterministic pseudo-random generator (xorshift64).
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed`; different seeds give different sequences.
    pub fn new(seed: u64) -> XorShift {
        XorShift(splitmix64(seed) | 1)
    }

    /// A generator started at `state` as it is (not zero): for data that was generated that way
    /// before this module had [`XorShift::new`].
    pub fn from_state(state: u64) -> XorShift {
        assert_ne!(state, 0, "xorshift state must not be zero");
        XorShift(state)
    }
}

impl Random for XorShift {
    fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// The splitmix64 sequence (a counter stepped by the golden ratio, each step mixed by
/// [`splitmix64`]): the generator of the crash tests, whose seeds (`PODSTORE_CRASH_SEED`) name
/// its workloads.
pub struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }
}

impl Random for SplitMix {
    fn next_u64(&mut self) -> u64 {
        let x = self.0;
        self.0 = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix64(x)
    }
}
