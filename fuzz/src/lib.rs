//! Helpers shared by the podstore fuzz targets (`fuzz_targets/*.rs`) and the seed generator
//! (`src/bin/gen_corpus.rs`): building valid structures from fuzzer input, and laying out segment
//! images the way the writer does.

use podstore::format::align_up;
use podstore::format::footer::FooterEntry;
use podstore::format::record::{RecordHeader, RecordKind, RecordPlace, encode_record_as};
use podstore::format::segment_header::SegmentHeader;

pub use libfuzzer_sys::arbitrary::{self, Unstructured};

/// Every block size a valid segment may have.
pub const BLOCK_SIZES: [u32; 8] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

/// Block sizes for generated images, small ones repeated so that most images stay small.
pub const IMAGE_BLOCK_SIZES: [u32; 8] = [512, 512, 512, 1024, 4096, 4096, 8192, 65536];

/// The granularity at which the design assumes a device may tear a write.
pub const SECTOR: u64 = 512;

/// Bytes of value verified per read by the scan (`SCAN_WINDOW` in src/format/scan.rs): a value
/// longer than this exercises the scan's windowed verification.
pub const SCAN_WINDOW: usize = 256 * 4096;

/// Reads a little-endian u64 at `at`, with missing bytes taken as zero.
pub fn u64_at(data: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    if let Some(src) = data.get(at..) {
        let n = src.len().min(8);
        b[..n].copy_from_slice(&src[..n]);
    }
    u64::from_le_bytes(b)
}

/// `len` bytes: up to 64 taken from the input, repeated (zeroes when the input is exhausted),
/// so that long keys and values cost little input. Built with memcpy rather than a byte loop:
/// every comparison in a loop over bytes is traced by the fuzzer's instrumentation.
pub fn fill(u: &mut Unstructured<'_>, len: usize) -> arbitrary::Result<Vec<u8>> {
    let take = len.min(64).min(u.len());
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(u.bytes(take)?);
    if take == 0 {
        v.resize(len, 0);
    }
    while v.len() < len {
        let n = v.len().min(len - v.len());
        v.extend_from_within(..n);
    }
    Ok(v)
}

/// The first index at which `a` and `b` differ, or the shorter length if one is a prefix of
/// the other. Compares 4 KiB slices first (memcmp) rather than byte by byte.
pub fn first_difference(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at < n {
        let end = (at + 4096).min(n);
        if a[at..end] != b[at..end] {
            return at
                + a[at..end]
                    .iter()
                    .zip(&b[at..end])
                    .take_while(|(x, y)| x == y)
                    .count();
        }
        at = end;
    }
    n
}

/// A key of 1..=`max_len` bytes.
pub fn arb_key(u: &mut Unstructured<'_>, max_len: usize) -> arbitrary::Result<Vec<u8>> {
    let len = u.int_in_range(1..=max_len)?;
    fill(u, len)
}

/// A value length: mostly small, some spanning several 4 KiB chunks, some on a chunk boundary,
/// and (with `big`) rarely one about as long as the scan's verification window (1 MiB).
pub fn arb_value_len(u: &mut Unstructured<'_>, big: bool) -> arbitrary::Result<usize> {
    Ok(match u.int_in_range(0u8..=15)? {
        0 | 1 => 0,
        2..=8 => u.int_in_range(1..=64)?,
        9..=11 => u.int_in_range(65..=3 * 4096 + 100)?,
        12..=14 => u.int_in_range(1..=4usize)? * 4096 + u.int_in_range(0..=4usize)? - 2,
        _ if big && u.ratio(1u8, 8)? => SCAN_WINDOW - 4096 + u.int_in_range(0..=3 * 4096)?,
        _ => u.int_in_range(0..=256)?,
    })
}

/// One record to write.
#[derive(Debug, Clone)]
pub struct Rec {
    /// Put or tombstone (a tombstone has an empty value).
    pub kind: RecordKind,
    /// The key (1..=4096 bytes).
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

impl Rec {
    /// A record built from the input: key of 1..=`max_key` bytes, value as [`arb_value_len`].
    pub fn arbitrary(
        u: &mut Unstructured<'_>,
        max_key: usize,
        big: bool,
    ) -> arbitrary::Result<Rec> {
        let kind = if u.ratio(1u8, 6)? {
            RecordKind::Tombstone
        } else {
            RecordKind::Put
        };
        let key = arb_key(u, max_key)?;
        let value = match kind {
            RecordKind::Tombstone => Vec::new(),
            RecordKind::Put => {
                let len = arb_value_len(u, big)?;
                fill(u, len)?
            }
        };
        Ok(Rec { kind, key, value })
    }
}

/// A record as laid out in an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// Offset of its first byte.
    pub offset: u64,
    /// One past its last byte.
    pub end: u64,
    /// Sequence number.
    pub seq: u64,
    /// Put or tombstone.
    pub kind: RecordKind,
    /// The key.
    pub key: Vec<u8>,
    /// Value length.
    pub value_len: u64,
}

impl Written {
    /// True when `e` (an entry returned by a scan or a footer) describes this record.
    pub fn matches(&self, e: &FooterEntry) -> bool {
        e.offset == self.offset
            && e.seq == self.seq
            && e.kind == self.kind
            && e.key == self.key
            && e.value_len == self.value_len
            && e.flags == 0
    }
}

/// A segment image laid out like the writer does it.
#[derive(Debug, Clone)]
pub struct Image {
    /// The bytes: header, then each group of records followed by zero padding to the next
    /// block boundary.
    pub bytes: Vec<u8>,
    /// Every record, in file order.
    pub written: Vec<Written>,
    /// The (block-aligned) offset at which each group starts.
    pub group_starts: Vec<u64>,
}

/// Builds a segment image: header, then each group of records (sequence numbers counting up
/// from `first_seq`), each group padded with zeroes to the next block boundary, as the writer
/// lays them out (and as the test helper `image` in src/format/scan.rs does).
pub fn segment_image(segment: u64, block: u32, first_seq: u64, groups: &[Vec<Rec>]) -> Image {
    let mut bytes = SegmentHeader {
        segment,
        block_size: block,
    }
    .encode()
    .to_vec();
    let mut written = Vec::new();
    let mut group_starts = Vec::new();
    let mut seq = first_seq;
    // Zero padding that ended the previous group: the next record declares it.
    let mut pad = 0u16;
    for (g, group) in groups.iter().enumerate() {
        // The header shares the first write with the first group.
        group_starts.push(if g == 0 { 0 } else { bytes.len() as u64 });
        for r in group {
            let offset = bytes.len() as u64;
            let place = RecordPlace { segment, offset };
            let header = RecordHeader {
                kind: r.kind,
                flags: 0,
                key_len: r.key.len() as u32,
                pad_before: std::mem::take(&mut pad),
                value_len: r.value.len() as u64,
                seq,
                expires_at: None,
            };
            bytes.extend(encode_record_as(&header, place, &r.key, &r.value));
            written.push(Written {
                offset,
                end: bytes.len() as u64,
                seq,
                kind: r.kind,
                key: r.key.clone(),
                value_len: r.value.len() as u64,
            });
            seq = seq.wrapping_add(1);
        }
        let padded = align_up(bytes.len() as u64, block as u64) as usize;
        pad = (padded - bytes.len()) as u16;
        bytes.resize(padded, 0);
    }
    Image {
        bytes,
        written,
        group_starts,
    }
}

/// The footer entries a writer would produce for `written`: each key's last record.
pub fn footer_entries(written: &[Written]) -> Vec<FooterEntry> {
    let mut out: Vec<FooterEntry> = Vec::new();
    for w in written {
        out.retain(|e| e.key != w.key);
        out.push(FooterEntry {
            key: w.key.clone(),
            kind: w.kind,
            flags: 0,
            offset: w.offset,
            stored_len: w.value_len,
            value_len: w.value_len,
            seq: w.seq,
            expires_at: None,
        });
    }
    out
}

/// Seals `image`: appends the footer at the next block boundary after the last record, as
/// sealing and recovery do.
pub fn seal(segment: u64, block: u32, image: &Image) -> Vec<u8> {
    let data_end = image.written.last().map_or(64, |w| w.end);
    let table_offset = align_up(data_end, block as u64);
    let mut bytes = image.bytes.clone();
    bytes.resize(table_offset as usize, 0);
    bytes.extend(podstore::format::footer::encode_footer(
        segment,
        data_end,
        table_offset,
        block,
        &footer_entries(&image.written),
    ));
    bytes
}

/// The value length that makes a record with a `key_len`-byte key, starting at `offset`, end
/// exactly at `end`, if there is one (the chunk crc table makes some lengths impossible).
pub fn value_len_to_end_at(offset: u64, key_len: usize, end: u64) -> Option<usize> {
    use podstore::format::record::RECORD_HEADER_LEN;
    // value + 4 * ceil(value / 4096) must equal `rest`.
    let rest = end.checked_sub(offset + (RECORD_HEADER_LEN + key_len) as u64)?;
    let chunks = rest.div_ceil(4096 + 4);
    let value = rest.checked_sub(4 * chunks)?;
    (value.div_ceil(4096) == chunks).then_some(value as usize)
}

/// Makes `value` `len` bytes long, repeating what it holds (or zeroes).
pub fn resize_value(value: &mut Vec<u8>, len: usize) {
    if value.is_empty() {
        value.resize(len, 0);
    }
    while value.len() < len {
        let n = value.len().min(len - value.len());
        value.extend_from_within(..n);
    }
    value.truncate(len);
}
