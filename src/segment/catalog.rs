//! The catalog file (`CATALOG`, format in [`crate::format::catalog`]): loaded at open, appended
//! to as files are created, sealed and removed, and written whole when a store gets one.
//!
//! Every append is written into zero slots the file already has and fdatasync'd before the
//! caller goes on: an edit counts once its sync returned. The order of each edit against the
//! file operation it describes is what makes the catalog exact after any crash (docs/design.md,
//! "Catalog"): a file's name is durable before its creation is recorded, its footer durable
//! before its seal is, and its removal recorded before it is unlinked.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::names::file_name;
use crate::error::{DamagedFile, Error, FileKind, FileProblem, Result};
use crate::format::catalog::{
    CatalogFile, CatalogState, Edit, FileState, Op, RemoteObject, SLOT_LEN, encode_header, replay,
    version_for,
};
use crate::io::file::{self, IoProfile, PlainFile};

/// Name of the catalog in the store directory.
pub const CATALOG_NAME: &str = "CATALOG";
/// Name the catalog is written under before it replaces `CATALOG`.
pub const CATALOG_TMP: &str = "CATALOG.tmp";
/// Zero slots added when the catalog runs out of them (64 KiB).
const GROW_SLOTS: u64 = 2048;

/// What open found for a catalog.
pub enum LoadedCatalog {
    /// No `CATALOG`: a new store, or one written by a version without a catalog.
    Absent,
    /// A catalog that verifies.
    Found {
        /// The file (open for writing unless the store is read-only).
        file: PlainFile,
        /// Its edits, replayed.
        state: CatalogState,
        /// Its length in slots.
        slots: u64,
        /// False when what follows its last edit could not be zeroed (a full disk): no edit
        /// may be appended.
        usable: bool,
    },
    /// A catalog that does not verify.
    Corrupt(DamagedFile),
}

/// Reads and replays the catalog of `dir`. A write-mode open then zeroes whatever follows the
/// last edit (a torn edit, or edits of an append whose sync never returned), so that no later
/// append can make them part of the log: see [`Catalog::found`].
pub fn load(dir: &Path, profile: &IoProfile) -> Result<LoadedCatalog> {
    let Some(file) = PlainFile::open(&dir.join(CATALOG_NAME), profile)? else {
        return Ok(LoadedCatalog::Absent);
    };
    let bytes = file.read_all()?;
    if !profile.read_only {
        // After a process kill (not a power loss), edits whose sync never returned may still be
        // in the page cache, and open acts on what it reads (it unlinks a file whose removal
        // it reads): made durable first, so that a power loss now cannot take them back.
        file.sync_data()?;
    }
    match replay(&bytes) {
        Ok(state) => {
            let tail_dirty = bytes[(state.end_slot as usize * SLOT_LEN).min(bytes.len())..]
                .iter()
                .any(|&b| b != 0);
            let slots = (bytes.len() / SLOT_LEN) as u64;
            let mut usable = true;
            if tail_dirty && !profile.read_only {
                let from = state.end_slot * SLOT_LEN as u64;
                let zeroed = file
                    .write_all_at(&vec![0u8; bytes.len() - from as usize], from)
                    .and_then(|()| file.sync_data());
                match zeroed {
                    Ok(()) => {}
                    // No edit can be appended safely until a later open zeroes it; the store
                    // still opens (for reads, deletes into the active segment, and the like).
                    Err(Error::StorageFull { .. }) => usable = false,
                    Err(e) => return Err(e),
                }
            }
            Ok(LoadedCatalog::Found {
                file,
                state,
                slots,
                usable,
            })
        }
        Err(e) => Ok(LoadedCatalog::Corrupt(DamagedFile {
            name: CATALOG_NAME.to_string(),
            problem: FileProblem::CatalogCorrupt {
                offset: e.offset,
                kind: e.kind,
            },
        })),
    }
}

/// How [`Catalog::write_whole`] failed.
#[derive(Debug)]
pub enum WholeError {
    /// Before the new catalog replaced the old one: the store's catalog is as it was.
    NotWritten(Error),
    /// While or after it replaced the old one: which of the two is the store's is unknown
    /// until the next open.
    Installed(Error),
}

/// The store's catalog while it is open.
pub struct Catalog {
    dir: PathBuf,
    profile: IoProfile,
    inner: Mutex<Inner>,
    /// Signalled when a group's append ends.
    appended: Condvar,
}

struct Inner {
    /// `None`: the store has no catalog (read-only without one, or a full disk kept open from
    /// writing one): edits are not recorded, and the next open writes one.
    file: Option<Arc<PlainFile>>,
    state: CatalogState,
    /// The file's length in slots.
    slots: u64,
    /// An append's sync failed (how: no space, or another error): what reached the disk is
    /// unknown, so no more are made. `Some(Failed::Io)` too for a catalog open found unusable.
    failed: Option<Failed>,
    /// Edits of calls waiting for the next append (group commit: concurrent calls share one
    /// write and one fdatasync).
    queue: Vec<Edit>,
    /// Calls numbered so far, and the highest whose append has ended (done or failed).
    issued: u64,
    done: u64,
    /// A call is appending a group: the others queue their edits and wait.
    appending: bool,
    /// The groups whose append failed (first and last call, and how), the most recent last.
    failures: VecDeque<(u64, u64, Failed)>,
}

/// How a group's append failed, for each call in it.
#[derive(Debug, Clone, Copy)]
enum Failed {
    /// No space (ENOSPC from the write or the sync).
    Full,
    /// The sync failed (the catalog is poisoned) or the write failed otherwise.
    Io,
    /// The group contradicts the catalog (a bug).
    Contradiction,
}

/// Failed groups remembered for the calls still waiting on them.
const FAILURES_KEPT: usize = 1024;

impl Catalog {
    /// A store without a catalog: edits are dropped (see [`Catalog::is_kept`]).
    pub fn absent(dir: &Path, profile: &IoProfile) -> Catalog {
        Catalog::with(dir, profile, None, CatalogState::default(), 0)
    }

    /// The catalog [`load`] found; with `usable` false, every append fails
    /// ([`Error::Poisoned`]).
    pub fn found(
        dir: &Path,
        profile: &IoProfile,
        file: PlainFile,
        state: CatalogState,
        slots: u64,
        usable: bool,
    ) -> Catalog {
        let c = Catalog::with(dir, profile, Some(file), state, slots);
        c.lock().failed = (!usable).then_some(Failed::Full);
        c
    }

    fn with(
        dir: &Path,
        profile: &IoProfile,
        file: Option<PlainFile>,
        state: CatalogState,
        slots: u64,
    ) -> Catalog {
        Catalog {
            dir: dir.to_path_buf(),
            profile: profile.clone(),
            inner: Mutex::new(Inner {
                file: file.map(Arc::new),
                state,
                slots,
                failed: None,
                queue: Vec::new(),
                issued: 0,
                done: 0,
                appending: false,
                failures: VecDeque::new(),
            }),
            appended: Condvar::new(),
        }
    }

    /// Writes a new catalog listing `files` (id, kind, state) and remembering `max_id`, and
    /// makes it the store's: written as `CATALOG.tmp`, synced, its name made durable (a failure
    /// there leaves the store's catalog as it was, and is [`WholeError::NotWritten`]), then
    /// renamed over `CATALOG` and the rename made durable. A crash leaves the old catalog (or none) or the
    /// new one, whole; a `CATALOG.tmp` left behind is the store's own unfinished copy, and is
    /// replaced.
    ///
    /// `evicted` is the eviction watermark to keep ([`CatalogState::evicted`]): written as the
    /// eviction of the (removed) file that carried it, so that open goes on ignoring the
    /// records an eviction dropped. `remote`: the sealed files among `files` whose data is in
    /// the remote only ([`CatalogState::remote`]), each written with its remote edit after its
    /// seal (a name it has for a file not listed as sealed is left out).
    pub fn write_whole(
        dir: &Path,
        profile: &IoProfile,
        files: &[(u64, FileKind, FileState)],
        max_id: u64,
        evicted: Option<(u64, FileKind, u64)>,
        remote: &BTreeMap<u64, RemoteObject>,
    ) -> std::result::Result<Catalog, WholeError> {
        let mut edits = Vec::new();
        for &(id, kind, st) in files {
            let op = match st {
                FileState::Created => Op::Create,
                FileState::Sealed { length } => Op::Seal { length },
                FileState::Removed => continue,
            };
            edits.push(Edit { id, kind, op });
            if let (FileState::Sealed { .. }, Some(o)) = (st, remote.get(&id)) {
                edits.push(Edit {
                    id,
                    kind,
                    op: Op::Remote(*o),
                });
            }
        }
        if let Some((id, kind, through)) = evicted
            && !edits.iter().any(|e| e.id == id)
        {
            edits.push(Edit {
                id,
                kind,
                op: Op::Evict { through },
            });
        }
        if max_id > edits.iter().map(|e| e.id).max().unwrap_or(0) {
            // The highest id ever used, so that it is never used again.
            edits.push(Edit {
                id: max_id,
                kind: FileKind::Log,
                op: Op::Remove,
            });
        }
        let (bytes, state, slots) = whole(&edits).ok_or_else(|| {
            WholeError::NotWritten(internal("catalog snapshot contradicts itself"))
        })?;
        let written = install(dir, profile, &bytes)?;
        Ok(Catalog::with(dir, profile, Some(written), state, slots))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the store has a catalog (edits are recorded).
    pub fn is_kept(&self) -> bool {
        self.lock().file.is_some()
    }

    /// What the catalog says about file `id`.
    pub fn file(&self, id: u64) -> Option<CatalogFile> {
        self.lock().state.files.get(&id).copied()
    }

    /// The highest id any edit names (0: none): ids above it are free.
    pub fn max_id(&self) -> u64 {
        self.lock().state.max_id
    }

    /// The replayed state.
    pub fn state(&self) -> CatalogState {
        self.lock().state.clone()
    }

    /// Appends `edits` and makes them durable. Without a catalog, does nothing. Concurrent
    /// calls share one write and one fdatasync: the first to find no append under way appends
    /// the edits of every call queued by then. A failed sync leaves the catalog unusable until
    /// the store is reopened ([`Error::Poisoned`]): which of its edits reached the disk is
    /// unknown. A failed write (no space to grow) fails the calls of its group and changes
    /// nothing: the next append writes over whatever part of it reached the file.
    pub fn record(&self, edits: &[Edit]) -> Result<()> {
        if edits.is_empty() {
            return Ok(());
        }
        let mut g = self.lock();
        if let Some(how) = g.failed {
            return Err(self.poisoned(how));
        }
        if g.file.is_none() {
            return if self.profile.read_only {
                Err(Error::ReadOnly)
            } else {
                Ok(())
            };
        }
        g.queue.extend_from_slice(edits);
        g.issued += 1;
        let mine = g.issued;
        while g.done < mine {
            if !g.appending {
                g = self.append_group(g);
                continue;
            }
            g = self.appended.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        let failed = g
            .failures
            .iter()
            .rev()
            .find(|&&(lo, hi, _)| lo <= mine && mine <= hi)
            .map(|f| f.2);
        match failed {
            None => Ok(()),
            Some(Failed::Full) => Err(Error::StorageFull {
                path: Some(self.dir.join(CATALOG_NAME)),
            }),
            Some(Failed::Io) if g.failed.is_some() => Err(Error::Poisoned),
            Some(Failed::Io) => Err(Error::io(
                "append to catalog",
                Some(self.dir.join(CATALOG_NAME)),
                std::io::Error::other("the write of the catalog failed"),
            )),
            Some(Failed::Contradiction) => Err(internal("catalog edit contradicts the catalog")),
        }
    }

    /// What a call gets once the catalog is poisoned: a full disk stays `StorageFull` (as the
    /// log's failures do), anything else is `Poisoned`.
    fn poisoned(&self, how: Failed) -> Error {
        match how {
            Failed::Full => Error::StorageFull {
                path: Some(self.dir.join(CATALOG_NAME)),
            },
            _ => Error::Poisoned,
        }
    }

    /// Appends every queued edit as one group (the lock is released during the I/O, so that
    /// other calls queue meanwhile), and marks the calls numbered so far done.
    fn append_group<'a>(&'a self, mut g: MutexGuard<'a, Inner>) -> MutexGuard<'a, Inner> {
        g.appending = true;
        let batch = std::mem::take(&mut g.queue);
        let (first, last) = (g.done + 1, g.issued);
        let file = g.file.clone().expect("a catalog file");
        let mut next = g.state.clone();
        let mut bytes = Vec::with_capacity(batch.len() * SLOT_LEN);
        let mut contradiction = false;
        for e in &batch {
            contradiction |= next.apply(*e).is_err();
            bytes.extend_from_slice(&e.encode());
        }
        next.end_slot += batch.len() as u64;
        let mut slots = g.slots;
        if next.end_slot > slots {
            // Out of zero slots: the file grows by a few more, written with the edits.
            slots = next.end_slot + GROW_SLOTS;
            bytes.resize((slots - g.state.end_slot) as usize * SLOT_LEN, 0);
        }
        let at = g.state.end_slot * SLOT_LEN as u64;
        // The first eviction of a version-1 catalog (or the first remote edit of a version-1
        // or 2 one): op 4 may only be read under a version-2 header, op 5 under a version-3
        // one (older builds then refuse the store as too new, instead of calling it damaged),
        // so the catalog is written anew, of the version its edits need, with the group's edits
        // in it, through the crash-safe rewrite: a crash leaves the old catalog without the
        // group's edits (whose files are unlinked, or punched, only after this returns) or the
        // new one with them (docs/design.md, "Catalog").
        let upgrade = !contradiction && g.state.version < version_for(&batch);
        let upgraded = upgrade.then(|| {
            let mut all = snapshot(&g.state);
            all.extend_from_slice(&batch);
            whole(&all)
        });
        let outcome = if contradiction || matches!(upgraded, Some(None)) {
            Err(Failed::Contradiction)
        } else {
            drop(g);
            let how = |e: &Error| match e {
                Error::StorageFull { .. } => Failed::Full,
                _ => Failed::Io,
            };
            let written = match upgraded {
                Some(Some((bytes, state, slots))) => {
                    match install(&self.dir, &self.profile, &bytes) {
                        Ok(f) => Ok(Some((f, state, slots))),
                        // The old catalog is the store's, as it was: nothing is poisoned.
                        Err(WholeError::NotWritten(e)) => Err((how(&e), false)),
                        // Which of the two is the store's is unknown until the next open.
                        Err(WholeError::Installed(e)) => Err((how(&e), true)),
                    }
                }
                _ => match file.write_all_at(&bytes, at) {
                    // A failed sync poisons the catalog whatever the cause; ENOSPC is still
                    // said as such.
                    Ok(()) => file.sync_data().map(|()| None).map_err(|e| (how(&e), true)),
                    Err(e) => Err((how(&e), false)),
                },
            };
            g = self.lock();
            written.map_err(|(how, poisoned)| {
                if poisoned {
                    g.failed.get_or_insert(how);
                }
                how
            })
        };
        match outcome {
            Ok(None) => {
                g.state = next;
                g.slots = slots;
            }
            Ok(Some((f, state, slots))) => {
                g.file = Some(Arc::new(f));
                g.state = state;
                g.slots = slots;
            }
            Err(how) => {
                if g.failures.len() == FAILURES_KEPT {
                    g.failures.pop_front();
                }
                g.failures.push_back((first, last, how));
            }
        }
        g.done = last;
        g.appending = false;
        self.appended.notify_all();
        g
    }

    /// Records that the files `files` were created (their names are durable).
    pub fn created(&self, files: &[(u64, FileKind)]) -> Result<()> {
        self.record(&edits(files, Op::Create))
    }

    /// Records that file `id` is sealed (its footer is durable), `length` bytes long.
    pub fn sealed(&self, id: u64, kind: FileKind, length: u64) -> Result<()> {
        self.record(&[Edit {
            id,
            kind,
            op: Op::Seal { length },
        }])
    }

    /// Removes store files that hold nothing the store needs: their removal is recorded first,
    /// then they are unlinked, then (with `durable`) the directory is fsync'd. If the removal
    /// cannot be recorded, nothing is unlinked: a file the catalog lists must not go missing.
    pub fn remove(&self, files: &[(u64, FileKind)], durable: bool) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        self.record(&edits(files, Op::Remove))?;
        for &(id, kind) in files {
            file::remove_file(&self.profile, &self.dir.join(file_name(id, kind)))?;
        }
        if durable {
            file::sync_dir(&self.profile, &self.dir)?;
        }
        Ok(())
    }

    /// Records that files `files` are dropped whole for the size cap, each as evicted through
    /// sequence number `through`: from then on open ignores every record at or below it, in
    /// whatever file, and unlinks those files if it finds them (docs/design.md, "Eviction").
    /// All the edits go in one append: a crash keeps a prefix of them, and any one of them
    /// carries the watermark. The files stay until [`Catalog::unlink`]: the caller first takes
    /// the records out of its index, which it may do only once the watermark is durable.
    pub fn evicted(&self, files: &[(u64, FileKind)], through: u64) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        self.record(&edits(files, Op::Evict { through }))
    }

    /// Unlinks files whose removal or eviction is recorded, then fsyncs the directory.
    pub fn unlink(&self, files: &[(u64, FileKind)]) -> Result<()> {
        if files.is_empty() {
            return Ok(());
        }
        for &(id, kind) in files {
            file::remove_file(&self.profile, &self.dir.join(file_name(id, kind)))?;
        }
        file::sync_dir(&self.profile, &self.dir)
    }

    /// Records that sealed file `id`'s data is in the remote only, as `object` (its local
    /// copy may then lose everything but what reads need: docs/design-remote.md, "Remote tier").
    /// Fails without a catalog: a file the store has no durable record of as remote must keep
    /// its data.
    pub fn remote_only(&self, id: u64, kind: FileKind, object: RemoteObject) -> Result<()> {
        if !self.is_kept() {
            return Err(internal("no catalog: a file cannot be made remote-only"));
        }
        self.record(&[Edit {
            id,
            kind,
            op: Op::Remote(object),
        }])
    }

    /// The sealed files whose data is in the remote only.
    pub fn remote_files(&self) -> BTreeMap<u64, RemoteObject> {
        self.lock().state.remote.clone()
    }

    /// The remote object of file `id`, if its data is in the remote only.
    pub fn remote_of(&self, id: u64) -> Option<RemoteObject> {
        self.lock().state.remote.get(&id).copied()
    }

    /// The highest sequence number an eviction dropped (0: none).
    pub fn evicted_through(&self) -> u64 {
        self.lock().state.evicted.map_or(0, |(_, _, t)| t)
    }

    /// The files the catalog lists as sealed or being written that the directory does not
    /// have now, and sealed ones whose length changed (for `Store::verify`: open checks the
    /// same as it opens each file). A blob file listed as not sealed held no acknowledged put
    /// and is not missed. Safe beside writers: a file is listed only after it was created, and
    /// a removal is recorded before the unlink, so a file counts as missing only if the
    /// catalog still lists it after the directory was read.
    pub fn check_dir(&self) -> Result<Vec<DamagedFile>> {
        let before = self.state();
        if self.lock().file.is_none() {
            return Ok(Vec::new());
        }
        let mut present = std::collections::HashMap::new();
        for (id, kind) in super::names::list(&self.profile, &self.dir)? {
            let path = self.dir.join(file_name(id, kind));
            // A file removed between the listing and here is judged by the catalog below.
            let len = match PlainFile::open(&path, &self.profile)? {
                Some(f) => f.len()?,
                None => continue,
            };
            present.insert((id, kind), len);
        }
        let after = self.state();
        let still_listed = |id: u64| {
            after
                .files
                .get(&id)
                .is_some_and(|f| f.state != FileState::Removed)
        };
        let mut problems = Vec::new();
        for (&id, f) in &before.files {
            let name = file_name(id, f.kind);
            let found = present.get(&(id, f.kind)).copied();
            let problem = match (f.state, found) {
                (FileState::Removed, _) => continue,
                (FileState::Created, None) if f.kind == FileKind::Blob => continue,
                (FileState::Created, None) => FileProblem::Missing { sealed_len: None },
                (FileState::Sealed { length }, None) => FileProblem::Missing {
                    sealed_len: Some(length),
                },
                (FileState::Sealed { length }, Some(len)) if len != length => {
                    FileProblem::LengthChanged {
                        expected: length,
                        found: len,
                    }
                }
                _ => continue,
            };
            if still_listed(id) {
                problems.push(DamagedFile { name, problem });
            }
        }
        Ok(problems)
    }
}

/// A whole catalog holding `edits` (header of the version they need, the edits, then
/// `GROW_SLOTS` zero slots), its replayed state and its length in slots; `None` if the edits
/// contradict each other.
fn whole(edits: &[Edit]) -> Option<(Vec<u8>, CatalogState, u64)> {
    let version = version_for(edits);
    let mut state = CatalogState {
        version,
        ..CatalogState::default()
    };
    let mut bytes = encode_header(version).to_vec();
    for e in edits {
        state.apply(*e).ok()?;
        bytes.extend_from_slice(&e.encode());
    }
    state.end_slot = 1 + edits.len() as u64;
    let slots = state.end_slot + GROW_SLOTS;
    bytes.resize(slots as usize * SLOT_LEN, 0);
    Some((bytes, state, slots))
}

/// Makes `bytes` the store's catalog: written as `CATALOG.tmp`, synced, its name made durable
/// (a failure there leaves the store's catalog as it was: [`WholeError::NotWritten`]), then
/// renamed over `CATALOG` and the rename made durable. A crash leaves the old catalog (or
/// none) or the new one, whole.
fn install(dir: &Path, profile: &IoProfile, bytes: &[u8]) -> Result<PlainFile, WholeError> {
    let tmp = dir.join(CATALOG_TMP);
    // Every change of a name is made durable before the next: the rename then can only
    // ever move the new file's name, whatever else a crash keeps of the directory's
    // pending changes (a left-over `CATALOG.tmp` of an earlier attempt, unsynced, could
    // otherwise take the new file's place).
    let written = (|| {
        match file::remove_file(profile, &tmp) {
            Ok(()) => file::sync_dir(profile, dir)?,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let f = PlainFile::create_new(&tmp, profile)?;
        f.write_all_at(bytes, 0)?;
        f.sync_data()?;
        file::sync_dir(profile, dir)?;
        Ok(f)
    })()
    .map_err(WholeError::NotWritten)?;
    file::rename(profile, &tmp, &dir.join(CATALOG_NAME)).map_err(WholeError::Installed)?;
    file::sync_dir(profile, dir).map_err(WholeError::Installed)?;
    Ok(written)
}

/// Edits that replay to `state`'s files, removed ones included (a removal recorded but whose
/// unlink is still under way must stay recorded), with its highest id and watermark.
fn snapshot(state: &CatalogState) -> Vec<Edit> {
    let mut edits: Vec<Edit> = state
        .files
        .iter()
        .map(|(&id, f)| Edit {
            id,
            kind: f.kind,
            op: match f.state {
                FileState::Created => Op::Create,
                FileState::Sealed { length } => Op::Seal { length },
                FileState::Removed => Op::Remove,
            },
        })
        .collect();
    if let Some((id, kind, through)) = state.evicted {
        match edits.iter_mut().find(|e| e.id == id) {
            Some(e) => e.op = Op::Evict { through },
            None => edits.push(Edit {
                id,
                kind,
                op: Op::Evict { through },
            }),
        }
    }
    for (&id, &o) in &state.remote {
        if let Some(f) = state.files.get(&id) {
            edits.push(Edit {
                id,
                kind: f.kind,
                op: Op::Remote(o),
            });
        }
    }
    if state.max_id > edits.iter().map(|e| e.id).max().unwrap_or(0) {
        edits.push(Edit {
            id: state.max_id,
            kind: FileKind::Log,
            op: Op::Remove,
        });
    }
    edits
}

/// One edit `op` per file.
fn edits(files: &[(u64, FileKind)], op: Op) -> Vec<Edit> {
    files
        .iter()
        .map(|&(id, kind)| Edit { id, kind, op })
        .collect()
}

fn internal(what: &'static str) -> Error {
    Error::Io {
        op: what,
        path: None,
        source: std::io::Error::other("internal error"),
    }
}
