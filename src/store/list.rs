//! Ordered listing: the live keys of a range ([`Keys`]), in ascending byte order from the front
//! and descending from the back, by merging every file's sorted keys with those of the active
//! segment and keeping a key only if the index says it is current. `entries.rs` adds the values
//! ([`Entries`](super::Entries)) and the `Store` methods that start a listing.
//!
//! **Sources.** Taken at the start (the *snapshot*): under the append lock, at one instant, the
//! table of open files, the active segment's id, the end of its records, the keys in the range
//! of its records in the chunk being filled, the frozen chunks its sorted view does not cover
//! yet, and the id the next new file will get; then the view, extended with those chunks if
//! there are any (outside the append lock; `store::active_keys`), gives each of its runs as a
//! source. The table is taken with the keys, not after them: compaction appends a key's copy
//! under the append lock before it switches the index and removes the old file, so at that
//! instant each live key is in the table's files or in the active segment's records (taken
//! after, a compaction in between could leave a key in neither: `src/tests/list_race.rs`).
//! Each sealed file with an id below that one is read through its footer ([`SortedKeys`]: a
//! descent of its fence-key tree to the start of the range, then its blocks in order; a file
//! of version 1 reads its table whole). A file whose footer a seal has submitted but not yet
//! made durable is waited for (a sync), so that its footer is on disk; a file open without a
//! footer (a read-only store's unsealed segment, or one whose recovery found the disk full) is
//! scanned. The keys of records not yet published
//! (written, not acknowledged) are not listed, as `get` does not see them.
//!
//! **Both ends.** Each end of the listing is a merge of its own over the snapshot's sources
//! ([`Merge`]), opened at its first item: the front descends each file's tree to the start of the
//! range and reads forwards, the back descends to its end and reads backwards (a listing only
//! ever read from one end reads nothing for the other). Every key either end pops is remembered
//! as that end's last; an end stops at the first key the other end has reached, so that each
//! key is considered by one end only, and the two meet without a gap or a repeat.
//!
//! **Liveness.** For each key the merge yields, with every `(file, record offset)` the sources
//! name it at, the index decides: the key is listed if an entry with its fingerprint names one
//! of those records (a place names one record, so no key needs to be read), or if the key's
//! entry names a record the snapshot could not see: in a file it did not read (written, copied
//! by compaction or put as a blob file since), or in the active segment past the end of its
//! records at the snapshot. Only for that second case is a record read, to tell the key's entry
//! from another key's with the same fingerprint. So a key live throughout the listing is listed
//! exactly once, even when compaction moves it meanwhile, a key deleted throughout is not, and a
//! key written or deleted while the listing runs may or may not be.
//!
//! **Cost.** Per file: its trailer at the start, the location table's header with the tree's root
//! before it (one read), one node of at most 4 KiB per level below the root (one for a 256 MiB
//! segment) and the key block the range starts in, then the blocks the range covers. The active
//! segment: a binary search per run of its sorted view (at most `log2(records / 1024) + 1`
//! runs), then the keys in the range; a pass over the chunk being filled (under 1024 records)
//! under the append lock; and, for the first listing after writes filled chunks, the sorting of
//! their records into a run and its merges (amortised O(log n) per record), or for a large
//! backlog no listing met before, a pass over it (outside the append lock). A prefix listing of
//! a few keys reads about 12 KiB per file.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::io;
use std::iter::FusedIterator;
use std::ops::Bound;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::Store;
use super::active_keys::SortedView;
use super::cache::{Cache, Cached, Key};
use super::read::Located;
use super::segments::SegmentHandle;
use crate::error::Result;
use crate::format::cursor::ByteSource;
use crate::format::footer::BlockLocations;
use crate::format::scan::scan_segment;
use crate::index::IndexEntry;
use crate::io::aligned::BufPool;
use crate::io::file::SegmentFile;
use crate::segment::{FooterSource, KeySeq, SortedKeys, corruption, last_per_key, read_error};

#[cfg(test)]
thread_local! {
    /// Run once, on the listing's thread, right after the snapshot's files and active keys are
    /// taken: a test's way to make compaction happen at that point (`src/tests/list_race.rs`).
    pub(crate) static AFTER_ACTIVE_KEYS: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

/// A file's bytes through its shared handle, for [`SortedKeys`] and the scan; its footer's
/// verified blocks kept in the read cache, so that a listing of keys listed before reads
/// nothing (with direct I/O each footer read is a device read: four to six per file and
/// listing, ~0.6 ms for 100 keys here, more than `LocalFileSystem`'s listing from the page cache).
#[derive(Clone)]
struct FileBytes<'a> {
    file: Arc<SegmentFile>,
    id: u64,
    pool: &'a BufPool,
    cache: &'a Cache,
    read_align: u64,
    len: u64,
}

impl FooterSource for FileBytes<'_> {
    fn kept(&self, at: u64, len: u64) -> Option<Bytes> {
        self.cache.get_bytes(&Key::footer(self.id, at, len))
    }

    fn keep(&self, at: u64, bytes: Bytes) {
        let len = bytes.len() as u64;
        self.cache
            .insert(Key::footer(self.id, at, len), Cached::Bytes(bytes));
    }
}

impl ByteSource for FileBytes<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file
            .read_exact_at(offset, buf, self.pool, self.read_align)
    }
}

/// A record the sources name a key at: its file, its offset, its sequence number when the
/// source tells it, and the source.
#[derive(Clone, Copy)]
struct Place {
    file: u64,
    offset: u64,
    seq: Option<u64>,
    source: usize,
}

/// Every place the sources name one key at.
type Places = Vec<Place>;

/// Keys in the range with their record offsets and sequence numbers, sorted (a key may come
/// more than once: the active segment's records of one key).
type Sorted = Arc<Vec<(Vec<u8>, u64, u64)>>;

/// A live key as the listing found it: its index entry, and its record (the file held open and
/// the sequence number) when the listing knows it: from the sources, without a read, or from
/// the read that told the key's entry from others.
pub(super) struct Live {
    pub(super) entry: IndexEntry,
    pub(super) found: Option<Located>,
}

/// Where the keys of one file (or of the active segment) come from, as the snapshot found them:
/// what each end of the listing opens a cursor on.
enum Origin<'a> {
    /// A sealed file's footer, and a reader of it whose trailer verified at the snapshot, for
    /// the first end that asks (the other opens its own).
    Footer {
        bytes: FileBytes<'a>,
        path: PathBuf,
        spare: Option<Box<SortedKeys<FileBytes<'a>>>>,
        /// The file's map of its location table, shared with its handle.
        blocks: Arc<OnceLock<Arc<BlockLocations>>>,
    },
    /// Keys in memory: those of the active segment's chunk being filled, or a scanned file's.
    Memory(Sorted),
    /// One run of the active segment's sorted view.
    Run(Arc<SortedView>, usize),
}

/// One end's position in one source.
enum Cursor<'a> {
    Footer(Box<SortedKeys<FileBytes<'a>>>),
    /// Forwards: the index of the next key; backwards: the number of keys left.
    Memory(Sorted, usize),
    /// A run of the active segment's sorted view and the positions in it left to read (the
    /// range's, found by binary search), from the front or the back.
    Run(Arc<SortedView>, usize, std::ops::Range<usize>),
}

impl Cursor<'_> {
    fn next(&mut self, back: bool) -> Option<Result<KeySeq>> {
        let at = |keys: &Sorted, i: usize| {
            let (key, offset, seq) = keys[i].clone();
            (key, offset, Some(seq))
        };
        match self {
            Cursor::Footer(keys) if back => keys.next_back_with_seq(),
            Cursor::Footer(keys) => keys.next_with_seq(),
            Cursor::Memory(keys, left) if back => {
                *left = left.checked_sub(1)?;
                Some(Ok(at(keys, *left)))
            }
            Cursor::Memory(keys, next) => {
                let item = (*next < keys.len()).then(|| at(keys, *next))?;
                *next += 1;
                Some(Ok(item))
            }
            Cursor::Run(view, run, left) => {
                let pos = if back { left.next_back() } else { left.next() }?;
                let r = view.at(*run, pos);
                Some(Ok((r.key.clone(), r.offset, Some(r.seq))))
            }
        }
    }
}

/// The next key of a source, in the heap of one end: the front pops the smallest, the back the
/// largest (ties between sources in a fixed order).
struct Head {
    key: Vec<u8>,
    source: usize,
    offset: u64,
    seq: Option<u64>,
    back: bool,
}

impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        let o = self
            .key
            .cmp(&other.key)
            .then(self.source.cmp(&other.source));
        // `BinaryHeap` pops the greatest.
        if self.back { o } else { o.reverse() }
    }
}

impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Head {}

/// One end of a listing: a cursor per source and the merge of their keys.
struct Merge<'a> {
    back: bool,
    cursors: Vec<Cursor<'a>>,
    heap: BinaryHeap<Head>,
    /// The last key popped (live or not): the other end stops before it.
    last: Option<Vec<u8>>,
}

impl<'a> Merge<'a> {
    /// Pops the next key with every place the sources name it at; refills from those sources.
    fn pop(&mut self, ids: &[u64], skip_damaged: bool) -> Result<Option<(Vec<u8>, Places)>> {
        let Some(head) = self.heap.pop() else {
            return Ok(None);
        };
        let place = |h: &Head| Place {
            file: ids[h.source],
            offset: h.offset,
            seq: h.seq,
            source: h.source,
        };
        let mut places = vec![place(&head)];
        self.refill(head.source, skip_damaged)?;
        while self.heap.peek().is_some_and(|h| h.key == head.key) {
            let Some(h) = self.heap.pop() else {
                break;
            };
            places.push(place(&h));
            self.refill(h.source, skip_damaged)?;
        }
        self.last = Some(head.key.clone());
        Ok(Some((head.key, places)))
    }

    fn refill(&mut self, i: usize, skip_damaged: bool) -> Result<()> {
        match self.cursors[i].next(self.back) {
            Some(Ok((key, offset, seq))) => self.heap.push(Head {
                key,
                source: i,
                offset,
                seq,
                back: self.back,
            }),
            // A damaged footer: its keys are left out (its file is not unseen, so a key whose
            // entry is in it is not listed either).
            Some(Err(_)) if skip_damaged => {}
            Some(Err(e)) => return Err(e),
            None => {}
        }
        Ok(())
    }
}

/// The live keys of a range: what [`Store::range`], [`Store::prefix`] and [`Store::keys`]
/// return. In ascending byte order from the front ([`Iterator::next`]) and descending from the
/// back ([`DoubleEndedIterator::next_back`], so [`Iterator::rev`] lists backwards); the two ends
/// can be mixed and meet without a gap or a repeat. [`Keys::entries`] gives the values too.
///
/// Items are `Result`s: a footer that cannot be read or does not verify is an error item
/// ([`Error::Corruption`](crate::Error::Corruption) naming the file and offset), after which the
/// iterator ends (at both ends).
///
/// **Writes meanwhile.** The files and the active segment's keys are taken when the listing
/// starts; whether a key is live is asked of the index when an end reaches it. So a key live
/// throughout the listing is listed exactly once (even when compaction moves it meanwhile), a key
/// absent throughout is not listed, and a key written or deleted while the listing runs may or
/// may not be: neither a snapshot of the whole store nor fully live.
#[must_use = "iterators are lazy: Keys lists nothing until it is iterated"]
pub struct Keys<'a> {
    pub(super) store: &'a Store,
    /// Per source: its file id, what each end opens a cursor on, and the file held open (the
    /// active segment's, if the snapshot found its handle).
    ids: Vec<u64>,
    origins: Vec<Origin<'a>>,
    files: Vec<Option<Arc<SegmentFile>>>,
    /// Whether the keys are wanted with their records ([`Keys::entries`]): footers then give
    /// each key its sequence number (see [`Live`]).
    with_records: bool,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    /// Files whose keys the snapshot read.
    listed: HashSet<u64>,
    /// The active segment at the snapshot, and the end of its records then.
    active: Option<(u64, u64)>,
    /// The ends, each opened at its first item.
    front: Option<Merge<'a>>,
    back: Option<Merge<'a>>,
    /// An error met while starting, returned first.
    error: Option<crate::Error>,
    done: bool,
    /// Leave out the keys of a footer that fails to read instead of failing (`verify`).
    skip_damaged: bool,
}

impl std::fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("files", &self.origins.len())
            .finish_non_exhaustive()
    }
}

pub(super) fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    b.map(<[u8]>::to_vec)
}

fn after_start(key: &[u8], start: &Bound<Vec<u8>>) -> bool {
    match start {
        Bound::Unbounded => true,
        Bound::Included(s) => key >= s.as_slice(),
        Bound::Excluded(s) => key > s.as_slice(),
    }
}

fn before_end(key: &[u8], end: &Bound<Vec<u8>>) -> bool {
    match end {
        Bound::Unbounded => true,
        Bound::Included(e) => key <= e.as_slice(),
        Bound::Excluded(e) => key < e.as_slice(),
    }
}

/// The range of the keys that start with `prefix`: from it, up to (excluded) the first key
/// after all of them (the prefix with its trailing `0xff` bytes dropped and its last byte
/// incremented), or to the end when it is all `0xff`.
pub(super) fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut upper = prefix.to_vec();
    while upper.last() == Some(&0xff) {
        upper.pop();
    }
    let end = match upper.last_mut() {
        Some(b) => {
            *b += 1;
            Bound::Excluded(upper)
        }
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}

impl<'a> Keys<'a> {
    /// The live keys of `store` from `start` to `end`.
    pub(super) fn new(store: &'a Store, start: Bound<Vec<u8>>, end: Bound<Vec<u8>>) -> Keys<'a> {
        Keys::with(store, start, end, false)
    }

    /// Every live key with its index entry, leaving out the keys of files whose footers cannot
    /// be read (`verify`, which reports those files' damage itself).
    pub(super) fn all_entries_skipping_damage(
        store: &'a Store,
    ) -> Result<Vec<(Vec<u8>, IndexEntry)>> {
        let mut keys = Keys::with(store, Bound::Unbounded, Bound::Unbounded, true);
        let mut all = Vec::new();
        while let Some((key, live)) = keys.next_inner(false)? {
            all.push((key, live.entry));
        }
        Ok(all)
    }

    fn with(
        store: &'a Store,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        skip_damaged: bool,
    ) -> Keys<'a> {
        let mut r = Keys {
            store,
            ids: Vec::new(),
            origins: Vec::new(),
            files: Vec::new(),
            with_records: false,
            start,
            end,
            listed: HashSet::new(),
            active: None,
            front: None,
            back: None,
            error: None,
            done: false,
            skip_damaged,
        };
        if let Err(e) = r.snapshot() {
            r.error = Some(e);
        }
        r
    }

    fn in_range(&self, key: &[u8]) -> bool {
        after_start(key, &self.start) && before_end(key, &self.end)
    }

    /// Takes the snapshot: the active segment's keys, then every file's footer (its trailer).
    fn snapshot(&mut self) -> Result<()> {
        let inner = &self.store.inner;
        let (next_id, mut handles, active) = inner.log.active_keys(|k| self.in_range(k));
        #[cfg(test)]
        if let Some(hook) = AFTER_ACTIVE_KEYS.with(|h| h.borrow_mut().take()) {
            hook();
        }
        let shared = &inner.shared;
        if let Some(mut a) = active {
            a.keys.sort_unstable();
            self.active = Some((a.id, a.data_end));
            let file = shared.segments.file(a.id);
            if let Some(view) = a.view {
                for run in 0..view.run_count() {
                    self.add(a.id, Origin::Run(view.clone(), run), file.clone());
                }
            }
            self.add(a.id, Origin::Memory(Arc::new(a.keys)), file);
        }
        let syncs_done = inner.log.progress().lock().syncs_done;
        if handles
            .iter()
            .any(|(_, h)| h.sealed_at.is_some_and(|t| t > syncs_done))
        {
            // A seal's footer may still be on its way to the file: make it durable.
            inner.log.sync_all()?;
        }
        handles.retain(|(id, _)| *id < next_id);
        handles.sort_unstable_by_key(|(id, _)| *id);
        let (pool, cache) = (inner.reader.pool(), inner.reader.cache());
        let read_align = shared.profile.read_align;
        for (id, h) in handles {
            if h.sealed_at.is_none() && self.active.is_some_and(|(a, _)| a == id) {
                continue; // the active segment: its keys came from the log
            }
            // Recovered without a footer at open: scanned up to where open's scan ended (beside
            // a writer, the file goes on growing past it, with records the index does not have).
            let bound = inner
                .recovery
                .recovered
                .iter()
                .find(|r| r.segment == id && !r.sealed)
                .map(|r| r.data_end);
            match self.origin(id, &h, bound, (pool, cache), read_align) {
                Ok(origin) => self.add(id, origin, Some(h.file.clone())),
                // Its keys are left out (`verify` reports the file's damage itself).
                Err(_) if self.skip_damaged => {
                    self.listed.insert(id);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn add(&mut self, id: u64, origin: Origin<'a>, file: Option<Arc<SegmentFile>>) {
        self.listed.insert(id);
        self.ids.push(id);
        self.origins.push(origin);
        self.files.push(file);
    }

    /// Where the keys of file `id` come from: its sorted footer, or a scan when it has none.
    fn origin(
        &self,
        id: u64,
        h: &SegmentHandle,
        bound: Option<u64>,
        (pool, cache): (&'a BufPool, &'a Cache),
        read_align: u64,
    ) -> Result<Origin<'a>> {
        let len = h.file.len()?;
        let bytes = FileBytes {
            len: bound.map_or(len, |b| b.min(len)),
            file: h.file.clone(),
            id,
            pool,
            cache,
            read_align,
        };
        let path = h.file.path().to_path_buf();
        let footer = if h.sealed_at.is_some() {
            SortedKeys::open(bytes.clone(), id, &path)?
        } else {
            None
        };
        Ok(match footer {
            Some(keys) => Origin::Footer {
                bytes,
                path,
                spare: Some(Box::new(keys)),
                blocks: h.blocks.clone(),
            },
            None => Origin::Memory(Arc::new(self.scanned(bytes, id)?)),
        })
    }

    /// The keys in range of a file open without a footer, by a scan of its records.
    fn scanned(&self, src: FileBytes<'a>, id: u64) -> Result<Vec<(Vec<u8>, u64, u64)>> {
        let path = src.file.path().to_path_buf();
        let outcome = scan_segment(&src, id).map_err(|e| match e {
            crate::format::scan::ScanError::Io(e) => read_error(id, 0, &path, e),
            crate::format::scan::ScanError::Header(kind) => corruption(&path, id, 0, kind),
        })?;
        let mut keys: Vec<(Vec<u8>, u64, u64)> = last_per_key(outcome.records)
            .into_iter()
            .filter(|e| self.in_range(&e.key))
            .map(|e| (e.key, e.offset, e.seq))
            .collect();
        keys.sort_unstable();
        Ok(keys)
    }

    /// The front (or with `back`, the back) end, opened if this is its first item: a cursor
    /// per source at the start of the range (or its end), and the first key of each.
    fn open_end(&mut self, back: bool) -> Result<()> {
        let slot = if back { &self.back } else { &self.front };
        if slot.is_none() {
            let mut merge = Merge {
                back,
                cursors: Vec::with_capacity(self.origins.len()),
                heap: BinaryHeap::new(),
                last: None,
            };
            let (start, end) = (self.start.as_ref(), self.end.as_ref());
            for (&id, origin) in self.ids.iter().zip(&mut self.origins) {
                let cursor = match origin {
                    Origin::Memory(keys) => {
                        let at = if back { keys.len() } else { 0 };
                        Cursor::Memory(keys.clone(), at)
                    }
                    Origin::Run(view, run) => {
                        let span =
                            view.span(*run, start.map(Vec::as_slice), end.map(Vec::as_slice));
                        Cursor::Run(view.clone(), *run, span)
                    }
                    Origin::Footer {
                        bytes,
                        path,
                        spare,
                        blocks,
                    } => {
                        let mut keys = match spare.take() {
                            Some(keys) => keys,
                            None => SortedKeys::open(bytes.clone(), id, path)?
                                .map(Box::new)
                                .ok_or_else(|| {
                                    // Its trailer verified at the snapshot: it changed since.
                                    corruption(
                                        path,
                                        id,
                                        bytes.len,
                                        crate::error::Corruption::InvalidField {
                                            field: "footer trailer",
                                            value: bytes.len,
                                        },
                                    )
                                })?,
                        };
                        if self.with_records && keys.needs_blocks() {
                            give_blocks(&mut keys, blocks);
                        }
                        let seek = if back {
                            keys.seek_back(end.map(Vec::as_slice))
                        } else {
                            keys.seek(start.map(Vec::as_slice))
                        };
                        match seek {
                            Ok(()) => Cursor::Footer(keys),
                            // Its keys are left out, as for a damaged block further on.
                            Err(_) if self.skip_damaged => Cursor::Memory(Arc::default(), 0),
                            Err(e) => return Err(e),
                        }
                    }
                };
                merge.cursors.push(cursor);
            }
            for i in 0..merge.cursors.len() {
                merge.refill(i, self.skip_damaged)?;
            }
            if back {
                self.back = Some(merge);
            } else {
                self.front = Some(merge);
            }
        }
        Ok(())
    }

    /// The index entry of `key`, found at `places`, if the key is live (see the module's
    /// "Liveness"), and its record if known without a read, or read to tell.
    fn live_entry(&self, key: &[u8], places: &[Place]) -> Result<Option<Live>> {
        let inner = &self.store.inner;
        let index = &inner.shared.index;
        let read = |key: &[u8]| -> Result<Option<Live>> {
            Ok(inner.reader.locate(key)?.map(|f| Live {
                entry: f.entry,
                found: Some(f),
            }))
        };
        let candidates = index.candidates(index.hash(key), key.len() as u32);
        if candidates.unresolved() {
            // An entry that names one of the key's records may be an older version a lazy put
            // left (not resolved yet): the key's newest entry, read from the records, decides.
            return read(key);
        }
        let named = candidates.as_slice().iter().find_map(|e| {
            places
                .iter()
                .find(|p| (p.file, p.offset) == e.place())
                .map(|p| (*e, p))
        });
        if let Some((entry, place)) = named {
            // The record the place names is the key's live one: its sequence number came with
            // the key, and its file is held open since the snapshot.
            let found = place
                .seq
                .zip(self.files[place.source].clone())
                .map(|(seq, file)| Located::new(entry, seq, file));
            return Ok(Some(Live { entry, found }));
        }
        let unseen = |e: &&IndexEntry| {
            !self.listed.contains(&e.segment)
                || self
                    .active
                    .is_some_and(|(id, end)| e.segment == id && e.offset >= end)
        };
        if !candidates.as_slice().iter().any(|e| unseen(&e)) {
            return Ok(None);
        }
        // Moved or written since the snapshot (or another key's, sharing the fingerprint):
        // the record tells.
        read(key)
    }

    /// The next live key from the front (or with `back`, from the back) and its index entry.
    fn next_inner(&mut self, back: bool) -> Result<Option<(Vec<u8>, Live)>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let skip_damaged = self.skip_damaged;
        loop {
            self.open_end(back)?;
            let merge = if back {
                &mut self.back
            } else {
                &mut self.front
            };
            let merge = merge.as_mut().expect("opened above");
            let Some((key, places)) = merge.pop(&self.ids, skip_damaged)? else {
                return Ok(None);
            };
            // Where the other end has got to: this end stops there.
            let other = if back { &self.front } else { &self.back };
            let met = other
                .as_ref()
                .and_then(|m| m.last.as_deref())
                .is_some_and(|l| if back { *key <= *l } else { *key >= *l });
            // Every source is sorted: nothing past a key out of the range is in it either.
            if met || !self.in_range(&key) {
                return Ok(None);
            }
            // A key whose value has expired is not listed, whatever compaction has reclaimed.
            if let Some(live) = self.live_entry(&key, &places)?
                && !live.entry.expired(|| self.store.inner.shared.now_ms())
            {
                return Ok(Some((key, live)));
            }
        }
    }

    /// [`Keys::next_inner`] as an item: `None` for good after the ends meet or an error.
    pub(super) fn next_entry(&mut self, back: bool) -> Option<Result<(Vec<u8>, Live)>> {
        if self.done {
            return None;
        }
        match self.next_inner(back) {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                // This end reached the range's end or the other end: every key is taken.
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }

    /// Ends the listing (after an error met on an item's value).
    pub(super) fn finish(&mut self) {
        self.done = true;
    }

    /// Asks for the keys with their records ([`Keys::entries`]): each footer's keys then come
    /// with their sequence numbers, from its location table (one more read per key block).
    pub(super) fn with_records(mut self) -> Self {
        self.with_records = true;
        self
    }
}

/// Gives `keys` the map of its file's location table: the one its handle keeps, or read now
/// (its table, once for the file) and kept. A table that cannot be read or does not verify
/// gives no map: the keys' records then tell their sequence numbers, as the listing found them
/// before (its damage is `verify`'s to report).
fn give_blocks<S: FooterSource>(keys: &mut SortedKeys<S>, slot: &OnceLock<Arc<BlockLocations>>) {
    let map = match slot.get() {
        Some(map) => map.clone(),
        None => match keys.read_blocks() {
            Ok(Some(map)) => slot.get_or_init(|| Arc::new(map)).clone(),
            Ok(None) | Err(_) => return,
        },
    };
    keys.set_blocks(map);
}

impl Iterator for Keys<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        self.next_entry(false).map(|r| r.map(|(key, _)| key))
    }
}

impl DoubleEndedIterator for Keys<'_> {
    fn next_back(&mut self) -> Option<Result<Vec<u8>>> {
        self.next_entry(true).map(|r| r.map(|(key, _)| key))
    }
}

impl FusedIterator for Keys<'_> {}
