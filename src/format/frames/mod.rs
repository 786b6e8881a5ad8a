//! Framed values: how a compressed value is stored inside its record.
//!
//! Layout: docs/design.md, "Framed (compressed) values" (offsets checked against it by a test).
//!
//! A compressed value is cut into frames of a fixed uncompressed size (the last one may be
//! shorter), each compressed on its own as an lz4 block. The record's value bytes (the *stored*
//! bytes) hold the frames back to back and a frame table: a fixed-size table header (frame size,
//! uncompressed length, frame count) and one fixed-size entry per frame (where its stored bytes
//! are, how long they are, and the crc32 of its uncompressed bytes). Because header and entries
//! have fixed sizes, a range read computes where the entries of the frames it needs are, reads
//! only those and those frames, and decompresses only them.
//!
//! Two layouts ([`FrameLayout`]), told apart by their header's magic:
//! * **trailing** (written by this version, [`FrameEncoder`]): `[frames][entries][header]`, the
//!   header (magic [`FRAME_TRAILER_MAGIC`]) in the last 24 stored bytes. The table follows the
//!   frames, so a value can be compressed and written frame by frame as it streams in, holding
//!   only the 16-byte entries until the end;
//! * **leading** (written by earlier versions, read still): `[header][entries][frames]`, the
//!   header (magic [`FRAME_TABLE_MAGIC`]) in the first 24 stored bytes.
//!
//! A reader decodes the trailing header from the stored bytes' end first and falls back to the
//! leading one at the start ([`decode_header`]).
//!
//! A frame that lz4 does not shrink is stored as it is: an entry whose stored length equals the
//! frame's uncompressed length is a raw frame.
//!
//! The stored bytes are checksummed by the record's chunk crc table like any value (bound to the
//! segment and offset). The frame crc is over the *uncompressed* bytes and the frame index, so it
//! catches a decompression fault, and it is independent of where the record lives: compaction can
//! copy the stored bytes of a compressed value to another place without recompressing.
//!
//! Every decoder here bounds each length it reads against the bytes it is given or a constant
//! (the frame size is at most [`MAX_FRAME_SIZE`]; a compressed frame cannot expand by more than
//! lz4's ratio), so arbitrary input never makes it panic or allocate more than a small multiple
//! of its input.

use std::ops::Range;

use super::{MAX_VALUE_LEN, check_crc, get_u32, get_u64, magic_at, need};
use crate::error::Corruption;

/// Magic number of a leading frame table header (at the start of the stored bytes).
pub const FRAME_TABLE_MAGIC: [u8; 4] = *b"PODZ";
/// Magic number of a trailing frame table header (in the last 24 stored bytes).
pub const FRAME_TRAILER_MAGIC: [u8; 4] = *b"PODE";
/// Length of the frame table header.
pub const FRAME_TABLE_HEADER_LEN: usize = 24;
/// Length of one frame table entry.
pub const FRAME_ENTRY_LEN: usize = 16;
/// Smallest frame size a table may name.
pub const MIN_FRAME_SIZE: u32 = 4096;
/// Largest frame size a table may name: bounds the buffer a frame decompresses into.
pub const MAX_FRAME_SIZE: u32 = 4 << 20;
/// Frame size used unless the options say otherwise.
pub const DEFAULT_FRAME_SIZE: u32 = 64 << 10;
/// An lz4 block cannot expand by more than this factor (a match's length costs at least one byte
/// per 255 bytes it produces); a frame that claims more is rejected before decompressing.
pub const MAX_LZ4_EXPANSION: u64 = 255;

mod off {
    pub const MAGIC: usize = 0;
    pub const FRAME_SIZE: usize = 4;
    pub const VALUE_LEN: usize = 8;
    pub const FRAME_COUNT: usize = 16;
    pub const HEADER_CRC: usize = 20;
}

mod entry_off {
    pub const OFFSET: usize = 0;
    pub const STORED_LEN: usize = 8;
    pub const CRC: usize = 12;
}

#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::FRAME_SIZE, 4),
    (off::VALUE_LEN, 8),
    (off::FRAME_COUNT, 4),
    (off::HEADER_CRC, 4),
];

#[cfg(test)]
pub(crate) const ENTRY_FIELDS: &[(usize, usize)] = &[
    (entry_off::OFFSET, 8),
    (entry_off::STORED_LEN, 4),
    (entry_off::CRC, 4),
];

fn invalid(field: &'static str, value: u64) -> Corruption {
    Corruption::InvalidField { field, value }
}

/// Where a frame table lies in the stored bytes of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameLayout {
    /// `[header][entries][frames]`: written by earlier versions, still read.
    Leading,
    /// `[frames][entries][header]`: written by this version (and by a streamed put).
    Trailing,
}

/// The fixed-size header of a frame table, and where the table lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTableHeader {
    /// Uncompressed bytes per frame (the last frame may hold fewer).
    pub frame_size: u32,
    /// Uncompressed length of the value.
    pub value_len: u64,
    /// Number of frames: `ceil(value_len / frame_size)`.
    pub frame_count: u64,
    /// Where the table lies.
    pub layout: FrameLayout,
    /// Length of the stored bytes (`u64::MAX` for a header made by [`FrameTableHeader::new`],
    /// which knows no stored length).
    pub stored_len: u64,
}

impl FrameTableHeader {
    /// The header of a leading table for a value of `value_len` bytes cut into frames of
    /// `frame_size` bytes (the stored length unknown).
    pub fn new(value_len: u64, frame_size: u32) -> FrameTableHeader {
        FrameTableHeader {
            frame_size,
            value_len,
            frame_count: value_len.div_ceil(frame_size.max(1) as u64),
            layout: FrameLayout::Leading,
            stored_len: u64::MAX,
        }
    }

    /// This header, placed: a table in `layout` in stored bytes of `stored_len`.
    pub fn placed(self, layout: FrameLayout, stored_len: u64) -> FrameTableHeader {
        FrameTableHeader {
            layout,
            stored_len,
            ..self
        }
    }

    /// Length of the whole table (header and entries).
    pub fn table_len(&self) -> u64 {
        FRAME_TABLE_HEADER_LEN as u64 + FRAME_ENTRY_LEN as u64 * self.frame_count
    }

    /// Offset, in the stored bytes, of the first entry.
    pub fn entries_at(&self) -> u64 {
        match self.layout {
            FrameLayout::Leading => FRAME_TABLE_HEADER_LEN as u64,
            FrameLayout::Trailing => self.stored_len.saturating_sub(self.table_len()),
        }
    }

    /// The stored bytes the frames fill, back to back.
    pub fn frames_region(&self) -> Range<u64> {
        match self.layout {
            FrameLayout::Leading => self.table_len()..self.stored_len,
            FrameLayout::Trailing => 0..self.entries_at(),
        }
    }

    /// Offset, in the stored bytes, of the entry of frame `index`.
    pub fn entry_offset(&self, index: u64) -> u64 {
        self.entries_at() + FRAME_ENTRY_LEN as u64 * index
    }

    /// Offset, in the uncompressed value, of the first byte of frame `index`.
    pub fn frame_start(&self, index: u64) -> u64 {
        index * self.frame_size as u64
    }

    /// Uncompressed length of frame `index` (0 past the last frame).
    pub fn frame_len(&self, index: u64) -> u64 {
        let start = self.frame_start(index).min(self.value_len);
        (start + self.frame_size as u64).min(self.value_len) - start
    }

    /// The frames that hold uncompressed bytes `[start, end)` (empty for an empty range).
    pub fn frames_for(&self, start: u64, end: u64) -> Range<u64> {
        let fs = self.frame_size.max(1) as u64;
        let end = end.min(self.value_len);
        if start >= end {
            return 0..0;
        }
        start / fs..end.div_ceil(fs)
    }

    /// Encodes the header, with the magic of its layout.
    pub fn encode(&self) -> [u8; FRAME_TABLE_HEADER_LEN] {
        let mut b = [0u8; FRAME_TABLE_HEADER_LEN];
        let magic = match self.layout {
            FrameLayout::Leading => FRAME_TABLE_MAGIC,
            FrameLayout::Trailing => FRAME_TRAILER_MAGIC,
        };
        b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&magic);
        b[off::FRAME_SIZE..off::FRAME_SIZE + 4].copy_from_slice(&self.frame_size.to_le_bytes());
        b[off::VALUE_LEN..off::VALUE_LEN + 8].copy_from_slice(&self.value_len.to_le_bytes());
        b[off::FRAME_COUNT..off::FRAME_COUNT + 4]
            .copy_from_slice(&(self.frame_count as u32).to_le_bytes());
        let crc = crc32fast::hash(&b[..off::HEADER_CRC]);
        b[off::HEADER_CRC..off::HEADER_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks a leading header at the start of `bytes`, the stored bytes of a value
    /// of `stored_len` bytes in all (`bytes` may be a prefix of them).
    ///
    /// Checks the magic, the header crc, that the frame size is within
    /// [`MIN_FRAME_SIZE`]`..=`[`MAX_FRAME_SIZE`], that the value is 1 to `MAX_VALUE_LEN` bytes,
    /// that the frame count is exactly the one the lengths give, and that the table and at least
    /// one byte per frame fit in `stored_len`.
    pub fn decode(bytes: &[u8], stored_len: u64) -> Result<FrameTableHeader, Corruption> {
        need(bytes, FRAME_TABLE_HEADER_LEN)?;
        decode_fields(
            &bytes[..FRAME_TABLE_HEADER_LEN],
            FrameLayout::Leading,
            stored_len,
        )
    }

    /// Decodes and checks a trailing header at the end of `tail`, the last bytes of the stored
    /// bytes of a value of `stored_len` bytes in all (`tail` may be a suffix of them, or all of
    /// them). Checks what [`FrameTableHeader::decode`] checks.
    pub fn decode_trailer(tail: &[u8], stored_len: u64) -> Result<FrameTableHeader, Corruption> {
        need(tail, FRAME_TABLE_HEADER_LEN)?;
        let at = tail.len() - FRAME_TABLE_HEADER_LEN;
        decode_fields(&tail[at..], FrameLayout::Trailing, stored_len)
    }
}

/// Decodes the 24 header bytes `b` of a table in `layout`.
fn decode_fields(
    b: &[u8],
    layout: FrameLayout,
    stored_len: u64,
) -> Result<FrameTableHeader, Corruption> {
    let (expected, structure) = match layout {
        FrameLayout::Leading => (FRAME_TABLE_MAGIC, "frame table"),
        FrameLayout::Trailing => (FRAME_TRAILER_MAGIC, "frame table trailer"),
    };
    let magic = magic_at(b, off::MAGIC);
    if magic != expected {
        return Err(Corruption::BadMagic {
            structure,
            found: magic,
        });
    }
    check_crc(
        crc32fast::hash(&b[..off::HEADER_CRC]),
        get_u32(b, off::HEADER_CRC),
    )?;
    let frame_size = get_u32(b, off::FRAME_SIZE);
    if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&frame_size) {
        return Err(invalid("frame size", frame_size as u64));
    }
    let value_len = get_u64(b, off::VALUE_LEN);
    if value_len == 0 || value_len > MAX_VALUE_LEN {
        return Err(invalid("frame table value length", value_len));
    }
    let header = FrameTableHeader::new(value_len, frame_size).placed(layout, stored_len);
    let count = get_u32(b, off::FRAME_COUNT) as u64;
    if count != header.frame_count {
        return Err(invalid("frame count", count));
    }
    // Every frame takes at least one stored byte.
    if header.table_len() + header.frame_count > stored_len {
        return Err(Corruption::Truncated {
            needed: header.table_len() + header.frame_count,
            available: stored_len,
        });
    }
    Ok(header)
}

/// Decodes the frame table header of stored bytes of `stored_len` bytes: the trailing one at the
/// end of `tail` (their last bytes) if there is one whose value length is `value_len` (when the
/// caller knows it), else the leading one at the start of the bytes `head` returns (their first
/// bytes; `head` is called only then, so a reader of a trailing table reads nothing more).
///
/// When neither decodes, the error is the trailing header's if `tail` ends with its magic (a
/// damaged trailing table), else the leading one's. (Stored bytes of the leading layout end with
/// a frame, which may be raw: only bytes crafted to look like a trailing table that names the
/// value's own length, and whose entries and frames verify, would be read as one.)
pub fn decode_header<E>(
    tail: &[u8],
    stored_len: u64,
    value_len: Option<u64>,
    head: impl FnOnce() -> Result<Result<FrameTableHeader, Corruption>, E>,
) -> Result<Result<FrameTableHeader, Corruption>, E> {
    let trailing =
        FrameTableHeader::decode_trailer(tail, stored_len).and_then(|h| match value_len {
            Some(len) if len != h.value_len => {
                Err(invalid("frame table value length", h.value_len))
            }
            _ => Ok(h),
        });
    let trailing_err = match trailing {
        Ok(h) => return Ok(Ok(h)),
        Err(e) => e,
    };
    let has_magic = tail.len() >= FRAME_TABLE_HEADER_LEN
        && magic_at(tail, tail.len() - FRAME_TABLE_HEADER_LEN) == FRAME_TRAILER_MAGIC;
    Ok(head()?.map_err(
        |leading_err| {
            if has_magic { trailing_err } else { leading_err }
        },
    ))
}

/// One frame's entry in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameEntry {
    /// Offset of the frame's stored bytes from the start of the stored value.
    pub offset: u64,
    /// Length of the frame's stored bytes; equal to the frame's uncompressed length for a frame
    /// stored raw (lz4 did not shrink it).
    pub stored_len: u32,
    /// [`frame_crc`] of the frame's uncompressed bytes.
    pub crc: u32,
}

impl FrameEntry {
    /// One past the frame's last stored byte.
    pub fn end(&self) -> u64 {
        self.offset + self.stored_len as u64
    }

    fn encode(&self) -> [u8; FRAME_ENTRY_LEN] {
        let mut b = [0u8; FRAME_ENTRY_LEN];
        b[entry_off::OFFSET..entry_off::OFFSET + 8].copy_from_slice(&self.offset.to_le_bytes());
        b[entry_off::STORED_LEN..entry_off::STORED_LEN + 4]
            .copy_from_slice(&self.stored_len.to_le_bytes());
        b[entry_off::CRC..entry_off::CRC + 4].copy_from_slice(&self.crc.to_le_bytes());
        b
    }
}

/// The crc32 of frame `index` of a value: over the index and the frame's uncompressed bytes.
pub fn frame_crc(index: u64, uncompressed: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&index.to_le_bytes());
    h.update(uncompressed);
    h.finalize()
}

/// Checks one entry against the header and the stored length.
fn check_entry(
    header: &FrameTableHeader,
    index: u64,
    e: &FrameEntry,
    stored_len: u64,
) -> Result<(), Corruption> {
    let frame_len = header.frame_len(index);
    let len = e.stored_len as u64;
    if len == 0 || len > frame_len || frame_len > len.saturating_mul(MAX_LZ4_EXPANSION) {
        return Err(invalid("frame stored length", len));
    }
    let region = header.frames_region();
    let end = region.end.min(stored_len);
    if e.offset < region.start || e.offset.checked_add(len).is_none_or(|e_end| e_end > end) {
        return Err(invalid("frame offset", e.offset));
    }
    Ok(())
}

/// Decodes the entries of `frames` from `bytes`, their encoded entries (bytes
/// `[entry_offset(frames.start), entry_offset(frames.end))` of the stored value), and checks
/// each against the header and `stored_len`, and that consecutive frames are stored back to back.
pub fn decode_entries(
    header: &FrameTableHeader,
    frames: Range<u64>,
    bytes: &[u8],
    stored_len: u64,
) -> Result<Vec<FrameEntry>, Corruption> {
    if frames.start > frames.end || frames.end > header.frame_count {
        return Err(invalid("frame index", frames.end));
    }
    let n = (frames.end - frames.start) as usize;
    // Bounds the allocation below by the input.
    need(bytes, n * FRAME_ENTRY_LEN)?;
    let mut out: Vec<FrameEntry> = Vec::with_capacity(n);
    for (k, index) in frames.enumerate() {
        let b = &bytes[k * FRAME_ENTRY_LEN..];
        let e = FrameEntry {
            offset: get_u64(b, entry_off::OFFSET),
            stored_len: get_u32(b, entry_off::STORED_LEN),
            crc: get_u32(b, entry_off::CRC),
        };
        check_entry(header, index, &e, stored_len)?;
        if let Some(prev) = out.last()
            && prev.end() != e.offset
        {
            return Err(invalid("frame offset", e.offset));
        }
        out.push(e);
    }
    Ok(out)
}

/// Decodes and checks the whole frame table of stored bytes of `stored_len` bytes from `stored`
/// (their first `stored_len` bytes, or fewer for a leading table: at least the table): the
/// header (either layout, see [`decode_header`]), every entry, and that the frames fill their
/// region of the stored bytes exactly.
pub fn decode_table(
    stored: &[u8],
    stored_len: u64,
) -> Result<(FrameTableHeader, Vec<FrameEntry>), Corruption> {
    // Only the whole stored bytes have a tail to look at.
    let tail = match stored.get(..stored_len.min(usize::MAX as u64) as usize) {
        Some(whole) => whole,
        None => &[],
    };
    let r: Result<_, std::convert::Infallible> = decode_header(tail, stored_len, None, || {
        Ok(FrameTableHeader::decode(stored, stored_len))
    });
    let Ok(header) = r;
    let header = header?;
    // A trailing table was found in `tail`, so `stored` holds all of it; a leading one must be.
    let at = header.entries_at() as usize;
    need(stored, at + FRAME_ENTRY_LEN * header.frame_count as usize)?;
    let entries = decode_entries(&header, 0..header.frame_count, &stored[at..], stored_len)?;
    let region = header.frames_region();
    let first = entries.first().map_or(0, |e| e.offset);
    if first != region.start {
        return Err(invalid("frame offset", first));
    }
    let end = entries.last().map_or(0, |e| e.end());
    if end != region.end {
        return Err(invalid("frame table stored length", stored_len));
    }
    Ok((header, entries))
}

/// Decompresses frame `index`, whose stored bytes are `stored` and whose entry is `entry`, into
/// `out` (exactly the frame's uncompressed length), and checks its crc.
pub fn decode_frame(
    header: &FrameTableHeader,
    index: u64,
    entry: &FrameEntry,
    stored: &[u8],
    out: &mut [u8],
) -> Result<(), Corruption> {
    if index >= header.frame_count {
        return Err(invalid("frame index", index));
    }
    let frame_len = header.frame_len(index);
    if out.len() as u64 != frame_len {
        return Err(invalid("frame output length", out.len() as u64));
    }
    if stored.len() != entry.stored_len as usize {
        return Err(Corruption::Truncated {
            needed: entry.stored_len as u64,
            available: stored.len() as u64,
        });
    }
    if stored.len() == out.len() {
        out.copy_from_slice(stored);
    } else if stored.len() > out.len()
        || (out.len() as u64) > (stored.len() as u64).saturating_mul(MAX_LZ4_EXPANSION)
    {
        return Err(invalid("frame stored length", stored.len() as u64));
    } else {
        match lz4_flex::block::decompress_into(stored, out) {
            Ok(n) if n == out.len() => {}
            _ => return Err(Corruption::Decompression { frame: index }),
        }
    }
    check_crc(frame_crc(index, out), entry.crc)
}

/// Decodes a whole framed value from its stored bytes: the table, then every frame.
///
/// Allocates the value's length only after the table verified, which bounds it by
/// `MAX_LZ4_EXPANSION` times the input.
pub fn decode_value(stored: &[u8]) -> Result<Vec<u8>, Corruption> {
    let (header, entries) = decode_table(stored, stored.len() as u64)?;
    let mut out = vec![0u8; header.value_len as usize];
    for (i, e) in entries.iter().enumerate() {
        let i = i as u64;
        let at = header.frame_start(i) as usize;
        let len = header.frame_len(i) as usize;
        let src = &stored[e.offset as usize..e.end() as usize];
        decode_frame(&header, i, e, src, &mut out[at..at + len])?;
    }
    Ok(out)
}

/// Values for the unit tests of the compression code (here, `compress`, the scan).
#[cfg(test)]
pub(crate) mod test_data {
    /// Text-like bytes: compressible, but not trivially.
    pub fn text(len: usize) -> Vec<u8> {
        let words = [
            "store ", "frame ", "value ", "range ", "chunk ", "crc ", "lz4 ", "disk ",
        ];
        let mut out = Vec::with_capacity(len + 8);
        let mut x = 12345u32;
        while out.len() < len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            out.extend_from_slice(words[(x >> 16) as usize % words.len()].as_bytes());
        }
        out.truncate(len);
        out
    }

    /// Incompressible bytes (xorshift).
    pub fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }
}

mod encoder;
pub use encoder::*;

#[cfg(test)]
mod tests;
