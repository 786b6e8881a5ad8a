//! [`Stats`]: what the store holds, takes on disk and in memory, and has written; and the byte
//! counters behind the last of these.

use std::sync::atomic::{AtomicU64, Ordering};

use super::append::Log;
use super::cache::CacheFigures;
use super::segments::SegmentTable;
use super::warm::Warmed;
use crate::index::Index;
use crate::options::IoMode;
use crate::segment::SegmentKind;

/// Figures about the store: what it holds, what it takes on disk and in memory, and what it has
/// written. Returned by [`Store::stats`](crate::Store::stats).
///
/// Byte figures about records count whole records: header (32 bytes, 40 for a value that
/// expires), key, stored value and chunk checksums (4 bytes per 4 KiB).
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
    ///
    /// Why they are still there: [`reclaimable_bytes`](Stats::reclaimable_bytes),
    /// [`below_threshold_bytes`](Stats::below_threshold_bytes),
    /// [`active_dead_bytes`](Stats::active_dead_bytes) and
    /// [`blob_overhead_bytes`](Stats::blob_overhead_bytes) split them, file by file, and add up
    /// to them (while no write is in flight: a write being applied may count in one figure and
    /// not yet in the other).
    pub dead_bytes: u64,
    /// The dead fraction at which a log segment is compacted
    /// ([`Options::compaction_threshold`](crate::Options::compaction_threshold)): what the
    /// figures below are measured against.
    pub compaction_threshold: f64,
    /// Dead bytes [`Store::compact`](crate::Store::compact) would give back now: those of the
    /// log segments whose dead fraction reaches the threshold (the active one included, which
    /// `compact` seals first; the background compactor waits until it is sealed), and the dead
    /// blob files whole. A segment's live records are copied forward, so a segment gives back its
    /// dead bytes, not its length. (A segment in which a live value fails verification is
    /// counted here but left in place: see
    /// [`CompactionReport::damaged_segments`](crate::CompactionReport::damaged_segments).)
    pub reclaimable_bytes: u64,
    /// Dead bytes in sealed log segments whose dead fraction is below the threshold: kept until
    /// more of the segment dies, or until
    /// [`Store::compact_with`](crate::Store::compact_with) is asked for a threshold low enough
    /// (at the cost of copying the segment's live records).
    pub below_threshold_bytes: u64,
    /// Dead bytes in the active log segment (the one being written) while its dead fraction is
    /// below the threshold (at or above it, they count in `reclaimable_bytes`). The background
    /// compactor never takes the active segment; it is sealed when full, by
    /// [`Store::seal`](crate::Store::seal) and at close, then counts as any sealed segment.
    /// A read-only store counts here the segment it found without a footer (a crash stopped its
    /// writing): compaction reads footers, and the next writable open seals it.
    pub active_dead_bytes: u64,
    /// Headers, footers and padding of blob files whose value is live: given back with the
    /// file, once its value is overwritten or deleted.
    pub blob_overhead_bytes: u64,
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
    /// The size cap ([`Options::size_cap`](crate::Options::size_cap)), if the store has one.
    pub size_cap: Option<u64>,
    /// Segment and blob files dropped whole by eviction since open, to stay within the size
    /// cap.
    pub evicted_files: u64,
    /// Bytes of those files.
    pub evicted_bytes: u64,
    /// The highest sequence number (a value's [`Version`](crate::Version)) eviction has ever
    /// dropped: every value written at or before it is gone (0: nothing was ever evicted). Kept
    /// in the catalog, so it outlives a reopen, unlike the counts since open.
    pub evicted_through: u64,
    /// Values given a second chance since open
    /// ([`Options::second_chance`](crate::Options::second_chance)): read since written,
    /// appended again before eviction dropped their file.
    pub second_chances: u64,
    /// Record bytes those values took (eviction wrote them; at most half of what it freed).
    pub second_chance_bytes: u64,
    /// [`Store::offer`](crate::Store::offer)s dropped since open because the write would have
    /// waited for the disk.
    pub offers_dropped: u64,
    /// [`Store::offer`](crate::Store::offer)s turned away since open by
    /// [`Admission::SecondOffer`](crate::Admission::SecondOffer): their key had not been
    /// offered recently.
    pub offers_not_admitted: u64,
    /// `get`s, `get_into`s and `get_bytes` of a store with a size cap since open: with
    /// [`capped_get_hits`](Stats::capped_get_hits), the cache's hit ratio
    /// ([`Stats::hit_ratio`]).
    pub capped_gets: u64,
    /// Those that found a value.
    pub capped_get_hits: u64,
    /// Live values eviction dropped since open (with those files, and older values elsewhere
    /// that went with them: docs/design.md, "Eviction").
    pub evicted_values: u64,
    /// Lookups the read cache answered since open (see
    /// [`Options::cache_capacity`](crate::Options::cache_capacity)): a whole value, a block of
    /// chunk checksums or a frame table found in memory (gets answered from the index's table of
    /// hot values, which is part of the cache, included).
    pub cache_hits: u64,
    /// Lookups of the read cache that found nothing since open (the bytes were then read from
    /// disk). A range read of a small value that is not cached counts one too.
    pub cache_misses: u64,
    /// Entries the read cache dropped to make room since open (an entry replaced by the same
    /// part of the same record, kept again by another reader, is not one).
    pub cache_evictions: u64,
    /// Bytes the read cache holds now, each entry's bookkeeping included: never more than
    /// [`cache_capacity`](Stats::cache_capacity). With a cache of 16 MiB or more, a thirty-second of
    /// the capacity is the table of hot values (small values read recently, by key hash), whose
    /// entries count their buffers in full even when shared with the rest of the cache.
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
    /// Whether the warm-up at open ([`Options::warm_cache`](crate::Options::warm_cache)) is
    /// still filling the read cache from the newest segments.
    pub cache_warming: bool,
    /// Values the warm-up kept in the read cache since open.
    pub cache_warmed_values: u64,
    /// Bytes of those values (not counting their keys and bookkeeping).
    pub cache_warmed_bytes: u64,
    /// Bytes the warm-up read from the files since open (in reads of up to 4 MiB).
    pub cache_warm_read_bytes: u64,
    /// Keys whose value has expired ([`PutOptions`](crate::PutOptions)) and whose record is
    /// still on disk: absent to every read, not counted in `live_keys`, waiting for compaction.
    pub expired_keys: u64,
    /// Bytes of the records of those expired values (header with its expiry, key, value,
    /// checksums). Counted in `live_bytes` too (and so in the compaction figures, which count
    /// them as live) until compaction reclaims them: compaction takes a log segment's expired
    /// bytes as dead when it chooses what to compact.
    pub expired_bytes: u64,
    /// Bytes of expired values' records that compaction dropped since open (not copied
    /// forward; an expired value that still hid an older record of its key left a tombstone).
    pub expired_reclaimed_bytes: u64,
    /// With a [remote](crate::Options::remote): bytes of sealed files uploaded since open
    /// (0 without one).
    pub remote_uploaded_bytes: u64,
    /// Files uploaded since open.
    pub remote_uploaded_files: u64,
    /// Sealed files not uploaded yet (the active segment is not counted: it is uploaded once
    /// sealed, by [`Store::flush_remote`](crate::Store::flush_remote) or when it fills).
    pub remote_waiting_files: u64,
    /// Bytes of those files.
    pub remote_waiting_bytes: u64,
    /// How long ago the oldest write not yet named by a manifest in the remote was made
    /// (`None`: every write is, or there is no remote). What the loss of the machine would
    /// lose is at most the writes of this last stretch.
    pub remote_lag: Option<std::time::Duration>,
    /// The number of the newest manifest this store wrote (0 without a remote).
    pub remote_manifest: u64,
    /// Objects deleted from the remote since open (manifests replaced longer than
    /// [`Options::remote_retention`](crate::Options::remote_retention) ago, files no manifest
    /// left names), and their bytes.
    pub remote_deleted_objects: u64,
    /// Bytes of those objects.
    pub remote_deleted_bytes: u64,
    /// Bytes of the segment and blob files on the local disk: [`Stats::disk_bytes`] less the
    /// data of files whose data is in the remote only
    /// ([`Options::remote_local_budget`](crate::Options::remote_local_budget)).
    pub local_bytes: u64,
    /// Sealed files whose data is in the remote only (their local copies keep headers, crc
    /// tables and footers).
    pub remote_only_files: u64,
    /// Bytes of those files' data read from the remote (not on the local disk).
    pub remote_only_bytes: u64,
    /// Ranged GETs made since open to read files whose data is in the remote only (each
    /// attempt of a retried one counts): a cold get costs one.
    pub remote_gets: u64,
    /// Bytes those GETs fetched.
    pub remote_get_bytes: u64,
}

impl Stats {
    /// These figures with the expired values (`expired`: their bytes and count, still on
    /// disk), which are not live keys, and the bytes of expired values reclaimed since open.
    pub(super) fn with_expiry(self, (bytes, keys): (u64, u64), counters: &Counters) -> Stats {
        Stats {
            live_keys: self.live_keys.saturating_sub(keys),
            expired_keys: keys,
            expired_bytes: bytes,
            expired_reclaimed_bytes: counters.expired_reclaimed.load(Ordering::Relaxed),
            ..self
        }
    }

    /// These figures with what the warm-up did.
    pub(super) fn with_warm_up(self, w: Warmed) -> Stats {
        Stats {
            cache_warming: w.running,
            cache_warmed_values: w.values,
            cache_warmed_bytes: w.bytes,
            cache_warm_read_bytes: w.read,
            ..self
        }
    }

    /// These figures with the remote tier's.
    pub(super) fn with_remote(self, r: super::remote::RemoteFigures) -> Stats {
        Stats {
            remote_uploaded_bytes: r.uploaded_bytes,
            remote_uploaded_files: r.uploaded_files,
            remote_waiting_files: r.waiting_files,
            remote_waiting_bytes: r.waiting_bytes,
            remote_lag: r.lag,
            remote_manifest: r.manifest,
            remote_deleted_objects: r.deleted_objects,
            remote_deleted_bytes: r.deleted_bytes,
            ..self
        }
    }

    /// These figures with the reads of files whose data is in the remote only.
    pub(super) fn with_remote_reads(self, r: &crate::io::remote::RemoteReads) -> Stats {
        Stats {
            remote_gets: r.gets.load(Ordering::Relaxed),
            remote_get_bytes: r.bytes.load(Ordering::Relaxed),
            ..self
        }
    }

    /// These figures with the store's size cap and eviction watermark.
    pub(super) fn with_eviction(self, size_cap: Option<u64>, evicted_through: u64) -> Stats {
        Stats {
            size_cap,
            evicted_through,
            ..self
        }
    }

    /// The share of the gets of a store with a size cap that found a value, since open (`None`
    /// before the first, or without a cap).
    pub fn hit_ratio(&self) -> Option<f64> {
        (self.capped_gets > 0).then(|| self.capped_get_hits as f64 / self.capped_gets as f64)
    }

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
    /// Log segments and blob files made: eviction looks again when it changed.
    files_made: AtomicU64,
    /// Files dropped by eviction, their bytes, and the live values dropped with them.
    evicted_files: AtomicU64,
    evicted_bytes: AtomicU64,
    evicted_values: AtomicU64,
    /// Values given a second chance, and their record bytes.
    second_chances: AtomicU64,
    second_chance_bytes: AtomicU64,
    /// Offers dropped because the writer was behind.
    offers_dropped: AtomicU64,
    /// Offers turned away by the admission policy.
    offers_not_admitted: AtomicU64,
    /// Gets of a store with a size cap, and those that found a value.
    capped_gets: AtomicU64,
    capped_get_hits: AtomicU64,
    /// Record bytes of expired values compaction dropped.
    expired_reclaimed: AtomicU64,
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

    /// A log segment or blob file made.
    pub(super) fn file_made(&self) {
        self.files_made.fetch_add(1, Ordering::Relaxed);
    }

    /// Log segments and blob files made since open.
    pub(super) fn files_made(&self) -> u64 {
        self.files_made.load(Ordering::Relaxed)
    }

    /// What an eviction step dropped.
    pub(super) fn evicted(&self, e: super::compact::Evicted) {
        self.evicted_files.fetch_add(e.files, Ordering::Relaxed);
        self.evicted_bytes.fetch_add(e.bytes, Ordering::Relaxed);
        self.evicted_values.fetch_add(e.values, Ordering::Relaxed);
    }

    /// Values appended again before their file was evicted, and their bytes.
    pub(super) fn second_chances(&self, values: u64, bytes: u64) {
        self.second_chances.fetch_add(values, Ordering::Relaxed);
        self.second_chance_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// An offer dropped: its write would have waited for the disk.
    pub(super) fn offer_dropped(&self) {
        self.offers_dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// An offer turned away by the admission policy.
    pub(super) fn offer_not_admitted(&self) {
        self.offers_not_admitted.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether eviction has dropped a file since open.
    pub(super) fn has_evicted(&self) -> bool {
        self.evicted_files.load(Ordering::Relaxed) > 0
    }

    /// A get of a store with a size cap; `hit`: it found a value.
    pub(super) fn capped_get(&self, hit: bool) {
        self.capped_gets.fetch_add(1, Ordering::Relaxed);
        if hit {
            self.capped_get_hits.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Record bytes of expired values compaction dropped.
    pub(super) fn add_expired_reclaimed(&self, n: u64) {
        self.expired_reclaimed.fetch_add(n, Ordering::Relaxed);
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
    rule: super::segments::CompactRule,
) -> Stats {
    let handles = segments.snapshot();
    let active = log.lock().active();
    let usage = index.usage_all();
    let mut why = DeadBytes::default();
    let (mut disk_bytes, mut preallocated_bytes) = (0, 0);
    let (mut log_segments, mut blob_files) = (0, 0);
    let (mut tombstone_bytes, mut tombstones) = active.as_ref().map_or((0, 0), |a| {
        (a.summary.tombstone_bytes, a.summary.tombstones)
    });
    let (mut remote_only_files, mut remote_only_bytes) = (0, 0);
    for (id, h) in &handles {
        let len = h.file.len().unwrap_or(0);
        disk_bytes += len;
        if let Some(span) = h.file.remote_span() {
            remote_only_files += 1;
            remote_only_bytes += span.end - span.start;
        }
        if let Some(a) = &active
            && a.id == *id
        {
            preallocated_bytes += len.saturating_sub(a.position);
        }
        tombstone_bytes += h.summary.tombstone_bytes;
        tombstones += h.summary.tombstones;
        let live = usage.get(id).copied().unwrap_or_default();
        let is_active = active.as_ref().is_some_and(|a| a.id == *id);
        why.add(h, len, live, active.as_ref().filter(|_| is_active), rule);
        match h.kind {
            SegmentKind::Log => log_segments += 1,
            SegmentKind::Blob => blob_files += 1,
        }
    }
    let live_bytes: u64 = usage.values().map(|u| u.live_bytes).sum();
    let c = counters;
    Stats {
        live_keys: index.len(),
        live_bytes,
        tombstone_bytes,
        tombstones,
        dead_bytes: disk_bytes.saturating_sub(preallocated_bytes + live_bytes + tombstone_bytes),
        compaction_threshold: rule.threshold,
        reclaimable_bytes: why.reclaimable,
        below_threshold_bytes: why.below_threshold,
        active_dead_bytes: why.active,
        blob_overhead_bytes: why.blob_overhead,
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
        size_cap: None,
        evicted_through: 0,
        evicted_files: c.evicted_files.load(Ordering::Relaxed),
        evicted_bytes: c.evicted_bytes.load(Ordering::Relaxed),
        evicted_values: c.evicted_values.load(Ordering::Relaxed),
        second_chances: c.second_chances.load(Ordering::Relaxed),
        second_chance_bytes: c.second_chance_bytes.load(Ordering::Relaxed),
        offers_dropped: c.offers_dropped.load(Ordering::Relaxed),
        offers_not_admitted: c.offers_not_admitted.load(Ordering::Relaxed),
        capped_gets: c.capped_gets.load(Ordering::Relaxed),
        capped_get_hits: c.capped_get_hits.load(Ordering::Relaxed),
        cache_hits: cache.hits,
        cache_misses: cache.misses,
        cache_evictions: cache.evictions,
        cache_bytes: cache.bytes,
        cache_capacity: cache.capacity,
        memory_available: cache.available,
        cache_warming: false,
        cache_warmed_values: 0,
        cache_warmed_bytes: 0,
        cache_warm_read_bytes: 0,
        expired_keys: 0,
        expired_bytes: 0,
        expired_reclaimed_bytes: 0,
        remote_uploaded_bytes: 0,
        remote_uploaded_files: 0,
        remote_waiting_files: 0,
        remote_waiting_bytes: 0,
        remote_lag: None,
        remote_manifest: 0,
        remote_deleted_objects: 0,
        remote_deleted_bytes: 0,
        local_bytes: disk_bytes - remote_only_bytes,
        remote_only_files,
        remote_only_bytes,
        remote_gets: 0,
        remote_get_bytes: 0,
    }
}

/// The dead bytes of the store's files, by why they are still there (see [`Stats::dead_bytes`]).
#[derive(Default)]
struct DeadBytes {
    reclaimable: u64,
    below_threshold: u64,
    active: u64,
    blob_overhead: u64,
}

impl DeadBytes {
    /// Counts the dead bytes of file `h`, `len` bytes long, holding the live records `live`;
    /// `active`: the active segment's view, when `h` is the active segment. By the rules of
    /// `Compactor::choose` and `Compactor::seal_active_if_dead` ([`CompactRule`]): a log segment
    /// is compacted once its dead fraction reaches the threshold and a rewrite would give bytes
    /// back, a blob file removed once its value is dead.
    ///
    /// [`CompactRule`]: super::segments::CompactRule
    fn add(
        &mut self,
        h: &super::segments::SegmentHandle,
        len: u64,
        live: crate::index::SegmentUsage,
        active: Option<&super::append::ActiveView>,
        rule: super::segments::CompactRule,
    ) {
        // The active segment's bytes past its position are zeroes written ahead, not dead.
        let used = active.map_or(len, |a| a.position.min(len));
        let tombstones = active.map_or(h.summary.tombstone_bytes, |a| a.summary.tombstone_bytes);
        let dead = used.saturating_sub(live.live_bytes + tombstones);
        let past_threshold = rule.worth(used, live.live_bytes, tombstones);
        let bucket = match h.kind {
            SegmentKind::Blob if live.live_records == 0 => &mut self.reclaimable,
            SegmentKind::Blob => &mut self.blob_overhead,
            // `compact` seals the active segment first, once it is past the threshold.
            SegmentKind::Log if active.is_some() && past_threshold => &mut self.reclaimable,
            // The active segment, or one a read-only open found without a footer (compaction
            // reads footers; the next writable open seals it).
            SegmentKind::Log if h.sealed_at.is_none() => &mut self.active,
            SegmentKind::Log if past_threshold => &mut self.reclaimable,
            SegmentKind::Log => &mut self.below_threshold,
        };
        *bucket += dead;
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
