//! Writes made on a condition ([`Store::put_if`], [`Store::delete_if`], batches with
//! conditions: [`Store::write`]) and the metadata they compare ([`Store::metadata`],
//! [`Store::get_with_metadata`]).
//!
//! A condition is checked under the append lock, in the same hold that appends the write
//! (`resolve::check`): no other write of the key can be numbered in between, so the check and
//! the write are one atomic step against every other writer. The version compared is read from
//! the key's newest record (or the read cache), never assumed from a lazy overwrite's index
//! entry, which may have older versions of the key behind it.

use super::append::Op;
use super::compress::StoredValue;
use super::read::Look;
use super::resolve::{self, Check};
use super::{Store, check_key, check_value};
use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::expiry::PutOptions;
use crate::index::Seen;
use crate::meta::{Condition, ValueMeta, Version};
use crate::options::Durability;

impl Store {
    /// Inserts or overwrites `key` only if `condition` holds for it, atomically: no other write
    /// of the key comes between the check and the write. Returns the new version; if the
    /// condition does not hold, nothing is written and the error is
    /// [`Error::ConditionFailed`], with the key's current version. Durable like [`Store::put`].
    ///
    /// [`Condition::Version`] makes a compare-and-swap: read a value and its version
    /// ([`Store::get_with_metadata`]), compute the new value, and write it only if nobody wrote
    /// the key meanwhile; on `ConditionFailed`, read again and retry. [`Condition::Absent`]
    /// creates a key only if it has no value (like [`Store::put_if_absent`], which answers
    /// `false` rather than an error).
    ///
    /// A write of the key by another writer that is still on its way (not yet acknowledged) is
    /// waited for, then the condition is checked against its outcome.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::{Condition, Error};
    /// store.put("counter", "0")?;
    /// loop {
    ///     let (value, meta) = store.get_with_metadata("counter")?.expect("present");
    ///     let n: u64 = String::from_utf8(value).unwrap().parse().unwrap();
    ///     let next = (n + 1).to_string();
    ///     match store.put_if("counter", next, Condition::Version(meta.version())) {
    ///         Ok(_) => break,
    ///         Err(Error::ConditionFailed { .. }) => continue, // someone else won: retry
    ///         Err(e) => return Err(e),
    ///     }
    /// }
    /// assert_eq!(store.get("counter")?.unwrap(), b"1");
    /// # Ok(()) }
    /// ```
    pub fn put_if(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        condition: Condition,
    ) -> Result<Version> {
        self.put_if_with(key, value, condition, &PutOptions::new())
    }

    /// [`Store::put_if`] with options: when the value expires ([`PutOptions`]). A key whose
    /// value has expired has none: [`Condition::Absent`] holds for it, no version does.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::{Condition, PutOptions};
    /// use std::time::Duration;
    /// let lease = PutOptions::new().ttl(Duration::from_secs(30));
    /// let v = store.put_if_with("leader", "node-1", Condition::Absent, &lease)?;
    /// // Renewed by its holder, by version.
    /// store.put_if_with("leader", "node-1", Condition::Version(v), &lease)?;
    /// # Ok(()) }
    /// ```
    pub fn put_if_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        condition: Condition,
        options: &PutOptions,
    ) -> Result<Version> {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.writable()?;
        check_key(key)?;
        check_value(value)?;
        let expires_at = self.expiry_of(options)?;
        let durability = self.inner.opts.durability;
        let stored = StoredValue::encode(value, &self.inner.opts).expiring(expires_at);
        let large = durability == Durability::Sync
            && value.len() as u64 >= self.inner.opts.large_value_threshold;
        let ops = [(key, Some(&stored))];
        let seqs = self.write_on(&ops, &[Some(value)], &[Some(condition)], durability, large)?;
        Ok(Version(seqs[0]))
    }

    /// Deletes `key` only if its value has version `expected`, atomically (like
    /// [`Store::put_if`]); if the key has no value or another version, nothing is written and
    /// the error is [`Error::ConditionFailed`], with the key's current version. Durable like
    /// [`Store::put`].
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let v1 = store.put("k", "one")?;
    /// let v2 = store.put("k", "two")?;
    /// assert!(store.delete_if("k", v1).is_err()); // not the version it has
    /// store.delete_if("k", v2)?;
    /// assert!(!store.contains("k")?);
    /// # Ok(()) }
    /// ```
    pub fn delete_if(&self, key: impl AsRef<[u8]>, expected: Version) -> Result<()> {
        let key = key.as_ref();
        self.writable()?;
        check_key(key)?;
        let durability = self.inner.opts.durability;
        let ops = [(key, None)];
        self.write_on(
            &ops,
            &[None],
            &[Some(Condition::Version(expected))],
            durability,
            false,
        )?;
        Ok(())
    }

    /// Applies every operation of `batch`, all-or-nothing: after a crash either all of them are
    /// visible or none is. Durable like [`Store::put`], unless the batch overrides the
    /// durability. Deleting a missing key in a batch is not an error.
    ///
    /// If the batch has conditions ([`Batch::put_if`], [`Batch::delete_if`]), it is written
    /// only if all of them hold, checked atomically with the write; otherwise nothing is
    /// written and the error is [`Error::ConditionFailed`] for the first operation (in batch
    /// order) whose condition failed.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let mut batch = podstore::Batch::new();
    /// batch.put("a", "1").put("b", "2").delete("c");
    /// store.write(&batch)?;
    /// assert_eq!(store.len(), 2);
    /// # Ok(()) }
    /// ```
    pub fn write(&self, batch: &Batch) -> Result<()> {
        self.write_with_versions(batch).map(|_| ())
    }

    /// [`Store::write`], returning the version each operation wrote, in batch order (a
    /// delete's is its tombstone's, which no value has). Each put's version is the one
    /// [`Store::put`] would have returned for it: what [`Condition::Version`] and
    /// [`ValueMeta::version`] name. Empty for an empty batch.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let mut batch = podstore::Batch::new();
    /// batch.put("a", "1").put("b", "2");
    /// let versions = store.write_with_versions(&batch)?;
    /// assert_eq!(versions.len(), 2);
    /// assert_eq!(store.metadata("b")?.unwrap().version(), versions[1]);
    /// # Ok(()) }
    /// ```
    pub fn write_with_versions(&self, batch: &Batch) -> Result<Vec<Version>> {
        self.writable()?;
        for op in batch.ops() {
            check_key(op.key)?;
            if let Some(v) = op.value {
                check_value(v)?;
            }
        }
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let durability = batch.durability.unwrap_or(self.inner.opts.durability);
        let mut values: Vec<Option<StoredValue<'_>>> = Vec::with_capacity(batch.len());
        for op in batch.ops() {
            values.push(match op.value {
                Some(v) => {
                    let expires_at = self.expiry_of(op.options)?;
                    Some(StoredValue::encode(v, &self.inner.opts).expiring(expires_at))
                }
                None => None,
            });
        }
        let ops: Vec<Op<'_>> = batch
            .ops()
            .zip(&values)
            .map(|(op, v)| (op.key, v.as_ref()))
            .collect();
        let conditions: Vec<Option<Condition>> = batch.ops().map(|op| op.condition).collect();
        let raw: Vec<Option<&[u8]>> = batch.ops().map(|op| op.value).collect();
        let seqs = self.write_on(&ops, &raw, &conditions, durability, false)?;
        Ok(seqs.into_iter().map(Version).collect())
    }

    /// Appends `ops` (one record, or an atomic batch) if every condition holds, checked under
    /// the append lock that appends them (see the module doc); returns each op's sequence
    /// number. `raw`: each put's value as given (for the read cache). `large`: `ops` is one put,
    /// written to a blob file of its own.
    fn write_on(
        &self,
        ops: &[Op<'_>],
        raw: &[Option<&[u8]>],
        conditions: &[Option<Condition>],
        durability: Durability,
        large: bool,
    ) -> Result<Vec<u64>> {
        debug_assert_eq!(ops.len(), conditions.len());
        let put_look = self.inner.put_look();
        // A delete removes every version of its key: it reads them all. A conditional put
        // needs the key's true newest entry: read, never lazy.
        let look = |i: usize| match (ops[i].1, conditions[i]) {
            (None, _) => Look::All,
            (Some(_), Some(_)) => Look::First,
            (Some(_), None) => put_look,
        };
        // A batch's look-ups, their shards loaded together first (`Index::prefetch_shards`).
        let index = &self.inner.shared.index;
        let hashes: Vec<u64> = ops.iter().map(|op| index.hash(op.0)).collect();
        if hashes.len() > 1 {
            index.prefetch_shards(&hashes);
        }
        let mut seen = (0..ops.len())
            .map(|i| {
                Ok((
                    hashes[i],
                    self.inner.reader.seen(ops[i].0, hashes[i], look(i))?,
                ))
            })
            .collect::<Result<Vec<(u64, Seen)>>>()?;
        let log = &self.inner.log;
        'again: loop {
            let app = log.lock();
            for (i, condition) in conditions.iter().enumerate() {
                let Some(condition) = condition else { continue };
                let (key, (hash, key_seen)) = (ops[i].0, &seen[i]);
                match resolve::check(&self.inner.shared, key, *hash, key_seen) {
                    Check::Current(current) if condition.holds(current.map(Version)) => {}
                    Check::Current(current) => {
                        return Err(Error::ConditionFailed {
                            key: key.to_vec(),
                            current: current.map(Version),
                        });
                    }
                    Check::Wait(pending) => {
                        drop(app);
                        // Its outcome decides: applied, or dropped if it failed.
                        log.wait(pending, pending, false)?;
                        seen[i] = self.inner.seen(key, look(i))?;
                        continue 'again;
                    }
                    Check::Again => {
                        drop(app);
                        seen[i] = self.inner.seen(key, look(i))?;
                        continue 'again;
                    }
                }
            }
            if large {
                let (key, stored) = (ops[0].0, ops[0].1.expect("a put"));
                let seq = self.inner.blobs.put(app, key, stored, &seen[0])?;
                self.inner.compactor.evict_after_write();
                return Ok(vec![seq]);
            }
            let mut app = app;
            let appended = app.append_ops(ops, &seen, durability)?;
            drop(app);
            // Values kept in the read cache as `put` keeps them: all when durable, else those of
            // keys in use; copied while the write is on its way, kept once it is acknowledged.
            let written: Vec<_> = (0..ops.len())
                .filter_map(|i| {
                    let value = raw[i]?;
                    let in_use = seen[i].1.current.is_some() || seen[i].1.unknown;
                    (durability == Durability::Sync || in_use)
                        .then(|| {
                            self.inner.reader.copy_written(
                                ops[i].0,
                                value,
                                &appended.entries[i],
                                appended.seqs[i],
                            )
                        })
                        .flatten()
                })
                .collect();
            self.finish_write(&appended, ops, durability)?;
            for w in written {
                self.inner.reader.keep_written(Some(w));
            }
            return Ok(appended.seqs);
        }
    }

    /// The metadata of the value of `key`: its length, version and the time it was written
    /// (see [`ValueMeta`]); `None` if `key` has no value.
    ///
    /// Cheap: the length is in the index, and the version and time are read from the record's
    /// header, in one read of the header and key (a few hundred bytes; no more than the first
    /// read of a [`Store::get`]), or taken from the read cache when it holds the value or the
    /// key (then nothing is read). No value byte is read.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let version = store.put("photo.jpg", vec![0u8; 100_000])?;
    /// let meta = store.metadata("photo.jpg")?.expect("present");
    /// assert_eq!(meta.len(), 100_000);
    /// assert_eq!(meta.version(), version);
    /// assert_eq!(store.metadata("missing")?, None);
    /// # Ok(()) }
    /// ```
    pub fn metadata(&self, key: impl AsRef<[u8]>) -> Result<Option<ValueMeta>> {
        let key = key.as_ref();
        check_key(key)?;
        Ok(self.inner.reader.locate_head(key)?.map(|found| {
            ValueMeta::new(found.entry.value_len, found.seq).expiring(found.entry.expires_at)
        }))
    }

    /// The value of `key` with its metadata ([`ValueMeta`]), from the one read of the record
    /// that [`Store::get`] makes: the version is the one of exactly these bytes.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let version = store.put("k", "hello")?;
    /// let (value, meta) = store.get_with_metadata("k")?.expect("present");
    /// assert_eq!(value, b"hello");
    /// assert_eq!((meta.len(), meta.version()), (5, version));
    /// assert!(store.get_with_metadata("missing")?.is_none());
    /// # Ok(()) }
    /// ```
    pub fn get_with_metadata(&self, key: impl AsRef<[u8]>) -> Result<Option<(Vec<u8>, ValueMeta)>> {
        let key = key.as_ref();
        check_key(key)?;
        let mut value = Vec::new();
        Ok(self
            .inner
            .reader
            .get_into_numbered(key, &mut value)?
            .map(|(seq, expires_at)| {
                let meta = ValueMeta::new(value.len() as u64, seq).expiring(expires_at);
                (value, meta)
            }))
    }
}
