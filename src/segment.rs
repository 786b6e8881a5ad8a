//! Segment files: naming, opening a sealed segment from its footer, recovering one that was not
//! sealed, and reading verified value ranges.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Corruption, Error, Result};
use crate::format::cursor::ByteSource;
use crate::format::footer::{FooterEntry, TRAILER_LEN, Trailer, decode_table, encode_footer};
use crate::format::record::{RecordHeader, write_record};
use crate::format::record::{RecordKind, RecordPlace, chunk_count, verify_chunks};
use crate::format::scan::{ScanError, scan_segment};
use crate::format::segment_header::SEGMENT_HEADER_LEN;
use crate::format::segment_header::SegmentHeader;
use crate::format::{CHUNK_SIZE, align_up};
use crate::io::aligned::BufPool;
use crate::io::file::{IoProfile, SegmentFile, list_dir, remove_file, sync_dir};
use crate::io::stream::AlignedStream;

mod stream;
pub use stream::BlobStream;

/// The two kinds of segment file. Both have the same format; they differ in how they are
/// written, and so in what an unsealed one means at open: `Log` (`seg-<id>.pod`, written through
/// the shared double buffer) and `Blob` (`blob-<id>.pod`, one value, written by its putting
/// thread and sealed before the put is acknowledged; one without a valid footer was never
/// acknowledged).
pub use crate::error::FileKind as SegmentKind;

/// File name of segment `id`.
pub fn file_name(id: u64, kind: SegmentKind) -> String {
    kind.file_name(id)
}

/// The kind of the segment file at `path` (a log segment unless its name says blob).
pub(crate) fn kind_of(path: &Path) -> SegmentKind {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_file_name)
        .map_or(SegmentKind::Log, |(_, kind)| kind)
}

/// The largest file id the store uses. Ids are handed out one by one from 1, so a store
/// never gets near it (2^63 files); a name above it in the directory was not made by the
/// store, and is refused at open ([`Error::FileIdOutOfRange`]) rather than let the next id
/// overflow or wrap.
pub const MAX_FILE_ID: u64 = i64::MAX as u64;

/// The id and kind in a segment file name: exactly what [`file_name`] writes (16 lowercase hex
/// digits), so that the name parsed is the name opened.
pub fn parse_file_name(name: &str) -> Option<(u64, SegmentKind)> {
    [SegmentKind::Log, SegmentKind::Blob]
        .into_iter()
        .find_map(|kind| {
            let hex = name.strip_prefix(kind.prefix())?.strip_suffix(".pod")?;
            let digits = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
            if hex.len() != 16 || !hex.bytes().all(|b| digits(&b)) {
                return None;
            }
            u64::from_str_radix(hex, 16).ok().map(|id| (id, kind))
        })
}

/// The segment files in `dir`, by ascending id. A name whose id is above [`MAX_FILE_ID`] is
/// refused with [`Error::FileIdOutOfRange`].
pub fn list(profile: &IoProfile, dir: &Path) -> Result<Vec<(u64, SegmentKind)>> {
    let mut ids = Vec::new();
    for name in list_dir(profile, dir)? {
        if let Some((id, kind)) = parse_file_name(&name) {
            if id > MAX_FILE_ID {
                return Err(Error::FileIdOutOfRange {
                    path: Some(dir.join(&name)),
                    id,
                });
            }
            ids.push((id, kind));
        }
    }
    ids.sort_unstable_by_key(|&(id, _)| id);
    Ok(ids)
}

/// `count` file ids from `next`, and the id after them, or [`Error::FileIdOutOfRange`] when
/// they would go past [`MAX_FILE_ID`].
pub fn allocate_ids(next: u64, count: u64) -> Result<(std::ops::Range<u64>, u64)> {
    match next.checked_add(count) {
        Some(end) if end <= MAX_FILE_ID.saturating_add(1) => Ok((next..end, end)),
        _ => Err(Error::FileIdOutOfRange {
            path: None,
            id: next,
        }),
    }
}

/// Reads of a segment file through its (possibly direct) file handle.
pub struct FileSource<'a> {
    /// The file.
    pub file: &'a SegmentFile,
    /// Bounce buffers for direct reads.
    pub pool: &'a BufPool,
    /// Direct-read alignment.
    pub read_align: u64,
    /// File length.
    pub len: u64,
}

impl ByteSource for FileSource<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file
            .read_exact_at(offset, buf, self.pool, self.read_align)
    }
}

/// How an existing segment was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// It had a valid footer.
    Sealed,
    /// It had none; its records were scanned, the tail after the last whole record cut, and a
    /// footer written.
    Recovered {
        /// One past the last record kept.
        data_end: u64,
        /// Where the scan stopped at bytes that were not a whole record (the torn tail).
        torn_at: Option<u64>,
        /// Offsets of records kept although their values failed verification.
        damaged: Vec<u64>,
        /// The footer was written. False when the disk was full: the entries are served from
        /// memory, and the next open recovers the segment again (to the same records).
        sealed: bool,
    },
}

/// An opened segment: its file and its entries (last record per key, in file order).
pub struct LoadedSegment {
    /// The file, open for reads.
    pub file: SegmentFile,
    /// Entries of the footer.
    pub entries: Vec<FooterEntry>,
    /// How it was opened.
    pub opened: Opened,
}

fn corruption(path: &Path, segment: u64, offset: u64, kind: Corruption) -> Error {
    Error::Corruption {
        file: kind_of(path),
        segment,
        offset,
        kind,
    }
}

/// Maps a failed read of segment bytes to the store's error: reading past the end of the file
/// means the file is shorter than its index says.
pub(crate) fn read_error(segment: u64, offset: u64, path: &Path, e: io::Error) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        corruption(
            path,
            segment,
            offset,
            Corruption::Truncated {
                needed: 1,
                available: 0,
            },
        )
    } else {
        Error::io("read segment", Some(path.to_path_buf()), e)
    }
}

/// What [`open`] found in a segment file.
pub enum Found {
    /// The file, sealed (or recovered and sealed now), and its entries.
    Loaded(LoadedSegment),
    /// The file holds no byte that is not zero (or none at all): nothing was ever written to it
    /// that reached the disk, so nothing in it can have been acknowledged (see [`open`]). The
    /// caller may remove it.
    Empty,
    /// The file cannot be used and holds bytes other than zeroes: the caller moves it to the
    /// quarantine directory and reports it; it is never removed.
    Unusable(QuarantineReason),
}

/// Why open set a file aside in `quarantine/` instead of using it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuarantineReason {
    /// Its segment header verifies but names another file id: a file renamed (or two swapped)
    /// outside the store. Its records are bound to that id, so it cannot be read under this
    /// name, and serving it under its own id could bring back a file that the store had
    /// removed (or one from another store).
    Misnamed {
        /// The id its header gives.
        header_id: u64,
    },
    /// A blob file without a valid footer whose one record is not whole and verified: a large
    /// put torn by a crash before it was acknowledged, or a file damaged in two places (its
    /// footer and its record), or bytes that were never a blob file.
    BlobNotWhole,
    /// A log segment whose header is all zero but which holds other bytes: the blocks of its
    /// first write reached the disk in part, the header's not (nothing in it was acknowledged).
    ZeroHeader,
    /// A log segment whose header verifies but which holds no whole record: its first write
    /// was torn by a crash (nothing in it was acknowledged), or its first record was damaged.
    NoWholeRecord,
}

impl std::fmt::Display for QuarantineReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuarantineReason::Misnamed { header_id } => {
                write!(
                    f,
                    "its header names file id {header_id:016x}, not the one in its name"
                )
            }
            QuarantineReason::BlobNotWhole => write!(
                f,
                "blob file without a valid footer whose record is not whole (a put torn by a \
                 crash, or damage)"
            ),
            QuarantineReason::ZeroHeader => write!(
                f,
                "log segment whose header is zero but which holds other bytes (a first write \
                 torn by a crash)"
            ),
            QuarantineReason::NoWholeRecord => write!(
                f,
                "log segment without a whole record (a first write torn by a crash, or damage)"
            ),
        }
    }
}

/// True when every byte of the `len` bytes of `src` is zero (or `len` is 0).
fn all_zero(src: &FileSource<'_>, id: u64, path: &Path) -> Result<bool> {
    const STEP: u64 = 1 << 20;
    let mut buf = vec![0u8; STEP.min(src.len) as usize];
    let mut at = 0;
    while at < src.len {
        let n = STEP.min(src.len - at) as usize;
        src.read_exact_at(at, &mut buf[..n])
            .map_err(|e| read_error(id, at, path, e))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

/// Opens segment `id` in `dir`: from its footer if sealed, else by recovery (which seals it).
/// Never removes or moves a file: it says what the caller should do with one it cannot use.
///
/// * [`Found::Empty`]: the file is empty or all zero bytes. Nothing that reached the disk was
///   ever written to it, and every acknowledged write waits for an fdatasync covering its
///   bytes (and a segment's header, written with its first record), so it holds nothing that
///   was acknowledged: a blob file created ahead and never used, or a log segment whose first
///   write did not reach the disk.
/// * [`Found::Unusable`]: anything else the store cannot use: a file whose header names
///   another id, a blob file without a valid footer whose record is not whole (its put was
///   acknowledged only after the whole file was durable, so a torn one never was; but two
///   faults, footer and record, look the same), a log segment with no whole record.
///
/// A blob file whose footer is damaged but whose record verifies is sealed again, like a
/// recovered log segment. A log segment whose header is damaged (not all zero) is an error.
pub fn open(
    dir: &Path,
    id: u64,
    kind: SegmentKind,
    profile: &IoProfile,
    pool: &BufPool,
) -> Result<Found> {
    let path = dir.join(file_name(id, kind));
    let file = SegmentFile::open(&path, profile)?;
    let len = file.len()?;
    let src = FileSource {
        file: &file,
        pool,
        read_align: profile.read_align,
        len,
    };
    if let Some(entries) = read_footer(&src, id, &path)? {
        return Ok(Found::Loaded(LoadedSegment {
            file,
            entries,
            opened: Opened::Sealed,
        }));
    }
    // A header that verifies but names another id: renamed or swapped outside the store.
    if len >= SEGMENT_HEADER_LEN as u64 {
        let mut head = [0u8; SEGMENT_HEADER_LEN];
        src.read_exact_at(0, &mut head)
            .map_err(|e| read_error(id, 0, &path, e))?;
        if let Ok(h) = SegmentHeader::decode(&head)
            && h.segment != id
        {
            return Ok(Found::Unusable(QuarantineReason::Misnamed {
                header_id: h.segment,
            }));
        }
    }
    let scanned = scan_segment(&src, id);
    if kind == SegmentKind::Blob {
        // A blob file without a valid footer was either torn by a crash before its put was
        // acknowledged, or damaged after. Its one record tells: whole and verified, it is kept
        // (sealed again below; at worst an unacknowledged put whose bytes all reached the disk
        // becomes visible whole). Anything else is set aside, never removed: a torn put was
        // never acknowledged, but a footer and a record damaged together look the same.
        let whole = matches!(&scanned, Ok(o) if o.records.len() == 1 && o.damaged.is_empty());
        if !whole {
            return Ok(if all_zero(&src, id, &path)? {
                Found::Empty
            } else {
                Found::Unusable(QuarantineReason::BlobNotWhole)
            });
        }
    }
    let outcome = match scanned {
        Ok(o) => o,
        Err(ScanError::Io(e)) => return Err(read_error(id, 0, &path, e)),
        Err(ScanError::Header(kind)) => {
            // A header of zeroes (or shorter than a header): the first write's header block never
            // reached the disk, so no record in the segment was acknowledged (acknowledgement
            // waits for a sync that covers the header). With nothing else in the file it is
            // removed; other blocks of that write may have reached the disk, and then it is set
            // aside. Any other header is damage, which is reported, not guessed at.
            let mut head = [0u8; SEGMENT_HEADER_LEN];
            let n = (len as usize).min(SEGMENT_HEADER_LEN);
            src.read_exact_at(0, &mut head[..n])
                .map_err(|e| read_error(id, 0, &path, e))?;
            if head[..n].iter().all(|&b| b == 0) {
                return Ok(if all_zero(&src, id, &path)? {
                    Found::Empty
                } else {
                    Found::Unusable(QuarantineReason::ZeroHeader)
                });
            }
            return Err(corruption(&path, id, 0, kind));
        }
    };
    if outcome.records.is_empty() {
        // No whole record: nothing in it was acknowledged, unless its first record was
        // damaged since. Set aside, not removed.
        return Ok(if all_zero(&src, id, &path)? {
            Found::Empty
        } else {
            Found::Unusable(QuarantineReason::NoWholeRecord)
        });
    }
    let entries = last_per_key(outcome.records);
    let block = outcome.header.block_size;
    // The footer goes after everything the file holds, on a block boundary: recovery never
    // writes over or cuts off bytes that are already there. The torn tail stays on disk, outside
    // the records the footer names (and so outside the index), where `data_end` ends them. A
    // crash while the footer is written leaves a file without a valid trailer, which is simply
    // recovered again, to the same records.
    let footer_at = align_up(len.max(outcome.data_end), block as u64);
    // What the scan read may not be durable yet (the process died, the machine did not): it is
    // made so before a footer names it, or a power loss during this recovery could keep the
    // footer and lose records it names.
    let footer = encode_footer(id, outcome.data_end, footer_at, block, &entries);
    // A full disk does not make the store unopenable: what the scan read is durable (the sync
    // before the footer worked), so its records can be served without a footer. The footer is
    // then written by a later open that has the space (this one's bytes, if any reached the
    // disk, are a torn footer, which recovery already reads as none).
    // A read-only store writes nothing: the same, without trying.
    let written = if profile.read_only {
        Err(FooterError::Footer(Error::ReadOnly))
    } else {
        write_footer_after_sync(&file, footer_at, &footer, block, profile)
    };
    let sealed = match written {
        Ok(()) => true,
        Err(FooterError::Footer(Error::ReadOnly)) => false,
        Err(FooterError::Footer(Error::StorageFull { .. })) => false,
        Err(FooterError::Sync(e) | FooterError::Footer(e)) => return Err(e),
    };
    Ok(Found::Loaded(LoadedSegment {
        file,
        entries,
        opened: Opened::Recovered {
            data_end: outcome.data_end,
            torn_at: outcome.stopped_at.map(|(at, _)| at),
            damaged: outcome.damaged.iter().map(|(at, _)| *at).collect(),
            sealed,
        },
    }))
}

/// The directory inside a store where open moves the files it cannot use.
pub const QUARANTINE_DIR: &str = "quarantine";

/// Moves the file `name` of the store directory `dir` into `dir/quarantine/` (created if
/// needed), under its own name or, if that is taken by an earlier quarantined file, with
/// `.1`, `.2`, ... appended; returns the new path.
///
/// Crash safety: the quarantine directory's own entry is made durable first (fsync of `dir`).
/// Then one rename, which the file system applies atomically: the file is under one name or
/// the other, never neither. Then an fsync of `quarantine/` (the new name is durable), then of
/// `dir` (the old name is gone durably). A crash between the two fsyncs can at worst leave both
/// names (two links to one inode): the next open finds the old name again, cannot use it
/// either, and moves it again under a new suffix. Nothing is ever unlinked.
pub fn quarantine(profile: &IoProfile, dir: &Path, name: &str) -> Result<PathBuf> {
    let qdir = dir.join(QUARANTINE_DIR);
    let storage = &profile.storage;
    storage
        .create_dir_all(&qdir)
        .map_err(|e| Error::io("create quarantine directory", Some(qdir.clone()), e))?;
    sync_dir(profile, dir)?;
    let taken = list_dir(profile, &qdir)?;
    let target = std::iter::once(name.to_string())
        .chain((1..).map(|i| format!("{name}.{i}")))
        .find(|n| !taken.contains(n))
        .expect("an unused name");
    let to = qdir.join(target);
    let from = dir.join(name);
    storage
        .rename(&from, &to)
        .map_err(|e| Error::io("move file to quarantine", Some(from.clone()), e))?;
    sync_dir(profile, &qdir)?;
    sync_dir(profile, dir)?;
    Ok(to)
}

/// The entries of the footer of the sealed segment `id` (`file`, `len` bytes long).
pub fn read_sealed_entries(
    file: &SegmentFile,
    id: u64,
    len: u64,
    profile: &IoProfile,
    pool: &BufPool,
) -> Result<Vec<FooterEntry>> {
    let src = FileSource {
        file,
        pool,
        read_align: profile.read_align,
        len,
    };
    read_footer(&src, id, file.path())?.ok_or(corruption(
        file.path(),
        id,
        len.saturating_sub(TRAILER_LEN as u64),
        // A footer this process wrote (or open verified) no longer verifies.
        Corruption::InvalidField {
            field: "footer of a sealed segment (file length)",
            value: len,
        },
    ))
}

/// Reads and verifies the footer; `None` when there is no valid one (an unsealed segment).
fn read_footer(src: &FileSource<'_>, id: u64, path: &Path) -> Result<Option<Vec<FooterEntry>>> {
    let len = src.len;
    if len < (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64 {
        return Ok(None);
    }
    let mut tail = [0u8; TRAILER_LEN];
    src.read_exact_at(len - TRAILER_LEN as u64, &mut tail)
        .map_err(|e| read_error(id, len - TRAILER_LEN as u64, path, e))?;
    let trailer = match Trailer::decode(&tail, len) {
        Ok(t) if t.segment == id => t,
        // No trailer, a torn one, or another segment's: not sealed (or its seal was lost).
        Ok(_) | Err(Corruption::BadMagic { .. } | Corruption::ChecksumMismatch { .. }) => {
            return Ok(None);
        }
        // A whole trailer (its crc verifies) that this build cannot use: refuse to guess, as
        // rescanning would, for a blob file, remove it.
        Err(kind) => return Err(corruption(path, id, len - TRAILER_LEN as u64, kind)),
    };
    let mut table = vec![0u8; trailer.table_len as usize];
    src.read_exact_at(trailer.table_offset, &mut table)
        .map_err(|e| read_error(id, trailer.table_offset, path, e))?;
    match decode_table(&trailer, &table) {
        Ok(entries) => Ok(Some(entries)),
        // A trailer that verifies but a table that does not: the footer write was torn (the
        // trailer reached the disk, part of the table did not). Treat as unsealed and rescan.
        Err(Corruption::ChecksumMismatch { .. }) => Ok(None),
        // A table whose crc verifies but which does not decode was written whole, by a writer
        // of another format: an error, not a torn footer.
        Err(kind) => Err(corruption(path, id, trailer.table_offset, kind)),
    }
}

/// Keeps each key's newest record (highest sequence number; of equal ones, the later in the
/// file), in file order.
///
/// Newest is not always last: a record copied forward by compaction keeps its old sequence
/// number, and may land after a newer write of its key that was appended first.
pub fn last_per_key(records: Vec<FooterEntry>) -> Vec<FooterEntry> {
    let mut newest: std::collections::HashMap<&[u8], usize> =
        std::collections::HashMap::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let slot = newest.entry(r.key.as_slice()).or_insert(i);
        if records[*slot].seq <= r.seq {
            *slot = i;
        }
    }
    let keep: Vec<bool> = records
        .iter()
        .enumerate()
        .map(|(i, r)| newest[r.key.as_slice()] == i)
        .collect();
    drop(newest);
    records
        .into_iter()
        .zip(keep)
        .filter_map(|(r, k)| k.then_some(r))
        .collect()
}

/// Where a record's stored value bytes lie: what [`read_value`] needs to read and verify them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSpan {
    /// Segment id.
    pub segment: u64,
    /// Offset of the record (what its chunk checksums are bound to).
    pub record_offset: u64,
    /// Offset of the first stored value byte.
    pub value_offset: u64,
    /// Number of stored value bytes.
    pub stored_len: u64,
}

/// Reads stored value bytes `[start, start + dst.len())` of the record `entry` into `dst`,
/// verifying every chunk it touches. `fetch(offset, buf)` reads file bytes of the entry's
/// segment. For a compressed value these are the stored (compressed) bytes:
/// the store's `compress::read_framed` decodes them.
///
/// Disk reads are proportional to the range: the covering chunks (4 KiB each) and their crc
/// table entries, in one read when they lie close together, in two otherwise.
pub fn read_value(
    entry: &ValueSpan,
    start: u64,
    dst: &mut [u8],
    mut fetch: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    let end = start + dst.len() as u64;
    debug_assert!(end <= entry.stored_len);
    let stored_len = entry.stored_len;
    let place = RecordPlace {
        segment: entry.segment,
        offset: entry.record_offset,
    };
    let vo = entry.value_offset;
    let c0 = start / CHUNK_SIZE;
    let c1 = end.div_ceil(CHUNK_SIZE);
    let data_start = c0 * CHUNK_SIZE;
    let data_end = (c1 * CHUNK_SIZE).min(stored_len);
    let table_at = vo + stored_len + 4 * c0;
    let table_len = (4 * (c1 - c0)) as usize;
    debug_assert_eq!(c1 - c0, chunk_count(data_end - data_start));

    let verify = |data: &[u8], table: &[u8]| {
        verify_chunks(place, c0, data, table).map_err(|(chunk, kind)| Error::Corruption {
            // The span does not say; the reader that holds the file names it (`in_file`).
            file: SegmentKind::Log,
            segment: entry.segment,
            offset: vo + chunk * CHUNK_SIZE,
            kind,
        })
    };
    let from = (start - data_start) as usize;
    let data_len = (data_end - data_start) as usize;
    // Close together (small values, ranges near the end of values up to ~3.5 MiB): one read
    // from the first chunk to the last table entry. Otherwise the table entries and the chunks
    // separately: a second round trip, but a 4 KiB range never reads more than 8 KiB (a 16 KiB
    // gap made the last 4 KiB of a 10 MiB value read 14.5 KiB).
    const JOIN_GAP: u64 = 3 << 10;
    let gap = stored_len - data_end + 4 * c0;
    if gap <= JOIN_GAP {
        let span = (table_at + table_len as u64 - (vo + data_start)) as usize;
        let mut scratch = vec![0u8; span];
        fetch(vo + data_start, &mut scratch)?;
        verify(&scratch[..data_len], &scratch[span - table_len..])?;
        dst.copy_from_slice(&scratch[from..from + dst.len()]);
        return Ok(());
    }
    let mut table = vec![0u8; table_len];
    fetch(table_at, &mut table)?;
    if data_start == start && data_end == end {
        fetch(vo + data_start, dst)?;
        return verify(dst, &table);
    }
    let mut scratch = vec![0u8; data_len];
    fetch(vo + data_start, &mut scratch)?;
    verify(&scratch, &table)?;
    dst.copy_from_slice(&scratch[from..from + dst.len()]);
    Ok(())
}

/// Path of segment `id` in `dir`.
pub fn path(dir: &Path, id: u64, kind: SegmentKind) -> PathBuf {
    dir.join(file_name(id, kind))
}

/// Offset of the record in a blob file.
pub const BLOB_RECORD_OFFSET: u64 = SEGMENT_HEADER_LEN as u64;

/// Bytes copied per write when streaming a blob file.
const BLOB_WRITE_CHUNK: usize = 1 << 20;

/// Creates empty blob files for `ids` and makes their names durable with one directory fsync.
/// A blob file is created ahead of its put, so that the put itself needs no directory fsync;
/// one that is never written has no footer and is removed at the next open.
pub fn create_blob_files(
    dir: &Path,
    ids: std::ops::Range<u64>,
    profile: &IoProfile,
) -> Result<Vec<(u64, SegmentFile)>> {
    let mut files = Vec::new();
    for id in ids {
        let path = path(dir, id, SegmentKind::Blob);
        match SegmentFile::create(&path, profile) {
            Ok(f) => files.push((id, f)),
            Err(e) => {
                for (id, f) in files {
                    drop(f);
                    let _ = remove_file(profile, &self::path(dir, id, SegmentKind::Blob));
                }
                return Err(e);
            }
        }
    }
    sync_dir(profile, dir)?;
    Ok(files)
}

/// The value of a blob file's record, as stored.
#[derive(Debug, Clone, Copy)]
pub struct BlobValue<'a> {
    /// The stored bytes: the value, or its frame table and frames when `flags` has
    /// [`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED).
    pub stored: &'a [u8],
    /// The value's length as put.
    pub value_len: u64,
    /// The record's flags.
    pub flags: u16,
}

/// Writes `value` (compressed or not) as the one record of the blob file `file` (created, name
/// durable, by [`create_blob_files`]) and makes it durable. On error the file is removed (best
/// effort).
pub fn write_blob(
    dir: &Path,
    file: SegmentFile,
    id: u64,
    seq: u64,
    key: &[u8],
    value: BlobValue<'_>,
    profile: &IoProfile,
) -> Result<SegmentFile> {
    match write_blob_record(&file, id, seq, key, value, profile) {
        Ok(()) => Ok(file),
        Err(e) => {
            drop(file);
            let _ = remove_file(profile, &path(dir, id, SegmentKind::Blob));
            Err(e)
        }
    }
}

/// Writes the header, the one record and the footer of blob file `id`, the footer after a sync.
fn write_blob_record(
    file: &SegmentFile,
    id: u64,
    seq: u64,
    key: &[u8],
    value: BlobValue<'_>,
    profile: &IoProfile,
) -> Result<()> {
    let block = profile.block_size;
    let mut stream = AlignedStream::new(file, 0, BLOB_WRITE_CHUNK, profile.mem_align, block as u64);
    stream.append(
        &SegmentHeader {
            segment: id,
            block_size: block,
        }
        .encode(),
    )?;
    let header = blob_record_header(key, value.flags, value.stored.len() as u64, seq);
    let entry = write_record(
        &mut stream,
        blob_record_place(id),
        &header,
        key,
        value.stored,
        value.value_len,
    )?;
    // The record is durable before a footer names it: the blocks of unsynced writes reach
    // the disk in any order, and a footer that did while a record block did not would
    // make a put that was never acknowledged a sealed, damaged value that hides the key's
    // acknowledged one. The footer starts on a block of its own (`finish` pads to one): one
    // lost block cannot take both the end of the value and the footer, which would make the
    // file look like a torn put.
    let footer_at = stream.finish()?;
    write_blob_footer(file, id, entry, footer_at, profile)
}

/// Where the one record of blob file `id` is.
fn blob_record_place(id: u64) -> RecordPlace {
    RecordPlace {
        segment: id,
        offset: BLOB_RECORD_OFFSET,
    }
}

/// The header of a blob file's put record.
fn blob_record_header(key: &[u8], flags: u16, stored_len: u64, seq: u64) -> RecordHeader {
    RecordHeader {
        kind: RecordKind::Put,
        flags,
        key_len: key.len() as u32,
        pad_before: 0,
        value_len: stored_len,
        seq,
    }
}

/// Seals blob file `id`, whose record (footer entry `entry`) is written up to `footer_at`: syncs
/// it, then writes the footer there and syncs again.
fn write_blob_footer(
    file: &SegmentFile,
    id: u64,
    entry: FooterEntry,
    footer_at: u64,
    profile: &IoProfile,
) -> Result<()> {
    let block = profile.block_size;
    let data_end = BLOB_RECORD_OFFSET + entry.record_len();
    let footer = encode_footer(id, data_end, footer_at, block, &[entry]);
    write_footer_after_sync(file, footer_at, &footer, block, profile).map_err(Error::from)
}

/// Makes everything written to `file` so far durable, then writes `footer` at `footer_at` (a
/// boundary of the segment's write block `block`) and makes it durable too: a footer never reaches the disk before the records
/// it names (the blocks of one unsynced write reach the disk in any order).
fn write_footer_after_sync(
    file: &SegmentFile,
    footer_at: u64,
    footer: &[u8],
    block: u32,
    profile: &IoProfile,
) -> Result<(), FooterError> {
    file.sync_data().map_err(FooterError::Sync)?;
    let block = block as u64;
    (|| {
        let mut stream =
            AlignedStream::new(file, footer_at, footer.len(), profile.mem_align, block);
        stream.append(footer)?;
        stream.finish()?;
        file.sync_data()
    })()
    .map_err(FooterError::Footer)
}

/// Which step of [`write_footer_after_sync`] failed.
enum FooterError {
    /// The sync of what was there before: those bytes may not be durable.
    Sync(Error),
    /// Writing or syncing the footer itself (the bytes before it are durable).
    Footer(Error),
}

impl From<FooterError> for Error {
    fn from(e: FooterError) -> Error {
        match e {
            FooterError::Sync(e) | FooterError::Footer(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_allocated_with_checked_arithmetic() {
        assert_eq!(allocate_ids(1, 8).unwrap(), (1..9, 9));
        assert_eq!(
            allocate_ids(MAX_FILE_ID, 1).unwrap(),
            (MAX_FILE_ID..MAX_FILE_ID + 1, MAX_FILE_ID + 1)
        );
        for (next, count) in [
            (MAX_FILE_ID, 2),
            (MAX_FILE_ID + 1, 1),
            (u64::MAX, 1),
            (3, u64::MAX),
        ] {
            assert!(
                matches!(allocate_ids(next, count), Err(Error::FileIdOutOfRange { path: None, id }) if id == next),
                "{next} + {count}"
            );
        }
    }

    #[test]
    fn only_the_names_the_store_writes_parse() {
        for id in [0, 1, 0xabc, MAX_FILE_ID, u64::MAX] {
            for kind in [SegmentKind::Log, SegmentKind::Blob] {
                assert_eq!(parse_file_name(&file_name(id, kind)), Some((id, kind)));
            }
        }
        for name in [
            "seg-000000000000000A.pod",
            "seg-+000000000000001.pod",
            "seg-1.pod",
            "blob-.pod",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
