//! Pure codecs for every on-disk structure: no I/O, no panics on any input.
//!
//! Each structure has one module, its byte layout written once as named offsets (and drawn in
//! docs/design.md). Decoders take byte slices and return [`Corruption`] on anything a valid
//! writer would not have produced, so they can be fuzzed directly.
//!
//! All integers are little-endian.

pub mod footer;
pub mod record;
pub mod scan;
pub mod segment_header;

use crate::error::Corruption;

/// Version written into every segment header, record and footer trailer.
pub const FORMAT_VERSION: u8 = 1;

/// Value bytes are checksummed in chunks of this size, so that a range read verifies only the
/// chunks it touches.
pub const CHUNK_SIZE: u64 = 4096;

/// Rounds `n` up to a multiple of `align` (a power of two).
pub fn align_up(n: u64, align: u64) -> u64 {
    debug_assert!(align.is_power_of_two());
    (n + align - 1) & !(align - 1)
}

/// Rounds `n` down to a multiple of `align` (a power of two).
pub fn align_down(n: u64, align: u64) -> u64 {
    debug_assert!(align.is_power_of_two());
    n & !(align - 1)
}

pub(crate) fn need(bytes: &[u8], needed: usize) -> Result<(), Corruption> {
    if bytes.len() < needed {
        Err(Corruption::Truncated {
            needed: needed as u64,
            available: bytes.len() as u64,
        })
    } else {
        Ok(())
    }
}

pub(crate) fn get_u16(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}

pub(crate) fn get_u32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

pub(crate) fn get_u64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

pub(crate) fn magic_at(b: &[u8], off: usize) -> [u8; 4] {
    [b[off], b[off + 1], b[off + 2], b[off + 3]]
}

pub(crate) fn check_crc(got: u32, expected: u32) -> Result<(), Corruption> {
    if got == expected {
        Ok(())
    } else {
        Err(Corruption::ChecksumMismatch { got, expected })
    }
}
