//! The double-buffered writer.
//!
//! Two aligned buffers exist per store. The appender (under the store's append lock) copies
//! records into one; a full buffer, or a partly filled one that a durable write needs on disk,
//! is handed by value to the flush thread together with its file offset. The flush thread
//! writes it (and fdatasyncs when asked), then hands the buffer back through a channel. No
//! buffer is ever shared mutably: ownership moves with the job.
//!
//! Alignment by construction: a buffer always starts at a block-aligned file offset and is
//! written as a whole number of blocks, so address (the buffer is aligned), offset and length
//! are all multiples of the block size. A partly filled buffer is zero-padded to the next block
//! boundary and the next buffer starts after the padding: a block that holds acknowledged data
//! is never written a second time.

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::aligned::AlignedBuf;
use super::file::SegmentFile;
use crate::error::{Error, Result};
use crate::format::align_up;

/// What the flush thread has done so far; shared with every writer and reader.
#[derive(Debug)]
pub struct ProgressState {
    /// Every segment with a smaller id is completely written (and sealed or abandoned).
    pub written_segment: u64,
    /// Bytes of `written_segment` written so far (to the page cache or, with O_DIRECT, to disk).
    pub written_end: u64,
    /// Every record with a sequence number up to this is on stable storage and published.
    pub durable_seq: u64,
    /// Jobs handed to the flush thread and not yet finished.
    pub inflight: usize,
    /// The first failed write or sync: the store is poisoned from then on.
    pub failure: Option<FailureKind>,
}

/// The kind of the failure that poisoned the store, kept to answer later callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The disk was full.
    StorageFull,
    /// Any other I/O error.
    Io,
}

impl FailureKind {
    fn of(e: &Error) -> FailureKind {
        match e {
            Error::StorageFull { .. } => FailureKind::StorageFull,
            _ => FailureKind::Io,
        }
    }

    /// The error returned to writers that find the store poisoned. Those whose own write
    /// failed with a full disk learn so; every later caller gets [`Error::Poisoned`].
    pub fn to_error(self) -> Error {
        match self {
            FailureKind::StorageFull => Error::StorageFull { path: None },
            FailureKind::Io => Error::Poisoned,
        }
    }
}

/// [`ProgressState`] with the condition variable that announces every change of it.
#[derive(Debug)]
pub struct Progress {
    state: Mutex<ProgressState>,
    changed: Condvar,
}

impl Progress {
    /// Progress of a store whose existing segments (ids below `next_segment`) are all on disk
    /// and whose records up to `durable_seq` are durable.
    pub fn new(next_segment: u64, durable_seq: u64) -> Progress {
        Progress {
            state: Mutex::new(ProgressState {
                written_segment: next_segment,
                written_end: 0,
                durable_seq,
                inflight: 0,
                failure: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// Locks the state.
    pub fn lock(&self) -> MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the next change of the state.
    pub fn wait<'a>(&self, guard: MutexGuard<'a, ProgressState>) -> MutexGuard<'a, ProgressState> {
        self.changed.wait(guard).unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.notify_all();
    }

    /// True when bytes `[.., end)` of `segment` have been written.
    pub fn is_written(state: &ProgressState, segment: u64, end: u64) -> bool {
        segment < state.written_segment
            || (segment == state.written_segment && end <= state.written_end)
    }
}

/// A unit of work for the flush thread.
struct Job {
    /// The buffer to write (None for a sync without new data).
    buf: Option<AlignedBuf>,
    /// Bytes of `buf` to write: a multiple of the block size.
    len: usize,
    file: Arc<SegmentFile>,
    segment: u64,
    offset: u64,
    /// fdatasync after the write.
    sync: bool,
    /// With `sync`: every record up to this sequence number is complete in this or an earlier job.
    durable_seq: u64,
}

/// Called by the flush thread once records up to a sequence number are durable, before waiters
/// are told: the store publishes them to its index here.
pub type OnDurable = Box<dyn Fn(u64) + Send>;

/// Starts the flush thread. Returns the appender's end of the double buffer and the thread.
pub fn start(
    buffer_size: usize,
    mem_align: usize,
    block_size: u64,
    progress: Arc<Progress>,
    on_durable: OnDurable,
) -> Result<(WriteBuffer, JoinHandle<()>)> {
    let (job_tx, job_rx) = channel::<Job>();
    let (spare_tx, spare_rx) = channel::<AlignedBuf>();
    let size = align_up(buffer_size as u64, block_size) as usize;
    spare_tx
        .send(AlignedBuf::zeroed(size, mem_align))
        .expect("receiver alive");
    let thread_progress = progress.clone();
    let handle = std::thread::Builder::new()
        .name("podstore-flush".into())
        .spawn(move || flush_loop(job_rx, spare_tx, thread_progress, on_durable))
        .map_err(|e| Error::io("start flush thread", None, e))?;
    Ok((
        WriteBuffer {
            buf: AlignedBuf::zeroed(size, mem_align),
            fill: 0,
            buf_offset: 0,
            target: None,
            block: block_size,
            spare_rx,
            job_tx: Some(job_tx),
            progress,
        },
        handle,
    ))
}

fn flush_loop(
    jobs: Receiver<Job>,
    spare: Sender<AlignedBuf>,
    progress: Arc<Progress>,
    on_durable: OnDurable,
) {
    for job in jobs {
        let mut result = Ok(());
        if let Some(buf) = &job.buf {
            result = job.file.write_all_at(&buf[..job.len], job.offset);
        }
        if result.is_ok() && job.sync {
            result = job.file.sync_data();
        }
        if result.is_ok() && job.sync {
            on_durable(job.durable_seq);
        }
        if let Some(buf) = job.buf {
            // The appender may be blocked waiting for this buffer; it must be back before the
            // job counts as finished.
            let _ = spare.send(buf);
        }
        let mut st = progress.lock();
        match result {
            Ok(()) => {
                st.written_segment = job.segment;
                st.written_end = job.offset + job.len as u64;
                if job.sync {
                    st.durable_seq = st.durable_seq.max(job.durable_seq);
                }
            }
            Err(e) => {
                st.failure.get_or_insert(FailureKind::of(&e));
            }
        }
        st.inflight -= 1;
        drop(st);
        progress.notify();
    }
}

/// The appender's side of the double buffer: the buffer being filled and where it goes.
pub struct WriteBuffer {
    buf: AlignedBuf,
    /// Bytes of `buf` filled.
    fill: usize,
    /// File offset of `buf[0]`: always a multiple of the block size.
    buf_offset: u64,
    /// The segment being written.
    target: Option<(u64, Arc<SegmentFile>)>,
    block: u64,
    spare_rx: Receiver<AlignedBuf>,
    job_tx: Option<Sender<Job>>,
    progress: Arc<Progress>,
}

impl WriteBuffer {
    /// File offset the next appended byte goes to.
    pub fn position(&self) -> u64 {
        self.buf_offset + self.fill as u64
    }

    /// Write block size.
    pub fn block_size(&self) -> u64 {
        self.block
    }

    /// Directs further appends to `file` (segment `segment`), starting at offset 0. Everything
    /// appended before must have been submitted.
    pub fn start_segment(&mut self, segment: u64, file: Arc<SegmentFile>) {
        debug_assert_eq!(self.fill, 0);
        self.target = Some((segment, file));
        self.buf_offset = 0;
    }

    /// Appends bytes, handing full buffers to the flush thread.
    pub fn append(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.fill == self.buf.len() {
                self.hand_off(false, 0)?;
            }
            let n = bytes.len().min(self.buf.len() - self.fill);
            self.buf[self.fill..self.fill + n].copy_from_slice(&bytes[..n]);
            self.fill += n;
            bytes = &bytes[n..];
        }
        Ok(())
    }

    /// Hands everything appended so far to the flush thread, zero-padded to the block size, with
    /// an fdatasync when `sync`; records up to `durable_seq` count as durable once it is done.
    /// With nothing appended since the last hand-off, sends a sync alone.
    pub fn submit(&mut self, sync: bool, durable_seq: u64) -> Result<()> {
        if self.fill == 0 {
            if !sync {
                return Ok(());
            }
            let (segment, file) = self.target.clone().ok_or(Error::Poisoned)?;
            return self.send(Job {
                buf: None,
                len: 0,
                file,
                segment,
                offset: self.buf_offset,
                sync,
                durable_seq,
            });
        }
        self.hand_off(sync, durable_seq)
    }

    fn hand_off(&mut self, sync: bool, durable_seq: u64) -> Result<()> {
        let (segment, file) = self.target.clone().ok_or(Error::Poisoned)?;
        let len = align_up(self.fill as u64, self.block) as usize;
        // Padding must be zero: recovery reads a zero run inside a block as the end of a group.
        self.buf[self.fill..len].fill(0);
        let next = self.spare_rx.recv().map_err(|_| Error::Poisoned)?;
        let full = std::mem::replace(&mut self.buf, next);
        let offset = self.buf_offset;
        self.buf_offset += len as u64;
        self.fill = 0;
        self.send(Job {
            buf: Some(full),
            len,
            file,
            segment,
            offset,
            sync,
            durable_seq,
        })
    }

    fn send(&mut self, job: Job) -> Result<()> {
        let tx = self.job_tx.as_ref().ok_or(Error::Poisoned)?;
        {
            let mut st = self.progress.lock();
            if let Some(f) = st.failure {
                return Err(f.to_error());
            }
            st.inflight += 1;
        }
        if tx.send(job).is_err() {
            self.progress.lock().inflight -= 1;
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    /// Copies bytes `[offset, offset + dst.len())` of `segment` out of the buffer being filled,
    /// if they are all there.
    pub fn copy_out(&self, segment: u64, offset: u64, dst: &mut [u8]) -> bool {
        match &self.target {
            Some((s, _)) if *s == segment => {}
            _ => return false,
        }
        if offset < self.buf_offset || offset + dst.len() as u64 > self.position() {
            return false;
        }
        let from = (offset - self.buf_offset) as usize;
        dst.copy_from_slice(&self.buf[from..from + dst.len()]);
        true
    }

    /// Stops the flush thread once the jobs already sent are done; no more can be sent.
    pub fn shut_down(&mut self) {
        self.job_tx = None;
    }
}
