//! `VERSIONS`: the durable high-water mark of sequence numbers (docs/design.md, "Versions").
//!
//! A store gives each write a sequence number taken from the clock (its value's
//! [`Version`](crate::Version)); a number is never given past the reservation this file holds,
//! so that after a crash the next number starts above every number given before it, whatever
//! the clock says and whatever records the crash lost.
//!
//! The file has two slots, in separate 4 KiB blocks so that a torn write of one cannot touch the
//! other; a reservation is written into the slot that does not hold the newest one, so a crash
//! in the middle of a write leaves the previous reservation whole. Each slot:
//!
//! ```text
//! offset  size  field
//!      0     8  magic "PODVERS1"
//!      8     8  generation (u64 LE; the newest valid slot has the higher one)
//!     16     8  reserved_through (u64 LE; no number above it was given)
//!     24     4  crc32 of bytes 0..24 (u32 LE)
//!     28     4  zero
//! ```

use super::{get_u32, get_u64, need};
use crate::error::Corruption;

/// The file's name in a store directory.
pub const VERSIONS_NAME: &str = "VERSIONS";
/// The name the file is first written under, before it is renamed to [`VERSIONS_NAME`].
pub const VERSIONS_TMP: &str = "VERSIONS.tmp";

/// Magic at the start of a slot.
pub const VERSIONS_MAGIC: [u8; 8] = *b"PODVERS1";
/// Bytes of one slot.
pub const SLOT_LEN: usize = 32;
/// Offset of slot `i` is `i * SLOT_STRIDE`.
pub const SLOT_STRIDE: usize = 4096;
/// Length of the whole file: two slots.
pub const VERSIONS_FILE_LEN: usize = 2 * SLOT_STRIDE;

/// Offsets of the fields in a slot.
pub mod offsets {
    /// Magic.
    pub const MAGIC: usize = 0;
    /// Generation.
    pub const GENERATION: usize = 8;
    /// Highest number that may have been given.
    pub const RESERVED: usize = 16;
    /// crc32 of the bytes before it.
    pub const CRC: usize = 24;
    /// Zero padding.
    pub const PAD: usize = 28;
}

/// `(offset, size)` of every field of a slot, for the layout test against docs/design.md.
#[cfg(test)]
pub(crate) const FIELDS: &[(usize, usize)] = &[
    (offsets::MAGIC, 8),
    (offsets::GENERATION, 8),
    (offsets::RESERVED, 8),
    (offsets::CRC, 4),
    (offsets::PAD, 4),
];

/// One slot's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// Counts the reservations written; the newest valid slot has the highest.
    pub generation: u64,
    /// No sequence number above it was given while this was the newest reservation.
    pub reserved_through: u64,
}

/// Encodes a slot.
pub fn encode_slot(r: Reservation) -> [u8; SLOT_LEN] {
    let mut b = [0u8; SLOT_LEN];
    b[offsets::MAGIC..offsets::MAGIC + 8].copy_from_slice(&VERSIONS_MAGIC);
    b[offsets::GENERATION..offsets::GENERATION + 8].copy_from_slice(&r.generation.to_le_bytes());
    b[offsets::RESERVED..offsets::RESERVED + 8].copy_from_slice(&r.reserved_through.to_le_bytes());
    let crc = crc32fast::hash(&b[..offsets::CRC]);
    b[offsets::CRC..offsets::CRC + 4].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a slot: `Ok(None)` for a slot never written (all zero).
pub fn decode_slot(b: &[u8]) -> Result<Option<Reservation>, Corruption> {
    need(b, SLOT_LEN)?;
    let b = &b[..SLOT_LEN];
    if b.iter().all(|&x| x == 0) {
        return Ok(None);
    }
    if b[offsets::MAGIC..offsets::MAGIC + 8] != VERSIONS_MAGIC {
        let mut found = [0u8; 4];
        found.copy_from_slice(&b[..4]);
        return Err(Corruption::BadMagic {
            structure: "versions slot",
            found,
        });
    }
    let expected = get_u32(b, offsets::CRC);
    let got = crc32fast::hash(&b[..offsets::CRC]);
    if got != expected {
        return Err(Corruption::ChecksumMismatch { got, expected });
    }
    let pad = get_u32(b, offsets::PAD);
    if pad != 0 {
        return Err(Corruption::InvalidField {
            field: "versions slot padding",
            value: u64::from(pad),
        });
    }
    Ok(Some(Reservation {
        generation: get_u64(b, offsets::GENERATION),
        reserved_through: get_u64(b, offsets::RESERVED),
    }))
}

/// The newest reservation in a whole file, and which slot holds it. A slot that does not
/// decode is the one a crash tore while it was written (the other slot then holds the previous
/// reservation, still an upper bound of every number given); the file is corrupt only when no
/// slot holds a valid reservation (the file is written whole, with a valid first slot, before
/// it gets its name), and the error is the first slot's.
pub fn decode_file(bytes: &[u8]) -> Result<(usize, Reservation), Corruption> {
    need(bytes, VERSIONS_FILE_LEN)?;
    let first = decode_slot(&bytes[..SLOT_LEN]);
    let second = decode_slot(&bytes[SLOT_STRIDE..SLOT_STRIDE + SLOT_LEN]);
    match (first, second) {
        (Ok(Some(a)), Ok(Some(b))) if b.generation > a.generation => Ok((1, b)),
        (Ok(Some(a)), _) => Ok((0, a)),
        (_, Ok(Some(b))) => Ok((1, b)),
        (Err(e), _) => Err(e),
        (Ok(None), Err(e)) => Err(e),
        (Ok(None), Ok(None)) => Err(Corruption::InvalidField {
            field: "versions file without a reservation",
            value: 0,
        }),
    }
}

/// A whole new file holding `r` in its first slot.
pub fn encode_file(r: Reservation) -> Vec<u8> {
    let mut bytes = vec![0u8; VERSIONS_FILE_LEN];
    bytes[..SLOT_LEN].copy_from_slice(&encode_slot(r));
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(generation: u64, reserved_through: u64) -> Reservation {
        Reservation {
            generation,
            reserved_through,
        }
    }

    #[test]
    fn a_slot_round_trips() {
        let s = r(7, 1_700_000_000_000_000);
        assert_eq!(decode_slot(&encode_slot(s)), Ok(Some(s)));
        assert_eq!(decode_slot(&[0u8; SLOT_LEN]), Ok(None));
    }

    #[test]
    fn every_flipped_bit_of_a_slot_is_caught() {
        let good = encode_slot(r(3, 99));
        for bit in 0..SLOT_LEN * 8 {
            let mut b = good;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_slot(&b).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn the_newest_valid_slot_wins_and_a_torn_one_is_passed_over() {
        let mut f = encode_file(r(1, 100));
        assert_eq!(decode_file(&f), Ok((0, r(1, 100))));
        f[SLOT_STRIDE..SLOT_STRIDE + SLOT_LEN].copy_from_slice(&encode_slot(r(2, 200)));
        assert_eq!(decode_file(&f), Ok((1, r(2, 200))));
        // A later write of slot 0, torn: slot 1's reservation stands.
        f[..SLOT_LEN].copy_from_slice(&encode_slot(r(3, 300)));
        assert_eq!(decode_file(&f), Ok((0, r(3, 300))));
        f[5] ^= 0xff;
        assert_eq!(decode_file(&f), Ok((1, r(2, 200))));
        // A lower reservation with a higher generation (a clean close gives back what it
        // did not use) still wins.
        f[..SLOT_LEN].copy_from_slice(&encode_slot(r(4, 150)));
        assert_eq!(decode_file(&f), Ok((0, r(4, 150))));
    }

    #[test]
    fn a_file_without_a_valid_slot_is_corrupt() {
        assert!(decode_file(&vec![0u8; VERSIONS_FILE_LEN]).is_err());
        let mut f = encode_file(r(1, 100));
        f[0] ^= 1;
        assert!(matches!(decode_file(&f), Err(Corruption::BadMagic { .. })));
        assert!(matches!(
            decode_file(&f[..SLOT_STRIDE]),
            Err(Corruption::Truncated { .. })
        ));
    }
}
