//! [`ValueReader`]: a value streamed with positional reads, each verified (and, for a compressed
//! value, decompressed) by the read path (`read.rs`) as it goes.

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::Arc;

use super::compress::FrameCache;
use super::read::{Located, Reader};
use crate::error::{Error, Result};
use crate::meta::ValueMeta;

/// Streams a value with positional reads. Returned by [`Store::reader`](crate::Store::reader).
///
/// Every read verifies the checksums of the 4 KiB chunks it touches; damaged bytes give an
/// `io::Error` of kind `InvalidData` wrapping [`Error::Corruption`].
///
/// For a compressed value, every read decompresses the frames it touches; the reader keeps the
/// last frame it decompressed (and the frame table entries it read), so a stream of small
/// `read` calls reads and decompresses each frame once.
///
/// Reading past the end: [`Read::read`] at or past the end returns 0 (end of file), and a read
/// that starts inside the value returns at most the bytes left, like a file.
/// [`ValueReader::read_exact_at`] reads exactly: bytes past the end are [`Error::OutOfRange`]
/// (naming the key), unlike [`Store::get_range`](crate::Store::get_range), which clamps.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// use std::io::{Read, Seek, SeekFrom};
/// store.put("video", vec![9u8; 100_000])?;
/// let mut reader = store.reader("video")?.expect("present");
/// reader.seek(SeekFrom::Start(99_000))?;
/// let mut tail = Vec::new();
/// reader.read_to_end(&mut tail)?;
/// assert_eq!(tail.len(), 1000);
/// # Ok(()) }
/// ```
pub struct ValueReader {
    reader: Arc<Reader>,
    key: Vec<u8>,
    found: Located,
    meta: ValueMeta,
    pos: u64,
    cache: FrameCache,
}

impl ValueReader {
    pub(super) fn new(reader: Arc<Reader>, key: &[u8], found: Located) -> ValueReader {
        ValueReader {
            reader,
            key: key.to_vec(),
            meta: ValueMeta::new(found.entry.value_len, found.seq),
            found,
            pos: 0,
            cache: FrameCache::default(),
        }
    }

    /// The metadata of the value this reader reads (its length, version and time): the value
    /// as it was when the reader was made, whatever was written since.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let version = store.put("k", "hello")?;
    /// let reader = store.reader("k")?.unwrap();
    /// store.put("k", "newer")?;
    /// assert_eq!(reader.metadata().version(), version);
    /// assert_eq!(reader.metadata().len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn metadata(&self) -> &ValueMeta {
        &self.meta
    }

    /// The value's length.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "hello")?;
    /// assert_eq!(store.reader("k")?.unwrap().len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> u64 {
        self.found.entry.value_len
    }

    /// True for an empty value.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("empty", "")?;
    /// assert!(store.reader("empty")?.unwrap().is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.found.entry.value_len == 0
    }

    /// Reads exactly `buf.len()` bytes at `offset` of the value, without moving the cursor.
    /// Bytes past the value's end are [`Error::OutOfRange`], naming the key: unlike
    /// [`Store::get_range`](crate::Store::get_range), this read never returns fewer bytes.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "0123456789")?;
    /// let reader = store.reader("k")?.unwrap();
    /// let mut buf = [0u8; 3];
    /// reader.read_exact_at(4, &mut buf)?;
    /// assert_eq!(&buf, b"456");
    /// assert!(reader.read_exact_at(8, &mut buf).is_err());
    /// # Ok(()) }
    /// ```
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let inside = offset
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= self.found.entry.value_len);
        if !inside {
            return Err(Error::OutOfRange {
                key: self.key.clone(),
                start: offset,
                end: offset.saturating_add(buf.len() as u64),
                len: self.found.entry.value_len,
            });
        }
        self.reader.read_value(&self.found, offset, buf, None)
    }
}

impl std::fmt::Debug for ValueReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueReader")
            .field("len", &self.found.entry.value_len)
            .field("pos", &self.pos)
            .finish()
    }
}

impl Read for ValueReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.found.entry.value_len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        // A compressed value is never empty, except for a damaged one whose length could not be
        // recovered: read its frame table so that the damage is reported, not an empty value.
        if n == 0 && !(self.found.entry.is_compressed() && self.found.entry.value_len == 0) {
            return Ok(0);
        }
        self.reader
            .read_value(&self.found, self.pos, &mut buf[..n], Some(&mut self.cache))
            .map_err(|e| match e {
                Error::Io { source, .. } => source,
                other => io::Error::new(io::ErrorKind::InvalidData, other),
            })?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ValueReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.found.entry.value_len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match target {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )),
        }
    }
}
