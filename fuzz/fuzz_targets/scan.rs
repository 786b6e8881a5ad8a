//! The recovery scan: `scan_segment` over arbitrary bytes, and over valid segment images
//! damaged the ways a crash or a bad disk damages them.
//!
//! Input, read twice:
//! * raw: a segment image, scanned for the segment id found at bytes 8..16 (seeds: valid
//!   segments, unsealed and sealed);
//! * structured: an `Unstructured` that builds a segment image the way the writer lays it out
//!   (header, groups of records, each group zero-padded to the block size; sometimes sealed with a
//!   footer), damages it (truncation, a changed byte, a zeroed tail, a write torn at sector
//!   granularity, stale records of another segment, a lost trailer, or arbitrary bytes), scans it
//!   and checks that
//!   - every record that lies entirely before the first damaged byte is returned,
//!   - no record is returned that was not written at that offset, and none whose bytes changed
//!     unless it is listed in `damaged` (except for damage by arbitrary bytes, which may well
//!     forge a valid record),
//!   - a changed value byte cuts an unsealed segment at that record, and is listed as damaged,
//!     without losing the records after it, in a sealed one.
//!
//! It also checks that a torn write loses a suffix of the records: no record after a lost one
//! is returned and no torn record is kept (the README's promises; records declare the padding
//! before them, so a lost sector is not mistaken for padding).
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::align_up;
use podstore::format::cursor::is_footer_start;
use podstore::format::footer::TRAILER_LEN;
use podstore::format::record::{
    RECORD_HEADER_LEN, RecordHeader, RecordKind, RecordPlace, decode_record,
};
use podstore::format::scan::{ScanError, ScanOutcome, scan_segment};
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore_fuzz::{
    IMAGE_BLOCK_SIZES, Image, Rec, SECTOR, Unstructured, arbitrary, first_difference, resize_value,
    seal, segment_image, u64_at, value_len_to_end_at,
};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = structured(&mut Unstructured::new(data));
});

fn scan(bytes: &[u8], segment: u64) -> Result<ScanOutcome, podstore::Corruption> {
    match scan_segment(bytes, segment) {
        Ok(out) => Ok(out),
        Err(ScanError::Header(c)) => Err(c),
        Err(ScanError::Io(e)) => panic!("scan of a byte slice failed to read it: {e}"),
    }
}

fn raw(data: &[u8]) {
    let segment = u64_at(data, 8);
    let Ok(out) = scan(data, segment) else {
        return;
    };
    check_outcome(data, segment, &out);
    // The header binds the segment id: the same bytes under another id are refused.
    assert!(scan(data, segment ^ 1).is_err());
}

/// What holds for any scan result, whatever the bytes: the records are in file order, each one
/// verifies on its own at its place (only header and key for those listed as damaged), only
/// zero padding up to the next block boundary lies between them, and `data_end` is the end of
/// the last one.
fn check_outcome(bytes: &[u8], segment: u64, out: &ScanOutcome) {
    assert_eq!(out.header.segment, segment);
    let block = out.header.block_size as u64;
    // A scan that ends at a footer's magic (`PODK`, or `PODT` for version 1: a sealed segment
    // whose trailer is lost) keeps records whose values fail verification and lists them in
    // `damaged`; their header and key verify all the same.
    let at_table = |at: u64| {
        bytes
            .get(at as usize..at as usize + 4)
            .is_some_and(is_footer_start)
    };
    let end = out.data_end;
    let next_block = align_up(end + 1, block);
    let ends_at_table = at_table(end)
        || (bytes.get(end as usize..(end + 32).min(next_block) as usize))
            .is_some_and(|b| b.iter().all(|&b| b == 0))
            && at_table(next_block);
    let mut end = SEGMENT_HEADER_LEN as u64;
    for r in &out.records {
        if r.offset != end {
            assert_eq!(
                r.offset,
                align_up(end + 1, block),
                "record at {} after the one ending at {end}: not at the next block boundary",
                r.offset
            );
            let probe = (end + 32).min(r.offset) as usize;
            assert!(bytes[end as usize..probe].iter().all(|&b| b == 0));
        }
        let place = RecordPlace {
            segment,
            offset: r.offset,
        };
        let at = &bytes[r.offset as usize..];
        let header = RecordHeader::decode(at).expect("scan returned a record with a bad header");
        assert!(header.encoded_len() <= at.len() as u64);
        let key = &at[RECORD_HEADER_LEN..RECORD_HEADER_LEN + header.key_len as usize];
        RecordHeader::verify(at, place, key).expect("scan returned a record with a bad header crc");
        assert_eq!(key, &r.key[..]);
        assert_eq!(
            (header.kind, header.flags, header.value_len, header.seq),
            (r.kind, r.flags, r.value_len, r.seq)
        );
        let listed = out.damaged.iter().any(|(at, _)| *at == r.offset);
        match decode_record(at, place) {
            Ok(_) => assert!(!listed, "record at {} listed as damaged", r.offset),
            Err(c) => assert!(
                listed,
                "scan returned a record at {} whose value does not verify: {c}",
                r.offset
            ),
        }
        end = r.offset + header.encoded_len();
    }
    assert_eq!(out.data_end, end);
    assert!(out.data_end <= bytes.len() as u64);
    for (at, _) in &out.damaged {
        assert!(
            out.records.iter().any(|r| r.offset == *at),
            "damaged {at} not returned"
        );
    }
    assert!(
        out.damaged.is_empty() || ends_at_table,
        "damaged records kept {:?} but the scan did not end at a footer table",
        out.damaged
    );
    if let Some((at, _)) = &out.stopped_at {
        assert!(
            *at >= out.data_end && *at < bytes.len() as u64,
            "stopped at {at}"
        );
    }
}

#[derive(Debug)]
enum Damage {
    Truncate(usize),
    Flip(usize, u8),
    ZeroTail(usize),
    Torn { from_group: usize },
    Stale { from: usize, other: u64 },
    Garbage { at: usize },
}

fn structured(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let segment: u64 = u.arbitrary()?;
    let block = *u.choose(&IMAGE_BLOCK_SIZES)?;
    let first_seq = u.arbitrary::<u64>()? >> 1;
    let mut groups = Vec::new();
    let mut budget: usize = 3 << 20; // bytes of values, so that an image stays within a few MiB
    let mut offset = SEGMENT_HEADER_LEN as u64;
    for _ in 0..u.int_in_range(1..=4)? {
        let mut group = Vec::new();
        for _ in 0..u.int_in_range(1..=5)? {
            let mut r = Rec::arbitrary(u, 64, budget > 2 << 20)?;
            if r.kind == RecordKind::Put && u.ratio(1u8, 3)? {
                // Sometimes a record ends exactly on a sector or block boundary, as fixed-size
                // records do: where padding, torn sectors and record starts line up.
                let unit = if u.arbitrary()? { SECTOR } else { block as u64 };
                let min_end = offset + (RECORD_HEADER_LEN + r.key.len()) as u64;
                let mut end = align_up(min_end, unit) + unit * u.int_in_range(0..=2u64)?;
                let len = loop {
                    match value_len_to_end_at(offset, r.key.len(), end) {
                        Some(len) => break len,
                        None => end += unit,
                    }
                };
                resize_value(&mut r.value, len);
            }
            offset += RecordHeader {
                kind: r.kind,
                flags: 0,
                key_len: r.key.len() as u32,
                pad_before: 0,
                value_len: r.value.len() as u64,
                seq: 0,
                expires_at: None,
            }
            .encoded_len();
            budget = budget.saturating_sub(r.value.len());
            group.push(r);
        }
        offset = align_up(offset, block as u64);
        groups.push(group);
    }
    // A sealed segment (footer after the last group) is what the scan sees when a sealed
    // segment's trailer is damaged; every write in it had been synced, so it is not torn.
    let sealed = u.ratio(1u8, 4)?;
    let build = |segment| {
        let mut image = segment_image(segment, block, first_seq, &groups);
        if sealed {
            image.bytes = seal(segment, block, &image);
        }
        image
    };
    let image = build(segment);
    let img = &image.bytes;

    // Undamaged: everything comes back.
    let out = scan(img, segment).expect("header of a valid image rejected");
    check_outcome(img, segment, &out);
    assert_eq!(out.records.len(), image.written.len());
    assert!(
        image
            .written
            .iter()
            .zip(&out.records)
            .all(|(w, r)| w.matches(r))
    );
    assert_eq!(out.data_end, image.written.last().unwrap().end);
    assert!(out.stopped_at.is_none(), "{:?}", out.stopped_at);
    assert!(out.damaged.is_empty(), "{:?}", out.damaged);

    let damage = match u.int_in_range(0..=5u8)? {
        0 => Damage::Truncate(u.int_in_range(0..=img.len())?),
        1 => Damage::Flip(u.int_in_range(0..=img.len() - 1)?, u.int_in_range(1..=255)?),
        2 => Damage::ZeroTail(u.int_in_range(0..=img.len())?),
        3 if !sealed => Damage::Torn {
            from_group: u.int_in_range(0..=image.group_starts.len() - 1)?,
        },
        // A sealed segment loses its trailer.
        3 => Damage::ZeroTail(img.len() - TRAILER_LEN),
        4 => Damage::Stale {
            from: u.int_in_range(SEGMENT_HEADER_LEN..=img.len())?,
            // Another id differing in at most 32 consecutive bits: the checksums are then
            // guaranteed to tell the two segments' records apart (a burst of <= 32 bits).
            other: segment ^ u.int_in_range(1..=u32::MAX as u64)? << u.int_in_range(0..=32)?,
        },
        _ => Damage::Garbage {
            at: u.int_in_range(0..=img.len() - 1)?,
        },
    };
    let mut bad = img.clone();
    let mut forgeable = false;
    match damage {
        Damage::Truncate(cut) => bad.truncate(cut),
        Damage::Flip(at, mask) => bad[at] ^= mask,
        Damage::ZeroTail(at) => bad[at..].fill(0),
        Damage::Torn { from_group } => {
            // Everything from this group on was in flight: each sector reached the disk or
            // not, in any order, and the file may end early at a sector boundary.
            let start = image.group_starts[from_group] as usize;
            for s in (start..bad.len()).step_by(SECTOR as usize) {
                if !u.arbitrary::<bool>()? {
                    let e = (s + SECTOR as usize).min(bad.len());
                    bad[s..e].fill(0);
                }
            }
            if u.ratio(1u8, 3)? {
                let sectors = (bad.len() - start).div_ceil(SECTOR as usize);
                let keep = u.int_in_range(0..=sectors)?;
                bad.truncate((start + keep * SECTOR as usize).min(bad.len()));
            }
        }
        Damage::Stale { from, other } => {
            let stale = build(other);
            bad[from..].copy_from_slice(&stale.bytes[from..]);
        }
        Damage::Garbage { at } => {
            let n = u.int_in_range(1..=64usize)?.min(bad.len() - at);
            let garbage = u.bytes(n)?;
            bad[at..at + garbage.len()].copy_from_slice(garbage);
            forgeable = true;
        }
    }
    let out = check_damaged(&image, segment, &bad, sealed, forgeable);
    if let (Damage::Flip(at, mask), Some(out)) = (damage, out) {
        check_value_flip(&image, sealed, at as u64, mask, &out);
    }
    Ok(())
}

/// The checks that hold for any damage; returns the scan's outcome when the header survived.
fn check_damaged(
    image: &Image,
    segment: u64,
    bad: &[u8],
    sealed: bool,
    forgeable: bool,
) -> Option<ScanOutcome> {
    let img = &image.bytes;
    // The first byte that differs from what was written (or is missing).
    let first_bad = first_difference(img, bad);
    let out = match scan(bad, segment) {
        Ok(out) => out,
        Err(c) => {
            assert!(
                first_bad < SEGMENT_HEADER_LEN,
                "header rejected ({c}) but its bytes are intact"
            );
            return None;
        }
    };
    assert!(
        first_bad >= SEGMENT_HEADER_LEN || forgeable,
        "damaged header accepted"
    );
    check_outcome(bad, segment, &out);

    // Every record entirely before the damage comes back, in order.
    let intact = image
        .written
        .iter()
        .take_while(|w| w.end <= first_bad as u64)
        .count();
    assert!(
        out.records.len() >= intact,
        "{} records lie before the damage at {first_bad}, the scan returned {}",
        intact,
        out.records.len()
    );
    for (w, r) in image.written[..intact].iter().zip(&out.records) {
        assert!(w.matches(r), "intact record {w:?} returned as {r:?}");
    }
    if forgeable {
        return Some(out);
    }
    // Nothing comes back that was not written there; byte for byte, unless it is listed as
    // damaged (its header and key verified: check_outcome).
    for r in &out.records[intact..] {
        let w = image
            .written
            .iter()
            .find(|w| w.offset == r.offset)
            .unwrap_or_else(|| panic!("scan returned a record that was never written: {r:?}"));
        assert!(w.matches(r), "record {w:?} returned as {r:?}");
        if !out.damaged.iter().any(|(at, _)| *at == r.offset) {
            assert_eq!(
                bad[w.offset as usize..w.end as usize],
                img[w.offset as usize..w.end as usize],
                "a damaged record at {} was returned as intact",
                w.offset
            );
        }
    }
    if !sealed {
        // A torn write loses a suffix: no record after a lost one survives, and no torn record
        // is kept.
        let n = out.records.len();
        assert!(
            image.written[..n]
                .iter()
                .zip(&out.records)
                .all(|(w, r)| w.matches(r)),
            "records after a lost one survived: returned offsets {:?}, written {:?}",
            out.records.iter().map(|r| r.offset).collect::<Vec<_>>(),
            image.written.iter().map(|w| w.offset).collect::<Vec<_>>()
        );
        assert!(
            out.damaged.is_empty(),
            "a segment that was being written kept damaged records {:?}",
            out.damaged
        );
    }
    Some(out)
}

/// One changed byte in a record's value: a sealed segment keeps every record and lists that
/// one as damaged; one that was being written is cut at that record.
fn check_value_flip(image: &Image, sealed: bool, at: u64, mask: u8, out: &ScanOutcome) {
    let Some((k, w)) = image.written.iter().enumerate().find(|(_, w)| {
        let value_start = w.offset + (RECORD_HEADER_LEN + w.key.len()) as u64;
        (value_start..value_start + w.value_len).contains(&at)
    }) else {
        return;
    };
    let offsets = |n: usize| {
        image.written[..n]
            .iter()
            .map(|w| w.offset)
            .collect::<Vec<_>>()
    };
    let got = out.records.iter().map(|r| r.offset).collect::<Vec<_>>();
    let damaged = out.damaged.iter().map(|(at, _)| *at).collect::<Vec<_>>();
    let what = format!(
        "value byte {at} of the record at {} xor {mask:#04x}",
        w.offset
    );
    if sealed {
        assert_eq!(got, offsets(image.written.len()), "sealed, {what}");
        assert_eq!(damaged, [w.offset], "sealed, {what}");
        assert!(
            out.stopped_at.is_none(),
            "sealed, {what}: {:?}",
            out.stopped_at
        );
    } else {
        assert_eq!(got, offsets(k), "unsealed, {what}");
        assert!(damaged.is_empty(), "unsealed, {what}: {damaged:?}");
        assert_eq!(
            out.stopped_at.as_ref().map(|s| s.0),
            Some(w.offset),
            "unsealed, {what}"
        );
    }
}
