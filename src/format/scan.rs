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

use super::footer::{FooterEntry, TABLE_MAGIC};
use super::frames::{FRAME_TABLE_HEADER_LEN, FrameTableHeader, decode_table as decode_frame_table};
use super::record::{
    FLAG_BATCH_CONTINUES, FLAG_COMPRESSED, RECORD_HEADER_LEN, RecordHeader, RecordPlace,
    verify_chunks,
};
use super::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use super::{CHUNK_SIZE, align_up};
use crate::error::Corruption;

/// Positional, exact reads of a segment's bytes.
pub trait ByteSource {
    /// Length in bytes.
    fn len(&self) -> u64;
    /// True when the source has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes at `offset`; `offset + buf.len()` is within `len()`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl ByteSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = self
            .get(start..start + buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

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

/// Bytes of value data verified per read while scanning.
const SCAN_WINDOW: u64 = 256 * CHUNK_SIZE;

/// Scans the segment in `src`, which must carry `expected_segment` in its header.
pub fn scan_segment<S: ByteSource + ?Sized>(
    src: &S,
    expected_segment: u64,
) -> Result<ScanOutcome, ScanError> {
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
    let block = header.block_size as u64;
    let mut records = Vec::new();
    // Records of an atomic batch whose last record has not been seen yet.
    let mut open_batch = Vec::new();
    // Records whose values fail verification, and the state before the first of them.
    let mut damaged: Vec<(u64, Corruption)> = Vec::new();
    let mut cut = (0, 0, 0);
    // The scan reached a footer table: the segment had been sealed, its trailer is what is lost.
    let mut sealed = false;
    let mut pos = SEGMENT_HEADER_LEN as u64;
    let mut data_end = pos;
    let mut head = [0u8; RECORD_HEADER_LEN];
    let mut window = Vec::new();
    let mut table = Vec::new();
    // Zero bytes skipped since the last record: the next record must declare exactly these.
    let mut gap: u64 = 0;
    let stopped_at = loop {
        if pos >= len {
            break None;
        }
        let block_end = align_up(pos + 1, block);
        let probe = (RECORD_HEADER_LEN as u64)
            .min(block_end - pos)
            .min(len - pos) as usize;
        src.read_exact_at(pos, &mut head[..probe])?;
        if head[..probe].iter().all(|&b| b == 0) {
            if pos.is_multiple_of(block) || gap > 0 {
                break None; // a zero block start: nothing was written here
            }
            // Padding after a write group runs to the end of the block; the next record
            // declares its length, which is checked when it is decoded.
            if !zero_to(src, pos, block_end.min(len), &mut window)? {
                break Some((
                    pos,
                    Corruption::InvalidField {
                        field: "padding",
                        value: pos,
                    },
                ));
            }
            gap = block_end - pos;
            pos = block_end;
            continue;
        }
        if probe < RECORD_HEADER_LEN {
            if len - pos < RECORD_HEADER_LEN as u64 {
                break Some((
                    pos,
                    Corruption::Truncated {
                        needed: RECORD_HEADER_LEN as u64,
                        available: len - pos,
                    },
                ));
            }
            src.read_exact_at(pos, &mut head)?;
        }
        let place = RecordPlace {
            segment: expected_segment,
            offset: pos,
        };
        let verdict = match verify_record_at(src, place, &head, &mut window, &mut table)? {
            // A record after zeroes that it does not declare: a lost sector, not padding.
            Verdict::Whole(_) | Verdict::ValueDamaged(..) if declared_pad(&head) != gap => {
                Verdict::Bad(pad_mismatch(declared_pad(&head), gap))
            }
            Verdict::FooterTable
                if !footer_table_matches(src, pos, &records, damaged.first().map(|d| d.0))? =>
            {
                Verdict::Bad(Corruption::BadMagic {
                    structure: "record",
                    found: TABLE_MAGIC,
                })
            }
            v => v,
        };
        gap = 0;
        let entry = match verdict {
            Verdict::Whole(entry) => entry,
            Verdict::ValueDamaged(entry, c) => {
                // Torn write or damage? Only the end of the log tells: keep going, and decide
                // once the scan is over.
                if damaged.is_empty() {
                    cut = (data_end, records.len(), pos);
                }
                damaged.push((pos, c));
                entry
            }
            Verdict::Bad(c) => break Some((pos, c)),
            Verdict::FooterTable => {
                sealed = true;
                break None;
            }
        };
        pos += entry_len(&entry);
        if entry.flags & FLAG_BATCH_CONTINUES != 0 {
            open_batch.push(entry);
        } else {
            records.append(&mut open_batch);
            records.push(entry);
            data_end = pos;
        }
    };
    let mut stopped_at = stopped_at;
    if !damaged.is_empty() && !sealed {
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

/// The `pad_before` field of a record header (before it is decoded).
fn declared_pad(head: &[u8; RECORD_HEADER_LEN]) -> u64 {
    u16::from_le_bytes([head[10], head[11]]) as u64
}

fn pad_mismatch(declared: u64, skipped: u64) -> Corruption {
    Corruption::InvalidField {
        field: "record pad_before",
        value: declared.abs_diff(skipped),
    }
}

/// True when bytes `[from, to)` are all zero.
fn zero_to<S: ByteSource + ?Sized>(
    src: &S,
    from: u64,
    to: u64,
    buf: &mut Vec<u8>,
) -> io::Result<bool> {
    buf.resize((to - from) as usize, 0);
    src.read_exact_at(from, buf)?;
    Ok(buf.iter().all(|&b| b == 0))
}

/// Whether the `PODT` at `pos` starts the footer table of these records: its first entry must
/// name one of them (offset, sequence number and key). Four magic bytes alone could be a bit
/// flip of a record magic, or value bytes of a torn write.
///
/// With `damaged_from` (the offset of the first record whose value failed verification), the
/// table must also name that record or a later one: only then was it written by a seal that had
/// the damaged record in its log, which proves the log went on after it (damage, to be kept and
/// reported). A table written by an earlier recovery names only the records before the torn
/// write it cut, and proves nothing about the torn record: the scan must cut there again, or a
/// torn, unacknowledged write would be kept and hide its key's acknowledged value.
fn footer_table_matches<S: ByteSource + ?Sized>(
    src: &S,
    pos: u64,
    records: &[FooterEntry],
    damaged_from: Option<u64>,
) -> io::Result<bool> {
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

fn entry_len(e: &FooterEntry) -> u64 {
    RecordHeader {
        kind: e.kind,
        flags: e.flags,
        key_len: e.key.len() as u32,
        pad_before: 0,
        value_len: e.stored_len,
        seq: e.seq,
    }
    .encoded_len()
}

/// What is at a record position.
enum Verdict {
    /// A whole, verified record.
    Whole(FooterEntry),
    /// A record whose header and key verify, whose length fits the file, but some of whose
    /// value chunks do not.
    ValueDamaged(FooterEntry, Corruption),
    /// Not a record.
    Bad(Corruption),
    /// The footer table of a sealed segment.
    FooterTable,
}

/// Verifies the whole record at `place`, given its first `RECORD_HEADER_LEN` bytes.
fn verify_record_at<S: ByteSource + ?Sized>(
    src: &S,
    place: RecordPlace,
    head: &[u8; RECORD_HEADER_LEN],
    window: &mut Vec<u8>,
    table: &mut Vec<u8>,
) -> io::Result<Verdict> {
    if head[..4] == TABLE_MAGIC {
        return Ok(Verdict::FooterTable);
    }
    let header = match RecordHeader::decode(head) {
        Ok(h) => h,
        Err(c) => return Ok(Verdict::Bad(c)),
    };
    let available = src.len() - place.offset;
    if header.encoded_len() > available {
        return Ok(Verdict::Bad(Corruption::Truncated {
            needed: header.encoded_len(),
            available,
        }));
    }
    let mut key = vec![0u8; header.key_len as usize];
    src.read_exact_at(place.offset + header.key_offset(), &mut key)?;
    if let Err(c) = RecordHeader::verify(head, place, &key) {
        return Ok(Verdict::Bad(c));
    }
    let mut entry = FooterEntry {
        key,
        kind: header.kind,
        flags: header.flags,
        offset: place.offset,
        stored_len: header.value_len,
        value_len: header.value_len,
        seq: header.seq,
    };
    let table_len = (header.encoded_len() - header.table_offset()) as usize;
    table.resize(table_len, 0);
    src.read_exact_at(place.offset + header.table_offset(), table)?;
    let mut done = 0u64;
    while done < header.value_len {
        let n = SCAN_WINDOW.min(header.value_len - done);
        window.resize(n as usize, 0);
        src.read_exact_at(place.offset + header.value_offset() + done, window)?;
        let first_chunk = done / CHUNK_SIZE;
        let t = &table[(first_chunk * 4) as usize..];
        if let Err((_, c)) = verify_chunks(place, first_chunk, window, t) {
            if header.flags & FLAG_COMPRESSED != 0 {
                // Keep the length if the frame table header (which has its own crc) survived:
                // reads of the frames that are intact still work.
                let (fh, _) = check_frame_table(src, place, &header, window)?;
                entry.value_len = fh.map_or(0, |h| h.value_len);
            }
            return Ok(Verdict::ValueDamaged(entry, c));
        }
        done += n;
    }
    if header.flags & FLAG_COMPRESSED != 0 {
        // The stored bytes verified; the frame table must also be one a writer produces.
        let (fh, checked) = check_frame_table(src, place, &header, window)?;
        entry.value_len = fh.map_or(0, |h| h.value_len);
        if let Err(c) = checked {
            return Ok(Verdict::ValueDamaged(entry, c));
        }
    }
    Ok(Verdict::Whole(entry))
}

/// Reads and checks the frame table of the compressed record at `place`: its header if that
/// decodes, and whether the whole table checks out.
fn check_frame_table<S: ByteSource + ?Sized>(
    src: &S,
    place: RecordPlace,
    header: &RecordHeader,
    buf: &mut Vec<u8>,
) -> io::Result<(Option<FrameTableHeader>, Result<(), Corruption>)> {
    let at = place.offset + header.value_offset();
    // The record header guarantees a compressed value holds at least a table header.
    buf.resize(FRAME_TABLE_HEADER_LEN, 0);
    src.read_exact_at(at, buf)?;
    let fh = match FrameTableHeader::decode(buf, header.value_len) {
        Ok(fh) => fh,
        Err(c) => return Ok((None, Err(c))),
    };
    // Bounded by the stored length, which lies inside the source.
    buf.resize(fh.table_len() as usize, 0);
    src.read_exact_at(at, buf)?;
    let checked = decode_frame_table(buf, header.value_len).map(|_| ());
    Ok((Some(fh), checked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::record::{FLAG_COMPRESSED, RecordKind, encode_record_as};

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
        let all = scan_segment(&clean[..], 3).unwrap().records;
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
        assert_eq!(out.records[1].offset, offsets[0] + entry_len(a));
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

    #[test]
    fn a_compressed_record_with_a_bad_frame_table_is_damaged() {
        let t = text(3 * 4096 + 10);
        let (img, offsets) = compressed_image(&[
            (b"a", b"first", false),
            (b"b", &t, true),
            (b"c", b"last", false),
        ]);
        // An entry whose offset is wrong (crc-valid stored bytes, so only the table check can
        // see it), and a header that does not decode.
        let bad_entry = with_stored(&img, offsets[1], |s| s[24] ^= 1);
        let bad_header = with_stored(&img, offsets[1], |s| s[0] = b'X');
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

    #[test]
    fn a_damaged_frame_keeps_the_length_from_the_table_header() {
        let t = text(4 * 4096);
        let (mut img, offsets) = compressed_image(&[(b"b", &t, true), (b"c", b"last", false)]);
        let clean = img.clone();
        let stored_at = offsets[0] as usize + RECORD_HEADER_LEN + 1;
        let stored_len = out_stored_len(&img, offsets[0]);
        img[stored_at + stored_len as usize - 3] ^= 0x20; // in the last frame
        let img = sealed_with_table_of(&clean, &img);
        let out = scan_segment(&img[..], 3).unwrap();
        assert_eq!(out.damaged.len(), 1);
        assert_eq!(out.records[0].value_len, t.len() as u64);
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
