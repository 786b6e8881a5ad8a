//! Opening a store directory: every segment and blob file is opened from its footer (or, without
//! one, recovered by a scan and sealed), and the index is rebuilt from the footers' entries.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::segments::{FileSummary, SegmentHandle};
use crate::error::{Error, Result};
use crate::format::record::RecordKind;
use crate::index::Index;
use crate::io::aligned::BufPool;
use crate::io::file::{self, DirLock, IoMode, IoProfile};
use crate::io::storage::Storage;
use crate::options::Options;
use crate::segment::{self, Found, Opened, QuarantineReason};

/// Prepares the directory of a store about to be opened: checks that it holds a store (with
/// `create(false)`), creates it (unless read-only), takes the lock, and asks the direct-I/O
/// probe what it needs, from an existing store file when there is one (nothing is created).
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
    let is_store = |n: &String| n == file::LOCK_NAME || segment::parse_file_name(n).is_some();
    if !opts.get_create() && !names.iter().any(is_store) {
        return Err(Error::NotFound {
            path: dir.to_path_buf(),
        });
    }
    let read_only = opts.get_read_only();
    if !read_only {
        storage
            .create_dir_all(dir)
            .map_err(|e| open_error("create store directory", e))?;
    }
    let lock = DirLock::acquire(&*storage, dir, read_only)?;
    let sample = names
        .into_iter()
        .find(|name| segment::parse_file_name(name).is_some())
        .map(|name| dir.join(name));
    let mode = opts.get_io_mode();
    let profile = file::probe(storage, dir, mode, sample.as_deref(), !read_only)?;
    if mode == IoMode::Auto && !profile.direct {
        log::warn!(
            "podstore: O_DIRECT refused in {}; using buffered I/O",
            dir.display()
        );
    }
    Ok((lock, profile))
}

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
}

/// Opens every segment and blob file in `dir` and rebuilds the index from their footers.
pub(super) fn recover(dir: &Path, profile: &IoProfile, pool: &BufPool) -> Result<Recovered> {
    let index = Index::default();
    let mut segments = HashMap::new();
    let mut report = RecoveryReport::default();
    let mut max_seq = 0;
    // Blob files interleave with log segments, so the newest record of a key is the one with
    // the highest sequence number, not the one in the highest segment. Tombstones are
    // remembered while loading so that an older put read later cannot come back.
    let mut tombstones: HashMap<Vec<u8>, u64> = HashMap::new();
    let ids = segment::list(profile, dir)?;
    for &(id, kind) in &ids {
        let loaded = match segment::open(dir, id, kind, profile, pool)? {
            Found::Loaded(loaded) => loaded,
            // A read-only store removes nothing; the file holds nothing to load.
            Found::Empty if profile.read_only => continue,
            Found::Empty => {
                // Proven to hold nothing (see `segment::open`): the one kind of file open removes.
                let path = segment::path(dir, id, kind);
                file::remove_durably(profile, dir, &path)?;
                report.removed_segments += 1;
                continue;
            }
            Found::Unusable(reason) => {
                let name = segment::file_name(id, kind);
                let moved = if profile.read_only {
                    Err(crate::Error::ReadOnly)
                } else {
                    segment::quarantine(profile, dir, &name)
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
                    // No space for the quarantine directory, or a read-only store: left where
                    // it is, unused.
                    Err(e @ (crate::Error::StorageFull { .. } | crate::Error::ReadOnly)) => {
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
                continue;
            }
        };
        let mut footer_durable = true;
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
                    entries: loaded.entries.len(),
                    data_end,
                    torn_at,
                    damaged_records: damaged,
                    sealed,
                })
            }
        }
        let summary = FileSummary::of(&loaded.entries);
        index.reserve(loaded.entries.len());
        for e in loaded.entries {
            max_seq = max_seq.max(e.seq);
            // One lookup per entry in the common case (no tombstones loaded yet).
            if !tombstones.is_empty() && tombstones.get(&e.key).is_some_and(|&t| t >= e.seq) {
                continue;
            }
            match e.kind {
                RecordKind::Put => {
                    let entry = crate::index::IndexEntry::of_footer_entry(id, &e);
                    index.insert_if_newer(e.key, entry);
                }
                RecordKind::Tombstone => {
                    if index.remove_if_older(&e.key, e.seq) {
                        tombstones.insert(e.key, e.seq);
                    }
                }
            }
        }
        let mut handle = SegmentHandle::sealed(Arc::new(loaded.file), kind, summary);
        if !footer_durable {
            // No footer on disk: compaction (which reads footers) leaves it alone.
            handle.sealed_at = None;
        }
        segments.insert(id, handle);
    }
    Ok(Recovered {
        index,
        segments,
        report,
        max_seq,
        // `segment::list` refused ids above MAX_FILE_ID, so this cannot overflow.
        next_file_id: ids.last().map_or(1, |&(id, _)| id + 1),
    })
}
