//! The storage seam: every file-system call the store makes goes through [`Storage`] (directory
//! level: open, create, remove, rename, list, directory fsync, the lock, the direct-I/O probe)
//! and [`StorageFile`] (one open file: positional read and write, a write durable on return,
//! fdatasync, length, set_len).
//!
//! [`RealStorage`] is the operating system (std and rustix). Tests substitute an in-memory
//! backend that simulates power loss and injects I/O errors (`crate::io::sim`). The seam
//! speaks `io::Error`: the callers in `io::file` wrap errors into the store's [`Error`]
//! (so that ENOSPC becomes [`Error::StorageFull`] whatever the backend).
//!
//! [`Error`]: crate::Error
//! [`Error::StorageFull`]: crate::Error::StorageFull

use std::any::Any;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::aligned::AlignedBuf;
use rustix::fs::{AtFlags, FlockOperation, OFlags, StatxFlags};
use rustix::io::ReadWriteFlags;

/// How [`Storage::open`] opens a file: for reading and writing, but for [`OpenMode::ReadOnly`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    /// The file must exist.
    Existing,
    /// The file must not exist (O_CREAT | O_EXCL).
    CreateNew,
    /// The file must exist; opened for reading only (a read-only store).
    ReadOnly,
}

/// What the direct-I/O probe found in a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectProbe {
    /// Required alignment of buffer addresses for O_DIRECT (0: not reported).
    pub mem_align: u32,
    /// Required alignment of offsets and lengths for O_DIRECT (0: not reported).
    pub offset_align: u32,
    /// File system block size.
    pub fs_block: u32,
    /// The file system takes O_DIRECT: an O_DIRECT open succeeded (the kernel refuses it at
    /// open, with EINVAL, where the file system cannot do direct I/O). False when not tried.
    pub direct_works: bool,
}

/// A held directory lock; released when dropped.
pub type LockGuard = Box<dyn Any + Send + Sync>;

/// Directory-level file-system operations. Paths are absolute or relative to the process's
/// working directory, as the store was given them.
pub trait Storage: Send + Sync + fmt::Debug {
    /// `mkdir -p`.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// Opens (or creates) a file for reading and writing, with O_DIRECT when `direct`.
    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn StorageFile>>;
    /// Removes a directory entry (durable after [`Storage::sync_dir`]).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Removes an empty directory (`rmdir`: ENOTEMPTY if anything is left in it; durable after
    /// [`Storage::sync_dir`] of its parent). Used only for directories the store made for a
    /// while (a restore's staging, a reader's old snapshot), after removing their files.
    fn remove_dir(&self, dir: &Path) -> io::Result<()>;
    /// Renames a file, replacing `to` (durable after [`Storage::sync_dir`] of the directories
    /// of both names: of `to`'s for the new name, of `from`'s for the old name's removal).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link; durable after
    /// [`Storage::sync_dir`] of `to`'s directory). EXDEV where the two are on different file
    /// systems (callers then copy).
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsync of a directory: makes the creations, removals and renames in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// The names of the entries of a directory (names that are not UTF-8 are left out).
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Tries to take a lock on `path` without blocking, shared or exclusive: `Ok(None)` when
    /// another holder has it in a conflicting mode. `path` is a directory (locked through its
    /// own descriptor, opened for reading: nothing is created) or a file, created if missing.
    fn try_lock(&self, path: &Path, shared: bool) -> io::Result<Option<LockGuard>>;
    /// What tells `path` (a file or a directory) apart from every other: what binds a file that
    /// names its own place (the record of the hot set) to that place.
    fn identity(&self, path: &Path) -> io::Result<Identity>;
    /// Bytes free for this process on the file system of `dir` (statvfs: available blocks ×
    /// fragment size); `None` where the backend cannot tell.
    fn free_space(&self, _dir: &Path) -> io::Result<Option<u64>> {
        Ok(None)
    }
    /// Finds out the direct-I/O alignment in `dir`, and, when `try_direct`, whether the file
    /// system takes O_DIRECT there. `sample` is an existing file of the store: when given, it
    /// is asked (statx, an O_DIRECT open for reading) and nothing is created. Without one (an
    /// empty store) and with `create`, an unnamed file (O_TMPFILE) is opened instead, or, where
    /// the file system has none, a named one that is removed again; without `create` nothing is
    /// created and only the directory is asked. Errors other than "O_DIRECT refused" (EINVAL)
    /// are returned as they are (ENOSPC, EROFS, EACCES...), never taken for "unsupported".
    fn probe_direct(
        &self,
        dir: &Path,
        sample: Option<&Path>,
        create: bool,
        try_direct: bool,
    ) -> io::Result<DirectProbe>;
}

/// One open file. Every method is positional: the handle has no cursor, so it is shared between
/// threads (`&self`).
pub trait StorageFile: Send + Sync + fmt::Debug {
    /// pread: reads up to `buf.len()` bytes at `offset`; fewer at the end of the file (0 past
    /// it) or on a short read.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// pwrite: writes up to `buf.len()` bytes at `offset`, returns how many (a short write is
    /// possible).
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// A write whose bytes are on stable storage when it returns: `pwritev2(..., RWF_DSYNC)`,
    /// one call and one device round trip (a FUA write where the device has it). Writes up to
    /// `buf.len()` bytes at `offset` and returns how many; those are durable, with the file size
    /// they need. Only they are: unlike [`StorageFile::sync_data`], earlier unsynced writes of
    /// the file are not made durable by it (the kernel syncs the range written, and a FUA write
    /// does not flush the device's cache), so a caller with earlier unsynced writes must sync
    /// them. The default is [`StorageFile::write_at`] followed by [`StorageFile::sync_data`].
    fn write_at_durable(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        let n = self.write_at(buf, offset)?;
        self.sync_data()?;
        Ok(n)
    }
    /// fdatasync.
    fn sync_data(&self) -> io::Result<()>;
    /// Gives back the disk space of bytes `[offset, offset + len)`, keeping the file's length
    /// (`fallocate(PUNCH_HOLE | KEEP_SIZE)`): they read as zeroes after. Not durable until a
    /// sync (a crash may keep the bytes). The default writes zeroes (a backend without holes:
    /// the simulator, where a punch is a write like any other for crashes), from a buffer
    /// aligned for direct I/O (`offset` and `len` are multiples of the block size).
    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        let zeroes = AlignedBuf::zeroed(len.clamp(4096, 1 << 20) as usize, 4096);
        let mut at = offset;
        while at < offset + len {
            let n = (offset + len - at).min(zeroes.len() as u64) as usize;
            match self.write_at(&zeroes[..n], at)? {
                0 => return Err(io::ErrorKind::WriteZero.into()),
                w => at += w as u64,
            }
        }
        Ok(())
    }
    /// ftruncate.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// The file's length (fstat).
    fn len(&self) -> io::Result<u64>;
    /// Several preads of this file, each into its own buffer: sets each read's `got` (as
    /// [`StorageFile::read_at`] would return) or its `error`. The reads may be issued together
    /// (a real file: io_uring, one device round trip for all); the default makes them one after
    /// the other. `Err` only if the batch as a whole failed.
    fn read_each(&self, reads: &mut [ReadAt]) -> io::Result<()> {
        read_in_turn(self, reads);
        Ok(())
    }
}

/// What tells a file or directory apart ([`Storage::identity`]): its device and inode numbers,
/// and its birth time, which a new file given the inode number of a removed one (as ext4 does at
/// once) does not share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// Device number.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Birth time in nanoseconds since the epoch (statx `STATX_BTIME`), 0 where the file
    /// system does not keep it.
    pub born: u64,
}

/// One read of a [`StorageFile::read_each`] batch: `len` bytes at `offset` into `buf`.
pub struct ReadAt {
    /// Where the bytes go (its first `len` bytes); aligned for direct I/O.
    pub buf: AlignedBuf,
    /// Bytes to read.
    pub len: usize,
    /// File offset.
    pub offset: u64,
    /// Bytes read (fewer than `len` at the end of the file, or on a short read).
    pub got: usize,
    /// The read failed.
    pub error: Option<io::Error>,
}

impl fmt::Debug for ReadAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadAt")
            .field("len", &self.len)
            .field("offset", &self.offset)
            .field("got", &self.got)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// [`StorageFile::read_each`] one read after the other, each a single [`StorageFile::read_at`]
/// (a read that was interrupted is tried again).
pub fn read_in_turn(file: &(impl StorageFile + ?Sized), reads: &mut [ReadAt]) {
    for r in reads {
        loop {
            match file.read_at(&mut r.buf[..r.len], r.offset) {
                Ok(n) => r.got = n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => r.error = Some(e),
            }
            break;
        }
    }
}

/// The block size the probe's direct write uses: the larger of the offset alignment and the
/// file system block, at least 512 and at most 64 KiB, a power of two.
pub fn probe_block(offset_align: u32, fs_block: u32) -> u32 {
    offset_align
        .max(fs_block)
        .clamp(512, 65536)
        .next_power_of_two()
}

/// The operating system's file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealStorage;

/// Name of the probe file where the file system has no `O_TMPFILE` (removed again at once).
pub const PROBE_NAME: &str = ".podstore-probe";

impl Storage for RealStorage {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn StorageFile>> {
        let mut o = OpenOptions::new();
        o.read(true).write(mode != OpenMode::ReadOnly);
        if direct {
            o.custom_flags(OFlags::DIRECT.bits() as i32);
        }
        if mode == OpenMode::CreateNew {
            o.create_new(true);
        }
        Ok(Box::new(RealFile {
            file: o.open(path)?,
            dsync: AtomicBool::new(true),
        }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        fs::remove_dir(dir)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::hard_link(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for ent in fs::read_dir(dir)? {
            // A name that is not UTF-8 is kept (lossily): it is no store file's, but open must
            // see it to call the directory foreign.
            names.push(ent?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn free_space(&self, dir: &Path) -> io::Result<Option<u64>> {
        let st = rustix::fs::statvfs(dir)?;
        Ok(Some(st.f_bavail.saturating_mul(st.f_frsize)))
    }

    fn identity(&self, path: &Path) -> io::Result<Identity> {
        let st = rustix::fs::statx(
            rustix::fs::CWD,
            path,
            AtFlags::empty(),
            StatxFlags::BASIC_STATS | StatxFlags::BTIME,
        )?;
        let born = if StatxFlags::from_bits_retain(st.stx_mask).contains(StatxFlags::BTIME) {
            (st.stx_btime.tv_sec as u64)
                .wrapping_mul(1_000_000_000)
                .wrapping_add(u64::from(st.stx_btime.tv_nsec))
        } else {
            0
        };
        Ok(Identity {
            dev: (u64::from(st.stx_dev_major) << 32) | u64::from(st.stx_dev_minor),
            ino: st.stx_ino,
            born,
        })
    }

    fn try_lock(&self, path: &Path, shared: bool) -> io::Result<Option<LockGuard>> {
        let file = if path.is_dir() {
            File::open(path)?
        } else {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)?
        };
        let op = if shared {
            FlockOperation::NonBlockingLockShared
        } else {
            FlockOperation::NonBlockingLockExclusive
        };
        match rustix::fs::flock(&file, op) {
            Ok(()) => Ok(Some(Box::new(file))),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn probe_direct(
        &self,
        dir: &Path,
        sample: Option<&Path>,
        create: bool,
        try_direct: bool,
    ) -> io::Result<DirectProbe> {
        // An existing file of the store: asked, nothing created, nothing written.
        if let Some(path) = sample {
            return ask(&File::open(path)?, try_direct, || direct_open(path));
        }
        if !create {
            // Nothing to ask but the directory (a read-only open of an empty store: it will
            // never read a segment, so whether O_DIRECT works does not matter).
            let (_, _, fs_block) = dio_alignment(&File::open(dir)?);
            return Ok(DirectProbe {
                mem_align: 0,
                offset_align: 0,
                fs_block,
                direct_works: try_direct,
            });
        }
        // An empty store: an unnamed file, which no crash can leave behind and which needs no
        // data block (a full disk does not refuse it).
        let tmp = |direct: bool| {
            let mut o = OpenOptions::new();
            o.read(true).write(true);
            let flags = OFlags::TMPFILE
                | if direct {
                    OFlags::DIRECT
                } else {
                    OFlags::empty()
                };
            o.custom_flags(flags.bits() as i32).open(dir)
        };
        match tmp(false) {
            Ok(file) => return ask(&file, try_direct, || tmp(true)),
            // No O_TMPFILE on this file system (or kernel): a named probe file below.
            Err(e) if is_no_tmpfile(&e) => {}
            Err(e) => return Err(e),
        }
        let path = dir.join(PROBE_NAME);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        let found = ask(&file, try_direct, || direct_open(&path));
        drop(file);
        let _ = fs::remove_file(&path);
        found
    }
}

/// What statx says of `file`, and, when `try_direct`, whether `open_direct` (an O_DIRECT open
/// of the same file) works.
fn ask(
    file: &File,
    try_direct: bool,
    open_direct: impl FnOnce() -> io::Result<File>,
) -> io::Result<DirectProbe> {
    let (mem_align, offset_align, fs_block) = dio_alignment(file);
    Ok(DirectProbe {
        mem_align,
        offset_align,
        fs_block,
        direct_works: try_direct && direct_open_works(open_direct)?,
    })
}

/// Opens `path` for reading with O_DIRECT.
fn direct_open(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(OFlags::DIRECT.bits() as i32)
        .open(path)
}

/// Whether an O_DIRECT open works: `Ok(false)` when the file system refuses O_DIRECT (EINVAL,
/// which the kernel returns at open where it cannot do direct I/O), any other error as it is.
fn direct_open_works(open: impl FnOnce() -> io::Result<File>) -> io::Result<bool> {
    match open() {
        Ok(_) => Ok(true),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) => Ok(false),
        Err(e) => Err(e),
    }
}

/// True for the errors of an O_TMPFILE open on a file system or kernel without it.
fn is_no_tmpfile(e: &io::Error) -> bool {
    use rustix::io::Errno;
    [Errno::OPNOTSUPP, Errno::ISDIR, Errno::INVAL, Errno::NOENT]
        .iter()
        .any(|c| e.raw_os_error() == Some(c.raw_os_error()))
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

/// A file of [`RealStorage`].
#[derive(Debug)]
struct RealFile {
    file: File,
    /// `pwritev2(..., RWF_DSYNC)` is worth trying: cleared, for good, the first time the kernel
    /// or file system refuses it (then a durable write is a pwrite and an fdatasync).
    dsync: AtomicBool,
}

/// True for the errors of a `pwritev2(..., RWF_DSYNC)` that the kernel (ENOSYS: before 4.6, or
/// a seccomp filter) or the file system (EOPNOTSUPP, EINVAL: the flag refused) does not take.
/// It fails before writing anything in these cases.
fn is_no_dsync(e: rustix::io::Errno) -> bool {
    use rustix::io::Errno;
    [Errno::OPNOTSUPP, Errno::INVAL, Errno::NOSYS].contains(&e)
}

impl StorageFile for RealFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.file.write_at(buf, offset)
    }

    fn write_at_durable(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if self.dsync.load(Ordering::Relaxed) {
            let bufs = [IoSlice::new(buf)];
            match rustix::io::pwritev2(&self.file, &bufs, offset, ReadWriteFlags::DSYNC) {
                Ok(n) => return Ok(n),
                Err(e) if is_no_dsync(e) => self.dsync.store(false, Ordering::Relaxed),
                Err(e) => return Err(e.into()),
            }
        }
        let n = self.file.write_at(buf, offset)?;
        self.file.sync_data()?;
        Ok(n)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }

    fn punch_hole(&self, offset: u64, len: u64) -> io::Result<()> {
        use rustix::fs::FallocateFlags;
        let flags = FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE;
        Ok(rustix::fs::fallocate(&self.file, flags, offset, len)?)
    }

    fn len(&self) -> io::Result<u64> {
        self.file.metadata().map(|m| m.len())
    }

    fn read_each(&self, reads: &mut [ReadAt]) -> io::Result<()> {
        match super::uring::read_each(self.file.as_fd(), reads) {
            Some(result) => result,
            None => {
                read_in_turn(self, reads);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_durable_write_writes_its_bytes_with_rwf_dsync_or_without() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let storage = RealStorage;
        let file = storage.open(&path, OpenMode::CreateNew, false).unwrap();
        assert_eq!(file.write_at_durable(&[7u8; 4096], 4096).unwrap(), 4096);
        // The same after the flag was refused (the fallback: pwrite and fdatasync).
        let real = RealFile {
            file: OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .unwrap(),
            dsync: AtomicBool::new(false),
        };
        assert_eq!(real.write_at_durable(&[8u8; 4096], 0).unwrap(), 4096);
        let mut back = vec![0u8; 8192];
        assert_eq!(file.read_at(&mut back, 0).unwrap(), 8192);
        assert!(back[..4096].iter().all(|&b| b == 8) && back[4096..].iter().all(|&b| b == 7));
        // Refusals of the flag, and only they, are taken for "unsupported".
        assert!(is_no_dsync(rustix::io::Errno::OPNOTSUPP));
        assert!(!is_no_dsync(rustix::io::Errno::IO));
        assert!(!is_no_dsync(rustix::io::Errno::NOSPC));
    }
}
