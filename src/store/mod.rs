//! The store: [`Store`], the public API, over parts that each do one job, one file each:
//!
//! - `open`: opening a directory — every file from its footer (or recovered), the index rebuilt;
//! - `append`: the log write path — the active segment, group commit, making room, sealing;
//! - `blob`: large values, each in a blob file of its own;
//! - `writer`: [`ValueWriter`], a put whose value is streamed into a blob file;
//! - `conditional`: writes made on a condition, batches ([`Store::write`]), and the metadata
//!   they compare ([`Store::metadata`]);
//! - `read`: from a key to verified value bytes; `value_reader`: [`ValueReader`];
//! - `list`: keys in order, from the footers ([`Keys`]); `active_keys`: the active segment's
//!   records and the sorted view of their keys that listings build and search;
//! - `resolve`: which index entry a write replaces;
//! - `cache`: the read cache (small values whole, chunk checksums, frame tables); `budget`: its
//!   default size, from the memory available to the process;
//! - `segments`: the table of open segment and blob files;
//! - `shared`: the handles every part works with (directory, I/O profile, index, pending writes,
//!   open files, counters);
//! - `compact`: giving the space of dead values back;
//! - `stats`: [`Stats`] and the byte counters;
//! - `compress`: how values are stored (raw or lz4 frames) and read back;
//! - `background`: the flush ticker and compactor threads;
//! - `remote`: the remote tier — sealed files uploaded, manifests (fencing), restore;
//! - `warm`: the warm restart, a thread that fills the read cache at open from the newest
//!   segments;
//! - `inner`: the parts wired together, started at open and stopped at close.
//!
//! Each part owns its state; the parts share the index, the pending queue, the segment table
//! and the counters (`shared`), and call each other's methods, never each other's fields.
//!
//! The public API checks arguments and calls the parts: `data` (open, put, get, delete, batches,
//! streams, keys, flush, close), `entries` (listing with values, from both ends, `first` and
//! `last`) and `admin` (verify, stats, compaction, checkpoints). This file holds [`Store`] itself.
//! They are declared first, in that order: rustdoc lists `Store`'s methods module by module in
//! declaration order (a module's own items after its submodules'), and a reader of the `Store`
//! page wants open, put and get first and the operator's methods last.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::file::DirLock;
use crate::{MAX_KEY_LEN, MAX_VALUE_LEN};

// The public API, in the order of the `Store` page (see above): not sorted.
#[rustfmt::skip]
mod data;
#[rustfmt::skip]
mod entries;
#[rustfmt::skip]
mod admin;
mod admission;

mod active_keys;
mod append;
mod background;
mod blob;
mod budget;
mod cache;
mod checkpoint;
mod compact;
mod compress;
mod conditional;
mod hotset;
mod inner;
mod list;
#[cfg(test)]
pub(crate) use list::AFTER_ACTIVE_KEYS;
mod open;
mod read;
mod remote;
mod resolve;
mod segments;
mod shared;
mod stats;
mod value_reader;
mod warm;
mod writer;

use inner::Inner;

pub use crate::segment::QuarantineReason;
pub use budget::memory_available;
pub use checkpoint::CheckpointReport;
pub use compact::{CompactOptions, CompactionReport};
pub use entries::{Entries, Entry};
pub use list::Keys;
pub use open::{QuarantinedFile, RecoveredSegment, RecoveryReport};
pub use remote::RemoteFlushReport;
pub use remote::RemoteGcReport;
pub use remote::{RemoteReader, RemoteRefreshReport, RemoteSnapshot};
pub use stats::Stats;
pub use value_reader::ValueReader;
pub use writer::ValueWriter;

/// An embedded key-value store for blobs, in one directory.
///
/// `Store` is `Send + Sync`: share it between threads by reference or in an `Arc`. Every method
/// takes `&self`; reads run concurrently with writes and see every write that has returned.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let store = podstore::Store::open(dir.path())?;
/// store.put(b"greeting", b"hello, world")?;
/// assert_eq!(store.get(b"greeting")?.as_deref(), Some(&b"hello, world"[..]));
/// assert_eq!(store.get_range(b"greeting", 7..)?.as_deref(), Some(&b"world"[..]));
/// store.close()?;
/// # Ok(()) }
/// ```
pub struct Store {
    inner: Arc<Inner>,
    closed: bool,
    // Dropped after `Drop::drop` has sealed and flushed: the next opener finds a clean store.
    _lock: DirLock,
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.closed
            && let Err(e) = self.inner.shut_down()
        {
            log::error!(
                "podstore: closing {} failed: {e}",
                self.inner.shared.dir.display()
            );
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.shared.dir)
            .field("io_mode", &self.io_mode())
            .field("keys", &self.len())
            .finish()
    }
}

impl Store {
    /// [`Error::ReadOnly`] for a store opened with [`Options::read_only`].
    /// With a remote, [`Error::Fenced`] once another writer took its prefix; else the write
    /// is noted as not yet in the remote (`Stats::remote_lag`).
    fn writable(&self) -> Result<()> {
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        if let Some(remote) = &self.inner.remote {
            remote.check_fenced()?;
            remote.note_write();
        }
        Ok(())
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        Err(Error::EmptyKey)
    } else if key.len() > MAX_KEY_LEN {
        Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        })
    } else {
        Ok(())
    }
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() as u64 > MAX_VALUE_LEN {
        Err(Error::ValueTooLarge {
            len: value.len() as u64,
            max: MAX_VALUE_LEN,
        })
    } else {
        Ok(())
    }
}
