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
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{Inner, Located, SegmentHandle, Store, Ticker};
use crate::compress::StoredValue;
use crate::error::{Error, Result};
use crate::failpoint;
use crate::format::footer::FooterEntry;
use crate::format::record::{RecordKind, record_len};
use crate::index::IndexEntry;
use crate::io::file::{self, SegmentFile};
use crate::options::IoMode;
use crate::segment::{self, SegmentKind};

/// How often the background compactor looks for work.
const CHECK_INTERVAL: Duration = Duration::from_millis(500);

/// State kept between compactions (behind [`Inner::compacting`], which also makes them run one
/// at a time).
#[derive(Debug, Default)]
pub(super) struct CompactorState {
    /// Segments whose compaction stopped at a live value that failed verification. The
    /// background compactor does not retry them; [`Store::compact`] does.
    damaged: HashSet<u64>,
}

/// What one compaction did. Returned by [`Store::compact`].
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
    /// Record bytes written by the copies.
    pub bytes_copied: u64,
    /// Bytes of the files removed.
    pub bytes_freed: u64,
    /// Segments left in place because a live value in them failed verification: reads of that
    /// value return [`Error::Corruption`]; the rest of the segment stays readable.
    pub damaged_segments: Vec<u64>,
}

/// Figures about the store: what it holds, what it takes on disk and in memory, and what it has
/// written. Returned by [`Store::stats`].
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
    /// Estimated heap bytes of the index: keys, entries and hash table slack.
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

impl Store {
    /// Compacts now, unthrottled: removes every blob file whose value is dead, and rewrites
    /// every sealed log segment whose dead fraction is at least
    /// [`Options::compaction_threshold`](crate::Options::compaction_threshold). Writes made
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
        // A throttled background compaction yields (between records) rather than make this
        // call wait for it at its rate.
        self.inner.compact_waiting.fetch_add(1, Ordering::SeqCst);
        let mut state = self.inner.lock_compacting();
        self.inner.compact_waiting.fetch_sub(1, Ordering::SeqCst);
        self.inner.compact(&mut state, None, &|| false, true)
    }

    /// What the store holds, takes and has written. Takes a lock of the index per shard and
    /// looks up the length of every file (no file data is read).
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }
}

impl Inner {
    fn lock_compacting(&self) -> std::sync::MutexGuard<'_, CompactorState> {
        self.compacting.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn stats(&self) -> Stats {
        #[allow(clippy::type_complexity)]
        let handles: Vec<(u64, SegmentKind, Arc<SegmentFile>, u64, u64)> = self
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(&id, h)| (id, h.kind, h.file.clone(), h.tombstone_bytes, h.tombstones))
            .collect();
        let (active, active_tombstones) = {
            let app = self.lock_appender();
            app.active.as_ref().map_or((None, (0, 0)), |a| {
                (
                    Some((a.id, app.wb.position())),
                    (a.tombstone_bytes, a.tombstones),
                )
            })
        };
        let (mut disk_bytes, mut preallocated_bytes) = (0, 0);
        let (mut log_segments, mut blob_files) = (0, 0);
        let (mut tombstone_bytes, mut tombstones) = active_tombstones;
        for (id, kind, file, tb, tn) in &handles {
            let len = file.len().unwrap_or(0);
            disk_bytes += len;
            if let Some((active_id, written)) = active
                && active_id == *id
            {
                preallocated_bytes += len.saturating_sub(written);
            }
            tombstone_bytes += tb;
            tombstones += tn;
            match kind {
                SegmentKind::Log => log_segments += 1,
                SegmentKind::Blob => blob_files += 1,
            }
        }
        let live_bytes: u64 = self.index.usage_all().values().map(|u| u.live_bytes).sum();
        let c = &self.counters;
        Stats {
            live_keys: self.index.len(),
            live_bytes,
            tombstone_bytes,
            tombstones,
            dead_bytes: disk_bytes
                .saturating_sub(preallocated_bytes + live_bytes + tombstone_bytes),
            preallocated_bytes,
            disk_bytes,
            log_segments,
            blob_files,
            io_mode: if self.profile.direct {
                IoMode::Direct
            } else {
                IoMode::Buffered
            },
            index_entries: self.index.len(),
            index_bytes: self.index.memory_bytes(),
            user_bytes_written: c.user_bytes.load(Ordering::Relaxed),
            compaction_bytes_written: c.compaction_bytes.load(Ordering::Relaxed),
            segments_compacted: c.segments_compacted.load(Ordering::Relaxed),
            files_removed: c.files_removed.load(Ordering::Relaxed),
            tombstones_dropped: c.tombstones_dropped.load(Ordering::Relaxed),
        }
    }

    /// Makes every byte appended so far durable, copies included (which `flush` would not
    /// wait for: they reuse old sequence numbers), and applies the index updates it covers.
    pub(super) fn sync_log(&self) -> Result<()> {
        let ticket = {
            let mut app = self.lock_appender();
            app.submit_group()?;
            app.wb.sync_ticket()
        };
        let mut st = self.progress.lock();
        loop {
            if let Some(f) = st.failure {
                return Err(f.to_error());
            }
            if st.syncs_done >= ticket {
                return Ok(());
            }
            st = self.progress.wait(st);
        }
    }

    /// One compaction: the dead blob files, then the log segments past the threshold (all of
    /// them, or with `background` only those not known to be damaged). `rate` bounds the bytes
    /// copied per second; `stop` is asked between records and ends the compaction early
    /// (leaving the segment in hand in place).
    pub(super) fn compact(
        &self,
        state: &mut CompactorState,
        rate: Option<u64>,
        stop: &dyn Fn() -> bool,
        retry_damaged: bool,
    ) -> Result<CompactionReport> {
        if let Some(f) = self.progress.lock().failure {
            return Err(f.to_error());
        }
        // Every write made so far durable and applied: its seal, and the index updates that make
        // records dead, are settled before anything is chosen.
        self.sync_log()?;
        let (dead_blobs, victims) = self.choose(state, retry_damaged)?;
        let mut report = CompactionReport::default();
        let started = Instant::now();
        for (id, handle) in victims {
            if stop() {
                return Ok(report);
            }
            match self.compact_segment(id, &handle, rate, started, stop, &mut report) {
                Ok(()) => {}
                Err(Error::Corruption { segment, .. }) if segment == id => {
                    log::warn!(
                        "podstore: segment {id} not compacted: a live value in it is damaged"
                    );
                    state.damaged.insert(id);
                    report.damaged_segments.push(id);
                }
                Err(e) => return Err(e),
            }
        }
        if !dead_blobs.is_empty() {
            // A blob's value is dead once a newer write of its key is applied; that write may
            // have been buffered after the sync above. Make it durable before the blob goes.
            self.sync_log()?;
            for (id, handle) in dead_blobs {
                let len = handle.file.len()?;
                failpoint::hit("compact:blob-before-remove");
                self.remove_file(id, &handle)?;
                failpoint::hit("compact:blob-removed");
                report.blob_files_removed += 1;
                report.bytes_freed += len;
            }
        }
        Ok(report)
    }

    /// The dead blob files and the log segments to compact, most dead first.
    #[allow(clippy::type_complexity)]
    fn choose(
        &self,
        state: &CompactorState,
        retry_damaged: bool,
    ) -> Result<(Vec<(u64, Handle)>, Vec<(u64, Handle)>)> {
        let syncs_done = self.progress.lock().syncs_done;
        let handles: Vec<(u64, Handle)> = self
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, h)| h.sealed_at.is_some_and(|t| t <= syncs_done))
            .map(|(&id, h)| (id, Handle::of(h)))
            .collect();
        let threshold = self.opts.compaction_threshold;
        let mut dead_blobs = Vec::new();
        let mut victims = Vec::new();
        // A queued write (its index update not applied yet) may point into a file: leave it for
        // next time. Asked before the index, so that an update applied in between is seen there.
        let referenced = self.pending.referenced_segments();
        for (id, h) in handles {
            if (!retry_damaged && state.damaged.contains(&id)) || referenced.contains(&id) {
                continue;
            }
            let usage = self.index.usage(id);
            let len = h.file.len()?;
            match h.kind {
                SegmentKind::Blob if usage.live_records == 0 => dead_blobs.push((id, h)),
                SegmentKind::Blob => {}
                SegmentKind::Log => {
                    let dead = len.saturating_sub(usage.live_bytes + h.tombstone_bytes);
                    if len > 0 && dead as f64 >= threshold * len as f64 {
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
        handle: &Handle,
        rate: Option<u64>,
        started: Instant,
        stop: &dyn Fn() -> bool,
        report: &mut CompactionReport,
    ) -> Result<()> {
        let len = handle.file.len()?;
        let entries =
            segment::read_sealed_entries(&handle.file, id, len, &self.profile, &self.read_pool)?;
        // A tombstone older than every put in every other file (and every write still on its
        // way) hides nothing that can come back: it is dropped. Copies made below keep their
        // sequence numbers, so they never make this unsafe.
        let oldest_put_elsewhere = self.oldest_put_except(id);
        let mut moved: Vec<(Vec<u8>, IndexEntry, IndexEntry)> = Vec::new();
        let (mut copied, mut tombstones_copied, mut tombstones_dropped) = (0u64, 0u64, 0u64);
        let mut value = Vec::new();
        for e in &entries {
            if stop() {
                return Ok(());
            }
            let written = match e.kind {
                RecordKind::Put => {
                    let Some(old) = segment::index_entry(id, e) else {
                        continue;
                    };
                    if self.index.get(&e.key) != Some(old) {
                        continue; // overwritten or deleted: dead
                    }
                    value.resize(old.stored_len as usize, 0);
                    let found = Located {
                        entry: old,
                        file: handle.file.clone(),
                    };
                    segment::read_value(&old, 0, &mut value, |o, b| self.fetch(&found, o, b))?;
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
            self.counters
                .compaction_bytes
                .fetch_add(written, Ordering::Relaxed);
            throttle(rate, report.bytes_copied, started, stop);
        }
        failpoint::hit("compact:copied");
        // The copies, and every write that made a record of this segment dead, are made durable
        // before the index points at the copies and before the file goes.
        self.sync_log()?;
        failpoint::hit("compact:synced");
        for (key, old, new) in &moved {
            // A key written meanwhile keeps its newer value; the copy is dead on arrival.
            self.index.replace_if(key, old, *new);
        }
        failpoint::hit("compact:switched");
        if self.pending.references(id) || self.index.usage(id).live_records > 0 {
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
        report.bytes_freed += len;
        self.counters
            .segments_compacted
            .fetch_add(1, Ordering::Relaxed);
        self.counters
            .tombstones_dropped
            .fetch_add(tombstones_dropped, Ordering::Relaxed);
        Ok(())
    }

    /// Appends a copy of the record `e` (with its value `old`, read and verified; `None` for a
    /// tombstone) with its own sequence number. Returns the copy's index entry and length, or
    /// `None` when the value was overwritten or deleted since it was read.
    fn append_copy(
        &self,
        e: &FooterEntry,
        value: Option<(&IndexEntry, &[u8])>,
    ) -> Result<Option<(IndexEntry, u64)>> {
        let mut app = self.lock_appender();
        if let Some((old, _)) = value
            && self.index.get(&e.key) != Some(*old)
        {
            return Ok(None);
        }
        let stored = value.map(|(old, bytes)| StoredValue {
            bytes: Cow::Borrowed(bytes),
            value_len: old.value_len,
            compressed: old.is_compressed(),
        });
        let len = record_len(e.key.len() as u64, e.stored_len);
        app.make_room(self, len)?;
        // Batch flags are not copied: the batch is whole in the old segment, and each copy
        // stands alone.
        let (_, new) = app.append(&e.key, stored.as_ref(), 0, Some(e.seq))?;
        Ok(Some((new, len)))
    }

    /// The smallest sequence number of a put in any file but `except`, of a write not yet
    /// applied, or of a blob put that failed (its file may linger).
    fn oldest_put_except(&self, except: u64) -> u64 {
        // Under the append lock, so that no segment is sealed between the two looks.
        let app = self.lock_appender();
        let active = app.active.as_ref().map_or(u64::MAX, |a| a.min_put_seq);
        let files = self
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(id, _)| **id != except)
            .map(|(_, h)| h.min_put_seq)
            .min()
            .unwrap_or(u64::MAX);
        drop(app);
        let pending = self.pending.min_seq().unwrap_or(u64::MAX);
        let abandoned = self.abandoned_blob_seq.load(Ordering::Relaxed);
        active.min(files).min(pending).min(abandoned)
    }

    /// Removes file `id` durably (unlink, then directory fsync), then forgets it. Readers that
    /// located a value in it before keep reading through their open handle.
    fn remove_file(&self, id: u64, handle: &Handle) -> Result<()> {
        let path = handle.file.path().to_path_buf();
        // Forgotten only once the removal is durable: until then the file still counts for the
        // tombstone rule (`oldest_put_except`), since a crash could bring it back.
        file::remove_durably(&self.profile, &self.dir, &path)?;
        self.segments
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        self.counters.files_removed.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// What compaction keeps of a [`SegmentHandle`] while it works on it.
#[derive(Clone)]
struct Handle {
    file: Arc<SegmentFile>,
    kind: SegmentKind,
    tombstone_bytes: u64,
}

impl Handle {
    fn of(h: &SegmentHandle) -> Handle {
        Handle {
            file: h.file.clone(),
            kind: h.kind,
            tombstone_bytes: h.tombstone_bytes,
        }
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

/// Starts the background compactor: every [`CHECK_INTERVAL`] it looks for dead blob files and
/// segments past the threshold, and compacts them at [`Options::compaction_rate`].
pub(super) fn start_compactor(inner: Weak<Inner>) -> Result<Ticker> {
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let thread_stop = stop.clone();
    let handle = std::thread::Builder::new()
        .name("podstore-compactor".into())
        .spawn(move || {
            let (flag, cv) = &*thread_stop;
            let stopped = || *flag.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                {
                    let guard = flag.lock().unwrap_or_else(|p| p.into_inner());
                    let (guard, _) = cv
                        .wait_timeout(guard, CHECK_INTERVAL)
                        .unwrap_or_else(|p| p.into_inner());
                    if *guard {
                        return;
                    }
                }
                let Some(inner) = inner.upgrade() else { return };
                if let Err(e) = inner.compact_in_background(&stopped) {
                    if matches!(e, Error::Poisoned | Error::StorageFull { .. }) {
                        // Writes are refused until the store is reopened; so are copies.
                        return;
                    }
                    log::warn!("podstore: background compaction failed: {e}");
                }
            }
        })
        .map_err(|e| Error::io("start compaction thread", None, e))?;
    Ok(Ticker { stop, handle })
}

impl Inner {
    /// One background pass: compacts if there is anything to do (without syncing otherwise).
    fn compact_in_background(&self, stop: &dyn Fn() -> bool) -> Result<()> {
        // `Store::compact` running: it does the work.
        let Ok(mut state) = self.compacting.try_lock() else {
            return Ok(());
        };
        let stop = || stop() || self.compact_waiting.load(Ordering::Relaxed) > 0;
        let (dead_blobs, victims) = self.choose(&state, false)?;
        if dead_blobs.is_empty() && victims.is_empty() {
            return Ok(());
        }
        self.compact(&mut state, self.opts.compaction_rate, &stop, false)
            .map(|_| ())
    }
}
