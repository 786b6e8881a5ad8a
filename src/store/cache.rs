//! The read cache: verified bytes kept in memory, shared by every reader of a store.
//!
//! One bounded, concurrent cache ([`quick_cache`], sharded, scan-resistant: a new entry starts
//! in a small cold queue and only a second hit promotes it, so one pass over many values does
//! not push the hot ones out) holds these kinds of [`Part`] of a record:
//!
//! - a value of up to 8 MiB **whole**: its record's sequence number (8 bytes: the value's version and
//!   time, for `Store::metadata`), its key, then its bytes as `get` returns them (verified,
//!   decompressed): the key, because the index keeps only a fingerprint of it and a reader must
//!   tell whose value it found;
//! - the **key** of a larger record (after its sequence number), for the same reasons;
//! - a **sector of a value's chunk crc table** (the file's 512-byte sector that holds the crcs
//!   a read needed: what a direct read of them fetches anyway), for values whose reads fetch
//!   their crcs apart from their chunks: the next range read nearby (the sector's up to 128
//!   crcs cover 512 KiB of value) is one disk round trip;
//! - the **frame table** of a compressed value (its header and a chunk of entries);
//! - a **piece** of a larger value: [`PIECE`] (64 KiB) of its stored bytes, verified, or a
//!   single 4 KiB **chunk** of them, as a range read fetched it (`store/read/pieces.rs`);
//! - **footer bytes** of a sealed file (trailer, tree nodes, key blocks, runs of location
//!   entries), verified, kept by listings (`store/list.rs`), so that a listing of keys listed
//!   before reads nothing from disk. A footer is written once, at the seal, and never again, so
//!   the argument below holds for them too (keyed by file id and footer offset).
//!
//! # Why an entry can never be stale
//!
//! Entries are keyed by where the bytes live: file id and record offset (and the part). The
//! bytes at a place never change while a store is open once a reader can reach them: a record
//! enters the index only once it is whole (a streamed blob's head, rewritten at `finish`,
//! before), a block of a segment is written once (docs/design.md, "A block is written once"),
//! and later writes to a file go after its records (copies, the footer, zeroes ahead). And file
//! ids are never reused by a `Store`: every id, a blob file's (`AppendGuard::take_file_ids`) or a
//! new log segment's (`AppendGuard::make_room`), comes from `segment::allocate_ids` on
//! `Appender::next_segment`, which then only moves up (checked arithmetic, no wrap), starting
//! above every id found at open; a file that is removed (compaction, a failed blob put, an
//! unused spare) takes its id with it. An overwrite, a delete or a
//! compaction move changes the index entry, so the next read looks up another key (or none)
//! and the old entry is never served again: it only waits to be evicted. The cache lives and
//! dies with its `Store`, so a reopen, which could find a file under an old id, starts empty
//! (the warm-up, `store/warm.rs`, then fills it from the files of that open, by the same keys).
//!
//! Only verified bytes go in: a value after its chunk crcs (and, compressed, its frames' crcs)
//! checked out, or the value a write has just written (the caller's own bytes, the record's,
//! kept once the write is acknowledged: `Reader::keep_written`); a frame table after its decoder
//! checked it. A chunk crc sector is the checksums
//! themselves: each one is checked against its chunk when a read uses it, so a damaged crc can
//! only fail a read, never let damaged data through; and a read that fails with crcs from the
//! cache drops them and reads again from the file (`Reader::read_stored_at`), so a crc damaged
//! in transit does not outlive one read.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use quick_cache::sync::Cache as QuickCache;
use quick_cache::{Lifecycle, OptionsBuilder, Weighter};

use super::compress::CachedTable;
use crate::index::IndexEntry;

/// Bytes counted per entry on top of its payload: the key and value slots, the cache's own
/// bookkeeping and the shared buffer's header.
pub(super) const ENTRY_OVERHEAD: u64 = 128;

/// The value size the shard count is chosen for: a shard holds at least four of them.
const SHARD_VALUE: u64 = 1 << 20;

/// The largest value kept whole, however large the cache: what a get reads in one read
/// (`read::WHOLE_GET_READ`). Held whole, a value is handed out as the cache's own buffer
/// (`get_bytes`, `get_cached`: no copy); a larger one is kept in [`PIECE`]s.
const MAX_WHOLE_VALUE: u64 = 8 << 20;

/// Large values (those not kept whole) are kept in pieces of this many stored bytes, aligned to
/// the value's start: 16 of its 4 KiB crc chunks, verified when read, so that a piece served
/// from the cache needs no check and no read.
pub(super) const PIECE: u64 = 64 << 10;

/// Crcs are cached by file sector of this many bytes (the direct-read alignment here): a miss
/// reads no more than a direct read of the few crcs it needs would.
pub(super) const CRC_SECTOR: u64 = 512;

/// Which part of a record an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Part {
    /// The whole value, as readers see it.
    Value,
    /// The crcs in file sector `n` (file bytes `[n · CRC_SECTOR, (n + 1) · CRC_SECTOR)`, the
    /// part of them that lies in the record's chunk crc table).
    Crcs(u64),
    /// The frame table of a compressed value.
    Frames,
    /// The key of a record too large to be read whole when its key is checked: kept so that
    /// the next read of it tells its key without a disk read.
    Key,
    /// Stored bytes `[n · PIECE, (n + 1) · PIECE)` (or to their end) of a value too large to
    /// be kept whole, verified.
    Piece(u64),
    /// Stored bytes `[n · CHUNK_SIZE, (n + 1) · CHUNK_SIZE)` (or to their end) of a value too
    /// large to be kept whole, verified: a chunk a range read fetched, kept at the granularity
    /// it was read (a random range does not fetch its whole piece: `store/read/pieces.rs`).
    Chunk(u64),
    /// `n` bytes of a sealed file's footer at the key's offset (its trailer, the window with
    /// the fence-key tree's root, a tree node, a key block or a run of location entries),
    /// verified: kept by listings (`store/list.rs`, `segment::FooterSource`).
    Footer(u64),
}

/// Where the cached bytes live: file id, record offset and the part of the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Key {
    file: u64,
    offset: u64,
    part: Part,
}

impl Key {
    /// The key of `len` footer bytes at `at` of file `file`.
    pub(super) fn footer(file: u64, at: u64, len: u64) -> Key {
        Key {
            file,
            offset: at,
            part: Part::Footer(len),
        }
    }

    /// The key of `part` of the record `entry` points to.
    pub(super) fn of(entry: &IndexEntry, part: Part) -> Key {
        Key {
            file: entry.segment,
            offset: entry.offset,
            part,
        }
    }
}

/// A cached payload.
#[derive(Debug, Clone)]
pub(super) enum Cached {
    /// A whole value or a block of chunk crcs.
    Bytes(Bytes),
    /// A frame table.
    Frames(Arc<CachedTable>),
}

impl Cached {
    fn payload_len(&self) -> u64 {
        match self {
            Cached::Bytes(b) => b.len() as u64,
            Cached::Frames(t) => t.bytes(),
        }
    }
}

#[derive(Debug, Clone)]
struct ByBytes;

impl Weighter<Key, Cached> for ByBytes {
    fn weight(&self, _key: &Key, val: &Cached) -> u64 {
        val.payload_len() + ENTRY_OVERHEAD
    }
}

/// Counts evictions: entries dropped to make room (and inserts the cache refused as too heavy,
/// which it reports the same way). quick_cache reports an entry replaced by an insert under its
/// own key as evicted too (two readers that missed the same value both keep it, or the warm-up
/// keeps one a reader kept): [`Cache::insert`] does not count those, so that the count says the
/// cache is full, which is what the warm-up stops on (`store/warm.rs`).
#[derive(Debug, Clone, Default)]
struct CountEvictions(Arc<AtomicU64>);

/// The keys one insertion evicted (the first [`Evicted::KEYS`]; the rest only counted).
#[derive(Default)]
struct Evicted {
    keys: [Option<Key>; Evicted::KEYS],
    count: u64,
}

impl Evicted {
    const KEYS: usize = 4;

    /// Evictions other than the entry `key` replaced.
    fn besides(&self, key: &Key) -> u64 {
        self.count - u64::from(self.keys.contains(&Some(*key)))
    }
}

impl Lifecycle<Key, Cached> for CountEvictions {
    type RequestState = Evicted;
    fn begin_request(&self) -> Evicted {
        Evicted::default()
    }
    fn on_evict(&self, state: &mut Evicted, key: Key, _val: Cached) {
        if let Some(slot) = state.keys.get_mut(state.count as usize) {
            *slot = Some(key);
        }
        state.count += 1;
    }
    fn end_request(&self, state: Evicted) {
        // Any request but `Cache::insert`'s, which counts its own (it knows the key it put).
        self.0.fetch_add(state.count, Ordering::Relaxed);
    }
}

type Inner = QuickCache<Key, Cached, ByBytes, std::hash::RandomState, CountEvictions>;

/// The store's read cache; a capacity of 0 makes every lookup miss and every insert a no-op.
pub(super) struct Cache {
    inner: Option<Inner>,
    capacity: u64,
    max_whole: u64,
    evictions: Arc<AtomicU64>,
}

/// What the cache did since open, for [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct CacheFigures {
    pub(super) hits: u64,
    pub(super) misses: u64,
    pub(super) evictions: u64,
    pub(super) bytes: u64,
    pub(super) capacity: u64,
    /// The memory available the capacity was sized from (`None`: set by the options).
    pub(super) available: Option<u64>,
}

impl Cache {
    /// A cache of at most `capacity` bytes, entries' overhead included.
    pub(super) fn new(capacity: u64) -> Cache {
        // Each shard has its own part of the capacity: keep a shard able to hold a few values
        // of up to 1 MiB (as many shards as the cores want, if the capacity allows), then keep
        // whole the values up to a quarter of a shard (at most an eighth of the capacity, and
        // 8 MiB), so that the largest entries are never refused and never crowd a shard.
        let shard_value = (capacity / 8).min(SHARD_VALUE);
        let by_size = (capacity / (4 * (shard_value + ENTRY_OVERHEAD))).max(1);
        let cores = std::thread::available_parallelism().map_or(4, |n| n.get()) as u64;
        // A power of two (the cache would round it up), and a capacity that it divides: each
        // shard gets `capacity / shards`, so that together they never exceed it (the cache may
        // halve the count, which keeps it a divisor).
        let wanted = by_size.min(cores * 4);
        let shards = 1u64 << (63 - wanted.leading_zeros());
        let max_whole = (capacity / 8)
            .min(MAX_WHOLE_VALUE)
            .min((capacity / shards / 4).saturating_sub(ENTRY_OVERHEAD))
            .max(shard_value);
        let evictions = Arc::new(AtomicU64::new(0));
        let inner = (capacity > 0).then(|| {
            let options = OptionsBuilder::new()
                .shards(shards as usize)
                .estimated_items_capacity((capacity / (4096 + ENTRY_OVERHEAD)).max(16) as usize)
                .weight_capacity(capacity - capacity % shards)
                .build()
                .expect("every option is set");
            QuickCache::with_options(
                options,
                ByBytes,
                std::hash::RandomState::new(),
                CountEvictions(evictions.clone()),
            )
        });
        Cache {
            inner,
            capacity,
            max_whole,
            evictions,
        }
    }

    /// Whether the value of `entry` is kept whole (small enough, and the cache is on).
    pub(super) fn holds_whole(&self, entry: &IndexEntry) -> bool {
        self.inner.is_some() && entry.value_len <= self.max_whole
    }

    /// Whether the value of `entry` is kept in pieces of [`PIECE`] stored bytes: too large to
    /// be kept whole, in a cache whose shards hold pieces as easily as whole values.
    pub(super) fn holds_pieces(&self, entry: &IndexEntry) -> bool {
        self.inner.is_some() && self.max_whole >= PIECE && entry.value_len > self.max_whole
    }

    /// Whether `bytes` more (in entries of about [`PIECE`] bytes) fit in the cache's free room
    /// less a sixteenth of its capacity (its shards fill unevenly): what a read that fetches
    /// more than it was asked for, to keep it, may take, so that it never evicts anything.
    pub(super) fn has_room(&self, bytes: u64) -> bool {
        let Some(inner) = &self.inner else {
            return false;
        };
        let pieces = bytes.div_ceil(PIECE);
        let wanted = bytes + pieces * ENTRY_OVERHEAD;
        inner.weight() + wanted <= self.capacity - self.capacity / 16
    }

    /// Whether the cache is on.
    pub(super) fn is_on(&self) -> bool {
        self.inner.is_some()
    }

    /// The entry under `key`, counting a hit or a miss (in its shard: no counter shared by
    /// all readers).
    pub(super) fn get(&self, key: &Key) -> Option<Cached> {
        self.inner.as_ref()?.get(key)
    }

    /// Whether the cache holds an entry under `key` (no hit or miss counted, nothing touched).
    pub(super) fn contains(&self, key: &Key) -> bool {
        self.inner.as_ref().is_some_and(|c| c.contains_key(key))
    }

    /// The bytes under `key` (a whole value or a crc sector), counting a hit or a miss.
    pub(super) fn get_bytes(&self, key: &Key) -> Option<Bytes> {
        match self.get(key)? {
            Cached::Bytes(b) => Some(b),
            Cached::Frames(_) => None,
        }
    }

    /// The bytes under `key` (a whole value or a crc sector), counting no hit or miss and
    /// touching nothing: for the store's own look (a second chance), not a reader's.
    pub(super) fn peek_bytes(&self, key: &Key) -> Option<Bytes> {
        match self.inner.as_ref()?.peek(key)? {
            Cached::Bytes(b) => Some(b),
            Cached::Frames(_) => None,
        }
    }

    /// Keeps `value` under `key`. Only verified bytes may be inserted (see the module's doc).
    pub(super) fn insert(&self, key: Key, value: Cached) {
        if let Some(inner) = &self.inner {
            let evicted = inner.insert_with_lifecycle(key, value).besides(&key);
            if evicted > 0 {
                self.evictions.fetch_add(evicted, Ordering::Relaxed);
            }
        }
    }

    /// Makes room in the cache's tables (not its weight) for `entries` more entries, so that
    /// inserting them does not grow the tables step by step (each growth rehashes a shard's
    /// table under its lock). What the warm-up inserts at open, many entries in a row, before
    /// it begins. Allocates the tables only: their slots are touched as entries come.
    pub(super) fn reserve(&self, entries: usize) {
        if let Some(inner) = &self.inner {
            inner.reserve(entries);
        }
    }

    /// Drops the entry under `key`, if any.
    pub(super) fn remove(&self, key: &Key) {
        if let Some(inner) = &self.inner {
            inner.remove(key);
        }
    }

    /// The whole values the cache holds, as (file id, record offset, the cached bytes), up to
    /// `max_bytes` of them: first those whose buffer is at an address in `first` (the table
    /// of hot values' buffers, [`crate::index::HotTable::buffers`]), then the others, each
    /// group in the cache's order; and whether they are all of them (none left out by
    /// `max_bytes`).
    pub(super) fn whole_values(
        &self,
        max_bytes: u64,
        first: &std::collections::HashSet<usize>,
    ) -> (Vec<(u64, u64, Bytes)>, bool) {
        let Some(inner) = &self.inner else {
            return (Vec::new(), true);
        };
        let mut total = 0u64;
        let mut out = Vec::new();
        // With nothing to put first, one pass.
        let passes: &[bool] = if first.is_empty() {
            &[false]
        } else {
            &[true, false]
        };
        for &hot in passes {
            for (key, value) in inner.iter() {
                if let (Part::Value, Cached::Bytes(b)) = (key.part, value) {
                    if first.contains(&(b.as_ptr() as usize)) != hot {
                        continue;
                    }
                    total += b.len() as u64;
                    if total > max_bytes {
                        return (out, false);
                    }
                    out.push((key.file, key.offset, b));
                }
            }
        }
        (out, true)
    }

    /// Hits, misses, evictions and bytes held since open.
    pub(super) fn figures(&self) -> CacheFigures {
        CacheFigures {
            hits: self.inner.as_ref().map_or(0, |c| c.hits()),
            misses: self.inner.as_ref().map_or(0, |c| c.misses()),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes: self.inner.as_ref().map_or(0, |c| c.weight()),
            capacity: self.capacity,
            available: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(segment: u64, offset: u64, len: u64) -> IndexEntry {
        IndexEntry {
            segment,
            offset,
            value_len: len,
            stored_len: len,
            key_len: 1,
            flags: 0,
            expires_at: None,
        }
    }

    #[test]
    fn off_holds_nothing() {
        let c = Cache::new(0);
        let k = Key::of(&entry(1, 64, 10), Part::Value);
        c.insert(k, Cached::Bytes(Bytes::from_static(b"0123456789")));
        assert!(c.get(&k).is_none());
        assert!(!c.holds_whole(&entry(1, 64, 10)));
        assert_eq!(c.figures(), CacheFigures::default());
    }

    #[test]
    fn the_weight_counts_overhead_and_stays_under_capacity() {
        let cap = 1 << 20;
        let c = Cache::new(cap);
        assert!(c.holds_whole(&entry(1, 0, cap / 8)));
        assert!(!c.holds_whole(&entry(1, 0, cap / 8 + 1)));
        for i in 0..10_000u64 {
            let k = Key::of(&entry(1, i * 4096, 1000), Part::Value);
            c.insert(k, Cached::Bytes(Bytes::from(vec![i as u8; 1000])));
            assert!(c.figures().bytes <= cap);
        }
        let f = c.figures();
        assert!(f.evictions > 0, "{f:?}");
        assert!(f.bytes > cap / 2, "{f:?}");
        // Every entry is counted with its overhead.
        assert_eq!(f.bytes % (1000 + ENTRY_OVERHEAD), 0);
        // A value of the largest size still fits in a shard.
        let big = Key::of(&entry(2, 0, cap / 8), Part::Value);
        c.insert(
            big,
            Cached::Bytes(Bytes::from(vec![1u8; (cap / 8) as usize])),
        );
        assert!(c.get(&big).is_some());
    }

    #[test]
    fn a_value_kept_again_under_its_own_key_is_no_eviction() {
        // Two readers that missed the same value both keep it (or the warm-up keeps one a
        // reader kept): the second replaces the first, which quick_cache reports as evicted.
        // The warm-up stops at the first eviction, so this must not count as one.
        let c = Cache::new(1 << 20);
        let k = Key::of(&entry(1, 4096, 1000), Part::Value);
        for _ in 0..3 {
            c.insert(k, Cached::Bytes(Bytes::from(vec![7u8; 1000])));
        }
        assert_eq!(c.figures().evictions, 0, "{:?}", c.figures());
        assert_eq!(c.figures().bytes, 1000 + ENTRY_OVERHEAD);
        // Evictions to make room are still counted, one by one.
        for i in 0..2_000u64 {
            let k = Key::of(&entry(2, i * 4096, 1000), Part::Value);
            c.insert(k, Cached::Bytes(Bytes::from(vec![i as u8; 1000])));
        }
        let f = c.figures();
        let held = f.bytes / (1000 + ENTRY_OVERHEAD);
        assert!(f.evictions > 0, "{f:?}");
        assert_eq!(f.evictions + held, 2_001, "{f:?}");
    }

    #[test]
    fn whole_values_up_to_8_mib_in_a_large_cache_and_pieces_above() {
        let c = Cache::new(4 << 30);
        assert!(c.holds_whole(&entry(1, 0, 8 << 20)));
        assert!(!c.holds_whole(&entry(1, 0, (8 << 20) + 1)));
        assert!(c.holds_pieces(&entry(1, 0, (8 << 20) + 1)));
        assert!(!c.holds_pieces(&entry(1, 0, 8 << 20)));
        // A cache whose largest entry (an eighth of it) is under a piece keeps no pieces.
        let small = Cache::new(256 << 10);
        assert!(!small.holds_whole(&entry(1, 0, (32 << 10) + 1)));
        assert!(!small.holds_pieces(&entry(1, 0, 1 << 20)));
        // The largest whole value fits in its shard, whatever the capacity.
        for cap in [1 << 20, 16 << 20, 64 << 20, 1 << 30] {
            let c = Cache::new(cap);
            let k = Key::of(&entry(2, 0, c.max_whole), Part::Value);
            c.insert(k, Cached::Bytes(Bytes::from(vec![0; c.max_whole as usize])));
            assert!(c.get(&k).is_some(), "capacity {cap}: {}", c.max_whole);
            assert!(c.max_whole <= cap / 8, "capacity {cap}: {}", c.max_whole);
        }
    }

    #[test]
    fn room_is_the_free_capacity_less_a_sixteenth() {
        let c = Cache::new(1 << 20);
        assert!(c.has_room(PIECE));
        assert!(!c.has_room(1 << 20));
        for i in 0..14u64 {
            let k = Key::of(&entry(1, i * 4096, 1000), Part::Piece(i));
            c.insert(k, Cached::Bytes(Bytes::from(vec![0; PIECE as usize])));
        }
        // 14 pieces of 64 KiB: 896 KiB and their overhead, in a 1 MiB cache.
        assert!(c.has_room(PIECE - 4096), "{:?}", c.figures());
        assert!(!c.has_room(2 * PIECE), "{:?}", c.figures());
        assert!(!Cache::new(0).has_room(1));
    }

    #[test]
    fn parts_and_places_are_distinct_keys() {
        let c = Cache::new(1 << 20);
        let e = entry(3, 4096, 10);
        c.insert(
            Key::of(&e, Part::Value),
            Cached::Bytes(Bytes::from_static(b"v")),
        );
        assert!(c.get(&Key::of(&e, Part::Crcs(0))).is_none());
        assert!(c.get(&Key::of(&entry(3, 8192, 10), Part::Value)).is_none());
        assert!(c.get(&Key::of(&entry(4, 4096, 10), Part::Value)).is_none());
        assert_eq!(c.get_bytes(&Key::of(&e, Part::Value)).unwrap(), &b"v"[..]);
        let f = c.figures();
        assert_eq!((f.hits, f.misses), (1, 3));
    }
}
