//! The in-memory tail of the log: copies of its newest entries, for the log's readers (the
//! leader's replication reads every entry right after appending it, and the state machine
//! reads it again once it is committed).
//!
//! A ring (`VecDeque`) of consecutive entries, not a map: appends push at the back, the oldest
//! are popped at the front, and a read finds its first entry by subtraction. With a `BTreeMap`
//! the tail's node inserts, removals and merges were about 2 % of the CPU time of 64 clients'
//! puts in the in-process bench, besides the copies the readers need anyway.

use std::collections::VecDeque;

use openraft::alias::EntryOf;
use openraft::entry::RaftEntry;

use crate::TypeConfig;

type Entry = EntryOf<TypeConfig>;

/// The newest entries kept (at most this many, and at most [`TAIL_BYTES`] of them encoded):
/// the leader's replication reads every entry it sends right after appending it, and from the
/// store each read was a device read (a third of the CPU time of 64 clients' puts in the
/// in-process bench went to those reads).
pub(super) const TAIL_ENTRIES: usize = 8192;
/// The encoded bytes the in-memory tail holds at most.
pub(super) const TAIL_BYTES: usize = 32 << 20;

/// Whether `e` is a chunk of a streamed value ([`crate::Request::Chunk`]): the tail keeps
/// none, so that the memory it holds does not grow with a value's size up to [`TAIL_BYTES`]
/// while one streams in (replication reads a chunk from the store, once per follower).
fn is_chunk(e: &Entry) -> bool {
    matches!(
        &e.payload,
        openraft::EntryPayload::Normal(crate::Request::Chunk { .. })
    )
}

/// The newest entries of the log with their encoded sizes: always a run of consecutive indexes
/// ending at the last entry (appends extend it, truncation and purge cut it, the oldest are
/// dropped beyond the bounds).
#[derive(Default)]
pub(super) struct Tail {
    /// The index of `entries[0]`.
    start: u64,
    entries: VecDeque<(Entry, usize)>,
    bytes: usize,
}

impl Tail {
    /// The index of its first entry, if it holds any.
    pub(super) fn first(&self) -> Option<u64> {
        (!self.entries.is_empty()).then_some(self.start)
    }

    /// How many entries it holds.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The index after its last entry.
    fn end(&self) -> u64 {
        self.start + self.entries.len() as u64
    }

    /// Adds entries just appended (after any truncation, so they follow the tail's last one; an
    /// entry that does not restarts the tail with it).
    pub(super) fn extend(&mut self, entries: Vec<(Entry, usize)>) {
        for (e, len) in entries {
            let index = e.index();
            if is_chunk(&e) {
                // Not kept: the tail restarts after it (see `is_chunk`).
                self.clear();
                self.start = index + 1;
                continue;
            }
            if self.entries.is_empty() || index != self.end() {
                self.clear();
                self.start = index;
            }
            self.bytes += len;
            self.entries.push_back((e, len));
        }
        while self.entries.len() > TAIL_ENTRIES || self.bytes > TAIL_BYTES {
            match self.entries.pop_front() {
                Some((_, len)) => {
                    self.bytes -= len;
                    self.start += 1;
                }
                None => break,
            }
        }
    }

    /// Copies of the entries `from..stop` it holds, from `from` on (none if it does not hold
    /// `from`; a prefix if it ends before `stop`), up to the first that brings their encoded
    /// bytes to `max_bytes` (taken from, and counted down in, `budget`).
    pub(super) fn read(&self, from: u64, stop: u64, budget: &mut usize) -> Vec<Entry> {
        if from < self.start || from >= self.end() || from >= stop {
            return Vec::new();
        }
        let (at, to) = (from - self.start, stop.min(self.end()) - self.start);
        let mut out = Vec::new();
        for (e, len) in self.entries.range(at as usize..to as usize) {
            if *budget == 0 {
                break;
            }
            *budget = budget.saturating_sub(*len);
            out.push(e.clone());
        }
        out
    }

    /// Drops the entries from index `from` on.
    pub(super) fn cut_from(&mut self, from: u64) {
        let keep = from
            .saturating_sub(self.start)
            .min(self.entries.len() as u64) as usize;
        for (_, len) in self.entries.drain(keep..) {
            self.bytes -= len;
        }
    }

    /// Drops the entries up to index `to`.
    pub(super) fn cut_to(&mut self, to: u64) {
        let drop = match to.checked_add(1) {
            Some(k) => k.saturating_sub(self.start).min(self.entries.len() as u64) as usize,
            None => self.entries.len(),
        };
        for (_, len) in self.entries.drain(..drop) {
            self.bytes -= len;
        }
        self.start += drop as u64;
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64) -> (Entry, usize) {
        let e = Entry::new_blank(openraft::testing::log_id::<TypeConfig>(1, 1, index));
        (e, 10)
    }

    /// All of `from..stop` the tail holds (no byte budget).
    fn read(t: &Tail, from: u64, stop: u64) -> Vec<Entry> {
        let mut budget = usize::MAX;
        t.read(from, stop, &mut budget)
    }

    fn indexes(entries: &[Entry]) -> Vec<u64> {
        entries.iter().map(|e| e.index()).collect()
    }

    #[test]
    fn reads_cuts_and_restarts() {
        let mut t = Tail::default();
        assert_eq!(t.first(), None);
        assert!(read(&t, 0, 10).is_empty());
        t.extend((5..10).map(entry).collect());
        assert_eq!(t.first(), Some(5));
        assert_eq!(indexes(&read(&t, 6, 8)), [6, 7]);
        assert_eq!(indexes(&read(&t, 8, 100)), [8, 9]);
        assert!(
            read(&t, 4, 8).is_empty(),
            "a read from before the tail gets nothing"
        );
        assert!(read(&t, 10, 12).is_empty());

        t.cut_from(8);
        assert_eq!(indexes(&read(&t, 5, 100)), [5, 6, 7]);
        t.extend((8..12).map(entry).collect());
        t.cut_to(6);
        assert_eq!(t.first(), Some(7));
        assert_eq!(indexes(&read(&t, 7, 100)), [7, 8, 9, 10, 11]);
        assert_eq!(t.bytes, 50);
        // Cuts outside it change nothing.
        t.cut_to(3);
        t.cut_from(20);
        assert_eq!(t.len(), 5);

        // Entries that do not follow the last one restart it.
        t.extend((30..32).map(entry).collect());
        assert_eq!(t.first(), Some(30));
        assert_eq!(indexes(&read(&t, 30, 100)), [30, 31]);
        assert_eq!(t.bytes, 20);
        t.cut_to(u64::MAX);
        assert_eq!(t.first(), None);
        assert_eq!(t.bytes, 0);
    }

    /// The chunks of a streamed value are not kept (the tail restarts after each), and a read
    /// stops at the entry that spends its byte budget.
    #[test]
    fn keeps_no_chunk_and_reads_within_a_budget() {
        let chunk = |i: u64| {
            let request = crate::Request::Chunk {
                upload: crate::UploadId { term: 1, nonce: 0 },
                index: i,
                bytes: vec![1; 100],
            };
            let id = openraft::testing::log_id::<TypeConfig>(1, 1, i);
            (Entry::new_normal(id, request), 110)
        };
        let mut t = Tail::default();
        t.extend((1..4).map(entry).collect());
        t.extend(vec![chunk(4), chunk(5)]);
        assert_eq!(t.first(), None);
        assert_eq!(t.bytes, 0);
        t.extend((6..10).map(entry).collect());
        assert_eq!(t.first(), Some(6));
        assert_eq!(indexes(&read(&t, 6, 100)), [6, 7, 8, 9]);

        // Entries of 10 bytes: a budget of 25 takes three (the third spends it), one of 1 takes
        // one.
        let mut budget = 25;
        assert_eq!(indexes(&t.read(6, 100, &mut budget)), [6, 7, 8]);
        assert_eq!(budget, 0);
        let mut budget = 1;
        assert_eq!(indexes(&t.read(7, 100, &mut budget)), [7]);
    }

    #[test]
    fn keeps_at_most_its_bounds() {
        let mut t = Tail::default();
        let n = TAIL_ENTRIES as u64 + 10;
        t.extend((1..=n).map(entry).collect());
        assert_eq!(t.len(), TAIL_ENTRIES);
        assert_eq!(t.first(), Some(11));
        assert_eq!(indexes(&read(&t, n, n + 1)), [n]);

        let mut t = Tail::default();
        let big = |i| (entry(i).0, TAIL_BYTES / 4);
        t.extend((1..=6).map(big).collect());
        assert_eq!(t.len(), 4);
        assert_eq!(t.first(), Some(3));
    }
}
