//! Files open cannot use: why ([`QuarantineReason`]), and how they are moved into the store's
//! `quarantine/` directory, never removed.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::file::{IoProfile, list_dir, sync_dir};

/// Why open set a file aside in `quarantine/` instead of using it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuarantineReason {
    /// Its segment header verifies but names another file id: a file renamed (or two swapped)
    /// outside the store. Its records are bound to that id, so it cannot be read under this
    /// name, and serving it under its own id could bring back a file that the store had
    /// removed (or one from another store).
    Misnamed {
        /// The id its header gives.
        header_id: u64,
    },
    /// A blob file without a valid footer whose one record is not whole and verified: a large
    /// put torn by a crash before it was acknowledged, or a file damaged in two places (its
    /// footer and its record), or bytes that were never a blob file.
    BlobNotWhole,
    /// A log segment whose header is all zero but which holds other bytes: the blocks of its
    /// first write reached the disk in part, the header's not (nothing in it was acknowledged).
    ZeroHeader,
    /// A log segment whose header verifies but which holds no whole record: its first write
    /// was torn by a crash (nothing in it was acknowledged), or its first record was damaged.
    NoWholeRecord,
    /// A file named like a store file that the store's catalog does not list, and which holds
    /// bytes other than zeroes: not one the store made (the store records a file in its
    /// catalog before it writes anything to it), e.g. copied in from elsewhere.
    NotInCatalog,
}

impl std::fmt::Display for QuarantineReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuarantineReason::Misnamed { header_id } => {
                write!(
                    f,
                    "its header names file id {header_id:016x}, not the one in its name"
                )
            }
            QuarantineReason::BlobNotWhole => write!(
                f,
                "blob file without a valid footer whose record is not whole (a put torn by a \
                 crash, or damage)"
            ),
            QuarantineReason::ZeroHeader => write!(
                f,
                "log segment whose header is zero but which holds other bytes (a first write \
                 torn by a crash)"
            ),
            QuarantineReason::NoWholeRecord => write!(
                f,
                "log segment without a whole record (a first write torn by a crash, or damage)"
            ),
            QuarantineReason::NotInCatalog => write!(
                f,
                "not in the store's catalog (a file the store did not make)"
            ),
        }
    }
}

/// The directory inside a store where open moves the files it cannot use.
pub const QUARANTINE_DIR: &str = "quarantine";

/// Moves the file `name` of the store directory `dir` into `dir/quarantine/` (created if
/// needed), under its own name or, if that is taken by an earlier quarantined file, with
/// `.1`, `.2`, ... appended; returns the new path.
///
/// Crash safety: the quarantine directory's own entry is made durable first (fsync of `dir`).
/// Then one rename, which the file system applies atomically: the file is under one name or
/// the other, never neither. Then an fsync of `quarantine/` (the new name is durable), then of
/// `dir` (the old name is gone durably). A crash between the two fsyncs can at worst leave both
/// names (two links to one inode): the next open finds the old name again, cannot use it
/// either, and moves it again under a new suffix. Nothing is ever unlinked.
pub fn quarantine(profile: &IoProfile, dir: &Path, name: &str) -> Result<PathBuf> {
    let qdir = dir.join(QUARANTINE_DIR);
    let storage = &profile.storage;
    storage
        .create_dir_all(&qdir)
        .map_err(|e| Error::io("create quarantine directory", Some(qdir.clone()), e))?;
    sync_dir(profile, dir)?;
    let taken = list_dir(profile, &qdir)?;
    let target = std::iter::once(name.to_string())
        .chain((1..).map(|i| format!("{name}.{i}")))
        .find(|n| !taken.contains(n))
        .expect("an unused name");
    let to = qdir.join(target);
    let from = dir.join(name);
    storage
        .rename(&from, &to)
        .map_err(|e| Error::io("move file to quarantine", Some(from.clone()), e))?;
    sync_dir(profile, &qdir)?;
    sync_dir(profile, dir)?;
    Ok(to)
}
