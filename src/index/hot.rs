//! The values of hot keys, by key hash: what a warm get of a small value reads instead of the
//! index's entries and the read cache's table.
//!
//! # Why
//!
//! A warm get through the index and the read cache touches the index's shard (its lock and its
//! entries), the cache's table (a hash of the record's place, its shard lock, its slot), the
//! cached buffer's shared header (a reference count) and the value: five or six cache lines
//! from all over memory, and four atomic writes to lines that every reader of a hot key shares.
//! LMDB's get walks one tree whose upper levels stay in the CPU's cache. A slot here is found
//! from the key's hash alone: one line for the slot, then the entry and its value, and no
//! write to any line another reader touches ([`ArcSwapOption`]'s loads go through a per-thread
//! debt slot; the hit counters are per thread).
//!
//! # Why a slot is never stale
//!
//! A slot holds the value of one key at one record (`place`). It is filled only by
//! [`Index::keep_hot`](super::Index::keep_hot), which holds its shard's read lock while it
//! checks that the index still names that record as the key's live one and while it fills the
//! slot; every change of the index's entries for a hash (a write, a delete, a compaction move,
//! a resolution) makes the hash's slots unreachable under the shard's write lock, before the
//! change is visible to anyone (`Index::forget_hot`, [`HotTable::forget`]: their tag becomes
//! `!hash`, and a reader follows only a tag equal to its key's hash). So a slot is filled either
//! before a change (and hidden by it) or after it (and then only with what the change left
//! live): once a write's index update is done, no reader finds the value it replaced. A reader
//! that read the tag while a change is under way sees the state before the change, which no one
//! has seen past yet (the change's lock is still held, and its write not yet acknowledged).
//!
//! A key's hash chooses a bucket of two slots, and a fill takes the slot already holding the
//! hash, else an empty one, else the one a bit of the hash names: two keys read often whose
//! hashes fall to one bucket both stay (direct-mapped, 14 % of YCSB C's gets on 200,000 keys
//! refilled a slot another key had taken). Each slot keeps the hash of its entry as a hint, read
//! before the entry, so that a reader dereferences no other key's entry; the entry keeps the
//! whole hash and the key, and a reader compares both, so a slot only ever answers for its own
//! key.
//!
//! # Memory
//!
//! The table is off below [`MIN_CACHE`] of read cache, and takes a thirty-second of the cache's
//! capacity otherwise (the cache keeps the rest: together they stay within
//! `Options::cache_capacity`). Every entry counts its buffer's whole length plus
//! [`ENTRY_OVERHEAD`], even when the read cache holds the same buffer (shared, not copied): the
//! count can only overstate. Slots are allocated in chunks as they are first filled, so an idle
//! store costs nothing. A slot's entry is replaced by the next fill of another key that falls
//! to it (a full table still takes a fill whose slot's entry weighs as much): the table keeps
//! the keys read most recently, among those the read cache kept (it is filled from the cache's
//! hits, never from a disk read: one pass over many values does not touch it). Writes do not
//! fill it: a fill stores into an `ArcSwap`, which visits every reader thread's debt slots, a
//! cost the write path paid for more than the next read saved.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;
use bytes::Bytes;

use super::prefetch::prefetch;

/// Caches smaller than this have no table of hot values (a test's or a tiny store's).
pub const MIN_CACHE: u64 = 16 << 20;

/// The table takes this fraction of the cache's capacity: small, because the cache counts
/// the bytes the table shares with it twice, and the cache's own hit ratio is what a store
/// larger than memory lives on.
const SHARE: u64 = 32;

/// The largest value kept in a slot: small values are those whose get the lookups dominate.
pub const MAX_HOT_VALUE: usize = 16 << 10;

/// Bytes counted per entry on top of its buffer: the slot, the entry and the `Arc`'s counts.
pub const ENTRY_OVERHEAD: u64 = 104;

/// Slots are allocated this many at a time.
const CHUNK: usize = 4096;

/// The most slots a table has (64 MiB of buckets once all are allocated: a bucket of two
/// 24-byte slots takes a 64-byte cache line).
const MAX_SLOTS: usize = 1 << 21;

/// Slots per bucket: a key may sit in either slot of its bucket, so that two keys read often
/// whose hashes fall to one bucket do not take turns replacing each other.
const WAYS: usize = 2;

/// Hit counters, one per group of threads, each on its own cache line.
const STRIPES: usize = 16;

/// One kept value: the key hashing to `hash` (bytes `key_start..key_end` of `bytes`), whose
/// live record has sequence number `seq`; the value is `bytes[key_end..]`.
#[derive(Debug)]
struct Entry {
    hash: u64,
    seq: u64,
    key_start: usize,
    key_end: usize,
    bytes: Bytes,
}

impl Entry {
    fn weight(&self) -> u64 {
        self.bytes.len() as u64 + ENTRY_OVERHEAD
    }
}

/// One slot: the hash of the key whose entry it holds (a hint, read before the entry so that a
/// reader looks at no entry of another key's; the entry's own hash decides), and the entry.
#[derive(Debug, Default)]
struct Slot {
    tag: AtomicU64,
    /// Where the entry's bytes start (the key), for a prefetch issued with the entry's load: a
    /// hint only, never dereferenced (it may outlive the bytes it names).
    hint: AtomicUsize,
    /// Made at the slot's first fill: a slot never filled has none to drop. Dropping an
    /// `ArcSwap` visits every thread's arc-swap debt slots, and most of a large table's slots
    /// may never be filled (a close dropped 1.4 million of them for 200 000 keys).
    entry: OnceLock<ArcSwapOption<Entry>>,
}

/// A bucket's slots, on one cache line of their own: a reader that looks at both slots' tags
/// (and then at the hint of the one that matches) touches one line.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Bucket([Slot; WAYS]);

#[repr(align(128))]
#[derive(Debug, Default)]
struct Counter(AtomicU64);

/// The table of hot values: slots chosen by key hash (see the module's doc).
#[derive(Debug)]
pub struct HotTable {
    chunks: Box<[OnceLock<Box<[Bucket]>>]>,
    bucket_bits: u32,
    budget: u64,
    held: AtomicU64,
    hits: Box<[Counter]>,
}

/// What a fill asks to keep: the key's record, its sequence number and the buffer holding the
/// key (bytes `key_start..key_end`) followed by the value.
#[derive(Debug, Clone)]
pub struct HotValue {
    /// File id and record offset of the key's live record.
    pub place: (u64, u64),
    /// The record's sequence number.
    pub seq: u64,
    /// The key and the value, the key at `key_start..key_end`, the value after it.
    pub bytes: Bytes,
    /// Where the key starts in `bytes`.
    pub key_start: usize,
    /// Where the key ends (and the value starts) in `bytes`.
    pub key_end: usize,
}

impl HotTable {
    /// A table for a read cache of `cache_capacity` bytes, or `None` if the cache is too small
    /// to spare a thirty-second of it.
    pub fn for_cache(cache_capacity: u64) -> Option<HotTable> {
        if cache_capacity < MIN_CACHE {
            return None;
        }
        let budget = Self::share_of(cache_capacity);
        // Four slots per KiB of budget: while 1 KiB values fill the budget, three keys falling
        // to one bucket (the third's fill replaces one of the others) are rare.
        let wanted = ((budget >> 8) as usize).clamp(CHUNK, MAX_SLOTS);
        let slots = 1usize << (usize::BITS - 1 - wanted.leading_zeros());
        Some(HotTable {
            chunks: (0..slots / CHUNK).map(|_| OnceLock::new()).collect(),
            bucket_bits: (slots / WAYS).trailing_zeros(),
            budget,
            held: AtomicU64::new(0),
            hits: (0..STRIPES).map(|_| Counter::default()).collect(),
        })
    }

    /// The bytes a table takes of a read cache of `cache_capacity` bytes (0: none).
    pub fn share_of(cache_capacity: u64) -> u64 {
        if cache_capacity < MIN_CACHE {
            0
        } else {
            cache_capacity / SHARE
        }
    }

    /// The bucket of `hash` (its [`WAYS`] slots, in one cache line), if its chunk was allocated (`alloc`:
    /// allocate it if not).
    fn bucket(&self, hash: u64, alloc: bool) -> Option<&[Slot]> {
        // A multiplicative hash of the whole hash: the index's shards and fingerprints use its
        // top 40 bits, and tests keep only a few of them.
        let b = (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bucket_bits)) as usize;
        let per_chunk = CHUNK / WAYS;
        let chunk = &self.chunks[b / per_chunk];
        let buckets = if alloc {
            chunk.get_or_init(|| (0..per_chunk).map(|_| Bucket::default()).collect())
        } else {
            chunk.get()?
        };
        Some(&buckets[b % per_chunk].0)
    }

    /// Calls `f` with the sequence number, buffer and value offset of the value of `key`
    /// (hashing to `hash`) if a slot holds it; `None` otherwise. The caller must hold no lock
    /// that a fill takes.
    pub fn with<R>(
        &self,
        hash: u64,
        key: &[u8],
        f: impl FnOnce(u64, &Bytes, usize) -> R,
    ) -> Option<R> {
        for slot in self.bucket(hash, false)? {
            if slot.tag.load(Ordering::Acquire) != hash {
                continue;
            }
            prefetch(slot.hint.load(Ordering::Relaxed));
            let Some(entry) = slot.entry.get() else {
                continue;
            };
            let guard = entry.load();
            let Some(e) = guard.as_ref() else {
                continue;
            };
            if e.hash != hash || &e.bytes[e.key_start..e.key_end] != key {
                continue;
            }
            self.hits[stripe()].0.fetch_add(1, Ordering::Relaxed);
            return Some(f(e.seq, &e.bytes, e.key_end));
        }
        None
    }

    /// Keeps `value` as the value of the key hashing to `hash`. The caller holds the key's
    /// index shard's read lock and checked that `value.place` is the key's live record.
    pub(super) fn fill(&self, hash: u64, value: HotValue) {
        if value.bytes.len() - value.key_end > MAX_HOT_VALUE {
            return;
        }
        let hint = value.bytes.as_ptr() as usize + value.key_start;
        let entry = Arc::new(Entry {
            hash,
            seq: value.seq,
            key_start: value.key_start,
            key_end: value.key_end,
            bytes: value.bytes,
        });
        let weight = entry.weight();
        let Some(bucket) = self.bucket(hash, true) else {
            return;
        };
        // The slot already holding the hash's entry (live or forgotten), else an empty one, else
        // the one a bit of the hash names (fixed per key: two keys of a bucket settle in its
        // two slots).
        let tags: [u64; WAYS] = std::array::from_fn(|w| bucket[w].tag.load(Ordering::Relaxed));
        let way = (0..WAYS)
            .find(|&w| tags[w] == hash || tags[w] == !hash)
            .or_else(|| {
                (0..WAYS).find(|&w| bucket[w].entry.get().is_none_or(|e| e.load().is_none()))
            })
            .unwrap_or((hash >> 7) as usize % WAYS);
        let slot = &bucket[way];
        // The entry it replaces frees its weight: a full table still takes a fill whose slot
        // holds as much (it keeps the keys read most recently, not the first ones it met).
        let cell = slot.entry.get_or_init(ArcSwapOption::empty);
        let current = cell.load();
        let freed = current.as_ref().map_or(0, |e| e.weight());
        let grows = weight.saturating_sub(freed);
        if grows > 0 && self.held.fetch_add(grows, Ordering::Relaxed) + grows > self.budget {
            self.held.fetch_sub(grows, Ordering::Relaxed);
            return;
        }
        // Another key's fill or forget may change the slot meanwhile (another shard's lock):
        // then this fill is dropped. The tag follows the entry: a reader that finds the tag
        // before the entry sees an entry it checks, or none.
        let previous = cell.compare_and_swap(&current, Some(entry));
        let swapped = previous.as_ref().map(Arc::as_ptr) == current.as_ref().map(Arc::as_ptr);
        if !swapped {
            self.held.fetch_sub(grows, Ordering::Relaxed);
            return;
        }
        slot.hint.store(hint, Ordering::Relaxed);
        slot.tag.store(hash, Ordering::Release);
        if freed > weight {
            self.held.fetch_sub(freed - weight, Ordering::Relaxed);
        }
    }

    /// Makes the slots of `hash`'s bucket that hold the value of a key hashing to `hash`
    /// unreachable: their tag becomes `!hash`, which no reader of `hash` follows. The caller
    /// holds the index shard's write lock of `hash`, so no fill for `hash` runs meanwhile, and
    /// every slot that a fill for `hash` made bears `hash` until now (a fill sets the tag after
    /// its entry, both under the shard's read lock); another key's fill may replace a slot's
    /// entry and tag meanwhile, which hides the entry as well.
    ///
    /// Only the tag is written: no entry is swapped, so a write pays no visit of every reader
    /// thread's arc-swap debts (what a store or swap of an `ArcSwap` does) under the locks it
    /// holds. The forgotten entry stays counted until a fill takes its slot (the key's next one
    /// takes it first).
    pub(super) fn forget(&self, hash: u64) {
        let Some(bucket) = self.bucket(hash, false) else {
            return;
        };
        for slot in bucket {
            if slot.tag.load(Ordering::Relaxed) == hash {
                slot.tag.store(!hash, Ordering::Release);
            }
        }
    }

    /// The addresses of the buffers the table's live slots hold (a slot whose tag is its
    /// entry's hash): what a record of the hot set writes first, since the table keeps the keys
    /// read again most recently. A snapshot, by address only (never dereferenced): a buffer
    /// freed meanwhile may leave its address here. One pass over the allocated slots.
    pub fn buffers(&self) -> std::collections::HashSet<usize> {
        let mut held = std::collections::HashSet::new();
        for chunk in self.chunks.iter().filter_map(OnceLock::get) {
            for slot in chunk.iter().flat_map(|b| &b.0) {
                let Some(entry) = slot.entry.get() else {
                    continue;
                };
                let tag = slot.tag.load(Ordering::Acquire);
                if let Some(e) = entry.load().as_ref()
                    && e.hash == tag
                {
                    held.insert(e.bytes.as_ptr() as usize);
                }
            }
        }
        held
    }

    /// Bytes the kept entries count (buffers and overhead; a buffer the read cache shares is
    /// counted in full).
    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    /// The bytes the table may count (its share of the read cache's capacity).
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Gets answered from a slot since the table was made.
    pub fn hits(&self) -> u64 {
        self.hits.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
    }
}

/// This thread's hit counter.
fn stripe() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        s.get()
    })
}

#[cfg(test)]
mod tests {
    use super::super::{Index, IndexEntry, Placement};
    use super::*;

    const MIB: u64 = 1 << 20;

    fn entry(segment: u64, offset: u64) -> IndexEntry {
        IndexEntry {
            segment,
            offset,
            value_len: 5,
            stored_len: 5,
            key_len: 3,
            flags: 0,
            expires_at: None,
        }
    }

    /// A buffer laid out as the store keeps a value: 8 bytes of sequence number, the key, the
    /// value.
    fn value(e: &IndexEntry, key: &[u8], value: &[u8]) -> HotValue {
        let mut b = vec![0u8; 8];
        b.extend_from_slice(key);
        b.extend_from_slice(value);
        HotValue {
            place: e.place(),
            seq: e.offset,
            bytes: Bytes::from(b),
            key_start: 8,
            key_end: 8 + key.len(),
        }
    }

    fn get(index: &Index, key: &[u8]) -> Option<(u64, Vec<u8>)> {
        let hot = index.hot().expect("a table");
        hot.with(index.hash(key), key, |seq, b, at| (seq, b[at..].to_vec()))
    }

    fn index_with_table(bits: u32) -> Index {
        let index = Index::with_hash_bits(bits);
        index.keep_hot_values(HotTable::for_cache(64 * MIB).unwrap());
        index
    }

    #[test]
    fn a_small_cache_has_no_table_and_a_table_takes_a_thirty_second() {
        assert!(HotTable::for_cache(MIN_CACHE - 1).is_none());
        assert_eq!(HotTable::share_of(MIN_CACHE - 1), 0);
        let t = HotTable::for_cache(64 * MIB).unwrap();
        assert_eq!(
            (t.budget(), HotTable::share_of(64 * MIB)),
            (2 * MIB, 2 * MIB)
        );
        // Nothing is allocated or counted before a fill.
        assert!(t.chunks.iter().all(|c| c.get().is_none()));
        assert_eq!((t.held(), t.hits()), (0, 0));
    }

    #[test]
    fn only_a_live_entry_is_kept_and_every_change_of_its_hash_forgets_it() {
        let index = index_with_table(64);
        let (k, h) = (b"abc", index.hash(b"abc"));
        let e1 = entry(1, 64);
        // Not in the index: refused.
        index.keep_hot(h, value(&e1, k, b"one"));
        assert_eq!(get(&index, k), None);
        index.apply(h, None, Some(&e1));
        index.keep_hot(h, value(&e1, k, b"one"));
        assert_eq!(get(&index, k), Some((64, b"one".to_vec())));
        assert_eq!(get(&index, b"abd"), None);
        assert_eq!(index.hot().unwrap().hits(), 1);
        // An overwrite forgets it, and the old record can no longer be kept.
        let e2 = entry(2, 64);
        index.apply(h, Some(&e1), Some(&e2));
        assert_eq!(get(&index, k), None);
        index.keep_hot(h, value(&e1, k, b"one"));
        assert_eq!(get(&index, k), None);
        index.keep_hot(h, value(&e2, k, b"two"));
        assert_eq!(get(&index, k), Some((64, b"two".to_vec())));
        // A compaction move forgets it, whether or not it moves the entry.
        assert!(!index.replace_if(h, &e1, entry(3, 64)));
        assert_eq!(get(&index, k), None);
        index.keep_hot(h, value(&e2, k, b"two"));
        assert!(index.replace_if(h, &e2, entry(3, 64)));
        assert_eq!(get(&index, k), None);
        // A lazy put of the key goes ahead of its entry: the entry behind is not kept.
        let e3 = entry(3, 64);
        index.apply_write(h, 3, Placement::Front, &[], Some(&entry(4, 64)));
        index.keep_hot(h, value(&e3, k, b"three"));
        assert_eq!(get(&index, k), None);
        // Resolved, the newest is live and kept; a resolution forgets too.
        index.keep_hot(h, value(&entry(4, 64), k, b"four"));
        assert_eq!(get(&index, k), Some((64, b"four".to_vec())));
        index.resolve(h, 3, (4, 64), &[(3, 64)]);
        assert_eq!(get(&index, k), None);
        let hot = index.hot().unwrap();
        // A forgotten key's slot bears its hash inverted, and the key's next fill takes the
        // slot of its forgotten entry (nothing more is counted).
        let held = hot.held();
        index.keep_hot(h, value(&entry(4, 64), k, b"four"));
        assert_eq!(get(&index, k), Some((64, b"four".to_vec())));
        assert_eq!(hot.held(), held);
        // A delete forgets it.
        index.apply(h, Some(&entry(4, 64)), None);
        assert_eq!(get(&index, k), None);
    }

    #[test]
    fn keys_sharing_a_hash_answer_only_for_themselves() {
        // No hash bits: every key has the same hash, and so the same slot.
        let index = index_with_table(0);
        let (a, b) = (b"aaa", b"bbb");
        let h = index.hash(a);
        assert_eq!(h, index.hash(b));
        let (ea, eb) = (entry(1, 64), entry(1, 128));
        index.apply(h, None, Some(&ea));
        index.apply(h, None, Some(&eb));
        index.keep_hot(h, value(&ea, a, b"A"));
        assert_eq!(get(&index, a), Some((64, b"A".to_vec())));
        assert_eq!(get(&index, b), None);
        // The other key's fill takes the slot.
        index.keep_hot(h, value(&eb, b, b"B"));
        assert_eq!(get(&index, a), None);
        assert_eq!(get(&index, b), Some((128, b"B".to_vec())));
        // A write of either key forgets what the slot holds for the hash.
        index.apply(h, Some(&ea), Some(&entry(2, 64)));
        assert_eq!(get(&index, b), None);
    }

    #[test]
    fn keys_whose_hashes_fall_to_one_bucket_share_it() {
        let t = HotTable::for_cache(64 * MIB).unwrap();
        let bucket_of = |h: u64| t.bucket(h, true).unwrap().as_ptr();
        let key = |i: u64| format!("key{i}").into_bytes();
        let h0 = crate::index::key_hash(&key(0));
        // Three keys of the first key's bucket.
        let same: Vec<u64> = (0..)
            .filter(|&i| bucket_of(crate::index::key_hash(&key(i))) == bucket_of(h0))
            .take(3)
            .collect();
        let fill = |i: u64| {
            let mut b = key(i);
            let key_end = b.len();
            b.extend_from_slice(b"value");
            t.fill(
                crate::index::key_hash(&key(i)),
                HotValue {
                    place: (1, i),
                    seq: i,
                    bytes: Bytes::from(b),
                    key_start: 0,
                    key_end,
                },
            );
        };
        let kept = |i: u64| {
            t.with(crate::index::key_hash(&key(i)), &key(i), |seq, _, _| seq)
                .is_some_and(|seq| seq == i)
        };
        fill(same[0]);
        fill(same[1]);
        assert!(
            kept(same[0]) && kept(same[1]),
            "two keys of a bucket are both kept"
        );
        // A third takes one of the two slots: the one a bit of its hash names.
        fill(same[2]);
        assert!(kept(same[2]));
        assert!(kept(same[0]) != kept(same[1]));
        // A key is kept once: filled again, it replaces its own entry.
        let held = t.held();
        fill(same[2]);
        assert_eq!(t.held(), held);
        // Forgetting a hash hides only its own slot.
        t.forget(crate::index::key_hash(&key(same[2])));
        assert!(!kept(same[2]));
        assert!(kept(same[0]) || kept(same[1]));
    }

    #[test]
    fn buffers_are_those_of_live_slots() {
        let t = HotTable::for_cache(64 * MIB).unwrap();
        assert!(t.buffers().is_empty());
        let fill = |i: u64| {
            let bytes = Bytes::from(format!("key{i}value").into_bytes());
            let at = bytes.as_ptr() as usize;
            let h = crate::index::key_hash(format!("key{i}").as_bytes());
            t.fill(
                h,
                HotValue {
                    place: (1, i),
                    seq: i,
                    bytes,
                    key_start: 0,
                    key_end: 4,
                },
            );
            (h, at)
        };
        let (_, a) = fill(1);
        let (hb, b) = fill(2);
        assert_eq!(t.buffers(), [a, b].into_iter().collect());
        // A forgotten slot's buffer is no longer one of them.
        t.forget(hb);
        assert_eq!(t.buffers(), [a].into_iter().collect());
    }

    #[test]
    fn the_budget_bounds_what_is_kept_and_large_values_are_not() {
        let t = HotTable::for_cache(MIN_CACHE).unwrap();
        let budget = t.budget();
        let big = vec![7u8; MAX_HOT_VALUE];
        let (mut kept, mut last_kept) = (0, 0);
        for i in 0..(2 * budget / MAX_HOT_VALUE as u64) {
            let h = crate::index::key_hash(&i.to_le_bytes());
            let mut b = i.to_le_bytes().to_vec();
            b.extend_from_slice(&big);
            t.fill(
                h,
                HotValue {
                    place: (1, i),
                    seq: i,
                    bytes: Bytes::from(b),
                    key_start: 0,
                    key_end: 8,
                },
            );
            assert!(t.held() <= budget, "{} > {budget}", t.held());
            if t.with(h, &i.to_le_bytes(), |_, _, _| ()).is_some() {
                kept += 1;
                last_kept = i;
            }
        }
        assert!(
            kept > 0 && t.held() > budget / 2,
            "{kept} kept, {}",
            t.held()
        );
        // Full, it still takes a fill whose slot's entry weighs as much: the newest read wins.
        assert!(t.held() + MAX_HOT_VALUE as u64 > budget, "{}", t.held());
        let h = crate::index::key_hash(&last_kept.to_le_bytes());
        let full = t.held();
        let mut b = b"newerkey".to_vec();
        b.extend_from_slice(&big);
        t.fill(
            h,
            HotValue {
                place: (3, 0),
                seq: 9,
                bytes: Bytes::from(b),
                key_start: 0,
                key_end: 8,
            },
        );
        assert_eq!(t.with(h, b"newerkey", |seq, _, _| seq), Some(9));
        assert!(t.with(h, &last_kept.to_le_bytes(), |_, _, _| ()).is_none());
        assert_eq!(t.held(), full);
        // One byte more than the largest value kept: refused.
        let mut b = vec![0u8; 8];
        b.extend_from_slice(&vec![1u8; MAX_HOT_VALUE + 1]);
        let h = crate::index::key_hash(b"huge");
        t.fill(
            h,
            HotValue {
                place: (2, 0),
                seq: 0,
                bytes: Bytes::from(b),
                key_start: 0,
                key_end: 8,
            },
        );
        assert!(t.with(h, &[0u8; 8], |_, _, _| ()).is_none());
    }
}
