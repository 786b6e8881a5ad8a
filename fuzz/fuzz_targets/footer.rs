//! The footer, both versions: `Trailer::decode` on the last 64 bytes of arbitrary "files",
//! `decode_locations` and `decode_footer` on what the trailer points at, a descent of the
//! fence-key tree as listing does it (`decode_index_node` level by level, then
//! `decode_key_block`), which must agree with the whole decode, the key-section decoders
//! (`decode_index_node`, `decode_key_block`, `parse_key_block`) on arbitrary bytes, with their crc
//! made to match so that the parsers behind it run, and the round trip `encode_footer` (version
//! 2, entries in any order) → decode with single-byte corruption, truncation and a too-short file;
//! the same for `encode_footer_v1`.
//!
//! Input, read three ways:
//! * as a whole sealed segment file: trailer = last 64 bytes, file length = input length
//!   (seeds: sealed segments);
//! * bytes 0..8 a file length, 8..72 a trailer, 72.. a table;
//! * structured: an `Unstructured` that builds footer entries to round-trip.
//!
//! The decoders are given trailers that `Trailer::decode` accepted, as the store does, and
//! also trailers built by the caller, which they must reject rather than panic on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::align_up;
use podstore::format::footer::v1::encode_footer_v1;
use podstore::format::footer::{
    BlockRef, FOOTER_V1, FOOTER_V2, FOOTER_V3, FooterEntry, IndexNode, LOCATION_HEADER_LEN,
    Location, LocationHeader, MAX_NODE_LEN, MAX_TREE_DEPTH, MIN_LOCATION_ENTRY_LEN,
    TABLE_HEADER_LEN, TRAILER_LEN, Trailer, decode_entries, decode_footer, decode_index_node,
    decode_key_block, decode_locations, encode_footer, key_section, parse_key_block,
};
use podstore::format::record::{
    FLAG_COMPRESSED, FLAG_EXPIRES, KNOWN_FLAGS, MAX_EXPIRES_AT_MS, RecordKind,
};
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
            let locations = decode_locations(&t, table);
            if let Ok(locations) = &locations {
                check_locations(&t, locations);
            }
            let whole = decode_footer(&t, data, 0);
            descend(&t, data, whole.as_ref().ok().map(Vec::as_slice));
            if let Ok(entries) = whole {
                check_entries(&t, &entries);
                let locations = locations.as_ref().expect("whole entries imply locations");
                let mut sorted = entries.clone();
                sorted.sort_by(|a, b| a.key.cmp(&b.key));
                let want: Vec<Location> = sorted
                    .iter()
                    .enumerate()
                    .map(|(i, e)| Location::of_entry(e, i as u32))
                    .collect();
                assert_eq!(locations, &want);
                re_encode(&t, &entries);
            }
        }
    }
    caller_built_trailer(data);
    if let Some(rest) = data.get(8..) {
        let file_len = u64_at(data, 0);
        if let Ok(t) = Trailer::decode(rest, file_len) {
            check_trailer(&t, &rest[..TRAILER_LEN], file_len);
            if let Ok(locations) = decode_locations(&t, &rest[TRAILER_LEN..]) {
                check_locations(&t, &locations);
            }
        }
    }
    // The key-block and node decoders on arbitrary bytes at an arbitrary place: as they are,
    // and with the crc they end in made to match.
    if data.len() >= 16 {
        let block = BlockRef {
            offset: u64_at(data, 0),
            len: u64_at(data, 8) as u32 & 0x3fff,
        };
        let segment = data[15] as u64;
        let level = data[14] % (MAX_TREE_DEPTH + 2);
        let mut bytes = data[16..].to_vec();
        for fixed in [false, true] {
            if fixed {
                let len = (block.len as usize).min(bytes.len());
                if len < 4 {
                    break;
                }
                let crc = block_crc(segment, block.offset, &bytes[..len - 4]);
                bytes[len - 4..len].copy_from_slice(&crc.to_le_bytes());
            }
            let block = BlockRef {
                len: block.len.min(bytes.len() as u32),
                ..block
            };
            if let Ok(kb) = decode_key_block(segment, u64::MAX, &block, &bytes) {
                check_block(&kb.entries);
            }
            if let Ok(node) = decode_index_node(segment, level, &block, &bytes) {
                check_node(&block, &node);
            }
        }
        if let Ok((kb, len)) = parse_key_block(segment, block.offset, &data[16..]) {
            assert!(len <= data.len() - 16);
            assert!(!kb.entries.is_empty());
        }
    }
}

/// crc32(segment id ‖ offset ‖ bytes), as key blocks and nodes end in.
fn block_crc(segment: u64, offset: u64, bytes: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&segment.to_le_bytes());
    h.update(&offset.to_le_bytes());
    h.update(bytes);
    h.finalize()
}

/// The tree of a footer of version 2 whose location table decodes, descended level by level
/// through the decoders listing uses; when the whole decode succeeded (`whole`), every node and
/// block decodes and the keys agree with it.
fn descend(t: &Trailer, data: &[u8], whole: Option<&[FooterEntry]>) {
    if t.version != FOOTER_V2 {
        return;
    }
    let table = &data[t.table_offset as usize..];
    let Ok(h) = LocationHeader::decode(t, table) else {
        assert!(whole.is_none(), "whole entries imply a header");
        return;
    };
    let Some(root) = h.root() else {
        assert_eq!(t.entry_count, 0);
        return;
    };
    assert!(h.depth >= 1 && h.depth <= MAX_TREE_DEPTH);
    assert_eq!(root.offset + root.len as u64, t.table_offset);
    let mut level = vec![root];
    for depth in (1..=h.depth).rev() {
        let mut below = Vec::new();
        for node in &level {
            let decoded = data
                .get(node.offset as usize..)
                .ok_or(())
                .and_then(|b| decode_index_node(t.segment, depth, node, b).map_err(|_| ()));
            let Ok(n) = decoded else {
                assert!(whole.is_none(), "node {node:?} fails, whole decode passed");
                return;
            };
            check_node(node, &n);
            below.extend(n.children.iter().map(|c| c.block));
        }
        // Nodes of one level that name the same children (possible only in crafted bytes) must
        // not make the walk blow up: a real level has fewer children than the file has bytes.
        if below.len() > data.len() {
            assert!(whole.is_none());
            return;
        }
        level = below;
    }
    let mut keys: Vec<&[u8]> = Vec::new();
    for b in &level {
        let decoded = data
            .get(b.offset as usize..)
            .ok_or(())
            .and_then(|bytes| decode_key_block(t.segment, t.data_end, b, bytes).map_err(|_| ()));
        let Ok(kb) = decoded else {
            assert!(whole.is_none(), "block {b:?} fails, whole decode passed");
            return;
        };
        check_block(&kb.entries);
        keys.extend(kb.entries.iter().map(|(k, _)| *k));
    }
    if let Some(entries) = whole {
        let want: Vec<&[u8]> = entries.iter().map(|e| e.key.as_slice()).collect();
        assert_eq!(keys, want);
    }
}

/// What `decode_index_node` promises: children with ascending fence keys of valid lengths,
/// back to back, ending at or before the node.
fn check_node(at: &BlockRef, n: &IndexNode<'_>) {
    assert!(!n.children.is_empty());
    for w in n.children.windows(2) {
        assert!(w[0].key < w[1].key, "fence keys ascend");
        assert_eq!(w[0].block.offset + w[0].block.len as u64, w[1].block.offset);
    }
    let last = n.children.last().unwrap().block;
    assert!(last.offset + last.len as u64 <= at.offset);
    for c in &n.children {
        assert!(!c.key.is_empty() && c.key.len() <= MAX_KEY_LEN);
        assert!(
            c.block.len as usize <= MAX_NODE_LEN.max(podstore::format::footer::MAX_KEY_BLOCK_LEN)
        );
    }
}

fn check_block(entries: &[(&[u8], u64)]) {
    assert!(!entries.is_empty());
    for w in entries.windows(2) {
        assert!(w[0].0 < w[1].0, "keys of a block ascend");
    }
    for (k, _) in entries {
        assert!(!k.is_empty() && k.len() <= MAX_KEY_LEN);
    }
}

/// The decoders with a trailer that did not come from `Trailer::decode`: bytes 0..8 segment id,
/// 8 entry count, 9..11 table length, 11.. the table, whose crc the trailer gets right; the
/// version from the count's low bit.
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
        version: if data[8] & 1 == 0 {
            FOOTER_V1
        } else {
            FOOTER_V2
        },
        segment,
        entry_count: data[8] as u64 >> 1,
        table_offset: 4096,
        table_len: table_len as u64,
        data_end: 4096,
        table_crc: h.finalize(),
        block_size: 4096,
    };
    if let Ok(locations) = decode_locations(&t, table) {
        check_locations(&t, &locations);
    }
    if let Ok(entries) = decode_entries(&t, table, table) {
        check_entries(&t, &entries);
    }
}

/// Bytes of the trailer that are reserved (written as zero, covered by the crc, not checked).
fn trailer_reserved(i: usize) -> bool {
    (5..8).contains(&i) || (56..60).contains(&i)
}

/// What `Trailer::decode` promises about a trailer it accepts.
fn check_trailer(t: &Trailer, tail: &[u8], file_len: u64) {
    assert!(t.version == FOOTER_V1 || t.version == FOOTER_V2);
    assert!(t.block_size.is_power_of_two() && (512..=65536).contains(&t.block_size));
    let (header, min_entry) = if t.version == FOOTER_V1 {
        (TABLE_HEADER_LEN as u64, 41)
    } else {
        (LOCATION_HEADER_LEN as u64, MIN_LOCATION_ENTRY_LEN as u64)
    };
    assert!(t.table_len >= header);
    assert!(t.table_offset + t.table_len <= file_len - TRAILER_LEN as u64);
    assert!(t.data_end >= SEGMENT_HEADER_LEN as u64 && t.data_end <= t.table_offset);
    assert!(t.entry_count <= (t.table_len - header) / min_entry);
    let again = t.encode();
    assert_eq!(Trailer::decode(&again, file_len).as_ref(), Ok(t));
    if (0..TRAILER_LEN)
        .filter(|&i| trailer_reserved(i))
        .all(|i| tail[i] == 0)
    {
        assert_eq!(&again[..], &tail[..TRAILER_LEN]);
    }
}

/// What `decode_locations` promises.
fn check_locations(t: &Trailer, locations: &[Location]) {
    assert_eq!(locations.len() as u64, t.entry_count);
    for (i, l) in locations.iter().enumerate() {
        assert_eq!(l.ordinal as usize, i);
        assert!(l.key_len >= 1 && l.key_len as usize <= MAX_KEY_LEN);
        assert!(l.value_len <= MAX_VALUE_LEN && l.stored_len <= MAX_VALUE_LEN);
        assert!(l.offset >= SEGMENT_HEADER_LEN as u64 && l.offset < t.data_end);
        assert!(l.flags & !KNOWN_FLAGS == 0);
        if l.flags & FLAG_COMPRESSED == 0 {
            assert_eq!(l.value_len, l.stored_len);
        }
    }
}

/// What the whole decode promises about the entries it returns.
fn check_entries(t: &Trailer, entries: &[FooterEntry]) {
    assert_eq!(entries.len() as u64, t.entry_count);
    for e in entries {
        assert!(!e.key.is_empty() && e.key.len() <= MAX_KEY_LEN);
        assert!(e.value_len <= MAX_VALUE_LEN);
        assert!(e.offset >= SEGMENT_HEADER_LEN as u64 && e.offset < t.data_end);
    }
    if t.version == FOOTER_V2 {
        for w in entries.windows(2) {
            assert!(w[0].key < w[1].key, "entries of version 2 ascend by key");
        }
    }
}

/// Re-encodes decoded entries (as version 2) and checks that they decode to the same again, in
/// key order.
fn re_encode(t: &Trailer, entries: &[FooterEntry]) {
    let mut keys: Vec<&[u8]> = entries.iter().map(|e| e.key.as_slice()).collect();
    keys.sort();
    keys.dedup();
    if keys.len() != entries.len() {
        return; // a footer of version 1 may name a key twice; the encoder takes one per key
    }
    let at = align_up(t.data_end, t.block_size as u64);
    let footer = encode_footer(t.segment, t.data_end, at, t.block_size, entries);
    let file_len = at + footer.len() as u64;
    assert_eq!(file_len % t.block_size as u64, 0);
    let t2 = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len)
        .expect("re-encoded trailer must decode");
    assert_eq!(
        (
            t2.version,
            t2.segment,
            t2.entry_count,
            t2.data_end,
            t2.block_size
        ),
        (
            FOOTER_V2,
            t.segment,
            t.entry_count,
            t.data_end,
            t.block_size
        )
    );
    let mut sorted = entries.to_vec();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(decode_footer(&t2, &footer, at), Ok(sorted));
}

fn round_trip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let segment: u64 = u.arbitrary()?;
    let block = *u.choose(&BLOCK_SIZES)?;
    let v2 = u.ratio(3u8, 4)?;
    let n = u.int_in_range(0..=if v2 { 400usize } else { 24 })?;
    let min_end = if n == 0 { 64 } else { 65 };
    let data_end = u.int_in_range(min_end..=1u64 << 40)?;
    let at = if u.arbitrary()? {
        align_up(data_end, block as u64)
    } else {
        data_end + u.int_in_range(0..=3 * block as u64)?
    };
    let mut entries: Vec<FooterEntry> = Vec::with_capacity(n);
    for _ in 0..n {
        let long = u.ratio(1u8, 16)?;
        let key = arb_key(u, if long { MAX_KEY_LEN } else { 64 })?;
        if entries.iter().any(|e| e.key == key) {
            continue; // one entry per key, as sealing passes them
        }
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
        // An expiry exactly where the flag says, as the encoder requires: on puts, and in the
        // footers that can hold one (not version 1).
        let expires_at = if flags & FLAG_EXPIRES != 0 && kind == RecordKind::Put && v2 {
            Some(u.int_in_range(1..=MAX_EXPIRES_AT_MS)?)
        } else {
            flags &= !FLAG_EXPIRES;
            None
        };
        entries.push(FooterEntry {
            key,
            kind,
            flags,
            offset: u.int_in_range(64..=data_end - 1)?,
            stored_len,
            value_len,
            seq: u.arbitrary()?,
            expires_at,
        });
    }
    // Sequence numbers of one footer lie within u64 of each other by construction; any order.
    let mut footer = if v2 {
        encode_footer(segment, data_end, at, block, &entries)
    } else {
        encode_footer_v1(segment, data_end, at, block, &entries)
    };
    let file_len = at + footer.len() as u64;
    assert_eq!(file_len % block as u64, 0, "footer does not end on a block");
    let tail_at = footer.len() - TRAILER_LEN;
    let t = Trailer::decode(&footer[tail_at..], file_len).expect("encoded trailer must decode");
    // Version 3 exactly when an entry expires (only written with the sorted layout).
    let expiring = entries.iter().filter(|e| e.expires_at.is_some()).count();
    let version = match (v2, expiring > 0) {
        (false, _) => FOOTER_V1,
        (true, false) => FOOTER_V2,
        (true, true) => FOOTER_V3,
    };
    assert_eq!(t.version, version);
    assert_eq!(
        (t.segment, t.entry_count, t.data_end),
        (segment, n_of(&entries), data_end)
    );
    let table_end = (t.table_offset + t.table_len - at) as usize;
    assert!(footer.len() < table_end + TRAILER_LEN + block as usize);
    let mut want = entries.clone();
    if v2 {
        want.sort_by(|a, b| a.key.cmp(&b.key));
    }
    assert_eq!(decode_footer(&t, &footer, at).as_ref(), Ok(&want));
    assert_eq!(
        decode_footer(&t, &footer[..table_end], at).as_ref(),
        Ok(&want)
    );
    let table = &footer[(t.table_offset - at) as usize..table_end];
    let locations = decode_locations(&t, table).expect("encoded locations decode");
    check_locations(&t, &locations);
    if v2 {
        // At most 41 bytes per key (the longest varints), whatever the entries, and 10 more
        // (an expiry's longest varint) per expiring one.
        assert!(t.table_len <= (LOCATION_HEADER_LEN + 41 * entries.len() + 10 * expiring) as u64);
        assert_eq!(
            key_section(&t, table).unwrap(),
            Some((at, t.table_offset - at))
        );
    }

    // A file too short to hold the table before the trailer.
    let short = u.int_in_range(0..=t.table_offset + t.table_len + TRAILER_LEN as u64 - 1)?;
    assert!(
        Trailer::decode(&footer[tail_at..], short).is_err(),
        "file length {short} accepted"
    );

    // A truncated footer.
    let cut = u.int_in_range(0..=table_end - 1)?;
    assert!(matches!(
        decode_footer(&t, &footer[..cut], at),
        Err(Corruption::Truncated { .. })
    ));

    // Any one byte changed in the key section, the table or the trailer.
    let i = u.int_in_range(0..=table_end + TRAILER_LEN - 1)?;
    let pos = if i < table_end {
        i
    } else {
        tail_at + i - table_end
    };
    let mask = u.int_in_range(1..=255u8)?;
    footer[pos] ^= mask;
    let res =
        Trailer::decode(&footer[tail_at..], file_len).and_then(|t| decode_footer(&t, &footer, at));
    assert!(
        res.is_err(),
        "byte {pos} xor {mask:#04x} undetected: {res:?}"
    );
    Ok(())
}

fn n_of(entries: &[FooterEntry]) -> u64 {
    entries.len() as u64
}
