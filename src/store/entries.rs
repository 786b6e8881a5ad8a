//! Listing with values: [`Entries`] and [`Entry`], over the keys of [`Keys`]; and the `Store`
//! methods that start a listing ([`Store::range`], [`Store::prefix`], [`Store::first`],
//! [`Store::last`]; [`Store::keys`] is beside `get` in `store/data.rs`).
//!
//! An entry holds its key and the place of its value, found when the listing reached it, with
//! the value's length and version ([`Entry::metadata`]), which the listing knows without reading
//! the record (the footers' location tables, the active segment's records in memory); the
//! value is read only when asked for, whole ([`Entry::value`]) or streamed ([`Entry::reader`]),
//! through the same read path as `get` (cache, write buffers, verified chunks). The entry keeps
//! the value's file open, so that the value it names stays readable when compaction moves it.

use std::iter::FusedIterator;
use std::ops::RangeBounds;
use std::sync::Arc;

use super::list::{Keys, owned, prefix_range};
use super::read::{Located, Reader};
use super::{Store, ValueReader};
use crate::error::Result;
use crate::meta::ValueMeta;

/// A key and its value, read on demand: the items of [`Entries`], and what [`Store::first`] and
/// [`Store::last`] return.
///
/// The value is the one the key had when the listing reached it: reading it later gives that
/// value even if the key is overwritten, deleted or moved by compaction in between (like
/// [`Store::reader`], the entry holds the value's file open; keep entries for a short while, as
/// a removed file's space comes back only when the last of them is dropped).
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// store.put("k", "v1")?;
/// let entry = store.first()?.expect("one key");
/// store.put("k", "v2")?;
/// assert_eq!(entry.key(), b"k");
/// assert_eq!(entry.value()?, b"v1"); // as it was when listed
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Entry<'a> {
    reader: &'a Arc<Reader>,
    key: Vec<u8>,
    found: Located,
}

impl std::fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(&self.key))
            .field("value_len", &self.value_len())
            .finish()
    }
}

impl<'a> Entry<'a> {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The key, owned.
    pub fn into_key(self) -> Vec<u8> {
        self.key
    }

    /// The length of the value (as it was put), known without a read.
    pub fn value_len(&self) -> u64 {
        self.found.entry.value_len
    }

    /// The value's metadata (length, version, time of the write), known without a read: what
    /// [`Store::metadata`] said of the key when the listing reached it.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let v = store.put("photo/1", "one")?;
    /// for entry in store.prefix("photo/").entries() {
    ///     let meta = entry?.metadata();
    ///     assert_eq!((meta.len(), meta.version()), (3, v));
    /// }
    /// # Ok(()) }
    /// ```
    pub fn metadata(&self) -> ValueMeta {
        ValueMeta::new(self.found.entry.value_len, self.found.seq)
            .expiring(self.found.entry.expires_at)
    }

    /// The whole value, read now (from the read cache when it holds it), verified.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("a", "1")?;
    /// store.put("b", "22")?;
    /// for entry in store.keys().entries() {
    ///     let entry = entry?;
    ///     assert_eq!(entry.value()?.len() as u64, entry.value_len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn value(&self) -> Result<Vec<u8>> {
        let len = usize::try_from(self.value_len()).map_err(|_| crate::Error::ValueTooLarge {
            len: self.value_len(),
            max: usize::MAX as u64,
        })?;
        let mut out = vec![0u8; len];
        self.reader.read_value(&self.found, 0, &mut out, None)?;
        Ok(out)
    }

    /// The key and the whole value: the pair sled's and fjall's iterators yield.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("a", "1")?;
    /// let pairs = store
    ///     .keys()
    ///     .entries()
    ///     .map(|e| e?.into_pair())
    ///     .collect::<podstore::Result<Vec<_>>>()?;
    /// assert_eq!(pairs, [(b"a".to_vec(), b"1".to_vec())]);
    /// # Ok(()) }
    /// ```
    pub fn into_pair(self) -> Result<(Vec<u8>, Vec<u8>)> {
        let value = self.value()?;
        Ok((self.key, value))
    }

    /// A reader that streams the value with positional reads, without loading it whole: for
    /// a large value (see [`ValueReader`]). Reads nothing until it is read.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Read;
    /// store.put("videos/1", vec![7u8; 3 << 20])?;
    /// for entry in store.prefix("videos/").entries() {
    ///     let mut head = [0u8; 16];
    ///     entry?.reader().read_exact(&mut head)?; // 16 bytes read, not 3 MiB
    ///     assert_eq!(head, [7u8; 16]);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn reader(&self) -> ValueReader {
        ValueReader::new(self.reader.clone(), &self.key, self.found.clone())
    }
}

/// The live keys of a range with their values, read on demand: [`Keys::entries`]. In ascending
/// byte order from the front and descending from the back ([`Iterator::rev`]), like [`Keys`],
/// whose rules it follows for writes made while it runs; each [`Entry`]'s value is the one its
/// key had when the listing reached it.
///
/// Why entries and not `(key, value)` pairs: a blob store's values may be gigabytes, and a
/// listing often wants only some of them, or a part ([`Entry::reader`]): an entry reads nothing
/// until asked, as redb's and fjall's guards do. [`Entry::into_pair`] gives the pair.
///
/// A failed read of a footer is an error item, after which the iterator ends.
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct Entries<'a> {
    keys: Keys<'a>,
}

impl std::fmt::Debug for Entries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entries").field("keys", &self.keys).finish()
    }
}

impl<'a> Entries<'a> {
    fn next_at(&mut self, back: bool) -> Option<Result<Entry<'a>>> {
        loop {
            let (key, live) = match self.keys.next_entry(back)? {
                Ok(item) => item,
                Err(e) => return Some(Err(e)),
            };
            let found = match live.found {
                Some(found) => Ok(Some(found)),
                // A footer that did not tell the record's sequence number (its location table
                // could not be read): the record tells.
                None => self.keys.store.inner.reader.locate(&key),
            };
            match found {
                Ok(Some(found)) => {
                    return Some(Ok(Entry {
                        reader: &self.keys.store.inner.reader,
                        key,
                        found,
                    }));
                }
                // Deleted since the listing found it live: as if deleted just before.
                Ok(None) => continue,
                Err(e) => {
                    self.keys.finish();
                    return Some(Err(e));
                }
            }
        }
    }
}

impl<'a> Iterator for Entries<'a> {
    type Item = Result<Entry<'a>>;

    fn next(&mut self) -> Option<Result<Entry<'a>>> {
        self.next_at(false)
    }
}

impl DoubleEndedIterator for Entries<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.next_at(true)
    }
}

impl FusedIterator for Entries<'_> {}

impl<'a> Keys<'a> {
    /// The same listing with the values: each key as an [`Entry`], whose value is read when
    /// asked for (whole or streamed).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("photo/1", "one")?;
    /// store.put("photo/2", "two")?;
    /// store.put("video/1", "three")?;
    /// let mut photos = Vec::new();
    /// for entry in store.prefix("photo/").entries().rev() {
    ///     let entry = entry?;
    ///     photos.push((entry.key().to_vec(), entry.value()?));
    /// }
    /// assert_eq!(photos, [
    ///     (b"photo/2".to_vec(), b"two".to_vec()),
    ///     (b"photo/1".to_vec(), b"one".to_vec()),
    /// ]);
    /// # Ok(()) }
    /// ```
    pub fn entries(self) -> Entries<'a> {
        Entries {
            keys: self.with_records(),
        }
    }
}

impl Store {
    /// The live keys in `range`, in ascending byte order (descending with `.rev()`), read from
    /// the files' sorted footers (see docs/design.md, "Ordered listing"): a descent of each
    /// file's fence-key tree to the start of the range (or its end, backwards), then only the
    /// key blocks the range covers. [`Keys::entries`] gives the values too. Keys written or
    /// deleted while the iterator runs may or may not appear; a key live throughout appears
    /// once (see [`Keys`]).
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
    /// let below_d = store.range(.."d").rev().take(2);
    /// let last_two: Vec<Vec<u8>> = below_d.collect::<podstore::Result<_>>()?;
    /// assert_eq!(last_two, [b"b".to_vec(), b"a".to_vec()]);
    /// # Ok(()) }
    /// ```
    pub fn range<K: AsRef<[u8]> + ?Sized>(&self, range: impl RangeBounds<K>) -> Keys<'_> {
        let start = owned(range.start_bound().map(|k| k.as_ref()));
        let end = owned(range.end_bound().map(|k| k.as_ref()));
        Keys::new(self, start, end)
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
    /// let newest = store.prefix("photo/").next_back().transpose()?;
    /// assert_eq!(newest.as_deref(), Some(&b"photo/2"[..]));
    /// # Ok(()) }
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Keys<'_> {
        let (start, end) = prefix_range(prefix.as_ref());
        Keys::new(self, start, end)
    }

    /// The entry of the smallest live key (in byte order), if any: its key, and its value on
    /// demand. One seek per file, like a listing's first item.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert!(store.first()?.is_none());
    /// store.put("b", "2")?;
    /// store.put("a", "1")?;
    /// let first = store.first()?.expect("two keys");
    /// assert_eq!((first.key(), first.value()?), (&b"a"[..], b"1".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn first(&self) -> Result<Option<Entry<'_>>> {
        self.keys().entries().next().transpose()
    }

    /// The entry of the largest live key (in byte order), if any (see [`Store::first`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("b", "2")?;
    /// store.put("a", "1")?;
    /// assert_eq!(store.last()?.expect("two keys").key(), b"b");
    /// # Ok(()) }
    /// ```
    pub fn last(&self) -> Result<Option<Entry<'_>>> {
        self.keys().entries().next_back().transpose()
    }
}
