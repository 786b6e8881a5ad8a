//! The public API: [`Store`], [`ValueReader`], [`Keys`].

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::batch::Batch;
use crate::compress::{self, FrameCache, StoredValue, TableCache};
use crate::error::{Error, Result};
use crate::format::footer::{FooterEntry, encode_footer};
use crate::format::record::{
    FLAG_BATCH_CONTINUES, RecordHeader, RecordKind, RecordPlace, record_len, write_record,
};
use crate::format::segment_header::SegmentHeader;
use crate::index::{Index, IndexEntry, PendingQueue};
use crate::io::aligned::BufPool;
use crate::io::file::{self, DirLock, IoProfile, SegmentFile};
use crate::io::storage::{RealStorage, Storage};
use crate::io::writer::{self, Progress, Tail, WriteBuffer};
use crate::options::{Durability, IoMode, Options};
use crate::segment::{self, Opened, SegmentKind};
use crate::verify::{self, VerifyReport};
use crate::{MAX_KEY_LEN, MAX_VALUE_LEN};

mod compact;

pub use compact::{CompactionReport, Stats};

/// Size of the bounce buffers used by direct reads.
const READ_BUFFER_SIZE: usize = 1 << 20;

/// An embedded key-value store for blobs, in one directory.
///
/// `Store` is `Send + Sync`: share it between threads by reference or in an `Arc`. Every method
/// takes `&self`; reads run concurrently with writes and see every write that has returned.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let store = podstore::Store::open(dir.path())?;
/// store.put(b"greeting", b"hello, world")?;
/// assert_eq!(store.get(b"greeting")?.as_deref(), Some(&b"hello, world"[..]));
/// assert_eq!(store.get_range(b"greeting", 7..)?.as_deref(), Some(&b"world"[..]));
/// store.close()?;
/// # Ok(()) }
/// ```
pub struct Store {
    inner: Arc<Inner>,
    closed: bool,
    // Dropped after `Drop::drop` has sealed and flushed: the next opener finds a clean store.
    _lock: DirLock,
}

/// What opening the store found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    /// [`Error::Corruption`].
    pub damaged_records: Vec<u64>,
}

struct Inner {
    dir: PathBuf,
    opts: Options,
    profile: IoProfile,
    index: Arc<Index>,
    pending: Arc<PendingQueue>,
    segments: RwLock<HashMap<u64, SegmentHandle>>,
    appender: Mutex<Appender>,
    tail: Arc<Mutex<Tail>>,
    progress: Arc<Progress>,
    read_pool: BufPool,
    /// Frame tables of recently read compressed values.
    frame_tables: TableCache,
    flusher: Mutex<Option<JoinHandle<()>>>,
    ticker: Mutex<Option<Ticker>>,
    /// Blob files created ahead (empty, names durable), for large puts to come.
    spare_blobs: Mutex<Vec<(u64, SegmentFile)>>,
    /// A large put is creating spare blob files: the others create only their own.
    creating_blobs: std::sync::atomic::AtomicBool,
    recovery: RecoveryReport,
    /// Byte counters since open, for [`Stats`].
    counters: Counters,
    /// Held by the one compaction that runs at a time.
    compacting: Mutex<compact::CompactorState>,
    /// Smallest sequence number of a blob put that failed in this process (`u64::MAX`: none):
    /// its file may still be on disk, or come back after a crash, with a whole record.
    abandoned_blob_seq: std::sync::atomic::AtomicU64,
    /// Calls of [`Store::compact`] waiting for `compacting`: the background compactor yields.
    compact_waiting: std::sync::atomic::AtomicUsize,
    /// The background compaction thread.
    compactor: Mutex<Option<Ticker>>,
}

/// A segment file open for reads, and what compaction needs to know of it.
struct SegmentHandle {
    file: Arc<SegmentFile>,
    kind: SegmentKind,
    /// The sync ticket ([`WriteBuffer::sync_ticket`]) after which its footer is on stable
    /// storage: `Some(0)` for files found at open and blob files; `None` for the active log
    /// segment, which is being written.
    sealed_at: Option<u64>,
    /// Smallest sequence number of a put its footer names (`u64::MAX` if none; for the active
    /// segment, see [`ActiveSegment::min_put_seq`]). A tombstone older than this cannot hide
    /// anything in this file.
    min_put_seq: u64,
    /// Bytes of the tombstone records its footer names.
    tombstone_bytes: u64,
    /// Number of those tombstones.
    tombstones: u64,
}

/// Byte counters since open.
#[derive(Default)]
struct Counters {
    /// Record bytes appended by puts, deletes and batches (padding not counted).
    user_bytes: std::sync::atomic::AtomicU64,
    /// Record bytes copied forward by compaction.
    compaction_bytes: std::sync::atomic::AtomicU64,
    /// Segment and blob files removed by compaction.
    files_removed: std::sync::atomic::AtomicU64,
    /// Log segments compacted (copied forward and removed).
    segments_compacted: std::sync::atomic::AtomicU64,
    /// Tombstones dropped by compaction (nothing older was left for them to hide).
    tombstones_dropped: std::sync::atomic::AtomicU64,
}

/// Blob files created per directory fsync when none is spare.
const BLOB_FILES_PER_CREATE: u64 = 8;

/// A background thread (flush ticker, compactor) and the flag that stops it.
struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: JoinHandle<()>,
}

/// State behind the append lock: the buffer being filled and the segment it belongs to.
struct Appender {
    wb: WriteBuffer,
    active: Option<ActiveSegment>,
    next_segment: u64,
    next_seq: u64,
    /// Bytes and records appended since the last synced hand-off: the group being formed.
    group_bytes: u64,
    group_records: usize,
}

/// One operation to append: a put (with its value, as stored) or a delete.
type Op<'a> = (&'a [u8], Option<&'a StoredValue<'a>>);

struct ActiveSegment {
    id: u64,
    /// Smallest sequence number of a put appended (copies keep their old ones).
    min_put_seq: u64,
    /// Tombstone records appended: bytes and count.
    tombstone_bytes: u64,
    tombstones: u64,
    /// One past the last byte of the last record appended (the write position may be further,
    /// past the padding of a synced group).
    data_end: u64,
    /// Every record appended, for the footer.
    records: Vec<FooterEntry>,
}

impl Store {
    /// Opens the store in `dir` with default [`Options`], creating it if needed.
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(dir, Options::default())
    }

    /// Opens the store in `dir`, creating it if needed.
    ///
    /// Reads the footer of every sealed segment (not their records). A segment that was being
    /// written when the process or machine stopped is scanned, cut after its last whole record
    /// and sealed; [`Store::recovery`] says what was found.
    ///
    /// Fails with [`Error::Locked`] if another `Store` has the directory open.
    pub fn open_with(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        Store::open_with_storage(dir.as_ref(), opts, Arc::new(RealStorage))
    }

    /// [`Store::open_with`] on another storage backend (tests: power loss, I/O errors).
    pub(crate) fn open_with_storage(
        dir: &Path,
        opts: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Store> {
        opts.validate()?;
        let dir = dir.to_path_buf();
        storage
            .create_dir_all(&dir)
            .map_err(|e| Error::io("create store directory", Some(dir.clone()), e))?;
        let lock = DirLock::acquire(&*storage, &dir)?;
        let profile = file::probe(storage, &dir, opts.io_mode)?;
        if opts.io_mode == IoMode::Auto && !profile.direct {
            log::warn!(
                "podstore: O_DIRECT refused in {}; using buffered I/O",
                dir.display()
            );
        }
        let read_pool = BufPool::new(READ_BUFFER_SIZE, profile.mem_align);

        let index = Arc::new(Index::default());
        let mut segments = HashMap::new();
        let mut recovery = RecoveryReport::default();
        let mut max_seq = 0;
        // Blob files interleave with log segments, so the newest record of a key is the one with
        // the highest sequence number, not the one in the highest segment. Tombstones are
        // remembered while loading so that an older put read later cannot come back.
        let mut tombstones: HashMap<Vec<u8>, u64> = HashMap::new();
        let ids = segment::list(&profile, &dir)?;
        for &(id, kind) in &ids {
            let Some(loaded) = segment::open(&dir, id, kind, &profile, &read_pool)? else {
                recovery.removed_segments += 1;
                continue;
            };
            match loaded.opened {
                Opened::Sealed => recovery.sealed_segments += 1,
                Opened::Recovered {
                    data_end,
                    torn_at,
                    damaged,
                } => recovery.recovered.push(RecoveredSegment {
                    segment: id,
                    entries: loaded.entries.len(),
                    data_end,
                    torn_at,
                    damaged_records: damaged,
                }),
            }
            let mut handle = SegmentHandle {
                file: Arc::new(loaded.file),
                kind,
                sealed_at: Some(0),
                min_put_seq: u64::MAX,
                tombstone_bytes: 0,
                tombstones: 0,
            };
            index.reserve(loaded.entries.len());
            for e in loaded.entries {
                max_seq = max_seq.max(e.seq);
                if e.kind == RecordKind::Put {
                    handle.min_put_seq = handle.min_put_seq.min(e.seq);
                } else {
                    handle.tombstone_bytes += record_len(e.key.len() as u64, e.stored_len);
                    handle.tombstones += 1;
                }
                // One lookup per entry in the common case (no tombstones loaded yet).
                if !tombstones.is_empty() && tombstones.get(&e.key).is_some_and(|&t| t >= e.seq) {
                    continue;
                }
                match segment::index_entry(id, &e) {
                    Some(entry) => {
                        index.insert_if_newer(e.key, entry);
                    }
                    None => {
                        if index.remove_if_older(&e.key, e.seq) {
                            tombstones.insert(e.key, e.seq);
                        }
                    }
                }
            }
            segments.insert(id, handle);
        }
        drop(tombstones);
        let next_segment = ids.last().map_or(1, |(id, _)| id + 1);

        let progress = Arc::new(Progress::new(max_seq));
        let pending = Arc::new(PendingQueue::default());
        let (wb, tail, flusher) = {
            let pending = pending.clone();
            let index = index.clone();
            writer::start(
                opts.write_buffer_size,
                profile.direct,
                profile.mem_align,
                profile.block_size as u64,
                opts.segment_size,
                progress.clone(),
                Box::new(move |seq| pending.ready_through(seq, &index)),
            )?
        };
        let flush_interval = opts.flush_interval;
        let inner = Inner {
            dir,
            opts,
            profile,
            index,
            pending,
            segments: RwLock::new(segments),
            appender: Mutex::new(Appender {
                wb,
                active: None,
                next_segment,
                next_seq: max_seq + 1,
                group_bytes: 0,
                group_records: 0,
            }),
            tail,
            progress,
            read_pool,
            frame_tables: TableCache::default(),
            flusher: Mutex::new(Some(flusher)),
            ticker: Mutex::new(None),
            spare_blobs: Mutex::new(Vec::new()),
            creating_blobs: std::sync::atomic::AtomicBool::new(false),
            recovery,
            counters: Counters::default(),
            compacting: Mutex::new(compact::CompactorState::default()),
            compact_waiting: std::sync::atomic::AtomicUsize::new(0),
            abandoned_blob_seq: std::sync::atomic::AtomicU64::new(u64::MAX),
            compactor: Mutex::new(None),
        };
        let inner = Arc::new(inner);
        if let Some(interval) = flush_interval {
            *inner.ticker.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(start_ticker(Arc::downgrade(&inner), interval)?);
        }
        if inner.opts.background_compaction {
            *inner.compactor.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(compact::start_compactor(Arc::downgrade(&inner))?);
        }
        Ok(Store {
            inner,
            closed: false,
            _lock: lock,
        })
    }

    /// Inserts or overwrites `key`.
    ///
    /// With [`Durability::Sync`] (the default) it returns once the value is on stable storage;
    /// concurrent calls share one write and one fdatasync. With [`Durability::Buffered`] it
    /// returns once the value is in the write buffer. Values of at least
    /// [`Options::large_value_threshold`] put with `Sync` are written to a file of their own by
    /// the calling thread, beside the shared buffer.
    ///
    /// With [`Options::compression`] set, the value is compressed (by the calling thread, before
    /// it takes any lock) when the options say it pays.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        check_value(value)?;
        let durability = self.inner.opts.durability;
        let stored = StoredValue::encode(value, &self.inner.opts);
        if durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold
        {
            return self
                .inner
                .put_blob(self.inner.lock_appender(), key, &stored);
        }
        let (first, last) = self.inner.lock_appender().append_ops(
            &self.inner,
            &[(key, Some(&stored))],
            durability,
        )?;
        self.inner.acknowledge(first, last, durability)
    }

    /// Inserts `key` only if it has no value; returns whether it did. Durable like
    /// [`Store::put`].
    ///
    /// Made for content-addressed data, where a key names its value and "already there" is
    /// success: the existing value is kept, not compared. When another writer's put of `key` is
    /// on its way, this waits until that put is acknowledged and returns `false`. Concurrent
    /// calls for one key insert it once.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert!(store.put_if_absent(b"sha256:ab12", b"blob bytes")?);
    /// assert!(!store.put_if_absent(b"sha256:ab12", b"other bytes")?);
    /// assert_eq!(store.get(b"sha256:ab12")?.unwrap(), b"blob bytes");
    /// # Ok(()) }
    /// ```
    pub fn put_if_absent(&self, key: &[u8], value: &[u8]) -> Result<bool> {
        check_key(key)?;
        check_value(value)?;
        // Cheap answer for the common case, before compressing anything.
        if self.inner.index.get(key).is_some() && self.inner.pending.last_queued(key).is_none() {
            return Ok(false);
        }
        let durability = self.inner.opts.durability;
        let stored = StoredValue::encode(value, &self.inner.opts);
        let large = durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold;
        loop {
            let mut app = self.inner.lock_appender();
            match self.inner.presence(key) {
                Presence::Present => return Ok(false),
                Presence::Pending(seq) => {
                    drop(app);
                    // Its outcome decides: acknowledged, the key is present; failed, look again.
                    self.inner.wait(seq, seq, durability == Durability::Sync)?;
                    continue;
                }
                Presence::Absent => {}
            }
            if large {
                return self.inner.put_blob(app, key, &stored).map(|()| true);
            }
            let (first, last) = app.append_ops(&self.inner, &[(key, Some(&stored))], durability)?;
            drop(app);
            return self
                .inner
                .acknowledge(first, last, durability)
                .map(|()| true);
        }
    }

    /// Applies every operation of `batch`, all-or-nothing: after a crash either all of them are
    /// visible or none is. Durable like [`Store::put`], unless the batch overrides the
    /// durability. Deleting a missing key in a batch is not an error.
    pub fn write(&self, batch: &Batch) -> Result<()> {
        for op in &batch.ops {
            check_key(&op.key)?;
            if let Some(v) = &op.value {
                check_value(v)?;
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        let durability = batch.durability.unwrap_or(self.inner.opts.durability);
        let values: Vec<Option<StoredValue<'_>>> = batch
            .ops
            .iter()
            .map(|op| {
                op.value
                    .as_deref()
                    .map(|v| StoredValue::encode(v, &self.inner.opts))
            })
            .collect();
        let ops: Vec<Op<'_>> = batch
            .ops
            .iter()
            .zip(&values)
            .map(|(op, v)| (op.key.as_slice(), v.as_ref()))
            .collect();
        let (first, last) = self
            .inner
            .lock_appender()
            .append_ops(&self.inner, &ops, durability)?;
        self.inner.acknowledge(first, last, durability)
    }

    /// Deletes `key`; returns whether it existed. Durable like [`Store::put`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        let durability = self.inner.opts.durability;
        let mut app = self.inner.lock_appender();
        match self.inner.pending.last_queued(key) {
            Some((false, seq)) => {
                // Another writer's delete of the key is on its way. Answer "absent" only once it
                // is acknowledged, like a delete of our own, so that no later read of ours can
                // still see the old value.
                drop(app);
                self.inner.acknowledge(seq, seq, durability)?;
                return Ok(false);
            }
            None if self.inner.index.get(key).is_none() => return Ok(false),
            Some((true, _)) | None => {}
        }
        let (first, last) = app.append_ops(&self.inner, &[(key, None)], durability)?;
        drop(app);
        self.inner.acknowledge(first, last, durability)?;
        Ok(true)
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let Some(found) = self.inner.locate(key)? else {
            return Ok(None);
        };
        let mut out = vec![0u8; to_usize(found.entry.value_len)?];
        self.inner.read_value(&found, 0, &mut out, None)?;
        Ok(Some(out))
    }

    /// Bytes `range` of the value of `key`.
    ///
    /// Reads from disk only the 4 KiB chunks that hold the range (and their checksums), whatever
    /// the size of the value. For a compressed value, it reads and decompresses only the frames
    /// that hold the range (and the frame table's header and entries, unless the store has them
    /// from an earlier read). A range that is not inside the value fails with
    /// [`Error::OutOfRange`]; an empty range inside it gives an empty vector.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put(b"k", b"0123456789")?;
    /// assert_eq!(store.get_range(b"k", 2..5)?.unwrap(), b"234");
    /// assert_eq!(store.get_range(b"k", 8..)?.unwrap(), b"89");
    /// assert!(matches!(store.get_range(b"k", 8..11), Err(podstore::Error::OutOfRange { .. })));
    /// # Ok(()) }
    /// ```
    pub fn get_range(&self, key: &[u8], range: impl RangeBounds<u64>) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let Some(found) = self.inner.locate(key)? else {
            return Ok(None);
        };
        let (start, end) = resolve_range(&range, found.entry.value_len)?;
        let mut out = vec![0u8; to_usize(end - start)?];
        self.inner.read_value(&found, start, &mut out, None)?;
        Ok(Some(out))
    }

    /// A reader that streams the value of `key` with positional reads, without loading it
    /// whole. It reads the value as it was when `reader` was called, even if it is overwritten,
    /// deleted or moved by compaction meanwhile (it keeps its file open).
    pub fn reader(&self, key: &[u8]) -> Result<Option<ValueReader>> {
        check_key(key)?;
        Ok(self.inner.locate(key)?.map(|found| ValueReader {
            inner: self.inner.clone(),
            found,
            pos: 0,
            cache: FrameCache::default(),
        }))
    }

    /// The length of the value of `key` (as it was put, whether or not it is stored
    /// compressed).
    pub fn value_len(&self, key: &[u8]) -> Result<Option<u64>> {
        check_key(key)?;
        Ok(self.inner.index.get(key).map(|e| e.value_len))
    }

    /// How many bytes the value of `key` takes in its record: its length if it is stored raw,
    /// the length of its frame table and lz4 frames if it is stored compressed (see
    /// [`Options::compression`]). The record's header, key and checksums come on top.
    pub fn stored_len(&self, key: &[u8]) -> Result<Option<u64>> {
        check_key(key)?;
        Ok(self.inner.index.get(key).map(|e| e.stored_len))
    }

    /// Whether `key` has a value.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        Ok(self.inner.index.get(key).is_some())
    }

    /// Number of live keys.
    pub fn len(&self) -> usize {
        self.inner.index.len() as usize
    }

    /// True when the store holds no key.
    pub fn is_empty(&self) -> bool {
        self.inner.index.is_empty()
    }

    /// An iterator over the live keys, in no particular order. It walks the index shard by
    /// shard: keys written or deleted while it runs may or may not appear.
    pub fn keys(&self) -> Keys {
        Keys {
            inner: self.inner.clone(),
            next_shard: 0,
            current: Vec::new().into_iter(),
        }
    }

    /// Makes every earlier write durable (those made with [`Durability::Buffered`]).
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()
    }

    /// Reads every segment file and checks every checksum, and every footer against the
    /// records; returns what is damaged and which live keys cannot be read because of it.
    ///
    /// It streams values a window at a time (never one whole), and decompresses a compressed
    /// value one frame at a time. It first makes every earlier write durable (like
    /// [`Store::flush`]) and then checks what is on disk, up to the last record written before
    /// the call. Reads and writes go on meanwhile; segments and keys written after the call
    /// started may or may not be checked.
    ///
    /// An I/O error while reading is returned as an error; damage is not an error but the
    /// contents of the [`VerifyReport`]. Docs: docs/reliability.md.
    pub fn verify(&self) -> Result<VerifyReport> {
        let (active, next_segment) = {
            let app = self.inner.lock_appender();
            let active = app.active.as_ref().map(|a| verify::ActiveBound {
                id: a.id,
                data_end: a.data_end,
            });
            (active, app.next_segment)
        };
        // Not `wait`: copies made by compaction reuse old sequence numbers, and must be on disk
        // too before the active segment is read up to `data_end`.
        self.inner.sync_log()?;
        let mut segments: Vec<(u64, Arc<SegmentFile>)> = self
            .inner
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            // Segments created since (a new active one has no footer yet) are not checked.
            .filter(|(id, _)| **id < next_segment)
            .map(|(id, h)| (*id, h.file.clone()))
            .collect();
        segments.sort_unstable_by_key(|(id, _)| *id);
        verify::run(
            &segments,
            active,
            &self.inner.read_pool,
            self.inner.profile.read_align,
            self.inner.profile.block_size,
            &|key| self.inner.index.get(key),
            &mut self.keys(),
        )
    }

    /// The I/O mode in use: [`IoMode::Direct`] or [`IoMode::Buffered`] (what
    /// [`IoMode::Auto`] resolved to).
    pub fn io_mode(&self) -> IoMode {
        if self.inner.profile.direct {
            IoMode::Direct
        } else {
            IoMode::Buffered
        }
    }

    /// What opening the store found: sealed segments, recovered ones and their torn tails.
    pub fn recovery(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }

    /// Stops the store the way a crash would, for tests: writes already handed to the flush
    /// thread finish, but nothing more is flushed, the buffer being filled is dropped and the
    /// active segment is left unsealed. Durable writes survive it; the next open recovers.
    /// Only with the `testing` feature.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn simulate_crash(mut self) {
        self.closed = true;
        self.inner.stop_ticker();
        self.inner.lock_appender().wb.shut_down();
        self.inner.join_flusher();
    }

    /// Flushes every write, seals the active segment and releases the directory lock.
    /// Dropping a `Store` does the same but cannot report errors.
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.inner.shut_down()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.closed
            && let Err(e) = self.inner.shut_down()
        {
            log::error!("podstore: closing {} failed: {e}", self.inner.dir.display());
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.inner.dir)
            .field("io_mode", &self.io_mode())
            .field("keys", &self.len())
            .finish()
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        Err(Error::EmptyKey)
    } else if key.len() > MAX_KEY_LEN {
        Err(Error::KeyTooLarge {
            len: key.len(),
            max: MAX_KEY_LEN,
        })
    } else {
        Ok(())
    }
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() as u64 > MAX_VALUE_LEN {
        Err(Error::ValueTooLarge {
            len: value.len() as u64,
            max: MAX_VALUE_LEN,
        })
    } else {
        Ok(())
    }
}

fn start_ticker(inner: Weak<Inner>, interval: Duration) -> Result<Ticker> {
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let thread_stop = stop.clone();
    let handle = std::thread::Builder::new()
        .name("podstore-ticker".into())
        .spawn(move || {
            let (flag, cv) = &*thread_stop;
            let mut stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                stopped = cv
                    .wait_timeout(stopped, interval)
                    .unwrap_or_else(|p| p.into_inner())
                    .0;
                if *stopped {
                    return;
                }
                let Some(inner) = inner.upgrade() else { return };
                drop(stopped);
                if inner.has_unflushed() {
                    // A failure poisons the store and is reported to the next writer.
                    let _ = inner.flush();
                }
                drop(inner);
                stopped = flag.lock().unwrap_or_else(|p| p.into_inner());
            }
        })
        .map_err(|e| Error::io("start flush ticker", None, e))?;
    Ok(Ticker { stop, handle })
}

fn to_usize(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::ValueTooLarge {
        len: n,
        max: usize::MAX as u64,
    })
}

fn resolve_range(range: &impl RangeBounds<u64>, len: u64) -> Result<(u64, u64)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => Some(s),
        Bound::Excluded(&s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => Some(len),
    };
    match (start, end) {
        (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e)),
        (s, e) => Err(Error::OutOfRange {
            start: s.unwrap_or(u64::MAX),
            end: e.unwrap_or(u64::MAX),
            len,
        }),
    }
}

impl Inner {
    fn lock_appender(&self) -> MutexGuard<'_, Appender> {
        self.appender.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Returns once the writes `first..=last` are acknowledged under `durability`: applied to
    /// the index, and for `Sync` durable.
    fn acknowledge(&self, first: u64, last: u64, durability: Durability) -> Result<()> {
        self.wait(first, last, durability == Durability::Sync)
    }

    /// Makes every write so far durable.
    fn flush(&self) -> Result<()> {
        let last = self.lock_appender().next_seq - 1;
        self.wait(last, last, true)
    }

    fn has_unflushed(&self) -> bool {
        let last = self.lock_appender().next_seq - 1;
        self.progress.lock().durable_seq < last
    }

    /// Waits until no write in `first..=last` is pending for the index and, with `durable`,
    /// until log records up to `last` are on stable storage, leading a group commit when they
    /// are not and no write is in flight.
    ///
    /// Writers whose records arrive while a write and sync are in flight wait; when it
    /// finishes, the first to wake hands everything appended meanwhile to the flush thread as
    /// one write and one fdatasync. A lone writer finds nothing in flight and syncs at once.
    fn wait(&self, first: u64, last: u64, durable: bool) -> Result<()> {
        loop {
            {
                let mut st = self.progress.lock();
                loop {
                    let need_sync = durable && st.durable_seq < last;
                    if !need_sync && !self.pending.any_pending(first, last) {
                        return Ok(());
                    }
                    if let Some(f) = st.failure {
                        return Err(f.to_error());
                    }
                    if need_sync && st.inflight == 0 {
                        break;
                    }
                    st = self.progress.wait(st);
                }
            }
            let mut app = self.lock_appender();
            {
                let st = self.progress.lock();
                if st.failure.is_some() || st.durable_seq >= last || st.inflight > 0 {
                    continue;
                }
            }
            app.submit_group()?;
        }
    }

    /// Whether `key` has a value, as the next write will find it (call under the append lock).
    fn presence(&self, key: &[u8]) -> Presence {
        match self.pending.last_queued(key) {
            Some((true, seq)) => Presence::Pending(seq),
            Some((false, _)) => Presence::Absent,
            None if self.index.get(key).is_some() => Presence::Present,
            None => Presence::Absent,
        }
    }

    /// Writes a large value to a blob file of its own. Takes the append lock (held by the
    /// caller, who may have checked something under it) only to number the write.
    fn put_blob(
        &self,
        mut app: MutexGuard<'_, Appender>,
        key: &[u8],
        value: &StoredValue<'_>,
    ) -> Result<()> {
        if let Some(f) = self.progress.lock().failure {
            return Err(f.to_error());
        }
        let (seq, id, spare, new_ids) = {
            let seq = app.next_seq;
            app.next_seq += 1;
            let spare = self.lock_spare_blobs().pop();
            let (id, new_ids) = match &spare {
                Some((id, _)) => (*id, 0..0),
                None => {
                    // One creator of spares at a time; under a burst of large puts the others
                    // create just their own file (their directory fsyncs share a journal commit).
                    let count = if self.creating_blobs.swap(true, Ordering::AcqRel) {
                        1
                    } else {
                        BLOB_FILES_PER_CREATE
                    };
                    let ids = app.next_segment..app.next_segment + count;
                    app.next_segment = ids.end;
                    (ids.start, ids)
                }
            };
            let entry = IndexEntry {
                segment: id,
                offset: segment::BLOB_RECORD_OFFSET,
                value_len: value.value_len,
                stored_len: value.stored_len(),
                seq,
                key_len: key.len() as u32,
                flags: value.flags(),
            };
            self.pending.push(seq, key, Some(entry), true);
            drop(app);
            (seq, id, spare, new_ids)
        };
        let file = match spare {
            Some((_, file)) => Ok(file),
            // None spare: create a few, with one directory fsync, and keep the others.
            None => {
                let spares = new_ids.end - new_ids.start > 1;
                let created = segment::create_blob_files(&self.dir, new_ids, &self.profile);
                if spares {
                    self.creating_blobs.store(false, Ordering::Release);
                }
                created.map(|mut f| {
                    let mine = f.remove(0).1;
                    self.lock_spare_blobs().extend(f);
                    mine
                })
            }
        };
        let blob = segment::BlobValue {
            stored: &value.bytes,
            value_len: value.value_len,
            flags: value.flags(),
        };
        let written = file.and_then(|file| {
            segment::write_blob(&self.dir, file, id, seq, key, blob, &self.profile)
        });
        match written {
            Ok(file) => {
                self.counters.user_bytes.fetch_add(
                    record_len(key.len() as u64, value.stored_len()),
                    Ordering::Relaxed,
                );
                self.segments
                    .write()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(
                        id,
                        SegmentHandle {
                            file: Arc::new(file),
                            kind: SegmentKind::Blob,
                            sealed_at: Some(0),
                            min_put_seq: seq,
                            tombstone_bytes: 0,
                            tombstones: 0,
                        },
                    );
                self.pending.ready_one(seq, &self.index);
                self.progress.notify();
                self.wait(seq, seq, false)
            }
            Err(e) => {
                // Its file may outlive the failure (removal is best effort and not made durable),
                // and a blob file whose record is whole is kept at open: until then, tombstones
                // older than this put must stay.
                self.abandoned_blob_seq.fetch_min(seq, Ordering::Relaxed);
                self.pending.abandon(seq, &self.index);
                self.progress.notify();
                Err(e)
            }
        }
    }

    fn lock_spare_blobs(&self) -> MutexGuard<'_, Vec<(u64, SegmentFile)>> {
        self.spare_blobs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes the blob files created ahead and not used.
    fn remove_spare_blobs(&self) -> Result<()> {
        let spares = std::mem::take(&mut *self.lock_spare_blobs());
        if spares.is_empty() {
            return Ok(());
        }
        for (id, file) in spares {
            drop(file);
            let path = segment::path(&self.dir, id, SegmentKind::Blob);
            file::remove_file(&self.profile, &path)?;
        }
        file::sync_dir(&self.profile, &self.dir)
    }

    /// Stops the background threads: the compactor (which leaves a compaction it is in the
    /// middle of unfinished, harmlessly) and the flush ticker.
    fn stop_ticker(&self) {
        for slot in [&self.compactor, &self.ticker] {
            let ticker = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let Some(t) = ticker {
                *t.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
                t.stop.1.notify_all();
                let _ = t.handle.join();
            }
        }
    }

    fn shut_down(&self) -> Result<()> {
        self.stop_ticker();
        let result = (|| {
            let last = {
                let mut app = self.lock_appender();
                if app.active.is_some() {
                    app.seal(self)?;
                }
                app.next_seq - 1
            };
            self.wait(last, last, true)
        })();
        self.lock_appender().wb.shut_down();
        self.join_flusher();
        result.and(self.remove_spare_blobs())
    }

    fn join_flusher(&self) {
        let handle = self
            .flusher
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    /// The index entry of `key` and the file it points into. A value moved by compaction between
    /// the index lookup and the file lookup is looked up again.
    fn locate(&self, key: &[u8]) -> Result<Option<Located>> {
        loop {
            let Some(entry) = self.index.get(key) else {
                return Ok(None);
            };
            if let Some(h) = self
                .segments
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .get(&entry.segment)
            {
                return Ok(Some(Located {
                    entry,
                    file: h.file.clone(),
                }));
            }
            if self.index.get(key) == Some(entry) {
                // Not moved: the index names a file the store does not have.
                return Err(Error::Corruption {
                    segment: entry.segment,
                    offset: entry.offset,
                    kind: crate::error::Corruption::InvalidField {
                        field: "index segment id",
                        value: entry.segment,
                    },
                });
            }
        }
    }

    /// Reads value bytes `[start, start + dst.len())` of `found`, verified; for a compressed
    /// value, decompresses the frames they are in, keeping what `cache` allows across reads.
    fn read_value(
        &self,
        found: &Located,
        start: u64,
        dst: &mut [u8],
        cache: Option<&mut FrameCache>,
    ) -> Result<()> {
        let entry = &found.entry;
        let read_stored = |off: u64, buf: &mut [u8]| {
            segment::read_value(entry, off, buf, |o, b| self.fetch(found, o, b))
        };
        if !entry.is_compressed() {
            return read_stored(start, dst);
        }
        let mut one_off = FrameCache::default();
        let cache = cache.unwrap_or(&mut one_off);
        let known = cache.has_table() || self.frame_tables.seed(entry, cache);
        let result = compress::read_framed(entry, start, dst, cache, read_stored);
        if !known && result.is_ok() {
            self.frame_tables.remember(entry, cache);
        }
        result
    }

    /// Reads bytes `[offset, offset + dst.len())` of the segment of `found` from wherever they
    /// are: the write buffers (copied under the tail lock, which is never held across I/O) or
    /// the file.
    fn fetch(&self, found: &Located, offset: u64, dst: &mut [u8]) -> Result<()> {
        let segment = found.entry.segment;
        let mut done = 0;
        while done < dst.len() {
            let at = offset + done as u64;
            let in_buffers = self
                .tail
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .copy_out(segment, at, &mut dst[done..]);
            match in_buffers {
                Ok(n) => done += n,
                Err(next) => {
                    let upto = (next - offset) as usize;
                    found
                        .file
                        .read_exact_at(
                            at,
                            &mut dst[done..upto],
                            &self.read_pool,
                            self.profile.read_align,
                        )
                        .map_err(|e| segment::read_error(segment, at, found.file.path(), e))?;
                    done = upto;
                }
            }
        }
        Ok(())
    }
}

/// Whether a key has a value, counting writes not yet applied to the index.
enum Presence {
    /// No value, or a delete on its way.
    Absent,
    /// A value in the index and nothing on its way.
    Present,
    /// A put on its way, with this sequence number.
    Pending(u64),
}

/// An index entry and the file it points into, held open for the read.
struct Located {
    entry: IndexEntry,
    file: Arc<SegmentFile>,
}

impl Appender {
    /// Appends `ops` as one group of records: a lone record, or an atomic batch whose records
    /// all but the last carry [`FLAG_BATCH_CONTINUES`]. Queues their index updates (made ready
    /// at once for buffered writes) and closes the group commit if it reached its caps.
    /// Returns the first and last sequence numbers used.
    fn append_ops(
        &mut self,
        inner: &Inner,
        ops: &[Op<'_>],
        durability: Durability,
    ) -> Result<(u64, u64)> {
        // A poisoned store takes no more writes, buffered ones included, until it is reopened.
        if let Some(e) = self.wb.failure() {
            return Err(e);
        }
        let total: u64 = ops
            .iter()
            .map(|(k, v)| record_header(k, *v, 0, 0, 0).encoded_len())
            .sum();
        // A batch never spans segments: recovery must see all of it in one scan.
        self.make_room(inner, total)?;
        let first = self.next_seq;
        for (i, (key, value)) in ops.iter().enumerate() {
            let flags = if i + 1 < ops.len() {
                FLAG_BATCH_CONTINUES
            } else {
                0
            };
            let (seq, entry) = self.append(key, *value, flags, None)?;
            inner.pending.push(seq, key, value.map(|_| entry), false);
        }
        let last = self.next_seq - 1;
        inner
            .counters
            .user_bytes
            .fetch_add(total, Ordering::Relaxed);
        self.group_bytes += total;
        self.group_records += ops.len();
        if durability == Durability::Buffered {
            // Visible at once: the caller's next read must see it. Earlier queued log writes
            // become visible with it, so that per key the log order holds.
            inner.pending.ready_through(last, &inner.index);
        }
        if self.group_bytes >= inner.opts.max_group_bytes
            || self.group_records >= inner.opts.max_group_records
        {
            self.submit_group()?;
        }
        Ok((first, last))
    }

    /// Hands the group being formed to the flush thread with an fdatasync.
    fn submit_group(&mut self) -> Result<()> {
        self.group_bytes = 0;
        self.group_records = 0;
        self.wb.submit(true, self.next_seq - 1)
    }

    /// Appends one record to the active segment; returns its sequence number and location.
    /// The record takes the next sequence number, or `copy_of`, the one of the record it is a
    /// copy of (compaction).
    fn append(
        &mut self,
        key: &[u8],
        value: Option<&StoredValue<'_>>,
        flags: u16,
        copy_of: Option<u64>,
    ) -> Result<(u64, IndexEntry)> {
        let active = self.active.as_mut().expect("make_room opened a segment");
        let segment = active.id;
        let seq = copy_of.unwrap_or(self.next_seq);
        let header = record_header(key, value, flags, self.wb.take_pad(), seq);
        let flags = header.flags;
        let value_len = value.map_or(0, |v| v.value_len);
        let place = RecordPlace {
            segment,
            offset: self.wb.position(),
        };
        let stored: &[u8] = value.map_or(&[], |v| &v.bytes);
        let entry = write_record(&mut self.wb, place, &header, key, stored, value_len)?;
        if copy_of.is_none() {
            self.next_seq += 1;
        }
        let active = self.active.as_mut().expect("open");
        active.data_end = self.wb.position();
        if value.is_some() {
            active.min_put_seq = active.min_put_seq.min(seq);
        } else {
            active.tombstone_bytes += header.encoded_len();
            active.tombstones += 1;
        }
        active.records.push(entry);
        Ok((
            seq,
            IndexEntry {
                segment,
                offset: place.offset,
                value_len,
                stored_len: header.value_len,
                seq,
                key_len: header.key_len,
                flags,
            },
        ))
    }

    /// Seals the active segment if `len` more bytes would take it past the segment size, and
    /// opens a new one if none is active.
    fn make_room(&mut self, inner: &Inner, len: u64) -> Result<()> {
        if let Some(active) = &self.active
            && !active.records.is_empty()
            && self.wb.position() + len > inner.opts.segment_size
        {
            self.seal(inner)?;
        }
        if self.active.is_none() {
            let id = self.next_segment;
            // The id is spent whatever happens next: a later attempt must not meet this file.
            self.next_segment += 1;
            let path = segment::path(&inner.dir, id, SegmentKind::Log);
            let file = Arc::new(SegmentFile::create(&path, &inner.profile)?);
            // The new name must be durable before any record in the file is acknowledged. A
            // failed directory fsync poisons the store, like a failed fdatasync: whether the
            // directory's pending changes survive it is unknown. (The empty file left behind is
            // removed at the next open.)
            if let Err(e) = file::sync_dir(&inner.profile, &inner.dir) {
                inner.progress.poison(&e);
                return Err(e);
            }
            inner
                .segments
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(
                    id,
                    SegmentHandle {
                        file: file.clone(),
                        kind: SegmentKind::Log,
                        sealed_at: None,
                        min_put_seq: u64::MAX,
                        tombstone_bytes: 0,
                        tombstones: 0,
                    },
                );
            self.wb.start_segment(id, file);
            let header = SegmentHeader {
                segment: id,
                block_size: inner.profile.block_size,
            };
            self.wb.append(&header.encode())?;
            self.active = Some(ActiveSegment {
                id,
                min_put_seq: u64::MAX,
                tombstone_bytes: 0,
                tombstones: 0,
                data_end: self.wb.position(),
                records: Vec::new(),
            });
        }
        Ok(())
    }

    /// Appends the footer of the active segment and submits it with an fdatasync.
    fn seal(&mut self, inner: &Inner) -> Result<()> {
        // Records first, with a sync of their own: the blocks of one write reach the disk in
        // any order, so a footer written together with unsynced records could survive a crash
        // that they do not, and name them as sealed. The footer then starts at the next block,
        // on a block of its own: one lost block cannot take both the last records and the start
        // of the footer table.
        self.wb.submit(true, self.next_seq - 1)?;
        let active = self.active.take().expect("an active segment");
        let (id, min_put_seq) = (active.id, active.min_put_seq);
        let (tombstone_bytes, tombstones) = (active.tombstone_bytes, active.tombstones);
        debug_assert_eq!(self.wb.position() % self.wb.block_size(), 0);
        let table_offset = self.wb.position();
        let entries = segment::last_per_key(active.records);
        let footer = encode_footer(
            active.id,
            active.data_end,
            table_offset,
            self.wb.block_size() as u32,
            &entries,
        );
        self.wb.append(&footer)?;
        self.group_bytes = 0;
        self.group_records = 0;
        self.wb.submit_seal(self.next_seq - 1)?;
        let ticket = self.wb.sync_ticket();
        if let Some(h) = inner
            .segments
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&id)
        {
            h.sealed_at = Some(ticket);
            h.min_put_seq = min_put_seq;
            h.tombstone_bytes = tombstone_bytes;
            h.tombstones = tombstones;
        }
        Ok(())
    }
}

/// The header of the record of `key` and `value` (`None`: a tombstone); `flags` gets
/// [`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED) for a compressed value.
fn record_header(
    key: &[u8],
    value: Option<&StoredValue<'_>>,
    flags: u16,
    pad_before: u16,
    seq: u64,
) -> RecordHeader {
    RecordHeader {
        pad_before,
        kind: if value.is_some() {
            RecordKind::Put
        } else {
            RecordKind::Tombstone
        },
        flags: flags | value.map_or(0, |v| v.flags()),
        key_len: key.len() as u32,
        value_len: value.map_or(0, |v| v.stored_len()),
        seq,
    }
}

/// Streams a value with positional reads. Returned by [`Store::reader`].
///
/// Every read verifies the checksums of the 4 KiB chunks it touches; damaged bytes give an
/// `io::Error` of kind `InvalidData` wrapping [`Error::Corruption`].
///
/// For a compressed value, every read decompresses the frames it touches; the reader keeps the
/// last frame it decompressed (and the frame table entries it read), so a stream of small
/// `read` calls reads and decompresses each frame once.
pub struct ValueReader {
    inner: Arc<Inner>,
    found: Located,
    pos: u64,
    cache: FrameCache,
}

impl ValueReader {
    /// The value's length.
    pub fn len(&self) -> u64 {
        self.found.entry.value_len
    }

    /// True for an empty value.
    pub fn is_empty(&self) -> bool {
        self.found.entry.value_len == 0
    }

    /// Reads exactly `buf.len()` bytes at `offset` of the value, without moving the cursor.
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let inside = offset
            .checked_add(buf.len() as u64)
            .is_some_and(|end| end <= self.found.entry.value_len);
        if !inside {
            return Err(Error::OutOfRange {
                start: offset,
                end: offset.saturating_add(buf.len() as u64),
                len: self.found.entry.value_len,
            });
        }
        self.inner.read_value(&self.found, offset, buf, None)
    }
}

impl std::fmt::Debug for ValueReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueReader")
            .field("len", &self.found.entry.value_len)
            .field("pos", &self.pos)
            .finish()
    }
}

impl Read for ValueReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.found.entry.value_len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        // A compressed value is never empty, except for a damaged one whose length could not be
        // recovered: read its frame table so that the damage is reported, not an empty value.
        if n == 0 && !(self.found.entry.is_compressed() && self.found.entry.value_len == 0) {
            return Ok(0);
        }
        self.inner
            .read_value(&self.found, self.pos, &mut buf[..n], Some(&mut self.cache))
            .map_err(|e| match e {
                Error::Io { source, .. } => source,
                other => io::Error::new(io::ErrorKind::InvalidData, other),
            })?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ValueReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let target = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.found.entry.value_len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match target {
            Some(p) => {
                self.pos = p;
                Ok(p)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing position",
            )),
        }
    }
}

/// Iterator over live keys. Returned by [`Store::keys`].
pub struct Keys {
    inner: Arc<Inner>,
    next_shard: usize,
    current: std::vec::IntoIter<Vec<u8>>,
}

impl Iterator for Keys {
    type Item = Vec<u8>;
    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(k) = self.current.next() {
                return Some(k);
            }
            if self.next_shard == self.inner.index.shard_count() {
                return None;
            }
            self.current = self.inner.index.shard_keys(self.next_shard).into_iter();
            self.next_shard += 1;
        }
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").finish_non_exhaustive()
    }
}
