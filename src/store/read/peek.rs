//! Reads that never touch a file: [`Store::get_cached`], the whole value of a key when the
//! read cache holds it and can tell, without a read, that it is the key's newest. For callers
//! that must not block (an async runtime's worker thread): they serve a hit in place and take a
//! miss to a thread that may wait on the disk. And [`Store::value_len_bound`], what the index
//! alone tells of a value's length: for a caller choosing between one read of a whole value and
//! a streamed one.

use bytes::Bytes;

use super::super::Store;
use super::super::cache::{Key, Part};
use super::kept::{KEY_AT, cached_whole};
use super::{Reader, Stamp};
use crate::error::Result;
use crate::index::{HotValue, IndexEntry};
use crate::meta::ValueMeta;

impl Reader {
    /// The whole value of `key` with its record's sequence number, if the cache holds it with
    /// the key and no entry the cache cannot tell may be a newer version of the key; `None`
    /// otherwise (absent, or a read would be needed to know). The warm step of
    /// `Reader::lookup`, which goes on to read a file where this one stops.
    pub(in crate::store) fn peek(&self, key: &[u8]) -> Option<(Stamp, Bytes)> {
        self.peek_hashed(key, self.index.hash(key), true)
    }

    /// [`Reader::peek`] of a key hashing to `hash`; `hot` false when the caller looked in the
    /// table of hot values already.
    pub(in crate::store) fn peek_hashed(
        &self,
        key: &[u8],
        hash: u64,
        hot: bool,
    ) -> Option<(Stamp, Bytes)> {
        // The hot table never holds a value that expires (see below): no expiry to check.
        if hot
            && let Some(table) = self.index.hot()
            && let Some(found) = table.with(hash, key, |seq, b, at| ((seq, None), b.slice(at..)))
        {
            return Some(found);
        }
        let candidates = self.index.candidates(hash, key.len() as u32);
        for c in candidates.as_slice() {
            let cached = if self.cache.holds_whole(c) {
                self.cache.get_bytes(&Key::of(c, Part::Value))
            } else {
                None
            };
            match cached.as_ref().map(|b| cached_whole(b, key, c.value_len)) {
                // Expired: the key has no value, which the read that follows tells.
                Some(Some(_)) if c.expired(|| self.now_ms()) => return None,
                Some(Some((seq, value))) => {
                    // A hit of the cache: the key is read again, keep it where the next get
                    // finds it from its hash alone (if its entry is still live). Not a value
                    // that expires: the hot table's slots carry no expiry, and a get served
                    // from them checks none.
                    if let Some(b) = cached
                        && c.expires_at.is_none()
                    {
                        self.keep_hot(hash, c, seq, b, key.len());
                    }
                    return Some(((seq, c.expires_at), value));
                }
                Some(None) => {} // another key's
                // A run with an unresolved entry the cache cannot tell: it may be the key's
                // newest version, and a cached value behind it an older one.
                None if candidates.unresolved() => return None,
                // Resolved: at most one entry is the key's; a later one may still be cached.
                None => {}
            }
        }
        None
    }

    /// Offers the table of hot values the cached whole value `kept` (as [`kept`] lays it out)
    /// of the key of `key_len` bytes hashing to `hash`, whose record `entry` names.
    ///
    /// [`kept`]: super::kept::kept
    fn keep_hot(&self, hash: u64, entry: &IndexEntry, seq: u64, kept: Bytes, key_len: usize) {
        self.index.keep_hot(
            hash,
            HotValue {
                place: entry.place(),
                seq,
                bytes: kept,
                key_start: KEY_AT,
                key_end: KEY_AT + key_len,
            },
        );
    }

    /// The value of `key` (hashing to `hash`) copied into `out` (cleared first) if the table of
    /// hot values holds it, with its record's sequence number; `None` (and `out` untouched)
    /// otherwise. The first step of a get into a caller's buffer: no reference to the kept bytes
    /// is taken.
    pub(in crate::store) fn hot_into(
        &self,
        key: &[u8],
        hash: u64,
        out: &mut Vec<u8>,
    ) -> Option<u64> {
        let hot = self.index.hot()?;
        hot.with(hash, key, |seq, b, at| {
            out.clear();
            out.extend_from_slice(&b[at..]);
            seq
        })
    }

    /// The largest value length of the index entries that may be `key`'s.
    pub(in crate::store) fn len_bound(&self, key: &[u8]) -> Option<u64> {
        let candidates = self
            .index
            .candidates(self.index.hash(key), key.len() as u32);
        // An expired entry is no value (and an older one it hides is no value either).
        candidates
            .as_slice()
            .iter()
            .filter(|c| !c.expired(|| self.now_ms()))
            .map(|c| c.value_len)
            .max()
    }
}

impl Store {
    /// The value of `key` and its metadata if the read cache holds the value (then nothing is
    /// read, and the call never waits on the disk); `None` if it does not, whether or not the
    /// key has a value: then [`Store::get_with_metadata`] tells, by reading.
    ///
    /// For callers that must not block, such as an async runtime's worker threads: serve a hit
    /// at once and send only a miss to a thread that may wait. The value is the cache's own
    /// bytes (no copy) and the newest value of the key, as [`Store::get`] would return it. A
    /// miss counts in [`Stats`](crate::Stats)' cache misses, like the read that follows it.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let version = store.put("k", "hello")?;
    /// // A value read once is kept (the cache is on by default).
    /// store.get("k")?;
    /// let (value, meta) = store.get_cached("k")?.expect("kept by the read");
    /// assert_eq!(&value[..], b"hello");
    /// assert_eq!(meta.version(), version);
    /// // Never an older value: after an overwrite, the new one or nothing.
    /// let newer = store.put("k", "hello again")?;
    /// if let Some((value, meta)) = store.get_cached("k")? {
    ///     assert_eq!((&value[..], meta.version()), (&b"hello again"[..], newer));
    /// }
    /// assert!(store.get_cached("missing")?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn get_cached(&self, key: impl AsRef<[u8]>) -> Result<Option<(Bytes, ValueMeta)>> {
        let key = key.as_ref();
        super::super::check_key(key)?;
        Ok(self
            .inner
            .reader
            .peek(key)
            .map(|((seq, expires_at), value)| {
                let len = value.len() as u64;
                (value, ValueMeta::new(len, seq).expiring(expires_at))
            }))
    }

    /// An upper bound of the length of `key`'s value, from the index alone (nothing is read,
    /// and the call never waits on the disk): the largest length among the entries whose
    /// fingerprint is the key's. `None` if no entry has it: the key has no value. A hint, as of
    /// the call: the key may be written a moment later.
    ///
    /// For a caller choosing how to read a value it has not seen: [`Store::get_with_metadata`]
    /// (one read, the whole value in memory) for a short one, a [`Store::reader`] streaming
    /// pieces of a long one.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", vec![0u8; 1000])?;
    /// assert!(store.value_len_bound("k")?.is_some_and(|n| n >= 1000));
    /// assert_eq!(store.value_len_bound("missing")?, None);
    /// # Ok(()) }
    /// ```
    pub fn value_len_bound(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        let key = key.as_ref();
        super::super::check_key(key)?;
        Ok(self.inner.reader.len_bound(key))
    }
}
