//! The location table of a footer of version 2: a fixed header (where the key section and the
//! root of its fence-key tree are, the tree's depth, the base sequence number), then one entry
//! per key, in ascending key order, of a fixed key hash and varints. What opening a store reads:
//! no keys.

use super::keys::{BlockRef, KEYS_HEADER_LEN, MIN_KEY_BLOCK_LEN};
use super::tree::{MAX_NODE_LEN, MAX_TREE_DEPTH, MIN_NODE_LEN};
use super::varint;
use super::{
    FOOTER_V1, FOOTER_V3, FooterEntry, Trailer, check_entry_fields, key_hash, segment_crc,
};
use crate::error::Corruption;
use crate::format::record::{FLAG_COMPRESSED, FLAG_EXPIRES, KNOWN_FLAGS, RecordKind};
use crate::format::{
    MAX_KEY_LEN, MAX_VALUE_LEN, check_crc, get_u32, get_u64, magic_at, need, reserved_zero,
};

/// Magic number of the location table.
pub const LOCATION_MAGIC: [u8; 4] = *b"PODL";
/// Length of the location table's header.
pub const LOCATION_HEADER_LEN: usize = 56;
/// Shortest location entry: the key hash and five one-byte fields.
pub const MIN_LOCATION_ENTRY_LEN: usize = 8 + 5;
/// Longest location entry: the key hash, sequence delta and offset of up to 10 bytes, stored
/// length 5, key length 2, flags and kind 1, value length 5, expiry 8 (at most
/// [`MAX_EXPIRES_AT_MS`](crate::format::record::MAX_EXPIRES_AT_MS), under 2^56).
pub const MAX_LOCATION_ENTRY_LEN: usize = 8 + 10 + 10 + 5 + 2 + 1 + 5 + 8;

/// In a location entry's flags-and-kind byte: the record has an expiry, which follows the
/// entry's other fields as a varint (footers of version 3 only).
const ENTRY_EXPIRES: u8 = 0x10;

mod off {
    pub const MAGIC: usize = 0;
    pub const ROOT_LEN: usize = 4;
    pub const KEY_OFFSET: usize = 8;
    pub const KEY_LEN: usize = 16;
    pub const ROOT_OFFSET: usize = 24;
    pub const DEPTH: usize = 32;
    pub const RESERVED_1: usize = 33;
    pub const BASE_SEQ: usize = 40;
    pub const RESERVED_2: usize = 48;
}

#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::ROOT_LEN, 4),
    (off::KEY_OFFSET, 8),
    (off::KEY_LEN, 8),
    (off::ROOT_OFFSET, 8),
    (off::DEPTH, 1),
    (off::RESERVED_1, 7),
    (off::BASE_SEQ, 8),
    (off::RESERVED_2, 8),
];

/// The fixed part of a location entry (the rest is varints).
#[cfg(test)]
pub(crate) const ENTRY_FIELDS: &[(usize, usize)] = &[(0, 8)];
/// Length of the fixed part of a location entry: the key hash.
pub const LOCATION_ENTRY_FIXED_LEN: usize = 8;

/// The header of a location table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocationHeader {
    /// File offset of the key section (its `PODK` header).
    pub key_offset: u64,
    /// Length of the key section: header, key blocks and fence-key tree. It ends where the
    /// location table starts.
    pub key_len: u64,
    /// File offset of the root node of the fence-key tree (without keys: the end of the key
    /// section).
    pub root_offset: u64,
    /// Length of the root node (0 without keys). The root ends the key section.
    pub root_len: u32,
    /// Number of index levels above the key blocks: 1 ..= [`MAX_TREE_DEPTH`], 0 without keys.
    pub depth: u8,
    /// The lowest sequence number of the entries; each entry stores its own minus this.
    pub base_seq: u64,
}

impl LocationHeader {
    /// The root node of the fence-key tree, of level [`depth`](Self::depth); `None` without keys.
    pub fn root(&self) -> Option<BlockRef> {
        (self.depth > 0).then_some(BlockRef {
            offset: self.root_offset,
            len: self.root_len,
        })
    }

    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        let mut b = [0u8; LOCATION_HEADER_LEN];
        b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&LOCATION_MAGIC);
        b[off::ROOT_LEN..off::ROOT_LEN + 4].copy_from_slice(&self.root_len.to_le_bytes());
        for (at, v) in [
            (off::KEY_OFFSET, self.key_offset),
            (off::KEY_LEN, self.key_len),
            (off::ROOT_OFFSET, self.root_offset),
            (off::BASE_SEQ, self.base_seq),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        b[off::DEPTH] = self.depth;
        out.extend_from_slice(&b);
    }

    /// Verifies the location table `table` of a footer of version 2 (its crc, from the
    /// trailer) and decodes its header, checking that the key section lies between the data end
    /// and the table, and that the root of its tree ends it.
    pub fn decode(trailer: &Trailer, table: &[u8]) -> Result<LocationHeader, Corruption> {
        if trailer.version == FOOTER_V1 {
            return Err(Corruption::UnsupportedVersion {
                found: trailer.version as u32,
            });
        }
        let table_len = usize::try_from(trailer.table_len).unwrap_or(usize::MAX);
        need(table, table_len)?;
        let table = &table[..table_len];
        check_crc(segment_crc(trailer.segment, table), trailer.table_crc)?;
        Self::decode_header(trailer, table)
    }

    /// Decodes the header from the first [`LOCATION_HEADER_LEN`] bytes of the location table
    /// **without** the table's crc (which covers the whole table): for a reader of keys, which
    /// reads the header and a path down the fence-key tree but not the table. Every field is
    /// checked against the trailer (which verified) as [`LocationHeader::decode`] checks it; the
    /// crcs of the nodes and key blocks read, each bound to its offset, and the level each node
    /// records, then verify what the reader uses.
    pub fn decode_header(trailer: &Trailer, header: &[u8]) -> Result<LocationHeader, Corruption> {
        if trailer.version == FOOTER_V1 {
            return Err(Corruption::UnsupportedVersion {
                found: trailer.version as u32,
            });
        }
        let table = header;
        need(table, LOCATION_HEADER_LEN)?;
        let magic = magic_at(table, off::MAGIC);
        if magic != LOCATION_MAGIC {
            return Err(Corruption::BadMagic {
                structure: "footer location table",
                found: magic,
            });
        }
        reserved_zero(
            &table[off::RESERVED_1..off::BASE_SEQ],
            "location table reserved",
        )?;
        reserved_zero(
            &table[off::RESERVED_2..LOCATION_HEADER_LEN],
            "location table reserved",
        )?;
        let h = LocationHeader {
            key_offset: get_u64(table, off::KEY_OFFSET),
            key_len: get_u64(table, off::KEY_LEN),
            root_offset: get_u64(table, off::ROOT_OFFSET),
            root_len: get_u32(table, off::ROOT_LEN),
            depth: table[off::DEPTH],
            base_seq: get_u64(table, off::BASE_SEQ),
        };
        let invalid = |field, value| Err(Corruption::InvalidField { field, value });
        if h.key_offset < trailer.data_end
            || h.key_offset.checked_add(h.key_len) != Some(trailer.table_offset)
        {
            return invalid("footer key section offset", h.key_offset);
        }
        // The root ends the key section.
        if h.root_offset.checked_add(h.root_len as u64) != Some(trailer.table_offset) {
            return invalid("footer index root offset", h.root_offset);
        }
        let blocks_at = h.key_offset.saturating_add(KEYS_HEADER_LEN as u64);
        if trailer.entry_count == 0 {
            // No keys: no blocks, no tree.
            if h.depth != 0 || h.root_len != 0 {
                return invalid("footer index depth", h.depth as u64);
            }
            if h.root_offset != blocks_at {
                return invalid("footer index root offset", h.root_offset);
            }
            return Ok(h);
        }
        if h.depth == 0 || h.depth > MAX_TREE_DEPTH {
            return invalid("footer index depth", h.depth as u64);
        }
        if !(MIN_NODE_LEN..=MAX_NODE_LEN).contains(&(h.root_len as usize)) {
            return invalid("footer index node length", h.root_len as u64);
        }
        // At least one key block before the root.
        if h.root_offset < blocks_at.saturating_add(MIN_KEY_BLOCK_LEN as u64) {
            return invalid("footer index root offset", h.root_offset);
        }
        Ok(h)
    }
}

/// Where one key's newest record in a segment is, as the location table says: everything a
/// footer entry holds but the key, plus the key's hash and its position in key order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// [`key_hash`] of the key.
    pub key_hash: u64,
    /// Sequence number of the record.
    pub seq: u64,
    /// Record offset in the segment.
    pub offset: u64,
    /// Length of the value bytes in the record (after compression).
    pub stored_len: u64,
    /// Length of the value as put (equal to `stored_len` unless compressed).
    pub value_len: u64,
    /// Length of the key (1 ..= 4096).
    pub key_len: u16,
    /// The record's flags.
    pub flags: u16,
    /// Put or tombstone.
    pub kind: RecordKind,
    /// Position of the key in the footer's ascending key order (0-based).
    pub ordinal: u32,
    /// When the value expires, in milliseconds since the Unix epoch; `None` if it does not.
    pub expires_at: Option<u64>,
}

impl Location {
    /// The location of footer entry `e`, `ordinal`-th in key order.
    pub fn of_entry(e: &FooterEntry, ordinal: u32) -> Location {
        Location {
            key_hash: key_hash(&e.key),
            seq: e.seq,
            offset: e.offset,
            stored_len: e.stored_len,
            value_len: e.value_len,
            key_len: e.key.len() as u16,
            flags: e.flags,
            kind: e.kind,
            ordinal,
            expires_at: e.expires_at,
        }
    }

    /// The footer entry of this location with its key.
    pub fn with_key(&self, key: Vec<u8>) -> FooterEntry {
        FooterEntry {
            key,
            kind: self.kind,
            flags: self.flags,
            offset: self.offset,
            stored_len: self.stored_len,
            value_len: self.value_len,
            seq: self.seq,
            expires_at: self.expires_at,
        }
    }
}

/// Appends the location table: header, then one entry per key of `sorted` (ascending keys).
pub(super) fn encode_locations(
    out: &mut Vec<u8>,
    header: &LocationHeader,
    sorted: &[&FooterEntry],
    mut at: impl FnMut(&FooterEntry, usize),
) {
    let start = out.len();
    header.encode(out);
    for e in sorted {
        at(e, out.len() - start);
        debug_assert!(e.flags & !KNOWN_FLAGS == 0 && e.seq >= header.base_seq);
        out.extend_from_slice(&key_hash(&e.key).to_le_bytes());
        varint::put(out, e.seq - header.base_seq);
        varint::put(out, e.offset);
        varint::put(out, e.stored_len);
        varint::put(out, e.key.len() as u64);
        debug_assert_eq!(e.flags & FLAG_EXPIRES != 0, e.expires_at.is_some());
        let expires = if e.expires_at.is_some() {
            ENTRY_EXPIRES
        } else {
            0
        };
        out.push((e.flags as u8 & 0b11) | ((e.kind as u8) << 2) | expires);
        if e.flags & FLAG_COMPRESSED != 0 {
            varint::put(out, e.value_len);
        }
        if let Some(at) = e.expires_at {
            varint::put(out, at);
        }
    }
}

/// Decodes and verifies the location table `table` described by `trailer` (the
/// `trailer.table_len` bytes at `trailer.table_offset`), in ascending key order.
///
/// For a footer of version 1 it decodes the old table (keys included), sorts it by key and
/// hashes the keys, so that callers need not know the version.
pub fn decode_locations(trailer: &Trailer, table: &[u8]) -> Result<Vec<Location>, Corruption> {
    // Bounded by what the bytes can hold, whatever the trailer says.
    let fit = (table.len() / MIN_LOCATION_ENTRY_LEN) as u64;
    let mut out = Vec::with_capacity(trailer.entry_count.min(fit) as usize);
    for_each_location(trailer, table, |l| out.push(l))?;
    Ok(out)
}

/// [`decode_locations`] without collecting them: calls `f` with each location in ascending key
/// order as it is decoded (no vector of them: open builds its index from a table of millions).
/// An error can come after some calls; a caller that must not act on a table that fails
/// checks it first (`for_each_location(t, table, |_| ())`).
pub fn for_each_location(
    trailer: &Trailer,
    table: &[u8],
    mut f: impl FnMut(Location),
) -> Result<(), Corruption> {
    for_each_location_at(trailer, table, |l, _| f(l))
}

/// [`for_each_location`], with each entry's position in the table (for a footer of version 1,
/// whose entries are sorted in memory, 0).
pub(crate) fn for_each_location_at(
    trailer: &Trailer,
    table: &[u8],
    mut f: impl FnMut(Location, usize),
) -> Result<(), Corruption> {
    if trailer.version == FOOTER_V1 {
        let mut entries = super::v1::decode_table(trailer, table)?;
        entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        for (i, e) in entries.iter().enumerate() {
            f(Location::of_entry(e, i as u32), 0);
        }
        return Ok(());
    }
    let header = LocationHeader::decode(trailer, table)?;
    let table = &table[..trailer.table_len as usize];
    // Bounded by the table length (Trailer::decode, and again here for trailers built by hand).
    let count = trailer.entry_count;
    if count > trailer.max_entries() || count > u32::MAX as u64 {
        return Err(Corruption::InvalidField {
            field: "trailer entry count",
            value: count,
        });
    }
    let mut pos = LOCATION_HEADER_LEN;
    for ordinal in 0..count as u32 {
        let at = pos;
        let l = decode_location(
            table,
            &mut pos,
            header.base_seq,
            trailer.data_end,
            trailer.version == FOOTER_V3,
            ordinal,
        )?;
        f(l, at);
    }
    if pos != table.len() {
        return Err(Corruption::InvalidField {
            field: "footer table length",
            value: table.len() as u64,
        });
    }
    Ok(())
}

/// Decodes the location entry at `*pos` of `table` (a footer of version 2 or 3 whose lowest
/// sequence number is `base_seq` and whose records end at `data_end`; `expiry_allowed` for
/// version 3, whose entries may carry an expiry), the `ordinal`-th in key order, and moves
/// `*pos` past it.
pub(crate) fn decode_location(
    table: &[u8],
    pos: &mut usize,
    base_seq: u64,
    data_end: u64,
    expiry_allowed: bool,
    ordinal: u32,
) -> Result<Location, Corruption> {
    need(table, *pos + LOCATION_ENTRY_FIXED_LEN)?;
    let hash = get_u64(table, *pos);
    *pos += LOCATION_ENTRY_FIXED_LEN;
    let delta = varint::get(table, pos, "footer sequence number")?;
    let seq = base_seq
        .checked_add(delta)
        .ok_or(Corruption::InvalidField {
            field: "footer sequence number",
            value: delta,
        })?;
    let offset = varint::get(table, pos, "footer record offset")?;
    let stored_len = varint::get_max(table, pos, MAX_VALUE_LEN, "footer stored length")?;
    let key_len = varint::get_max(table, pos, MAX_KEY_LEN as u64, "footer key length")?;
    need(table, *pos + 1)?;
    let fk = table[*pos];
    *pos += 1;
    let known = if expiry_allowed {
        0x0f | ENTRY_EXPIRES
    } else {
        0x0f
    };
    if fk & !known != 0 {
        return Err(Corruption::InvalidField {
            field: "footer record flags",
            value: fk as u64,
        });
    }
    let kind = RecordKind::from_u8((fk >> 2) & 0b11)?;
    let mut flags = (fk & 0b11) as u16;
    let value_len = if flags & FLAG_COMPRESSED != 0 {
        varint::get_max(table, pos, MAX_VALUE_LEN, "footer value length")?
    } else {
        stored_len
    };
    let expires_at = if fk & ENTRY_EXPIRES != 0 {
        flags |= FLAG_EXPIRES;
        Some(varint::get(table, pos, "footer record expiry")?)
    } else {
        None
    };
    super::check_entry_expiry(kind, flags, expires_at)?;
    check_entry_fields(
        kind,
        flags,
        offset,
        stored_len,
        value_len,
        key_len as usize,
        data_end,
    )?;
    Ok(Location {
        key_hash: hash,
        seq,
        offset,
        stored_len,
        value_len,
        key_len: key_len as u16,
        flags,
        kind,
        ordinal,
        expires_at,
    })
}
