//! The in-memory index: key → where its value lives. Rebuilt at open from segment footers
//! (and from the recovery scan of a segment that was not sealed).
//!
//! Sharded so that readers and writers of different keys rarely meet on a lock; no lock of the
//! index is ever held across a syscall.
//!
//! Writes become visible through the [`PendingQueue`]: records are queued in log order when
//! appended and applied to the index in that order, after their fdatasync for durable writes
//! (so nobody reads a durable write that a crash could still take back) and at once for
//! buffered ones.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use crate::format::footer::FooterEntry;
use crate::segment::ValueSpan;

/// Where a live value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Segment id.
    pub segment: u64,
    /// Offset of the record in the segment.
    pub offset: u64,
    /// Length of the value as put (uncompressed): what readers see.
    pub value_len: u64,
    /// Length of the value bytes in the record: `value_len` unless the value is compressed
    /// ([`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED) in `flags`).
    pub stored_len: u64,
    /// Sequence number of the record.
    pub seq: u64,
    /// Key length (locates the value inside the record).
    pub key_len: u32,
    /// Record flags.
    pub flags: u16,
}

impl IndexEntry {
    /// The entry of the put that footer entry `e` of segment `segment` names.
    pub fn of_footer_entry(segment: u64, e: &FooterEntry) -> IndexEntry {
        debug_assert_eq!(e.kind, crate::format::record::RecordKind::Put);
        IndexEntry {
            segment,
            offset: e.offset,
            value_len: e.value_len,
            stored_len: e.stored_len,
            seq: e.seq,
            key_len: e.key.len() as u32,
            flags: e.flags,
        }
    }

    /// Where the stored value bytes lie, for [`crate::segment::read_value`].
    pub fn span(&self) -> ValueSpan {
        ValueSpan {
            segment: self.segment,
            record_offset: self.offset,
            value_offset: self.value_offset(),
            stored_len: self.stored_len,
        }
    }

    /// True when the value is stored compressed (as a frame table and lz4 frames).
    pub fn is_compressed(&self) -> bool {
        self.flags & crate::format::record::FLAG_COMPRESSED != 0
    }

    /// File offset of the first value byte.
    pub fn value_offset(&self) -> u64 {
        self.offset + crate::format::record::RECORD_HEADER_LEN as u64 + self.key_len as u64
    }

    /// Bytes of the whole record (header, key, stored value, chunk checksums).
    pub fn record_len(&self) -> u64 {
        crate::format::record::record_len(self.key_len as u64, self.stored_len)
    }
}

/// What the live entries of one segment take: the figures compaction chooses by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentUsage {
    /// Bytes of the records of live values (header, key, value, checksums).
    pub live_bytes: u64,
    /// Number of live values.
    pub live_records: u64,
}

type Shard = RwLock<HashMap<Box<[u8]>, IndexEntry>>;

const SHARDS: usize = 64;

/// The sharded key → [`IndexEntry`] map.
#[derive(Debug)]
pub struct Index {
    shards: Box<[Shard]>,
    len: AtomicU64,
    /// Sum of the lengths of the live keys.
    key_bytes: AtomicU64,
    /// Per segment, what its live entries take. Updated under the shard lock of the key that
    /// changes, so that the accounting of one key is never applied out of order.
    usage: Mutex<BTreeMap<u64, SegmentUsage>>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            shards: (0..SHARDS)
                .map(|_| RwLock::new(HashMap::default()))
                .collect(),
            len: AtomicU64::new(0),
            key_bytes: AtomicU64::new(0),
            usage: Mutex::new(BTreeMap::new()),
        }
    }
}

impl Index {
    fn shard(&self, key: &[u8]) -> &Shard {
        // The shard is chosen by crc32 (hardware-accelerated, unkeyed): keys crafted to collide
        // could crowd one shard's lock, but not slow its map, whose hasher is keyed per process.
        &self.shards[crc32fast::hash(key) as usize % SHARDS]
    }

    /// Makes room for `additional` more keys, spread over the shards (at open, before a
    /// segment's entries are loaded, so that the maps do not grow, and rehash, step by step).
    pub fn reserve(&self, additional: usize) {
        for shard in self.shards.iter() {
            shard
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .reserve(additional / SHARDS + 1);
        }
    }

    /// Sets the entry of `key` to `entry` unless the key has an entry with a higher or equal
    /// sequence number (loading footers at open). Returns whether it did. One lookup, and the
    /// key's allocation is reused.
    pub fn insert_if_newer(&self, key: Vec<u8>, entry: IndexEntry) -> bool {
        let key = key.into_boxed_slice();
        let key_len = key.len() as u64;
        let mut shard = self.shard(&key).write().unwrap_or_else(|p| p.into_inner());
        let old = match shard.entry(key) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if o.get().seq >= entry.seq {
                    return false;
                }
                Some(std::mem::replace(o.get_mut(), entry))
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(entry);
                self.len.fetch_add(1, Ordering::Relaxed);
                self.key_bytes.fetch_add(key_len, Ordering::Relaxed);
                None
            }
        };
        self.account(old.as_ref(), Some(&entry));
        true
    }

    /// Removes `key` if its entry is older than `seq` (a tombstone loaded at open). Returns
    /// false when the key has a newer entry, which the tombstone does not touch.
    pub fn remove_if_older(&self, key: &[u8], seq: u64) -> bool {
        let mut shard = self.shard(key).write().unwrap_or_else(|p| p.into_inner());
        match shard.get(key) {
            Some(e) if e.seq >= seq => false,
            Some(_) => {
                let old = shard.remove(key);
                self.len.fetch_sub(1, Ordering::Relaxed);
                self.key_bytes
                    .fetch_sub(key.len() as u64, Ordering::Relaxed);
                self.account(old.as_ref(), None);
                true
            }
            None => true,
        }
    }

    /// The entry of `key`.
    pub fn get(&self, key: &[u8]) -> Option<IndexEntry> {
        self.shard(key)
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .copied()
    }

    /// Sets the entry of `key`.
    pub fn insert(&self, key: &[u8], entry: IndexEntry) {
        let mut shard = self.shard(key).write().unwrap_or_else(|p| p.into_inner());
        let old = match shard.get_mut(key) {
            Some(e) => Some(std::mem::replace(e, entry)),
            None => {
                shard.insert(key.into(), entry);
                self.len.fetch_add(1, Ordering::Relaxed);
                self.key_bytes
                    .fetch_add(key.len() as u64, Ordering::Relaxed);
                None
            }
        };
        self.account(old.as_ref(), Some(&entry));
    }

    /// Removes `key`.
    pub fn remove(&self, key: &[u8]) -> Option<IndexEntry> {
        let mut shard = self.shard(key).write().unwrap_or_else(|p| p.into_inner());
        let old = shard.remove(key);
        if old.is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
            self.key_bytes
                .fetch_sub(key.len() as u64, Ordering::Relaxed);
            self.account(old.as_ref(), None);
        }
        old
    }

    /// Points `key` at `new` if it still points at `expected` (a value moved by compaction);
    /// returns whether it did. A key written or deleted since keeps its newer state.
    pub fn replace_if(&self, key: &[u8], expected: &IndexEntry, new: IndexEntry) -> bool {
        let mut shard = self.shard(key).write().unwrap_or_else(|p| p.into_inner());
        match shard.get_mut(key) {
            Some(e) if e == expected => {
                *e = new;
                self.account(Some(expected), Some(&new));
                true
            }
            _ => false,
        }
    }

    /// Moves the bytes of `old` out of, and those of `new` into, their segments' usage.
    fn account(&self, old: Option<&IndexEntry>, new: Option<&IndexEntry>) {
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = old
            && let Some(u) = usage.get_mut(&o.segment)
        {
            u.live_bytes -= o.record_len();
            u.live_records -= 1;
            if u.live_records == 0 {
                usage.remove(&o.segment);
            }
        }
        if let Some(n) = new {
            let u = usage.entry(n.segment).or_default();
            u.live_bytes += n.record_len();
            u.live_records += 1;
        }
    }

    /// What the live entries of `segment` take.
    pub fn usage(&self, segment: u64) -> SegmentUsage {
        self.usage
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&segment)
            .copied()
            .unwrap_or_default()
    }

    /// Usage of every segment that holds a live entry.
    pub fn usage_all(&self) -> BTreeMap<u64, SegmentUsage> {
        self.usage.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Sum of the lengths of the live keys.
    pub fn key_bytes(&self) -> u64 {
        self.key_bytes.load(Ordering::Relaxed)
    }

    /// Estimated heap bytes of the index: per entry the key, the entry, the boxed key's pointer
    /// and length, and the hash table's control byte, over a table at most 7/8 full.
    pub fn memory_bytes(&self) -> u64 {
        let per_entry =
            (std::mem::size_of::<IndexEntry>() + std::mem::size_of::<Box<[u8]>>() + 1) as u64;
        let capacity: u64 = self
            .shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|p| p.into_inner()).capacity() as u64)
            .sum();
        capacity * per_entry + self.key_bytes()
    }

    /// Number of live keys.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// True when there are no live keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of shards (for iteration).
    pub fn shard_count(&self) -> usize {
        SHARDS
    }

    /// A snapshot of the keys of shard `i`.
    pub fn shard_keys(&self, i: usize) -> Vec<Vec<u8>> {
        self.shards[i]
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .keys()
            .map(|k| k.to_vec())
            .collect()
    }
}

/// A write waiting to become visible.
#[derive(Debug)]
struct Pending {
    seq: u64,
    key: Box<[u8]>,
    /// `None` for a delete.
    entry: Option<IndexEntry>,
    /// Written to a blob file of its own rather than the log: it becomes ready when that file is
    /// durable, not with the log's syncs.
    blob: bool,
    /// May be applied to the index (durable, or buffered and in the write buffer).
    ready: bool,
}

/// Writes appended but not yet applied to the index, in sequence order.
///
/// An entry is applied once it is ready and no earlier entry for the same key is still waiting:
/// per key, updates land in log order; across keys a slow blob write holds up nobody.
#[derive(Debug, Default)]
pub struct PendingQueue {
    queue: Mutex<VecDeque<Pending>>,
}

impl PendingQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a write (called in sequence order, under the append lock).
    pub fn push(&self, seq: u64, key: &[u8], entry: Option<IndexEntry>, blob: bool) {
        let mut q = self.lock();
        debug_assert!(q.back().is_none_or(|p| p.seq < seq));
        q.push_back(Pending {
            seq,
            key: key.into(),
            entry,
            blob,
            ready: false,
        });
    }

    /// Marks every log write up to `seq` ready and applies what can be applied.
    pub fn ready_through(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        for p in q.iter_mut().take_while(|p| p.seq <= seq) {
            if !p.blob {
                p.ready = true;
            }
        }
        apply(&mut q, index);
    }

    /// Marks the write `seq` ready and applies what can be applied.
    pub fn ready_one(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq) {
            q[i].ready = true;
        }
        apply(&mut q, index);
    }

    /// Drops the write `seq` without applying it (its blob write failed).
    pub fn abandon(&self, seq: u64, index: &Index) {
        let mut q = self.lock();
        if let Ok(i) = q.binary_search_by_key(&seq, |p| p.seq) {
            q.remove(i);
        }
        apply(&mut q, index);
    }

    /// True while any write with a sequence number in `first..=last` has not been applied.
    pub fn any_pending(&self, first: u64, last: u64) -> bool {
        let q = self.lock();
        let i = q.partition_point(|p| p.seq < first);
        q.get(i).is_some_and(|p| p.seq <= last)
    }

    /// Smallest sequence number of a write not yet applied (a blob put still being written can
    /// hold an old one), if any.
    pub fn min_seq(&self) -> Option<u64> {
        self.lock().front().map(|p| p.seq)
    }

    /// True when a queued write points into `segment`.
    pub fn references(&self, segment: u64) -> bool {
        self.lock()
            .iter()
            .any(|p| p.entry.is_some_and(|e| e.segment == segment))
    }

    /// The segments that queued writes point into.
    pub fn referenced_segments(&self) -> std::collections::HashSet<u64> {
        self.lock()
            .iter()
            .filter_map(|p| p.entry.map(|e| e.segment))
            .collect()
    }

    /// The last queued write of `key`, if any: whether it is a put, and its sequence number.
    pub fn last_queued(&self, key: &[u8]) -> Option<(bool, u64)> {
        self.lock()
            .iter()
            .rev()
            .find(|p| &*p.key == key)
            .map(|p| (p.entry.is_some(), p.seq))
    }
}

/// Applies every ready entry not preceded by a waiting entry for the same key.
fn apply(q: &mut VecDeque<Pending>, index: &Index) {
    let mut waiting: Vec<Box<[u8]>> = Vec::new();
    q.retain(|p| {
        let blocked = waiting.contains(&p.key);
        if p.ready && !blocked {
            match p.entry {
                Some(e) => index.insert(&p.key, e),
                None => {
                    index.remove(&p.key);
                }
            }
            false
        } else {
            if !blocked {
                waiting.push(p.key.clone());
            }
            true
        }
    });
}
