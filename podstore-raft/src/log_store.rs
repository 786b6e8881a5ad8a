//! The Raft log on a podstore [`Store`] of its own (`<node>/log`).
//!
//! Records, not entries: the appends one flush covers are one podstore record (or a few, past
//! 1 MiB; see below), keyed by `e` + its first and last index, big-endian (so that records sort
//! by index), holding the committed id known when it was written and the postcard-encoded
//! entries (the layout: the `record` module, and docs/design-replication.md, "Replication"). `m/vote`, `m/committed` and `m/purged` hold the metadata.
//! One record per flush instead of one per entry: every record costs podstore an index
//! look-up of its new key and a record header (and, once purged, a delete that reads it
//! back), and a replicated put was one entry, and one append on the leader, on each node.
//!
//! The committed id is not written by `save_committed` (openraft calls it after every commit):
//! it is kept in memory and carried by the next append's record (and written under
//! `m/committed` by truncations, purges and when the log store is closed). Open takes the newer
//! of `m/committed` and the newest record's. So after a crash the recovered committed id may be
//! older than the last one saved, by the commits since the last append (as it could before:
//! `m/committed` was a buffered write too); openraft's `save_committed` is optional for that
//! reason, and it never recovers one newer than the log holds.
//!
//! The store is opened with [`Durability::Buffered`]. An append of small entries is written
//! behind (the `pending` module): readable when `append` returns (the in-memory tail), written
//! by the flusher with every other append pending as one record just before its flush. Other
//! appends are one podstore put (one record) or batch (several; all of its entries or none
//! after a crash), after the pending ones, into the store's buffer (on the calling task when
//! small, see [`INLINE_BYTES`]; on a blocking thread otherwise). An append's `IOFlushed`
//! callback goes to the flusher thread, which takes every callback waiting, writes the pending
//! appends, calls [`Store::flush`] once and then completes them all. So one fdatasync, and one
//! record, covers every append that arrived while the previous flush ran. A buffered store
//! loses only a suffix of its writes in a crash, never a middle part, so the log never has
//! holes, and nothing later than an unflushed write survives it.
//!
//! Reads are served from an in-memory tail of the newest entries (at most 8192 and 32 MiB
//! encoded) where it has them, on the calling task, from the store otherwise (on a blocking
//! thread): the leader's replication reads every entry right after appending it.
//!
//! The vote is written with [`Durability::Sync`] before `save_vote` returns (which also makes
//! every earlier append durable). Purge records the purge point first (after it, reads and the
//! log state ignore every entry up to it) and hands the deletes to a reclaim thread, in batches:
//! purging millions of entries never stalls the Raft core. Truncation deletes the entries after
//! the given id in one synced batch (the records after it deleted, the one holding it rewritten
//! up to it).

use std::fmt::Debug;
use std::io;
use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use openraft::alias::{EntryOf, LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend};
use podstore::{Batch, Durability, Options, Store};

use crate::{TypeConfig, decode, encode, io_err};

mod pending;
mod read;
mod record;
mod tail;

use pending::Pending;

use record::{Builder, END, Parsed, bound, extent};
#[cfg(test)]
use tail::TAIL_ENTRIES;
use tail::Tail;

type Entry = EntryOf<TypeConfig>;
type LogId = LogIdOf<TypeConfig>;
type Vote = VoteOf<TypeConfig>;

const VOTE: &[u8] = b"m/vote";
const COMMITTED: &[u8] = b"m/committed";
const PURGED: &[u8] = b"m/purged";
/// Records deleted per batch when purged entries are reclaimed.
const RECLAIM_BATCH: usize = 1024;
/// Appends whose entries encode to at most this many bytes are written on the calling task
/// (the Raft core's), larger ones on a blocking thread. A buffered write copies into the
/// store's write buffer (1 MiB by default) and returns: it waits for the disk only when both
/// buffers are full or a new segment file is created (a directory fsync, once per segment),
/// so a small append costs less than the hop to a blocking thread and back (the hops were a
/// quarter of the CPU time of 64 clients' puts in the in-process bench).
/// The first append after open goes to a blocking thread whatever its size (it creates the
/// active segment); a later segment roll-over (one per 256 MiB of log with podstore's
/// defaults) still happens on the calling task.
const INLINE_BYTES: usize = 256 << 10;

/// The log's state, kept in memory and changed only after the store has it.
#[derive(Debug, Default)]
struct Meta {
    vote: Option<Vote>,
    committed: Option<LogId>,
    /// The committed id last written to the store (carried by a record or under `m/committed`):
    /// `committed` is pending while they differ.
    saved_committed: Option<LogId>,
    purged: Option<LogId>,
    /// The first entry in the store after the purge point, when there is one: the log may
    /// start anywhere (a node that installed a snapshot gets entries after it).
    first: Option<u64>,
    /// The last entry in the store (not counting purged ones).
    last: Option<LogId>,
}

struct Shared {
    store: Arc<Store>,
    meta: Mutex<Meta>,
    /// Copies of the newest entries, contiguous, for reads (the store has them too).
    tail: Mutex<Tail>,
    /// Whether an append has been written since open. The first one goes to a blocking
    /// thread whatever its size: it creates the store's active segment (a file, a directory
    /// fsync and a catalog update), which on a busy disk took long enough to starve the
    /// runtime's other tasks (a three-node in-process cluster on two workers lost its leader).
    written: AtomicBool,
    /// The value buffer of the last append's record, for the next one to encode into (kept
    /// up to [`SPARE_BYTES`]): a fresh buffer per append was allocated, grown through copies
    /// and, past malloc's mmap threshold, page-faulted in (2.4 % of the CPU time of 64
    /// clients' puts in the in-process bench).
    spare: Mutex<Vec<u8>>,
    /// Appends readable (in the tail) but not yet in the store (see [`pending`]).
    pending: Mutex<Pending>,
    /// Held by every write to the store of entries (the pending ones, an append written at
    /// once, a truncation, a purge) and by the vote's: they reach the store in the order they
    /// were made, so that a crash, which takes a suffix of a buffered store's writes, leaves
    /// no hole in the log.
    write_order: Mutex<()>,
}

/// The largest record buffer kept for the next append.
const SPARE_BYTES: usize = 2 * record::RECORD_BYTES;

impl Shared {
    fn meta(&self) -> MutexGuard<'_, Meta> {
        self.meta.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tail(&self) -> MutexGuard<'_, Tail> {
        self.tail.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn spare(&self) -> MutexGuard<'_, Vec<u8>> {
        self.spare.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_order(&self) -> MutexGuard<'_, ()> {
        self.write_order.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes entries just appended readable: the log's extent and the tail.
    fn readable(&self, entries: Vec<(Entry, usize)>) {
        let Some(last) = entries.last().map(|(e, _)| e.log_id()) else {
            return;
        };
        let mut m = self.meta();
        if m.last.is_none() {
            m.first = entries.first().map(|(e, _)| e.index());
        }
        m.last = Some(last);
        self.tail().extend(entries);
    }

    /// The part of `start..end` that the log holds (after the purge point, up to the last
    /// entry), or `None` if it holds none of it.
    fn live_range(&self, start: u64, end: u64) -> Option<(u64, u64)> {
        let m = self.meta();
        match (m.first, &m.last) {
            (Some(first), Some(last)) => {
                let (first, stop) = (start.max(first), end.min(last.index() + 1));
                (first < stop).then_some((first, stop))
            }
            _ => None,
        }
    }
}

/// An append's entries with their encodings, ready to be written.
struct Appended {
    records: Vec<record::Record>,
    entries: Vec<(Entry, usize)>,
    bytes: usize,
    /// The committed id its records carry.
    committed: Option<LogId>,
}

impl Appended {
    /// Encodes `entries` into records carrying `committed` (CPU only: no store access), the
    /// first into `spare`.
    fn encode(
        entries: impl IntoIterator<Item = Entry>,
        committed: Option<LogId>,
        spare: Vec<u8>,
    ) -> io::Result<Appended> {
        let entries = entries.into_iter();
        let mut records = Builder::new(committed, spare);
        let mut sized = Vec::with_capacity(entries.size_hint().0);
        let mut bytes = 0;
        for e in entries {
            let len = records.push(&e)?;
            bytes += len;
            sized.push((e, len));
        }
        Ok(Appended {
            records: records.finish(),
            entries: sized,
            bytes,
            committed,
        })
    }

    /// Writes the entries into the store (buffered: readable, not yet durable) and the tail,
    /// after the pending appends (call under [`Shared::write_order`]).
    ///
    /// Records never overlap: openraft appends right after the last entry (or into an empty
    /// log after its purge point); a follower whose log conflicts with the leader's has it
    /// truncated first (openraft's `FollowingHandler::append_entries`).
    fn write(mut self, sh: &Shared) -> io::Result<()> {
        sh.drain_ordered()?;
        if self.entries.is_empty() {
            return Ok(());
        }
        write_records(sh, &mut self.records)?;
        sh.readable(self.entries);
        sh.meta().saved_committed = self.committed;
        Ok(())
    }
}

/// Writes `records` into the store: one with a put (without a batch's copy of it; its buffer
/// is the next append's), several in one batch.
fn write_records(sh: &Shared, records: &mut [record::Record]) -> io::Result<()> {
    match records {
        [] => {}
        [one] => {
            sh.store.put(one.key, &one.value).map_err(io_err)?;
            if one.value.capacity() <= SPARE_BYTES {
                *sh.spare() = std::mem::take(&mut one.value);
            }
        }
        several => {
            let mut batch = Batch::new();
            for r in several.iter() {
                batch.put(r.key, &r.value);
            }
            sh.store.write(&batch).map_err(io_err)?;
        }
    }
    Ok(())
}

/// Whether an append is written behind (pending until the flusher's next flush): when its
/// entries are small (at most [`INLINE_BYTES`] of payload) and none is a chunk of a streamed
/// value (which the tail does not keep: it must be in the store to be read).
fn writes_behind(entries: &[Entry]) -> bool {
    let mut bytes = 0;
    for e in entries {
        if let openraft::EntryPayload::Normal(r) = &e.payload {
            if matches!(r, crate::Request::Chunk { .. }) {
                return false;
            }
            bytes += r.payload_len();
        }
    }
    bytes <= INLINE_BYTES
}

/// Puts the committed id under `m/committed` into `batch` (a delete for none).
fn put_committed(batch: &mut Batch, committed: Option<&LogId>) -> io::Result<()> {
    match committed {
        Some(c) => batch.put(COMMITTED, encode(c)?),
        None => batch.delete(COMMITTED),
    };
    Ok(())
}

/// The threads of a log store, stopped and joined when the last handle is dropped, so that the
/// store's directory is released when the log store is.
struct Workers {
    shared: Arc<Shared>,
    flush_tx: Option<mpsc::Sender<IOFlushed<TypeConfig>>>,
    /// Purge points whose records are to be deleted.
    reclaim_tx: Option<mpsc::Sender<u64>>,
    threads: Vec<JoinHandle<()>>,
}

impl Drop for Workers {
    fn drop(&mut self) {
        // The pending appends, then a committed id no append has carried yet, written on the
        // way out (the store's close flushes them). The order lock is released before the
        // threads are joined: the flusher takes it.
        {
            let _order = self.shared.write_order();
            if let Err(e) = self.shared.drain_ordered() {
                log_warn(&format!("writing the pending appends at close: {e}"));
            }
            let pending = {
                let m = self.shared.meta();
                (m.committed != m.saved_committed).then_some(m.committed)
            };
            if let Some(committed) = pending {
                let mut batch = Batch::new();
                let written = put_committed(&mut batch, committed.as_ref())
                    .and_then(|()| self.shared.store.write(&batch).map_err(io_err));
                if let Err(e) = written {
                    log_warn(&format!("saving the committed id at close: {e}"));
                }
            }
        }
        self.flush_tx.take();
        self.reclaim_tx.take();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// openraft's log storage (and log reader) on a podstore store. Cheap to clone: clones share the
/// store.
#[derive(Clone)]
pub struct LogStore {
    shared: Arc<Shared>,
    workers: Arc<Mutex<Workers>>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore")
            .field("dir", &self.shared.store.path())
            .finish()
    }
}

/// The read cache of the log's store: small. The in-memory tail serves what replication and
/// the state machine read right after an append; what the store serves is older entries (a
/// follower catching up, the chunks of a streamed value), read once or twice, which a cache
/// would only keep from the state machine's store. podstore sizes a store's cache from the
/// memory available to the process as if it were the process's only store: left to that, the
/// log's and the state machine's caches would each take half of a node's memory (with direct
/// I/O), the whole of it together.
const LOG_CACHE: u64 = 4 << 20;

impl LogStore {
    /// Opens (or creates) the log in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> io::Result<LogStore> {
        let opts = Options::default()
            .durability(Durability::Buffered)
            .cache_capacity(LOG_CACHE);
        let store = Store::open_with(dir.as_ref(), opts).map_err(io_err)?;
        let get = |k: &[u8]| store.get(k).map_err(io_err);
        let committed: Option<LogId> = get(COMMITTED)?.map(|b| decode(&b)).transpose()?;
        let mut meta = Meta {
            vote: get(VOTE)?.map(|b| decode(&b)).transpose()?,
            committed,
            saved_committed: committed,
            purged: get(PURGED)?.map(|b| decode(&b)).transpose()?,
            first: None,
            last: None,
        };
        let first_live = meta.purged.as_ref().map_or(0, |p| p.index() + 1);
        let records = |from: u64| store.range(&bound(from)[..]..END);
        // The newest record (found from the back of the range: one descent per file) holds
        // the last entry and the newest committed id an append carried.
        if let Some(newest) = records(0)
            .entries()
            .next_back()
            .transpose()
            .map_err(io_err)?
        {
            let value = newest.value().map_err(io_err)?;
            let newest = Parsed::new(newest.key(), &value)?;
            meta.committed = meta.committed.max(newest.committed);
            meta.saved_committed = meta.committed;
            if newest.last >= first_live {
                meta.last = Some(newest.last_entry()?.log_id());
                // The first live entry: in the record holding `first_live`, if one does (a
                // record may straddle the purge point), else the first record after it.
                let before = store
                    .range(&bound(0)[..]..&bound(first_live.saturating_add(1))[..])
                    .next_back()
                    .transpose()
                    .map_err(io_err)?;
                let first = match before.map(|k| extent(&k)).transpose()? {
                    Some((_, last)) if last >= first_live => first_live,
                    _ => match records(first_live).next().transpose().map_err(io_err)? {
                        Some(k) => extent(&k)?.0,
                        None => return Err(io::Error::other("log record vanished")),
                    },
                };
                meta.first = Some(first);
            }
        }
        // Records wholly at or below the purge point that a crash left before they were
        // reclaimed.
        let leftover = match &meta.purged {
            Some(p) => {
                let mut below = store.range(&bound(0)[..]..&bound(p.index().saturating_add(1))[..]);
                match below.next().transpose().map_err(io_err)? {
                    Some(k) if extent(&k)?.1 <= p.index() => Some(p.index()),
                    _ => None,
                }
            }
            None => None,
        };
        let store = Arc::new(store);
        let shared = Arc::new(Shared {
            store: store.clone(),
            meta: Mutex::new(meta),
            tail: Mutex::new(Tail::default()),
            written: AtomicBool::new(false),
            spare: Mutex::new(Vec::new()),
            pending: Mutex::new(Pending::default()),
            write_order: Mutex::new(()),
        });
        let (flush_tx, flush_rx) = mpsc::channel();
        let (reclaim_tx, reclaim_rx) = mpsc::channel();
        let flusher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("raft-log-flush".into())
                .spawn(move || flush_loop(&shared, flush_rx))?
        };
        let reclaimer = std::thread::Builder::new()
            .name("raft-log-reclaim".into())
            .spawn(move || reclaim_loop(&store, reclaim_rx))?;
        if let Some(to) = leftover {
            let _ = reclaim_tx.send(to);
        }
        Ok(LogStore {
            shared: shared.clone(),
            workers: Arc::new(Mutex::new(Workers {
                shared,
                flush_tx: Some(flush_tx),
                reclaim_tx: Some(reclaim_tx),
                threads: vec![flusher, reclaimer],
            })),
        })
    }

    /// The podstore store holding the log (appends written behind are not in it until the
    /// next flush: see [`LogStore::flush`]).
    pub fn store(&self) -> &Store {
        &self.shared.store
    }

    /// Writes the appends pending (see the `pending` module) and makes the log durable.
    pub fn flush(&self) -> io::Result<()> {
        self.shared.flush()
    }

    /// Runs `f` with the store on a blocking thread (never on the async runtime).
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shared) -> io::Result<T> + Send + 'static,
    ) -> io::Result<T> {
        let shared = self.shared.clone();
        tokio::task::spawn_blocking(move || f(&shared))
            .await
            .map_err(io::Error::other)?
    }

    fn send_flush(&self, callback: IOFlushed<TypeConfig>) {
        let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
        match &workers.flush_tx {
            Some(tx) => {
                if let Err(mpsc::SendError(cb)) = tx.send(callback) {
                    cb.io_completed(Err(io::Error::other("the log's flusher has stopped")));
                }
            }
            None => callback.io_completed(Err(io::Error::other("the log store is closed"))),
        }
    }
}

/// Takes every callback waiting, writes the pending appends (theirs, and any since) and makes
/// the store durable once, completes them all.
fn flush_loop(shared: &Shared, rx: mpsc::Receiver<IOFlushed<TypeConfig>>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let result = shared.flush();
        for cb in waiting {
            cb.io_completed(match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(io::Error::other(format!("flushing the raft log: {e}"))),
            });
        }
    }
}

/// Deletes the records wholly at or below each purge point received, in batches, off the Raft
/// core (a record holding entries on both sides of a purge point stays until a later purge).
fn reclaim_loop(store: &Store, rx: mpsc::Receiver<u64>) {
    while let Ok(to) = rx.recv() {
        if let Err(e) = reclaim(store, to) {
            log_warn(&format!("reclaiming purged raft log entries: {e}"));
        }
    }
}

fn reclaim(store: &Store, to: u64) -> io::Result<()> {
    let end = bound(to.saturating_add(1));
    // After the last record deleted: the next batch's scan starts there.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let start = match &after {
            Some(k) => Bound::Excluded(&k[..]),
            None => Bound::Included(&bound(0)[..]),
        };
        let mut batch = Batch::new();
        let mut n = 0;
        let mut seen = None;
        for key in store.range::<[u8]>((start, Bound::Excluded(&end[..]))) {
            let key = key.map_err(io_err)?;
            if extent(&key)?.1 <= to {
                batch.delete(&key);
                n += 1;
            }
            seen = Some(key);
            if n == RECLAIM_BATCH {
                break;
            }
        }
        after = seen;
        if n == 0 {
            return Ok(());
        }
        store.write(&batch).map_err(io_err)?;
        if n < RECLAIM_BATCH {
            return Ok(());
        }
    }
}

fn log_warn(msg: &str) {
    eprintln!("podstore-raft: {msg}");
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> io::Result<LogState<TypeConfig>> {
        let m = self.shared.meta();
        Ok(LogState {
            last_purged_log_id: m.purged,
            last_log_id: m.last.or(m.purged),
        })
    }

    async fn get_log_reader(&mut self) -> LogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        let vote = *vote;
        self.blocking(move |sh| {
            // After the pending appends, which its sync makes durable too.
            let _order = sh.write_order();
            sh.drain_ordered()?;
            let mut batch = Batch::new();
            batch.put(VOTE, encode(&vote)?).durability(Durability::Sync);
            sh.store.write(&batch).map_err(io_err)?;
            sh.meta().vote = Some(vote);
            Ok(())
        })
        .await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        // In memory only: the next append's record carries it (a write of its own cost the
        // store a record, and an index look-up, per commit).
        self.shared.meta().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.shared.meta().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> io::Result<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let committed = self.shared.meta().committed;
        let entries: Vec<Entry> = entries.into_iter().collect();
        if self.shared.written.load(Ordering::Relaxed) && writes_behind(&entries) {
            // Pending: written by the flusher, with the others since its last flush (see
            // the `pending` module).
            self.shared.append_pending(entries, committed)?;
        } else {
            let spare = std::mem::take(&mut *self.shared.spare());
            let appended = Appended::encode(entries, committed, spare)?;
            let inline = appended.bytes <= INLINE_BYTES;
            let write = move |sh: &Shared| {
                let _order = sh.write_order();
                appended.write(sh)
            };
            if inline && self.shared.written.load(Ordering::Relaxed) {
                // Into the store's buffer on this task: no I/O to wait for (see INLINE_BYTES).
                write(&self.shared)?;
            } else {
                self.blocking(write).await?;
                self.shared.written.store(true, Ordering::Relaxed);
            }
        }
        // Readable now; durable once the flusher has flushed.
        self.send_flush(callback);
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        self.blocking(move |sh| {
            let _order = sh.write_order();
            sh.drain_ordered()?;
            let from = last_log_id.as_ref().map_or(0, |l| l.index() + 1);
            // Out of the tail before out of the store: a reader never finds a removed entry.
            sh.tail().cut_from(from);
            let to = sh.meta().last.as_ref().map(|l| l.index());
            if to.is_some_and(|to| to >= from) {
                let mut batch = Batch::new();
                // The records from `from` on, and the one holding `from`, cut before it.
                for key in sh.store.range(&bound(from)[..]..END) {
                    batch.delete(key.map_err(io_err)?);
                }
                let holding = sh
                    .store
                    .range(&bound(0)[..]..&bound(from)[..])
                    .next_back()
                    .transpose()
                    .map_err(io_err)?;
                if let Some(key) = holding
                    && extent(&key)?.1 >= from
                {
                    let value = sh.store.get(&key).map_err(io_err)?;
                    let value = value.ok_or_else(|| io::Error::other("log record vanished"))?;
                    let kept = Parsed::new(&key, &value)?.prefix(from - 1)?;
                    batch.delete(&key).put(kept.key, kept.value);
                }
                // The committed id beside it: the cut record carries an older one.
                let committed = sh.meta().committed;
                put_committed(&mut batch, committed.as_ref())?;
                // Durable before it returns (truncations are rare): openraft may install a
                // snapshot (another store, made durable on its own) right after truncating a
                // conflicting tail. A kill between the two, with the truncation still
                // buffered, would leave a tail at or past the snapshot's index from an older
                // term, which openraft refuses at the next start ("inverted log order").
                batch.durability(Durability::Sync);
                sh.store.write(&batch).map_err(io_err)?;
                sh.meta().saved_committed = committed;
            }
            let mut m = sh.meta();
            m.last = match last_log_id {
                // After the last entry: nothing to truncate.
                Some(l)
                    if m.last
                        .as_ref()
                        .is_some_and(|last| l.index() >= last.index()) =>
                {
                    m.last
                }
                Some(l) if m.first.is_some_and(|f| l.index() >= f) => Some(l),
                _ => None,
            };
            if m.last.is_none() {
                m.first = None;
            }
            Ok(())
        })
        .await
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        let from = self.blocking(move |sh| {
            // The pending appends first: none is written after the purge point.
            let _order = sh.write_order();
            sh.drain_ordered()?;
            // The entries to reclaim start at the first live one (none if the log is empty).
            let from = sh.meta().first.unwrap_or(u64::MAX);
            // The purge point first: from now on nothing at or below it is read. The committed
            // id beside it: the purge may delete every record that carried it.
            let committed = sh.meta().committed;
            let mut batch = Batch::new();
            batch.put(PURGED, encode(&log_id)?);
            put_committed(&mut batch, committed.as_ref())?;
            sh.store.write(&batch).map_err(io_err)?;
            sh.tail().cut_to(log_id.index());
            let mut m = sh.meta();
            m.saved_committed = committed;
            m.purged = Some(log_id);
            if m.last.as_ref().is_some_and(|l| l.index() <= log_id.index()) {
                m.last = None;
                m.first = None;
            } else if let Some(f) = &mut m.first {
                *f = (*f).max(log_id.index() + 1);
            }
            Ok(from)
        });
        let from = from.await?;
        if from != u64::MAX && from <= log_id.index() {
            let workers = self.workers.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(tx) = &workers.reclaim_tx {
                let _ = tx.send(log_id.index());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
