//! The floor: padded O_DIRECT writes into a pre-zeroed file, an in-memory index.

use std::cell::RefCell;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{Mode, OFlags};

use super::files::{read_exact_at, write_all_at};
use super::{Engine, OpenSpec, Res};
use crate::sys::{ALIGN, AlignedBuf, round_up};

pub struct Raw {
    fd: OwnedFd,
    path: PathBuf,
    next: AtomicU64,
    capacity: u64,
    index: RwLock<HashMap<Vec<u8>, (u64, u64)>>,
    durable: bool,
}

thread_local! {
    static BUF: RefCell<Option<AlignedBuf>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's aligned buffer, grown to at least `len` bytes.
fn with_buf<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    BUF.with(|b| {
        let mut b = b.borrow_mut();
        if b.as_ref().is_none_or(|b| b.len() < len) {
            *b = Some(AlignedBuf::zeroed(len));
        }
        f(&mut b.as_mut().expect("buffer").as_mut_slice()[..len])
    })
}

fn open_direct(path: &Path, create: bool) -> Res<OwnedFd> {
    let mut flags = OFlags::RDWR | OFlags::DIRECT | OFlags::CLOEXEC;
    if create {
        flags |= OFlags::CREATE | OFlags::TRUNC;
    }
    Ok(rustix::fs::open(path, flags, Mode::from_raw_mode(0o644))?)
}

impl Raw {
    pub fn open(spec: &OpenSpec) -> Res<Raw> {
        let path = spec.dir.join("raw.dat");
        let fd = open_direct(&path, true)?;
        let capacity = round_up(spec.capacity.max(ALIGN as u64), ALIGN as u64);
        // Pre-zero: really write every block, so that timed writes overwrite allocated, written
        // blocks (no unwritten-extent conversion, no allocation in the timed path).
        // Allocate it in one go first, for large contiguous extents.
        rustix::fs::fallocate(&fd, rustix::fs::FallocateFlags::empty(), 0, capacity)?;
        let chunk = AlignedBuf::zeroed(4 << 20);
        let mut off = 0;
        while off < capacity {
            let n = (capacity - off).min(chunk.len() as u64) as usize;
            write_all_at(&fd, &chunk.as_slice()[..n], off)?;
            off += n as u64;
        }
        rustix::fs::fsync(&fd)?;
        let dir = rustix::fs::open(&spec.dir, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        rustix::fs::fsync(&dir)?;
        Ok(Raw {
            fd,
            path,
            next: AtomicU64::new(0),
            capacity,
            index: RwLock::new(HashMap::new()),
            durable: spec.durable,
        })
    }

    fn read(&self, at: u64, len: u64) -> Res<Vec<u8>> {
        let start = at & !(ALIGN as u64 - 1);
        let end = round_up(at + len, ALIGN as u64);
        let skip = (at - start) as usize;
        with_buf((end - start) as usize, |buf| {
            read_exact_at(&self.fd, buf, start)?;
            Ok(buf[skip..skip + len as usize].to_vec())
        })
    }
}

impl Engine for Raw {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        let padded = round_up(value.len().max(1) as u64, ALIGN as u64);
        let off = self.next.fetch_add(padded, Ordering::Relaxed);
        if off + padded > self.capacity {
            return Err(format!("raw file full ({} bytes preallocated)", self.capacity).into());
        }
        with_buf(padded as usize, |buf| {
            buf[..value.len()].copy_from_slice(value);
            buf[value.len()..].fill(0);
            write_all_at(&self.fd, buf, off)
        })?;
        if self.durable {
            rustix::fs::fdatasync(&self.fd)?;
        }
        self.index
            .write()
            .expect("index lock")
            .insert(key.to_vec(), (off, value.len() as u64));
        Ok(())
    }

    fn sync(&self) -> Res<()> {
        Ok(rustix::fs::fdatasync(&self.fd)?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        let Some((off, len)) = self.index.read().expect("index lock").get(key).copied() else {
            return Ok(None);
        };
        Ok(Some(self.read(off, len)?))
    }

    fn get_range(&self, key: &[u8], a: u64, n: u64) -> Res<Option<Vec<u8>>> {
        let Some((off, len)) = self.index.read().expect("index lock").get(key).copied() else {
            return Ok(None);
        };
        if a + n > len {
            return Err(format!("range {a}+{n} outside a value of {len} bytes").into());
        }
        Ok(Some(self.read(off + a, n)?))
    }

    fn close(self: Box<Self>) -> Res<()> {
        self.sync()
    }

    /// Keeps the file, its capacity and the in-memory index; takes `spec.durable` (a data set
    /// loaded in bulk, then written durably).
    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.sync()?;
        let Raw {
            fd,
            path,
            next,
            capacity,
            index,
            ..
        } = *self;
        let durable = spec.durable;
        drop(fd);
        between();
        Ok(Box::new(Raw {
            fd: open_direct(&path, false)?,
            path,
            next,
            capacity,
            index,
            durable,
        }))
    }
}
