//! The options of a store used as a cache: [`Options::size_cap`], second chances and
//! [`Options::admission`].

use super::{CAP_SEGMENTS, DEFAULT_SEGMENT_SIZE, Options};

/// Which refills [`Store::offer`](crate::Store::offer) writes once a store with a
/// [`size_cap`](Options::size_cap) has started to evict ([`Options::admission`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Admission {
    /// Every offer is written (unless the write would wait for the disk). The default.
    #[default]
    All,
    /// An offer is written only if its key was offered, and turned away, recently: a key
    /// must miss twice before it takes room in the cache. The store remembers the keys it
    /// turned away in two Bloom filters of one byte per key, each taking half as many keys as
    /// the store holds (at least 1,024, at most 16 MiB each) before the older is forgotten.
    /// A store that has never evicted admits every offer. Turned-away offers are counted in
    /// [`Stats::offers_not_admitted`](crate::Stats::offers_not_admitted).
    SecondOffer,
}

impl Options {
    /// Keeps the store within `bytes` on disk by forgetting its oldest values (default: no cap;
    /// a store without one never drops a value). When the store's files pass the cap, the
    /// oldest log segments and blob files are dropped whole, first in first out, with every
    /// value in them: a `get` of such a value returns `None` from then on. The store stays
    /// within the cap plus one segment (the one being written, which is never dropped), and a
    /// write never fails for want of room while the cap is below the disk's free space. For a
    /// cache; [`Stats::evicted_bytes`](crate::Stats::evicted_bytes) counts what it dropped.
    /// At least twice the [`segment_size`](Options::segment_size). Unless `segment_size` is
    /// set too, a cap makes segments a thirty-second of it (within 1 MiB and the default 256 MiB):
    /// a segment is what one eviction drops and what the store may pass the cap by. How it
    /// stays safe under concurrent reads and crashes: docs/design.md, "Eviction".
    ///
    /// ```
    /// let opts = podstore::Options::default().segment_size(8 << 20).size_cap(Some(64 << 20));
    /// assert_eq!(opts.view().size_cap(), Some(64 << 20));
    /// // The segment size follows the cap unless it is set.
    /// let opts = podstore::Options::default().size_cap(Some(1 << 30));
    /// assert_eq!(opts.view().segment_size(), 32 << 20);
    /// let opts = podstore::Options::default().size_cap(Some(10 << 30));
    /// assert_eq!(opts.view().segment_size(), 256 << 20);
    /// ```
    pub fn size_cap(mut self, bytes: Option<u64>) -> Self {
        self.size_cap = bytes;
        if !self.segment_size_set {
            self.segment_size = bytes.map_or(DEFAULT_SEGMENT_SIZE, |cap| {
                (cap / CAP_SEGMENTS / (1 << 20) * (1 << 20)).clamp(1 << 20, DEFAULT_SEGMENT_SIZE)
            });
        }
        self
    }

    /// With a [`size_cap`](Options::size_cap): values read (by `get`, `get_into` or `get_bytes`) since they
    /// were written are appended again before eviction drops their file (default `false`), so
    /// that hot values stay, the way S3-FIFO keeps a FIFO cache's hot items. An eviction writes
    /// at most [`second_chance_budget`](Options::second_chance_budget) of the bytes it frees
    /// (half by default). A value kept this way gets a new [`Version`](crate::Version). Whether
    /// it pays: docs/design.md, "Eviction".
    ///
    /// ```
    /// let opts = podstore::Options::default().second_chance(true);
    /// assert!(opts.view().second_chance());
    /// ```
    pub fn second_chance(mut self, on: bool) -> Self {
        self.second_chance = on;
        self
    }

    /// With [`second_chance`](Options::second_chance): the most an eviction step appends again,
    /// as a fraction of the bytes it drops (default 0.5; above 0.0, at most 1.0). Lower writes
    /// less and keeps fewer of the values read: on issue 39's cache trace (64 KiB values, one
    /// thread, refills by offers) a half gave a hit ratio of 0.331 at 9,400-9,600 gets a
    /// second, a sixteenth 0.318 at 11,500-12,700, no second chance 0.302 at 13,900-15,000
    /// (docs/benchmarks.md). A cache whose misses cost more than its writes keeps the
    /// default; one bound by its disk lowers it.
    ///
    /// ```
    /// let opts = podstore::Options::default().second_chance(true).second_chance_budget(0.0625);
    /// assert_eq!(opts.view().second_chance_budget(), 0.0625);
    /// ```
    pub fn second_chance_budget(mut self, fraction: f64) -> Self {
        self.second_chance_budget = fraction;
        self
    }

    /// Which offers ([`Store::offer`](crate::Store::offer)) are written once the store has
    /// evicted (default [`Admission::All`]). A cache whose trace is skewed keeps more of what
    /// is asked for again, and writes far less, with [`Admission::SecondOffer`]: on issue 39's
    /// zipfian trace it raised the hit ratio and cut the bytes written per get
    /// (docs/benchmarks.md). Puts are never turned away; without a size cap nothing is. With
    /// [`second_chance`](Options::second_chance) beside it, the combination that hit most on
    /// that trace and on its variant where half the values expire: alone, it left values that
    /// expire hitting less often than foyer's.
    ///
    /// ```
    /// use podstore::{Admission, Options};
    /// let opts = Options::default().size_cap(Some(1 << 30)).admission(Admission::SecondOffer);
    /// assert_eq!(opts.view().admission(), Admission::SecondOffer);
    /// ```
    pub fn admission(mut self, policy: Admission) -> Self {
        self.admission = policy;
        self
    }
}
