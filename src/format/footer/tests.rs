use super::v1::{decode_table as decode_v1, encode_footer_v1};
use super::*;
use crate::format::MAX_VALUE_LEN;
use crate::format::record::FLAG_BATCH_CONTINUES;
use proptest::prelude::*;

fn entries() -> Vec<FooterEntry> {
    (0..5u64)
        .map(|i| FooterEntry {
            key: format!("key-{}", 4 - i).into_bytes(),
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
            expires_at: None,
        })
        .collect()
}

fn sorted(mut e: Vec<FooterEntry>) -> Vec<FooterEntry> {
    e.sort_by(|a, b| a.key.cmp(&b.key));
    e
}

fn trailer_of(footer: &[u8], file_len: u64) -> Trailer {
    Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap()
}

/// Encodes `entries` at `at`, returns the footer and the file length.
fn sealed_with(e: &[FooterEntry], at: u64, data_end: u64) -> (Vec<u8>, u64) {
    let footer = encode_footer(9, data_end, at, 4096, e);
    let file_len = at + footer.len() as u64;
    (footer, file_len)
}

fn decode_all_of(footer: &[u8], at: u64, file_len: u64) -> Result<Vec<FooterEntry>, Corruption> {
    let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len)?;
    decode_footer(&t, footer, at)
}

pub(super) fn many(n: usize, key_len: impl Fn(usize) -> usize) -> Vec<FooterEntry> {
    (0..n)
        .map(|i| {
            let mut key = format!("{:08}", (i * 7919) % n).into_bytes();
            key.resize(key_len(i).max(8), b'x');
            FooterEntry {
                key,
                kind: RecordKind::Put,
                flags: 0,
                offset: 64 + i as u64 * 40,
                stored_len: 3,
                value_len: 3,
                seq: 1000 + i as u64,
                expires_at: None,
            }
        })
        .collect()
}

#[test]
fn round_trip_ends_on_block_in_key_order() {
    for at in [600u64, 4096, 4095, 8000] {
        let (footer, file_len) = sealed_with(&entries(), at, 600);
        assert_eq!(file_len % 4096, 0);
        let t = trailer_of(&footer, file_len);
        assert_eq!(t.version, FOOTER_V2);
        assert_eq!(decode_footer(&t, &footer, at).unwrap(), sorted(entries()));
        let table = &footer[(t.table_offset - at) as usize..];
        let locs = decode_locations(&t, table).unwrap();
        for (i, (l, e)) in locs.iter().zip(sorted(entries())).enumerate() {
            assert_eq!(*l, Location::of_entry(&e, i as u32));
        }
    }
}

#[test]
fn many_blocks_and_large_keys_round_trip() {
    for (n, len) in [
        (1usize, 4096usize),
        (3, 4096),
        (2000, 16),
        (300, 100),
        (50, 4000),
    ] {
        let e = many(n, |i| if i % 7 == 0 { len } else { len / 2 });
        let (footer, file_len) = sealed_with(&e, 1 << 20, 1 << 20);
        let t = trailer_of(&footer, file_len);
        let got = decode_footer(&t, &footer, 1 << 20).unwrap();
        assert_eq!(got, sorted(e.clone()), "n={n} len={len}");
        let table = &footer[(t.table_offset - (1 << 20)) as usize..];
        let h = LocationHeader::decode(&t, table).unwrap();
        // The listing's decoders, down the tree: every key block, in order.
        let blocks = leaves(&footer, 1 << 20, &h);
        let mut all = Vec::new();
        for (b, fence) in &blocks {
            assert!(b.len as usize <= keys::MAX_KEY_BLOCK_LEN);
            let bytes = &footer[(b.offset - (1 << 20)) as usize..];
            let kb = decode_key_block(9, t.data_end, b, bytes).unwrap();
            assert_eq!(kb.entries[0].0, &fence[..]);
            all.extend(kb.entries.iter().map(|(k, o)| (k.to_vec(), *o)));
        }
        let want: Vec<_> = sorted(e).into_iter().map(|e| (e.key, e.offset)).collect();
        assert_eq!(all, want);
        if n == 2000 {
            assert!(blocks.len() > 4, "{} blocks", blocks.len());
        }
    }
}

/// The key blocks of a footer at `at`, each with its fence key, by descending its tree level by
/// level through `decode_index_node`.
pub(super) fn leaves(footer: &[u8], at: u64, h: &LocationHeader) -> Vec<(BlockRef, Vec<u8>)> {
    let Some(root) = h.root() else {
        return Vec::new();
    };
    let mut level = vec![(root, Vec::new())];
    for depth in (1..=h.depth).rev() {
        let mut below = Vec::new();
        for (node, _) in &level {
            let bytes = &footer[(node.offset - at) as usize..];
            let n = decode_index_node(9, depth, node, bytes).unwrap();
            below.extend(n.children.iter().map(|c| (c.block, c.key.to_vec())));
        }
        level = below;
    }
    level
}

proptest! {
    #[test]
    fn round_trip_in_any_order(
        keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 1..300), 0..200),
        seed in any::<u64>(),
        base in 0u64..u64::MAX / 2,
    ) {
        let mut e: Vec<FooterEntry> = keys.into_iter().enumerate().map(|(i, key)| {
            let compressed = i % 3 == 1;
            let tomb = i % 5 == 4;
            FooterEntry {
                key,
                kind: if tomb { RecordKind::Tombstone } else { RecordKind::Put },
                flags: if tomb { 0 } else if compressed { FLAG_COMPRESSED } else { FLAG_BATCH_CONTINUES * (i as u16 % 2) },
                offset: 64 + (seed.wrapping_mul(i as u64 + 1) % (1 << 40)),
                stored_len: if tomb { 0 } else { (i as u64 * 977) % MAX_VALUE_LEN },
                value_len: if tomb { 0 } else if compressed { MAX_VALUE_LEN - i as u64 } else { (i as u64 * 977) % MAX_VALUE_LEN },
                seq: base + seed.rotate_left(i as u32) % (1 << 50),
                expires_at: None,
            }
        }).collect();
        // Any order in: shuffle by the seed.
        let n = e.len();
        for i in (1..n).rev() { e.swap(i, (seed.rotate_left(i as u32) as usize) % (i + 1)); }
        let at = (1u64 << 40) + 64;
        let (footer, file_len) = sealed_with(&e, at, at);
        prop_assert_eq!(decode_all_of(&footer, at, file_len).unwrap(), sorted(e));
    }
}

#[test]
fn every_flip_in_footer_detected() {
    // Several blocks: the flips cover key blocks, the tree (one node), the location table, the
    // padding is not covered (verify checks it), and the trailer.
    let e = many(700, |i| 8 + i % 20);
    let at = 64 * 1024;
    let (footer, file_len) = sealed_with(&e, at, at);
    let t = trailer_of(&footer, file_len);
    let table_end = (t.table_offset + t.table_len - at) as usize;
    assert_eq!(decode_all_of(&footer, at, file_len).unwrap().len(), 700);
    for i in (0..table_end).chain(footer.len() - TRAILER_LEN..footer.len()) {
        for bit in [0x01u8, 0x80] {
            let mut bad = footer.clone();
            bad[i] ^= bit;
            assert!(
                decode_all_of(&bad, at, file_len).is_err(),
                "flip {bit:#x} at {i} undetected"
            );
        }
    }
}

#[test]
fn every_flip_in_location_table_or_trailer_fails_locations() {
    let e = many(300, |_| 16);
    let at = 1 << 20;
    let (footer, file_len) = sealed_with(&e, at, at);
    let t = trailer_of(&footer, file_len);
    let from = (t.table_offset - at) as usize;
    let to = from + t.table_len as usize;
    assert_eq!(decode_locations(&t, &footer[from..]).unwrap().len(), 300);
    for i in (from..to).chain(footer.len() - TRAILER_LEN..footer.len()) {
        let mut bad = footer.clone();
        bad[i] ^= 0x10;
        let res = Trailer::decode(&bad[bad.len() - TRAILER_LEN..], file_len)
            .and_then(|t| decode_locations(&t, &bad[from..]));
        assert!(res.is_err(), "flip at {i} undetected");
    }
}

#[test]
fn truncations_are_typed() {
    let e = many(400, |_| 16);
    let at = 1 << 20;
    let (footer, file_len) = sealed_with(&e, at, at);
    let t = trailer_of(&footer, file_len);
    let from = (t.table_offset - at) as usize;
    let table = &footer[from..from + t.table_len as usize];
    assert_eq!(decode_footer(&t, &footer, at).unwrap().len(), 400);
    for cut in (0..table.len()).step_by(7) {
        assert!(matches!(
            decode_locations(&t, &table[..cut]),
            Err(Corruption::Truncated { .. })
        ));
    }
    let h = LocationHeader::decode(&t, table).unwrap();
    let keys = &footer[..h.key_len as usize];
    for cut in (0..keys.len()).step_by(13) {
        let res = decode_entries(&t, &keys[..cut], table);
        assert!(
            matches!(res, Err(Corruption::Truncated { .. })),
            "cut {cut}: {res:?}"
        );
    }
    let root = h.root().unwrap();
    let node = &footer[(root.offset - at) as usize..][..root.len as usize];
    for cut in 0..node.len() {
        assert!(matches!(
            decode_index_node(9, h.depth, &root, &node[..cut]),
            Err(Corruption::Truncated { .. })
        ));
    }
    let blocks = leaves(&footer, at, &h);
    let b = blocks[1].0;
    let bytes = &footer[(b.offset - at) as usize..][..b.len as usize];
    for cut in 0..bytes.len() {
        assert!(matches!(
            decode_key_block(9, t.data_end, &b, &bytes[..cut]),
            Err(Corruption::Truncated { .. })
        ));
    }
    // A block read at another offset fails its crc: blocks are bound to their place.
    let moved = BlockRef {
        offset: b.offset + 4096,
        ..b
    };
    assert!(matches!(
        decode_key_block(9, t.data_end, &moved, bytes),
        Err(Corruption::ChecksumMismatch { .. })
    ));
    assert!(matches!(
        decode_key_block(8, t.data_end, &b, bytes),
        Err(Corruption::ChecksumMismatch { .. })
    ));
}

#[test]
fn location_table_bytes_per_key_bound() {
    // 16-byte keys, tiny values: at most 32 bytes per key whatever the offsets and sequence
    // numbers within their ranges (offsets below 32 GiB, any seq), about 20 in a typical
    // segment.
    for (seq_spread, offset_step, max_per_key) in [
        (1u64, 120u64, 20.0),
        (u64::MAX / 4096, 1 << 23, 32.0),
        (1 << 20, 1 << 14, 24.0),
    ] {
        let e: Vec<FooterEntry> = (0..4096u64)
            .map(|i| FooterEntry {
                key: format!("{:016x}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).into_bytes(),
                kind: RecordKind::Put,
                flags: 0,
                offset: 64 + i * offset_step,
                stored_len: 100,
                value_len: 100,
                seq: 7 + i * seq_spread,
                expires_at: None,
            })
            .collect();
        let at = 64 + 4096 * offset_step;
        let (footer, file_len) = sealed_with(&e, at, at);
        let t = trailer_of(&footer, file_len);
        let per_key = (t.table_len - LOCATION_HEADER_LEN as u64) as f64 / e.len() as f64;
        assert!(
            per_key <= max_per_key,
            "{per_key} bytes per key (spread {seq_spread}, step {offset_step})"
        );
    }
    // The bound as a property of the encoding: the longest entry of a 16-byte key with a value
    // under 128 bytes, offset under 32 GiB and any sequence delta.
    let worst = 8 + varint::len(u64::MAX) + varint::len((1 << 35) - 1) + 1 + 1 + 1;
    assert!(worst <= 32, "{worst}");
}

#[test]
fn varint_edges() {
    for v in [
        0u64,
        1,
        127,
        128,
        16383,
        16384,
        u32::MAX as u64,
        u64::MAX - 1,
        u64::MAX,
    ] {
        let mut b = Vec::new();
        varint::put(&mut b, v);
        assert_eq!(b.len(), varint::len(v), "{v}");
        let mut pos = 0;
        assert_eq!(varint::get(&b, &mut pos, "t").unwrap(), v);
        assert_eq!(pos, b.len());
        for cut in 0..b.len() {
            let mut pos = 0;
            assert!(matches!(
                varint::get(&b[..cut], &mut pos, "t"),
                Err(Corruption::Truncated { .. })
            ));
        }
    }
    assert_eq!(varint::len(u64::MAX), 10);
    // Over range: a 10th byte above 1, an 11th byte, a non-minimal encoding.
    let over = [0xffu8, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
    assert!(matches!(
        varint::get(&over, &mut 0, "t"),
        Err(Corruption::InvalidField { .. })
    ));
    let eleven = [0x80u8; 11];
    assert!(varint::get(&eleven, &mut 0, "t").is_err());
    assert!(matches!(
        varint::get(&[0x81, 0x00], &mut 0, "t"),
        Err(Corruption::InvalidField { .. })
    ));
    assert!(matches!(
        varint::get_max(&[0x81, 0x20], &mut 0, 4096, "t"),
        Err(Corruption::InvalidField { .. })
    ));
}

/// Rebuilds a footer's location table with `edit` applied to the encoded entries' fields, with
/// valid crcs, to show that each field is validated on its own.
#[test]
fn inconsistent_fields_are_rejected_in_both_versions() {
    let check = |edit: &dyn Fn(&mut FooterEntry), v2: bool| {
        let mut e = entries();
        edit(&mut e[0]);
        let at = 600;
        let footer = if v2 {
            encode_footer(9, 600, at, 4096, &e)
        } else {
            encode_footer_v1(9, 600, at, 4096, &e)
        };
        decode_all_of(&footer, at, at + footer.len() as u64)
    };
    for v2 in [false, true] {
        assert!(check(&|_| {}, v2).is_ok());
        assert!(
            check(
                &|e| {
                    e.flags = FLAG_COMPRESSED;
                    e.value_len = MAX_VALUE_LEN;
                },
                v2
            )
            .is_ok()
        );
        let bad: [&dyn Fn(&mut FooterEntry); 7] = [
            &|e| e.value_len = 51,
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
            &|e| e.offset = 600,
            &|e| e.offset = 63,
            &|e| {
                e.kind = RecordKind::Tombstone;
                e.stored_len = 5;
                e.value_len = 5;
            },
        ];
        for (i, edit) in bad.iter().enumerate() {
            if v2 && i == 0 {
                // Version 2 stores no value length for an uncompressed record: it is the
                // stored length by construction.
                continue;
            }
            assert!(
                matches!(check(edit, v2), Err(Corruption::InvalidField { .. })),
                "case {i} v2={v2}"
            );
        }
    }
    // Unknown flags: v1 stores them whole; v2 has two bits for them (the encoder is never given
    // others), and a flags byte with high bits set is rejected.
    assert!(matches!(
        check(&|e| e.flags = 4, false),
        Err(Corruption::InvalidField { .. })
    ));
}

#[test]
fn v1_footers_still_decode() {
    let at = 600;
    let footer = encode_footer_v1(9, 600, at, 4096, &entries());
    let file_len = at + footer.len() as u64;
    let t = trailer_of(&footer, file_len);
    assert_eq!(t.version, FOOTER_V1);
    // Whole entries in record order, as written.
    assert_eq!(decode_footer(&t, &footer, at).unwrap(), entries());
    assert_eq!(decode_v1(&t, &footer).unwrap(), entries());
    assert_eq!(key_section(&t, &footer).unwrap(), None);
    // Locations in key order, hashes computed.
    let locs = decode_locations(&t, &footer).unwrap();
    let want: Vec<Location> = sorted(entries())
        .iter()
        .enumerate()
        .map(|(i, e)| Location::of_entry(e, i as u32))
        .collect();
    assert_eq!(locs, want);
    // Every flip of the v1 table and trailer is still detected.
    for i in (0..t.table_len as usize).chain(footer.len() - TRAILER_LEN..footer.len()) {
        let mut bad = footer.clone();
        bad[i] ^= 0x04;
        assert!(decode_all_of(&bad, at, file_len).is_err(), "flip at {i}");
    }
}

#[test]
fn unknown_trailer_version_is_rejected() {
    let (footer, file_len) = sealed_with(&entries(), 600, 600);
    let mut t = trailer_of(&footer, file_len);
    for v in [0u8, 4, 255] {
        t.version = v;
        let bytes = t.encode();
        assert_eq!(
            Trailer::decode(&bytes, file_len),
            Err(Corruption::UnsupportedVersion { found: v as u32 })
        );
    }
}

#[test]
fn a_table_shorter_than_its_header_is_rejected() {
    let (footer, file_len) = sealed_with(&entries(), 600, 600);
    let t = trailer_of(&footer, file_len);
    let table = &footer[(t.table_offset - 600) as usize..];
    for table_len in 0..LOCATION_HEADER_LEN as u64 {
        for entry_count in [0, 1] {
            let short = Trailer {
                table_len,
                entry_count,
                ..t
            };
            assert!(decode_locations(&short, table).is_err());
        }
    }
    // A count the table cannot hold does not allocate, it fails.
    let huge = Trailer {
        entry_count: u64::MAX,
        ..t
    };
    assert!(decode_locations(&huge, table).is_err());
}

#[test]
fn trailer_pointing_outside_file_rejected() {
    let (footer, file_len) = sealed_with(&entries(), 600, 600);
    let tail = &footer[footer.len() - TRAILER_LEN..];
    assert!(Trailer::decode(tail, file_len).is_ok());
    assert!(matches!(
        Trailer::decode(tail, 700),
        Err(Corruption::InvalidField { .. })
    ));
}

#[test]
fn empty_footer_round_trips() {
    let (footer, file_len) = sealed_with(&[], 4096, 600);
    let t = trailer_of(&footer, file_len);
    assert_eq!(decode_footer(&t, &footer, 4096).unwrap(), vec![]);
}

#[test]
fn key_hash_is_xxh3_and_stable() {
    // Written to disk: the values must never change.
    assert_eq!(key_hash(b""), 0x2d06_8005_38d3_94c2);
    assert_eq!(key_hash(b"a"), key_hash(b"a"));
    assert_ne!(key_hash(b"a"), key_hash(b"b"));
}

#[test]
fn a_key_given_twice_is_named_once_by_its_newest_entry() {
    let mut e = entries();
    let mut older = e[1].clone();
    older.seq = e[1].seq - 1;
    older.offset = 64;
    let mut tie = e[2].clone();
    tie.offset = 77; // same seq as e[2], given later: it wins
    e.insert(0, older);
    e.push(tie.clone());
    let (footer, file_len) = sealed_with(&e, 600, 600);
    let got = decode_all_of(&footer, 600, file_len).unwrap();
    let mut want = entries();
    want[2] = tie;
    assert_eq!(got, sorted(want));
}

proptest! {
    /// The seal's sort by a word of each key (`newest_by_key`) keeps what a plain sort by key,
    /// sequence number and place in the input, then the last entry of each key, keeps: keys
    /// with a long shared prefix, keys that are prefixes of others, keys ending in zero bytes
    /// (equal words, different keys), an empty key, and keys several times with other
    /// sequence numbers or the same (the later kept: what a seal of records as written needs).
    #[test]
    fn the_sort_by_words_is_the_sort_by_keys(
        prefix in proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(0xff)], 0..12),
        tails in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just(0u8), Just(1u8), Just(b'z'), Just(0xff)], 0..12), 0u64..4),
            0..60,
        ),
    ) {
        let entries: Vec<FooterEntry> = tails
            .into_iter()
            .enumerate()
            .map(|(i, (tail, seq))| FooterEntry {
                key: [prefix.as_slice(), &tail].concat(),
                kind: RecordKind::Put,
                flags: 0,
                offset: 64 + i as u64,
                stored_len: 1,
                value_len: 1,
                seq,
                expires_at: None,
            })
            .collect();
        let got: Vec<(Vec<u8>, u64, u64)> = newest_by_key(entries.iter().collect())
            .into_iter()
            .map(|e| (e.key.clone(), e.seq, e.offset))
            .collect();
        let mut want: Vec<(Vec<u8>, u64, u64)> =
            entries.iter().map(|e| (e.key.clone(), e.seq, e.offset)).collect();
        want.sort();
        // The newest of each key: the last of its run.
        want.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                *earlier = later.clone();
            }
            same
        });
        prop_assert_eq!(got, want);
    }
}

/// `entries()` with an expiry on some puts, a compressed one among them.
fn expiring_entries() -> Vec<FooterEntry> {
    let mut e = entries();
    for (i, at) in [(0, 1_764_960_000_000u64), (4, 1), (2, MAX_EXPIRES_AT_MS)] {
        e[i].expires_at = Some(at);
        e[i].flags |= FLAG_EXPIRES;
    }
    e
}

#[test]
fn expiries_round_trip_in_a_footer_of_version_3() {
    let (footer, file_len) = sealed_with(&expiring_entries(), 4096, 600);
    let t = trailer_of(&footer, file_len);
    assert_eq!(t.version, FOOTER_V3);
    assert_eq!(
        decode_footer(&t, &footer, 4096).unwrap(),
        sorted(expiring_entries())
    );
    let table = &footer[(t.table_offset - 4096) as usize..];
    let locs = decode_locations(&t, table).unwrap();
    for (l, e) in locs.iter().zip(sorted(expiring_entries())) {
        assert_eq!((l.expires_at, l.flags), (e.expires_at, e.flags));
    }
    // A listing's map of the table decodes the entries of a key block with their expiries.
    let blocks = BlockLocations::of_table(&t, table).unwrap().unwrap();
    assert_eq!(blocks.blocks(), 1);
    let run = blocks.run(4096 + KEYS_HEADER_LEN as u64).unwrap();
    let bytes = &footer[(run.bytes.start - 4096) as usize..(run.bytes.end - 4096) as usize];
    let keys: Vec<(Vec<u8>, u64)> = sorted(expiring_entries())
        .into_iter()
        .map(|e| (e.key, e.offset))
        .collect();
    let seqs: Vec<u64> = sorted(expiring_entries()).iter().map(|e| e.seq).collect();
    assert_eq!(blocks.seqs(&run, bytes, &keys), Some(seqs));
    // Without an expiry the footer is the footer of earlier builds, byte for byte.
    let (plain, plain_len) = sealed_with(&entries(), 4096, 600);
    assert_eq!(trailer_of(&plain, plain_len).version, FOOTER_V2);
}

#[test]
fn an_expiry_outside_version_3_or_out_of_range_is_refused() {
    let (footer, file_len) = sealed_with(&expiring_entries(), 4096, 600);
    let t = trailer_of(&footer, file_len);
    // The same table under a trailer of version 2: its entries' expiry bit is unknown there.
    let v2 = Trailer {
        version: FOOTER_V2,
        ..t
    };
    let table = &footer[(t.table_offset - 4096) as usize..];
    assert!(matches!(
        decode_locations(&v2, table),
        Err(Corruption::InvalidField {
            field: "footer record flags",
            ..
        })
    ));
    // An expiry of zero, or past the year 9999: a typed error of the field.
    for at in [0, MAX_EXPIRES_AT_MS + 1] {
        let mut e = expiring_entries();
        e[0].expires_at = Some(at);
        let (footer, file_len) = sealed_with(&e, 4096, 600);
        let t = trailer_of(&footer, file_len);
        let table = &footer[(t.table_offset - 4096) as usize..];
        assert_eq!(
            decode_locations(&t, table),
            Err(Corruption::InvalidField {
                field: "footer record expiry",
                value: at,
            })
        );
    }
}
