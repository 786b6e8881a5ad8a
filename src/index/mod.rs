//! The in-memory index: from a key's hash to where its record is. Rebuilt at open from segment
//! footers (and from the recovery scan of a segment that was not sealed).
//!
//! # What it keeps, and what it does not
//!
//! Per live key, 23 bytes ([`packed`]): a 24-bit fingerprint of the key's hash, the file id,
//! the record offset and the value's stored and put lengths. Keys stay on disk: the memory per
//! key does not depend on the key's length. The hash's top 16 bits choose one of 65 536 shards,
//! each a vector sorted by fingerprint, allocated to fit (exactly at open, in steps of 1/16 as
//! it grows): 40 bits of the hash tell keys apart before any read, so two keys meet in one slot
//! about once per 2^40 / n lookups.
//!
//! Two keys may share a fingerprint: the index then holds both entries, and only a read tells
//! them apart. A reader reads the record an entry names and checks its key (the same read that
//! fetches a small value: `store/read.rs`); a writer finds which entry, if any, is its key's
//! before it writes ([`Seen`], resolved against the [`PendingQueue`] so that a change in
//! between is noticed). Every change of the index happens under the pending queue's lock, in
//! log order per key.
//!
//! A put that the read cache cannot tell its key's entry for does not read (a *lazy* put): its
//! entry goes to the front of its fingerprint run, flagged *unresolved* ([`Placement::Front`]),
//! and the key's older entries stay behind it until the store's resolver removes them
//! ([`Index::resolve`]). This holds because within a run **a key's entries are ordered newest
//! first**: a replacement keeps its entry's place and flag ([`Index::apply_write`],
//! [`Index::replace_if`]), and readers take the first entry whose record is their key's. Until
//! resolved, an older version is counted in [`Index::len`] and in its segment's usage; a run
//! without an unresolved entry holds at most one entry per key ([`Candidates::unresolved`],
//! [`Index::names`]).
//!
//! No lock of the index is held across a syscall.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, RwLock};

use crate::format::footer::FooterEntry;
use crate::segment::ValueSpan;

mod build;
mod evict;
mod expiry;
mod hot;
mod packed;
mod pending;
mod prefetch;

pub use build::Builder;
pub use evict::Removal;
pub use hot::{HotTable, HotValue};
use packed::{PACKED_LEN, Packed};
pub use pending::{Known, PendingQueue, Seen, Task};

/// Where a live value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
    /// Key length (locates the value inside the record). The index does not keep it: an entry
    /// it returns has the length of the key it was looked up with.
    pub key_len: u32,
    /// Record flags (only [`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED) and
    /// [`FLAG_EXPIRES`](crate::format::record::FLAG_EXPIRES) are kept: the latter places the
    /// key and value after the record's expiry field).
    pub flags: u16,
    /// When the value expires, in milliseconds since the Unix epoch (`Some` exactly when
    /// `flags` has `FLAG_EXPIRES`; the index fills it in from its side table, `expiry.rs`).
    pub expires_at: Option<u64>,
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
            key_len: e.key.len() as u32,
            flags: e.flags & KEPT_FLAGS,
            expires_at: e.expires_at,
        }
    }

    /// True when the value has expired at `now_ms()` (milliseconds since the Unix epoch): at
    /// its expiry instant and after (a value put to expire at t is gone at t). The clock is
    /// read only for a value that expires: a get or put of one that does not reads none.
    pub fn expired(&self, now_ms: impl FnOnce() -> u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_ms())
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
        self.offset + crate::format::record::head_len(self.flags) as u64 + self.key_len as u64
    }

    /// Bytes of the whole record (header, key, stored value, chunk checksums).
    pub fn record_len(&self) -> u64 {
        crate::format::record::record_len_for(self.flags, self.key_len as u64, self.stored_len)
    }

    /// File id and record offset: what names the record.
    pub fn place(&self) -> (u64, u64) {
        (self.segment, self.offset)
    }
}

/// The record flags an [`IndexEntry`] keeps.
pub const KEPT_FLAGS: u16 =
    crate::format::record::FLAG_COMPRESSED | crate::format::record::FLAG_EXPIRES;

/// What the live entries of one segment take: the figures compaction chooses by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentUsage {
    /// Bytes of the records of live values (header, key, value, checksums).
    pub live_bytes: u64,
    /// Number of live values.
    pub live_records: u64,
}

/// The 64-bit hash of a key, as footers write it (xxh3: specified and stable).
pub use crate::format::footer::key_hash;

/// Bits of the hash that choose the shard.
const SHARD_BITS: u32 = 16;
const SHARDS: usize = 1 << SHARD_BITS;

/// The entries whose fingerprint matches a hash (usually none or one: held inline, so that a
/// lookup allocates nothing).
#[derive(Debug, Clone)]
pub struct Candidates {
    first: [IndexEntry; 2],
    count: usize,
    more: Vec<IndexEntry>,
    unresolved: bool,
}

impl Candidates {
    fn new() -> Candidates {
        Candidates {
            first: [IndexEntry::default(); 2],
            count: 0,
            more: Vec::new(),
            unresolved: false,
        }
    }

    fn push(&mut self, e: IndexEntry) {
        if self.count < 2 {
            self.first[self.count] = e;
        } else {
            if self.more.is_empty() {
                self.more.extend_from_slice(&self.first);
            }
            self.more.push(e);
        }
        self.count += 1;
    }

    /// The entries.
    pub fn as_slice(&self) -> &[IndexEntry] {
        if self.count <= 2 {
            &self.first[..self.count]
        } else {
            &self.more
        }
    }

    /// The records they name.
    pub fn places(&self) -> Vec<(u64, u64)> {
        self.as_slice().iter().map(IndexEntry::place).collect()
    }

    /// True when one of them is flagged unresolved: an entry behind it may be an older version
    /// of its key (a stale entry, left by a lazy put). Without one, every key has at most one
    /// entry in the run.
    pub fn unresolved(&self) -> bool {
        self.unresolved
    }
}

/// Where a write's new entry goes ([`Index::apply_write`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// In place of this entry of the key (`None`: the key has no entry; a new one goes after
    /// the run's others).
    Replace(Option<IndexEntry>),
    /// At the front of the run, flagged unresolved, replacing nothing: a lazy put, which did not
    /// read to learn which entry is its key's. Entries of the key behind it are older versions,
    /// removed when resolved.
    Front,
}

/// Whether an entry names a record ([`Index::names`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Naming {
    /// No entry with the key's fingerprint names it: the record is dead.
    No,
    /// An entry names it, and no unresolved entry is ahead of it: its key's live record.
    Live,
    /// An entry names it behind an unresolved entry: it may be an older version of its key
    /// (stale) or live; only resolving the run tells.
    Behind,
}

type Shard = RwLock<Vec<Packed>>;

/// The sharded hash → [`IndexEntry`] table.
#[derive(Debug)]
pub struct Index {
    shards: Box<[Shard]>,
    /// Bits of a key's hash that count (all but in tests that weaken the hash on purpose).
    mask: u64,
    len: AtomicU64,
    /// Per segment, what its live entries take. Updated under the shard lock of the key that
    /// changes, so that the accounting of one key is never applied out of order.
    usage: Mutex<BTreeMap<u64, SegmentUsage>>,
    /// The values of hot keys by hash ([`hot`]), if the store keeps them: every change of a
    /// hash's entries hides its slots under the shard's write lock.
    hot: OnceLock<HotTable>,
    /// The expiries of the entries whose values expire ([`expiry`]): changed with the entries,
    /// under their shard's write lock.
    expiry: expiry::ExpiryTable,
}

impl Default for Index {
    fn default() -> Self {
        Index::with_hash_bits(64)
    }
}

/// Which shard and fingerprint a (masked) hash falls to.
fn place_of(h: u64) -> (usize, u32) {
    (
        (h >> (64 - SHARD_BITS)) as usize,
        ((h >> 24) & 0xFF_FFFF) as u32,
    )
}

impl Index {
    /// An empty index that keeps only the top `bits` bits of every key hash (64 in a store; fewer
    /// only in tests, to make keys collide).
    pub fn with_hash_bits(bits: u32) -> Index {
        let mask = match bits {
            0 => 0,
            b if b >= 64 => u64::MAX,
            b => !0u64 << (64 - b),
        };
        Index {
            shards: (0..SHARDS).map(|_| RwLock::new(Vec::new())).collect(),
            mask,
            len: AtomicU64::new(0),
            usage: Mutex::new(BTreeMap::new()),
            hot: OnceLock::new(),
            expiry: expiry::ExpiryTable::default(),
        }
    }

    /// Keeps the values of hot keys in `table` from now on (once; a later call is ignored).
    pub fn keep_hot_values(&self, table: HotTable) {
        let _ = self.hot.set(table);
    }

    /// The table of hot values, if the store keeps one.
    pub fn hot(&self) -> Option<&HotTable> {
        self.hot.get()
    }

    /// Keeps `value` in the table of hot values as the value of the key hashing to `h`, if
    /// `value.place` is still that key's live record (checked, and the slot filled, under the
    /// shard's read lock: a change of the key's entries, under its write lock, comes wholly
    /// before or after, and hides the slot: see [`hot`]). The caller read the record and
    /// found its key to be the key of `h`.
    pub fn keep_hot(&self, h: u64, value: HotValue) {
        let Some(hot) = self.hot.get() else {
            return;
        };
        let (s, fp) = place_of(h);
        let shard = self.shard(s);
        if naming(&shard, fp, value.place) == Naming::Live {
            hot.fill(h, value);
        }
        drop(shard);
    }

    /// Hides the slots of `h` in the table of hot values ([`HotTable::forget`]); called with
    /// `h`'s shard locked for writing, by every change of its entries.
    fn forget_hot(&self, h: u64) {
        if let Some(hot) = self.hot.get() {
            hot.forget(h);
        }
    }

    /// The hash of `key` as this index uses it.
    pub fn hash(&self, key: &[u8]) -> u64 {
        self.hash_of(key_hash(key))
    }

    /// The hash this index uses for a key whose [`key_hash`] is `full` (read from a footer).
    pub fn hash_of(&self, full: u64) -> u64 {
        full & self.mask
    }

    fn shard(&self, i: usize) -> std::sync::RwLockReadGuard<'_, Vec<Packed>> {
        self.shards[i].read().unwrap_or_else(|p| p.into_inner())
    }

    fn shard_mut(&self, i: usize) -> std::sync::RwLockWriteGuard<'_, Vec<Packed>> {
        self.shards[i].write().unwrap_or_else(|p| p.into_inner())
    }

    /// The entries that may be the key of hash `h` (a key of `key_len` bytes): those with its
    /// fingerprint. At most one is the key's; a read of the record tells which.
    pub fn candidates(&self, h: u64, key_len: u32) -> Candidates {
        let (s, fp) = place_of(h);
        let shard = self.shard(s);
        let from = shard.partition_point(|p| p.fp() < fp);
        let mut found = Candidates::new();
        for p in shard[from..].iter().take_while(|p| p.fp() == fp) {
            found.unresolved |= p.unresolved();
            found.push(self.unpack(p, key_len));
        }
        found
    }

    /// The entries that name records of `segment`, by offset, each unpacked for a key of 0
    /// bytes (the index does not keep keys' lengths; the record tells). One pass over every
    /// shard, each under its read lock in turn: for a caller that would otherwise look up most
    /// of the segment's records one by one (the warm-up at open), a sequential scan instead of
    /// a binary search and its cache misses per record. A snapshot: entries may change after.
    pub fn entries_of(&self, segment: u64) -> Vec<IndexEntry> {
        let mut found = Vec::new();
        for i in 0..self.shards.len() {
            let shard = self.shard(i);
            found.extend(
                shard
                    .iter()
                    .filter(|p| p.place().0 == segment)
                    .map(|p| self.unpack(p, 0)),
            );
        }
        found.sort_unstable_by_key(|e| e.offset);
        found
    }

    /// `p` unpacked for a key of `key_len` bytes, with its expiry from the side table. Called
    /// with `p`'s shard locked, so that the table holds what the shard does.
    fn unpack(&self, p: &Packed, key_len: u32) -> IndexEntry {
        let mut e = p.unpack(key_len);
        if p.expires() {
            let found = self.expiry.get(e.place());
            debug_assert!(found.is_some(), "an expiring entry has its expiry noted");
            // Never expected; a value whose expiry is unknown is served rather than lost.
            e.expires_at = Some(found.map_or(crate::format::record::MAX_EXPIRES_AT_MS, |x| x.at));
        }
        e
    }

    /// Bytes and number of the records named by entries whose values have expired at `now_ms`,
    /// in file `file` only if given: what compaction can reclaim.
    pub fn expired(&self, now_ms: u64, file: Option<u64>) -> (u64, u64) {
        self.expiry.expired(now_ms, file)
    }

    /// Notes, after open built the index, the expiries of the records it found (`(key hash,
    /// place, expiry)`) whose entries are in the index: those of overwritten records are not.
    fn note_found_expiries(&self, found: Vec<(u64, (u64, u64), expiry::Expiring)>) {
        for (h, place, e) in found {
            if self.contains(self.hash_of(h), place.0, place.1) {
                self.expiry.insert(place, e);
            }
        }
    }

    /// The records whose entries have the fingerprint of `h`.
    pub fn places(&self, h: u64) -> Vec<(u64, u64)> {
        self.candidates(h, 0).places()
    }

    /// True when the record at `offset` of `segment`, whose key hashes to `h`, is its key's live
    /// record (no key is needed: a record is named by its place).
    pub fn contains(&self, h: u64, segment: u64, offset: u64) -> bool {
        let (s, fp) = place_of(h);
        let shard = self.shard(s);
        let from = shard.partition_point(|p| p.fp() < fp);
        shard[from..]
            .iter()
            .take_while(|p| p.fp() == fp)
            .any(|p| p.place() == (segment, offset))
    }

    /// Replaces the entry `old` (named by its place) of a key hashing to `h` with `new`, either
    /// of which may be absent (a new key; a delete). Called in log order per key, under the
    /// pending queue's lock. (Tests; writes go through [`Index::apply_write`].)
    #[cfg(test)]
    pub fn apply(&self, h: u64, old: Option<&IndexEntry>, new: Option<&IndexEntry>) {
        let key_len = old.or(new).map_or(0, |e| e.key_len);
        self.apply_write(h, key_len, Placement::Replace(old.copied()), &[], new);
    }

    /// Applies a write of a key of `key_len` bytes hashing to `h`: puts `new` (`None`: a
    /// delete) where `at` says, then removes the entries of the key at `stale` that are still
    /// there (a delete's older versions; some may be gone already, removed by the resolver).
    /// Called in log order per key, under the pending queue's lock.
    ///
    /// Within a run, the entries of one key stay ordered newest first: a replacement keeps the
    /// place (and the unresolved flag) of the entry it replaces, a lazy put goes to the front,
    /// and a key with no entry in the run may go anywhere.
    pub fn apply_write(
        &self,
        h: u64,
        key_len: u32,
        at: Placement,
        stale: &[(u64, u64)],
        new: Option<&IndexEntry>,
    ) {
        let (s, fp) = place_of(h);
        let mut shard = self.shard_mut(s);
        self.forget_hot(h);
        match (at, new) {
            (Placement::Front, Some(n)) => {
                let from = shard.partition_point(|p| p.fp() < fp);
                grow(&mut shard);
                shard.insert(from, Packed::pack(fp, n).with_unresolved(true));
                self.len.fetch_add(1, Ordering::Relaxed);
                self.account(None, Some(n));
            }
            (Placement::Front, None) | (Placement::Replace(None), None) => {}
            (Placement::Replace(None), Some(n)) => {
                insert(&mut shard, fp, n);
                self.len.fetch_add(1, Ordering::Relaxed);
                self.account(None, Some(n));
            }
            (Placement::Replace(Some(o)), new) => {
                let i = position(&shard, fp, o.place());
                debug_assert!(i.is_some(), "the entry a write replaces is in the index");
                if let Some(i) = i {
                    match new {
                        Some(n) => {
                            let flag = shard[i].unresolved();
                            shard[i] = Packed::pack(fp, n).with_unresolved(flag);
                        }
                        None => {
                            shard.remove(i);
                            self.len.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                    self.account(Some(&o), new);
                } else if let Some(n) = new {
                    insert(&mut shard, fp, n);
                    self.len.fetch_add(1, Ordering::Relaxed);
                    self.account(None, Some(n));
                }
            }
        }
        self.remove_stale(&mut shard, fp, key_len, stale);
    }

    /// Removes the entries at `stale` (of a key of `key_len` bytes) still in the run of `fp`,
    /// counting their records dead.
    fn remove_stale(&self, shard: &mut Vec<Packed>, fp: u32, key_len: u32, stale: &[(u64, u64)]) {
        for &place in stale {
            if let Some(i) = position(shard, fp, place) {
                let gone = self.unpack(&shard.remove(i), key_len);
                self.len.fetch_sub(1, Ordering::Relaxed);
                self.account(Some(&gone), None);
            }
        }
    }

    /// Resolves the run of the key hashing to `h` (of `key_len` bytes), whose newest entry is at
    /// `newest`: removes its older versions at `stale` and clears the newest's unresolved flag.
    /// The caller read the records of the run (and checks, under the pending queue's lock,
    /// that the run is still what it read).
    pub fn resolve(&self, h: u64, key_len: u32, newest: (u64, u64), stale: &[(u64, u64)]) {
        let (s, fp) = place_of(h);
        let mut shard = self.shard_mut(s);
        self.forget_hot(h);
        self.remove_stale(&mut shard, fp, key_len, stale);
        if let Some(i) = position(&shard, fp, newest) {
            shard[i] = shard[i].with_unresolved(false);
        }
    }

    /// Whether the record at `offset` of `segment`, whose key hashes to `h`, is named by an
    /// entry, and whether an unresolved entry is ahead of that entry in the run ([`Naming`]).
    pub fn names(&self, h: u64, segment: u64, offset: u64) -> Naming {
        let (s, fp) = place_of(h);
        naming(&self.shard(s), fp, (segment, offset))
    }

    /// Points the key hashing to `h` at `new` if its entry is still `expected` (a value moved by
    /// compaction); returns whether it did. A key written or deleted since keeps its newer state.
    pub fn replace_if(&self, h: u64, expected: &IndexEntry, new: IndexEntry) -> bool {
        let (s, fp) = place_of(h);
        let mut shard = self.shard_mut(s);
        self.forget_hot(h);
        let from = shard.partition_point(|p| p.fp() < fp);
        let Some(i) = shard[from..]
            .iter()
            .take_while(|p| p.fp() == fp)
            .position(|p| p.place() == expected.place())
        else {
            return false;
        };
        // In place, flag kept: the order of the key's versions in the run stays.
        let flag = shard[from + i].unresolved();
        shard[from + i] = Packed::pack(fp, &new).with_unresolved(flag);
        self.account(Some(expected), Some(&new));
        true
    }

    /// Loads the live entries found at open: `(hash, entry)` pairs, one per live key, into an
    /// empty index, each shard allocated to fit; `usage` is what they take per segment.
    pub fn load(&self, entries: Vec<(u64, IndexEntry)>, usage: BTreeMap<u64, SegmentUsage>) {
        debug_assert!(self.is_empty());
        debug_assert_eq!(
            usage.values().map(|u| u.live_records).sum::<u64>(),
            entries.len() as u64
        );
        let mut counts = vec![0usize; SHARDS];
        for (h, _) in &entries {
            counts[place_of(*h).0] += 1;
        }
        let mut shards: Vec<Vec<Packed>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
        let total = entries.len() as u64;
        for (h, e) in entries {
            let (s, fp) = place_of(h);
            self.note_expiry(&e);
            shards[s].push(Packed::pack(fp, &e));
        }
        for (slot, mut v) in self.shards.iter().zip(shards) {
            // Usually sorted already (open emits entries by hash).
            v.sort_unstable_by_key(|p| p.fp());
            *slot.write().unwrap_or_else(|p| p.into_inner()) = v;
        }
        self.len.store(total, Ordering::Relaxed);
        *self.usage.lock().unwrap_or_else(|p| p.into_inner()) = usage;
    }

    /// Installs shards built at open (`build.rs`): one vector per shard, in shard order, each
    /// sorted by fingerprint; `usage` is what their entries take per segment.
    fn install(&self, shards: Vec<Vec<Packed>>, usage: BTreeMap<u64, SegmentUsage>) {
        debug_assert!(self.is_empty() && shards.len() == SHARDS);
        let mut total = 0;
        for (slot, v) in self.shards.iter().zip(shards) {
            debug_assert!(v.is_sorted_by_key(|p| p.fp()));
            total += v.len() as u64;
            *slot.write().unwrap_or_else(|p| p.into_inner()) = v;
        }
        debug_assert_eq!(usage.values().map(|u| u.live_records).sum::<u64>(), total);
        self.len.store(total, Ordering::Relaxed);
        *self.usage.lock().unwrap_or_else(|p| p.into_inner()) = usage;
    }

    /// Notes `e`'s expiry in the side table, if it has one.
    fn note_expiry(&self, e: &IndexEntry) {
        if let Some(at) = e.expires_at {
            debug_assert!(e.flags & crate::format::record::FLAG_EXPIRES != 0);
            let record_len = e.record_len();
            self.expiry
                .insert(e.place(), expiry::Expiring { at, record_len });
        }
    }

    /// Moves the bytes of `old` out of, and those of `new` into, their segments' usage, and
    /// their expiries out of and into the side table. Called under the key's shard write lock.
    fn account(&self, old: Option<&IndexEntry>, new: Option<&IndexEntry>) {
        if let Some(o) = old {
            self.expiry.remove(o.place());
        }
        if let Some(n) = new {
            self.note_expiry(n);
        }
        let mut usage = self.usage.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(o) = old
            && let Some(u) = usage.get_mut(&o.segment)
        {
            u.live_bytes = u.live_bytes.saturating_sub(o.record_len());
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

    /// Heap bytes the index has allocated: every shard's entries (by capacity) and the shard
    /// table itself. Counted, not estimated: the vectors' capacities are what the allocator was
    /// asked for.
    pub fn memory_bytes(&self) -> u64 {
        let entries: u64 = self
            .shards
            .iter()
            .map(|s| s.read().unwrap_or_else(|p| p.into_inner()).capacity() as u64)
            .sum();
        entries * PACKED_LEN as u64 + (SHARDS * std::mem::size_of::<Shard>()) as u64
    }

    /// Number of entries: the live keys, plus the older versions of keys that lazy puts left
    /// and that are not resolved yet (the store settles them before it reports a count).
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// True when there are no live keys.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether an entry with fingerprint `fp` of a sorted shard names `place` ([`Index::names`]).
fn naming(shard: &[Packed], fp: u32, place: (u64, u64)) -> Naming {
    let from = shard.partition_point(|p| p.fp() < fp);
    let mut flagged_ahead = false;
    for p in shard[from..].iter().take_while(|p| p.fp() == fp) {
        if p.place() == place {
            return if flagged_ahead {
                Naming::Behind
            } else {
                Naming::Live
            };
        }
        flagged_ahead |= p.unresolved();
    }
    Naming::No
}

/// Position of the entry at `place` with fingerprint `fp` in a sorted shard.
fn position(shard: &[Packed], fp: u32, place: (u64, u64)) -> Option<usize> {
    let from = shard.partition_point(|p| p.fp() < fp);
    shard[from..]
        .iter()
        .take_while(|p| p.fp() == fp)
        .position(|p| p.place() == place)
        .map(|i| from + i)
}

/// Makes room for one more entry, growing a full shard by 1/16 at a time so that a grown index
/// stays within about 6 % of its entries' bytes.
fn grow(shard: &mut Vec<Packed>) {
    if shard.len() == shard.capacity() {
        shard.reserve_exact(shard.len() / 16 + 1);
    }
}

/// Inserts `entry` with fingerprint `fp` into a sorted shard, after the run's others.
fn insert(shard: &mut Vec<Packed>, fp: u32, entry: &IndexEntry) {
    grow(shard);
    let at = shard.partition_point(|p| p.fp() <= fp);
    shard.insert(at, Packed::pack(fp, entry));
}

#[cfg(test)]
mod tests;
