//! How reads of a large value have been going: the evidence a read of a few chunks needs before
//! it fetches more than it was asked for.
//!
//! A range read that fetches its whole 64 KiB piece (**read-around**, `read/pieces.rs`) bets that
//! the bytes around it will be read next. A stream of ranges (a `ValueReader` copying a value
//! out, a reader of a file format walking its blocks, ranges of a few hot places) wins the bet;
//! random ranges lose it every time: before this table, every range of a value read before
//! fetched its whole piece, and 4 KiB random ranges of 10 MiB values read 60 KiB each (issue 37).
//! So, as the kernel's readahead does per open file, the store keeps per value the end of its
//! last read and how many reads in a row started near where the one before ended ([`NEAR`]),
//! and a read fetches around itself only as the second such read in a row or later ([`RUN`]);
//! any other read fetches its chunks alone. Two reads in a row near each other is what a
//! stream looks like; for random ranges of a value of `L` bytes it happens about once in
//! `(L / 2·NEAR)²` reads (once in 6 400 for 10 MiB values).
//!
//! The history is a small table of slots, each value hashed to one by its record's place (file
//! id, offset: never reused while the store is open, `store/cache.rs`): two values sharing a
//! slot overwrite each other's history, and two threads reading one value interleave theirs. Both
//! only change how much a read fetches, never what it returns: the table is a guess, and every
//! byte a read returns is verified as before.

use std::sync::Mutex;

use crate::index::IndexEntry;

/// How far from the end of the last read of a value a read may start and still count as near:
/// a piece of the read cache. A read that skips less than this (or goes back as far) is served
/// best by the piece around it, which the next such read then finds in the cache.
pub(super) const NEAR: u64 = 64 << 10;

/// Reads in a row, each near the end of the one before, that make a stream: the first near
/// read could be chance, the second is taken as a pattern.
pub(super) const RUN: u32 = 2;

/// Slots of the table: reads of more values than this at once fall back to fetching their
/// chunks alone now and then (a slot overwritten between two reads of one value).
const SLOTS: usize = 256;

/// The last read of one value.
#[derive(Debug, Clone, Copy, Default)]
struct Last {
    /// The record's place (file id, offset), `(0, 0)` for an empty slot (no record is at offset
    /// 0 of a file id 0).
    place: (u64, u64),
    /// Stored bytes `end` of that read: where a sequential reader reads next.
    end: u64,
    /// Reads in a row up to that one, each near the end of the one before.
    run: u32,
}

impl Last {
    /// The run a read of the value at `place` from `start` would make after this one.
    fn run_with(&self, place: (u64, u64), start: u64) -> u32 {
        if self.place == place && start.abs_diff(self.end) <= NEAR {
            self.run.saturating_add(1)
        } else {
            0
        }
    }
}

/// What a read of a large value should fetch, by the reads of that value before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// Not the [`RUN`]th read in a row near the one before: fetch the chunks it touches, no
    /// more.
    Random,
    /// A stream, this read the `n`th in a row near the one before (`n` ≥ [`RUN`]): fetch the
    /// pieces around it, and ahead of it as the stream goes on ([`Access::ahead`]).
    Near(u32),
}

impl Access {
    /// The least a read of a stream fetches from the start of its range: a piece for the
    /// [`RUN`]th read in a row, doubling with each read after it up to 1 MiB (as the kernel's
    /// readahead window grows), so that a long stream of small reads (a `ValueReader`'s)
    /// costs a read per 1 MiB, not per piece.
    pub(super) fn ahead(self) -> u64 {
        match self {
            Access::Random => 0,
            Access::Near(n) => NEAR << (n - RUN).min(4),
        }
    }
}

/// The table of last reads (see the module's doc).
pub(super) struct Patterns {
    slots: Box<[Mutex<Last>]>,
}

impl Patterns {
    /// An empty table: every value's first read is [`Access::Random`].
    pub(super) fn new() -> Patterns {
        Patterns {
            slots: (0..SLOTS).map(|_| Mutex::new(Last::default())).collect(),
        }
    }

    /// Notes a read of stored bytes `[start, end)` of the value at `entry`, and says whether it
    /// is part of a stream.
    pub(super) fn note(&self, entry: &IndexEntry, start: u64, end: u64) -> Access {
        let place = (entry.segment, entry.offset);
        let mut last = self.slot(place).lock().unwrap_or_else(|e| e.into_inner());
        let run = last.run_with(place, start);
        *last = Last { place, end, run };
        if run >= RUN {
            Access::Near(run)
        } else {
            Access::Random
        }
    }

    /// Whether a read of the value at `entry` starting at `start` would be part of a stream,
    /// without noting it (the read that follows notes it).
    pub(super) fn is_near(&self, entry: &IndexEntry, start: u64) -> bool {
        let place = (entry.segment, entry.offset);
        let last = self.slot(place).lock().unwrap_or_else(|e| e.into_inner());
        last.run_with(place, start) >= RUN
    }

    fn slot(&self, (file, offset): (u64, u64)) -> &Mutex<Last> {
        // A multiplicative hash of the place: records of one file differ in their offset's
        // middle bits, files in their id's low bits.
        let h = (file.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ offset)
            .wrapping_mul(0xD6E8_FEB8_6659_FD93)
            .rotate_left(32);
        &self.slots[h as usize % SLOTS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(segment: u64, offset: u64) -> IndexEntry {
        IndexEntry {
            segment,
            offset,
            value_len: 10 << 20,
            stored_len: 10 << 20,
            key_len: 1,
            flags: 0,
            expires_at: None,
        }
    }

    #[test]
    fn a_stream_is_near_and_jumps_are_random() {
        let p = Patterns::new();
        let e = entry(7, 4096);
        // The first read of a value knows nothing of it.
        assert_eq!(p.note(&e, 1 << 20, (1 << 20) + 8192), Access::Random);
        // The next read where the last ended could be chance...
        assert_eq!(
            p.note(&e, (1 << 20) + 8192, (1 << 20) + 16384),
            Access::Random
        );
        // ...the one after it, a small skip ahead or back, is a stream.
        assert!(p.is_near(&e, (1 << 20) + 16384 + NEAR));
        assert!(p.is_near(&e, (1 << 20) + 16384 - NEAR));
        assert!(!p.is_near(&e, (1 << 20) + 16384 + NEAR + 1));
        assert_eq!(
            p.note(&e, (1 << 20) + 20000, (1 << 20) + 24096),
            Access::Near(2)
        );
        // A jump far away: random, and the stream starts again from there.
        assert_eq!(p.note(&e, 5 << 20, (5 << 20) + 4096), Access::Random);
        assert_eq!(
            p.note(&e, (5 << 20) + 4096, (5 << 20) + 8192),
            Access::Random
        );
        assert_eq!(
            p.note(&e, (5 << 20) + 8192, (5 << 20) + 9000),
            Access::Near(2)
        );
        // The stream goes on: it reads further ahead each time, up to 1 MiB.
        let aheads: Vec<u64> = (0..6)
            .map(|i| {
                p.note(&e, (5 << 20) + 9000 + i, (5 << 20) + 9001 + i)
                    .ahead()
            })
            .collect();
        assert_eq!(aheads, [128, 256, 512, 1024, 1024, 1024].map(|k| k << 10));
        // Another value's reads at the same offsets tell nothing about this one.
        let other = entry(8, 4096);
        assert_eq!(
            p.note(&other, (5 << 20) + 9000, (5 << 20) + 9100),
            Access::Random
        );
    }

    #[test]
    fn random_ranges_are_rarely_near() {
        let p = Patterns::new();
        let values: Vec<IndexEntry> = (0..100).map(|i| entry(i + 1, 4096)).collect();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut near = 0;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let e = &values[(x % 100) as usize];
            let start = (x >> 8) % ((10 << 20) - 4096);
            if p.note(e, start, start + 4096) != Access::Random {
                near += 1;
            }
        }
        // A read lands within NEAR of the last read of its value (10 MiB) about 1.25 % of the
        // time, and two in a row about once in 6 400: 1.6 of 10 000 expected.
        assert!(near < 10, "{near} of 10 000 random reads taken as a stream");
    }
}
