//! [`Store::verify`](crate::Store::verify): reads every segment file of a store and checks every
//! checksum and every footer against the records, without loading any value whole.
//!
//! Per segment it checks the segment header; the trailer, the footer table's crc and the zero
//! padding after it; then walks the records from the header to the data end the trailer names:
//! every record's header crc, every value chunk's crc (streamed a window at a time), a
//! compressed value's frame table and every frame (decompressed one at a time and checked
//! against its crc), the zero padding between write groups and the length each record declares
//! for it. Finally it checks the footer against the records: every entry names the record at its
//! offset with its key, kind, flags, sequence number and lengths, and every key's newest record is
//! in the footer.
//!
//! The walk reads records through the cursor recovery's scan reads them with
//! ([`crate::format::cursor`]); its policy differs: it reports every damage instead of stopping at
//! the first. Where a record's header is damaged, the walk resumes at the next record: the next
//! offset the footer names, or the next bytes that verify as a record header (its crc is bound to
//! its offset, so value bytes that happen to look like a header do not pass).
//!
//! Keys are judged by the index: a live key is affected when its record's header or value (its
//! bytes, its chunk crcs or, compressed, its frame table and frames) does not verify, so that
//! reads of it fail with [`Error::Corruption`]: a read checks the key in the record's header
//! (the index keeps only a fingerprint of it), so a damaged header fails the read too. The
//! damage is in the report with the record's key when the footer or index names it.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use crate::error::FileKind;
use crate::error::{Corruption, Error, Result};
use crate::format::cursor::{
    ByteSource, Frames, RecordCursor, ValueChecker, ValueDamage, Verdict, first_nonzero,
};
use crate::format::footer::{FooterEntry, TRAILER_LEN, Trailer, decode_entries, key_section};
use crate::format::read_ahead::{ReadAhead, SCAN_WINDOW};
use crate::format::record::RecordPlace;
use crate::format::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use crate::index::IndexEntry;
use crate::io::aligned::BufPool;
use crate::io::file::SegmentFile;
use crate::segment::FileSource;

/// What [`Store::verify`](crate::Store::verify) found.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let store = podstore::Store::open(dir.path())?;
/// store.put(b"k", &vec![3u8; 100_000])?;
/// let report = store.verify()?;
/// assert!(report.is_clean(), "{report:?}");
/// assert_eq!(report.records, 1);
/// for d in &report.damage {
///     eprintln!("{}", d.to_error()); // names the segment, the offset and what is wrong
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
#[must_use = "damage is reported inside Ok: check `is_clean()` or read `damage`"]
pub struct VerifyReport {
    /// Segment files read (log segments and blob files).
    pub segments: u64,
    /// Records found (whole or damaged); records whose header is damaged are not counted.
    pub records: u64,
    /// Bytes of segment files read and checked.
    pub bytes_checked: u64,
    /// Every damaged place, by segment and offset.
    pub damage: Vec<Damage>,
    /// Live keys whose value does not verify: reads of them return [`Error::Corruption`].
    /// Sorted.
    pub affected_keys: Vec<Vec<u8>>,
    /// Files the store's catalog lists that are missing from the directory now, or sealed
    /// files whose length changed (what a reopen would refuse the store for, with
    /// [`Error::Damaged`]). A file deleted while the store has it open is still read through
    /// the store's open handle, so only this list reports it.
    pub files: Vec<crate::error::DamagedFile>,
}

impl VerifyReport {
    /// True when nothing is damaged: no damaged structure, no missing or changed file.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty() && self.files.is_empty()
    }
}

/// One damaged place in a segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
    /// The kind of the file: with `segment`, its name (see
    /// [`FileKind::file_name`](crate::FileKind::file_name)).
    pub file: FileKind,
    /// Id of the segment file (`seg-<id>.pod` or `blob-<id>.pod`, 16 hex digits).
    pub segment: u64,
    /// Byte offset in the file where the damaged structure (or, in a value, the damaged 4 KiB
    /// chunk or frame) starts.
    pub offset: u64,
    /// Which structure is damaged.
    pub structure: Structure,
    /// What is wrong.
    pub kind: Corruption,
    /// Offset of the record the damage is in, when it is in a record (its header, key, value or
    /// checksums) and the record's place is known.
    pub record: Option<u64>,
    /// The key of that record, when its header verified or the footer names it.
    pub key: Option<Vec<u8>>,
}

impl Damage {
    /// The damage as the [`Error::Corruption`] a read of it returns.
    pub fn to_error(&self) -> Error {
        Error::Corruption {
            file: self.file,
            segment: self.segment,
            offset: self.offset,
            kind: self.kind.clone(),
        }
    }
}

/// The part of a segment file that a [`Damage`] is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Structure {
    /// The 64-byte header at the start of the file.
    SegmentHeader,
    /// A record's fixed part or key, or bytes where a record should start.
    RecordHeader,
    /// A value: its bytes, its chunk crc table or, for a compressed value, its frame table or a
    /// frame.
    Value,
    /// Zero padding between write groups or inside the footer, or a record that does not declare
    /// the padding before it.
    Padding,
    /// The footer's entry table, or an entry that does not match the records.
    FooterTable,
    /// The footer trailer (the file's last 64 bytes).
    Trailer,
}

/// A log segment without a footer: the one being written when `verify` started, or one that
/// recovery found unsealed and could not seal (a read-only open, a full disk). Only its first
/// `data_end` bytes are checked (flushed before the check; for a recovered one, where recovery
/// cut it after its last whole record: the torn tail beyond is what a crash leaves, already in
/// [`RecoveryReport`](crate::RecoveryReport), and no read reaches it).
pub(crate) struct UnsealedBound {
    pub id: u64,
    pub data_end: u64,
}

/// How verify reads: the bounce buffers of direct reads, their alignment, and the block size
/// to assume where a segment header cannot say.
pub(crate) struct Reading<'a> {
    pub pool: &'a BufPool,
    pub read_align: u64,
    pub default_block: u32,
}

/// Checks `segments` (id, file) and fills a report; `live` lists the live keys with their
/// index entries.
pub(crate) fn run(
    segments: &[(u64, Arc<SegmentFile>)],
    unsealed: &[UnsealedBound],
    reading: Reading<'_>,
    live: Vec<(Vec<u8>, IndexEntry)>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let mut total = 0;
    for (_, file) in segments {
        total += file.len()?;
    }
    let mut done = 0;
    progress(0, total);
    let Reading {
        pool,
        read_align,
        default_block,
    } = reading;
    let mut unknown: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
    let mut bad_values: HashMap<(u64, u64), ()> = HashMap::new();
    let mut by_id = HashMap::new();
    for (id, file) in segments {
        let len = file.len()?;
        let src = FileSource {
            file,
            pool,
            read_align,
            len,
        };
        let bound = unsealed
            .iter()
            .find(|a| a.id == *id)
            .map(|a| a.data_end.min(len));
        let mut check = SegmentCheck {
            src: &src,
            id: *id,
            kind: crate::segment::kind_of(file.path()),
            block: default_block as u64,
            report: &mut report,
            skipped: Vec::new(),
            bad_values: Vec::new(),
            window: Vec::new(),
        };
        check
            .run(bound)
            .map_err(|e| crate::segment::read_error(*id, 0, file.path(), e))?;
        done += len;
        progress(done.min(total), total);
        let skipped = std::mem::take(&mut check.skipped);
        if !skipped.is_empty() {
            unknown.insert(*id, skipped);
        }
        by_id.insert(*id, file.clone());
    }
    for d in &report.damage {
        // A damaged value, or a damaged record header: a read checks its key in the record's
        // header (the index keeps only a fingerprint), so a header that does not verify fails
        // the read as surely as a value that does not.
        if matches!(d.structure, Structure::Value | Structure::RecordHeader)
            && let Some(r) = d.record
        {
            bad_values.insert((d.segment, r), ());
        }
    }
    // Judge every live key by its own record.
    let mut affected = Vec::new();
    for (key, e) in live {
        if bad_values.contains_key(&(e.segment, e.offset)) {
            affected.push(key);
            continue;
        }
        // A record the walk skipped (its header is damaged): check its value from the index.
        let skipped = unknown
            .get(&e.segment)
            .is_some_and(|r| r.iter().any(|&(a, b)| a <= e.offset && e.offset < b));
        if !skipped {
            continue;
        }
        let file = &by_id[&e.segment];
        let src = FileSource {
            file,
            pool,
            read_align,
            len: file.len()?,
        };
        let place = RecordPlace {
            segment: e.segment,
            offset: e.offset,
        };
        let checked = ValueChecker::new(Frames::Decode)
            .check(
                &src,
                place,
                e.value_offset(),
                e.stored_len,
                e.is_compressed(),
            )
            .map_err(|err| crate::segment::read_error(e.segment, e.offset, file.path(), err))?;
        if let Err(ValueDamage { at, kind }) = checked.result {
            report.damage.push(Damage {
                file: crate::segment::kind_of(file.path()),
                segment: e.segment,
                offset: at,
                structure: Structure::Value,
                kind,
                record: Some(e.offset),
                key: Some(key.clone()),
            });
            affected.push(key);
        }
    }
    affected.sort();
    affected.dedup();
    report.affected_keys = affected;
    Ok(report)
}

/// The checks of one segment file.
struct SegmentCheck<'a, S: ByteSource + ?Sized> {
    src: &'a S,
    id: u64,
    kind: FileKind,
    block: u64,
    report: &'a mut VerifyReport,
    /// Byte ranges the record walk could not read as records (damaged headers).
    skipped: Vec<(u64, u64)>,
    /// Offsets of records whose values do not verify.
    bad_values: Vec<u64>,
    window: Vec<u8>,
}

/// The footer, as far as it verified.
struct Footer {
    trailer: Trailer,
    entries: Option<Vec<FooterEntry>>,
}

impl<S: ByteSource + ?Sized> SegmentCheck<'_, S> {
    fn damage(
        &mut self,
        offset: u64,
        structure: Structure,
        kind: Corruption,
        record: Option<u64>,
        key: Option<&[u8]>,
    ) {
        self.report.damage.push(Damage {
            file: self.kind,
            segment: self.id,
            offset,
            structure,
            kind,
            record,
            key: key.map(<[u8]>::to_vec),
        });
    }

    /// Checks the segment; `active_end` bounds a segment without a footer ([`UnsealedBound`]).
    fn run(&mut self, active_end: Option<u64>) -> io::Result<()> {
        let len = active_end.unwrap_or(self.src.len());
        self.report.segments += 1;
        self.report.bytes_checked += len;
        if len < SEGMENT_HEADER_LEN as u64 {
            let kind = Corruption::Truncated {
                needed: SEGMENT_HEADER_LEN as u64,
                available: len,
            };
            self.damage(0, Structure::SegmentHeader, kind, None, None);
            return Ok(());
        }
        let mut head = [0u8; SEGMENT_HEADER_LEN];
        self.src.read_exact_at(0, &mut head)?;
        let header_block = match SegmentHeader::decode(&head) {
            Ok(h) if h.segment == self.id => Some(h.block_size),
            Ok(h) => {
                let kind = Corruption::InvalidField {
                    field: "segment id",
                    value: h.segment,
                };
                self.damage(0, Structure::SegmentHeader, kind, None, None);
                None
            }
            Err(kind) => {
                self.damage(0, Structure::SegmentHeader, kind, None, None);
                None
            }
        };
        let footer = match active_end {
            Some(_) => None,
            None => self.footer(len)?,
        };
        if let Some(b) = header_block.or(footer.as_ref().map(|f| f.trailer.block_size)) {
            self.block = b as u64;
        }
        let end = match &footer {
            Some(f) => f.trailer.data_end,
            // Without a trailer, walk up to where the footer table starts.
            None if active_end.is_some() => len,
            None => len.saturating_sub(TRAILER_LEN as u64),
        };
        let entries = footer.as_ref().and_then(|f| f.entries.as_deref());
        let last = self.walk(end, footer.is_some() || active_end.is_some(), entries)?;
        if let Some(entries) = entries {
            self.cross_check(
                entries,
                &last,
                footer.as_ref().map_or(0, |f| f.trailer.table_offset),
            );
        }
        Ok(())
    }

    /// Reads and checks the trailer, the table and the padding between them.
    fn footer(&mut self, len: u64) -> io::Result<Option<Footer>> {
        let at = len.saturating_sub(TRAILER_LEN as u64);
        if len < (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64 {
            let kind = Corruption::Truncated {
                needed: (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64,
                available: len,
            };
            self.damage(at, Structure::Trailer, kind, None, None);
            return Ok(None);
        }
        let mut tail = [0u8; TRAILER_LEN];
        self.src.read_exact_at(at, &mut tail)?;
        let trailer = match Trailer::decode(&tail, len) {
            Ok(t) if t.segment == self.id => t,
            Ok(t) => {
                let kind = Corruption::InvalidField {
                    field: "trailer segment id",
                    value: t.segment,
                };
                self.damage(at, Structure::Trailer, kind, None, None);
                return Ok(None);
            }
            Err(kind) => {
                self.damage(at, Structure::Trailer, kind, None, None);
                return Ok(None);
            }
        };
        let mut table = vec![0u8; trailer.table_len as usize];
        self.src.read_exact_at(trailer.table_offset, &mut table)?;
        // Version 2: the key section before the table (keys, in blocks, and their index).
        let keys = match key_section(&trailer, &table) {
            Ok(Some((at, len))) => {
                let mut keys = vec![0u8; len as usize];
                self.src.read_exact_at(at, &mut keys)?;
                Ok(keys)
            }
            Ok(None) => Ok(Vec::new()),
            Err(kind) => Err(kind),
        };
        let entries = match keys.and_then(|keys| decode_entries(&trailer, &keys, &table)) {
            Ok(e) => Some(e),
            Err(kind) => {
                self.damage(
                    trailer.table_offset,
                    Structure::FooterTable,
                    kind,
                    None,
                    None,
                );
                None
            }
        };
        drop(table);
        let pad_from = trailer.table_offset + trailer.table_len;
        if let Some(bad) = first_nonzero(self.src, pad_from, at, &mut self.window)? {
            let kind = Corruption::InvalidField {
                field: "footer padding",
                value: bad - pad_from,
            };
            self.damage(bad, Structure::Padding, kind, None, None);
        }
        Ok(Some(Footer { trailer, entries }))
    }

    /// Walks the records in `[SEGMENT_HEADER_LEN, end)`. With `bounded`, `end` is known to be
    /// the data end; otherwise (the trailer is lost) the walk stops at the footer table's magic.
    /// Returns each key's newest record (see [`crate::segment::last_per_key`]).
    fn walk(
        &mut self,
        end: u64,
        bounded: bool,
        entries: Option<&[FooterEntry]>,
    ) -> io::Result<HashMap<Vec<u8>, FooterEntry>> {
        let mut walked: Vec<FooterEntry> = Vec::new();
        let mut named: Vec<u64> =
            entries.map_or(Vec::new(), |e| e.iter().map(|e| e.offset).collect());
        named.sort_unstable();
        // Records in file order: from a window read in one go (`format::read_ahead`).
        let src = ReadAhead::new(self.src, SCAN_WINDOW);
        let mut cursor = RecordCursor::new(&src, self.id, self.block, end, Frames::Decode)
            .stopping_at_footer_table(!bounded);
        loop {
            let (pos, verdict) = cursor.step()?;
            let (found, damage) = match verdict {
                Verdict::End | Verdict::FooterTable => break,
                Verdict::Padding => continue,
                // Zeroes where a record must start (padding never starts a block, never follows
                // padding), or padding that is not all zero.
                Verdict::Zeroes | Verdict::BadPadding { .. } => {
                    let (at, structure, kind) = match verdict {
                        Verdict::BadPadding { first_nonzero: at } => (
                            at,
                            Structure::Padding,
                            Corruption::InvalidField {
                                field: "padding",
                                value: at - pos,
                            },
                        ),
                        _ => (
                            pos,
                            Structure::RecordHeader,
                            Corruption::BadMagic {
                                structure: "record",
                                found: [0; 4],
                            },
                        ),
                    };
                    self.damage(at, structure, kind, None, None);
                    if self.resync(&mut cursor, pos, pos, &named)? {
                        continue;
                    }
                    break;
                }
                Verdict::Truncated(kind) => {
                    self.damage(pos, Structure::RecordHeader, kind, Some(pos), None);
                    self.skipped.push((pos, end));
                    break;
                }
                Verdict::NotRecord(kind) => {
                    let key = entries
                        .and_then(|e| e.iter().find(|e| e.offset == pos))
                        .map(|e| e.key.clone());
                    self.damage(
                        pos,
                        Structure::RecordHeader,
                        kind,
                        Some(pos),
                        key.as_deref(),
                    );
                    // Zeroes skipped just before were taken for padding; they may as well be
                    // where a damaged record starts.
                    let from = pos - cursor.zeroes_before().unwrap_or(0);
                    if self.resync(&mut cursor, pos, from, &named)? {
                        continue;
                    }
                    break;
                }
                Verdict::Whole(found) => (found, None),
                Verdict::ValueDamaged(found, damage) => (found, Some(damage)),
            };
            if let Some((at, kind)) = found.pad_mismatch() {
                self.damage(at, Structure::Padding, kind, None, None);
            }
            self.report.records += 1;
            if let Some(ValueDamage { at, kind }) = damage {
                self.bad_values.push(pos);
                self.damage(
                    at,
                    Structure::Value,
                    kind,
                    Some(pos),
                    Some(&found.entry.key),
                );
            }
            walked.push(found.entry);
        }
        // Each key's newest record, by the rule the footer was written with.
        Ok(crate::segment::last_per_key(walked)
            .into_iter()
            .map(|e| (e.key.clone(), e))
            .collect())
    }

    /// Moves `cursor` to the next record after the damaged bytes at `pos` (skipped from
    /// `from`): the next offset the footer names, or the first bytes before it that verify as
    /// a record header (or, without a trailer, start the footer table). False when there is
    /// none before the end.
    fn resync(
        &mut self,
        cursor: &mut RecordCursor<'_, ReadAhead<'_, S>>,
        pos: u64,
        from: u64,
        named: &[u64],
    ) -> io::Result<bool> {
        let end = cursor.end();
        let limit = named
            .iter()
            .find(|&&o| o > pos)
            .copied()
            .filter(|&o| o < end)
            .unwrap_or(end);
        let next = cursor.find_header(pos + 1, limit)?;
        match next.or((limit < end).then_some(limit)) {
            Some(next) => {
                self.skipped.push((from, next));
                cursor.seek(next);
                Ok(true)
            }
            None => {
                self.skipped.push((from, end));
                Ok(false)
            }
        }
    }

    /// Checks the footer entries against the records walked (`last`: each key's newest record).
    fn cross_check(
        &mut self,
        entries: &[FooterEntry],
        last: &HashMap<Vec<u8>, FooterEntry>,
        table: u64,
    ) {
        let skipped = |o: u64, s: &[(u64, u64)]| s.iter().any(|&(a, b)| a <= o && o < b);
        let mut in_footer: HashMap<&[u8], ()> = HashMap::with_capacity(entries.len());
        for e in entries {
            in_footer.insert(&e.key, ());
            if skipped(e.offset, &self.skipped) {
                continue; // its record's header is damaged: reported already
            }
            let field = match last.get(&e.key) {
                None => Some(("footer entry offset", e.offset)),
                Some(r) if r.offset != e.offset => Some(("footer entry offset", e.offset)),
                Some(r) if r.seq != e.seq => Some(("footer entry seq", e.seq)),
                Some(r) if r.kind != e.kind => Some(("footer entry kind", e.kind as u64)),
                Some(r) if r.flags != e.flags => Some(("footer entry flags", e.flags as u64)),
                Some(r) if r.stored_len != e.stored_len => {
                    Some(("footer entry stored length", e.stored_len))
                }
                // A damaged compressed record may have no readable length of its own.
                Some(r) if r.value_len != e.value_len && !self.bad_values.contains(&r.offset) => {
                    Some(("footer entry value length", e.value_len))
                }
                Some(_) => None,
            };
            if let Some((field, value)) = field {
                let kind = Corruption::InvalidField { field, value };
                self.damage(
                    table,
                    Structure::FooterTable,
                    kind,
                    Some(e.offset),
                    Some(&e.key),
                );
            }
        }
        let mut missing: Vec<&FooterEntry> = last
            .values()
            .filter(|r| !in_footer.contains_key(r.key.as_slice()))
            .collect();
        missing.sort_by_key(|r| r.offset);
        for r in missing {
            let kind = Corruption::InvalidField {
                field: "record missing from footer",
                value: r.offset,
            };
            self.damage(
                table,
                Structure::FooterTable,
                kind,
                Some(r.offset),
                Some(&r.key),
            );
        }
    }
}
