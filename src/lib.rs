//! podstore: an embedded key-value store for blobs from a few bytes to hundreds of MiB, kept in
//! append-only segment files on a local disk, written through a double-buffered O_DIRECT writer.
//!
//! ```
//! # fn main() -> podstore::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! use podstore::{Durability, Options, Store};
//!
//! let store = Store::open_with(dir.path(), Options::default().durability(Durability::Sync))?;
//! store.put(b"object/1", &vec![7u8; 1 << 20])?;           // durable when it returns
//! let head = store.get_range(b"object/1", 0..4096)?;      // reads ~4 KiB, not 1 MiB
//! assert_eq!(head.unwrap().len(), 4096);
//! store.close()?;
//! # Ok(()) }
//! ```
//!
//! The architecture is in the module tree: [`format`](mod@format) holds the pure codecs of every on-disk
//! structure, `io` the aligned buffers, files and the writer, `segment` segment files,
//! `index` the in-memory key map, and [`Store`] the public API. docs/design.md draws every byte
//! and argues why each step of writing, sealing and recovering is crash-safe.
#![deny(missing_docs)]
#![deny(unsafe_code)]
#![warn(unsafe_op_in_unsafe_fn)]

mod batch;
mod error;
mod failpoint;
pub mod format;
mod index;
mod io;
mod options;
mod range;
mod segment;
mod store;
mod verify;

pub use batch::Batch;
pub use error::{Corruption, Error, FileKind, Result};
/// Test hooks: failpoints that abort the process at a named protocol step. Only with the
/// `testing` feature, which a user's build never needs.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub use failpoint::{COMPACTION_FAILPOINTS, arm_failpoint};
pub use options::{Compression, Durability, IoMode, Options};
pub use range::ValueRange;
pub use store::{
    CompactionReport, Keys, RecoveredSegment, RecoveryReport, Stats, Store, ValueReader,
    ValueWriter,
};
pub use verify::{Damage, Structure, VerifyReport};

pub use format::{MAX_KEY_LEN, MAX_VALUE_LEN};

#[cfg(test)]
mod tests;
