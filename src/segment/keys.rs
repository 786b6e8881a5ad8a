//! The keys of one sealed file, in ascending byte order, from its footer: what ordered listing
//! merges across files.
//!
//! For a footer of version 2, [`SortedKeys`] reads the trailer when opened, and the location
//! table's header and the block index (16 bytes per key block of ~4 KiB) at the first
//! [`seek`](SortedKeys::seek) or item: never the location table itself. A seek binary-searches the
//! blocks by the first key of each probed block, one positional read of a block each: O(log
//! blocks) block reads to find the start of a range; the keys then come block by block, each
//! block read once and verified (its crc is bound to the file and its offset). Reads are `pread`s
//! through the file's handle (the same aligned reads as open, direct where the store reads
//! direct); memory maps were not measured against them.
//!
//! For a footer of version 1 (a store of an earlier release, until compaction rewrites it) the
//! whole table is read and sorted in memory once, at the first seek or item.
//!
//! Failures are items: a read that fails or bytes that do not verify are an
//! [`Error::Corruption`] (or [`Error::Io`]) naming the file and the offset, after which the
//! iterator ends. Nothing here panics on any bytes.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use super::read::{corruption, read_error};
use crate::error::{Corruption, Error, Result};
use crate::format::cursor::ByteSource;
use crate::format::footer::{
    BlockRef, FOOTER_V1, LOCATION_HEADER_LEN, LocationHeader, TRAILER_LEN, Trailer,
    decode_block_index, decode_entries, decode_key_block,
};
use crate::format::segment_header::SEGMENT_HEADER_LEN;

/// The keys of one sealed file with their record offsets, in ascending byte order; an iterator
/// of `Result<(key, record offset)>` from where [`SortedKeys::seek`] put it (the first key
/// without a seek).
pub struct SortedKeys<S: ByteSource> {
    src: S,
    id: u64,
    path: PathBuf,
    trailer: Trailer,
    state: State,
    /// Where the next key comes from.
    at: Position,
}

/// Keys with their record offsets, in ascending order.
type Keyed = Vec<(Vec<u8>, u64)>;

enum State {
    /// Nothing read past the trailer yet.
    Unloaded,
    /// Version 2: the block index; the block decoded last (its index and entries).
    Blocks {
        blocks: Vec<BlockRef>,
        current: Option<(usize, Keyed)>,
    },
    /// Version 1: every key, sorted.
    Table(Keyed),
    /// An error was returned: no more items.
    Failed,
}

/// The next key: entry `entry` of block `block` (version 2), or entry `entry` of the sorted
/// table (version 1, `block` 0).
#[derive(Clone, Copy)]
struct Position {
    block: usize,
    entry: usize,
}

impl<S: ByteSource> SortedKeys<S> {
    /// The sorted keys of the sealed file `id` read through `src` (`path` names it in errors):
    /// reads and verifies its trailer only. `None` when the file has no valid trailer (it is not
    /// sealed, or its footer was torn).
    pub fn open(src: S, id: u64, path: &Path) -> Result<Option<SortedKeys<S>>> {
        let len = src.len();
        if len < (SEGMENT_HEADER_LEN + TRAILER_LEN) as u64 {
            return Ok(None);
        }
        let at = len - TRAILER_LEN as u64;
        let mut tail = [0u8; TRAILER_LEN];
        src.read_exact_at(at, &mut tail)
            .map_err(|e| read_error(id, at, path, e))?;
        let trailer = match Trailer::decode(&tail, len) {
            Ok(t) if t.segment == id => t,
            Ok(_) | Err(Corruption::BadMagic { .. } | Corruption::ChecksumMismatch { .. }) => {
                return Ok(None);
            }
            Err(kind) => return Err(corruption(path, id, at, kind)),
        };
        Ok(Some(SortedKeys {
            src,
            id,
            path: path.to_path_buf(),
            trailer,
            state: State::Unloaded,
            at: Position { block: 0, entry: 0 },
        }))
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

    /// Reads what the first seek needs: the block index (version 2) or the sorted table
    /// (version 1).
    fn load(&mut self) -> Result<()> {
        if !matches!(self.state, State::Unloaded) {
            return Ok(());
        }
        let t = self.trailer;
        if t.version == FOOTER_V1 {
            let table = self.read(t.table_offset, t.table_len)?;
            let mut entries =
                decode_entries(&t, &[], &table).map_err(|k| self.corrupt(t.table_offset, k))?;
            entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
            self.state = State::Table(entries.into_iter().map(|e| (e.key, e.offset)).collect());
            return Ok(());
        }
        let head_len = (LOCATION_HEADER_LEN as u64).min(t.table_len);
        let head = self.read(t.table_offset, head_len)?;
        let header = LocationHeader::decode_header(&t, &head)
            .map_err(|k| self.corrupt(t.table_offset, k))?;
        let index = self.read(header.index_offset, header.index_len)?;
        let blocks = decode_block_index(&t, &header, &index)
            .map_err(|k| self.corrupt(header.index_offset, k))?;
        self.state = State::Blocks {
            blocks,
            current: None,
        };
        Ok(())
    }

    /// The entries of block `i` (read and verified, or the one decoded last).
    fn block(&mut self, i: usize) -> Result<&[(Vec<u8>, u64)]> {
        let State::Blocks { blocks, current } = &self.state else {
            unreachable!("blocks are read only for a footer of version 2");
        };
        if current.as_ref().is_none_or(|(c, _)| *c != i) {
            let b = blocks[i];
            let bytes = self.read(b.offset, b.len as u64)?;
            let kb = decode_key_block(self.id, self.trailer.data_end, &b, &bytes)
                .map_err(|k| self.corrupt(b.offset, k))?;
            let entries = kb.entries.iter().map(|(k, o)| (k.to_vec(), *o)).collect();
            let State::Blocks { current, .. } = &mut self.state else {
                unreachable!();
            };
            *current = Some((i, entries));
        }
        let State::Blocks {
            current: Some((_, entries)),
            ..
        } = &self.state
        else {
            unreachable!();
        };
        Ok(entries)
    }

    /// Positions the iterator at the first key at or after `start` (`Included`), after it
    /// (`Excluded`), or at the first key (`Unbounded`). Reads the block index at the first
    /// call, then O(log blocks) key blocks.
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
        match &self.state {
            State::Table(entries) => {
                let entry = entries.partition_point(|(k, _)| before(k));
                self.at = Position { block: 0, entry };
            }
            State::Blocks { blocks, .. } => {
                let n = blocks.len();
                // The last block whose first key is before the start (the range may begin
                // inside it), or block 0: blocks [lo, hi) are undecided.
                let (mut lo, mut hi) = (0, n);
                let mut found = 0;
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    let first_before = self.block(mid)?.first().is_some_and(|(k, _)| before(k));
                    if first_before {
                        found = mid;
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                if n == 0 {
                    self.at = Position { block: 0, entry: 0 };
                    return Ok(());
                }
                let entry = self.block(found)?.partition_point(|(k, _)| before(k));
                self.at = Position {
                    block: found,
                    entry,
                };
            }
            State::Unloaded | State::Failed => {}
        }
        Ok(())
    }

    fn next_inner(&mut self) -> Result<Option<(Vec<u8>, u64)>> {
        self.load()?;
        loop {
            let Position { block, entry } = self.at;
            match &self.state {
                State::Table(entries) => {
                    self.at.entry += 1;
                    return Ok(entries.get(entry).cloned());
                }
                State::Blocks { blocks, .. } => {
                    if block >= blocks.len() {
                        return Ok(None);
                    }
                    let entries = self.block(block)?;
                    if let Some(e) = entries.get(entry) {
                        let e = e.clone();
                        self.at.entry += 1;
                        return Ok(Some(e));
                    }
                    self.at = Position {
                        block: block + 1,
                        entry: 0,
                    };
                }
                State::Unloaded | State::Failed => return Ok(None),
            }
        }
    }
}

impl<S: ByteSource> Iterator for SortedKeys<S> {
    type Item = Result<(Vec<u8>, u64)>;

    fn next(&mut self) -> Option<Self::Item> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::footer::{FooterEntry, encode_footer, v1::encode_footer_v1};
    use crate::format::record::RecordKind;
    use std::cell::Cell;
    use std::collections::BTreeMap;
    use std::io;

    /// A file image in memory that counts its reads and can fail one.
    struct Mem {
        bytes: Vec<u8>,
        reads: Cell<u64>,
        fail_at: Option<u64>,
    }

    impl ByteSource for Mem {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.set(self.reads.get() + 1);
            if self.fail_at == Some(offset) {
                return Err(io::Error::other("injected"));
            }
            let end = offset as usize + buf.len();
            let src = self
                .bytes
                .get(offset as usize..end)
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    const ID: u64 = 9;
    const AT: u64 = 1 << 20;

    fn path() -> PathBuf {
        PathBuf::from("seg-0000000000000009.pod")
    }

    /// A sealed file (zeroes for records) whose footer names `keys`, any order; offsets are
    /// derived from the keys' positions.
    fn file(keys: &[Vec<u8>], v1: bool) -> (Mem, BTreeMap<Vec<u8>, u64>) {
        let entries: Vec<FooterEntry> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| FooterEntry {
                key: k.clone(),
                kind: RecordKind::Put,
                flags: 0,
                offset: 64 + i as u64 * 13,
                stored_len: 1,
                value_len: 1,
                seq: i as u64,
            })
            .collect();
        let footer = if v1 {
            encode_footer_v1(ID, AT, AT, 4096, &entries)
        } else {
            encode_footer(ID, AT, AT, 4096, &entries)
        };
        let mut bytes = vec![0u8; AT as usize];
        bytes.extend_from_slice(&footer);
        let model = entries.into_iter().map(|e| (e.key, e.offset)).collect();
        let mem = Mem {
            bytes,
            reads: Cell::new(0),
            fail_at: None,
        };
        (mem, model)
    }

    fn range(model: &BTreeMap<Vec<u8>, u64>, start: Bound<&[u8]>) -> Vec<(Vec<u8>, u64)> {
        let start = start.map(|s| s.to_vec());
        model
            .range((start, Bound::Unbounded))
            .map(|(k, o)| (k.clone(), *o))
            .collect()
    }

    fn listed(mem: Mem, start: Bound<&[u8]>) -> Vec<(Vec<u8>, u64)> {
        let mut keys = SortedKeys::open(mem, ID, &path()).unwrap().unwrap();
        keys.seek(start).unwrap();
        keys.collect::<Result<Vec<_>>>().unwrap()
    }

    /// Pseudo-random keys: lengths 1..=len_max (some 4 KiB), bytes from a small alphabet so that
    /// prefixes repeat.
    fn keys(n: usize, seed: u64, len_max: usize) -> Vec<Vec<u8>> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut set = std::collections::BTreeSet::new();
        while set.len() < n {
            let len = if next() % 97 == 0 {
                4096
            } else {
                1 + (next() as usize % len_max)
            };
            set.insert(
                (0..len)
                    .map(|_| b"abcx\0\xff"[next() as usize % 6])
                    .collect(),
            );
        }
        let mut v: Vec<Vec<u8>> = set.into_iter().collect();
        // Any order in.
        for i in (1..v.len()).rev() {
            v.swap(i, next() as usize % (i + 1));
        }
        v
    }

    /// Every bound kind, at every key, just before and after it, and outside the key range,
    /// yields exactly the model's range, for one key, a few, and many blocks, both versions.
    #[test]
    fn seek_matches_a_btreemap_for_every_bound() {
        for (n, seed, len_max, v1) in [
            (1usize, 1u64, 16usize, false),
            (1, 2, 4096, false),
            (7, 3, 40, false),
            (600, 4, 24, false),
            (300, 5, 200, false),
            (40, 6, 4096, false),
            (200, 7, 30, true),
        ] {
            let ks = keys(n, seed, len_max);
            let (_, model) = file(&ks, v1);
            let mut probes: Vec<Vec<u8>> = vec![vec![], vec![0], vec![0xff; 5000]];
            for k in model.keys() {
                probes.push(k.clone());
                let mut less = k.clone();
                less.pop();
                probes.push(less);
                let mut more = k.clone();
                more.push(0);
                probes.push(more);
            }
            let all = listed(file(&ks, v1).0, Bound::Unbounded);
            assert_eq!(all, range(&model, Bound::Unbounded), "n={n} v1={v1}");
            for p in probes.iter().step_by(if n > 100 { 7 } else { 1 }) {
                for b in [Bound::Included(&p[..]), Bound::Excluded(&p[..])] {
                    let (mem, _) = file(&ks, v1);
                    assert_eq!(listed(mem, b), range(&model, b), "n={n} v1={v1} {b:?}");
                }
            }
        }
    }

    #[test]
    fn a_seek_reads_log_blocks_not_the_file() {
        let ks = keys(5000, 11, 16);
        let (mem, model) = file(&ks, false);
        let mut keys = SortedKeys::open(mem, ID, &path()).unwrap().unwrap();
        let target = model.keys().nth(3777).unwrap().clone();
        keys.seek(Bound::Included(&target)).unwrap();
        let blocks = match &keys.state {
            State::Blocks { blocks, .. } => blocks.len(),
            _ => unreachable!(),
        };
        assert!(blocks > 16, "{blocks} blocks");
        let reads = keys.src.reads.get();
        // Trailer, header, index, then a binary search and the block it lands in.
        let bound = 3 + (usize::BITS - blocks.leading_zeros()) as u64 + 1;
        assert!(reads <= bound, "{reads} reads for {blocks} blocks");
        assert_eq!(keys.next().unwrap().unwrap().0, target);
    }

    #[test]
    fn damage_and_failed_reads_are_typed_items() {
        let ks = keys(600, 12, 24);
        let (clean, _) = file(&ks, false);
        let t =
            Trailer::decode(&clean.bytes[clean.bytes.len() - TRAILER_LEN..], clean.len()).unwrap();
        let blocks_at = AT + 8;
        // A flipped byte in a key block, the block index or the location header.
        for at in [blocks_at + 5, t.table_offset - 3, t.table_offset + 9] {
            let (mut mem, _) = file(&ks, false);
            mem.bytes[at as usize] ^= 0x40;
            let mut keys = SortedKeys::open(mem, ID, &path()).unwrap().unwrap();
            let mut items: Vec<Result<(Vec<u8>, u64)>> = Vec::new();
            if let Err(e) = keys.seek(Bound::Unbounded) {
                items.push(Err(e));
            }
            items.extend(&mut keys);
            let err = items
                .iter()
                .find_map(|i| i.as_ref().err())
                .unwrap_or_else(|| panic!("flip at {at} undetected"));
            assert!(
                matches!(err, Error::Corruption { segment: ID, offset, .. } if *offset >= AT),
                "{err:?}"
            );
            assert!(items.last().unwrap().is_err(), "the error ends the items");
        }
        // A failed read of the first block.
        let (mut mem, _) = file(&ks, false);
        mem.fail_at = Some(blocks_at);
        let mut keys = SortedKeys::open(mem, ID, &path()).unwrap().unwrap();
        assert!(matches!(keys.next(), Some(Err(Error::Io { .. }))));
        assert!(keys.next().is_none());
        // No trailer: not sealed.
        let (mut mem, _) = file(&ks, false);
        let n = mem.bytes.len();
        mem.bytes[n - 1] ^= 1;
        assert!(SortedKeys::open(mem, ID, &path()).unwrap().is_none());
    }
}
