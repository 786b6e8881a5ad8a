//! Compaction: giving back the space of overwritten and deleted values.
//!
//! A sealed log segment whose dead fraction reaches [`Options::compaction_threshold`] has its
//! live records copied forward into the active segment (through the same aligned writer as every
//! other write, each copy keeping its sequence number), the index switched over to the copies
//! once they are durable, and the file removed. A blob file whose value is dead is removed. The
//! order of the steps, and why a crash between any two of them loses nothing and resurrects
//! nothing, is in docs/design.md ("Compaction").

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::append::Log;
use super::blob::Blobs;
use super::compress::StoredValue;
use super::read::{Located, Reader};
use super::resolve;
use super::segments::{CompactRule, SegmentHandle};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::format::footer::FooterEntry;
use crate::format::record::RecordKind;
use crate::index::{IndexEntry, Naming, Removal};
use crate::segment::{self, SegmentKind};

mod evict;
mod second;

pub(super) use evict::files_bytes;

pub(super) use evict::Evicted;

/// How often the background compactor looks for work.
pub(super) const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// State kept between compactions (behind [`Compactor::state`], which also makes them run one
/// at a time).
#[derive(Debug, Default)]
pub(super) struct CompactorState {
    /// Segments whose compaction stopped at a live value that failed verification. The
    /// background compactor does not retry them; [`Store::compact`](crate::Store::compact)
    /// does.
    damaged: HashSet<u64>,
}

/// Compaction and eviction held off ([`Compactor::pause`]) while this lives.
pub(super) struct Paused<'a> {
    _state: std::sync::MutexGuard<'a, CompactorState>,
    _drops: std::sync::MutexGuard<'a, ()>,
}

/// What one compaction did. Returned by [`Store::compact`](crate::Store::compact).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CompactionReport {
    /// Log segments whose live records were copied forward and which were removed.
    pub segments_compacted: usize,
    /// Blob files removed because their value had been overwritten or deleted.
    pub blob_files_removed: usize,
    /// Live values copied.
    pub records_copied: u64,
    /// Tombstones copied (an older segment may still hold a value they hide).
    pub tombstones_copied: u64,
    /// Tombstones dropped (nothing older than them is left for them to hide).
    pub tombstones_dropped: u64,
    /// Expired values dropped instead of copied (each leaves a tombstone if it may still hide
    /// an older record of its key, counted in `tombstones_copied`).
    pub expired_dropped: u64,
    /// Record bytes of those expired values.
    pub expired_bytes_dropped: u64,
    /// Record bytes written by the copies.
    pub bytes_copied: u64,
    /// Bytes of the files removed.
    pub bytes_freed: u64,
    /// Segments left in place because a live value in them failed verification: reads of that
    /// value return [`Error::Corruption`] ([`Error::RemoteCorruption`] for a segment whose data
    /// is in the remote only, damaged there); the rest of the segment stays readable.
    pub damaged_segments: Vec<u64>,
}

/// How [`Store::compact_with`](crate::Store::compact_with) compacts, where it differs from the
/// store's [`Options`](crate::Options). Built like them:
/// `CompactOptions::new().threshold(0.1)`; what is not set is the store's own.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// let report = store.compact_with(podstore::CompactOptions::new().threshold(0.1))?;
/// assert_eq!(report.segments_compacted, 0); // nothing dead yet
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use = "options do nothing until passed to Store::compact_with"]
pub struct CompactOptions {
    pub(crate) threshold: Option<f64>,
}

impl CompactOptions {
    /// The store's own settings
    /// ([`Options::compaction_threshold`](crate::Options::compaction_threshold)).
    pub fn new() -> CompactOptions {
        CompactOptions::default()
    }

    /// Rewrites the log segments whose dead fraction is at least `fraction` (above 0.0, at most
    /// 1.0), for this call only, instead of the store's
    /// [`Options::compaction_threshold`](crate::Options::compaction_threshold). A low threshold
    /// gives back more space and copies more live records: a segment 10 % dead is rewritten
    /// whole to give back its 10 %.
    /// [`Stats::below_threshold_bytes`](crate::Stats::below_threshold_bytes) says how much a
    /// lower threshold would give back.
    pub fn threshold(mut self, fraction: f64) -> CompactOptions {
        self.threshold = Some(fraction);
        self
    }

    /// [`Error::InvalidOptions`] for a threshold out of its range.
    pub(super) fn validate(&self) -> Result<()> {
        match self.threshold {
            Some(t) if !(t > 0.0 && t <= 1.0) => Err(Error::InvalidOptions(
                "compaction threshold must be above 0.0 and at most 1.0",
            )),
            _ => Ok(()),
        }
    }
}

/// Compaction: one at a time, on demand or in the background at a bounded rate.
pub(super) struct Compactor {
    shared: Shared,
    /// Copies are appended to the log, like every other write.
    log: Arc<Log>,
    /// Failed blob puts hold tombstones back (their files may linger).
    blobs: Arc<Blobs>,
    /// Live values are read, verified, through the read path.
    reader: Arc<Reader>,
    threshold: f64,
    rate: Option<u64>,
    state: Mutex<CompactorState>,
    /// Calls waiting for `state` ([`Compactor::compact_now`], [`Compactor::pause`]): the
    /// background compactor yields.
    waiting: AtomicUsize,
    /// Held by an eviction step, and by a compaction while it switches the index to its copies
    /// and removes a file: the two change the set of files, so they take turns there, while a
    /// compaction's copying (most of its time) runs beside eviction. Taken after `state`, never
    /// before it. Why a compaction and a step may interleave otherwise: docs/design.md,
    /// "Eviction", "Compaction at the same time".
    drops: Mutex<()>,
    /// The size cap ([`Options::size_cap`](crate::Options::size_cap)); eviction keeps to it.
    cap: Option<u64>,
    /// The log's segment size: the margin eviction keeps below the cap.
    segment_size: u64,
    /// The count of files made when eviction last looked (`Counters::files_made`).
    evict_seen: AtomicU64,
    /// Under a cap, the bytes the compaction copying now may still write (its file's length;
    /// 0 when none copies): eviction keeps that much more room (compact/evict.rs).
    copying: AtomicU64,
    /// The values read since written, with a cap and second chances on
    /// ([`Options::second_chance`](crate::Options::second_chance)).
    read_marks: Option<second::ReadMarks>,
    /// The most a step's second chances append, as a fraction of the bytes it drops
    /// ([`Options::second_chance_budget`](crate::Options::second_chance_budget)).
    chance_budget: f64,
}

impl Compactor {
    /// A compactor that rewrites log segments whose dead fraction reaches the options'
    /// threshold, in the background at their rate at most, and keeps the store within their
    /// size cap.
    pub(super) fn new(
        shared: Shared,
        log: Arc<Log>,
        blobs: Arc<Blobs>,
        reader: Arc<Reader>,
        opts: &crate::options::Options,
    ) -> Compactor {
        Compactor {
            shared,
            log,
            blobs,
            reader,
            threshold: opts.compaction_threshold,
            rate: opts.compaction_rate,
            state: Mutex::new(CompactorState::default()),
            waiting: AtomicUsize::new(0),
            drops: Mutex::new(()),
            cap: opts.size_cap,
            segment_size: opts.segment_size,
            evict_seen: AtomicU64::new(0),
            copying: AtomicU64::new(0),
            read_marks: (opts.size_cap.is_some() && opts.second_chance)
                .then(second::ReadMarks::default),
            chance_budget: opts.second_chance_budget,
        }
    }

    /// Holds compaction and eviction off (no record moved, no file removed) until the guard is
    /// dropped; a background compaction in progress yields first.
    pub(super) fn pause(&self) -> Paused<'_> {
        let state = self.take_state();
        let drops = self.drops.lock().unwrap_or_else(|p| p.into_inner());
        Paused {
            _state: state,
            _drops: drops,
        }
    }

    /// The compactor's state, with a background compaction in progress yielding to the caller.
    fn take_state(&self) -> std::sync::MutexGuard<'_, CompactorState> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        state
    }

    /// The turn to change the set of files (see [`Compactor::drops`]).
    fn take_drops(&self) -> std::sync::MutexGuard<'_, ()> {
        self.drops.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Compacts now, unthrottled, retrying segments found damaged before: the log segments
    /// whose dead fraction reaches `threshold` (the store's own when `None`).
    pub(super) fn compact_now(&self, threshold: Option<f64>) -> Result<CompactionReport> {
        let threshold = threshold.unwrap_or(self.threshold);
        // A throttled background compaction yields (between records) rather than make this
        // call wait for it at its rate.
        let mut state = self.take_state();
        self.seal_active_if_dead(threshold)?;
        self.log.record_seals()?;
        self.compact(&mut state, threshold, None, &|| false, true, false)
    }

    /// The dead fraction at which a log segment is compacted, unless a call says otherwise.
    pub(super) fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The pass at close, bounded by `budget`: dead blob files first (they only need an unlink
    /// each), then segments past the threshold, unthrottled, until the budget is spent (a
    /// segment in hand is left in place, as when the store stops a background compaction). So
    /// that a store opened and closed faster than the background compactor ticks still gives
    /// space back.
    pub(super) fn compact_at_close(&self, budget: std::time::Duration) -> Result<CompactionReport> {
        let deadline = Instant::now() + budget;
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.compact(
            &mut state,
            self.threshold,
            None,
            &|| Instant::now() >= deadline,
            false,
            true,
        )
    }

    /// Seals the active log segment if its dead fraction is past the threshold, so that the
    /// compaction that follows can take it: a small store may never fill a segment. (Only for
    /// [`Compactor::compact_now`]: the background compactor leaves the active segment alone, so
    /// that it never seals one early over and over.)
    fn seal_active_if_dead(&self, threshold: f64) -> Result<()> {
        // Every write applied first: the index's live bytes are then final for what was written.
        self.log.sync_all()?;
        let mut app = self.log.lock();
        let Some(active) = app.active() else {
            return Ok(());
        };
        let usage = self.shared.index.usage(active.id);
        let rule = CompactRule {
            threshold,
            block: self.shared.profile.block_size as u64,
        };
        if rule.worth(
            active.position,
            usage.live_bytes,
            active.summary.tombstone_bytes,
        ) {
            app.seal_active()?;
        }
        Ok(())
    }

    /// One background pass: compacts if there is anything to do (without syncing otherwise),
    /// unless [`Compactor::compact_now`] is running or waiting.
    pub(super) fn compact_in_background(&self, stop: &dyn Fn() -> bool) -> Result<()> {
        // Seals become durable between ticks: recorded here, in the background.
        self.log.record_seals()?;
        let Ok(mut state) = self.state.try_lock() else {
            return Ok(());
        };
        self.evict_in_background()?;
        // Yields to a caller that needs the compactor's state; eviction steps do not need it
        // (they take turns with this compaction only where files change).
        let stop = || stop() || self.waiting.load(Ordering::Relaxed) > 0;
        let (dead_blobs, victims) = self.choose(&state, self.threshold, false)?;
        if dead_blobs.is_empty() && victims.is_empty() {
            return Ok(());
        }
        self.compact(&mut state, self.threshold, self.rate, &stop, false, false)
            .map(|_| ())
    }

    /// One compaction: the log segments past `threshold` (all of them, or without
    /// `retry_damaged` only those not known to be damaged), and the dead blob files (after them,
    /// or with `dead_blobs_first` before them). `rate` bounds the bytes
    /// copied per second; `stop` is asked between records and ends the compaction early
    /// (leaving the segment in hand in place).
    fn compact(
        &self,
        state: &mut CompactorState,
        threshold: f64,
        rate: Option<u64>,
        stop: &dyn Fn() -> bool,
        retry_damaged: bool,
        dead_blobs_first: bool,
    ) -> Result<CompactionReport> {
        if let Some(e) = self.log.failure() {
            return Err(e);
        }
        // Every write made so far durable and applied: its seal, and the index updates that make
        // records dead, are settled before anything is chosen.
        self.log.sync_all()?;
        let (dead_blobs, victims) = self.choose(state, threshold, retry_damaged)?;
        let mut report = CompactionReport::default();
        // Dead blob files need one unlink each: first, when time is short (the pass at close).
        let mut dead_blobs = Some(dead_blobs);
        if dead_blobs_first {
            self.remove_dead_blobs(dead_blobs.take().unwrap_or_default(), stop, &mut report)?;
        }
        let started = Instant::now();
        for (id, handle) in victims {
            if stop() {
                return Ok(report);
            }
            // Under a size cap, its copies (never more than its file: fewer headers' padding,
            // no dead records) must fit before it goes: eviction makes room for them before
            // they are written and keeps it while they are (docs/design.md, "Eviction").
            let copies = handle.file.len()?;
            self.copying.store(copies, Ordering::Release);
            let room = self.room_for_copies(copies);
            if !matches!(room, Ok(true)) {
                // (Also on an error: the room kept must not outlive the attempt.)
                self.copying.store(0, Ordering::Release);
                room?;
                continue;
            }
            let compacted = self.compact_segment(id, &handle, rate, started, stop, &mut report);
            self.copying.store(0, Ordering::Release);
            match compacted {
                Ok(()) => {}
                Err(Error::Corruption { segment, .. }) if segment == id => {
                    log::warn!(
                        "podstore: segment {id} not compacted: a live value in it is damaged"
                    );
                    state.damaged.insert(id);
                    report.damaged_segments.push(id);
                }
                // Damage in its object, for a remote-only segment (the read path names the
                // object, not the file: `Located::file_error`).
                Err(Error::RemoteCorruption { ref object, .. })
                    if handle.file.remote_object() == Some(object.as_str()) =>
                {
                    log::warn!(
                        "podstore: segment {id} not compacted: a live value in its remote \
                         object {object} is damaged"
                    );
                    state.damaged.insert(id);
                    report.damaged_segments.push(id);
                }
                // The remote failing (after its retries) while live records of a remote-only
                // segment were read: nothing was switched or removed; the segment stays, for a
                // later compaction. The others go on.
                Err(e @ Error::Remote { .. }) if handle.file.is_remote() => {
                    log::warn!("podstore: segment {id} not compacted: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        if let Some(dead_blobs) = dead_blobs {
            self.remove_dead_blobs(dead_blobs, &|| false, &mut report)?;
        }
        Ok(report)
    }

    /// Removes dead blob files (until `stop`).
    fn remove_dead_blobs(
        &self,
        dead_blobs: Vec<(u64, SegmentHandle)>,
        stop: &dyn Fn() -> bool,
        report: &mut CompactionReport,
    ) -> Result<()> {
        if !dead_blobs.is_empty() {
            // A blob's value is dead once a newer write of its key is applied; that write may
            // have been buffered after the sync above. Make it durable before the blob goes.
            self.log.sync_all()?;
            for (id, handle) in dead_blobs {
                if stop() {
                    break;
                }
                let _turn = self.take_drops();
                if self.shared.segments.file(id).is_none() {
                    continue; // evicted meanwhile
                }
                let len = handle.file.len()?;
                failpoint::hit("compact:blob-before-remove");
                self.remove_file(id, &handle)?;
                failpoint::hit("compact:blob-removed");
                report.blob_files_removed += 1;
                report.bytes_freed += len;
            }
        }
        Ok(())
    }

    /// The dead blob files and the log segments whose dead fraction reaches `threshold`, most
    /// dead first.
    #[allow(clippy::type_complexity)]
    fn choose(
        &self,
        state: &CompactorState,
        threshold: f64,
        retry_damaged: bool,
    ) -> Result<(Vec<(u64, SegmentHandle)>, Vec<(u64, SegmentHandle)>)> {
        let p = &self.shared;
        let syncs_done = self.log.progress().lock().syncs_done;
        let handles = p.segments.sealed_by(syncs_done);
        let mut dead_blobs = Vec::new();
        let mut victims = Vec::new();
        let rule = CompactRule {
            threshold,
            block: p.profile.block_size as u64,
        };
        // A queued write (its index update not applied yet) may point into a file: leave it for
        // next time. Asked before the index, so that an update applied in between is seen there.
        let referenced = p.pending.referenced_segments();
        let now = p.now_ms();
        for (id, h) in handles {
            if (!retry_damaged && state.damaged.contains(&id)) || referenced.contains(&id) {
                continue;
            }
            let usage = p.index.usage(id);
            // A log segment whose data is in the remote only is compacted like any: its footer
            // is local, and each live record is read by one ranged GET (its handle is the
            // remote one). A live blob file is never copied, and one whose values all expired
            // is dropped only when local (docs/design-remote.md, "Compaction of remote-only
            // files").
            if h.file.is_remote() && h.kind == SegmentKind::Blob && usage.live_records > 0 {
                continue;
            }
            let len = h.file.len()?;
            match h.kind {
                SegmentKind::Blob if usage.live_records == 0 => dead_blobs.push((id, h)),
                SegmentKind::Blob
                    if p.index.expired(now, Some(id)).1 == usage.live_records
                        && self.drop_expired_blob(id, &h, now) =>
                {
                    dead_blobs.push((id, h))
                }
                SegmentKind::Blob => {}
                SegmentKind::Log => {
                    let tombstones = h.summary.tombstone_bytes;
                    // Expired values are dead to compaction: it drops them.
                    let (expired, _) = p.index.expired(now, Some(id));
                    let live = usage.live_bytes.saturating_sub(expired);
                    if rule.worth(len, live, tombstones) {
                        let dead = len.saturating_sub(live + tombstones);
                        victims.push((dead as f64 / len as f64, id, h));
                    }
                }
            }
        }
        victims.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok((
            dead_blobs,
            victims.into_iter().map(|(_, id, h)| (id, h)).collect(),
        ))
    }

    /// Copies the live records and the still needed tombstones of sealed log segment `id`
    /// forward, switches the index over once the copies are durable, and removes the file.
    fn compact_segment(
        &self,
        id: u64,
        handle: &SegmentHandle,
        rate: Option<u64>,
        started: Instant,
        stop: &dyn Fn() -> bool,
        report: &mut CompactionReport,
    ) -> Result<()> {
        let p = &self.shared;
        if p.segments.file(id).is_none() {
            return Ok(()); // evicted since it was chosen
        }
        let len = handle.file.len()?;
        let mut entries =
            segment::read_sealed_entries(&handle.file, id, len, &p.profile, self.reader.pool())?;
        // A footer lists keys in key order: copy in record order, so that the segment is read
        // sequentially.
        entries.sort_unstable_by_key(|e| e.offset);
        // A tombstone older than every put in every other file (and every write still on its
        // way) hides nothing that can come back: it is dropped. Copies made below keep their
        // sequence numbers, so they never make this unsafe.
        let oldest_put_elsewhere = self.oldest_put_except(id);
        let mut moved: Vec<(Vec<u8>, IndexEntry, IndexEntry)> = Vec::new();
        let (mut copied, mut tombstones_copied, mut tombstones_dropped) = (0u64, 0u64, 0u64);
        let (mut expired_dropped, mut expired_bytes) = (0u64, 0u64);
        let now = p.now_ms();
        let mut value = Vec::new();
        for e in &entries {
            if stop() {
                return Ok(());
            }
            let written = match e.kind {
                RecordKind::Put => {
                    let Some(old) =
                        (e.kind == RecordKind::Put).then(|| IndexEntry::of_footer_entry(id, e))
                    else {
                        continue;
                    };
                    let hash = p.index.hash(&e.key);
                    let mut naming = p.index.names(hash, id, e.offset);
                    if naming == Naming::Behind {
                        // Maybe an older version a lazy put left: resolve the run now (this
                        // reads records, as compaction does anyway) rather than copy it. If
                        // it cannot be resolved now, the record is copied: wasteful, not wrong.
                        resolve::resolve_key(p, &self.reader, hash, &e.key, None);
                        naming = p.index.names(hash, id, e.offset);
                    }
                    if naming == Naming::No {
                        continue; // overwritten or deleted: dead
                    }
                    if old.expired(|| now) {
                        // Expired: absent to every read already, so not copied. But like a
                        // tombstone it still hides its key's older records elsewhere: while one
                        // may be left (the tombstone rule), a tombstone of the same number is
                        // written in its place, before the entry leaves the index (so that an
                        // entry gone always has something on disk that hides what it hid).
                        if e.seq >= oldest_put_elsewhere {
                            let (_, n) = self
                                .append_copy(&as_tombstone(e), None)?
                                .expect("a tombstone");
                            tombstones_copied += 1;
                            report.bytes_copied += n;
                            p.counters.add_compaction_bytes(n);
                        }
                        if p.pending.remove_if_idle(&e.key, hash, &old, &p.index)
                            == Removal::Removed
                        {
                            expired_dropped += 1;
                            expired_bytes += e.record_len();
                            continue;
                        }
                        // A write of the key is queued, or the entry may hide older versions:
                        // copied as it is (it goes on hiding them), like any live value.
                    }
                    value.resize(old.stored_len as usize, 0);
                    let found = Located::new(old, e.seq, handle.file.clone());
                    self.reader.read_stored(&found, &mut value)?;
                    let Some((new, n)) = self.append_copy(e, Some((&old, &value)))? else {
                        continue;
                    };
                    moved.push((e.key.clone(), old, new));
                    copied += 1;
                    n
                }
                RecordKind::Tombstone if e.seq < oldest_put_elsewhere => {
                    tombstones_dropped += 1;
                    continue;
                }
                RecordKind::Tombstone => {
                    let Some((_, n)) = self.append_copy(e, None)? else {
                        continue;
                    };
                    tombstones_copied += 1;
                    n
                }
            };
            report.bytes_copied += written;
            p.counters.add_compaction_bytes(written);
            throttle(rate, report.bytes_copied, started, stop);
        }
        failpoint::hit("compact:copied");
        // The copies, and every write that made a record of this segment dead, are made durable
        // before the index points at the copies and before the file goes.
        self.log.sync_all()?;
        failpoint::hit("compact:synced");
        // An eviction step may have run while the records were copied: it may have forgotten
        // originals (at or below its watermark), dropped this file, or dropped the file the
        // copies went to. Switching and removing take turns with the steps, and look first.
        let _turn = self.take_drops();
        if p.segments.file(id).is_none() {
            // Evicted whole meanwhile: its entries are gone, and so the copies are dead.
            return Ok(());
        }
        for (key, old, new) in &moved {
            if p.segments.file(new.segment).is_none() {
                // The copy's file was dropped: its original was then at or below that step's
                // watermark, forgotten by it (or its key has a queued write, which replaces it).
                continue;
            }
            // A key written meanwhile keeps its newer value; the copy is dead on arrival.
            let hash = p.index.hash(key);
            p.pending.replace_if_idle(key, hash, old, *new, &p.index);
        }
        failpoint::hit("compact:switched");
        if p.pending.references(id) || p.index.usage(id).live_records > 0 {
            // Not expected: every live entry was copied and switched. Keep the file.
            log::warn!("podstore: segment {id} still has live values after compaction; kept");
            return Ok(());
        }
        self.remove_file(id, handle)?;
        failpoint::hit("compact:removed");
        report.segments_compacted += 1;
        report.records_copied += copied;
        report.tombstones_copied += tombstones_copied;
        report.tombstones_dropped += tombstones_dropped;
        report.expired_dropped += expired_dropped;
        report.expired_bytes_dropped += expired_bytes;
        p.counters.add_expired_reclaimed(expired_bytes);
        report.bytes_freed += len;
        p.counters.segment_compacted(tombstones_dropped);
        Ok(())
    }

    /// Takes the expired value of blob file `id` out of the index (leaving a tombstone of its
    /// number in the log if it may still hide an older record of its key), so that the file is
    /// dead and goes like any dead blob (after a sync of the log, which makes the tombstone
    /// durable first). False, and nothing done, if the value is not its key's expired live
    /// value, a write of its key is queued, or the file's footer cannot be read.
    fn drop_expired_blob(&self, id: u64, h: &SegmentHandle, now: u64) -> bool {
        let p = &self.shared;
        let entries = h.file.len().and_then(|len| {
            segment::read_sealed_entries(&h.file, id, len, &p.profile, self.reader.pool())
        });
        let Some(e) = entries
            .ok()
            .and_then(|v| v.into_iter().find(|e| e.kind == RecordKind::Put))
        else {
            return false;
        };
        let old = IndexEntry::of_footer_entry(id, &e);
        let hash = p.index.hash(&e.key);
        if !old.expired(|| now) || p.index.names(hash, id, e.offset) != Naming::Live {
            return false;
        }
        // The tombstone first, then the entry out of the index (see `compact_segment`).
        if e.seq >= self.oldest_put_except(id) {
            match self.append_copy(&as_tombstone(&e), None) {
                Ok(Some((_, n))) => p.counters.add_compaction_bytes(n),
                Ok(None) => {}
                Err(err) => {
                    log::warn!("podstore: tombstone for expired blob {id}: {err}; file kept");
                    return false;
                }
            }
        }
        if p.pending.remove_if_idle(&e.key, hash, &old, &p.index) != Removal::Removed {
            return false;
        }
        p.counters.add_expired_reclaimed(e.record_len());
        true
    }

    /// Appends a copy of the record `e` (with its value `old`, read and verified; `None` for a
    /// tombstone) with its own sequence number. Returns the copy's index entry and length, or
    /// `None` when the value was overwritten or deleted since it was read.
    fn append_copy(
        &self,
        e: &FooterEntry,
        value: Option<(&IndexEntry, &[u8])>,
    ) -> Result<Option<(IndexEntry, u64)>> {
        let p = &self.shared;
        let mut app = self.log.lock();
        if let Some((old, _)) = value
            && !p
                .index
                .contains(p.index.hash(&e.key), old.segment, old.offset)
        {
            return Ok(None);
        }
        let stored = value.map(|(old, bytes)| StoredValue {
            bytes: Cow::Borrowed(bytes),
            value_len: old.value_len,
            compressed: old.is_compressed(),
            expires_at: old.expires_at,
        });
        let len = e.record_len();
        let new = app.append_copy(&e.key, stored.as_ref(), e.seq, len)?;
        Ok(Some((new, len)))
    }

    /// The smallest sequence number of a put in any file but `except`, of a write not yet
    /// applied, or of a blob put that failed (its file may linger).
    fn oldest_put_except(&self, except: u64) -> u64 {
        let p = &self.shared;
        // Under the append lock, so that no segment is sealed between the two looks.
        let app = self.log.lock();
        let active = app.active().map_or(u64::MAX, |a| a.summary.min_put_seq);
        let files = p.segments.min_put_seq_except(except);
        drop(app);
        let pending = p.pending.min_seq().unwrap_or(u64::MAX);
        active
            .min(files)
            .min(pending)
            .min(self.blobs.oldest_abandoned())
    }

    /// Removes file `id` durably (unlink, then directory fsync), then forgets it. Readers that
    /// located a value in it before keep reading through their open handle.
    fn remove_file(&self, id: u64, handle: &SegmentHandle) -> Result<()> {
        let p = &self.shared;
        // Forgotten only once the removal is durable: until then the file still counts for the
        // tombstone rule (`oldest_put_except`), since a crash could bring it back. The removal
        // is recorded in the catalog before the unlink (open removes a file whose removal it
        // finds recorded, and refuses a store missing one whose removal it does not).
        p.catalog.remove(&[(id, handle.kind)], true)?;
        p.segments.remove(id);
        p.counters.file_removed();
        Ok(())
    }
}

/// The tombstone that stands in for the expired put `e` when compaction drops it: the same key
/// and sequence number, so that it hides exactly what the put hid (and, should the put's file
/// survive a crash beside it, the two tie on the number and either says the key has no value).
fn as_tombstone(e: &FooterEntry) -> FooterEntry {
    FooterEntry {
        kind: RecordKind::Tombstone,
        flags: 0,
        stored_len: 0,
        value_len: 0,
        expires_at: None,
        ..e.clone()
    }
}

/// Sleeps as long as needed for `copied` bytes since `started` to stay within `rate` bytes per
/// second, waking early when `stop` says so.
fn throttle(rate: Option<u64>, copied: u64, started: Instant, stop: &dyn Fn() -> bool) {
    let Some(rate) = rate else { return };
    let due = Duration::from_secs_f64(copied as f64 / rate as f64);
    while let Some(wait) = due.checked_sub(started.elapsed()) {
        if wait.is_zero() || stop() {
            return;
        }
        std::thread::sleep(wait.min(Duration::from_millis(50)));
    }
}

/// The oldest sealed log segment of `store` (not the active one), for the tests of a step or
/// a chance on one file.
#[cfg(test)]
fn first_sealed_log(store: &crate::Store) -> Vec<(u64, SegmentHandle)> {
    let active = store.inner.compactor.log.lock().active().map(|a| a.id);
    let first: Vec<_> = store
        .inner
        .shared
        .segments
        .snapshot()
        .into_iter()
        .filter(|(id, h)| h.kind == crate::segment::SegmentKind::Log && Some(*id) != active)
        .take(1)
        .collect();
    assert_eq!(first.len(), 1, "no sealed segment");
    first
}
