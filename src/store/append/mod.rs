//! The log write path: the active segment, record appends, group commit, making room and
//! sealing.
//!
//! Writers take the append lock ([`Log::lock`]), append their records to the write buffer and
//! queue their index updates; then they wait ([`Log::wait`]) until they are durable. A writer
//! that finds nothing in flight leads a group commit: it takes everything appended so far and
//! writes and syncs it itself, in its own thread (a lone writer thus syncs at once, with no
//! hand-off to the flush thread and no wake-up). Writers whose records arrive while that write
//! and sync run wait; when it finishes, the first to wake leads the next group with everything
//! appended meanwhile. Full buffers, groups closed at their caps and seals go to the flush
//! thread.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;

use super::active_keys::{Records, SortedView, ViewSlot};
use super::compress::StoredValue;
use super::segments::{FileSummary, SegmentHandle};
use super::shared::Shared;
use crate::error::Result;
use crate::format::footer::{FooterBound, encode_footer_with_blocks};
use crate::format::record::{
    FLAG_BATCH_CONTINUES, RecordHeader, RecordKind, RecordPlace, write_record,
};
use crate::format::segment_header::SegmentHeader;
use crate::index::{IndexEntry, Seen};
use crate::io::file::{self, SegmentFile};
use crate::io::writer::{self, Progress, Tail, WriteBuffer};
use crate::options::{Durability, Options};
use crate::segment::{self, RESERVE_AHEAD, SegmentKind, Versions};

mod wait;

/// One operation to append: a put (with its value, as stored) or a delete.
pub(super) type Op<'a> = (&'a [u8], Option<&'a StoredValue<'a>>);

/// What [`AppendGuard::append_ops`] appended.
#[derive(Debug)]
pub(super) struct Appended {
    /// Sequence number of the first record.
    pub(super) first: u64,
    /// Sequence number of the last record.
    pub(super) last: u64,
    /// The records whose index update waits to be resolved: sequence number and op position.
    pub(super) unresolved: Vec<(u64, usize)>,
    /// Where each op's record went (a tombstone's too).
    pub(super) entries: Vec<IndexEntry>,
    /// Each op's sequence number (its value's version). Increasing, not always consecutive:
    /// each is taken from the clock.
    pub(super) seqs: Vec<u64>,
}

/// The log: the double-buffered writer, its flush thread, and the state behind the append lock.
pub(super) struct Log {
    shared: Shared,
    segment_size: u64,
    max_group_bytes: u64,
    max_group_records: usize,
    appender: Mutex<Appender>,
    tail: Arc<Mutex<Tail>>,
    progress: Arc<Progress>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    /// The sorted view of the active segment's frozen records, built by listings
    /// (`store::active_keys`). Taken before the append lock, never after it but by `try_lock`.
    view: Mutex<ViewSlot>,
}

/// State behind the append lock: the buffer being filled and the segment it belongs to.
pub(super) struct Appender {
    wb: WriteBuffer,
    active: Option<ActiveSegment>,
    next_segment: u64,
    next_seq: u64,
    /// The durable reservation of numbers (`VERSIONS`): no number past it is given.
    versions: Versions,
    /// Bytes and records appended since the last synced hand-off: the group being formed.
    group_bytes: u64,
    group_records: usize,
    /// The group being formed holds a [`Durability::Sync`] write, whose writer waits for it:
    /// only such a group is closed at its caps. Buffered writes alone have nobody to wait, and
    /// a sync at every cap cost a bulk load one fdatasync (and one padded partial write) per
    /// 8 MiB or 4096 records.
    group_waited: bool,
}

impl Appender {
    /// The number the next write will take: the clock in microseconds, or one more than the
    /// last number given if the clock is not past it (writes faster than one per microsecond,
    /// a clock stepped back, a store whose numbers ran ahead). Numbers therefore grow
    /// strictly, and double as the write's time ([`crate::ValueMeta::written_at`]).
    fn peek_seq(&self) -> u64 {
        self.next_seq.max(crate::meta::clock_micros())
    }

    /// The number [`Appender::peek_seq`] gives, once the reservation covers it: a number past
    /// the reservation first extends it by [`RESERVE_AHEAD`] (a write and sync of `VERSIONS`,
    /// at most once per second of writes), so that no number is ever given that a crash could
    /// make the store give again.
    fn number(&mut self) -> Result<u64> {
        let seq = self.peek_seq();
        if seq > self.versions.reserved() {
            self.versions.reserve(seq.saturating_add(RESERVE_AHEAD))?;
        }
        Ok(seq)
    }

    /// A synced hand-off took the group being formed: the next one starts empty.
    fn reset_group(&mut self) {
        self.group_bytes = 0;
        self.group_records = 0;
        self.group_waited = false;
    }

    /// Takes the number [`Appender::number`] gives.
    fn take_seq(&mut self) -> Result<u64> {
        let seq = self.number()?;
        self.next_seq = seq + 1;
        Ok(seq)
    }
}

struct ActiveSegment {
    id: u64,
    /// Smallest put sequence number and tombstones of the records appended (copies keep
    /// their old sequence numbers).
    summary: FileSummary,
    /// One past the last byte of the last record appended (the write position may be further,
    /// past the padding of a synced group).
    data_end: u64,
    /// Every record appended, for the footer (and listings: `store::active_keys`).
    records: Records,
    /// At most how long their footer is: the segment is sealed before it would take the file
    /// past the segment size.
    footer: FooterBound,
}

/// Keys of the active segment, for ordered listing ([`Log::active_keys`]).
pub(super) struct ActiveKeys {
    pub(super) id: u64,
    /// One past the last byte of the last record appended.
    pub(super) data_end: u64,
    /// Its frozen records sorted by key (none while no chunk of records is full).
    pub(super) view: Option<Arc<SortedView>>,
    /// `(key, record offset, sequence number)` of the records after those of `view` (the chunk
    /// being filled, and a backlog of frozen chunks passed over) whose keys are in the range.
    pub(super) keys: Vec<(Vec<u8>, u64, u64)>,
}

/// The active segment as [`Stats`](super::Stats) and `verify` see it.
pub(super) struct ActiveView {
    pub(super) id: u64,
    /// Bytes written or buffered so far (the zero-ahead space lies beyond).
    pub(super) position: u64,
    pub(super) data_end: u64,
    pub(super) summary: FileSummary,
}

impl Log {
    /// Starts the flush thread for a store whose records up to `max_seq` are durable and whose
    /// next file id is `next_segment`. Numbers start above `max_seq` and above `versions`'
    /// reservation (numbers a crash lost the records of were given up to it; that none of them
    /// has a record makes "durable up to it" vacuously true).
    pub(super) fn start(
        shared: Shared,
        opts: &Options,
        max_seq: u64,
        next_segment: u64,
        versions: Versions,
    ) -> Result<Log> {
        let max_seq = max_seq.max(versions.reserved());
        let progress = Arc::new(Progress::new(max_seq));
        let (wb, tail, flusher) = {
            let pending = shared.pending.clone();
            let index = shared.index.clone();
            let catalog = shared.catalog.clone();
            writer::start(
                opts.write_buffer_size,
                shared.profile.direct,
                shared.profile.mem_align,
                shared.profile.block_size as u64,
                opts.segment_size,
                progress.clone(),
                writer::Hooks {
                    on_durable: Box::new(move |seq| pending.ready_through(seq, &index)),
                    on_sealed: Box::new(move |file, len| record_seal(&catalog, file, len)),
                },
            )?
        };
        Ok(Log {
            shared,
            segment_size: opts.segment_size,
            max_group_bytes: opts.max_group_bytes,
            max_group_records: opts.max_group_records,
            appender: Mutex::new(Appender {
                wb,
                active: None,
                next_segment,
                next_seq: max_seq + 1,
                versions,
                group_bytes: 0,
                group_records: 0,
                group_waited: false,
            }),
            tail,
            progress,
            flusher: Mutex::new(Some(flusher)),
            view: Mutex::new(ViewSlot::default()),
        })
    }

    /// What an ordered listing starts from, taken at one instant (under the append lock): the
    /// id the next new file will get, every open file (unsorted), and the active segment's
    /// keys, those in the chunk being filled filtered by `keep`, the others through the
    /// segment's sorted view, extended first (outside the append lock) if chunks were frozen
    /// since it was built, or, for a large backlog no listing met before, passed over and
    /// filtered by `keep` too (see `store::active_keys`); `None` when no segment is active.
    ///
    /// The files are taken as they were under the append lock with the keys, not after them, so
    /// that every key is in one or the other: compaction appends its copies (under this lock)
    /// before it switches the index to them and removes their old file, so a file missing from
    /// the table at this instant had its live records copied, before it, into a file in the
    /// table or into the active segment's records. Taken after, a compaction could append a
    /// key's copy past the keys taken and remove its old file in between: the key in no file the
    /// listing read. (The table is held under the append lock and copied after it is released:
    /// a write waits for the copy of every file's handle only if it opens a new file, which
    /// needs the table, as before.)
    pub(super) fn active_keys(
        &self,
        keep: impl Fn(&[u8]) -> bool,
    ) -> (u64, Vec<(u64, SegmentHandle)>, Option<ActiveKeys>) {
        // Held while the view is extended: listings that want it wait for one build.
        let mut slot = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let (next_id, table, found) = {
            let app = self.lock();
            let next_id = app.next_file_id();
            let table = self.shared.segments.hold();
            let found = app.app.active.as_ref().map(|a| {
                let from = slot
                    .view
                    .as_ref()
                    .filter(|v| v.segment() == a.id)
                    .map_or(0, |v| v.chunk_count());
                let keys: Vec<(Vec<u8>, u64, u64)> = a
                    .records
                    .filling()
                    .iter()
                    .filter(|r| keep(&r.key))
                    .map(|r| (r.key.clone(), r.offset, r.seq))
                    .collect();
                (a.id, a.data_end, a.records.frozen_from(from), keys)
            });
            (next_id, table, found)
        };
        let files = table.all();
        drop(table);
        let Some((id, data_end, new, mut keys)) = found else {
            return (next_id, files, None);
        };
        let base = slot.view.clone().filter(|v| v.segment() == id);
        let frozen = base.as_ref().map_or(0, |v| v.chunk_count()) + new.len();
        let view = if new.is_empty() {
            base
        } else if slot.pass_over(id, new.len(), frozen) {
            drop(slot);
            keys.extend(
                new.iter()
                    .flat_map(|c| c.iter())
                    .filter(|r| keep(&r.key))
                    .map(|r| (r.key.clone(), r.offset, r.seq)),
            );
            base
        } else {
            let view = Arc::new(SortedView::extended(base.as_deref(), id, new));
            // Kept only while its segment is active: a seal between the snapshot and now could
            // not clear the slot (this thread held it), and the view would keep its records.
            let app = self.lock();
            slot.view = (app.app.active.as_ref().map(|a| a.id) == Some(id)).then(|| view.clone());
            drop(app);
            Some(view)
        };
        let active = ActiveKeys {
            id,
            data_end,
            view,
            keys,
        };
        (next_id, files, Some(active))
    }

    /// Takes the append lock.
    pub(super) fn lock(&self) -> AppendGuard<'_> {
        AppendGuard {
            log: self,
            app: self.appender.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// The flush thread's progress (durable sequence number, syncs done, failure).
    pub(super) fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The error of the failure that poisoned the store, if any.
    pub(super) fn failure(&self) -> Option<crate::Error> {
        self.progress.lock().failure.map(|f| f.to_error())
    }

    /// Copies bytes `[offset, ..)` of `segment` that are still in the write buffers into `dst`;
    /// see [`Tail::copy_out`].
    pub(super) fn copy_from_buffers(
        &self,
        segment: u64,
        offset: u64,
        dst: &mut [u8],
    ) -> std::result::Result<usize, u64> {
        self.tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .copy_out(segment, offset, dst)
    }

    /// Whether the write buffers hold any byte of `[start, end)` of `segment`; see
    /// [`Tail::holds_any`].
    pub(super) fn buffers_hold(&self, segment: u64, start: u64, end: u64) -> bool {
        self.tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .holds_any(segment, start, end)
    }

    /// Seals the active segment, makes every write durable, and stops the flush thread.
    pub(super) fn shut_down(&self) -> Result<()> {
        if self.shared.profile.read_only {
            // Nothing was written, and nothing may be: no seal to record (a segment open found
            // sealed that its catalog lists as created is recorded by the next writer; beside a
            // writer, it is the writer's to record), no reservation to give back.
            self.stop();
            return Ok(());
        }
        let result = (|| {
            let (last, ticket) = {
                let mut app = self.lock();
                if app.app.active.is_some() {
                    app.seal()?;
                }
                (app.last_seq(), app.app.wb.sync_ticket())
            };
            self.wait(last, last, true)?;
            // The footer's own sync too, so that the seal can be recorded.
            self.wait_for_sync(ticket)?;
            self.record_seals()?;
            // Every number given is in a durable record now: the reservation comes back to
            // the last one, so that the next open does not start ahead of the clock.
            let mut app = self.lock();
            let last = app.last_seq();
            app.app.versions.give_back(last)
        })();
        self.stop();
        result
    }

    /// Records in the catalog the seals of log segments whose footers are durable but whose seal
    /// the writer could not record when their sync returned (`record_seal`): called by the
    /// background compactor's tick, `compact` and close. Until then the catalog lists such a
    /// segment as created, and open recovers it like any segment being written (which a sealed
    /// one passes, from its footer).
    pub(super) fn record_seals(&self) -> Result<()> {
        let shared = &self.shared;
        if !shared.catalog.is_kept() {
            return Ok(());
        }
        let syncs_done = self.progress.lock().syncs_done;
        for (id, handle) in shared.segments.sealed_by(syncs_done) {
            let listed = shared.catalog.file(id);
            if handle.kind == SegmentKind::Log
                && listed.is_some_and(|f| f.state == crate::format::catalog::FileState::Created)
            {
                shared
                    .catalog
                    .sealed(id, SegmentKind::Log, handle.file.len()?)?;
            }
        }
        Ok(())
    }

    /// Stops the flush thread the way a crash would: writes already handed to it finish, the
    /// buffer being filled is dropped and the active segment is left unsealed.
    pub(super) fn stop(&self) {
        self.lock().app.wb.shut_down();
        let handle = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

/// The append lock, held: the one place records are numbered and appended.
pub(super) struct AppendGuard<'a> {
    log: &'a Log,
    app: MutexGuard<'a, Appender>,
}

impl AppendGuard<'_> {
    /// The sequence number of the last write numbered so far.
    pub(super) fn last_seq(&self) -> u64 {
        self.app.next_seq - 1
    }

    /// No number past this has been given (the durable reservation, `VERSIONS`).
    pub(super) fn reserved_through(&self) -> u64 {
        self.app.versions.reserved()
    }

    /// The id the next new file will get (files below it existed when this was asked).
    pub(super) fn next_file_id(&self) -> u64 {
        self.app.next_segment
    }

    /// Takes the next sequence number (a blob put, which is not appended to the log).
    pub(super) fn take_seq(&mut self) -> Result<u64> {
        self.app.take_seq()
    }

    /// Spends `count` file ids (new blob files).
    pub(super) fn take_file_ids(&mut self, count: u64) -> Result<std::ops::Range<u64>> {
        let (ids, next) = segment::allocate_ids(self.app.next_segment, count)?;
        self.app.next_segment = next;
        Ok(ids)
    }

    /// The active segment, if one is open.
    pub(super) fn active(&self) -> Option<ActiveView> {
        self.app.active.as_ref().map(|a| ActiveView {
            id: a.id,
            position: self.app.wb.position(),
            data_end: a.data_end,
            summary: a.summary,
        })
    }

    /// Appends `ops` as one group of records: a lone record, or an atomic batch whose records
    /// all but the last carry [`FLAG_BATCH_CONTINUES`]. Queues their index updates (made ready
    /// at once for buffered writes) and closes the group commit if it reached its caps.
    /// Returns the first and last sequence numbers used.
    ///
    /// `seen` holds, per op, the key's hash and what the writer saw of it in the index (see
    /// [`Seen`]); the ops whose index update could not be resolved against it are listed in
    /// [`Appended::unresolved`], for [`Inner::settle`](super::inner::Inner::settle).
    pub(super) fn append_ops(
        &mut self,
        ops: &[Op<'_>],
        seen: &[(u64, Seen)],
        durability: Durability,
    ) -> Result<Appended> {
        debug_assert_eq!(ops.len(), seen.len());
        // A poisoned store takes no more writes, buffered ones included, until it is reopened.
        if let Some(e) = self.app.wb.failure() {
            return Err(e);
        }
        let total: u64 = ops
            .iter()
            .map(|(k, v)| record_header(k, *v, 0, 0, 0).encoded_len())
            .sum();
        // A batch never spans segments: recovery must see all of it in one scan.
        self.make_room(total, ops.iter().map(|(k, _)| k.len()))?;
        let mut first = None;
        let mut unresolved = Vec::new();
        let mut entries = Vec::with_capacity(ops.len());
        let mut seqs = Vec::with_capacity(ops.len());
        for (i, ((key, value), (hash, seen))) in ops.iter().zip(seen).enumerate() {
            let flags = if i + 1 < ops.len() {
                FLAG_BATCH_CONTINUES
            } else {
                0
            };
            let (seq, entry) = self.append(key, *value, flags, None)?;
            first.get_or_insert(seq);
            seqs.push(seq);
            entries.push(entry);
            let shared = &self.log.shared;
            let entry = value.map(|_| entry);
            if !shared
                .pending
                .push(seq, key, *hash, entry, false, seen, &shared.index)
            {
                unresolved.push((seq, i));
            }
        }
        let last = self.last_seq();
        self.log.shared.counters.add_user_bytes(total);
        self.app.group_bytes += total;
        self.app.group_records += ops.len();
        self.app.group_waited |= durability == Durability::Sync;
        if durability == Durability::Buffered {
            // Visible at once: the caller's next read must see it. Earlier queued log writes
            // become visible with it, so that per key the log order holds.
            let shared = &self.log.shared;
            shared.pending.ready_through(last, &shared.index);
        }
        if self.app.group_waited
            && (self.app.group_bytes >= self.log.max_group_bytes
                || self.app.group_records >= self.log.max_group_records)
        {
            self.submit_group()?;
        }
        Ok(Appended {
            first: first.unwrap_or(last),
            last,
            unresolved,
            entries,
            seqs,
        })
    }

    /// Whether the record of `key` and `value` can be appended without waiting for the disk
    /// ([`WriteBuffer::room_now`]): it fits in the buffer being filled and does not end the
    /// segment (a seal hands the buffer off), or the other buffer is back from its write.
    pub(super) fn room_now(&mut self, key: &[u8], value: &StoredValue<'_>) -> bool {
        let len = record_header(key, Some(value), 0, 0, 0).encoded_len();
        let seals = self.app.active.as_ref().is_some_and(|active| {
            let footer = FooterBound::with_key(active.footer, key.len())
                .footer_len(self.app.wb.block_size());
            !active.records.is_empty()
                && self.app.wb.position() + len + footer > self.log.segment_size
        });
        self.app.wb.room_now(len, seals)
    }

    /// Appends a copy of a record (compaction) that keeps its sequence number `seq`: `value`
    /// as stored, or `None` for a tombstone. Batch flags are not copied: the batch is whole in
    /// the old segment, and each copy stands alone. Returns the copy's index entry.
    pub(super) fn append_copy(
        &mut self,
        key: &[u8],
        value: Option<&StoredValue<'_>>,
        seq: u64,
        record_bytes: u64,
    ) -> Result<IndexEntry> {
        self.make_room(record_bytes, [key.len()])?;
        Ok(self.append(key, value, 0, Some(seq))?.1)
    }

    /// Takes the group being formed for the calling thread to write and sync itself (see
    /// [`WriteBuffer::take_own_group`]); `None` if nothing was appended since the last hand-off.
    fn take_own_group(&mut self, turn: &writer::IoTurn<'_>) -> Result<Option<writer::Job>> {
        let last = self.last_seq();
        let job = self.app.wb.take_own_group(turn, last)?;
        if job.is_some() {
            self.app.reset_group();
        }
        Ok(job)
    }

    /// Hands the group being formed to the flush thread with an fdatasync.
    pub(super) fn submit_group(&mut self) -> Result<()> {
        self.app.reset_group();
        let last = self.last_seq();
        self.app.wb.submit(true, last)
    }

    /// [`Appender::submit_group`] for a sync no write waits for
    /// ([`WriteBuffer::submit_quietly`]).
    pub(super) fn submit_group_quietly(&mut self) -> Result<()> {
        self.app.reset_group();
        let last = self.last_seq();
        self.app.wb.submit_quietly(last)
    }

    /// Appends one record to the active segment; returns its sequence number and location.
    /// The record takes the next sequence number, or `copy_of`, the one of the record it is a
    /// copy of (compaction).
    fn append(
        &mut self,
        key: &[u8],
        value: Option<&StoredValue<'_>>,
        flags: u16,
        copy_of: Option<u64>,
    ) -> Result<(u64, IndexEntry)> {
        let app = &mut *self.app;
        let segment = app.active.as_ref().expect("make_room opened a segment").id;
        let seq = match copy_of {
            Some(seq) => seq,
            None => app.number()?,
        };
        let header = record_header(key, value, flags, app.wb.take_pad(), seq);
        let value_len = value.map_or(0, |v| v.value_len);
        let place = RecordPlace {
            segment,
            offset: app.wb.position(),
        };
        let stored: &[u8] = value.map_or(&[], |v| &v.bytes);
        let entry = write_record(&mut app.wb, place, &header, key, stored, value_len)?;
        if copy_of.is_none() {
            // The number peeked above, now taken.
            app.next_seq = seq + 1;
        }
        let active = app.active.as_mut().expect("open");
        active.data_end = app.wb.position();
        active.summary.add(header.kind, seq, header.encoded_len());
        active.footer.add(&entry);
        active.records.push(entry);
        Ok((
            seq,
            IndexEntry {
                segment,
                offset: place.offset,
                value_len,
                stored_len: header.value_len,
                key_len: header.key_len,
                flags: header.encoded_flags() & crate::index::KEPT_FLAGS,
                expires_at: header.expires_at,
            },
        ))
    }

    /// Seals the active segment if `len` more bytes of records with keys of `key_lens` bytes
    /// would take it, with its footer, past the segment size, and opens a new one if none is
    /// active. (A record too large for an empty segment gets one of its own.)
    fn make_room(&mut self, len: u64, key_lens: impl IntoIterator<Item = usize>) -> Result<()> {
        if let Some(active) = &self.app.active
            && !active.records.is_empty()
        {
            let footer = key_lens
                .into_iter()
                .fold(active.footer, FooterBound::with_key)
                .footer_len(self.app.wb.block_size());
            if self.app.wb.position() + len + footer > self.log.segment_size {
                self.seal()?;
            }
        }
        if self.app.active.is_none() {
            let log = self.log;
            let shared = &log.shared;
            let (ids, next) = segment::allocate_ids(self.app.next_segment, 1)?;
            let id = ids.start;
            // The id is spent whatever happens next: a later attempt must not meet this file.
            self.app.next_segment = next;
            let path = segment::path(&shared.dir, id, SegmentKind::Log);
            let file = Arc::new(SegmentFile::create(&path, &shared.profile)?);
            // The new name must be durable before any record in the file is acknowledged. A
            // failed directory fsync poisons the store, like a failed fdatasync: whether the
            // directory's pending changes survive it is unknown. (The empty file left behind is
            // removed at the next open.)
            if let Err(e) = file::sync_dir(&shared.profile, &shared.dir) {
                log.progress.poison(&e);
                return Err(e);
            }
            // Listed in the catalog before anything is written to it: open then knows that a
            // missing log segment held records, and that an unlisted one with bytes is not the
            // store's. If the creation cannot be recorded, the file stays empty and unused (an
            // empty file is removed at the next open, listed or not).
            shared.catalog.created(&[(id, SegmentKind::Log)])?;
            shared.counters.file_made();
            shared.segments.insert(
                id,
                SegmentHandle {
                    file: file.clone(),
                    kind: SegmentKind::Log,
                    sealed_at: None,
                    summary: FileSummary::default(),
                    blocks: Arc::default(),
                },
            );
            let app = &mut *self.app;
            app.wb.start_segment(id, file);
            let header = SegmentHeader {
                segment: id,
                block_size: shared.profile.block_size,
            };
            app.wb.append(&header.encode())?;
            app.active = Some(ActiveSegment {
                id,
                summary: FileSummary::default(),
                data_end: app.wb.position(),
                records: Records::default(),
                footer: FooterBound::default(),
            });
        }
        Ok(())
    }

    /// Seals the active segment now, if there is one (the next write starts a new one); returns
    /// whether there was. The seal is submitted with an fdatasync, not waited for.
    pub(super) fn seal_active(&mut self) -> Result<bool> {
        if self.app.active.is_none() {
            return Ok(false);
        }
        self.seal()?;
        Ok(true)
    }

    /// Appends the footer of the active segment and submits it with an fdatasync.
    fn seal(&mut self) -> Result<()> {
        let last = self.last_seq();
        let app = &mut *self.app;
        // Records first, with a sync of their own: the blocks of one write reach the disk in
        // any order, so a footer written together with unsynced records could survive a crash
        // that they do not, and name them as sealed. The footer then starts at the next block,
        // on a block of its own: one lost block cannot take both the last records and the start
        // of the footer table.
        // (Quietly: the footer follows at once, and zeroes ahead would be cut off with it.)
        app.wb.submit_quietly(last)?;
        let active = app.active.take().expect("an active segment");
        let (id, summary) = (active.id, active.summary);
        debug_assert_eq!(app.wb.position() % app.wb.block_size(), 0);
        let table_offset = app.wb.position();
        // Its sorted view goes with it (if a listing holds the view's lock, it sees the segment
        // sealed when it installs the view, and drops it).
        match self.log.view.try_lock() {
            Ok(mut slot) => *slot = ViewSlot::default(),
            Err(TryLockError::Poisoned(p)) => *p.into_inner() = ViewSlot::default(),
            Err(TryLockError::WouldBlock) => {}
        }
        // Every record, in the order written: the footer's sort keeps each key's last.
        let entries: Vec<_> = active.records.iter().collect();
        let (footer, blocks) = encode_footer_with_blocks(
            active.id,
            active.data_end,
            table_offset,
            app.wb.block_size() as u32,
            &entries,
        );
        app.wb.append(&footer)?;
        app.reset_group();
        app.wb.submit_seal(last)?;
        let ticket = app.wb.sync_ticket();

        self.log
            .shared
            .segments
            .mark_sealed(id, ticket, summary, blocks);
        Ok(())
    }
}

/// Records in `catalog` that log segment `file` is sealed, `len` bytes long: called by the writer
/// once the footer's sync has returned, so that the catalog knows the seal at once (the
/// background's `Log::record_seals` catches any this missed). A failure is logged: the seal is
/// then recorded by a later tick, `compact`, close, or the next open.
fn record_seal(catalog: &crate::segment::Catalog, file: &SegmentFile, len: u64) {
    let name = file.path().file_name().and_then(|n| n.to_str());
    let Some((id, kind)) = name.and_then(segment::parse_file_name) else {
        return;
    };
    let listed = catalog.file(id);
    if kind == SegmentKind::Log
        && listed.is_some_and(|f| f.state == crate::format::catalog::FileState::Created)
        && let Err(e) = catalog.sealed(id, kind, len)
    {
        log::warn!(
            "podstore: recording the seal of {}: {e}",
            file.path().display()
        );
    }
}

/// The header of the record of `key` and `value` (`None`: a tombstone); `flags` gets
/// [`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED) for a compressed value.
fn record_header(
    key: &[u8],
    value: Option<&StoredValue<'_>>,
    flags: u16,
    pad_before: u16,
    seq: u64,
) -> RecordHeader {
    RecordHeader {
        pad_before,
        kind: if value.is_some() {
            RecordKind::Put
        } else {
            RecordKind::Tombstone
        },
        flags: flags | value.map_or(0, |v| v.flags()),
        key_len: key.len() as u32,
        value_len: value.map_or(0, |v| v.stored_len()),
        seq,
        expires_at: value.and_then(|v| v.expires_at),
    }
}
