//! The records of a segment image as the recovery scan finds them, with their absolute offsets;
//! and the trailer at the end of a sealed file.

use podstore::Corruption;
use podstore::format::footer::{TRAILER_LEN, Trailer, key_section};
use podstore::format::record::{RecordHeader, RecordKind, RecordPlace, decode_record};
use podstore::format::scan::scan_segment;

/// Checksum chunk of a record's value.
pub const CHUNK: u64 = 4096;

/// A record found by scanning segment bytes, with its absolute offsets.
#[derive(Debug, Clone)]
pub struct Rec {
    pub segment: u64,
    pub key: Vec<u8>,
    pub kind: RecordKind,
    pub seq: u64,
    pub flags: u16,
    /// Where the record starts.
    pub offset: u64,
    pub value_offset: u64,
    /// Stored value length (after compression, for a compressed record).
    pub value_len: u64,
    /// Where the value's chunk crcs start.
    pub table_offset: u64,
    /// One past the record's last byte.
    pub end: u64,
}

impl Rec {
    /// Checksum chunks of the stored value.
    pub fn chunks(&self) -> u64 {
        self.value_len.div_ceil(CHUNK)
    }
}

/// The whole records of a segment image (log segment or blob file), in file order (a sealed
/// file's stop at its footer); each one decodes and verifies.
pub fn scan_records(segment: u64, bytes: &[u8]) -> Vec<Rec> {
    let outcome = scan_segment(bytes, segment)
        .unwrap_or_else(|e| panic!("segment {segment}: scan failed: {e:?}"));
    outcome
        .records
        .iter()
        .map(|e| {
            let at = &bytes[e.offset as usize..];
            let header = RecordHeader::decode(at).expect("scanned record header");
            let place = RecordPlace {
                segment,
                offset: e.offset,
            };
            decode_record(at, place).expect("scanned record verifies");
            Rec {
                segment,
                key: e.key.clone(),
                kind: e.kind,
                seq: header.seq,
                flags: header.flags,
                offset: e.offset,
                value_offset: e.offset + header.value_offset(),
                value_len: header.value_len,
                table_offset: e.offset + header.table_offset(),
                end: e.offset + header.encoded_len(),
            }
        })
        .collect()
}

/// The trailer at the end of a sealed file's bytes; `Err` if the file does not end in one.
pub fn trailer(bytes: &[u8]) -> Result<Trailer, Corruption> {
    let at = bytes.len().saturating_sub(TRAILER_LEN);
    Trailer::decode(&bytes[at..], bytes.len() as u64)
}

/// Where the footer of a sealed file's bytes starts: its key section (version 2) or its table
/// (version 1). Panics if the file does not end in a footer that verifies.
pub fn footer_start(bytes: &[u8]) -> u64 {
    let t = trailer(bytes).expect("a sealed file");
    let table = &bytes[t.table_offset as usize..(t.table_offset + t.table_len) as usize];
    match key_section(&t, table).expect("a footer that verifies") {
        Some((at, _)) => at,
        None => t.table_offset,
    }
}
