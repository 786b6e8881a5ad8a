//! podstore: an embedded key-value store for blobs from a few bytes to hundreds of MiB, kept in
//! append-only segment files on a local disk, written through a double-buffered O_DIRECT writer.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir().unwrap();
//! use std::io::Write;
//! use podstore::{Durability, Options, Store};
//!
//! let store = Store::open_with(dir.path(), Options::default().durability(Durability::Sync))?;
//! store.put("object/1", vec![7u8; 1 << 20])?;        // durable when it returns
//! let head = store.get_range("object/1", 0..4096)?;  // reads ~4 KiB, not 1 MiB
//! assert_eq!(head.unwrap().len(), 4096);
//! let tail = store.get_range("object/1", (1 << 20) - 10..(1 << 20) + 4096)?; // clamped
//! assert_eq!(tail.unwrap().len(), 10);
//!
//! let mut writer = store.writer("object/2")?;        // a value streamed in, not held
//! writer.write_all(b"part one, ")?;
//! writer.write_all(b"part two")?;
//! writer.finish()?;                                  // atomic and durable
//! assert_eq!(store.get("object/2")?.unwrap(), b"part one, part two");
//! store.close()?;
//! # Ok(()) }
//! ```
//!
//! # How it works
//!
//! A store is one directory. Values are appended as checksummed records to log segment files
//! through two aligned write buffers, written with O_DIRECT where the file system allows it;
//! concurrent durable writers share one write and one fdatasync (group commit). A segment that
//! reaches [`Options::segment_size`] is sealed with a footer that indexes its records, so that
//! opening a store reads footers, not data. Large values (and streamed ones,
//! [`Store::writer`]) get a blob file of their own. An in-memory index maps each key to its
//! record; reads fetch and verify only the 4 KiB chunks a range needs. Overwritten and deleted
//! values are given back by compaction ([`Store::compact`], and a background thread). After a
//! crash, the segment that was being written is scanned and cut after its last whole record:
//! every acknowledged write survives, and a batch is all there or not at all.
//!
//! # Choosing options
//!
//! - [`Durability::Sync`] (the default) acknowledges a write once it is on disk;
//!   [`Durability::Buffered`] once it is in memory, durable after [`Store::flush`].
//! - [`IoMode::Auto`] uses O_DIRECT where the file system supports it.
//! - [`Compression`] is off by default; [`Compression::Auto`] suits text-like values.
//!
//! # Object storage
//!
//! [`Options::remote`] gives a store a copy of itself in an object store (the
//! [`remote::Remote`] seam; `podstore-remote` adapts any `object_store::ObjectStore`): sealed
//! files are uploaded as they are, [`Store::flush_remote`] returns once a manifest naming every
//! earlier write is in the remote, and a new or empty directory opened with the remote is
//! restored from it. One store writes a prefix; any number of [`RemoteReader`]s on other
//! machines follow it read-only, each serving the state of one manifest and switching to a
//! newer one on [`RemoteReader::refresh`].
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![warn(unsafe_op_in_unsafe_fn)]

mod batch;
#[cfg(doctest)]
mod doctests;
mod error;
mod expiry;
mod failpoint;
/// The on-disk codecs, pure and without I/O. Not part of the supported API: reachable only with
/// the `testing` feature, for the crate's fuzz targets, benches and tests.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod format;
#[cfg(not(feature = "testing"))]
#[allow(dead_code, unused_imports)]
mod format;
mod index;
pub mod inspect;
mod io;
mod meta;
mod options;
mod range;
mod segment;
mod store;
mod verify;

pub use batch::Batch;
pub use error::{Corruption, DamagedFile, Error, FileKind, FileProblem, Result};
pub use expiry::PutOptions;
/// Test machinery: a clock for expiries that a test moves ([`Options::testing_clock`]). Only
/// with the `testing` feature.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing {
    pub use crate::expiry::MockClock;
}
/// Test hooks: failpoints that abort the process at a named protocol step. Only with the
/// `testing` feature, which a user's build never needs.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use failpoint::{COMPACTION_FAILPOINTS, EVICTION_FAILPOINTS, arm_failpoint};
pub use meta::{Condition, ParseVersionError, ValueMeta, Version};
pub use options::{Admission, Compression, Durability, IoMode, Options, OptionsView, RecoveryMode};
pub use range::ValueRange;
pub use store::{
    CheckpointReport, CompactOptions, CompactionReport, Entries, Entry, Keys, QuarantineReason,
    QuarantinedFile, RecoveredSegment, RecoveryReport, RemoteFlushReport, RemoteGcReport,
    RemoteReader, RemoteRefreshReport, RemoteSnapshot, Stats, Store, ValueReader, ValueWriter,
    memory_available,
};
pub use verify::{Damage, Structure, VerifyReport};

/// The remote tier's seam ([`Options::remote`]): the [`Remote`](remote::Remote) trait a store
/// uploads its sealed files and manifests through, and its error. `podstore-remote` implements
/// it on any `object_store::ObjectStore`; with the `testing` feature, `MemoryRemote` (in
/// memory) and `FaultyRemote` (seeded faults around another) are here too, for tests.
pub mod remote {
    #[cfg(feature = "testing")]
    pub use crate::io::remote::{Faults, FaultyRemote, MemoryRemote};
    pub use crate::io::remote::{
        ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind,
    };
}

pub use format::{MAX_KEY_LEN, MAX_VALUE_LEN};

#[cfg(test)]
mod tests;
