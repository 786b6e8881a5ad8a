//! Footers of version 1, written by earlier releases: one table of whole entries (fixed fields
//! and key), one per key, in record order. Decoded so that old stores open and read; compaction
//! rewrites their files with footers of version 2. [`encode_footer_v1`] is kept for tests and
//! tools that need an old footer.

use super::{FOOTER_V1, FooterEntry, TRAILER_LEN, Trailer, check_entry_fields, segment_crc};
use crate::error::Corruption;
use crate::format::record::RecordKind;
use crate::format::{align_up, check_crc, get_u16, get_u64, magic_at, need, reserved_zero};

/// Magic number of the entry table.
pub const TABLE_MAGIC: [u8; 4] = *b"PODT";
/// Length of the table's own header (magic and reserved word).
pub const TABLE_HEADER_LEN: usize = 8;
/// Length of the fixed part of a table entry.
pub const ENTRY_FIXED_LEN: usize = 40;

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

/// Encodes a complete footer of version 1 (table, padding, trailer) to be written at
/// `table_offset`, entries in the order given. Stores no longer write it: for tests and tools.
pub fn encode_footer_v1(
    segment: u64,
    data_end: u64,
    table_offset: u64,
    block_size: u32,
    entries: &[FooterEntry],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&TABLE_MAGIC);
    out.extend_from_slice(&[0u8; 4]);
    for e in entries {
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
    let crc = segment_crc(segment, &out);
    let end = align_up(
        table_offset + table_len + TRAILER_LEN as u64,
        block_size as u64,
    );
    out.resize((end - table_offset) as usize - TRAILER_LEN, 0);
    let trailer = Trailer {
        version: FOOTER_V1,
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

/// Decodes and verifies the entry table of version 1 described by `trailer`.
pub fn decode_table(trailer: &Trailer, table: &[u8]) -> Result<Vec<FooterEntry>, Corruption> {
    need(table, trailer.table_len as usize)?;
    if trailer.table_len < TABLE_HEADER_LEN as u64 {
        return Err(Corruption::InvalidField {
            field: "footer table length",
            value: trailer.table_len,
        });
    }
    let table = &table[..trailer.table_len as usize];
    check_crc(segment_crc(trailer.segment, table), trailer.table_crc)?;
    let magic = magic_at(table, 0);
    if magic != TABLE_MAGIC {
        return Err(Corruption::BadMagic {
            structure: "footer table",
            found: magic,
        });
    }
    reserved_zero(&table[4..TABLE_HEADER_LEN], "footer table reserved")?;
    // Capped by the table length, so that a corrupt count cannot make it allocate.
    let cap = trailer
        .entry_count
        .min((table.len() / (ENTRY_FIXED_LEN + 1)) as u64);
    let mut entries = Vec::with_capacity(cap as usize);
    let mut pos = TABLE_HEADER_LEN;
    for _ in 0..trailer.entry_count {
        need(&table[pos..], ENTRY_FIXED_LEN)?;
        let e = &table[pos..];
        let key_len = get_u16(e, entry_off::KEY_LEN) as usize;
        if key_len == 0 || key_len > crate::format::MAX_KEY_LEN {
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
        // Footers of version 1 predate expiry: its flag is refused here.
        super::check_entry_expiry(kind, flags, None)?;
        check_entry_fields(
            kind,
            flags,
            offset,
            stored_len,
            value_len,
            key_len,
            trailer.data_end,
        )?;
        entries.push(FooterEntry {
            key: e[ENTRY_FIXED_LEN..ENTRY_FIXED_LEN + key_len].to_vec(),
            kind,
            flags,
            offset,
            stored_len,
            value_len,
            seq: get_u64(e, entry_off::SEQ),
            expires_at: None,
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
