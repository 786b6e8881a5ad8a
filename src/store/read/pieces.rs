//! Large values in the read cache: verified stored bytes of values too large to be kept whole,
//! in pieces of [`PIECE`] (64 KiB, aligned to the value's start, 16 chunks) and in single
//! [`CHUNK_SIZE`] (4 KiB) chunks, each verified (its chunk crcs checked) before it is kept, so
//! that a read served from them is a copy, with no check and no disk read. Values the cache
//! keeps whole (small ones) never come here; see docs/design.md, "The read cache".
//!
//! What a read fetches and keeps (issue 37: a cache that never costs more than it saves):
//!
//! - the chunks its range touches, no more, and keeps them at the granularity it read them:
//!   the whole pieces among them as pieces, the other chunks one by one. A random 4 KiB range
//!   reads one or two chunks, and the same range read again is a copy;
//! - around itself, the whole pieces its range lies in (**read-around**), and ahead of it as
//!   a stream goes on (a piece, doubling up to 1 MiB), only when the reads of the value are a
//!   stream: the second read in a row that starts near where the one before ended
//!   (`read/pattern.rs`), and only while the cache has free room
//!   ([`Cache::has_room`](super::super::cache::Cache)), so that a full cache is never pushed
//!   to evict for bytes nobody asked for. A stream of ranges then reads a piece at a time and
//!   finds the next ranges in it; random ranges never pay for a piece.
//!
//! A piece or chunk is keyed by its record's place, like every entry of the cache, so it is
//! never stale: an overwrite, a delete or a compaction move gives the key another place.

use bytes::Bytes;

use super::pattern::Access;
use super::{Located, Reader};
use crate::error::Result;
use crate::format::CHUNK_SIZE;
use crate::index::IndexEntry;
use crate::store::cache::{Cached, Key, PIECE, Part};

impl Reader {
    /// Stored bytes `[start, start + dst.len())` of `found`'s record (a value kept in pieces),
    /// verified: from the pieces and chunks the cache holds, the rest read
    /// ([`Reader::read_missing`]).
    pub(super) fn read_pieces(&self, found: &Located, start: u64, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let entry = &found.entry;
        let end = start + dst.len() as u64;
        // Noted before anything is looked up, so that reads served from the cache count in the
        // value's history as much as those that go to the disk.
        let access = self.patterns.note(entry, start, end);
        // The start of the run of bytes found missing so far.
        let mut missing = None;
        // The last piece looked up and not found (its chunks are looked up one by one).
        let mut absent = None;
        let mut pos = start;
        while pos < end {
            let p = pos / PIECE;
            let (lo, hi) = (p * PIECE, ((p + 1) * PIECE).min(entry.stored_len));
            let covered = start <= lo && hi <= end;
            let key = Key::of(entry, Part::Piece(p));
            // A piece the read covers in part is asked for only if the cache has it, so that a
            // read served from chunks counts one hit, not a miss (the piece) and a hit.
            let piece = match absent {
                Some(a) if a == p => None,
                _ if !covered && !self.cache.contains(&key) => None,
                _ => self.cache.get_bytes(&key),
            };
            let part = match piece {
                Some(b) => Some((lo, b)),
                // A piece the read covers whole is read whole (and kept as a piece): its chunks
                // are not looked up one by one.
                None if covered => None,
                None => {
                    absent = Some(p);
                    self.cached_chunk(entry, pos)
                }
            };
            let Some((at, b)) = part else {
                missing.get_or_insert(pos);
                pos = if covered {
                    hi
                } else {
                    ((pos / CHUNK_SIZE + 1) * CHUNK_SIZE).min(end)
                };
                continue;
            };
            if let Some(from) = missing.take() {
                self.read_missing(found, start, dst, from..pos, access)?;
            }
            let to = end.min(at + b.len() as u64);
            dst[(pos - start) as usize..(to - start) as usize]
                .copy_from_slice(&b[(pos - at) as usize..(to - at) as usize]);
            pos = to;
        }
        if let Some(from) = missing {
            self.read_missing(found, start, dst, from..end, access)?;
        }
        Ok(())
    }

    /// The chunk of `entry`'s stored bytes that holds byte `pos`, if the cache holds it: its
    /// start and bytes.
    fn cached_chunk(&self, entry: &IndexEntry, pos: u64) -> Option<(u64, Bytes)> {
        let c = pos / CHUNK_SIZE;
        let b = self.cache.get_bytes(&Key::of(entry, Part::Chunk(c)))?;
        Some((c * CHUNK_SIZE, b))
    }

    /// The whole value of `found` appended to `out` (empty) from the pieces of a raw value, if
    /// the cache holds them all: copied once, into memory that is not zeroed first; `false`
    /// (and `out` left empty) otherwise, for the caller to read it.
    pub(super) fn append_pieces(&self, found: &Located, out: &mut Vec<u8>) -> bool {
        let entry = &found.entry;
        if entry.is_compressed()
            || found.whole.is_some()
            || !self.cache.holds_pieces(entry)
            || !self.cache.contains(&Key::of(entry, Part::Piece(0)))
        {
            return false;
        }
        let Ok(len) = usize::try_from(entry.stored_len) else {
            return false;
        };
        out.reserve(len);
        for p in 0..entry.stored_len.div_ceil(PIECE) {
            match self.cache.get_bytes(&Key::of(entry, Part::Piece(p))) {
                Some(b) => out.extend_from_slice(&b),
                None => {
                    out.clear();
                    return false;
                }
            }
        }
        debug_assert_eq!(out.len(), len);
        true
    }

    /// The part of `dst` (stored bytes from `start`) that lies in `run`, none of which the cache
    /// holds: read, verified and kept (see the module's doc for how much is read around it).
    fn read_missing(
        &self,
        found: &Located,
        start: u64,
        dst: &mut [u8],
        run: std::ops::Range<u64>,
        access: Access,
    ) -> Result<()> {
        let stored = found.entry.stored_len;
        let out = &mut dst[(run.start - start) as usize..(run.end - start) as usize];
        // Read-around: the pieces the run lies in, and ahead of it as a stream goes on
        // (`Access::ahead`), while there is room.
        let reach = (run.start + access.ahead()).max(run.end).min(stored);
        let (lo, hi) = (
            run.start / PIECE * PIECE,
            (reach.div_ceil(PIECE) * PIECE).min(stored),
        );
        if access != Access::Random
            && (lo, hi) != (run.start, run.end)
            && self.cache.has_room(hi - lo)
        {
            let mut whole = vec![0u8; (hi - lo) as usize];
            self.read_stored_direct(found, lo, &mut whole)?;
            out.copy_from_slice(&whole[(run.start - lo) as usize..(run.end - lo) as usize]);
            self.keep_read(found, lo, &whole);
            return Ok(());
        }
        // The chunks the run touches: what verifying it reads anyway, kept whole.
        let (lo, hi) = (
            run.start / CHUNK_SIZE * CHUNK_SIZE,
            (run.end.div_ceil(CHUNK_SIZE) * CHUNK_SIZE).min(stored),
        );
        if (lo, hi) == (run.start, run.end) {
            self.read_stored_direct(found, lo, out)?;
            self.keep_read(found, lo, out);
            return Ok(());
        }
        let mut chunks = vec![0u8; (hi - lo) as usize];
        self.read_stored_direct(found, lo, &mut chunks)?;
        out.copy_from_slice(&chunks[(run.start - lo) as usize..(run.end - lo) as usize]);
        self.keep_read(found, lo, &chunks);
        Ok(())
    }

    /// Keeps what `bytes` (verified stored bytes from `at`, which starts at a chunk's start)
    /// holds: each piece it holds whole as a piece, each other chunk it holds whole as a chunk,
    /// each in a buffer of its own (an entry's weight is then all it keeps alive).
    fn keep_read(&self, found: &Located, at: u64, bytes: &[u8]) {
        let entry = &found.entry;
        let end = at + bytes.len() as u64;
        let mut pos = at;
        while pos < end {
            let (p, c) = (pos / PIECE, pos / CHUNK_SIZE);
            let piece_end = ((p + 1) * PIECE).min(entry.stored_len);
            let chunk_end = ((c + 1) * CHUNK_SIZE).min(entry.stored_len);
            let (key, to) = if pos == p * PIECE && piece_end <= end {
                (Key::of(entry, Part::Piece(p)), piece_end)
            } else if pos == c * CHUNK_SIZE && chunk_end <= end {
                (Key::of(entry, Part::Chunk(c)), chunk_end)
            } else {
                break;
            };
            let kept = &bytes[(pos - at) as usize..(to - at) as usize];
            self.cache
                .insert(key, Cached::Bytes(Bytes::copy_from_slice(kept)));
            pos = to;
        }
    }
}
