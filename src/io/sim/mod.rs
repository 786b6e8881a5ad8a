//! A simulated file system for tests: in memory, it models what a power loss keeps, injects I/O
//! errors, and checks the alignment of direct I/O. It implements the storage seam
//! ([`Storage`]), so a [`Store`](crate::Store) runs on it unchanged
//! (`Store::open_with_storage`).
//!
//! # The model of a crash (conservative ext4)
//!
//! * **File data.** Each file (inode) has its *durable* content, as of its last fdatasync, and
//!   the writes and truncations made since (*pending*), in order. Readers see the *live* content:
//!   the durable content with every pending operation applied. fdatasync makes the live content
//!   durable.
//! * **Directory entries.** Creations, removals and renames are pending until an fsync of their
//!   directory; an fdatasync of a file does not make its name durable. A file whose creation is
//!   lost is lost with its content, synced or not; a file whose removal is lost comes back with
//!   its durable content (and whatever of its pending writes survived).
//! * **A crash** is chosen by the test: after the Nth mutating operation ([`CrashOn::Mutation`]:
//!   write, set_len, fdatasync, create, remove, rename, directory fsync) or the Nth sync
//!   ([`CrashOn::Sync`]). From then on the simulation is frozen: every call fails with EIO and
//!   changes nothing. [`Sim::after_crash`] then builds the surviving file system, on which a new
//!   store is opened, from the durable state and the pending operations (all of them, files and
//!   directories, in the one order they were issued) according to a [`Survival`] mode.
//! * **A durable write** (`pwritev2(..., RWF_DSYNC)`, [`StorageFile::write_at_durable`]) is a
//!   write followed by a sync of that write alone: it passes the gate as a write and then as a
//!   sync (both count towards a crash point and take faults), so a crash between the two leaves
//!   it pending, to be kept, torn or lost like any unsynced write; once it returns, its bytes
//!   survive every crash, but the file's earlier pending operations stay pending (the kernel
//!   syncs the range written, and a FUA write does not flush the device's cache).
//! * **A failed fdatasync** (an injected fault) loses the file's pending writes or not, at
//!   random, sector by sector (the kernel may have dropped the dirty pages): the store must not
//!   trust anything it wrote since its last successful sync of that file.
//!
//! # Direct I/O
//!
//! A file opened with O_DIRECT accepts only writes whose offset and length are multiples of the
//! write block size and reads whose offset and length are multiples of the direct-I/O alignment,
//! from buffers aligned to the memory alignment. A violation fails the call with EINVAL, as the
//! kernel would, and is recorded: [`Sim::violations`] must be empty at the end of every test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::storage::{
    DirectProbe, Identity, LockGuard, OpenMode, ReadAt, Storage, StorageFile, read_in_turn,
};

/// Sector size of the simulated device: the granularity of torn and partly kept writes.
pub const SECTOR: usize = 512;

mod config;

pub use config::{CrashOn, Fault, FaultError, OpKind, Rng, SimConfig, Survival};

#[derive(Debug, Clone)]
enum FileOp {
    /// `durable`: written by a durable write that returned: it survives every crash.
    Write {
        offset: u64,
        data: Vec<u8>,
        durable: bool,
    },
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Create(PathBuf, usize),
    Remove(PathBuf),
    /// From, to, and the inode (a rename between two directories is made durable in two
    /// halves, one by each directory's fsync).
    Rename(PathBuf, PathBuf, usize),
}

#[derive(Debug, Clone, Default)]
struct Inode {
    durable: Vec<u8>,
    live: Vec<u8>,
    /// Operations since the last fdatasync, with their global issue numbers.
    pending: Vec<(u64, FileOp)>,
}

/// Counters of a simulation, for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Calls made, by kind.
    pub calls: BTreeMap<OpKind, u64>,
    /// Faults that fired, by kind of call and error.
    pub faults: BTreeMap<(OpKind, FaultError), u64>,
    /// Whether the crash point was reached.
    pub crashed: bool,
    /// Every fault that fired, in order: kind of call, error, name of the file (for calls on
    /// an open file or a path).
    pub fired_at: Vec<(OpKind, FaultError, Option<String>)>,
    /// fdatasync calls by the name of the thread that made them (`""`: unnamed).
    pub syncs_by_thread: BTreeMap<String, u64>,
    /// Bytes moved by reads of files (what they returned, as a disk would transfer them; with
    /// direct I/O, whole aligned blocks).
    pub read_bytes: u64,
    /// Bytes written to files (zeroes written ahead included).
    pub written_bytes: u64,
}

#[derive(Debug, Default)]
struct State {
    config: Option<SimConfig>,
    inodes: Vec<Inode>,
    durable_dir: BTreeMap<PathBuf, usize>,
    live_dir: BTreeMap<PathBuf, usize>,
    pending_dir: Vec<(u64, DirOp)>,
    dirs: BTreeSet<PathBuf>,
    locks: BTreeMap<PathBuf, i64>,
    /// Issue number of the next pending operation.
    next_issue: u64,
    counts: HashMap<OpKind, u64>,
    crash: Option<(CrashOn, u64)>,
    /// Calls that counted towards the crash point so far.
    crash_count: u64,
    crashed: bool,
    faults: Vec<Fault>,
    fired: BTreeMap<(OpKind, FaultError), u64>,
    /// Where each fault fired: the kind of call and the file's name (when on a file).
    fired_at: Vec<(OpKind, FaultError, Option<String>)>,
    syncs_by_thread: BTreeMap<String, u64>,
    read_bytes: u64,
    written_bytes: u64,
    violations: Vec<String>,
    /// Random source for failed syncs.
    rng: Option<Rng>,
}

/// What the checks before a call decided.
enum Gate {
    Go,
    Fail(io::Error),
    Short,
}

fn errno(e: rustix::io::Errno) -> io::Error {
    io::Error::from_raw_os_error(e.raw_os_error())
}

fn powered_off() -> io::Error {
    io::Error::other("simulated power loss: the machine is off")
}

impl State {
    fn config(&self) -> SimConfig {
        self.config.expect("configured")
    }

    fn block(&self) -> u64 {
        let c = self.config();
        super::storage::probe_block(c.dio_align, c.fs_block) as u64
    }

    /// Counts a call and decides whether it runs, fails or is short.
    fn gate(&mut self, kind: OpKind, at: Option<&Path>) -> Gate {
        if self.crashed {
            return Gate::Fail(powered_off());
        }
        let counts_for_crash = match self.crash {
            Some((CrashOn::Mutation, _)) => kind.mutates(),
            Some((CrashOn::Sync, _)) => matches!(kind, OpKind::Sync | OpKind::SyncDir),
            None => false,
        };
        if counts_for_crash {
            if self.crash.is_some_and(|(_, n)| self.crash_count >= n) {
                self.crashed = true;
                return Gate::Fail(powered_off());
            }
            self.crash_count += 1;
        }
        let n = self.counts.entry(kind).or_insert(0);
        let nth = *n;
        *n += 1;
        let fault = self
            .faults
            .iter()
            .find(|f| f.kind == kind && (f.nth == nth || (f.sticky && nth > f.nth)))
            .copied();
        match fault {
            None => Gate::Go,
            Some(f) => {
                let name = at.and_then(|p| p.file_name()?.to_str().map(str::to_string));
                self.fired_at.push((kind, f.error, name));
                self.fault_gate(kind, f)
            }
        }
    }

    fn fault_gate(&mut self, kind: OpKind, f: Fault) -> Gate {
        match f.error {
            FaultError::Eio => {
                *self.fired.entry((kind, f.error)).or_default() += 1;
                Gate::Fail(errno(rustix::io::Errno::IO))
            }
            FaultError::Enospc => {
                *self.fired.entry((kind, f.error)).or_default() += 1;
                Gate::Fail(errno(rustix::io::Errno::NOSPC))
            }
            // Counted where it applies.
            FaultError::Short => Gate::Short,
        }
    }

    fn issue(&mut self) -> u64 {
        self.next_issue += 1;
        self.next_issue
    }

    fn violation(&mut self, what: String) -> io::Error {
        self.violations.push(what);
        errno(rustix::io::Errno::INVAL)
    }

    fn check_parent(&self, path: &Path) -> io::Result<()> {
        match path.parent() {
            Some(p) if self.dirs.contains(p) => Ok(()),
            _ => Err(errno(rustix::io::Errno::NOENT)),
        }
    }

    fn write(&mut self, f: &SimFile, buf: &[u8], offset: u64) -> io::Result<usize> {
        let (ino, direct) = (f.ino, f.direct);
        let gate = self.gate(OpKind::Write, Some(&f.path));
        if let Gate::Fail(e) = gate {
            return Err(e);
        }
        let block = self.block();
        let mem = self.config().mem_align as usize;
        if direct
            && (!offset.is_multiple_of(block)
                || !(buf.len() as u64).is_multiple_of(block)
                || !(buf.as_ptr() as usize).is_multiple_of(mem))
        {
            return Err(self.violation(format!(
                "unaligned direct write: offset {offset}, length {}, address {:#x} (block {block}, memory {mem})",
                buf.len(),
                buf.as_ptr() as usize
            )));
        }
        let mut n = buf.len();
        if let Gate::Short = gate {
            let unit = if direct { block as usize } else { 1 };
            let short = (n / 2) / unit * unit;
            if short > 0 {
                *self
                    .fired
                    .entry((OpKind::Write, FaultError::Short))
                    .or_default() += 1;
                n = short;
            }
        }
        self.written_bytes += n as u64;
        let issue = self.issue();
        let data = buf[..n].to_vec();
        let inode = &mut self.inodes[ino];
        apply_write(&mut inode.live, offset, &data);
        inode.pending.push((
            issue,
            FileOp::Write {
                offset,
                data,
                durable: false,
            },
        ));
        Ok(n)
    }

    /// A durable write: a write, then a sync of that write alone (module doc).
    fn write_durable(&mut self, f: &SimFile, buf: &[u8], offset: u64) -> io::Result<usize> {
        let n = self.write(f, buf, offset)?;
        self.sync_gate(f)?;
        // The write just made is the file's last pending operation (the state was locked
        // throughout): it is durable now, and nothing before it is.
        match self.inodes[f.ino].pending.last_mut() {
            Some((_, FileOp::Write { durable, .. })) => *durable = true,
            _ => unreachable!("a write was just recorded"),
        }
        Ok(n)
    }

    fn read(&mut self, f: &SimFile, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let (ino, direct) = (f.ino, f.direct);
        let gate = self.gate(OpKind::Read, Some(&f.path));
        if let Gate::Fail(e) = gate {
            return Err(e);
        }
        let c = self.config();
        let align = c.dio_align as u64;
        let mem = c.mem_align as usize;
        if direct
            && (!offset.is_multiple_of(align)
                || !(buf.len() as u64).is_multiple_of(align)
                || !(buf.as_ptr() as usize).is_multiple_of(mem))
        {
            return Err(self.violation(format!(
                "unaligned direct read: offset {offset}, length {}, address {:#x} (alignment {align}, memory {mem})",
                buf.len(),
                buf.as_ptr() as usize
            )));
        }
        let live = &self.inodes[ino].live;
        let start = (offset as usize).min(live.len());
        let mut n = (live.len() - start).min(buf.len());
        if let Gate::Short = gate {
            let unit = if direct { align as usize } else { 1 };
            let short = (n / 2) / unit * unit;
            if short > 0 {
                *self
                    .fired
                    .entry((OpKind::Read, FaultError::Short))
                    .or_default() += 1;
                n = short;
            }
        }
        buf[..n].copy_from_slice(&live[start..start + n]);
        self.read_bytes += n as u64;
        Ok(n)
    }

    fn sync(&mut self, f: &SimFile) -> io::Result<()> {
        self.sync_gate(f)?;
        let inode = &mut self.inodes[f.ino];
        inode.durable = inode.live.clone();
        inode.pending.clear();
        Ok(())
    }

    /// The checks before a sync (an fdatasync, or a durable write's): counts it, and fails it
    /// on a crash or an injected fault; a failed sync loses pending writes of the file at
    /// random.
    fn sync_gate(&mut self, f: &SimFile) -> io::Result<()> {
        let thread = std::thread::current().name().unwrap_or("").to_string();
        *self.syncs_by_thread.entry(thread).or_insert(0) += 1;
        let ino = f.ino;
        match self.gate(OpKind::Sync, Some(&f.path)) {
            Gate::Fail(e) => {
                if !self.crashed {
                    // A failed fdatasync: the dirty data may or may not have been written,
                    // and the kernel forgets it either way.
                    let mut rng = self.rng.take().unwrap_or_else(|| Rng::new(7));
                    let inode = &mut self.inodes[ino];
                    let pending = std::mem::take(&mut inode.pending);
                    let mut content = inode.durable.clone();
                    for (_, op) in &pending {
                        apply_partly(&mut content, op, Survival::RandomSectors, false, &mut rng);
                    }
                    inode.durable = content.clone();
                    inode.live = content;
                    self.rng = Some(rng);
                }
                Err(e)
            }
            Gate::Go | Gate::Short => Ok(()),
        }
    }
}

fn apply_write(content: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if content.len() < end {
        content.resize(end, 0);
    }
    content[offset as usize..end].copy_from_slice(data);
}

/// Applies what survives of `op` to `content`. `last_write` marks the write that
/// [`Survival::TearLast`] tears.
fn apply_partly(
    content: &mut Vec<u8>,
    op: &FileOp,
    mode: Survival,
    last_write: bool,
    rng: &mut Rng,
) {
    match op {
        FileOp::SetLen(len) => {
            if mode != Survival::RandomSectors || rng.coin() {
                content.resize(*len as usize, 0);
            }
        }
        // A durable write survives whole, whatever the mode.
        FileOp::Write {
            offset,
            data,
            durable: true,
        } => apply_write(content, *offset, data),
        FileOp::Write { offset, data, .. } => match mode {
            Survival::TearLast { tear_align } if last_write => {
                let units = data.len() / tear_align;
                // Strictly less than the whole write (when it has more than one unit).
                let keep = if units == 0 {
                    0
                } else {
                    rng.below(units as u64) as usize * tear_align
                };
                if keep > 0 {
                    apply_write(content, *offset, &data[..keep]);
                }
            }
            Survival::RandomSectors => {
                for (i, sector) in data.chunks(SECTOR).enumerate() {
                    if rng.coin() {
                        let at = *offset + (i * SECTOR) as u64;
                        // A sector past the end of the file extends it; the hole reads zero.
                        apply_write(content, at, sector);
                    }
                }
            }
            _ => apply_write(content, *offset, data),
        },
    }
}

/// The simulated file system: shared by the stores opened on it and their files.
#[derive(Clone, Default)]
pub struct Sim {
    state: Arc<Mutex<State>>,
    /// Set while writes are held ([`Sim::hold_writes`]): a write waits, outside the state's
    /// lock, until they are released.
    held: Arc<(Mutex<bool>, std::sync::Condvar)>,
}

impl fmt::Debug for Sim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sim").finish_non_exhaustive()
    }
}

impl Sim {
    /// An empty file system.
    pub fn new(config: SimConfig) -> Sim {
        let sim = Sim::default();
        sim.lock().config = Some(config);
        sim
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Holds every later write (`write_at`, `write_at_durable`) until [`Sim::release_writes`]:
    /// a device that has stopped taking writes for a while, so that a test can make the store's
    /// writer fall behind. Reads and syncs go on.
    pub fn hold_writes(&self) {
        *self.held.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
    }

    /// [`Sim::hold_writes`], released when the returned guard is dropped (or before, by
    /// [`Sim::release_writes`]): a failed assertion then cannot leave a store's close waiting
    /// on a held device.
    pub fn hold_writes_guarded(&self) -> HeldWrites<'_> {
        self.hold_writes();
        HeldWrites(self)
    }

    /// Lets held writes (and later ones) go.
    pub fn release_writes(&self) {
        *self.held.0.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.held.1.notify_all();
    }

    /// Waits while writes are held.
    fn wait_writes(&self) {
        let (lock, released) = &*self.held;
        let mut held = lock.lock().unwrap_or_else(|p| p.into_inner());
        while *held {
            held = released.wait(held).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Crashes at the `n`th (from 0) call of the kinds `on` names: it and every later call fail.
    pub fn crash_at(&self, on: CrashOn, n: u64) {
        let mut s = self.lock();
        s.crash = Some((on, n));
        s.crash_count = 0;
    }

    /// Crashes now.
    pub fn crash_now(&self) {
        self.lock().crashed = true;
    }

    /// Whether the crash point was reached.
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        self.lock().faults.push(fault);
    }

    /// Removes every fault ("the space was freed", "the cable was reseated").
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Seeds the random choices of failed syncs.
    pub fn seed(&self, seed: u64) {
        self.lock().rng = Some(Rng::new(seed));
    }

    /// Alignment violations of direct I/O seen so far.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }

    /// The calls made so far that change the file system (writes, syncs, creations, removals,
    /// renames, directory syncs...): what a crash point counts ([`CrashOn::Mutation`]).
    pub fn mutating_calls(&self) -> u64 {
        self.stats()
            .calls
            .iter()
            .filter(|(k, _)| k.mutates())
            .map(|(_, n)| n)
            .sum()
    }

    /// Counters.
    pub fn stats(&self) -> SimStats {
        let s = self.lock();
        SimStats {
            calls: s.counts.iter().map(|(k, v)| (*k, *v)).collect(),
            faults: s.fired.clone(),
            crashed: s.crashed,
            fired_at: s.fired_at.clone(),
            syncs_by_thread: s.syncs_by_thread.clone(),
            read_bytes: s.read_bytes,
            written_bytes: s.written_bytes,
        }
    }

    /// Live content of the file at `path`, if it exists (for tests that damage or inspect).
    pub fn file_names(&self, dir: &Path) -> Vec<String> {
        let s = self.lock();
        s.live_dir
            .keys()
            .filter(|p| p.parent() == Some(dir))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
            .collect()
    }

    /// The file system that a power loss now leaves: a new simulation holding only what
    /// survives under `mode` (random choices from `seed`), with nothing pending, no lock held,
    /// no crash point and no faults. Works whether or not the crash point was reached; this
    /// simulation is left as it is.
    pub fn after_crash(&self, mode: Survival, seed: u64) -> Sim {
        let s = self.lock();
        let mut rng = Rng::new(seed);
        // Every pending operation, in issue order.
        enum Item<'a> {
            File(usize, &'a FileOp),
            Dir(&'a DirOp),
        }
        let mut items: Vec<(u64, Item<'_>)> = Vec::new();
        for (ino, inode) in s.inodes.iter().enumerate() {
            items.extend(
                inode
                    .pending
                    .iter()
                    .map(|(i, op)| (*i, Item::File(ino, op))),
            );
        }
        items.extend(s.pending_dir.iter().map(|(i, op)| (*i, Item::Dir(op))));
        items.sort_by_key(|(i, _)| *i);
        let keep_upto = match mode {
            Survival::Prefix => rng.below(items.len() as u64 + 1) as usize,
            Survival::DropAll => 0,
            _ => items.len(),
        };
        // The write that TearLast tears: the last that is not durable yet.
        let last_write = items
            .iter()
            .rposition(|(_, it)| matches!(it, Item::File(_, FileOp::Write { durable: false, .. })));
        let mut contents: Vec<Vec<u8>> = s.inodes.iter().map(|i| i.durable.clone()).collect();
        let mut dir = s.durable_dir.clone();
        for (pos, (_, item)) in items.iter().enumerate() {
            // Past the kept prefix, only durable writes (synced, by their own sync).
            let durable = matches!(item, Item::File(_, FileOp::Write { durable: true, .. }));
            if pos >= keep_upto && !durable {
                continue;
            }
            match item {
                Item::File(ino, op) => apply_partly(
                    &mut contents[*ino],
                    op,
                    mode,
                    Some(pos) == last_write,
                    &mut rng,
                ),
                Item::Dir(op) => {
                    if mode == Survival::RandomSectors && !rng.coin() {
                        continue;
                    }
                    match op {
                        DirOp::Create(path, ino) => {
                            dir.insert(path.clone(), *ino);
                        }
                        DirOp::Remove(path) => {
                            dir.remove(path);
                        }
                        DirOp::Rename(from, to, _) => {
                            if let Some(ino) = dir.remove(from) {
                                dir.insert(to.clone(), ino);
                            }
                        }
                    }
                }
            }
        }
        let inodes = contents
            .into_iter()
            .map(|c| Inode {
                durable: c.clone(),
                live: c,
                pending: Vec::new(),
            })
            .collect();
        let state = State {
            config: s.config,
            inodes,
            live_dir: dir.clone(),
            durable_dir: dir,
            dirs: s.dirs.clone(),
            ..State::default()
        };
        Sim {
            state: Arc::new(Mutex::new(state)),
            held: Arc::default(),
        }
    }

    /// The file system that a kill of the process (not of the machine) now leaves: everything
    /// as it is, unsynced writes still pending (in the page cache), no lock held, no crash point
    /// and no faults.
    pub fn after_process_kill(&self) -> Sim {
        let s = self.lock();
        let state = State {
            config: s.config,
            inodes: s.inodes.clone(),
            durable_dir: s.durable_dir.clone(),
            live_dir: s.live_dir.clone(),
            pending_dir: s.pending_dir.clone(),
            dirs: s.dirs.clone(),
            next_issue: s.next_issue,
            ..State::default()
        };
        Sim {
            state: Arc::new(Mutex::new(state)),
            held: Arc::default(),
        }
    }

    fn new_file(&self, path: &Path, direct: bool) -> io::Result<Box<dyn StorageFile>> {
        let mut s = self.lock();
        if let Gate::Fail(e) = s.gate(OpKind::Create, Some(path)) {
            return Err(e);
        }
        s.check_parent(path)?;
        if s.live_dir.contains_key(path) {
            return Err(errno(rustix::io::Errno::EXIST));
        }
        let ino = s.inodes.len();
        s.inodes.push(Inode::default());
        s.live_dir.insert(path.to_path_buf(), ino);
        let issue = s.issue();
        s.pending_dir
            .push((issue, DirOp::Create(path.to_path_buf(), ino)));
        Ok(Box::new(SimFile {
            sim: self.clone(),
            read_only: false,
            path: path.to_path_buf(),
            ino,
            direct,
        }))
    }
}

/// An open file of a [`Sim`].
struct SimFile {
    sim: Sim,
    /// Opened with [`OpenMode::ReadOnly`]: writes fail with EBADF, as on a real descriptor.
    read_only: bool,
    /// The path it was opened by (for reports).
    path: PathBuf,
    ino: usize,
    direct: bool,
}

mod seam;

#[cfg(test)]
mod tests;

/// Writes held until this is dropped ([`Sim::hold_writes_guarded`]).
#[must_use = "writes are released when this is dropped"]
pub struct HeldWrites<'a>(&'a Sim);

impl Drop for HeldWrites<'_> {
    fn drop(&mut self) {
        self.0.release_writes();
    }
}
