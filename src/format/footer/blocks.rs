//! Where each key block's entries are in the location table of a footer of version 2: what a
//! listing needs to give the keys of a block their sequence numbers (a value's version) without
//! reading their records, and without reading the whole table.
//!
//! The location table holds one entry per key in the key order of the key blocks, so the keys
//! of a block are a run of consecutive entries; but entries are varints, so where a run starts
//! is known only by decoding the table from its start. [`BlockLocations`] remembers it per key
//! block (its file offset, the ordinal of its first key, the position of that key's entry):
//! 24 bytes per block of about 4 KiB of keys, built while the whole table is decoded anyway (at
//! open, at a seal from the entries being encoded, or once by a listing). A listing that reads a
//! key block then reads the run of its entries (about 15 bytes per key), one read.
//!
//! The block boundaries are not in the table: they follow from it, as the encoder closes a block
//! ([`super::keys::encode_key_section`]: once it holds [`KEY_BLOCK_TARGET`] bytes, each entry a
//! varint key length, the key and a varint record offset), and every length they depend on is in
//! the location entries. A reader checks what it uses: the block's entry count, and each entry's
//! key length, record offset and key hash against the key block it read (which verified); a
//! footer whose blocks were cut otherwise (no encoder did) only loses the shortcut.

use std::ops::Range;

use super::locations::{Location, LocationHeader, decode_location, for_each_location_at};
use super::{FOOTER_V1, KEY_BLOCK_TARGET, KEYS_HEADER_LEN, Trailer, key_hash, varint};
use crate::error::Corruption;

/// Where the location entries of each key block of a footer of version 2 are (see the
/// module's documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockLocations {
    /// File offset of the location table.
    table_offset: u64,
    /// Its length.
    table_len: u64,
    /// Number of entries.
    count: u64,
    /// The lowest sequence number of the entries (each stores its own minus this).
    base_seq: u64,
    /// One past the last record byte (location entries are checked against it).
    data_end: u64,
    /// The footer is of version 3: its entries may carry an expiry.
    expiry_allowed: bool,
    /// Per key block, in file order.
    blocks: Vec<BlockStart>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BlockStart {
    /// File offset of the key block.
    offset: u64,
    /// Ordinal of its first key.
    ordinal: u64,
    /// Position in the location table of that key's entry.
    pos: u64,
}

/// The run of location entries of one key block: what [`BlockLocations::run`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The file range of the entries.
    pub bytes: Range<u64>,
    /// Ordinal of the block's first key.
    pub ordinal: u64,
    /// Number of keys in the block.
    pub count: u64,
}

/// Builds [`BlockLocations`] from the entries in key order, cutting blocks as the encoder does.
pub(crate) struct BlocksBuilder {
    /// File offset of the block being filled.
    at: u64,
    /// Its bytes so far (entry count and entries); 0 before the first key.
    size: usize,
    ordinal: u64,
    blocks: Vec<BlockStart>,
}

impl BlocksBuilder {
    /// A builder for the key section at file offset `key_offset`.
    pub(crate) fn new(key_offset: u64) -> BlocksBuilder {
        BlocksBuilder {
            at: key_offset + KEYS_HEADER_LEN as u64,
            size: 0,
            ordinal: 0,
            blocks: Vec::new(),
        }
    }

    /// The next key (in ascending order): its length, its record offset, and the position of
    /// its entry in the location table.
    pub(crate) fn push(&mut self, key_len: usize, offset: u64, pos: usize) {
        // A block takes its first entry whatever its length, then entries while it holds less
        // than the target (the entry count's 2 bytes included), as `encode_key_section` does.
        if self.size == 0 || self.size >= KEY_BLOCK_TARGET {
            if self.size > 0 {
                self.at += (self.size + 4) as u64; // and its crc
            }
            self.blocks.push(BlockStart {
                offset: self.at,
                ordinal: self.ordinal,
                pos: pos as u64,
            });
            self.size = 2;
        }
        self.size += varint::len(key_len as u64) + key_len + varint::len(offset);
        self.ordinal += 1;
    }

    /// The map of the table `trailer` points at, whose header is `header`.
    pub(crate) fn finish(self, trailer: &Trailer, header: &LocationHeader) -> BlockLocations {
        BlockLocations {
            table_offset: trailer.table_offset,
            table_len: trailer.table_len,
            count: self.ordinal,
            base_seq: header.base_seq,
            data_end: trailer.data_end,
            expiry_allowed: trailer.version == super::FOOTER_V3,
            blocks: self.blocks,
        }
    }
}

impl BlockLocations {
    /// The map of a footer from its location table `table` (which `trailer` points at),
    /// verified whole and decoded once; `None` for a footer of version 1 (whose table a reader
    /// reads whole: it holds the keys).
    pub fn of_table(trailer: &Trailer, table: &[u8]) -> Result<Option<BlockLocations>, Corruption> {
        if trailer.version == FOOTER_V1 {
            return Ok(None);
        }
        let header = LocationHeader::decode(trailer, table)?;
        let mut b = BlocksBuilder::new(header.key_offset);
        for_each_location_at(trailer, table, |l, pos| {
            b.push(l.key_len as usize, l.offset, pos)
        })?;
        Ok(Some(b.finish(trailer, &header)))
    }

    /// Whether this is the map of the footer whose trailer is `trailer`.
    pub fn fits(&self, trailer: &Trailer) -> bool {
        trailer.version != FOOTER_V1
            && trailer.table_offset == self.table_offset
            && trailer.table_len == self.table_len
            && trailer.entry_count == self.count
            && trailer.data_end == self.data_end
    }

    /// The run of location entries of the key block at file offset `block`; `None` if no block
    /// starts there.
    pub fn run(&self, block: u64) -> Option<Run> {
        let i = self
            .blocks
            .binary_search_by_key(&block, |b| b.offset)
            .ok()?;
        let b = self.blocks[i];
        let (end_pos, end_ordinal) = match self.blocks.get(i + 1) {
            Some(next) => (next.pos, next.ordinal),
            None => (self.table_len, self.count),
        };
        Some(Run {
            bytes: self.table_offset + b.pos..self.table_offset + end_pos,
            ordinal: b.ordinal,
            count: end_ordinal - b.ordinal,
        })
    }

    /// The sequence numbers of the keys of a key block, from the bytes of its run (`run`): each
    /// entry decodes and matches its key (`(key, record offset)`, as the block lists them) by
    /// length, record offset and hash.
    pub fn seqs(&self, run: &Run, bytes: &[u8], keys: &[(Vec<u8>, u64)]) -> Option<Vec<u64>> {
        if keys.len() as u64 != run.count || bytes.len() as u64 != run.bytes.end - run.bytes.start {
            return None;
        }
        let mut pos = 0;
        let mut out = Vec::with_capacity(keys.len());
        for (i, (key, offset)) in keys.iter().enumerate() {
            let ordinal = u32::try_from(run.ordinal + i as u64).ok()?;
            let l: Location = decode_location(
                bytes,
                &mut pos,
                self.base_seq,
                self.data_end,
                self.expiry_allowed,
                ordinal,
            )
            .ok()?;
            if l.key_len as usize != key.len() || l.offset != *offset || l.key_hash != key_hash(key)
            {
                return None;
            }
            out.push(l.seq);
        }
        (pos == bytes.len()).then_some(out)
    }

    /// Number of key blocks.
    pub fn blocks(&self) -> usize {
        self.blocks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::many;
    use super::super::tree::decode_tree;
    use super::super::{FooterEntry, TRAILER_LEN, decode_key_block, encode_footer_with_blocks};
    use super::*;

    /// Encodes `entries` at file offset `at`; checks that the map the encoder returned is the
    /// one the table gives, and that each of its runs is exactly the entries of the key block
    /// the fence-key tree names at that offset, with their sequence numbers.
    fn check(entries: &[FooterEntry], at: u64) {
        let (footer, map) = encode_footer_with_blocks(9, at, at, 4096, entries);
        let file_len = at + footer.len() as u64;
        let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
        let table_at = (t.table_offset - at) as usize;
        let table = &footer[table_at..table_at + t.table_len as usize];
        assert_eq!(
            BlockLocations::of_table(&t, table).unwrap(),
            Some(map.clone())
        );
        assert!(map.fits(&t));
        let header = LocationHeader::decode(&t, table).unwrap();
        let keys = &footer[..header.key_len as usize];
        let tree = decode_tree(9, &header, keys).unwrap();
        assert_eq!(map.blocks(), tree.len());
        let mut by_key: Vec<&FooterEntry> = entries.iter().collect();
        by_key.sort_by(|a, b| a.key.cmp(&b.key));
        let mut ordinal = 0;
        for child in &tree {
            let bytes = &footer[(child.block.offset - at) as usize..];
            let kb = decode_key_block(9, t.data_end, &child.block, bytes).unwrap();
            let keyed: Vec<(Vec<u8>, u64)> =
                kb.entries.iter().map(|(k, o)| (k.to_vec(), *o)).collect();
            let run = map.run(child.block.offset).expect("a run per block");
            assert_eq!((run.ordinal, run.count), (ordinal, keyed.len() as u64));
            let run_bytes = &footer[(run.bytes.start - at) as usize..(run.bytes.end - at) as usize];
            let seqs = map.seqs(&run, run_bytes, &keyed).expect("the run matches");
            let want: Vec<u64> = by_key[ordinal as usize..][..keyed.len()]
                .iter()
                .map(|e| e.seq)
                .collect();
            assert_eq!(seqs, want);
            // Another block's keys do not match this run.
            if keyed.len() > 1 {
                assert_eq!(map.seqs(&run, run_bytes, &keyed[1..]), None);
            }
            ordinal += keyed.len() as u64;
        }
        assert_eq!(ordinal, entries.len() as u64);
        assert_eq!(map.run(tree[0].block.offset + 1), None);
    }

    #[test]
    fn runs_are_the_key_blocks_entries() {
        check(&many(1, |_| 8), 4096);
        check(&many(5000, |_| 16), 1 << 20);
        // Long keys: blocks of one or two keys; keys of mixed lengths, records far into the
        // file (offsets of several varint bytes).
        check(
            &many(300, |i| if i % 7 == 0 { 4096 } else { 1000 }),
            1 << 20,
        );
        let mut far = many(3000, |i| 8 + i % 90);
        for (i, e) in far.iter_mut().enumerate() {
            e.offset = (1 << 35) + i as u64 * 100_000;
            e.seq = 1_700_000_000_000_000 + (i as u64 * 7919) % 3000;
        }
        check(&far, 1 << 40);
    }
}
