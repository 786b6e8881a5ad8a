//! Writes appended but not yet applied to the index, and how a write learns which entry it
//! replaces.
//!
//! Records are queued in log order when appended and applied to the index in that order, after
//! their fdatasync for durable writes (so nobody reads a durable write that a crash could still
//! take back) and at once for buffered ones.
//!
//! The index does not keep keys, so a write must be told which entry, if any, is its key's
//! before it can replace it: the writer reads the records of the entries with its key's
//! fingerprint, *before* it takes the append lock, and brings what it saw ([`Seen`]). When the
//! write is queued, its entry is *resolved*: against an earlier queued write of the same key if
//! there is one (the entry that write will leave), else against the index, if the index still
//! holds exactly the entries the writer saw. If something changed in between, the write is
//! queued unresolved, and the writer looks again ([`PendingQueue::resolve`]); an unresolved
//! write is not applied (nor any later write of its key). Every change of the index happens
//! under this queue's lock, which makes "still exactly what the writer saw" a fact until the
//! write is applied: compaction moves an entry only through [`PendingQueue::replace_if_idle`].

use std::collections::VecDeque;
use std::sync::Mutex;

use super::{Index, IndexEntry};

/// What a writer saw of its key in the index before it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The records named by the entries with the key's fingerprint.
    pub places: Vec<(u64, u64)>,
    /// Which of them is the key's, if any.
    pub current: Option<IndexEntry>,
}

/// A write waiting to become visible.
#[derive(Debug)]
struct Pending {
    seq: u64,
    key: Box<[u8]>,
    hash: u64,
    /// `None` for a delete.
    entry: Option<IndexEntry>,
    /// The entry this write replaces (`Some(None)`: none); `None` while unresolved.
    replaces: Option<Option<IndexEntry>>,
    /// Written to a blob file of its own rather than the log: it becomes ready when that file is
    /// durable, not with the log's syncs.
    blob: bool,
    /// May be applied to the index (durable, or buffered and in the write buffer).
    ready: bool,
}

/// Writes appended but not yet applied to the index, in sequence order.
///
/// An entry is applied once it is ready and resolved and no earlier entry for the same key is
/// still waiting: per key, updates land in log order; across keys a slow blob write holds up
/// nobody.
#[derive(Debug, Default)]
pub struct PendingQueue {
    queue: Mutex<VecDeque<Pending>>,
}

/// The entry a write of `key` queued at position `at` replaces: what the last earlier queued
/// write of the key leaves, else the index's entry as `seen`, if the index still holds exactly
/// what the writer saw; `None` if it does not.
fn resolution(
    q: &VecDeque<Pending>,
    at: usize,
    key: &[u8],
    hash: u64,
    seen: &Seen,
    index: &Index,
) -> Option<Option<IndexEntry>> {
    if let Some(p) = q.range(..at).rev().find(|p| &*p.key == key) {
        return Some(p.entry);
    }
    (index.places(hash) == seen.places).then_some(seen.current)
}

impl PendingQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a write (called in sequence order, under the append lock) of `key` (hashing to
    /// `hash` in `index`); returns whether it was resolved against what the writer `seen`. If
    /// not, the writer must call [`PendingQueue::resolve`] until it is.
    #[allow(clippy::too_many_arguments)]
    pub fn push(
        &self,
        seq: u64,
        key: &[u8],
        hash: u64,
        entry: Option<IndexEntry>,
        blob: bool,
        seen: &Seen,
        index: &Index,
    ) -> bool {
        let mut q = self.lock();
        debug_assert!(q.back().is_none_or(|p| p.seq < seq));
        let replaces = resolution(&q, q.len(), key, hash, seen, index);
        q.push_back(Pending {
            seq,
            key: key.into(),
            hash,
            entry,
            replaces,
            blob,
            ready: false,
        });
        replaces.is_some()
    }

    /// Resolves the queued write `seq` against what its writer has `seen` since; returns whether
    /// it is resolved (then what can be applied is).
    pub fn resolve(&self, seq: u64, seen: &Seen, index: &Index) -> bool {
        let mut q = self.lock();
        let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq) else {
            return true;
        };
        if q[i].replaces.is_none() {
            let (key, hash) = (q[i].key.clone(), q[i].hash);
            q[i].replaces = resolution(&q, i, &key, hash, seen, index);
        }
        let done = q[i].replaces.is_some();
        if done {
            apply(&mut q, index);
        }
        done
    }

    /// Marks every log write up to `seq` ready and applies what can be applied.
    pub fn ready_through(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        for p in q.iter_mut().take_while(|p| p.seq <= seq) {
            if !p.blob {
                p.ready = true;
            }
        }
        apply(&mut q, index);
    }

    /// Marks the write `seq` ready and applies what can be applied.
    pub fn ready_one(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq) {
            q[i].ready = true;
        }
        apply(&mut q, index);
    }

    /// Drops the write `seq` without applying it (its blob write failed). A later write of its
    /// key that was to replace it replaces what it would have.
    pub fn abandon(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq)
            && let Some(gone) = q.remove(i)
        {
            for p in q.range_mut(i..) {
                if *p.key == *gone.key && p.replaces == Some(gone.entry) {
                    p.replaces = gone.replaces;
                }
            }
        }
        apply(&mut q, index);
    }

    /// Moves the entry of `key` (hashing to `hash`) from `expected` to `new` (compaction) unless
    /// a write of the key is queued, which will replace it anyway; returns whether it moved.
    pub fn replace_if_idle(
        &self,
        key: &[u8],
        hash: u64,
        expected: &IndexEntry,
        new: IndexEntry,
        index: &Index,
    ) -> bool {
        let q = self.lock();
        if q.iter().any(|p| &*p.key == key) {
            return false;
        }
        index.replace_if(hash, expected, new)
    }

    /// True while any write with a sequence number in `first..=last` has not been applied.
    pub fn any_pending(&self, first: u64, last: u64) -> bool {
        let q = self.lock();
        let i = q.partition_point(|p| p.seq < first);
        q.get(i).is_some_and(|p| p.seq <= last)
    }

    /// Smallest sequence number of a write not yet applied (a blob put still being written can
    /// hold an old one), if any.
    pub fn min_seq(&self) -> Option<u64> {
        self.lock().front().map(|p| p.seq)
    }

    /// True when a queued write points into `segment`.
    pub fn references(&self, segment: u64) -> bool {
        self.lock()
            .iter()
            .any(|p| p.entry.is_some_and(|e| e.segment == segment))
    }

    /// The segments that queued writes point into.
    pub fn referenced_segments(&self) -> std::collections::HashSet<u64> {
        self.lock()
            .iter()
            .filter_map(|p| p.entry.map(|e| e.segment))
            .collect()
    }

    /// The last queued write of `key`, if any: whether it is a put, and its sequence number.
    pub fn last_queued(&self, key: &[u8]) -> Option<(bool, u64)> {
        self.lock()
            .iter()
            .rev()
            .find(|p| &*p.key == key)
            .map(|p| (p.entry.is_some(), p.seq))
    }
}

/// Applies every ready, resolved entry not preceded by a waiting entry for the same key.
fn apply(q: &mut VecDeque<Pending>, index: &Index) {
    let mut waiting: Vec<Box<[u8]>> = Vec::new();
    q.retain(|p| {
        let blocked = waiting.contains(&p.key);
        if p.ready
            && !blocked
            && let Some(old) = p.replaces
        {
            index.apply(p.hash, old.as_ref(), p.entry.as_ref());
            false
        } else {
            if !blocked {
                waiting.push(p.key.clone());
            }
            true
        }
    });
}
