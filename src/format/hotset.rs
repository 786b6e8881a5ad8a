//! `HOTSET`: the read cache's small values, recorded at close and read back at open by the warm
//! restart (docs/design.md, "The record of the hot set").
//!
//! A header (in the file's first 64 KiB, the rest of them zero), then from
//! [`HOTSET_ENTRIES_AT`] the entries one after the other. The header names the file it belongs to (the
//! device, inode and birth time of the store's directory and of the file itself, as the writer
//! found them after creating it): a copy of the file, or the file moved into another store's
//! directory, has other numbers and is not trusted (the birth times tell apart a new file or
//! directory given the inode number of a removed one, which ext4 does at once). Each entry carries its own crc; the header's count and
//! length say where the entries end.
//!
//! ```text
//! header:
//! offset  size  field
//!      0     8  magic "PODHOTS1"
//!      8     8  device of the store's directory
//!     16     8  inode of the store's directory
//!     24     8  birth time of the store's directory (ns; 0: not kept by the file system)
//!     32     8  inode of this file
//!     40     8  birth time of this file (ns; 0: not kept)
//!     48     8  entries
//!     56     8  bytes of entries (from offset 65536)
//!     64    28  zero
//!     92     4  crc32 of bytes 0..92
//! entry:
//!      0     4  crc32 of bytes 4..end
//!      4     4  length of the entry from byte 8 on
//!      8     8  file id of the record the value was read from
//!     16     8  offset of that record
//!     24     …  the value as the cache keeps it: sequence number (8), key length (2), key, value
//! ```

use super::{get_u32, get_u64, need};
use crate::error::Corruption;

/// The file's name in a store directory.
pub const HOTSET_NAME: &str = "HOTSET";
/// The name the file is written under, before it is renamed to [`HOTSET_NAME`].
pub const HOTSET_TMP: &str = "HOTSET.tmp";

/// Magic at the start of the file.
pub const HOTSET_MAGIC: [u8; 8] = *b"PODHOTS1";
/// Bytes of the header.
pub const HOTSET_HEADER_LEN: usize = 96;
/// Where the entries start: the header is alone in the file's first 64 KiB, so that a writer
/// with direct I/O writes it as one aligned block of any block size a store uses (at most
/// 64 KiB), after the entries.
pub const HOTSET_ENTRIES_AT: u64 = 64 << 10;
/// The longest entry a writer records (its value, as the cache keeps it, at most this less
/// [`HOT_ENTRY_HEAD_LEN`]): small values, those a reader gets from the cache whole; a reader
/// reads an entry in one piece of its buffer.
pub const HOT_ENTRY_MAX: usize = 32 << 10;
/// Bytes of an entry before the value it keeps.
pub const HOT_ENTRY_HEAD_LEN: usize = 24;

/// Offsets of the header's fields.
pub mod offsets {
    /// Magic.
    pub const MAGIC: usize = 0;
    /// Device of the store's directory.
    pub const DIR_DEV: usize = 8;
    /// Inode of the store's directory.
    pub const DIR_INO: usize = 16;
    /// Birth time of the store's directory.
    pub const DIR_BORN: usize = 24;
    /// Inode of the file.
    pub const FILE_INO: usize = 32;
    /// Birth time of the file.
    pub const FILE_BORN: usize = 40;
    /// Number of entries.
    pub const ENTRIES: usize = 48;
    /// Bytes of entries.
    pub const BYTES: usize = 56;
    /// Zero.
    pub const PAD: usize = 64;
    /// crc32 of the bytes before it.
    pub const CRC: usize = 92;
    /// An entry's crc32 of its bytes from 4 on.
    pub const ENTRY_CRC: usize = 0;
    /// An entry's length from byte 8 on.
    pub const ENTRY_LEN: usize = 4;
    /// An entry's file id.
    pub const ENTRY_FILE: usize = 8;
    /// An entry's record offset.
    pub const ENTRY_OFFSET: usize = 16;
}

/// `(offset, size)` of every header field, for the layout test against docs/design.md.
#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] = &[
    (offsets::MAGIC, 8),
    (offsets::DIR_DEV, 8),
    (offsets::DIR_INO, 8),
    (offsets::DIR_BORN, 8),
    (offsets::FILE_INO, 8),
    (offsets::FILE_BORN, 8),
    (offsets::ENTRIES, 8),
    (offsets::BYTES, 8),
    (offsets::PAD, 28),
    (offsets::CRC, 4),
];

/// `(offset, size)` of every fixed field of an entry, for the layout test.
#[cfg(test)]
pub(crate) const ENTRY_FIELDS: &[(usize, usize)] = &[
    (offsets::ENTRY_CRC, 4),
    (offsets::ENTRY_LEN, 4),
    (offsets::ENTRY_FILE, 8),
    (offsets::ENTRY_OFFSET, 8),
];

/// What a file of the hot set is bound to, and how much it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotSetHeader {
    /// Device of the store's directory.
    pub dir_dev: u64,
    /// Inode of the store's directory.
    pub dir_ino: u64,
    /// Birth time of the store's directory (ns; 0: unknown).
    pub dir_born: u64,
    /// Inode of the file.
    pub file_ino: u64,
    /// Birth time of the file (ns; 0: unknown).
    pub file_born: u64,
    /// Number of entries.
    pub entries: u64,
    /// Bytes of entries, from [`HOTSET_ENTRIES_AT`].
    pub bytes: u64,
}

impl HotSetHeader {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; HOTSET_HEADER_LEN] {
        let mut b = [0u8; HOTSET_HEADER_LEN];
        b[offsets::MAGIC..offsets::MAGIC + 8].copy_from_slice(&HOTSET_MAGIC);
        for (at, v) in [
            (offsets::DIR_DEV, self.dir_dev),
            (offsets::DIR_INO, self.dir_ino),
            (offsets::DIR_BORN, self.dir_born),
            (offsets::FILE_INO, self.file_ino),
            (offsets::FILE_BORN, self.file_born),
            (offsets::ENTRIES, self.entries),
            (offsets::BYTES, self.bytes),
        ] {
            b[at..at + 8].copy_from_slice(&v.to_le_bytes());
        }
        let crc = crc32fast::hash(&b[..offsets::CRC]);
        b[offsets::CRC..offsets::CRC + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header.
    pub fn decode(b: &[u8]) -> Result<HotSetHeader, Corruption> {
        need(b, HOTSET_HEADER_LEN)?;
        if b[offsets::MAGIC..offsets::MAGIC + 8] != HOTSET_MAGIC {
            let mut found = [0u8; 4];
            found.copy_from_slice(&b[..4]);
            return Err(Corruption::BadMagic {
                structure: "hot set header",
                found,
            });
        }
        let expected = get_u32(b, offsets::CRC);
        let got = crc32fast::hash(&b[..offsets::CRC]);
        if got != expected {
            return Err(Corruption::ChecksumMismatch { got, expected });
        }
        if b[offsets::PAD..offsets::CRC].iter().any(|&x| x != 0) {
            return Err(Corruption::InvalidField {
                field: "hot set header padding",
                value: 0,
            });
        }
        Ok(HotSetHeader {
            dir_dev: get_u64(b, offsets::DIR_DEV),
            dir_ino: get_u64(b, offsets::DIR_INO),
            dir_born: get_u64(b, offsets::DIR_BORN),
            file_ino: get_u64(b, offsets::FILE_INO),
            file_born: get_u64(b, offsets::FILE_BORN),
            entries: get_u64(b, offsets::ENTRIES),
            bytes: get_u64(b, offsets::BYTES),
        })
    }
}

/// One entry: the value the cache kept for the record at `offset` of file `file`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotEntry<'a> {
    /// File id of the record.
    pub file: u64,
    /// Offset of the record.
    pub offset: u64,
    /// The value as the cache keeps it (sequence number, key length, key, value).
    pub kept: &'a [u8],
}

/// Appends the entry for `kept`, the cache's bytes for the record at `offset` of `file`.
pub fn encode_entry(out: &mut Vec<u8>, file: u64, offset: u64, kept: &[u8]) {
    let start = out.len();
    let len = (HOT_ENTRY_HEAD_LEN - offsets::ENTRY_FILE + kept.len()) as u32;
    out.extend_from_slice(&[0u8; 4]);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&file.to_le_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(kept);
    let crc = crc32fast::hash(&out[start + offsets::ENTRY_LEN..]);
    out[start..start + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Bytes the entry of `kept` takes.
pub fn entry_len(kept_len: usize) -> usize {
    HOT_ENTRY_HEAD_LEN + kept_len
}

/// Decodes the entry at the start of `b`: the entry and its length in bytes; `Ok(None)` when
/// `b` ends before the entry does (the caller reads more), and an error for an entry whose crc
/// does not verify or whose length no entry of at most `max_len` bytes has.
pub fn decode_entry(b: &[u8], max_len: usize) -> Result<Option<(HotEntry<'_>, usize)>, Corruption> {
    if b.len() < offsets::ENTRY_FILE {
        return Ok(None);
    }
    let len = get_u32(b, offsets::ENTRY_LEN) as usize;
    let total = offsets::ENTRY_FILE + len;
    if total < HOT_ENTRY_HEAD_LEN || total > max_len {
        return Err(Corruption::InvalidField {
            field: "hot set entry length",
            value: len as u64,
        });
    }
    if b.len() < total {
        return Ok(None);
    }
    let expected = get_u32(b, offsets::ENTRY_CRC);
    let got = crc32fast::hash(&b[offsets::ENTRY_LEN..total]);
    if got != expected {
        return Err(Corruption::ChecksumMismatch { got, expected });
    }
    Ok(Some((
        HotEntry {
            file: get_u64(b, offsets::ENTRY_FILE),
            offset: get_u64(b, offsets::ENTRY_OFFSET),
            kept: &b[HOT_ENTRY_HEAD_LEN..total],
        },
        total,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> HotSetHeader {
        HotSetHeader {
            dir_dev: 2049,
            dir_ino: 77,
            dir_born: 1_700_000_000_123_456_789,
            file_ino: 1234,
            file_born: 1_800_000_000_000_000_001,
            entries: 2,
            bytes: 99,
        }
    }

    #[test]
    fn a_header_round_trips_and_any_flipped_bit_is_refused() {
        let b = header().encode();
        assert_eq!(HotSetHeader::decode(&b).unwrap(), header());
        for i in 0..HOTSET_HEADER_LEN * 8 {
            let mut d = b;
            d[i / 8] ^= 1 << (i % 8);
            assert!(HotSetHeader::decode(&d).is_err(), "bit {i}");
        }
        assert!(HotSetHeader::decode(&b[..HOTSET_HEADER_LEN - 1]).is_err());
    }

    #[test]
    fn entries_round_trip_a_cut_one_asks_for_more_and_a_damaged_one_is_refused() {
        let mut out = Vec::new();
        encode_entry(&mut out, 7, 4096, b"0123456789key-value");
        encode_entry(&mut out, 8, 64, b"");
        let (a, n) = decode_entry(&out, 1 << 20).unwrap().unwrap();
        assert_eq!(
            (a.file, a.offset, a.kept),
            (7, 4096, &b"0123456789key-value"[..])
        );
        assert_eq!(n, entry_len(19));
        let (b, m) = decode_entry(&out[n..], 1 << 20).unwrap().unwrap();
        assert_eq!(
            (b.file, b.offset, b.kept, m),
            (8, 64, &b""[..], entry_len(0))
        );
        for cut in 0..n {
            assert_eq!(decode_entry(&out[..cut], 1 << 20), Ok(None), "cut at {cut}");
        }
        for i in 0..n * 8 {
            let mut d = out.clone();
            d[i / 8] ^= 1 << (i % 8);
            // A flipped length may ask for more bytes than there are, or be refused; never
            // decoded as an entry.
            assert!(
                !matches!(decode_entry(&d, 1 << 20), Ok(Some((e, _))) if e == a),
                "bit {i}"
            );
        }
        assert!(decode_entry(&out, n - 1).is_err(), "longer than allowed");
    }
}
