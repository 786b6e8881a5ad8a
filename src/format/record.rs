//! Records: the unit of the log.
//!
//! Layout: docs/design.md, "Record" (the offsets below are checked against it by a test).
//!
//! Seeding every checksum with the segment id and the record's own offset binds the bytes to
//! their place: a stale record left in a reused file, or a record's bytes found at another
//! offset, fail verification. The per-chunk table lets a range read verify only the chunks it
//! touches; it follows the value so that a writer can checksum while it streams.

use super::{
    CHUNK_SIZE, FORMAT_VERSION, MAX_KEY_LEN, MAX_VALUE_LEN, check_crc, get_u32, get_u64, magic_at,
    need,
};
use crate::error::Corruption;

mod encoder;
pub use encoder::{
    ChunkCrcs, encode_record, encode_record_as, encode_record_with_flags, write_record,
};

/// Magic number at the start of every record.
pub const RECORD_MAGIC: [u8; 4] = *b"PODR";
/// Length of the fixed part of a record.
pub const RECORD_HEADER_LEN: usize = 32;

/// Record flag: the record belongs to an atomic batch and more records of that batch follow.
/// The batch's last record has the flag clear and so commits the batch: recovery keeps a batch
/// only if its last record is whole.
pub const FLAG_BATCH_CONTINUES: u16 = 1;

/// Record flag: the value is compressed. Its stored bytes are a frame table and lz4 frames
/// ([`super::frames`]); the record's value length is the stored length, the frame table holds the
/// uncompressed one.
pub const FLAG_COMPRESSED: u16 = 2;

/// Record flag: the value expires. The fixed header is followed by an 8-byte expiry field
/// ([`EXPIRES_LEN`]), under the header crc, before the key. Only records of
/// [`RECORD_VERSION_EXPIRES`] carry it, and they always do: a record without an expiry is
/// written as version [`FORMAT_VERSION`], byte for byte as before, so it costs nothing and
/// builds that predate expiry still read it.
pub const FLAG_EXPIRES: u16 = 4;

/// Every flag this version knows; others are rejected.
pub const KNOWN_FLAGS: u16 = FLAG_BATCH_CONTINUES | FLAG_COMPRESSED | FLAG_EXPIRES;

/// Format version of a record that carries an expiry ([`FLAG_EXPIRES`]). A new version rather
/// than only a new flag so that an earlier build, which would misplace the key, refuses such a
/// record as `UnsupportedVersion` instead of calling it damaged.
pub const RECORD_VERSION_EXPIRES: u8 = 2;

/// Length of the expiry field that follows the fixed header of a [`FLAG_EXPIRES`] record.
pub const EXPIRES_LEN: usize = 8;

/// Largest expiry a record may carry, in milliseconds since the Unix epoch: the last
/// millisecond of the year 9999. Bounded so that a damaged field that its crc did not catch
/// (a record of a buggy writer) cannot overflow `SystemTime` arithmetic; any larger value is a
/// typed corruption.
pub const MAX_EXPIRES_AT_MS: u64 = 253_402_300_799_999;

/// The shortest stored value of a compressed record: a frame table of one frame and one byte.
const MIN_COMPRESSED_LEN: u64 =
    (super::frames::FRAME_TABLE_HEADER_LEN + super::frames::FRAME_ENTRY_LEN + 1) as u64;

mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const KIND: usize = 5;
    pub const FLAGS: usize = 6;
    pub const KEY_LEN: usize = 8;
    pub const PAD_BEFORE: usize = 10;
    pub const HEADER_CRC: usize = 12;
    pub const VALUE_LEN: usize = 16;
    pub const SEQ: usize = 24;
    pub const EXPIRES_AT: usize = 32;
}

/// What a record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RecordKind {
    /// Sets the key to the value.
    Put = 1,
    /// Deletes the key.
    Tombstone = 2,
}

impl RecordKind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Result<RecordKind, Corruption> {
        match b {
            1 => Ok(RecordKind::Put),
            2 => Ok(RecordKind::Tombstone),
            other => Err(Corruption::InvalidField {
                field: "record kind",
                value: other as u64,
            }),
        }
    }
}

/// Where a record lives: what every checksum of the record is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordPlace {
    /// Segment id.
    pub segment: u64,
    /// Offset of the record's first byte in the segment file.
    pub offset: u64,
}

/// The fixed part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    /// Put or tombstone.
    pub kind: RecordKind,
    /// Flag bits ([`FLAG_BATCH_CONTINUES`], [`FLAG_COMPRESSED`], [`FLAG_EXPIRES`]). The
    /// encoder sets [`FLAG_EXPIRES`] from [`RecordHeader::expires_at`], whatever this says.
    pub flags: u16,
    /// Key length in bytes.
    pub key_len: u32,
    /// Zero bytes between the end of the previous record and this one: the padding that ended
    /// the previous write group. Recovery checks that the zeroes it skipped are exactly these,
    /// so a lost sector that happens to look like padding is not skipped over.
    pub pad_before: u16,
    /// Stored value length in bytes (after compression, for a [`FLAG_COMPRESSED`] record).
    pub value_len: u64,
    /// Sequence number: the order of writes over the store's life (a copy made by compaction
    /// keeps the number of the record it copies).
    pub seq: u64,
    /// When the value expires, in milliseconds since the Unix epoch (1 ..=
    /// [`MAX_EXPIRES_AT_MS`]); `None` for a value that does not expire (and for every
    /// tombstone). Some exactly when `flags` has [`FLAG_EXPIRES`].
    pub expires_at: Option<u64>,
}

/// An encoded record header: exactly its bytes (32, or 40 with the expiry field), as a slice.
/// Not an array of the longest header, so that no writer can append the unused tail of one.
#[derive(Clone, Copy)]
pub struct EncodedHeader {
    bytes: [u8; RECORD_HEADER_LEN + EXPIRES_LEN],
    len: usize,
}

impl std::ops::Deref for EncodedHeader {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// Number of checksummed chunks in a value of `value_len` bytes.
pub fn chunk_count(value_len: u64) -> u64 {
    value_len.div_ceil(CHUNK_SIZE)
}

/// Encoded length of a record with a key of `key_len` bytes and `value_len` stored value bytes:
/// header, key, value and chunk crc table (a record without an expiry; see [`record_len_for`]).
pub fn record_len(key_len: u64, value_len: u64) -> u64 {
    RECORD_HEADER_LEN as u64 + key_len + value_len + 4 * chunk_count(value_len)
}

/// Length of the header of a record with flags `flags`: the fixed part, and the expiry field
/// if [`FLAG_EXPIRES`] is set.
pub fn head_len(flags: u16) -> usize {
    if flags & FLAG_EXPIRES != 0 {
        RECORD_HEADER_LEN + EXPIRES_LEN
    } else {
        RECORD_HEADER_LEN
    }
}

/// [`record_len`] of a record with flags `flags` (the expiry field counted when it has one).
pub fn record_len_for(flags: u16, key_len: u64, value_len: u64) -> u64 {
    record_len(key_len, value_len) + (head_len(flags) - RECORD_HEADER_LEN) as u64
}

/// The crc32 of chunk `index` of the value of the record at `place`.
pub fn chunk_crc(place: RecordPlace, index: u64, chunk: &[u8]) -> u32 {
    let mut h = chunk_hasher(place, index);
    h.update(chunk);
    h.finalize()
}

/// A crc32 hasher seeded for chunk `index` of the value of the record at `place`.
fn chunk_hasher(place: RecordPlace, index: u64) -> crc32fast::Hasher {
    let mut h = crc32fast::Hasher::new();
    h.update(&place.segment.to_le_bytes());
    h.update(&place.offset.to_le_bytes());
    h.update(&index.to_le_bytes());
    h
}

impl RecordHeader {
    /// The record's flags as encoded: [`FLAG_EXPIRES`] set exactly when it has an expiry.
    pub fn encoded_flags(&self) -> u16 {
        match self.expires_at {
            Some(_) => self.flags | FLAG_EXPIRES,
            None => self.flags & !FLAG_EXPIRES,
        }
    }

    /// Length of the header: the fixed part and, if the record has one, the expiry field.
    pub fn head_len(&self) -> usize {
        head_len(self.encoded_flags())
    }

    /// Offset of the key from the record start.
    pub fn key_offset(&self) -> u64 {
        self.head_len() as u64
    }

    /// Offset of the value from the record start.
    pub fn value_offset(&self) -> u64 {
        self.head_len() as u64 + self.key_len as u64
    }

    /// Offset of the chunk crc table from the record start.
    pub fn table_offset(&self) -> u64 {
        self.value_offset() + self.value_len
    }

    /// Total encoded length of the record.
    pub fn encoded_len(&self) -> u64 {
        record_len_for(self.encoded_flags(), self.key_len as u64, self.value_len)
    }

    /// Encodes the header: the fixed part and, for a record with an expiry, the expiry field
    /// ([`RecordHeader::head_len`] bytes), with the header crc over it and `key`.
    pub fn encode(&self, place: RecordPlace, key: &[u8]) -> EncodedHeader {
        debug_assert_eq!(key.len(), self.key_len as usize);
        let flags = self.encoded_flags();
        let mut b = [0u8; RECORD_HEADER_LEN + EXPIRES_LEN];
        b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&RECORD_MAGIC);
        b[off::VERSION] = match self.expires_at {
            Some(at) => {
                b[off::EXPIRES_AT..off::EXPIRES_AT + EXPIRES_LEN]
                    .copy_from_slice(&at.to_le_bytes());
                RECORD_VERSION_EXPIRES
            }
            None => FORMAT_VERSION,
        };
        b[off::KIND] = self.kind as u8;
        b[off::FLAGS..off::FLAGS + 2].copy_from_slice(&flags.to_le_bytes());
        b[off::KEY_LEN..off::KEY_LEN + 2].copy_from_slice(&(self.key_len as u16).to_le_bytes());
        b[off::PAD_BEFORE..off::PAD_BEFORE + 2].copy_from_slice(&self.pad_before.to_le_bytes());
        b[off::VALUE_LEN..off::VALUE_LEN + 8].copy_from_slice(&self.value_len.to_le_bytes());
        b[off::SEQ..off::SEQ + 8].copy_from_slice(&self.seq.to_le_bytes());
        let len = head_len(flags);
        let crc = header_crc(place, &b[..len], key);
        b[off::HEADER_CRC..off::HEADER_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        EncodedHeader { bytes: b, len }
    }

    /// Decodes and validates the header (all but its crc, which needs the key: see
    /// [`RecordHeader::verify`]). `bytes` must hold the whole header: the fixed part, and the
    /// expiry field if the flags say so (else `Truncated`, naming the header's length).
    pub fn decode(bytes: &[u8]) -> Result<RecordHeader, Corruption> {
        need(bytes, RECORD_HEADER_LEN)?;
        let magic = magic_at(bytes, off::MAGIC);
        if magic != RECORD_MAGIC {
            return Err(Corruption::BadMagic {
                structure: "record",
                found: magic,
            });
        }
        let version = bytes[off::VERSION];
        if version != FORMAT_VERSION && version != RECORD_VERSION_EXPIRES {
            return Err(Corruption::UnsupportedVersion {
                found: version as u32,
            });
        }
        let kind = RecordKind::from_u8(bytes[off::KIND])?;
        let flags = super::get_u16(bytes, off::FLAGS);
        // The expiry flag and the version go together, and a tombstone never expires.
        let expires = flags & FLAG_EXPIRES != 0;
        if flags & !KNOWN_FLAGS != 0
            || expires != (version == RECORD_VERSION_EXPIRES)
            || (expires && kind == RecordKind::Tombstone)
        {
            return Err(Corruption::InvalidField {
                field: "record flags",
                value: flags as u64,
            });
        }
        let key_len = super::get_u16(bytes, off::KEY_LEN) as u32;
        if key_len == 0 || key_len as usize > MAX_KEY_LEN {
            return Err(Corruption::InvalidField {
                field: "record key length",
                value: key_len as u64,
            });
        }
        if flags & FLAG_COMPRESSED != 0 && kind == RecordKind::Tombstone {
            return Err(Corruption::InvalidField {
                field: "record flags",
                value: flags as u64,
            });
        }
        let value_len = get_u64(bytes, off::VALUE_LEN);
        if value_len > MAX_VALUE_LEN
            || (kind == RecordKind::Tombstone && value_len != 0)
            || (flags & FLAG_COMPRESSED != 0 && value_len < MIN_COMPRESSED_LEN)
        {
            return Err(Corruption::InvalidField {
                field: "record value length",
                value: value_len,
            });
        }
        let expires_at = if expires {
            need(bytes, RECORD_HEADER_LEN + EXPIRES_LEN)?;
            let at = get_u64(bytes, off::EXPIRES_AT);
            if at == 0 || at > MAX_EXPIRES_AT_MS {
                return Err(Corruption::InvalidField {
                    field: "record expiry",
                    value: at,
                });
            }
            Some(at)
        } else {
            None
        };
        Ok(RecordHeader {
            kind,
            flags,
            key_len,
            pad_before: super::get_u16(bytes, off::PAD_BEFORE),
            value_len,
            seq: get_u64(bytes, off::SEQ),
            expires_at,
        })
    }

    /// Checks the header crc of `header_bytes` (the encoded header: the fixed part, and the
    /// expiry field if its flags say so) and `key`.
    pub fn verify(header_bytes: &[u8], place: RecordPlace, key: &[u8]) -> Result<(), Corruption> {
        need(header_bytes, RECORD_HEADER_LEN)?;
        let len = head_len(super::get_u16(header_bytes, off::FLAGS));
        need(header_bytes, len)?;
        let expected = get_u32(header_bytes, off::HEADER_CRC);
        check_crc(header_crc(place, &header_bytes[..len], key), expected)
    }
}

/// The header crc: over `header` (the whole encoded header, expiry field included) but its crc
/// field, and the key.
fn header_crc(place: RecordPlace, header: &[u8], key: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&place.segment.to_le_bytes());
    h.update(&place.offset.to_le_bytes());
    h.update(&header[..off::HEADER_CRC]);
    h.update(&header[off::HEADER_CRC + 4..]);
    h.update(key);
    h.finalize()
}

#[cfg(test)]
pub(crate) const FIELDS: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::VERSION, 1),
    (off::KIND, 1),
    (off::FLAGS, 2),
    (off::KEY_LEN, 2),
    (off::PAD_BEFORE, 2),
    (off::HEADER_CRC, 4),
    (off::VALUE_LEN, 8),
    (off::SEQ, 8),
];

/// The header of a record with an expiry: the fixed part's fields and the expiry field.
#[cfg(test)]
pub(crate) const FIELDS_EXPIRES: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::VERSION, 1),
    (off::KIND, 1),
    (off::FLAGS, 2),
    (off::KEY_LEN, 2),
    (off::PAD_BEFORE, 2),
    (off::HEADER_CRC, 4),
    (off::VALUE_LEN, 8),
    (off::SEQ, 8),
    (off::EXPIRES_AT, EXPIRES_LEN),
];

/// A record decoded and fully verified from a byte slice holding at least the whole record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord<'a> {
    /// The fixed part.
    pub header: RecordHeader,
    /// The key.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
}

/// Decodes and verifies every checksum of the record at the start of `bytes`.
pub fn decode_record(bytes: &[u8], place: RecordPlace) -> Result<DecodedRecord<'_>, Corruption> {
    let header = RecordHeader::decode(bytes)?;
    let total = header.encoded_len();
    if (bytes.len() as u64) < total {
        return Err(Corruption::Truncated {
            needed: total,
            available: bytes.len() as u64,
        });
    }
    let key = &bytes[header.key_offset() as usize..header.value_offset() as usize];
    RecordHeader::verify(bytes, place, key)?;
    let value = &bytes[header.value_offset() as usize..header.table_offset() as usize];
    let table = &bytes[header.table_offset() as usize..total as usize];
    verify_chunks(place, 0, value, table).map_err(|(_, c)| c)?;
    Ok(DecodedRecord { header, key, value })
}

/// Verifies value bytes `data` that start at chunk `first_chunk` against `table`, the crc entries
/// for those chunks. `data` must start on a chunk boundary and hold whole chunks except possibly
/// the value's last one; `table` must have one entry per chunk in `data`. On failure, returns
/// the index (within the value) of the first bad chunk with what is wrong.
pub fn verify_chunks(
    place: RecordPlace,
    first_chunk: u64,
    data: &[u8],
    table: &[u8],
) -> Result<(), (u64, Corruption)> {
    let chunks = chunk_count(data.len() as u64);
    need(table, (chunks * 4) as usize).map_err(|c| (first_chunk, c))?;
    for (i, chunk) in data.chunks(CHUNK_SIZE as usize).enumerate() {
        let index = first_chunk + i as u64;
        let expected = get_u32(table, i * 4);
        check_crc(chunk_crc(place, index, chunk), expected).map_err(|c| (index, c))?;
    }
    Ok(())
}

/// A record in summary: what a footer names for each key's newest record, what the encoder
/// returns for the record it wrote, and what the cursor finds when it reads one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FooterEntry {
    /// The key.
    pub key: Vec<u8>,
    /// Put or tombstone.
    pub kind: RecordKind,
    /// The record's flags.
    pub flags: u16,
    /// Record offset in the segment.
    pub offset: u64,
    /// Length of the value bytes in the record (after compression).
    pub stored_len: u64,
    /// Length of the value as put: `stored_len` unless the record's flags say
    /// [`FLAG_COMPRESSED`], then the uncompressed length from the value's frame table (0 for a
    /// damaged compressed record whose frame table could not be read).
    pub value_len: u64,
    /// Sequence number.
    pub seq: u64,
    /// When the value expires, in milliseconds since the Unix epoch
    /// ([`RecordHeader::expires_at`]); `None` if it does not.
    pub expires_at: Option<u64>,
}

impl FooterEntry {
    /// The entry of the record at `offset` whose header is `header` and key `key`; `value_len` is
    /// the value's length as put (see [`FooterEntry::value_len`]).
    pub fn for_record(offset: u64, header: &RecordHeader, key: Vec<u8>, value_len: u64) -> Self {
        FooterEntry {
            key,
            kind: header.kind,
            flags: header.encoded_flags(),
            offset,
            stored_len: header.value_len,
            value_len,
            seq: header.seq,
            expires_at: header.expires_at,
        }
    }

    /// Encoded length of the record: header (with its expiry field, if any), key, stored value
    /// and chunk crc table.
    pub fn record_len(&self) -> u64 {
        record_len_for(self.flags, self.key.len() as u64, self.stored_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLACE: RecordPlace = RecordPlace {
        segment: 7,
        offset: 4096,
    };

    fn expiring(kind: RecordKind, expires_at: Option<u64>, key: &[u8], value: &[u8]) -> Vec<u8> {
        let header = RecordHeader {
            kind,
            flags: 0,
            key_len: key.len() as u32,
            pad_before: 0,
            value_len: value.len() as u64,
            seq: 5,
            expires_at,
        };
        encode_record_as(&header, PLACE, key, value)
    }

    #[test]
    fn an_expiry_round_trips_and_costs_only_its_field() {
        let value = vec![3u8; 5000];
        let plain = expiring(RecordKind::Put, None, b"key", &value);
        let at = 1_764_960_000_123;
        let bytes = expiring(RecordKind::Put, Some(at), b"key", &value);
        // A record without an expiry is the record of earlier builds: version 1, 32-byte
        // header. One with an expiry is version 2 with the field after the fixed header.
        assert_eq!(plain[4], FORMAT_VERSION);
        assert_eq!(bytes[4], RECORD_VERSION_EXPIRES);
        assert_eq!(bytes.len(), plain.len() + EXPIRES_LEN);
        assert_eq!(&bytes[32..40], &at.to_le_bytes());
        assert_eq!(&bytes[40..43], b"key");
        let rec = decode_record(&bytes, PLACE).unwrap();
        assert_eq!(rec.header.expires_at, Some(at));
        assert_eq!(rec.header.flags, FLAG_EXPIRES);
        assert_eq!((rec.key, rec.value), (&b"key"[..], &value[..]));
        assert_eq!(rec.header.key_offset(), 40);
        assert_eq!(rec.header.encoded_len(), bytes.len() as u64);
        let entry = FooterEntry::for_record(PLACE.offset, &rec.header, b"key".to_vec(), 5000);
        assert_eq!(entry.expires_at, Some(at));
        assert_eq!(entry.record_len(), bytes.len() as u64);
        let old = decode_record(&plain, PLACE).unwrap();
        assert_eq!((old.header.expires_at, old.header.flags), (None, 0));
        // What a writer appends for the header is exactly the header (a streamed blob writes
        // it apart from the rest of the record).
        assert_eq!(old.header.encode(PLACE, b"key").len(), RECORD_HEADER_LEN);
        assert_eq!(
            &*old.header.encode(PLACE, b"key"),
            &plain[..RECORD_HEADER_LEN]
        );
        assert_eq!(&*rec.header.encode(PLACE, b"key"), &bytes[..40]);
    }

    #[test]
    fn every_corrupted_byte_of_an_expiring_record_is_detected() {
        let bytes = expiring(RecordKind::Put, Some(1_000_000), b"some-key", &[7u8; 100]);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                decode_record(&bad, PLACE).is_err(),
                "flip at {i} undetected"
            );
        }
        for cut in 0..bytes.len() {
            assert!(matches!(
                decode_record(&bytes[..cut], PLACE),
                Err(Corruption::Truncated { .. })
            ));
        }
    }

    #[test]
    fn a_bad_expiry_is_a_typed_corruption() {
        // Out of range (zero, past the year 9999): the field's own error, before any crc.
        for at in [0, MAX_EXPIRES_AT_MS + 1, u64::MAX] {
            let bytes = expiring(RecordKind::Put, Some(at), b"k", b"v");
            assert_eq!(
                RecordHeader::decode(&bytes),
                Err(Corruption::InvalidField {
                    field: "record expiry",
                    value: at,
                })
            );
        }
        // A changed expiry fails the header crc.
        let mut bytes = expiring(RecordKind::Put, Some(5_000), b"k", b"v");
        bytes[33] ^= 0x10;
        assert!(RecordHeader::decode(&bytes).is_ok());
        assert!(matches!(
            decode_record(&bytes, PLACE),
            Err(Corruption::ChecksumMismatch { .. })
        ));
        // The flag without version 2, version 2 without the flag, an expiring tombstone.
        let mut flag_v1 = expiring(RecordKind::Put, Some(5_000), b"k", b"v");
        flag_v1[4] = FORMAT_VERSION;
        let mut v2_plain = expiring(RecordKind::Put, None, b"k", b"v");
        v2_plain[4] = RECORD_VERSION_EXPIRES;
        let tombstone = expiring(RecordKind::Tombstone, Some(5_000), b"k", b"");
        for bad in [flag_v1, v2_plain, tombstone] {
            assert!(matches!(
                RecordHeader::decode(&bad),
                Err(Corruption::InvalidField {
                    field: "record flags",
                    ..
                })
            ));
        }
        // The fixed part alone of an expiring record is not its whole header.
        let bytes = expiring(RecordKind::Put, Some(5_000), b"k", b"v");
        assert_eq!(
            RecordHeader::decode(&bytes[..RECORD_HEADER_LEN]),
            Err(Corruption::Truncated {
                needed: 40,
                available: 32,
            })
        );
    }

    #[test]
    fn round_trip_sizes() {
        for len in [0usize, 1, 4095, 4096, 4097, 3 * 4096 + 5] {
            let value: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let bytes = encode_record(PLACE, RecordKind::Put, 42, b"key", &value);
            let rec = decode_record(&bytes, PLACE).unwrap();
            assert_eq!(rec.key, b"key");
            assert_eq!(rec.value, &value[..]);
            assert_eq!(rec.header.seq, 42);
            assert_eq!(rec.header.encoded_len(), bytes.len() as u64);
        }
    }

    #[test]
    fn every_corrupted_byte_is_detected() {
        let value: Vec<u8> = (0..5000).map(|i| i as u8).collect();
        let bytes = encode_record(PLACE, RecordKind::Put, 9, b"some-key", &value);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                decode_record(&bad, PLACE).is_err(),
                "flip at {i} undetected"
            );
        }
    }

    #[test]
    fn every_truncation_is_detected() {
        let bytes = encode_record(PLACE, RecordKind::Put, 9, b"k", &[5u8; 4100]);
        for cut in 0..bytes.len() {
            assert!(matches!(
                decode_record(&bytes[..cut], PLACE),
                Err(Corruption::Truncated { .. })
            ));
        }
    }

    #[test]
    fn checksums_bind_to_place() {
        let bytes = encode_record(PLACE, RecordKind::Put, 1, b"k", b"v");
        let other_offset = RecordPlace {
            offset: 8192,
            ..PLACE
        };
        let other_segment = RecordPlace {
            segment: 8,
            ..PLACE
        };
        assert!(matches!(
            decode_record(&bytes, other_offset),
            Err(Corruption::ChecksumMismatch { .. })
        ));
        assert!(matches!(
            decode_record(&bytes, other_segment),
            Err(Corruption::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn compressed_flag_rules() {
        let stored = vec![1u8; MIN_COMPRESSED_LEN as usize];
        let ok = encode_record_with_flags(PLACE, RecordKind::Put, 3, 1, b"k", &stored);
        assert_eq!(RecordHeader::decode(&ok).unwrap().flags, 3);
        // Too short to hold a frame table.
        let short = encode_record_with_flags(
            PLACE,
            RecordKind::Put,
            FLAG_COMPRESSED,
            1,
            b"k",
            &stored[1..],
        );
        assert!(matches!(
            RecordHeader::decode(&short),
            Err(Corruption::InvalidField {
                field: "record value length",
                ..
            })
        ));
        // A tombstone is never compressed; an unknown flag is rejected.
        for (kind, flags) in [
            (RecordKind::Tombstone, FLAG_COMPRESSED),
            (RecordKind::Put, 8),
        ] {
            let bad = encode_record_with_flags(PLACE, kind, flags, 1, b"k", b"");
            assert!(matches!(
                RecordHeader::decode(&bad),
                Err(Corruption::InvalidField {
                    field: "record flags",
                    ..
                })
            ));
        }
    }

    #[test]
    fn invalid_fields_are_typed() {
        let good = encode_record(PLACE, RecordKind::Tombstone, 1, b"k", b"");
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(matches!(
            RecordHeader::decode(&bad),
            Err(Corruption::BadMagic { .. })
        ));
        let mut bad = good.clone();
        bad[4] = 99;
        assert!(matches!(
            RecordHeader::decode(&bad),
            Err(Corruption::UnsupportedVersion { found: 99 })
        ));
        let mut bad = good.clone();
        bad[5] = 77;
        assert!(matches!(
            RecordHeader::decode(&bad),
            Err(Corruption::InvalidField { .. })
        ));
        let mut bad = good.clone();
        bad[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            RecordHeader::decode(&bad),
            Err(Corruption::InvalidField { .. })
        ));
        let mut bad = good;
        bad[16] = 1; // tombstone with a value
        assert!(matches!(
            RecordHeader::decode(&bad),
            Err(Corruption::InvalidField { .. })
        ));
    }
}
