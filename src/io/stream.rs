//! A synchronous aligned writer for files written start to end by one thread: blob files and
//! the footer that recovery writes. Bytes are copied into one aligned buffer and written a
//! whole buffer at a time; the last, partial block is zero-padded.

use std::borrow::Borrow;

use super::aligned::AlignedBuf;
use super::file::SegmentFile;
use crate::error::Result;
use crate::format::align_up;

/// Writes a byte stream to `file` (borrowed or owned) from a block-aligned offset, in aligned
/// whole blocks.
pub struct AlignedStream<F: Borrow<SegmentFile>> {
    file: F,
    buf: AlignedBuf,
    fill: usize,
    /// File offset of `buf[0]`.
    offset: u64,
    block: u64,
}

impl<F: Borrow<SegmentFile>> AlignedStream<F> {
    /// A stream writing to `file` from `offset` (a multiple of `block`) through a buffer of
    /// `buf_size` bytes (rounded up to `block`).
    pub fn new(
        file: F,
        offset: u64,
        buf_size: usize,
        mem_align: usize,
        block: u64,
    ) -> AlignedStream<F> {
        debug_assert!(offset.is_multiple_of(block));
        let size = align_up(buf_size.max(1) as u64, block) as usize;
        AlignedStream {
            file,
            buf: AlignedBuf::zeroed(size, mem_align),
            fill: 0,
            offset,
            block,
        }
    }

    /// Appends bytes.
    pub fn append(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.fill == self.buf.len() {
                self.write_out()?;
            }
            let n = bytes.len().min(self.buf.len() - self.fill);
            self.buf[self.fill..self.fill + n].copy_from_slice(&bytes[..n]);
            self.fill += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn write_out(&mut self) -> Result<()> {
        let len = align_up(self.fill as u64, self.block) as usize;
        self.buf[self.fill..len].fill(0);
        self.file
            .borrow()
            .write_all_at(&self.buf[..len], self.offset)?;
        self.offset += len as u64;
        self.fill = 0;
        Ok(())
    }

    /// Bytes of memory the stream holds (its buffer).
    #[cfg(any(test, feature = "testing"))]
    pub fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    /// Writes what is left, zero-padded to the block size; returns the end offset.
    pub fn finish(mut self) -> Result<u64> {
        if self.fill > 0 {
            self.write_out()?;
        }
        Ok(self.offset)
    }
}

impl<F: Borrow<SegmentFile>> crate::format::Sink for AlignedStream<F> {
    type Error = crate::error::Error;
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.append(bytes)
    }
}
