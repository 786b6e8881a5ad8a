//! Cache-line prefetches: hints that start a load the caller will make soon, so that its cache
//! miss overlaps other work (or other misses) instead of stalling it.
//!
//! Two users: the table of hot values ([`super::hot`]: an entry's bytes, loaded with the entry),
//! and a batch of writes ([`Index::prefetch_shards`]: the shards its keys' look-ups will
//! search, loaded all at once instead of one miss after another).

use super::{Index, Packed, Shard, place_of};

/// Asks the CPU to bring the cache line at `addr` in, and goes on. In the table of hot values a
/// reader loads a slot's entry and the entry's bytes one after the other; with the bytes'
/// address kept in the slot their cache miss overlaps the entry's instead of following it
/// (warm 1 KiB gets: p50 0.74 → 0.68 µs at one thread, 0.70 → 0.60 µs at 16;
/// docs/benchmarks.md). Elsewhere than x86-64, nothing.
#[allow(unsafe_code)]
pub(super) fn prefetch(addr: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has. A prefetch is a hint: it
    // reads nothing the program sees, never faults, and changes no memory, whatever the address
    // (a hint left by an entry since replaced and freed included).
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(addr as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = addr;
}

impl Index {
    /// Starts loading what the look-ups of the (masked) hashes `hashes` will touch, for a
    /// caller about to look up a batch of keys one after the other (a batch write looks at
    /// each of its keys before it appends).
    ///
    /// A look-up costs two dependent cache misses on a large index: the shard's lock and
    /// vector header (the 65 536 shards' headers alone are 2.6 MiB), then the shard's entries.
    /// Made one key after another, a batch pays them in series, since each look-up takes its
    /// shard's lock with a locked instruction that the CPU does not run ahead of. Here all the
    /// headers are requested first, then, with them in cache, each shard's entries near where
    /// the hash's fingerprint falls (entries are sorted by fingerprint, which is uniform): the
    /// batch's misses overlap. Nothing is read under a lock but a length and an address, and
    /// a prefetch of a place that moved by the time of the look-up costs only the hint.
    pub fn prefetch_shards(&self, hashes: &[u64]) {
        for &h in hashes {
            let (s, _) = place_of(h);
            let header = &self.shards[s] as *const Shard as usize;
            prefetch(header);
            prefetch(header + size_of::<Shard>() - 1);
        }
        for &h in hashes {
            let (s, fp) = place_of(h);
            let shard = self.shard(s);
            let Some(last) = shard.len().checked_sub(1) else {
                continue;
            };
            // Where `fp` falls among `len` sorted uniform fingerprints of 24 bits.
            let at = ((u64::from(fp) * shard.len() as u64) >> 24) as usize;
            let entry = shard.as_ptr().wrapping_add(at.min(last));
            prefetch(entry as usize);
            prefetch(entry as usize + size_of::<Packed>() - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::IndexEntry;
    use super::*;

    /// A prefetch changes nothing: every look-up answers the same after one, for keys present
    /// and absent, in full and empty shards, with a weak hash (many keys per shard) and a full
    /// one.
    #[test]
    fn prefetch_changes_no_answer() {
        for bits in [64, 20] {
            let index = Index::with_hash_bits(bits);
            let keys: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("k{i}").into_bytes()).collect();
            for (i, k) in keys.iter().enumerate().step_by(2) {
                let e = IndexEntry {
                    segment: 1,
                    offset: 64 * i as u64,
                    value_len: 10,
                    stored_len: 10,
                    key_len: k.len() as u32,
                    flags: 0,
                    expires_at: None,
                };
                index.apply(index.hash(k), None, Some(&e));
            }
            let hashes: Vec<u64> = keys.iter().map(|k| index.hash(k)).collect();
            let before: Vec<_> = hashes.iter().map(|&h| index.places(h)).collect();
            index.prefetch_shards(&hashes);
            index.prefetch_shards(&[]);
            let after: Vec<_> = hashes.iter().map(|&h| index.places(h)).collect();
            assert_eq!(before, after);
            let found = (0..5000).filter(|&i| before[i].contains(&(1, 64 * i as u64)));
            assert_eq!(found.count(), 2500, "{bits} bits");
        }
    }
}
