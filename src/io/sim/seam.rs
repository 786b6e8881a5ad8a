//! The simulation behind the storage seam: [`Storage`] for [`Sim`] (directory calls: create,
//! remove, rename, list, directory sync, lock, probe) and [`StorageFile`] for its open files
//! (positional reads and writes, sync, truncation, length), each passing the crash and fault
//! gate first.

use super::*;

impl Storage for Sim {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::CreateDir, None) {
            return Err(e);
        }
        for a in dir.ancestors() {
            s.dirs.insert(a.to_path_buf());
        }
        Ok(())
    }

    fn open(&self, path: &Path, mode: OpenMode, direct: bool) -> io::Result<Box<dyn StorageFile>> {
        if mode == OpenMode::CreateNew {
            return self.new_file(path, direct);
        }
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Open, Some(path)) {
            return Err(e);
        }
        let ino = *s
            .live_dir
            .get(path)
            .ok_or_else(|| errno(rustix::io::Errno::NOENT))?;
        Ok(Box::new(SimFile {
            sim: self.clone(),
            read_only: mode == OpenMode::ReadOnly,
            path: path.to_path_buf(),
            ino,
            direct,
        }))
    }

    /// Not simulated: EXDEV, as between two file systems (callers copy instead).
    fn hard_link(&self, _from: &Path, _to: &Path) -> io::Result<()> {
        Err(errno(rustix::io::Errno::XDEV))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Remove, Some(path)) {
            return Err(e);
        }
        s.live_dir
            .remove(path)
            .ok_or_else(|| errno(rustix::io::Errno::NOENT))?;
        let issue = s.issue();
        s.pending_dir
            .push((issue, DirOp::Remove(path.to_path_buf())));
        Ok(())
    }

    /// A directory's own creation and removal are not simulated across a crash (its files'
    /// names are): it goes at once, if nothing is left in it.
    fn remove_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Remove, Some(dir)) {
            return Err(e);
        }
        if !s.dirs.contains(dir) {
            return Err(errno(rustix::io::Errno::NOENT));
        }
        let inside = |p: &PathBuf| p.parent() == Some(dir);
        if s.live_dir.keys().any(inside) || s.dirs.iter().any(inside) {
            return Err(errno(rustix::io::Errno::NOTEMPTY));
        }
        s.dirs.remove(dir);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Rename, Some(from)) {
            return Err(e);
        }
        s.check_parent(to)?;
        let ino = s
            .live_dir
            .remove(from)
            .ok_or_else(|| errno(rustix::io::Errno::NOENT))?;
        s.live_dir.insert(to.to_path_buf(), ino);
        let issue = s.issue();
        s.pending_dir.push((
            issue,
            DirOp::Rename(from.to_path_buf(), to.to_path_buf(), ino),
        ));
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::SyncDir, None) {
            return Err(e);
        }
        if !s.dirs.contains(dir) {
            return Err(errno(rustix::io::Errno::NOENT));
        }
        let pending = std::mem::take(&mut s.pending_dir);
        let mut rest = Vec::new();
        for (issue, op) in pending {
            let in_dir = |p: &PathBuf| p.parent() == Some(dir);
            match &op {
                DirOp::Create(p, ino) if in_dir(p) => {
                    s.durable_dir.insert(p.clone(), *ino);
                }
                DirOp::Remove(p) if in_dir(p) => {
                    s.durable_dir.remove(p);
                }
                DirOp::Rename(from, to, _) if in_dir(from) && in_dir(to) => {
                    if let Some(ino) = s.durable_dir.remove(from) {
                        s.durable_dir.insert(to.clone(), ino);
                    }
                }
                // Between two directories, conservatively: each fsync makes durable only its
                // own directory's half, and the other half stays pending. Syncing the target
                // first can leave both names after a crash; the source first, neither.
                DirOp::Rename(from, to, ino) if in_dir(to) => {
                    s.durable_dir.insert(to.clone(), *ino);
                    rest.push((issue, DirOp::Remove(from.clone())));
                }
                DirOp::Rename(from, to, ino) if in_dir(from) => {
                    s.durable_dir.remove(from);
                    rest.push((issue, DirOp::Create(to.clone(), *ino)));
                }
                _ => rest.push((issue, op)),
            }
        }
        s.pending_dir = rest;
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::List, None) {
            return Err(e);
        }
        if !s.dirs.contains(dir) {
            return Err(errno(rustix::io::Errno::NOENT));
        }
        drop(s);
        Ok(self.file_names(dir))
    }

    fn identity(&self, path: &Path) -> io::Result<Identity> {
        let s = self.lock();
        // A file: its inode (kept by a rename, never reused: a copy gets a new one); a
        // directory: its path's hash (the simulator's directories are never renamed), on a
        // device of its own.
        if let Some(&ino) = s.live_dir.get(path) {
            return Ok(Identity {
                dev: 1,
                ino: ino as u64,
                born: 0,
            });
        }
        if s.dirs.contains(path) {
            return Ok(Identity {
                dev: 2,
                ino: u64::from(crc32fast::hash(path.as_os_str().as_encoded_bytes())),
                born: 0,
            });
        }
        Err(errno(rustix::io::Errno::NOENT))
    }

    fn try_lock(&self, path: &Path, shared: bool) -> io::Result<Option<LockGuard>> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Lock, None) {
            return Err(e);
        }
        s.check_parent(path)?;
        // Holders: a count, negative for the one exclusive holder.
        let held = s.locks.entry(path.to_path_buf()).or_insert(0);
        match (shared, *held) {
            (true, n) if n >= 0 => *held += 1,
            (false, 0) => *held = -1,
            _ => return Ok(None),
        }
        Ok(Some(Box::new(SimLock {
            sim: self.clone(),
            path: path.to_path_buf(),
        })))
    }

    fn probe_direct(
        &self,
        dir: &Path,
        _sample: Option<&Path>,
        _create: bool,
        try_direct: bool,
    ) -> io::Result<DirectProbe> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Probe, None) {
            return Err(e);
        }
        if !s.dirs.contains(dir) {
            return Err(errno(rustix::io::Errno::NOENT));
        }
        let c = s.config();
        Ok(DirectProbe {
            mem_align: c.mem_align,
            offset_align: c.dio_align,
            fs_block: c.fs_block,
            direct_works: try_direct && c.direct,
        })
    }
}

struct SimLock {
    sim: Sim,
    path: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut s = self.sim.lock();
        if let Some(held) = s.locks.get_mut(&self.path) {
            if *held > 1 {
                *held -= 1;
            } else {
                s.locks.remove(&self.path);
            }
        }
    }
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimFile")
            .field("ino", &self.ino)
            .field("direct", &self.direct)
            .finish()
    }
}

impl StorageFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.sim.lock().read(self, buf, offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if self.read_only {
            return Err(errno(rustix::io::Errno::BADF));
        }
        self.sim.wait_writes();
        self.sim.lock().write(self, buf, offset)
    }

    fn write_at_durable(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if self.read_only {
            return Err(errno(rustix::io::Errno::BADF));
        }
        self.sim.wait_writes();
        self.sim.lock().write_durable(self, buf, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sim.lock().sync(self)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        if self.read_only {
            return Err(errno(rustix::io::Errno::BADF));
        }
        let mut s = self.sim.lock();
        if let Gate::Fail(e) = s.gate(OpKind::SetLen, Some(&self.path)) {
            return Err(e);
        }
        let issue = s.issue();
        let inode = &mut s.inodes[self.ino];
        inode.live.resize(len as usize, 0);
        inode.pending.push((issue, FileOp::SetLen(len)));
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut s = self.sim.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Len, Some(&self.path)) {
            return Err(e);
        }
        Ok(s.inodes[self.ino].live.len() as u64)
    }

    fn read_each(&self, reads: &mut [ReadAt]) -> io::Result<()> {
        if let Gate::Fail(e) = self.sim.lock().gate(OpKind::ReadEach, Some(&self.path)) {
            return Err(e);
        }
        read_in_turn(self, reads);
        Ok(())
    }
}
