//! The Raft log on a podstore [`Store`] of its own (`<node>/log`).
//!
//! Records, not entries: an append's entries are one podstore record (or a few, for an append of
//! more than 1 MiB), keyed by `e` + its first and last index, big-endian (so that records sort
//! by index), holding the committed id known when it was written and the postcard-encoded
//! entries (the layout: the `record` module, and docs/design.md, "Replication"). `m/vote`, `m/committed` and `m/purged` hold the metadata.
//! One record per append instead of one per entry: every record costs podstore an index
//! look-up of its new key and a record header, and a replicated put was one entry on each node.
//!
//! The committed id is not written by `save_committed` (openraft calls it after every commit):
//! it is kept in memory and carried by the next append's record (and written under
//! `m/committed` by truncations, purges and when the log store is closed). Open takes the newer
//! of `m/committed` and the newest record's. So after a crash the recovered committed id may be
//! older than the last one saved, by the commits since the last append (as it could before:
//! `m/committed` was a buffered write too); openraft's `save_committed` is optional for that
//! reason, and it never recovers one newer than the log holds.
//!
//! The store is opened with [`Durability::Buffered`]: an append is one podstore put (one record)
//! or batch (several; all of its entries or none after a crash), written into the store's buffer (on the calling task
//! when small, see [`INLINE_BYTES`]; on a blocking thread otherwise) and readable when `append`
//! returns; its `IOFlushed` callback goes to the flusher thread, which
//! takes every callback waiting, calls [`Store::flush`] once and then completes them all. So one
//! fdatasync covers every append that arrived while the previous flush ran. A buffered store
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
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use openraft::alias::{EntryOf, LogIdOf, VoteOf};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage};
use openraft::{LogState, OptionalSend, RaftLogReader};
use podstore::{Batch, Durability, Options, Store};

use crate::{TypeConfig, decode, encode, io_err};

mod record;
mod tail;

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

    /// Writes the entries into the store (buffered: readable, not yet durable) and the tail.
    ///
    /// Records never overlap: openraft appends right after the last entry (or into an empty
    /// log after its purge point); a follower whose log conflicts with the leader's has it
    /// truncated first (openraft's `FollowingHandler::append_entries`).
    fn write(mut self, sh: &Shared) -> io::Result<()> {
        let Some(last) = self.entries.last().map(|(e, _)| e.log_id()) else {
            return Ok(());
        };
        match &mut self.records[..] {
            // Most appends: one record, put without a batch's copy of it; its buffer is the
            // next append's.
            [one] => {
                sh.store.put(one.key, &one.value).map_err(io_err)?;
                if one.value.capacity() <= SPARE_BYTES {
                    *sh.spare() = std::mem::take(&mut one.value);
                }
            }
            several => {
                let mut batch = Batch::new();
                for r in several {
                    batch.put(r.key, &r.value);
                }
                sh.store.write(&batch).map_err(io_err)?;
            }
        }
        let mut m = sh.meta();
        if m.last.is_none() {
            m.first = self.entries.first().map(|(e, _)| e.index());
        }
        m.last = Some(last);
        m.saved_committed = self.committed;
        sh.tail().extend(self.entries);
        Ok(())
    }
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
        // A committed id no append has carried yet, written on the way out (the store's close
        // flushes it).
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
        });
        let (flush_tx, flush_rx) = mpsc::channel();
        let (reclaim_tx, reclaim_rx) = mpsc::channel();
        let flusher = {
            let store = store.clone();
            std::thread::Builder::new()
                .name("raft-log-flush".into())
                .spawn(move || flush_loop(&store, flush_rx))?
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

    /// The podstore store holding the log.
    pub fn store(&self) -> &Store {
        &self.shared.store
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

/// Takes every callback waiting, makes the store durable once, completes them all.
fn flush_loop(store: &Store, rx: mpsc::Receiver<IOFlushed<TypeConfig>>) {
    while let Ok(first) = rx.recv() {
        let mut waiting = vec![first];
        waiting.extend(rx.try_iter());
        let result = store.flush();
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

/// The start and end (exclusive) of a range of indexes.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

/// The encoded bytes of entries a bounded read returns at most (past the first entry):
/// replication (`limited_get_log_entries`: one AppendEntries) and the state machine's applies
/// (`entries_stream`) hold no more than this of the log in memory at a time, whatever
/// `max_payload_entries` says and however large the entries (the chunks of a streamed value
/// are 1 MiB each).
const READ_BYTES: usize = 1 << 20;

impl LogStore {
    /// The entries `start..end` the log holds, from `start` on, up to the first that brings
    /// their encoded bytes to `max_bytes` (at least one if the log holds `start`).
    async fn read_entries(&self, start: u64, end: u64, max_bytes: usize) -> io::Result<Vec<Entry>> {
        // Entries the in-memory tail holds are served on this task: replication asks for each
        // entry right after it was appended, and a hop to a blocking thread cost more than
        // the copy.
        let Some((first, stop)) = self.shared.live_range(start, end) else {
            return Ok(Vec::new());
        };
        {
            let tail = self.shared.tail();
            if tail.first().is_some_and(|t| t <= first) {
                return Ok(tail.read(first, stop, &mut max_bytes.max(1)));
            }
        }
        self.blocking(move |sh| {
            let mut budget = max_bytes.max(1);
            let Some((first, stop)) = sh.live_range(start, end) else {
                return Ok(Vec::new());
            };
            let mut out = Vec::with_capacity(stop.saturating_sub(first) as usize);
            // The entries before the in-memory tail from the store, the rest from the tail.
            let tail_start = sh.tail().first();
            let store_end = tail_start.map_or(stop, |t| t.clamp(first, stop));
            if first < store_end {
                // From the record holding `first` (it may start before it) on.
                let holding = sh
                    .store
                    .range(&bound(0)[..]..&bound(first.saturating_add(1))[..])
                    .next_back()
                    .transpose()
                    .map_err(io_err)?
                    .map(|k| extent(&k))
                    .transpose()?;
                // Its first index, not its key: a truncation may rewrite it under another.
                let from = match holding {
                    Some((start, last)) if last >= first => start,
                    _ => first,
                };
                let records = sh.store.range(&bound(from)[..]..&bound(store_end)[..]);
                for record in records.entries() {
                    let record = record.map_err(io_err)?;
                    let value = record.value().map_err(io_err)?;
                    let record = Parsed::new(record.key(), &value)?;
                    let next = first + out.len() as u64;
                    if record.first > next || record.last < next {
                        // Truncated or purged while we read: what was read is a prefix.
                        return Ok(out);
                    }
                    record.decode_range(next, store_end, &mut out, &mut budget)?;
                    if budget == 0 {
                        return Ok(out);
                    }
                }
                if first + (out.len() as u64) < store_end {
                    return Ok(out);
                }
            }
            out.extend(sh.tail().read(store_end, stop, &mut budget));
            Ok(out)
        })
        .await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<Entry>> {
        let (start, end) = bounds(&range);
        self.read_entries(start, end, usize::MAX).await
    }

    /// At most 1 MiB of entries (past the first): one AppendEntries.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> io::Result<Vec<Entry>> {
        self.read_entries(start, end, READ_BYTES).await
    }

    /// The entries, read 1 MiB at a time as the state machine takes them (openraft's
    /// default reads the whole range at once: all the chunks of a streamed value).
    async fn entries_stream<RB>(
        &mut self,
        range: RB,
    ) -> impl futures::Stream<Item = io::Result<Entry>> + OptionalSend
    where
        RB: RangeBounds<u64> + Clone + Debug + OptionalSend,
    {
        use futures::StreamExt;
        let (start, end) = bounds(&range);
        let log = self.clone();
        futures::stream::try_unfold(start, move |next| {
            let log = log.clone();
            async move {
                if next >= end {
                    return Ok(None);
                }
                let entries = log.read_entries(next, end, READ_BYTES).await?;
                if entries.is_empty() {
                    return Ok(None);
                }
                let after = next + entries.len() as u64;
                Ok(Some((
                    futures::stream::iter(entries.into_iter().map(Ok::<_, io::Error>)),
                    after,
                )))
            }
        })
        .map(|batch| match batch {
            Ok(entries) => entries.left_stream(),
            Err(e) => futures::stream::iter([Err(e)]).right_stream(),
        })
        .flatten()
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.shared.meta().vote)
    }
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
        let spare = std::mem::take(&mut *self.shared.spare());
        let appended = Appended::encode(entries, committed, spare)?;
        if appended.bytes <= INLINE_BYTES && self.shared.written.load(Ordering::Relaxed) {
            // Into the store's buffer on this task: no I/O to wait for (see INLINE_BYTES).
            appended.write(&self.shared)?;
        } else {
            self.blocking(move |sh| appended.write(sh)).await?;
            self.shared.written.store(true, Ordering::Relaxed);
        }
        // Readable now; durable once the flusher has flushed.
        self.send_flush(callback);
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        self.blocking(move |sh| {
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
