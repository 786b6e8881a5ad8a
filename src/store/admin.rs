//! The operator's side of the public API: checking a store (`verify`), looking inside it
//! (`stats`, `files`, `recovery`, `io_mode`, `path`), giving space back (`compact`, `seal`) and
//! copying it (`checkpoint`). The data API (open, put, get, ...) is in `store/data.rs`.

use std::path::Path;

use super::{
    CheckpointReport, CompactOptions, CompactionReport, RecoveryReport, Stats, Store, checkpoint,
    stats,
};
use crate::error::Result;
use crate::io::file::SegmentFile;
use crate::options::IoMode;
use crate::verify::{self, VerifyReport};
use std::sync::Arc;

impl Store {
    /// Reads every segment file and checks every checksum, and every footer against the
    /// records; returns what is damaged and which live keys cannot be read because of it.
    ///
    /// It streams values a window at a time (never one whole), and decompresses a compressed
    /// value one frame at a time. It first makes every earlier write durable (like
    /// [`Store::flush`]) and then checks what is on disk, up to the last record written before
    /// the call. Reads and writes go on meanwhile; segments and keys written after the call
    /// started may or may not be checked. Older index entries that overwrites left for the
    /// background resolver are resolved first, so that the live figures are exact.
    ///
    /// An I/O error while reading is returned as an error; damage is not an error but the
    /// contents of the [`VerifyReport`]. Docs: docs/reliability.md.
    ///
    /// A store opened [alongside a writer](crate::Options::alongside_writer) checks the files
    /// of its view (the writer's active segment up to where the view ends), not the directory
    /// against the catalog.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// let report = store.verify()?;
    /// assert!(report.is_clean());
    /// # Ok(()) }
    /// ```
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_with_progress(|_, _| {})
    }

    /// [`Store::verify`], calling `progress(bytes_checked, bytes_total)` as it goes (after each
    /// file; once with 0 before the first): for a progress bar.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", vec![1u8; 100_000])?;
    /// let mut seen = Vec::new();
    /// let report = store.verify_with_progress(|done, total| seen.push((done, total)))?;
    /// assert!(report.is_clean());
    /// assert_eq!(seen.last().map(|&(d, t)| d == t), Some(true));
    /// # Ok(()) }
    /// ```
    pub fn verify_with_progress(&self, mut progress: impl FnMut(u64, u64)) -> Result<VerifyReport> {
        let inner = &self.inner;
        // Older versions lazy puts left would count as live: resolved first.
        inner.settle_all();
        let (unsealed, next_file_id) = {
            let app = inner.log.lock();
            let mut unsealed: Vec<_> = app
                .active()
                .map(|a| verify::UnsealedBound {
                    id: a.id,
                    data_end: a.data_end,
                })
                .into_iter()
                .collect();
            // Recovered without a footer (read-only, or the disk was full): such a segment
            // stays unsealed while this store is open (compaction leaves it alone).
            unsealed.extend(
                inner
                    .recovery
                    .recovered
                    .iter()
                    .filter(|r| !r.sealed)
                    .map(|r| verify::UnsealedBound {
                        id: r.segment,
                        data_end: r.data_end,
                    }),
            );
            (unsealed, app.next_file_id())
        };
        // Not `flush`: copies made by compaction reuse old sequence numbers, and must be on disk
        // too before the active segment is read up to `data_end`. A read-only store wrote
        // nothing.
        if !inner.opts.read_only {
            inner.log.sync_all()?;
        }
        let segments: Vec<(u64, Arc<SegmentFile>)> = inner
            .shared
            .segments
            .snapshot()
            .into_iter()
            // Segments created since (a new active one has no footer yet) are not checked.
            .filter(|(id, _)| *id < next_file_id)
            .map(|(id, h)| (id, h.file))
            .collect();
        let mut report = verify::run(
            &segments,
            &unsealed,
            verify::Reading {
                pool: inner.reader.pool(),
                read_align: inner.shared.profile.read_align,
                default_block: inner.shared.profile.block_size,
            },
            super::list::Keys::all_entries_skipping_damage(self)?,
            &mut progress,
        )?;
        // Beside a writer the directory is the writer's to change (files compacted away, new
        // ones): checked against the catalog, it would report them, which is no damage.
        if !inner.opts.alongside_writer {
            report.files = inner.shared.catalog.check_dir()?;
        }
        Ok(report)
    }

    /// The I/O mode in use: [`IoMode::Direct`] or [`IoMode::Buffered`] (what
    /// [`IoMode::Auto`] resolved to).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert_ne!(store.io_mode(), podstore::IoMode::Auto); // resolved at open
    /// # Ok(()) }
    /// ```
    pub fn io_mode(&self) -> IoMode {
        if self.inner.shared.profile.direct {
            IoMode::Direct
        } else {
            IoMode::Buffered
        }
    }

    /// The durability of writes that do not set their own ([`Options::durability`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let opts = podstore::Options::default().durability(podstore::Durability::Buffered);
    /// let store = podstore::Store::open_with(dir.path(), opts)?;
    /// assert_eq!(store.durability(), podstore::Durability::Buffered);
    /// # Ok(()) }
    /// ```
    ///
    /// [`Options::durability`]: crate::Options::durability
    pub fn durability(&self) -> crate::Durability {
        self.inner.opts.durability
    }

    /// What opening the store found: sealed segments, recovered ones and their torn tails.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// // A store that was closed cleanly had nothing to recover.
    /// assert!(store.recovery().recovered.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The store directory.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert_eq!(store.path(), dir.path());
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &Path {
        &self.inner.shared.dir
    }

    /// Keeps the background resolver from removing the older index entries that lazy puts
    /// leave while `on` (`len`, `stats` and compaction still resolve them), so that a test can
    /// look at them. Only with the `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn testing_hold_resolver(&self, on: bool) {
        self.inner.shared.pending.tasks().hold(on);
    }

    /// Entries in the index as they are, older versions that lazy puts left and the resolver
    /// has not removed yet included (`len` and `stats` resolve them first). Only with the
    /// `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn testing_index_entries(&self) -> u64 {
        self.inner.shared.index.len()
    }

    /// Stops the store the way a crash would, for tests: writes already handed to the flush
    /// thread finish, but nothing more is flushed, the buffer being filled is dropped and the
    /// active segment is left unsealed. Durable writes survive it; the next open recovers.
    /// Only with the `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn simulate_crash(mut self) {
        self.closed = true;
        self.inner.stop_background();
        self.inner.log.stop();
    }

    /// Compacts now, unthrottled: removes every blob file whose value is dead, and rewrites
    /// every log segment whose dead fraction is at least
    /// [`Options::compaction_threshold`](crate::Options::compaction_threshold), the active one
    /// included (it is sealed first; the next write starts a new one), so that a store that
    /// never fills a segment gets its space back too. Writes made
    /// before the call are made durable first. Reads and writes go on meanwhile; a background
    /// compaction in progress stops at its next record and leaves the rest to this call.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let opts = podstore::Options::default().segment_size(1 << 20);
    /// let store = podstore::Store::open_with(dir.path(), opts)?;
    /// for i in 0..400u32 {
    ///     store.put(&i.to_be_bytes(), &[7u8; 8 << 10])?;
    /// }
    /// for i in 0..360u32 {
    ///     store.delete(&i.to_be_bytes())?;
    /// }
    /// let before = store.stats().disk_bytes;
    /// let report = store.compact()?;
    /// assert!(report.segments_compacted > 0);
    /// assert!(store.stats().disk_bytes < before);
    /// assert_eq!(store.len(), 40);
    /// # Ok(()) }
    /// ```
    pub fn compact(&self) -> Result<CompactionReport> {
        self.compact_with(CompactOptions::new())
    }

    /// [`Store::compact`], with what `opts` sets in place of the store's options: a dead
    /// fraction [`CompactOptions::threshold`] for this call only, to give back the space of a
    /// segment the store's threshold leaves (see [`Stats::below_threshold_bytes`]).
    ///
    /// Fails with [`Error::InvalidOptions`](crate::Error::InvalidOptions) for a threshold that
    /// is not above 0.0 and at most 1.0, and [`Error::ReadOnly`](crate::Error::ReadOnly) on a
    /// read-only store.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use podstore::{CompactOptions, Durability, Options, Store};
    /// let opts = Options::default().durability(Durability::Buffered); // records packed
    /// let store = Store::open_with(dir.path(), opts.background_compaction(false))?;
    /// for i in 0..100u32 {
    ///     store.put(i.to_be_bytes(), [7u8; 4000])?;
    /// }
    /// for i in 0..20u32 {
    ///     store.delete(i.to_be_bytes())?; // about 20 % of the segment dead
    /// }
    /// store.seal()?;
    /// let stats = store.stats();
    /// assert_eq!(stats.reclaimable_bytes, 0); // below the default threshold, 0.5
    /// assert!(stats.below_threshold_bytes > 0);
    /// assert_eq!(store.compact()?.segments_compacted, 0);
    /// let report = store.compact_with(CompactOptions::new().threshold(0.1))?;
    /// assert_eq!(report.segments_compacted, 1);
    /// assert!(store.compact_with(CompactOptions::new().threshold(0.0)).is_err());
    /// # Ok(()) }
    /// ```
    pub fn compact_with(&self, opts: CompactOptions) -> Result<CompactionReport> {
        opts.validate()?;
        self.writable()?;
        // The older versions that lazy overwrites left count as live until they are resolved
        // (a blob file holding only one would look live): resolved first, as at close, so that
        // the space an overwrite freed comes back now, not after the resolver's next pass.
        self.inner.settle_all();
        self.inner.compactor.compact_now(opts.threshold)
    }

    /// Writes a consistent, openable copy of the store to `dest` (a path that must not exist,
    /// in a directory that must: a missing parent is an [`Error::Io`](crate::Error::Io) of kind
    /// `NotFound`, never created) while the store stays open and writes go on: a backup of a
    /// live store.
    ///
    /// **Consistency point**: every write acknowledged before the call is in the copy (it is
    /// made durable first, whatever its durability); a write made during the call is in it
    /// whole, or not at all. The copy opens like any store (`Store::open(dest)`), and recovers
    /// its last segment like one left by a crash.
    ///
    /// **Cost**: sealed files never change and are hard-linked into `dest` (no bytes copied,
    /// and they share disk space with the store until compaction removes them from it); where
    /// `dest` is on another file system they are copied. The active log segment is copied up
    /// to the end of its records (at most [`Options::segment_size`](crate::Options::segment_size)). Compaction waits while
    /// the checkpoint runs; reads and writes do not.
    ///
    /// **Crash safety**: the copy is built in `<dest>.podstore-partial` beside `dest`, every
    /// file synced, its catalog written last, and then renamed to `dest`: `dest` never holds an
    /// incomplete checkpoint. An interrupted one leaves `<dest>.podstore-partial`, which the
    /// next checkpoint to `dest` refuses (remove it).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// # let backups = tempfile::tempdir()?;
    /// let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// let dest = backups.path().join("monday");
    /// store.checkpoint(&dest)?;
    /// store.put("k", "changed")?;
    /// let copy = podstore::Store::open(&dest)?;
    /// assert_eq!(copy.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok(()) }
    /// ```
    pub fn checkpoint(&self, dest: impl AsRef<Path>) -> Result<CheckpointReport> {
        checkpoint::run(&self.inner, dest.as_ref())
    }

    /// Seals the active log segment now: appends its footer and makes it durable. The next
    /// write starts a new segment. Returns whether there was an active segment to seal.
    ///
    /// Segments are sealed by themselves when they reach [`Options::segment_size`](crate::Options::segment_size) and at close;
    /// only a sealed segment is compacted by the background compactor. A small store that never
    /// fills a segment can seal one to let compaction take it (though [`Store::compact`] seals
    /// the active segment itself when enough of it is dead), or before a backup, so that every
    /// file holds a footer. Each seal costs a footer (a block or more) and a sync.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// assert!(store.seal()?);
    /// assert!(!store.seal()?); // nothing written since: nothing to seal
    /// store.put("k2", "v2")?; // a new segment
    /// # Ok(()) }
    /// ```
    pub fn seal(&self) -> Result<bool> {
        self.writable()?;
        let log = &self.inner.log;
        let sealed = log.lock().seal_active()?;
        if sealed {
            log.sync_all()?;
        }
        Ok(sealed)
    }

    /// Every segment and blob file of the store, from its header and footer, with the bytes of
    /// live values the store reads in it and the rest (dead or overhead): what
    /// `podstore inspect` shows. Reads each file's header and footer.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// store.seal()?;
    /// let files = store.files()?;
    /// assert_eq!(files.len(), 1);
    /// assert!(files[0].sealed);
    /// assert!(files[0].live_bytes.unwrap() > 0);
    /// # Ok(()) }
    /// ```
    pub fn files(&self) -> Result<Vec<crate::inspect::FileInfo>> {
        let inner = &self.inner;
        // Older versions lazy puts left would count as live: resolved first.
        inner.settle_all();
        stats::files(
            &inner.shared.segments,
            &inner.log,
            &inner.shared.index,
            &inner.shared.profile,
            inner.reader.pool(),
        )
    }

    /// What the store holds, takes and has written. Takes a lock of the index per shard and
    /// looks up the length of every file.
    ///
    /// Counts are exact: an overwrite that did not read to find its key's old entry (see
    /// docs/design.md, "The index") leaves that entry for a background thread to remove; the
    /// entries still waiting for it are resolved first, in the calling thread, which reads
    /// their records (none, when the resolver has caught up).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// let stats = store.stats();
    /// assert_eq!(stats.live_keys, 1);
    /// assert!(stats.disk_bytes >= 4096); // one durable put: at least a block
    /// # Ok(()) }
    /// ```
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        // Older versions lazy puts left would count as live keys and bytes: resolved first.
        inner.settle_all();
        stats::collect(
            &inner.shared.segments,
            &inner.log,
            &inner.shared.index,
            &inner.shared.counters,
            inner.reader.cache_figures(),
            self.io_mode(),
            super::segments::CompactRule {
                threshold: inner.compactor.threshold(),
                block: inner.shared.profile.block_size as u64,
            },
        )
        .with_warm_up(inner.warmed.get())
        .with_remote_reads(&inner.shared.remote_reads)
        .with_eviction(
            inner.opts.size_cap,
            inner.shared.catalog.evicted_through(),
        )
        .with_expiry(
            inner.shared.index.expired(inner.shared.now_ms(), None),
            &inner.shared.counters,
        )
        .with_remote(inner.remote.as_ref().map_or_else(Default::default, |r| {
            r.figures(&super::remote::sealed_lengths(inner))
        }))
    }
}
