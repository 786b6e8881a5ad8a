//! The log's records: one podstore record holds a run of consecutive entries (all of an
//! append's, unless they encode to more than [`RECORD_BYTES`]), so that an append costs the
//! store one key (one index look-up, one record header) however many entries it carries.
//!
//! Key (17 bytes): `e`, the first entry's index, the last entry's index (both big-endian, so
//! records sort by index and a record's extent is known from its key alone: reclaiming purged
//! records and finding the record that holds an index need no value read).
//!
//! Value: a format byte ([`FORMAT`]), the committed log id known when the record was written
//! (postcard, `Option<LogId>`: the committed id rides on the appends instead of a write of its
//! own), then for each entry, in index order, its postcard encoding's length (u32,
//! little-endian) and the encoding.

use std::io;

use openraft::alias::{EntryOf, LogIdOf};
use openraft::entry::RaftEntry;

use crate::{TypeConfig, decode};

type Entry = EntryOf<TypeConfig>;
type LogId = LogIdOf<TypeConfig>;

/// The length of a record's key.
pub(super) const KEY_LEN: usize = 17;
/// The first byte of a record's value: its layout, for a later change of it.
const FORMAT: u8 = 1;
/// An append is cut into records of at most about this many bytes of entries (a record holds at
/// least one entry, so one larger entry is a record of its own): a reader of one entry from
/// the store reads its whole record.
pub(super) const RECORD_BYTES: usize = 1 << 20;
/// A key after every record's (the metadata keys, `m/...`, sort after it).
pub(super) const END: &[u8] = b"f";

/// The key of the record holding entries `first..=last`.
pub(super) fn record_key(first: u64, last: u64) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[0] = b'e';
    k[1..9].copy_from_slice(&first.to_be_bytes());
    k[9..].copy_from_slice(&last.to_be_bytes());
    k
}

/// A bound between records: every record starting before `index` sorts before it, every record
/// starting at or after it sorts after it.
pub(super) fn bound(index: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = b'e';
    k[1..].copy_from_slice(&index.to_be_bytes());
    k
}

/// The first and last index of the record under `key`.
pub(super) fn extent(key: &[u8]) -> io::Result<(u64, u64)> {
    if key.len() != KEY_LEN || key[0] != b'e' {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "log key {key:02x?} is not a record key of {KEY_LEN} bytes (a log written by \
                 an earlier podstore-raft, one record per entry, is not readable by this one)"
            ),
        ));
    }
    let first = u64::from_be_bytes(key[1..9].try_into().expect("8 bytes"));
    let last = u64::from_be_bytes(key[9..].try_into().expect("8 bytes"));
    if last < first {
        return Err(bad("a record's last index is before its first"));
    }
    Ok((first, last))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("raft log record: {what}"),
    )
}

/// A record's value up to its first entry, written into `value` (emptied first).
fn header(committed: Option<&LogId>, mut value: Vec<u8>) -> io::Result<Vec<u8>> {
    value.clear();
    value.push(FORMAT);
    postcard::to_extend(&committed, value)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// A record to write: its key and value.
pub(super) struct Record {
    pub(super) key: [u8; KEY_LEN],
    pub(super) value: Vec<u8>,
}

/// Records being built from an append's entries.
pub(super) struct Builder {
    committed: Option<LogId>,
    records: Vec<Record>,
    /// The record being filled: its first index, last index, value.
    open: Option<(u64, u64, Vec<u8>)>,
    /// A buffer for the first record's value (a previous append's, so that an append neither
    /// allocates its record nor grows it through copies and page faults).
    spare: Vec<u8>,
}

impl Builder {
    /// A builder whose first record is written into `spare` (its contents are dropped).
    pub(super) fn new(committed: Option<LogId>, spare: Vec<u8>) -> Builder {
        Builder {
            committed,
            records: Vec::new(),
            open: None,
            spare,
        }
    }

    /// Adds the next entry (its index follows the previous one's); returns its encoded length.
    pub(super) fn push(&mut self, entry: &Entry) -> io::Result<usize> {
        let index = entry.index();
        let cut = self.open.as_ref().is_some_and(|(_, last, value)| {
            last.checked_add(1) != Some(index) || value.len() >= RECORD_BYTES
        });
        if cut {
            self.close();
        }
        if self.open.is_none() {
            let value = header(self.committed.as_ref(), std::mem::take(&mut self.spare))?;
            self.open = Some((index, index, value));
        }
        let (_, last, value) = self.open.as_mut().expect("a record is open");
        // Sized first (a pass without copies), so that the record grows once per entry, by
        // exactly its length, instead of doubling its way up through copies.
        let len = postcard::experimental::serialized_size(entry)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let len32 = u32::try_from(len).map_err(|_| bad("an entry of 4 GiB or more"))?;
        value.reserve(4 + len);
        value.extend_from_slice(&len32.to_le_bytes());
        let at = value.len();
        *value = postcard::to_extend(entry, std::mem::take(value))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if value.len() - at != len {
            return Err(bad("an entry's encoding changed its length"));
        }
        *last = index;
        Ok(len)
    }

    fn close(&mut self) {
        if let Some((first, last, value)) = self.open.take() {
            self.records.push(Record {
                key: record_key(first, last),
                value,
            });
        }
    }

    /// The records, in index order.
    pub(super) fn finish(mut self) -> Vec<Record> {
        self.close();
        self.records
    }
}

/// A record read back from the store.
pub(super) struct Parsed<'a> {
    /// The committed id carried by the record.
    pub(super) committed: Option<LogId>,
    pub(super) first: u64,
    pub(super) last: u64,
    /// The format byte and the committed id, as written.
    head: &'a [u8],
    /// The entries, each length and encoding.
    body: &'a [u8],
}

impl<'a> Parsed<'a> {
    /// Parses the record `value` stored under `key`.
    pub(super) fn new(key: &[u8], value: &'a [u8]) -> io::Result<Parsed<'a>> {
        let (first, last) = extent(key)?;
        match value.first() {
            Some(&FORMAT) => {}
            Some(f) => return Err(bad(&format!("unknown format {f}"))),
            None => return Err(bad("empty")),
        }
        let (committed, body) = postcard::take_from_bytes::<Option<LogId>>(&value[1..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let head = &value[..value.len() - body.len()];
        Ok(Parsed {
            committed,
            first,
            last,
            head,
            body,
        })
    }

    /// The entries' encodings with their indexes, in order; an error if the record holds fewer
    /// or more than its key says.
    pub(super) fn entries(&self) -> impl Iterator<Item = io::Result<(u64, &'a [u8])>> + '_ {
        let mut rest = self.body;
        // The index of the next entry; `None` once the last one the key names was yielded.
        let mut index = Some(self.first);
        let last = self.last;
        std::iter::from_fn(move || {
            let Some(i) = index else {
                if rest.is_empty() {
                    return None;
                }
                rest = &[];
                return Some(Err(bad("more entries than its key says")));
            };
            let next = rest.split_first_chunk::<4>().and_then(|(len, after)| {
                let len = u32::from_le_bytes(*len) as usize;
                (after.len() >= len).then(|| after.split_at(len))
            });
            let Some((bytes, after)) = next else {
                (index, rest) = (None, &[]);
                return Some(Err(bad(
                    "fewer entries than its key says, or one cut short",
                )));
            };
            rest = after;
            index = (i < last).then(|| i + 1);
            Some(Ok((i, bytes)))
        })
    }

    /// The decoded entries from `from` up to `stop` (exclusive), up to the first that brings
    /// their encoded bytes to what `budget` held (counted down in it).
    pub(super) fn decode_range(
        &self,
        from: u64,
        stop: u64,
        out: &mut Vec<Entry>,
        budget: &mut usize,
    ) -> io::Result<()> {
        for item in self.entries() {
            let (index, bytes) = item?;
            if index >= stop || *budget == 0 {
                break;
            }
            if index >= from {
                *budget = budget.saturating_sub(bytes.len());
                out.push(decode(bytes)?);
            }
        }
        Ok(())
    }

    /// The last entry, decoded.
    pub(super) fn last_entry(&self) -> io::Result<Entry> {
        let mut last = None;
        for item in self.entries() {
            last = Some(item?.1);
        }
        decode(last.ok_or_else(|| bad("no entries"))?)
    }

    /// This record cut after entry `to` (`first <= to < last`): the same header, the entries up
    /// to `to`.
    pub(super) fn prefix(&self, to: u64) -> io::Result<Record> {
        for item in self.entries() {
            let (index, bytes) = item?;
            // `bytes` is a part of `body`: where it ends in it.
            let end = bytes.as_ptr() as usize + bytes.len() - self.body.as_ptr() as usize;
            if index == to {
                let mut value = Vec::with_capacity(self.head.len() + end);
                value.extend_from_slice(self.head);
                value.extend_from_slice(&self.body[..end]);
                return Ok(Record {
                    key: record_key(self.first, to),
                    value,
                });
            }
        }
        Err(bad("cut after an entry it does not hold"))
    }
}
