//! Store configuration.

use crate::error::{Error, Result};

/// How the store talks to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// O_DIRECT where the file system accepts it, buffered I/O where it does not.
    /// [`Store::io_mode`](crate::Store::io_mode) tells which one was chosen.
    #[default]
    Auto,
    /// O_DIRECT for segment reads and writes: no page cache, reads fetch exactly the blocks
    /// they need. Opening fails with [`Error::DirectIoUnsupported`] where it is refused.
    Direct,
    /// Ordinary buffered I/O through the page cache.
    Buffered,
}

/// When a write is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `put`/`delete` return after the record is on stable storage (fdatasync, plus a
    /// directory fsync when a segment file was created). Such a write survives kill -9 and
    /// power loss. Concurrent writers share one write and one fdatasync (group commit).
    #[default]
    Sync,
    /// `put`/`delete` return once the record is in the write buffer: visible to readers at once,
    /// durable after [`Store::flush`](crate::Store::flush), [`Store::close`](crate::Store::close)
    /// or when the buffer fills. A crash loses a suffix of such writes, never a middle part.
    Buffered,
}

/// Options for [`Store::open_with`](crate::Store::open_with).
///
/// ```
/// use podstore::{Durability, IoMode, Options};
/// let opts = Options::default()
///     .segment_size(64 << 20)
///     .io_mode(IoMode::Auto)
///     .durability(Durability::Sync);
/// # let _ = opts;
/// ```
#[derive(Debug, Clone)]
pub struct Options {
    /// Size at which the active segment is sealed and a new one started, in bytes
    /// (default 256 MiB, at least 1 MiB). A record larger than this gets a segment of its own.
    pub segment_size: u64,
    /// O_DIRECT or buffered I/O (default [`IoMode::Auto`]).
    pub io_mode: IoMode,
    /// When writes are acknowledged (default [`Durability::Sync`]).
    pub durability: Durability,
    /// Size of each of the two write buffers, in bytes (default 1 MiB, 64 KiB to 64 MiB;
    /// rounded up to the write block size). A write larger than a buffer is streamed through both.
    pub write_buffer_size: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size: 256 << 20,
            io_mode: IoMode::Auto,
            durability: Durability::Sync,
            write_buffer_size: 1 << 20,
        }
    }
}

impl Options {
    /// Sets [`Options::segment_size`].
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self
    }

    /// Sets [`Options::io_mode`].
    pub fn io_mode(mut self, mode: IoMode) -> Self {
        self.io_mode = mode;
        self
    }

    /// Sets [`Options::durability`].
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Sets [`Options::write_buffer_size`].
    pub fn write_buffer_size(mut self, bytes: usize) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.segment_size < (1 << 20) {
            return Err(Error::InvalidOptions("segment_size must be at least 1 MiB"));
        }
        if !((64 << 10)..=(64 << 20)).contains(&self.write_buffer_size) {
            return Err(Error::InvalidOptions(
                "write_buffer_size must be between 64 KiB and 64 MiB",
            ));
        }
        Ok(())
    }
}
