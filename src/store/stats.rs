//! [`Stats`]: what the store holds, takes on disk and in memory, and has written; and the byte
//! counters behind the last of these.

use std::sync::atomic::{AtomicU64, Ordering};

use super::append::Log;
use super::cache::CacheFigures;
use super::segments::SegmentTable;
use crate::index::Index;
use crate::options::IoMode;
use crate::segment::SegmentKind;

/// Figures about the store: what it holds, what it takes on disk and in memory, and what it has
/// written. Returned by [`Store::stats`](crate::Store::stats).
///
/// Byte figures about records count whole records: header (32 bytes), key, stored value and
/// chunk checksums (4 bytes per 4 KiB).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Keys with a value.
    pub live_keys: u64,
    /// Bytes of the records of live values.
    pub live_bytes: u64,
    /// Bytes of the tombstone records still on disk (deletes that may still hide an older
    /// value; compaction drops them once nothing older is left).
    pub tombstone_bytes: u64,
    /// Number of those tombstones.
    pub tombstones: u64,
    /// Bytes on disk that are neither: overwritten and deleted values, padding, segment
    /// headers and footers. `disk_bytes - preallocated_bytes - live_bytes - tombstone_bytes`.
    pub dead_bytes: u64,
    /// Zeroed space written ahead of the active segment's end, for the writes to come (see
    /// docs/design.md, "Zero-ahead").
    pub preallocated_bytes: u64,
    /// Length of all segment and blob files.
    pub disk_bytes: u64,
    /// Log segment files (the active one included).
    pub log_segments: usize,
    /// Blob files (one large value each).
    pub blob_files: usize,
    /// The I/O mode in use.
    pub io_mode: IoMode,
    /// Entries in the in-memory index (one per live key).
    pub index_entries: u64,
    /// Heap bytes the index has allocated: 23 bytes per entry it has room for (its shards'
    /// capacities, within about 6 % of its entries) and its shard table (2.6 MiB). Keys are not
    /// kept in memory.
    pub index_bytes: u64,
    /// Record bytes written by puts, deletes and batches since open (padding not counted).
    pub user_bytes_written: u64,
    /// Record bytes written by compaction since open.
    pub compaction_bytes_written: u64,
    /// Log segments compacted since open.
    pub segments_compacted: u64,
    /// Segment and blob files removed by compaction since open.
    pub files_removed: u64,
    /// Tombstones dropped by compaction since open.
    pub tombstones_dropped: u64,
    /// Lookups the read cache answered since open (see
    /// [`Options::cache_capacity`](crate::Options::cache_capacity)): a whole value, a block of
    /// chunk checksums or a frame table found in memory.
    pub cache_hits: u64,
    /// Lookups of the read cache that found nothing since open (the bytes were then read from
    /// disk). A range read of a small value that is not cached counts one too.
    pub cache_misses: u64,
    /// Entries the read cache dropped to make room since open.
    pub cache_evictions: u64,
    /// Bytes the read cache holds now, each entry's bookkeeping included: never more than
    /// [`cache_capacity`](Stats::cache_capacity).
    pub cache_bytes: u64,
    /// The read cache's budget: most bytes it may hold, set by
    /// [`Options::cache_capacity`](crate::Options::cache_capacity) or sized at open from
    /// [`memory_available`](Stats::memory_available). The cache allocates only as it fills.
    pub cache_capacity: u64,
    /// The memory available to the process when the store was opened (the smallest of its
    /// cgroup's limits and the machine's available memory), if the cache was sized from it:
    /// `None` when `Options::cache_capacity` set the size, or when nothing said how much there
    /// was. The store's memory is about `index_bytes + cache_bytes`, and the two write buffers.
    pub memory_available: Option<u64>,
}

impl Stats {
    /// Bytes written by compaction per byte written by users since open (0 when users wrote
    /// nothing).
    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes_written == 0 {
            0.0
        } else {
            self.compaction_bytes_written as f64 / self.user_bytes_written as f64
        }
    }
}

/// Byte and file counters since open.
#[derive(Default)]
pub(super) struct Counters {
    /// Record bytes appended by puts, deletes and batches (padding not counted).
    user_bytes: AtomicU64,
    /// Record bytes copied forward by compaction.
    compaction_bytes: AtomicU64,
    /// Segment and blob files removed by compaction.
    files_removed: AtomicU64,
    /// Log segments compacted (copied forward and removed).
    segments_compacted: AtomicU64,
    /// Tombstones dropped by compaction (nothing older was left for them to hide).
    tombstones_dropped: AtomicU64,
}

impl Counters {
    /// Record bytes written for users.
    pub(super) fn add_user_bytes(&self, n: u64) {
        self.user_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Record bytes copied by compaction.
    pub(super) fn add_compaction_bytes(&self, n: u64) {
        self.compaction_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// A file removed by compaction.
    pub(super) fn file_removed(&self) {
        self.files_removed.fetch_add(1, Ordering::Relaxed);
    }

    /// A log segment compacted, and the tombstones it dropped.
    pub(super) fn segment_compacted(&self, tombstones_dropped: u64) {
        self.segments_compacted.fetch_add(1, Ordering::Relaxed);
        self.tombstones_dropped
            .fetch_add(tombstones_dropped, Ordering::Relaxed);
    }
}

/// Collects [`Stats`]: takes a lock of the index per shard and looks up the length of every
/// file (no file data is read).
pub(super) fn collect(
    segments: &SegmentTable,
    log: &Log,
    index: &Index,
    counters: &Counters,
    cache: CacheFigures,
    io_mode: IoMode,
) -> Stats {
    let handles = segments.snapshot();
    let active = log.lock().active();
    let (mut disk_bytes, mut preallocated_bytes) = (0, 0);
    let (mut log_segments, mut blob_files) = (0, 0);
    let (mut tombstone_bytes, mut tombstones) = active.as_ref().map_or((0, 0), |a| {
        (a.summary.tombstone_bytes, a.summary.tombstones)
    });
    for (id, h) in &handles {
        let len = h.file.len().unwrap_or(0);
        disk_bytes += len;
        if let Some(a) = &active
            && a.id == *id
        {
            preallocated_bytes += len.saturating_sub(a.position);
        }
        tombstone_bytes += h.summary.tombstone_bytes;
        tombstones += h.summary.tombstones;
        match h.kind {
            SegmentKind::Log => log_segments += 1,
            SegmentKind::Blob => blob_files += 1,
        }
    }
    let live_bytes: u64 = index.usage_all().values().map(|u| u.live_bytes).sum();
    let c = counters;
    Stats {
        live_keys: index.len(),
        live_bytes,
        tombstone_bytes,
        tombstones,
        dead_bytes: disk_bytes.saturating_sub(preallocated_bytes + live_bytes + tombstone_bytes),
        preallocated_bytes,
        disk_bytes,
        log_segments,
        blob_files,
        io_mode,
        index_entries: index.len(),
        index_bytes: index.memory_bytes(),
        user_bytes_written: c.user_bytes.load(Ordering::Relaxed),
        compaction_bytes_written: c.compaction_bytes.load(Ordering::Relaxed),
        segments_compacted: c.segments_compacted.load(Ordering::Relaxed),
        files_removed: c.files_removed.load(Ordering::Relaxed),
        tombstones_dropped: c.tombstones_dropped.load(Ordering::Relaxed),
        cache_hits: cache.hits,
        cache_misses: cache.misses,
        cache_evictions: cache.evictions,
        cache_bytes: cache.bytes,
        cache_capacity: cache.capacity,
        memory_available: cache.available,
    }
}

/// [`Store::files`](super::Store::files): every file's header and footer, with the live bytes
/// the index counts in it.
pub(super) fn files(
    segments: &SegmentTable,
    log: &Log,
    index: &Index,
    profile: &crate::io::file::IoProfile,
    pool: &crate::io::aligned::BufPool,
) -> crate::Result<Vec<crate::inspect::FileInfo>> {
    let active = log.lock().active();
    let usage = index.usage_all();
    let mut out = Vec::new();
    for (id, h) in segments.snapshot() {
        let mut info = crate::inspect::info_of(&h.file, profile, pool)?;
        let live = usage.get(&id).map_or(0, |u| u.live_bytes);
        let preallocated = match &active {
            Some(a) if a.id == id => info.len.saturating_sub(a.position),
            _ => 0,
        };
        let kept = live + h.summary.tombstone_bytes + preallocated;
        info.live_bytes = Some(live);
        info.dead_bytes = Some(info.len.saturating_sub(kept));
        out.push(info);
    }
    Ok(out)
}
