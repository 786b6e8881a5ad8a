//! Admission of offers ([`Options::admission`](crate::Options::admission)): which refills
//! [`Store::offer`](crate::Store::offer) writes once the store is at its size cap.
//!
//! With [`Admission::SecondOffer`], a *doorkeeper* remembers the keys it turned away, and an
//! offer is written only when its key was turned away recently: a key must miss twice before
//! it takes room. Under a skewed trace most keys offered once are never asked for again (a
//! one-hit wonder), and each one written pushes a value out of a FIFO cache; a key that comes
//! back soon is likely to come back again. It is the doorkeeper of TinyLFU (Einziger et al.,
//! "TinyLFU: A Highly Efficient Cache Admission Policy"), without the frequency sketch behind
//! it: FIFO eviction has no victim to compare a candidate with. Measured on issue 39's trace in
//! docs/benchmarks.md.
//!
//! The memory is two Bloom filters, the current and the previous generation, one byte per key
//! each (four probes: about 2.4 % of keys never turned away pass as remembered, which only
//! writes them). A generation holds half as many keys as the store holds (at least
//! [`MIN_WINDOW`]): when the current one has taken that many, it becomes the previous one and
//! the oldest is forgotten, so a key is remembered for between one and two generations of
//! refusals. A key the store holds (its value expired, or an overwrite) is admitted without
//! the doorkeeper: it was admitted before. A store that has never evicted admits everything:
//! while there is room, a refill costs no other value its place.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::options::Admission;

/// The fewest keys a generation takes before it turns over.
pub(super) const MIN_WINDOW: u64 = 1024;

/// The most bits one generation's filter has (16 MiB): past that many keys (about 16 M a
/// generation) the filter fills beyond its designed rate of false positives, which admits more
/// offers, never fewer.
const MAX_BITS: u64 = 1 << 27;

/// Probes per key.
const PROBES: u32 = 4;

/// Which offers are written; see the module doc.
pub(super) struct Doorkeeper {
    policy: Admission,
    /// Set once the store is known to have evicted (at open from the catalog, or since).
    engaged: AtomicBool,
    gens: Mutex<Generations>,
}

struct Generations {
    current: Bloom,
    previous: Bloom,
    /// Keys the current generation has taken.
    taken: u64,
    /// Keys it takes before it turns over.
    window: u64,
}

impl Doorkeeper {
    /// A doorkeeper for `policy`; `evicted`: the store has evicted before (its catalog says so).
    pub(super) fn new(policy: Admission, evicted: bool) -> Doorkeeper {
        Doorkeeper {
            policy,
            engaged: AtomicBool::new(evicted),
            gens: Mutex::new(Generations {
                current: Bloom::empty(),
                previous: Bloom::empty(),
                taken: 0,
                window: 0,
            }),
        }
    }

    /// Whether offers are screened at all (not [`Admission::All`]).
    pub(super) fn screens(&self) -> bool {
        self.policy != Admission::All
    }

    /// Whether an offer of the key with hash `hash` is written. `evicted`: whether the store
    /// has evicted since open (read only until the doorkeeper is engaged); `keys`: how many
    /// keys the store holds (sizes a new generation); `held`: whether the store holds the key
    /// (an expired value's refill, an overwrite: admitted before, admitted again).
    pub(super) fn admit(
        &self,
        hash: u64,
        evicted: impl Fn() -> bool,
        keys: impl Fn() -> u64,
        held: impl Fn() -> bool,
    ) -> bool {
        match self.policy {
            Admission::All => true,
            Admission::SecondOffer => {
                if !self.engaged.load(Ordering::Relaxed) {
                    if !evicted() {
                        return true;
                    }
                    self.engaged.store(true, Ordering::Relaxed);
                }
                if held() {
                    return true;
                }
                self.gens
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .second_offer(hash, keys)
            }
        }
    }
}

impl Generations {
    fn second_offer(&mut self, hash: u64, keys: impl Fn() -> u64) -> bool {
        if self.current.contains(hash) || self.previous.contains(hash) {
            return true;
        }
        if self.taken >= self.window {
            // Turn over (also the first time: an empty filter of no bits).
            self.window = (keys() / 2).max(MIN_WINDOW);
            self.previous = std::mem::replace(&mut self.current, Bloom::for_keys(self.window));
            self.taken = 0;
        }
        self.current.insert(hash);
        self.taken += 1;
        false
    }
}

/// A Bloom filter over 64-bit key hashes, probed by double hashing.
struct Bloom {
    words: Vec<u64>,
    /// Bits minus one (a power of two); unused when `words` is empty.
    mask: u64,
}

impl Bloom {
    fn empty() -> Bloom {
        Bloom {
            words: Vec::new(),
            mask: 0,
        }
    }

    /// One byte per key, rounded up to a power of two of bits.
    fn for_keys(keys: u64) -> Bloom {
        let bits = (keys * 8).next_power_of_two().clamp(64, MAX_BITS);
        Bloom {
            words: vec![0; (bits / 64) as usize],
            mask: bits - 1,
        }
    }

    /// The bits of `hash` in a filter of `mask + 1` bits (borrowing nothing, so that `insert`
    /// sets them as they come: no allocation on an offer's path).
    fn probes(hash: u64, mask: u64) -> impl Iterator<Item = u64> {
        let (h1, h2) = (hash & 0xffff_ffff, (hash >> 32) | 1);
        (0..PROBES as u64).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) & mask)
    }

    fn contains(&self, hash: u64) -> bool {
        !self.words.is_empty()
            && Bloom::probes(hash, self.mask)
                .all(|b| self.words[(b / 64) as usize] & (1 << (b % 64)) != 0)
    }

    fn insert(&mut self, hash: u64) {
        for b in Bloom::probes(hash, self.mask) {
            self.words[(b / 64) as usize] |= 1 << (b % 64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(k: u64) -> u64 {
        crate::format::footer::key_hash(&k.to_le_bytes())
    }

    #[test]
    fn all_admits_everything() {
        let d = Doorkeeper::new(Admission::All, true);
        assert!((0..100).all(|k| d.admit(hash(k), || true, || 0, || false)));
    }

    #[test]
    fn a_store_that_never_evicted_admits_everything() {
        let d = Doorkeeper::new(Admission::SecondOffer, false);
        assert!((0..100).all(|k| d.admit(hash(k), || false, || 0, || false)));
        // The first offer after an eviction is turned away, its second taken.
        assert!(!d.admit(hash(1), || true, || 0, || false));
        assert!(
            d.admit(hash(1), || false, || 0, || false),
            "engaged for good"
        );
    }

    #[test]
    fn a_key_the_store_holds_is_admitted_and_not_remembered() {
        let d = Doorkeeper::new(Admission::SecondOffer, true);
        assert!(d.admit(hash(5), || true, || 0, || true));
        assert!(!d.admit(hash(5), || true, || 0, || false), "remembered");
    }

    #[test]
    fn second_offer_within_two_generations() {
        let d = Doorkeeper::new(Admission::SecondOffer, true);
        let keys = || 2 * MIN_WINDOW; // a window of MIN_WINDOW keys
        assert!(!d.admit(hash(7), || true, keys, || false));
        assert!(d.admit(hash(7), || true, keys, || false));
        // One generation of other refusals later, 7 is still remembered (previous generation).
        let fresh =
            (1000..1000 + MIN_WINDOW).filter(|&k| !d.admit(hash(k), || true, keys, || false));
        assert!(fresh.count() as u64 >= MIN_WINDOW * 9 / 10);
        assert!(d.admit(hash(7), || true, keys, || false));
        // Two more generations: forgotten.
        for k in 10_000..10_000 + 2 * MIN_WINDOW {
            d.admit(hash(k), || true, keys, || false);
        }
        assert!(!d.admit(hash(7), || true, keys, || false));
    }

    #[test]
    fn false_positives_stay_near_the_design_rate() {
        let mut b = Bloom::for_keys(100_000);
        for k in 0..100_000 {
            b.insert(hash(k));
        }
        assert!(
            (0..100_000).all(|k| b.contains(hash(k))),
            "no false negative"
        );
        let fp = (1_000_000..1_100_000)
            .filter(|&k| b.contains(hash(k)))
            .count();
        // 8 bits a key rounded up to 1 Mi bits (10.5 a key), four probes: about 1.2 %.
        assert!(fp < 3_000, "{fp} false positives of 100 000");
    }
}
