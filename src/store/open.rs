//! Opening a store directory: every segment and blob file is opened from its footer (or, without
//! one, recovered by a scan and sealed), and the index is rebuilt from the footers' entries.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::segments::{FileSummary, SegmentHandle};
use crate::error::Result;
use crate::format::record::RecordKind;
use crate::index::Index;
use crate::io::aligned::BufPool;
use crate::io::file::IoProfile;
use crate::segment::{self, Opened};

/// What opening the store found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Segments opened from their footer.
    pub sealed_segments: usize,
    /// Segments that had no footer (the process or machine stopped while they were being
    /// written): scanned, cut after their last whole record, and sealed.
    pub recovered: Vec<RecoveredSegment>,
    /// Segments removed because they held no complete record.
    pub removed_segments: usize,
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
        let Some(loaded) = segment::open(dir, id, kind, profile, pool)? else {
            report.removed_segments += 1;
            continue;
        };
        match loaded.opened {
            Opened::Sealed => report.sealed_segments += 1,
            Opened::Recovered {
                data_end,
                torn_at,
                damaged,
            } => report.recovered.push(RecoveredSegment {
                segment: id,
                entries: loaded.entries.len(),
                data_end,
                torn_at,
                damaged_records: damaged,
            }),
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
        segments.insert(
            id,
            SegmentHandle::sealed(Arc::new(loaded.file), kind, summary),
        );
    }
    Ok(Recovered {
        index,
        segments,
        report,
        max_seq,
        next_file_id: ids.last().map_or(1, |(id, _)| id + 1),
    })
}
