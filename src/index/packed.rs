//! One index entry packed into 23 bytes: what the index keeps per live key.
//!
//! ```text
//! byte  0      3          8          13              18              23
//!       | fp   | file id  | offset   | stored length | value len     |
//!         u24    u40        u40        u40 (bit 39:    u40 (bit 39:
//!                                      compressed,     unresolved)
//!                                      bit 38:
//!                                      expires)
//! ```
//!
//! Integers are big-endian so that the fingerprint sorts as bytes. The key itself is not kept:
//! a reader checks it in the record it reads (`store/read.rs`), and its length is the length of
//! the key being looked up. Bounds: file ids below 2^40 (`segment::names::MAX_FILE_ID`), offsets
//! below 2^40 (a segment is far smaller), stored and value lengths up to 2^32
//! ([`crate::format::MAX_VALUE_LEN`]).
//!
//! The value length's top bit is spare (a value is at most 2^32 bytes), and holds the
//! *unresolved* flag: entries behind this one in its fingerprint run may be older versions of
//! its key, left there by a put that did not read to find its key's entry (a lazy put: see the
//! index module). Cleared once the entries behind it have been checked.
//!
//! The stored length's bit 38 is spare too (stored lengths stop at 2^32), and says the value
//! *expires*: its expiry is not packed (8 more bytes per key, whether or not anything expires)
//! but kept in the index's side table ([`super::expiry`]), by place. An entry unpacked here
//! has [`FLAG_EXPIRES`] in its flags and no `expires_at`: the index fills it in.

use super::IndexEntry;
use crate::format::record::{FLAG_COMPRESSED, FLAG_EXPIRES};

/// Bytes per packed entry.
pub const PACKED_LEN: usize = 23;

/// Largest value a 40-bit field holds.
pub const MAX_40: u64 = (1 << 40) - 1;

const COMPRESSED_BIT: u64 = 1 << 39;

/// In the stored length field: the value expires (its expiry is in the side table).
const EXPIRES_BIT: u64 = 1 << 38;

/// In the value length field: the entry is unresolved (see the module doc).
const UNRESOLVED_BIT: u64 = 1 << 39;

/// A packed entry.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Packed([u8; PACKED_LEN]);

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("fp", &self.fp())
            .field("entry", &self.unpack(0))
            .finish()
    }
}

fn put40(b: &mut [u8], v: u64) {
    debug_assert!(v <= MAX_40);
    b.copy_from_slice(&v.to_be_bytes()[3..]);
}

fn get40(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[3..].copy_from_slice(b);
    u64::from_be_bytes(w)
}

impl Packed {
    /// Packs `entry` under fingerprint `fp` (24 bits). The caller has checked the bounds
    /// ([`Packed::fits`]).
    pub fn pack(fp: u32, entry: &IndexEntry) -> Packed {
        debug_assert!(fp < 1 << 24 && Packed::fits(entry));
        let mut b = [0u8; PACKED_LEN];
        b[0..3].copy_from_slice(&fp.to_be_bytes()[1..]);
        put40(&mut b[3..8], entry.segment);
        put40(&mut b[8..13], entry.offset);
        let compressed = if entry.flags & FLAG_COMPRESSED != 0 {
            COMPRESSED_BIT
        } else {
            0
        };
        let expires = if entry.flags & FLAG_EXPIRES != 0 {
            EXPIRES_BIT
        } else {
            0
        };
        put40(&mut b[13..18], entry.stored_len | compressed | expires);
        put40(&mut b[18..23], entry.value_len);
        Packed(b)
    }

    /// True when every field of `entry` fits its packed width.
    pub fn fits(entry: &IndexEntry) -> bool {
        entry.segment <= MAX_40
            && entry.offset <= MAX_40
            && entry.stored_len < EXPIRES_BIT
            && entry.value_len < UNRESOLVED_BIT
    }

    /// True when entries behind this one in its run may be older versions of its key.
    pub fn unresolved(&self) -> bool {
        self.0[18] & 0x80 != 0
    }

    /// This entry with the unresolved flag set to `on`.
    pub fn with_unresolved(mut self, on: bool) -> Packed {
        if on {
            self.0[18] |= 0x80;
        } else {
            self.0[18] &= 0x7F;
        }
        self
    }

    /// True when the value expires: its expiry is in the index's side table.
    pub fn expires(&self) -> bool {
        get40(&self.0[13..18]) & EXPIRES_BIT != 0
    }

    /// The fingerprint.
    pub fn fp(&self) -> u32 {
        u32::from_be_bytes([0, self.0[0], self.0[1], self.0[2]])
    }

    /// File id and record offset: what names the record.
    pub fn place(&self) -> (u64, u64) {
        (get40(&self.0[3..8]), get40(&self.0[8..13]))
    }

    /// The entry, for a key of `key_len` bytes; if it expires, with [`FLAG_EXPIRES`] in its
    /// flags (which places its key and value) but no `expires_at` (the side table has it).
    pub fn unpack(&self, key_len: u32) -> IndexEntry {
        let stored = get40(&self.0[13..18]);
        let (segment, offset) = self.place();
        let mut flags = 0;
        if stored & COMPRESSED_BIT != 0 {
            flags |= FLAG_COMPRESSED;
        }
        if stored & EXPIRES_BIT != 0 {
            flags |= FLAG_EXPIRES;
        }
        IndexEntry {
            segment,
            offset,
            value_len: get40(&self.0[18..23]) & !UNRESOLVED_BIT,
            stored_len: stored & !(COMPRESSED_BIT | EXPIRES_BIT),
            key_len,
            flags,
            expires_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_at_the_bounds() {
        for (segment, offset, stored_len, value_len, flags) in [
            (0, 0, 0, 0, 0),
            (
                MAX_40,
                MAX_40,
                crate::format::MAX_VALUE_LEN,
                UNRESOLVED_BIT - 1,
                FLAG_COMPRESSED,
            ),
            (1, 64, 5, 5, 0),
            (7, 4096, 100, 9000, FLAG_COMPRESSED),
        ] {
            let e = IndexEntry {
                segment,
                offset,
                value_len,
                stored_len,
                key_len: 16,
                flags,
                expires_at: None,
            };
            assert!(Packed::fits(&e));
            for fp in [0, 1, 0xFF_FFFF, 0x12_3456] {
                let p = Packed::pack(fp, &e);
                assert_eq!(p.fp(), fp);
                assert_eq!(p.unpack(16), e);
                assert_eq!(p.place(), (segment, offset));
                assert!(!p.unresolved());
                // The flag leaves every field alone, and comes off again.
                let f = p.with_unresolved(true);
                assert!(f.unresolved());
                assert_eq!((f.fp(), f.unpack(16)), (fp, e));
                assert_eq!(f.with_unresolved(false), p);
            }
        }
        assert_eq!(std::mem::size_of::<Packed>(), PACKED_LEN);
    }

    #[test]
    fn the_expires_bit_leaves_the_other_fields_alone() {
        let e = IndexEntry {
            segment: MAX_40,
            offset: 4096,
            value_len: 9000,
            stored_len: crate::format::MAX_VALUE_LEN,
            key_len: 7,
            flags: FLAG_COMPRESSED | FLAG_EXPIRES,
            expires_at: Some(1_700_000_000_000),
        };
        assert!(Packed::fits(&e));
        let p = Packed::pack(0x12_3456, &e).with_unresolved(true);
        assert!(p.expires() && p.unresolved());
        // Unpacked with the flag but without the instant, which the side table keeps.
        assert_eq!(
            p.unpack(7),
            IndexEntry {
                expires_at: None,
                ..e
            }
        );
        let plain = Packed::pack(
            1,
            &IndexEntry {
                expires_at: None,
                flags: FLAG_COMPRESSED,
                ..e
            },
        );
        // The flag, not the instant, is what is packed: it places the key and value.
        assert!(!plain.expires());
        assert_eq!(plain.unpack(7).flags, FLAG_COMPRESSED);
    }

    #[test]
    fn out_of_range_fields_do_not_fit() {
        let ok = IndexEntry {
            segment: 1,
            offset: 64,
            value_len: 1,
            stored_len: 1,
            key_len: 1,
            flags: 0,
            expires_at: None,
        };
        assert!(!Packed::fits(&IndexEntry {
            segment: MAX_40 + 1,
            ..ok
        }));
        assert!(!Packed::fits(&IndexEntry {
            offset: MAX_40 + 1,
            ..ok
        }));
        assert!(!Packed::fits(&IndexEntry {
            stored_len: EXPIRES_BIT,
            ..ok
        }));
        assert!(!Packed::fits(&IndexEntry {
            value_len: UNRESOLVED_BIT,
            ..ok
        }));
    }
}
