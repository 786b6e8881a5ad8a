//! Looking inside store files, for tools (`podstore inspect`) and operators: what a segment or
//! blob file holds, from its header and footer ([`inspect_file`], [`Store::files`]), and its
//! records one by one ([`file_records`]). Works on a lone file copied out of a store. The
//! newest manifest of a store's remote tier and the objects it names ([`newest_manifest`]),
//! read without taking the prefix.
//!
//! [`Store::files`]: crate::Store::files

mod remote;

use std::path::Path;
use std::sync::Arc;

use crate::error::{Corruption, Error, FileKind, Result};
use crate::format::cursor::{Frames, RecordCursor, Verdict};
use crate::format::footer::FooterEntry;
use crate::format::read_ahead::{ReadAhead, SCAN_WINDOW};
use crate::format::record::{FLAG_BATCH_CONTINUES, FLAG_COMPRESSED, RecordKind};
use crate::format::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use crate::io::aligned::BufPool;
use crate::io::file::{IoProfile, SegmentFile};
use crate::io::storage::RealStorage;
use crate::segment::{self, FileSource, read_error};

pub use remote::{RemoteFile, RemoteManifest, newest_manifest};

/// One segment or blob file: what its header and footer say.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileInfo {
    /// Its file name (`seg-<id>.pod`, `blob-<id>.pod`, or whatever a lone file is called).
    pub name: String,
    /// Log segment or blob file (from its name; a log segment when the name says neither).
    pub kind: FileKind,
    /// The file id in its segment header (`None` when the header does not verify).
    pub id: Option<u64>,
    /// Its length in bytes.
    pub len: u64,
    /// Whether it ends in a footer that verifies. An unsealed file is the segment being
    /// written (or one a crash left, which open recovers).
    pub sealed: bool,
    /// The entries of its footer (one per key: its newest record), when sealed.
    pub footer_entries: u64,
    /// Of those, puts.
    pub puts: u64,
    /// Of those, tombstones.
    pub tombstones: u64,
    /// Bytes of the records its footer names (headers, keys, values, checksum tables).
    pub record_bytes: u64,
    /// Uncompressed bytes of the values its footer names.
    pub value_bytes: u64,
    /// Sequence numbers of the records its footer names (lowest, highest), when there are any.
    pub seq_range: Option<(u64, u64)>,
    /// Bytes of the values in it that the store still reads (only from [`Store::files`]:
    /// `None` for a lone file).
    ///
    /// [`Store::files`]: crate::Store::files
    pub live_bytes: Option<u64>,
    /// The file's other bytes, overwritten or deleted values among them (only from
    /// [`Store::files`](crate::Store::files)).
    pub dead_bytes: Option<u64>,
}

impl FileInfo {
    fn of(name: String, kind: FileKind, id: Option<u64>, len: u64) -> FileInfo {
        FileInfo {
            name,
            kind,
            id,
            len,
            sealed: false,
            footer_entries: 0,
            puts: 0,
            tombstones: 0,
            record_bytes: 0,
            value_bytes: 0,
            seq_range: None,
            live_bytes: None,
            dead_bytes: None,
        }
    }

    fn add_footer(&mut self, entries: &[FooterEntry]) {
        self.sealed = true;
        self.footer_entries = entries.len() as u64;
        for e in entries {
            match e.kind {
                RecordKind::Put => self.puts += 1,
                RecordKind::Tombstone => self.tombstones += 1,
            }
            self.record_bytes += e.record_len();
            self.value_bytes += e.value_len;
            let (lo, hi) = self.seq_range.unwrap_or((e.seq, e.seq));
            self.seq_range = Some((lo.min(e.seq), hi.max(e.seq)));
        }
    }
}

/// Put or tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordType {
    /// A value.
    Put,
    /// A delete.
    Tombstone,
}

/// One record of a file, as [`file_records`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordInfo {
    /// Its offset in the file.
    pub offset: u64,
    /// Put or tombstone.
    pub kind: RecordType,
    /// Its key.
    pub key: Vec<u8>,
    /// Its sequence number.
    pub seq: u64,
    /// The value's length as put.
    pub value_len: u64,
    /// The value's length as stored (compressed, when `compressed`).
    pub stored_len: u64,
    /// Stored as lz4 frames.
    pub compressed: bool,
    /// Not the last record of an atomic batch.
    pub batch_continues: bool,
    /// Its value does not verify: where, and what is wrong. (`None`: whole and verified.)
    pub damage: Option<(u64, Corruption)>,
}

/// The records of a file, and where and why reading them stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FileRecords {
    /// The records, in file order, up to the stop.
    pub records: Vec<RecordInfo>,
    /// Where reading stopped.
    pub end: u64,
    /// Why: `None` at the footer or the end of the written bytes; else bytes that are not a
    /// record (damage, or the torn tail a crash left in an unsealed file).
    pub stopped_by: Option<Corruption>,
}

/// A profile for reading a lone file with buffered I/O.
fn lone_profile() -> (IoProfile, BufPool) {
    let profile = IoProfile::buffered(Arc::new(RealStorage), true);
    (profile, BufPool::new(1 << 20, 4096))
}

/// What the header and footer of the segment or blob file at `path` say. The file may be a
/// lone copy out of a store: its kind comes from its name, its id from its header.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let store = podstore::Store::open(dir.path())?;
/// store.put("k", "v")?;
/// store.close()?;
/// let name = std::fs::read_dir(dir.path())?
///     .map(|e| e.unwrap().path())
///     .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
///     .unwrap();
/// let info = podstore::inspect::inspect_file(&name)?;
/// assert!(info.sealed);
/// assert_eq!((info.puts, info.tombstones), (1, 0));
/// # Ok(()) }
/// ```
pub fn inspect_file(path: impl AsRef<Path>) -> Result<FileInfo> {
    let path = path.as_ref();
    let (profile, pool) = lone_profile();
    let file = SegmentFile::open(path, &profile)?;
    info_of(&file, &profile, &pool)
}

/// [`inspect_file`] of an open file.
pub(crate) fn info_of(file: &SegmentFile, profile: &IoProfile, pool: &BufPool) -> Result<FileInfo> {
    let path = file.path();
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let kind = segment::kind_of(path);
    let len = file.len()?;
    let id = header_id(file, profile, pool, len)?;
    let mut info = FileInfo::of(name, kind, id, len);
    if let Some(id) = id
        && let Ok(entries) = segment::read_sealed_entries(file, id, len, profile, pool)
    {
        info.add_footer(&entries);
    }
    Ok(info)
}

fn header_id(
    file: &SegmentFile,
    profile: &IoProfile,
    pool: &BufPool,
    len: u64,
) -> Result<Option<u64>> {
    if len < SEGMENT_HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut head = [0u8; SEGMENT_HEADER_LEN];
    file.read_exact_at(0, &mut head, pool, profile.read_align)
        .map_err(|e| read_error(0, 0, file.path(), e))?;
    Ok(SegmentHeader::decode(&head).ok().map(|h| h.segment))
}

/// Every record of the segment or blob file at `path`, read one by one from its start (not
/// from its footer) and verified: a record whose value does not verify is listed with its
/// damage; reading stops at the footer, at the end of what was written, or at bytes that are
/// not a record. Works on a lone file copied out of a store.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let store = podstore::Store::open(dir.path())?;
/// store.put("a", "1")?;
/// store.delete("a")?;
/// store.close()?;
/// let seg = std::fs::read_dir(dir.path())?
///     .map(|e| e.unwrap().path())
///     .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
///     .unwrap();
/// let read = podstore::inspect::file_records(&seg)?;
/// assert_eq!(read.records.len(), 2);
/// assert_eq!(read.records[1].kind, podstore::inspect::RecordType::Tombstone);
/// assert!(read.stopped_by.is_none());
/// # Ok(()) }
/// ```
pub fn file_records(path: impl AsRef<Path>) -> Result<FileRecords> {
    let path = path.as_ref();
    let (profile, pool) = lone_profile();
    let file = SegmentFile::open(path, &profile)?;
    let len = file.len()?;
    let src = FileSource {
        file: &file,
        pool: &pool,
        read_align: profile.read_align,
        len,
    };
    let mut head = [0u8; SEGMENT_HEADER_LEN];
    if len < SEGMENT_HEADER_LEN as u64 {
        return Err(not_a_segment(
            path,
            Corruption::Truncated {
                needed: SEGMENT_HEADER_LEN as u64,
                available: len,
            },
        ));
    }
    file.read_exact_at(0, &mut head, &pool, profile.read_align)
        .map_err(|e| read_error(0, 0, path, e))?;
    let header = SegmentHeader::decode(&head).map_err(|kind| not_a_segment(path, kind))?;
    // Records in file order: from a window read in one go (`format::read_ahead`).
    let src = ReadAhead::new(&src, SCAN_WINDOW);
    let mut cursor = RecordCursor::new(
        &src,
        header.segment,
        header.block_size as u64,
        len,
        Frames::TableOnly,
    )
    .stopping_at_footer_table(true);
    let mut records = Vec::new();
    let (end, stopped_by) = loop {
        let (pos, verdict) = cursor
            .step()
            .map_err(|e| read_error(header.segment, 0, path, e))?;
        let (found, damage) = match verdict {
            Verdict::Whole(found) => (found, None),
            Verdict::ValueDamaged(found, d) => (found, Some((d.at, d.kind))),
            Verdict::Padding => continue,
            Verdict::End | Verdict::Zeroes | Verdict::FooterTable => break (pos, None),
            Verdict::BadPadding { first_nonzero } => {
                break (
                    pos,
                    Some(Corruption::InvalidField {
                        field: "padding",
                        value: first_nonzero,
                    }),
                );
            }
            Verdict::Truncated(kind) | Verdict::NotRecord(kind) => break (pos, Some(kind)),
        };
        let e = found.entry;
        records.push(RecordInfo {
            offset: e.offset,
            kind: match e.kind {
                RecordKind::Put => RecordType::Put,
                RecordKind::Tombstone => RecordType::Tombstone,
            },
            key: e.key,
            seq: e.seq,
            value_len: e.value_len,
            stored_len: e.stored_len,
            compressed: e.flags & FLAG_COMPRESSED != 0,
            batch_continues: e.flags & FLAG_BATCH_CONTINUES != 0,
            damage,
        });
    };
    Ok(FileRecords {
        records,
        end,
        stopped_by,
    })
}

fn not_a_segment(path: &Path, kind: Corruption) -> Error {
    Error::Corruption {
        file: segment::kind_of(path),
        segment: 0,
        offset: 0,
        kind,
    }
}

/// What a store's catalog says about one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Listed {
    /// Created, not (yet known to be) sealed: the segment being written, or a blob file whose
    /// put has not returned.
    Created,
    /// Sealed, this long.
    Sealed {
        /// Its length when sealed.
        len: u64,
    },
    /// Removed by the store (the catalog keeps the highest id, so that ids are never reused).
    Removed,
}

/// One file of a store's catalog ([`read_catalog`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CatalogEntry {
    /// Its file name.
    pub name: String,
    /// Its id.
    pub id: u64,
    /// Log segment or blob file.
    pub kind: FileKind,
    /// What the catalog says of it.
    pub listed: Listed,
}

/// The files the catalog at `path` lists (`path`: a store directory or its `CATALOG` file),
/// by id; `Ok(None)` when a store directory has no catalog (written by a version without one).
/// A catalog that does not verify is `Error::Damaged` naming it.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let store = podstore::Store::open(dir.path())?;
/// store.put("k", "v")?;
/// store.close()?;
/// let listed = podstore::inspect::read_catalog(dir.path())?.unwrap();
/// assert!(listed.iter().any(|f| matches!(f.listed, podstore::inspect::Listed::Sealed { .. })));
/// # Ok(()) }
/// ```
pub fn read_catalog(path: impl AsRef<Path>) -> Result<Option<Vec<CatalogEntry>>> {
    use crate::format::catalog::FileState;
    let path = path.as_ref();
    let (profile, _) = lone_profile();
    let (dir, file) = if profile.storage.list_dir(path).is_ok() {
        (path.to_path_buf(), path.join(segment::CATALOG_NAME))
    } else {
        let dir = path
            .parent()
            .map_or_else(Default::default, Path::to_path_buf);
        (dir, path.to_path_buf())
    };
    let Some(f) = crate::io::file::PlainFile::open(&file, &profile)? else {
        return Ok(None);
    };
    let bytes = f.read_all()?;
    let state = crate::format::catalog::replay(&bytes).map_err(|e| Error::Damaged {
        dir,
        files: vec![crate::error::DamagedFile {
            name: segment::CATALOG_NAME.to_string(),
            problem: crate::error::FileProblem::CatalogCorrupt {
                offset: e.offset,
                kind: e.kind,
            },
        }],
    })?;
    Ok(Some(
        state
            .files
            .iter()
            .map(|(&id, f)| CatalogEntry {
                name: segment::file_name(id, f.kind),
                id,
                kind: f.kind,
                listed: match f.state {
                    FileState::Created => Listed::Created,
                    FileState::Sealed { length } => Listed::Sealed { len: length },
                    FileState::Removed => Listed::Removed,
                },
            })
            .collect(),
    ))
}
