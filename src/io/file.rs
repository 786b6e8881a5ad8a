//! File operations: opening segments with or without O_DIRECT, finding the direct-I/O
//! alignment, positional reads and writes, syncs, the directory lock.
//!
//! Every call the store makes on its files goes through this module, and from here through the
//! storage seam ([`Storage`], carried in [`IoProfile`]): nothing else in the crate touches the
//! file system.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::aligned::{AlignedBuf, BufPool};
use super::remote::{RemoteFile, RemoteSource};
use super::storage::{LockGuard, OpenMode, ReadAt, Storage, StorageFile, probe_block};
use crate::error::{Error, Result};
use crate::format::{align_down, align_up};

/// What the file system of the store directory supports, found once at open, and the storage
/// backend every file operation goes through.
#[derive(Clone)]
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
    /// The file system (the operating system's, or a test's simulation).
    pub storage: Arc<dyn Storage>,
    /// A read-only store: files are opened for reading, and nothing is written.
    pub read_only: bool,
}

impl IoProfile {
    /// A profile of buffered I/O on `storage` with 4 KiB blocks: for files the store writes
    /// outside a probed directory (a restore's staging, a reader's cache marker) and for
    /// reading a lone file.
    pub fn buffered(storage: Arc<dyn Storage>, read_only: bool) -> IoProfile {
        IoProfile {
            direct: false,
            mem_align: 4096,
            read_align: 1,
            block_size: 4096,
            storage,
            read_only,
        }
    }
}

impl fmt::Debug for IoProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IoProfile")
            .field("direct", &self.direct)
            .field("mem_align", &self.mem_align)
            .field("read_align", &self.read_align)
            .field("block_size", &self.block_size)
            .finish_non_exhaustive()
    }
}

/// How the store talks to the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IoMode {
    /// O_DIRECT where the file system accepts it, buffered I/O where it does not.
    /// [`Store::io_mode`](crate::Store::io_mode) tells which one was chosen.
    #[default]
    Auto,
    /// O_DIRECT for segment reads and writes: no page cache, reads fetch exactly the blocks
    /// they need. Opening fails with [`Error::DirectIoUnsupported`] where it is refused.
    Direct,
    /// Ordinary buffered I/O through the page cache.
    Buffered,
}

/// Finds out whether O_DIRECT works in `dir` and with which alignment, asking `sample` (an
/// existing file of the store) when there is one; see [`Storage::probe_direct`]. Only a refusal
/// of O_DIRECT itself counts as "unsupported" (`IoMode::Auto` then falls back to buffered I/O,
/// `IoMode::Direct` fails with [`Error::DirectIoUnsupported`]); any other error of the probe
/// (ENOSPC, EROFS, EACCES, EIO...) is returned as it is, in every mode.
pub fn probe(
    storage: Arc<dyn Storage>,
    dir: &Path,
    mode: IoMode,
    sample: Option<&Path>,
    create: bool,
) -> Result<IoProfile> {
    let found = storage
        .probe_direct(dir, sample, create, mode != IoMode::Buffered)
        .map_err(|e| Error::io("probe direct I/O", Some(dir.to_path_buf()), e))?;
    let offset = found.offset_align;
    let block_size = probe_block(offset, found.fs_block);
    let direct = found.direct_works && mode != IoMode::Buffered;
    if mode == IoMode::Direct && !direct {
        return Err(Error::DirectIoUnsupported {
            path: dir.to_path_buf(),
        });
    }
    Ok(IoProfile {
        direct,
        mem_align: (found.mem_align as usize).max(4096).next_power_of_two(),
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
        storage,
        read_only: !create,
    })
}

/// One segment file, opened for positional reads and writes.
#[derive(Debug)]
pub struct SegmentFile {
    file: Box<dyn StorageFile>,
    path: PathBuf,
    direct: bool,
    /// For a file whose data is in the remote only: the bytes its local copy no longer holds
    /// (read from the remote: [`RemoteFile`]), and the object's name.
    remote: Option<(std::ops::Range<u64>, String)>,
}

impl SegmentFile {
    /// Creates a new file; fails if it exists.
    pub fn create(path: &Path, profile: &IoProfile) -> Result<SegmentFile> {
        let file = profile
            .storage
            .open(path, OpenMode::CreateNew, profile.direct)
            .map_err(|e| Error::io("create segment", Some(path.to_path_buf()), e))?;
        Ok(SegmentFile {
            file,
            path: path.to_path_buf(),
            direct: profile.direct,
            remote: None,
        })
    }

    /// Opens the sealed file at `path` whose data is in the remote only ([`RemoteFile`]: its
    /// local copy for the header, crc tables and footer, one ranged GET for every read of the
    /// rest). Reads are exact (no direct-I/O alignment: a GET fetches what is asked for).
    pub fn open_remote(
        path: &Path,
        profile: &IoProfile,
        source: RemoteSource,
    ) -> Result<SegmentFile> {
        let object = source.object.clone();
        let file = RemoteFile::open(&*profile.storage, path, profile.read_only, source)
            .map_err(|e| Error::io("open an evicted segment", Some(path.to_path_buf()), e))?;
        let span = file.span();
        Ok(SegmentFile {
            file: Box::new(file),
            path: path.to_path_buf(),
            direct: false,
            remote: Some((span, object)),
        })
    }

    /// Whether the file's data is in the remote only.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// The bytes the remote serves, for a file whose data is in the remote only.
    pub fn remote_span(&self) -> Option<std::ops::Range<u64>> {
        self.remote.as_ref().map(|(span, _)| span.clone())
    }

    /// The name of the object in the remote that holds the file, for a file whose data is in
    /// the remote only.
    pub fn remote_object(&self) -> Option<&str> {
        self.remote.as_ref().map(|(_, object)| object.as_str())
    }

    /// `e` as the remote's when it is damage found in bytes the remote served: an
    /// [`Error::Corruption`] of this file (id `id`) whose damaged structure starts in the span
    /// the local copy no longer holds becomes [`Error::RemoteCorruption`] naming the object
    /// (the local file holds no bytes there: its offset would point at a hole). Damage found in
    /// the bytes the local copy keeps (its head, crc tables and footer), and every other error,
    /// are returned as they are.
    pub fn remote_error(&self, id: u64, e: Error) -> Error {
        match (e, &self.remote) {
            (
                Error::Corruption {
                    segment,
                    offset,
                    kind,
                    ..
                },
                Some((span, object)),
            ) if segment == id && span.contains(&offset) => Error::RemoteCorruption {
                object: object.clone(),
                kind,
            },
            (e, _) => e,
        }
    }

    /// Bytes of the file on the local disk: its length, less what the remote serves.
    pub fn local_len(&self) -> Result<u64> {
        let len = self.len()?;
        Ok(len - self.remote.as_ref().map_or(0, |(s, _)| s.end - s.start))
    }

    /// Gives back the disk space of `span` ([`StorageFile::punch_hole`]): the local data of a
    /// file whose bytes there are in the remote (and read from it by the file's remote handle).
    pub fn punch_hole(&self, span: std::ops::Range<u64>) -> Result<()> {
        self.file
            .punch_hole(span.start, span.end - span.start)
            .map_err(|e| self.err("punch a hole in segment", e))
    }

    /// Opens an existing file (for reading only in a read-only store).
    pub fn open(path: &Path, profile: &IoProfile) -> Result<SegmentFile> {
        let mode = if profile.read_only {
            OpenMode::ReadOnly
        } else {
            OpenMode::Existing
        };
        let file = profile
            .storage
            .open(path, mode, profile.direct)
            .map_err(|e| Error::io("open segment", Some(path.to_path_buf()), e))?;
        Ok(SegmentFile {
            file,
            path: path.to_path_buf(),
            direct: profile.direct,
            remote: None,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Current length of the file.
    pub fn len(&self) -> Result<u64> {
        self.file.len().map_err(|e| self.err("stat segment", e))
    }

    /// Writes all of `data` at `offset`. With O_DIRECT, `data`'s address, length and `offset`
    /// must be aligned (the writer guarantees it by construction). A short write is continued
    /// where it stopped.
    pub fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        write_full(&*self.file, data, offset).map_err(|e| self.err("write segment", e))
    }

    /// Writes all of `data` at `offset` durably ([`StorageFile::write_at_durable`]: one
    /// `pwritev2(..., RWF_DSYNC)` where the kernel takes it), under the same alignment rules as
    /// [`SegmentFile::write_all_at`]. Only these bytes are made durable: the caller must have
    /// synced every earlier write of the file.
    pub fn write_all_at_durable(&self, data: &[u8], offset: u64) -> Result<()> {
        write_full_with(data, offset, |d, o| self.file.write_at_durable(d, o))
            .map_err(|e| self.err("write segment durably", e))
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
            return match read_full(&*self.file, dst, offset)? {
                n if n == dst.len() => Ok(()),
                _ => Err(io::ErrorKind::UnexpectedEof.into()),
            };
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
            let got = read_full_direct(&*self.file, &mut bounce[..want], start, read_align)?;
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

    /// Reads up to `buf.len()` bytes at `offset` straight into `buf` (continuing short reads):
    /// how many were read, fewer only at the end of the file. With O_DIRECT, `buf`'s address and
    /// length and `offset` must be aligned (the caller's buffer comes from an aligned
    /// allocation). For long sequential reads, with no bounce: the warm-up at open.
    pub fn read_at_most(&self, offset: u64, buf: &mut [u8], read_align: u64) -> io::Result<usize> {
        if self.direct {
            read_full_direct(&*self.file, buf, offset, read_align)
        } else {
            read_full(&*self.file, buf, offset)
        }
    }

    /// Reads exactly `len` bytes at `offset` in one read (with O_DIRECT widened to the
    /// alignment, straight into a buffer of its own from `pool`, no bounce): the buffer and where
    /// the bytes start in it. For a record read whole and kept: one device round trip, whatever
    /// its length, and no copy. A read past the end of the file fails with `UnexpectedEof`.
    pub fn read_owned(
        &self,
        offset: u64,
        len: usize,
        pool: &BufPool,
        read_align: u64,
    ) -> io::Result<(AlignedBuf, usize)> {
        let end = offset + len as u64;
        let (start, stop) = if self.direct {
            (align_down(offset, read_align), align_up(end, read_align))
        } else {
            (offset, end)
        };
        let (skip, want) = ((offset - start) as usize, (stop - start) as usize);
        let mut buf = pool.alloc(want);
        let got = if self.direct {
            read_full_direct(&*self.file, &mut buf[..want], start, read_align)?
        } else {
            read_full(&*self.file, &mut buf[..want], start)?
        };
        if got < skip + len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok((buf, skip))
    }

    /// [`SegmentFile::read_owned`] of each of `spans` (offset, length), the reads issued
    /// together ([`StorageFile::read_each`]: with io_uring, one device round trip for all of
    /// them): each span's buffer and where its bytes start in it, in the order of `spans`. A
    /// read cut short is continued alone; a span past the end of the file fails with
    /// `UnexpectedEof`.
    pub fn read_owned_each(
        &self,
        spans: &[(u64, usize)],
        pool: &BufPool,
        read_align: u64,
    ) -> io::Result<Vec<(AlignedBuf, usize)>> {
        let mut reads: Vec<ReadAt> = spans
            .iter()
            .map(|&(offset, len)| {
                let end = offset + len as u64;
                let (start, stop) = if self.direct {
                    (align_down(offset, read_align), align_up(end, read_align))
                } else {
                    (offset, end)
                };
                let want = (stop - start) as usize;
                ReadAt {
                    buf: pool.alloc(want),
                    len: want,
                    offset: start,
                    got: 0,
                    error: None,
                }
            })
            .collect();
        self.file.read_each(&mut reads)?;
        let mut out = Vec::with_capacity(reads.len());
        for (mut r, &(offset, len)) in reads.into_iter().zip(spans) {
            if let Some(e) = r.error {
                return Err(e);
            }
            let (got, want) = (r.got, r.len);
            // A read that stopped short of its length (and, direct, at an aligned place: not
            // the end of the file) is continued where it stopped.
            let more =
                got > 0 && got < want && (!self.direct || (got as u64).is_multiple_of(read_align));
            let got = if more {
                let rest = &mut r.buf[got..want];
                got + if self.direct {
                    read_full_direct(&*self.file, rest, r.offset + got as u64, read_align)?
                } else {
                    read_full(&*self.file, rest, r.offset + got as u64)?
                }
            } else {
                got
            };
            let skip = (offset - r.offset) as usize;
            if got < skip + len {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            out.push((r.buf, skip));
        }
        Ok(out)
    }

    fn err(&self, op: &'static str, e: io::Error) -> Error {
        Error::io(op, Some(self.path.clone()), e)
    }
}

/// Writes all of `data` at `offset`, continuing a short write where it stopped.
fn write_full(file: &dyn StorageFile, data: &[u8], offset: u64) -> io::Result<()> {
    write_full_with(data, offset, |d, o| file.write_at(d, o))
}

/// Writes all of `data` at `offset` with `write` (a positional write that may be short),
/// continuing a short write where it stopped.
fn write_full_with(
    mut data: &[u8],
    mut offset: u64,
    write: impl Fn(&[u8], u64) -> io::Result<usize>,
) -> io::Result<()> {
    while !data.is_empty() {
        match write(data, offset) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                data = &data[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A small file of the store's own that is not a segment (the catalog): buffered I/O, read
/// whole, written at positions, synced.
#[derive(Debug)]
pub struct PlainFile {
    file: Box<dyn StorageFile>,
    path: PathBuf,
}

impl PlainFile {
    /// Creates a new file; fails if it exists.
    pub fn create_new(path: &Path, profile: &IoProfile) -> Result<PlainFile> {
        let file = profile
            .storage
            .open(path, OpenMode::CreateNew, false)
            .map_err(|e| Error::io("create file", Some(path.to_path_buf()), e))?;
        Ok(PlainFile {
            file,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing file (for reading only in a read-only store); `None` when there is
    /// none.
    pub fn open(path: &Path, profile: &IoProfile) -> Result<Option<PlainFile>> {
        let mode = if profile.read_only {
            OpenMode::ReadOnly
        } else {
            OpenMode::Existing
        };
        match profile.storage.open(path, mode, false) {
            Ok(file) => Ok(Some(PlainFile {
                file,
                path: path.to_path_buf(),
            })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io("open file", Some(path.to_path_buf()), e)),
        }
    }

    /// The file's length.
    pub fn len(&self) -> Result<u64> {
        self.file
            .len()
            .map_err(|e| Error::io("stat file", Some(self.path.clone()), e))
    }

    /// The whole file.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        let err = |e| Error::io("read file", Some(self.path.clone()), e);
        let len = self.file.len().map_err(err)?;
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        let n = read_full(&*self.file, &mut buf, 0).map_err(err)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// crc32 of the whole file, read 1 MiB at a time.
    pub fn crc32(&self) -> Result<u32> {
        let err = |e| Error::io("read file", Some(self.path.clone()), e);
        let len = self.file.len().map_err(err)?;
        let mut hasher = crc32fast::Hasher::new();
        let mut buf = vec![0u8; (1 << 20).min(usize::try_from(len).unwrap_or(usize::MAX))];
        let mut at = 0;
        while at < len {
            let n = (len - at).min(buf.len() as u64) as usize;
            if read_full(&*self.file, &mut buf[..n], at).map_err(err)? < n {
                return Err(err(io::ErrorKind::UnexpectedEof.into()));
            }
            hasher.update(&buf[..n]);
            at += n as u64;
        }
        Ok(hasher.finalize())
    }

    /// Writes all of `data` at `offset`.
    pub fn write_all_at(&self, data: &[u8], offset: u64) -> Result<()> {
        write_full(&*self.file, data, offset)
            .map_err(|e| Error::io("write file", Some(self.path.clone()), e))
    }

    /// fdatasync.
    pub fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("sync file", Some(self.path.clone()), e))
    }
}

/// Makes `to` a second name of the file `from` (durable after [`sync_dir`] of `to`'s
/// directory); `Ok(false)` where the two are on different file systems (EXDEV).
pub fn hard_link(profile: &IoProfile, from: &Path, to: &Path) -> Result<bool> {
    match profile.storage.hard_link(from, to) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(rustix::io::Errno::XDEV.raw_os_error()) => Ok(false),
        Err(e) => Err(Error::io("link file", Some(to.to_path_buf()), e)),
    }
}

/// Whether anything (a file or a directory) is at `path`.
pub fn exists(profile: &IoProfile, path: &Path) -> Result<bool> {
    match profile.storage.list_dir(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => Ok(true),
        Err(e) => Err(Error::io("look up path", Some(path.to_path_buf()), e)),
    }
}

/// Renames `from` to `to`, replacing it (durable after [`sync_dir`]).
pub fn rename(profile: &IoProfile, from: &Path, to: &Path) -> Result<()> {
    profile
        .storage
        .rename(from, to)
        .map_err(|e| Error::io("rename file", Some(from.to_path_buf()), e))
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(file: &dyn StorageFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
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

/// [`read_full`] for O_DIRECT reads from an aligned `offset`: a read that ends at an unaligned
/// position reached the end of the file (a file whose length is not a multiple of the
/// alignment: not one the store wrote, but open reads whatever is named like its files), and
/// is not continued there, where the next read would be misaligned (EINVAL).
fn read_full_direct(
    file: &dyn StorageFile,
    buf: &mut [u8],
    offset: u64,
    align: u64,
) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                if !(done as u64).is_multiple_of(align) {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// fsync of a directory, making creations and removals of its entries durable.
pub fn sync_dir(profile: &IoProfile, dir: &Path) -> Result<()> {
    profile
        .storage
        .sync_dir(dir)
        .map_err(|e| Error::io("sync store directory", Some(dir.to_path_buf()), e))
}

/// Removes a file (durable after the next [`sync_dir`]).
pub fn remove_file(profile: &IoProfile, path: &Path) -> Result<()> {
    profile
        .storage
        .remove_file(path)
        .map_err(|e| Error::io("remove segment", Some(path.to_path_buf()), e))
}

/// Removes an empty directory (`what`: the caller's step, for the error).
pub fn remove_dir(profile: &IoProfile, dir: &Path, what: &'static str) -> Result<()> {
    profile
        .storage
        .remove_dir(dir)
        .map_err(|e| Error::io(what, Some(dir.to_path_buf()), e))
}

/// Removes a file and makes the removal durable.
pub fn remove_durably(profile: &IoProfile, dir: &Path, path: &Path) -> Result<()> {
    remove_file(profile, path)?;
    sync_dir(profile, dir)
}

/// The names of the entries of `dir`.
pub fn list_dir(profile: &IoProfile, dir: &Path) -> Result<Vec<String>> {
    profile
        .storage
        .list_dir(dir)
        .map_err(|e| Error::io("list store directory", Some(dir.to_path_buf()), e))
}

/// The lock of a store directory, held for the life of a `Store`: flock on the directory's own
/// descriptor, exclusive for a writer and shared for a read-only store, so that several readers
/// coexist and a writer excludes everyone. The directory cannot be removed by accident while a
/// store is open, unlike a lock file (a second opener got in after `LOCK` was deleted). A
/// writer also takes `LOCK` (exclusively), which older versions of podstore lock. flock locks
/// belong to the open file description, so a second `Store` in the same process is refused just
/// like one in another process.
pub struct DirLock {
    _guards: Vec<LockGuard>,
}

impl fmt::Debug for DirLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirLock").finish_non_exhaustive()
    }
}

/// Retries of a refused lock, 2 ms apart, before `Error::Locked`.
const LOCK_RETRIES: u32 = 25;

/// Name of the lock file inside the store directory.
pub const LOCK_NAME: &str = "LOCK";

impl DirLock {
    /// Takes the lock (shared when `read_only`) or fails with [`Error::Locked`].
    pub fn acquire(storage: &dyn Storage, dir: &Path, read_only: bool) -> Result<DirLock> {
        let mut guards = vec![Self::take(storage, dir, dir, read_only)?];
        if !read_only {
            guards.push(Self::take(storage, dir, &dir.join(LOCK_NAME), false)?);
        }
        Ok(DirLock { _guards: guards })
    }

    /// No lock: a read-only store opened alongside its writer
    /// ([`Options::alongside_writer`](crate::Options::alongside_writer)) excludes no one.
    pub fn none() -> DirLock {
        DirLock {
            _guards: Vec::new(),
        }
    }

    fn take(storage: &dyn Storage, dir: &Path, path: &Path, shared: bool) -> Result<LockGuard> {
        let path = path.to_path_buf();
        // A child process forked by any thread holds a copy of every descriptor until it execs
        // (close-on-exec), and with it the lock of a store that was just closed. That lasts
        // microseconds: retry briefly before calling the directory locked.
        for attempt in 0..=LOCK_RETRIES {
            match storage.try_lock(&path, shared) {
                Ok(Some(guard)) => return Ok(guard),
                Ok(None) if attempt < LOCK_RETRIES => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Ok(None) => break,
                Err(e) => return Err(Error::io("lock store directory", Some(path), e)),
            }
        }
        Err(Error::Locked {
            path: dir.to_path_buf(),
        })
    }
}
