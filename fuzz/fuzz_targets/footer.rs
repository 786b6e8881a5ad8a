//! The footer: `Trailer::decode` on the last 64 bytes of arbitrary "files", `decode_table` on
//! what the trailer points at, and the round trip `encode_footer` → decode with single-byte
//! corruption, truncation and a too-short file.
//!
//! Input, read three ways:
//! * as a whole sealed segment file: trailer = last 64 bytes, file length = input length
//!   (seeds: sealed segments);
//! * bytes 0..8 a file length, 8..72 a trailer, 72.. a table;
//! * structured: an `Unstructured` that builds footer entries to round-trip.
//!
//! `decode_table` is given trailers that `Trailer::decode` accepted, as the store does, and
//! also trailers built by the caller, which it must reject rather than panic on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::align_up;
use podstore::format::footer::{
    ENTRY_FIXED_LEN, FooterEntry, TABLE_HEADER_LEN, TRAILER_LEN, Trailer, decode_table,
    encode_footer,
};
use podstore::format::record::{FLAG_COMPRESSED, KNOWN_FLAGS, RecordKind};
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore::{Corruption, MAX_KEY_LEN, MAX_VALUE_LEN};
use podstore_fuzz::{BLOCK_SIZES, Unstructured, arb_key, arbitrary, u64_at};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = round_trip(&mut Unstructured::new(data));
});

fn raw(data: &[u8]) {
    if data.len() >= TRAILER_LEN {
        let file_len = data.len() as u64;
        let tail = &data[data.len() - TRAILER_LEN..];
        if let Ok(t) = Trailer::decode(tail, file_len) {
            check_trailer(&t, tail, file_len);
            // Trailer::decode guarantees that the table lies inside the file.
            let table = &data[t.table_offset as usize..];
            if let Ok(entries) = decode_table(&t, table) {
                check_entries(&t, &entries);
                re_encode(&t, &table[..t.table_len as usize], &entries);
            }
            let _ = decode_table(&t, data);
        }
    }
    caller_built_trailer(data);
    if let Some(rest) = data.get(8..) {
        let file_len = u64_at(data, 0);
        if let Ok(t) = Trailer::decode(rest, file_len) {
            check_trailer(&t, &rest[..TRAILER_LEN], file_len);
            if let Ok(entries) = decode_table(&t, &rest[TRAILER_LEN..]) {
                check_entries(&t, &entries);
            }
        }
    }
}

/// `decode_table` with a trailer that did not come from `Trailer::decode`: bytes 0..8 segment id,
/// 8 entry count, 9..11 table length, 11.. the table, whose crc the trailer gets right.
fn caller_built_trailer(data: &[u8]) {
    let Some(table) = data.get(11..) else {
        return;
    };
    let segment = u64_at(data, 0);
    let table_len = (u16::from_le_bytes([data[9], data[10]]) as usize).min(table.len());
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(&table[..table_len]);
    let t = Trailer {
        segment,
        entry_count: data[8] as u64,
        table_offset: 4096,
        table_len: table_len as u64,
        data_end: 4096,
        table_crc: h.finalize(),
        block_size: 4096,
    };
    if let Ok(entries) = decode_table(&t, table) {
        check_entries(&t, &entries);
    }
}

/// Bytes of the trailer that are reserved (written as zero, covered by the crc, not checked).
fn trailer_reserved(i: usize) -> bool {
    (5..8).contains(&i) || (56..60).contains(&i)
}

/// What `Trailer::decode` promises about a trailer it accepts.
fn check_trailer(t: &Trailer, tail: &[u8], file_len: u64) {
    assert!(t.block_size.is_power_of_two() && (512..=65536).contains(&t.block_size));
    assert!(t.table_len >= TABLE_HEADER_LEN as u64);
    assert!(t.table_offset + t.table_len <= file_len - TRAILER_LEN as u64);
    assert!(t.data_end >= SEGMENT_HEADER_LEN as u64 && t.data_end <= t.table_offset);
    assert!(
        t.entry_count <= (t.table_len - TABLE_HEADER_LEN as u64) / (ENTRY_FIXED_LEN as u64 + 1)
    );
    let again = t.encode();
    assert_eq!(Trailer::decode(&again, file_len).as_ref(), Ok(t));
    if (0..TRAILER_LEN)
        .filter(|&i| trailer_reserved(i))
        .all(|i| tail[i] == 0)
    {
        assert_eq!(&again[..], &tail[..TRAILER_LEN]);
    }
}

/// What `decode_table` promises about the entries it returns.
fn check_entries(t: &Trailer, entries: &[FooterEntry]) {
    assert_eq!(entries.len() as u64, t.entry_count);
    let mut len = TABLE_HEADER_LEN as u64;
    for e in entries {
        assert!(!e.key.is_empty() && e.key.len() <= MAX_KEY_LEN);
        assert!(e.value_len <= MAX_VALUE_LEN);
        assert!(e.offset >= SEGMENT_HEADER_LEN as u64 && e.offset < t.data_end);
        len += (ENTRY_FIXED_LEN + e.key.len()) as u64;
    }
    assert_eq!(len, t.table_len, "entries do not use the table exactly");
}

/// Re-encodes decoded entries and checks that they decode to the same again; with the reserved
/// bytes zero, the table bytes are reproduced exactly.
fn re_encode(t: &Trailer, table: &[u8], entries: &[FooterEntry]) {
    let footer = encode_footer(t.segment, t.data_end, t.table_offset, t.block_size, entries);
    let file_len = t.table_offset + footer.len() as u64;
    assert_eq!(file_len % t.block_size as u64, 0);
    let t2 = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len)
        .expect("re-encoded trailer must decode");
    assert_eq!(
        (
            t2.segment,
            t2.entry_count,
            t2.table_offset,
            t2.table_len,
            t2.data_end,
            t2.block_size
        ),
        (
            t.segment,
            t.entry_count,
            t.table_offset,
            t.table_len,
            t.data_end,
            t.block_size
        )
    );
    assert_eq!(decode_table(&t2, &footer).as_deref(), Ok(entries));
    let mut reserved_zero = table[4..8] == [0; 4];
    let mut pos = TABLE_HEADER_LEN;
    for e in entries {
        reserved_zero &= table[pos + 29..pos + 32] == [0; 3];
        pos += ENTRY_FIXED_LEN + e.key.len();
    }
    if reserved_zero {
        assert_eq!(&footer[..table.len()], table);
        assert_eq!(t2.table_crc, t.table_crc);
    }
}

fn round_trip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let segment: u64 = u.arbitrary()?;
    let block = *u.choose(&BLOCK_SIZES)?;
    let n = u.int_in_range(0..=24usize)?;
    let min_end = if n == 0 { 64 } else { 65 };
    let data_end = u.int_in_range(min_end..=1u64 << 40)?;
    let table_offset = if u.arbitrary()? {
        align_up(data_end, block as u64)
    } else {
        data_end + u.int_in_range(0..=3 * block as u64)?
    };
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let long = u.ratio(1u8, 16)?;
        let key = arb_key(u, if long { MAX_KEY_LEN } else { 64 })?;
        // Only what a writer produces: known flags, tombstones without a value.
        let kind = if u.arbitrary()? {
            RecordKind::Put
        } else {
            RecordKind::Tombstone
        };
        let mut flags = u.arbitrary::<u16>()? & KNOWN_FLAGS;
        let (stored_len, value_len) = match kind {
            RecordKind::Put => {
                let stored = u.int_in_range(0..=MAX_VALUE_LEN)?;
                let value = if flags & FLAG_COMPRESSED != 0 {
                    u.int_in_range(0..=MAX_VALUE_LEN)?
                } else {
                    stored
                };
                (stored, value)
            }
            RecordKind::Tombstone => {
                flags &= !FLAG_COMPRESSED;
                (0, 0)
            }
        };
        entries.push(FooterEntry {
            key,
            kind,
            flags,
            offset: u.int_in_range(64..=data_end - 1)?,
            stored_len,
            value_len,
            seq: u.arbitrary()?,
        });
    }
    let mut footer = encode_footer(segment, data_end, table_offset, block, &entries);
    let file_len = table_offset + footer.len() as u64;
    assert_eq!(file_len % block as u64, 0, "footer does not end on a block");
    let table_len = TABLE_HEADER_LEN
        + entries
            .iter()
            .map(|e| ENTRY_FIXED_LEN + e.key.len())
            .sum::<usize>();
    assert!(footer.len() >= table_len + TRAILER_LEN);
    assert!(footer.len() < table_len + TRAILER_LEN + block as usize);

    let tail_at = footer.len() - TRAILER_LEN;
    let t = Trailer::decode(&footer[tail_at..], file_len).expect("encoded trailer must decode");
    assert_eq!(
        t,
        Trailer {
            table_crc: t.table_crc,
            segment,
            entry_count: n as u64,
            table_offset,
            table_len: table_len as u64,
            data_end,
            block_size: block,
        }
    );
    assert_eq!(decode_table(&t, &footer).as_ref(), Ok(&entries));
    assert_eq!(
        decode_table(&t, &footer[..table_len]).as_ref(),
        Ok(&entries)
    );

    // A file too short to hold the table before the trailer.
    let short = u.int_in_range(0..=table_offset + table_len as u64 + TRAILER_LEN as u64 - 1)?;
    assert!(
        Trailer::decode(&footer[tail_at..], short).is_err(),
        "file length {short} accepted"
    );

    // A truncated table.
    let cut = u.int_in_range(0..=table_len - 1)?;
    assert!(matches!(
        decode_table(&t, &footer[..cut]),
        Err(Corruption::Truncated { .. })
    ));

    // Any one byte changed in the table or the trailer.
    let i = u.int_in_range(0..=table_len + TRAILER_LEN - 1)?;
    let pos = if i < table_len {
        i
    } else {
        tail_at + i - table_len
    };
    let mask = u.int_in_range(1..=255u8)?;
    footer[pos] ^= mask;
    let res = Trailer::decode(&footer[tail_at..], file_len).and_then(|t| decode_table(&t, &footer));
    assert!(
        res.is_err(),
        "byte {pos} xor {mask:#04x} undetected: {res:?}"
    );
    Ok(())
}
