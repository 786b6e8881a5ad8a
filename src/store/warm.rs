//! The warm restart ([`Options::warm_cache`](crate::Options::warm_cache)): a background thread,
//! started at open, that fills the read cache's free room with the newest live small values, so
//! that a store closed and opened again (a restarted service, YCSB's run phase) does not serve
//! its first reads of every hot value from disk.
//!
//! It reads the log segments found at open, newest first (the highest id: the last written, or
//! compaction's latest copies), each from its first record to its data end in large sequential
//! reads ([`WARM_READ`] bytes, direct with direct I/O, into aligned buffers; each next read made
//! ahead on a second thread, [`window::ReadAhead`], while the walk goes through the one before), and
//! walks the records in them: a record's header crc (which covers its key and lengths, and is
//! seeded with the file id and the record's offset) is checked before anything else of it is
//! believed; a put whose value would be kept on write (`read/kept.rs`: at most 4 KiB, kept whole)
//! and whose place the index still names has its chunk crcs checked (and a compressed one its
//! frames', as it is decompressed), then is kept as a read keeps it ([`Reader::keep_warmed`]).
//! Tombstones, dead records and larger values are stepped over by their header's length, unread.
//! Whether the index names a place is asked of a copy of the segment's entries, by offset
//! ([`Index::entries_of`](crate::index::Index::entries_of): one pass over the index), when the
//! segment holds enough of the keys for that to cost less than a look-up per record; a segment
//! none of whose entries the warm-up would keep is not read, and one with many (at least
//! [`PART_MIN`] per part) is walked in parts side by side, one per core up to 4, each from a
//! record the index names (a record's start) with its share of the room. The cache's tables
//! are reserved for the values it may keep before it begins (no step-by-step growth).
//!
//! **Never stale.** An entry is keyed by the place of the bytes it holds (file id, record offset),
//! whose bytes never change while the store is open, and file ids are never reused
//! (`store/cache.rs` has the argument): a value the thread keeps after an overwrite, a delete or
//! a compaction moved its key on is never looked up again, whatever the interleaving. The check
//! that the index names the place is only there to spend the room on live values. Within a run
//! that lazy puts left unresolved a kept value may be an older version: the warm path of a read
//! stops at the first entry the cache cannot tell in such a run (`Reader::lookup`), so it never
//! answers for a newer one, as for any value kept by a read.
//!
//! **Never unverified.** Only bytes whose crcs were checked in the buffer they are copied from
//! go into the cache. A record whose header does not verify ends the walk of its segment, or of
//! its part of it (its length cannot be believed); one whose header verifies but whose value does not is skipped
//! (the header's length is good). Both are logged once per segment; a read of such a record
//! still fails as it would have.
//!
//! **Never evicting, never blocking.** It stops when the cache's free room (less a sixteenth,
//! for the shards' uneven filling) is used, or the cache has evicted anything since it began
//! (full: readers are filling it too; an entry kept again under its own key, as when a reader
//! kept a value first, is no eviction: `store/cache.rs`); it holds no lock across I/O (an
//! index lookup copies the entries out; a cache insertion takes a shard's lock briefly), and
//! stops between records when the store closes (after the reads in progress: its own and the one made ahead). A file removed meanwhile (compacted) ends the walk of that file quietly; the
//! handle it holds keeps the bytes readable, and what it kept of that file is never looked up.

mod hotset;
mod window;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

use super::compress::{self, FrameCache};
use super::read::Reader;
use super::read::kept_weight;
use super::shared::Shared;
use crate::error::{Corruption, Error, FileKind, Result};
use crate::format::align_up;
use crate::format::footer::{TRAILER_LEN, Trailer};
use crate::format::record::{
    EXPIRES_LEN, RECORD_HEADER_LEN, RecordHeader, RecordKind, RecordPlace, decode_record,
};
use crate::format::segment_header::SEGMENT_HEADER_LEN;
use crate::index::IndexEntry;
use crate::io::file::SegmentFile;
use crate::segment::SegmentKind;
use window::Window;

/// Bytes read per step: large enough that a segment is read at the disk's sequential speed,
/// small enough that a close waits for at most one read.
const WARM_READ: usize = 4 << 20;

/// Live records a part of a segment walked beside others has at least (fewer, and the threads
/// cost more than they save).
const PART_MIN: usize = 16 << 10;

/// What the warm-up did, for [`Stats`](crate::Stats).
#[derive(Debug, Default)]
pub(super) struct WarmFigures {
    running: AtomicBool,
    values: AtomicU64,
    bytes: AtomicU64,
    read: AtomicU64,
}

/// A copy of [`WarmFigures`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Warmed {
    /// The thread is still reading.
    pub(super) running: bool,
    /// Values kept.
    pub(super) values: u64,
    /// Bytes of those values.
    pub(super) bytes: u64,
    /// Bytes read from the files.
    pub(super) read: u64,
}

impl WarmFigures {
    /// What the warm-up did so far.
    pub(super) fn get(&self) -> Warmed {
        Warmed {
            running: self.running.load(Ordering::Acquire),
            values: self.values.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            read: self.read.load(Ordering::Relaxed),
        }
    }
}

/// The warm-up thread, while it runs.
pub(super) struct Warmer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
}

impl Warmer {
    /// Starts warming the cache of `reader` from the log segments the store has now (at open:
    /// every one sealed; the active segment is created by the first write, and what is written
    /// is kept on write).
    pub(super) fn start(
        shared: Shared,
        reader: Arc<Reader>,
        figures: Arc<WarmFigures>,
    ) -> Result<Warmer> {
        let mut files: Vec<(u64, Arc<SegmentFile>)> = shared
            .segments
            .snapshot()
            .into_iter()
            // Not a file whose data is in the remote only: a walk would download it whole.
            .filter(|(_, h)| {
                h.kind == SegmentKind::Log && h.sealed_at.is_some() && !h.file.is_remote()
            })
            .map(|(id, h)| (id, h.file))
            .collect();
        files.sort_unstable_by_key(|(id, _)| std::cmp::Reverse(*id));
        let stop = Arc::new(AtomicBool::new(false));
        figures.running.store(true, Ordering::Release);
        let walk = Walk {
            win: Window::new(
                shared.profile.read_align.max(1),
                shared.profile.mem_align,
                figures.clone(),
            ),
            shared,
            reader,
            figures: figures.clone(),
            stop: stop.clone(),
            room: 0,
            evictions: 0,
            live: None,
            share: 1,
            after_hot: false,
        };
        let handle = std::thread::Builder::new()
            .name("podstore-warm".into())
            .spawn(move || {
                let mut walk = walk;
                walk.run(files);
                walk.figures.running.store(false, Ordering::Release);
            })
            .map_err(|e| {
                figures.running.store(false, Ordering::Release);
                Error::io("start background thread", None, e)
            })?;
        Ok(Warmer { stop, handle })
    }

    /// Stops the thread (between two records, or after the read in progress) and waits for it.
    pub(super) fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.handle.join();
    }
}

/// Why the walk of a segment ended.
enum Ended {
    /// Its records were read to its data end.
    Done,
    /// Its file was removed (compacted) meanwhile.
    Gone,
    /// It has no valid trailer to say where its records end (a read-only store's unsealed
    /// segment): left alone.
    Unsealed,
    /// A record header that does not verify: the rest of the segment cannot be walked.
    Damaged(u64, Corruption),
    /// The cache's free room is used.
    Full,
    /// The store is closing.
    Stopped,
}

impl Ended {
    /// Which of two parts' ends the segment's is: the one that says more.
    fn rank(&self) -> u8 {
        match self {
            Ended::Done => 0,
            Ended::Gone => 1,
            Ended::Unsealed => 2,
            Ended::Damaged(..) => 3,
            Ended::Full => 4,
            Ended::Stopped => 5,
        }
    }
}

/// The warm-up's state: the read buffer, and the room left in the cache.
struct Walk {
    win: Window,
    shared: Shared,
    reader: Arc<Reader>,
    figures: Arc<WarmFigures>,
    stop: Arc<AtomicBool>,
    /// Bytes the cache may still take from the warm-up, counted down between two refreshes.
    room: u64,
    /// The cache's evictions when the warm-up began.
    evictions: u64,
    /// The index's entries of the segment being walked, by offset, and the walk's cursor in
    /// them ([`Walk::entries_of`]); `None`: each record is looked up in the index.
    live: Option<(Vec<IndexEntry>, usize)>,
    /// How many walks share the cache's room (each takes this fraction of it at a refresh).
    share: u64,
    /// The record of the hot set kept values: the walk skips those (a look in the cache per
    /// record, paid only then).
    after_hot: bool,
}

impl Walk {
    fn run(&mut self, files: Vec<(u64, Arc<SegmentFile>)>) {
        let began = Instant::now();
        self.evictions = self.reader.cache_figures().evictions;
        let mut why = "every segment read";
        // The values it may keep: one per live key, and no more than the room holds of values
        // of 256 bytes (an estimate: only a hint for the tables' size, which grow if it is
        // short). Reserved at once, the cache's tables are not grown (and rehashed) in steps.
        if refresh_room(&self.reader, self.evictions, &mut self.room) {
            let fit = self.room / kept_weight(16, 256);
            self.reader.reserve_warm(self.shared.index.len().min(fit));
        }
        // First what the last close recorded of the values being read (warm/hotset.rs).
        let files = match self.hot_set() {
            hotset::HotEnd::Full => {
                why = "the cache's free room is used";
                Vec::new()
            }
            hotset::HotEnd::Stopped => {
                why = "the store closed";
                Vec::new()
            }
            hotset::HotEnd::Done | hotset::HotEnd::None => files,
        };
        self.after_hot = self.figures.get().values > 0;
        for (id, file) in files {
            if !refresh_room(&self.reader, self.evictions, &mut self.room) {
                why = "the cache's free room is used";
                break;
            }
            self.win.file = id;
            self.win.at = (0, 0);
            match self.segment(id, &file) {
                Ok(Ended::Done | Ended::Gone) => {}
                Ok(Ended::Unsealed) => {
                    log::debug!(
                        "podstore: warm-up: {} has no footer; not read",
                        file.path().display()
                    );
                }
                Ok(Ended::Damaged(at, kind)) => log::warn!(
                    "podstore: warm-up: {} has a damaged record at offset {at} ({kind}); the \
                     rest of the file (or of the part of it walked apart) is not warmed (a read \
                     of it reports the damage)",
                    file.path().display()
                ),
                Ok(Ended::Full) => {
                    why = "the cache's free room is used";
                    break;
                }
                Ok(Ended::Stopped) => {
                    why = "the store closed";
                    break;
                }
                Err(e) => log::warn!(
                    "podstore: warm-up: reading {} failed ({e}); its values are not warmed",
                    file.path().display()
                ),
            }
        }
        // Its thread ends (after the read on its way, if one is) before the figures are told.
        self.win.ahead = None;
        let w = self.figures.get();
        log::info!(
            "podstore: warm-up of {}: {} values ({} bytes) kept, {} bytes read in {:.0?}: {why}",
            self.shared.dir.display(),
            w.values,
            w.bytes,
            w.read,
            began.elapsed()
        );
    }

    /// Walks the records of log segment `id`, keeping the live small values.
    fn segment(&mut self, id: u64, file: &Arc<SegmentFile>) -> Result<Ended> {
        let file_len = file.len()?;
        if file_len < (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64 {
            return Ok(Ended::Unsealed);
        }
        let io_err = |at: u64, e: io::Error| crate::segment::read_error(id, at, file.path(), e);
        let trailer_at = file_len - TRAILER_LEN as u64;
        let trailer = {
            let Some(tail) = self
                .win
                .bytes(file, trailer_at, TRAILER_LEN, file_len)
                .map_err(|e| io_err(trailer_at, e))?
            else {
                return Ok(Ended::Unsealed);
            };
            match Trailer::decode(tail, file_len) {
                Ok(t) if t.segment == id => t,
                _ => return Ok(Ended::Unsealed),
            }
        };
        let (end, block) = (trailer.data_end, u64::from(trailer.block_size).max(1));
        self.live = self.entries_of(id);
        if let Some((entries, _)) = &self.live
            && !entries.iter().any(|e| {
                self.reader.keeps_warm(e) && !(self.after_hot && self.reader.holds_value(e))
            })
        {
            // Nothing in it the warm-up would keep (large values only, or values the record of
            // the hot set gave already): not read.
            return Ok(Ended::Done);
        }
        let parts = self.parts();
        if parts <= 1 {
            return self.walk(id, file, SEGMENT_HEADER_LEN as u64, end, (end, block));
        }
        // Parts of about equal counts of live records, each from a record the index names (a
        // record's start: where a walk may begin), walked side by side, each by a walk of its
        // own with its share of the room.
        let entries = self.live.take().map(|(e, _)| e).unwrap_or_default();
        let per = entries.len().div_ceil(parts);
        let mut chunks: Vec<Vec<IndexEntry>> = entries.chunks(per).map(<[_]>::to_vec).collect();
        drop(entries);
        let parts = chunks.len();
        let starts: Vec<u64> = chunks
            .iter()
            .enumerate()
            .map(|(i, c)| match i {
                0 => SEGMENT_HEADER_LEN as u64,
                _ => c[0].offset,
            })
            .collect();
        let mut walks: Vec<Walk> = chunks
            .drain(1..)
            .map(|live| self.helper(id, live, parts as u64))
            .collect();
        self.live = chunks.pop().map(|live| (live, 0));
        self.share = parts as u64;
        self.room /= parts as u64;
        let range = |i: usize| (starts[i], starts.get(i + 1).copied().unwrap_or(end));
        let mut unwalked = Vec::new();
        let mut ended = std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for (i, walk) in walks.iter_mut().enumerate() {
                let (from, stop) = range(i + 1);
                let spawned = std::thread::Builder::new()
                    .name("podstore-warm".into())
                    .spawn_scoped(scope, move || walk.walk(id, file, from, stop, (end, block)));
                match spawned {
                    Ok(h) => handles.push(h),
                    Err(_) => unwalked.push(i),
                }
            }
            let (from, stop) = range(0);
            let mut ended = vec![self.walk(id, file, from, stop, (end, block))];
            // A walk that panicked kept nothing more: its part is left cold.
            ended.extend(
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(Ok(Ended::Done))),
            );
            ended
        });
        // Parts no thread could be started for: walked here, one after the other.
        for i in unwalked {
            let (from, stop) = range(i + 1);
            ended.push(walks[i].walk(id, file, from, stop, (end, block)));
        }
        self.share = 1;
        let mut result = Ok(Ended::Done);
        for e in ended {
            result = match (result, e) {
                (Err(e), _) | (_, Err(e)) => Err(e),
                (Ok(a), Ok(b)) => Ok(if b.rank() > a.rank() { b } else { a }),
            };
        }
        result
    }

    /// Into how many parts, walked side by side, the walk of a segment whose entries it copied
    /// is split: one per core (up to 4), if each part has at least [`PART_MIN`] live records.
    fn parts(&self) -> usize {
        let Some((entries, _)) = &self.live else {
            return 1;
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(4).min(entries.len() / PART_MIN).max(1)
    }

    /// A walk of part of segment `id` beside this one: its own buffers, the part's entries and
    /// `1 / share` of the room.
    fn helper(&self, id: u64, live: Vec<IndexEntry>, share: u64) -> Walk {
        Walk {
            win: {
                let mut win = Window::new(
                    self.win.read_align,
                    self.win.mem_align,
                    self.figures.clone(),
                );
                win.file = id;
                win
            },
            shared: self.shared.clone(),
            reader: self.reader.clone(),
            figures: self.figures.clone(),
            stop: self.stop.clone(),
            room: self.room / share,
            evictions: self.evictions,
            live: Some((live, 0)),
            share,
            after_hot: self.after_hot,
        }
    }

    /// Walks the records of segment `id` (whose data ends at `end.0`, in blocks of `end.1`
    /// bytes) from the record at `from` to the first at or past `stop`, keeping the live small
    /// values.
    fn walk(
        &mut self,
        id: u64,
        file: &Arc<SegmentFile>,
        from: u64,
        stop: u64,
        (end, block): (u64, u64),
    ) -> Result<Ended> {
        let io_err = |at: u64, e: io::Error| crate::segment::read_error(id, at, file.path(), e);
        let mut pos = from;
        let mut value_damage = None;
        // What it reads of the last record of the part ends less than the overlap past `stop`.
        self.win.limit = stop.saturating_add(window::READ_OVERLAP);
        while pos < stop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Ended::Stopped);
            }
            // The longest header (with an expiry field), or what is left of the data.
            let probe = ((RECORD_HEADER_LEN + EXPIRES_LEN) as u64).min(end - pos) as usize;
            let before = self.win.at;
            let Some(head) = self
                .win
                .bytes(file, pos, probe, end)
                .map_err(|e| io_err(pos, e))?
            else {
                return Ok(Ended::Damaged(pos, truncated(probe as u64, end - pos)));
            };
            // Zeroes inside a block: the padding after a write group, to the block's end (a
            // record never starts with a zero: its magic). Looked at up to the block's end
            // only: padding may be shorter than 4 bytes (until 2026-12-07, 1 to 3 bytes of it
            // were taken for a damaged record, and the rest of the segment was not warmed).
            let to_block_end = (align_up(pos, block) - pos) as usize;
            if !pos.is_multiple_of(block)
                && head[..probe.min(4).min(to_block_end)]
                    .iter()
                    .all(|&b| b == 0)
            {
                pos = align_up(pos, block);
                continue;
            }
            let header = match RecordHeader::decode(head) {
                Ok(h) => h,
                Err(kind) => return Ok(Ended::Damaged(pos, kind)),
            };
            let len = header.encoded_len();
            if len > end - pos {
                return Ok(Ended::Damaged(pos, truncated(len, end - pos)));
            }
            if self.win.at != before && self.shared.segments.file(id).is_none() {
                return Ok(Ended::Gone);
            }
            match self.record(id, file, pos, &header, end)? {
                Kept::Yes | Kept::No => {}
                Kept::HeaderDamaged(kind) => return Ok(Ended::Damaged(pos, kind)),
                Kept::ValueDamaged(kind) => {
                    value_damage.get_or_insert((pos, kind));
                }
                Kept::Full => return Ok(Ended::Full),
            }
            pos += len;
        }
        if let Some((at, kind)) = value_damage {
            log::warn!(
                "podstore: warm-up: {} has a damaged value at offset {at} ({kind}) and maybe \
                 more; not warmed (a read of it reports the damage)",
                file.path().display()
            );
        }
        Ok(Ended::Done)
    }

    /// The index's entries of segment `id`, by offset, when one pass over the index costs less
    /// than a look-up per record (the segment holds at least a sixteenth of the live keys) and
    /// the copy takes little of the cache's free room (an eighth at most: it lives while the
    /// segment is walked). What the walk checks a record against, as it would the index: a
    /// copy taken now is as good, since the check only spends the room on live values (an
    /// entry that changes meanwhile is one the cache's keying by place never serves stale).
    fn entries_of(&self, id: u64) -> Option<(Vec<IndexEntry>, usize)> {
        let index = &self.shared.index;
        let records = index.usage(id).live_records;
        let copy = records.saturating_mul(std::mem::size_of::<IndexEntry>() as u64);
        (records > 0 && index.len() / 16 <= records && copy <= self.room / 8)
            .then(|| (index.entries_of(id), 0))
    }

    /// Keeps the value of the record at `pos` (whose header decoded as `header`) if its key's
    /// entry names it and it is small enough, after verifying it.
    fn record(
        &mut self,
        id: u64,
        file: &Arc<SegmentFile>,
        pos: u64,
        header: &RecordHeader,
        end: u64,
    ) -> Result<Kept> {
        let io_err = |e: io::Error| crate::segment::read_error(id, pos, file.path(), e);
        let place = RecordPlace {
            segment: id,
            offset: pos,
        };
        let key_at = header.key_offset() as usize;
        let head_len = key_at + header.key_len as usize;
        let Some(head) = self.win.bytes(file, pos, head_len, end).map_err(io_err)? else {
            return Ok(Kept::HeaderDamaged(truncated(head_len as u64, end - pos)));
        };
        let key = &head[key_at..];
        if let Err(kind) = RecordHeader::verify(&head[..key_at], place, key) {
            return Ok(Kept::HeaderDamaged(kind));
        }
        if header.kind != RecordKind::Put {
            return Ok(Kept::No);
        }
        let named = match &mut self.live {
            Some((entries, next)) => {
                // The segment's entries, by offset: the walk's cursor in them moves on with it.
                while entries.get(*next).is_some_and(|e| e.offset < pos) {
                    *next += 1;
                }
                entries
                    .get(*next)
                    .filter(|e| e.offset == pos && e.stored_len == header.value_len)
                    .map(|e| IndexEntry {
                        key_len: key.len() as u32,
                        ..*e
                    })
            }
            None => {
                let index = &self.shared.index;
                index
                    .candidates(index.hash(key), key.len() as u32)
                    .as_slice()
                    .iter()
                    .copied()
                    .find(|c| {
                        c.segment == id && c.offset == pos && c.stored_len == header.value_len
                    })
            }
        };
        // Not a value the warm-up keeps, or one the record of the hot set gave already.
        let Some(entry) = named.filter(|e| {
            self.reader.keeps_warm(e) && !(self.after_hot && self.reader.holds_value(e))
        }) else {
            return Ok(Kept::No);
        };
        let weight = kept_weight(key.len(), entry.value_len);
        if weight > self.room {
            // The room counted down since the last refresh is used up: look again (readers
            // may have filled the cache, or it may have room the count did not see).
            refresh_room(&self.reader, self.evictions, &mut self.room);
            self.room /= self.share;
            if weight > self.room {
                return Ok(Kept::Full);
            }
        }
        let len = header.encoded_len() as usize;
        let Some(bytes) = self.win.bytes(file, pos, len, end).map_err(io_err)? else {
            return Ok(Kept::HeaderDamaged(truncated(len as u64, end - pos)));
        };
        let record = match decode_record(bytes, place) {
            Ok(r) => r,
            Err(kind) => return Ok(Kept::ValueDamaged(kind)),
        };
        let (key, seq) = (record.key, record.header.seq);
        if entry.is_compressed() {
            match decompress(&entry, record.value) {
                Ok(value) => self.reader.keep_warmed(&entry, seq, key, &value),
                Err(kind) => return Ok(Kept::ValueDamaged(kind)),
            }
        } else {
            self.reader.keep_warmed(&entry, seq, key, record.value);
        }
        self.room = self.room.saturating_sub(weight);
        self.figures.values.fetch_add(1, Ordering::Relaxed);
        self.figures
            .bytes
            .fetch_add(entry.value_len, Ordering::Relaxed);
        Ok(Kept::Yes)
    }
}

/// What [`Walk::record`] did with a record.
enum Kept {
    /// Kept its value.
    Yes,
    /// Not a value to keep: a tombstone, dead, or larger than the warm-up keeps.
    No,
    /// Its header or key does not verify: its length cannot be believed.
    HeaderDamaged(Corruption),
    /// Its value does not verify (its header does: the walk goes on after it).
    ValueDamaged(Corruption),
    /// The cache has no room for it.
    Full,
}

/// Refreshes `room`, the bytes the cache may still take from the warm-up, from the cache's
/// figures; false when the cache is full (or has evicted since the warm-up began, when it had
/// `evictions`).
fn refresh_room(reader: &Reader, evictions: u64, room: &mut u64) -> bool {
    let f = reader.cache_figures();
    if f.evictions > evictions {
        *room = 0;
        return false;
    }
    *room = (f.capacity - f.capacity / 16).saturating_sub(f.bytes);
    *room > 0
}

/// `Truncated`: `needed` bytes, `available` before the end.
fn truncated(needed: u64, available: u64) -> Corruption {
    Corruption::Truncated { needed, available }
}

/// The value of the compressed record `entry` names, from its `stored` bytes (whose chunk crcs
/// were checked), its frames checked as they are decompressed.
fn decompress(entry: &IndexEntry, stored: &[u8]) -> std::result::Result<Vec<u8>, Corruption> {
    let mut value = vec![0u8; entry.value_len as usize];
    let read_stored = |off: u64, buf: &mut [u8]| {
        let from = off as usize;
        match stored.get(from..from + buf.len()) {
            Some(b) => {
                buf.copy_from_slice(b);
                Ok(())
            }
            None => Err(Error::Corruption {
                file: FileKind::Log,
                segment: entry.segment,
                offset: entry.offset,
                kind: truncated(off + buf.len() as u64, stored.len() as u64),
            }),
        }
    };
    match compress::read_framed(
        entry,
        0,
        &mut value,
        &mut FrameCache::default(),
        read_stored,
    ) {
        Ok(()) => Ok(value),
        Err(Error::Corruption { kind, .. }) => Err(kind),
        Err(_) => Err(Corruption::InvalidField {
            field: "compressed value length",
            value: entry.value_len,
        }),
    }
}
