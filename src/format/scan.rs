//! The recovery scan: rebuilds a segment's entry list from its records alone, for a segment that
//! was not sealed (the one being written when the process or machine stopped).
//!
//! The scan walks records from the header on and stops at the first place that does not hold a
//! complete, verified record: that is the torn tail, and everything before it is kept. Between
//! write groups the writer leaves zero padding up to the next block boundary; a run of zeroes
//! that starts inside a block is such padding and is skipped, a zero block start is the end.
//!
//! Records of an atomic batch are kept only together: a batch whose last record (the one
//! without [`FLAG_BATCH_CONTINUES`]) is not whole is dropped entirely, and the data end is put
//! back to where the batch began.
//!
//! The scan is generic over [`ByteSource`] so that it runs unchanged on a file and on a byte
//! slice (tests and the fuzzer).

use std::io;

pub use super::cursor::ByteSource;
use super::cursor::{Frames, RecordCursor, Verdict};
use super::footer::{FooterEntry, KEYS_MAGIC, TABLE_MAGIC};
use super::read_ahead::{ReadAhead, SCAN_WINDOW};
use super::record::{FLAG_BATCH_CONTINUES, RECORD_HEADER_LEN};
use super::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use crate::error::Corruption;

/// Why a scan could not start.
#[derive(Debug)]
pub enum ScanError {
    /// Reading the source failed.
    Io(io::Error),
    /// The segment header is missing or damaged.
    Header(Corruption),
}

impl From<io::Error> for ScanError {
    fn from(e: io::Error) -> Self {
        ScanError::Io(e)
    }
}

/// What a scan found.
#[derive(Debug)]
pub struct ScanOutcome {
    /// The segment header.
    pub header: SegmentHeader,
    /// Every verified record, in file order.
    pub records: Vec<FooterEntry>,
    /// One past the last byte of the last verified record that is kept (or the header's end).
    pub data_end: u64,
    /// Where and why the scan stopped, when it stopped at bytes that are not a record
    /// rather than at clean padding or the end of the source.
    pub stopped_at: Option<(u64, Corruption)>,
    /// Records kept although their values failed verification. Only in a segment that had been
    /// sealed (the scan reached its footer table), where no write can have been torn: damage
    /// there must not cost the records after it. Reads of them report the corruption.
    pub damaged: Vec<(u64, Corruption)>,
}

/// Scans the segment in `src`, which must carry `expected_segment` in its header.
pub fn scan_segment<S: ByteSource + ?Sized>(
    src: &S,
    expected_segment: u64,
) -> Result<ScanOutcome, ScanError> {
    scan(src, expected_segment, false)
}

/// [`scan_segment`] for a segment known (from the store's catalog) to have been sealed, whose
/// footer is lost or damaged: every write in it had been synced, so nothing in it is torn, and a
/// record whose value fails verification is damage, kept and reported, whether or not the scan
/// reaches a footer table after it (salvage keeps every intact record).
pub fn scan_sealed_segment<S: ByteSource + ?Sized>(
    src: &S,
    expected_segment: u64,
) -> Result<ScanOutcome, ScanError> {
    scan(src, expected_segment, true)
}

fn scan<S: ByteSource + ?Sized>(
    src: &S,
    expected_segment: u64,
    known_sealed: bool,
) -> Result<ScanOutcome, ScanError> {
    // Records are read a header and a value at a time, in file order: from a window read in
    // one go, not a device read each (`read_ahead`).
    let src = &ReadAhead::new(src, SCAN_WINDOW);
    let len = src.len();
    let mut hdr = [0u8; SEGMENT_HEADER_LEN];
    if len < SEGMENT_HEADER_LEN as u64 {
        return Err(ScanError::Header(Corruption::Truncated {
            needed: SEGMENT_HEADER_LEN as u64,
            available: len,
        }));
    }
    src.read_exact_at(0, &mut hdr)?;
    let header = SegmentHeader::decode(&hdr).map_err(ScanError::Header)?;
    if header.segment != expected_segment {
        return Err(ScanError::Header(Corruption::InvalidField {
            field: "segment id",
            value: header.segment,
        }));
    }
    let mut cursor = RecordCursor::new(
        src,
        expected_segment,
        header.block_size as u64,
        len,
        Frames::TableOnly,
    )
    .stopping_at_footer_table(true);
    let mut records = Vec::new();
    // Records of an atomic batch whose last record has not been seen yet.
    let mut open_batch = Vec::new();
    // Records whose values fail verification, and the state before the first of them.
    let mut damaged: Vec<(u64, Corruption)> = Vec::new();
    let mut cut = (0, 0, 0);
    // The scan reached a footer table: the segment had been sealed, its trailer is what is lost.
    let mut sealed = false;
    let mut data_end = cursor.position();
    let stopped_at = loop {
        let (pos, verdict) = cursor.step()?;
        let (found, damage) = match verdict {
            // A zero block start: nothing was written here.
            Verdict::End | Verdict::Zeroes => break None,
            Verdict::Padding => continue,
            Verdict::BadPadding { .. } => {
                break Some((
                    pos,
                    Corruption::InvalidField {
                        field: "padding",
                        value: pos,
                    },
                ));
            }
            Verdict::Truncated(c) | Verdict::NotRecord(c) => break Some((pos, c)),
            Verdict::FooterTable => {
                // Too short for a record header, let alone a table: a torn tail like any other.
                if len - pos < RECORD_HEADER_LEN as u64 {
                    break Some((
                        pos,
                        Corruption::Truncated {
                            needed: RECORD_HEADER_LEN as u64,
                            available: len - pos,
                        },
                    ));
                }
                if footer_table_matches(
                    src,
                    expected_segment,
                    pos,
                    &records,
                    damaged.first().map(|d| d.0),
                )? {
                    sealed = true;
                    break None;
                }
                break Some((
                    pos,
                    Corruption::BadMagic {
                        structure: "record",
                        found: TABLE_MAGIC,
                    },
                ));
            }
            Verdict::Whole(found) => (found, None),
            Verdict::ValueDamaged(found, damage) => (found, Some(damage)),
        };
        // A record after zeroes that it does not declare: a lost sector, not padding.
        if let Some((_, c)) = found.pad_mismatch() {
            break Some((pos, c));
        }
        if let Some(damage) = damage {
            // Torn write or damage? Only the end of the log tells: keep going, and decide once
            // the scan is over.
            if damaged.is_empty() {
                cut = (data_end, records.len(), pos);
            }
            damaged.push((pos, damage.kind));
        }
        let entry = found.entry;
        if entry.flags & FLAG_BATCH_CONTINUES != 0 {
            open_batch.push(entry);
        } else {
            records.append(&mut open_batch);
            records.push(entry);
            data_end = cursor.position();
        }
    };
    let mut stopped_at = stopped_at;
    if !damaged.is_empty() && !sealed && !known_sealed {
        // The log was not sealed: the first damaged record is where an interrupted write tore
        // it, and nothing from there on was acknowledged. Cut there.
        let (end, count, at) = cut;
        stopped_at = Some((at, damaged.swap_remove(0).1));
        damaged.clear();
        records.truncate(count);
        data_end = end;
    }
    Ok(ScanOutcome {
        header,
        records,
        data_end,
        stopped_at,
        damaged,
    })
}

/// Whether the footer magic at `pos` starts the footer of these records: for a footer of
/// version 2 (`PODK`), its first key block must verify (its crc binds it to this segment and
/// offset) and its first key name one of them (offset and key); for one of version 1 (`PODT`),
/// the table's first entry must name one of them (offset, sequence number and key). Four magic
/// bytes alone could be a bit flip of a record magic, or value bytes of a torn write.
///
/// With `damaged_from` (the offset of the first record whose value failed verification), the
/// footer must also name that record or a later one: only then was it written by a seal that
/// had the damaged record in its log, which proves the log went on after it (damage, to be kept
/// and reported). A footer written by an earlier recovery names only the records before the
/// torn write it cut, and proves nothing about the torn record: the scan must cut there again,
/// or a torn, unacknowledged write would be kept and hide its key's acknowledged value. Every
/// entry read on the way must name one of the records. A footer of version 2 lists keys in key
/// order, not record order, so the entries are read (block by block) until one names the
/// damaged record or a later one.
fn footer_table_matches<S: ByteSource + ?Sized>(
    src: &S,
    segment: u64,
    pos: u64,
    records: &[FooterEntry],
    damaged_from: Option<u64>,
) -> io::Result<bool> {
    let mut magic = [0u8; 4];
    src.read_exact_at(pos, &mut magic)?;
    if magic == KEYS_MAGIC {
        return sorted_footer_matches(src, segment, pos, records, damaged_from);
    }
    use super::footer::{ENTRY_FIXED_LEN, TABLE_HEADER_LEN};
    let mut at = pos + TABLE_HEADER_LEN as u64;
    // Entries name distinct records: more than `records` of them cannot all match.
    for _ in 0..records.len() {
        if at + ENTRY_FIXED_LEN as u64 > src.len() {
            return Ok(false);
        }
        let mut fixed = [0u8; ENTRY_FIXED_LEN];
        src.read_exact_at(at, &mut fixed)?;
        let offset = u64::from_le_bytes(fixed[0..8].try_into().expect("8 bytes"));
        let seq = u64::from_le_bytes(fixed[16..24].try_into().expect("8 bytes"));
        let key_len = u16::from_le_bytes([fixed[24], fixed[25]]) as u64;
        let Some(rec) = records.iter().find(|r| r.offset == offset && r.seq == seq) else {
            return Ok(false);
        };
        let key_at = at + ENTRY_FIXED_LEN as u64;
        if rec.key.len() as u64 != key_len || key_at + key_len > src.len() {
            return Ok(false);
        }
        let mut key = vec![0u8; rec.key.len()];
        src.read_exact_at(key_at, &mut key)?;
        if key != rec.key {
            return Ok(false);
        }
        match damaged_from {
            Some(d) if offset < d => at = key_at + key_len,
            _ => return Ok(true),
        }
    }
    Ok(false)
}

/// [`footer_table_matches`] for a footer of version 2 at `pos`.
fn sorted_footer_matches<S: ByteSource + ?Sized>(
    src: &S,
    segment: u64,
    pos: u64,
    records: &[FooterEntry],
    damaged_from: Option<u64>,
) -> io::Result<bool> {
    use super::footer::{KEYS_HEADER_LEN, keys::MAX_KEY_BLOCK_LEN, parse_key_block};
    let by_offset: std::collections::HashMap<u64, &FooterEntry> =
        records.iter().map(|r| (r.offset, r)).collect();
    let mut at = pos + KEYS_HEADER_LEN as u64;
    let mut seen = 0;
    let mut buf = Vec::new();
    // Entries name distinct records: more than `records` of them cannot all match.
    while seen < records.len() && at < src.len() {
        let n = (src.len() - at).min(MAX_KEY_BLOCK_LEN as u64) as usize;
        buf.resize(n, 0);
        src.read_exact_at(at, &mut buf)?;
        let Ok((block, len)) = parse_key_block(segment, at, &buf) else {
            return Ok(false);
        };
        for (key, offset) in block.entries {
            match by_offset.get(&offset) {
                Some(r) if r.key == key => {}
                _ => return Ok(false),
            }
            match damaged_from {
                Some(d) if offset < d => seen += 1,
                _ => return Ok(true),
            }
        }
        at += len as u64;
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::align_up;
    use crate::format::record::{
        FLAG_COMPRESSED, RecordHeader, RecordKind, RecordPlace, encode_record_as,
    };

    /// Builds a segment image the way the writer lays it out: header, then groups of records,
    /// each group padded with zeroes to the next block boundary.
    pub(crate) fn image(groups: &[&[(&[u8], &[u8])]], block: u64) -> (Vec<u8>, Vec<u64>) {
        let mut out = SegmentHeader {
            segment: 3,
            block_size: block as u32,
        }
        .encode()
        .to_vec();
        let mut ends = Vec::new();
        let mut seq = 1;
        let mut pad = 0;
        for group in groups {
            for (k, v) in group.iter() {
                let place = RecordPlace {
                    segment: 3,
                    offset: out.len() as u64,
                };
                let header = RecordHeader {
                    kind: RecordKind::Put,
                    flags: 0,
                    key_len: k.len() as u32,
                    pad_before: std::mem::take(&mut pad),
                    value_len: v.len() as u64,
                    seq,
                    expires_at: None,
                };
                out.extend(encode_record_as(&header, place, k, v));
                ends.push(out.len() as u64);
                seq += 1;
            }
            let padded = align_up(out.len() as u64, block) as usize;
            pad = (padded - out.len()) as u16;
            out.resize(padded, 0);
        }
        (out, ends)
    }

    #[test]
    fn scans_groups_across_padding() {
        let big = vec![7u8; 10_000];
        let (img, ends) = image(
            &[
                &[(b"a", b"1"), (b"b", &big)],
                &[(b"c", b"")],
                &[(b"d", b"4")],
            ],
            512,
        );
        let out = scan_segment(&img[..], 3).unwrap();
        assert_eq!(out.records.len(), 4);
        assert_eq!(out.data_end, *ends.last().unwrap());
        assert!(out.stopped_at.is_none());
    }

    #[test]
    fn every_cut_keeps_exactly_the_whole_records_before_it() {
        let (img, ends) = image(
            &[&[(b"a", b"1"), (b"bb", &[9u8; 5000])], &[(b"c", b"3")]],
            512,
        );
        for cut in SEGMENT_HEADER_LEN..=img.len() {
            let out = scan_segment(&img[..cut], 3).unwrap();
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
            assert_eq!(out.records.len(), whole, "cut at {cut}");
        }
    }

    #[test]
    fn a_batch_is_kept_whole_or_not_at_all() {
        use crate::format::record::encode_record_with_flags;
        let mut img = SegmentHeader {
            segment: 3,
            block_size: 512,
        }
        .encode()
        .to_vec();
        let mut ends = Vec::new();
        for (i, flags) in [0, FLAG_BATCH_CONTINUES, FLAG_BATCH_CONTINUES, 0]
            .into_iter()
            .enumerate()
        {
            let place = RecordPlace {
                segment: 3,
                offset: img.len() as u64,
            };
            img.extend(encode_record_with_flags(
                place,
                RecordKind::Put,
                flags,
                i as u64 + 1,
                format!("k{i}").as_bytes(),
                &[i as u8; 700],
            ));
            ends.push(img.len() as u64);
        }
        for cut in SEGMENT_HEADER_LEN..=img.len() {
            let out = scan_segment(&img[..cut], 3).unwrap();
            let (want, want_end) = if cut as u64 >= ends[3] {
                (4, ends[3])
            } else if cut as u64 >= ends[0] {
                (1, ends[0])
            } else {
                (0, SEGMENT_HEADER_LEN as u64)
            };
            assert_eq!(out.records.len(), want, "cut at {cut}");
            assert_eq!(out.data_end, want_end, "cut at {cut}");
        }
    }

    #[test]
    fn damage_cuts_an_unsealed_log_but_not_a_sealed_one() {
        let (mut img, ends) = image(
            &[&[(b"a", &[1u8; 5000]), (b"b", &[2u8; 5000]), (b"c", b"3")]],
            512,
        );
        let victim_value = ends[0] as usize + 32 + 1 + 100;
        img[victim_value] ^= 0x40;
        // Unsealed: the damaged record is taken for a torn write; the log ends before it.
        let out = scan_segment(&img[..], 3).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.data_end, ends[0]);
        assert_eq!(out.stopped_at.as_ref().map(|s| s.0), Some(ends[0]));
        assert!(out.damaged.is_empty());
        // Sealed (a footer table follows the records): damage, kept and reported.
        let (clean, _) = image(
            &[&[(b"a", &[1u8; 5000]), (b"b", &[2u8; 5000]), (b"c", b"3")]],
            512,
        );
        let entries = scan_segment(&clean[..], 3).unwrap().records;
        let table_at = img.len() as u64;
        img.extend(crate::format::footer::encode_footer(
            3, ends[2], table_at, 512, &entries,
        ));
        // Known to be sealed (the catalog says so): damage, kept, without a table.
        let known = scan_sealed_segment(&img[..], 3).unwrap();
        assert_eq!(known.records.len(), 3);
        assert_eq!(known.damaged.len(), 1);
        // A footer table that does not name these records is no proof of sealing.
        let mut forged = img.clone();
        forged[table_at as usize + 8] ^= 1;
        assert_eq!(scan_segment(&forged[..], 3).unwrap().records.len(), 1);
        let out = scan_segment(&img[..], 3).unwrap();
        assert_eq!(out.records.len(), 3);
        assert_eq!(out.damaged.len(), 1);
        assert_eq!(out.damaged[0].0, ends[0]);
        assert!(out.stopped_at.is_none());
    }

    /// A torn last record followed by the footer an interrupted recovery wrote (naming only the
    /// records before the tear, which it had cut): still a torn write, cut again. Keeping it as
    /// damage would let an unacknowledged, torn write hide its key's acknowledged value (found by
    /// the power-loss model test: a crash during recovery that left part of that footer).
    #[test]
    fn a_footer_naming_only_records_before_the_damage_proves_nothing() {
        let (mut img, ends) = image(
            &[&[
                (b"a", &[1u8; 5000]),
                (b"b", &[2u8; 5000]),
                (b"a", &[3u8; 900]),
            ]],
            512,
        );
        // The last record's chunk crc table lost (zeroes): a torn write.
        let torn = ends[1] as usize;
        let table = ends[2] as usize - 4;
        img[table..table + 4].fill(0);
        let before = scan_segment(&img[..], 3).unwrap();
        assert_eq!(before.stopped_at.as_ref().map(|s| s.0), Some(torn as u64));
        // What recovery writes after the file's end: a footer of the records before the tear.
        let table_at = img.len() as u64;
        img.extend(crate::format::footer::encode_footer(
            3,
            before.data_end,
            table_at,
            512,
            &before.records,
        ));
        let out = scan_segment(&img[..], 3).unwrap();
        assert_eq!(out.records.len(), 2, "{:?}", out.damaged);
        assert!(out.damaged.is_empty());
        assert_eq!(out.stopped_at.as_ref().map(|s| s.0), Some(torn as u64));
        assert_eq!(out.data_end, before.data_end);
        // A seal's footer names the damaged record (or one after it): damage, kept.
        let (clean, _) = image(
            &[&[
                (b"a", &[1u8; 5000]),
                (b"b", &[2u8; 5000]),
                (b"a", &[3u8; 900]),
            ]],
            512,
        );
        // One entry per key, its newest record (what `last_per_key` keeps): "b" and the last "a".
        let all: Vec<FooterEntry> = scan_segment(&clean[..], 3)
            .unwrap()
            .records
            .into_iter()
            .skip(1)
            .collect();
        let mut sealed = img[..table_at as usize].to_vec();
        sealed.extend(crate::format::footer::encode_footer(
            3, ends[2], table_at, 512, &all,
        ));
        let out = scan_segment(&sealed[..], 3).unwrap();
        assert_eq!(out.records.len(), 3);
        assert_eq!(out.damaged.len(), 1);
        assert_eq!(out.damaged[0].0, torn as u64);
    }

    /// A segment image holding `values` (key, value, compressed?) in one write group, and the
    /// record offsets.
    fn compressed_image(values: &[(&[u8], &[u8], bool)]) -> (Vec<u8>, Vec<u64>) {
        use crate::format::frames::encode_framed;
        use crate::format::record::encode_record_with_flags;
        let mut img = SegmentHeader {
            segment: 3,
            block_size: 512,
        }
        .encode()
        .to_vec();
        let mut offsets = Vec::new();
        for (i, (k, v, compressed)) in values.iter().enumerate() {
            let place = RecordPlace {
                segment: 3,
                offset: img.len() as u64,
            };
            offsets.push(place.offset);
            let (flags, stored) = if *compressed {
                (FLAG_COMPRESSED, encode_framed(v, 4096))
            } else {
                (0, v.to_vec())
            };
            img.extend(encode_record_with_flags(
                place,
                RecordKind::Put,
                flags,
                i as u64 + 1,
                k,
                &stored,
            ));
        }
        (img, offsets)
    }

    use crate::format::frames::test_data::text;

    #[test]
    fn compressed_records_report_their_uncompressed_length() {
        let t = text(3 * 4096 + 10);
        let (img, offsets) = compressed_image(&[(b"a", &t, true), (b"b", b"raw", false)]);
        let out = scan_segment(&img[..], 3).unwrap();
        assert!(out.stopped_at.is_none() && out.damaged.is_empty());
        assert_eq!(out.records.len(), 2);
        let a = &out.records[0];
        assert_eq!(a.flags, FLAG_COMPRESSED);
        assert_eq!(a.value_len, t.len() as u64);
        assert!(a.stored_len < a.value_len);
        assert_eq!(out.records[1].offset, offsets[0] + a.record_len());
        assert_eq!(out.records[1].value_len, 3);
    }

    /// Rewrites the record at `offset` with its stored value changed by `f` (and every checksum
    /// recomputed), so that only the frame table is wrong.
    fn with_stored(img: &[u8], offset: u64, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        use crate::format::record::{decode_record, encode_record_with_flags};
        let place = RecordPlace { segment: 3, offset };
        let rec = decode_record(&img[offset as usize..], place).unwrap();
        let end = offset + rec.header.encoded_len();
        let mut stored = rec.value.to_vec();
        f(&mut stored);
        let mut out = img[..offset as usize].to_vec();
        out.extend(encode_record_with_flags(
            place,
            rec.header.kind,
            rec.header.flags,
            rec.header.seq,
            rec.key,
            &stored,
        ));
        assert_eq!(out.len() as u64, end, "same length");
        out.extend_from_slice(&img[end as usize..]);
        out
    }

    /// The image with the stored bytes of the compressed record at `offset` in both layouts:
    /// as written (trailing table), and as versions before it wrote them (leading table).
    fn both_layouts(img: &[u8], offset: u64) -> [Vec<u8>; 2] {
        use crate::format::frames::to_leading_layout;
        [
            img.to_vec(),
            with_stored(img, offset, |s| *s = to_leading_layout(s)),
        ]
    }

    /// The frame table header of stored bytes `s`, either layout.
    fn table_of(s: &[u8]) -> crate::format::frames::FrameTableHeader {
        crate::format::frames::decode_table(s, s.len() as u64)
            .unwrap()
            .0
    }

    #[test]
    fn a_compressed_record_with_a_bad_frame_table_is_damaged() {
        let t = text(3 * 4096 + 10);
        let (img, offsets) = compressed_image(&[
            (b"a", b"first", false),
            (b"b", &t, true),
            (b"c", b"last", false),
        ]);
        for img in both_layouts(&img, offsets[1]) {
            // An entry whose offset is wrong (crc-valid stored bytes, so only the table check
            // can see it), and a header that does not decode.
            let bad_entry = with_stored(&img, offsets[1], |s| {
                let at = table_of(s).entry_offset(0) as usize;
                s[at] ^= 1;
            });
            let bad_header = with_stored(&img, offsets[1], |s| {
                let (h, n) = (table_of(s), s.len());
                let at = if h.entries_at() == 24 { 0 } else { n - 24 };
                s[at] = b'X';
            });
            for (bad, value_len) in [(bad_entry, t.len() as u64), (bad_header, 0)] {
                // Unsealed: taken for the torn tail.
                let out = scan_segment(&bad[..], 3).unwrap();
                assert_eq!(out.records.len(), 1);
                assert_eq!(out.stopped_at.as_ref().map(|s| s.0), Some(offsets[1]));
                // Sealed: kept and reported, the record after it too.
                let sealed = sealed_with_table_of(&img, &bad);
                let out = scan_segment(&sealed[..], 3).unwrap();
                assert_eq!(out.records.len(), 3);
                assert_eq!(out.damaged.len(), 1);
                assert_eq!(out.damaged[0].0, offsets[1]);
                assert_eq!(out.records[1].value_len, value_len);
            }
        }
    }

    #[test]
    fn a_damaged_frame_keeps_the_length_from_the_table_header() {
        let t = text(4 * 4096);
        let (img, offsets) = compressed_image(&[(b"b", &t, true), (b"c", b"last", false)]);
        for clean in both_layouts(&img, offsets[0]) {
            let mut img = clean.clone();
            let stored_at = offsets[0] as usize + RECORD_HEADER_LEN + 1;
            let stored_len = out_stored_len(&img, offsets[0]) as usize;
            let region = table_of(&img[stored_at..stored_at + stored_len]).frames_region();
            img[stored_at + region.end as usize - 3] ^= 0x20; // in the last frame
            let img = sealed_with_table_of(&clean, &img);
            let out = scan_segment(&img[..], 3).unwrap();
            assert_eq!(out.damaged.len(), 1);
            assert_eq!(out.records[0].value_len, t.len() as u64);
        }
    }

    /// `damaged` followed by the footer table that sealing `clean` (the same records, undamaged)
    /// would have written: what a sealed segment whose trailer is lost looks like.
    fn sealed_with_table_of(clean: &[u8], damaged: &[u8]) -> Vec<u8> {
        let scan = scan_segment(clean, 3).unwrap();
        let mut out = damaged.to_vec();
        out.resize(align_up(out.len() as u64, 512) as usize, 0);
        let at = out.len() as u64;
        out.extend(crate::format::footer::encode_footer(
            3,
            scan.data_end,
            at,
            512,
            &scan.records,
        ));
        out
    }

    fn out_stored_len(img: &[u8], offset: u64) -> u64 {
        RecordHeader::decode(&img[offset as usize..])
            .unwrap()
            .value_len
    }

    #[test]
    fn a_lost_sector_is_not_taken_for_padding() {
        // One write group of three records, the second ending on the block boundary.
        let block = 4096u64;
        let first = (500 - 64 - 32 - 1) as usize; // record 1 spans 64..~500
        let (img, ends) = image(&[&[(b"a", &vec![1u8; first])]], block);
        assert!(ends[0] < 512);
        // Rebuild with record 2 filling the block exactly, record 3 after it, no padding.
        let mut img = img[..ends[0] as usize].to_vec();
        let fill_to = |img: &[u8]| block - img.len() as u64 - 32 - 1 - 4;
        let v2 = vec![2u8; fill_to(&img) as usize];
        for (seq, key, value) in [(2u64, b"b", v2), (3, b"c", vec![3u8; 100])] {
            let place = RecordPlace {
                segment: 3,
                offset: img.len() as u64,
            };
            let header = RecordHeader {
                kind: RecordKind::Put,
                flags: 0,
                key_len: 1,
                pad_before: 0,
                value_len: value.len() as u64,
                seq,
                expires_at: None,
            };
            img.extend(encode_record_as(&header, place, key, &value));
        }
        assert_eq!(scan_segment(&img[..], 3).unwrap().records.len(), 3);
        // The sector holding record 2's start is lost (zero): nothing after it may be kept, not
        // even record 3, which verifies on its own.
        let mut torn = img.clone();
        torn[512..1024].fill(0);
        let rec2 = ends[0] as usize;
        torn[rec2..1024].fill(0);
        assert_eq!(scan_segment(&torn[..], 3).unwrap().records.len(), 1);
        // The block's last sector lost: record 2 is torn, and record 3 after it, whole as it is,
        // was part of the same unacknowledged write: not kept either.
        let mut torn2 = img.clone();
        torn2[3584..4096].fill(0);
        let out = scan_segment(&torn2[..], 3).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.stopped_at.map(|s| s.0), Some(ends[0]));
    }

    #[test]
    fn records_with_an_expiry_are_recovered_with_it() {
        // One write group: a plain record, one that expires, a plain one after it.
        let block = 4096u64;
        let (img, ends) = image(&[&[(b"a", b"1")]], block);
        let mut img = img[..ends[0] as usize].to_vec();
        let mut offsets = Vec::new();
        for (seq, key, expires_at) in [(2u64, b"b", Some(1_764_960_000_000)), (3, b"c", None)] {
            let place = RecordPlace {
                segment: 3,
                offset: img.len() as u64,
            };
            offsets.push(place.offset);
            let value = vec![seq as u8; 5000];
            let header = RecordHeader {
                kind: RecordKind::Put,
                flags: 0,
                key_len: 1,
                pad_before: 0,
                value_len: value.len() as u64,
                seq,
                expires_at,
            };
            img.extend(encode_record_as(&header, place, key, &value));
        }
        let out = scan_segment(&img[..], 3).unwrap();
        assert!(out.stopped_at.is_none() && out.damaged.is_empty());
        let got: Vec<_> = out
            .records
            .iter()
            .map(|r| (r.offset, r.expires_at))
            .collect();
        assert_eq!(
            got,
            [
                (64, None),
                (offsets[0], Some(1_764_960_000_000)),
                (offsets[1], None)
            ]
        );
        assert_eq!(out.records[1].record_len(), offsets[1] - offsets[0]);
        // Cut inside the expiry field, or after it: the expiring record is torn, the plain
        // one before it kept.
        for cut in [offsets[0] + 36, offsets[0] + 44, offsets[1] - 1] {
            let out = scan_segment(&img[..cut as usize], 3).unwrap();
            assert_eq!(out.records.len(), 1, "cut at {cut}");
        }
        // A flipped bit of the expiry fails the header crc: the record is not taken.
        let mut bad = img.clone();
        bad[offsets[0] as usize + 33] ^= 1;
        let out = scan_segment(&bad[..], 3).unwrap();
        assert!(out.records.iter().all(|r| r.offset != offsets[0]));
    }

    #[test]
    fn wrong_segment_or_bad_header_is_an_error() {
        let (img, _) = image(&[&[(b"a", b"1")]], 512);
        assert!(matches!(
            scan_segment(&img[..], 4),
            Err(ScanError::Header(_))
        ));
        assert!(matches!(
            scan_segment(&img[..10], 3),
            Err(ScanError::Header(_))
        ));
    }
}
