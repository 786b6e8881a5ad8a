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

/// The key of item `i`: 16 ASCII bytes, sorted like `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("key-{i:012}").into_bytes()
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
        let mut rng = Rng::new(seed ^ 0xA5A5_5A5A_C3C3_3C3C);
        let total = len + SPAN;
        let mut buf = Vec::with_capacity(total + 8);
        while buf.len() < total {
            buf.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        buf.truncate(total);
        ValuePool {
            buf,
            len,
            span: (SPAN / 8) as u64,
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
}
