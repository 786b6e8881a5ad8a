//! The active segment's records ([`Records`]), kept for its footer in chunks that listings can
//! share, and the sorted view of their keys that ordered listing searches ([`SortedView`]).
//!
//! **Records.** Every record appended to the active segment is kept (its key, offset, sequence
//! number...) for the footer the seal writes. They are kept in chunks of [`CHUNK`] records: the
//! chunk being filled is a plain vector behind the append lock; a full chunk is frozen
//! (`Arc`, never changed again), so that a listing can hold it and read it without the lock.
//! (One vector of every record, as before, had to be copied whole into a new allocation each
//! time it grew, under the append lock.)
//!
//! **Sorted view.** A listing wants the active segment's keys in a range. A pass over every
//! record (what a listing did, under the append lock: ~70 ms for a million records) is replaced
//! by a view of the frozen chunks' records sorted by key, built by listings, not by writes (a put
//! only pushes its record, as before): the first listing that finds frozen chunks the view does
//! not cover sorts their records into a new *run* (an array of record ordinals, `u32`, in key
//! order; a key's records in file order), outside the append lock (a backlog of more than
//! [`SORT_AT_ONCE`] chunks is passed over by the first listing that finds it and sorted by the
//! next: a ski rental, so that a store listed rarely pays a pass per listing, as before, and
//! not a sort), and merges it with the
//! previous run while that one is less than twice its size, as an LSM tree's levels. The runs'
//! sizes thus at least double from newest to oldest: at most `log2(records / CHUNK) + 1` runs,
//! each record merged O(log n) times over the segment's life. A listing finds its range in each
//! run by binary search, then reads only the keys in the range: O(runs × log n + results). The
//! records of the chunk being filled (fewer than [`CHUNK`]) are still passed over under the
//! append lock, as before (a few microseconds).
//!
//! **Memory.** A run holds 4 bytes per record of the segment (a record, not a key: an
//! overwritten key's older records are in it too, as they are in the footer's list), beside the
//! ~23 bytes per key of the index and the records themselves. While a run is sorted, 24 bytes
//! per new record (a key's slice and ordinal); while two runs merge, the merged run's 4 bytes per
//! record beside theirs. The view is dropped when its segment is sealed (a listing that holds it
//! keeps it, and the chunks it reads, until the listing is dropped).
//!
//! **Concurrency.** The view sits behind a mutex of its own (`Log`'s), taken before the append
//! lock by the listings that read or extend it; a seal clears it only if it can take it at once
//! (`try_lock`), and a listing installs a view it built only while its segment is still the
//! active one (checked under the append lock), so a sealed segment's view never stays installed.

use std::ops::{Bound, Range};
use std::sync::Arc;

use crate::format::record::FooterEntry;

/// Records per chunk: the records a listing still passes over under the append lock, at most.
pub(super) const CHUNK: usize = 1024;

/// Chunks frozen since the view was built (a backlog) are sorted by the first listing that
/// finds them when they are at most this many (65,536 records); a larger backlog is passed over
/// by the first listing that finds it (outside the append lock) and sorted by the next one.
/// A ski rental: a store listed once in a long while pays a pass per listing, as before the
/// view (a sort costs a few passes), and one listed often pays one pass more than it would have.
pub(super) const SORT_AT_ONCE: usize = 64;

/// What the log keeps of its active segment's sorted view, behind a mutex of its own.
#[derive(Default)]
pub(super) struct ViewSlot {
    /// The view of the active segment's frozen records, if a listing has built one.
    pub(super) view: Option<Arc<SortedView>>,
    /// The segment and the number of its frozen chunks when a listing last passed over a
    /// backlog instead of sorting it ([`SORT_AT_ONCE`]).
    passed: Option<(u64, usize)>,
}

impl ViewSlot {
    /// Whether a listing that finds `new` chunks of segment `segment` beyond its view, `frozen`
    /// chunks in all, should pass over them rather than sort them: a large backlog no listing
    /// has met before. Records the pass.
    pub(super) fn pass_over(&mut self, segment: u64, new: usize, frozen: usize) -> bool {
        if new <= SORT_AT_ONCE {
            return false;
        }
        let backlog_start = frozen - new;
        match self.passed {
            // Some of this backlog was passed over before: sort it now.
            Some((s, upto)) if s == segment && upto > backlog_start => false,
            _ => {
                self.passed = Some((segment, frozen));
                true
            }
        }
    }
}

/// A full chunk of records, shared by the segment, its sorted view and listings.
type Chunk = Arc<Vec<FooterEntry>>;

/// Every record appended to the active segment, in file order: frozen chunks of [`CHUNK`]
/// records, and the chunk being filled.
#[derive(Default)]
pub(super) struct Records {
    frozen: Vec<Chunk>,
    filling: Vec<FooterEntry>,
}

impl Records {
    /// Appends a record.
    pub(super) fn push(&mut self, record: FooterEntry) {
        if self.filling.capacity() == 0 {
            self.filling.reserve_exact(CHUNK);
        }
        self.filling.push(record);
        if self.filling.len() == CHUNK {
            self.frozen
                .push(Arc::new(std::mem::take(&mut self.filling)));
        }
    }

    /// Whether no record was appended.
    pub(super) fn is_empty(&self) -> bool {
        self.frozen.is_empty() && self.filling.is_empty()
    }

    /// The records in file order.
    pub(super) fn iter(&self) -> impl Iterator<Item = &FooterEntry> {
        self.frozen
            .iter()
            .flat_map(|c| c.iter())
            .chain(&self.filling)
    }

    /// The frozen chunks from the `from`th on.
    pub(super) fn frozen_from(&self, from: usize) -> Vec<Chunk> {
        self.frozen.get(from..).unwrap_or_default().to_vec()
    }

    /// The number of frozen chunks.
    #[cfg(test)]
    pub(super) fn frozen_len(&self) -> usize {
        self.frozen.len()
    }

    /// The chunk being filled.
    pub(super) fn filling(&self) -> &[FooterEntry] {
        &self.filling
    }
}

/// The frozen records of one active segment, sorted by key in runs (see the module doc).
pub(super) struct SortedView {
    segment: u64,
    chunks: Vec<Chunk>,
    /// Record ordinals (into `chunks`), each run sorted by key and, for one key, by ordinal;
    /// oldest (and largest) first. Each run holds a contiguous span of ordinals, the older runs
    /// the lower ones.
    runs: Vec<Arc<[u32]>>,
}

impl SortedView {
    /// The segment whose records these are.
    pub(super) fn segment(&self) -> u64 {
        self.segment
    }

    /// The number of frozen chunks the view covers.
    pub(super) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The number of runs.
    pub(super) fn run_count(&self) -> usize {
        self.runs.len()
    }

    /// Record `ordinal`.
    pub(super) fn record(&self, ordinal: u32) -> &FooterEntry {
        let i = ordinal as usize;
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    /// The `pos`th record of run `run`.
    pub(super) fn at(&self, run: usize, pos: usize) -> &FooterEntry {
        self.record(self.runs[run][pos])
    }

    /// `base` (a view of segment `segment`, or none) with the records of `new`, the frozen
    /// chunks that follow its own, sorted into a run and merged (see the module doc).
    pub(super) fn extended(base: Option<&SortedView>, segment: u64, new: Vec<Chunk>) -> SortedView {
        let (mut chunks, mut runs) = match base {
            Some(b) => (b.chunks.clone(), b.runs.clone()),
            None => (Vec::new(), Vec::new()),
        };
        let first = chunks.len() * CHUNK;
        // Ordinals fit a u32: a segment is at most 64 GiB and a record at least 32 bytes.
        let ordinal = |i: usize| u32::try_from(i).expect("fewer than 2^32 records in a segment");
        let mut keyed: Vec<(&[u8], u32)> = new
            .iter()
            .flat_map(|c| c.iter())
            .enumerate()
            .map(|(i, r)| (r.key.as_slice(), ordinal(first + i)))
            .collect();
        // Unstable but total: the ordinal orders a key's records.
        keyed.sort_unstable();
        let mut run: Vec<u32> = keyed.into_iter().map(|(_, i)| i).collect();
        chunks.extend(new);
        let mut view = SortedView {
            segment,
            chunks,
            runs: Vec::new(),
        };
        while let Some(last) = runs.last()
            && last.len() < 2 * run.len()
        {
            let older = runs.pop().expect("a last run");
            run = view.merge(&older, &run);
        }
        runs.push(run.into());
        view.runs = runs;
        view
    }

    /// Merges two runs, `older` holding lower ordinals than `newer`: by key, and for one key
    /// the older run's records first (file order).
    fn merge(&self, older: &[u32], newer: &[u32]) -> Vec<u32> {
        let mut out = Vec::with_capacity(older.len() + newer.len());
        let (mut a, mut b) = (0, 0);
        while a < older.len() && b < newer.len() {
            if self.record(newer[b]).key < self.record(older[a]).key {
                out.push(newer[b]);
                b += 1;
            } else {
                out.push(older[a]);
                a += 1;
            }
        }
        out.extend_from_slice(&older[a..]);
        out.extend_from_slice(&newer[b..]);
        out
    }

    /// The positions in run `run` of the keys from `start` to `end`, by binary search.
    pub(super) fn span(&self, run: usize, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Range<usize> {
        let keys = &self.runs[run];
        let key = |i: &u32| self.record(*i).key.as_slice();
        let lo = keys.partition_point(|i| match start {
            Bound::Unbounded => false,
            Bound::Included(s) => key(i) < s,
            Bound::Excluded(s) => key(i) <= s,
        });
        let hi = keys.partition_point(|i| match end {
            Bound::Unbounded => true,
            Bound::Included(e) => key(i) <= e,
            Bound::Excluded(e) => key(i) < e,
        });
        lo..hi.max(lo)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::RecordKind;

    fn record(key: &str, offset: u64) -> FooterEntry {
        FooterEntry {
            key: key.as_bytes().to_vec(),
            kind: RecordKind::Put,
            flags: 0,
            offset,
            stored_len: 1,
            value_len: 1,
            seq: offset,
            expires_at: None,
        }
    }

    /// A backlog of more than `SORT_AT_ONCE` chunks is passed over by the first listing that
    /// meets it and sorted by the next; a smaller one is sorted at once; a new segment starts
    /// afresh.
    #[test]
    fn a_large_backlog_is_passed_over_once() {
        let mut slot = ViewSlot::default();
        assert!(!slot.pass_over(1, SORT_AT_ONCE, SORT_AT_ONCE));
        assert!(slot.pass_over(1, SORT_AT_ONCE + 1, SORT_AT_ONCE + 1));
        // The same backlog, grown: sorted now.
        assert!(!slot.pass_over(1, SORT_AT_ONCE + 5, SORT_AT_ONCE + 5));
        // After a sort of those chunks, a new large backlog behind them is passed over first.
        let covered = SORT_AT_ONCE + 5;
        assert!(slot.pass_over(1, 100, covered + 100));
        assert!(!slot.pass_over(1, 100, covered + 100));
        // Another segment's backlog is new.
        assert!(slot.pass_over(2, 100, 100));
    }

    /// Keys pushed in a scrambled order, some repeated, extended chunk by chunk: every run is
    /// sorted by key then ordinal, the runs shrink at least by half, and each range's records are
    /// those a filter of all records finds.
    #[test]
    fn runs_sorted_and_ranges_match_a_scan() {
        let mut records = Records::default();
        let mut view: Option<SortedView> = None;
        let key = |i: usize| format!("k{:05}", (i * 7919) % 3000);
        for i in 0..CHUNK * 13 + 100 {
            records.push(record(&key(i), i as u64));
            if i % (3 * CHUNK + 17) == 0 || i == CHUNK * 13 + 99 {
                let from = view.as_ref().map_or(0, SortedView::chunk_count);
                let new = records.frozen_from(from);
                view = Some(SortedView::extended(view.as_ref(), 9, new));
            }
        }
        let view = view.expect("built");
        assert_eq!(view.chunk_count(), records.frozen_len());
        assert!(view.run_count() > 1, "{} runs", view.run_count());
        for w in view.runs.windows(2) {
            assert!(w[0].len() >= 2 * w[1].len());
        }
        for run in &view.runs {
            for w in run.windows(2) {
                let (a, b) = (view.record(w[0]), view.record(w[1]));
                assert!((&a.key, a.offset) < (&b.key, b.offset));
            }
        }
        let frozen: Vec<&FooterEntry> = records.iter().take(view.chunk_count() * CHUNK).collect();
        for (s, e) in [("k00100", "k00200"), ("k02990", "k09999"), ("a", "k00000")] {
            let mut listed: Vec<u64> = (0..view.run_count())
                .flat_map(|run| {
                    let span = view.span(
                        run,
                        Bound::Included(s.as_bytes()),
                        Bound::Excluded(e.as_bytes()),
                    );
                    span.map(move |p| (run, p))
                })
                .map(|(run, p)| view.at(run, p).offset)
                .collect();
            listed.sort_unstable();
            let want: Vec<u64> = frozen
                .iter()
                .filter(|r| r.key.as_slice() >= s.as_bytes() && r.key.as_slice() < e.as_bytes())
                .map(|r| r.offset)
                .collect();
            assert_eq!(listed, want, "{s}..{e}");
        }
    }
}
