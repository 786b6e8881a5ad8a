//! Ordered listing: [`Store::range`] and [`Store::prefix`] yield the live keys of a range in
//! ascending byte order, by merging every file's sorted keys with those of the active segment
//! and keeping a key only if the index says it is current.
//!
//! **Sources.** Taken at the start (the *snapshot*), in this order: under the append lock, the
//! active segment's id, the end of its records and the keys of its records in the range, and the
//! id the next new file will get; then the table of open files. Each sealed file with an id below
//! that one is read through its footer ([`SortedKeys`]: a descent of its fence-key tree to the
//! start of the range, then its blocks in order; a file of version 1 reads its table whole). A
//! file whose footer a seal has submitted but not yet made durable is waited for (a sync), so that
//! its footer is on disk; a file open without a footer (a read-only store's unsealed segment, or
//! one whose recovery found the disk full) is scanned. The keys of records not yet published
//! (written, not acknowledged) are not listed, as `get` does not see them.
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
//! segment) and the key block the range starts in, then the blocks the range covers; the active
//! segment's keys in the range are copied under the append lock. A prefix listing of a few keys
//! reads about 12 KiB per file.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use super::Store;
use super::segments::SegmentHandle;
use crate::error::Result;
use crate::format::cursor::ByteSource;
use crate::format::scan::scan_segment;
use crate::index::IndexEntry;
use crate::io::aligned::BufPool;
use crate::io::file::SegmentFile;
use crate::segment::{SortedKeys, corruption, last_per_key, read_error};

/// A file's bytes through its shared handle, for [`SortedKeys`] and the scan.
struct FileBytes<'a> {
    file: Arc<SegmentFile>,
    pool: &'a BufPool,
    read_align: u64,
    len: u64,
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

/// Every `(file, record offset)` the sources name one key at.
type Places = Vec<(u64, u64)>;

/// Where the keys of one file (or of the active segment) come from.
enum Source<'a> {
    /// A sealed file's footer.
    Footer(Box<SortedKeys<FileBytes<'a>>>),
    /// Keys in memory, sorted (the active segment's, or a scanned file's), and the next one.
    Memory(std::vec::IntoIter<(Vec<u8>, u64)>),
}

impl Source<'_> {
    fn next(&mut self) -> Option<Result<(Vec<u8>, u64)>> {
        match self {
            Source::Footer(keys) => keys.next(),
            Source::Memory(keys) => keys.next().map(Ok),
        }
    }
}

/// The live keys of a range, in ascending byte order: what [`Store::range`], [`Store::prefix`]
/// and [`Store::keys`] return. Items are `Result`s: a footer that cannot be read or does not
/// verify is an error item ([`Error::Corruption`](crate::Error::Corruption) naming the file and
/// offset), after which the iterator ends.
#[must_use = "iterators are lazy: Keys lists nothing until it is iterated"]
pub struct Keys<'a> {
    store: &'a Store,
    sources: Vec<(u64, Source<'a>)>,
    /// The next key of each source, smallest first: (key, source, record offset).
    heap: BinaryHeap<Reverse<(Vec<u8>, usize, u64)>>,
    end: Bound<Vec<u8>>,
    prefix: Option<Vec<u8>>,
    /// Files whose keys the snapshot read.
    listed: HashSet<u64>,
    /// The active segment at the snapshot, and the end of its records then.
    active: Option<(u64, u64)>,
    /// An error met while starting, returned first.
    error: Option<crate::Error>,
    done: bool,
    /// Leave out the keys of a footer that fails to read instead of failing (`verify`).
    skip_damaged: bool,
}

impl std::fmt::Debug for Keys<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("files", &self.sources.len())
            .finish_non_exhaustive()
    }
}

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
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

impl Store {
    /// The live keys in `range`, in ascending byte order, read from the files' sorted footers
    /// (see docs/design.md, "Footer"): a descent of each file's fence-key tree to the start of
    /// the range, then only the key blocks the range covers. Keys written or deleted while the iterator
    /// runs may or may not appear; a key live throughout appears once.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// for k in ["a", "b", "c", "d"] {
    ///     store.put(k, "v")?;
    /// }
    /// store.delete("c")?;
    /// let keys: Vec<Vec<u8>> = store.range("b"..).collect::<podstore::Result<_>>()?;
    /// assert_eq!(keys, [b"b".to_vec(), b"d".to_vec()]);
    /// # Ok(()) }
    /// ```
    pub fn range<K: AsRef<[u8]> + ?Sized>(&self, range: impl RangeBounds<K>) -> Keys<'_> {
        let start = owned(range.start_bound().map(|k| k.as_ref()));
        let end = owned(range.end_bound().map(|k| k.as_ref()));
        Keys::new(self, start, end, None)
    }

    /// The live keys that start with `prefix`, in ascending byte order (see [`Store::range`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// for k in ["photo/2", "photo/1", "video/1", "photos"] {
    ///     store.put(k, "v")?;
    /// }
    /// let keys: Vec<Vec<u8>> = store.prefix("photo/").collect::<podstore::Result<_>>()?;
    /// assert_eq!(keys, [b"photo/1".to_vec(), b"photo/2".to_vec()]);
    /// # Ok(()) }
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Keys<'_> {
        let p = prefix.as_ref().to_vec();
        Keys::new(self, Bound::Included(p.clone()), Bound::Unbounded, Some(p))
    }
}

impl<'a> Keys<'a> {
    fn new(
        store: &'a Store,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
    ) -> Keys<'a> {
        Keys::with(store, start, end, prefix, false)
    }

    /// Every live key with its index entry, leaving out the keys of files whose footers cannot
    /// be read (`verify`, which reports those files' damage itself).
    pub(super) fn all_entries_skipping_damage(
        store: &'a Store,
    ) -> Result<Vec<(Vec<u8>, IndexEntry)>> {
        let mut keys = Keys::with(store, Bound::Unbounded, Bound::Unbounded, None, true);
        if let Some(e) = keys.error.take() {
            return Err(e);
        }
        let mut all = Vec::new();
        while let Some(item) = keys.next_inner()? {
            all.push(item);
        }
        Ok(all)
    }

    fn with(
        store: &'a Store,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        prefix: Option<Vec<u8>>,
        skip_damaged: bool,
    ) -> Keys<'a> {
        let mut r = Keys {
            store,
            sources: Vec::new(),
            heap: BinaryHeap::new(),
            end,
            prefix,
            listed: HashSet::new(),
            active: None,
            error: None,
            done: false,
            skip_damaged,
        };
        if let Err(e) = r.start(&start) {
            r.error = Some(e);
        }
        r
    }

    fn in_range(&self, key: &[u8]) -> bool {
        before_end(key, &self.end) && self.prefix.as_ref().is_none_or(|p| key.starts_with(p))
    }

    /// Takes the snapshot: the active segment's keys, then every file's sorted keys from `start`.
    fn start(&mut self, start: &Bound<Vec<u8>>) -> Result<()> {
        let inner = &self.store.inner;
        let (next_id, active) = {
            let log = inner.log.lock();
            let (end, prefix) = (&self.end, &self.prefix);
            let keep = |k: &[u8]| {
                after_start(k, start)
                    && before_end(k, end)
                    && prefix.as_ref().is_none_or(|p| k.starts_with(p))
            };
            (log.next_file_id(), log.active_keys(keep))
        };
        if let Some(mut a) = active {
            a.keys.sort_unstable();
            self.active = Some((a.id, a.data_end));
            self.push_source(a.id, Source::Memory(a.keys.into_iter()))?;
        }
        let shared = &inner.shared;
        let syncs_done = inner.log.progress().lock().syncs_done;
        let mut handles = shared.segments.snapshot();
        if handles
            .iter()
            .any(|(_, h)| h.sealed_at.is_some_and(|t| t > syncs_done))
        {
            // A seal's footer may still be on its way to the file: make it durable.
            inner.log.sync_all()?;
        }
        handles.retain(|(id, _)| *id < next_id);
        handles.sort_unstable_by_key(|(id, _)| *id);
        let pool = inner.reader.pool();
        let read_align = shared.profile.read_align;
        for (id, h) in handles {
            if h.sealed_at.is_none() && self.active.is_some_and(|(a, _)| a == id) {
                continue; // the active segment: its keys came from the log
            }
            match self.file_source(id, &h, start, pool, read_align) {
                Ok(source) => self.push_source(id, source)?,
                // Its keys are left out (`verify` reports the file's damage itself).
                Err(_) if self.skip_damaged => {
                    self.listed.insert(id);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The keys of file `id` from `start`: its sorted footer, or a scan when it has none.
    fn file_source(
        &self,
        id: u64,
        h: &SegmentHandle,
        start: &Bound<Vec<u8>>,
        pool: &'a BufPool,
        read_align: u64,
    ) -> Result<Source<'a>> {
        let src = FileBytes {
            len: h.file.len()?,
            file: h.file.clone(),
            pool,
            read_align,
        };
        let path = h.file.path().to_path_buf();
        let footer = if h.sealed_at.is_some() {
            SortedKeys::open(src, id, &path)?
        } else {
            None
        };
        Ok(match footer {
            Some(mut keys) => {
                keys.seek(start.as_ref().map(Vec::as_slice))?;
                Source::Footer(Box::new(keys))
            }
            None => Source::Memory(self.scanned(&h.file, id, start, pool, read_align)?),
        })
    }

    /// The keys in range of a file open without a footer, by a scan of its records.
    fn scanned(
        &self,
        file: &Arc<SegmentFile>,
        id: u64,
        start: &Bound<Vec<u8>>,
        pool: &'a BufPool,
        read_align: u64,
    ) -> Result<std::vec::IntoIter<(Vec<u8>, u64)>> {
        let src = FileBytes {
            len: file.len()?,
            file: file.clone(),
            pool,
            read_align,
        };
        let outcome = scan_segment(&src, id).map_err(|e| match e {
            crate::format::scan::ScanError::Io(e) => read_error(id, 0, file.path(), e),
            crate::format::scan::ScanError::Header(kind) => corruption(file.path(), id, 0, kind),
        })?;
        let mut keys: Vec<(Vec<u8>, u64)> = last_per_key(outcome.records)
            .into_iter()
            .filter(|e| after_start(&e.key, start) && self.in_range(&e.key))
            .map(|e| (e.key, e.offset))
            .collect();
        keys.sort_unstable();
        Ok(keys.into_iter())
    }

    fn push_source(&mut self, id: u64, source: Source<'a>) -> Result<()> {
        let i = self.sources.len();
        self.listed.insert(id);
        self.sources.push((id, source));
        self.refill(i)
    }

    /// Pops the smallest key with every place the sources name it at; refills from those
    /// sources.
    fn pop_key(&mut self) -> Result<Option<(Vec<u8>, Places)>> {
        let Some(Reverse((key, i, offset))) = self.heap.pop() else {
            return Ok(None);
        };
        let mut places = vec![(self.sources[i].0, offset)];
        self.refill(i)?;
        while self.heap.peek().is_some_and(|Reverse((k, _, _))| *k == key) {
            let Some(Reverse((_, j, offset))) = self.heap.pop() else {
                break;
            };
            places.push((self.sources[j].0, offset));
            self.refill(j)?;
        }
        Ok(Some((key, places)))
    }

    fn refill(&mut self, i: usize) -> Result<()> {
        match self.sources[i].1.next() {
            Some(Ok((key, offset))) => self.heap.push(Reverse((key, i, offset))),
            // A damaged footer: its keys are left out (its file is not unseen, so a key whose
            // entry is in it is not listed either).
            Some(Err(_)) if self.skip_damaged => {}
            Some(Err(e)) => return Err(e),
            None => {}
        }
        Ok(())
    }

    /// The index entry of `key`, found at `places`, if the key is live (see the module's
    /// "Liveness").
    fn live_entry(&self, key: &[u8], places: &[(u64, u64)]) -> Result<Option<IndexEntry>> {
        let inner = &self.store.inner;
        let index = &inner.shared.index;
        let candidates = index.candidates(index.hash(key), key.len() as u32);
        if candidates.unresolved() {
            // An entry that names one of the key's records may be an older version a lazy put
            // left (not resolved yet): the key's newest entry, read from the records, decides.
            return Ok(inner.reader.locate(key)?.map(|f| f.entry));
        }
        if let Some(e) = candidates
            .as_slice()
            .iter()
            .find(|e| places.contains(&e.place()))
        {
            return Ok(Some(*e));
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
        Ok(inner.reader.locate(key)?.map(|f| f.entry))
    }

    fn next_inner(&mut self) -> Result<Option<(Vec<u8>, IndexEntry)>> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        loop {
            let Some((key, places)) = self.pop_key()? else {
                return Ok(None);
            };
            if !self.in_range(&key) {
                // Every source is sorted: nothing after this key is in range either.
                return Ok(None);
            }
            if let Some(entry) = self.live_entry(&key, &places)? {
                return Ok(Some((key, entry)));
            }
        }
    }
}

impl Iterator for Keys<'_> {
    type Item = Result<Vec<u8>>;

    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if self.done {
            return None;
        }
        match self.next_inner() {
            Ok(Some((key, _))) => Some(Ok(key)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
