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
//!
//! **Lazy puts.** A put whose look finds entries with its fingerprint that the read cache
//! cannot tell apart does not read them: its [`Seen`] is `unknown`, and it is resolved at once,
//! to [`Placement::Front`] (or against an earlier queued write of its key, as any write):
//! applied, its entry goes to the front of the run, flagged unresolved, and replaces nothing.
//! Front is right whatever changed since the look, since within a run a key's entries are
//! ordered newest first and readers take the first whose record is the key's. Applying it
//! queues a task in [`ResolveTasks`]; the store's resolver reads the run's records off the put
//! path and removes the key's older entries ([`PendingQueue::resolve_run`]), under this
//! queue's lock, if the run is still what it read.
//!
//! A delete removes every entry of its key: the one it replaces and the older versions it saw
//! ([`Seen::older`]); so it must resolve against an index that still holds what it saw even when
//! an earlier write of its key is queued (that write's entry is not in the index yet, but the
//! older versions it leaves are).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex};

use super::{Index, IndexEntry, Placement, Removal};

/// What a writer saw of its key in the index before it wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    /// The records named by the entries with the key's fingerprint.
    pub places: Vec<(u64, u64)>,
    /// Which of them is the key's newest, if any.
    pub current: Option<IndexEntry>,
    /// The sequence number of `current`'s record (0 without one): the value's version, which
    /// a conditional write compares.
    pub current_seq: u64,
    /// The key's other entries (older versions behind an unresolved entry), when the look
    /// read past the first (a delete's, the resolver's).
    pub older: Vec<(u64, u64)>,
    /// The look did not read the records: which entry is the key's is unknown (a lazy put).
    pub unknown: bool,
}

/// A record whose key is known without reading it: the record a lazy put wrote, carried by its
/// resolver task. A place names one record for its whole life, so this stays true whatever
/// happens to the entry (it may be replaced, moved or removed since: then no candidate has the
/// place, and the resolver reads as before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// The record's place (file id, offset).
    pub place: (u64, u64),
    /// Its sequence number.
    pub seq: u64,
}

/// A key whose run waits for the resolver.
#[derive(Debug)]
pub struct Task {
    /// The key's hash.
    pub hash: u64,
    /// The key.
    pub key: Box<[u8]>,
    /// The newest record of the key a lazy put applied for this task (`None` for a task put
    /// back without one): the resolver tells it without a read, though the put's value may not
    /// be in the read cache yet (it is kept there just after the entry is applied, which wakes
    /// the resolver).
    pub known: Option<Known>,
}

/// A write waiting to become visible.
#[derive(Debug)]
struct Pending {
    seq: u64,
    key: Box<[u8]>,
    hash: u64,
    /// `None` for a delete.
    entry: Option<IndexEntry>,
    /// Where its entry goes (which entry it replaces); `None` while unresolved.
    replaces: Option<Placement>,
    /// A delete's: every entry of the key it saw, removed too if still there.
    stale: Vec<(u64, u64)>,
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
    /// Runs left unresolved by lazy puts, for the resolver.
    tasks: ResolveTasks,
}

/// Where the entry of a write of `key` queued at position `at` goes: in place of what the last
/// earlier queued write of the key leaves, else of the index's entry as `seen` if the index
/// still holds exactly what the writer saw, else (a lazy put) at the front; `None` if it cannot
/// be resolved yet. A delete (`delete`) needs the index unchanged in every case: it removes the
/// older versions it saw too.
fn resolution(
    q: &VecDeque<Pending>,
    at: usize,
    key: &[u8],
    hash: u64,
    seen: &Seen,
    index: &Index,
    delete: bool,
) -> Option<Placement> {
    let earlier = q
        .range(..at)
        .rev()
        .find(|p| p.hash == hash && &*p.key == key)
        .map(|p| p.entry);
    if seen.unknown {
        debug_assert!(!delete, "a delete reads what it removes");
        return Some(earlier.map_or(Placement::Front, Placement::Replace));
    }
    let unchanged = || index.places(hash) == seen.places;
    match earlier {
        Some(e) if !delete || unchanged() => Some(Placement::Replace(e)),
        Some(_) => None,
        None => unchanged().then_some(Placement::Replace(seen.current)),
    }
}

/// The entries a delete removes besides the one it replaces: every entry of its key it saw.
fn stale_of(seen: &Seen, delete: bool) -> Vec<(u64, u64)> {
    if !delete {
        return Vec::new();
    }
    seen.current
        .iter()
        .map(IndexEntry::place)
        .chain(seen.older.iter().copied())
        .collect()
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
        let delete = entry.is_none();
        let replaces = resolution(&q, q.len(), key, hash, seen, index, delete);
        q.push_back(Pending {
            seq,
            key: key.into(),
            hash,
            entry,
            replaces,
            stale: stale_of(seen, delete),
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
            let delete = q[i].entry.is_none();
            q[i].replaces = resolution(&q, i, &key, hash, seen, index, delete);
            q[i].stale = stale_of(seen, delete);
        }
        let done = q[i].replaces.is_some();
        if done {
            apply(&mut q, index, &self.tasks);
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
        apply(&mut q, index, &self.tasks);
    }

    /// Marks the write `seq` ready and applies what can be applied.
    pub fn ready_one(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq) {
            q[i].ready = true;
        }
        apply(&mut q, index, &self.tasks);
    }

    /// Drops the write `seq` without applying it (its blob write failed). A later write of its
    /// key that was to replace it replaces what it would have.
    pub fn abandon(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq)
            && let Some(gone) = q.remove(i)
        {
            for p in q.range_mut(i..) {
                if p.hash == gone.hash
                    && *p.key == *gone.key
                    && p.replaces == Some(Placement::Replace(gone.entry))
                {
                    p.replaces = gone.replaces;
                }
            }
        }
        apply(&mut q, index, &self.tasks);
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
        if q.iter().any(|p| p.hash == hash && &*p.key == key) {
            return false;
        }
        index.replace_if(hash, expected, new)
    }

    /// Removes the index entry `expected` of `key` (hashing to `hash`), whose file an eviction
    /// drops or whose value expired and compaction reclaims, if no write of the key is queued
    /// (that write will replace it: the file must stay until it has) and it may hide no older
    /// versions of its key ([`Index::remove_if`]). Under this queue's lock, like every change
    /// of the index, so that a writer whose look saw the entry finds the index changed and
    /// looks again.
    pub fn remove_if_idle(
        &self,
        key: &[u8],
        hash: u64,
        expected: &IndexEntry,
        index: &Index,
    ) -> Removal {
        let q = self.lock();
        if q.iter().any(|p| p.hash == hash && &*p.key == key) {
            return if index.contains(hash, expected.segment, expected.offset) {
                Removal::Kept
            } else {
                Removal::Gone
            };
        }
        index.remove_if(hash, expected)
    }

    /// Resolves the run of a key hashing to `hash` as the resolver read it (`seen`: its newest
    /// entry and older versions) if the index still holds exactly the entries it read; returns
    /// whether it did (if not, the resolver reads again).
    pub fn resolve_run(&self, hash: u64, seen: &Seen, index: &Index) -> bool {
        let _q = self.lock();
        if index.places(hash) != seen.places {
            return false;
        }
        if let Some(c) = seen.current {
            index.resolve(hash, c.key_len, c.place(), &seen.older);
        }
        true
    }

    /// The runs waiting for the resolver.
    pub fn tasks(&self) -> &ResolveTasks {
        &self.tasks
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

    /// The last queued write of `key` (hashing to `hash`), if any: whether it is a put, and its
    /// sequence number.
    pub fn last_queued(&self, key: &[u8], hash: u64) -> Option<(bool, u64)> {
        self.lock()
            .iter()
            .rev()
            .find(|p| p.hash == hash && &*p.key == key)
            .map(|p| (p.entry.is_some(), p.seq))
    }
}

/// Applies every ready, resolved entry not preceded by a waiting entry for the same key; a lazy
/// put applied queues its run for the resolver.
fn apply(q: &mut VecDeque<Pending>, index: &Index, tasks: &ResolveTasks) {
    // Keys with a write still waiting, by hash first (a key compared only on a hash's match).
    let mut waiting: Vec<(u64, Box<[u8]>)> = Vec::new();
    q.retain(|p| {
        let blocked = waiting.iter().any(|(h, k)| *h == p.hash && *k == p.key);
        if p.ready
            && !blocked
            && let Some(at) = p.replaces
        {
            index.apply_write(p.hash, p.key.len() as u32, at, &p.stale, p.entry.as_ref());
            if at == Placement::Front
                && let Some(e) = &p.entry
            {
                let known = Known {
                    place: e.place(),
                    seq: p.seq,
                };
                tasks.add(p.hash, &p.key, Some(known));
            }
            false
        } else {
            if !blocked {
                waiting.push((p.hash, p.key.clone()));
            }
            true
        }
    });
}

/// Keys whose run a lazy put left unresolved, waiting for the resolver (one task per key: a
/// task resolves every older version of its key), and the resolver's wake-up.
#[derive(Debug, Default)]
pub struct ResolveTasks {
    state: Mutex<TaskState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct TaskState {
    queue: VecDeque<(u64, Box<[u8]>)>,
    /// The keys in `queue`, each with the newest record of it a lazy put applied.
    queued: HashMap<Box<[u8]>, Option<Known>>,
    /// Tasks taken and not done yet.
    busy: usize,
    stopped: bool,
    /// Tests: the resolver thread takes nothing (callers of [`ResolveTasks::take`] still do).
    held: bool,
    /// Threads waiting on the condition variable: a notification costs a syscall, so it is
    /// made only when someone waits (not on every lazy put while the resolver is busy).
    waiters: usize,
}

impl ResolveTasks {
    fn lock(&self) -> std::sync::MutexGuard<'_, TaskState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues the run of `key` (hashing to `hash`), unless it is queued already (then the
    /// newer `known` record replaces the task's).
    fn add(&self, hash: u64, key: &[u8], known: Option<Known>) {
        let mut st = self.lock();
        if let Some(slot) = st.queued.get_mut(key) {
            if known.is_some() {
                *slot = known;
            }
            return;
        }
        st.queued.insert(key.into(), known);
        st.queue.push_back((hash, key.into()));
        if st.waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Queues a task again (the resolver could not resolve it yet).
    pub fn requeue(&self, task: Task) {
        self.add(task.hash, &task.key, task.known);
    }

    /// The next task, taken off the queue (under the lock).
    fn pop(st: &mut TaskState) -> Option<Task> {
        let (hash, key) = st.queue.pop_front()?;
        let known = st.queued.remove(&key).flatten();
        st.busy += 1;
        Some(Task { hash, key, known })
    }

    /// Number of tasks waiting.
    pub fn len(&self) -> usize {
        self.lock().queue.len()
    }

    /// Takes the next task, if any, without waiting; the caller calls [`ResolveTasks::done`]
    /// after it.
    pub fn take(&self) -> Option<Task> {
        Self::pop(&mut self.lock())
    }

    /// Waits for the next task (the resolver thread); `None` once stopped.
    pub fn wait_take(&self) -> Option<Task> {
        let mut st = self.lock();
        loop {
            if st.stopped {
                return None;
            }
            if !st.held
                && let Some(task) = Self::pop(&mut st)
            {
                return Some(task);
            }
            st = self.wait(st);
        }
    }

    fn wait<'a>(
        &self,
        mut st: std::sync::MutexGuard<'a, TaskState>,
    ) -> std::sync::MutexGuard<'a, TaskState> {
        st.waiters += 1;
        let mut st = self.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        st.waiters -= 1;
        st
    }

    /// A task taken is finished (resolved, or dropped).
    pub fn done(&self) {
        let mut st = self.lock();
        st.busy -= 1;
        if st.waiters > 0 {
            self.changed.notify_all();
        }
    }

    /// Waits until no task taken by another thread is in progress.
    pub fn wait_idle(&self) {
        let mut st = self.lock();
        while st.busy > 0 {
            st = self.wait(st);
        }
    }

    /// Ends [`ResolveTasks::wait_take`] for good (the store closes).
    pub fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// Tests: keeps the resolver thread from taking tasks while `on`.
    #[cfg(feature = "testing")]
    pub fn hold(&self, on: bool) {
        self.lock().held = on;
        self.changed.notify_all();
    }
}
