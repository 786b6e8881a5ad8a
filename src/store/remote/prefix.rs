//! The remote prefix a store directory belongs to (docs/design-remote.md, "The prefix a
//! directory belongs to"): recorded in `REMOTE-PREFIX` when the directory first opens with a
//! remote (or is restored from one), and checked before the prefix is taken, so that a
//! directory opened with another store's prefix is refused ([`Error::RemoteMismatch`]) with
//! nothing written, locally or in the remote.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use super::manifest;
use crate::error::{Error, Result};
use crate::format::catalog::RemoteObject;
use crate::format::manifest::{Manifest, ManifestFile};
use crate::format::prefix_record::{self, PREFIX_RECORD_NAME, PREFIX_RECORD_TMP};
use crate::io::file::{self, IoProfile, PlainFile};
use crate::options::RemoteConfig;
use crate::segment::{self, LoadedCatalog};

/// Checks that the store in `dir` (locked, not yet opened) belongs to `config`'s prefix, and
/// records the prefix if the directory records none (not in a read-only open):
///
/// - a directory recording a prefix belongs to it, and to no other;
/// - one recording none (a store made before the record, or without a remote, or a new one)
///   belongs to the prefix if the prefix's newest manifest names every file the catalog says
///   is in the remote only (same epoch and crc32: the same object) and, when it names any
///   file, names one of this store's: a remote-only file, or a local file of the same id,
///   kind, length and crc32. A prefix without a manifest is anyone's, unless the store has
///   remote-only files (their objects are not there).
pub(in crate::store) fn check(
    dir: &Path,
    config: &RemoteConfig,
    profile: &IoProfile,
) -> Result<()> {
    // Reads only: a refused open writes nothing (no catalog tail zeroed, no record).
    let reading = IoProfile::buffered(profile.storage.clone(), true);
    let mismatch = |recorded| Error::RemoteMismatch {
        path: dir.to_path_buf(),
        recorded,
        given: config.prefix.clone(),
    };
    let at = dir.join(PREFIX_RECORD_NAME);
    if let Some(record) = PlainFile::open(&at, &reading)? {
        let recorded = prefix_record::decode(&record.read_all()?).map_err(|kind| {
            Error::io(
                "read the remote prefix record",
                Some(at.clone()),
                std::io::Error::new(std::io::ErrorKind::InvalidData, kind.to_string()),
            )
        })?;
        return if recorded == config.prefix {
            Ok(())
        } else {
            Err(mismatch(Some(recorded)))
        };
    }
    let remote_only = match segment::load(dir, &reading)? {
        LoadedCatalog::Found { state, .. } => state.remote,
        // No catalog, or a damaged one (which the open reports): no file known to be remote.
        LoadedCatalog::Absent | LoadedCatalog::Corrupt(_) => BTreeMap::new(),
    };
    let newest = manifest::newest(config)?;
    if !belongs(dir, &reading, newest.as_ref(), &remote_only)? {
        return Err(mismatch(None));
    }
    if !profile.read_only {
        write(dir, profile, &config.prefix)?;
        log::info!(
            "podstore: {} now records remote prefix {}",
            dir.display(),
            config.prefix
        );
    }
    Ok(())
}

/// Whether the store in `dir`, which records no prefix, belongs to the prefix whose newest
/// manifest is `newest` (see [`check`]).
fn belongs(
    dir: &Path,
    reading: &IoProfile,
    newest: Option<&Manifest>,
    remote_only: &BTreeMap<u64, RemoteObject>,
) -> Result<bool> {
    let Some(m) = newest else {
        return Ok(remote_only.is_empty());
    };
    let named: HashMap<u64, &ManifestFile> = m.files.iter().map(|f| (f.id, f)).collect();
    for (id, o) in remote_only {
        match named.get(id) {
            Some(f) if f.epoch == o.epoch && f.crc == o.crc => {}
            _ => return Ok(false),
        }
    }
    if m.files.is_empty() || !remote_only.is_empty() {
        return Ok(true);
    }
    // One of the manifest's files is a local file, byte for byte: crc32 read only for a file
    // of a named id, kind and length, and only until one matches.
    for (id, kind) in segment::list(reading, dir)? {
        let Some(f) = named.get(&id).filter(|f| f.kind == kind) else {
            continue;
        };
        let Some(local) = PlainFile::open(&dir.join(segment::file_name(id, kind)), reading)? else {
            continue;
        };
        if local.len()? == f.length && local.crc32()? == f.crc {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Writes the record of `prefix` into `dir`: a temporary file synced, renamed over the record,
/// the directory synced (a crash leaves the old record, none, or the new one whole).
pub(in crate::store) fn write(dir: &Path, profile: &IoProfile, prefix: &str) -> Result<()> {
    let tmp = dir.join(PREFIX_RECORD_TMP);
    if file::exists(profile, &tmp)? {
        file::remove_file(profile, &tmp)?;
    }
    let out = PlainFile::create_new(&tmp, profile)?;
    out.write_all_at(&prefix_record::encode(prefix), 0)?;
    out.sync_data()?;
    drop(out);
    file::rename(profile, &tmp, &dir.join(PREFIX_RECORD_NAME))?;
    file::sync_dir(profile, dir)
}
