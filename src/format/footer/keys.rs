//! The key section of a footer of version 2: a short header (`PODK`, which the recovery scan
//! recognises as the start of a footer), key blocks of about 4 KiB holding the keys in
//! ascending byte order with their record offsets, then the fence-key tree over the blocks
//! ([`super::tree`]), whose root ends the section.

use super::tree::{TreeInfo, decode_tree, encode_tree};
use super::varint;
use super::{FooterEntry, Location, LocationHeader, Trailer, key_hash};
use crate::error::Corruption;
use crate::format::{MAX_KEY_LEN, check_crc, get_u16, get_u32, magic_at, need};

/// Magic number of the key section, the first bytes of a footer of version 2.
pub const KEYS_MAGIC: [u8; 4] = *b"PODK";
/// Length of the key section's header (magic and a reserved word).
pub const KEYS_HEADER_LEN: usize = 8;
/// A key block closes once it holds this many bytes (entry count and entries); it always
/// holds at least one key, so a block of one 4 KiB key is longer.
pub const KEY_BLOCK_TARGET: usize = 4096;
/// Length of a key block's fixed parts: entry count and crc.
const BLOCK_FIXED_LEN: usize = 2 + 4;
/// Longest key block: just under the target, then a longest entry, then the crc.
pub const MAX_KEY_BLOCK_LEN: usize = KEY_BLOCK_TARGET - 1 + 2 + MAX_KEY_LEN + 10 + 4;
/// Shortest key block: count, one entry of a 1-byte key, crc.
pub(crate) const MIN_KEY_BLOCK_LEN: usize = BLOCK_FIXED_LEN + 3;

#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] = &[(0, 4), (4, 4)];
#[cfg(test)]
pub(crate) const BLOCK_FIELDS: &[(usize, usize)] = &[(0, 2)];
/// Length of the fixed start of a key block: its entry count.
#[cfg(test)]
pub(crate) const BLOCK_HEADER_LEN: usize = 2;

/// Where a key block or an index node is in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    /// File offset.
    pub offset: u64,
    /// Length, crc included.
    pub len: u32,
}

/// crc32(segment id ‖ offset ‖ bytes): the crc of a key block or index node at `offset`,
/// bound to its file and its place in it.
pub(super) fn block_crc(segment: u64, offset: u64, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(&offset.to_le_bytes());
    h.update(bytes);
    h.finalize()
}

/// Appends the key section (header, blocks, fence-key tree) of `sorted` (ascending keys), which
/// starts at file offset `at`.
pub(super) fn encode_key_section(
    out: &mut Vec<u8>,
    segment: u64,
    at: u64,
    sorted: &[&FooterEntry],
) -> TreeInfo {
    let start = out.len();
    out.extend_from_slice(&KEYS_MAGIC);
    out.extend_from_slice(&[0u8; 4]);
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let block_start = out.len();
        let first = i;
        out.extend_from_slice(&[0u8; 2]);
        while i < sorted.len() && (i == first || out.len() - block_start < KEY_BLOCK_TARGET) {
            let e = sorted[i];
            varint::put(out, e.key.len() as u64);
            out.extend_from_slice(&e.key);
            varint::put(out, e.offset);
            i += 1;
        }
        let count = (i - first) as u16;
        out[block_start..block_start + 2].copy_from_slice(&count.to_le_bytes());
        let offset = at + (block_start - start) as u64;
        let crc = block_crc(segment, offset, &out[block_start..]);
        out.extend_from_slice(&crc.to_le_bytes());
        let len = (out.len() - block_start) as u32;
        blocks.push((BlockRef { offset, len }, sorted[first].key.as_slice()));
    }
    encode_tree(out, segment, at, start, blocks)
}

/// A decoded key block: its keys (ascending) and their record offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBlock<'a> {
    /// `(key, record offset)`, in ascending key order.
    pub entries: Vec<(&'a [u8], u64)>,
}

/// Decodes and verifies the key block `block` of segment `segment` from its bytes (`block.len`
/// of them, read at `block.offset`): its crc (bound to the segment and the block's offset), at
/// least one entry, keys of 1..=4096 bytes in strictly ascending order, and record offsets in
/// the data region `[64, data_end)`.
pub fn decode_key_block<'a>(
    segment: u64,
    data_end: u64,
    block: &BlockRef,
    bytes: &'a [u8],
) -> Result<KeyBlock<'a>, Corruption> {
    let len = block.len as usize;
    need(bytes, len)?;
    if len < MIN_KEY_BLOCK_LEN {
        return Err(Corruption::InvalidField {
            field: "footer key block length",
            value: len as u64,
        });
    }
    let bytes = &bytes[..len];
    let body = &bytes[..len - 4];
    check_crc(
        block_crc(segment, block.offset, body),
        get_u32(bytes, len - 4),
    )?;
    let count = get_u16(body, 0) as u32;
    if count == 0 {
        return Err(Corruption::InvalidField {
            field: "footer key block entry count",
            value: count as u64,
        });
    }
    // An entry takes at least 3 bytes: the count cannot make this allocate more than the block.
    let mut entries: Vec<(&[u8], u64)> = Vec::with_capacity((count as usize).min(body.len() / 3));
    let mut pos = 2;
    for _ in 0..count {
        let key_len = varint::get_max(body, &mut pos, MAX_KEY_LEN as u64, "footer key length")?;
        if key_len == 0 {
            return Err(Corruption::InvalidField {
                field: "footer key length",
                value: 0,
            });
        }
        need(body, pos + key_len as usize)?;
        let key = &body[pos..pos + key_len as usize];
        pos += key_len as usize;
        let offset = varint::get(body, &mut pos, "footer record offset")?;
        if offset < crate::format::segment_header::SEGMENT_HEADER_LEN as u64 || offset >= data_end {
            return Err(Corruption::InvalidField {
                field: "footer record offset",
                value: offset,
            });
        }
        if entries.last().is_some_and(|(prev, _)| *prev >= key) {
            return Err(Corruption::InvalidField {
                field: "footer key order",
                value: offset,
            });
        }
        entries.push((key, offset));
    }
    if pos != body.len() {
        return Err(Corruption::InvalidField {
            field: "footer key block length",
            value: len as u64,
        });
    }
    Ok(KeyBlock { entries })
}

/// Decodes the key block at file offset `offset` of segment `segment` without knowing its length
/// (the recovery scan, whose trailer is lost, walks blocks this way): `bytes` are the file's
/// bytes from `offset` on, as many as are available. Returns the block and its length.
pub fn parse_key_block(
    segment: u64,
    offset: u64,
    bytes: &[u8],
) -> Result<(KeyBlock<'_>, usize), Corruption> {
    need(bytes, 2)?;
    let count = get_u16(bytes, 0) as u32;
    let mut pos = 2;
    for _ in 0..count {
        let key_len = varint::get_max(bytes, &mut pos, MAX_KEY_LEN as u64, "footer key length")?;
        pos = pos.saturating_add(key_len as usize);
        varint::get(bytes, &mut pos, "footer record offset")?;
    }
    let len = pos + 4;
    if len > MAX_KEY_BLOCK_LEN {
        return Err(Corruption::InvalidField {
            field: "footer key block length",
            value: len as u64,
        });
    }
    let block = BlockRef {
        offset,
        len: len as u32,
    };
    Ok((decode_key_block(segment, u64::MAX, &block, bytes)?, len))
}

/// Checks the key section's header (its first [`KEYS_HEADER_LEN`] bytes).
pub(crate) fn check_keys_header(keys: &[u8]) -> Result<(), Corruption> {
    need(keys, KEYS_HEADER_LEN)?;
    let magic = magic_at(keys, 0);
    if magic != KEYS_MAGIC {
        return Err(Corruption::BadMagic {
            structure: "footer key section",
            found: magic,
        });
    }
    crate::format::reserved_zero(&keys[4..KEYS_HEADER_LEN], "footer key section reserved")
}

/// Joins the key section `keys` (`header.key_len` bytes at `header.key_offset`) with the
/// decoded `locations`: the fence-key tree verifies whole ([`decode_tree`]), every key block
/// verifies and starts with its fence key, and every key matches its location (length, record
/// offset and hash), in strictly ascending order across blocks.
pub(super) fn decode_all(
    trailer: &Trailer,
    header: &LocationHeader,
    keys: &[u8],
    locations: Vec<Location>,
) -> Result<Vec<FooterEntry>, Corruption> {
    let len = usize::try_from(header.key_len).unwrap_or(usize::MAX);
    need(keys, len)?;
    let keys = &keys[..len];
    check_keys_header(keys)?;
    let blocks = decode_tree(trailer.segment, header, keys)?;
    let mut out: Vec<FooterEntry> = Vec::with_capacity(locations.len());
    for b in &blocks {
        // decode_tree checked that every block lies in the section.
        let bytes = &keys[(b.block.offset - header.key_offset) as usize..];
        let kb = decode_key_block(trailer.segment, trailer.data_end, &b.block, bytes)?;
        let first = kb.entries[0].0;
        if first != b.key {
            return Err(Corruption::InvalidField {
                field: "footer fence key",
                value: b.block.offset,
            });
        }
        if out.last().is_some_and(|prev| prev.key.as_slice() >= first) {
            return Err(Corruption::InvalidField {
                field: "footer key order",
                value: b.block.offset,
            });
        }
        for (key, offset) in kb.entries {
            let ordinal = out.len();
            let Some(loc) = locations.get(ordinal) else {
                return Err(Corruption::InvalidField {
                    field: "footer key block entry count",
                    value: ordinal as u64,
                });
            };
            if key.len() != loc.key_len as usize || offset != loc.offset {
                return Err(Corruption::InvalidField {
                    field: "footer key entry",
                    value: offset,
                });
            }
            if key_hash(key) != loc.key_hash {
                return Err(Corruption::InvalidField {
                    field: "footer key hash",
                    value: loc.key_hash,
                });
            }
            out.push(loc.with_key(key.to_vec()));
        }
    }
    if out.len() != locations.len() {
        return Err(Corruption::InvalidField {
            field: "trailer entry count",
            value: out.len() as u64,
        });
    }
    Ok(out)
}
