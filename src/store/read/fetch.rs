//! The file reads under every read of a record: [`Reader::fetch`] (from the write buffers, the
//! bytes a read issued together with others brought, or the file), [`Reader::fetch_owned`] (in
//! a buffer of its own) and the chunk crcs ([`Reader::read_crcs`], kept by the cache).

use bytes::Bytes;

use super::{Located, Reader};
use crate::error::Result;
use crate::segment;
use crate::store::cache::{CRC_SECTOR, Cached, Key, Part};

impl Reader {
    /// The chunk crcs of `found`'s record from chunk `first` on, filling `dst`: from the cache,
    /// or read a whole file sector of [`CRC_SECTOR`] bytes at a time (what a direct read of
    /// them fetches anyway) and kept, so that the next read nearby fetches only its chunks.
    pub(super) fn read_crcs(&self, found: &Located, first: u64, dst: &mut [u8]) -> Result<()> {
        let span = found.entry.span();
        let (mut at, end) = (
            span.crc_offset(first),
            span.crc_offset(first) + dst.len() as u64,
        );
        if !self.cache.is_on() {
            return self.fetch(found, at, dst);
        }
        let table = span.crc_offset(0)..span.crc_offset(0) + span.crc_table_len();
        while at < end {
            let sector = at / CRC_SECTOR;
            let from = (sector * CRC_SECTOR).max(table.start);
            let to = ((sector + 1) * CRC_SECTOR).min(table.end);
            let key = Key::of(&found.entry, Part::Crcs(sector));
            let crcs = match self.cache.get_bytes(&key) {
                Some(b) => b,
                None => {
                    let mut buf = vec![0u8; (to - from) as usize];
                    self.fetch(found, from, &mut buf)?;
                    let b = Bytes::from(buf);
                    self.cache.insert(key, Cached::Bytes(b.clone()));
                    b
                }
            };
            let upto = to.min(end);
            let done = (at - span.crc_offset(first)) as usize;
            let n = (upto - at) as usize;
            let i = (at - from) as usize;
            dst[done..done + n].copy_from_slice(&crcs[i..i + n]);
            at = upto;
        }
        Ok(())
    }

    /// Bytes `[offset, offset + len)` of the segment of `found`, as [`Reader::fetch`] reads
    /// them, kept: from the file in one read into a buffer of their own when no write buffer
    /// holds any of them (the common case: a sealed segment, or the written part of the active
    /// one), else copied and read piecewise.
    pub(super) fn fetch_owned(&self, found: &Located, offset: u64, len: usize) -> Result<Bytes> {
        if let Some(b) = found.ahead_bytes(offset, len) {
            return Ok(b);
        }
        let segment = found.entry.segment;
        if !self.log.buffers_hold(segment, offset, offset + len as u64) {
            let (buf, skip) = found
                .file
                .read_owned(offset, len, &self.pool, self.read_align)
                .map_err(|e| segment::read_error(segment, offset, found.file.path(), e))?;
            return Ok(Bytes::from_owner(buf).slice(skip..skip + len));
        }
        let mut buf = vec![0u8; len];
        self.fetch(found, offset, &mut buf)?;
        Ok(Bytes::from(buf))
    }

    /// Reads bytes `[offset, offset + dst.len())` of the segment of `found` from wherever they
    /// are: the write buffers (copied under the tail lock, which is never held across I/O) or
    /// the file.
    pub(super) fn fetch(&self, found: &Located, offset: u64, dst: &mut [u8]) -> Result<()> {
        if let Some(record) = &found.prefetched
            && let Some(at) = offset.checked_sub(found.entry.offset)
            && at + dst.len() as u64 <= record.len() as u64
        {
            dst.copy_from_slice(&record[at as usize..at as usize + dst.len()]);
            return Ok(());
        }
        if let Some(b) = found.ahead_bytes(offset, dst.len()) {
            dst.copy_from_slice(&b);
            return Ok(());
        }
        let segment = found.entry.segment;
        let mut done = 0;
        while done < dst.len() {
            let at = offset + done as u64;
            match self.log.copy_from_buffers(segment, at, &mut dst[done..]) {
                Ok(n) => done += n,
                Err(next) => {
                    let upto = (next - offset) as usize;
                    found
                        .file
                        .read_exact_at(at, &mut dst[done..upto], &self.pool, self.read_align)
                        .map_err(|e| segment::read_error(segment, at, found.file.path(), e))?;
                    done = upto;
                }
            }
        }
        Ok(())
    }
}
