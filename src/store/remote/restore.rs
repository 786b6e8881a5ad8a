//! Restore: a new or empty directory rebuilt from the newest manifest of the remote, before
//! the store opens it (docs/design-remote.md, "Remote tier").
//!
//! Without a local budget each file is downloaded whole, checked against the manifest's length
//! and crc32. With one ([`Options::remote_local_budget`](crate::Options::remote_local_budget))
//! only what an evicted file keeps locally is (its trailer read first, then its head and its
//! crc tables and footer: three ranged reads), and the catalog lists every such file as
//! remote-only: the store opens from its footers and reads values from the remote. The files
//! are written into
//! a sibling directory `<dir>.podstore-restore`, with `VERSIONS` and then `CATALOG` last, and
//! only then renamed to `dir`: an interrupted restore never looks like a store at `dir`.
//! Files are downloaded a few at a time (`remote_upload_threads`). A file whose bytes the
//! manifest carries (a flush of one round trip) is written from them, whole, and read locally.
//!
//! A [`RemoteReader`](crate::RemoteReader)'s snapshots are restores too (`reader.rs`), always
//! from footers only, each linking the files it shares with the previous one ([`Earlier`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::manifest::{self, data_name};
use super::retry;
use crate::error::{Corruption, Error, Result};
use crate::format::catalog::{FileState, RemoteObject};
use crate::format::footer::{TRAILER_LEN, Trailer};
use crate::format::manifest::{Manifest, ManifestFile};
use crate::io::file::{self, IoProfile, PlainFile};
use crate::io::remote::{RemoteError, RemoteErrorKind, evicted_span};
use crate::io::storage::Storage;
use crate::options::RemoteConfig;
use crate::segment::{self, Catalog, WholeError};

/// Bytes fetched per ranged read.
const FETCH_CHUNK: u64 = 8 << 20;

/// Restores the store into `dir` from the newest manifest under the prefix when `dir` does not
/// exist or is empty and there is a manifest. Returns the manifest restored from, if any.
pub(in crate::store) fn restore_if_empty(
    dir: &Path,
    config: &RemoteConfig,
    storage: &Arc<dyn Storage>,
) -> Result<Option<u64>> {
    match storage.list_dir(dir) {
        Ok(names) if names.is_empty() => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        // Anything else: opened as it is (a store, or refused as foreign files by open).
        _ => return Ok(None),
    }
    let Some(m) = manifest::newest(config)? else {
        return Ok(None);
    };
    restore_manifest(dir, config, storage, &m, None)?;
    log::info!(
        "podstore: restored {} from remote {} (manifest {}, {} files)",
        dir.display(),
        config.prefix,
        m.number,
        m.files.len()
    );
    Ok(Some(m.number))
}

/// The files of an earlier restore of the same prefix (a [`RemoteReader`]'s previous
/// snapshot) that a restore may link instead of downloading: in `dir`, each with the manifest
/// entry it was restored from and its remote edit (`None`: downloaded whole).
///
/// [`RemoteReader`]: crate::RemoteReader
pub(super) struct Earlier<'a> {
    pub(super) dir: &'a Path,
    pub(super) files: &'a HashMap<u64, (ManifestFile, Option<RemoteObject>)>,
}

/// What [`restore_manifest`] did.
#[derive(Debug, Default)]
pub(super) struct Restored {
    /// The files listed as remote-only in the catalog written.
    pub(super) remote: BTreeMap<u64, RemoteObject>,
    /// Files read from the remote (whole or their kept bytes).
    pub(super) downloaded: usize,
    /// Bytes read from the remote for them.
    pub(super) bytes: u64,
}

/// Restores the state manifest `m` names into `dir` (which must not exist): written into
/// `<dir>.podstore-restore`, renamed to `dir` once whole. A file of `earlier` whose manifest
/// entry is the same (id, kind, length, crc32, epoch: the same object) is hard-linked from
/// there, not read again.
pub(super) fn restore_manifest(
    dir: &Path,
    config: &RemoteConfig,
    storage: &Arc<dyn Storage>,
    m: &Manifest,
    earlier: Option<&Earlier<'_>>,
) -> Result<Restored> {
    let profile = IoProfile::buffered(storage.clone(), false);
    let name = dir.file_name().ok_or(Error::InvalidOptions(
        "the store directory has no file name",
    ))?;
    let mut staging_name = name.to_os_string();
    staging_name.push(".podstore-restore");
    let staging = dir.with_file_name(staging_name);
    if file::exists(&profile, &staging)? {
        // Left by an interrupted restore: not removed here (its files may be all that is left
        // of a download), but named, so that the user can.
        return Err(Error::io(
            "restore: an interrupted restore's directory is in the way",
            Some(staging),
            std::io::ErrorKind::AlreadyExists.into(),
        ));
    }
    storage
        .create_dir_all(&staging)
        .map_err(|e| Error::io("restore: create directory", Some(staging.clone()), e))?;
    let mut listed = Vec::with_capacity(m.files.len());
    let mut restored = Restored::default();
    let built = (|| {
        let mut wanted = Vec::new();
        for f in &m.files {
            listed.push((f.id, f.kind, FileState::Sealed { length: f.length }));
            // Carried by the manifest: written whole from its bytes (checked against the
            // entry's crc32 when the manifest was decoded), a local file like any other.
            if let Some(bytes) = m.inline.get(&f.id) {
                write_carried(&profile, &staging, f, bytes)?;
                continue;
            }
            if let Some(e) = earlier
                && let Some((was, object)) = e.files.get(&f.id).filter(|(was, _)| was == f)
            {
                let name = segment::file_name(was.id, was.kind);
                if file::hard_link(&profile, &e.dir.join(&name), &staging.join(&name))? {
                    if let Some(o) = object {
                        restored.remote.insert(f.id, *o);
                    }
                    continue;
                }
            }
            wanted.push(*f);
        }
        if !wanted.is_empty() {
            // Listed once, and only when a file is to be downloaded.
            let sizes = object_sizes(config)?;
            for f in &wanted {
                check_size(config, f, &sizes)?;
            }
            for (id, object, bytes) in download_all(config, &profile, &staging, &wanted)? {
                if let Some(o) = object {
                    restored.remote.insert(id, o);
                }
                restored.downloaded += 1;
                restored.bytes += bytes;
            }
        }
        // The prefix it belongs to (`prefix.rs`), before the catalog that marks it whole.
        super::prefix::write(&staging, &profile, &config.prefix)?;
        write_metadata(&profile, &staging, m, &listed, &restored.remote)
    })();
    if let Err(e) = built {
        let e = expired(config, m, e);
        // The directory and its files are this call's own (created above, `create_new`): an
        // unfinished restore leaves nothing behind to be taken for a store or to block the
        // next attempt. A failed removal is logged; the next attempt then names the directory.
        if let Err(removal) = remove_staging(&profile, &staging) {
            log::warn!(
                "podstore: restore: removing {} failed: {removal}",
                staging.display()
            );
        }
        return Err(e);
    }
    file::rename(&profile, &staging, dir)?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        file::sync_dir(&profile, parent)?;
    }
    Ok(restored)
}

/// Downloads `files` into `staging` ([`download_one`]),
/// [`Options::remote_upload_threads`](crate::Options::remote_upload_threads) at a time: a
/// restore from footers only waits for its requests' latency (three ranged reads per file, in
/// turn), not for bandwidth. Returns each file's id, its remote edit and the bytes read; the
/// first error stops the other downloads.
fn download_all(
    config: &RemoteConfig,
    profile: &IoProfile,
    staging: &Path,
    files: &[ManifestFile],
) -> Result<Vec<(u64, Option<RemoteObject>, u64)>> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let threads = config.upload_threads.clamp(1, files.len().max(1));
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    while !failed.load(Ordering::Relaxed) {
                        let Some(f) = files.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        match download_one(config, profile, staging, f) {
                            Ok((object, bytes)) => done.push((f.id, object, bytes)),
                            Err(e) => {
                                failed.store(true, Ordering::Relaxed);
                                return Err(e);
                            }
                        }
                    }
                    Ok(done)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(files.len());
        let mut first_error = None;
        for worker in workers {
            match worker.join() {
                Ok(Ok(done)) => all.extend(done),
                Ok(Err(e)) => {
                    first_error.get_or_insert(e);
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(all),
        }
    })
}

/// Downloads file `f`: with a local budget only what an evicted file keeps (its remote edit
/// returned), else (or when it is too small to evict) whole. Returns the bytes read.
fn download_one(
    config: &RemoteConfig,
    profile: &IoProfile,
    staging: &Path,
    f: &ManifestFile,
) -> Result<(Option<RemoteObject>, u64)> {
    if config.local_budget.is_some() {
        if let Some((o, bytes)) = download_kept(config, profile, staging, f)? {
            return Ok((Some(o), bytes));
        }
        // (The trailer `download_kept` read to find the file too small, then the file.)
        download(config, profile, staging, f)?;
        return Ok((None, TRAILER_LEN as u64 + f.length));
    }
    download(config, profile, staging, f)?;
    Ok((None, f.length))
}

/// [`Error::ManifestExpired`] for `e`, a missing object of manifest `m`, when `m` itself has
/// expired: the writer deleted it and its files while the restore read them (replaced longer
/// than its retention ago), or deleted its files and kept it only as a mark (a claim, replaced
/// since: [`Manifest::is_mark`]; docs/design-remote.md, "Fencing"). A missing object of a
/// manifest that is neither stays what it is (damage to the prefix, or another hand deleting
/// there).
fn expired(config: &RemoteConfig, m: &Manifest, e: Error) -> Error {
    let object = match &e {
        Error::Remote { object, source, .. } if source.kind() == RemoteErrorKind::NotFound => {
            object.clone()
        }
        _ => return e,
    };
    let Ok(listed) = manifest::list(config) else {
        return e;
    };
    let gone = !listed.iter().any(|l| l.number == m.number);
    let replaced = listed.iter().any(|l| l.number > m.number);
    if gone || (m.is_mark() && replaced) {
        return Error::ManifestExpired {
            prefix: config.prefix.clone(),
            manifest: m.number,
            object,
        };
    }
    e
}

/// Removes the staging directory of a restore that failed: every name in it is one this
/// restore wrote (file names, `REMOTE-PREFIX`, `VERSIONS`, `CATALOG` and their `.tmp`).
fn remove_staging(profile: &IoProfile, staging: &Path) -> Result<()> {
    for name in file::list_dir(profile, staging)? {
        file::remove_file(profile, &staging.join(name))?;
    }
    file::remove_dir(profile, staging, "restore: remove directory")
}

/// `VERSIONS` (no number the manifest's files may hold is given again), then the catalog
/// (every file sealed at its length, the eviction watermark kept): written last, it marks a
/// finished restore.
fn write_metadata(
    profile: &IoProfile,
    staging: &Path,
    m: &Manifest,
    listed: &[(u64, crate::FileKind, FileState)],
    remote: &BTreeMap<u64, RemoteObject>,
) -> Result<()> {
    if m.max_seq > 0 {
        segment::write_versions(
            staging,
            profile,
            crate::format::versions::Reservation {
                generation: 1,
                reserved_through: m.max_seq,
            },
        )?;
    }
    let max_id = m.next_file_id.saturating_sub(1);
    Catalog::write_whole(staging, profile, listed, max_id, m.evicted, remote)
        .map(|_| ())
        .map_err(|e| match e {
            WholeError::NotWritten(e) | WholeError::Installed(e) => e,
        })
}

/// The size of every data object under the prefix, by name (one listing, so that a missing
/// or cut object is found before its download).
fn object_sizes(config: &RemoteConfig) -> Result<HashMap<String, u64>> {
    let under = format!("{}/data/", config.prefix);
    let listed = retry(config, "restore: list files", &under, |_| {
        config.remote.list(&under)
    })?;
    Ok(listed.into_iter().map(|o| (o.name, o.size)).collect())
}

/// The object of file `f` is listed, at the manifest's length.
fn check_size(config: &RemoteConfig, f: &ManifestFile, sizes: &HashMap<String, u64>) -> Result<()> {
    let object = data_name(&config.prefix, f.epoch, f.kind, f.id);
    let corrupt = |kind| Error::RemoteCorruption {
        object: object.clone(),
        kind,
    };
    match sizes.get(&object) {
        None => Err(Error::Remote {
            op: "restore: a file the manifest names",
            object: object.clone(),
            source: RemoteError::new(RemoteErrorKind::NotFound, "no such object"),
        }),
        Some(&size) if size < f.length => Err(corrupt(Corruption::Truncated {
            needed: f.length,
            available: size,
        })),
        Some(&size) if size > f.length => Err(corrupt(Corruption::InvalidField {
            field: "object size (longer than the manifest's length)",
            value: size,
        })),
        Some(_) => Ok(()),
    }
}

/// Bytes `range` of `object`, checked to be whole.
fn fetch(config: &RemoteConfig, object: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>> {
    let bytes = retry(config, "restore: read", object, |_| {
        config.remote.get_range(object, range.clone())
    })?;
    if bytes.len() as u64 != range.end - range.start {
        return Err(Error::RemoteCorruption {
            object: object.to_string(),
            kind: Corruption::Truncated {
                needed: range.end - range.start,
                available: bytes.len() as u64,
            },
        });
    }
    Ok(bytes)
}

/// Downloads what file `f` keeps locally once evicted (`io/remote/file.rs`, `evicted_span`):
/// its trailer, then its head and its end (crc tables, footer), into a file of its full length
/// whose span holds no data (a sparse file). `None` (nothing written) when the file is too
/// small to leave anything remote: the caller downloads it whole. Its footer is verified by
/// the open that follows, its records by every read; the whole file's crc32 cannot be (its
/// data is not read), and is kept in the catalog's remote edit for the manifests to come.
fn download_kept(
    config: &RemoteConfig,
    profile: &IoProfile,
    staging: &Path,
    f: &ManifestFile,
) -> Result<Option<(RemoteObject, u64)>> {
    let object = data_name(&config.prefix, f.epoch, f.kind, f.id);
    let corrupt = |kind| Error::RemoteCorruption {
        object: object.clone(),
        kind,
    };
    if f.length < TRAILER_LEN as u64 {
        return Err(corrupt(Corruption::Truncated {
            needed: TRAILER_LEN as u64,
            available: f.length,
        }));
    }
    let tail = fetch(config, &object, f.length - TRAILER_LEN as u64..f.length)?;
    let trailer = Trailer::decode(&tail, f.length).map_err(corrupt)?;
    if trailer.segment != f.id {
        return Err(corrupt(Corruption::InvalidField {
            field: "trailer segment id (not the manifest's file id)",
            value: trailer.segment,
        }));
    }
    let span = evicted_span(trailer.data_end, u64::from(trailer.block_size));
    if span.is_empty() {
        return Ok(None);
    }
    let path = staging.join(segment::file_name(f.id, f.kind));
    let out = PlainFile::create_new(&path, profile)?;
    out.write_all_at(&fetch(config, &object, 0..span.start)?, 0)?;
    out.write_all_at(&fetch(config, &object, span.end..f.length)?, span.end)?;
    out.sync_data()?;
    let object = RemoteObject {
        epoch: f.epoch,
        crc: f.crc,
    };
    // The trailer, the head and the end.
    let bytes = TRAILER_LEN as u64 + span.start + (f.length - span.end);
    Ok(Some((object, bytes)))
}

/// Writes file `f`, whose bytes the manifest carries, into `staging`.
fn write_carried(
    profile: &IoProfile,
    staging: &Path,
    f: &ManifestFile,
    bytes: &[u8],
) -> Result<()> {
    let path = staging.join(segment::file_name(f.id, f.kind));
    let out = PlainFile::create_new(&path, profile)?;
    out.write_all_at(bytes, 0)?;
    out.sync_data()
}

/// Downloads file `f` into `staging` whole, checking its crc32 against the manifest.
fn download(
    config: &RemoteConfig,
    profile: &IoProfile,
    staging: &Path,
    f: &ManifestFile,
) -> Result<()> {
    let object = data_name(&config.prefix, f.epoch, f.kind, f.id);
    let corrupt = |kind| Error::RemoteCorruption {
        object: object.clone(),
        kind,
    };
    let path = staging.join(segment::file_name(f.id, f.kind));
    let out = PlainFile::create_new(&path, profile)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut at = 0;
    while at < f.length {
        let end = (at + FETCH_CHUNK).min(f.length);
        let bytes = fetch(config, &object, at..end)?;
        hasher.update(&bytes);
        out.write_all_at(&bytes, at)?;
        at = end;
    }
    let got = hasher.finalize();
    if got != f.crc {
        return Err(corrupt(Corruption::ChecksumMismatch {
            got,
            expected: f.crc,
        }));
    }
    out.sync_data()
}
