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

/// Compresses a value frame by frame as its bytes come, into stored bytes of the trailing
/// layout: every frame's stored bytes as soon as the frame is full, then, at
/// [`FrameEncoder::finish`], the entries and the header. It holds one frame of input, one
/// compressed frame and 16 bytes per frame so far; the stored bytes go to the caller's `emit`.
#[derive(Debug)]
pub struct FrameEncoder {
    frame_size: u32,
    /// Uncompressed bytes of the frame being filled.
    pending: Vec<u8>,
    /// The last frame compressed.
    scratch: Vec<u8>,
    /// Encoded entries of the frames so far.
    entries: Vec<u8>,
    value_len: u64,
    stored_len: u64,
}

impl FrameEncoder {
    /// An encoder of frames of `frame_size` uncompressed bytes
    /// (`MIN_FRAME_SIZE..=MAX_FRAME_SIZE`).
    pub fn new(frame_size: u32) -> FrameEncoder {
        debug_assert!((MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&frame_size));
        FrameEncoder {
            frame_size,
            pending: Vec::new(),
            scratch: Vec::new(),
            entries: Vec::new(),
            value_len: 0,
            stored_len: 0,
        }
    }

    /// Uncompressed bytes taken so far.
    pub fn value_len(&self) -> u64 {
        self.value_len
    }

    /// Stored bytes emitted so far.
    pub fn stored_len(&self) -> u64 {
        self.stored_len
    }

    /// Stored length the value will have if nothing more is written: what was emitted, the frame
    /// being filled (at most its length) and the table.
    pub fn stored_len_bound(&self) -> u64 {
        let header = FrameTableHeader::new(self.value_len, self.frame_size);
        self.stored_len + self.pending.len() as u64 + header.table_len()
    }

    /// Bytes of memory held (buffer capacities).
    pub fn memory(&self) -> usize {
        self.pending.capacity() + self.scratch.capacity() + self.entries.capacity()
    }

    /// Takes value bytes; emits the stored bytes of every frame they complete.
    pub fn write<E>(
        &mut self,
        mut bytes: &[u8],
        emit: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let f = self.frame_size as usize;
        while !bytes.is_empty() {
            if self.pending.is_empty() && bytes.len() >= f {
                // A whole frame in the input: compressed from there, not copied first.
                self.frame(&bytes[..f], emit)?;
                bytes = &bytes[f..];
                continue;
            }
            if self.pending.capacity() == 0 {
                self.pending.reserve_exact(f);
            }
            let n = (f - self.pending.len()).min(bytes.len());
            self.pending.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.pending.len() == f {
                let frame = std::mem::take(&mut self.pending);
                let r = self.frame(&frame, emit);
                self.pending = frame;
                self.pending.clear();
                r?;
            }
        }
        Ok(())
    }

    /// Ends the value (at least one byte must have been written): emits the last frame, the
    /// entries and the header. Returns the stored length.
    pub fn finish<E>(mut self, emit: &mut impl FnMut(&[u8]) -> Result<(), E>) -> Result<u64, E> {
        debug_assert!(self.value_len + self.pending.len() as u64 > 0);
        if !self.pending.is_empty() {
            let frame = std::mem::take(&mut self.pending);
            self.frame(&frame, emit)?;
        }
        emit(&self.entries)?;
        let header =
            FrameTableHeader::new(self.value_len, self.frame_size).placed(FrameLayout::Trailing, 0);
        emit(&header.encode())?;
        Ok(self.stored_len + self.entries.len() as u64 + FRAME_TABLE_HEADER_LEN as u64)
    }

    /// Compresses one frame (stored raw when lz4 does not shrink it) and emits it.
    fn frame<E>(
        &mut self,
        frame: &[u8],
        emit: &mut impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let index = self.entries.len() as u64 / FRAME_ENTRY_LEN as u64;
        self.scratch
            .resize(lz4_flex::block::get_maximum_output_size(frame.len()), 0);
        let stored: &[u8] = match lz4_flex::block::compress_into(frame, &mut self.scratch) {
            Ok(n) if n < frame.len() => &self.scratch[..n],
            // Did not shrink (or, impossibly, did not fit): stored raw.
            _ => frame,
        };
        let entry = FrameEntry {
            offset: self.stored_len,
            stored_len: stored.len() as u32,
            crc: frame_crc(index, frame),
        };
        emit(stored)?;
        self.entries.extend_from_slice(&entry.encode());
        self.stored_len += stored.len() as u64;
        self.value_len += frame.len() as u64;
        Ok(())
    }
}

/// Encodes `value` (not empty, at most `MAX_VALUE_LEN` bytes) as framed stored bytes (trailing
/// layout) with frames of `frame_size` uncompressed bytes (`MIN_FRAME_SIZE..=MAX_FRAME_SIZE`).
pub fn encode_framed(value: &[u8], frame_size: u32) -> Vec<u8> {
    debug_assert!(!value.is_empty() && value.len() as u64 <= MAX_VALUE_LEN);
    let header = FrameTableHeader::new(value.len() as u64, frame_size);
    let mut out = Vec::with_capacity(header.table_len() as usize + value.len() / 2);
    let mut emit = |b: &[u8]| -> Result<(), std::convert::Infallible> {
        out.extend_from_slice(b);
        Ok(())
    };
    let mut encoder = FrameEncoder::new(frame_size);
    let Ok(()) = encoder.write(value, &mut emit);
    let Ok(_) = encoder.finish(&mut emit);
    out
}

/// The same value's stored bytes in the leading layout, as versions before the trailing one
/// wrote them: for tests and fuzzing of the reading of old stores. `stored` must be a valid
/// trailing encoding.
#[cfg(any(test, feature = "testing"))]
pub fn to_leading_layout(stored: &[u8]) -> Vec<u8> {
    let (header, entries) = decode_table(stored, stored.len() as u64).expect("a trailing table");
    let leading = header.placed(FrameLayout::Leading, stored.len() as u64);
    let shift = header.table_len();
    let mut out = leading.encode().to_vec();
    for e in &entries {
        let moved = FrameEntry {
            offset: e.offset + shift,
            ..*e
        };
        out.extend_from_slice(&moved.encode());
    }
    out.extend_from_slice(&stored[..header.entries_at() as usize]);
    out
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

#[cfg(test)]
mod tests {
    use super::test_data::{random, text};
    use super::*;

    const F: u32 = MIN_FRAME_SIZE;

    fn sizes() -> Vec<usize> {
        let f = F as usize;
        vec![1, 2, f - 1, f, f + 1, 2 * f, 3 * f + 7, 10 * f]
    }

    #[test]
    fn round_trip_around_frame_boundaries() {
        for len in sizes() {
            for value in [text(len), random(len, len as u64), vec![0u8; len]] {
                let trailing = encode_framed(&value, F);
                let leading = to_leading_layout(&trailing);
                for (stored, layout) in [
                    (trailing, FrameLayout::Trailing),
                    (leading, FrameLayout::Leading),
                ] {
                    let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
                    assert_eq!(header.layout, layout);
                    assert_eq!(header.value_len, len as u64);
                    assert_eq!(header.frame_count, len.div_ceil(F as usize) as u64);
                    assert_eq!(entries.len() as u64, header.frame_count);
                    assert_eq!(decode_value(&stored).unwrap(), value, "len {len}");
                }
            }
        }
    }

    #[test]
    fn the_stream_encoder_in_any_pieces_writes_what_encode_framed_does() {
        let value = text(9 * F as usize + 321);
        let whole = encode_framed(&value, F);
        let mut x = 7u64;
        for _ in 0..20 {
            let mut enc = FrameEncoder::new(F);
            let mut out = Vec::new();
            let mut emit = |b: &[u8]| -> Result<(), ()> {
                out.extend_from_slice(b);
                Ok(())
            };
            let mut rest = &value[..];
            while !rest.is_empty() {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = ((x >> 33) as usize % (3 * F as usize)).min(rest.len());
                enc.write(&rest[..n], &mut emit).unwrap();
                rest = &rest[n..];
                assert!(enc.memory() <= 2 * F as usize + 64 + 16 * 16 + 1024);
            }
            assert!(enc.stored_len_bound() >= whole.len() as u64);
            assert_eq!(enc.finish(&mut emit).unwrap(), whole.len() as u64);
            assert_eq!(out, whole);
        }
    }

    #[test]
    fn compressible_frames_shrink_and_random_ones_are_stored_raw() {
        let t = text(8 * F as usize);
        let stored = encode_framed(&t, F);
        assert!(stored.len() < t.len() / 2, "text: {} bytes", stored.len());
        let r = random(8 * F as usize, 9);
        let stored = encode_framed(&r, F);
        let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
        assert!(entries.iter().all(|e| e.stored_len == F));
        assert_eq!(stored.len() as u64, header.table_len() + r.len() as u64);
    }

    #[test]
    fn largest_frames_of_zeroes_pass_the_expansion_bound() {
        let zeroes = vec![0u8; MAX_FRAME_SIZE as usize + 1];
        let stored = encode_framed(&zeroes, MAX_FRAME_SIZE);
        let (_, entries) = decode_table(&stored, stored.len() as u64).unwrap();
        assert!((entries[0].stored_len as u64) * MAX_LZ4_EXPANSION >= MAX_FRAME_SIZE as u64);
        assert_eq!(decode_value(&stored).unwrap(), zeroes);
    }

    #[test]
    fn frames_for_ranges() {
        let h = FrameTableHeader::new(10 * F as u64 + 5, F);
        let f = F as u64;
        assert_eq!(h.frame_count, 11);
        assert_eq!(h.frames_for(0, 1), 0..1);
        assert_eq!(h.frames_for(f - 1, f + 1), 0..2);
        assert_eq!(h.frames_for(f, 2 * f), 1..2);
        assert_eq!(h.frames_for(3, 3), 0..0);
        assert_eq!(h.frames_for(10 * f, 10 * f + 5), 10..11);
        assert_eq!(h.frame_len(10), 5);
        assert_eq!(h.frame_len(11), 0);
    }

    #[test]
    fn partial_entries_decode_like_the_whole_table() {
        let value = text(7 * F as usize + 100);
        let stored = encode_framed(&value, F);
        let s = stored.len() as u64;
        let (header, all) = decode_table(&stored, s).unwrap();
        for a in 0..=header.frame_count {
            for b in a..=header.frame_count {
                let bytes =
                    &stored[header.entry_offset(a) as usize..header.entry_offset(b) as usize];
                let got = decode_entries(&header, a..b, bytes, s).unwrap();
                assert_eq!(got, all[a as usize..b as usize]);
            }
        }
        // Each frame decodes on its own.
        for (i, e) in all.iter().enumerate() {
            let i = i as u64;
            let mut out = vec![0u8; header.frame_len(i) as usize];
            decode_frame(
                &header,
                i,
                e,
                &stored[e.offset as usize..e.end() as usize],
                &mut out,
            )
            .unwrap();
            let at = header.frame_start(i) as usize;
            assert_eq!(out, value[at..at + out.len()]);
        }
    }

    #[test]
    fn every_flipped_table_byte_is_rejected_or_caught_by_the_frames() {
        let value = text(3 * F as usize + 10);
        let trailing = encode_framed(&value, F);
        let leading = to_leading_layout(&trailing);
        for stored in [trailing, leading] {
            let (header, _) = decode_table(&stored, stored.len() as u64).unwrap();
            let table = match header.layout {
                FrameLayout::Leading => 0..header.table_len() as usize,
                FrameLayout::Trailing => header.entries_at() as usize..stored.len(),
            };
            for i in table {
                for bit in [0x01u8, 0x80] {
                    let mut bad = stored.clone();
                    bad[i] ^= bit;
                    assert!(
                        decode_value(&bad).is_err(),
                        "flip {bit:#x} at {i} undetected"
                    );
                }
            }
        }
    }

    #[test]
    fn a_flipped_frame_byte_fails_that_frame_only() {
        let value = text(4 * F as usize);
        let stored = encode_framed(&value, F);
        let s = stored.len() as u64;
        let (header, entries) = decode_table(&stored, s).unwrap();
        let victim = 2;
        let e = entries[victim];
        for at in [e.offset, e.offset + e.stored_len as u64 / 2, e.end() - 1] {
            let mut bad = stored.clone();
            bad[at as usize] ^= 0x10;
            for (i, e) in entries.iter().enumerate() {
                let mut out = vec![0u8; header.frame_len(i as u64) as usize];
                let r = decode_frame(
                    &header,
                    i as u64,
                    e,
                    &bad[e.offset as usize..e.end() as usize],
                    &mut out,
                );
                if i == victim {
                    assert!(
                        matches!(
                            r,
                            Err(Corruption::ChecksumMismatch { .. }
                                | Corruption::Decompression { .. })
                        ),
                        "flip at {at}: {r:?}"
                    );
                } else {
                    r.unwrap();
                }
            }
        }
    }

    #[test]
    fn a_raw_frame_flip_is_a_checksum_mismatch() {
        let value = random(2 * F as usize, 3);
        let mut stored = encode_framed(&value, F);
        let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
        stored[entries[1].offset as usize + 5] ^= 1;
        let mut out = vec![0u8; F as usize];
        let e = entries[1];
        assert!(matches!(
            decode_frame(
                &header,
                1,
                &e,
                &stored[e.offset as usize..e.end() as usize],
                &mut out
            ),
            Err(Corruption::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn every_truncation_is_rejected() {
        let value = text(2 * F as usize + 3);
        let stored = encode_framed(&value, F);
        let n = stored.len();
        let leading = to_leading_layout(&stored);
        for cut in 0..n {
            assert!(decode_value(&stored[..cut]).is_err(), "cut at {cut}");
            assert!(decode_value(&leading[..cut]).is_err(), "cut at {cut}");
            // The header alone, told the true stored length, still decodes when whole.
            let h = FrameTableHeader::decode(&leading[..cut], n as u64);
            assert_eq!(h.is_ok(), cut >= FRAME_TABLE_HEADER_LEN, "cut at {cut}");
            let h = FrameTableHeader::decode_trailer(&stored[cut..], n as u64);
            assert_eq!(h.is_ok(), n - cut >= FRAME_TABLE_HEADER_LEN, "cut at {cut}");
        }
        // Told a shorter stored length, the table does not fit or does not end there.
        for s in 0..n as u64 {
            assert!(decode_table(&stored, s).is_err(), "stored length {s}");
            assert!(decode_table(&leading, s).is_err(), "stored length {s}");
        }
    }

    #[test]
    fn lying_lengths_are_bounded_before_allocating() {
        let mut h = FrameTableHeader::new(MAX_VALUE_LEN, MAX_FRAME_SIZE).encode();
        // A header claiming 4 GiB in 1024 frames of 4 MiB, with almost no stored bytes.
        assert!(matches!(
            FrameTableHeader::decode(&h, 100),
            Err(Corruption::Truncated { .. })
        ));
        // A frame count that does not match the lengths.
        h[off::FRAME_COUNT] ^= 1;
        let crc = crc32fast::hash(&h[..off::HEADER_CRC]);
        h[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            FrameTableHeader::decode(&h, u64::MAX),
            Err(Corruption::InvalidField {
                field: "frame count",
                ..
            })
        ));
        // Frame sizes out of range, with a valid crc.
        for fs in [0u32, 1, MIN_FRAME_SIZE - 1, MAX_FRAME_SIZE + 1, u32::MAX] {
            let mut h = FrameTableHeader::new(10, MIN_FRAME_SIZE).encode();
            h[off::FRAME_SIZE..off::FRAME_SIZE + 4].copy_from_slice(&fs.to_le_bytes());
            let crc = crc32fast::hash(&h[..off::HEADER_CRC]);
            h[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
            assert!(matches!(
                FrameTableHeader::decode(&h, 1 << 20),
                Err(Corruption::InvalidField {
                    field: "frame size",
                    ..
                })
            ));
        }
        // Entries asked for beyond the frame count, or with too few bytes.
        let header = FrameTableHeader::new(3 * F as u64, F);
        assert!(decode_entries(&header, 0..4, &[0u8; 64], 1 << 20).is_err());
        assert!(matches!(
            decode_entries(&header, 0..3, &[0u8; 47], 1 << 20),
            Err(Corruption::Truncated { .. })
        ));
        // An entry claiming more expansion than lz4 can produce, or lying outside the value.
        let entry = |offset: u64, stored_len: u32| {
            FrameEntry {
                offset,
                stored_len,
                crc: 0,
            }
            .encode()
        };
        let t = header.table_len();
        assert!(decode_entries(&header, 0..1, &entry(t, 1), 1 << 20).is_err());
        assert!(decode_entries(&header, 0..1, &entry(t, F + 1), 1 << 20).is_err());
        assert!(decode_entries(&header, 0..1, &entry(t - 1, 100), 1 << 20).is_err());
        assert!(decode_entries(&header, 0..1, &entry(t, 100), t + 99).is_err());
        assert!(decode_entries(&header, 0..1, &entry(u64::MAX - 5, 100), u64::MAX).is_err());
        assert!(decode_entries(&header, 0..1, &entry(t, 100), t + 100).is_ok());
        // A frame decoded into a buffer of the wrong size, or from the wrong number of bytes.
        let e = FrameEntry {
            offset: t,
            stored_len: 100,
            crc: 0,
        };
        let mut out = vec![0u8; F as usize - 1];
        assert!(decode_frame(&header, 0, &e, &[0u8; 100], &mut out).is_err());
        let mut out = vec![0u8; F as usize];
        assert!(decode_frame(&header, 0, &e, &[0u8; 99], &mut out).is_err());
        assert!(decode_frame(&header, 3, &e, &[0u8; 100], &mut out).is_err());
        // Garbage that is not lz4 at all.
        assert!(matches!(
            decode_frame(&header, 0, &e, &[0xffu8; 100], &mut out),
            Err(Corruption::Decompression { frame: 0 })
        ));
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap stand-in for the fuzz target: random inputs and mutated valid tables.
        let valid = encode_framed(&text(3 * F as usize + 11), F);
        let leading = to_leading_layout(&valid);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..3000 {
            let mut bytes = if round % 3 == 0 {
                valid.clone()
            } else if round % 3 == 1 {
                leading.clone()
            } else {
                random((next() % 300) as usize, next())
            };
            for _ in 0..(next() % 4) {
                if !bytes.is_empty() {
                    let i = (next() % bytes.len() as u64) as usize;
                    bytes[i] = next() as u8;
                }
            }
            let cut = (next() % (bytes.len() as u64 + 1)) as usize;
            let bytes = &bytes[..cut];
            let _ = decode_value(bytes);
            if let Ok(h) = FrameTableHeader::decode(bytes, bytes.len() as u64) {
                let n = h.frame_count.min(4);
                let from = h.entry_offset(0) as usize;
                let _ = decode_entries(&h, 0..n, &bytes[from.min(bytes.len())..], u64::MAX);
            }
            if let Ok(h) = FrameTableHeader::decode_trailer(bytes, bytes.len() as u64) {
                let n = h.frame_count.min(4);
                let from = h.entry_offset(0) as usize;
                let _ = decode_entries(&h, 0..n, &bytes[from.min(bytes.len())..], u64::MAX);
            }
        }
    }
}
