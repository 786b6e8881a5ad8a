//! Framed (compressed) values, in both layouts (trailing: the table after the frames, as written
//! now; leading: the table first, as older stores hold it): `FrameTableHeader::decode` and
//! `decode_trailer`, `decode_entries`, `decode_table`, `decode_frame` and `decode_value` on
//! arbitrary bytes, and the round trip `encode_framed` (and `FrameEncoder` fed in pieces, and the
//! same value in the leading layout) → decode with single-byte corruption and truncation.
//!
//! Input, read twice:
//! * raw: bytes 0..8 a stored length as a record header would claim it (the read path decodes
//!   a leading table header from the value's first chunk with that length), 8..16 picks a window
//!   of frames, 16.. the stored bytes (seeds: `encode_framed` outputs, with their true length, in
//!   both layouts); a trailing header is decoded from the end of the stored bytes;
//! * structured: the same bytes drive an `Unstructured` that builds a value to round-trip.
//!
//! Checks: nothing panics; nothing allocates more than a small multiple of the input (run with
//! `-malloc_limit_mb`): a frame buffer is at most `MAX_FRAME_SIZE`, a decoded value at most
//! `MAX_LZ4_EXPANSION` times the input; whatever decodes satisfies the invariants the decoders
//! promise; a damaged or truncated value never decodes to bytes other than the original.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::MAX_VALUE_LEN;
use podstore::format::frames::{
    FRAME_TABLE_HEADER_LEN, FrameEncoder, FrameEntry, FrameTableHeader, MAX_FRAME_SIZE,
    MAX_LZ4_EXPANSION, MIN_FRAME_SIZE, decode_entries, decode_frame, decode_table, decode_value,
    encode_framed, to_leading_layout,
};
use podstore_fuzz::{Unstructured, arbitrary, fill, u64_at};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = round_trip(&mut Unstructured::new(data));
});

fn check_header(h: &FrameTableHeader, stored_len: u64) {
    assert!((MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&h.frame_size));
    assert!(h.value_len >= 1 && h.value_len <= MAX_VALUE_LEN);
    assert_eq!(h.frame_count, h.value_len.div_ceil(h.frame_size as u64));
    assert!(h.table_len() + h.frame_count <= stored_len);
}

fn check_entries(h: &FrameTableHeader, first: u64, entries: &[FrameEntry], stored_len: u64) {
    for (k, e) in entries.iter().enumerate() {
        let i = first + k as u64;
        let len = e.stored_len as u64;
        let frame_len = h.frame_len(i);
        assert!(len >= 1 && len <= frame_len, "frame {i}: {e:?}");
        assert!(frame_len <= len * MAX_LZ4_EXPANSION);
        let region = h.frames_region();
        assert!(e.offset >= region.start && e.end() <= region.end.min(stored_len));
        if k > 0 {
            assert_eq!(entries[k - 1].end(), e.offset, "frames back to back");
        }
    }
}

fn raw(data: &[u8]) {
    let stored = data.get(16..).unwrap_or(&[]);
    let whole = stored.len() as u64;

    // The whole value, as `get` decodes it.
    if let Ok((h, entries)) = decode_table(stored, whole) {
        check_header(&h, whole);
        assert_eq!(entries.len() as u64, h.frame_count);
        check_entries(&h, 0, &entries, whole);
        let region = h.frames_region();
        assert_eq!(entries[0].offset, region.start);
        assert_eq!(entries.last().map(|e| e.end()), Some(region.end));
        assert!(region.end <= whole);
    }
    if let Ok(v) = decode_value(stored) {
        assert!(!v.is_empty());
        assert!(v.len() as u64 <= whole * MAX_LZ4_EXPANSION);
    }

    // The range read's path: the header with the record's claimed stored length (the bytes at
    // hand may be only the first chunk), or a trailing one at the end of the stored bytes, then a
    // window of entries, then those frames.
    let claimed = u64_at(data, 0) % (MAX_VALUE_LEN + 64);
    let pick = u64_at(data, 8);
    if let Ok(h) = FrameTableHeader::decode(stored, claimed) {
        window(&h, stored, claimed, pick);
    }
    if let Ok(h) = FrameTableHeader::decode_trailer(stored, whole) {
        window(&h, stored, whole, pick);
    }
}

/// Decodes the window of entries `pick` chooses, then their frames.
fn window(h: &FrameTableHeader, stored: &[u8], stored_len: u64, pick: u64) {
    check_header(h, stored_len);
    let first = (pick & 0xffff) % (h.frame_count + 1);
    let n = ((pick >> 16) & 0xff).min(h.frame_count - first);
    let from = (h.entry_offset(first) as usize).min(stored.len());
    let Ok(entries) = decode_entries(h, first..first + n, &stored[from..], stored_len) else {
        return;
    };
    assert_eq!(entries.len() as u64, n);
    check_entries(h, first, &entries, stored_len);
    for (k, e) in entries.iter().enumerate() {
        let i = first + k as u64;
        let Some(src) = stored.get(e.offset as usize..e.end() as usize) else {
            continue;
        };
        // At most MAX_FRAME_SIZE: the header decoder bounds the frame size.
        let mut out = vec![0u8; h.frame_len(i) as usize];
        let _ = decode_frame(h, i, e, src, &mut out);
    }
}

fn round_trip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let frame_size = match u.int_in_range(0u8..=7)? {
        0..=3 => MIN_FRAME_SIZE,
        4 | 5 => MIN_FRAME_SIZE * u.int_in_range(2..=16)?,
        6 => 64 << 10,
        _ => MAX_FRAME_SIZE,
    };
    let len = match u.int_in_range(0u8..=5)? {
        0 => u.int_in_range(1..=64)?,
        1 | 2 => u.int_in_range(1..=3 * frame_size as usize)?,
        3 => {
            // Around frame boundaries, in frames of at most 64 KiB (a few MiB per run at most).
            let f = frame_size.min(64 << 10) as usize;
            f * u.int_in_range(1..=3usize)? + u.int_in_range(0..=2usize)? - 1
        }
        _ => u.int_in_range(1..=(256 << 10))?,
    };
    // Repetitive (compressible) or input bytes (often not).
    let value = if u.arbitrary()? {
        fill(u, len)?
    } else {
        let mut v = u.bytes(len.min(u.len()))?.to_vec();
        v.resize(len, 0x5a);
        v
    };
    if value.is_empty() {
        return Ok(());
    }
    let stored = encode_framed(&value, frame_size);
    let s = stored.len() as u64;
    // The stream encoder, fed in pieces, writes the same bytes.
    let mut streamed = Vec::new();
    let mut emit = |b: &[u8]| -> Result<(), ()> {
        streamed.extend_from_slice(b);
        Ok(())
    };
    let mut encoder = FrameEncoder::new(frame_size);
    let mut rest = &value[..];
    while !rest.is_empty() {
        let n = u.int_in_range(1..=rest.len())?;
        encoder.write(&rest[..n], &mut emit).unwrap();
        rest = &rest[n..];
    }
    assert_eq!(encoder.finish(&mut emit), Ok(s));
    assert!(streamed == stored, "the stream encoder wrote other bytes");
    // Both layouts; which one is damaged and cut below is the input's choice.
    let leading = to_leading_layout(&stored);
    assert_eq!(decode_value(&leading).expect("leading round trip"), value);
    let is_leading: bool = u.arbitrary()?;
    let stored = if is_leading { leading } else { stored };
    let (h, entries) = decode_table(&stored, s).expect("a freshly framed value must decode");
    assert_eq!(h.value_len, value.len() as u64);
    assert_eq!(h.frame_size, frame_size);
    assert_eq!(decode_value(&stored).expect("round trip"), value);

    // Any window of entries decodes like the whole table, from its own bytes.
    let a = u.int_in_range(0..=h.frame_count)?;
    let b = u.int_in_range(a..=h.frame_count)?;
    let window = &stored[h.entry_offset(a) as usize..h.entry_offset(b) as usize];
    assert_eq!(
        decode_entries(&h, a..b, window, s).expect("window"),
        entries[a as usize..b as usize]
    );

    // One damaged byte: an error, or (lz4 can encode the same bytes two ways) the same value.
    let at = u.int_in_range(0..=stored.len() - 1)?;
    let mut bad = stored.clone();
    bad[at] ^= u.int_in_range(1..=255u8)?;
    if let Ok(v) = decode_value(&bad) {
        assert!(v == value, "a damaged byte at {at} decoded to other bytes");
    }
    // Truncated: never decodes.
    let cut = u.int_in_range(0..=stored.len() - 1)?;
    assert!(decode_value(&stored[..cut]).is_err());
    // (Which layout, from the choice above: a trailing table whose frames take exactly 24
    // bytes starts where a leading one would.)
    if is_leading {
        assert_eq!(
            FrameTableHeader::decode(&stored[..cut], s).is_ok(),
            cut >= FRAME_TABLE_HEADER_LEN
        );
    } else {
        assert_eq!(
            FrameTableHeader::decode_trailer(&stored[cut..], s).is_ok(),
            stored.len() - cut >= FRAME_TABLE_HEADER_LEN
        );
    }
    Ok(())
}
