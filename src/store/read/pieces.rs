//! Large values in the read cache: pieces of [`PIECE`] (64 KiB) stored bytes, aligned to the
//! value's start, each verified (its 16 chunk crcs checked) before it is kept, so that a read
//! served from pieces is a copy, with no check and no disk read. Values the cache keeps whole
//! (small ones) never come here; see docs/design.md, "The read cache".
//!
//! What a read keeps:
//!
//! - every piece it read whole anyway (a `get`, or a range that covers whole pieces): no byte
//!   more is read than was asked for;
//! - for a range that covers only part of a piece, the whole piece (**read-around**), but only
//!   for a value read before since open (its key was in the cache: [`Located::known`]) and
//!   only while the cache has free room ([`Cache::has_room`](super::super::cache::Cache)):
//!   the first read of a value after open, a cold read, fetches exactly its chunks (a 4 KiB
//!   range of a 10 MiB value reads ~5 KiB), and a full cache is never pushed to evict for
//!   bytes nobody asked for.
//!
//! A piece is keyed by its record's place, like every entry of the cache, so it is never
//! stale: an overwrite, a delete or a compaction move gives the key another place.

use bytes::Bytes;

use super::{Located, Reader};
use crate::error::Result;
use crate::store::cache::{Cached, Key, PIECE, Part};

impl Reader {
    /// Stored bytes `[start, start + dst.len())` of `found`'s record (a value kept in pieces),
    /// verified: from the pieces the cache holds, the rest read ([`Reader::read_missing`]).
    pub(super) fn read_pieces(&self, found: &Located, start: u64, dst: &mut [u8]) -> Result<()> {
        if dst.is_empty() {
            return Ok(());
        }
        let end = start + dst.len() as u64;
        let last = end.div_ceil(PIECE);
        // The first piece of the run of pieces missing so far.
        let mut missing = None;
        for p in start / PIECE..last {
            let Some(b) = self.cache.get_bytes(&Key::of(&found.entry, Part::Piece(p))) else {
                missing.get_or_insert(p);
                continue;
            };
            if let Some(first) = missing.take() {
                self.read_missing(found, start, dst, first..p)?;
            }
            let (from, to) = (start.max(p * PIECE), end.min((p + 1) * PIECE));
            let at = (from - p * PIECE) as usize;
            dst[(from - start) as usize..(to - start) as usize]
                .copy_from_slice(&b[at..at + (to - from) as usize]);
        }
        if let Some(first) = missing {
            self.read_missing(found, start, dst, first..last)?;
        }
        Ok(())
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

    /// The part of `dst` (value bytes from `start`) that lies in `pieces`, none of which the
    /// cache holds: read, verified, and the pieces it covers whole kept; or, with
    /// read-around (see the module's doc), the pieces read whole, kept, and copied from.
    fn read_missing(
        &self,
        found: &Located,
        start: u64,
        dst: &mut [u8],
        pieces: std::ops::Range<u64>,
    ) -> Result<()> {
        let end = start + dst.len() as u64;
        let stored = found.entry.stored_len;
        let (lo, hi) = (pieces.start * PIECE, (pieces.end * PIECE).min(stored));
        let (from, to) = (start.max(lo), end.min(hi));
        let out = &mut dst[(from - start) as usize..(to - start) as usize];
        if (from, to) != (lo, hi) && found.known && self.cache.has_room(hi - lo) {
            let mut whole = vec![0u8; (hi - lo) as usize];
            self.read_stored_direct(found, lo, &mut whole)?;
            out.copy_from_slice(&whole[(from - lo) as usize..(to - lo) as usize]);
            self.keep_pieces(found, lo, &whole, pieces);
            return Ok(());
        }
        self.read_stored_direct(found, from, out)?;
        self.keep_pieces(found, from, out, pieces);
        Ok(())
    }

    /// Keeps the pieces among `pieces` that `bytes` (verified stored bytes from `at`) holds
    /// whole, each in a buffer of its own (an entry's weight is then all it keeps alive).
    fn keep_pieces(&self, found: &Located, at: u64, bytes: &[u8], pieces: std::ops::Range<u64>) {
        let end = at + bytes.len() as u64;
        for p in pieces {
            let (lo, hi) = (p * PIECE, ((p + 1) * PIECE).min(found.entry.stored_len));
            if lo >= at && hi <= end {
                let piece = &bytes[(lo - at) as usize..(hi - at) as usize];
                self.cache.insert(
                    Key::of(&found.entry, Part::Piece(p)),
                    Cached::Bytes(Bytes::copy_from_slice(piece)),
                );
            }
        }
    }
}
