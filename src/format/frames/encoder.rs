//! The frame encoder: a value compressed frame by frame as its bytes come, into stored bytes of
//! the trailing layout (and, for tests and fuzzing, the same bytes in the leading layout that
//! earlier versions wrote).

use super::*;

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
