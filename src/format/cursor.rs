//! The record cursor: reads a segment's records position by position, from any [`ByteSource`],
//! and says what is at each position. It judges nothing: recovery's scan ([`super::scan`]) and
//! `Store::verify` are two policies over it, and decide what a verdict means for them.
//!
//! At each position the cursor probes the bytes up to the next block boundary. Zeroes there are
//! the padding after a write group only inside a block, right after a record, and all the way to
//! the block's end; anywhere else they are where a record should have started. Otherwise the
//! bytes must be a record whose header decodes, fits before the end bound and verifies with its
//! key; its value is then checked chunk by chunk, a window at a time (and, compressed, its frame
//! table: [`ValueChecker`]). The cursor moves past whole records, records whose value alone is
//! damaged (the header gives their length) and padding; at anything else it stays, and the
//! policy stops or [`seek`](RecordCursor::seek)s.

use std::io;

use super::footer::{FooterEntry, KEYS_MAGIC, TABLE_MAGIC};
use super::frames::{FRAME_ENTRY_LEN, FRAME_TABLE_HEADER_LEN, FrameTableHeader};
use super::frames::{decode_entries, decode_frame, decode_header};
use super::record::{
    EXPIRES_LEN, FLAG_COMPRESSED, RECORD_HEADER_LEN, RECORD_MAGIC, RecordHeader, RecordPlace,
    chunk_count, verify_chunks,
};
use super::segment_header::SEGMENT_HEADER_LEN;
use super::{CHUNK_SIZE, align_up};

/// The longest record header: the fixed part and the expiry field.
const MAX_HEAD_LEN: usize = RECORD_HEADER_LEN + EXPIRES_LEN;
use crate::error::Corruption;

/// Whether `magic` starts a footer: its key section (version 2) or its table (version 1).
pub fn is_footer_start(magic: &[u8]) -> bool {
    magic == KEYS_MAGIC || magic == TABLE_MAGIC
}

/// Positional, exact reads of a segment's bytes.
pub trait ByteSource {
    /// Length in bytes.
    fn len(&self) -> u64;
    /// True when the source has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Fills `buf` with the bytes at `offset`; `offset + buf.len()` is within `len()`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
}

impl ByteSource for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let src = self
            .get(start..start + buf.len())
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Bytes of value data (or of zeroes, or of damaged bytes searched for a record) read per step.
pub const WINDOW: u64 = 256 * CHUNK_SIZE;

/// Frame table entries read per step.
const ENTRIES_PER_READ: u64 = 4096;

/// Where a value is damaged, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueDamage {
    /// File offset of the damaged chunk, frame table, entry or frame.
    pub at: u64,
    /// What is wrong.
    pub kind: Corruption,
}

/// What [`ValueChecker::check`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueCheck {
    /// The value's length as put: the stored length, or for a compressed value the length in
    /// its frame table header (`None` when that header does not decode).
    pub value_len: Option<u64>,
    /// The first damage found.
    pub result: Result<(), ValueDamage>,
}

/// How much of a compressed value's frames [`ValueChecker`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frames {
    /// The frame table: its header and every entry. Enough to know the frames can be located;
    /// their crcs are checked by every read that decompresses them.
    TableOnly,
    /// The frame table, then every frame decompressed (one at a time) and checked against its
    /// crc.
    Decode,
}

/// The one check of a record's value: its stored bytes against the chunk crc table after them,
/// a window at a time, then for a compressed value its frame table (and, with
/// [`Frames::Decode`], every frame). Keeps its buffers between values.
#[derive(Debug)]
pub struct ValueChecker {
    frames: Frames,
    window: Vec<u8>,
    table: Vec<u8>,
    frame: Vec<u8>,
}

impl ValueChecker {
    /// A checker of frames to the depth `frames`.
    pub fn new(frames: Frames) -> ValueChecker {
        ValueChecker {
            frames,
            window: Vec::new(),
            table: Vec::new(),
            frame: Vec::new(),
        }
    }

    /// Checks the value of the record at `place`: its stored bytes
    /// `[value_offset, value_offset + stored_len)` (file offsets), its chunk crc table after
    /// them, and, when `compressed`, its frame table.
    pub fn check<S: ByteSource + ?Sized>(
        &mut self,
        src: &S,
        place: RecordPlace,
        value_offset: u64,
        stored_len: u64,
        compressed: bool,
    ) -> io::Result<ValueCheck> {
        let table_at = value_offset + stored_len;
        let fits = table_at
            .checked_add(4 * chunk_count(stored_len))
            .is_some_and(|e| e <= src.len());
        if !fits {
            return Ok(ValueCheck {
                value_len: None,
                result: Err(ValueDamage {
                    at: value_offset,
                    kind: Corruption::Truncated {
                        needed: 4 * chunk_count(stored_len) + stored_len,
                        available: src.len().saturating_sub(value_offset),
                    },
                }),
            });
        }
        let mut done = 0;
        while done < stored_len {
            let n = WINDOW.min(stored_len - done);
            self.window.resize(n as usize, 0);
            src.read_exact_at(value_offset + done, &mut self.window)?;
            let first = done / CHUNK_SIZE;
            self.table.resize((4 * chunk_count(n)) as usize, 0);
            src.read_exact_at(table_at + 4 * first, &mut self.table)?;
            if let Err((chunk, kind)) = verify_chunks(place, first, &self.window, &self.table) {
                // Keep the length if the frame table header (which has its own crc) survived:
                // reads of the frames that are intact still work.
                let value_len = if !compressed {
                    Some(stored_len)
                } else if stored_len >= FRAME_TABLE_HEADER_LEN as u64 {
                    (self.frame_table_header(src, value_offset, stored_len)?)
                        .ok()
                        .map(|h| h.value_len)
                } else {
                    None
                };
                return Ok(ValueCheck {
                    value_len,
                    result: Err(ValueDamage {
                        at: value_offset + chunk * CHUNK_SIZE,
                        kind,
                    }),
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
        // The stored bytes verified; the frame table must also be one a writer produces.
        self.check_frames(src, value_offset, stored_len)
    }

    fn frame_table_header<S: ByteSource + ?Sized>(
        &mut self,
        src: &S,
        value_offset: u64,
        stored_len: u64,
    ) -> io::Result<Result<FrameTableHeader, Corruption>> {
        // The trailing layout's header ends the stored bytes; the leading one starts them.
        let mut tail = [0u8; FRAME_TABLE_HEADER_LEN];
        src.read_exact_at(value_offset + stored_len - tail.len() as u64, &mut tail)?;
        decode_header(&tail, stored_len, None, || {
            let mut head = [0u8; FRAME_TABLE_HEADER_LEN];
            src.read_exact_at(value_offset, &mut head)?;
            Ok(FrameTableHeader::decode(&head, stored_len))
        })
    }

    /// Checks the frame table (and, with [`Frames::Decode`], every frame) of a compressed value
    /// whose stored bytes verified.
    fn check_frames<S: ByteSource + ?Sized>(
        &mut self,
        src: &S,
        value_offset: u64,
        stored_len: u64,
    ) -> io::Result<ValueCheck> {
        let bad = |value_len, at: u64, kind| ValueCheck {
            value_len,
            result: Err(ValueDamage {
                at: value_offset + at,
                kind,
            }),
        };
        let header = match self.frame_table_header(src, value_offset, stored_len)? {
            Ok(h) => h,
            Err(kind) => return Ok(bad(None, 0, kind)),
        };
        let value_len = Some(header.value_len);
        let region = header.frames_region();
        let mut expected_offset = region.start;
        let mut first = 0;
        while first < header.frame_count {
            let last = (first + ENTRIES_PER_READ).min(header.frame_count);
            self.table
                .resize(((last - first) as usize) * FRAME_ENTRY_LEN, 0);
            let at = header.entry_offset(first);
            src.read_exact_at(value_offset + at, &mut self.table)?;
            let entries = match decode_entries(&header, first..last, &self.table, stored_len) {
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
                if self.frames == Frames::Decode {
                    self.window.resize(e.stored_len as usize, 0);
                    src.read_exact_at(value_offset + e.offset, &mut self.window)?;
                    self.frame.resize(header.frame_len(index) as usize, 0);
                    if let Err(kind) =
                        decode_frame(&header, index, e, &self.window, &mut self.frame)
                    {
                        return Ok(bad(value_len, e.offset, kind));
                    }
                }
                expected_offset = e.end();
            }
            first = last;
        }
        if expected_offset != region.end {
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
}

/// The first non-zero byte in `[from, to)` of `src`, read a [`WINDOW`] at a time into `buf`.
pub fn first_nonzero<S: ByteSource + ?Sized>(
    src: &S,
    from: u64,
    to: u64,
    buf: &mut Vec<u8>,
) -> io::Result<Option<u64>> {
    let mut pos = from;
    while pos < to {
        let n = WINDOW.min(to - pos) as usize;
        buf.resize(n, 0);
        src.read_exact_at(pos, buf)?;
        if let Some(i) = buf.iter().position(|&b| b != 0) {
            return Ok(Some(pos + i as u64));
        }
        pos += n as u64;
    }
    Ok(None)
}

/// A record the cursor read: its header and key verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The record as a footer names it (for a compressed record whose frame table header does
    /// not decode, `value_len` is 0).
    pub entry: FooterEntry,
    /// The zero bytes the record declares before it (its `pad before` field).
    pub pad_before: u16,
    /// The zero bytes the cursor skipped as padding right before the record; `None` when unknown
    /// (the cursor was [`seek`](RecordCursor::seek)ed there).
    pub zeroes_before: Option<u64>,
}

impl Found {
    /// When the record does not declare exactly the zeroes skipped before it (a lost sector that
    /// looked like padding, not padding): where those zeroes start, and what is wrong.
    pub fn pad_mismatch(&self) -> Option<(u64, Corruption)> {
        let skipped = self.zeroes_before?;
        let declared = self.pad_before as u64;
        (declared != skipped).then(|| {
            (
                self.entry.offset - skipped,
                Corruption::InvalidField {
                    field: "record pad_before",
                    value: declared.abs_diff(skipped),
                },
            )
        })
    }
}

/// What is at a record position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A whole record: header, key, every value chunk and, compressed, the frame table verify.
    /// The cursor moved past it.
    Whole(Found),
    /// A record whose header and key verify and whose length fits, but whose value (a chunk,
    /// or a compressed value's frame table or frame) does not. The cursor moved past it: the
    /// header gives its length.
    ValueDamaged(Found, ValueDamage),
    /// Zeroes from here to the end of the block (or of the bytes): the padding after a write
    /// group. The cursor moved past it.
    Padding,
    /// Zeroes where a record must start: at a block start, right after padding, or where the
    /// cursor was sought to. A zero block start is where nothing was written.
    Zeroes,
    /// Zeroes inside a block that are not zero to the block's end: not padding.
    BadPadding {
        /// Offset of the first non-zero byte.
        first_nonzero: u64,
    },
    /// Fewer bytes than a record header before the end.
    Truncated(Corruption),
    /// Bytes that are not a record: its header does not decode, does not fit before the end or
    /// does not verify with its key.
    NotRecord(Corruption),
    /// The footer table's magic (only from a cursor that
    /// [stops at it](RecordCursor::stopping_at_footer_table)).
    FooterTable,
    /// The end of the bytes to read.
    End,
}

/// Reads the records of a segment from its first record position on: see the module docs.
pub struct RecordCursor<'a, S: ByteSource + ?Sized> {
    src: &'a S,
    segment: u64,
    block: u64,
    end: u64,
    footer_table: bool,
    pos: u64,
    /// Zero bytes skipped since the last record; `None` after a seek.
    gap: Option<u64>,
    /// The probe of the current position (the whole header once read: the fixed part, and
    /// the expiry field of a record that has one).
    head: [u8; MAX_HEAD_LEN],
    zeroes: Vec<u8>,
    values: ValueChecker,
}

impl<'a, S: ByteSource + ?Sized> RecordCursor<'a, S> {
    /// A cursor over the records of segment `segment` in `src`, written in blocks of `block`
    /// bytes, reading nothing at or after `end` (at most `src.len()`), checking compressed
    /// values' frames to the depth `frames`.
    pub fn new(
        src: &'a S,
        segment: u64,
        block: u64,
        end: u64,
        frames: Frames,
    ) -> RecordCursor<'a, S> {
        debug_assert!(end <= src.len());
        RecordCursor {
            src,
            segment,
            block,
            end,
            footer_table: false,
            pos: SEGMENT_HEADER_LEN as u64,
            gap: Some(0),
            head: [0u8; MAX_HEAD_LEN],
            zeroes: Vec::new(),
            values: ValueChecker::new(frames),
        }
    }

    /// With `yes`, the footer table's magic at a record position is [`Verdict::FooterTable`],
    /// not a record that does not decode: for a walk that does not know where the records end.
    pub fn stopping_at_footer_table(mut self, yes: bool) -> Self {
        self.footer_table = yes;
        self
    }

    /// Where the cursor reads next.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The end of the bytes it reads.
    pub fn end(&self) -> u64 {
        self.end
    }

    /// Zero bytes skipped as padding right before the current position (`None`: unknown).
    pub fn zeroes_before(&self) -> Option<u64> {
        self.gap
    }

    /// Moves to `pos`, where the policy expects a record after bytes it could not read.
    pub fn seek(&mut self, pos: u64) {
        self.pos = pos;
        self.gap = None;
    }

    /// Reads the current position; returns it with what is there.
    pub fn step(&mut self) -> io::Result<(u64, Verdict)> {
        let pos = self.pos;
        Ok((pos, self.verdict(pos)?))
    }

    fn verdict(&mut self, pos: u64) -> io::Result<Verdict> {
        if pos >= self.end {
            return Ok(Verdict::End);
        }
        let block_end = align_up(pos + 1, self.block);
        let probe = (RECORD_HEADER_LEN as u64)
            .min(block_end - pos)
            .min(self.end - pos) as usize;
        self.src.read_exact_at(pos, &mut self.head[..probe])?;
        if self.head[..probe].iter().all(|&b| b == 0) {
            // Padding never starts a block and never follows padding.
            if pos.is_multiple_of(self.block) || self.gap != Some(0) {
                return Ok(Verdict::Zeroes);
            }
            // Padding after a write group runs to the end of the block; the next record
            // declares its length, which the policy checks ([`Found::pad_mismatch`]).
            let pad_end = block_end.min(self.end);
            if let Some(first_nonzero) = first_nonzero(self.src, pos, pad_end, &mut self.zeroes)? {
                return Ok(Verdict::BadPadding { first_nonzero });
            }
            self.gap = Some(pad_end - pos);
            self.pos = pad_end;
            return Ok(Verdict::Padding);
        }
        if self.footer_table && is_footer_start(&self.head[..probe.min(4)]) {
            return Ok(Verdict::FooterTable);
        }
        if probe < RECORD_HEADER_LEN {
            if self.end - pos < RECORD_HEADER_LEN as u64 {
                return Ok(Verdict::Truncated(Corruption::Truncated {
                    needed: RECORD_HEADER_LEN as u64,
                    available: self.end - pos,
                }));
            }
            self.src
                .read_exact_at(pos, &mut self.head[..RECORD_HEADER_LEN])?;
        }
        let mut head = self.head;
        let (header, key) = match self.verified_header(&mut head, pos)? {
            Ok(h) => h,
            Err(c) => return Ok(Verdict::NotRecord(c)),
        };
        let place = RecordPlace {
            segment: self.segment,
            offset: pos,
        };
        let checked = self.values.check(
            self.src,
            place,
            pos + header.value_offset(),
            header.value_len,
            header.flags & FLAG_COMPRESSED != 0,
        )?;
        let found = Found {
            entry: FooterEntry::for_record(pos, &header, key, checked.value_len.unwrap_or(0)),
            pad_before: header.pad_before,
            zeroes_before: self.gap,
        };
        self.pos = pos + header.encoded_len();
        self.gap = Some(0);
        Ok(match checked.result {
            Ok(()) => Verdict::Whole(found),
            Err(damage) => Verdict::ValueDamaged(found, damage),
        })
    }

    /// Decodes the record header at `pos`, whose fixed part is in `head` (the expiry field,
    /// if its flags name one, is read into `head` here), and checks that the record fits before
    /// the end and its header crc; returns it with its key.
    fn verified_header(
        &self,
        head: &mut [u8; MAX_HEAD_LEN],
        pos: u64,
    ) -> io::Result<Result<(RecordHeader, Vec<u8>), Corruption>> {
        // The fixed part decides whether an expiry field follows: decoded alone, it fails only
        // for want of that field once every fixed field is valid.
        let header = match RecordHeader::decode(&head[..RECORD_HEADER_LEN]) {
            Err(Corruption::Truncated { needed, .. }) if needed == MAX_HEAD_LEN as u64 => {
                if self.end - pos < needed {
                    return Ok(Err(Corruption::Truncated {
                        needed,
                        available: self.end - pos,
                    }));
                }
                self.src.read_exact_at(
                    pos + RECORD_HEADER_LEN as u64,
                    &mut head[RECORD_HEADER_LEN..],
                )?;
                RecordHeader::decode(&head[..])
            }
            other => other,
        };
        let header = match header {
            Ok(h) => h,
            Err(c) => return Ok(Err(c)),
        };
        let available = self.end - pos;
        if header.encoded_len() > available {
            return Ok(Err(Corruption::Truncated {
                needed: header.encoded_len(),
                available,
            }));
        }
        let mut key = vec![0u8; header.key_len as usize];
        self.src
            .read_exact_at(pos + header.key_offset(), &mut key)?;
        let place = RecordPlace {
            segment: self.segment,
            offset: pos,
        };
        Ok(RecordHeader::verify(&head[..header.head_len()], place, &key).map(|()| (header, key)))
    }

    /// The first position in `[from, limit)` that holds a record header that verifies (its crc
    /// is bound to its offset, so value bytes that happen to look like a header do not pass) or,
    /// for a cursor [stopping at it](Self::stopping_at_footer_table), the footer table's magic.
    /// Reads a [`WINDOW`] at a time.
    pub fn find_header(&mut self, from: u64, limit: u64) -> io::Result<Option<u64>> {
        let mut at = from;
        let mut buf = Vec::new();
        let mut head = [0u8; MAX_HEAD_LEN];
        while at < limit {
            let n = WINDOW.min(limit - at) as usize;
            // Three bytes more, for a magic that straddles two windows.
            let read = (n as u64 + 3).min(self.src.len() - at) as usize;
            buf.resize(read, 0);
            self.src.read_exact_at(at, &mut buf)?;
            for i in 0..n.min(read.saturating_sub(3)) {
                let magic = &buf[i..i + 4];
                let cand = at + i as u64;
                if self.footer_table && is_footer_start(magic) {
                    return Ok(Some(cand));
                }
                if magic != RECORD_MAGIC || self.end - cand < RECORD_HEADER_LEN as u64 {
                    continue;
                }
                self.src
                    .read_exact_at(cand, &mut head[..RECORD_HEADER_LEN])?;
                if self.verified_header(&mut head, cand)?.is_ok() {
                    return Ok(Some(cand));
                }
            }
            at += n as u64;
        }
        Ok(None)
    }
}
