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
#[derive(Clone, Default)]
#[must_use = "a Batch does nothing until `Store::write` applies it"]
pub struct Batch {
    /// The operations, in the order added; their keys and small values are in `data`.
    ops: Vec<BatchOp>,
    /// The keys and the values of at most [`OWN_VALUE`] bytes, one after another, in the order
    /// added: a put copies into this one buffer instead of allocating a key and a value of its
    /// own, and [`Batch::clear`] keeps its capacity for the next use. (Two allocations a put,
    /// one of a value's size, made glibc's malloc consolidate its free lists at nearly every
    /// put of a Raft node's state machine: 4.8 % of the nodes' worker CPU, `perf`, 2026-12-07.)
    data: Vec<u8>,
    pub(crate) durability: Option<Durability>,
    pub(crate) bytes: u64,
}

/// A value longer than this keeps a buffer of its own rather than going into [`Batch`]'s
/// shared one: growing the shared buffer copies what it holds, which is cheaper than an
/// allocation for a small value but for larger ones would cost a copy more and, while the
/// buffer grows, up to twice their memory.
const OWN_VALUE: usize = 4 << 10;

#[derive(Debug, Clone)]
struct BatchOp {
    /// Where the key is in `Batch::data`.
    key: (usize, usize),
    /// `None` for a delete.
    value: Option<Value>,
    /// The condition the batch is written on, if any.
    condition: Option<Condition>,
    /// A put's options (when its value expires).
    options: PutOptions,
}

/// Where a put's value is.
#[derive(Debug, Clone)]
enum Value {
    /// In `Batch::data`, at this offset and of this length.
    Shared(usize, usize),
    /// Longer than [`OWN_VALUE`]: in its own buffer.
    Own(Vec<u8>),
}

impl std::fmt::Debug for Batch {
    /// The operations with their keys and values (not where they are in the shared buffer).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("ops", &self.ops().collect::<Vec<_>>())
            .field("durability", &self.durability)
            .finish()
    }
}

/// One operation of a [`Batch`], as the store reads it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OpRef<'a> {
    pub key: &'a [u8],
    /// `None` for a delete.
    pub value: Option<&'a [u8]>,
    pub condition: Option<Condition>,
    pub options: &'a PutOptions,
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

    /// An empty batch with room for `ops` operations whose keys and values of up to 4 KiB
    /// total `bytes`, so that adding them allocates nothing. (Longer values are kept in
    /// buffers of their own whatever the capacity: do not count them in `bytes`.)
    ///
    /// ```
    /// let mut batch = podstore::Batch::with_capacity(2, 16);
    /// batch.put("a", "1").put("b", "2");
    /// assert_eq!(batch.len(), 2);
    /// ```
    pub fn with_capacity(ops: usize, bytes: usize) -> Batch {
        Batch {
            ops: Vec::with_capacity(ops),
            data: Vec::with_capacity(bytes),
            ..Batch::default()
        }
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
        let key = self.keep(key);
        let value = if value.len() > OWN_VALUE {
            Value::Own(value.to_vec())
        } else {
            let (at, len) = self.keep(value);
            Value::Shared(at, len)
        };
        self.ops.push(BatchOp {
            key,
            value: Some(value),
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
        let key = self.keep(key);
        self.ops.push(BatchOp {
            key,
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

    /// Removes every operation (keeps the durability override). The batch keeps the memory
    /// its keys and values of up to 4 KiB took, for the operations added next: drop the batch
    /// rather than clear it to give that memory back.
    ///
    /// ```
    /// let mut batch = podstore::Batch::new();
    /// batch.put("a", "1");
    /// batch.clear();
    /// assert!(batch.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.ops.clear();
        self.data.clear();
        self.bytes = 0;
    }

    /// Copies `bytes` to the end of the shared buffer; returns where they are.
    fn keep(&mut self, bytes: &[u8]) -> (usize, usize) {
        let at = self.data.len();
        self.data.extend_from_slice(bytes);
        (at, bytes.len())
    }

    /// The operations, in the order added.
    pub(crate) fn ops(&self) -> impl ExactSizeIterator<Item = OpRef<'_>> + '_ {
        self.ops.iter().map(|op| {
            let at = |(start, len): (usize, usize)| &self.data[start..start + len];
            OpRef {
                key: at(op.key),
                value: op.value.as_ref().map(|v| match v {
                    Value::Shared(start, len) => at((*start, *len)),
                    Value::Own(v) => v.as_slice(),
                }),
                condition: op.condition,
                options: &op.options,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{Batch, OWN_VALUE};
    use crate::expiry::PutOptions;
    use crate::meta::{Condition, Version};
    use std::time::Duration;

    /// Keys and values come back as added, in order, whether a value is in the shared buffer
    /// or (longer than `OWN_VALUE`) in its own, with each op's condition and options; a
    /// cleared batch is empty and takes new operations.
    #[test]
    fn ops_come_back_as_added_from_the_shared_buffer_or_their_own() {
        let big = vec![7u8; OWN_VALUE + 1];
        let edge = vec![8u8; OWN_VALUE];
        let ttl = PutOptions::new().ttl(Duration::from_secs(5));
        let mut b = Batch::new();
        b.put("a", "1")
            .put("big", &big)
            .delete("gone")
            .put_with("edge", &edge, &ttl)
            .put_if("c", "", Condition::Absent)
            .delete_if("d", Version(9));
        let ops: Vec<_> = b.ops().collect();
        let keys: Vec<&[u8]> = ops.iter().map(|o| o.key).collect();
        assert_eq!(keys, [&b"a"[..], b"big", b"gone", b"edge", b"c", b"d"]);
        let values: Vec<Option<&[u8]>> = ops.iter().map(|o| o.value).collect();
        assert_eq!(
            values,
            [
                Some(&b"1"[..]),
                Some(&big[..]),
                None,
                Some(&edge[..]),
                Some(b""),
                None
            ]
        );
        let conditions: Vec<_> = ops.iter().map(|o| o.condition).collect();
        assert_eq!(
            conditions,
            [
                None,
                None,
                None,
                None,
                Some(Condition::Absent),
                Some(Condition::Version(Version(9)))
            ]
        );
        assert_eq!(*ops[3].options, ttl);
        assert_eq!(*ops[0].options, PutOptions::new());
        assert_eq!(
            b.bytes,
            (1 + 1 + 3 + big.len() + 4 + 4 + edge.len() + 1 + 1) as u64
        );
        b.clear();
        assert!(b.is_empty() && b.ops().next().is_none());
        b.put("x", "y");
        let op = b.ops().next().unwrap();
        assert_eq!((op.key, op.value), (&b"x"[..], Some(&b"y"[..])));
        // Debug shows the operations' keys and values, not offsets into the buffer.
        assert!(format!("{b:?}").contains("key: [120]"), "{b:?}");
    }
}
