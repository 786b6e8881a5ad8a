//! A range read of a large value read for the first time since open: its record's header (for
//! the key check), the range's chunk crcs and its chunks lie apart in the file, and each of the
//! three reads waited for the one before (a 4 KiB range of a 10 MiB value: three device round
//! trips, against one for a file per value). All three places are known from the index entry
//! alone (the record's offset, the key's length, the value's stored length:
//! [`segment::value_reads`]), so [`Reader::locate_for_range`] reads them together
//! ([`SegmentFile::read_owned_each`](crate::io::file::SegmentFile::read_owned_each): io_uring,
//! one round trip), before the key is checked, and the reads that follow take their bytes from
//! [`Located::ahead`] (`Reader::fetch`) instead of the file.
//!
//! Nothing read ahead is believed sooner than it would have been: the header and key are
//! checked as before (a record of another key sharing the fingerprint is an ordinary miss: the
//! bytes read for it are dropped, and the lookup goes on as [`Reader::locate`]), the chunks
//! against their crcs, and the crc sectors are kept by the cache as `read_crcs` keeps them. A
//! read ahead that fails for any reason is dropped too, and the read made the usual way, so
//! that its error (if any) is the one the usual way reports.
//!
//! A value read before has its key in the cache (no header read): a range of it whose crc
//! sector the cache lacks reads the crcs and the chunks together the same way. Nothing is read
//! ahead where the cache holds the range's first piece or chunk, or where the read will fetch
//! the pieces around it (a stream: `read/pattern.rs`).

use bytes::Bytes;

use super::{Identity, Located, Reader, WHOLE_RECORD_READ};
use crate::error::Result;
use crate::format::CHUNK_SIZE;
use crate::format::record::head_len;
use crate::index::IndexEntry;
use crate::range::{self, ValueRange};
use crate::segment;
use crate::store::cache::{CRC_SECTOR, Key, PIECE, Part};

/// The largest range whose chunks are read ahead: beyond it the read is bound by the transfer,
/// not by the round trips, and the usual path reads it in steps of its bounce buffers instead of
/// holding a second copy of the whole range.
const AHEAD_MAX: u64 = 1 << 20;

impl Located {
    /// File bytes `[offset, offset + len)`, if a read issued ahead brought them.
    pub(super) fn ahead_bytes(&self, offset: u64, len: usize) -> Option<Bytes> {
        self.ahead.iter().find_map(|(at, b)| {
            let from = usize::try_from(offset.checked_sub(*at)?).ok()?;
            (from.checked_add(len)? <= b.len()).then(|| b.slice(from..from + len))
        })
    }
}

impl Reader {
    /// [`Reader::locate`] for a read of `range` of the value of `key`: when the index has one
    /// entry for the key's fingerprint, of a large uncompressed value whose key the cache does
    /// not hold, the record's header and key, the range's chunk crcs and its chunks are read
    /// together (see the module's doc), and the [`Located`] keeps them for the range's read.
    pub(in crate::store) fn locate_for_range(
        &self,
        key: &[u8],
        range: &impl ValueRange,
    ) -> Result<Option<Located>> {
        let hash = self.index.hash(key);
        let candidates = self.index.candidates(hash, key.len() as u32);
        if let [entry] = candidates.as_slice()
            && let Some(ahead) = self.read_ahead(key, *entry, range)
        {
            match self.identify_reading(key, *entry, true, WHOLE_RECORD_READ, ahead)? {
                Identity::Mine { found, .. } => return Ok(self.unexpired(found)),
                // Another key's record, or a file compaction removed since the lookup.
                Identity::Other | Identity::Gone => {}
            }
        }
        self.locate(key)
    }

    /// The file bytes a read of `range` of the value at `entry` (if it is `key`'s) needs and the
    /// cache does not hold, read together, each with its offset; `None` where reading ahead
    /// does not apply (see [`Reader::locate_for_range`]) or failed.
    fn read_ahead(
        &self,
        key: &[u8],
        entry: IndexEntry,
        range: &impl ValueRange,
    ) -> Option<Vec<(u64, Bytes)>> {
        if entry.record_len() <= WHOLE_RECORD_READ || entry.is_compressed() {
            return None;
        }
        let (start, end) = range::resolve(range, entry.value_len, key).ok()?;
        if start == end || end - start > AHEAD_MAX {
            return None;
        }
        if self.cache.holds_pieces(&entry)
            && (self
                .cache
                .contains(&Key::of(&entry, Part::Piece(start / PIECE)))
                || self
                    .cache
                    .contains(&Key::of(&entry, Part::Chunk(start / CHUNK_SIZE)))
                // A read of a stream fetches the pieces around it (`read/pieces.rs`): the
                // chunks read ahead would be read again.
                || self.patterns.is_near(&entry, start))
        {
            return None;
        }
        // A value read before: its key is checked from the cache, so only the crcs and chunks
        // are read, together when both are needed.
        let key_known = self.cache.contains(&Key::of(&entry, Part::Key));
        let file = self.segments.file(entry.segment)?;
        let span = entry.span();
        let reads = segment::value_reads(&span, start, end - start);
        let mut spans = vec![(
            reads.data.start,
            (reads.data.end - reads.data.start) as usize,
        )];
        if !key_known {
            spans.push((entry.offset, head_len(entry.flags) + key.len()));
        }
        if let Some(crcs) = reads.crcs
            && !self
                .cache
                .contains(&Key::of(&entry, Part::Crcs(crcs.start / CRC_SECTOR)))
        {
            // Whole sectors of the table, as `read_crcs` reads (and keeps) them.
            let table = span.crc_offset(0)..span.crc_offset(0) + span.crc_table_len();
            let from = (crcs.start / CRC_SECTOR * CRC_SECTOR).max(table.start);
            let to = (crcs.end.div_ceil(CRC_SECTOR) * CRC_SECTOR).min(table.end);
            spans.push((from, (to - from) as usize));
        }
        if spans.len() == 1 {
            // The chunks alone: the usual path reads them in one read too.
            return None;
        }
        // Bytes still in the write buffers are not in the file yet.
        if spans
            .iter()
            .any(|&(at, len)| self.log.buffers_hold(entry.segment, at, at + len as u64))
        {
            return None;
        }
        let bufs = file
            .read_owned_each(&spans, &self.pool, self.read_align)
            .ok()?;
        Some(
            spans
                .iter()
                .zip(bufs)
                .map(|(&(at, len), (buf, skip))| {
                    (at, Bytes::from_owner(buf).slice(skip..skip + len))
                })
                .collect(),
        )
    }
}
