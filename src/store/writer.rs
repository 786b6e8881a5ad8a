//! [`ValueWriter`]: a put whose value is streamed in, not held in memory.

use std::io;

use super::Store;
use crate::error::{Error, Result};
use crate::options::Durability;
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
/// 1 MiB buffer: memory stays bounded (the buffer, two blocks, and the value's checksum table of
/// 4 bytes per 4 KiB, i.e. 0.1 % of the value) up to [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN).
/// The value is stored uncompressed, whatever [`Options::compression`](crate::Options::compression)
/// says: a compressed value starts with its frame table, whose size is known only at the end.
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
pub struct ValueWriter<'a> {
    store: &'a Store,
    key: Vec<u8>,
    /// `None` after a write failed: the stream was abandoned, and `finish` fails.
    stream: Option<BlobStream>,
}

impl<'a> ValueWriter<'a> {
    pub(super) fn new(store: &'a Store, key: &[u8], stream: BlobStream) -> ValueWriter<'a> {
        ValueWriter {
            store,
            key: key.to_vec(),
            stream: Some(stream),
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
        self.stream.as_ref().map_or(0, |s| s.value_len())
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
    /// old value or the whole new one, never a part), and returns. After a crash the key has its
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
    pub fn finish(mut self) -> Result<()> {
        let Some(stream) = self.stream.take() else {
            return Err(Error::Io {
                op: "finish a streamed value",
                path: None,
                source: io::Error::other("an earlier write to this ValueWriter failed"),
            });
        };
        let flush_first = self.store.inner.opts.get_durability() == Durability::Buffered;
        self.store
            .inner
            .blobs
            .finish_stream(&self.key, stream, flush_first)
    }

    /// Bytes of memory the writer holds for the value (its buffers and the checksum table so
    /// far), for tests of its bound.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn memory(&self) -> usize {
        self.stream.as_ref().map_or(0, |s| s.memory())
    }
}

impl io::Write for ValueWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(io::Error::other(
                "an earlier write to this ValueWriter failed",
            ));
        };
        if let Err(e) = stream.write(buf) {
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
