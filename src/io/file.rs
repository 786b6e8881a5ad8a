//! File operations: opening segments with or without O_DIRECT, finding the direct-I/O
//! alignment, positional reads and writes, syncs, the directory lock.
//!
//! Every syscall the store makes on its files goes through this module.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FlockOperation, OFlags, StatxFlags};

use super::aligned::{AlignedBuf, BufPool};
use crate::error::{Error, Result};
use crate::format::{align_down, align_up};
use crate::options::IoMode;

/// What the file system of the store directory supports, found once at open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoProfile {
    /// O_DIRECT in use.
    pub direct: bool,
    /// Required alignment of buffer addresses (at least the page size, 4096).
    pub mem_align: usize,
    /// Required alignment of offsets and lengths of direct reads (1 when buffered).
    pub read_align: u64,
    /// Write block size: every write starts and ends on a multiple of it. The larger of the
    /// direct-I/O offset alignment and the file system block size, so that no block that holds
    /// acknowledged data is ever written again (see docs/design.md, "The write path").
    pub block_size: u32,
}

const PROBE_NAME: &str = ".podstore-probe";

/// Finds out whether O_DIRECT works in `dir` and with which alignment.
pub fn probe(dir: &Path, mode: IoMode) -> Result<IoProfile> {
    let path = dir.join(PROBE_NAME);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| Error::io("create probe file", Some(path.clone()), e))?;
    let (mem, offset, fs_block) = dio_alignment(&file);
    drop(file);
    let block_size = offset.max(fs_block).clamp(512, 65536).next_power_of_two();
    let direct = match mode {
        IoMode::Buffered => false,
        IoMode::Auto | IoMode::Direct => direct_write_works(&path, block_size as usize),
    };
    let _ = fs::remove_file(&path);
    if mode == IoMode::Direct && !direct {
        return Err(Error::DirectIoUnsupported {
            path: dir.to_path_buf(),
        });
    }
    Ok(IoProfile {
        direct,
        mem_align: (mem as usize).max(4096).next_power_of_two(),
        read_align: if direct {
            // statx reports nothing on some file systems (tmpfs) that still take O_DIRECT:
            // fall back to the block size, which every such file system accepts.
            if offset == 0 {
                block_size as u64
            } else {
                offset as u64
            }
        } else {
            1
        },
        block_size,
    })
}

/// (memory alignment, offset alignment, file system block size) as statx reports them; zeroes
/// where the kernel or file system does not say.
fn dio_alignment(file: &File) -> (u32, u32, u32) {
    match rustix::fs::statx(
        file,
        "",
        AtFlags::EMPTY_PATH,
        StatxFlags::DIOALIGN | StatxFlags::BASIC_STATS,
    ) {
        Ok(st) => {
            let has_dio = StatxFlags::from_bits_retain(st.stx_mask).contains(StatxFlags::DIOALIGN);
            let (mem, off) = if has_dio {
                (st.stx_dio_mem_align, st.stx_dio_offset_align)
            } else {
                (0, 0)
            };
            (mem, off, st.stx_blksize)
        }
        Err(_) => (0, 0, 4096),
    }
}

fn direct_write_works(path: &Path, block: usize) -> bool {
    let Ok(file) = OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::DIRECT.bits() as i32)
        .open(path)
    else {
        return false;
    };
    let buf = AlignedBuf::zeroed(block, block.max(4096));
    file.write_all_at(&buf, 0).is_ok()
}

/// One segment file, opened for positional reads and writes.
#[derive(Debug)]
pub struct SegmentFile {
    file: File,
    path: PathBuf,
    direct: bool,
}

impl SegmentFile {
    fn options(direct: bool) -> OpenOptions {
        let mut o = OpenOptions::new();
        o.read(true).write(true);
        if direct {
            o.custom_flags(OFlags::DIRECT.bits() as i32);
        }
        o
    }

    /// Creates a new file; fails if it exists.
    pub fn create(path: &Path, direct: bool) -> Result<SegmentFile> {
        let file = Self::options(direct)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create segment", Some(path.to_path_buf()), e))?;
        Ok(SegmentFile {
            file,
            path: path.to_path_buf(),
            direct,
        })
    }

    /// Opens an existing file.
    pub fn open(path: &Path, direct: bool) -> Result<SegmentFile> {
        let file = Self::options(direct)
            .open(path)
            .map_err(|e| Error::io("open segment", Some(path.to_path_buf()), e))?;
        Ok(SegmentFile {
            file,
            path: path.to_path_buf(),
            direct,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Current length of the file.
    pub fn len(&self) -> Result<u64> {
        self.file
            .metadata()
            .map(|m| m.len())
            .map_err(|e| self.err("stat segment", e))
    }

    /// Writes all of `data` at `offset`. With O_DIRECT, `data`'s address, length and `offset`
    /// must be aligned (the writer guarantees it by construction).
    pub fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        self.file
            .write_all_at(data, offset)
            .map_err(|e| self.err("write segment", e))
    }

    /// fdatasync.
    pub fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| self.err("sync segment", e))
    }

    /// Sets the file length (the seal cuts off the zeroes written ahead of the data).
    pub fn set_len(&self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| self.err("truncate segment", e))
    }

    /// Reads exactly `dst.len()` bytes at `offset`. With O_DIRECT the read is widened to the
    /// alignment and bounced through `pool`'s buffers, so it reads only the aligned blocks that
    /// cover the range. A read past the end of the file fails with `UnexpectedEof`.
    pub fn read_exact_at(
        &self,
        offset: u64,
        dst: &mut [u8],
        pool: &BufPool,
        read_align: u64,
    ) -> io::Result<()> {
        if !self.direct {
            return self.file.read_exact_at(dst, offset);
        }
        let end = offset + dst.len() as u64;
        let mut pos = offset;
        let span = align_up(end, read_align) - align_down(offset, read_align);
        let mut bounce = pool.get_for(usize::try_from(span).unwrap_or(usize::MAX));
        let cap = bounce.len() as u64;
        while pos < end {
            let start = align_down(pos, read_align);
            let stop = align_up(end, read_align).min(start + cap);
            let want = (stop - start) as usize;
            let got = read_full(&self.file, &mut bounce[..want], start)?;
            let avail_end = start + got as u64;
            let take_end = end.min(stop).min(avail_end);
            if take_end <= pos {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let from = (pos - start) as usize;
            let to = (take_end - start) as usize;
            let d_from = (pos - offset) as usize;
            dst[d_from..d_from + (to - from)].copy_from_slice(&bounce[from..to]);
            pos = take_end;
        }
        Ok(())
    }

    fn err(&self, op: &'static str, e: io::Error) -> Error {
        Error::io(op, Some(self.path.clone()), e)
    }
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// fsync of a directory, making creations and removals of its entries durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("sync store directory", Some(dir.to_path_buf()), e))
}

/// Removes a file and makes the removal durable.
pub fn remove_durably(dir: &Path, path: &Path) -> Result<()> {
    fs::remove_file(path).map_err(|e| Error::io("remove segment", Some(path.to_path_buf()), e))?;
    sync_dir(dir)
}

/// An exclusive lock on a store directory, held for the life of a `Store` (flock on `LOCK`).
/// flock locks belong to the open file description, so a second `Store` in the same process is
/// refused just like one in another process.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

/// Retries of a refused lock, 2 ms apart, before `Error::Locked`.
const LOCK_RETRIES: u32 = 25;

/// Name of the lock file inside the store directory.
pub const LOCK_NAME: &str = "LOCK";

impl DirLock {
    /// Takes the lock or fails with [`Error::Locked`].
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join(LOCK_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open lock file", Some(path.clone()), e))?;
        // A child process forked by any thread holds a copy of every descriptor until it execs
        // (close-on-exec), and with it the lock of a store that was just closed. That lasts
        // microseconds: retry briefly before calling the directory locked.
        for attempt in 0..=LOCK_RETRIES {
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(DirLock { _file: file }),
                Err(rustix::io::Errno::WOULDBLOCK) if attempt < LOCK_RETRIES => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err(rustix::io::Errno::WOULDBLOCK) => break,
                Err(e) => return Err(Error::io("lock store directory", Some(path), e.into())),
            }
        }
        Err(Error::Locked {
            path: dir.to_path_buf(),
        })
    }
}
