//! The keys of one sealed file, in ascending byte order, from its footer: what ordered listing
//! merges across files.
//!
//! For a footer of version 2, [`SortedKeys`] reads the trailer when opened; the first
//! [`seek`](SortedKeys::seek) or item reads the location table's header together with the
//! bytes before it, where the root of the fence-key tree ends (one read), then descends the
//! tree: one node of about 4 KiB per level below the root, then the key block the range starts
//! in. Never the location table itself, nor a whole level of the tree. The keys then come block
//! by block, each block read once and verified (its crc is bound to the file and its offset); the
//! path of nodes from the root is kept, so that the next block's place comes from the node
//! already read, and a long listing reads each node once ([`fence`]). Reads are `pread`s through
//! the file's handle (the same aligned reads as open, direct where the store reads direct), not
//! a memory map: measured, a map read the device's readahead window around every page a cold
//! listing touched (docs/design.md, "Ordered listing").
//!
//! For a footer of version 1 (a store of an earlier release, until compaction rewrites it) the
//! whole table is read and sorted in memory once, at the first seek or item.
//!
//! Backwards the same: [`SortedKeys::seek_back`] descends to the key block the range ends in,
//! and [`SortedKeys::next_back`] walks the blocks back from there. A reader is read in one
//! direction: ordered listing opens one for each end it is asked for.
//!
//! **Kept footer bytes.** The source may keep what was read between listings
//! ([`FooterSource`]: the store's read cache). Only bytes that verified are offered to it
//! (the trailer, the root window, tree nodes and key blocks after their crcs checked, a run of
//! location entries after it matched its block's keys), and kept bytes are decoded and verified
//! exactly as read ones, so a kept block can only fail where the same block read again would.
//! A listing of keys whose footer blocks are kept reads nothing from the file.
//!
//! Failures are items: a read that fails or bytes that do not verify are an
//! [`Error::Corruption`] (or [`Error::Io`]) naming the file and the offset, after which the
//! iterator ends. Nothing here panics on any bytes.

use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::read::{corruption, read_error};
use crate::error::{Corruption, Error, Result};
use crate::format::cursor::ByteSource;
use crate::format::footer::{
    BlockLocations, BlockRef, FOOTER_V1, TRAILER_LEN, Trailer, decode_entries,
};
use crate::format::segment_header::SEGMENT_HEADER_LEN;

mod fence;
#[cfg(test)]
mod tests;

/// Where a footer's bytes come from: the file ([`ByteSource`]), and the bytes kept between
/// listings, if the source keeps any (by default it keeps nothing).
///
/// A source keeps bytes by their offset and length in its file; it must give back exactly the
/// bytes offered for that place (the store keys them by file id, which is never reused, and a
/// sealed file's footer is never written again).
pub trait FooterSource: ByteSource {
    /// The `len` bytes at `at` kept by an earlier [`FooterSource::keep`], if still kept.
    fn kept(&self, _at: u64, _len: u64) -> Option<Bytes> {
        None
    }

    /// Offers the bytes at `at`, read from the file and verified, to be kept.
    fn keep(&self, _at: u64, _bytes: Bytes) {}
}

/// The keys of one sealed file with their record offsets, in ascending byte order; an iterator
/// of `Result<(key, record offset)>` from where [`SortedKeys::seek`] put it (the first key
/// without a seek).
pub struct SortedKeys<S: FooterSource> {
    file: FooterFile<S>,
    state: State,
}

/// Keys with their record offsets, in ascending order.
type Keyed = Vec<(Vec<u8>, u64)>;

/// A key, its record offset, and its record's sequence number when the footer tells it without
/// a read of the record ([`SortedKeys::next_with_seq`]).
pub type KeySeq = (Vec<u8>, u64, Option<u64>);

/// A sealed file whose trailer verified: what the readers of its footer read through.
struct FooterFile<S> {
    src: S,
    id: u64,
    path: PathBuf,
    trailer: Trailer,
    /// Where each key block's location entries are, to give keys their sequence numbers.
    blocks: Option<Arc<BlockLocations>>,
}

impl<S: FooterSource> FooterFile<S> {
    /// The sequence numbers of `keys`, the entries of the key block `block`, from the run of
    /// their location entries (one read); empty when there is no map, the read fails or the run
    /// does not match the keys (the caller then reads the records, as without a map).
    fn seqs_of(&self, block: BlockRef, keys: &Keyed) -> Vec<u64> {
        let Some(map) = &self.blocks else {
            return Vec::new();
        };
        let Some(run) = map.run(block.offset) else {
            return Vec::new();
        };
        let at = run.bytes.start;
        let Ok((bytes, kept)) = self.fetch(at, run.bytes.end - at) else {
            return Vec::new();
        };
        match map.seqs(&run, &bytes, keys) {
            Some(seqs) => {
                self.verified(at, bytes, kept);
                seqs
            }
            None => Vec::new(),
        }
    }

    /// The `len` bytes at `at`: the source's kept copy (`true`) or a read of the file. Either
    /// is to be verified by the caller, then given to [`FooterFile::verified`].
    fn fetch(&self, at: u64, len: u64) -> Result<(Bytes, bool)> {
        if let Some(bytes) = self.src.kept(at, len)
            && bytes.len() as u64 == len
        {
            return Ok((bytes, true));
        }
        Ok((Bytes::from(self.read(at, len)?), false))
    }

    /// Offers bytes [`FooterFile::fetch`] read, now verified, to the source to keep.
    fn verified(&self, at: u64, bytes: Bytes, kept: bool) {
        if !kept {
            self.src.keep(at, bytes);
        }
    }

    fn read(&self, at: u64, len: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        self.src
            .read_exact_at(at, &mut buf)
            .map_err(|e| read_error(self.id, at, &self.path, e))?;
        Ok(buf)
    }

    fn corrupt(&self, at: u64, kind: Corruption) -> Error {
        corruption(&self.path, self.id, at, kind)
    }
}

enum State {
    /// Nothing read past the trailer yet.
    Unloaded,
    /// Version 2: a position in the fence-key tree.
    Tree(Box<fence::Cursor>),
    /// Version 1: every key, sorted, the position of the next one, and the end of those left
    /// backwards.
    Table {
        entries: Keyed,
        seqs: Vec<u64>,
        next: usize,
        back: usize,
    },
    /// An error was returned: no more items.
    Failed,
}

impl<S: FooterSource> SortedKeys<S> {
    /// The sorted keys of the sealed file `id` read through `src` (`path` names it in errors):
    /// reads and verifies its trailer only. `None` when the file has no valid trailer (it is not
    /// sealed, or its footer was torn).
    pub fn open(src: S, id: u64, path: &Path) -> Result<Option<SortedKeys<S>>> {
        let len = src.len();
        if len < (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64 {
            return Ok(None);
        }
        let at = len - TRAILER_LEN as u64;
        let (tail, kept) = match src.kept(at, TRAILER_LEN as u64) {
            Some(b) if b.len() == TRAILER_LEN => (b, true),
            _ => {
                let mut tail = vec![0u8; TRAILER_LEN];
                src.read_exact_at(at, &mut tail)
                    .map_err(|e| read_error(id, at, path, e))?;
                (Bytes::from(tail), false)
            }
        };
        let trailer = match Trailer::decode(&tail, len) {
            Ok(t) if t.segment == id => {
                if !kept {
                    src.keep(at, tail);
                }
                t
            }
            Ok(_) | Err(Corruption::BadMagic { .. } | Corruption::ChecksumMismatch { .. }) => {
                return Ok(None);
            }
            Err(kind) => return Err(corruption(path, id, at, kind)),
        };
        Ok(Some(SortedKeys {
            file: FooterFile {
                src,
                id,
                path: path.to_path_buf(),
                trailer,
                blocks: None,
            },
            state: State::Unloaded,
        }))
    }

    /// Whether the keys come with their sequence numbers only given a [`BlockLocations`]
    /// ([`SortedKeys::set_blocks`]): a footer of version 2 without one yet (a footer of
    /// version 1 holds them in the table it reads).
    pub fn needs_blocks(&self) -> bool {
        self.file.trailer.version != FOOTER_V1 && self.file.blocks.is_none()
    }

    /// Gives the keys of each key block read from now on their sequence numbers from `blocks`
    /// (one more read per block, of its location entries); ignored if `blocks` is not this
    /// footer's.
    pub fn set_blocks(&mut self, blocks: Arc<BlockLocations>) {
        if blocks.fits(&self.file.trailer) {
            self.file.blocks = Some(blocks);
        }
    }

    /// Reads this footer's location table whole, verifies it and maps where each key block's
    /// entries are in it; `None` for a footer of version 1.
    pub fn read_blocks(&self) -> Result<Option<BlockLocations>> {
        let t = self.file.trailer;
        if t.version == FOOTER_V1 {
            return Ok(None);
        }
        let table = self.file.read(t.table_offset, t.table_len)?;
        BlockLocations::of_table(&t, &table).map_err(|k| self.file.corrupt(t.table_offset, k))
    }

    /// Reads what the first seek needs: the tree's root (version 2) or the sorted table
    /// (version 1).
    fn load(&mut self) -> Result<()> {
        if !matches!(self.state, State::Unloaded) {
            return Ok(());
        }
        let t = self.file.trailer;
        if t.version == FOOTER_V1 {
            let table = self.file.read(t.table_offset, t.table_len)?;
            let mut entries = decode_entries(&t, &[], &table)
                .map_err(|k| self.file.corrupt(t.table_offset, k))?;
            entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
            self.state = State::Table {
                back: entries.len(),
                seqs: entries.iter().map(|e| e.seq).collect(),
                entries: entries.into_iter().map(|e| (e.key, e.offset)).collect(),
                next: 0,
            };
            return Ok(());
        }
        self.state = State::Tree(Box::new(fence::Cursor::load(&self.file)?));
        Ok(())
    }

    /// Positions the iterator at the first key at or after `start` (`Included`), after it
    /// (`Excluded`), or at the first key (`Unbounded`). Reads the tree's root at the first call,
    /// then one node per level below it and one key block (nodes on the path of the previous
    /// seek are not read again).
    pub fn seek(&mut self, start: Bound<&[u8]>) -> Result<()> {
        let res = self.seek_inner(start);
        if res.is_err() {
            self.state = State::Failed;
        }
        res
    }

    fn seek_inner(&mut self, start: Bound<&[u8]>) -> Result<()> {
        self.load()?;
        let before = |key: &[u8]| match start {
            Bound::Unbounded => false,
            Bound::Included(s) => key < s,
            Bound::Excluded(s) => key <= s,
        };
        match &mut self.state {
            State::Table { entries, next, .. } => {
                *next = entries.partition_point(|(k, _)| before(k));
            }
            State::Tree(cursor) => cursor.seek(&self.file, before)?,
            State::Unloaded | State::Failed => {}
        }
        Ok(())
    }

    /// Positions the reader for [`SortedKeys::next_back`] at the last key at or before `end`
    /// (`Included`), before it (`Excluded`), or at the last key (`Unbounded`). Reads as
    /// [`SortedKeys::seek`] does.
    pub fn seek_back(&mut self, end: Bound<&[u8]>) -> Result<()> {
        let res = self.seek_back_inner(end);
        if res.is_err() {
            self.state = State::Failed;
        }
        res
    }

    fn seek_back_inner(&mut self, end: Bound<&[u8]>) -> Result<()> {
        self.load()?;
        let after = |key: &[u8]| match end {
            Bound::Unbounded => false,
            Bound::Included(e) => key > e,
            Bound::Excluded(e) => key >= e,
        };
        match &mut self.state {
            State::Table { entries, back, .. } => {
                *back = entries.partition_point(|(k, _)| !after(k));
            }
            State::Tree(cursor) => cursor.seek_back(&self.file, after)?,
            State::Unloaded | State::Failed => {}
        }
        Ok(())
    }

    /// The previous key with its record offset, in descending order from where
    /// [`SortedKeys::seek_back`] put the reader (the last key without a seek); `None` past the
    /// first. As for [`Iterator::next`], an error is the last item.
    #[cfg(test)]
    pub fn next_back(&mut self) -> Option<Result<(Vec<u8>, u64)>> {
        self.next_back_with_seq()
            .map(|r| r.map(|(key, offset, _)| (key, offset)))
    }

    /// [`SortedKeys::next_back`] with the record's sequence number, when the footer tells it
    /// (see [`SortedKeys::next_with_seq`]).
    pub fn next_back_with_seq(&mut self) -> Option<Result<KeySeq>> {
        if matches!(self.state, State::Failed) {
            return None;
        }
        match self.next_back_inner() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                self.state = State::Failed;
                Some(Err(e))
            }
        }
    }

    fn next_back_inner(&mut self) -> Result<Option<KeySeq>> {
        self.load()?;
        match &mut self.state {
            State::Table {
                entries,
                seqs,
                back,
                ..
            } => {
                let Some(i) = back.checked_sub(1) else {
                    return Ok(None);
                };
                *back = i;
                let (key, offset) = entries[i].clone();
                Ok(Some((key, offset, Some(seqs[i]))))
            }
            State::Tree(cursor) => cursor.prev(&self.file),
            State::Unloaded | State::Failed => Ok(None),
        }
    }

    fn next_inner(&mut self) -> Result<Option<KeySeq>> {
        self.load()?;
        match &mut self.state {
            State::Table {
                entries,
                seqs,
                next,
                ..
            } => {
                let item = entries
                    .get(*next)
                    .map(|(key, offset)| (key.clone(), *offset, Some(seqs[*next])));
                *next += item.is_some() as usize;
                Ok(item)
            }
            State::Tree(cursor) => cursor.next(&self.file),
            State::Unloaded | State::Failed => Ok(None),
        }
    }
}

impl<S: FooterSource> Iterator for SortedKeys<S> {
    type Item = Result<(Vec<u8>, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_with_seq()
            .map(|r| r.map(|(key, offset, _)| (key, offset)))
    }
}

impl<S: FooterSource> SortedKeys<S> {
    /// The next key with its record offset and, when the footer tells it, its record's
    /// sequence number: always for a footer of version 1, for version 2 once
    /// [`SortedKeys::set_blocks`] gave the map of its location table (then each key block read
    /// costs one more read, of the location entries of its keys). `None` when it is not told
    /// (no map, or a run that does not match its block): the record tells.
    pub fn next_with_seq(&mut self) -> Option<Result<KeySeq>> {
        if matches!(self.state, State::Failed) {
            return None;
        }
        match self.next_inner() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                self.state = State::Failed;
                Some(Err(e))
            }
        }
    }
}
