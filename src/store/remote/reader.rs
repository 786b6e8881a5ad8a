//! [`RemoteReader`]: a read-only follower of a prefix written by a store on another machine
//! (issue 38, "Restore and readers"; docs/design-remote.md, "Readers on other machines").
//!
//! A reader never writes to the remote and never takes an epoch, so it cannot fence the
//! writer. Its state is a *snapshot*: a read-only store over a directory of its own cache,
//! restored from one manifest with footers only (`restore.rs`: each file's head, crc tables
//! and footer; its data read by one ranged GET per value through `RemoteFile`). A refresh
//! builds the next manifest's snapshot beside the current one (files the two manifests share
//! are hard-linked, not downloaded again) and swaps it in; a read holds the snapshot it
//! started on, so it sees one manifest's state, never a mix, and the old directory is removed
//! once the last holder lets go.
//!
//! The cache directory (the reader's own, never the writer's):
//!
//! ```text
//! <cache>/PODSTORE-READER                      the prefix it follows (written at its first open)
//! <cache>/LOCK                                 one reader at a time
//! <cache>/manifest-<number, 20 digits>/        a snapshot: a store restored from that manifest
//! <cache>/manifest-<number>.podstore-restore/  a snapshot being restored
//! ```

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwap;

use super::manifest;
use super::restore::{self, Earlier};
use crate::error::{Error, Result};
use crate::format::catalog::RemoteObject;
use crate::format::manifest::{Manifest, ManifestFile};
use crate::io::file::{self, DirLock, IoProfile, PlainFile};
use crate::io::storage::{RealStorage, Storage};
use crate::meta::ValueMeta;
use crate::options::{Options, RemoteConfig};
use crate::range::ValueRange;
use crate::segment;
use crate::store::background::Ticker;
use crate::store::inner::Inner;
use crate::store::{Store, ValueReader, open};

/// The file that marks a directory as a reader's cache, and names the prefix it follows.
const MARKER: &str = "PODSTORE-READER";
/// [`MARKER`] being written.
const MARKER_TMP: &str = "PODSTORE-READER.tmp";
/// The first line of [`MARKER`]; the prefix follows on the second.
const MARKER_HEADER: &str = "podstore remote reader 1";
/// The name of a snapshot's directory is this and the manifest's number (20 digits).
const SNAPSHOT_PREFIX: &str = "manifest-";

/// A read-only follower of a [remote](Options::remote) prefix that a [`Store`] on another
/// machine writes: it serves every key of the newest manifest it has read, and picks up newer
/// manifests on demand ([`RemoteReader::refresh`]) or on an interval
/// ([`Options::remote_refresh_interval`]). One writer, any number of readers, no consensus:
/// a reader never writes to the remote and never fences the writer.
///
/// Open reads the newest manifest and, of each file it names, only the footer, the head and
/// the crc tables (about 1 % of the stored bytes), into `cache_dir` (the reader's own
/// directory); a value is then one ranged GET of the remote (a small value's record, a range's
/// chunks), checked against the record's checksums. Writes are refused with
/// [`Error::ReadOnly`].
///
/// **Consistency.** The reader serves the writer's state as of one manifest: every write
/// covered by that manifest's remote flush, none after it. Each call reads one manifest's
/// state; successive calls may see newer ones (never older). For several reads of one state,
/// take a [`RemoteSnapshot`]. How far behind the writer it is: the writer's remote lag (its
/// flushes) plus the time since the reader's last refresh.
///
/// **Objects gone.** Should an object the reader's manifest names be gone from the remote
/// (removed once no manifest within a retention window names it), reads of it fail with
/// [`Error::Remote`] whose source's kind is
/// [`RemoteErrorKind::NotFound`](crate::remote::RemoteErrorKind::NotFound), naming the object;
/// never with other bytes. A refresh moves the reader to the newest manifest.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use std::sync::Arc;
/// use podstore::{Options, RemoteReader, Store};
/// // In memory (the `testing` feature); podstore_remote::ObjectStoreRemote for S3 & co.
/// let remote = Arc::new(podstore::remote::MemoryRemote::new());
/// let opts = Options::default().remote(remote, "photos");
/// // The writer, on one machine.
/// let store = Store::open_with(dir.path().join("writer"), opts.clone())?;
/// store.put("cat.jpg", "v1")?;
/// store.flush_remote()?;
/// // A reader, on another.
/// let reader = RemoteReader::open(dir.path().join("reader-cache"), opts)?;
/// assert_eq!(reader.get("cat.jpg")?.as_deref(), Some(&b"v1"[..]));
/// store.put("cat.jpg", "v2")?;
/// store.flush_remote()?;
/// assert_eq!(reader.get("cat.jpg")?.as_deref(), Some(&b"v1"[..])); // not refreshed yet
/// reader.refresh()?;
/// assert_eq!(reader.get("cat.jpg")?.as_deref(), Some(&b"v2"[..]));
/// assert!(matches!(reader.snapshot().store().put("k", "v"), Err(podstore::Error::ReadOnly)));
/// # Ok(()) }
/// ```
pub struct RemoteReader {
    following: Arc<Following>,
    /// The refresh thread ([`Options::remote_refresh_interval`]), stopped on drop.
    ticker: Option<Ticker>,
}

/// What a reader and its refresh thread share.
struct Following {
    cache: PathBuf,
    /// The remote, read with footers only (a local budget of 0).
    config: RemoteConfig,
    /// The options each snapshot's store is opened with (read-only, no warm-up).
    opts: Options,
    storage: Arc<dyn Storage>,
    current: ArcSwap<Snapshot>,
    /// One refresh at a time.
    refreshing: Mutex<()>,
    _lock: DirLock,
}

/// One manifest's state: a read-only store over its own directory of the cache.
struct Snapshot {
    manifest: Manifest,
    /// The files it restored, for the next snapshot to link (see [`Earlier`]).
    files: HashMap<u64, (ManifestFile, Option<RemoteObject>)>,
    dir: PathBuf,
    storage: Arc<dyn Storage>,
    /// `None` only while it is dropped.
    store: Option<Store>,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        // The store first (its files closed), then its directory: every file in it is one the
        // reader restored there.
        drop(self.store.take());
        remove_snapshot_dir(&*self.storage, &self.dir);
    }
}

/// The state of one manifest, as a [`RemoteReader`] serves it: reads through
/// [`RemoteSnapshot::store`] (a read-only [`Store`]: `get`, `get_range`, `reader`, `metadata`,
/// `keys`, `range`, `prefix`, ...) all see this manifest's state, whatever refreshes happen
/// meanwhile. Cheap to clone; the snapshot's files stay until the last clone is dropped.
#[derive(Clone)]
pub struct RemoteSnapshot(Arc<Snapshot>);

impl RemoteSnapshot {
    /// The snapshot's store: read-only (writes are [`Error::ReadOnly`]).
    pub fn store(&self) -> &Store {
        self.0.store.as_ref().expect("taken only on drop")
    }

    /// The number of the manifest it holds (0: the prefix had none).
    pub fn manifest(&self) -> u64 {
        self.0.manifest.number
    }
}

impl fmt::Debug for RemoteSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteSnapshot")
            .field("manifest", &self.manifest())
            .field("dir", &self.0.dir)
            .finish()
    }
}

/// What [`RemoteReader::refresh`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteRefreshReport {
    /// The number of the manifest the reader serves now.
    pub manifest: u64,
    /// Whether it is newer than the one it served before.
    pub changed: bool,
    /// Files that manifest names.
    pub files: usize,
    /// Of those, the files read from the remote (their footers, heads and crc tables; a file
    /// of under ~16 KiB of data whole); the others were the previous manifest's too, and kept.
    pub files_downloaded: usize,
    /// Bytes read from the remote for them (manifests not counted).
    pub bytes_downloaded: u64,
}

impl RemoteReader {
    /// Opens a reader of the prefix [`Options::remote`] names, with `cache_dir` as its own
    /// local directory (created if needed), and reads the newest manifest (a prefix without
    /// one is served empty until a refresh finds one). Never writes to the remote.
    ///
    /// `cache_dir` must be empty or a reader's cache of the same prefix (whose earlier
    /// snapshots are removed): a directory holding anything else is
    /// [`Error::ForeignFiles`], the cache of another prefix [`Error::InvalidOptions`], one that
    /// another reader has open [`Error::Locked`]. The other options apply to the snapshots'
    /// stores (`cache_capacity`, `io_mode`, ...), which are read-only whatever
    /// [`Options::read_only`] says. Errors: [`Error::InvalidOptions`] without a remote;
    /// [`Error::Remote`] when the remote keeps failing or an object the manifest names is
    /// gone; [`Error::RemoteCorruption`] for a damaged manifest or footer.
    pub fn open(cache_dir: impl AsRef<Path>, opts: Options) -> Result<RemoteReader> {
        Self::open_with_storage(cache_dir.as_ref(), opts, Arc::new(RealStorage))
    }

    fn open_with_storage(
        cache: &Path,
        opts: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<RemoteReader> {
        let Some(config) = opts.remote.clone() else {
            return Err(Error::InvalidOptions(
                "a RemoteReader needs Options::remote: the remote and prefix it follows",
            ));
        };
        // The user's options checked as a writer's would be (a remote refuses `read_only`
        // there: the reader sets it itself).
        let mut checked = opts.clone();
        checked.read_only = false;
        checked.alongside_writer = false;
        checked.validate()?;
        if config.refresh_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidOptions(
                "remote_refresh_interval must be positive",
            ));
        }
        let profile = profile(&storage);
        let lock = claim_cache(cache, &config.prefix, &profile)?;
        let config = RemoteConfig {
            // Footers only, always: data is read by ranged GETs.
            local_budget: Some(0),
            ..config
        };
        let mut snapshot_opts = checked;
        snapshot_opts.read_only = true;
        // A warm-up would read values from the remote at every refresh.
        snapshot_opts.warm_cache = false;
        snapshot_opts.remote = Some(config.clone());
        // A prefix without a manifest yet is served empty (manifest 0) until one is written.
        let newest = manifest::newest(&config)?.unwrap_or_default();
        let (first, _) = build(cache, &config, &snapshot_opts, &storage, &newest, None)?;
        let following = Arc::new(Following {
            cache: cache.to_path_buf(),
            config,
            opts: snapshot_opts,
            storage,
            current: ArcSwap::from_pointee(first),
            refreshing: Mutex::new(()),
            _lock: lock,
        });
        let ticker = match following.config.refresh_interval {
            Some(every) => {
                let weak: Weak<Following> = Arc::downgrade(&following);
                Some(Ticker::start("podstore-reader", every, move |_| {
                    let Some(following) = weak.upgrade() else {
                        return false;
                    };
                    if let Err(e) = following.refresh() {
                        log::warn!(
                            "podstore: reader of {}: refresh failed: {e}",
                            following.config.prefix
                        );
                    }
                    true
                })?)
            }
            None => None,
        };
        Ok(RemoteReader { following, ticker })
    }

    /// Looks for a manifest newer than the one served (one listing of the prefix's
    /// manifests) and, if there is one, reads it, restores its state beside the current one
    /// (reading from the remote only the footers of files the current manifest does not
    /// name) and switches to it atomically: a read started before goes on with the old
    /// state, one started after sees the new one. Files no longer named are removed from
    /// the cache once no read holds them. Errors leave the reader on its current manifest.
    pub fn refresh(&self) -> Result<RemoteRefreshReport> {
        self.following.refresh()
    }

    /// The state served now, for several reads of one manifest (listings too:
    /// `snapshot.store().keys()`).
    pub fn snapshot(&self) -> RemoteSnapshot {
        RemoteSnapshot(self.following.current.load_full())
    }

    /// The number of the manifest served now (0: the prefix had none).
    pub fn manifest(&self) -> u64 {
        self.following.current.load().manifest.number
    }

    /// The value of `key` ([`Store::get`]) in the manifest served now.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        self.snapshot().store().get(key)
    }

    /// Bytes `range` of the value of `key` ([`Store::get_range`]): one ranged GET of the
    /// chunks it touches.
    pub fn get_range(
        &self,
        key: impl AsRef<[u8]>,
        range: impl ValueRange,
    ) -> Result<Option<Vec<u8>>> {
        self.snapshot().store().get_range(key, range)
    }

    /// A reader that streams the value of `key` ([`Store::reader`]); it keeps reading the
    /// manifest it started on.
    pub fn reader(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueReader>> {
        self.snapshot().store().reader(key)
    }

    /// The length, version and expiry of the value of `key` ([`Store::metadata`]), from the
    /// local footers (no remote read).
    pub fn metadata(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueMeta>> {
        self.snapshot().store().metadata(key)
    }

    /// Whether `key` has a value ([`Store::contains`]), from the local footers.
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        self.snapshot().store().contains(key)
    }

    /// The number of live keys ([`Store::len`]).
    pub fn len(&self) -> usize {
        self.snapshot().store().len()
    }

    /// True when the manifest served names no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for RemoteReader {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.stop();
        }
    }
}

impl fmt::Debug for RemoteReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RemoteReader")
            .field("cache", &self.following.cache)
            .field("prefix", &self.following.config.prefix)
            .field("manifest", &self.manifest())
            .finish()
    }
}

impl Following {
    fn refresh(&self) -> Result<RemoteRefreshReport> {
        let _one = self.refreshing.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current.load_full();
        let unchanged = || RemoteRefreshReport {
            manifest: current.manifest.number,
            files: current.manifest.files.len(),
            ..Default::default()
        };
        let Some((number, size)) = manifest::newest_number(&self.config)? else {
            return Ok(unchanged());
        };
        // (Numbers only grow; a listing that shows an older newest one is behind.)
        if number <= current.manifest.number {
            return Ok(unchanged());
        }
        let m = manifest::read(&self.config, number, size)?;
        let (next, restored) = build(
            &self.cache,
            &self.config,
            &self.opts,
            &self.storage,
            &m,
            Some(&current),
        )?;
        log::info!(
            "podstore: reader of {}: manifest {} ({} files, {} read, {} bytes)",
            self.config.prefix,
            m.number,
            m.files.len(),
            restored.downloaded,
            restored.bytes
        );
        self.current.store(Arc::new(next));
        Ok(RemoteRefreshReport {
            manifest: m.number,
            changed: true,
            files: m.files.len(),
            files_downloaded: restored.downloaded,
            bytes_downloaded: restored.bytes,
        })
    }
}

/// Restores manifest `m` into its snapshot directory (linking what `earlier` has) and opens a
/// read-only store over it.
fn build(
    cache: &Path,
    config: &RemoteConfig,
    opts: &Options,
    storage: &Arc<dyn Storage>,
    m: &Manifest,
    earlier: Option<&Snapshot>,
) -> Result<(Snapshot, restore::Restored)> {
    let dir = cache.join(format!("{SNAPSHOT_PREFIX}{:020}", m.number));
    let earlier = earlier.map(|s| Earlier {
        dir: &s.dir,
        files: &s.files,
    });
    let restored = restore::restore_manifest(&dir, config, storage, m, earlier.as_ref())?;
    let mut snapshot = Snapshot {
        manifest: m.clone(),
        files: m
            .files
            .iter()
            .map(|f| (f.id, (*f, restored.remote.get(&f.id).copied())))
            .collect(),
        dir,
        storage: storage.clone(),
        store: None,
    };
    // On failure the snapshot's drop removes the directory.
    snapshot.store = Some(open_snapshot(&snapshot.dir, opts.clone(), storage.clone())?);
    Ok((snapshot, restored))
}

/// A read-only store over a snapshot's directory, reading remote-only files through the
/// remote: no restore, no epoch taken, no background thread.
fn open_snapshot(dir: &Path, opts: Options, storage: Arc<dyn Storage>) -> Result<Store> {
    let (lock, profile) = open::prepare(dir, &opts, storage)?;
    let inner = Inner::start(dir.to_path_buf(), opts, profile, None)?;
    Ok(Store {
        inner: Arc::new(inner),
        closed: false,
        _lock: lock,
    })
}

/// The profile of the reader's own files (the marker; buffered).
fn profile(storage: &Arc<dyn Storage>) -> IoProfile {
    IoProfile::buffered(storage.clone(), false)
}

/// Makes `cache` the reader's cache of `prefix`, locked: created with its marker if empty,
/// else checked to be one (of this prefix); the snapshots of an earlier reader removed.
fn claim_cache(cache: &Path, prefix: &str, profile: &IoProfile) -> Result<DirLock> {
    let storage = &profile.storage;
    storage.create_dir_all(cache).map_err(|e| {
        Error::io(
            "reader: create cache directory",
            Some(cache.to_path_buf()),
            e,
        )
    })?;
    let names = file::list_dir(profile, cache)?;
    let marked = names.iter().any(|n| n == MARKER);
    if !marked {
        let mut foreign: Vec<String> = names
            .iter()
            .filter(|n| *n != file::LOCK_NAME && *n != MARKER_TMP)
            .cloned()
            .collect();
        if !foreign.is_empty() {
            foreign.sort_unstable();
            let total = foreign.len();
            foreign.truncate(5);
            return Err(Error::ForeignFiles {
                path: cache.to_path_buf(),
                names: foreign,
                total,
            });
        }
    }
    let lock = DirLock::acquire(&**storage, cache, false)?;
    let expected = format!("{MARKER_HEADER}\n{prefix}\n");
    if marked {
        let found = PlainFile::open(&cache.join(MARKER), profile)?
            .map(|f| f.read_all())
            .transpose()?
            .unwrap_or_default();
        if found != expected.as_bytes() {
            return Err(Error::InvalidOptions(
                "the cache directory is a reader's cache of another prefix",
            ));
        }
        // An earlier reader's snapshots (and restores cut short): its own, not reused.
        for name in names {
            if name.starts_with(SNAPSHOT_PREFIX) {
                remove_snapshot_dir(&**storage, &cache.join(name));
            }
        }
    } else {
        let tmp = cache.join(MARKER_TMP);
        if file::exists(profile, &tmp)? {
            file::remove_file(profile, &tmp)?;
        }
        let out = PlainFile::create_new(&tmp, profile)?;
        out.write_all_at(expected.as_bytes(), 0)?;
        out.sync_data()?;
        file::rename(profile, &tmp, &cache.join(MARKER))?;
        file::sync_dir(profile, cache)?;
    }
    Ok(lock)
}

/// Removes a snapshot's directory: the names a restore and a read-only open write there (the
/// store's files, `VERSIONS`, `CATALOG` and their temporary names); anything else is left,
/// with the directory, and logged. A failure is logged: a later open tries again.
fn remove_snapshot_dir(storage: &dyn Storage, dir: &Path) {
    let names = match storage.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => {
            log::warn!("podstore: reader: listing {} failed: {e}", dir.display());
            return;
        }
    };
    let mut kept = false;
    for name in names {
        if segment::is_foreign(&name) || name == segment::QUARANTINE_DIR {
            log::warn!(
                "podstore: reader: {} is not a snapshot's: kept",
                dir.join(&name).display()
            );
            kept = true;
        } else if let Err(e) = storage.remove_file(&dir.join(&name)) {
            log::warn!("podstore: reader: removing {name} failed: {e}");
            kept = true;
        }
    }
    if !kept && let Err(e) = storage.remove_dir(dir) {
        log::warn!("podstore: reader: removing {} failed: {e}", dir.display());
    }
}
