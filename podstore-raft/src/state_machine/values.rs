//! How the state machine stores a value, and its reads: whole values, ranges, listings.
//!
//! A value is stored behind an 8-byte header, its version: the index of the log entry that
//! wrote it, big-endian. That index is the same on every node (podstore's own `Version` is
//! not: each node's store takes it from its own clock), so a conditional write
//! ([`crate::Request::PutIf`], [`crate::Request::DeleteIf`]) compares the same versions on
//! every node and every node decides alike; and a version read from any node (an HTTP `ETag`)
//! can be the condition of a write sent to the leader. A header, not a second key per value:
//! a put stays one record and one index entry, and a read of the whole value gets its version
//! in the same read.

use std::io;

use bytes::Bytes;
use podstore::Store;

use openraft::EntryPayload;

use super::{Entry, StateMachine, check, data_key};
use crate::Request;
use crate::io_err;

/// The length of a stored value's header (its version).
pub(crate) const HEADER_LEN: usize = 8;

/// `key`'s stored value and its header: `version` then `value`, written into `buf` (emptied
/// first).
pub(crate) fn stored_in<'a>(buf: &'a mut Vec<u8>, version: u64, value: &[u8]) -> &'a [u8] {
    buf.clear();
    buf.reserve(HEADER_LEN + value.len());
    buf.extend_from_slice(&version.to_be_bytes());
    buf.extend_from_slice(value);
    buf
}

/// The operations and bytes that `entries` write, about: their keys and values (each value
/// with its version header) and, for each write under a request id, its request-id record
/// (about 64 bytes). The chunk's batch is made with room for them, so that adding its writes
/// allocates nothing. A write counts for at most [`ROOM_PER_WRITE`] bytes: a `Batch` keeps
/// longer values in buffers of their own.
pub(super) fn room_for(entries: &[Entry]) -> (usize, usize) {
    // A write's bytes in the batch's buffer: its data key's prefix and version header, its
    // request-id record.
    let room = |payload: usize| payload.min(ROOM_PER_WRITE) + 1 + HEADER_LEN + 64;
    let (mut ops, mut bytes) = (2, 64);
    let mut add = |payload: usize| {
        ops += 2;
        bytes += room(payload);
    };
    for entry in entries {
        match &entry.payload {
            EntryPayload::Normal(Request::Many(w)) => w.iter().for_each(|r| add(r.payload_len())),
            // A coalesced request under a request id.
            EntryPayload::Normal(Request::Once { request, .. })
                if let Request::Many(w) = &**request =>
            {
                w.iter().for_each(|r| add(r.payload_len()))
            }
            EntryPayload::Normal(Request::Batch(w)) => {
                w.iter().for_each(|op| add(op.payload_len()))
            }
            EntryPayload::Normal(r) => add(r.payload_len()),
            EntryPayload::Blank | EntryPayload::Membership(_) => {}
        }
    }
    (ops, bytes)
}

/// The most bytes a write is counted for in [`room_for`]: a `Batch` keeps values up to 4 KiB
/// in its shared buffer (`Batch::with_capacity`).
pub(super) const ROOM_PER_WRITE: usize = 4 << 10;

/// The version in a stored value's header.
fn version_of(header: &[u8]) -> io::Result<u64> {
    header
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "a state machine value shorter than its version header",
            )
        })
}

/// A stored value split into its version and the value's bytes (no copy).
fn split(stored: Bytes) -> io::Result<(Bytes, u64)> {
    let version = version_of(&stored)?;
    Ok((stored.slice(HEADER_LEN..), version))
}

/// The version of `key`'s value in `store` (`data` is its data key), read from its header.
pub(crate) fn version_in(store: &Store, data: &[u8]) -> io::Result<Option<u64>> {
    match store
        .get_range(data, 0..HEADER_LEN as u64)
        .map_err(io_err)?
    {
        Some(header) => version_of(&header).map(Some),
        None => Ok(None),
    }
}

/// Some or all of a value's bytes, with its version and its whole length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRead {
    /// The bytes read.
    pub bytes: Bytes,
    /// The bytes' offset in the value.
    pub start: u64,
    /// The value's whole length.
    pub len: u64,
    /// The value's version: the index of the log entry that wrote it (the same on every node).
    pub version: u64,
}

/// What a read of a value found ([`StateMachine::read`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The key has no value.
    Missing,
    /// The bytes asked for.
    Value(ValueRead),
    /// The range asked for starts past the end of the value (or ends before it starts).
    OutOfRange {
        /// The value's length.
        len: u64,
    },
}

impl Read {
    /// What a read of the whole value answers: the value and its version, or none.
    pub(crate) fn whole(found: Option<(Bytes, u64)>) -> Read {
        match found {
            Some((bytes, version)) => Read::Value(ValueRead {
                len: bytes.len() as u64,
                bytes,
                start: 0,
                version,
            }),
            None => Read::Missing,
        }
    }
}

/// One key of a listing ([`StateMachine::list`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The key.
    pub key: Vec<u8>,
    /// The length of its value.
    pub len: u64,
}

/// A value opened to be read in pieces ([`StateMachine::read_or_open`]): all its reads are of
/// the same write, whatever is written meanwhile.
#[derive(Clone)]
pub(crate) struct OpenValue {
    reader: std::sync::Arc<podstore::ValueReader>,
    /// The value's version.
    pub(crate) version: u64,
    /// The value's length.
    pub(crate) len: u64,
}

impl OpenValue {
    /// Bytes `start..start + len` of the value (reads the disk: call it on a blocking thread).
    pub(crate) fn read_at(&self, start: u64, len: usize) -> io::Result<Bytes> {
        let mut buf = vec![0u8; len];
        self.reader
            .read_exact_at(HEADER_LEN as u64 + start, &mut buf)
            .map_err(io_err)?;
        Ok(Bytes::from(buf))
    }
}

/// What [`StateMachine::read_or_open`] found.
pub(crate) enum Whole {
    /// The value read whole (or none).
    Read(Read),
    /// A value too large to read whole, opened.
    Open(OpenValue),
}

impl StateMachine {
    /// The value of `key`, read whole if it is at most `max_whole` bytes, else opened to be
    /// read in pieces (a GET of a value of any size holds a piece at a time).
    pub(crate) fn read_or_open(&self, key: &[u8], max_whole: u64) -> io::Result<Whole> {
        check(key, None).map_err(io::Error::other)?;
        let Some(reader) = self.store().reader(data_key(key)).map_err(io_err)? else {
            return Ok(Whole::Read(Read::Missing));
        };
        let len = reader.len().saturating_sub(HEADER_LEN as u64);
        if len <= max_whole {
            // Through `get_versioned`, which keeps the value in the read cache for the next
            // read (a reader does not).
            return Ok(Whole::Read(Read::whole(self.get_versioned(key)?)));
        }
        let mut header = [0u8; HEADER_LEN];
        reader.read_exact_at(0, &mut header).map_err(io_err)?;
        Ok(Whole::Open(OpenValue {
            version: version_of(&header)?,
            len,
            reader: std::sync::Arc::new(reader),
        }))
    }

    /// The value of `key` in this node's state machine (what it has applied).
    pub fn get(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        Ok(self.get_versioned(key)?.map(|(v, _)| v.to_vec()))
    }

    /// The value of `key` and its version (no copy of a value the read cache holds).
    pub fn get_versioned(&self, key: &[u8]) -> io::Result<Option<(Bytes, u64)>> {
        check(key, None).map_err(io::Error::other)?;
        let stored = self.store().get_bytes(data_key(key)).map_err(io_err)?;
        stored.map(split).transpose()
    }

    /// The value of `key` and its version if this node's read cache holds it (nothing read,
    /// never waits on the disk: callable on an async runtime's thread); `None` if it does not,
    /// whether or not the key has a value: then [`StateMachine::get_versioned`] tells, by
    /// reading.
    pub fn get_cached(&self, key: &[u8]) -> io::Result<Option<(Bytes, u64)>> {
        check(key, None).map_err(io::Error::other)?;
        let cached = self.store().get_cached(data_key(key)).map_err(io_err)?;
        cached.map(|(stored, _)| split(stored)).transpose()
    }

    /// Bytes `start..end` of the value of `key` (`end` clamped to the value's length; `None`
    /// for the end of the value). Reads only the chunks the range covers. A range that starts
    /// past the end of the value (or ends before it starts) is an error of kind
    /// `InvalidInput`.
    pub fn get_range(
        &self,
        key: &[u8],
        start: u64,
        end: Option<u64>,
    ) -> io::Result<Option<Vec<u8>>> {
        match self.read(key, Some((start, end)))? {
            Read::Missing => Ok(None),
            Read::Value(v) => Ok(Some(v.bytes.to_vec())),
            Read::OutOfRange { len } => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("range {start}..{end:?} is outside the value ({len} bytes)"),
            )),
        }
    }

    /// The value of `key`, or bytes `start..end` of it (`range`: `Some((start, end))`, `end`
    /// clamped to the value's length, `None` for its end), with its version and length, all of
    /// the same write: a range is read through one [`podstore::ValueReader`], which reads the
    /// value as it was when it was made, whatever is written meanwhile. Reads only the chunks
    /// the range covers (and the header's).
    pub fn read(&self, key: &[u8], range: Option<(u64, Option<u64>)>) -> io::Result<Read> {
        let Some((start, end)) = range else {
            return Ok(Read::whole(self.get_versioned(key)?));
        };
        check(key, None).map_err(io::Error::other)?;
        let Some(reader) = self.store().reader(data_key(key)).map_err(io_err)? else {
            return Ok(Read::Missing);
        };
        let len = reader.len().saturating_sub(HEADER_LEN as u64);
        let mut header = [0u8; HEADER_LEN];
        reader.read_exact_at(0, &mut header).map_err(io_err)?;
        let version = version_of(&header)?;
        // The library's rule (`Store::get_range`): an end past the value is clamped, a start
        // past it (or an end before the start) is out of range, a start at the end reads
        // nothing.
        let end = end.unwrap_or(len);
        if start > len || end < start {
            return Ok(Read::OutOfRange { len });
        }
        let end = end.min(len);
        let mut buf = vec![0u8; (end - start) as usize];
        reader
            .read_exact_at(HEADER_LEN as u64 + start, &mut buf)
            .map_err(io_err)?;
        Ok(Read::Value(ValueRead {
            bytes: Bytes::from(buf),
            start,
            len,
            version,
        }))
    }

    /// The length of the value of `key`.
    pub fn value_len(&self, key: &[u8]) -> io::Result<Option<u64>> {
        check(key, None).map_err(io::Error::other)?;
        let stored = self.store().value_len(data_key(key)).map_err(io_err)?;
        Ok(stored.map(|l| l.saturating_sub(HEADER_LEN as u64)))
    }

    /// Up to `limit` keys starting with `prefix`, in byte order, after `after` (exclusive)
    /// when given, with their values' lengths (from the index: no value read); and whether
    /// more follow.
    pub fn list(
        &self,
        prefix: &[u8],
        after: Option<&[u8]>,
        limit: usize,
    ) -> io::Result<(Vec<Listed>, bool)> {
        use std::ops::Bound;
        let store = self.store();
        let start = match after {
            // A token before the prefix's keys starts at the prefix.
            Some(a) if a >= prefix => Bound::Excluded(data_key(a)),
            _ => Bound::Included(data_key(prefix)),
        };
        let want = data_key(prefix);
        let mut out = Vec::new();
        let entries = store.range::<Vec<u8>>((start, Bound::Unbounded)).entries();
        for entry in entries {
            let entry = entry.map_err(io_err)?;
            if !entry.key().starts_with(&want) {
                break;
            }
            if out.len() == limit {
                return Ok((out, true));
            }
            out.push(Listed {
                len: entry.value_len().saturating_sub(HEADER_LEN as u64),
                key: entry.into_key().split_off(1),
            });
        }
        Ok((out, false))
    }
}
