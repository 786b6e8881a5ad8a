//! Unit tests of the frame codecs: both layouts, every boundary, damage of every kind.

use super::test_data::{random, text};
use super::*;

const F: u32 = MIN_FRAME_SIZE;

fn sizes() -> Vec<usize> {
    let f = F as usize;
    vec![1, 2, f - 1, f, f + 1, 2 * f, 3 * f + 7, 10 * f]
}

#[test]
fn round_trip_around_frame_boundaries() {
    for len in sizes() {
        for value in [text(len), random(len, len as u64), vec![0u8; len]] {
            let trailing = encode_framed(&value, F);
            let leading = to_leading_layout(&trailing);
            for (stored, layout) in [
                (trailing, FrameLayout::Trailing),
                (leading, FrameLayout::Leading),
            ] {
                let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
                assert_eq!(header.layout, layout);
                assert_eq!(header.value_len, len as u64);
                assert_eq!(header.frame_count, len.div_ceil(F as usize) as u64);
                assert_eq!(entries.len() as u64, header.frame_count);
                assert_eq!(decode_value(&stored).unwrap(), value, "len {len}");
            }
        }
    }
}

#[test]
fn the_stream_encoder_in_any_pieces_writes_what_encode_framed_does() {
    let value = text(9 * F as usize + 321);
    let whole = encode_framed(&value, F);
    let mut x = 7u64;
    for _ in 0..20 {
        let mut enc = FrameEncoder::new(F);
        let mut out = Vec::new();
        let mut emit = |b: &[u8]| -> Result<(), ()> {
            out.extend_from_slice(b);
            Ok(())
        };
        let mut rest = &value[..];
        while !rest.is_empty() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = ((x >> 33) as usize % (3 * F as usize)).min(rest.len());
            enc.write(&rest[..n], &mut emit).unwrap();
            rest = &rest[n..];
            assert!(enc.memory() <= 2 * F as usize + 64 + 16 * 16 + 1024);
        }
        assert!(enc.stored_len_bound() >= whole.len() as u64);
        assert_eq!(enc.finish(&mut emit).unwrap(), whole.len() as u64);
        assert_eq!(out, whole);
    }
}

#[test]
fn compressible_frames_shrink_and_random_ones_are_stored_raw() {
    let t = text(8 * F as usize);
    let stored = encode_framed(&t, F);
    assert!(stored.len() < t.len() / 2, "text: {} bytes", stored.len());
    let r = random(8 * F as usize, 9);
    let stored = encode_framed(&r, F);
    let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
    assert!(entries.iter().all(|e| e.stored_len == F));
    assert_eq!(stored.len() as u64, header.table_len() + r.len() as u64);
}

#[test]
fn largest_frames_of_zeroes_pass_the_expansion_bound() {
    let zeroes = vec![0u8; MAX_FRAME_SIZE as usize + 1];
    let stored = encode_framed(&zeroes, MAX_FRAME_SIZE);
    let (_, entries) = decode_table(&stored, stored.len() as u64).unwrap();
    assert!((entries[0].stored_len as u64) * MAX_LZ4_EXPANSION >= MAX_FRAME_SIZE as u64);
    assert_eq!(decode_value(&stored).unwrap(), zeroes);
}

#[test]
fn frames_for_ranges() {
    let h = FrameTableHeader::new(10 * F as u64 + 5, F);
    let f = F as u64;
    assert_eq!(h.frame_count, 11);
    assert_eq!(h.frames_for(0, 1), 0..1);
    assert_eq!(h.frames_for(f - 1, f + 1), 0..2);
    assert_eq!(h.frames_for(f, 2 * f), 1..2);
    assert_eq!(h.frames_for(3, 3), 0..0);
    assert_eq!(h.frames_for(10 * f, 10 * f + 5), 10..11);
    assert_eq!(h.frame_len(10), 5);
    assert_eq!(h.frame_len(11), 0);
}

#[test]
fn partial_entries_decode_like_the_whole_table() {
    let value = text(7 * F as usize + 100);
    let stored = encode_framed(&value, F);
    let s = stored.len() as u64;
    let (header, all) = decode_table(&stored, s).unwrap();
    for a in 0..=header.frame_count {
        for b in a..=header.frame_count {
            let bytes = &stored[header.entry_offset(a) as usize..header.entry_offset(b) as usize];
            let got = decode_entries(&header, a..b, bytes, s).unwrap();
            assert_eq!(got, all[a as usize..b as usize]);
        }
    }
    // Each frame decodes on its own.
    for (i, e) in all.iter().enumerate() {
        let i = i as u64;
        let mut out = vec![0u8; header.frame_len(i) as usize];
        decode_frame(
            &header,
            i,
            e,
            &stored[e.offset as usize..e.end() as usize],
            &mut out,
        )
        .unwrap();
        let at = header.frame_start(i) as usize;
        assert_eq!(out, value[at..at + out.len()]);
    }
}

#[test]
fn every_flipped_table_byte_is_rejected_or_caught_by_the_frames() {
    let value = text(3 * F as usize + 10);
    let trailing = encode_framed(&value, F);
    let leading = to_leading_layout(&trailing);
    for stored in [trailing, leading] {
        let (header, _) = decode_table(&stored, stored.len() as u64).unwrap();
        let table = match header.layout {
            FrameLayout::Leading => 0..header.table_len() as usize,
            FrameLayout::Trailing => header.entries_at() as usize..stored.len(),
        };
        for i in table {
            for bit in [0x01u8, 0x80] {
                let mut bad = stored.clone();
                bad[i] ^= bit;
                assert!(
                    decode_value(&bad).is_err(),
                    "flip {bit:#x} at {i} undetected"
                );
            }
        }
    }
}

#[test]
fn a_flipped_frame_byte_fails_that_frame_only() {
    let value = text(4 * F as usize);
    let stored = encode_framed(&value, F);
    let s = stored.len() as u64;
    let (header, entries) = decode_table(&stored, s).unwrap();
    let victim = 2;
    let e = entries[victim];
    for at in [e.offset, e.offset + e.stored_len as u64 / 2, e.end() - 1] {
        let mut bad = stored.clone();
        bad[at as usize] ^= 0x10;
        for (i, e) in entries.iter().enumerate() {
            let mut out = vec![0u8; header.frame_len(i as u64) as usize];
            let r = decode_frame(
                &header,
                i as u64,
                e,
                &bad[e.offset as usize..e.end() as usize],
                &mut out,
            );
            if i == victim {
                assert!(
                    matches!(
                        r,
                        Err(Corruption::ChecksumMismatch { .. } | Corruption::Decompression { .. })
                    ),
                    "flip at {at}: {r:?}"
                );
            } else {
                r.unwrap();
            }
        }
    }
}

#[test]
fn a_raw_frame_flip_is_a_checksum_mismatch() {
    let value = random(2 * F as usize, 3);
    let mut stored = encode_framed(&value, F);
    let (header, entries) = decode_table(&stored, stored.len() as u64).unwrap();
    stored[entries[1].offset as usize + 5] ^= 1;
    let mut out = vec![0u8; F as usize];
    let e = entries[1];
    assert!(matches!(
        decode_frame(
            &header,
            1,
            &e,
            &stored[e.offset as usize..e.end() as usize],
            &mut out
        ),
        Err(Corruption::ChecksumMismatch { .. })
    ));
}

#[test]
fn every_truncation_is_rejected() {
    let value = text(2 * F as usize + 3);
    let stored = encode_framed(&value, F);
    let n = stored.len();
    let leading = to_leading_layout(&stored);
    for cut in 0..n {
        assert!(decode_value(&stored[..cut]).is_err(), "cut at {cut}");
        assert!(decode_value(&leading[..cut]).is_err(), "cut at {cut}");
        // The header alone, told the true stored length, still decodes when whole.
        let h = FrameTableHeader::decode(&leading[..cut], n as u64);
        assert_eq!(h.is_ok(), cut >= FRAME_TABLE_HEADER_LEN, "cut at {cut}");
        let h = FrameTableHeader::decode_trailer(&stored[cut..], n as u64);
        assert_eq!(h.is_ok(), n - cut >= FRAME_TABLE_HEADER_LEN, "cut at {cut}");
    }
    // Told a shorter stored length, the table does not fit or does not end there.
    for s in 0..n as u64 {
        assert!(decode_table(&stored, s).is_err(), "stored length {s}");
        assert!(decode_table(&leading, s).is_err(), "stored length {s}");
    }
}

#[test]
fn lying_lengths_are_bounded_before_allocating() {
    let mut h = FrameTableHeader::new(MAX_VALUE_LEN, MAX_FRAME_SIZE).encode();
    // A header claiming 4 GiB in 1024 frames of 4 MiB, with almost no stored bytes.
    assert!(matches!(
        FrameTableHeader::decode(&h, 100),
        Err(Corruption::Truncated { .. })
    ));
    // A frame count that does not match the lengths.
    h[off::FRAME_COUNT] ^= 1;
    let crc = crc32fast::hash(&h[..off::HEADER_CRC]);
    h[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(
        FrameTableHeader::decode(&h, u64::MAX),
        Err(Corruption::InvalidField {
            field: "frame count",
            ..
        })
    ));
    // Frame sizes out of range, with a valid crc.
    for fs in [0u32, 1, MIN_FRAME_SIZE - 1, MAX_FRAME_SIZE + 1, u32::MAX] {
        let mut h = FrameTableHeader::new(10, MIN_FRAME_SIZE).encode();
        h[off::FRAME_SIZE..off::FRAME_SIZE + 4].copy_from_slice(&fs.to_le_bytes());
        let crc = crc32fast::hash(&h[..off::HEADER_CRC]);
        h[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(
            FrameTableHeader::decode(&h, 1 << 20),
            Err(Corruption::InvalidField {
                field: "frame size",
                ..
            })
        ));
    }
    // Entries asked for beyond the frame count, or with too few bytes.
    let header = FrameTableHeader::new(3 * F as u64, F);
    assert!(decode_entries(&header, 0..4, &[0u8; 64], 1 << 20).is_err());
    assert!(matches!(
        decode_entries(&header, 0..3, &[0u8; 47], 1 << 20),
        Err(Corruption::Truncated { .. })
    ));
    // An entry claiming more expansion than lz4 can produce, or lying outside the value.
    let entry = |offset: u64, stored_len: u32| {
        FrameEntry {
            offset,
            stored_len,
            crc: 0,
        }
        .encode()
    };
    let t = header.table_len();
    assert!(decode_entries(&header, 0..1, &entry(t, 1), 1 << 20).is_err());
    assert!(decode_entries(&header, 0..1, &entry(t, F + 1), 1 << 20).is_err());
    assert!(decode_entries(&header, 0..1, &entry(t - 1, 100), 1 << 20).is_err());
    assert!(decode_entries(&header, 0..1, &entry(t, 100), t + 99).is_err());
    assert!(decode_entries(&header, 0..1, &entry(u64::MAX - 5, 100), u64::MAX).is_err());
    assert!(decode_entries(&header, 0..1, &entry(t, 100), t + 100).is_ok());
    // A frame decoded into a buffer of the wrong size, or from the wrong number of bytes.
    let e = FrameEntry {
        offset: t,
        stored_len: 100,
        crc: 0,
    };
    let mut out = vec![0u8; F as usize - 1];
    assert!(decode_frame(&header, 0, &e, &[0u8; 100], &mut out).is_err());
    let mut out = vec![0u8; F as usize];
    assert!(decode_frame(&header, 0, &e, &[0u8; 99], &mut out).is_err());
    assert!(decode_frame(&header, 3, &e, &[0u8; 100], &mut out).is_err());
    // Garbage that is not lz4 at all.
    assert!(matches!(
        decode_frame(&header, 0, &e, &[0xffu8; 100], &mut out),
        Err(Corruption::Decompression { frame: 0 })
    ));
}

#[test]
fn arbitrary_bytes_never_panic() {
    // A cheap stand-in for the fuzz target: random inputs and mutated valid tables.
    let valid = encode_framed(&text(3 * F as usize + 11), F);
    let leading = to_leading_layout(&valid);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..3000 {
        let mut bytes = if round % 3 == 0 {
            valid.clone()
        } else if round % 3 == 1 {
            leading.clone()
        } else {
            random((next() % 300) as usize, next())
        };
        for _ in 0..(next() % 4) {
            if !bytes.is_empty() {
                let i = (next() % bytes.len() as u64) as usize;
                bytes[i] = next() as u8;
            }
        }
        let cut = (next() % (bytes.len() as u64 + 1)) as usize;
        let bytes = &bytes[..cut];
        let _ = decode_value(bytes);
        if let Ok(h) = FrameTableHeader::decode(bytes, bytes.len() as u64) {
            let n = h.frame_count.min(4);
            let from = h.entry_offset(0) as usize;
            let _ = decode_entries(&h, 0..n, &bytes[from.min(bytes.len())..], u64::MAX);
        }
        if let Ok(h) = FrameTableHeader::decode_trailer(bytes, bytes.len() as u64) {
            let n = h.frame_count.min(4);
            let from = h.entry_offset(0) as usize;
            let _ = decode_entries(&h, 0..n, &bytes[from.min(bytes.len())..], u64::MAX);
        }
    }
}
