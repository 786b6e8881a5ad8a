//! Unsigned LEB128 varints, as footers of version 2 store their numbers: seven bits a byte,
//! least significant first, the high bit set on every byte but the last. A `u64` takes 1 to
//! 10 bytes; the decoder rejects encodings longer than 10 bytes, a 10th byte above 1 (a value
//! past `u64::MAX`) and non-minimal encodings (a last byte of zero after the first), so every
//! value has exactly one encoding.

use crate::error::Corruption;

/// Most bytes a `u64` takes.
pub const MAX_VARINT_LEN: usize = 10;

/// Appends `v`.
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bytes `v` takes.
pub fn len(v: u64) -> usize {
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Decodes the varint at `*pos` of `b` and moves `*pos` past it; `field` names it in errors.
pub fn get(b: &[u8], pos: &mut usize, field: &'static str) -> Result<u64, Corruption> {
    let mut v = 0u64;
    for i in 0..MAX_VARINT_LEN {
        let Some(&byte) = b.get(*pos + i) else {
            return Err(Corruption::Truncated {
                needed: (*pos + i + 1) as u64,
                available: b.len() as u64,
            });
        };
        let bits = (byte & 0x7f) as u64;
        if i == MAX_VARINT_LEN - 1 && byte > 1 {
            return Err(Corruption::InvalidField {
                field,
                value: byte as u64,
            });
        }
        v |= bits << (7 * i);
        if byte & 0x80 == 0 {
            if byte == 0 && i > 0 {
                // Not minimal: the same value has a shorter encoding.
                return Err(Corruption::InvalidField { field, value: v });
            }
            *pos += i + 1;
            return Ok(v);
        }
    }
    Err(Corruption::InvalidField {
        field,
        value: u64::MAX,
    })
}

/// [`get`] of a value that must be at most `max`.
pub fn get_max(
    b: &[u8],
    pos: &mut usize,
    max: u64,
    field: &'static str,
) -> Result<u64, Corruption> {
    let v = get(b, pos, field)?;
    if v > max {
        return Err(Corruption::InvalidField { field, value: v });
    }
    Ok(v)
}
