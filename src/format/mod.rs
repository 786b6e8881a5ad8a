//! Pure codecs for every on-disk structure: no I/O, no panics on any input.
//!
//! Each structure has one module, its byte layout written once as named offsets (and drawn in
//! docs/design.md). Decoders take byte slices and return [`Corruption`] on anything a valid
//! writer would not have produced, so they can be fuzzed directly.
//!
//! All integers are little-endian.

pub mod catalog;
pub mod cursor;
pub mod footer;
pub mod frames;
pub mod hotset;
pub mod manifest;
pub mod prefix_record;
pub mod read_ahead;
pub mod record;
pub mod scan;
pub mod segment_header;
pub mod versions;

use crate::error::Corruption;

/// Longest key, in bytes. Keys are 1 to `MAX_KEY_LEN` bytes; others get
/// [`Error::EmptyKey`](crate::error::Error::EmptyKey) or [`Error::KeyTooLarge`](crate::error::Error::KeyTooLarge).
pub const MAX_KEY_LEN: usize = 4096;

/// Longest value, in bytes (4 GiB). Longer values get
/// [`Error::ValueTooLarge`](crate::error::Error::ValueTooLarge).
pub const MAX_VALUE_LEN: u64 = 1 << 32;

/// Version written into every segment header and every record without an expiry (a record
/// with one is of [`record::RECORD_VERSION_EXPIRES`]; footer trailers have versions of their
/// own: [`footer::FOOTER_V2`]).
pub const FORMAT_VERSION: u8 = 1;

/// Value bytes are checksummed in chunks of this size, so that a range read verifies only the
/// chunks it touches.
pub const CHUNK_SIZE: u64 = 4096;

/// Where encoders write their bytes: a vector, or a writer's aligned buffer (implemented next to
/// each writer in `io`), so that the one encoder of a structure serves every writer.
pub trait Sink {
    /// What a failed write returns ([`std::convert::Infallible`] for a vector).
    type Error;
    /// Appends `bytes`.
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), Self::Error>;
}

impl Sink for Vec<u8> {
    type Error = std::convert::Infallible;
    fn write_bytes(&mut self, bytes: &[u8]) -> Result<(), Self::Error> {
        self.extend_from_slice(bytes);
        Ok(())
    }
}

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

/// Reserved bytes must be zero: a writer of this version never sets them.
pub(crate) fn reserved_zero(bytes: &[u8], field: &'static str) -> Result<(), Corruption> {
    match bytes.iter().position(|&b| b != 0) {
        None => Ok(()),
        Some(i) => Err(Corruption::InvalidField {
            field,
            value: bytes[i] as u64,
        }),
    }
}

pub(crate) fn check_crc(got: u32, expected: u32) -> Result<(), Corruption> {
    if got == expected {
        Ok(())
    } else {
        Err(Corruption::ChecksumMismatch { got, expected })
    }
}

/// The byte diagrams in docs/design.md are the layouts' one description; this test keeps the
/// code's offsets and the document in step.
#[cfg(test)]
mod layout_doc {
    use std::collections::HashMap;

    /// design.md and the remote tier's part kept beside it (design-remote.md).
    const DESIGN: &str = concat!(
        include_str!("../../docs/design.md"),
        "\n",
        include_str!("../../docs/design-remote.md")
    );

    /// Numeric rows `offset size field` of every `layout:` block.
    fn doc_layouts() -> HashMap<String, Vec<(usize, usize)>> {
        let mut out = HashMap::new();
        let mut current: Option<String> = None;
        for line in DESIGN.lines() {
            let t = line.trim();
            if let Some(name) = t.strip_prefix("layout: ") {
                current = Some(name.to_string());
                out.insert(name.to_string(), Vec::new());
                continue;
            }
            if t.starts_with("```") {
                current = None;
                continue;
            }
            let Some(name) = &current else { continue };
            let mut cols = t.split_whitespace();
            let (Some(o), Some(sz)) = (cols.next(), cols.next()) else {
                continue;
            };
            if let (Ok(o), Ok(sz)) = (o.parse::<usize>(), sz.parse::<usize>()) {
                out.get_mut(name).expect("inserted").push((o, sz));
            }
        }
        out
    }

    fn check(name: &str, fields: &[(usize, usize)], fixed_len: usize) {
        let layouts = doc_layouts();
        let rows = layouts.get(name).unwrap_or_else(|| {
            panic!("docs/design.md and design-remote.md have no `layout: {name}` block")
        });
        let mut at = 0;
        for &(o, sz) in rows {
            assert_eq!(
                o, at,
                "{name}: row at {o} leaves a gap or overlaps (expected {at})"
            );
            at = o + sz;
        }
        assert_eq!(
            at, fixed_len,
            "{name}: rows cover {at} bytes, the code says {fixed_len}"
        );
        for f in fields {
            assert!(
                rows.contains(f),
                "{name}: field {f:?} of the code is not in the document"
            );
        }
    }

    #[test]
    fn design_doc_matches_code() {
        use super::{catalog, footer, frames, hotset, manifest, record, segment_header, versions};
        // (name of the `layout:` block, the code's (offset, size) fields, fixed length)
        type Layout = (&'static str, &'static [(usize, usize)], usize);
        let layouts: [Layout; 20] = [
            (
                "segment-header",
                segment_header::FIELDS,
                segment_header::SEGMENT_HEADER_LEN,
            ),
            ("record", record::FIELDS, record::RECORD_HEADER_LEN),
            (
                "record-expiring",
                record::FIELDS_EXPIRES,
                record::RECORD_HEADER_LEN + record::EXPIRES_LEN,
            ),
            (
                "footer-keys",
                footer::keys::HEADER_FIELDS,
                footer::KEYS_HEADER_LEN,
            ),
            (
                "key-block",
                footer::keys::BLOCK_FIELDS,
                footer::keys::BLOCK_HEADER_LEN,
            ),
            (
                "index-node",
                footer::tree::NODE_FIELDS,
                footer::NODE_HEADER_LEN,
            ),
            (
                "location-table",
                footer::locations::HEADER_FIELDS,
                footer::LOCATION_HEADER_LEN,
            ),
            (
                "location-entry",
                footer::locations::ENTRY_FIELDS,
                footer::locations::LOCATION_ENTRY_FIXED_LEN,
            ),
            (
                "footer-table",
                footer::v1::TABLE_FIELDS,
                footer::TABLE_HEADER_LEN,
            ),
            (
                "footer-entry",
                footer::v1::ENTRY_FIELDS,
                footer::ENTRY_FIXED_LEN,
            ),
            ("trailer", footer::TRAILER_FIELDS, footer::TRAILER_LEN),
            (
                "frame-table",
                frames::HEADER_FIELDS,
                frames::FRAME_TABLE_HEADER_LEN,
            ),
            ("frame-entry", frames::ENTRY_FIELDS, frames::FRAME_ENTRY_LEN),
            ("catalog-header", catalog::HEADER_FIELDS, catalog::SLOT_LEN),
            ("catalog-edit", catalog::EDIT_FIELDS, catalog::SLOT_LEN),
            ("versions-slot", versions::FIELDS, versions::SLOT_LEN),
            (
                "hotset-header",
                hotset::HEADER_FIELDS,
                hotset::HOTSET_HEADER_LEN,
            ),
            (
                "hotset-entry",
                hotset::ENTRY_FIELDS,
                hotset::HOT_ENTRY_HEAD_LEN,
            ),
            (
                "manifest-header",
                manifest::HEADER_FIELDS,
                manifest::MANIFEST_HEADER_LEN,
            ),
            (
                "manifest-entry",
                manifest::ENTRY_FIELDS,
                manifest::MANIFEST_ENTRY_LEN,
            ),
        ];
        for (name, fields, len) in layouts {
            check(name, fields, len);
        }
    }
}
