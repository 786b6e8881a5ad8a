//! Opening a segment or blob file at store open: from its footer, or by recovery (which seals
//! it), or set aside in `quarantine/` when it cannot be used.

use std::path::Path;

use super::blob::{FooterError, write_footer_after_sync};
use super::names::{SegmentKind, file_name};
use super::quarantine::QuarantineReason;
use super::read::{FileSource, corruption, read_error};
use crate::error::{Corruption, Error, Result};
use crate::format::align_up;
use crate::format::cursor::ByteSource;
use crate::format::footer::blocks::BlocksBuilder;
use crate::format::footer::locations::for_each_location_at;
use crate::format::footer::v1::encode_footer_v1;
use crate::format::footer::{
    BlockLocations, FOOTER_V1, FooterEntry, Location, LocationHeader, TRAILER_LEN, Trailer,
    decode_entries, encode_footer, for_each_location, key_section,
};
use crate::format::scan::{ScanError, scan_sealed_segment, scan_segment};
use crate::format::segment_header::SEGMENT_HEADER_LEN;
use crate::format::segment_header::SegmentHeader;
use crate::io::aligned::BufPool;
use crate::io::file::{IoProfile, SegmentFile};

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

/// An opened segment: its file and its records (last record per key; in key order when read
/// from a footer, in file order when recovered by a scan).
pub struct LoadedSegment {
    /// The file, open for reads.
    pub file: SegmentFile,
    /// What its footer (or the recovery scan) names.
    pub records: Records,
    /// How it was opened.
    pub opened: Opened,
}

/// The records of an opened segment.
pub enum Records {
    /// Whole entries, keys included (a footer that had to be checked whole, a recovery scan).
    Entries(Vec<FooterEntry>),
    /// The location table alone (a log segment whose seal the catalog records): keys stay on
    /// disk, in key order (`Location::ordinal`).
    Locations(Locations),
}

impl Records {
    /// Number of records.
    pub fn count(&self) -> usize {
        match self {
            Records::Entries(e) => e.len(),
            Records::Locations(l) => l.count,
        }
    }
}

/// A location table read and verified, kept as its bytes: [`Locations::for_each`] decodes it
/// again entry by entry, so that opening a store never holds a vector of every location of a
/// segment (56 bytes per key, millions per segment) on top of what the index builder notes.
pub struct Locations {
    trailer: Trailer,
    table: Vec<u8>,
    count: usize,
    /// Where each key block's entries are in the table (version 2), for listings.
    blocks: Option<Box<BlockLocations>>,
}

impl Locations {
    /// Verifies `table` (which `trailer` points at) whole.
    /// Maps where each key block's entries are as it goes ([`BlockLocations`]: 24 bytes per
    /// block of keys, so that a listing gives keys their versions without reading records).
    fn check(trailer: Trailer, table: Vec<u8>) -> std::result::Result<Locations, Corruption> {
        let mut count = 0;
        let header = match (trailer.version != FOOTER_V1)
            .then(|| LocationHeader::decode_header(&trailer, &table))
            .transpose()
        {
            Ok(h) => h,
            // The table's crc first, as `for_each_location_at` checks it: a damaged table (a
            // lost sector) is a checksum mismatch, which open treats as a lost footer, not as a
            // bad field of a table that verified.
            Err(kind) => {
                LocationHeader::decode(&trailer, &table)?;
                return Err(kind);
            }
        };
        let mut blocks = header.map(|h| BlocksBuilder::new(h.key_offset));
        for_each_location_at(&trailer, &table, |l, pos| {
            count += 1;
            if let Some(b) = &mut blocks {
                b.push(l.key_len as usize, l.offset, pos);
            }
        })?;
        let blocks = blocks
            .zip(header)
            .map(|(b, h)| Box::new(b.finish(&trailer, &h)));
        Ok(Locations {
            trailer,
            table,
            count,
            blocks,
        })
    }

    /// Where each key block's entries are in the table (a footer of version 2), taken.
    pub fn take_blocks(&mut self) -> Option<BlockLocations> {
        self.blocks.take().map(|b| *b)
    }

    /// Calls `f` with each location, in ascending key order.
    pub fn for_each(&self, f: impl FnMut(Location)) {
        for_each_location(&self.trailer, &self.table, f)
            .expect("a location table decodes as it did when it was checked");
    }

    /// The table's bytes, to read the next table into: open reads one per file into one
    /// buffer rather than allocate each anew, which the allocator might keep resident once
    /// freed (glibc raises its threshold for mapping large blocks to the size of each one freed,
    /// so that tables of a few tens of MiB came from the heap and stayed: 2.8 bytes per key of
    /// memory, measured at 10M keys).
    pub fn into_buffer(self) -> Vec<u8> {
        self.table
    }

    /// The locations, collected.
    #[cfg(test)]
    pub fn to_vec(&self) -> Vec<Location> {
        let mut out = Vec::with_capacity(self.count);
        self.for_each(|l| out.push(l));
        out
    }
}

/// What the catalog says a file should be, for [`open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// No catalog (a store written by a version without one, or rebuilt in salvage): the file
    /// is judged by its bytes alone.
    Unlisted,
    /// The catalog lists the file as created and not sealed: a log segment being written, or a
    /// blob file whose put was not acknowledged (a blob put is acknowledged only after its seal
    /// is in the catalog).
    Created,
    /// Listed as created, in a store opened alongside its writer
    /// ([`Options::alongside_writer`](crate::Options::alongside_writer)), which may be
    /// appending to it now: bytes that are not a whole record are its writes in flight, so the
    /// scan ends at the first record that does not verify (nothing after it is kept, nothing is
    /// reported damaged), and a file with no whole record yet is [`Found::Empty`].
    Writing,
    /// The catalog lists the file as sealed, `length` bytes long: its footer must verify.
    Sealed {
        /// Its length when it was sealed.
        length: u64,
    },
    /// Salvage of a file the catalog lists as sealed that is not what was sealed: recovered
    /// like an unlisted file, but nothing in it is torn (every write in it had been synced), so
    /// a damaged record is kept and reported, and the intact ones after it too.
    WasSealed,
}

/// What [`open`] found in a segment file.
pub enum Found {
    /// The file, sealed (or recovered and sealed now), and its entries.
    Loaded(LoadedSegment),
    /// The file holds no byte that is not zero (or none at all): nothing was ever written to it
    /// that reached the disk, so nothing in it can have been acknowledged (see [`open`]); or it
    /// is a blob file the catalog lists as not sealed whose record is not whole (a torn put,
    /// never acknowledged). The caller may remove it.
    Empty,
    /// The catalog lists the file as sealed and it is not what was sealed: nothing was written
    /// to it.
    Damaged(crate::error::FileProblem),
    /// The file cannot be used and holds bytes other than zeroes: the caller moves it to the
    /// quarantine directory and reports it; it is never removed.
    Unusable(QuarantineReason),
}

/// What [`restore_blob_footer`] rebuilt.
struct Restored {
    entries: Vec<FooterEntry>,
    opened: Opened,
}

/// The footer of a blob file the catalog lists as sealed, `length` bytes long, whose footer is
/// missing or does not verify: rebuilt and written again if its one record is whole and the
/// footer that sealing it writes ends exactly at `length` (the footer is derived from the
/// record: nothing is lost). `None` when that is not so (then it is damage).
fn restore_blob_footer(
    src: &FileSource<'_>,
    id: u64,
    length: u64,
    profile: &IoProfile,
    path: &Path,
) -> Result<Option<Restored>> {
    let Ok(outcome) = scan_sealed_segment(src, id) else {
        return Ok(None);
    };
    if outcome.records.len() != 1 || !outcome.damaged.is_empty() {
        return Ok(None);
    }
    let block = outcome.header.block_size;
    let footer_at = align_up(outcome.data_end, block as u64);
    let mut footer = encode_footer(id, outcome.data_end, footer_at, block, &outcome.records);
    if footer_at + footer.len() as u64 != length {
        // A blob file sealed by an earlier release ends in a footer of version 1, which can be
        // a block shorter (a key of nearly 4 KiB): rebuilt as it was.
        footer = encode_footer_v1(id, outcome.data_end, footer_at, block, &outcome.records);
    }
    if footer_at + footer.len() as u64 != length {
        return Ok(None);
    }
    let sealed = if profile.read_only {
        false
    } else {
        match write_footer_after_sync(src.file, footer_at, &footer, block, profile) {
            Ok(()) => true,
            Err(FooterError::Footer(Error::StorageFull { .. })) => false,
            Err(FooterError::Sync(e) | FooterError::Footer(e)) => return Err(e),
        }
    };
    log::warn!(
        "podstore: {}: footer rebuilt from its record (lost at a power loss, or damaged)",
        path.display()
    );
    Ok(Some(Restored {
        opened: Opened::Recovered {
            data_end: outcome.data_end,
            torn_at: None,
            damaged: Vec::new(),
            sealed,
        },
        entries: outcome.records,
    }))
}

/// The file id in the segment header of `src`, if it has one that verifies.
fn header_id(src: &FileSource<'_>, id: u64, path: &Path) -> Result<Option<u64>> {
    if src.len < SEGMENT_HEADER_LEN as u64 {
        return Ok(None);
    }
    let mut head = [0u8; SEGMENT_HEADER_LEN];
    src.read_exact_at(0, &mut head)
        .map_err(|e| read_error(id, 0, path, e))?;
    Ok(SegmentHeader::decode(&head).ok().map(|h| h.segment))
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
///
/// `expect` is what the catalog says. A file it lists as sealed must have its length and a
/// footer that verifies, else [`Found::Damaged`], and nothing is written to it. A blob file it
/// lists as created, whose record is not whole, is [`Found::Empty`]: its put was never
/// acknowledged.
pub fn open(
    dir: &Path,
    id: u64,
    kind: SegmentKind,
    profile: &IoProfile,
    pool: &BufPool,
    expect: Expect,
    table_buf: &mut Vec<u8>,
) -> Result<Found> {
    use crate::error::FileProblem;
    let path = dir.join(file_name(id, kind));
    let file = SegmentFile::open(&path, profile)?;
    let len = file.len()?;
    let src = FileSource {
        file: &file,
        pool,
        read_align: profile.read_align,
        len,
    };
    if let Expect::Sealed { length } = expect {
        // A log segment's seal is recorded once its footer is durable: its location table is
        // all open needs (at most 32 bytes per key; the keys stay on disk). A blob file's footer
        // is not synced before its seal (below): read whole, so that a torn one is found.
        if len == length
            && kind == SegmentKind::Log
            && let Some(locations) =
                read_locations_from(&src, id, &path, std::mem::take(table_buf))?
        {
            return Ok(Found::Loaded(LoadedSegment {
                file,
                records: Records::Locations(locations),
                opened: Opened::Sealed,
            }));
        }
        if len == length
            && let Some(entries) = read_footer(&src, id, &path)?
        {
            return Ok(Found::Loaded(LoadedSegment {
                file,
                records: Records::Entries(entries),
                opened: Opened::Sealed,
            }));
        }
        // A blob file's footer is not synced before its seal is recorded (its record is): a
        // power loss can take the footer, or part of it, and nothing else.
        if kind == SegmentKind::Blob
            && len <= length
            && let Some(restored) = restore_blob_footer(&src, id, length, profile, &path)?
        {
            return Ok(Found::Loaded(LoadedSegment {
                file,
                records: Records::Entries(restored.entries),
                opened: restored.opened,
            }));
        }
        return Ok(Found::Damaged(match header_id(&src, id, &path)? {
            Some(h) if h != id => FileProblem::Misnamed { header_id: h },
            _ if len != length => FileProblem::LengthChanged {
                expected: length,
                found: len,
            },
            _ => FileProblem::FooterDamaged,
        }));
    }
    let footer = match read_footer(&src, id, &path) {
        // The writer's seal in flight: its footer's bytes reach the file (or the disk, with
        // O_DIRECT) in no promised order, so a trailer can be seen before the table it names.
        // Not damage, and no footer yet: the records are scanned.
        Err(Error::Corruption { .. }) if expect == Expect::Writing => None,
        footer => footer?,
    };
    if let Some(entries) = footer {
        return Ok(Found::Loaded(LoadedSegment {
            file,
            records: Records::Entries(entries),
            opened: Opened::Sealed,
        }));
    }
    // A header that verifies but names another id: renamed or swapped outside the store.
    if let Some(h) = header_id(&src, id, &path)?
        && h != id
    {
        return Ok(Found::Unusable(QuarantineReason::Misnamed { header_id: h }));
    }
    let scanned = if expect == Expect::WasSealed {
        scan_sealed_segment(&src, id)
    } else {
        scan_segment(&src, id)
    };
    if kind == SegmentKind::Blob {
        // A blob file without a valid footer was either torn by a crash before its put was
        // acknowledged, or damaged after. Its one record tells: whole and verified, it is kept
        // (sealed again below; at worst an unacknowledged put whose bytes all reached the disk
        // becomes visible whole). Anything else is set aside, never removed: a torn put was
        // never acknowledged, but a footer and a record damaged together look the same.
        let whole = matches!(&scanned, Ok(o) if o.records.len() == 1 && o.damaged.is_empty());
        if !whole {
            // Listed as created, not sealed: its put was never acknowledged (a blob put is
            // acknowledged only once its seal is in the catalog), whatever the file holds.
            let unacknowledged = matches!(expect, Expect::Created | Expect::Writing);
            return Ok(if unacknowledged || all_zero(&src, id, &path)? {
                Found::Empty
            } else {
                Found::Unusable(QuarantineReason::BlobNotWhole)
            });
        }
    }
    let outcome = match scanned {
        Ok(o) => o,
        // Cut shorter while it was scanned: the writer sealed it, which cuts off the zeroes it
        // wrote ahead of its records. Opened again, from its footer, by the next attempt.
        Err(ScanError::Io(e))
            if expect == Expect::Writing && e.kind() == std::io::ErrorKind::UnexpectedEof =>
        {
            return Err(Error::StoreChanged {
                path: dir.to_path_buf(),
                attempts: 0,
            });
        }
        Err(ScanError::Io(e)) => return Err(read_error(id, 0, &path, e)),
        // The writer's first write to the file, not all of it written yet.
        Err(ScanError::Header(_)) if expect == Expect::Writing => return Ok(Found::Empty),
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
    let mut outcome = outcome;
    if expect == Expect::Writing
        && let Some(&(at, _)) = outcome.damaged.first()
    {
        // A record the writer is writing now (its bytes reach the page cache, or the disk, in
        // no promised order), not damage: the view ends before it. Cut before keeping the last
        // record of each key, so that a key written again after it keeps its earlier record.
        // Nothing after it can be needed by the catalog the view was taken with: an edit is
        // made only after a sync that covers every record written before it.
        outcome.records.retain(|r| r.offset < at);
        outcome.damaged.clear();
        outcome.data_end = at;
        outcome.stopped_at = None;
    }
    if outcome.records.is_empty() && expect == Expect::Writing {
        return Ok(Found::Empty);
    }
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
        records: Records::Entries(entries),
        opened: Opened::Recovered {
            data_end: outcome.data_end,
            torn_at: outcome.stopped_at.map(|(at, _)| at),
            damaged: outcome.damaged.iter().map(|(at, _)| *at).collect(),
            sealed,
        },
    }))
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

/// The locations of the footer of the sealed file `id` (`file`, `len` bytes long): its
/// location table only (for a footer of version 2, at most 32 bytes per key for small keys and
/// values, no keys; see [`crate::format::footer::decode_locations`]), in ascending key order.
///
/// The same rules as the whole footer's read ([`read_sealed_entries`]): `Ok(None)` when the file
/// has no valid trailer or its table fails its crc (a torn footer: the segment is unsealed),
/// an error for a trailer of another version or a table that verifies but does not decode.
///
/// It proves the location table, not the key section before it: a footer written without a
/// sync of its own (a blob file's) or not yet known to be durable (a log segment the catalog
/// does not list as sealed) may have a torn key section; such a file's footer is checked whole
/// (`read_sealed_entries`, or open's read of the footer) before it is trusted.
#[cfg(test)]
pub fn read_locations(
    file: &SegmentFile,
    id: u64,
    len: u64,
    profile: &IoProfile,
    pool: &BufPool,
) -> Result<Option<Vec<Location>>> {
    let src = FileSource {
        file,
        pool,
        read_align: profile.read_align,
        len,
    };
    Ok(read_locations_from(&src, id, file.path(), Vec::new())?.map(|l| l.to_vec()))
}

/// [`read_locations`] from `src`.
fn read_locations_from(
    src: &FileSource<'_>,
    id: u64,
    path: &Path,
    buf: Vec<u8>,
) -> Result<Option<Locations>> {
    let Some((trailer, table)) = read_trailer_and_table(src, id, path, buf)? else {
        return Ok(None);
    };
    let table_offset = trailer.table_offset;
    match Locations::check(trailer, table) {
        Ok(locations) => Ok(Some(locations)),
        Err(Corruption::ChecksumMismatch { .. }) => Ok(None),
        Err(kind) => Err(corruption(path, id, table_offset, kind)),
    }
}

/// The trailer (of segment `id`) and the table it points at; `None` when there is no valid
/// trailer (an unsealed segment).
fn read_trailer_and_table(
    src: &FileSource<'_>,
    id: u64,
    path: &Path,
    mut table: Vec<u8>,
) -> Result<Option<(Trailer, Vec<u8>)>> {
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
    table.clear();
    table.resize(trailer.table_len as usize, 0);
    src.read_exact_at(trailer.table_offset, &mut table)
        .map_err(|e| read_error(id, trailer.table_offset, path, e))?;
    Ok(Some((trailer, table)))
}

/// Reads and verifies the whole footer, keys included (in ascending key order for a footer of
/// version 2, in record order for one of version 1); `None` when there is no valid one (an
/// unsealed segment).
fn read_footer(src: &FileSource<'_>, id: u64, path: &Path) -> Result<Option<Vec<FooterEntry>>> {
    let Some((trailer, table)) = read_trailer_and_table(src, id, path, Vec::new())? else {
        return Ok(None);
    };
    let torn_or = |at: u64, kind: Corruption| match kind {
        // A trailer that verifies but a table (or key section) that does not: the footer write
        // was torn (the trailer reached the disk, part of the rest did not). Treat as unsealed
        // and rescan.
        Corruption::ChecksumMismatch { .. } => Ok(None),
        // The key section's magic is under no crc (its blocks are, each): missing where the
        // location table says the section starts, the section was torn in the same way.
        Corruption::BadMagic {
            structure: "footer key section",
            ..
        } => Ok(None),
        // Bytes whose crc verifies but which do not decode were written whole, by a writer of
        // another format: an error, not a torn footer.
        kind => Err(corruption(path, id, at, kind)),
    };
    let keys = match key_section(&trailer, &table) {
        Ok(None) => Vec::new(),
        Ok(Some((at, key_len))) => {
            let mut keys = vec![0u8; key_len as usize];
            src.read_exact_at(at, &mut keys)
                .map_err(|e| read_error(id, at, path, e))?;
            keys
        }
        Err(kind) => return torn_or(trailer.table_offset, kind),
    };
    match decode_entries(&trailer, &keys, &table) {
        Ok(entries) => Ok(Some(entries)),
        Err(kind) => torn_or(trailer.table_offset, kind),
    }
}

/// Keeps each key's newest record (highest sequence number; of equal ones, the later in the
/// file), in file order.
///
/// Newest is not always last: a record copied forward by compaction keeps its old sequence
/// number, and may land after a newer write of its key that was appended first.
///
/// Generic over owned records and references to them (a seal passes references: the active
/// segment's records may be shared with listings, `store::active_keys`).
pub fn last_per_key<R: std::borrow::Borrow<FooterEntry>>(records: Vec<R>) -> Vec<R> {
    let mut newest: std::collections::HashMap<&[u8], usize> =
        std::collections::HashMap::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        let r = r.borrow();
        let slot = newest.entry(r.key.as_slice()).or_insert(i);
        if records[*slot].borrow().seq <= r.seq {
            *slot = i;
        }
    }
    // Every key once (a segment of new keys, the common case): nothing to drop.
    if newest.len() == records.len() {
        return records;
    }
    // The records kept, marked in one pass over the map rather than looked up once per record
    // (a seal runs this under the append lock, over up to millions of records).
    let mut keep = vec![false; records.len()];
    for &i in newest.values() {
        keep[i] = true;
    }
    drop(newest);
    records
        .into_iter()
        .zip(keep)
        .filter_map(|(r, k)| k.then_some(r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::last_per_key;
    use crate::format::record::{FooterEntry, RecordKind};

    fn rec(key: &str, seq: u64, offset: u64) -> FooterEntry {
        let (kind, flags, stored_len, value_len) = (RecordKind::Put, 0, 1, 1);
        let key = key.as_bytes().to_vec();
        FooterEntry {
            key,
            kind,
            flags,
            offset,
            stored_len,
            value_len,
            seq,
            expires_at: None,
        }
    }

    #[test]
    fn each_keys_newest_record_stays_in_file_order() {
        // Every key once: all of them, as they were.
        let unique = vec![rec("b", 2, 0), rec("a", 1, 64), rec("c", 3, 128)];
        assert_eq!(last_per_key(unique.clone()), unique);
        // "a" rewritten; "b" copied forward with its old number after a newer write; "c" twice
        // with one number (the later record wins).
        let records = [
            rec("a", 1, 0),
            rec("b", 5, 64),
            rec("c", 3, 128),
            rec("a", 4, 192),
            rec("b", 2, 256),
            rec("c", 3, 320),
        ];
        let kept = last_per_key(records.iter().collect());
        let offsets: Vec<u64> = kept.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, [64, 192, 320]);
    }
}
