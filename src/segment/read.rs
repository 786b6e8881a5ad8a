//! Reads of segment files: the byte source recovery and verify scan, the errors reads map to,
//! and verified reads of a value range.

use std::io;
use std::ops::Range;
use std::path::Path;

use super::names::{SegmentKind, kind_of};
use crate::error::{Corruption, Error, Result};
use crate::format::CHUNK_SIZE;
use crate::format::cursor::ByteSource;
use crate::format::record::{RecordPlace, chunk_count, verify_chunks};
use crate::io::aligned::BufPool;
use crate::io::file::SegmentFile;

/// Reads of a segment file through its (possibly direct) file handle.
pub struct FileSource<'a> {
    /// The file.
    pub file: &'a SegmentFile,
    /// Bounce buffers for direct reads.
    pub pool: &'a BufPool,
    /// Direct-read alignment.
    pub read_align: u64,
    /// File length.
    pub len: u64,
}

impl ByteSource for FileSource<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file
            .read_exact_at(offset, buf, self.pool, self.read_align)
    }
}

/// Keeps nothing: its footer reads all go to the file.
impl super::keys::FooterSource for FileSource<'_> {}

/// [`Error::Corruption`] of the file at `path` (its kind from its name).
pub(crate) fn corruption(path: &Path, segment: u64, offset: u64, kind: Corruption) -> Error {
    Error::Corruption {
        file: kind_of(path),
        segment,
        offset,
        kind,
    }
}

/// Maps a failed read of segment bytes to the store's error: reading past the end of the file
/// means the file is shorter than its index says.
pub(crate) fn read_error(segment: u64, offset: u64, path: &Path, e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        corruption(
            path,
            segment,
            offset,
            Corruption::Truncated {
                needed: 1,
                available: 0,
            },
        )
    } else {
        Error::io("read segment", Some(path.to_path_buf()), e)
    }
}

/// Where a record's stored value bytes lie: what [`read_value`] needs to read and verify them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSpan {
    /// Segment id.
    pub segment: u64,
    /// Offset of the record (what its chunk checksums are bound to).
    pub record_offset: u64,
    /// Offset of the first stored value byte.
    pub value_offset: u64,
    /// Number of stored value bytes.
    pub stored_len: u64,
}

impl ValueSpan {
    /// File offset of the crc of stored chunk `chunk` (the table follows the stored bytes).
    pub fn crc_offset(&self, chunk: u64) -> u64 {
        self.value_offset + self.stored_len + 4 * chunk
    }

    /// Bytes of the chunk crc table.
    pub fn crc_table_len(&self) -> u64 {
        4 * chunk_count(self.stored_len)
    }
}

/// Reads stored value bytes `[start, start + dst.len())` of the record `entry` into `dst`,
/// verifying every chunk it touches. `fetch(offset, buf)` reads file bytes of the entry's
/// segment. For a compressed value these are the stored (compressed) bytes:
/// the store's `compress::read_framed` decodes them.
///
/// Disk reads are proportional to the range: the covering chunks (4 KiB each) and their crc
/// table entries, in one read when they lie close together, in two otherwise. In the second
/// case the crcs come from `read_crcs(first_chunk, buf)`, which fills `buf` with the crcs of
/// chunks `first_chunk..` (from the file at [`ValueSpan::crc_offset`], or from memory: the
/// store's read cache keeps them, so that the next read of the value is one round trip).
pub fn read_value(
    entry: &ValueSpan,
    start: u64,
    dst: &mut [u8],
    mut fetch: impl FnMut(u64, &mut [u8]) -> Result<()>,
    mut read_crcs: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let end = start + dst.len() as u64;
    debug_assert!(end <= entry.stored_len);
    let c0 = start / CHUNK_SIZE;
    let c1 = end.div_ceil(CHUNK_SIZE);
    let data_start = c0 * CHUNK_SIZE;
    let data_end = (c1 * CHUNK_SIZE).min(entry.stored_len);
    let data_len = (data_end - data_start) as usize;
    let table_len = (4 * (c1 - c0)) as usize;
    let reads = value_reads(entry, start, dst.len() as u64);

    let verify = |data: &[u8], table: &[u8]| verify_span(entry, c0, data, table);
    let from = (start - data_start) as usize;
    if reads.crcs.is_none() {
        // The chunks, the rest of the value and the table up to the last entry, in one read.
        let span = (reads.data.end - reads.data.start) as usize;
        let mut scratch = vec![0u8; span];
        fetch(reads.data.start, &mut scratch)?;
        verify(&scratch[..data_len], &scratch[span - table_len..])?;
        dst.copy_from_slice(&scratch[from..from + dst.len()]);
        return Ok(());
    }
    let mut table = vec![0u8; table_len];
    read_crcs(c0, &mut table)?;
    if data_start == start && data_end == end {
        fetch(reads.data.start, dst)?;
        return verify(dst, &table);
    }
    let mut scratch = vec![0u8; data_len];
    fetch(reads.data.start, &mut scratch)?;
    verify(&scratch, &table)?;
    dst.copy_from_slice(&scratch[from..from + dst.len()]);
    Ok(())
}

/// The file bytes [`read_value`] reads for stored bytes `[start, start + len)` (`len` > 0) of
/// a record: the chunks that cover them, and the chunks' entries in the crc table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueReads {
    /// File bytes of the covering chunks; with their crc table entries too when these lie
    /// close after them (then `crcs` is `None`: one read).
    pub data: Range<u64>,
    /// File bytes of the chunks' crc table entries, when read apart from the chunks.
    pub crcs: Option<Range<u64>>,
}

/// What [`read_value`] reads for stored bytes `[start, start + len)` of `entry` (`len` > 0):
/// known from the index entry alone, so that a reader can issue these reads together with the
/// read of the record's header.
pub fn value_reads(entry: &ValueSpan, start: u64, len: u64) -> ValueReads {
    let end = start + len;
    let vo = entry.value_offset;
    let c0 = start / CHUNK_SIZE;
    let c1 = end.div_ceil(CHUNK_SIZE);
    let data_start = c0 * CHUNK_SIZE;
    let data_end = (c1 * CHUNK_SIZE).min(entry.stored_len);
    let table = entry.crc_offset(c0)..entry.crc_offset(c1);
    // Close together (small values, ranges near the end of values up to ~3.5 MiB): one read
    // from the first chunk to the last table entry. Otherwise the table entries and the chunks
    // separately: a second read, but a 4 KiB range never reads more than 8 KiB (a 16 KiB
    // gap made the last 4 KiB of a 10 MiB value read 14.5 KiB).
    const JOIN_GAP: u64 = 3 << 10;
    let gap = entry.stored_len - data_end + 4 * c0;
    if gap <= JOIN_GAP {
        ValueReads {
            data: vo + data_start..table.end,
            crcs: None,
        }
    } else {
        ValueReads {
            data: vo + data_start..vo + data_end,
            crcs: Some(table),
        }
    }
}

/// Checks stored chunks `c0..` of `entry` (`data`, whole chunks) against their crcs (`table`).
fn verify_span(entry: &ValueSpan, c0: u64, data: &[u8], table: &[u8]) -> Result<()> {
    let place = RecordPlace {
        segment: entry.segment,
        offset: entry.record_offset,
    };
    verify_chunks(place, c0, data, table).map_err(|(chunk, kind)| Error::Corruption {
        // The span does not say; the reader that holds the file names it (`in_file`).
        file: SegmentKind::Log,
        segment: entry.segment,
        offset: entry.value_offset + chunk * CHUNK_SIZE,
        kind,
    })
}

/// [`read_value`] from file bytes already in memory (`bytes`, the file's bytes from offset
/// `at`: a record read whole), verified there and copied once; `None` if they do not hold the
/// chunks and crcs the read needs.
pub fn read_value_in(
    entry: &ValueSpan,
    start: u64,
    dst: &mut [u8],
    at: u64,
    bytes: &[u8],
) -> Option<Result<()>> {
    let end = start + dst.len() as u64;
    debug_assert!(end <= entry.stored_len);
    let c0 = start / CHUNK_SIZE;
    let c1 = end.div_ceil(CHUNK_SIZE);
    let data_start = c0 * CHUNK_SIZE;
    let data = entry.value_offset + data_start
        ..entry.value_offset + (c1 * CHUNK_SIZE).min(entry.stored_len);
    let table = entry.crc_offset(c0)..entry.crc_offset(c1);
    if dst.is_empty() || data.start < at || table.end > at + bytes.len() as u64 {
        return None;
    }
    let slice = |r: &std::ops::Range<u64>| &bytes[(r.start - at) as usize..(r.end - at) as usize];
    let data = slice(&data);
    Some(verify_span(entry, c0, data, slice(&table)).map(|()| {
        let from = (start - data_start) as usize;
        dst.copy_from_slice(&data[from..from + dst.len()]);
    }))
}
