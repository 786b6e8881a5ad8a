//! The footer that seals a segment: an entry table, zero padding, and a trailer that ends the
//! file on a block boundary.
//!
//! Layout: docs/design.md, "Footer" (offsets checked against it by a test).
//! Opening a sealed segment reads the last block (the trailer), then the table: never records.

use super::record::{FLAG_COMPRESSED, KNOWN_FLAGS, RecordKind};
use super::{
    FORMAT_VERSION, MAX_KEY_LEN, MAX_VALUE_LEN, align_up, check_crc, get_u16, get_u32, get_u64,
    magic_at, need, reserved_zero,
};
use crate::error::Corruption;

/// Magic number of the entry table.
pub const TABLE_MAGIC: [u8; 4] = *b"PODT";
/// Magic number of the trailer.
pub const TRAILER_MAGIC: [u8; 4] = *b"PODF";
/// Length of the trailer.
pub const TRAILER_LEN: usize = 64;
/// Length of the table's own header (magic and reserved word).
pub const TABLE_HEADER_LEN: usize = 8;
/// Length of the fixed part of a table entry.
pub const ENTRY_FIXED_LEN: usize = 40;

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

mod entry_off {
    pub const OFFSET: usize = 0;
    pub const STORED_LEN: usize = 8;
    pub const SEQ: usize = 16;
    pub const KEY_LEN: usize = 24;
    pub const FLAGS: usize = 26;
    pub const KIND: usize = 28;
    pub const VALUE_LEN: usize = 32;
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

#[cfg(test)]
pub(crate) const ENTRY_FIELDS: &[(usize, usize)] = &[
    (entry_off::OFFSET, 8),
    (entry_off::STORED_LEN, 8),
    (entry_off::SEQ, 8),
    (entry_off::KEY_LEN, 2),
    (entry_off::FLAGS, 2),
    (entry_off::KIND, 1),
    (entry_off::VALUE_LEN, 8),
];

#[cfg(test)]
pub(crate) const TABLE_FIELDS: &[(usize, usize)] = &[(0, 4)];

/// A footer names each key's newest record by its summary, defined with the record.
pub use super::record::FooterEntry;

/// The decoded trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trailer {
    /// Segment id.
    pub segment: u64,
    /// Number of table entries.
    pub entry_count: u64,
    /// Offset of the table in the file.
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
        b[off::VERSION] = FORMAT_VERSION;
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
        if bytes[off::VERSION] != FORMAT_VERSION {
            return Err(Corruption::UnsupportedVersion {
                found: bytes[off::VERSION] as u32,
            });
        }
        reserved_zero(
            &bytes[off::VERSION + 1..off::SEGMENT_ID],
            "trailer reserved",
        )?;
        reserved_zero(&bytes[off::BLOCK_SIZE + 4..off::CRC], "trailer reserved")?;
        let t = Trailer {
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
        if t.table_len < TABLE_HEADER_LEN as u64
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
        let max_entries = (t.table_len - TABLE_HEADER_LEN as u64) / (ENTRY_FIXED_LEN as u64 + 1);
        if t.entry_count > max_entries {
            return invalid("trailer entry count", t.entry_count);
        }
        Ok(t)
    }
}

fn table_crc(segment: u64, table: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(table);
    h.finalize()
}

/// Encodes a complete footer (table, padding, trailer) to be written at `table_offset`; its
/// length makes the file end on a multiple of `block_size`.
pub fn encode_footer(
    segment: u64,
    data_end: u64,
    table_offset: u64,
    block_size: u32,
    entries: &[FooterEntry],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        TABLE_HEADER_LEN
            + entries
                .iter()
                .map(|e| ENTRY_FIXED_LEN + e.key.len())
                .sum::<usize>()
            + TRAILER_LEN
            + block_size as usize,
    );
    out.extend_from_slice(&TABLE_MAGIC);
    out.extend_from_slice(&[0u8; 4]);
    for e in entries {
        debug_assert!(!e.key.is_empty() && e.key.len() <= MAX_KEY_LEN);
        let mut fixed = [0u8; ENTRY_FIXED_LEN];
        fixed[entry_off::OFFSET..entry_off::OFFSET + 8].copy_from_slice(&e.offset.to_le_bytes());
        fixed[entry_off::STORED_LEN..entry_off::STORED_LEN + 8]
            .copy_from_slice(&e.stored_len.to_le_bytes());
        fixed[entry_off::VALUE_LEN..entry_off::VALUE_LEN + 8]
            .copy_from_slice(&e.value_len.to_le_bytes());
        fixed[entry_off::SEQ..entry_off::SEQ + 8].copy_from_slice(&e.seq.to_le_bytes());
        fixed[entry_off::KEY_LEN..entry_off::KEY_LEN + 2]
            .copy_from_slice(&(e.key.len() as u16).to_le_bytes());
        fixed[entry_off::FLAGS..entry_off::FLAGS + 2].copy_from_slice(&e.flags.to_le_bytes());
        fixed[entry_off::KIND] = e.kind as u8;
        out.extend_from_slice(&fixed);
        out.extend_from_slice(&e.key);
    }
    let table_len = out.len() as u64;
    let crc = table_crc(segment, &out);
    let end = align_up(
        table_offset + table_len + TRAILER_LEN as u64,
        block_size as u64,
    );
    out.resize((end - table_offset) as usize - TRAILER_LEN, 0);
    let trailer = Trailer {
        segment,
        entry_count: entries.len() as u64,
        table_offset,
        table_len,
        data_end,
        table_crc: crc,
        block_size,
    };
    out.extend_from_slice(&trailer.encode());
    out
}

/// Decodes and verifies the entry table described by `trailer`.
pub fn decode_table(trailer: &Trailer, table: &[u8]) -> Result<Vec<FooterEntry>, Corruption> {
    need(table, trailer.table_len as usize)?;
    if trailer.table_len < TABLE_HEADER_LEN as u64 {
        return Err(Corruption::InvalidField {
            field: "footer table length",
            value: trailer.table_len,
        });
    }
    let table = &table[..trailer.table_len as usize];
    check_crc(table_crc(trailer.segment, table), trailer.table_crc)?;
    let magic = magic_at(table, 0);
    if magic != TABLE_MAGIC {
        return Err(Corruption::BadMagic {
            structure: "footer table",
            found: magic,
        });
    }
    reserved_zero(&table[4..TABLE_HEADER_LEN], "footer table reserved")?;
    // entry_count was bounded by the table length in Trailer::decode, so this cannot
    // over-allocate; cap again for callers that built the trailer themselves.
    let cap = trailer
        .entry_count
        .min((table.len() / (ENTRY_FIXED_LEN + 1)) as u64);
    let mut entries = Vec::with_capacity(cap as usize);
    let mut pos = TABLE_HEADER_LEN;
    for _ in 0..trailer.entry_count {
        need(&table[pos..], ENTRY_FIXED_LEN)?;
        let e = &table[pos..];
        let key_len = get_u16(e, entry_off::KEY_LEN) as usize;
        if key_len == 0 || key_len > MAX_KEY_LEN {
            return Err(Corruption::InvalidField {
                field: "footer key length",
                value: key_len as u64,
            });
        }
        need(e, ENTRY_FIXED_LEN + key_len)?;
        let kind = RecordKind::from_u8(e[entry_off::KIND])?;
        reserved_zero(
            &e[entry_off::KIND + 1..entry_off::VALUE_LEN],
            "footer entry reserved",
        )?;
        let stored_len = get_u64(e, entry_off::STORED_LEN);
        let value_len = get_u64(e, entry_off::VALUE_LEN);
        let flags = get_u16(e, entry_off::FLAGS);
        let offset = get_u64(e, entry_off::OFFSET);
        if flags & !KNOWN_FLAGS != 0
            || (kind == RecordKind::Tombstone && flags & FLAG_COMPRESSED != 0)
        {
            return Err(Corruption::InvalidField {
                field: "footer record flags",
                value: flags as u64,
            });
        }
        if stored_len > MAX_VALUE_LEN || (kind == RecordKind::Tombstone && stored_len != 0) {
            return Err(Corruption::InvalidField {
                field: "footer stored length",
                value: stored_len,
            });
        }
        // Only a compressed value has a length of its own; it is bounded like any value.
        if value_len > MAX_VALUE_LEN || (flags & FLAG_COMPRESSED == 0 && value_len != stored_len) {
            return Err(Corruption::InvalidField {
                field: "footer value length",
                value: value_len,
            });
        }
        if offset < super::segment_header::SEGMENT_HEADER_LEN as u64 || offset >= trailer.data_end {
            return Err(Corruption::InvalidField {
                field: "footer record offset",
                value: offset,
            });
        }
        entries.push(FooterEntry {
            key: e[ENTRY_FIXED_LEN..ENTRY_FIXED_LEN + key_len].to_vec(),
            kind,
            flags,
            offset,
            stored_len,
            value_len,
            seq: get_u64(e, entry_off::SEQ),
        });
        pos += ENTRY_FIXED_LEN + key_len;
    }
    if pos != table.len() {
        return Err(Corruption::InvalidField {
            field: "footer table length",
            value: table.len() as u64,
        });
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries() -> Vec<FooterEntry> {
        (0..5u64)
            .map(|i| FooterEntry {
                key: format!("key-{i}").into_bytes(),
                kind: if i == 3 {
                    RecordKind::Tombstone
                } else {
                    RecordKind::Put
                },
                flags: if i == 4 { FLAG_COMPRESSED } else { 0 },
                offset: 64 + i * 100,
                stored_len: if i == 3 { 0 } else { 50 },
                value_len: match i {
                    3 => 0,
                    4 => 5000,
                    _ => 50,
                },
                seq: 10 + i,
            })
            .collect()
    }

    fn sealed(table_offset: u64) -> (Vec<u8>, u64) {
        let footer = encode_footer(9, 600, table_offset, 4096, &entries());
        let file_len = table_offset + footer.len() as u64;
        (footer, file_len)
    }

    #[test]
    fn round_trip_ends_on_block() {
        for table_offset in [600u64, 4096, 4095, 8000] {
            let (footer, file_len) = sealed(table_offset);
            assert_eq!(file_len % 4096, 0);
            let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
            assert_eq!(t.table_offset, table_offset);
            let got = decode_table(&t, &footer[..t.table_len as usize]).unwrap();
            assert_eq!(got, entries());
        }
    }

    #[test]
    fn every_flip_in_table_or_trailer_detected() {
        let (footer, file_len) = sealed(600);
        let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
        let table_len = t.table_len as usize;
        for i in (0..table_len).chain(footer.len() - TRAILER_LEN..footer.len()) {
            let mut bad = footer.clone();
            bad[i] ^= 0x04;
            let res = Trailer::decode(&bad[bad.len() - TRAILER_LEN..], file_len)
                .and_then(|t| decode_table(&t, &bad[..table_len]));
            assert!(res.is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn truncated_table_is_typed() {
        let (footer, file_len) = sealed(600);
        let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
        for cut in 0..t.table_len as usize {
            assert!(matches!(
                decode_table(&t, &footer[..cut]),
                Err(Corruption::Truncated { .. })
            ));
        }
    }

    #[test]
    fn a_table_shorter_than_its_header_is_rejected() {
        let (footer, file_len) = sealed(600);
        let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
        for table_len in 0..TABLE_HEADER_LEN as u64 {
            for entry_count in [0, 1] {
                let short = Trailer {
                    table_len,
                    entry_count,
                    ..t
                };
                assert!(decode_table(&short, &footer).is_err());
            }
        }
    }

    #[test]
    fn inconsistent_lengths_and_flags_are_rejected() {
        let check = |edit: &dyn Fn(&mut FooterEntry)| {
            let mut e = entries();
            edit(&mut e[0]);
            let footer = encode_footer(9, 600, 600, 4096, &e);
            let file_len = 600 + footer.len() as u64;
            let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
            decode_table(&t, &footer[..t.table_len as usize])
        };
        assert!(check(&|_| {}).is_ok());
        // A compressed entry may have any value length up to the limit.
        assert!(
            check(&|e| {
                e.flags = FLAG_COMPRESSED;
                e.value_len = MAX_VALUE_LEN;
            })
            .is_ok()
        );
        let bad: [&dyn Fn(&mut FooterEntry); 5] = [
            &|e| e.value_len = 51,
            &|e| e.flags = 4,
            &|e| {
                e.flags = FLAG_COMPRESSED;
                e.value_len = MAX_VALUE_LEN + 1;
            },
            &|e| {
                e.kind = RecordKind::Tombstone;
                e.stored_len = 0;
                e.value_len = 0;
                e.flags = FLAG_COMPRESSED;
            },
            &|e| {
                e.stored_len = MAX_VALUE_LEN + 1;
                e.value_len = MAX_VALUE_LEN + 1;
            },
        ];
        for (i, edit) in bad.iter().enumerate() {
            assert!(
                matches!(check(edit), Err(Corruption::InvalidField { .. })),
                "case {i}"
            );
        }
    }

    #[test]
    fn trailer_pointing_outside_file_rejected() {
        let (footer, file_len) = sealed(600);
        let tail = &footer[footer.len() - TRAILER_LEN..];
        assert!(Trailer::decode(tail, file_len).is_ok());
        // The same trailer in a file too short to hold the table it names.
        assert!(matches!(
            Trailer::decode(tail, 700),
            Err(Corruption::InvalidField { .. })
        ));
    }
}
