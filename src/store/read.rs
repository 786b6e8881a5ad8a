//! The read path: from a key to its index entry and the file it points into ([`Reader::locate`]),
//! then to verified value bytes, from the read cache (`cache.rs`), the write buffers or the file
//! ([`Reader::read_value`]); `value_reader.rs` streams a value through it.

use std::sync::Arc;

use bytes::Bytes;

use super::append::Log;
use super::cache::{CRC_SECTOR, Cache, CacheFigures, Cached, Key, Part};
use super::compress::{self, CachedTable, FrameCache};
use super::segments::SegmentTable;
use super::shared::Shared;
use crate::error::{Corruption, Error, Result};
use crate::format::CHUNK_SIZE;
use crate::format::record::{RECORD_HEADER_LEN, RecordHeader, RecordKind, RecordPlace, head_len};
use crate::index::{HotTable, Index, IndexEntry};
use crate::io::aligned::BufPool;
use crate::io::file::SegmentFile;
use crate::range::{self, ValueRange};
use crate::segment;

mod ahead;
mod fetch;
mod kept;
mod pattern;
mod peek;
mod pieces;
mod seen;

pub(super) use kept::kept_weight;
pub(super) use kept::{KEPT_ON_WRITE, KEY_AT, cached_key_len, cached_seq};
use kept::{cached_whole, kept, kept_head};
pub(in crate::store) use seen::Look;

/// Size of the bounce buffers used by direct reads.
const READ_BUFFER_SIZE: usize = 1 << 20;

/// The bounce buffers of direct reads, for buffers aligned to `mem_align`.
pub(super) fn new_pool(mem_align: usize) -> BufPool {
    BufPool::new(READ_BUFFER_SIZE, mem_align)
}

/// Reads of values: what they need of the store, and the buffers and caches they share.
pub(super) struct Reader {
    index: Arc<Index>,
    segments: Arc<SegmentTable>,
    log: Arc<Log>,
    pool: BufPool,
    read_align: u64,
    /// Small values whole, chunk crc sectors and frame tables of values read before.
    cache: Cache,
    /// Where the last read of each large value ended: whether a read fetches around itself.
    patterns: pattern::Patterns,
    /// The memory available when the cache was sized from it (`None`: set by the options).
    available: Option<u64>,
    /// The clock expiries are judged by: an entry expired by it is not found.
    clock: crate::expiry::Clock,
}

/// A value's record sequence number (its version) and its expiry, if it has one.
pub(super) type Stamp = (u64, Option<u64>);

/// The read cache's capacity, and the memory available it was sized from (`None`: set by
/// [`Options::cache_capacity`](crate::Options::cache_capacity)).
#[derive(Debug, Clone, Copy)]
pub(super) struct CacheBudget {
    pub(super) capacity: u64,
    pub(super) available: Option<u64>,
}

/// What [`Reader::lookup`] found: a value in the cache (with its record's sequence number and
/// expiry), or where to read it.
enum Lookup {
    Cached(Stamp, Bytes),
    Located(Located),
}

/// An index entry and the file it points into, held open for the read.
#[derive(Clone)]
pub(super) struct Located {
    pub(super) entry: IndexEntry,
    /// The record's sequence number: the value's version and time ([`crate::ValueMeta`]).
    pub(super) seq: u64,
    pub(super) file: Arc<SegmentFile>,
    /// The whole record, when the read that checked its key fetched it (a small one, or any
    /// record up to [`WHOLE_GET_READ`] for a read of the whole value).
    prefetched: Option<Bytes>,
    /// The whole value, when the cache held it as the key was checked.
    whole: Option<Bytes>,
    /// File bytes read together with the record's header before its key was checked (a range
    /// read, `read/ahead.rs`), each with its file offset; served by [`Reader::fetch`].
    ahead: Vec<(u64, Bytes)>,
}

impl Located {
    /// The record `entry` names, numbered `seq`, in `file`.
    pub(super) fn new(entry: IndexEntry, seq: u64, file: Arc<SegmentFile>) -> Located {
        Located {
            entry,
            seq,
            file,
            prefetched: None,
            whole: None,
            ahead: Vec::new(),
        }
    }

    /// The same, with the record's bytes read already (`record`: the whole record, from its
    /// first byte): they are verified where they are when the value is read.
    pub(super) fn with_record(mut self, record: Bytes) -> Located {
        debug_assert_eq!(record.len() as u64, self.entry.record_len());
        self.prefetched = Some(record);
        self
    }

    /// `e`, from a read of the record, as the store reports it: damage said to be in a file of
    /// its file's kind (the layers below do not know it), and damage found in bytes the remote
    /// served (a file whose data is in the remote only) as [`Error::RemoteCorruption`] naming
    /// the object ([`SegmentFile::remote_error`]). The one place the read path maps its errors
    /// to a file: gets, ranges, streams and compaction's copies all return through it.
    fn file_error(&self, e: Error) -> Error {
        let e = e.in_file(segment::kind_of(self.file.path()));
        self.file.remote_error(self.entry.segment, e)
    }
}

/// Whether an index entry is the key looked up.
enum Identity {
    /// It is: the record, and the value if the cache holds it whole.
    Mine {
        found: Located,
        cached: Option<Bytes>,
    },
    /// It is another key's (sharing the fingerprint).
    Other,
    /// Its file is gone (moved by compaction since the lookup).
    Gone,
}

/// Records up to this length are read whole when their key is checked: one read fetches the
/// key and the value (a cold get of a small value is one disk read).
const WHOLE_RECORD_READ: u64 = 64 << 10;

/// When the whole value is wanted (`get`, `get_into`, `get_bytes`), records up to this length
/// are read whole when their key is checked: one device round trip for the header, the key, the
/// value and its chunk crcs, where reading the header and key first, then the value (in steps
/// of the bounce buffers) took two or three (a cold 100 KiB get: 45 µs for the 512-byte header
/// read, then 114 µs for the value). Above it, the record's header and key are read first, and
/// the value in steps: the buffer is not doubled for a very large value.
const WHOLE_GET_READ: u64 = 8 << 20;

impl Reader {
    /// The read path of a store whose direct reads go through `pool` (see [`new_pool`]).
    pub(super) fn new(
        shared: &Shared,
        log: Arc<Log>,
        pool: BufPool,
        budget: CacheBudget,
    ) -> Reader {
        // The table of hot values takes its share of the budget (none in a small cache); the
        // cache keeps the rest.
        let table = HotTable::for_cache(budget.capacity);
        let hot = table.as_ref().map_or(0, HotTable::budget);
        if let Some(table) = table {
            shared.index.keep_hot_values(table);
        }
        Reader {
            index: shared.index.clone(),
            segments: shared.segments.clone(),
            log,
            pool,
            read_align: shared.profile.read_align,
            cache: Cache::new(budget.capacity - hot),
            patterns: pattern::Patterns::new(),
            available: budget.available,
            clock: shared.clock.clone(),
        }
    }

    /// What the read cache (with the table of hot values) did since open, its capacity and
    /// what it was sized from.
    pub(super) fn cache_figures(&self) -> CacheFigures {
        let cache = self.cache.figures();
        let (hot_hits, hot_bytes, hot_budget) = self
            .index
            .hot()
            .map_or((0, 0, 0), |h| (h.hits(), h.held(), h.budget()));
        CacheFigures {
            available: self.available,
            hits: cache.hits + hot_hits,
            bytes: cache.bytes + hot_bytes,
            capacity: cache.capacity + hot_budget,
            ..cache
        }
    }

    /// Whether a value of `entry`'s, read whole, would be kept by the cache.
    pub(super) fn keeps_whole(&self, entry: &IndexEntry) -> bool {
        self.cache.holds_whole(entry) && !entry.is_compressed()
    }

    /// Keeps `value`, verified, as the whole value of `key`'s record `entry` numbered `seq`
    /// (one [`Reader::keeps_whole`] said yes to): a value a second chance appended again, read
    /// since it was written, so likely to be read again, from where it is now.
    pub(super) fn keep_whole(&self, entry: &IndexEntry, seq: u64, key: &[u8], value: &[u8]) {
        let bytes = Bytes::from(kept(seq, key, value));
        self.cache
            .insert(Key::of(entry, Part::Value), Cached::Bytes(bytes));
    }

    /// The bounce buffers of direct reads (open and `verify` read through them too).
    pub(super) fn pool(&self) -> &BufPool {
        &self.pool
    }

    /// The read cache (listings keep footer blocks in it).
    pub(super) fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Now by the store's clock (milliseconds since the Unix epoch).
    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// `found` if its value has not expired: an expired value is absent to every read, and
    /// since it is its key's newest entry, the key has no value.
    fn unexpired(&self, found: Located) -> Option<Located> {
        (!found.entry.expired(|| self.now_ms())).then_some(found)
    }

    /// The index entry of `key` and the file it points into, reading no more of its record
    /// than the header and key (nothing if the cache has them, or the value whole): what
    /// [`Store::metadata`](crate::Store::metadata) needs.
    pub(super) fn locate_head(&self, key: &[u8]) -> Result<Option<Located>> {
        Ok(self.find_in_reading(key, true, 0)?.map(|(found, _)| found))
    }

    /// The index entry of `key` and the file it points into.
    pub(super) fn locate(&self, key: &[u8]) -> Result<Option<Located>> {
        Ok(self.find(key)?.map(|(mut found, whole)| {
            found.whole = whole;
            found
        }))
    }

    /// The live record of `key` and, if the cache holds its value whole, the value.
    fn find(&self, key: &[u8]) -> Result<Option<(Located, Option<Bytes>)>> {
        self.find_in(key, true)
    }

    /// [`Reader::find`]; `whole` false when the caller already looked for whole values in the
    /// cache (so that a miss is counted once).
    fn find_in(&self, key: &[u8], whole: bool) -> Result<Option<(Located, Option<Bytes>)>> {
        self.find_in_reading(key, whole, WHOLE_RECORD_READ)
    }

    /// [`Reader::find_in`], reading records of up to `whole_read` bytes whole as their key is
    /// checked.
    fn find_in_reading(
        &self,
        key: &[u8],
        whole: bool,
        whole_read: u64,
    ) -> Result<Option<(Located, Option<Bytes>)>> {
        let hash = self.index.hash(key);
        let mut last = None;
        loop {
            let candidates = self.index.candidates(hash, key.len() as u32);
            // In a run with no unresolved entry, an expired entry is nobody's value, whoever's
            // record it is: a key's older versions are only ever behind an unresolved entry, so
            // passing over it cannot reveal one. No read: a cache missing what expired asks for
            // it again without touching the disk.
            let pass_expired = !candidates.unresolved();
            let mut gone = false;
            for c in candidates.as_slice() {
                if pass_expired && c.expired(|| self.now_ms()) {
                    continue;
                }
                match self.identify_reading(key, *c, whole, whole_read, Vec::new())? {
                    Identity::Mine { found, cached } => {
                        return Ok(self.unexpired(found).map(|f| (f, cached)));
                    }
                    Identity::Other => {}
                    Identity::Gone => gone = true,
                }
            }
            if !gone {
                return Ok(None);
            }
            // A value moved by compaction between the index lookup and the file lookup: look
            // again.
            self.check_not_stuck(&mut last, candidates.places())?;
        }
    }

    /// Fails when an index lookup that found an entry naming a missing file finds the same
    /// entries as the last one: not a compaction move, the index names a file the store does
    /// not have.
    fn check_not_stuck(
        &self,
        last: &mut Option<Vec<(u64, u64)>>,
        places: Vec<(u64, u64)>,
    ) -> Result<()> {
        if last.as_ref() == Some(&places) {
            let (segment, offset) = places
                .iter()
                .copied()
                .find(|(s, _)| self.segments.file(*s).is_none())
                .unwrap_or_default();
            return Err(Error::Corruption {
                file: crate::error::FileKind::Log,
                segment,
                offset,
                kind: Corruption::InvalidField {
                    field: "index segment id",
                    value: segment,
                },
            });
        }
        *last = Some(places);
        Ok(())
    }

    /// Whether `entry` (an entry with the fingerprint of `key`) is `key`'s: from the cache (a
    /// whole value kept with its key, or the key of a large value read before), else from its
    /// record. A record of at most [`WHOLE_RECORD_READ`] bytes is read whole, so that the read
    /// which checks the key also fetches the value (kept in the [`Located`]).
    fn identify(&self, key: &[u8], entry: IndexEntry, whole_cached: bool) -> Result<Identity> {
        self.identify_reading(key, entry, whole_cached, WHOLE_RECORD_READ, Vec::new())
    }

    /// [`Reader::identify`], reading a record of up to `whole_read` bytes whole; `ahead`: file
    /// bytes already read (`read/ahead.rs`), which its reads take first.
    fn identify_reading(
        &self,
        key: &[u8],
        entry: IndexEntry,
        whole_cached: bool,
        whole_read: u64,
        ahead: Vec<(u64, Bytes)>,
    ) -> Result<Identity> {
        let Some(file) = self.segments.file(entry.segment) else {
            return Ok(Identity::Gone);
        };
        if whole_cached
            && self.cache.holds_whole(&entry)
            && let Some(identity) = self.by_cached_value(key, entry, &file)
        {
            return Ok(identity);
        }
        let whole = entry.record_len() <= whole_read;
        // A large value read whole (a get) whose first piece the cache holds: its key is
        // checked from the cache and its value copied from the pieces (the value's read fetches
        // any that are missing), rather than the whole record read here.
        let large = entry.record_len() > WHOLE_RECORD_READ && self.cache.holds_pieces(&entry);
        let pieces = large && self.cache.contains(&Key::of(&entry, Part::Piece(0)));
        if (!whole || pieces)
            && let Some(identity) = self.by_cached_key(key, entry, &file)
        {
            // A range read of a value read before: the bytes read ahead of the key check (its
            // crcs and chunks, `read/ahead.rs`) go with it.
            return Ok(match identity {
                Identity::Mine { mut found, cached } => {
                    found.ahead = ahead;
                    Identity::Mine { found, cached }
                }
                other => other,
            });
        }
        // The sequence number is set once the header is read.
        let mut found = Located::new(entry, 0, file);
        found.ahead = ahead;
        let head = (head_len(entry.flags) + key.len()) as u64;
        let read = if whole { entry.record_len() } else { head } as usize;
        let mut buf = match self.fetch_owned(&found, entry.offset, read) {
            Ok(b) => b,
            Err(_) => {
                // Another key's record, shorter than this key's would be, at the end of the
                // data: read its header and key alone.
                let mut b = vec![0u8; RECORD_HEADER_LEN];
                self.fetch(&found, entry.offset, &mut b)
                    .map_err(|e| found.file_error(e))?;
                Bytes::from(b)
            }
        };
        // Another key's record may have the expiry field this one has not: its whole header.
        let whole_head = head_len(u16::from_le_bytes([buf[6], buf[7]]));
        if buf.len() < whole_head {
            let mut b = vec![0u8; whole_head];
            self.fetch(&found, entry.offset, &mut b)
                .map_err(|e| found.file_error(e))?;
            buf = Bytes::from(b);
        }
        let file = found.file.clone();
        let corrupt = |at: u64, kind: Corruption| {
            file.remote_error(
                entry.segment,
                Error::Corruption {
                    file: segment::kind_of(file.path()),
                    segment: entry.segment,
                    offset: at,
                    kind,
                },
            )
        };
        let header = RecordHeader::decode(&buf).map_err(|k| corrupt(entry.offset, k))?;
        let key_at = header.key_offset() as usize;
        let key_end = key_at + header.key_len as usize;
        if buf.len() < key_end {
            let mut head = vec![0u8; key_end];
            self.fetch(&found, entry.offset, &mut head)
                .map_err(|e| found.file_error(e))?;
            buf = Bytes::from(head);
        }
        let place = RecordPlace {
            segment: entry.segment,
            offset: entry.offset,
        };
        RecordHeader::verify(&buf[..key_at], place, &buf[key_at..key_end])
            .map_err(|k| corrupt(entry.offset, k))?;
        if &buf[key_at..key_end] != key {
            return Ok(Identity::Other);
        }
        found.seq = header.seq;
        if header.kind != RecordKind::Put || header.value_len != entry.stored_len {
            return Err(corrupt(
                entry.offset,
                Corruption::InvalidField {
                    field: "record value length (the index's differs)",
                    value: header.value_len,
                },
            ));
        }
        let prefetched = whole && buf.len() as u64 == entry.record_len();
        if prefetched {
            found.prefetched = Some(buf);
        }
        if (!prefetched || large) && self.cache.is_on() {
            self.cache.insert(
                Key::of(&entry, Part::Key),
                Cached::Bytes(Bytes::from(kept(header.seq, key, &[]))),
            );
        }
        Ok(Identity::Mine {
            found,
            cached: None,
        })
    }

    /// The value of `key` if the cache holds it whole (then no file is read), else where it is.
    fn lookup(&self, key: &[u8]) -> Result<Option<Lookup>> {
        self.lookup_hashed(key, self.index.hash(key), true)
    }

    /// [`Reader::lookup`] of a key hashing to `hash`; `hot` false when the caller looked in the
    /// table of hot values already.
    fn lookup_hashed(&self, key: &[u8], hash: u64, hot: bool) -> Result<Option<Lookup>> {
        // The common warm case first: an entry whose whole value the cache holds with this key
        // (no file looked up, nothing read): `Reader::peek`, which stops where the records must
        // decide (a run with an unresolved entry the cache cannot tell).
        if let Some((stamp, value)) = self.peek_hashed(key, hash, hot) {
            return Ok(Some(Lookup::Cached(stamp, value)));
        }
        Ok(self
            .find_in_reading(key, false, WHOLE_GET_READ)?
            .map(|(found, cached)| match cached {
                Some(b) => Lookup::Cached((found.seq, found.entry.expires_at), b),
                None => Lookup::Located(found),
            }))
    }

    /// The whole value of `key` in `out` (cleared first; its allocation is reused), copied from
    /// the cache or read (and then kept, if small enough); whether `key` has a value.
    pub(super) fn get_into(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        Ok(self.get_into_numbered(key, out)?.is_some())
    }

    /// [`Reader::get_into`], returning the sequence number of the value's record and its
    /// expiry if `key` has a value.
    pub(super) fn get_into_numbered(&self, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Stamp>> {
        let hash = self.index.hash(key);
        // The table of hot values never holds a value that expires (`peek.rs`).
        if let Some(seq) = self.hot_into(key, hash, out) {
            return Ok(Some((seq, None)));
        }
        out.clear();
        let found = match self.lookup_hashed(key, hash, false)? {
            None => return Ok(None),
            Some(Lookup::Cached(stamp, b)) => {
                out.extend_from_slice(&b);
                return Ok(Some(stamp));
            }
            Some(Lookup::Located(found)) => found,
        };
        let len = to_usize(found.entry.value_len)?;
        let stamp = (found.seq, found.entry.expires_at);
        if self.append_pieces(&found, out) {
            return Ok(Some(stamp));
        }
        if out.capacity() < len {
            // A fresh zeroed allocation (the zeroes of a large one come from the kernel for
            // free) rather than growing `out`, which would copy and then zero it.
            *out = vec![0u8; len];
        } else {
            out.resize(len, 0);
        }
        self.read_uncached(&found, 0, out, None)?;
        if self.cache.holds_whole(&found.entry) {
            let bytes = Cached::Bytes(Bytes::from(kept(found.seq, key, out)));
            self.cache.insert(Key::of(&found.entry, Part::Value), bytes);
        }
        Ok(Some(stamp))
    }

    /// The whole value of `key` as shared bytes: the cache's own, or read (and then kept, if
    /// small enough, without a copy); with the sequence number of the record it came from.
    pub(super) fn get_shared(&self, key: &[u8]) -> Result<Option<(u64, Bytes)>> {
        let found = match self.lookup(key)? {
            None => return Ok(None),
            Some(Lookup::Cached((seq, _), b)) => return Ok(Some((seq, b))),
            Some(Lookup::Located(found)) => found,
        };
        let seq = found.seq;
        if !self.cache.holds_whole(&found.entry) {
            let mut out = Vec::new();
            if self.append_pieces(&found, &mut out) {
                return Ok(Some((seq, Bytes::from(out))));
            }
            let mut out = vec![0u8; to_usize(found.entry.value_len)?];
            self.read_uncached(&found, 0, &mut out, None)?;
            return Ok(Some((seq, Bytes::from(out))));
        }
        // Kept as sequence number, key length, key, then value, in one buffer; the caller gets
        // the value's part of it.
        let at = KEY_AT + key.len();
        let mut kept = vec![0u8; at + to_usize(found.entry.value_len)?];
        kept[..KEY_AT].copy_from_slice(&kept_head(found.seq, key.len()));
        kept[KEY_AT..at].copy_from_slice(key);
        self.read_uncached(&found, 0, &mut kept[at..], None)?;
        let bytes = Bytes::from(kept);
        self.cache.insert(
            Key::of(&found.entry, Part::Value),
            Cached::Bytes(bytes.clone()),
        );
        Ok(Some((seq, bytes.slice(at..))))
    }

    /// Whether a stream of reads of `found`'s value gains by reading ahead into a buffer of its
    /// own (`ValueReader`): not when the value was in memory whole when it was found (the
    /// cache's copy, or the record read whole), where every read is a copy already; nor when
    /// the cache keeps the value in pieces, where a stream's reads fetch whole pieces
    /// (`read/pieces.rs`) and the next reads copy from them: a buffer of its own would hold the
    /// same bytes twice. A value the cache would keep whole but does not hold is read ahead.
    pub(super) fn streams(&self, found: &Located) -> bool {
        found.whole.is_none()
            && found.prefetched.is_none()
            && !self.cache.holds_pieces(&found.entry)
    }

    /// Bytes `range` of the value of `found` (the value of `key`), by [`range::resolve`]'s
    /// rule.
    pub(super) fn read_range(
        &self,
        found: &Located,
        key: &[u8],
        range: &impl ValueRange,
    ) -> Result<Vec<u8>> {
        let (start, end) = range::resolve(range, found.entry.value_len, key)?;
        let mut out = vec![0u8; to_usize(end - start)?];
        self.read_value(found, start, &mut out, None)?;
        Ok(out)
    }

    /// Reads value bytes `[start, start + dst.len())` of `found`, verified: from the cache if it
    /// holds the value whole, else as [`Reader::read_uncached`] does.
    pub(super) fn read_value(
        &self,
        found: &Located,
        start: u64,
        dst: &mut [u8],
        frames: Option<&mut FrameCache>,
    ) -> Result<()> {
        if let Some(b) = &found.whole {
            let at = start as usize;
            dst.copy_from_slice(&b[at..at + dst.len()]);
            return Ok(());
        }
        if self.cache.holds_whole(&found.entry)
            && let Some(b) = self.cache.get_bytes(&Key::of(&found.entry, Part::Value))
        {
            // Kept as sequence number, key length, key, then value.
            let at = KEY_AT + found.entry.key_len as usize + start as usize;
            dst.copy_from_slice(&b[at..at + dst.len()]);
            return Ok(());
        }
        self.read_uncached(found, start, dst, frames)
    }

    /// Reads value bytes `[start, start + dst.len())` of `found` from the buffers or the file,
    /// verified (chunk crcs, from the cache if it has them); for a compressed value, decompresses
    /// the frames they are in, keeping what `frames` allows across reads, and the frame table
    /// in the cache.
    fn read_uncached(
        &self,
        found: &Located,
        start: u64,
        dst: &mut [u8],
        frames: Option<&mut FrameCache>,
    ) -> Result<()> {
        let entry = &found.entry;
        let read_stored = |off: u64, buf: &mut [u8]| self.read_stored_at(found, off, buf);
        if !entry.is_compressed() {
            return read_stored(start, dst).map_err(|e| found.file_error(e));
        }
        let mut one_off = FrameCache::default();
        let frames = frames.unwrap_or(&mut one_off);
        let key = Key::of(entry, Part::Frames);
        let known = frames.has_table()
            || match self.cache.get(&key) {
                Some(Cached::Frames(table)) => {
                    table.seed(frames);
                    true
                }
                _ => false,
            };
        let result = compress::read_framed(entry, start, dst, frames, read_stored);
        if !known
            && result.is_ok()
            && self.cache.is_on()
            && let Some(table) = CachedTable::of(frames)
        {
            self.cache.insert(key, Cached::Frames(Arc::new(table)));
        }
        result.map_err(|e| found.file_error(e))
    }

    /// Reads the stored bytes of `found`'s record, verified (compaction copies them as they
    /// are, compressed or not). Not through the cache's pieces: a copy is read once, and its
    /// pieces, keyed by the old place, would never be read again.
    pub(super) fn read_stored(&self, found: &Located, dst: &mut [u8]) -> Result<()> {
        self.read_stored_direct(found, 0, dst)
            .map_err(|e| found.file_error(e))
    }

    /// Stored bytes `[start, start + dst.len())` of `found`'s record, verified: through the
    /// cache's pieces for a value kept in pieces (`read/pieces.rs`), else from the buffers or
    /// the file.
    fn read_stored_at(&self, found: &Located, start: u64, dst: &mut [u8]) -> Result<()> {
        if self.cache.holds_pieces(&found.entry) {
            self.read_pieces(found, start, dst)
        } else {
            self.read_stored_direct(found, start, dst)
        }
    }

    /// Stored bytes `[start, start + dst.len())` of `found`'s record, verified, from the
    /// buffers or the file.
    ///
    /// A crc sector kept by the cache is not verified as a whole when it is read (each crc is
    /// checked against its chunk when used), so one damaged in transit could fail every later
    /// read of its chunks: a read that fails verification forgets the sectors it used and is
    /// tried once more with everything from the file, whose answer stands.
    fn read_stored_direct(&self, found: &Located, start: u64, dst: &mut [u8]) -> Result<()> {
        let span = found.entry.span();
        // The record read whole as its key was checked: verified where it is, one copy out.
        if let Some(record) = &found.prefetched
            && let Some(result) =
                segment::read_value_in(&span, start, dst, found.entry.offset, record)
        {
            return result;
        }
        let fetch = |o, b: &mut [u8]| self.fetch(found, o, b);
        let result =
            segment::read_value(&span, start, dst, fetch, |c, b| self.read_crcs(found, c, b));
        if !matches!(result, Err(Error::Corruption { .. })) || !self.cache.is_on() {
            return result;
        }
        let chunks = start / CHUNK_SIZE..(start + dst.len() as u64).div_ceil(CHUNK_SIZE);
        let sectors = span.crc_offset(chunks.start) / CRC_SECTOR
            ..span.crc_offset(chunks.end).div_ceil(CRC_SECTOR);
        for sector in sectors {
            self.cache
                .remove(&Key::of(&found.entry, Part::Crcs(sector)));
        }
        segment::read_value(&span, start, dst, fetch, |c, b| {
            self.fetch(found, span.crc_offset(c), b)
        })
    }
}

fn to_usize(n: u64) -> Result<usize> {
    usize::try_from(n).map_err(|_| Error::ValueTooLarge {
        len: n,
        max: usize::MAX as u64,
    })
}
