//! [`ValueWriter`]: a put whose value is streamed in, not held in memory.

use std::io;

use super::Store;
use super::compress::{StoredValue, compress_stream};
use crate::MAX_VALUE_LEN;
use crate::error::{Error, Result};
use crate::format::frames::FrameEncoder;
use crate::format::record::FLAG_COMPRESSED;
use crate::meta::{Condition, Version};
use crate::options::{Compression, Durability};
use crate::segment::BlobStream;

/// Streams a value into the store, for values too large to hold in memory. Returned by
/// [`Store::writer`].
///
/// A write that fails (an I/O error, or a value past `MAX_VALUE_LEN`) abandons the value: later
/// writes and `finish` fail too, and nothing is stored.
///
/// Write the value with [`std::io::Write`] (`write_all`, [`std::io::copy`] from a file or a
/// socket, ...), then call [`ValueWriter::finish`]: the value becomes visible, whole, and durable
/// (see there). Until then readers see the key's old value (or none). Dropping the writer
/// without `finish` (an error half-way, a panic) stores nothing: its file is removed, and one
/// left by a crash is removed at the next open.
///
/// The value goes to a blob file of its own whatever its length, written as it comes through a
/// 1 MiB buffer. With [`Options::compression`](crate::Options::compression) on it is compressed
/// frame by frame as it comes (`Lz4`: always; `Auto`: when its first frame compresses well
/// enough, else it is stored raw; a frame that does not shrink is stored raw either way), and the
/// frame table is written after the frames at `finish`. Memory stays bounded up to
/// [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN): the buffer, two blocks, the checksum table of the
/// stored bytes (4 bytes per 4 KiB, 0.1 %), and when compressing two frames
/// ([`Options::compression_frame_size`](crate::Options::compression_frame_size), 64 KiB by
/// default) and 16 bytes per frame (0.02 %).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// use std::io::Write;
/// let mut writer = store.writer("video/1")?;
/// for _ in 0..10 {
///     writer.write_all(&[7u8; 100_000])?;
/// }
/// writer.finish()?;
/// assert_eq!(store.value_len("video/1")?, Some(1_000_000));
/// # Ok(()) }
/// ```
#[must_use = "a ValueWriter stores nothing until `finish` returns Ok: dropped, it discards what was written"]
pub struct ValueWriter<'a> {
    store: &'a Store,
    key: Vec<u8>,
    /// `None` after a write failed: the stream was abandoned, and `finish` fails.
    stream: Option<BlobStream>,
    encoding: Encoding,
    /// Value bytes taken so far.
    len: u64,
}

/// How a streamed value's bytes become stored bytes.
#[derive(Debug)]
enum Encoding {
    /// As they are.
    Raw,
    /// Compressed frame by frame, the frame table at the end.
    Framed(FrameEncoder),
    /// `Compression::Auto`: the first frame, held until it is full (or the value ends) to decide
    /// from.
    Sampling(Vec<u8>),
}

impl<'a> ValueWriter<'a> {
    pub(super) fn new(store: &'a Store, key: &[u8], stream: BlobStream) -> ValueWriter<'a> {
        let opts = &store.inner.opts;
        let encoding = match opts.compression {
            Compression::None => Encoding::Raw,
            Compression::Lz4 => Encoding::Framed(FrameEncoder::new(opts.compression_frame_size)),
            Compression::Auto => Encoding::Sampling(Vec::new()),
        };
        ValueWriter {
            store,
            key: key.to_vec(),
            stream: Some(stream),
            encoding,
            len: 0,
        }
    }

    /// Bytes written so far.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Write;
    /// let mut writer = store.writer("k")?;
    /// writer.write_all(b"hello")?;
    /// assert_eq!(writer.len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> u64 {
        if self.stream.is_some() { self.len } else { 0 }
    }

    /// True while nothing has been written.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert!(store.writer("k")?.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Commits the value: makes it durable, then visible, atomically (a reader sees the key's
    /// old value or the whole new one, never a part), and returns its new version. After a crash the key has its
    /// old value or the whole new one.
    ///
    /// It is durable when `finish` returns whatever the store's
    /// [`Durability`](crate::Durability): with `Buffered`, the writes made before it are made
    /// durable first (a crash still loses only a suffix of the writes). A write of the key made
    /// while the value was streaming, and acknowledged before `finish`, is overwritten by it.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Write;
    /// store.put("k", "old")?;
    /// let mut writer = store.writer("k")?;
    /// writer.write_all(b"new value")?;
    /// assert_eq!(store.get("k")?.unwrap(), b"old"); // not visible yet
    /// writer.finish()?;
    /// assert_eq!(store.get("k")?.unwrap(), b"new value");
    /// # Ok(()) }
    /// ```
    pub fn finish(self) -> Result<Version> {
        self.commit(None)
    }

    /// [`ValueWriter::finish`], only if `condition` holds for the key when the value is
    /// committed (checked atomically with the commit, like [`Store::put_if`]); returns the new
    /// version. If it does not hold, nothing is stored (the streamed bytes are dropped) and the
    /// error is [`Error::ConditionFailed`].
    ///
    /// [`Store::put_if`]: crate::Store::put_if
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Write;
    /// use podstore::Condition;
    /// let mut upload = store.writer("objects/1")?;
    /// upload.write_all(&[1u8; 10_000])?;
    /// let v = upload.finish_if(Condition::Absent)?; // created
    /// let mut again = store.writer("objects/1")?;
    /// again.write_all(b"other")?;
    /// assert!(again.finish_if(Condition::Absent).is_err()); // exists: nothing stored
    /// assert_eq!(store.metadata("objects/1")?.unwrap().version(), v);
    /// # Ok(()) }
    /// ```
    pub fn finish_if(self, condition: Condition) -> Result<Version> {
        self.commit(Some(condition))
    }

    /// Commits the value, on `condition` if there is one.
    fn commit(mut self, condition: Option<Condition>) -> Result<Version> {
        let Some(stream) = self.stream.take() else {
            return Err(Error::Io {
                op: "finish a streamed value",
                path: None,
                source: io::Error::other("an earlier write to this ValueWriter failed"),
            });
        };
        let mut stream = stream;
        let encoding = std::mem::replace(&mut self.encoding, Encoding::Raw);
        let flags = match self.end_value(encoding, &mut stream) {
            Ok(flags) => flags,
            Err(e) => {
                stream.abandon(&self.store.inner.shared.dir);
                return Err(e);
            }
        };
        let flush_first = self.store.inner.opts.durability == Durability::Buffered;
        let seq = self.store.inner.blobs.finish_stream(
            &self.key,
            stream,
            (flags, self.len),
            flush_first,
            condition,
        )?;
        self.store.inner.compactor.evict_after_write();
        Ok(Version(seq))
    }

    /// Writes what the encoding still holds (the last frame and the frame table, or a value
    /// that ended while sampling); returns the record flags of the stored bytes.
    fn end_value(&self, encoding: Encoding, stream: &mut BlobStream) -> Result<u16> {
        match encoding {
            Encoding::Raw => Ok(0),
            // Nothing was written: the empty value, stored raw.
            Encoding::Framed(_) if self.len == 0 => Ok(0),
            Encoding::Framed(encoder) => {
                encoder.finish(&mut |b| stream.write(b))?;
                Ok(FLAG_COMPRESSED)
            }
            // Shorter than a frame: stored as a put would store it.
            Encoding::Sampling(value) => {
                let stored = StoredValue::encode(&value, &self.store.inner.opts);
                stream.write(&stored.bytes)?;
                Ok(stored.flags())
            }
        }
    }

    /// Takes value bytes: encodes them and writes the stored bytes that result.
    fn take(&mut self, bytes: &[u8]) -> Result<()> {
        let len = self.len + bytes.len() as u64;
        if len > MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len,
                max: MAX_VALUE_LEN,
            });
        }
        let opts = &self.store.inner.opts;
        let Some(stream) = self.stream.as_mut() else {
            return Ok(());
        };
        let mut bytes = bytes;
        if let Encoding::Sampling(first) = &mut self.encoding {
            let frame = opts.compression_frame_size as usize;
            let n = (frame - first.len()).min(bytes.len());
            first.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if first.len() < frame {
                self.len = len;
                return Ok(());
            }
            let first = std::mem::take(first);
            self.encoding = if compress_stream(&first, opts) {
                Encoding::Framed(FrameEncoder::new(frame as u32))
            } else {
                Encoding::Raw
            };
            encode(&mut self.encoding, stream, &first)?;
        }
        encode(&mut self.encoding, stream, bytes)?;
        self.len = len;
        Ok(())
    }

    /// Bytes of memory the writer holds for the value (its buffers and the checksum table so
    /// far), for tests of its bound.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn memory(&self) -> usize {
        let encoding = match &self.encoding {
            Encoding::Raw => 0,
            Encoding::Framed(encoder) => encoder.memory(),
            Encoding::Sampling(first) => first.capacity(),
        };
        self.stream.as_ref().map_or(0, |s| s.memory()) + encoding
    }
}

/// Writes `bytes` to `stream` as `encoding` stores them (not [`Encoding::Sampling`]).
fn encode(encoding: &mut Encoding, stream: &mut BlobStream, bytes: &[u8]) -> Result<()> {
    match encoding {
        Encoding::Raw => stream.write(bytes),
        Encoding::Framed(encoder) => encoder.write(bytes, &mut |b| stream.write(b)),
        Encoding::Sampling(_) => unreachable!("a value is sampled before it is encoded"),
    }
}

impl io::Write for ValueWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.stream.is_none() {
            return Err(io::Error::other(
                "an earlier write to this ValueWriter failed",
            ));
        }
        if let Err(e) = self.take(buf) {
            // The file's state is unknown: nothing of it may ever be committed.
            if let Some(stream) = self.stream.take() {
                stream.abandon(&self.store.inner.shared.dir);
            }
            return Err(match e {
                Error::Io { source, .. } => source,
                other => io::Error::other(other),
            });
        }
        Ok(buf.len())
    }

    /// Nothing to do: bytes are written to the file as the buffer fills, and made durable by
    /// [`ValueWriter::finish`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for ValueWriter<'_> {
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take() {
            stream.abandon(&self.store.inner.shared.dir);
        }
    }
}

impl std::fmt::Debug for ValueWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueWriter")
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("len", &self.len())
            .finish()
    }
}
