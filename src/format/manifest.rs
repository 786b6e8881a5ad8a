//! The remote manifest: which sealed files make up the store in its remote, written by one
//! writer epoch (docs/design-remote.md, "Remote tier"). One object per manifest,
//! `<prefix>/manifest/<number as 20 digits>`, created only if absent and never changed:
//!
//! ```text
//! header (72 bytes)
//! offset  size  field
//!      0     4  magic "PDMF"
//!      4     4  version (3; 1 and 2 are read too)
//!      8     8  number (the object's own, as in its name)
//!     16     8  epoch of the writer that wrote it
//!     24     8  writer id (random, drawn by the writer when it opened the prefix)
//!     32     8  highest sequence number its files may hold (restore's VERSIONS)
//!     40     8  next file id (above every id the store used)
//!     48     8  eviction watermark (0: nothing evicted)
//!     56     8  id of the file whose eviction edit carries it
//!     64     1  kind of that file (0 none, 1 log, 2 blob)
//!     65     1  flags (version 2; zero in version 1): bit 0 closed, bit 1 a claim,
//!                 bit 2 a claim after a close
//!     66     2  zero
//!     68     4  file count n
//! then n file entries (32 bytes each, ids strictly increasing):
//!      0     8  file id
//!      8     8  length in bytes
//!     16     8  epoch of the writer that uploaded it (part of its object name)
//!     24     4  crc32 of the whole file
//!     28     1  kind (1 log, 2 blob)
//!     29     1  flags (version 3; zero before): bit 0 the file's bytes are in this manifest
//!     30     2  zero
//! then the bytes of every file whose entry has bit 0 set, whole, in the entries' order
//! then a trailer: crc32 of every byte before it (u32)
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{get_u32, get_u64};
use crate::error::{Corruption, FileKind};

/// Magic at the start of a manifest.
pub const MANIFEST_MAGIC: [u8; 4] = *b"PDMF";
/// The version this build writes. Version 2 has version 1's layout but for the flags byte
/// (zero padding in version 1); it marks a prefix whose writers keep every writer's first
/// manifest and list after a create only when in doubt (docs/design-remote.md, "Fencing"),
/// so that a build that knows only version 1 (which deletes those manifests) refuses to open
/// it. Version 3 adds an entry's flags byte (zero padding before) and the bytes of the files
/// it marks after the entries (a flush of one round trip: docs/design-remote.md, "Files in
/// the manifest"), which a build that knows only version 2 would take for objects. All
/// three are read.
pub const MANIFEST_VERSION: u32 = 3;
/// The oldest version this build reads.
pub const MANIFEST_VERSION_MIN: u32 = 1;
/// Bytes of the header.
pub const MANIFEST_HEADER_LEN: usize = 72;
/// Bytes of one file entry.
pub const MANIFEST_ENTRY_LEN: usize = 32;
/// Bytes of the trailer (the crc32).
pub const MANIFEST_TRAILER_LEN: usize = 4;
/// Most files one manifest names (a bound on what a decoder allocates: 2^24 entries, 512 MiB).
pub const MAX_MANIFEST_FILES: u32 = 1 << 24;

/// Offsets of the header's fields.
pub mod header {
    /// Magic.
    pub const MAGIC: usize = 0;
    /// Version.
    pub const VERSION: usize = 4;
    /// The manifest's number.
    pub const NUMBER: usize = 8;
    /// The writer's epoch.
    pub const EPOCH: usize = 16;
    /// The writer's id.
    pub const WRITER: usize = 24;
    /// Highest sequence number covered.
    pub const SEQ: usize = 32;
    /// Next file id.
    pub const NEXT_ID: usize = 40;
    /// Eviction watermark.
    pub const EVICTED: usize = 48;
    /// Id of the file carrying the watermark.
    pub const EVICTED_ID: usize = 56;
    /// Kind of that file.
    pub const EVICTED_KIND: usize = 64;
    /// Flags ([`FLAG_CLOSED`](super::FLAG_CLOSED), [`FLAG_CLAIM`](super::FLAG_CLAIM),
    /// [`FLAG_AFTER_CLOSE`](super::FLAG_AFTER_CLOSE)).
    pub const FLAGS: usize = 65;
    /// Zero.
    pub const PAD: usize = 66;
    /// Number of file entries.
    pub const COUNT: usize = 68;
}

/// Offsets of a file entry's fields.
pub mod entry {
    /// File id.
    pub const ID: usize = 0;
    /// Length.
    pub const LENGTH: usize = 8;
    /// Epoch of its upload.
    pub const EPOCH: usize = 16;
    /// crc32 of the whole file.
    pub const CRC: usize = 24;
    /// Kind.
    pub const KIND: usize = 28;
    /// Flags ([`ENTRY_IN_MANIFEST`](super::ENTRY_IN_MANIFEST)).
    pub const FLAGS: usize = 29;
    /// Zero.
    pub const PAD: usize = 30;
}

/// `(offset, size)` of every header field, for the layout test against docs/design.md.
#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] = &[
    (header::MAGIC, 4),
    (header::VERSION, 4),
    (header::NUMBER, 8),
    (header::EPOCH, 8),
    (header::WRITER, 8),
    (header::SEQ, 8),
    (header::NEXT_ID, 8),
    (header::EVICTED, 8),
    (header::EVICTED_ID, 8),
    (header::EVICTED_KIND, 1),
    (header::FLAGS, 1),
    (header::PAD, 2),
    (header::COUNT, 4),
];

/// `(offset, size)` of every entry field, for the layout test.
#[cfg(test)]
pub(crate) const ENTRY_FIELDS: &[(usize, usize)] = &[
    (entry::ID, 8),
    (entry::LENGTH, 8),
    (entry::EPOCH, 8),
    (entry::CRC, 4),
    (entry::KIND, 1),
    (entry::FLAGS, 1),
    (entry::PAD, 2),
];

/// Flag: the writer wrote this manifest as it closed, and writes none after it.
pub const FLAG_CLOSED: u8 = 1;
/// Flag: a claim, the first manifest of its writer, created as it opened the prefix. Deletion
/// keeps it for good (unless [`FLAG_AFTER_CLOSE`]): it fences the writer before it.
pub const FLAG_CLAIM: u8 = 2;
/// Flag (with [`FLAG_CLAIM`] only): a claim made when the newest manifest was closed: no
/// writer can create the number after that one, so the claim need not be kept.
pub const FLAG_AFTER_CLOSE: u8 = 4;

/// Entry flag (version 3): the file's bytes follow the entries, in the manifest itself; its
/// object may not exist (yet).
pub const ENTRY_IN_MANIFEST: u8 = 1;

/// One sealed file a manifest names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestFile {
    /// Its id (its local name is `kind.file_name(id)`).
    pub id: u64,
    /// Log segment or blob file.
    pub kind: FileKind,
    /// Its length in bytes.
    pub length: u64,
    /// crc32 of all its bytes.
    pub crc: u32,
    /// The epoch of the writer that uploaded it: its object is
    /// `<prefix>/data/<epoch as 20 digits>/<file name>`.
    pub epoch: u64,
}

/// A decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Its number (manifests are numbered 1, 2, ...; the newest is the store).
    pub number: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// A number the writer drew at random when it opened the prefix: two writers that open
    /// it at once both take the same epoch for the same number, and only one of them creates
    /// that manifest; the id tells the other that the manifest it finds is not its own.
    pub writer: u64,
    /// No record in its files has a higher sequence number.
    pub max_seq: u64,
    /// Every file id the store used is below it.
    pub next_file_id: u64,
    /// The eviction watermark and the file whose eviction edit carried it: `(id, kind,
    /// watermark)`, as the catalog keeps it.
    pub evicted: Option<(u64, FileKind, u64)>,
    /// The files, by increasing id.
    pub files: Vec<ManifestFile>,
    /// Written by its writer as it closed ([`FLAG_CLOSED`]): the writer writes no manifest
    /// after it.
    pub closed: bool,
    /// Its writer's first, created as it opened the prefix ([`FLAG_CLAIM`]).
    pub claim: bool,
    /// A claim made when the newest manifest was closed ([`FLAG_AFTER_CLOSE`]).
    pub after_close: bool,
    /// The files whose bytes the manifest carries ([`ENTRY_IN_MANIFEST`]), by id: each is one
    /// of `files`, of its length and crc32. Such a file is in the remote once the manifest
    /// is, whether or not its object was ever uploaded.
    pub inline: BTreeMap<u64, Arc<[u8]>>,
}

impl Manifest {
    /// Whether deletion keeps it for good, whatever its age: a claim not made after a close,
    /// the mark that fences the writer before it (docs/design-remote.md, "Fencing").
    pub fn is_mark(&self) -> bool {
        self.claim && !self.after_close
    }
}

fn kind_code(kind: FileKind) -> u8 {
    match kind {
        FileKind::Log => 1,
        FileKind::Blob => 2,
    }
}

fn kind_of(code: u8, field: &'static str) -> Result<FileKind, Corruption> {
    match code {
        1 => Ok(FileKind::Log),
        2 => Ok(FileKind::Blob),
        other => Err(Corruption::InvalidField {
            field,
            value: u64::from(other),
        }),
    }
}

/// Encodes `m` (its files must be sorted by id, as [`decode`] checks).
pub fn encode(m: &Manifest) -> Vec<u8> {
    debug_assert!(m.files.windows(2).all(|w| w[0].id < w[1].id));
    let mut b = vec![0u8; MANIFEST_HEADER_LEN];
    b[header::MAGIC..header::MAGIC + 4].copy_from_slice(&MANIFEST_MAGIC);
    b[header::VERSION..header::VERSION + 4].copy_from_slice(&MANIFEST_VERSION.to_le_bytes());
    let put = |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    put(&mut b, header::NUMBER, m.number);
    put(&mut b, header::EPOCH, m.epoch);
    put(&mut b, header::WRITER, m.writer);
    put(&mut b, header::SEQ, m.max_seq);
    put(&mut b, header::NEXT_ID, m.next_file_id);
    if let Some((id, kind, through)) = m.evicted {
        put(&mut b, header::EVICTED, through);
        put(&mut b, header::EVICTED_ID, id);
        b[header::EVICTED_KIND] = kind_code(kind);
    }
    debug_assert!(!(m.closed && m.claim) && (m.claim || !m.after_close));
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    b[header::FLAGS] = flag(m.closed, FLAG_CLOSED)
        | flag(m.claim, FLAG_CLAIM)
        | flag(m.after_close, FLAG_AFTER_CLOSE);
    let count = m.files.len() as u32;
    b[header::COUNT..header::COUNT + 4].copy_from_slice(&count.to_le_bytes());
    for f in &m.files {
        let mut e = [0u8; MANIFEST_ENTRY_LEN];
        e[entry::ID..entry::ID + 8].copy_from_slice(&f.id.to_le_bytes());
        e[entry::LENGTH..entry::LENGTH + 8].copy_from_slice(&f.length.to_le_bytes());
        e[entry::EPOCH..entry::EPOCH + 8].copy_from_slice(&f.epoch.to_le_bytes());
        e[entry::CRC..entry::CRC + 4].copy_from_slice(&f.crc.to_le_bytes());
        e[entry::KIND] = kind_code(f.kind);
        if let Some(bytes) = m.inline.get(&f.id) {
            debug_assert_eq!(bytes.len() as u64, f.length);
            e[entry::FLAGS] = ENTRY_IN_MANIFEST;
        }
        b.extend_from_slice(&e);
    }
    debug_assert!(
        m.inline
            .keys()
            .all(|id| m.files.iter().any(|f| f.id == *id))
    );
    for f in &m.files {
        if let Some(bytes) = m.inline.get(&f.id) {
            b.extend_from_slice(bytes);
        }
    }
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a manifest; [`Corruption`] for anything [`encode`] would not have produced.
pub fn decode(b: &[u8]) -> Result<Manifest, Corruption> {
    let min = MANIFEST_HEADER_LEN + MANIFEST_TRAILER_LEN;
    if b.len() < min {
        return Err(Corruption::Truncated {
            needed: min as u64,
            available: b.len() as u64,
        });
    }
    if b[header::MAGIC..header::MAGIC + 4] != MANIFEST_MAGIC {
        let mut found = [0u8; 4];
        found.copy_from_slice(&b[..4]);
        return Err(Corruption::BadMagic {
            structure: "manifest",
            found,
        });
    }
    let body = &b[..b.len() - MANIFEST_TRAILER_LEN];
    let expected = get_u32(b, body.len());
    let got = crc32fast::hash(body);
    if got != expected {
        return Err(Corruption::ChecksumMismatch { got, expected });
    }
    let version = get_u32(b, header::VERSION);
    if !(MANIFEST_VERSION_MIN..=MANIFEST_VERSION).contains(&version) {
        return Err(Corruption::UnsupportedVersion { found: version });
    }
    let count = get_u32(b, header::COUNT);
    if count > MAX_MANIFEST_FILES {
        return Err(Corruption::InvalidField {
            field: "manifest file count",
            value: u64::from(count),
        });
    }
    let entries_end = MANIFEST_HEADER_LEN + count as usize * MANIFEST_ENTRY_LEN;
    if b.len() < entries_end + MANIFEST_TRAILER_LEN
        || (version < 3 && b.len() != entries_end + MANIFEST_TRAILER_LEN)
    {
        return Err(Corruption::InvalidField {
            field: "manifest length",
            value: b.len() as u64,
        });
    }
    let zero = |bytes: &[u8], field| match bytes.iter().find(|&&x| x != 0) {
        Some(&x) => Err(Corruption::InvalidField {
            field,
            value: u64::from(x),
        }),
        None => Ok(()),
    };
    zero(&b[header::PAD..header::PAD + 2], "manifest header padding")?;
    // Version 1's padding: no flag is known there.
    let known = match version {
        1 => 0,
        _ => FLAG_CLOSED | FLAG_CLAIM | FLAG_AFTER_CLOSE,
    };
    let flags = b[header::FLAGS];
    let claim = flags & FLAG_CLAIM != 0;
    // A claim is never written at close; "after a close" says something of claims only.
    if flags & !known != 0
        || (claim && flags & FLAG_CLOSED != 0)
        || (!claim && flags & FLAG_AFTER_CLOSE != 0)
    {
        return Err(Corruption::InvalidField {
            field: "manifest flags",
            value: u64::from(flags),
        });
    }
    let through = get_u64(b, header::EVICTED);
    let evicted_id = get_u64(b, header::EVICTED_ID);
    let evicted = match b[header::EVICTED_KIND] {
        0 if through == 0 && evicted_id == 0 => None,
        0 => {
            return Err(Corruption::InvalidField {
                field: "manifest eviction watermark without its file",
                value: through,
            });
        }
        code => Some((
            evicted_id,
            kind_of(code, "manifest eviction file kind")?,
            through,
        )),
    };
    let next_file_id = get_u64(b, header::NEXT_ID);
    let mut files = Vec::with_capacity(count as usize);
    let mut inline = BTreeMap::new();
    // The files' bytes carried after the entries: `data` is what is left of them.
    let mut data = &body[entries_end..];
    for i in 0..count as usize {
        let e = &b[MANIFEST_HEADER_LEN + i * MANIFEST_ENTRY_LEN..][..MANIFEST_ENTRY_LEN];
        zero(&e[entry::PAD..entry::PAD + 2], "manifest entry padding")?;
        let entry_flags = e[entry::FLAGS];
        let known = if version < 3 { 0 } else { ENTRY_IN_MANIFEST };
        if entry_flags & !known != 0 {
            return Err(Corruption::InvalidField {
                field: "manifest entry flags",
                value: u64::from(entry_flags),
            });
        }
        let id = get_u64(e, entry::ID);
        let previous = files.last().map(|f: &ManifestFile| f.id);
        if previous.is_some_and(|p| id <= p) || id >= next_file_id {
            return Err(Corruption::InvalidField {
                field: "manifest file id",
                value: id,
            });
        }
        let f = ManifestFile {
            id,
            kind: kind_of(e[entry::KIND], "manifest file kind")?,
            length: get_u64(e, entry::LENGTH),
            crc: get_u32(e, entry::CRC),
            epoch: get_u64(e, entry::EPOCH),
        };
        if entry_flags & ENTRY_IN_MANIFEST != 0 {
            let len = usize::try_from(f.length)
                .ok()
                .filter(|&len| len <= data.len())
                .ok_or(Corruption::Truncated {
                    needed: f.length,
                    available: data.len() as u64,
                })?;
            let (bytes, rest) = data.split_at(len);
            let got = crc32fast::hash(bytes);
            if got != f.crc {
                return Err(Corruption::ChecksumMismatch {
                    got,
                    expected: f.crc,
                });
            }
            inline.insert(id, Arc::from(bytes));
            data = rest;
        }
        files.push(f);
    }
    if !data.is_empty() {
        return Err(Corruption::InvalidField {
            field: "manifest length",
            value: b.len() as u64,
        });
    }
    Ok(Manifest {
        number: get_u64(b, header::NUMBER),
        epoch: get_u64(b, header::EPOCH),
        writer: get_u64(b, header::WRITER),
        max_seq: get_u64(b, header::SEQ),
        next_file_id,
        evicted,
        files,
        closed: flags & FLAG_CLOSED != 0,
        claim,
        after_close: flags & FLAG_AFTER_CLOSE != 0,
        inline,
    })
}

#[cfg(test)]
mod tests;

/// Digits of a manifest's number in its object's name (`<prefix>/manifest/<number>`): every
/// `u64`, so that names sort as numbers do.
pub const NUMBER_DIGITS: usize = 20;

/// The newest manifest among listed objects (`(name, size)`) under `under` (the prefix's
/// `manifest/`): its number and size. A name there that is not exactly [`NUMBER_DIGITS`]
/// digits is not a manifest and is passed over.
pub fn newest_listed<'a>(
    listed: impl IntoIterator<Item = (&'a str, u64)>,
    under: &str,
) -> Option<(u64, u64)> {
    listed
        .into_iter()
        .filter_map(|(name, size)| {
            let digits = name.strip_prefix(under)?;
            let ours = digits.len() == NUMBER_DIGITS && digits.bytes().all(|b| b.is_ascii_digit());
            ours.then(|| Some((digits.parse::<u64>().ok()?, size)))?
        })
        .max()
}

/// [`decode`] of the manifest read from the object named for `number`: also refused when the
/// manifest's own number is another (an object copied or renamed under the wrong name).
pub fn decode_numbered(bytes: &[u8], number: u64) -> Result<Manifest, Corruption> {
    let m = decode(bytes)?;
    if m.number != number {
        return Err(Corruption::InvalidField {
            field: "manifest number (not the one its name gives)",
            value: m.number,
        });
    }
    Ok(m)
}
