//! The second chance ([`Options::second_chance`](crate::Options::second_chance)): values read
//! since they were written are appended again, under a new sequence number, before eviction
//! drops their file, the way S3-FIFO and foyer keep a FIFO cache's hot items. Bounded: a step
//! writes at most half the bytes it frees.
//!
//! A read is remembered by the sequence number of the value's record (`ReadMarks`), which a
//! get learns whether the value came from the cache or a file; a copy made by compaction keeps
//! the number, so the mark follows the value. A value appended again gets a new number, unmarked:
//! it must be read again to get another chance.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Mutex;

use super::Compactor;
use crate::error::Result;
use crate::format::record::RecordKind;
use crate::index::IndexEntry;
use crate::segment;
use crate::store::compress::StoredValue;
use crate::store::read::Located;
use crate::store::segments::SegmentHandle;

/// Shards of the set of read sequence numbers (a lock each, so that readers rarely meet).
const SHARDS: usize = 32;

/// The sequence numbers of the values read since they were written.
#[derive(Default)]
pub(in crate::store) struct ReadMarks {
    shards: [Mutex<HashSet<u64>>; SHARDS],
}

impl ReadMarks {
    fn shard(&self, seq: u64) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        let i = (seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that the value of record `seq` was read.
    pub(in crate::store) fn mark(&self, seq: u64) {
        self.shard(seq).insert(seq);
    }

    /// Whether the value of record `seq` was read since it was written.
    fn marked(&self, seq: u64) -> bool {
        self.shard(seq).contains(&seq)
    }

    /// Forgets the marks at or below `through` (records an eviction dropped, or gave a new
    /// number): the set holds marks of live values only, and of values overwritten since.
    pub(super) fn forget_through(&self, through: u64) {
        for s in &self.shards {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|&seq| seq > through);
        }
    }
}

impl Compactor {
    /// Whether gets are counted: the store has a size cap (it is a cache, and its hit ratio
    /// is reported).
    pub(in crate::store) fn counts_gets(&self) -> bool {
        self.cap.is_some()
    }

    /// Counts a get of a store with a size cap, which found the value of record `seq` (or
    /// nothing), and remembers the read if the store gives second chances.
    pub(in crate::store) fn note_get(&self, seq: Option<u64>) {
        self.shared.counters.capped_get(seq.is_some());
        if let (Some(marks), Some(seq)) = (&self.read_marks, seq) {
            marks.mark(seq);
        }
    }

    /// Appends again, each under a new sequence number, the live values of `files` that were
    /// read since they were written, up to `budget` bytes of records, and points the index at
    /// the new records once they are durable; returns the bytes appended. Called by eviction
    /// (in its turn to change files) before it drops the files.
    ///
    /// A value is appended again only if, under the append lock, the index still names its
    /// record and no write of its key is queued: a later write of the key then takes a higher
    /// number than the new record, and an earlier one is already applied. The index is switched
    /// with a compare-and-set, as for compaction's copies: a key written meanwhile keeps its
    /// newer value (and its higher number wins at open too).
    pub(super) fn second_chance(&self, files: &[(u64, SegmentHandle)], budget: u64) -> Result<u64> {
        let Some(marks) = &self.read_marks else {
            return Ok(0);
        };
        let p = &self.shared;
        let now = p.now_ms();
        let mut written = 0u64;
        let mut moved: Vec<(Vec<u8>, IndexEntry, IndexEntry)> = Vec::new();
        let mut value = Vec::new();
        'files: for (id, h) in files {
            let len = h.file.len()?;
            let mut entries =
                segment::read_sealed_entries(&h.file, *id, len, &p.profile, self.reader.pool())?;
            entries.sort_unstable_by_key(|e| e.offset);
            for e in entries
                .iter()
                .filter(|e| e.kind == RecordKind::Put && marks.marked(e.seq))
            {
                // A value that has expired gets no second chance (it is gone to every read).
                if e.expires_at.is_some_and(|t| t <= now) {
                    continue;
                }
                let bytes = e.record_len();
                if written + bytes > budget {
                    break 'files;
                }
                let old = IndexEntry::of_footer_entry(*id, e);
                let hash = p.index.hash(&e.key);
                if !p.index.contains(hash, old.segment, old.offset) {
                    continue;
                }
                value.resize(old.stored_len as usize, 0);
                let found = Located::new(old, e.seq, h.file.clone());
                self.reader.read_stored(&found, &mut value)?;
                let stored = StoredValue {
                    bytes: Cow::Borrowed(&value),
                    value_len: old.value_len,
                    compressed: old.is_compressed(),
                    expires_at: old.expires_at,
                };
                let mut app = self.log.lock();
                if !p.index.contains(hash, old.segment, old.offset)
                    || p.pending.last_queued(&e.key).is_some()
                {
                    continue;
                }
                let seq = app.take_seq()?;
                let new = app.append_copy(&e.key, Some(&stored), seq, bytes)?;
                drop(app);
                written += bytes;
                moved.push((e.key.clone(), old, new));
            }
        }
        if moved.is_empty() {
            return Ok(0);
        }
        self.log.sync_all()?;
        let mut given = 0;
        for (key, old, new) in &moved {
            let hash = p.index.hash(key);
            if p.pending.replace_if_idle(key, hash, old, *new, &p.index) {
                given += 1;
            }
        }
        p.counters.second_chances(given, written);
        Ok(written)
    }
}
