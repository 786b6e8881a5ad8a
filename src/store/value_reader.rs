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
/// **Read-ahead.** A stream of [`Read::read`] calls, each where the last ended, reads ahead in
/// windows that grow from 64 KiB to 1 MiB as the stream goes on (as the kernel's readahead
/// grows per open file), so that small `read` calls (8 KiB from [`std::io::copy`]) cost one
/// disk read per window: into the read cache's pieces where the cache keeps the value in
/// pieces, else (the cache off, or a value the cache would keep whole but did not hold when the
/// reader was made) into a buffer of the reader's own, at most 1 MiB per reader. A
/// seek away, or [`ValueReader::read_exact_at`], reads only what it is asked for.
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
    /// Value bytes read ahead, from value offset `ahead_at`.
    ahead: Vec<u8>,
    ahead_at: u64,
    /// Where the last [`Read::read`] ended: a read from there continues a stream.
    next: Option<u64>,
    /// The size of the next read-ahead (0: no stream seen).
    window: usize,
}

/// The first read-ahead of a stream: a piece of the read cache.
const FIRST_WINDOW: usize = 64 << 10;

/// The largest read-ahead: the read path's bounce buffer, where a read is bound by transfer,
/// not by round trips.
const MAX_WINDOW: usize = 1 << 20;

impl ValueReader {
    pub(super) fn new(reader: Arc<Reader>, key: &[u8], found: Located) -> ValueReader {
        ValueReader {
            reader,
            key: key.to_vec(),
            meta: ValueMeta::new(found.entry.value_len, found.seq).expiring(found.entry.expires_at),
            found,
            pos: 0,
            cache: FrameCache::default(),
            ahead: Vec::new(),
            ahead_at: 0,
            next: None,
            window: 0,
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
        if n == 0 && !(self.found.entry.is_compressed() && self.found.entry.value_len == 0) {
            return Ok(0);
        }
        // From the bytes read ahead, as far as they go.
        if let Some(from) = self.pos.checked_sub(self.ahead_at)
            && (from as usize) < self.ahead.len()
        {
            let from = from as usize;
            let k = n.min(self.ahead.len() - from);
            buf[..k].copy_from_slice(&self.ahead[from..from + k]);
            return Ok(self.advance(k));
        }
        let stream = self.next == Some(self.pos) && self.reader.streams(&self.found);
        self.window = if stream {
            (self.window * 2).clamp(FIRST_WINDOW, MAX_WINDOW)
        } else {
            0
        };
        if self.window > n {
            // A window from here: read, verified, then served.
            let w = (self.window as u64).min(left) as usize;
            self.ahead.resize(w, 0);
            let found = &self.found;
            let read =
                self.reader
                    .read_value(found, self.pos, &mut self.ahead, Some(&mut self.cache));
            if read.is_ok() {
                self.ahead_at = self.pos;
                buf[..n].copy_from_slice(&self.ahead[..n]);
                return Ok(self.advance(n));
            }
            // The window failed (damage, an I/O error) somewhere past what was asked for,
            // perhaps: the read is made as asked, so that it fails only if its own bytes do
            // (a stream delivers every byte before damage, as a file's readahead does), and the
            // stream starts again from one chunk at a time.
            self.ahead.clear();
            self.window = 0;
            self.next = None;
        }
        self.reader
            .read_value(&self.found, self.pos, &mut buf[..n], Some(&mut self.cache))
            .map_err(to_io)?;
        Ok(self.advance(n))
    }
}

impl ValueReader {
    /// Moves the position `n` bytes on, after a read of them; returns `n`.
    fn advance(&mut self, n: usize) -> usize {
        self.pos += n as u64;
        self.next = Some(self.pos);
        n
    }
}

/// The store's error as `Read` reports it: I/O errors as they are, others (damage) as
/// `InvalidData` wrapping the store's error.
fn to_io(e: Error) -> io::Error {
    match e {
        Error::Io { source, .. } => source,
        other => io::Error::new(io::ErrorKind::InvalidData, other),
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
