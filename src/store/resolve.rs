//! Which index entry a write replaces: the writer's look at its key before it appends
//! ([`seen`]), the second look when the index changed in between ([`settle`]), and the resolver,
//! which removes the older versions of a key that lazy puts left in the index
//! ([`resolve_key`], run by the [`Resolver`] thread, or by a caller that needs exact counts:
//! [`settle_all`]). Why a write must look at all, and what a lazy put is: `index/pending.rs`.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::read::{Look, Reader};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::index::{Known, Seen, Task};

/// Most runs waiting for the resolver: past it, puts read to resolve themselves (as they did
/// before lazy puts), so that the index holds a bounded number of older versions (each one an
/// entry, 23 bytes, and a record counted live) however far the resolver falls behind.
pub(super) const MAX_UNRESOLVED: usize = 1 << 16;

/// How a put looks at its key: lazily, with direct I/O, unless the resolver is too far behind.
///
/// With buffered I/O the read a put would save is usually served by the page cache (a few
/// µs), and the resolver then costs more than it saves: YCSB A with buffered I/O on 2 cores
/// went from 641k to 503k ops/s with lazy puts (the resolver thread's reads and wake-ups
/// compete with the writers for the CPU), while with direct I/O it went from 92k to 133k.
pub(super) fn put_look(shared: &Shared) -> Look {
    if !shared.profile.direct || shared.pending.tasks().len() > MAX_UNRESOLVED {
        Look::First
    } else {
        Look::Lazy
    }
}

/// What the index holds for `key` now, for a write of it: its hash and [`Seen`], as far as
/// `look` asks.
pub(super) fn seen(
    shared: &Shared,
    reader: &Reader,
    key: &[u8],
    look: Look,
) -> Result<(u64, Seen)> {
    let hash = shared.index.hash(key);
    Ok((hash, reader.seen(key, hash, look)?))
}

/// Whether a key has a value, counting writes not yet applied to the index.
pub(super) enum Presence {
    /// No value, or a delete on its way.
    Absent,
    /// A value in the index and nothing on its way.
    Present,
    /// A put on its way, with this sequence number.
    Pending(u64),
    /// The index changed since the caller looked: look again.
    Changed,
}

/// Whether `key` (hashing to `hash`) has a value, as the next write will find it, given what
/// the caller has `seen` of it (call under the append lock).
pub(super) fn presence(shared: &Shared, key: &[u8], hash: u64, seen: &Seen) -> Presence {
    match shared.pending.last_queued(key, hash) {
        Some((true, seq)) => Presence::Pending(seq),
        Some((false, _)) => Presence::Absent,
        None if shared.index.places(hash) != seen.places => Presence::Changed,
        // An expired value is absent (its entry stays until compaction, and the write that
        // follows replaces it).
        None if seen.current.is_some_and(|e| !e.expired(|| shared.now_ms())) => Presence::Present,
        None => Presence::Absent,
    }
}

/// The version of a key a conditional write compares, as [`check`] finds it.
pub(super) enum Check {
    /// What the caller saw is the key's current state: the sequence number of its value's
    /// record, `None` if it has no value.
    Current(Option<u64>),
    /// A write of the key (this sequence number) is on its way: wait until it is applied (or
    /// dropped), then look again.
    Wait(u64),
    /// The index changed since the caller looked: look again.
    Again,
}

/// The current version of `key` (hashing to `hash`), given what the caller has `seen` of it
/// with a look that reads ([`Look::First`] or [`Look::All`], never lazy: with lazy overwrites
/// the index may hold older versions of the key behind an unresolved entry, and only the first
/// entry that is the key's, by its record, is the newest). Call under the append lock: what it
/// answers then holds until the lock is released, so a write appended under the same hold is
/// conditional on exactly this version. A write of the key still queued (not yet in the index)
/// is waited for rather than assumed: it may yet fail.
pub(super) fn check(shared: &Shared, key: &[u8], hash: u64, seen: &Seen) -> Check {
    match shared.pending.last_queued(key, hash) {
        Some((_, seq)) => Check::Wait(seq),
        None if shared.index.places(hash) != seen.places => Check::Again,
        None => {
            let live = seen.current.filter(|e| !e.expired(|| shared.now_ms()));
            Check::Current(live.map(|_| seen.current_seq))
        }
    }
}

/// Resolves the writes of `keys` that were queued unresolved (the index changed between the
/// writer's look and its append), looking again until each is; the flag says whether the write
/// is a put (which may look lazily) or a delete (which reads every entry of its key). Called
/// without the append lock. A record that cannot be read to tell its key leaves the write
/// resolved as if its key were new, with a warning: the write itself is in the log, and must
/// become visible.
pub(super) fn settle(shared: &Shared, reader: &Reader, unresolved: &[(u64, &[u8], bool)]) {
    let (index, pending) = (&shared.index, &shared.pending);
    for &(seq, key, put) in unresolved {
        let look = if put { put_look(shared) } else { Look::All };
        loop {
            let seen = match seen(shared, reader, key, look) {
                Ok((_, seen)) => seen,
                Err(e) => {
                    log::warn!("podstore: reading a record to resolve a write failed: {e}");
                    Seen {
                        places: index.places(index.hash(key)),
                        ..Seen::default()
                    }
                }
            };
            if pending.resolve(seq, &seen, index) {
                break;
            }
        }
    }
}

/// Times the resolver reads a run that keeps changing before it puts the task back.
const RESOLVE_TRIES: usize = 8;

/// Removes the older versions of `key` (hashing to `hash`) from its run: reads the records of
/// the run (outside any index lock), then, under the pending queue's lock, if the run is still
/// what it read, removes every entry of the key but the first (the newest: a key's entries are
/// ordered newest first) and clears that one's unresolved flag. Returns whether it is done
/// (`false`: the run kept changing; try later).
///
/// A read error is logged and the task dropped: older versions left in the index are harmless
/// to reads (a reader takes the first entry whose record is its key's, the newest); they only
/// count as live in `len`, `stats` and compaction's choice until the next open, which rebuilds
/// the index from the log with one entry per key.
///
/// `known`: a record of the key told without a read (the lazy put's own, from its task).
pub(super) fn resolve_key(
    shared: &Shared,
    reader: &Reader,
    hash: u64,
    key: &[u8],
    known: Option<Known>,
) -> bool {
    for _ in 0..RESOLVE_TRIES {
        let seen = match reader.seen_knowing(key, hash, Look::All, known) {
            Ok(seen) => seen,
            Err(e) => {
                log::warn!("podstore: reading a record to resolve an overwrite failed: {e}");
                return true;
            }
        };
        if shared.pending.resolve_run(hash, &seen, &shared.index) {
            return true;
        }
    }
    false
}

/// [`resolve_key`] for a task of the resolver's queue.
fn resolve_task(shared: &Shared, reader: &Reader, task: &Task) -> bool {
    resolve_key(shared, reader, task.hash, &task.key, task.known)
}

/// Resolves every run waiting for the resolver, in the calling thread, and waits for the one
/// the resolver thread may be resolving: afterwards the index holds one entry per key of every
/// lazy put applied so far (what exact counts need).
pub(super) fn settle_all(shared: &Shared, reader: &Reader) {
    settle_until(shared, reader, None)
}

/// [`settle_all`], stopping at `deadline` if one is given (the tasks left stay queued).
pub(super) fn settle_until(shared: &Shared, reader: &Reader, deadline: Option<Instant>) {
    let tasks = shared.pending.tasks();
    let mut later = Vec::new();
    while deadline.is_none_or(|d| Instant::now() < d)
        && let Some(task) = tasks.take()
    {
        if !resolve_task(shared, reader, &task) {
            later.push(task);
        }
        tasks.done();
    }
    tasks.wait_idle();
    // A run that kept changing under every read (its key's writers are busy with it) goes back
    // to the resolver: counts asked of a store that writers keep changing are not exact anyway.
    for task in later {
        tasks.requeue(task);
    }
}

/// The resolver thread: woken (no timer) when a lazy put is applied; resolves the runs it
/// left, one at a time, off the put path.
pub(super) struct Resolver {
    shared: Shared,
    handle: JoinHandle<()>,
}

impl Resolver {
    /// Starts the thread.
    pub(super) fn start(shared: Shared, reader: Arc<Reader>) -> Result<Resolver> {
        let thread_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("podstore-resolver".into())
            .spawn(move || {
                let shared = thread_shared;
                let tasks = shared.pending.tasks();
                while let Some(task) = tasks.wait_take() {
                    if !resolve_task(&shared, &reader, &task) {
                        // A run changing under every read: its writes are busy with it; later.
                        shared.pending.tasks().requeue(task);
                    }
                    tasks.done();
                }
            })
            .map_err(|e| Error::io("start background thread", None, e))?;
        Ok(Resolver { shared, handle })
    }

    /// Stops the thread; the tasks left are dropped (the older versions they name only count
    /// until the next open, which rebuilds the index from the log).
    pub(super) fn stop(self) {
        self.shared.pending.tasks().stop();
        let _ = self.handle.join();
    }
}
