//! The store's parts wired together: what a [`Store`](crate::Store) and its background threads
//! share, how they are started at open and stopped at close.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::admission::Doorkeeper;
use super::append::Log;
use super::background::Ticker;
use super::blob::Blobs;
use super::budget;
use super::compact::{self, Compactor};
use super::open;
use super::read::{self, CacheBudget, Look, Reader};
use super::resolve::Resolver;
use super::segments::SegmentTable;
use super::shared::Shared;
use super::stats::Counters;
use super::warm::{WarmFigures, Warmer};
use crate::error::{Error, Result};
use crate::index::{PendingQueue, Seen};
use crate::io::file::IoProfile;
use crate::options::Options;

/// How long the compaction pass at close may take (it stops between records, leaving the
/// segment in hand in place).
const CLOSE_COMPACTION_BUDGET: std::time::Duration = std::time::Duration::from_millis(200);

/// The store's parts, shared with its background threads.
pub(super) struct Inner {
    pub(super) opts: Options,
    /// Directory, I/O profile, index, pending writes, open files and counters.
    pub(super) shared: Shared,
    pub(super) log: Arc<Log>,
    pub(super) blobs: Arc<Blobs>,
    pub(super) reader: Arc<Reader>,
    pub(super) compactor: Compactor,
    pub(super) recovery: open::RecoveryReport,
    /// The flush ticker and the compactor thread, while they run.
    pub(super) background: Mutex<Vec<Ticker>>,
    /// The resolver thread (older versions left by lazy puts), while it runs.
    pub(super) resolver: Mutex<Option<Resolver>>,
    /// The warm-up thread ([`Options::warm_cache`]), while it may run.
    pub(super) warmer: Mutex<Option<Warmer>>,
    /// What the warm-up did.
    pub(super) warmed: Arc<WarmFigures>,
    /// The remote tier ([`Options::remote`]), attached after `start`.
    pub(super) remote: Option<super::remote::RemoteTier>,
    /// Which offers are written ([`Options::admission`]).
    pub(super) admission: Doorkeeper,
}

pub(super) use super::resolve::Presence;

impl Inner {
    /// Recovers the store in `dir` and starts its write path.
    /// `alongside`: a read-only open beside a writer ([`open::Alongside`]).
    pub(super) fn start(
        dir: PathBuf,
        opts: Options,
        profile: IoProfile,
        alongside: Option<open::Alongside>,
    ) -> Result<Inner> {
        let pool = read::new_pool(profile.mem_align);
        let salvage = opts.recovery_mode == crate::options::RecoveryMode::Salvage;
        let mut recovered =
            open::recover(&dir, &profile, &pool, salvage, opts.hash_bits, alongside)?;
        let versions =
            crate::segment::Versions::load(&dir, &profile, salvage, &mut recovered.report.lost);
        let versions = match versions {
            // Beside a writer, which rewrites a slot of VERSIONS at every reservation: read
            // again before calling it damaged (the last attempt does).
            Err(Error::Damaged { .. }) if alongside.is_some_and(|a| !a.last_attempt) => {
                return Err(Error::StoreChanged {
                    path: dir,
                    attempts: 0,
                });
            }
            versions => versions?,
        };
        let remote_reads = Arc::new(crate::io::remote::RemoteReads::default());
        // Files whose data is in the remote only: read through it (store/remote/evict.rs).
        super::remote::open_evicted(
            &profile,
            opts.remote.as_ref(),
            &recovered.catalog,
            &mut recovered.segments,
            &remote_reads,
        )?;
        let shared = Shared {
            dir,
            profile,
            index: Arc::new(recovered.index),
            pending: Arc::new(PendingQueue::default()),
            segments: Arc::new(SegmentTable::new(recovered.segments)),
            counters: Arc::new(Counters::default()),
            catalog: Arc::new(recovered.catalog),
            clock: opts.clock.clone(),
            remote_reads,
        };
        let log = Arc::new(Log::start(
            shared.clone(),
            &opts,
            recovered.max_seq,
            recovered.next_file_id,
            versions,
        )?);
        // The cache's budget: the options' figure, or sized from the memory available, less
        // the index just built (store/budget.rs).
        let budget = match opts.cache_capacity {
            Some(bytes) => CacheBudget {
                capacity: bytes,
                available: None,
            },
            None => {
                let available = budget::system_available();
                let index_bytes = shared.index.memory_bytes();
                CacheBudget {
                    capacity: budget::cache_budget(available, index_bytes, shared.profile.direct),
                    available,
                }
            }
        };
        let reader = Arc::new(Reader::new(&shared, log.clone(), pool, budget));
        let blobs = Arc::new(Blobs::new(shared.clone(), log.clone(), reader.clone()));
        let compactor = Compactor::new(
            shared.clone(),
            log.clone(),
            blobs.clone(),
            reader.clone(),
            &opts,
        );
        let admission = Doorkeeper::new(opts.admission, shared.catalog.evicted_through() > 0);
        Ok(Inner {
            admission,
            opts,
            shared,
            log,
            blobs,
            reader,
            compactor,
            recovery: recovered.report,
            background: Mutex::new(Vec::new()),
            resolver: Mutex::new(None),
            warmer: Mutex::new(None),
            warmed: Arc::new(WarmFigures::default()),
            remote: None,
        })
    }

    /// Starts warming the read cache from the newest segments, as the options say (read-only
    /// stores too: it only reads). Open does not wait for it, nor fail without it: a thread
    /// that cannot be started is logged.
    pub(super) fn start_warm(&self) {
        if !self.opts.warm_cache || self.reader.cache_figures().capacity == 0 {
            return;
        }
        match Warmer::start(
            self.shared.clone(),
            self.reader.clone(),
            self.warmed.clone(),
        ) {
            Ok(w) => *self.warmer.lock().unwrap_or_else(|p| p.into_inner()) = Some(w),
            Err(e) => log::warn!("podstore: the cache is not warmed: {e}"),
        }
    }

    /// Starts the flush ticker and the background compactor, as the options say. They hold the
    /// store weakly: a store dropped meanwhile ends them.
    pub(super) fn start_background(self: &Arc<Inner>) -> Result<()> {
        *self.resolver.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Resolver::start(self.shared.clone(), self.reader.clone())?);
        let mut threads = Vec::new();
        if let Some(interval) = self.opts.flush_interval {
            let inner = Arc::downgrade(self);
            threads.push(Ticker::start("podstore-ticker", interval, move |_| {
                let Some(inner) = inner.upgrade() else {
                    return false;
                };
                if inner.log.has_unflushed() {
                    // A failure poisons the store and is reported to the next writer. Quietly:
                    // no write waits for this sync, and zeroes written ahead of it would only
                    // be written over by the buffered writes that follow.
                    let _ = inner.log.sync_all();
                }
                true
            })?);
        }
        if self.opts.background_compaction {
            let inner = Arc::downgrade(self);
            threads.push(Ticker::start(
                "podstore-compactor",
                compact::CHECK_INTERVAL,
                move |stopped| {
                    let Some(inner) = inner.upgrade() else {
                        return false;
                    };
                    match inner.compactor.compact_in_background(stopped) {
                        Ok(()) => true,
                        // Writes are refused until the store is reopened; so are copies.
                        Err(Error::Poisoned | Error::StorageFull { .. }) => false,
                        Err(e) => {
                            log::warn!("podstore: background compaction failed: {e}");
                            true
                        }
                    }
                },
            )?);
        }
        if self.remote.is_some() {
            let inner = Arc::downgrade(self);
            threads.push(Ticker::start(
                "podstore-remote",
                super::remote::UPLOAD_TICK,
                move |_| inner.upgrade().is_some_and(|inner| inner.remote_tick()),
            )?);
        }
        *self.background.lock().unwrap_or_else(|p| p.into_inner()) = threads;
        Ok(())
    }

    /// Stops the background threads: the compactor (which leaves a compaction it is in the
    /// middle of unfinished, harmlessly) and the flush ticker.
    pub(super) fn stop_background(&self) {
        // The warm-up first: it only reads, and stops after the read in progress.
        let warmer = self.warmer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(w) = warmer {
            w.stop();
        }
        let threads =
            std::mem::take(&mut *self.background.lock().unwrap_or_else(|p| p.into_inner()));
        // The compactor first (started last): it may be copying, and flushes through the log.
        for t in threads.into_iter().rev() {
            t.stop();
        }
        let resolver = self
            .resolver
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(r) = resolver {
            r.stop();
        }
    }

    pub(super) fn shut_down(&self) -> Result<()> {
        self.stop_background();
        // No flush of the remote runs from here on: the writer says it writes no more.
        if let Some(tier) = &self.remote {
            tier.close();
        }
        if self.opts.background_compaction && !self.opts.read_only {
            // The older versions that overwrites left count as live (a blob file holding only
            // one would look live): resolved first, within the same budget as the compaction.
            let deadline = std::time::Instant::now() + CLOSE_COMPACTION_BUDGET;
            super::resolve::settle_until(&self.shared, &self.reader, Some(deadline));
            // Space comes back even in a store closed before its compactor ever ran. A failure
            // is logged, not returned: the close itself (the seal) is what must succeed.
            match self.compactor.compact_at_close(CLOSE_COMPACTION_BUDGET) {
                Ok(_) | Err(Error::Poisoned | Error::StorageFull { .. }) => {}
                Err(e) => log::warn!("podstore: compaction at close failed: {e}"),
            }
        }
        let result = self.log.shut_down();
        let result = result.and(self.blobs.remove_spares());
        if result.is_ok() {
            self.record_hot_set();
        }
        result
    }

    /// Writes the record of the hot set (`store/hotset.rs`) for the warm-up of the next open,
    /// as the options say; a failure is logged, not returned: it is a hint.
    fn record_hot_set(&self) {
        if !self.opts.warm_cache || self.opts.read_only || !self.reader.cache().is_on() {
            return;
        }
        let began = std::time::Instant::now();
        match super::hotset::record(&self.shared, &self.reader, self.opts.size_cap) {
            Ok(r) => log::info!(
                "podstore: recorded the hot set of {}: {} values ({} bytes) in {:.0?}",
                self.shared.dir.display(),
                r.entries,
                r.bytes,
                began.elapsed()
            ),
            Err(e) => log::warn!(
                "podstore: the hot set of {} is not recorded ({e}); the next open warms from the \
                 newest segments only",
                self.shared.dir.display()
            ),
        }
    }

    /// Whether `key` (hashing to `hash`) has a value, as the next write will find it, given
    /// what the caller has `seen` of it (call under the append lock).
    pub(super) fn presence(&self, key: &[u8], hash: u64, seen: &Seen) -> Presence {
        super::resolve::presence(&self.shared, key, hash, seen)
    }

    /// What the index holds for `key` now, for a write of it: its hash and [`Seen`], as far
    /// as `look` asks.
    pub(super) fn seen(&self, key: &[u8], look: Look) -> Result<(u64, Seen)> {
        super::resolve::seen(&self.shared, &self.reader, key, look)
    }

    /// How a put looks at its key: [`super::resolve::put_look`].
    pub(super) fn put_look(&self) -> Look {
        super::resolve::put_look(&self.shared)
    }

    /// Resolves writes queued unresolved: [`super::resolve::settle`].
    pub(super) fn settle(&self, unresolved: &[(u64, &[u8], bool)]) {
        super::resolve::settle(&self.shared, &self.reader, unresolved)
    }

    /// Resolves every run lazy puts left, so that the index holds one entry per key:
    /// [`super::resolve::settle_all`].
    pub(super) fn settle_all(&self) {
        super::resolve::settle_all(&self.shared, &self.reader)
    }
}
