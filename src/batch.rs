//! Atomic batches of puts and deletes.

use crate::expiry::PutOptions;
use crate::meta::{Condition, Version};
use crate::options::Durability;

/// A group of puts and deletes applied all-or-nothing by [`Store::write`](crate::Store::write).
///
/// After a crash either every operation of the batch is visible or none is. Within a batch,
/// later operations on a key win over earlier ones.
///
/// Operations may carry conditions ([`Batch::put_if`], [`Batch::delete_if`]): the batch is then
/// written only if every condition holds, checked against the store as it is when the batch
/// is applied (not against earlier operations of the same batch), atomically with respect to
/// every other writer; if one fails, nothing of the batch is written and
/// [`Store::write`](crate::Store::write) returns
/// [`Error::ConditionFailed`](crate::Error::ConditionFailed) naming the first failing key.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// let mut batch = podstore::Batch::new();
/// batch.put(b"manifest", b"v2").put(b"chunk/2", b"...").delete(b"chunk/1");
/// store.write(&batch)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use = "a Batch does nothing until `Store::write` applies it"]
pub struct Batch {
    pub(crate) ops: Vec<BatchOp>,
    pub(crate) durability: Option<Durability>,
    pub(crate) bytes: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct BatchOp {
    pub key: Vec<u8>,
    /// `None` for a delete.
    pub value: Option<Vec<u8>>,
    /// The condition the batch is written on, if any.
    pub condition: Option<Condition>,
    /// A put's options (when its value expires).
    pub options: PutOptions,
}

impl Batch {
    /// An empty batch.
    ///
    /// ```
    /// let batch = podstore::Batch::new();
    /// assert!(batch.is_empty());
    /// ```
    pub fn new() -> Batch {
        Batch::default()
    }

    /// Adds a put.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let mut batch = podstore::Batch::new();
    /// batch.put("k", "v").put(String::from("k2"), vec![1u8, 2]);
    /// store.write(&batch)?;
    /// assert_eq!(store.get("k2")?.unwrap(), [1, 2]);
    /// # Ok(()) }
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> &mut Batch {
        self.put_with(key, value, &PutOptions::new())
    }

    /// Adds a put with options: when its value expires ([`PutOptions`]). A time to live counts
    /// from when the batch is written.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::{Batch, PutOptions};
    /// use std::time::Duration;
    /// let mut batch = Batch::new();
    /// batch
    ///     .put("page", "<html>")
    ///     .put_with("page.etag", "abc", &PutOptions::new().ttl(Duration::from_secs(60)));
    /// store.write(&batch)?;
    /// assert!(store.metadata("page.etag")?.unwrap().expires_at().is_some());
    /// # Ok(()) }
    /// ```
    pub fn put_with(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: &PutOptions,
    ) -> &mut Batch {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.bytes += (key.len() + value.len()) as u64;
        self.ops.push(BatchOp {
            key: key.to_vec(),
            value: Some(value.to_vec()),
            condition: None,
            options: *options,
        });
        self
    }

    /// Adds a put made only if `condition` holds for `key`; the whole batch is written only if
    /// every condition in it holds (see [`Batch`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use podstore::{Batch, Condition, Error};
    /// let v = store.put("balance/alice", "10")?;
    /// let mut batch = Batch::new();
    /// batch
    ///     .put_if("balance/alice", "5", Condition::Version(v))
    ///     .put_if("balance/bob", "5", Condition::Absent);
    /// store.write(&batch)?;
    /// // The same batch again: alice's version moved on, so nothing is written.
    /// let err = store.write(&batch).unwrap_err();
    /// assert!(matches!(err, Error::ConditionFailed { key, .. } if key == b"balance/alice"));
    /// # Ok(()) }
    /// ```
    pub fn put_if(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        condition: Condition,
    ) -> &mut Batch {
        self.put(key, value);
        self.ops.last_mut().expect("pushed").condition = Some(condition);
        self
    }

    /// Adds a delete made only if `key`'s value has version `expected`; the whole batch is
    /// written only if every condition in it holds (see [`Batch`]).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let v = store.put("lock", "owner-1")?;
    /// let mut batch = podstore::Batch::new();
    /// batch.delete_if("lock", v).put("log/1", "released");
    /// store.write(&batch)?;
    /// assert!(!store.contains("lock")?);
    /// # Ok(()) }
    /// ```
    pub fn delete_if(&mut self, key: impl AsRef<[u8]>, expected: Version) -> &mut Batch {
        self.delete(key);
        self.ops.last_mut().expect("pushed").condition = Some(Condition::Version(expected));
        self
    }

    /// Adds a delete.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// store.put("old", "v")?;
    /// let mut batch = podstore::Batch::new();
    /// batch.delete("old").put("new", "v");
    /// store.write(&batch)?;
    /// assert!(!store.contains("old")?);
    /// # Ok(()) }
    /// ```
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> &mut Batch {
        let key = key.as_ref();
        self.bytes += key.len() as u64;
        self.ops.push(BatchOp {
            key: key.to_vec(),
            value: None,
            condition: None,
            options: PutOptions::new(),
        });
        self
    }

    /// Overrides the store's durability for this batch.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let mut batch = podstore::Batch::new();
    /// batch.put("k", "v").durability(podstore::Durability::Buffered);
    /// store.write(&batch)?; // returns before the sync; store.flush() makes it durable
    /// # Ok(()) }
    /// ```
    pub fn durability(&mut self, durability: Durability) -> &mut Batch {
        self.durability = Some(durability);
        self
    }

    /// Number of operations.
    ///
    /// ```
    /// let mut batch = podstore::Batch::new();
    /// batch.put("a", "1").delete("b");
    /// assert_eq!(batch.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when the batch has no operation.
    ///
    /// ```
    /// let mut batch = podstore::Batch::new();
    /// assert!(batch.is_empty());
    /// batch.put("a", "1");
    /// assert!(!batch.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// Removes every operation (keeps the durability override).
    ///
    /// ```
    /// let mut batch = podstore::Batch::new();
    /// batch.put("a", "1");
    /// batch.clear();
    /// assert!(batch.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.ops.clear();
        self.bytes = 0;
    }
}
