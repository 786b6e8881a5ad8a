//! The footer that seals a segment (or a blob file): its keys in ascending byte order, a compact
//! location table, zero padding, and a trailer that ends the file on a block boundary.
//!
//! Layout: docs/design.md, "Footer" (offsets checked against it by a test).
//!
//! ```text
//! | key section: "PODK" header, key blocks, fence-key tree | location table | pad | trailer |
//! ```
//!
//! The trailer (64 bytes, last in the file) points at the **location table**, one short entry
//! per key (a key hash and where its record is, in varints): what opening a store reads, at most
//! 32 bytes per key for small keys and values ([`decode_locations`]). The **key section** before
//! it holds the keys themselves, in blocks of about 4 KiB, and a B+-tree of their first keys
//! (the fence-key tree, written once at seal time) that ordered listing descends to the block a
//! range starts in, one node per level ([`decode_index_node`], [`decode_key_block`]); and it
//! serves the callers that want whole entries ([`decode_entries`], [`decode_footer`]).
//!
//! Footers of version 1 (a single table of whole entries in record order, [`v1`]) are still
//! decoded by every decoder here; [`encode_footer`] writes version 2 only.
//!
//! Every decoder is pure (no I/O) and returns [`Corruption`] on any input a writer of this
//! version would not have produced; none panics.

use std::borrow::Borrow;

use super::record::{FLAG_COMPRESSED, FLAG_EXPIRES, KNOWN_FLAGS, MAX_EXPIRES_AT_MS, RecordKind};
use super::{MAX_KEY_LEN, MAX_VALUE_LEN, align_up, check_crc, get_u32, get_u64, magic_at, need};
use crate::error::Corruption;

pub(crate) mod blocks;
mod bound;
pub(crate) mod keys;
pub(crate) mod locations;
pub(crate) mod tree;
pub mod v1;
pub mod varint;

#[cfg(test)]
mod bound_tests;
#[cfg(test)]
mod tests;

pub use blocks::{BlockLocations, Run};
pub use bound::FooterBound;
pub use keys::{
    BlockRef, KEY_BLOCK_TARGET, KEYS_HEADER_LEN, KEYS_MAGIC, KeyBlock, MAX_KEY_BLOCK_LEN,
    decode_key_block, parse_key_block,
};
pub use locations::{
    LOCATION_ENTRY_FIXED_LEN, LOCATION_HEADER_LEN, LOCATION_MAGIC, Location, LocationHeader,
    MAX_LOCATION_ENTRY_LEN, MIN_LOCATION_ENTRY_LEN, decode_locations, for_each_location,
};
pub use tree::{
    Child, IndexNode, MAX_NODE_LEN, MAX_TREE_DEPTH, NODE_HEADER_LEN, NODE_TARGET, decode_index_node,
};
pub use v1::{ENTRY_FIXED_LEN, TABLE_HEADER_LEN, TABLE_MAGIC};

/// Magic number of the trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"PODF";
/// Length of the trailer.
pub const TRAILER_LEN: usize = 64;
/// Trailer version of the old footer: one table of whole entries, in record order ([`v1`]).
pub const FOOTER_V1: u8 = 1;
/// Trailer version of the footer written now: sorted keys and a location table.
pub const FOOTER_V2: u8 = 2;
/// Trailer version of a footer of version 2 some of whose location entries carry an expiry
/// (bit 4 of their flags byte, then the expiry as a varint). A footer without one is written as
/// [`FOOTER_V2`], byte for byte as before, so that earlier builds read it; they refuse this
/// version as unsupported rather than misreading its entries.
pub const FOOTER_V3: u8 = 3;

mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const SEGMENT_ID: usize = 8;
    pub const ENTRY_COUNT: usize = 16;
    pub const TABLE_OFFSET: usize = 24;
    pub const TABLE_LEN: usize = 32;
    pub const DATA_END: usize = 40;
    pub const TABLE_CRC: usize = 48;
    pub const BLOCK_SIZE: usize = 52;
    pub const CRC: usize = 60;
}

#[cfg(test)]
pub(crate) const TRAILER_FIELDS: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::VERSION, 1),
    (off::SEGMENT_ID, 8),
    (off::ENTRY_COUNT, 8),
    (off::TABLE_OFFSET, 8),
    (off::TABLE_LEN, 8),
    (off::DATA_END, 8),
    (off::TABLE_CRC, 4),
    (off::BLOCK_SIZE, 4),
    (off::CRC, 4),
];

/// A footer names each key's newest record by its summary, defined with the record.
pub use super::record::FooterEntry;

/// The hash of a key that footers of version 2 store next to its location: xxh3, 64 bits
/// (`xxhash_rust::xxh3::xxh3_64`, seed 0). It is written to disk, so it never changes.
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// The decoded trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Footer version: [`FOOTER_V1`], [`FOOTER_V2`] or [`FOOTER_V3`].
    pub version: u8,
    /// Segment id.
    pub segment: u64,
    /// Number of entries (keys).
    pub entry_count: u64,
    /// Offset of the table in the file: the location table (version 2), the entry table
    /// (version 1).
    pub table_offset: u64,
    /// Length of the table in bytes.
    pub table_len: u64,
    /// One past the last record byte.
    pub data_end: u64,
    /// crc32 of (segment id, table bytes).
    pub table_crc: u32,
    /// Write block size of the segment.
    pub block_size: u32,
}

impl Trailer {
    /// Encodes the trailer.
    pub fn encode(&self) -> [u8; TRAILER_LEN] {
        let mut b = [0u8; TRAILER_LEN];
        b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&TRAILER_MAGIC);
        b[off::VERSION] = self.version;
        let put64 = |b: &mut [u8; TRAILER_LEN], at: usize, v: u64| {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes())
        };
        put64(&mut b, off::SEGMENT_ID, self.segment);
        put64(&mut b, off::ENTRY_COUNT, self.entry_count);
        put64(&mut b, off::TABLE_OFFSET, self.table_offset);
        put64(&mut b, off::TABLE_LEN, self.table_len);
        put64(&mut b, off::DATA_END, self.data_end);
        b[off::TABLE_CRC..off::TABLE_CRC + 4].copy_from_slice(&self.table_crc.to_le_bytes());
        b[off::BLOCK_SIZE..off::BLOCK_SIZE + 4].copy_from_slice(&self.block_size.to_le_bytes());
        let crc = crc32fast::hash(&b[..off::CRC]);
        b[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the trailer from the last `TRAILER_LEN` bytes of a file of `file_len` bytes and
    /// checks that the table it points at lies inside the file, before the trailer.
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Trailer, Corruption> {
        need(bytes, TRAILER_LEN)?;
        let magic = magic_at(bytes, off::MAGIC);
        if magic != TRAILER_MAGIC {
            return Err(Corruption::BadMagic {
                structure: "footer trailer",
                found: magic,
            });
        }
        check_crc(
            crc32fast::hash(&bytes[..off::CRC]),
            get_u32(bytes, off::CRC),
        )?;
        let version = bytes[off::VERSION];
        if version != FOOTER_V1 && version != FOOTER_V2 && version != FOOTER_V3 {
            return Err(Corruption::UnsupportedVersion {
                found: version as u32,
            });
        }
        super::reserved_zero(
            &bytes[off::VERSION + 1..off::SEGMENT_ID],
            "trailer reserved",
        )?;
        super::reserved_zero(&bytes[off::BLOCK_SIZE + 4..off::CRC], "trailer reserved")?;
        let t = Trailer {
            version,
            segment: get_u64(bytes, off::SEGMENT_ID),
            entry_count: get_u64(bytes, off::ENTRY_COUNT),
            table_offset: get_u64(bytes, off::TABLE_OFFSET),
            table_len: get_u64(bytes, off::TABLE_LEN),
            data_end: get_u64(bytes, off::DATA_END),
            table_crc: get_u32(bytes, off::TABLE_CRC),
            block_size: get_u32(bytes, off::BLOCK_SIZE),
        };
        let trailer_start = file_len.saturating_sub(TRAILER_LEN as u64);
        let invalid = |field, value| Err(Corruption::InvalidField { field, value });
        if !t.block_size.is_power_of_two() || !(512..=65536).contains(&t.block_size) {
            return invalid("trailer block size", t.block_size as u64);
        }
        if t.table_len < t.table_header_len() as u64
            || t.table_offset
                .checked_add(t.table_len)
                .is_none_or(|end| end > trailer_start)
        {
            return invalid("trailer table length", t.table_len);
        }
        if t.data_end > t.table_offset
            || t.data_end < super::segment_header::SEGMENT_HEADER_LEN as u64
        {
            return invalid("trailer data end", t.data_end);
        }
        if t.entry_count > t.max_entries() {
            return invalid("trailer entry count", t.entry_count);
        }
        Ok(t)
    }

    /// Length of the fixed header of the table this trailer's version points at.
    fn table_header_len(&self) -> usize {
        if self.version == FOOTER_V1 {
            TABLE_HEADER_LEN
        } else {
            LOCATION_HEADER_LEN
        }
    }

    /// The most entries a table of `table_len` bytes can hold (bounds every allocation).
    pub(crate) fn max_entries(&self) -> u64 {
        let (header, min_entry) = if self.version == FOOTER_V1 {
            (TABLE_HEADER_LEN, ENTRY_FIXED_LEN + 1)
        } else {
            (LOCATION_HEADER_LEN, MIN_LOCATION_ENTRY_LEN)
        };
        self.table_len.saturating_sub(header as u64) / min_entry as u64
    }
}

/// crc32(segment id ‖ bytes): the table crc of the trailer.
pub(crate) fn segment_crc(segment: u64, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(bytes);
    h.finalize()
}

/// Encodes a complete footer of version 2 (key section, location table, padding, trailer) to be
/// written at `footer_offset`; its length makes the file end on a multiple of `block_size`.
///
/// `entries` may come in any order: the footer lists them in ascending byte order of key. A
/// key that comes more than once is named once, by its entry with the highest sequence
/// number, the later one in `entries` of equals (a seal passes a segment's records as they
/// were written).
pub fn encode_footer(
    segment: u64,
    data_end: u64,
    footer_offset: u64,
    block_size: u32,
    entries: &[FooterEntry],
) -> Vec<u8> {
    encode_footer_with_blocks(segment, data_end, footer_offset, block_size, entries).0
}

/// The newest entry of each key of `entries`, by key: a footer names a key once (the decoder
/// requires strictly ascending keys), its newest: the highest sequence number, and of two with
/// one key and one sequence number (two writes of one key in one batch), the later in
/// `entries`. So a seal passes its segment's records as they were written, duplicates and all:
/// this sort, which the footer needs anyway, keeps each key's last record, where a pass over
/// a hash map of the keys did before it (a fifth of a seal's time over 100 000 records in
/// `cargo bench --bench codec`, a third of the seal's samples in a profile of podstore-raft's
/// followers). A seal sorts under the append lock: the sort is unstable (half the time of a
/// stable one; the position is in the order, so nothing depends on stability), and by a word
/// of each key.
///
/// The word is the 8 bytes of the key after the prefix that every key shares (zero-padded,
/// big-endian): most comparisons, and the search for entries of one key, are of two integers
/// side by side in one array; only keys equal in their words are compared whole, through their
/// pointers (a cache miss each in a large segment). The order is the keys' own: all share the
/// prefix, and of two keys whose words differ, the one with the smaller word is smaller (at the
/// first byte that differs both have a byte, or the shorter key ends there and is a prefix of
/// the other, whose byte there is not 0).
fn newest_by_key(entries: Vec<&FooterEntry>) -> Vec<&FooterEntry> {
    let Some(first) = entries.first() else {
        return entries;
    };
    let shared = entries.iter().fold(first.key.len(), |n, e| {
        n.min(
            first.key[..n]
                .iter()
                .zip(&e.key)
                .take_while(|(a, b)| a == b)
                .count(),
        )
    });
    let word = |key: &[u8]| {
        let rest = &key[shared..];
        let mut w = [0u8; 8];
        let n = rest.len().min(8);
        w[..n].copy_from_slice(&rest[..n]);
        u64::from_be_bytes(w)
    };
    let mut keyed: Vec<(u64, usize, &FooterEntry)> = entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| (word(&e.key), i, e))
        .collect();
    keyed.sort_unstable_by(|(wa, ia, a), (wb, ib, b)| {
        wa.cmp(wb)
            .then_with(|| a.key.cmp(&b.key))
            .then(a.seq.cmp(&b.seq))
            .then(ia.cmp(ib))
    });
    // Of each run of one key, the last: the highest sequence number, the latest of equals.
    keyed.dedup_by(|(later_word, _, later), (earlier_word, _, earlier)| {
        if later_word != earlier_word || later.key != earlier.key {
            return false;
        }
        *earlier = *later;
        true
    });
    keyed.into_iter().map(|(_, _, e)| e).collect()
}

/// [`encode_footer`], and where each key block's location entries are in it (what a seal keeps
/// for listings, [`BlockLocations`]), found as the footer is encoded.
pub fn encode_footer_with_blocks(
    segment: u64,
    data_end: u64,
    footer_offset: u64,
    block_size: u32,
    entries: &[impl Borrow<FooterEntry>],
) -> (Vec<u8>, BlockLocations) {
    let sorted = newest_by_key(entries.iter().map(Borrow::borrow).collect());
    let mut out = Vec::with_capacity(
        sorted.iter().map(|e| e.key.len() + 40).sum::<usize>()
            + LOCATION_HEADER_LEN
            + TRAILER_LEN
            + block_size as usize,
    );
    let tree = keys::encode_key_section(&mut out, segment, footer_offset, &sorted);
    let table_offset = footer_offset + out.len() as u64;
    let base_seq = sorted.iter().map(|e| e.seq).min().unwrap_or(0);
    let header = tree.header(footer_offset, out.len() as u64, base_seq);
    let table_start = out.len();
    let mut blocks = blocks::BlocksBuilder::new(footer_offset);
    locations::encode_locations(&mut out, &header, &sorted, |e, pos| {
        blocks.push(e.key.len(), e.offset, pos)
    });
    let table_len = (out.len() - table_start) as u64;
    let crc = segment_crc(segment, &out[table_start..]);
    let end = align_up(
        table_offset + table_len + TRAILER_LEN as u64,
        block_size as u64,
    );
    out.resize((end - footer_offset) as usize - TRAILER_LEN, 0);
    let expires = sorted.iter().any(|e| e.expires_at.is_some());
    let trailer = Trailer {
        version: if expires { FOOTER_V3 } else { FOOTER_V2 },
        segment,
        entry_count: sorted.len() as u64,
        table_offset,
        table_len,
        data_end,
        table_crc: crc,
        block_size,
    };
    out.extend_from_slice(&trailer.encode());
    let blocks = blocks.finish(&trailer, &header);
    (out, blocks)
}

/// Where the key section of a footer lies: `Some((offset, length))` for version 2 (read from
/// the location table `table`, which this verifies), `None` for version 1 (whose table holds
/// the keys).
pub fn key_section(trailer: &Trailer, table: &[u8]) -> Result<Option<(u64, u64)>, Corruption> {
    if trailer.version == FOOTER_V1 {
        return Ok(None);
    }
    let h = LocationHeader::decode(trailer, table)?;
    Ok(Some((h.key_offset, h.key_len)))
}

/// Decodes and verifies a whole footer into its entries, keys included, in ascending key
/// order (version 2) or in record order (version 1).
///
/// `table` is the table the trailer points at (`trailer.table_len` bytes at
/// `trailer.table_offset`); `keys` is the key section (see [`key_section`]) for version 2, and
/// is ignored for version 1.
pub fn decode_entries(
    trailer: &Trailer,
    keys: &[u8],
    table: &[u8],
) -> Result<Vec<FooterEntry>, Corruption> {
    if trailer.version == FOOTER_V1 {
        return v1::decode_table(trailer, table);
    }
    let header = LocationHeader::decode(trailer, table)?;
    let locations = decode_locations(trailer, table)?;
    keys::decode_all(trailer, &header, keys, locations)
}

/// [`decode_entries`] on the bytes of a file from `footer_offset` on: they must start at or
/// before the key section (version 2) or the table (version 1) and reach the table's end.
pub fn decode_footer(
    trailer: &Trailer,
    footer: &[u8],
    footer_offset: u64,
) -> Result<Vec<FooterEntry>, Corruption> {
    let slice = |at: u64, len: u64| -> Result<&[u8], Corruption> {
        let start = at
            .checked_sub(footer_offset)
            .ok_or(Corruption::InvalidField {
                field: "footer offset",
                value: footer_offset,
            })?;
        let end = start.saturating_add(len);
        need(footer, usize::try_from(end).unwrap_or(usize::MAX))?;
        Ok(&footer[start as usize..end as usize])
    };
    let table = slice(trailer.table_offset, trailer.table_len)?;
    let keys = match key_section(trailer, table)? {
        Some((at, len)) => slice(at, len)?,
        None => &[],
    };
    decode_entries(trailer, keys, table)
}

/// Checks an entry's expiry against its flags, as a record's: the expiry flag goes with an
/// expiry (`None` for a footer of a version without them), never on a tombstone, and the
/// expiry is within bounds.
pub(crate) fn check_entry_expiry(
    kind: RecordKind,
    flags: u16,
    expires_at: Option<u64>,
) -> Result<(), Corruption> {
    if (flags & FLAG_EXPIRES != 0) != expires_at.is_some()
        || (kind == RecordKind::Tombstone && flags & FLAG_EXPIRES != 0)
    {
        return Err(Corruption::InvalidField {
            field: "footer record flags",
            value: flags as u64,
        });
    }
    match expires_at {
        Some(at) if at == 0 || at > MAX_EXPIRES_AT_MS => Err(Corruption::InvalidField {
            field: "footer record expiry",
            value: at,
        }),
        _ => Ok(()),
    }
}

/// Checks the fields of an entry that do not depend on the footer's version. `offset` must lie
/// in the data region of the segment (`[segment header, data_end)`).
pub(crate) fn check_entry_fields(
    kind: RecordKind,
    flags: u16,
    offset: u64,
    stored_len: u64,
    value_len: u64,
    key_len: usize,
    data_end: u64,
) -> Result<(), Corruption> {
    let invalid = |field, value| Err(Corruption::InvalidField { field, value });
    if key_len == 0 || key_len > MAX_KEY_LEN {
        return invalid("footer key length", key_len as u64);
    }
    if flags & !KNOWN_FLAGS != 0 || (kind == RecordKind::Tombstone && flags & FLAG_COMPRESSED != 0)
    {
        return invalid("footer record flags", flags as u64);
    }
    if stored_len > MAX_VALUE_LEN || (kind == RecordKind::Tombstone && stored_len != 0) {
        return invalid("footer stored length", stored_len);
    }
    // Only a compressed value has a length of its own; it is bounded like any value.
    if value_len > MAX_VALUE_LEN || (flags & FLAG_COMPRESSED == 0 && value_len != stored_len) {
        return invalid("footer value length", value_len);
    }
    if offset < super::segment_header::SEGMENT_HEADER_LEN as u64 || offset >= data_end {
        return invalid("footer record offset", offset);
    }
    Ok(())
}
