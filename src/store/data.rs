//! The data side of the public API: opening a store, writing (put, batches, deletes, streamed
//! values), reading (get, ranges of a value, streams), counting and listing keys, flushing and
//! closing. Listing with values and from both ends is in `entries`; the operator's side (verify,
//! stats, compaction, checkpoints) in `admin`. Each method checks its arguments and calls the
//! parts.

use super::append::{self, Op};
use super::compress::StoredValue;
use super::inner::Presence;
use super::read::Look;
use super::{Keys, Store, ValueReader, ValueWriter, check_key, check_value};
use crate::error::Result;
use crate::expiry::PutOptions;
use crate::meta::Version;
use crate::options::Durability;
use crate::range::ValueRange;

mod opening;

impl Store {
    /// Inserts or overwrites `key`; returns the value's new [`Version`].
    ///
    /// With [`Durability::Sync`] (the default) it returns once the value is on stable storage;
    /// concurrent calls share one write and one fdatasync. With [`Durability::Buffered`] it
    /// returns once the value is in the write buffer. A lone durable put takes at least one
    /// 4 KiB block on disk, however small its value (see [`Durability::Sync`] for how to
    /// share blocks). Values of at least
    /// [`Options::large_value_threshold`](crate::Options::large_value_threshold) put with `Sync` are written to a file of their own by
    /// the calling thread, beside the shared buffer.
    ///
    /// With [`Options::compression`](crate::Options::compression) set, the value is compressed (by the calling thread, before
    /// it takes any lock) when the options say it pays.
    ///
    /// Keys and values are anything that is bytes (`impl AsRef<[u8]>`): `&str`, `String`,
    /// `&[u8]`, `Vec<u8>`, byte arrays and literals. Every method that takes a key does the same.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// let name = String::from("photos/2024/cat.jpg");
    /// let bytes: Vec<u8> = vec![0xff, 0xd8, 0xff];
    /// store.put(&name, &bytes)?;
    /// assert_eq!(store.get(name)?, Some(bytes));
    /// let key: Vec<u8> = b"k".to_vec();
    /// assert_eq!(store.get(&key)?.as_deref(), Some(&b"v"[..]));
    /// # Ok(()) }
    /// ```
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<Version> {
        self.put_with(key, value, &PutOptions::new())
    }

    /// [`Store::put`] with options: when the value expires ([`PutOptions`]). An expiry past
    /// the end of the year 9999 is [`Error::InvalidOptions`](crate::Error::InvalidOptions).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::PutOptions;
    /// use std::time::Duration;
    /// store.put_with("session/1", "token", &PutOptions::new().ttl(Duration::from_secs(900)))?;
    /// assert_eq!(store.get("session/1")?.unwrap(), b"token");
    /// // An expiry in the past: written, and absent at once.
    /// store.put_with("gone", "v", &PutOptions::new().ttl(Duration::ZERO))?;
    /// assert_eq!(store.get("gone")?, None);
    /// # Ok(()) }
    /// ```
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &PutOptions,
    ) -> Result<Version> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        let expires_at = self.expiry_of(options)?;
        let durability = self.inner.opts.durability;
        let stored = StoredValue::encode(value, &self.inner.opts).expiring(expires_at);
        let seen = self.inner.seen(key, self.inner.put_look())?;
        let log = &self.inner.log;
        if durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold
        {
            let seq = self.inner.blobs.put(log.lock(), key, &stored, &seen)?;
            self.inner.compactor.evict_after_write();
            return Ok(Version(seq));
        }
        let appended = log.lock().append_ops(
            &[(key, Some(&stored))],
            std::slice::from_ref(&seen),
            durability,
        )?;
        self.finish_put(key, value, &stored, &seen, &appended, durability)
    }

    /// The end of a put (or a written offer) whose record `append_ops` appended: the value kept
    /// in the read cache, then the write acknowledged.
    fn finish_put(
        &self,
        key: &[u8],
        value: &[u8],
        stored: &StoredValue<'_>,
        seen: &(u64, crate::index::Seen),
        appended: &append::Appended,
        durability: Durability,
    ) -> Result<Version> {
        // Kept in the read cache once acknowledged (durable, and named by the index): its next
        // read, or its next overwrite (which must tell its record from another key's without a
        // read to stay off the resolver), finds the value in memory. A buffered put of a new
        // key keeps nothing: it returns in a microsecond or two, which a copy into memory the
        // cache has not used yet would double (a bulk load), where a durable put waits for the
        // disk 50 times as long.
        let in_use = seen.1.current.is_some() || seen.1.unknown;
        let written = (durability == Durability::Sync || in_use)
            .then(|| {
                self.inner
                    .reader
                    .copy_written(key, value, &appended.entries[0], appended.first)
            })
            .flatten();
        self.finish_write(appended, &[(key, Some(stored))], durability)?;
        self.inner.reader.keep_written(written);
        Ok(Version(appended.first))
    }

    /// A put for a cache's refill: writes `key` as [`Store::put`] does, unless the write would
    /// wait for the disk, in which case nothing is written and `Ok(None)` is returned (the key
    /// keeps what it had). A cache in front of a slower source can drop a refill when the disk
    /// is behind (the next miss fills it again) where a store of record cannot; what a put
    /// waits for there is the device taking the buffer written before.
    ///
    /// "Would wait": the record does not fit in the write buffer being filled (or ends the
    /// segment, whose seal hands the buffer off) and the other buffer is still being written.
    /// Nothing else is skipped: with [`Durability::Sync`] a written offer still waits for its
    /// fdatasync like any put, and a value for a blob file of its own (at least
    /// [`Options::large_value_threshold`](crate::Options::large_value_threshold), durable) is
    /// always written. Dropped offers are counted in
    /// [`Stats::offers_dropped`](crate::Stats::offers_dropped).
    ///
    /// With [`Options::admission`](crate::Options::admission) set to
    /// [`Admission::SecondOffer`](crate::Admission::SecondOffer), a store that has evicted also
    /// turns away (`Ok(None)`, counted in
    /// [`Stats::offers_not_admitted`](crate::Stats::offers_not_admitted)) an offer whose key
    /// was not offered recently, large values included: the key's next offer is written.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// // An idle writer takes it.
    /// assert!(store.offer("thumb/1", vec![7u8; 16 << 10])?.is_some());
    /// assert_eq!(store.get("thumb/1")?.unwrap().len(), 16 << 10);
    /// # Ok(()) }
    /// ```
    pub fn offer(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<Option<Version>> {
        self.offer_with(key, value, &PutOptions::new())
    }

    /// [`Store::offer`] with options, as [`Store::put_with`].
    pub fn offer_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &PutOptions,
    ) -> Result<Option<Version>> {
        let (key, value) = (key.as_ref(), value.as_ref());
        let durability = self.inner.opts.durability;
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        let expires_at = self.expiry_of(options)?;
        if !self.admitted(key) {
            return Ok(None);
        }
        if durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold
        {
            return self.put_with(key, value, options).map(Some);
        }
        let stored = StoredValue::encode(value, &self.inner.opts).expiring(expires_at);
        let seen = self.inner.seen(key, self.inner.put_look())?;
        let appended = {
            let mut log = self.inner.log.lock();
            if !log.room_now(key, &stored) {
                drop(log);
                self.inner.shared.counters.offer_dropped();
                return Ok(None);
            }
            log.append_ops(
                &[(key, Some(&stored))],
                std::slice::from_ref(&seen),
                durability,
            )?
        };
        self.finish_put(key, value, &stored, &seen, &appended, durability)
            .map(Some)
    }

    /// Whether [`Options::admission`](crate::Options::admission) lets an offer of `key` be
    /// written (counted in `Stats::offers_not_admitted` if not).
    fn admitted(&self, key: &[u8]) -> bool {
        if !self.inner.admission.screens() {
            return true; // `Admission::All`: not even the key's hash is computed.
        }
        let shared = &self.inner.shared;
        let full = crate::format::footer::key_hash(key);
        let admit = self.inner.admission.admit(
            full,
            || shared.counters.has_evicted(),
            || shared.index.len(),
            // The store holds the key (its value expired, or is being replaced): it was
            // admitted before. (A fingerprint shared with another key admits too.)
            || {
                let h = shared.index.hash_of(full);
                !shared.index.candidates(h, key.len() as u32).as_slice().is_empty()
            },
        );
        if !admit {
            shared.counters.offer_not_admitted();
        }
        admit
    }

    /// Resolves what `append_ops` left unresolved of `ops`, then waits for the writes to be
    /// acknowledged.
    pub(super) fn finish_write(
        &self,
        appended: &append::Appended,
        ops: &[Op<'_>],
        durability: Durability,
    ) -> Result<()> {
        if !appended.unresolved.is_empty() {
            let keys: Vec<(u64, &[u8], bool)> = appended
                .unresolved
                .iter()
                .map(|&(seq, i)| (seq, ops[i].0, ops[i].1.is_some()))
                .collect();
            self.inner.settle(&keys);
        }
        self.inner
            .log
            .acknowledge(appended.first, appended.last, durability)?;
        self.inner.compactor.evict_after_write();
        Ok(())
    }

    /// The value of `key`.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// assert_eq!(store.get("k")?, Some(b"v".to_vec()));
    /// assert_eq!(store.get("missing")?, None);
    /// # Ok(()) }
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        let mut value = Vec::new();
        Ok(self.get_noted(key, &mut value)?.then_some(value))
    }

    /// [`Reader::get_into`](super::read::Reader), and in a store with a size cap, the get
    /// counted (`Stats::capped_gets`) and, with second chances, the value's read remembered.
    fn get_noted(&self, key: &[u8], out: &mut Vec<u8>) -> Result<bool> {
        let compactor = &self.inner.compactor;
        if !compactor.counts_gets() {
            return self.inner.reader.get_into(key, out);
        }
        let stamp = self.inner.reader.get_into_numbered(key, out)?;
        compactor.note_get(stamp.map(|(seq, _)| seq));
        Ok(stamp.is_some())
    }

    /// Deletes `key`; returns whether it existed. Durable like [`Store::put`].
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// assert!(store.delete("k")?);
    /// assert!(!store.delete("k")?); // already gone
    /// assert_eq!(store.get("k")?, None);
    /// # Ok(()) }
    /// ```
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        self.writable()?;
        check_key(key)?;
        let durability = self.inner.opts.durability;
        let log = &self.inner.log;
        // Every version of the key: the delete removes them all.
        let mut seen = self.inner.seen(key, Look::All)?;
        loop {
            let app = log.lock();
            match self.inner.presence(key, seen.0, &seen.1) {
                Presence::Absent => {
                    if let Some((false, seq)) = self.inner.shared.pending.last_queued(key, seen.0) {
                        // Another writer's delete of the key is on its way. Answer "absent"
                        // only once it is acknowledged, like a delete of our own, so that no
                        // later read of ours can still see the old value.
                        drop(app);
                        log.acknowledge(seq, seq, durability)?;
                    }
                    return Ok(false);
                }
                Presence::Changed => {
                    drop(app);
                    seen = self.inner.seen(key, Look::All)?;
                    continue;
                }
                Presence::Present | Presence::Pending(_) => {}
            }
            let mut app = app;
            let ops = [(key, None)];
            let appended = app.append_ops(&ops, std::slice::from_ref(&seen), durability)?;
            drop(app);
            self.finish_write(&appended, &ops, durability)?;
            return Ok(true);
        }
    }

    /// Inserts `key` only if it has no value; returns whether it did. Durable like
    /// [`Store::put`].
    ///
    /// Made for content-addressed data, where a key names its value and "already there" is
    /// success: the existing value is kept, not compared. When another writer's put of `key` is
    /// on its way, this waits until that put is acknowledged and returns `false`. Concurrent
    /// calls for one key insert it once.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert!(store.put_if_absent(b"sha256:ab12", b"blob bytes")?);
    /// assert!(!store.put_if_absent(b"sha256:ab12", b"other bytes")?);
    /// assert_eq!(store.get(b"sha256:ab12")?.unwrap(), b"blob bytes");
    /// # Ok(()) }
    /// ```
    pub fn put_if_absent(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<bool> {
        self.put_if_absent_with(key, value, &PutOptions::new())
    }

    /// [`Store::put_if_absent`] with options: when the value expires ([`PutOptions`]). A key
    /// whose value has expired is absent: the put is made.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::PutOptions;
    /// use std::time::Duration;
    /// let lease = PutOptions::new().ttl(Duration::from_secs(30));
    /// assert!(store.put_if_absent_with("lock", "owner-1", &lease)?);
    /// assert!(!store.put_if_absent_with("lock", "owner-2", &lease)?);
    /// # Ok(()) }
    /// ```
    pub fn put_if_absent_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &PutOptions,
    ) -> Result<bool> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        let expires_at = self.expiry_of(options)?;
        // Cheap answer for the common case, before compressing anything.
        // Presence is decided by the key's newest entry: read, never lazy.
        let mut seen = self.inner.seen(key, Look::First)?;
        if seen
            .1
            .current
            .is_some_and(|e| !e.expired(|| self.inner.shared.now_ms()))
            && self.inner.shared.pending.last_queued(key, seen.0).is_none()
        {
            return Ok(false);
        }
        let durability = self.inner.opts.durability;
        let stored = StoredValue::encode(value, &self.inner.opts).expiring(expires_at);
        let large = durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold;
        let log = &self.inner.log;
        loop {
            let mut app = log.lock();
            match self.inner.presence(key, seen.0, &seen.1) {
                Presence::Present => return Ok(false),
                Presence::Pending(seq) => {
                    drop(app);
                    // Its outcome decides: acknowledged, the key is present; failed, look again.
                    log.wait(seq, seq, durability == Durability::Sync)?;
                    seen = self.inner.seen(key, Look::First)?;
                    continue;
                }
                Presence::Changed => {
                    drop(app);
                    seen = self.inner.seen(key, Look::First)?;
                    continue;
                }
                Presence::Absent => {}
            }
            if large {
                self.inner.blobs.put(app, key, &stored, &seen)?;
                self.inner.compactor.evict_after_write();
                return Ok(true);
            }
            let ops = [(key, Some(&stored))];
            let appended = app.append_ops(&ops, std::slice::from_ref(&seen), durability)?;
            drop(app);
            // A new key: kept when durable, as `put` does.
            let written = (durability == Durability::Sync)
                .then(|| {
                    self.inner.reader.copy_written(
                        key,
                        value,
                        &appended.entries[0],
                        appended.first,
                    )
                })
                .flatten();
            self.finish_write(&appended, &ops, durability)?;
            self.inner.reader.keep_written(written);
            return Ok(true);
        }
    }

    /// The value of `key` as shared bytes ([`bytes::Bytes`], cheap to clone). A value the read
    /// cache holds (see [`Options::cache_capacity`](crate::Options::cache_capacity)) is handed out without a copy: the `Bytes`
    /// shares the cache's buffer, which stays alive as long as any clone does, even after the
    /// cache drops it. A value read from disk is read into its own buffer, which the cache then
    /// shares.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "hello")?;
    /// let first = store.get_bytes("k")?.unwrap(); // read from disk, then cached
    /// let again = store.get_bytes("k")?.unwrap(); // from the cache: the same buffer
    /// assert_eq!(first, &b"hello"[..]);
    /// assert_eq!(first.as_ptr(), again.as_ptr());
    /// assert_eq!(store.get_bytes("missing")?, None);
    /// # Ok(()) }
    /// ```
    pub fn get_bytes(&self, key: impl AsRef<[u8]>) -> Result<Option<bytes::Bytes>> {
        let key = key.as_ref();
        check_key(key)?;
        let got = self.inner.reader.get_shared(key)?;
        let compactor = &self.inner.compactor;
        if compactor.counts_gets() {
            compactor.note_get(got.as_ref().map(|(seq, _)| *seq));
        }
        Ok(got.map(|(_, bytes)| bytes))
    }

    /// Reads the value of `key` into `buf`, reusing its allocation; returns whether `key` has a
    /// value. `buf` is cleared first, and holds exactly the value afterwards (it is left empty
    /// for a missing key; after an error its contents are unspecified). A loop that reads many
    /// values into one buffer allocates only when a value is longer than any before it.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("a", "first")?;
    /// store.put("b", "2nd")?;
    /// let mut buf = Vec::with_capacity(64);
    /// assert!(store.get_into("a", &mut buf)?);
    /// assert_eq!(buf, b"first");
    /// assert!(store.get_into("b", &mut buf)?);
    /// assert_eq!(buf, b"2nd");
    /// assert!(!store.get_into("missing", &mut buf)?);
    /// assert!(buf.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn get_into(&self, key: impl AsRef<[u8]>, buf: &mut Vec<u8>) -> Result<bool> {
        let key = key.as_ref();
        buf.clear();
        check_key(key)?;
        self.get_noted(key, buf)
    }

    /// Bytes `range` of the value of `key`.
    ///
    /// Reads from disk only the 4 KiB chunks that hold the range (and their checksums), whatever
    /// the size of the value. For a compressed value, it reads and decompresses only the frames
    /// that hold the range (and the frame table's header and entries, unless the store has them
    /// from an earlier read).
    ///
    /// The range is any Rust range over `u64`, `usize`, `u32`, `u16` or `u8` (see
    /// [`ValueRange`](crate::ValueRange)). Ranges follow HTTP and S3 range requests:
    ///
    /// - an end past the value's end is clamped to it: `0..4096` of a 267-byte value gives its
    ///   267 bytes, so a "first 4 KiB" read needs no length check;
    /// - a start at the value's end (`len..`, `len..len + 10`) gives an empty vector, like any
    ///   empty range inside the value;
    /// - a start past the end (`start > len`), an end before the start, or a negative bound
    ///   fails with [`Error::OutOfRange`](crate::Error::OutOfRange), which names the key and the
    ///   value's length.
    ///
    /// A missing key is `Ok(None)` whatever the range.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "0123456789")?;
    /// assert_eq!(store.get_range("k", 2..5)?.unwrap(), b"234");
    /// assert_eq!(store.get_range("k", 8..)?.unwrap(), b"89");
    /// assert_eq!(store.get_range("k", 8..4096)?.unwrap(), b"89"); // clamped
    /// assert_eq!(store.get_range("k", 10..)?.unwrap(), b""); // at the end: empty
    /// let offset: usize = 4;
    /// assert_eq!(store.get_range("k", offset..offset + 2)?.unwrap(), b"45");
    /// assert!(matches!(
    ///     store.get_range("k", 11..),
    ///     Err(podstore::Error::OutOfRange { start: 11, len: 10, .. })
    /// ));
    /// assert_eq!(store.get_range("missing", 0..10)?, None);
    /// # Ok(()) }
    /// ```
    pub fn get_range(
        &self,
        key: impl AsRef<[u8]>,
        range: impl ValueRange,
    ) -> Result<Option<Vec<u8>>> {
        let key = key.as_ref();
        check_key(key)?;
        let reader = &self.inner.reader;
        reader
            .locate_for_range(key, &range)?
            .map(|f| reader.read_range(&f, key, &range))
            .transpose()
    }

    /// A reader that streams the value of `key` with positional reads, without loading it
    /// whole. It reads the value as it was when `reader` was called, even if it is overwritten,
    /// deleted or moved by compaction meanwhile (it keeps its file open).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Read;
    /// store.put("k", vec![1u8; 10_000])?;
    /// let mut reader = store.reader("k")?.expect("present");
    /// let mut first = [0u8; 100];
    /// reader.read_exact(&mut first)?;
    /// assert_eq!(first, [1u8; 100]);
    /// # Ok(()) }
    /// ```
    pub fn reader(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueReader>> {
        let key = key.as_ref();
        check_key(key)?;
        let reader = &self.inner.reader;
        Ok(reader
            .locate(key)?
            .map(|found| ValueReader::new(reader.clone(), key, found)))
    }

    /// A writer that streams a new value of `key` into the store, without holding it in
    /// memory: write it with [`std::io::Write`], then [`ValueWriter::finish`] commits it,
    /// atomically and durably. Dropping the writer unfinished stores nothing.
    ///
    /// The value goes to a blob file of its own whatever its length (even below
    /// [`Options::large_value_threshold`](crate::Options::large_value_threshold)), compressed frame by frame as it comes when
    /// [`Options::compression`](crate::Options::compression) says so. See [`ValueWriter`] for the memory it takes.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// # let source_path = dir.path().join("upload.bin");
    /// # std::fs::write(&source_path, vec![1u8; 3 << 20])?;
    /// let mut file = std::fs::File::open(&source_path)?;
    /// let mut writer = store.writer("uploads/1")?;
    /// std::io::copy(&mut file, &mut writer)?;
    /// writer.finish()?;
    /// assert_eq!(store.value_len("uploads/1")?, Some(3 << 20));
    /// # Ok(()) }
    /// ```
    pub fn writer(&self, key: impl AsRef<[u8]>) -> Result<ValueWriter<'_>> {
        self.writer_with(key, &PutOptions::new())
    }

    /// [`Store::writer`] with options: when the value expires ([`PutOptions`]). A time to live
    /// counts from this call (the record's layout depends on its expiry, which is fixed before
    /// the first byte is written).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::io::Write;
    /// use std::time::Duration;
    /// let opts = podstore::PutOptions::new().ttl(Duration::from_secs(3600));
    /// let mut writer = store.writer_with("render/1", &opts)?;
    /// writer.write_all(&[1u8; 100_000])?;
    /// writer.finish()?;
    /// assert!(store.metadata("render/1")?.unwrap().expires_at().is_some());
    /// # Ok(()) }
    /// ```
    pub fn writer_with(
        &self,
        key: impl AsRef<[u8]>,
        options: &PutOptions,
    ) -> Result<ValueWriter<'_>> {
        let key = key.as_ref();
        self.writable()?;
        check_key(key)?;
        let expires_at = self.expiry_of(options)?;
        let stream = self.inner.blobs.start_stream(key, expires_at)?;
        Ok(ValueWriter::new(self, key, stream))
    }

    /// The expiry `options` give a value written now (milliseconds since the Unix epoch), with
    /// the store's default time to live.
    pub(super) fn expiry_of(&self, options: &PutOptions) -> Result<Option<u64>> {
        options.expiry_ms(|| self.inner.shared.now_ms(), self.inner.opts.default_ttl)
    }

    /// The length of the value of `key` (as it was put, whether or not it is stored
    /// compressed).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "hello")?;
    /// assert_eq!(store.value_len("k")?, Some(5));
    /// assert_eq!(store.value_len("missing")?, None);
    /// # Ok(()) }
    /// ```
    pub fn value_len(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        let key = key.as_ref();
        check_key(key)?;
        Ok(self.inner.reader.locate(key)?.map(|f| f.entry.value_len))
    }

    /// How many bytes the value of `key` takes in its record: its length if it is stored raw,
    /// the length of its frame table and lz4 frames if it is stored compressed (see
    /// [`Options::compression`](crate::Options::compression)). The record's header, key and checksums come on top.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "hello")?;
    /// assert_eq!(store.stored_len("k")?, Some(5)); // compression is off by default
    /// # Ok(()) }
    /// ```
    pub fn stored_len(&self, key: impl AsRef<[u8]>) -> Result<Option<u64>> {
        let key = key.as_ref();
        check_key(key)?;
        Ok(self.inner.reader.locate(key)?.map(|f| f.entry.stored_len))
    }

    /// Whether `key` has a value.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// assert!(store.contains("k")?);
    /// assert!(!store.contains("other")?);
    /// # Ok(()) }
    /// ```
    pub fn contains(&self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        Ok(self.inner.reader.locate(key)?.is_some())
    }

    /// Number of live keys (keys whose value has expired are not counted).
    ///
    /// Exact: entries that overwrites left for the background resolver (an overwrite does not
    /// read to find its key's old entry) are resolved first, in the calling thread.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("a", "1")?;
    /// store.put("b", "2")?;
    /// assert_eq!(store.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn len(&self) -> usize {
        self.inner.settle_all();
        let index = &self.inner.shared.index;
        // Expired entries wait in the index for compaction; they are not keys any more.
        let (_, expired) = index.expired(self.inner.shared.now_ms(), None);
        index.len().saturating_sub(expired) as usize
    }

    /// True when the store holds no key.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// assert!(store.is_empty());
    /// store.put("a", "1")?;
    /// assert!(!store.is_empty());
    /// # Ok(()) }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The live keys, in ascending byte order (descending with `.rev()`); with their values
    /// through [`Keys::entries`]. [`Store::range`] and [`Store::prefix`] list a part,
    /// [`Store::first`] and [`Store::last`] give one end.
    ///
    /// Listing reads the keys from the files' footers (the index keeps none): its cost grows
    /// with the store. Keys written or deleted while it runs may or may not appear; a key live
    /// throughout appears once (see [`Keys`]). A failed read is an `Err` item.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("b", "2")?;
    /// store.put("a", "1")?;
    /// let keys = store.keys().collect::<podstore::Result<Vec<_>>>()?;
    /// assert_eq!(keys, [b"a".to_vec(), b"b".to_vec()]);
    /// let backwards = store.keys().rev().collect::<podstore::Result<Vec<_>>>()?;
    /// assert_eq!(backwards, [b"b".to_vec(), b"a".to_vec()]);
    /// for entry in store.keys().entries() {
    ///     let entry = entry?;
    ///     println!("{:?} = {:?}", entry.key(), entry.value()?);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn keys(&self) -> Keys<'_> {
        self.range::<[u8]>(..)
    }

    /// Makes every earlier write durable (those made with [`Durability::Buffered`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use podstore::{Durability, Options, Store};
    /// let store = Store::open_with(dir.path(), Options::default().durability(Durability::Buffered))?;
    /// for i in 0..100u32 {
    ///     store.put(i.to_be_bytes(), "value")?; // in memory, sharing blocks
    /// }
    /// store.flush()?; // all 100 durable, with one sync
    /// # Ok(()) }
    /// ```
    pub fn flush(&self) -> Result<()> {
        if self.inner.opts.read_only {
            // Nothing was written, nothing to make durable.
            return Ok(());
        }
        self.inner.log.flush()
    }

    /// Flushes every write, seals the active segment and releases the directory lock. With
    /// [`Options::background_compaction`](crate::Options::background_compaction) on, it first runs a compaction pass of at most
    /// 200 ms (dead blob files first), so that a store closed before its compactor ever ran still
    /// gives space back. With a [remote](crate::Options::remote), it also writes the last
    /// manifest again, flagged closed (one conditional create, retried as any remote call;
    /// a failure is logged, not returned): the next opener's claim then needs no keeping
    /// (docs/design-remote.md, "Fencing"). Dropping a `Store` does the same but cannot report
    /// errors.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = podstore::Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// store.close()?;
    /// let store = podstore::Store::open(dir.path())?; // the lock is released
    /// assert_eq!(store.get("k")?.unwrap(), b"v");
    /// # Ok(()) }
    /// ```
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        self.inner.shut_down()
    }
}
