//! The segment header: the first 64 bytes of every segment file.
//!
//! Layout: docs/design.md, "Segment header" (offsets checked against it by a test).
//! The first record starts at offset 64.

use super::{
    CHUNK_SIZE, FORMAT_VERSION, check_crc, get_u32, get_u64, magic_at, need, reserved_zero,
};
use crate::error::Corruption;

/// Magic number of a segment file.
pub const SEGMENT_MAGIC: [u8; 4] = *b"PODS";
/// Encoded length of the header; records start right after it.
pub const SEGMENT_HEADER_LEN: usize = 64;

mod off {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const SEGMENT_ID: usize = 8;
    pub const BLOCK_SIZE: usize = 16;
    pub const CHUNK_SIZE: usize = 20;
    pub const CRC: usize = 60;
}

#[cfg(test)]
pub(crate) const FIELDS: &[(usize, usize)] = &[
    (off::MAGIC, 4),
    (off::VERSION, 1),
    (off::SEGMENT_ID, 8),
    (off::BLOCK_SIZE, 4),
    (off::CHUNK_SIZE, 4),
    (off::CRC, 4),
];

/// Decoded segment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Segment id.
    pub segment: u64,
    /// Write block size (a power of two, 512 to 64 KiB).
    pub block_size: u32,
}

impl SegmentHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_LEN] {
        let mut b = [0u8; SEGMENT_HEADER_LEN];
        b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&SEGMENT_MAGIC);
        b[off::VERSION] = FORMAT_VERSION;
        b[off::SEGMENT_ID..off::SEGMENT_ID + 8].copy_from_slice(&self.segment.to_le_bytes());
        b[off::BLOCK_SIZE..off::BLOCK_SIZE + 4].copy_from_slice(&self.block_size.to_le_bytes());
        b[off::CHUNK_SIZE..off::CHUNK_SIZE + 4].copy_from_slice(&(CHUNK_SIZE as u32).to_le_bytes());
        let crc = crc32fast::hash(&b[..off::CRC]);
        b[off::CRC..off::CRC + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and verifies a header.
    pub fn decode(bytes: &[u8]) -> Result<SegmentHeader, Corruption> {
        need(bytes, SEGMENT_HEADER_LEN)?;
        let magic = magic_at(bytes, off::MAGIC);
        if magic != SEGMENT_MAGIC {
            return Err(Corruption::BadMagic {
                structure: "segment header",
                found: magic,
            });
        }
        check_crc(
            crc32fast::hash(&bytes[..off::CRC]),
            get_u32(bytes, off::CRC),
        )?;
        if bytes[off::VERSION] != FORMAT_VERSION {
            return Err(Corruption::UnsupportedVersion {
                found: bytes[off::VERSION] as u32,
            });
        }
        reserved_zero(
            &bytes[off::VERSION + 1..off::SEGMENT_ID],
            "segment reserved",
        )?;
        reserved_zero(&bytes[off::CHUNK_SIZE + 4..off::CRC], "segment reserved")?;
        let block_size = get_u32(bytes, off::BLOCK_SIZE);
        if !block_size.is_power_of_two() || !(512..=65536).contains(&block_size) {
            return Err(Corruption::InvalidField {
                field: "segment block size",
                value: block_size as u64,
            });
        }
        let chunk = get_u32(bytes, off::CHUNK_SIZE);
        if chunk as u64 != CHUNK_SIZE {
            return Err(Corruption::InvalidField {
                field: "segment chunk size",
                value: chunk as u64,
            });
        }
        Ok(SegmentHeader {
            segment: get_u64(bytes, off::SEGMENT_ID),
            block_size,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_flip_detected() {
        let h = SegmentHeader {
            segment: 0x1234,
            block_size: 4096,
        };
        let bytes = h.encode();
        assert_eq!(SegmentHeader::decode(&bytes).unwrap(), h);
        for i in 0..bytes.len() {
            let mut bad = bytes;
            bad[i] ^= 0x80;
            assert!(SegmentHeader::decode(&bad).is_err(), "flip at {i}");
        }
        for cut in 0..bytes.len() {
            assert!(matches!(
                SegmentHeader::decode(&bytes[..cut]),
                Err(Corruption::Truncated { .. })
            ));
        }
    }
}
