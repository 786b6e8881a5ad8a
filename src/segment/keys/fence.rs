//! A position in the fence-key tree of a footer of version 2 (`format::footer::tree`): the
//! nodes from the root down to level 1, each with the child the position is under, and the key
//! block under the last of them.
//!
//! A seek descends from the root, at each level to the last child whose fence key (its first
//! key) is before the start, reusing the nodes of the path it already holds; the iteration then
//! moves to the next key block through the path (the next child of the deepest node that has
//! one, then the first children down from there), so that every node is read at most once while
//! a listing moves forward, and a listing of a few keys reads one node per level and one or two
//! key blocks.
//!
//! Backwards ([`Cursor::seek_back`], [`Cursor::prev`]) mirrors this: a seek descends to the
//! last child whose fence key is not past the end, and the iteration moves to the previous key
//! block (the previous child of the deepest node that has one, then the last children down).
//! A cursor is read in one direction, the one its first seek chose.
//!
//! Every node and block read is verified (its crc, bound to the file and its offset; a node's
//! level), and so is what the tree says of it: a child starts with its fence key, and the first
//! key of a block comes after the last key of the block before it.

use super::{FooterFile, FooterSource, KeySeq, Keyed};
use crate::error::{Corruption, Result};
use crate::format::footer::{
    BlockRef, LOCATION_HEADER_LEN, LocationHeader, NODE_TARGET, decode_index_node, decode_key_block,
};

/// A node of the path, decoded, and which of its children the position is under.
struct Step {
    node: BlockRef,
    children: Vec<(Vec<u8>, BlockRef)>,
    child: usize,
}

/// A position in the tree: a path from the root (level `depth`) down to a node of level 1,
/// the key block under it, and the next entry of that block.
pub(super) struct Cursor {
    header: LocationHeader,
    /// `path[i]` is a node of level `depth - i`; empty before the first seek and without keys.
    path: Vec<Step>,
    /// The key block under the last step (`None`: none read yet) and its entries.
    block: Option<BlockRef>,
    entries: Keyed,
    /// Their records' sequence numbers, when the location table told them (else empty).
    seqs: Vec<u64>,
    /// The next entry of `entries`.
    entry: usize,
    /// Whether a seek (or the first item) has positioned the cursor.
    positioned: bool,
}

impl Cursor {
    /// Reads the location table's header and, in the same read, the bytes before it, where
    /// the root ends: a root of up to [`NODE_TARGET`] bytes (all but the footers with long
    /// keys) costs no read of its own.
    pub(super) fn load<S: FooterSource>(file: &FooterFile<S>) -> Result<Cursor> {
        let t = file.trailer;
        // The bytes between the data end and the table are the key section's, or padding.
        let before = (NODE_TARGET as u64).min(t.table_offset - t.data_end);
        let head_len = (LOCATION_HEADER_LEN as u64).min(t.table_len);
        let at = t.table_offset - before;
        let (window, kept) = file.fetch(at, before + head_len)?;
        let head = &window[before as usize..];
        let header =
            LocationHeader::decode_header(&t, head).map_err(|k| file.corrupt(t.table_offset, k))?;
        let mut cursor = Cursor {
            header,
            path: Vec::new(),
            block: None,
            entries: Vec::new(),
            seqs: Vec::new(),
            entry: 0,
            positioned: false,
        };
        if let Some(root) = header.root()
            && root.len as u64 <= before
        {
            let bytes = &window[(before - root.len as u64) as usize..before as usize];
            let step = cursor.decode_step(file, header.depth, root, None, bytes)?;
            cursor.path.push(step);
        }
        // The header verified, and the root too when it is in the window.
        file.verified(at, window, kept);
        Ok(cursor)
    }

    /// Decodes the node `node` of level `level` from `bytes`; `fence`: the key its first child
    /// must start with (none for the root).
    fn decode_step<S: FooterSource>(
        &self,
        file: &FooterFile<S>,
        level: u8,
        node: BlockRef,
        fence: Option<&[u8]>,
        bytes: &[u8],
    ) -> Result<Step> {
        let decoded = decode_index_node(file.id, level, &node, bytes)
            .map_err(|k| file.corrupt(node.offset, k))?;
        if fence.is_some_and(|f| f != decoded.children[0].key) {
            return Err(fence_mismatch(file, node.offset));
        }
        Ok(Step {
            node,
            children: decoded
                .children
                .iter()
                .map(|c| (c.key.to_vec(), c.block))
                .collect(),
            child: 0,
        })
    }

    /// Reads node `node` of level `level` (see [`Self::decode_step`]).
    fn read_step<S: FooterSource>(
        &self,
        file: &FooterFile<S>,
        level: u8,
        node: BlockRef,
        fence: Option<&[u8]>,
    ) -> Result<Step> {
        let (bytes, kept) = file.fetch(node.offset, node.len as u64)?;
        let step = self.decode_step(file, level, node, fence, &bytes)?;
        file.verified(node.offset, bytes, kept);
        Ok(step)
    }

    /// The child the step of level `depth - i` is at.
    fn child_of(&self, i: usize) -> (&[u8], BlockRef) {
        let s = &self.path[i];
        (&s.children[s.child].0, s.children[s.child].1)
    }

    /// Reads the key block under the last step, which starts with `fence`; `from`: the block
    /// the cursor moves on from, if it does (the new block's keys must all come after its keys,
    /// or all before them when moving backwards).
    fn read_block<S: FooterSource>(&mut self, file: &FooterFile<S>, from: Move) -> Result<()> {
        let (fence, block) = self.child_of(self.path.len() - 1);
        if self.block == Some(block) {
            return Ok(());
        }
        let (bytes, kept) = file.fetch(block.offset, block.len as u64)?;
        let kb = decode_key_block(file.id, file.trailer.data_end, &block, &bytes)
            .map_err(|k| file.corrupt(block.offset, k))?;
        let first = kb.entries[0].0;
        if first != fence {
            return Err(fence_mismatch(file, block.offset));
        }
        let last = kb.entries[kb.entries.len() - 1].0;
        let out_of_order = match from {
            Move::Seek => false,
            Move::Forward => self
                .entries
                .last()
                .is_some_and(|(k, _)| k.as_slice() >= first),
            Move::Backward => self
                .entries
                .first()
                .is_some_and(|(k, _)| k.as_slice() <= last),
        };
        if out_of_order {
            return Err(file.corrupt(
                block.offset,
                Corruption::InvalidField {
                    field: "footer key order",
                    value: block.offset,
                },
            ));
        }
        self.entries = kb.entries.iter().map(|(k, o)| (k.to_vec(), *o)).collect();
        file.verified(block.offset, bytes, kept);
        self.seqs = file.seqs_of(block, &self.entries);
        self.block = Some(block);
        Ok(())
    }

    /// Positions the cursor at the first key for which `before` is false (`before` is true of
    /// a prefix of the keys).
    pub(super) fn seek<S: FooterSource>(
        &mut self,
        file: &FooterFile<S>,
        before: impl Fn(&[u8]) -> bool,
    ) -> Result<()> {
        self.positioned = true;
        let Some(root) = self.header.root() else {
            return Ok(());
        };
        let depth = self.header.depth as usize;
        let mut node = root;
        let mut fence: Option<Vec<u8>> = None;
        for i in 0..depth {
            if self.path.get(i).is_none_or(|s| s.node != node) {
                let step = self.read_step(file, (depth - i) as u8, node, fence.as_deref())?;
                self.path.truncate(i);
                self.path.push(step);
            }
            let s = &mut self.path[i];
            // The last child whose first key is before the start (the range may begin inside
            // it), or the first.
            s.child = s
                .children
                .partition_point(|(k, _)| before(k))
                .saturating_sub(1);
            let (key, child) = &s.children[s.child];
            fence = Some(key.clone());
            node = *child;
        }
        self.read_block(file, Move::Seek)?;
        self.entry = self.entries.partition_point(|(k, _)| before(k));
        Ok(())
    }

    /// Positions the cursor, for [`Cursor::prev`], after the last key for which `after` is
    /// false (`after` is true of a suffix of the keys). The same descent as [`Cursor::seek`]
    /// with the predicate "not after": the last child whose first key is not past the end (the
    /// range may end inside it), and in its block `entry` counts the entries still to come, from
    /// the last one back.
    pub(super) fn seek_back<S: FooterSource>(
        &mut self,
        file: &FooterFile<S>,
        after: impl Fn(&[u8]) -> bool,
    ) -> Result<()> {
        self.seek(file, |k| !after(k))
    }

    /// Entry `i` of the current block, with its sequence number if known.
    fn item(&self, i: usize) -> KeySeq {
        let (key, offset) = self.entries[i].clone();
        (key, offset, self.seqs.get(i).copied())
    }

    /// Moves to the first key of the next key block; false after the last block.
    fn advance<S: FooterSource>(&mut self, file: &FooterFile<S>) -> Result<bool> {
        // The deepest node with a child after the current one.
        let Some(i) = self
            .path
            .iter()
            .rposition(|s| s.child + 1 < s.children.len())
        else {
            return Ok(false);
        };
        self.path[i].child += 1;
        self.path.truncate(i + 1);
        let depth = self.header.depth as usize;
        for j in i + 1..depth {
            let (fence, node) = self.child_of(j - 1);
            let fence = fence.to_vec();
            let step = self.read_step(file, (depth - j) as u8, node, Some(&fence))?;
            self.path.push(step);
        }
        self.read_block(file, Move::Forward)?;
        self.entry = 0;
        Ok(true)
    }

    /// Moves after the last key of the previous key block; false before the first block.
    fn retreat<S: FooterSource>(&mut self, file: &FooterFile<S>) -> Result<bool> {
        // The deepest node with a child before the current one.
        let Some(i) = self.path.iter().rposition(|s| s.child > 0) else {
            return Ok(false);
        };
        self.path[i].child -= 1;
        self.path.truncate(i + 1);
        let depth = self.header.depth as usize;
        for j in i + 1..depth {
            let (fence, node) = self.child_of(j - 1);
            let fence = fence.to_vec();
            let mut step = self.read_step(file, (depth - j) as u8, node, Some(&fence))?;
            step.child = step.children.len() - 1;
            self.path.push(step);
        }
        self.read_block(file, Move::Backward)?;
        self.entry = self.entries.len();
        Ok(true)
    }

    /// The previous key and its record offset, backwards from where [`Cursor::seek_back`] put
    /// the cursor (from the last key without a seek).
    pub(super) fn prev<S: FooterSource>(&mut self, file: &FooterFile<S>) -> Result<Option<KeySeq>> {
        if !self.positioned {
            self.seek_back(file, |_| false)?;
        }
        loop {
            if let Some(i) = self.entry.checked_sub(1) {
                self.entry = i;
                return Ok(Some(self.item(i)));
            }
            if !self.retreat(file)? {
                return Ok(None);
            }
        }
    }

    /// The next key and its record offset.
    pub(super) fn next<S: FooterSource>(&mut self, file: &FooterFile<S>) -> Result<Option<KeySeq>> {
        if !self.positioned {
            self.seek(file, |_| false)?;
        }
        loop {
            if self.entry < self.entries.len() {
                self.entry += 1;
                return Ok(Some(self.item(self.entry - 1)));
            }
            if !self.advance(file)? {
                return Ok(None);
            }
        }
    }
}

/// How the cursor came to a key block: by a seek, or moving on from the block before or after.
#[derive(Clone, Copy)]
enum Move {
    Seek,
    Forward,
    Backward,
}

fn fence_mismatch<S: FooterSource>(file: &FooterFile<S>, at: u64) -> crate::error::Error {
    file.corrupt(
        at,
        Corruption::InvalidField {
            field: "footer fence key",
            value: at,
        },
    )
}
