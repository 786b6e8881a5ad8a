//! What the read cache keeps of a value or key, and the values kept on write: the layout of a
//! cached whole value or key (its record's sequence number, the key, the value), and the copy of
//! a value just written that [`Reader::keep_written`] puts in once its write is acknowledged.

use bytes::Bytes;

use super::Reader;
use crate::index::IndexEntry;
use crate::store::cache::{Cached, Key, Part};

/// A value just written, copied for the cache: kept once its write is acknowledged.
pub(in crate::store) struct Written(Key, Cached);

/// Length of the sequence number that starts a cached whole value or key.
const SEQ_LEN: usize = 8;

/// Where the key starts in a cached whole value or key: after the sequence number and the
/// key's length (2 bytes, little-endian; keys are at most `MAX_KEY_LEN`, 4096, bytes long).
pub(in crate::store) const KEY_AT: usize = SEQ_LEN + 2;

/// What the cache keeps for a whole value: the record's sequence number (8 bytes,
/// little-endian: what [`Store::metadata`] needs of the record header), the key's length (2
/// bytes, little-endian: what the record of the hot set at close needs to tell key from value),
/// the key, then the value. With an empty `value`, what it keeps for the key of a larger record.
///
/// [`Store::metadata`]: crate::Store::metadata
pub(in crate::store) fn kept(seq: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut kept = Vec::with_capacity(KEY_AT + key.len() + value.len());
    kept.extend_from_slice(&kept_head(seq, key.len()));
    kept.extend_from_slice(key);
    kept.extend_from_slice(value);
    kept
}

/// The first [`KEY_AT`] bytes of what the cache keeps for a key of `key_len` bytes in a record
/// numbered `seq`.
pub(super) fn kept_head(seq: u64, key_len: usize) -> [u8; KEY_AT] {
    debug_assert!(key_len <= crate::MAX_KEY_LEN);
    let mut head = [0u8; KEY_AT];
    head[..SEQ_LEN].copy_from_slice(&seq.to_le_bytes());
    head[SEQ_LEN..].copy_from_slice(&(key_len as u16).to_le_bytes());
    head
}

/// The sequence number and value of a cached whole value, if it is `key`'s (`value_len` bytes
/// long); `None` if it is another key's.
pub(super) fn cached_whole(b: &Bytes, key: &[u8], value_len: u64) -> Option<(u64, Bytes)> {
    (b.len() as u64 == (KEY_AT + key.len()) as u64 + value_len
        && &b[KEY_AT..KEY_AT + key.len()] == key)
        .then(|| (cached_seq(b), b.slice(KEY_AT + key.len()..)))
}

/// The sequence number a cached whole value or key starts with.
pub(in crate::store) fn cached_seq(b: &[u8]) -> u64 {
    let mut n = [0u8; SEQ_LEN];
    n.copy_from_slice(&b[..SEQ_LEN]);
    u64::from_le_bytes(n)
}

/// The length of the key in a cached whole value or key (`None` if `b` is too short to hold
/// what it says).
pub(in crate::store) fn cached_key_len(b: &[u8]) -> Option<usize> {
    let len = u16::from_le_bytes([*b.get(SEQ_LEN)?, *b.get(SEQ_LEN + 1)?]) as usize;
    (KEY_AT + len <= b.len()).then_some(len)
}

/// Values up to this length are kept in the cache when they are written (`copy_written`). The
/// copy's cost is the memory it touches while the cache fills (a page the process has not used
/// yet costs a fault, 2-4 µs per 4 KiB on the project's VM: buffered 4 KiB puts that kept every
/// value took 5.3-5.8 µs against 1.4-1.7 µs, 64 KiB ones about twice as long); a 4 KiB value costs a
/// durable put (about 90 µs) a few percent until the cache is full, and nothing measurable
/// after (its evictions free the memory the next copies reuse). Larger values would cost a
/// durable put 10 % and more while the cache fills; their first read is one disk read.
pub(in crate::store) const KEPT_ON_WRITE: u64 = 4 << 10;

impl Reader {
    /// A copy of `value`, just written (not yet acknowledged) as the value of `key` in the
    /// record `entry` names with sequence number `seq`, ready for [`Reader::keep_written`]: if
    /// it is small enough to be kept whole and at most [`KEPT_ON_WRITE`] bytes. Made while the
    /// write is on its way to the disk, so that with other writers leading the group commit the
    /// copy overlaps their I/O. Not verified bytes read from a file, but the bytes the record
    /// holds (the caller's own), with its sequence number (the value's version and time).
    pub(in crate::store) fn copy_written(
        &self,
        key: &[u8],
        value: &[u8],
        entry: &IndexEntry,
        seq: u64,
    ) -> Option<Written> {
        if entry.value_len > KEPT_ON_WRITE || !self.cache.holds_whole(entry) {
            return None;
        }
        let kept = kept(seq, key, value);
        Some(Written(
            Key::of(entry, Part::Value),
            Cached::Bytes(Bytes::from(kept)),
        ))
    }

    /// Keeps a value [`Reader::copy_written`] copied, once its write is acknowledged: durable
    /// (with `Durability::Sync`) and named by the index. What was just written is read from
    /// memory, and so is the key of an overwrite's next look. Never stale: the entry is keyed by
    /// the record's place, which holds this key and value for as long as its file exists
    /// (store/cache.rs); once the key is overwritten, deleted or moved, the index names another
    /// place and this entry is never looked up again.
    ///
    /// Not kept in the index's table of hot values: a fill there stores into an `ArcSwap`,
    /// which visits every reader thread's debt slots, and on the write path that cost more than
    /// the next read saves (YCSB A, 3 interleaved runs: 272k ops/s with writes filling the
    /// table, 299k without, update p50 4.8-6.6 µs against 4.2-5.0 µs); the next read of the key
    /// finds it here and fills the table.
    pub(in crate::store) fn keep_written(&self, written: Option<Written>) {
        if let Some(Written(key, value)) = written {
            self.cache.insert(key, value);
        }
    }
}

/// Bytes the cache counts for a whole value of `value_len` bytes kept with a key of `key_len`.
pub(in crate::store) fn kept_weight(key_len: usize, value_len: u64) -> u64 {
    (KEY_AT + key_len) as u64 + value_len + crate::store::cache::ENTRY_OVERHEAD
}

impl Reader {
    /// Whether the warm-up at open keeps the value of `entry`: by the rule of the values kept
    /// on write (at most [`KEPT_ON_WRITE`] bytes, and kept whole by the cache).
    pub(in crate::store) fn keeps_warm(&self, entry: &IndexEntry) -> bool {
        entry.value_len <= KEPT_ON_WRITE && self.cache.holds_whole(entry)
    }

    /// Whether the cache holds the value of `entry` whole.
    pub(in crate::store) fn holds_value(&self, entry: &IndexEntry) -> bool {
        self.cache.contains(&Key::of(entry, Part::Value))
    }

    /// The value of `key`'s record `entry`, if the cache holds it whole (verified bytes, as
    /// everything it holds) and it is stored uncompressed (so that these are its stored bytes
    /// too): a second chance takes it from here rather than from the disk. Nothing is counted or
    /// touched in the cache.
    pub(in crate::store) fn cached_value(&self, entry: &IndexEntry, key: &[u8]) -> Option<Bytes> {
        if entry.is_compressed() || !self.cache.holds_whole(entry) {
            return None;
        }
        let b = self.cache.peek_bytes(&Key::of(entry, Part::Value))?;
        cached_whole(&b, key, entry.value_len).map(|(_, value)| value)
    }

    /// Prepares the cache for the warm-up's `values` insertions ([`Cache::reserve`]).
    ///
    /// [`Cache::reserve`]: crate::store::cache::Cache::reserve
    pub(in crate::store) fn reserve_warm(&self, values: u64) {
        self.cache
            .reserve(usize::try_from(values).unwrap_or(usize::MAX));
    }

    /// Keeps `value`, the value of `key` in the record `entry` names (numbered `seq`), read by
    /// the warm-up and verified: its record's header crc and chunk crcs (and, compressed, its
    /// frames' crcs) checked against the bytes handed here. Never stale, for the reason every
    /// cached value is not: the entry is keyed by the record's place (store/cache.rs).
    pub(in crate::store) fn keep_warmed(
        &self,
        entry: &IndexEntry,
        seq: u64,
        key: &[u8],
        value: &[u8],
    ) {
        self.cache.insert(
            Key::of(entry, Part::Value),
            Cached::Bytes(Bytes::from(kept(seq, key, value))),
        );
    }
}
