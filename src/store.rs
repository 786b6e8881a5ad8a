//! The public API: [`Store`], [`ValueReader`], [`Keys`].

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::format::CHUNK_SIZE;
use crate::format::footer::{FooterEntry, encode_footer};
use crate::format::record::{RecordHeader, RecordKind, RecordPlace, chunk_crc};
use crate::format::segment_header::SegmentHeader;
use crate::index::{Index, IndexEntry, PendingQueue};
use crate::io::aligned::BufPool;
use crate::io::file::{self, DirLock, IoProfile, SegmentFile};
use crate::io::writer::{self, Progress, WriteBuffer};
use crate::options::{Durability, IoMode, Options};
use crate::segment::{self, Opened};
use crate::{MAX_KEY_LEN, MAX_VALUE_LEN};

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
    segments: RwLock<HashMap<u64, Arc<SegmentFile>>>,
    appender: Mutex<Appender>,
    progress: Arc<Progress>,
    read_pool: BufPool,
    flusher: Mutex<Option<JoinHandle<()>>>,
    recovery: RecoveryReport,
}

/// State behind the append lock: the buffer being filled and the segment it belongs to.
struct Appender {
    wb: WriteBuffer,
    active: Option<ActiveSegment>,
    next_segment: u64,
    next_seq: u64,
}

struct ActiveSegment {
    id: u64,
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
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io("create store directory", Some(dir.clone()), e))?;
        let lock = DirLock::acquire(&dir)?;
        let profile = file::probe(&dir, opts.io_mode)?;
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
        let ids = segment::list(&dir)?;
        for (i, &id) in ids.iter().enumerate() {
            let newest = i + 1 == ids.len();
            let Some(loaded) = segment::open(&dir, id, &profile, &read_pool, newest)? else {
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
            for e in &loaded.entries {
                max_seq = max_seq.max(e.seq);
                match segment::index_entry(id, e) {
                    Some(entry) => index.insert(&e.key, entry),
                    None => {
                        index.remove(&e.key);
                    }
                }
            }
            segments.insert(id, Arc::new(loaded.file));
        }
        let next_segment = ids.last().map_or(1, |id| id + 1);

        let progress = Arc::new(Progress::new(next_segment, max_seq));
        let pending = Arc::new(PendingQueue::default());
        let (wb, flusher) = {
            let pending = pending.clone();
            let index = index.clone();
            writer::start(
                opts.write_buffer_size,
                profile.mem_align,
                profile.block_size as u64,
                progress.clone(),
                Box::new(move |seq| pending.publish_through(seq, &index)),
            )?
        };
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
            }),
            progress,
            read_pool,
            flusher: Mutex::new(Some(flusher)),
            recovery,
        };
        Ok(Store {
            inner: Arc::new(inner),
            closed: false,
            _lock: lock,
        })
    }

    /// Inserts or overwrites `key`.
    ///
    /// With [`Durability::Sync`] (the default) it returns once the value is on stable storage;
    /// concurrent calls share one write and one fdatasync. With [`Durability::Buffered`] it
    /// returns once the value is in the write buffer.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        if value.len() as u64 > MAX_VALUE_LEN {
            return Err(Error::ValueTooLarge {
                len: value.len() as u64,
                max: MAX_VALUE_LEN,
            });
        }
        let seq = {
            let mut app = self.inner.lock_appender();
            let (seq, entry) = app.append(&self.inner, RecordKind::Put, key, value)?;
            self.inner.enqueue(seq, key, Some(entry));
            seq
        };
        self.inner.acknowledge(seq)
    }

    /// Deletes `key`; returns whether it existed. Durable like [`Store::put`].
    pub fn delete(&self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        let seq = {
            let mut app = self.inner.lock_appender();
            let exists = self
                .inner
                .pending
                .pending_state(key)
                .unwrap_or_else(|| self.inner.index.get(key).is_some());
            if !exists {
                return Ok(false);
            }
            let (seq, _) = app.append(&self.inner, RecordKind::Tombstone, key, &[])?;
            self.inner.enqueue(seq, key, None);
            seq
        };
        self.inner.acknowledge(seq)?;
        Ok(true)
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        check_key(key)?;
        let Some(entry) = self.inner.index.get(key) else {
            return Ok(None);
        };
        let mut out = vec![0u8; to_usize(entry.value_len)?];
        self.inner.read_value(&entry, 0, &mut out)?;
        Ok(Some(out))
    }

    /// Bytes `range` of the value of `key`.
    ///
    /// Reads from disk only the 4 KiB chunks that hold the range (and their checksums), whatever
    /// the size of the value. A range that is not inside the value fails with
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
        let Some(entry) = self.inner.index.get(key) else {
            return Ok(None);
        };
        let (start, end) = resolve_range(&range, entry.value_len)?;
        let mut out = vec![0u8; to_usize(end - start)?];
        self.inner.read_value(&entry, start, &mut out)?;
        Ok(Some(out))
    }

    /// A reader that streams the value of `key` with positional reads, without loading it
    /// whole. It reads the value as it was when `reader` was called.
    pub fn reader(&self, key: &[u8]) -> Result<Option<ValueReader>> {
        check_key(key)?;
        Ok(self.inner.index.get(key).map(|entry| ValueReader {
            inner: self.inner.clone(),
            entry,
            pos: 0,
        }))
    }

    /// The length of the value of `key`.
    pub fn value_len(&self, key: &[u8]) -> Result<Option<u64>> {
        check_key(key)?;
        Ok(self.inner.index.get(key).map(|e| e.value_len))
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
        let seq = self.inner.lock_appender().next_seq - 1;
        self.inner.commit(seq)
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
    #[doc(hidden)]
    pub fn simulate_crash(mut self) {
        self.closed = true;
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

    /// Queues a write for the index (under the append lock, so in log order); a buffered write
    /// is published at once, with everything queued before it.
    fn enqueue(&self, seq: u64, key: &[u8], entry: Option<IndexEntry>) {
        self.pending.push(seq, key, entry);
        if self.opts.durability == Durability::Buffered {
            self.pending.publish_through(seq, &self.index);
        }
    }

    /// Returns when the write `seq` is acknowledged under the store's durability.
    fn acknowledge(&self, seq: u64) -> Result<()> {
        match self.opts.durability {
            Durability::Sync => self.commit(seq),
            Durability::Buffered => Ok(()),
        }
    }

    /// Waits until record `seq` is durable, leading a group commit when no write is in flight.
    ///
    /// Writers whose records arrive while a write and sync are in flight wait; when it
    /// finishes, the first to wake hands everything appended meanwhile to the flush thread as
    /// one write and one fdatasync. A lone writer finds nothing in flight and syncs at once.
    fn commit(&self, seq: u64) -> Result<()> {
        loop {
            {
                let mut st = self.progress.lock();
                loop {
                    if let Some(f) = st.failure {
                        return Err(f.to_error());
                    }
                    if st.durable_seq >= seq {
                        return Ok(());
                    }
                    if st.inflight == 0 {
                        break;
                    }
                    st = self.progress.wait(st);
                }
            }
            let mut app = self.lock_appender();
            {
                let st = self.progress.lock();
                if st.failure.is_some() || st.durable_seq >= seq || st.inflight > 0 {
                    continue;
                }
            }
            let through = app.next_seq - 1;
            app.wb.submit(true, through)?;
        }
    }

    fn shut_down(&self) -> Result<()> {
        let result = (|| {
            let seq = {
                let mut app = self.lock_appender();
                if app.active.is_some() {
                    app.seal()?;
                }
                app.next_seq - 1
            };
            self.commit(seq)
        })();
        self.lock_appender().wb.shut_down();
        self.join_flusher();
        result
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

    fn read_value(&self, entry: &IndexEntry, start: u64, dst: &mut [u8]) -> Result<()> {
        segment::read_value(entry, start, dst, |off, buf| {
            self.fetch(entry.segment, off, buf)
        })
    }

    /// Reads segment bytes `[offset, offset + dst.len())` from wherever they are: on disk, in
    /// the buffer being filled, or (briefly) in the buffer the flush thread is writing, in
    /// which case it waits for that write.
    fn fetch(&self, segment: u64, offset: u64, dst: &mut [u8]) -> Result<()> {
        let end = offset + dst.len() as u64;
        let mut pos = offset;
        while pos < end {
            let written_to = {
                let st = self.progress.lock();
                if Progress::is_written(&st, segment, end) {
                    end
                } else if segment == st.written_segment {
                    st.written_end.min(end)
                } else {
                    pos
                }
            };
            if written_to > pos {
                let at = (pos - offset) as usize;
                let to = (written_to - offset) as usize;
                self.read_disk(segment, pos, &mut dst[at..to])?;
                pos = written_to;
                continue;
            }
            let at = (pos - offset) as usize;
            if self
                .lock_appender()
                .wb
                .copy_out(segment, pos, &mut dst[at..])
            {
                return Ok(());
            }
            let mut st = self.progress.lock();
            while st.failure.is_none() && !Progress::is_written(&st, segment, pos + 1) {
                st = self.progress.wait(st);
            }
            if let Some(f) = st.failure {
                return Err(f.to_error());
            }
        }
        Ok(())
    }

    fn read_disk(&self, segment: u64, offset: u64, dst: &mut [u8]) -> Result<()> {
        let file = self
            .segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&segment)
            .cloned()
            .ok_or(Error::Corruption {
                segment,
                offset,
                kind: crate::error::Corruption::InvalidField {
                    field: "index segment id",
                    value: segment,
                },
            })?;
        file.read_exact_at(offset, dst, &self.read_pool, self.profile.read_align)
            .map_err(|e| segment::map_read_error(segment, offset, file.path(), e))
    }
}

impl Appender {
    /// Appends one record; returns its sequence number and where it is.
    fn append(
        &mut self,
        inner: &Inner,
        kind: RecordKind,
        key: &[u8],
        value: &[u8],
    ) -> Result<(u64, IndexEntry)> {
        let header = RecordHeader {
            kind,
            flags: 0,
            key_len: key.len() as u32,
            value_len: value.len() as u64,
            seq: self.next_seq,
        };
        self.make_room(inner, header.encoded_len())?;
        let segment = self.active.as_ref().expect("make_room opened one").id;
        let place = RecordPlace {
            segment,
            offset: self.wb.position(),
        };
        self.wb.append(&header.encode(place, key))?;
        self.wb.append(key)?;
        self.wb.append(value)?;
        let mut table = [0u8; 1024];
        let mut n = 0;
        for (i, chunk) in value.chunks(CHUNK_SIZE as usize).enumerate() {
            table[n..n + 4].copy_from_slice(&chunk_crc(place, i as u64, chunk).to_le_bytes());
            n += 4;
            if n == table.len() {
                self.wb.append(&table)?;
                n = 0;
            }
        }
        self.wb.append(&table[..n])?;
        let seq = self.next_seq;
        self.next_seq += 1;
        let active = self.active.as_mut().expect("open");
        active.data_end = self.wb.position();
        active.records.push(FooterEntry {
            key: key.to_vec(),
            kind,
            flags: 0,
            offset: place.offset,
            value_len: header.value_len,
            seq,
        });
        Ok((
            seq,
            IndexEntry {
                segment,
                offset: place.offset,
                value_len: header.value_len,
                seq,
                key_len: header.key_len,
                flags: 0,
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
            self.seal()?;
        }
        if self.active.is_none() {
            let id = self.next_segment;
            let path = segment::path(&inner.dir, id);
            let file = Arc::new(SegmentFile::create(&path, inner.profile.direct)?);
            // The new name must be durable before any record in the file is acknowledged.
            file::sync_dir(&inner.dir)?;
            self.next_segment += 1;
            inner
                .segments
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(id, file.clone());
            self.wb.start_segment(id, file);
            let header = SegmentHeader {
                segment: id,
                block_size: inner.profile.block_size,
            };
            self.wb.append(&header.encode())?;
            self.active = Some(ActiveSegment {
                id,
                data_end: self.wb.position(),
                records: Vec::new(),
            });
        }
        Ok(())
    }

    /// Appends the footer of the active segment and submits it with an fdatasync.
    fn seal(&mut self) -> Result<()> {
        let active = self.active.take().expect("an active segment");
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
        self.wb.submit(true, self.next_seq - 1)
    }
}

/// Streams a value with positional reads. Returned by [`Store::reader`].
///
/// Every read verifies the checksums of the 4 KiB chunks it touches; damaged bytes give an
/// `io::Error` of kind `InvalidData` wrapping [`Error::Corruption`].
pub struct ValueReader {
    inner: Arc<Inner>,
    entry: IndexEntry,
    pos: u64,
}

impl ValueReader {
    /// The value's length.
    pub fn len(&self) -> u64 {
        self.entry.value_len
    }

    /// True for an empty value.
    pub fn is_empty(&self) -> bool {
        self.entry.value_len == 0
    }

    /// Reads exactly `buf.len()` bytes at `offset` of the value, without moving the cursor.
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .filter(|&e| e <= self.entry.value_len)
            .ok_or(Error::OutOfRange {
                start: offset,
                end: offset.saturating_add(buf.len() as u64),
                len: self.entry.value_len,
            })?;
        debug_assert!(end >= offset);
        self.inner.read_value(&self.entry, offset, buf)
    }
}

impl std::fmt::Debug for ValueReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueReader")
            .field("len", &self.entry.value_len)
            .field("pos", &self.pos)
            .finish()
    }
}

impl Read for ValueReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.entry.value_len.saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.inner
            .read_value(&self.entry, self.pos, &mut buf[..n])
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
            SeekFrom::End(d) => self.entry.value_len.checked_add_signed(d),
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
