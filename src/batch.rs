//! Atomic batches of puts and deletes.

use crate::options::Durability;

/// A group of puts and deletes applied all-or-nothing by [`Store::write`](crate::Store::write).
///
/// After a crash either every operation of the batch is visible or none is. Within a batch,
/// later operations on a key win over earlier ones.
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
        let (key, value) = (key.as_ref(), value.as_ref());
        self.bytes += (key.len() + value.len()) as u64;
        self.ops.push(BatchOp {
            key: key.to_vec(),
            value: Some(value.to_vec()),
        });
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
