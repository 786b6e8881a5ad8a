//! The segment table: every segment and blob file the store has open, and what compaction and
//! [`Stats`](super::Stats) need to know of each. One lock; handles are handed out as clones
//! (their file behind an `Arc`), so that a reader keeps its file open after a removal.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::format::footer::BlockLocations;
use crate::format::record::RecordKind;
use crate::io::file::SegmentFile;
use crate::segment::SegmentKind;

/// A segment file open for reads, and what compaction needs to know of it.
#[derive(Clone)]
pub(super) struct SegmentHandle {
    pub(super) file: Arc<SegmentFile>,
    pub(super) kind: SegmentKind,
    /// The sync ticket (`WriteBuffer::sync_ticket`) after which its footer is on stable
    /// storage: `Some(0)` for files found at open and blob files; `None` for the active log
    /// segment, which is being written.
    pub(super) sealed_at: Option<u64>,
    /// What its footer names.
    pub(super) summary: FileSummary,
    /// Where each key block's location entries are in its footer, so that a listing gives keys
    /// their versions without reading their records: set at open and at a seal (from the table
    /// they decode or encode anyway), else by the first listing that reads the file's keys.
    /// Shared by the handle's clones.
    pub(super) blocks: Arc<OnceLock<Arc<BlockLocations>>>,
}

/// What a file's footer names, for the tombstone rule and [`Stats`](super::Stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FileSummary {
    /// Smallest sequence number of a put its footer names (`u64::MAX` if none). A tombstone
    /// older than this cannot hide anything in this file.
    pub(super) min_put_seq: u64,
    /// Bytes of the tombstone records its footer names.
    pub(super) tombstone_bytes: u64,
    /// Number of those tombstones.
    pub(super) tombstones: u64,
    /// Largest sequence number of any record its footer names (0 if none): eviction drops
    /// files in this order, oldest newest record first (`compact/evict.rs`).
    pub(super) max_seq: u64,
}

impl Default for FileSummary {
    fn default() -> Self {
        FileSummary {
            min_put_seq: u64::MAX,
            tombstone_bytes: 0,
            tombstones: 0,
            max_seq: 0,
        }
    }
}

impl FileSummary {
    /// Counts one record: a put's sequence number, or a tombstone's bytes.
    pub(super) fn add(&mut self, kind: RecordKind, seq: u64, record_bytes: u64) {
        self.max_seq = self.max_seq.max(seq);
        match kind {
            RecordKind::Put => self.min_put_seq = self.min_put_seq.min(seq),
            RecordKind::Tombstone => {
                self.tombstone_bytes += record_bytes;
                self.tombstones += 1;
            }
        }
    }
}

/// When a log segment is worth compacting: the one rule of `Compactor::choose`,
/// `Compactor::seal_active_if_dead` and [`Stats`](super::Stats)' buckets.
#[derive(Debug, Clone, Copy)]
pub(super) struct CompactRule {
    /// The dead fraction at which a segment is compacted.
    pub(super) threshold: f64,
    /// The store's block size: a rewrite writes whole blocks.
    pub(super) block: u64,
}

impl CompactRule {
    /// Whether compacting a log segment `len` bytes long, holding `live_bytes` of live records
    /// and `tombstone_bytes` of tombstones, is worth it: its dead bytes reach the threshold of
    /// its length, and a rewrite would give bytes back. A rewrite writes the segment's header
    /// and the records it keeps again, in whole blocks, and a footer after them (a block at
    /// least): a small segment whose dead bytes are only that (a store that never fills a
    /// segment, its active segment sealed by each `compact`) would otherwise be rewritten into
    /// a file of its own size at every call. A segment without live records is worth it once
    /// past the threshold: its tombstones may all be dropped, and the file with them.
    pub(super) fn worth(&self, len: u64, live_bytes: u64, tombstone_bytes: u64) -> bool {
        let dead = len.saturating_sub(live_bytes + tombstone_bytes);
        if len == 0 || (dead as f64) < self.threshold * len as f64 {
            return false;
        }
        if live_bytes == 0 {
            return true;
        }
        let block = self.block.max(1);
        let header = crate::format::segment_header::SEGMENT_HEADER_LEN as u64;
        let kept = header + live_bytes + tombstone_bytes;
        let rewritten = kept.div_ceil(block) * block + block;
        rewritten < len
    }
}

impl SegmentHandle {
    /// A file whose footer is durable.
    pub(super) fn sealed(file: Arc<SegmentFile>, kind: SegmentKind, summary: FileSummary) -> Self {
        SegmentHandle {
            file,
            kind,
            sealed_at: Some(0),
            summary,
            blocks: Arc::default(),
        }
    }
}

/// The table of files held for reading ([`SegmentTable::hold`]).
pub(super) struct HeldTable<'a>(RwLockReadGuard<'a, HashMap<u64, SegmentHandle>>);

impl HeldTable<'_> {
    /// Every file, in no order.
    pub(super) fn all(&self) -> Vec<(u64, SegmentHandle)> {
        self.0.iter().map(|(&id, h)| (id, h.clone())).collect()
    }
}

/// Every open segment and blob file, by id.
#[derive(Default)]
pub(super) struct SegmentTable {
    map: RwLock<HashMap<u64, SegmentHandle>>,
}

impl SegmentTable {
    /// A table of the files found at open.
    pub(super) fn new(map: HashMap<u64, SegmentHandle>) -> Self {
        SegmentTable {
            map: RwLock::new(map),
        }
    }

    fn read(&self) -> RwLockReadGuard<'_, HashMap<u64, SegmentHandle>> {
        self.map.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, HashMap<u64, SegmentHandle>> {
        self.map.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds a file: a new active log segment (`sealed_at: None`) or a written blob file.
    pub(super) fn insert(&self, id: u64, handle: SegmentHandle) {
        self.write().insert(id, handle);
    }

    /// The file of segment `id`, if the store has it.
    pub(super) fn file(&self, id: u64) -> Option<Arc<SegmentFile>> {
        self.read().get(&id).map(|h| h.file.clone())
    }

    /// Records that segment `id`'s footer is durable after sync ticket `ticket`.
    pub(super) fn mark_sealed(
        &self,
        id: u64,
        ticket: u64,
        summary: FileSummary,
        blocks: BlockLocations,
    ) {
        if let Some(h) = self.write().get_mut(&id) {
            h.sealed_at = Some(ticket);
            h.summary = summary;
            let _ = h.blocks.set(Arc::new(blocks));
        }
    }

    /// Replaces the file of `id` (a file whose data went to the remote: its remote handle);
    /// the old handle, if the store had the file.
    pub(super) fn replace_file(&self, id: u64, file: Arc<SegmentFile>) -> Option<Arc<SegmentFile>> {
        self.write()
            .get_mut(&id)
            .map(|h| std::mem::replace(&mut h.file, file))
    }

    /// Forgets file `id` (after its removal is durable).
    pub(super) fn remove(&self, id: u64) {
        self.write().remove(&id);
    }

    /// Every file, by id.
    pub(super) fn snapshot(&self) -> Vec<(u64, SegmentHandle)> {
        let mut all = self.hold().all();
        all.sort_unstable_by_key(|(id, _)| *id);
        all
    }

    /// The table held for reading: no file is added or removed while the result lives.
    pub(super) fn hold(&self) -> HeldTable<'_> {
        HeldTable(self.read())
    }

    /// The files whose footer is durable once `syncs_done` syncs have completed.
    pub(super) fn sealed_by(&self, syncs_done: u64) -> Vec<(u64, SegmentHandle)> {
        let mut sealed = self.snapshot();
        sealed.retain(|(_, h)| h.sealed_at.is_some_and(|t| t <= syncs_done));
        sealed
    }

    /// The smallest sequence number of a put named by any file but `except` (`u64::MAX`: none).
    pub(super) fn min_put_seq_except(&self, except: u64) -> u64 {
        self.read()
            .iter()
            .filter(|(id, _)| **id != except)
            .map(|(_, h)| h.summary.min_put_seq)
            .min()
            .unwrap_or(u64::MAX)
    }
}
