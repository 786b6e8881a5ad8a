//! Reads of one file issued together through io_uring, for [`StorageFile::read_each`] of a real
//! file: a range read of a large value whose record header (the key check), chunk crcs and
//! chunks lie apart in its file asks for all of them at once, and waits for one device round
//! trip instead of one per read (docs/design.md, "Reads issued together").
//!
//! The rings are kept in a small pool shared by every store of the process (a ring is a file
//! descriptor and a few pages of shared memory; creating one is a system call and two `mmap`s,
//! as long as a device read): a batch takes a ring, submits its reads, waits for all of them and
//! gives the ring back. Where io_uring is not there (an old kernel, `io_uring_disabled`, a
//! seccomp filter that refuses it, as containers' default profiles do), the first failed setup
//! turns it off for the process and [`read_each`] answers `None`: the caller reads one read
//! after the other, as before.
//!
//! [`StorageFile::read_each`]: super::storage::StorageFile::read_each

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use io_uring::{IoUring, opcode, types};
use rustix::io::Errno;

use super::aligned::AlignedBuf;
use super::storage::ReadAt;

/// Reads a batch may hold (a range read needs three: header, crcs, chunks).
pub const MAX_BATCH: usize = 8;

/// Rings kept for reuse; more threads reading at once create more, dropped after use.
const KEPT_RINGS: usize = 16;

static RINGS: Mutex<Vec<IoUring>> = Mutex::new(Vec::new());

/// Set once a ring could not be created: io_uring is not available to this process.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);

/// Reads each of `reads` from `fd` at once, setting its `got` (or its `error`): `None` if
/// io_uring is not available or the batch is larger than [`MAX_BATCH`] (nothing was read).
/// `Some(Err)` only when the ring itself failed; a failed read is reported in its own `error`.
pub fn read_each(fd: BorrowedFd<'_>, reads: &mut [ReadAt]) -> Option<io::Result<()>> {
    if reads.is_empty() || reads.len() > MAX_BATCH || UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    let pooled = RINGS.lock().unwrap_or_else(|p| p.into_inner()).pop();
    let mut ring = match pooled {
        Some(ring) => ring,
        None => match IoUring::new(MAX_BATCH as u32) {
            Ok(ring) => ring,
            Err(e) => {
                log::info!(
                    "io_uring is not available ({e}); the parts of a range read are read one after the other"
                );
                UNAVAILABLE.store(true, Ordering::Relaxed);
                return None;
            }
        },
    };
    match submit_and_collect(&mut ring, fd, reads) {
        Ok(()) => {
            let mut rings = RINGS.lock().unwrap_or_else(|p| p.into_inner());
            if rings.len() < KEPT_RINGS {
                rings.push(ring);
            }
            Some(Ok(()))
        }
        Err(e) => {
            // Reads may still be in flight: the kernel may write into their buffers after this
            // returns, and closing the ring does not wait for them. Neither the buffers nor the
            // ring are ever freed (a ring that fails to wait is broken; this does not happen
            // with a ring of our own size and a batch that fits it).
            for r in reads.iter_mut() {
                std::mem::forget(std::mem::replace(&mut r.buf, AlignedBuf::zeroed(1, 1)));
                r.got = 0;
            }
            std::mem::forget(ring);
            Some(Err(e))
        }
    }
}

/// Submits `reads` to `ring` (empty: none of its entries in flight) and waits for every one of
/// them to complete.
fn submit_and_collect(
    ring: &mut IoUring,
    fd: BorrowedFd<'_>,
    reads: &mut [ReadAt],
) -> io::Result<()> {
    let n = reads.len();
    {
        let mut sq = ring.submission();
        for (i, r) in reads.iter_mut().enumerate() {
            let len = u32::try_from(r.len).map_err(|_| io::ErrorKind::InvalidInput)?;
            let buf = &mut r.buf[..r.len];
            let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), buf.as_mut_ptr(), len)
                .offset(r.offset)
                .build()
                .user_data(i as u64);
            // SAFETY: the entry points at `r.buf[..r.len]`, memory this function borrows
            // mutably (through `reads`) until it returns, and `fd` is borrowed as long. It
            // returns `Ok` only once every entry pushed here has completed (the loop below);
            // on `Err` its caller leaks every buffer and the ring, so a read still in flight
            // never writes into freed memory. The ring was empty (pooled rings are returned
            // only after all their reads completed) and has `MAX_BATCH >= n` entries, so the
            // push does not fail for want of room.
            unsafe { sq.push(&entry) }.map_err(|_| io::Error::other("io_uring queue full"))?;
        }
    }
    let mut done = 0;
    let mut seen = [false; MAX_BATCH];
    while done < n {
        match ring.submit_and_wait(n - done) {
            Ok(_) => {}
            // Interrupted, or short of kernel resources for a moment: wait again.
            Err(e)
                if [Errno::INTR, Errno::AGAIN, Errno::BUSY]
                    .iter()
                    .any(|x| e.raw_os_error() == Some(x.raw_os_error())) => {}
            Err(e) => return Err(e),
        }
        for cqe in ring.completion() {
            let i = cqe.user_data() as usize;
            if i >= n || seen[i] {
                return Err(io::Error::other(
                    "io_uring completion for no read of this batch",
                ));
            }
            seen[i] = true;
            done += 1;
            let res = cqe.result();
            if res < 0 {
                reads[i].error = Some(io::Error::from_raw_os_error(-res));
            } else {
                reads[i].got = res as usize;
            }
        }
    }
    Ok(())
}
