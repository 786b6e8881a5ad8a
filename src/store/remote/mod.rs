//! The remote tier ([`Options::remote`](crate::Options::remote); docs/design-remote.md, "Remote
//! tier"): sealed files uploaded as they are, manifests that name them written with a
//! conditional create and a writer epoch, [`Store::flush_remote`], and restore.
//!
//! - `manifest`: object names, the newest manifest found, a manifest written (fencing);
//! - `upload`: sealed files put whole, a few at a time, with retries;
//! - `restore`: an empty directory rebuilt from the newest manifest;
//! - `evict`: the local disk as a cache of the remote;
//! - `gc`: deletion of what no manifest within the retention window needs;
//! - `prefix`: the prefix a store directory belongs to, recorded and checked at open.
//!
//! Objects under the prefix:
//!
//! ```text
//! <prefix>/manifest/<number, 20 digits>       a manifest (format/manifest.rs), never changed
//! <prefix>/data/<epoch, 20 digits>/<file>     a sealed file, uploaded by the writer of that epoch
//! ```

mod evict;
mod gc;
mod manifest;
mod prefix;
mod reader;
mod restore;
mod upload;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Store;
use super::inner::Inner;
use crate::error::{Error, Result};
use crate::format::manifest::{Manifest, ManifestFile};
use crate::io::remote::RemoteError;
use crate::options::RemoteConfig;

pub(super) use evict::open_evicted;
pub use gc::RemoteGcReport;
pub(super) use prefix::{check as check_prefix, write as write_prefix};
pub use reader::{RemoteReader, RemoteRefreshReport, RemoteSnapshot};
pub(super) use restore::restore_if_empty;
pub(super) use upload::sealed_lengths;

/// How often the background thread looks for sealed files to upload.
pub(super) const UPLOAD_TICK: Duration = Duration::from_millis(250);

/// What [`Store::flush_remote`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteFlushReport {
    /// The number of the manifest written: `<prefix>/manifest/<number as 20 digits>`.
    pub manifest: u64,
    /// The writer epoch it carries (this store's).
    pub epoch: u64,
    /// Files the manifest names: every sealed file of the store.
    pub files: usize,
    /// Of those, the files this call uploaded (the others were uploaded before).
    pub files_uploaded: usize,
    /// Bytes this call uploaded.
    pub bytes_uploaded: u64,
    /// Of the files, those whose bytes the manifest itself carries: the files not in the
    /// remote yet, when they were few enough to send with the manifest (at most 4 MiB in
    /// all), uploaded beside it. Such a flush takes one round trip, not two
    /// (docs/design-remote.md, "Files in the manifest").
    pub files_in_manifest: usize,
}

/// The store's side of its remote: what is uploaded, the manifests written, the fence.
pub(super) struct RemoteTier {
    config: RemoteConfig,
    /// One upload pass or flush at a time, in the order they took it.
    state: Mutex<TierState>,
    /// The lengths of the files in the remote, by id: a copy of `state.uploaded` that
    /// [`Stats`](crate::Stats) reads without waiting for a pass or flush in progress.
    in_remote: Mutex<HashMap<u64, u64>>,
    /// The number of the newest manifest this writer wrote.
    manifest: AtomicU64,
    /// The number of the manifest another writer wrote first (0: not fenced).
    fenced_by: AtomicU64,
    bytes_uploaded: AtomicU64,
    files_uploaded: AtomicU64,
    /// Objects (manifests and files) deleted from the remote since open, and their bytes.
    deleted_objects: AtomicU64,
    deleted_bytes: AtomicU64,
    /// When the oldest write not yet named by a manifest was asked for, in nanoseconds after
    /// `base` plus one (0: none).
    dirty_since: AtomicU64,
    /// Writes noted so far.
    writes_asked: AtomicU64,
    base: Instant,
    /// When the last manifest was written (or the tier attached).
    last_flush: Mutex<Instant>,
    /// Flushes begun: each takes the next number, under the tier's lock, before its
    /// snapshot. A call that finds a flush numbered above the count it saw on entry done
    /// returns that flush's report: its snapshot was taken after the call began.
    flushes_begun: AtomicU64,
    /// Flushes waiting for the tier's lock: a deletion pass gives way to them (`gc.rs`).
    flushes_waiting: AtomicU64,
}

/// What the tier knows of the remote.
struct TierState {
    /// This writer's epoch: one more than the newest manifest's when it opened the prefix.
    epoch: u64,
    /// This writer's random id ([`Manifest::writer`]).
    writer: u64,
    /// The number the next manifest gets.
    next_number: u64,
    /// Files whose objects are whole in the remote and hold the bytes of the local file of
    /// that id: uploaded by this writer, or named by the manifest it took over and found equal
    /// to the local file (length and crc32).
    uploaded: HashMap<u64, ManifestFile>,
    /// The files the manifest this writer took over names, not yet compared with the local
    /// file of the same id. Not trusted by id and length alone: a directory that is not the
    /// one that wrote the prefix (an older copy, a writer fenced since) can hold another file
    /// under the same id, of the same length.
    inherited: HashMap<u64, ManifestFile>,
    /// The files the newest manifest this writer created names (none before its first): the
    /// files whose local data may be evicted (`evict.rs`).
    named: HashMap<u64, ManifestFile>,
    /// Files evicted whose local data is still to be punched out.
    to_punch: Vec<evict::ToPunch>,
    /// The files of the manifests a deletion pass found kept (and of those this writer
    /// wrote), by number: manifests never change, so each is read once.
    manifests: BTreeMap<u64, Vec<ManifestFile>>,
    /// Whether each manifest a deletion pass found listed (and each this writer wrote) is a
    /// mark, kept for good ([`Manifest::is_mark`]), by number.
    marks: BTreeMap<u64, bool>,
    /// The last manifest this writer wrote (its claim, then each flush's): what the manifest
    /// it writes as it closes repeats.
    last: Manifest,
    /// Whether this writer's last manifest write ended knowing its outcome: otherwise a
    /// create it made may exist unknown to it, and the next is listed after
    /// ([`manifest::write`]).
    sure: bool,
    /// A manifest was written since the last deletion pass finished (or it stopped short).
    gc_due: bool,
    /// When the background may make its next deletion pass (`None`: at once): see
    /// [`gc::interval`].
    gc_after: Option<Instant>,
    /// Deletion passes in a row that gave way to a flush (`gc.rs`).
    gc_gave_way: u32,
    /// The last flush that succeeded: its number ([`RemoteTier::flushes_begun`]) and report.
    last_ok: Option<(u64, RemoteFlushReport)>,
}

/// The remote figures of [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RemoteFigures {
    pub(super) uploaded_bytes: u64,
    pub(super) uploaded_files: u64,
    pub(super) waiting_files: u64,
    pub(super) waiting_bytes: u64,
    pub(super) lag: Option<Duration>,
    pub(super) manifest: u64,
    pub(super) deleted_objects: u64,
    pub(super) deleted_bytes: u64,
}

impl RemoteTier {
    /// Opens the prefix for writing: reads the newest manifest and writes the next one with
    /// the next epoch (the same files), which fences every writer of an older epoch. Called
    /// with the directory locked, after any restore.
    pub(super) fn attach(config: RemoteConfig) -> Result<RemoteTier> {
        let newest = manifest::newest(&config)?;
        let mut claim = newest.clone().unwrap_or_default();
        claim.number = newest.as_ref().map_or(1, |m| m.number + 1);
        claim.epoch = newest.as_ref().map_or(1, |m| m.epoch + 1);
        claim.writer = writer_id();
        // The newest closed: its writer creates no manifest after it, so this claim need not
        // stay as the mark that fences it ("Fencing" in docs/design-remote.md).
        claim.claim = true;
        claim.after_close = newest.as_ref().is_some_and(|m| m.closed);
        claim.closed = false;
        // A claim is always listed after: the newest read may be old when it is created.
        manifest::write(&config, &mut claim, false)?;
        log::info!(
            "podstore: remote {}: epoch {} (manifest {})",
            config.prefix,
            claim.epoch,
            claim.number
        );
        let now = Instant::now();
        Ok(RemoteTier {
            in_remote: Mutex::new(HashMap::new()),
            state: Mutex::new(TierState {
                epoch: claim.epoch,
                writer: claim.writer,
                next_number: claim.number + 1,
                uploaded: HashMap::new(),
                // A file the manifest taken over carries has no object to compare with.
                inherited: claim
                    .files
                    .iter()
                    .filter(|f| !claim.inline.contains_key(&f.id))
                    .map(|f| (f.id, *f))
                    .collect(),
                named: HashMap::new(),
                to_punch: Vec::new(),
                manifests: BTreeMap::from([(claim.number, claim.files.clone())]),
                marks: BTreeMap::from([(claim.number, claim.is_mark())]),
                sure: true,
                last: claim.clone(),
                gc_due: true,
                gc_after: None,
                gc_gave_way: 0,
                last_ok: None,
            }),
            manifest: AtomicU64::new(claim.number),
            config,
            fenced_by: AtomicU64::new(0),
            bytes_uploaded: AtomicU64::new(0),
            files_uploaded: AtomicU64::new(0),
            deleted_objects: AtomicU64::new(0),
            deleted_bytes: AtomicU64::new(0),
            dirty_since: AtomicU64::new(0),
            writes_asked: AtomicU64::new(0),
            base: now,
            last_flush: Mutex::new(now),
            flushes_begun: AtomicU64::new(0),
            flushes_waiting: AtomicU64::new(0),
        })
    }

    /// At close ([`Inner::shut_down`], once the background thread stopped): the last
    /// manifest this writer wrote, again under the next number, marked closed. Nothing else
    /// changes in the remote; what it says is that this writer creates no manifest after it,
    /// so that the next writer's claim need not stay as the mark that fences this one
    /// (docs/design-remote.md, "Fencing"). A failure (an outage, this writer fenced) is
    /// logged, not returned: the next claim is then kept, as after a crash.
    pub(super) fn close(&self) {
        if self.check_fenced().is_err() {
            return;
        }
        let mut state = self.lock();
        let mut m = state.last.clone();
        // A file it carried whose object is whole since is named by its object: the next
        // writer's claim repeats this manifest, and a claim after a crash is kept for good.
        let files = &m.files;
        m.inline.retain(|id, _| {
            let entry = files.iter().find(|f| f.id == *id);
            !state.uploaded.get(id).is_some_and(|u| Some(u) == entry)
        });
        m.number = state.next_number;
        m.closed = true;
        m.claim = false;
        m.after_close = false;
        match manifest::write(&self.config, &mut m, state.sure) {
            Ok(()) => {
                state.next_number = m.number + 1;
                self.manifest.store(m.number, Ordering::Relaxed);
            }
            Err(Error::Fenced { manifest, .. }) => self.fence(manifest),
            Err(e) => log::warn!(
                "podstore: remote {}: the manifest written at close: {e}",
                self.config.prefix
            ),
        }
    }

    /// [`Error::Fenced`] once another writer took the prefix.
    pub(super) fn check_fenced(&self) -> Result<()> {
        match self.fenced_by.load(Ordering::Acquire) {
            0 => Ok(()),
            manifest => Err(Error::Fenced {
                prefix: self.config.prefix.clone(),
                manifest,
            }),
        }
    }

    /// Records that another writer wrote manifest `manifest`: this one is fenced.
    fn fence(&self, manifest: u64) {
        self.fenced_by.store(manifest, Ordering::Release);
        log::error!(
            "podstore: {}",
            Error::Fenced {
                prefix: self.config.prefix.clone(),
                manifest
            }
        );
    }

    /// Notes that a write is being made: the oldest one not yet in the remote dates the lag.
    pub(super) fn note_write(&self) {
        // One increment per write (beside the append lock every write takes, nothing): it
        // tells a flush whether writes were asked for while it ran.
        self.writes_asked.fetch_add(1, Ordering::SeqCst);
        if self.dirty_since.load(Ordering::SeqCst) == 0 {
            let at = self.base.elapsed().as_nanos() as u64 + 1;
            let _ = self
                .dirty_since
                .compare_exchange(0, at, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// Whether a flush is waiting for the tier's lock.
    fn flush_waiting(&self) -> bool {
        self.flushes_waiting.load(Ordering::SeqCst) > 0
    }

    /// The state, for an upload pass or a flush (one at a time).
    fn lock(&self) -> MutexGuard<'_, TierState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that file `id`, `length` bytes long, is in the remote.
    fn uploaded(&self, state: &mut TierState, file: ManifestFile) {
        state.uploaded.insert(file.id, file);
        self.in_remote
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(file.id, file.length);
    }

    /// The remote figures for [`Stats`](crate::Stats), given the store's sealed files.
    pub(super) fn figures(&self, sealed: &[(u64, u64)]) -> RemoteFigures {
        let (waiting_files, waiting_bytes) = {
            let in_remote = self.in_remote.lock().unwrap_or_else(|p| p.into_inner());
            let waiting = sealed
                .iter()
                .filter(|(id, len)| in_remote.get(id) != Some(len));
            waiting.fold((0, 0), |(n, b), (_, len)| (n + 1, b + len))
        };
        let manifest = self.manifest.load(Ordering::Relaxed);
        let lag = match self.dirty_since.load(Ordering::Relaxed) {
            0 => None,
            at => Some(
                self.base
                    .elapsed()
                    .saturating_sub(Duration::from_nanos(at - 1)),
            ),
        };
        RemoteFigures {
            uploaded_bytes: self.bytes_uploaded.load(Ordering::Relaxed),
            uploaded_files: self.files_uploaded.load(Ordering::Relaxed),
            waiting_files,
            waiting_bytes,
            lag,
            manifest,
            deleted_objects: self.deleted_objects.load(Ordering::Relaxed),
            deleted_bytes: self.deleted_bytes.load(Ordering::Relaxed),
        }
    }

    /// Whether the background thread should flush now ([`Options::remote_flush_interval`]).
    ///
    /// [`Options::remote_flush_interval`]: crate::Options::remote_flush_interval
    fn flush_due(&self) -> bool {
        let dirty = self.dirty_since.load(Ordering::Relaxed) != 0;
        let last = *self.last_flush.lock().unwrap_or_else(|p| p.into_inner());
        dirty
            && self
                .config
                .flush_interval
                .is_some_and(|every| last.elapsed() >= every)
    }
}

impl Inner {
    /// The remote thread's tick: uploads the files sealed since the last one, and makes a
    /// remote flush when one is due. `false` once the store is fenced (the thread ends).
    pub(super) fn remote_tick(&self) -> bool {
        let Some(tier) = &self.remote else {
            return false;
        };
        if tier.check_fenced().is_err() {
            return false;
        }
        let result = if tier.flush_due() {
            flush(self, tier).map(|_| ())
        } else {
            let mut state = tier.lock();
            upload::pass(self, tier, &mut state, None, &upload::Carried::new())
                .and_then(|_| evict::evict_local(self, tier, &mut state))
                .map(|_| ())
        };
        // Deletion after a flush, one bounded pass per tick until nothing is left, and then
        // not again before its interval (a pass lists the manifests with the tier locked: one
        // after every flush made a flush 0.6 requests longer on issue 38's put rows).
        let result = result.and_then(|()| {
            let mut state = tier.lock();
            let now = Instant::now();
            if state.gc_due && state.gc_after.is_none_or(|t| now >= t) {
                let (_, more) = gc::pass(self, tier, &mut state, gc::GC_BATCH)?;
                state.gc_after = match more {
                    true => None,
                    false => gc::interval(tier.config.retention).map(|i| now + i),
                };
            }
            Ok(())
        });
        match result {
            Ok(()) => true,
            Err(Error::Fenced { .. } | Error::Poisoned) => false,
            Err(e) => {
                log::warn!("podstore: remote {}: {e}", tier.config.prefix);
                true
            }
        }
    }
}

/// A remote flush: the active segment sealed, every sealed file uploaded, a manifest naming
/// exactly the store's sealed files written ([`Store::flush_remote`]).
fn flush(inner: &Inner, tier: &RemoteTier) -> Result<RemoteFlushReport> {
    tier.check_fenced()?;
    // What dates the lag if writes turn out not to be in this flush: the oldest write noted
    // since the last one, else this flush's start.
    let asked = tier.writes_asked.load(Ordering::SeqCst);
    let began = match tier.dirty_since.load(Ordering::SeqCst) {
        0 => tier.base.elapsed().as_nanos() as u64 + 1,
        since => since,
    };
    // Group commit: concurrent calls wait here for the lock, and a flush that began after a
    // call did (numbered above what the call saw) and succeeded covers every write made
    // before the call. Numbered before its snapshot, so that "began after" means "snapshot
    // after"; only a success is shared (a waiter behind a failed flush makes its own).
    let entered = tier.flushes_begun.load(Ordering::SeqCst);
    tier.flushes_waiting.fetch_add(1, Ordering::SeqCst);
    let mut state = tier.lock();
    tier.flushes_waiting.fetch_sub(1, Ordering::SeqCst);
    if let Some((number, report)) = &state.last_ok
        && *number > entered
    {
        return Ok(report.clone());
    }
    let number = tier.flushes_begun.fetch_add(1, Ordering::SeqCst) + 1;
    let snapshot = upload::snapshot(inner)?;
    let carried = upload::carried(inner, tier, &mut state, &snapshot.files)?;
    let (files_uploaded, bytes_uploaded, mut m, written);
    if carried.is_empty() {
        // Two round trips: the files uploaded, then the manifest that names them.
        (files_uploaded, bytes_uploaded) =
            upload::pass(inner, tier, &mut state, Some(&snapshot.files), &carried)?;
        m = flush_manifest(tier, &state, &snapshot, &carried)?;
        written = manifest::write(&tier.config, &mut m, state.sure);
    } else {
        // One round trip: the manifest carries the files not in the remote yet, and is
        // written while they are uploaded, so that the next manifest names their objects
        // instead (docs/design-remote.md, "Files in the manifest"). The flush is done when
        // the manifest is; an upload that fails is made again later.
        m = flush_manifest(tier, &state, &snapshot, &carried)?;
        let sure = state.sure;
        let (create, uploads) = std::thread::scope(|s| {
            let create = s.spawn(|| manifest::write(&tier.config, &mut m, sure));
            let uploads = upload::pass(inner, tier, &mut state, Some(&snapshot.files), &carried);
            (create.join(), uploads)
        });
        written = create.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (files_uploaded, bytes_uploaded) = match uploads {
            Ok(done) => done,
            Err(e) => {
                log::warn!(
                    "podstore: remote {}: an upload beside a manifest carrying it: {e}",
                    tier.config.prefix
                );
                (0, 0)
            }
        };
    }
    match written {
        Ok(()) => state.sure = true,
        Err(e @ Error::Fenced { manifest, .. }) => {
            tier.fence(manifest);
            return Err(e);
        }
        Err(e) => {
            // The create may have been carried out (its reply lost): the next one is listed
            // after ([`manifest::write`]).
            state.sure = false;
            return Err(e);
        }
    }
    state.next_number = m.number + 1;
    // Only a file whose object is whole may be evicted: one the manifest carries only once
    // its upload beside the manifest is done (the same bytes: length and crc32).
    state.named = m
        .files
        .iter()
        .filter_map(|f| match m.inline.contains_key(&f.id) {
            false => Some(*f),
            true => state
                .uploaded
                .get(&f.id)
                .filter(|u| (u.kind, u.length, u.crc) == (f.kind, f.length, f.crc))
                .copied(),
        })
        .map(|f| (f.id, f))
        .collect();
    state.manifests.insert(m.number, m.files.clone());
    state.marks.insert(m.number, false);
    state.last = m.clone();
    state.gc_due = true;
    // Every sealed file was compared with the manifest taken over (or uploaded): an entry of
    // it is not trusted later, when deletion may have removed its object.
    state.inherited.clear();
    tier.manifest.store(m.number, Ordering::Relaxed);
    *tier.last_flush.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    // A write asked for since this flush began, or numbered after its snapshot, may not be in
    // it: the lag then still counts from `began` (it may overestimate). A write asked for
    // before, and numbered only now, is caught by the second test.
    let later = tier.writes_asked.load(Ordering::SeqCst) != asked
        || inner.log.lock().last_seq() > snapshot.last_seq;
    let since = if later { began } else { 0 };
    tier.dirty_since.store(since, Ordering::SeqCst);
    // The flush is done (its manifest durable) whatever eviction does. The snapshot's handles
    // are let go first: an evicted file's data is punched out once no one holds its old one.
    drop(snapshot);
    if let Err(e) = evict::evict_local(inner, tier, &mut state) {
        log::warn!("podstore: remote {}: eviction: {e}", tier.config.prefix);
    }
    let report = RemoteFlushReport {
        manifest: m.number,
        epoch: m.epoch,
        files: m.files.len(),
        files_uploaded,
        bytes_uploaded,
        files_in_manifest: m.inline.len(),
    };
    state.last_ok = Some((number, report.clone()));
    Ok(report)
}

/// The manifest of a flush: every file of `snapshot`, each carried (with its bytes) or
/// named by the object that holds it.
fn flush_manifest(
    tier: &RemoteTier,
    state: &TierState,
    snapshot: &upload::Snapshot,
    carried: &upload::Carried,
) -> Result<Manifest> {
    let files: Option<Vec<ManifestFile>> = snapshot
        .files
        .iter()
        .map(|(id, _)| match carried.get(id) {
            Some((f, _)) => Some(*f),
            None => state.uploaded.get(id).copied(),
        })
        .collect();
    // (`pass` returns an error for any file it did not upload: this is a guard.)
    let files = files.ok_or_else(|| Error::Remote {
        op: "remote flush",
        object: tier.config.prefix.clone(),
        source: RemoteError::new(
            crate::io::remote::RemoteErrorKind::Other,
            "a file of the snapshot was not uploaded",
        ),
    })?;
    Ok(Manifest {
        number: state.next_number,
        epoch: state.epoch,
        writer: state.writer,
        max_seq: snapshot.max_seq,
        next_file_id: snapshot.next_file_id,
        evicted: snapshot.evicted,
        files,
        closed: false,
        claim: false,
        after_close: false,
        inline: carried
            .iter()
            .map(|(id, (_, bytes))| (*id, bytes.clone()))
            .collect(),
    })
}

/// A random 64-bit id for a writer ([`Manifest::writer`]), from std's randomly keyed hasher,
/// the time and the process id (no random number crate for one number per open).
fn writer_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.write_u32(std::process::id());
    h.finish()
}

/// Calls `call` until it succeeds, fails with an error that is not transient, or has failed
/// [`Options::remote_retries`] times, waiting longer after each failure
/// ([`retry_transient`](crate::io::remote::retry_transient)). `call` gets the number of failed
/// attempts before it. The error names `op` and `object`.
///
/// [`Options::remote_retries`]: crate::Options::remote_retries
fn retry<T>(
    config: &RemoteConfig,
    op: &'static str,
    object: &str,
    call: impl FnMut(u32) -> std::result::Result<T, RemoteError>,
) -> Result<T> {
    crate::io::remote::retry_transient(config.attempts, call).map_err(|source| Error::Remote {
        op,
        object: object.to_string(),
        source,
    })
}

impl Store {
    /// Makes every write made before this call durable in the store's
    /// [remote](crate::Options::remote): seals the active log segment, uploads every sealed
    /// file not uploaded yet, and returns once a manifest naming them is written. A store
    /// restored from that manifest (opened on an empty directory with the same remote) holds
    /// every such write.
    ///
    /// When the files not uploaded yet come to at most 4 MiB, the manifest carries their bytes
    /// and is written while they are uploaded: the call takes one round trip to the remote,
    /// not two, and is done once the manifest is, even if an upload failed (the next flush
    /// sends the file again). [`RemoteFlushReport::files_in_manifest`] counts them.
    ///
    /// Errors: [`Error::ReadOnly`] on a read-only store (a [`RemoteReader`](crate::RemoteReader)'s
    /// too); [`Error::InvalidOptions`] without a remote; [`Error::Fenced`] once another
    /// writer took the prefix (writes are then refused too); [`Error::Remote`] when the remote
    /// keeps failing (after retries with backoff): nothing is lost, call again.
    ///
    /// **Concurrent calls share flushes** (group commit): one flush runs at a time, and a call
    /// that waited for it returns the report of a flush that began after the call did, when
    /// one has succeeded meanwhile (every write made before the call is in it), rather than
    /// making one more. So however many threads call at once, each waits for at most two
    /// flushes. Its report is then that flush's (`files_uploaded` and `bytes_uploaded` count
    /// that flush's uploads).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// // In memory (the `testing` feature); podstore_remote::ObjectStoreRemote for S3 & co.
    /// let remote = std::sync::Arc::new(podstore::remote::MemoryRemote::new());
    /// let opts = podstore::Options::default().remote(remote, "db");
    /// let store = podstore::Store::open_with(dir.path(), opts)?;
    /// store.put("k", "v")?;
    /// let flushed = store.flush_remote()?;
    /// assert_eq!(flushed.files, 1);
    /// assert_eq!(store.stats().remote_waiting_files, 0);
    /// # Ok(()) }
    /// ```
    pub fn flush_remote(&self) -> Result<RemoteFlushReport> {
        let inner = &self.inner;
        // Not `writable`: a flush is not a write of the user's (it would date the lag). First:
        // a `RemoteReader`'s store has a remote to read from, but no tier.
        if inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        let Some(tier) = &inner.remote else {
            return Err(Error::InvalidOptions(
                "flush_remote needs a store opened with Options::remote",
            ));
        };
        flush(inner, tier)
    }
}
