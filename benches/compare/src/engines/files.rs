//! One file per value: O_TMPFILE + linkat, pread for reads.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, CWD, Mode, OFlags};
use rustix::io::Errno;

use super::{Engine, OpenSpec, Res, hex};

pub struct Files {
    dir: OwnedFd,
    durable: bool,
    tmp: AtomicU64,
}

impl Files {
    pub fn open(spec: &OpenSpec) -> Res<Files> {
        let path = spec.dir.join("files");
        std::fs::create_dir_all(&path)?;
        let dir = rustix::fs::open(
            &path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Files {
            dir,
            durable: spec.durable,
            tmp: AtomicU64::new(0),
        })
    }

    fn open_value(&self, key: &[u8]) -> Res<Option<(OwnedFd, u64)>> {
        match rustix::fs::openat(
            &self.dir,
            hex(key),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let len = rustix::fs::fstat(&fd)?.st_size as u64;
                Ok(Some((fd, len)))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }
}

pub(crate) fn write_all_at(fd: &OwnedFd, mut buf: &[u8], mut off: u64) -> Res<()> {
    while !buf.is_empty() {
        let n = rustix::io::pwrite(fd, buf, off)?;
        if n == 0 {
            return Err("pwrite wrote nothing".into());
        }
        buf = &buf[n..];
        off += n as u64;
    }
    Ok(())
}

pub(crate) fn read_exact_at(fd: &OwnedFd, mut buf: &mut [u8], mut off: u64) -> Res<()> {
    while !buf.is_empty() {
        let n = rustix::io::pread(fd, &mut *buf, off)?;
        if n == 0 {
            return Err("unexpected end of file".into());
        }
        buf = &mut buf[n..];
        off += n as u64;
    }
    Ok(())
}

impl Engine for Files {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        let fd = rustix::fs::openat(
            &self.dir,
            ".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o644),
        )?;
        write_all_at(&fd, value, 0)?;
        if self.durable {
            rustix::fs::fdatasync(&fd)?;
        }
        let proc = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let name = hex(key);
        match rustix::fs::linkat(CWD, &proc, &self.dir, &name, AtFlags::SYMLINK_FOLLOW) {
            Ok(()) => {}
            Err(Errno::EXIST) => {
                // Replace atomically: link under a temporary name, then rename over.
                let tmp = format!(
                    ".tmp-{}-{}",
                    std::process::id(),
                    self.tmp.fetch_add(1, Ordering::Relaxed)
                );
                rustix::fs::linkat(CWD, &proc, &self.dir, &tmp, AtFlags::SYMLINK_FOLLOW)?;
                rustix::fs::renameat(&self.dir, &tmp, &self.dir, &name)?;
            }
            Err(e) => return Err(e.into()),
        }
        if self.durable {
            rustix::fs::fsync(&self.dir)?;
        }
        Ok(())
    }

    fn sync(&self) -> Res<()> {
        Ok(rustix::fs::syncfs(&self.dir)?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        let Some((fd, len)) = self.open_value(key)? else {
            return Ok(None);
        };
        let mut out = vec![0u8; len as usize];
        read_exact_at(&fd, &mut out, 0)?;
        Ok(Some(out))
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        let Some((fd, vlen)) = self.open_value(key)? else {
            return Ok(None);
        };
        if off + len > vlen {
            return Err(format!("range {off}+{len} outside a value of {vlen} bytes").into());
        }
        let mut out = vec![0u8; len as usize];
        read_exact_at(&fd, &mut out, off)?;
        Ok(Some(out))
    }

    fn close(self: Box<Self>) -> Res<()> {
        if !self.durable {
            self.sync()?;
        }
        Ok(())
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.close()?;
        between();
        Ok(Box::new(Files::open(spec)?))
    }
}
