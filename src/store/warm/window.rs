//! The warm-up's reads ([`Window`]): a buffer of the file being walked, and the next read made
//! ahead on a thread of its own ([`ReadAhead`]) while the walk goes through the buffer, so that
//! the walk does not wait for the disk between reads and the disk reads a segment without a gap.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, Sender};
use std::thread::JoinHandle;

use super::{WARM_READ, WarmFigures};
use crate::format::{align_down, align_up};
use crate::io::aligned::AlignedBuf;
use crate::io::file::SegmentFile;

/// Bytes of the read buffer's end that the next read, made ahead, reads again: more than the
/// longest span of a record the walk reads at once (its header and a key of at most
/// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes; a record it keeps whole: that, a value of at most
/// 4 KiB and its chunk crcs), plus an alignment, so that a span that does not fit in one read
/// starts in the next.
pub(super) const READ_OVERLAP: u64 = 64 << 10;

/// The read buffer, and which bytes of the file being walked it holds.
pub(super) struct Window {
    /// Allocated at the first read (a store with no segment needs none).
    buf: Option<AlignedBuf>,
    /// The id of the file whose bytes `buf` holds.
    pub(super) file: u64,
    /// The file bytes `buf` holds: `[at.0, at.0 + at.1)`.
    pub(super) at: (u64, usize),
    /// The next read, made ahead on a thread of its own while the walk goes through `buf`
    /// (started at the first read; `None` if the thread could not be started: every read is
    /// then made when it is needed).
    pub(super) ahead: Option<ReadAhead>,
    /// Where reads made ahead stop (the end of the part of a segment being walked, and the
    /// overlap past it): a part's walk does not read ahead into the next part.
    pub(super) limit: u64,
    pub(super) read_align: u64,
    pub(super) mem_align: usize,
    figures: Arc<WarmFigures>,
}

impl Window {
    /// A window with no buffer yet, reading in multiples of `read_align` bytes into memory
    /// aligned to `mem_align`, counting what it reads in `figures`.
    pub(super) fn new(read_align: u64, mem_align: usize, figures: Arc<WarmFigures>) -> Window {
        Window {
            buf: None,
            file: 0,
            at: (0, 0),
            ahead: None,
            limit: u64::MAX,
            read_align,
            mem_align,
            figures,
        }
    }

    /// File bytes `[at, at + len)`, from the buffer or read into it, reading nothing at or past
    /// `end` but the alignment's slack; `None` if the file is shorter.
    pub(super) fn bytes(
        &mut self,
        file: &Arc<SegmentFile>,
        at: u64,
        len: usize,
        end: u64,
    ) -> io::Result<Option<&[u8]>> {
        let (start, held) = self.at;
        if at >= start && at + len as u64 <= start + held as u64 {
            let from = (at - start) as usize;
            let buf = self
                .buf
                .as_ref()
                .expect("a window is held only after a read");
            return Ok(Some(&buf[from..from + len]));
        }
        let align = self.read_align;
        let from = align_down(at, align);
        let want = (align_up(end.max(at + len as u64), align) - from).min(WARM_READ as u64);
        if (at - from) as usize + len > want as usize {
            // Longer than a read (a record the walk keeps is never).
            return Ok(None);
        }
        if !self.take_ahead(at, len)? {
            let mem_align = self.mem_align;
            let buf = self
                .buf
                .get_or_insert_with(|| AlignedBuf::zeroed(WARM_READ, mem_align));
            self.at = (from, 0);
            let got = file.read_at_most(from, &mut buf[..want as usize], align)?;
            self.figures.read.fetch_add(got as u64, Ordering::Relaxed);
            self.at = (from, got);
        }
        self.read_next(file, end);
        let (from, got) = self.at;
        let skip = (at - from) as usize;
        let buf = self.buf.as_ref().expect("read just now");
        Ok((skip + len <= got).then(|| &buf[skip..skip + len]))
    }

    /// Waits for the read made ahead, if one is on its way, and makes it the window if it holds
    /// `[at, at + len)` of the file being walked: true then. Otherwise its buffer is kept for
    /// the next read ahead (a walk that jumped past it: a large record stepped over).
    fn take_ahead(&mut self, at: u64, len: usize) -> io::Result<bool> {
        let Some(ahead) = &mut self.ahead else {
            return Ok(false);
        };
        let Some((file, from)) = ahead.pending.take() else {
            return Ok(false);
        };
        let Ok(Filled { buf, got }) = ahead.done.recv() else {
            // The thread is gone (it panicked): read as if it had never been started.
            self.ahead = None;
            return Ok(false);
        };
        // A read ahead that failed is dropped: the walk reads what it needs itself, and a
        // failure that matters is then reported for the file and place it is read from.
        let got = got.unwrap_or(0);
        self.figures.read.fetch_add(got as u64, Ordering::Relaxed);
        if file != self.file || at < from || at + len as u64 > from + got as u64 {
            ahead.spare = Some(buf);
            return Ok(false);
        }
        ahead.spare = self.buf.replace(buf);
        self.at = (from, got);
        Ok(true)
    }

    /// Starts reading, on the read-ahead thread, the bytes after the window (from a little
    /// before its end, [`READ_OVERLAP`]) up to `end` (the file's data end) or the window's
    /// `limit`, if the window does not reach it.
    fn read_next(&mut self, file: &Arc<SegmentFile>, end: u64) {
        let (start, held) = self.at;
        let align = self.read_align;
        let (held_end, end) = (start + held as u64, align_up(end.min(self.limit), align));
        if held_end >= end || (held as u64) < 2 * READ_OVERLAP {
            return;
        }
        let from = align_down(held_end - READ_OVERLAP, align);
        let len = (end - from).min(WARM_READ as u64) as usize;
        if self.ahead.is_none() {
            self.ahead = ReadAhead::start();
            if self.ahead.is_none() {
                return;
            }
        }
        let mem_align = self.mem_align;
        let ahead = self.ahead.as_mut().expect("started above");
        let buf = ahead
            .spare
            .take()
            .unwrap_or_else(|| AlignedBuf::zeroed(WARM_READ, mem_align));
        let job = Job {
            file: file.clone(),
            from,
            len,
            align,
            buf,
        };
        match ahead.jobs.as_ref().map(|jobs| jobs.send(job)) {
            Some(Ok(())) => ahead.pending = Some((self.file, from)),
            // The thread is gone: every read is made when it is needed from now on.
            _ => self.ahead = None,
        }
    }
}

/// The thread that reads the walk's next bytes while it goes through the ones it has: the walk
/// does not wait for the disk between two reads (a 4 MiB read is 4-6 ms here; walking what it
/// holds, 5-10 ms of CPU), and the disk reads the segments without a gap.
pub(super) struct ReadAhead {
    /// `None` once it is dropped: closing the channel ends the thread.
    jobs: Option<Sender<Job>>,
    done: Receiver<Filled>,
    handle: Option<JoinHandle<()>>,
    /// The read on its way: the id of its file and its offset.
    pending: Option<(u64, u64)>,
    /// The buffer no read uses: the next read ahead's.
    spare: Option<AlignedBuf>,
}

/// A read for [`ReadAhead`]'s thread: `len` bytes of `file` at `from` into `buf`.
struct Job {
    file: Arc<SegmentFile>,
    from: u64,
    len: usize,
    align: u64,
    buf: AlignedBuf,
}

/// A [`Job`] done: its buffer and how many bytes it read (fewer at the file's end).
struct Filled {
    buf: AlignedBuf,
    got: io::Result<usize>,
}

impl ReadAhead {
    /// Starts the thread; `None` if it cannot be started.
    fn start() -> Option<ReadAhead> {
        let (jobs, todo) = std::sync::mpsc::channel::<Job>();
        let (filled, done) = std::sync::mpsc::channel();
        let handle = std::thread::Builder::new()
            .name("podstore-warm-read".into())
            .spawn(move || {
                for Job {
                    file,
                    from,
                    len,
                    align,
                    mut buf,
                } in todo
                {
                    let got = file.read_at_most(from, &mut buf[..len], align);
                    if filled.send(Filled { buf, got }).is_err() {
                        break;
                    }
                }
            });
        match handle {
            Ok(handle) => Some(ReadAhead {
                jobs: Some(jobs),
                done,
                handle: Some(handle),
                pending: None,
                spare: None,
            }),
            Err(e) => {
                log::debug!("podstore: warm-up: no read-ahead thread ({e}); reading as it goes");
                None
            }
        }
    }
}

impl Drop for ReadAhead {
    /// Ends the thread (after the read on its way) and waits for it.
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
