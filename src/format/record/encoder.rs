//! The one record encoder: every writer of records (the log appender, blob files, and the
//! vectors of tests, benches and fuzz seeds) writes them through [`write_record`], into whatever
//! [`Sink`] it holds.

use super::{
    CHUNK_SIZE, FooterEntry, RecordHeader, RecordKind, RecordPlace, chunk_crc, chunk_hasher,
};
use crate::format::Sink;

/// Chunk crcs buffered per write into the sink.
const TABLE_BUF: usize = 256;

/// Writes the record at `place` into `sink`: `header` (whose `key_len` and `value_len` are the
/// lengths of `key` and `stored`), `key`, the stored value bytes and their chunk crc table.
///
/// Returns the record's footer entry, with `value_len` as its length as put (`stored.len()`
/// unless the record is compressed); its [`FooterEntry::record_len`] is the number of bytes
/// written.
pub fn write_record<S: Sink + ?Sized>(
    sink: &mut S,
    place: RecordPlace,
    header: &RecordHeader,
    key: &[u8],
    stored: &[u8],
    value_len: u64,
) -> Result<FooterEntry, S::Error> {
    debug_assert_eq!(header.key_len as usize, key.len());
    debug_assert_eq!(header.value_len, stored.len() as u64);
    sink.write_bytes(&header.encode(place, key))?;
    sink.write_bytes(key)?;
    sink.write_bytes(stored)?;
    // A value of a few chunks (most are one) gets a table on the stack of its own size: the
    // large one is zeroed before use, 1 KiB per record (1 % of a replicated put's CPU).
    if stored.len() <= 4 * CHUNK_SIZE as usize {
        write_table::<4, S>(sink, place, stored)?;
    } else {
        write_table::<TABLE_BUF, S>(sink, place, stored)?;
    }
    Ok(FooterEntry::for_record(
        place.offset,
        header,
        key.to_vec(),
        value_len,
    ))
}

/// Writes the chunk crc table of `stored` (the value of the record at `place`) through a buffer
/// of `N` crcs.
fn write_table<const N: usize, S: Sink + ?Sized>(
    sink: &mut S,
    place: RecordPlace,
    stored: &[u8],
) -> Result<(), S::Error> {
    let mut table = [[0u8; 4]; N];
    let mut n = 0;
    for (i, chunk) in stored.chunks(CHUNK_SIZE as usize).enumerate() {
        table[n] = chunk_crc(place, i as u64, chunk).to_le_bytes();
        n += 1;
        if n == N {
            sink.write_bytes(table.as_flattened())?;
            n = 0;
        }
    }
    sink.write_bytes(table[..n].as_flattened())
}

/// A value's chunk crc table, computed as its bytes stream by (for a writer that does not hold
/// the whole value): feed the bytes in order with [`ChunkCrcs::update`], then
/// [`ChunkCrcs::finish`] gives the table, byte for byte what [`write_record`] writes after the
/// value.
pub struct ChunkCrcs {
    place: RecordPlace,
    index: u64,
    fill: u64,
    hasher: crc32fast::Hasher,
    table: Vec<u8>,
}

impl ChunkCrcs {
    /// The table of the value of the record at `place`, empty so far.
    pub fn new(place: RecordPlace) -> ChunkCrcs {
        ChunkCrcs {
            place,
            index: 0,
            fill: 0,
            hasher: chunk_hasher(place, 0),
            table: Vec::new(),
        }
    }

    /// Adds the next value bytes.
    pub fn update(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let n = bytes.len().min((CHUNK_SIZE - self.fill) as usize);
            self.hasher.update(&bytes[..n]);
            self.fill += n as u64;
            bytes = &bytes[n..];
            if self.fill == CHUNK_SIZE {
                self.end_chunk();
            }
        }
    }

    fn end_chunk(&mut self) {
        self.index += 1;
        let done = std::mem::replace(&mut self.hasher, chunk_hasher(self.place, self.index));
        self.table.extend_from_slice(&done.finalize().to_le_bytes());
        self.fill = 0;
    }

    /// Bytes of memory the table takes so far (4 per 4 KiB chunk).
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// The whole table (the last, partial chunk included).
    pub fn finish(mut self) -> Vec<u8> {
        if self.fill > 0 {
            self.end_chunk();
        }
        self.table
    }
}

/// Encodes a whole record into a vector (tests, tools and small writes).
pub fn encode_record(
    place: RecordPlace,
    kind: RecordKind,
    seq: u64,
    key: &[u8],
    value: &[u8],
) -> Vec<u8> {
    encode_record_with_flags(place, kind, 0, seq, key, value)
}

/// [`encode_record`] with flags.
pub fn encode_record_with_flags(
    place: RecordPlace,
    kind: RecordKind,
    flags: u16,
    seq: u64,
    key: &[u8],
    value: &[u8],
) -> Vec<u8> {
    let header = RecordHeader {
        kind,
        flags,
        key_len: key.len() as u32,
        pad_before: 0,
        value_len: value.len() as u64,
        seq,
        expires_at: None,
    };
    encode_record_as(&header, place, key, value)
}

/// Encodes a whole record with every header field as given (`key_len` and `value_len` must be
/// the lengths of `key` and `value`).
pub fn encode_record_as(
    header: &RecordHeader,
    place: RecordPlace,
    key: &[u8],
    value: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(header.encoded_len() as usize);
    let Ok(_) = write_record(&mut out, place, header, key, value, value.len() as u64);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streamed_chunk_crcs_match_the_encoder() {
        let place = RecordPlace {
            segment: 7,
            offset: 64,
        };
        for len in [0usize, 1, 4095, 4096, 4097, 3 * 4096, 10_000] {
            let value: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut crcs = ChunkCrcs::new(place);
            for piece in value.chunks(1000) {
                crcs.update(piece);
            }
            let record = encode_record(place, RecordKind::Put, 1, b"k", &value);
            let table_at = record.len() - 4 * len.div_ceil(4096);
            assert_eq!(crcs.finish(), &record[table_at..], "{len}");
        }
    }
}
