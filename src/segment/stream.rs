//! A blob file written as its value streams in, for a value whose length is known only at the
//! end (`Store::writer`). The on-disk result is byte for byte what [`write_blob`] writes.
//!
//! The stream takes the record's *stored* bytes: the value, or (compressed by the caller, frame
//! by frame) its frames followed by the frame table; the record's flags and the value's length
//! as put are given at [`BlobStream::finish`].
//!
//! The record's header (which holds the value's length and the sequence number) and key sit in
//! the file's first blocks, before the value. Those blocks (`[0, head_end)`, the header, key and
//! the first value bytes up to the next block boundary) are kept in memory and written last,
//! at [`BlobStream::finish`]; every value byte after them is streamed to the file at once, and
//! the chunk crcs are computed as the bytes go by (the table follows the value). Until `finish`
//! the file's first block is zero, so a crash leaves a blob file that open removes (a blob file
//! without a footer whose record is not whole). `finish` then writes the head, syncs, and only
//! then writes the footer (the footer-after-sync rule).
//!
//! Memory: the stream's buffer ([`BLOB_WRITE_CHUNK`]), at most two blocks of head, and the crc
//! table, 4 bytes per 4 KiB of value (at most 4 MiB at `MAX_VALUE_LEN`).

use std::path::Path;
use std::sync::Arc;

use super::blob::{
    BLOB_RECORD_OFFSET, BLOB_WRITE_CHUNK, BlobValue, blob_record_header, blob_record_place,
    write_blob_footer, write_blob_record,
};
use super::names::{SegmentKind, path};
use crate::error::{Error, Result};
use crate::format::footer::FooterEntry;
use crate::format::record::{ChunkCrcs, FLAG_EXPIRES, head_len};
use crate::format::segment_header::SegmentHeader;
use crate::format::{MAX_VALUE_LEN, align_up};
use crate::io::file::{IoProfile, SegmentFile, remove_file};
use crate::io::stream::AlignedStream;

/// A blob file being written from a stream of value bytes.
pub struct BlobStream {
    file: Arc<SegmentFile>,
    id: u64,
    key: Vec<u8>,
    profile: IoProfile,
    /// The value bytes that go in the head blocks, written at `finish`.
    head_value: Vec<u8>,
    /// How many value bytes fit in the head blocks.
    head_room: usize,
    /// File offset where the value bytes after the head start (a block boundary).
    head_end: u64,
    /// The value bytes after the head, once there are any.
    rest: Option<AlignedStream<Arc<SegmentFile>>>,
    crcs: ChunkCrcs,
    /// Stored bytes written so far.
    stored_len: u64,
    /// Cleared by `finish`: an unfinished stream removes its file when dropped.
    unfinished: bool,
    /// When the value expires, if it does: fixed at the start, since the record's header
    /// length (and so where the value starts) depends on it.
    expires_at: Option<u64>,
}

impl BlobStream {
    /// A stream into the empty blob file `file` (created, name durable, by
    /// [`create_blob_files`](super::create_blob_files)), the value of `key`, which expires at
    /// `expires_at` (milliseconds since the Unix epoch) if given.
    pub fn new(
        file: SegmentFile,
        id: u64,
        key: &[u8],
        profile: &IoProfile,
        expires_at: Option<u64>,
    ) -> BlobStream {
        let flags = if expires_at.is_some() {
            FLAG_EXPIRES
        } else {
            0
        };
        let value_at = BLOB_RECORD_OFFSET + (head_len(flags) + key.len()) as u64;
        let head_end = align_up(value_at, profile.block_size as u64);
        BlobStream {
            file: Arc::new(file),
            id,
            key: key.to_vec(),
            profile: profile.clone(),
            head_value: Vec::new(),
            head_room: (head_end - value_at) as usize,
            head_end,
            rest: None,
            crcs: ChunkCrcs::new(blob_record_place(id)),
            stored_len: 0,
            unfinished: true,
            expires_at,
        }
    }

    /// The blob file's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// When the value expires, if it does.
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }

    /// Stored bytes written so far.
    pub fn stored_len(&self) -> u64 {
        self.stored_len
    }

    #[cfg(any(test, feature = "testing"))]
    /// Bytes of memory the stream holds: its write buffer, the head's value bytes and the crc
    /// table so far.
    pub fn memory(&self) -> usize {
        self.rest.as_ref().map_or(0, |r| r.buffer_len())
            + self.head_value.capacity()
            + self.crcs.table_len()
    }

    /// Appends stored bytes. More than `MAX_VALUE_LEN` of them is [`Error::ValueTooLarge`].
    pub fn write(&mut self, mut bytes: &[u8]) -> Result<()> {
        let len = self.stored_len + bytes.len() as u64;
        if len > MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len,
                max: MAX_VALUE_LEN,
            });
        }
        self.crcs.update(bytes);
        self.stored_len = len;
        if self.head_value.len() < self.head_room {
            let n = bytes.len().min(self.head_room - self.head_value.len());
            if self.head_value.capacity() == 0 {
                self.head_value.reserve_exact(self.head_room);
            }
            self.head_value.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.is_empty() {
            return Ok(());
        }
        let profile = &self.profile;
        let rest = self.rest.get_or_insert_with(|| {
            AlignedStream::new(
                self.file.clone(),
                self.head_end,
                BLOB_WRITE_CHUNK,
                profile.mem_align,
                profile.block_size as u64,
            )
        });
        rest.append(bytes)
    }

    /// Writes the header (with sequence number `seq` and `flags`: whether the stored bytes are
    /// framed), key, crc table and footer (with `value_len`, the value's length as put), each
    /// after what it names is durable, and returns the sealed file. On error the file is removed
    /// (best effort).
    pub fn finish(
        mut self,
        dir: &Path,
        seq: u64,
        flags: u16,
        value_len: u64,
    ) -> Result<Arc<SegmentFile>> {
        self.unfinished = false;
        let result = self.seal(seq, flags, value_len);
        if result.is_err() {
            let _ = remove_file(&self.profile, &path(dir, self.id, SegmentKind::Blob));
        }
        result.map(|()| self.file.clone())
    }

    fn seal(&mut self, seq: u64, flags: u16, value_len: u64) -> Result<()> {
        let header = blob_record_header(&self.key, flags, self.stored_len, seq, self.expires_at);
        let Some(mut rest) = self.rest.take() else {
            // The whole value fits in the head blocks: written like any blob.
            let value = BlobValue {
                stored: &self.head_value,
                value_len,
                flags,
                expires_at: self.expires_at,
            };
            return write_blob_record(&self.file, self.id, seq, &self.key, value, &self.profile);
        };
        let crcs = std::mem::replace(&mut self.crcs, ChunkCrcs::new(blob_record_place(self.id)));
        rest.append(&crcs.finish())?;
        let footer_at = rest.finish()?;
        let block = self.profile.block_size;
        let mut head = AlignedStream::new(
            &*self.file,
            0,
            self.head_end as usize,
            self.profile.mem_align,
            block as u64,
        );
        head.append(
            &SegmentHeader {
                segment: self.id,
                block_size: block,
            }
            .encode(),
        )?;
        head.append(&header.encode(blob_record_place(self.id), &self.key))?;
        head.append(&self.key)?;
        head.append(&self.head_value)?;
        head.finish()?;
        let entry =
            FooterEntry::for_record(BLOB_RECORD_OFFSET, &header, self.key.clone(), value_len);
        write_blob_footer(&self.file, self.id, entry, footer_at, &self.profile)
    }

    /// Removes the file of a stream that will not be finished (best effort: a file that survives
    /// has a zero first block, and open removes it).
    pub fn abandon(mut self, dir: &Path) {
        self.unfinished = false;
        let _ = remove_file(&self.profile, &path(dir, self.id, SegmentKind::Blob));
    }
}

impl Drop for BlobStream {
    fn drop(&mut self) {
        debug_assert!(
            !self.unfinished,
            "a BlobStream must be finished or abandoned"
        );
    }
}
