//! The local disk as a cache of the remote (issue 38, phase 2): with
//! [`Options::remote_local_budget`](crate::Options::remote_local_budget), the local data of
//! sealed files named by a durable manifest is given back, oldest file first, once the sealed
//! files' local bytes pass the budget. An evicted file keeps its name, length and local footer
//! (a sparse file: its data punched out) and is read through [`SegmentFile::open_remote`]: one
//! ranged GET per read of its data (docs/design-remote.md, "Remote tier").
//!
//! Each file, in this order: (1) it is named, with its length, by the newest manifest this
//! writer created (so its object is whole in the remote, under a name no one replaces), and
//! synced (a blob file's footer is not synced at its seal); (2) its remote edit (the object's epoch and crc32) is durable in the catalog; (3) its handle in
//! the table of open files is replaced by the remote one, so that new reads go to the remote;
//! (4) once no reader holds the old handle, its data is punched out. A crash before (2) leaves
//! the file local; after it, open reads the file through the remote and punches it again.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use super::manifest::data_name;
use super::{RemoteTier, TierState};
use crate::error::{Error, Result};
use crate::format::catalog::RemoteObject;
use crate::io::file::{IoProfile, SegmentFile};
use crate::io::remote::{RemoteReads, RemoteSource};
use crate::options::RemoteConfig;
use crate::segment::{Catalog, SegmentKind};
use crate::store::inner::Inner;
use crate::store::segments::SegmentHandle;

/// A file evicted whose local data is still to be given back: its old (local) handle, which a
/// reader may still be reading, and the bytes to punch out.
pub(super) struct ToPunch {
    id: u64,
    old: Arc<SegmentFile>,
    span: Range<u64>,
}

/// Where file `id` of `kind` uploaded by the writer of `epoch` is read from.
fn source(
    config: &RemoteConfig,
    epoch: u64,
    kind: SegmentKind,
    id: u64,
    reads: &Arc<RemoteReads>,
) -> RemoteSource {
    RemoteSource {
        remote: config.remote.clone(),
        object: data_name(&config.prefix, epoch, kind, id),
        attempts: config.attempts,
        reads: reads.clone(),
    }
}

/// At open: the files the catalog says are in the remote only are opened through it (their
/// handles replaced), and their local data punched out again (a punch a crash took back).
/// Such a store needs its remote: without [`Options::remote`](crate::Options::remote) it does
/// not open.
pub(in crate::store) fn open_evicted(
    profile: &IoProfile,
    config: Option<&RemoteConfig>,
    catalog: &Catalog,
    segments: &mut HashMap<u64, SegmentHandle>,
    reads: &Arc<RemoteReads>,
) -> Result<()> {
    let remote = catalog.remote_files();
    if remote.is_empty() {
        return Ok(());
    }
    let Some(config) = config else {
        return Err(Error::InvalidOptions(
            "the store has files whose data is in its remote only: open it with Options::remote",
        ));
    };
    for (id, o) in remote {
        let Some(h) = segments.get_mut(&id) else {
            continue;
        };
        let src = source(config, o.epoch, h.kind, id, reads);
        let file = SegmentFile::open_remote(h.file.path(), profile, src)?;
        if !profile.read_only
            && let Some(span) = file.remote_span()
            && !span.is_empty()
        {
            h.file.punch_hole(span)?;
        }
        h.file = Arc::new(file);
    }
    Ok(())
}

/// Evicts the oldest sealed files named by this writer's newest manifest until the sealed
/// files' local bytes are within the budget (none without one), and punches out the data of
/// files evicted before whose old handles are released. Returns how many files it evicted.
pub(super) fn evict_local(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
) -> Result<usize> {
    let evicted = match tier.config.local_budget {
        Some(budget) if inner.shared.catalog.is_kept() => evict_over(inner, tier, state, budget)?,
        _ => 0,
    };
    punch_released(inner, state);
    Ok(evicted)
}

fn evict_over(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    budget: u64,
) -> Result<usize> {
    let shared = &inner.shared;
    // No compaction or size-cap eviction removes a file meanwhile (the remote edit of a file
    // removed would contradict the catalog).
    let _paused = inner.compactor.pause();
    let syncs_done = inner.log.progress().lock().syncs_done;
    let mut local = 0;
    let mut candidates = Vec::new();
    for (id, h) in shared.segments.sealed_by(syncs_done) {
        local += h.file.local_len()?;
        // A file a size-cap step recorded as evicted but kept for a moment (a write of one of
        // its keys was queued) is garbage to open: no remote edit for it.
        if h.file.is_remote()
            || shared
                .catalog
                .file(id)
                .is_some_and(|f| f.state == crate::format::catalog::FileState::Removed)
        {
            continue;
        }
        let len = h.file.len()?;
        if let Some(named) = state.named.get(&id)
            && named.length == len
            && named.kind == h.kind
        {
            candidates.push((id, h.kind, h.file.clone(), *named));
        }
    }
    let mut evicted = 0;
    // Oldest (lowest id) first.
    for (id, kind, local_file, named) in candidates {
        if local <= budget {
            break;
        }
        let path = local_file.path().to_path_buf();
        let src = source(&tier.config, named.epoch, kind, id, &shared.remote_reads);
        let file = match SegmentFile::open_remote(&path, &shared.profile, src) {
            Ok(f) => f,
            Err(e) => {
                log::warn!("podstore: {} is not evicted: {e}", path.display());
                continue;
            }
        };
        let Some(span) = file.remote_span().filter(|s| !s.is_empty()) else {
            continue;
        };
        let object = RemoteObject {
            epoch: named.epoch,
            crc: named.crc,
        };
        // The footer durable before the data can go: a blob file's footer is not synced at its
        // seal (a lost one is rebuilt from the record, which a punched file no longer has).
        local_file.sync_data()?;
        drop(local_file);
        shared.catalog.remote_only(id, kind, object)?;
        if let Some(old) = shared.segments.replace_file(id, Arc::new(file)) {
            state.to_punch.push(ToPunch {
                id,
                old,
                span: span.clone(),
            });
        }
        local -= span.end - span.start;
        evicted += 1;
    }
    Ok(evicted)
}

/// Punches out the local data of evicted files that no reader holds the old handle of (a
/// reader that took it before the eviction reads the local data until it lets go of it).
fn punch_released(inner: &Inner, state: &mut TierState) {
    state.to_punch.retain(|p| {
        if Arc::strong_count(&p.old) > 1 {
            return true;
        }
        // Still the store's (not removed by compaction or the size cap since).
        if inner.shared.catalog.remote_of(p.id).is_some()
            && let Err(e) = p.old.punch_hole(p.span.clone())
        {
            log::warn!(
                "podstore: the local data of {} is kept ({e}): it is read from the remote",
                p.old.path().display()
            );
        }
        false
    });
}
