//! Opening a store directory: every segment and blob file is opened from its footer (or, without
//! one, recovered by a scan and sealed), and the index is rebuilt from the footers' entries.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::segments::{FileSummary, SegmentHandle};
use crate::error::{DamagedFile, Error, FileProblem, Result};
use crate::format::catalog::{Edit, FileState, Op};
use crate::format::record::RecordKind;
use crate::index::Index;
use crate::io::aligned::BufPool;
use crate::io::file::{self, DirLock, IoMode, IoProfile};
use crate::io::storage::Storage;
use crate::options::Options;
use crate::segment::{
    self, Catalog, Expect, Found, LoadedCatalog, Opened, QuarantineReason, WholeError,
};

/// Prepares the directory of a store about to be opened: checks that it holds a store (with
/// `create(false)`) or nothing foreign (unless `allow_foreign_files`), creates it (unless
/// read-only), takes the lock, and asks the direct-I/O probe what it needs, from an existing
/// store file when there is one (nothing is created).
pub(super) fn prepare(
    dir: &Path,
    opts: &Options,
    storage: Arc<dyn Storage>,
) -> Result<(DirLock, IoProfile)> {
    // EEXIST from mkdir -p, ENOTDIR from a listing: the path (or a parent) is not a directory.
    let open_error = |what: &'static str, e: std::io::Error| {
        let what = match e.kind() {
            std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotADirectory => {
                "open store: the path is a file, not a directory"
            }
            _ => what,
        };
        Error::io(what, Some(dir.to_path_buf()), e)
    };
    // What the directory holds: whether it is a store, and a file of it for the probe. A
    // missing directory is a new store.
    let names = match storage.list_dir(dir) {
        Ok(names) => names,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(open_error("list store directory", e)),
    };
    let is_store = names.iter().any(|n| segment::marks_store(n));
    // A store whose creation stopped after its lock has nothing else of its own.
    if !opts.create && !is_store && !names.iter().any(|n| n == file::LOCK_NAME) {
        return Err(Error::NotFound {
            path: dir.to_path_buf(),
        });
    }
    // Refused before anything is written (no directory, lock, probe or catalog): the
    // directory is left as it was.
    if !is_store && !opts.allow_foreign_files {
        let mut foreign: Vec<String> = names
            .iter()
            .filter(|n| segment::is_foreign(n))
            .cloned()
            .collect();
        if !foreign.is_empty() {
            foreign.sort_unstable();
            let total = foreign.len();
            foreign.truncate(FOREIGN_NAMES_SHOWN);
            return Err(Error::ForeignFiles {
                path: dir.to_path_buf(),
                names: foreign,
                total,
            });
        }
    }
    let read_only = opts.read_only;
    if !read_only {
        storage
            .create_dir_all(dir)
            .map_err(|e| open_error("create store directory", e))?;
    }
    // Beside a writer no lock at all: a shared one would refuse a writer that opens later.
    let lock = if opts.alongside_writer {
        DirLock::none()
    } else {
        DirLock::acquire(&*storage, dir, read_only)?
    };
    let sample = names
        .into_iter()
        .find(|name| segment::parse_file_name(name).is_some())
        .map(|name| dir.join(name));
    let mode = opts.io_mode;
    let profile = file::probe(storage, dir, mode, sample.as_deref(), !read_only)?;
    if mode == IoMode::Auto && !profile.direct {
        log::warn!(
            "podstore: O_DIRECT refused in {}; using buffered I/O",
            dir.display()
        );
    }
    Ok((lock, profile))
}

/// Foreign names an [`Error::ForeignFiles`] shows.
const FOREIGN_NAMES_SHOWN: usize = 5;

/// What opening the store found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Segments opened from their footer.
    pub sealed_segments: usize,
    /// Segments that had no footer (the process or machine stopped while they were being
    /// written): scanned, cut after their last whole record, and sealed.
    pub recovered: Vec<RecoveredSegment>,
    /// Files removed because they held nothing but zero bytes (or none): a blob file created
    /// ahead and never used, a log segment whose first write never reached the disk. Nothing in
    /// them can have been acknowledged.
    pub removed_segments: usize,
    /// Files that open could not use and that hold other bytes: moved to the `quarantine/`
    /// directory of the store, never removed (also logged as warnings). Their records are not
    /// in the index: a key whose newest value was in one reads an older value, or none.
    pub quarantined: Vec<QuarantinedFile>,
    /// Files the catalog lists that were missing or damaged, opened anyway with
    /// [`RecoveryMode::Salvage`](crate::RecoveryMode::Salvage) (with the default mode, open
    /// fails with [`Error::Damaged`] instead): the records of a missing file are lost, and a
    /// damaged one was recovered by scanning it (its records after damage that cannot be
    /// skipped are lost). A key whose newest value or tombstone was lost reads an older value.
    /// Also a `CATALOG` that did not verify (rebuilt from the directory).
    pub lost: Vec<DamagedFile>,
    /// A new catalog was written: the store had none (a new store, or one written by a
    /// version without a catalog), salvage rebuilt it, or it had many removed files to forget.
    pub catalog_written: bool,
}

/// A file that open set aside in the store's `quarantine/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuarantinedFile {
    /// Its name in the store directory (`seg-<id>.pod` or `blob-<id>.pod`).
    pub name: String,
    /// Where it is now: `None` when it could not be moved (a full disk) and is still in the
    /// store directory, unused; a later open moves it.
    pub moved_to: Option<PathBuf>,
    /// Why it could not be used.
    pub reason: QuarantineReason,
}

/// A segment that was recovered by scanning at open.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveredSegment {
    /// Segment id.
    pub segment: u64,
    /// Number of records kept (after keeping the last one per key).
    pub entries: usize,
    /// One past the last byte of the last whole record: the records before it were kept.
    pub data_end: u64,
    /// Offset of the first bytes that were not a whole record (the torn tail), if any. They
    /// stay in the file, outside the records its new footer names.
    pub torn_at: Option<u64>,
    /// Offsets of records whose values failed verification but which were kept because the log
    /// goes on after them (damage, not a torn write): reads of them return
    /// [`Error::Corruption`](crate::Error::Corruption).
    pub damaged_records: Vec<u64>,
    /// Its new footer was written. False when the disk was full: its records are served from
    /// memory, and a later open (with space) recovers and seals it again, to the same records.
    pub sealed: bool,
}

/// An open [alongside a writer](crate::Options::alongside_writer): which attempt this is.
#[derive(Debug, Clone, Copy)]
pub(super) struct Alongside {
    /// The last attempt: what looks like damage is damage, not a change to read again.
    pub(super) last_attempt: bool,
}

/// The writer moved on while this attempt read the store: the caller reads it again.
fn changed(dir: &Path) -> Error {
    Error::StoreChanged {
        path: dir.to_path_buf(),
        attempts: 0,
    }
}

/// What recovery hands to the running store.
pub(super) struct Recovered {
    /// The index, rebuilt: each key's newest put, unless a newer tombstone hides it.
    pub(super) index: Index,
    /// Every file kept, by id.
    pub(super) segments: HashMap<u64, SegmentHandle>,
    /// What was found and done.
    pub(super) report: RecoveryReport,
    /// The highest sequence number found (0 in an empty store).
    pub(super) max_seq: u64,
    /// The id for the next new file.
    pub(super) next_file_id: u64,
    /// The catalog, checked and brought up to date.
    pub(super) catalog: Catalog,
}

/// Opens every segment and blob file in `dir`, checks them against the catalog, and rebuilds
/// the index from their footers. With `salvage`, damage the catalog reveals is reported in
/// [`RecoveryReport::lost`] instead of refusing the store. `alongside`: a read-only open beside
/// a writer that may change the store meanwhile ([`Alongside`]; changes it made are
/// [`Error::StoreChanged`] with `attempts` 0, for the caller to try again).
pub(super) fn recover(
    dir: &Path,
    profile: &IoProfile,
    pool: &BufPool,
    salvage: bool,
    hash_bits: u32,
    alongside: Option<Alongside>,
) -> Result<Recovered> {
    let index = Index::with_hash_bits(hash_bits);
    let mut segments = HashMap::new();
    let mut report = RecoveryReport::default();
    // Blob files interleave with log segments, so the newest record of a key is the one with
    // the highest sequence number, not the one in the highest segment: the builder keeps it.
    let mut builder = crate::index::Builder::default();
    // Beside a writer the catalog is read first: a file it lists was created before the
    // listing (the writer records a file before it creates it), and one the listing has that
    // it does not list is newer than the view.
    let (ids, loaded) = if alongside.is_some() {
        let loaded = segment::load(dir, profile)?;
        (segment::list(profile, dir)?, loaded)
    } else {
        let ids = segment::list(profile, dir)?;
        (ids, segment::load(dir, profile)?)
    };
    let catalog = match loaded {
        LoadedCatalog::Absent => None,
        LoadedCatalog::Found {
            file,
            state,
            slots,
            usable,
        } => Some(Catalog::found(dir, profile, file, state, slots, usable)),
        // Read in the middle of the writer's append of several edits: read again.
        LoadedCatalog::Corrupt(_) if alongside.is_some_and(|a| !a.last_attempt) => {
            return Err(changed(dir));
        }
        LoadedCatalog::Corrupt(damaged) if salvage => {
            log::warn!("podstore: {}: {damaged}; rebuilding it", dir.display());
            report.lost.push(damaged);
            None
        }
        LoadedCatalog::Corrupt(damaged) => {
            return Err(Error::Damaged {
                dir: dir.to_path_buf(),
                files: vec![damaged],
            });
        }
    };
    // Records an eviction dropped are not loaded, wherever they are (docs/design.md,
    // "Eviction"): a key's older record in a file that stayed must not come back.
    builder.evicted_through(catalog.as_ref().map_or(0, |c| c.evicted_through()));
    // A file the catalog lists that is not in the directory: found before anything is done.
    let mut damaged = Vec::new();
    let mut catalog_edits = Vec::new();
    if let Some(catalog) = &catalog {
        for (&id, f) in &catalog.state().files {
            if f.state == FileState::Removed || ids.contains(&(id, f.kind)) {
                continue;
            }
            if f.state == FileState::Created && f.kind == segment::SegmentKind::Blob {
                // A blob file not sealed in the catalog held no acknowledged put (a blob put
                // is acknowledged once its seal is recorded): a spare removed at close, or a
                // failed put's file. Its absence loses nothing.
                catalog_edits.push(Edit {
                    id,
                    kind: f.kind,
                    op: Op::Remove,
                });
                continue;
            }
            let sealed_len = match f.state {
                FileState::Sealed { length } => Some(length),
                _ => None,
            };
            damaged.push(DamagedFile {
                name: segment::file_name(id, f.kind),
                problem: FileProblem::Missing { sealed_len },
            });
            // Salvage accepts the loss: the file is forgotten.
            catalog_edits.push(Edit {
                id,
                kind: f.kind,
                op: Op::Remove,
            });
        }
        if !damaged.is_empty() && alongside.is_some() && moved_on(dir, profile, &damaged)? {
            return Err(changed(dir));
        }
        if !damaged.is_empty() && !salvage {
            return Err(Error::Damaged {
                dir: dir.to_path_buf(),
                files: damaged,
            });
        }
    }
    // Location tables are read into one buffer, reused (see `segment::Locations::into_buffer`).
    let mut table_buf = Vec::new();
    for &(id, kind) in &ids {
        let listed = catalog.as_ref().map(|c| c.file(id));
        let expect = match listed {
            None => Expect::Unlisted,
            // Created after the catalog was read: not in the view.
            Some(None) if alongside.is_some() => continue,
            Some(Some(f)) if f.kind == kind => match f.state {
                FileState::Created if alongside.is_some() => Expect::Writing,
                FileState::Created => Expect::Created,
                FileState::Sealed { length } => Expect::Sealed { length },
                FileState::Removed => {
                    // Its removal is recorded: the store had proven it garbage and was about
                    // to unlink it when it stopped.
                    if !profile.read_only {
                        file::remove_durably(profile, dir, &segment::path(dir, id, kind))?;
                        report.removed_segments += 1;
                    }
                    continue;
                }
            },
            // Not listed (or listed as the other kind): not a file the store made.
            Some(_) => Expect::Unlisted,
        };
        let not_listed = listed.is_some() && expect == Expect::Unlisted;
        let found = segment::open(dir, id, kind, profile, pool, expect, &mut table_buf);
        let mut found = match found {
            // Listed and removed since the listing: the writer compacted it away.
            Err(Error::Io { source, .. })
                if alongside.is_some() && source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Err(changed(dir));
            }
            found => found?,
        };
        if let Found::Damaged(problem) = found {
            damaged.push(DamagedFile {
                name: segment::file_name(id, kind),
                problem,
            });
            if !salvage {
                continue;
            }
            // Salvage: recovered like a file without a catalog (scanned, sealed again, or set
            // aside), and listed again from what it now is.
            catalog_edits.push(Edit {
                id,
                kind,
                op: Op::Remove,
            });
            found = segment::open(
                dir,
                id,
                kind,
                profile,
                pool,
                Expect::WasSealed,
                &mut table_buf,
            )?;
        }
        let loaded = match found {
            Found::Loaded(loaded) if not_listed && expect == Expect::Unlisted => {
                drop(loaded);
                let reason = QuarantineReason::NotInCatalog;
                set_aside(dir, profile, id, kind, reason, None, &mut report)?;
                continue;
            }
            Found::Loaded(loaded) => loaded,
            // A read-only store removes nothing; the file holds nothing to load.
            Found::Empty if profile.read_only => continue,
            Found::Empty => {
                // Proven to hold nothing acknowledged (see `segment::open`): the one kind of
                // file open removes. Its removal is recorded first when the catalog lists it.
                if let (Some(catalog), Expect::Created) = (&catalog, expect) {
                    let recorded = catalog.record(&[Edit {
                        id,
                        kind,
                        op: Op::Remove,
                    }]);
                    match recorded {
                        Ok(()) => {}
                        // Not recorded, so not removed: a later open removes it.
                        Err(Error::StorageFull { .. } | Error::Poisoned) => continue,
                        Err(e) => return Err(e),
                    }
                }
                let path = segment::path(dir, id, kind);
                file::remove_durably(profile, dir, &path)?;
                report.removed_segments += 1;
                continue;
            }
            Found::Unusable(reason) => {
                let listed_by = catalog.as_ref().filter(|_| expect == Expect::Created);
                set_aside(dir, profile, id, kind, reason, listed_by, &mut report)?;
                continue;
            }
            Found::Damaged(_) => unreachable!("a file opened without a catalog's expectation"),
        };
        let mut footer_durable = true;
        let found_sealed = loaded.opened == Opened::Sealed;
        match loaded.opened {
            Opened::Sealed => report.sealed_segments += 1,
            Opened::Recovered {
                data_end,
                torn_at,
                damaged,
                sealed,
            } => {
                footer_durable = sealed;
                report.recovered.push(RecoveredSegment {
                    segment: id,
                    entries: loaded.records.count(),
                    data_end,
                    torn_at,
                    damaged_records: damaged,
                    sealed,
                })
            }
        }
        if footer_durable && !matches!(expect, Expect::Sealed { .. }) && !profile.read_only {
            if found_sealed {
                // A footer found, but not known to be durable: after a process kill it may
                // be in the page cache only. Synced before the seal is recorded, or a power
                // loss now could leave a catalog that says sealed and a file without a footer.
                loaded.file.sync_data()?;
            }
            catalog_edits.push(Edit {
                id,
                kind,
                op: Op::Seal {
                    length: loaded.file.len()?,
                },
            });
        }
        let mut summary = FileSummary::default();
        let mut blocks = None;
        builder.start_file(id, loaded.records.count());
        match loaded.records {
            // Keys on disk: records that share a hash with another have theirs read again by
            // ordinal if open must compare them (`Builder::finish`).
            segment::Records::Locations(mut locations) => {
                blocks = locations.take_blocks();
                locations.for_each(|l| {
                    let tombstone = l.kind == RecordKind::Tombstone;
                    let len = crate::format::record::record_len_for(
                        l.flags,
                        l.key_len as u64,
                        l.stored_len,
                    );
                    summary.add(l.kind, l.seq, len);
                    let entry = crate::index::IndexEntry {
                        segment: id,
                        offset: l.offset,
                        value_len: l.value_len,
                        stored_len: l.stored_len,
                        key_len: l.key_len as u32,
                        flags: l.flags & crate::index::KEPT_FLAGS,
                        expires_at: l.expires_at,
                    };
                    builder.add(l.key_hash, l.seq, entry, tombstone, l.ordinal, None);
                });
                table_buf = locations.into_buffer();
            }
            // Entries read from a whole footer can be read again by ordinal too; those of a
            // recovery scan (in file order, with no footer yet) are kept with their keys.
            segment::Records::Entries(mut entries) => {
                if found_sealed {
                    // Ordinals count in key order, as `fetch_keys` below reads them (a version
                    // 1 footer lists its entries in record order).
                    entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
                }
                for (ordinal, e) in entries.into_iter().enumerate() {
                    let tombstone = e.kind == RecordKind::Tombstone;
                    summary.add(e.kind, e.seq, e.record_len());
                    let entry = if tombstone {
                        crate::index::IndexEntry {
                            segment: id,
                            offset: e.offset,
                            ..Default::default()
                        }
                    } else {
                        crate::index::IndexEntry::of_footer_entry(id, &e)
                    };
                    let hash = crate::index::key_hash(&e.key);
                    // Beside a writer, a footer found on a file listed as created was the
                    // writer's seal in flight: its keys are kept, not read again by ordinal
                    // from a file whose end may still be moving.
                    let key = (!found_sealed || expect == Expect::Writing).then_some(e.key);
                    builder.add(hash, e.seq, entry, tombstone, ordinal as u32, key);
                }
            }
        }
        let mut handle = SegmentHandle::sealed(Arc::new(loaded.file), kind, summary);
        if let Some(b) = blocks {
            // Kept for listings; a fresh handle's slot is empty.
            let _ = handle.blocks.set(Arc::new(b));
        }
        if !footer_durable {
            // No footer on disk: compaction (which reads footers) leaves it alone.
            handle.sealed_at = None;
        }
        segments.insert(id, handle);
    }
    if !damaged.is_empty() {
        if !salvage {
            return Err(Error::Damaged {
                dir: dir.to_path_buf(),
                files: damaged,
            });
        }
        for d in &damaged {
            log::warn!("podstore: {}: {d}; salvaged what was left", dir.display());
        }
        report.lost.extend(damaged);
    }
    // `segment::list` refused ids above MAX_FILE_ID, so this cannot overflow.
    let max_id = ids
        .last()
        .map_or(0, |&(id, _)| id)
        .max(catalog.as_ref().map_or(0, |c| c.max_id()));
    drop(table_buf);
    let max_seq = builder.max_seq();
    builder.finish(&index, &mut |id, ordinals| {
        let file = &segments[&id].file;
        let mut entries = segment::read_sealed_entries(file, id, file.len()?, profile, pool)?;
        // In key order, as ordinals count (a no-op for version 2 footers).
        entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        Ok(ordinals
            .iter()
            .map(|&o| entries[o as usize].key.clone())
            .collect())
    })?;
    let catalog = settle_catalog(
        dir,
        profile,
        catalog,
        &catalog_edits,
        &segments,
        max_id,
        &mut report,
    )?;
    Ok(Recovered {
        index,
        segments,
        report,
        max_seq,
        next_file_id: max_id + 1,
        catalog,
    })
}

/// Whether files the catalog listed and the directory did not have (`missing`) were removed by
/// the writer since the catalog was read: the catalog, read again, does not list one of them
/// as created or sealed (the writer records a removal before it unlinks), or cannot be read
/// whole. Otherwise they are missing as in a store without a writer: damage.
fn moved_on(dir: &Path, profile: &IoProfile, missing: &[DamagedFile]) -> Result<bool> {
    let LoadedCatalog::Found { state, .. } = segment::load(dir, profile)? else {
        return Ok(true);
    };
    Ok(missing.iter().any(|d| {
        let listed = segment::parse_file_name(&d.name).and_then(|(id, kind)| {
            state
                .files
                .get(&id)
                .filter(|f| f.kind == kind && f.state != FileState::Removed)
        });
        listed.is_none()
    }))
}

/// The catalog the running store records in: the one found, with `edits` (what open learnt)
/// appended, when it is clean; else a new one listing what open kept (a store without a
/// catalog, one rebuilt in salvage, one whose edits salvage contradicts, or one with many
/// removed files to forget). Read-only: the catalog as found, nothing written.
fn settle_catalog(
    dir: &Path,
    profile: &IoProfile,
    catalog: Option<Catalog>,
    edits: &[Edit],
    kept: &HashMap<u64, SegmentHandle>,
    max_id: u64,
    report: &mut RecoveryReport,
) -> Result<Catalog> {
    // Salvage's edits may contradict the catalog (a damaged file listed again): rewritten.
    let salvaged = !report.lost.is_empty();
    if profile.read_only {
        return Ok(catalog.unwrap_or_else(|| Catalog::absent(dir, profile)));
    }
    let found = match catalog {
        Some(catalog) => {
            let state = catalog.state();
            let removed = state
                .files
                .values()
                .filter(|f| f.state == FileState::Removed)
                .count();
            let rewrite =
                salvaged || (removed > REWRITE_REMOVED && removed > state.files.len() - removed);
            if !rewrite {
                return match catalog.record(edits) {
                    // Unrecorded seals are recorded by a later open or the running store's
                    // ticks; unrecorded removals of missing blob files are harmless.
                    Ok(()) | Err(Error::StorageFull { .. } | Error::Poisoned) => Ok(catalog),
                    Err(e) => Err(e),
                };
            }
            Some(catalog)
        }
        None => None,
    };
    let mut files = Vec::with_capacity(kept.len());
    for (&id, h) in kept {
        let state = match h.sealed_at {
            Some(_) => FileState::Sealed {
                length: h.file.len()?,
            },
            None => FileState::Created,
        };
        files.push((id, h.kind, state));
    }
    files.sort_unstable_by_key(|f| f.0);
    // The eviction watermark survives the rewrite (a catalog rebuilt by salvage, without one,
    // has none: see docs/design.md, "Eviction").
    let evicted = found.as_ref().and_then(|c| c.state().evicted);
    // So do the files whose data is in the remote only (their local copies keep no data).
    let remote = found.as_ref().map(|c| c.remote_files()).unwrap_or_default();
    match Catalog::write_whole(dir, profile, &files, max_id, evicted, &remote) {
        Ok(catalog) => {
            // Worth reporting unless the store is new.
            report.catalog_written = !kept.is_empty() || salvaged || found.is_some();
            Ok(catalog)
        }
        // A full disk does not make the store unopenable: it keeps the catalog it had (or
        // runs without one, which the next open writes).
        Err(WholeError::NotWritten(e @ Error::StorageFull { .. })) => {
            log::warn!(
                "podstore: {}: no space to write the catalog ({e}); the next open writes it",
                dir.display()
            );
            Ok(found.unwrap_or_else(|| Catalog::absent(dir, profile)))
        }
        Err(WholeError::NotWritten(e) | WholeError::Installed(e)) => Err(e),
    }
}

/// Removed files a catalog may list before open writes it anew, without them.
const REWRITE_REMOVED: usize = 4096;

/// Moves file `id` to `quarantine/` (left in place, unused, in a read-only store or on a full
/// disk) and reports it.
fn set_aside(
    dir: &Path,
    profile: &IoProfile,
    id: u64,
    kind: segment::SegmentKind,
    reason: QuarantineReason,
    listed_by: Option<&Catalog>,
    report: &mut RecoveryReport,
) -> Result<()> {
    let name = segment::file_name(id, kind);
    let moved = if profile.read_only {
        Err(crate::Error::ReadOnly)
    } else {
        // A file the catalog lists leaves it first, as if removed: open would otherwise
        // find it missing next time.
        let forgotten = match listed_by {
            Some(catalog) => catalog.record(&[Edit {
                id,
                kind,
                op: Op::Remove,
            }]),
            None => Ok(()),
        };
        forgotten.and_then(|()| segment::quarantine(profile, dir, &name))
    };
    let moved_to = match moved {
        Ok(to) => {
            log::warn!(
                "podstore: {} set aside as {}: {reason}",
                dir.join(&name).display(),
                to.display()
            );
            Some(to)
        }
        // No space for the quarantine directory, or a read-only store: left where it is,
        // unused.
        Err(e @ (Error::StorageFull { .. } | Error::ReadOnly | Error::Poisoned)) => {
            log::warn!(
                "podstore: {} not used ({reason}); left in place: {e}",
                dir.join(&name).display(),
            );
            None
        }
        Err(e) => return Err(e),
    };
    report.quarantined.push(QuarantinedFile {
        name,
        moved_to,
        reason,
    });
    Ok(())
}
