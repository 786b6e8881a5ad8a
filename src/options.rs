//! Store configuration.

use std::time::Duration;

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
    /// A group commit closes once it holds this many bytes of records (default 8 MiB): its
    /// writers are synced at once instead of waiting for more to join. Bounds the latency a
    /// writer can incur from the others in its group.
    pub max_group_bytes: u64,
    /// A group commit closes once it holds this many records (default 4096).
    pub max_group_records: usize,
    /// Values of at least this many bytes (default 1 MiB) put with [`Durability::Sync`] bypass
    /// the shared write buffer: the writing thread writes them to a blob file of their own, so
    /// small writers never wait behind a large copy or its disk write. `u64::MAX` turns it off.
    pub large_value_threshold: u64,
    /// With [`Durability::Buffered`], writes are made durable by a background flush at most this
    /// long after they were made (default 200 ms). `None` leaves it to `flush`/`close`.
    pub flush_interval: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size: 256 << 20,
            io_mode: IoMode::Auto,
            durability: Durability::Sync,
            write_buffer_size: 1 << 20,
            max_group_bytes: 8 << 20,
            max_group_records: 4096,
            large_value_threshold: 1 << 20,
            flush_interval: Some(Duration::from_millis(200)),
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

    /// Sets [`Options::max_group_bytes`].
    pub fn max_group_bytes(mut self, bytes: u64) -> Self {
        self.max_group_bytes = bytes;
        self
    }

    /// Sets [`Options::max_group_records`].
    pub fn max_group_records(mut self, records: usize) -> Self {
        self.max_group_records = records;
        self
    }

    /// Sets [`Options::large_value_threshold`].
    pub fn large_value_threshold(mut self, bytes: u64) -> Self {
        self.large_value_threshold = bytes;
        self
    }

    /// Sets [`Options::flush_interval`].
    pub fn flush_interval(mut self, interval: Option<Duration>) -> Self {
        self.flush_interval = interval;
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
        if self.max_group_bytes == 0 || self.max_group_records == 0 {
            return Err(Error::InvalidOptions(
                "max_group_bytes and max_group_records must be positive",
            ));
        }
        if self.flush_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidOptions("flush_interval must be positive"));
        }
        Ok(())
    }
}
