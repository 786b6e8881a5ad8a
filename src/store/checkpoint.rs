//! [`Store::checkpoint`](super::Store::checkpoint): a consistent, openable copy of a live store.
//!
//! Sealed files never change, so they are hard-linked into the copy (copied where the
//! destination is on another file system); the active log segment is copied up to the end of
//! its records as they were when the checkpoint began (a prefix, which the copy's first open
//! recovers and seals like a segment left by a crash). The copy is built in a sibling directory
//! `<dest>.podstore-partial`, its catalog written last, and only then renamed to `dest`: an
//! interrupted checkpoint never looks like a store at `dest`.

use std::path::{Path, PathBuf};

use super::inner::Inner;
use crate::error::{Error, Result};
use crate::format::catalog::FileState;
use crate::io::file::{self, PlainFile, SegmentFile};
use crate::segment::{self, Catalog, WholeError};

/// What [`Store::checkpoint`](super::Store::checkpoint) did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointReport {
    /// The checkpoint's directory.
    pub path: PathBuf,
    /// Sealed files hard-linked into it (no bytes copied).
    pub files_linked: usize,
    /// Files copied: the active segment's records, and sealed files where the destination is
    /// on another file system.
    pub files_copied: usize,
    /// Bytes copied.
    pub bytes_copied: u64,
}

/// Bytes copied per read and write.
const COPY_CHUNK: usize = 1 << 20;

/// Makes the checkpoint of `inner` at `dest` (which must not exist; its parent must).
pub(super) fn run(inner: &Inner, dest: &Path) -> Result<CheckpointReport> {
    let shared = &inner.shared;
    let profile = &shared.profile;
    let exists = |p: &Path, what: &'static str| {
        Error::io(
            what,
            Some(p.to_path_buf()),
            std::io::ErrorKind::AlreadyExists.into(),
        )
    };
    if file::exists(profile, dest)? {
        return Err(exists(dest, "checkpoint: the destination exists"));
    }
    let name = dest.file_name().ok_or(Error::InvalidOptions(
        "checkpoint destination has no file name",
    ))?;
    // Its parent must exist: a mistyped parent is refused, not created (with its parents).
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !file::exists(profile, parent)? {
        return Err(Error::io(
            "checkpoint: the destination's parent directory does not exist",
            Some(parent.to_path_buf()),
            std::io::ErrorKind::NotFound.into(),
        ));
    }
    let mut staging_name = name.to_os_string();
    staging_name.push(".podstore-partial");
    let staging = dest.with_file_name(staging_name);
    if file::exists(profile, &staging)? {
        // Left by an interrupted checkpoint: not removed here (it is not this store's to
        // remove), but named, so that the user can.
        return Err(exists(
            &staging,
            "checkpoint: an interrupted checkpoint's directory is in the way",
        ));
    }
    profile
        .storage
        .create_dir_all(&staging)
        .map_err(|e| Error::io("checkpoint: create directory", Some(staging.clone()), e))?;
    // No file is removed while the checkpoint links and copies them.
    let _paused = inner.compactor.pause();
    // The consistency point: every write acknowledged before it is durable, and the active
    // segment's records up to `active_end` with it.
    let active = if profile.read_only {
        inner.log.lock().active().map(|a| (a.id, a.data_end))
    } else {
        inner.log.sync_all_active()?
    };
    let syncs_done = inner.log.progress().lock().syncs_done;
    let mut report = CheckpointReport {
        path: dest.to_path_buf(),
        ..CheckpointReport::default()
    };
    let mut listed = Vec::new();
    for (id, handle) in shared.segments.snapshot() {
        let name = segment::file_name(id, handle.kind);
        let to = staging.join(&name);
        // Recovered without a footer by a read-only open (beside a writer: the segment it
        // appends to) and served from memory: its records up to where the scan ended.
        let unsealed = inner
            .recovery
            .recovered
            .iter()
            .find(|r| r.segment == id && !r.sealed)
            .map(|r| (id, r.data_end));
        if let Some((active_id, active_end)) = active.filter(|a| a.0 == id).or(unsealed)
            && active_id == id
        {
            copy_prefix(inner, &handle.file, &to, active_end)?;
            report.files_copied += 1;
            report.bytes_copied += active_end;
            listed.push((id, handle.kind, FileState::Created));
            continue;
        }
        // A file whose footer is not durable yet was created after the consistency point (a
        // new active segment): its writes are not in the checkpoint.
        if handle.sealed_at.is_none_or(|t| t > syncs_done) {
            continue;
        }
        let len = handle.file.len()?;
        // Beside a writer, a file of the view may have been compacted away since: copied from
        // the handle the view keeps open.
        let linked = match file::hard_link(profile, handle.file.path(), &to) {
            Err(Error::Io { source, .. })
                if inner.opts.alongside_writer && source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(false)
            }
            linked => linked,
        };
        if linked? {
            report.files_linked += 1;
        } else {
            copy_prefix(inner, &handle.file, &to, len)?;
            report.files_copied += 1;
            report.bytes_copied += len;
        }
        listed.push((id, handle.kind, FileState::Sealed { length: len }));
    }
    file::sync_dir(profile, &staging)?;
    let (max_id, reserved) = {
        let app = inner.log.lock();
        (
            app.next_file_id().saturating_sub(1),
            app.reserved_through().max(app.last_seq()),
        )
    };
    // A store with a remote: the checkpoint belongs to its prefix (its remote-only files'
    // objects are there), as its source does (docs/design-remote.md, "The prefix a directory
    // belongs to").
    if let Some(config) = &inner.opts.remote {
        crate::store::remote::write_prefix(&staging, profile, &config.prefix)?;
    }
    // The checkpoint gives no number its source gave (its own file: the source's is rewritten in
    // place, so it is not linked). Written before the catalog, which marks a finished one.
    if reserved > 0 {
        segment::write_versions(
            &staging,
            profile,
            crate::format::versions::Reservation {
                generation: 1,
                reserved_through: reserved,
            },
        )?;
    }
    // Written last: a directory without it is not a finished checkpoint.
    // The eviction watermark goes with the files: a linked file may hold records an eviction
    // dropped (docs/design.md, "Eviction"), which the checkpoint must not bring back.
    let state = shared.catalog.state();
    // A file whose data is in the remote only is so in the checkpoint too: its linked copy
    // holds no data (the checkpoint needs the same remote to read it).
    Catalog::write_whole(
        &staging,
        profile,
        &listed,
        max_id,
        state.evicted,
        &state.remote,
    )
    .map_err(|e| match e {
        WholeError::NotWritten(e) | WholeError::Installed(e) => e,
    })?;
    file::rename(profile, &staging, dest)?;
    file::sync_dir(profile, parent)?;
    Ok(report)
}

/// Copies bytes `[0, len)` of `from` to the new file `to`, and syncs it.
fn copy_prefix(inner: &Inner, from: &SegmentFile, to: &Path, len: u64) -> Result<()> {
    let profile = &inner.shared.profile;
    let out = PlainFile::create_new(to, profile)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(COPY_CHUNK as u64) as usize;
        from.read_exact_at(at, &mut buf[..n], inner.reader.pool(), profile.read_align)
            .map_err(|e| Error::io("checkpoint: read", Some(from.path().to_path_buf()), e))?;
        out.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    out.sync_data()
}
