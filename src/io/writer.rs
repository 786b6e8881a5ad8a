//! The double-buffered writer.
//!
//! Two aligned buffers exist per store. The appender (one writer at a time, under the store's
//! append lock) copies records into one; a full buffer, or a partly filled one that a durable
//! write needs on disk, is handed to the flush thread together with its file offset. The flush
//! thread writes it, gives the buffer back through a channel, and then fdatasyncs when asked, so
//! the appender fills one buffer while the other is on its way to disk. A synced job with no
//! unsynced write before it is written durably instead, in one call (`pwritev2` with
//! `RWF_DSYNC`, [`SegmentFile::write_all_at_durable`]), and its buffer comes back after it. No buffer is ever
//! written by two parties: the appender owns the one it fills, and a handed-off buffer is
//! read-only until the flush thread returns it.
//!
//! Alignment by construction: a buffer always starts at a block-aligned file offset and is
//! written as a whole number of blocks, so address (the buffer is aligned), offset and length
//! are all multiples of the block size. A partly filled buffer is zero-padded to the next block
//! boundary and the next buffer starts after the padding: a block that holds acknowledged data
//! is never written a second time.
//!
//! Readers find bytes that are not on disk yet in the [`Tail`]: the buffer being filled and the
//! buffers being written. They lock it only to copy, never across I/O, so a reader does not wait
//! for a writer's disk I/O.
//!
//! **A lone durable writer writes its own group.** When nothing is in flight and the flush
//! thread is not zeroing ahead, the writer that leads a group commit takes the group itself
//! ([`WriteBuffer::take_own_group`]) and writes and syncs it in its own thread
//! ([`IoOrder::run`]) instead of handing it to the flush thread and waiting to be woken: two
//! thread hand-offs fewer per durable put. All log I/O (the flush thread's jobs, its zeroes
//! ahead, and such a writer's group) runs under one lock, [`IoOrder`], in hand-off order, so
//! the flush thread's single sequence of writes and syncs is unchanged, only some of it runs in
//! another thread.

use std::sync::mpsc::{Receiver, Sender, TryRecvError, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::aligned::AlignedBuf;
use super::file::SegmentFile;
use crate::error::{Error, Result};
use crate::format::align_up;

mod progress;

pub use progress::{FailureKind, Progress};

/// A buffer handed to the flush thread and not written yet.
struct InFlight {
    segment: u64,
    offset: u64,
    /// Bytes of `buf` being written; the rest of it is stale.
    len: usize,
    buf: Arc<AlignedBuf>,
}

/// The bytes of the log that may not be on disk yet, for readers.
pub struct Tail {
    active: AlignedBuf,
    /// Bytes of `active` filled.
    fill: usize,
    /// File offset of `active[0]`: always a multiple of the block size.
    buf_offset: u64,
    /// The segment being written and its file.
    target: Option<(u64, Arc<SegmentFile>)>,
    /// Handed-off buffers, oldest first.
    inflight: Vec<InFlight>,
}

impl Tail {
    /// Copies the longest prefix of `dst` that the buffers hold, starting at `offset` of
    /// `segment`. Returns `Ok(n)` for n bytes copied, or `Err(next)` when the bytes at `offset`
    /// are on disk: up to `next`, the first offset after it that a buffer holds.
    pub fn copy_out(&self, segment: u64, offset: u64, dst: &mut [u8]) -> Result<usize, u64> {
        let end = offset + dst.len() as u64;
        let active = self
            .target
            .as_ref()
            .filter(|(s, _)| *s == segment)
            .map(|_| (self.buf_offset, &self.active[..self.fill]));
        let regions = self
            .inflight
            .iter()
            .filter(|f| f.segment == segment)
            .map(|f| (f.offset, &f.buf[..f.len]))
            .chain(active);
        let mut next = end;
        for (start, bytes) in regions {
            let stop = start + bytes.len() as u64;
            if start <= offset && offset < stop {
                let n = (stop.min(end) - offset) as usize;
                let from = (offset - start) as usize;
                dst[..n].copy_from_slice(&bytes[from..from + n]);
                return Ok(n);
            }
            if start > offset {
                next = next.min(start);
            }
        }
        Err(next)
    }

    /// Whether the buffers hold any byte of `[start, end)` of `segment` (bytes no buffer holds
    /// are on disk, for good: a byte only ever moves from a buffer to the file).
    pub fn holds_any(&self, segment: u64, start: u64, end: u64) -> bool {
        let active = self
            .target
            .as_ref()
            .filter(|(s, _)| *s == segment)
            .map(|_| (self.buf_offset, self.fill));
        self.inflight
            .iter()
            .filter(|f| f.segment == segment)
            .map(|f| (f.offset, f.len))
            .chain(active)
            .any(|(at, len)| at < end && start < at + len as u64)
    }
}

/// A unit of log I/O: a handed-off buffer to write (and sync), run by [`IoOrder::run`].
pub struct Job {
    /// The bytes to write (None for a sync without new data); `len` of them.
    buf: Option<Arc<AlignedBuf>>,
    /// Bytes of `buf` to write: a multiple of the block size.
    len: usize,
    file: Arc<SegmentFile>,
    offset: u64,
    /// fdatasync after the write.
    sync: bool,
    /// With `sync`: every record up to this sequence number is complete in this or an earlier job.
    durable_seq: u64,
    /// The job ends the segment (its footer): cut the file to the job's end, dropping the zeroes
    /// written ahead, so that the trailer is the file's last bytes.
    seals: bool,
    /// With `sync`: a write waits for this sync (a durable put's group commit, or a `flush`
    /// asked for by the user), the latency-bound pattern the zero-ahead helps. False for the
    /// store's own syncs (the background flush of buffered writes, eviction, compaction):
    /// zeroes ahead of those would only be written over by the buffered data that follows,
    /// every byte of the segment written twice.
    waited: bool,
}

/// What the flush thread is sent.
enum Msg {
    /// A buffer to write (or a sync alone).
    Job(Job),
    /// Nothing to write: look whether the zero-ahead has work (after a writer wrote its own
    /// group, which the flush thread did not see).
    Wake,
}

/// Called once log records up to a sequence number are durable, before waiters are told (by the
/// flush thread, or by a writer that wrote its own group): the store publishes them to its index
/// here.
pub type OnDurable = Box<dyn Fn(u64) + Send + Sync>;

/// Called with a segment file and its length once the job that sealed it (its footer) is
/// durable: the store records the seal in its catalog there and then.
pub type OnSealed = Box<dyn Fn(&SegmentFile, u64) + Send + Sync>;

/// What the store does when log writes become durable ([`start`]).
pub struct Hooks {
    /// Writes up to a sequence number are durable.
    pub on_durable: OnDurable,
    /// A segment's footer is durable.
    pub on_sealed: OnSealed,
}

/// The one place log I/O happens: jobs (by the flush thread, or by a lone writer for its own
/// group) and the zero-ahead run under its lock ([`IoOrder::lock`]), one at a time, in the order
/// their buffers were handed off. It also holds what running a job needs.
pub struct IoOrder {
    zero: Mutex<ZeroAhead>,
    spare: Sender<AlignedBuf>,
    tail: Arc<Mutex<Tail>>,
    progress: Arc<Progress>,
    on_durable: OnDurable,
    on_sealed: OnSealed,
    mem_align: usize,
}

/// The I/O order, held: no other log I/O runs until it is dropped.
pub struct IoTurn<'a>(MutexGuard<'a, ZeroAhead>);

impl IoOrder {
    fn lock(&self) -> IoTurn<'_> {
        IoTurn(self.zero.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The I/O order if no log I/O is running now (the flush thread may be zeroing ahead).
    pub fn try_lock(&self) -> Option<IoTurn<'_>> {
        match self.zero.try_lock() {
            Ok(g) => Some(IoTurn(g)),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(IoTurn(p.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Runs `job`: writes its buffer and gives the buffer back, cuts the file when it seals,
    /// fdatasyncs when asked (or, for a synced job with no unsynced write before it, writes and
    /// syncs in one call), publishes, and reports progress. After a failure (this job's or an
    /// earlier one's) nothing more is written, synced or published. Returns whether the
    /// zero-ahead has work now.
    pub fn run(&self, turn: &mut IoTurn<'_>, mut job: Job) -> bool {
        let zero = &mut *turn.0;
        let progress = &self.progress;
        // After a failure nothing more is written, synced or published: a later job's sync
        // must not acknowledge records whose bytes were in a job that failed.
        let failed = progress.lock().failure.is_some();
        let mut result = Ok(());
        // A synced job whose write is the log's only unsynced one writes durably, in one call
        // (`pwritev2(..., RWF_DSYNC)`: one device round trip, a FUA write where the device
        // has it) instead of a write and an fdatasync. Not after unsynced writes (a group
        // larger than the buffer): a durable write syncs only its own bytes, and the earlier
        // ones need the fdatasync. Not for a seal, whose cut of the file must be synced too.
        let write_durably = job.sync && !job.seals && !zero.unsynced;
        let mut synced = false;
        if let Some(buf) = job.buf.take() {
            if !failed {
                result = if write_durably {
                    synced = true;
                    job.file.write_all_at_durable(&buf[..job.len], job.offset)
                } else {
                    job.file.write_all_at(&buf[..job.len], job.offset)
                };
            }
            if failed || result.is_err() {
                // Not written: the store is poisoned. The bytes stay in the tail, where readers
                // find the buffered writes that were already visible, and the appender gets a
                // new buffer (a poisoned store appends nothing more, so this happens at most
                // once per buffer).
                let _ = self
                    .spare
                    .send(AlignedBuf::zeroed(buf.len(), self.mem_align));
            } else {
                // Written: readers now find these bytes in the file. They only touch in-flight
                // buffers under the tail lock, so once it is out of the list this Arc is the
                // last one.
                lock_tail(&self.tail)
                    .inflight
                    .retain(|f| !Arc::ptr_eq(&f.buf, &buf));
                if let Ok(buf) = Arc::try_unwrap(buf) {
                    // The appender may be waiting for it; hand it back before the sync.
                    let _ = self.spare.send(buf);
                }
            }
        }
        if failed {
            zero.file = None;
            let mut st = progress.lock();
            st.inflight -= 1;
            drop(st);
            progress.notify();
            return false;
        }
        if result.is_ok() && job.seals {
            result = job.file.set_len(job.offset + job.len as u64);
        }
        zero.wrote(&job);
        if result.is_ok() && job.sync && !synced {
            result = job.file.sync_data();
        }
        if result.is_ok() && job.sync {
            zero.unsynced = false;
        }
        if result.is_ok() && job.sync {
            (self.on_durable)(job.durable_seq);
            if job.seals {
                (self.on_sealed)(&job.file, job.offset + job.len as u64);
            }
        }
        let mut st = progress.lock();
        match result {
            Ok(()) if job.sync => {
                st.durable_seq = st.durable_seq.max(job.durable_seq);
                st.syncs_done += 1;
            }
            Ok(()) => {}
            Err(e) => {
                st.failure.get_or_insert(FailureKind::of(&e));
            }
        }
        st.inflight -= 1;
        drop(st);
        progress.notify();
        zero.wants_step()
    }

    /// Zeroes one more chunk ahead if there is a reason to; returns whether it did anything.
    fn zero_step(&self) -> bool {
        let mut turn = self.lock();
        let zero = &mut *turn.0;
        let failed = self.progress.lock().failure.is_some();
        match if failed { Ok(false) } else { zero.step() } {
            Ok(stepped) => stepped,
            Err(e) => {
                self.progress
                    .lock()
                    .failure
                    .get_or_insert(FailureKind::of(&e));
                self.progress.notify();
                zero.file = None;
                false
            }
        }
    }
}

/// Starts the flush thread. Returns the appender's end of the double buffer, the tail that
/// readers look into, and the thread.
pub fn start(
    buffer_size: usize,
    direct: bool,
    mem_align: usize,
    block_size: u64,
    segment_size: u64,
    progress: Arc<Progress>,
    hooks: Hooks,
) -> Result<(WriteBuffer, Arc<Mutex<Tail>>, JoinHandle<()>)> {
    let Hooks {
        on_durable,
        on_sealed,
    } = hooks;
    let (job_tx, job_rx) = channel::<Msg>();
    let (spare_tx, spare_rx) = channel::<AlignedBuf>();
    let size = align_up(buffer_size as u64, block_size) as usize;
    spare_tx
        .send(AlignedBuf::zeroed(size, mem_align))
        .expect("receiver alive");
    let tail = Arc::new(Mutex::new(Tail {
        active: AlignedBuf::zeroed(size, mem_align),
        fill: 0,
        buf_offset: 0,
        target: None,
        inflight: Vec::new(),
    }));
    let io = Arc::new(IoOrder {
        zero: Mutex::new(ZeroAhead::new(direct, mem_align, segment_size)),
        spare: spare_tx,
        tail: tail.clone(),
        progress: progress.clone(),
        on_durable,
        on_sealed,
        mem_align,
    });
    let thread_io = io.clone();
    let handle = std::thread::Builder::new()
        .name("podstore-flush".into())
        .spawn(move || flush_loop(job_rx, thread_io))
        .map_err(|e| Error::io("start flush thread", None, e))?;
    Ok((
        WriteBuffer {
            tail: tail.clone(),
            pad: 0,
            capacity: size,
            block: block_size,
            spare_rx,
            held_spare: None,
            job_tx: Some(job_tx),
            progress,
            io,
            syncs_sent: 0,
        },
        tail,
        handle,
    ))
}

fn lock_tail(tail: &Mutex<Tail>) -> MutexGuard<'_, Tail> {
    tail.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bytes zeroed per step of the zero-ahead.
const ZERO_CHUNK: u64 = 1 << 20;
/// How far ahead of the written end the zero-ahead goes. It tops the zeroed space up a whole
/// chunk at a time, once less than `ZERO_WINDOW - ZERO_CHUNK` is left: one zero write and sync
/// per megabyte of small writes, not one per write.
const ZERO_WINDOW: u64 = 4 << 20;
/// Zero-ahead follows only synced writes of at most this many bytes: the latency-bound pattern
/// it helps. Large or unsynced writes are bandwidth-bound, and zeroes ahead of them would only
/// double the bytes written.
const ZERO_AFTER_SYNC_OF_AT_MOST: usize = 64 << 10;

/// Preallocation of the active log segment by writing zeroes ahead of its end, while the flush
/// thread is idle.
///
/// An fdatasync after a write into blocks that already exist and were written costs about half
/// of one after a write that allocates blocks or grows the file, because the latter must also
/// commit extent and size metadata (measured: docs/benchmarks.md). Zeroes written (and synced)
/// ahead turn a lone writer's syncs into the cheap kind. Only the flush thread writes them, in
/// the same sequence as the data, so zeroes never land on data; the recovery scan reads a zero
/// block start as the end of the log, and the seal cuts the file back to its footer.
struct ZeroAhead {
    /// Off for buffered I/O, where the page cache already absorbs allocation.
    enabled: bool,
    /// The last write was a small synced one.
    wanted: bool,
    file: Option<Arc<SegmentFile>>,
    /// End of the data written to `file`.
    written_end: u64,
    /// Everything below this offset of `file` is written (data or zeroes).
    frontier: u64,
    /// Zeroes go no further than this (the segment size).
    limit: u64,
    /// A job wrote data that no fdatasync covers yet: the next synced job must fdatasync, not
    /// write durably (which syncs only its own bytes). The log's jobs run in order and every
    /// segment ends with a synced seal, so such writes are always in the file being written.
    unsynced: bool,
    zeroes: Option<AlignedBuf>,
    mem_align: usize,
}

impl ZeroAhead {
    fn new(enabled: bool, mem_align: usize, limit: u64) -> ZeroAhead {
        ZeroAhead {
            enabled,
            wanted: false,
            file: None,
            written_end: 0,
            frontier: 0,
            limit,
            unsynced: false,
            zeroes: None,
            mem_align,
        }
    }

    /// Takes note of a job.
    fn wrote(&mut self, job: &Job) {
        if job.len == 0 {
            return; // a sync alone
        }
        self.unsynced |= !job.sync;
        self.wanted = job.sync && job.waited && job.len <= ZERO_AFTER_SYNC_OF_AT_MOST;
        let end = job.offset + job.len as u64;
        let same = self
            .file
            .as_ref()
            .is_some_and(|f| Arc::ptr_eq(f, &job.file));
        if job.seals {
            self.file = None;
        } else if !same {
            self.file = Some(job.file.clone());
            self.frontier = end;
        }
        self.written_end = end;
        self.frontier = self.frontier.max(end);
    }

    /// Whether [`ZeroAhead::step`] has something to do.
    fn wants_step(&self) -> bool {
        self.file.is_some()
            && self.enabled
            && self.wanted
            && self.frontier < (self.written_end + ZERO_WINDOW - ZERO_CHUNK).min(self.limit)
    }

    /// Zeroes one more chunk ahead if there is a reason to; returns whether it did anything.
    /// A failed zero write (a full disk, say) just stops the zero-ahead for this segment: no
    /// data is involved. A failed sync is reported, because it may concern data written before.
    fn step(&mut self) -> Result<bool> {
        if !self.wants_step() {
            return Ok(false);
        }
        let Some(file) = self.file.as_ref() else {
            return Ok(false);
        };
        let want = (self.written_end + ZERO_WINDOW).min(self.limit);
        let n = ZERO_CHUNK.min(want - self.frontier) as usize;
        let mem_align = self.mem_align;
        let zeroes = self
            .zeroes
            .get_or_insert_with(|| AlignedBuf::zeroed(ZERO_CHUNK as usize, mem_align));
        if file.write_all_at(&zeroes[..n], self.frontier).is_err() {
            self.file = None;
            return Ok(false);
        }
        file.sync_data()?;
        self.frontier += n as u64;
        Ok(true)
    }
}

fn flush_loop(jobs: Receiver<Msg>, io: Arc<IoOrder>) {
    loop {
        let msg = match jobs.try_recv() {
            Ok(msg) => msg,
            Err(TryRecvError::Disconnected) => return,
            Err(TryRecvError::Empty) => {
                // Idle: zero ahead, a chunk at a time so that a new job waits for one at most.
                if io.zero_step() {
                    continue;
                }
                match jobs.recv() {
                    Ok(msg) => msg,
                    Err(_) => return,
                }
            }
        };
        if let Msg::Job(job) = msg {
            io.run(&mut io.lock(), job);
        }
    }
}

/// The appender's side of the double buffer.
pub struct WriteBuffer {
    tail: Arc<Mutex<Tail>>,
    /// Zero padding that ended the last hand-off, not yet declared by a record.
    pad: u16,
    capacity: usize,
    block: u64,
    spare_rx: Receiver<AlignedBuf>,
    /// The spare, taken back from the flush thread by [`WriteBuffer::room_now`] before a
    /// hand-off needed it.
    held_spare: Option<AlignedBuf>,
    job_tx: Option<Sender<Msg>>,
    progress: Arc<Progress>,
    io: Arc<IoOrder>,
    /// Jobs with an fdatasync sent (or taken by their writer) so far.
    syncs_sent: u64,
}

impl WriteBuffer {
    /// File offset the next appended byte goes to.
    pub fn position(&self) -> u64 {
        let t = lock_tail(&self.tail);
        t.buf_offset + t.fill as u64
    }

    /// Write block size.
    pub fn block_size(&self) -> u64 {
        self.block
    }

    /// The zero padding between the last byte appended and the next one (left by a partial
    /// hand-off), to be declared in the next record's header; resets it.
    pub fn take_pad(&mut self) -> u16 {
        std::mem::take(&mut self.pad)
    }

    /// Directs further appends to `file` (segment `segment`), starting at offset 0. Everything
    /// appended before must have been submitted.
    pub fn start_segment(&mut self, segment: u64, file: Arc<SegmentFile>) {
        self.pad = 0;
        let mut t = lock_tail(&self.tail);
        debug_assert_eq!(t.fill, 0);
        t.target = Some((segment, file));
        t.buf_offset = 0;
    }

    /// Whether `len` more bytes can be appended now without waiting for the disk: they fit in
    /// the buffer being filled (and `hand_off` is false: nothing else needs the other buffer),
    /// or the other buffer is back from its write. A write that needs a buffer the flush thread
    /// still holds would wait for the device; [`Store::offer`](crate::Store::offer) drops it
    /// instead.
    pub fn room_now(&mut self, len: u64, hand_off: bool) -> bool {
        let fill = lock_tail(&self.tail).fill as u64;
        if !hand_off && fill + len <= self.capacity as u64 {
            return true;
        }
        if self.held_spare.is_none() {
            match self.spare_rx.try_recv() {
                Ok(spare) => self.held_spare = Some(spare),
                Err(_) => return false,
            }
        }
        true
    }

    /// Appends bytes, handing full buffers to the flush thread.
    pub fn append(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            let mut t = lock_tail(&self.tail);
            if t.fill == self.capacity {
                drop(t);
                self.hand_off(false, 0, false)?;
                continue;
            }
            let n = bytes.len().min(self.capacity - t.fill);
            let fill = t.fill;
            t.active[fill..fill + n].copy_from_slice(&bytes[..n]);
            t.fill += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Hands the segment's last bytes (its footer, which ends on a block boundary) to the flush
    /// thread with an fdatasync; the file is cut to their end.
    pub fn submit_seal(&mut self, durable_seq: u64) -> Result<()> {
        self.hand_off(true, durable_seq, true)
    }

    /// Hands everything appended so far to the flush thread, zero-padded to the block size, with
    /// an fdatasync when `sync`; log records up to `durable_seq` count as durable once it is
    /// done. With nothing appended since the last hand-off, sends a sync alone.
    pub fn submit(&mut self, sync: bool, durable_seq: u64) -> Result<()> {
        self.submit_as(sync, durable_seq, sync)
    }

    /// [`WriteBuffer::submit`] with an fdatasync that no write waits for (the store's own: the
    /// background flush, eviction, compaction): it does not start the zero-ahead.
    pub fn submit_quietly(&mut self, durable_seq: u64) -> Result<()> {
        self.submit_as(true, durable_seq, false)
    }

    /// [`WriteBuffer::submit`], the job's [`Job::waited`] given.
    fn submit_as(&mut self, sync: bool, durable_seq: u64, waited: bool) -> Result<()> {
        let (fill, target) = {
            let t = lock_tail(&self.tail);
            (t.fill, t.target.clone())
        };
        if fill > 0 {
            let mut job = self.take_buffer(sync, durable_seq, false)?;
            job.waited = waited;
            return self.send(job);
        }
        if !sync {
            return Ok(());
        }
        let Some((_, file)) = target else {
            // No log segment was written since open: every log record is already durable.
            let mut st = self.progress.lock();
            st.durable_seq = st.durable_seq.max(durable_seq);
            drop(st);
            self.progress.notify();
            return Ok(());
        };
        self.send(Job {
            buf: None,
            len: 0,
            file,
            offset: 0,
            sync,
            durable_seq,
            seals: false,
            waited,
        })
    }

    fn hand_off(&mut self, sync: bool, durable_seq: u64, seals: bool) -> Result<()> {
        let job = self.take_buffer(sync, durable_seq, seals)?;
        self.send(job)
    }

    /// Takes the buffer being filled for a job: zero-padded to the block size, swapped for the
    /// spare (waiting for it), and listed in the tail until it is written.
    fn take_buffer(&mut self, sync: bool, durable_seq: u64, seals: bool) -> Result<Job> {
        // Wait for the other buffer without holding the tail lock: readers keep going.
        let next = match self.held_spare.take() {
            Some(spare) => spare,
            None => self.spare_rx.recv().map_err(|_| Error::Poisoned)?,
        };
        let mut t = lock_tail(&self.tail);
        let (segment, file) = t.target.clone().ok_or(Error::Poisoned)?;
        let len = align_up(t.fill as u64, self.block) as usize;
        // Padding must be zero: recovery reads a zero run to the end of a block as the end of a
        // group, and checks its length against the next record's `pad_before`.
        let fill = t.fill;
        self.pad = (len - fill) as u16;
        t.active[fill..len].fill(0);
        let full = Arc::new(std::mem::replace(&mut t.active, next));
        let offset = t.buf_offset;
        t.inflight.push(InFlight {
            segment,
            offset,
            len,
            buf: full.clone(),
        });
        t.buf_offset += len as u64;
        t.fill = 0;
        Ok(Job {
            buf: Some(full),
            len,
            file,
            offset,
            sync,
            durable_seq,
            seals,
            waited: sync,
        })
    }

    /// The I/O order: taken by a writer that writes its own group (see
    /// [`WriteBuffer::take_own_group`]).
    pub fn io_order(&self) -> Arc<IoOrder> {
        self.io.clone()
    }

    /// The lone writer's fast path: takes everything appended so far as a synced job for the
    /// calling thread to run ([`IoOrder::run`]) with `turn`, instead of handing it to the flush
    /// thread. The caller holds `turn` (so no log I/O runs) and has seen no job in flight (so
    /// every earlier job is done): running this job now keeps the hand-off order. `None` when
    /// nothing was appended since the last hand-off.
    pub fn take_own_group(&mut self, _turn: &IoTurn<'_>, durable_seq: u64) -> Result<Option<Job>> {
        if lock_tail(&self.tail).fill == 0 {
            return Ok(None);
        }
        if let Some(e) = self.failure() {
            return Err(e);
        }
        let job = self.take_buffer(true, durable_seq, false)?;
        self.progress.lock().inflight += 1;
        self.syncs_sent += 1;
        Ok(Some(job))
    }

    /// Asks the flush thread to look for zero-ahead work (after a writer wrote its own group).
    pub fn wake_flusher(&self) {
        if let Some(tx) = &self.job_tx {
            let _ = tx.send(Msg::Wake);
        }
    }

    /// Sends a job. On a poisoned store the job is still sent, so that the flush thread hands
    /// its buffer back (it writes nothing after a failure), and the failure is returned.
    fn send(&mut self, job: Job) -> Result<()> {
        let tx = self.job_tx.as_ref().ok_or(Error::Poisoned)?;
        let failure = {
            let mut st = self.progress.lock();
            st.inflight += 1;
            st.failure
        };
        let sync = job.sync;
        if tx.send(Msg::Job(job)).is_err() {
            self.progress.lock().inflight -= 1;
            return Err(Error::Poisoned);
        }
        if sync {
            self.syncs_sent += 1;
        }
        match failure {
            Some(f) => Err(f.to_error()),
            None => Ok(()),
        }
    }

    /// The failure that poisoned the store, as the error to return to a writer.
    pub fn failure(&self) -> Option<Error> {
        self.progress.lock().failure.map(FailureKind::to_error)
    }

    /// The number of synced jobs sent so far: once [`ProgressState::syncs_done`] reaches it,
    /// every byte appended before the last synced hand-off is on stable storage (jobs run in
    /// order). Unlike `durable_seq`, this also covers records that reuse an old sequence
    /// number (copies made by compaction).
    pub fn sync_ticket(&self) -> u64 {
        self.syncs_sent
    }

    /// Stops the flush thread once the jobs already sent are done; no more can be sent.
    pub fn shut_down(&mut self) {
        self.job_tx = None;
    }
}

impl crate::format::Sink for WriteBuffer {
    type Error = Error;
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.append(bytes)
    }
}
