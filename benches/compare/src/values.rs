//! Deterministic keys and incompressible values.

/// SplitMix64: a small, fast, well-mixed 64-bit generator (deterministic from its seed).
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A deterministic shuffle of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.below(i as u64 + 1) as usize;
            v.swap(i, j);
        }
        v
    }
}

/// Length of every key (`--key-len`, at least 16; set once at start).
static KEY_LEN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

/// Sets the length of the keys `key` makes (`--key-len`); 16 unless called.
pub fn set_key_len(len: usize) {
    let _ = KEY_LEN.set(len.max(16));
}

/// The key of item `i`: 16 ASCII bytes (or `--key-len`, padded with `.`), sorted like `i`.
pub fn key(i: u64) -> Vec<u8> {
    let mut k = format!("key-{i:012}").into_bytes();
    k.resize(*KEY_LEN.get().unwrap_or(&16), b'.');
    k
}

/// Values of one length, cut from one buffer of pseudo-random (incompressible) bytes: value `i`
/// starts at a pseudo-random 8-byte-aligned offset, so neighbouring values differ and no value
/// compresses, while the harness holds only `len + 64 MiB` bytes whatever the number of values.
pub struct ValuePool {
    buf: Vec<u8>,
    len: usize,
    span: u64,
}

/// Size of the window the value offsets are drawn from.
const SPAN: usize = 64 << 20;

impl ValuePool {
    pub fn new(len: usize, seed: u64) -> ValuePool {
        ValuePool::with_span(len, seed, SPAN)
    }

    /// As [`ValuePool::new`], with offsets drawn from a window of `span` bytes (rounded down
    /// to 8, at least 8) instead of 64 MiB: for runs whose memory is counted (`memlimit`), where
    /// the harness's own 64 MiB would be a large part of a small limit. A window of 1 MiB
    /// still gives 131 072 different values.
    pub fn with_span(len: usize, seed: u64, span: usize) -> ValuePool {
        let span = (span / 8).max(1) * 8;
        let mut rng = Rng::new(seed ^ 0xA5A5_5A5A_C3C3_3C3C);
        let total = len + span;
        let mut buf = Vec::with_capacity(total + 8);
        while buf.len() < total {
            buf.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        buf.truncate(total);
        ValuePool {
            buf,
            len,
            span: (span / 8) as u64,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn value(&self, i: u64) -> &[u8] {
        let off = (Rng::new(i).next_u64() % self.span) as usize * 8;
        &self.buf[off..off + self.len]
    }
}

/// YCSB's key chooser for its core workloads, `ScrambledZipfianGenerator` (θ = 0.99): a zipfian
/// draw over 10^10 items (YCSB's `ZipfianGenerator` with the ζ it precomputes for that count),
/// hashed with 64-bit FNV-1a and taken modulo the record count, so that the popular records are
/// spread over the key space rather than clustered at its start.
pub struct ScrambledZipfian {
    records: u64,
    alpha: f64,
    eta: f64,
}

/// YCSB's `ScrambledZipfianGenerator` constants: item count, θ and ζ(item count, θ).
const ZIPF_ITEMS: f64 = 10_000_000_000.0;
const ZIPF_THETA: f64 = 0.99;
const ZIPF_ZETAN: f64 = 26.469_028_201_783_02;

impl ScrambledZipfian {
    /// Draws over records `0..records` (records > 0).
    pub fn new(records: u64) -> ScrambledZipfian {
        let zeta2 = 1.0 + 0.5f64.powf(ZIPF_THETA);
        ScrambledZipfian {
            records,
            alpha: 1.0 / (1.0 - ZIPF_THETA),
            eta: (1.0 - (2.0 / ZIPF_ITEMS).powf(1.0 - ZIPF_THETA)) / (1.0 - zeta2 / ZIPF_ZETAN),
        }
    }

    /// The next record index.
    pub fn next(&self, rng: &mut Rng) -> u64 {
        // Gray et al., "Quickly generating billion-record synthetic databases", as YCSB has it.
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let uz = u * ZIPF_ZETAN;
        let item = if uz < 1.0 {
            0
        } else if uz < 1.0 + 0.5f64.powf(ZIPF_THETA) {
            1
        } else {
            (ZIPF_ITEMS * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        fnv1a64(item) % self.records
    }
}

/// 64-bit FNV-1a over the eight bytes of `v`, lowest first (YCSB's `Utils.fnvhash64`).
fn fnv1a64(mut v: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    for _ in 0..8 {
        hash ^= v & 0xff;
        hash = hash.wrapping_mul(0x0000_0100_0000_01B3);
        v >>= 8;
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_deterministic_and_distinct() {
        let a = ValuePool::new(1024, 1);
        let b = ValuePool::new(1024, 1);
        assert_eq!(a.value(7), b.value(7));
        assert_ne!(a.value(7), a.value(8));
        assert_eq!(a.value(3).len(), 1024);
        let p = Rng::new(3).permutation(100);
        let mut s = p.clone();
        s.sort();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn scrambled_zipfian_is_skewed_and_spread() {
        let records = 200_000;
        let z = ScrambledZipfian::new(records);
        let mut rng = Rng::new(9);
        let mut counts = std::collections::HashMap::new();
        let draws = 200_000;
        for _ in 0..draws {
            let k = z.next(&mut rng);
            assert!(k < records);
            *counts.entry(k).or_insert(0u64) += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.into_iter().map(|(k, c)| (c, k)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        let top: u64 = by_count
            .iter()
            .take(records as usize / 100)
            .map(|x| x.0)
            .sum();
        // θ = 0.99: the hottest 1 % of the records take a large share of the draws (a uniform
        // choice would give them 1 %), and they are not the first 1 % of the key space.
        assert!(top * 100 / draws > 30, "top 1 % drew {top} of {draws}");
        let low = by_count
            .iter()
            .take(100)
            .filter(|x| x.1 < records / 100)
            .count();
        assert!(
            low < 20,
            "{low} of the 100 hottest keys are among the first 1 %"
        );
    }
}
