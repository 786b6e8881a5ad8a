//! Snapshots: a state machine's podstore store checkpointed into `<node>/snapshots`.
//!
//! A snapshot is a directory `snap-<index+1, 20 digits>-<nonce>/` holding `meta` (the postcard
//! snapshot metadata: last log id and membership) and `data/`, a podstore checkpoint that has
//! been opened and closed once, so that every segment in it is sealed and no store ever writes
//! to one of its files again: a state machine installing it hard-links them. It is built in
//! `<name>.partial`, its files and directories synced, then renamed: a directory named `snap-`
//! is always whole. Building one copies no sealed file ([`podstore::Store::checkpoint`] links
//! them; only the active segment's records are copied).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use openraft::alias::SnapshotMetaOf;
use podstore::Store;

use crate::fsutil::{create_dirs, link_store, remove_dir, replace_file, sync_dir};
use crate::{TypeConfig, decode, encode, io_err};

pub(crate) type Meta = SnapshotMetaOf<TypeConfig>;

/// How many snapshots a node keeps: the newest, and the one before it, which a transfer that
/// began before the newest was built may still be reading.
const KEEP: usize = 2;

/// A snapshot on disk: the directory a node built or received. The data a snapshot carries
/// in openraft ([`openraft::storage::RaftStateMachine::SnapshotData`]); a transport ships its files
/// ([`crate::transfer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotDir {
    path: PathBuf,
}

impl SnapshotDir {
    /// A snapshot in `path` (a directory holding `meta` and `data/`).
    pub fn new(path: impl Into<PathBuf>) -> SnapshotDir {
        SnapshotDir { path: path.into() }
    }

    /// The snapshot's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its podstore checkpoint.
    pub(crate) fn data(&self) -> PathBuf {
        self.path.join("data")
    }

    /// Reads its metadata.
    pub(crate) fn meta(&self) -> io::Result<Meta> {
        decode(&fs::read(self.path.join("meta"))?)
    }
}

/// A node's snapshot directory.
#[derive(Debug)]
pub(crate) struct Snapshots {
    dir: PathBuf,
}

fn nonce() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(48)
}

fn name_for(meta: &Meta) -> String {
    let index = meta.last_log_id.as_ref().map_or(0, |l| l.index() + 1);
    format!("snap-{index:020}-{:016x}", nonce())
}

impl Snapshots {
    /// Opens `dir` (created if missing) and removes what an interrupted build or transfer left
    /// (`*.partial`, named by this crate only).
    pub(crate) fn open(dir: PathBuf) -> io::Result<Snapshots> {
        create_dirs(&dir)?;
        for e in fs::read_dir(&dir)? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("snap-") && name.ends_with(".partial") {
                remove_dir(&e.path())?;
            }
        }
        Ok(Snapshots { dir })
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new staging directory name for a snapshot of `meta` (not created).
    pub(crate) fn staging_for(&self, meta: &Meta) -> (PathBuf, PathBuf) {
        let name = name_for(meta);
        (
            self.dir.join(format!("{name}.partial")),
            self.dir.join(name),
        )
    }

    /// Every whole snapshot, oldest first.
    fn list(&self) -> io::Result<Vec<PathBuf>> {
        let mut names: Vec<String> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("snap-") && !n.ends_with(".partial"))
            .collect();
        names.sort();
        Ok(names.into_iter().map(|n| self.dir.join(n)).collect())
    }

    /// The newest snapshot.
    pub(crate) fn latest(&self) -> io::Result<Option<(Meta, SnapshotDir)>> {
        match self.list()?.pop() {
            Some(p) => {
                let s = SnapshotDir::new(p);
                Ok(Some((s.meta()?, s)))
            }
            None => Ok(None),
        }
    }

    /// Builds a snapshot of `store`; `read_meta` reads the applied id and membership from
    /// `store` right after the checkpoint: the caller writes nothing to `store` from its seal to
    /// then, so that they describe exactly the checkpoint's data (which is not opened: an open
    /// reads every segment's index, seconds for many GiB).
    pub(crate) fn build(
        &self,
        store: &Store,
        read_meta: impl FnOnce(&Store) -> io::Result<Meta>,
    ) -> io::Result<(Meta, SnapshotDir)> {
        let tmp = self
            .dir
            .join(format!("snap-build-{:016x}.partial", nonce()));
        fs::create_dir(&tmp)?;
        let result = (|| {
            store.checkpoint(tmp.join("data")).map_err(io_err)?;
            // From the live store: the caller writes nothing to it during the build.
            let meta = read_meta(store)?;
            // A segment the checkpoint copied (an active one: the caller seals first, so only
            // if a write came in between) is sealed by opening the copy once, so that no store
            // ever appends to a snapshot's file.
            if copied_segment(&tmp.join("data"))? {
                Store::open(tmp.join("data"))
                    .map_err(io_err)?
                    .close()
                    .map_err(io_err)?;
            }
            Ok(meta)
        })();
        let meta = match result {
            Ok(m) => m,
            Err(e) => {
                let _ = remove_dir(&tmp);
                return Err(e);
            }
        };
        let dest = self.dir.join(name_for(&meta));
        self.commit(&tmp, &dest, &meta)?;
        self.prune()?;
        Ok((meta, SnapshotDir::new(dest)))
    }

    /// Writes `meta` into the staged snapshot `tmp`, syncs it, renames it to `dest`.
    pub(crate) fn commit(&self, tmp: &Path, dest: &Path, meta: &Meta) -> io::Result<()> {
        replace_file(&tmp.join("meta"), &encode(meta)?)?;
        sync_dir(&tmp.join("data"))?;
        sync_dir(tmp)?;
        fs::rename(tmp, dest)?;
        sync_dir(&self.dir)
    }

    /// `src` as a snapshot of this node: itself when it is already in this directory, else a
    /// linked copy (never moved or changed: it may be another node's). `after_file` runs after
    /// each file linked (a test stops or kills the process there).
    pub(crate) fn adopt(
        &self,
        meta: &Meta,
        src: &SnapshotDir,
        after_file: &mut dyn FnMut() -> io::Result<()>,
    ) -> io::Result<SnapshotDir> {
        if src.path().parent() == Some(self.dir.as_path()) {
            return Ok(src.clone());
        }
        let (tmp, dest) = self.staging_for(meta);
        fs::create_dir(&tmp)?;
        let linked = link_store(&src.data(), &tmp.join("data"), after_file)
            .and_then(|()| self.commit(&tmp, &dest, meta));
        if let Err(e) = linked {
            let _ = remove_dir(&tmp);
            return Err(e);
        }
        self.prune()?;
        Ok(SnapshotDir::new(dest))
    }

    /// Removes all but the newest [`KEEP`] snapshots.
    pub(crate) fn prune(&self) -> io::Result<()> {
        let all = self.list()?;
        for old in &all[..all.len().saturating_sub(KEEP)] {
            remove_dir(old)?;
        }
        Ok(())
    }
}

/// Whether checkpoint `dir` holds a segment file of its own (one link: copied, not linked).
fn copied_segment(dir: &Path) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    for e in fs::read_dir(dir)? {
        let e = e?;
        if e.file_name().to_string_lossy().starts_with("seg-") && e.metadata()?.nlink() == 1 {
            return Ok(true);
        }
    }
    Ok(false)
}
