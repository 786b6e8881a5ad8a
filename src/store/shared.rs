//! What every part of the store shares: where it lives, how it does I/O, the index, the queue of
//! writes not yet applied to it, the table of open files and the counters. Cloned into each part
//! (all but the path and profile are `Arc`s).

use std::path::PathBuf;
use std::sync::Arc;

use super::segments::SegmentTable;
use super::stats::Counters;
use crate::index::{Index, PendingQueue};
use crate::io::file::IoProfile;
use crate::segment::Catalog;

/// The handles every part of the store works with.
#[derive(Clone)]
pub(super) struct Shared {
    /// The store directory.
    pub(super) dir: PathBuf,
    /// How files are opened, aligned and synced.
    pub(super) profile: IoProfile,
    /// Key -> where its value is.
    pub(super) index: Arc<Index>,
    /// Writes appended but not yet applied to the index.
    pub(super) pending: Arc<PendingQueue>,
    /// Every open segment and blob file.
    pub(super) segments: Arc<SegmentTable>,
    /// Byte and file counters since open.
    pub(super) counters: Arc<Counters>,
    /// The list of the store's files: every creation, seal and removal is recorded in it.
    pub(super) catalog: Arc<Catalog>,
    /// The clock expiries are judged by (issue 39).
    pub(super) clock: crate::expiry::Clock,
    /// The ranged GETs of reads of files whose data is in the remote only, and their bytes.
    pub(super) remote_reads: Arc<crate::io::remote::RemoteReads>,
}

impl Shared {
    /// Now, in milliseconds since the Unix epoch, by the store's clock: a value whose expiry is
    /// at or before it is gone.
    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}
