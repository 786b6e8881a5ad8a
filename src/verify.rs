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
//! Where a record's header is damaged, the walk resumes at the next record: the next offset the
//! footer names, or the next bytes that verify as a record header (its crc is bound to its
//! offset, so value bytes that happen to look like a header do not pass).
//!
//! Keys are judged by the index: a live key is affected when its record's value (its bytes, its
//! chunk crcs or, compressed, its frame table and frames) does not verify, so that reads of it
//! fail with [`Error::Corruption`]. A live key whose record's header alone is damaged still reads
//! correctly (reads verify the value's chunks) and is not counted as affected; the damage is in
//! the report with the record's key when the footer or index names it.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use crate::error::{Corruption, Error, Result};
use crate::format::footer::{
    FooterEntry, TABLE_MAGIC, TRAILER_LEN, Trailer, decode_table as decode_footer_table,
};
use crate::format::frames::{
    FRAME_ENTRY_LEN, FRAME_TABLE_HEADER_LEN, FrameTableHeader, decode_entries, decode_frame,
};
use crate::format::record::{
    FLAG_COMPRESSED, RECORD_HEADER_LEN, RECORD_MAGIC, RecordHeader, RecordKind, RecordPlace,
    chunk_count, verify_chunks,
};
use crate::format::scan::ByteSource;
use crate::format::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use crate::format::{CHUNK_SIZE, align_up};
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
}

impl VerifyReport {
    /// True when nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.damage.is_empty()
    }
}

/// One damaged place in a segment file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Damage {
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

/// The segment being written when `verify` started: only its first `data_end` bytes (flushed
/// before the check) are checked, and it has no footer yet.
pub(crate) struct ActiveBound {
    pub id: u64,
    pub data_end: u64,
}

/// Bytes of value read per step.
const WINDOW: u64 = 256 * CHUNK_SIZE;

/// Frame table entries read per step.
const ENTRIES_PER_READ: u64 = 4096;

/// Checks `segments` (id, file) and fills a report; `live` gives a key's index entry.
pub(crate) fn run(
    segments: &[(u64, Arc<SegmentFile>)],
    active: Option<ActiveBound>,
    pool: &BufPool,
    read_align: u64,
    default_block: u32,
    live: &dyn Fn(&[u8]) -> Option<IndexEntry>,
    keys: &mut dyn Iterator<Item = Vec<u8>>,
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
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
        let bound = active
            .as_ref()
            .filter(|a| a.id == *id)
            .map(|a| a.data_end.min(len));
        let mut check = SegmentCheck {
            src: &src,
            id: *id,
            block: default_block as u64,
            report: &mut report,
            skipped: Vec::new(),
            bad_values: Vec::new(),
            window: Vec::new(),
        };
        check
            .run(bound)
            .map_err(|e| crate::segment::read_error(*id, 0, file.path(), e))?;
        let skipped = std::mem::take(&mut check.skipped);
        if !skipped.is_empty() {
            unknown.insert(*id, skipped);
        }
        by_id.insert(*id, file.clone());
    }
    for d in &report.damage {
        if d.structure == Structure::Value
            && let Some(r) = d.record
        {
            bad_values.insert((d.segment, r), ());
        }
    }
    // Judge every live key by its own record.
    let mut affected = Vec::new();
    for key in keys {
        let Some(e) = live(&key) else { continue };
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
        let mut window = Vec::new();
        let checked = check_value(
            &src,
            place,
            e.value_offset(),
            e.stored_len,
            e.is_compressed(),
            &mut window,
        )
        .map_err(|err| crate::segment::read_error(e.segment, e.offset, file.path(), err))?;
        if let Err((at, kind)) = checked.result {
            report.damage.push(Damage {
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
            segment: self.id,
            offset,
            structure,
            kind,
            record,
            key: key.map(<[u8]>::to_vec),
        });
    }

    /// Checks the segment; `active_end` bounds the active segment, which has no footer.
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
        let entries = match decode_footer_table(&trailer, &table) {
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
        if let Some(bad) = self.first_nonzero(pad_from, at)? {
            let kind = Corruption::InvalidField {
                field: "footer padding",
                value: bad - pad_from,
            };
            self.damage(bad, Structure::Padding, kind, None, None);
        }
        Ok(Some(Footer { trailer, entries }))
    }

    /// The first non-zero byte in `[from, to)`.
    fn first_nonzero(&mut self, from: u64, to: u64) -> io::Result<Option<u64>> {
        let mut pos = from;
        while pos < to {
            let n = WINDOW.min(to - pos) as usize;
            self.window.resize(n, 0);
            self.src.read_exact_at(pos, &mut self.window)?;
            if let Some(i) = self.window.iter().position(|&b| b != 0) {
                return Ok(Some(pos + i as u64));
            }
            pos += n as u64;
        }
        Ok(None)
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
        let mut pos = SEGMENT_HEADER_LEN as u64;
        let mut gap = 0u64;
        let mut head = [0u8; RECORD_HEADER_LEN];
        while pos < end {
            let block_end = align_up(pos + 1, self.block);
            let probe = (RECORD_HEADER_LEN as u64)
                .min(block_end - pos)
                .min(end - pos) as usize;
            self.src.read_exact_at(pos, &mut head[..probe])?;
            if head[..probe].iter().all(|&b| b == 0) {
                let pad_end = block_end.min(end);
                let nonzero = self.first_nonzero(pos, pad_end)?;
                if pos.is_multiple_of(self.block) || gap > 0 || nonzero.is_some() {
                    // Zeroes where a record must start (padding never starts a block, never
                    // follows padding), or padding that is not all zero.
                    let (at, kind) = match nonzero {
                        Some(at) if !pos.is_multiple_of(self.block) && gap == 0 => (
                            at,
                            Corruption::InvalidField {
                                field: "padding",
                                value: at - pos,
                            },
                        ),
                        _ => (
                            pos,
                            Corruption::BadMagic {
                                structure: "record",
                                found: [0; 4],
                            },
                        ),
                    };
                    let structure = if at == pos {
                        Structure::RecordHeader
                    } else {
                        Structure::Padding
                    };
                    self.damage(at, structure, kind, None, None);
                    match self.resync(pos, end, bounded, &named)? {
                        Some(next) => {
                            self.skipped.push((pos, next));
                            pos = next;
                            gap = u64::MAX; // unknown: do not check the next pad_before
                            continue;
                        }
                        None => {
                            self.skipped.push((pos, end));
                            break;
                        }
                    }
                }
                gap = pad_end - pos;
                pos = pad_end;
                continue;
            }
            if !bounded && head[..4] == TABLE_MAGIC {
                break;
            }
            if probe < RECORD_HEADER_LEN {
                if end - pos < RECORD_HEADER_LEN as u64 {
                    let kind = Corruption::Truncated {
                        needed: RECORD_HEADER_LEN as u64,
                        available: end - pos,
                    };
                    self.damage(pos, Structure::RecordHeader, kind, Some(pos), None);
                    self.skipped.push((pos, end));
                    break;
                }
                self.src.read_exact_at(pos, &mut head)?;
            }
            let place = RecordPlace {
                segment: self.id,
                offset: pos,
            };
            let header = match self.record_header(&head, place, end)? {
                Ok(h) => h,
                Err(kind) => {
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
                    let from = if gap == u64::MAX { pos } else { pos - gap };
                    match self.resync(pos, end, bounded, &named)? {
                        Some(next) => {
                            self.skipped.push((from, next));
                            pos = next;
                            gap = u64::MAX;
                            continue;
                        }
                        None => {
                            self.skipped.push((from, end));
                            break;
                        }
                    }
                }
            };
            let (header, key) = header;
            if gap != u64::MAX && header.pad_before as u64 != gap {
                let kind = Corruption::InvalidField {
                    field: "record pad_before",
                    value: (header.pad_before as u64).abs_diff(gap),
                };
                self.damage(pos - gap, Structure::Padding, kind, None, None);
            }
            self.report.records += 1;
            let mut entry = FooterEntry {
                key,
                kind: header.kind,
                flags: header.flags,
                offset: pos,
                stored_len: header.value_len,
                value_len: header.value_len,
                seq: header.seq,
            };
            if header.kind == RecordKind::Put {
                let checked = check_value(
                    self.src,
                    place,
                    pos + header.value_offset(),
                    header.value_len,
                    header.flags & FLAG_COMPRESSED != 0,
                    &mut self.window,
                )?;
                if let Some(len) = checked.value_len {
                    entry.value_len = len;
                }
                if let Err((at, kind)) = checked.result {
                    self.bad_values.push(pos);
                    let key = entry.key.clone();
                    self.damage(at, Structure::Value, kind, Some(pos), Some(&key));
                }
            }
            pos += header.encoded_len();
            gap = 0;
            walked.push(entry);
        }
        // Each key's newest record, by the rule the footer was written with.
        Ok(crate::segment::last_per_key(walked)
            .into_iter()
            .map(|e| (e.key.clone(), e))
            .collect())
    }

    /// Decodes the record header at `place` and checks its crc and that the record fits before
    /// `end`; returns it with its key.
    fn record_header(
        &mut self,
        head: &[u8; RECORD_HEADER_LEN],
        place: RecordPlace,
        end: u64,
    ) -> io::Result<std::result::Result<(RecordHeader, Vec<u8>), Corruption>> {
        let header = match RecordHeader::decode(head) {
            Ok(h) => h,
            Err(c) => return Ok(Err(c)),
        };
        if header.encoded_len() > end - place.offset {
            return Ok(Err(Corruption::Truncated {
                needed: header.encoded_len(),
                available: end - place.offset,
            }));
        }
        let mut key = vec![0u8; header.key_len as usize];
        self.src
            .read_exact_at(place.offset + header.key_offset(), &mut key)?;
        Ok(RecordHeader::verify(head, place, &key).map(|()| (header, key)))
    }

    /// The next record after the damaged bytes at `pos`: the next offset the footer names, or
    /// the first bytes before it that verify as a record header (or, without a trailer, start
    /// the footer table).
    fn resync(
        &mut self,
        pos: u64,
        end: u64,
        bounded: bool,
        named: &[u64],
    ) -> io::Result<Option<u64>> {
        let limit = named
            .iter()
            .find(|&&o| o > pos)
            .copied()
            .filter(|&o| o < end)
            .unwrap_or(end);
        let mut at = pos + 1;
        let mut buf = Vec::new();
        let mut head = [0u8; RECORD_HEADER_LEN];
        while at < limit {
            let n = WINDOW.min(limit - at) as usize;
            // Three bytes more, for a magic that straddles two windows.
            let read = (n as u64 + 3).min(self.src.len() - at) as usize;
            buf.resize(read, 0);
            self.src.read_exact_at(at, &mut buf)?;
            for i in 0..n.min(read.saturating_sub(3)) {
                let magic = &buf[i..i + 4];
                let cand = at + i as u64;
                if !bounded && magic == TABLE_MAGIC {
                    return Ok(Some(cand));
                }
                if magic != RECORD_MAGIC || end - cand < RECORD_HEADER_LEN as u64 {
                    continue;
                }
                self.src.read_exact_at(cand, &mut head)?;
                let place = RecordPlace {
                    segment: self.id,
                    offset: cand,
                };
                if self.record_header(&head, place, end)?.is_ok() {
                    return Ok(Some(cand));
                }
            }
            at += n as u64;
        }
        Ok((limit < end).then_some(limit))
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

/// What [`check_value`] found.
struct ValueCheck {
    /// The value's length, from its frame table if it is compressed (None if unreadable).
    value_len: Option<u64>,
    /// The first damage found: file offset and kind.
    result: std::result::Result<(), (u64, Corruption)>,
}

/// Checks the value of the record at `place`: its stored bytes `[value_offset, +stored_len)`
/// against the chunk crc table after them, then, compressed, its frame table and every frame.
fn check_value<S: ByteSource + ?Sized>(
    src: &S,
    place: RecordPlace,
    value_offset: u64,
    stored_len: u64,
    compressed: bool,
    window: &mut Vec<u8>,
) -> io::Result<ValueCheck> {
    let table_at = value_offset + stored_len;
    let fits = table_at
        .checked_add(4 * chunk_count(stored_len))
        .is_some_and(|e| e <= src.len());
    if !fits {
        return Ok(ValueCheck {
            value_len: None,
            result: Err((
                value_offset,
                Corruption::Truncated {
                    needed: 4 * chunk_count(stored_len) + stored_len,
                    available: src.len().saturating_sub(value_offset),
                },
            )),
        });
    }
    let mut table = vec![0u8; (4 * (WINDOW / CHUNK_SIZE)) as usize];
    let mut done = 0;
    while done < stored_len {
        let n = WINDOW.min(stored_len - done);
        window.resize(n as usize, 0);
        src.read_exact_at(value_offset + done, window)?;
        let first = done / CHUNK_SIZE;
        let t = &mut table[..(4 * chunk_count(n)) as usize];
        src.read_exact_at(table_at + 4 * first, t)?;
        if let Err((chunk, kind)) = verify_chunks(place, first, window, t) {
            let value_len = (!compressed).then_some(stored_len);
            return Ok(ValueCheck {
                value_len,
                result: Err((value_offset + chunk * CHUNK_SIZE, kind)),
            });
        }
        done += n;
    }
    if !compressed {
        return Ok(ValueCheck {
            value_len: Some(stored_len),
            result: Ok(()),
        });
    }
    check_frames(src, value_offset, stored_len, window)
}

/// Checks the frame table and every frame of a compressed value whose stored bytes verified.
fn check_frames<S: ByteSource + ?Sized>(
    src: &S,
    value_offset: u64,
    stored_len: u64,
    buf: &mut Vec<u8>,
) -> io::Result<ValueCheck> {
    let bad = |value_len, at: u64, kind| ValueCheck {
        value_len,
        result: Err((value_offset + at, kind)),
    };
    let mut head = [0u8; FRAME_TABLE_HEADER_LEN];
    src.read_exact_at(value_offset, &mut head)?;
    let header = match FrameTableHeader::decode(&head, stored_len) {
        Ok(h) => h,
        Err(kind) => return Ok(bad(None, 0, kind)),
    };
    let value_len = Some(header.value_len);
    let mut entries_buf = Vec::new();
    let mut out = Vec::new();
    let mut expected_offset = header.table_len();
    let mut first = 0;
    while first < header.frame_count {
        let last = (first + ENTRIES_PER_READ).min(header.frame_count);
        entries_buf.resize(((last - first) as usize) * FRAME_ENTRY_LEN, 0);
        let at = header.entry_offset(first);
        src.read_exact_at(value_offset + at, &mut entries_buf)?;
        let entries = match decode_entries(&header, first..last, &entries_buf, stored_len) {
            Ok(e) => e,
            Err(kind) => return Ok(bad(value_len, at, kind)),
        };
        for (k, e) in entries.iter().enumerate() {
            let index = first + k as u64;
            if e.offset != expected_offset {
                let kind = Corruption::InvalidField {
                    field: "frame offset",
                    value: e.offset,
                };
                return Ok(bad(value_len, header.entry_offset(index), kind));
            }
            buf.resize(e.stored_len as usize, 0);
            src.read_exact_at(value_offset + e.offset, buf)?;
            out.resize(header.frame_len(index) as usize, 0);
            if let Err(kind) = decode_frame(&header, index, e, buf, &mut out) {
                return Ok(bad(value_len, e.offset, kind));
            }
            expected_offset = e.end();
        }
        first = last;
    }
    if expected_offset != stored_len {
        let kind = Corruption::InvalidField {
            field: "frame table stored length",
            value: stored_len,
        };
        return Ok(bad(value_len, 0, kind));
    }
    Ok(ValueCheck {
        value_len,
        result: Ok(()),
    })
}
