//! The fence-key tree of a footer's key section (version 2): a B+-tree written once, at seal
//! time, over the key blocks, so that a reader finds the block a key is in by reading one node
//! per level (the root, then a node of about 4 KiB per level) instead of an index of every
//! block.
//!
//! Level 0 is the key blocks. Level k+1 is index nodes over level k's blocks or nodes, written
//! right after level k, back to back; the last level is a single node, the **root**, which ends
//! where the key section ends (at the location table). Each node names its children by their
//! first key in full (the *fence key*) and their length; the children of a node, and of a whole
//! level, lie back to back, so the node stores only its first child's offset. A node closes
//! before it would pass [`NODE_TARGET`] bytes, but only once it holds two entries: every level
//! but the root holds at least two children per node (the last node of a level excepted), so
//! each level is at most half as long as the one below and a tree over 2^32 keys is at most 32
//! levels deep ([`MAX_TREE_DEPTH`]).
//!
//! A node's crc is seeded with the segment id and the node's own offset, like a key block's, and
//! a node records its level, so a node read at the wrong place, from another file or at the
//! wrong depth fails.

use super::keys::{BlockRef, KEYS_HEADER_LEN, MAX_KEY_BLOCK_LEN, MIN_KEY_BLOCK_LEN, block_crc};
use super::{LocationHeader, varint};
use crate::error::Corruption;
use crate::format::{MAX_KEY_LEN, check_crc, get_u16, get_u32, get_u64, need, reserved_zero};

/// An index node closes before its count, level, first child offset, entries and crc would pass
/// this many bytes, once it holds two entries (so a node of two 4 KiB fence keys is longer).
pub const NODE_TARGET: usize = 4096;
/// Length of a node's fixed start: entry count, level, reserved byte, first child offset.
pub const NODE_HEADER_LEN: usize = 12;
/// Longest node entry: a key length of 2 bytes, a 4 KiB key, a child length of 2 bytes (every
/// child is shorter than 16 KiB).
const MAX_NODE_ENTRY_LEN: usize = 2 + MAX_KEY_LEN + 2;
/// Longest node: two longest entries (a node takes its first two entries whatever their length),
/// or else at most [`NODE_TARGET`].
pub const MAX_NODE_LEN: usize = NODE_HEADER_LEN + 2 * MAX_NODE_ENTRY_LEN + 4;
/// Shortest node: its fixed start, one entry of a 1-byte key, crc.
pub(crate) const MIN_NODE_LEN: usize = NODE_HEADER_LEN + 3 + 4;
/// Most index levels a footer has (see the module's documentation).
pub const MAX_TREE_DEPTH: u8 = 32;

// Child lengths are varints of at most 2 bytes (MAX_NODE_ENTRY_LEN), and nodes are longer than
// the target only when two long keys force it.
const _: () = assert!(MAX_NODE_LEN < 1 << 14 && MAX_KEY_BLOCK_LEN < 1 << 14);
const _: () = assert!(MAX_NODE_LEN > NODE_TARGET);

mod off {
    pub const COUNT: usize = 0;
    pub const LEVEL: usize = 2;
    pub const RESERVED: usize = 3;
    pub const FIRST_CHILD: usize = 4;
}

#[cfg(test)]
pub(crate) const NODE_FIELDS: &[(usize, usize)] = &[
    (off::COUNT, 2),
    (off::LEVEL, 1),
    (off::RESERVED, 1),
    (off::FIRST_CHILD, 8),
];

/// One child of an index node: its first key and where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Child<'a> {
    /// The child's first key (its fence key).
    pub key: &'a [u8],
    /// Where the child is: a key block (a node of level 1) or a node of the level below.
    pub block: BlockRef,
}

/// A decoded index node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexNode<'a> {
    /// Its children (at least one), in ascending order of their first keys, back to back in the
    /// file and ending at or before the node.
    pub children: Vec<Child<'a>>,
}

/// Where the encoder put the tree.
#[derive(Debug, Clone, Copy)]
pub(super) struct TreeInfo {
    /// The root (`None` without keys: no levels at all).
    pub root: Option<BlockRef>,
    pub depth: u8,
}

impl TreeInfo {
    /// The location table's header for a key section of `key_len` bytes at `key_offset`
    /// ending in this tree: without keys, the root is an empty node at the section's end.
    pub(super) fn header(&self, key_offset: u64, key_len: u64, base_seq: u64) -> LocationHeader {
        let root = self.root.unwrap_or(BlockRef {
            offset: key_offset + key_len,
            len: 0,
        });
        LocationHeader {
            key_offset,
            key_len,
            root_offset: root.offset,
            root_len: root.len,
            depth: self.depth,
            base_seq,
        }
    }
}

/// Appends the index levels over `blocks` (the key blocks in order, each with its first key) to
/// `out`, whose byte `start` is at file offset `at`.
pub(super) fn encode_tree(
    out: &mut Vec<u8>,
    segment: u64,
    at: u64,
    start: usize,
    blocks: Vec<(BlockRef, &[u8])>,
) -> TreeInfo {
    let mut level = blocks;
    let mut depth = 0u8;
    while !level.is_empty() {
        depth += 1;
        level = encode_level(out, segment, at, start, depth, &level);
        if level.len() == 1 {
            return TreeInfo {
                root: Some(level[0].0),
                depth,
            };
        }
    }
    TreeInfo {
        root: None,
        depth: 0,
    }
}

/// Appends the nodes of level `level` over `children`; returns them with their first keys.
fn encode_level<'k>(
    out: &mut Vec<u8>,
    segment: u64,
    at: u64,
    start: usize,
    level: u8,
    children: &[(BlockRef, &'k [u8])],
) -> Vec<(BlockRef, &'k [u8])> {
    let mut nodes = Vec::new();
    let mut i = 0;
    while i < children.len() {
        let node_start = out.len();
        let first = i;
        out.extend_from_slice(&[0, 0, level, 0]);
        out.extend_from_slice(&children[i].0.offset.to_le_bytes());
        while i < children.len() {
            let (child, key) = children[i];
            let entry = varint::len(key.len() as u64) + key.len() + varint::len(child.len as u64);
            if i - first >= 2 && out.len() - node_start + entry + 4 > NODE_TARGET {
                break;
            }
            varint::put(out, key.len() as u64);
            out.extend_from_slice(key);
            varint::put(out, child.len as u64);
            i += 1;
        }
        // At most NODE_TARGET / 3 entries, or two.
        let count = (i - first) as u16;
        out[node_start..node_start + 2].copy_from_slice(&count.to_le_bytes());
        let offset = at + (node_start - start) as u64;
        let crc = block_crc(segment, offset, &out[node_start..]);
        out.extend_from_slice(&crc.to_le_bytes());
        let len = (out.len() - node_start) as u32;
        nodes.push((BlockRef { offset, len }, children[first].1));
    }
    nodes
}

/// Decodes and verifies the index node `node` of level `level` (1 ..= [`MAX_TREE_DEPTH`]) of
/// segment `segment` from its bytes (`node.len` of them, read at `node.offset`): its crc (bound to
/// the segment and the node's offset), its level, at least one entry, fence keys of 1..=4096
/// bytes strictly ascending, child lengths that a key block (level 1) or a node (above) can
/// have, and children that end at or before the node.
pub fn decode_index_node<'a>(
    segment: u64,
    level: u8,
    node: &BlockRef,
    bytes: &'a [u8],
) -> Result<IndexNode<'a>, Corruption> {
    let invalid = |field, value| Err(Corruption::InvalidField { field, value });
    let len = node.len as usize;
    need(bytes, len)?;
    if !(MIN_NODE_LEN..=MAX_NODE_LEN).contains(&len) {
        return invalid("footer index node length", len as u64);
    }
    let bytes = &bytes[..len];
    let body = &bytes[..len - 4];
    check_crc(
        block_crc(segment, node.offset, body),
        get_u32(bytes, len - 4),
    )?;
    if body[off::LEVEL] != level || level == 0 || level > MAX_TREE_DEPTH {
        return invalid("footer index node level", body[off::LEVEL] as u64);
    }
    reserved_zero(
        &body[off::RESERVED..off::FIRST_CHILD],
        "footer index node reserved",
    )?;
    let count = get_u16(body, off::COUNT) as usize;
    if count == 0 {
        return invalid("footer index node entry count", 0);
    }
    let (child_min, child_max) = if level == 1 {
        (MIN_KEY_BLOCK_LEN, MAX_KEY_BLOCK_LEN)
    } else {
        (MIN_NODE_LEN, MAX_NODE_LEN)
    };
    let mut at = get_u64(body, off::FIRST_CHILD);
    // An entry takes at least 3 bytes: the count cannot make this allocate more than the node.
    let mut children: Vec<Child<'a>> = Vec::with_capacity(count.min(body.len() / 3));
    let mut pos = NODE_HEADER_LEN;
    for _ in 0..count {
        let key_len = varint::get_max(body, &mut pos, MAX_KEY_LEN as u64, "footer key length")?;
        if key_len == 0 {
            return invalid("footer key length", 0);
        }
        need(body, pos + key_len as usize)?;
        let key = &body[pos..pos + key_len as usize];
        pos += key_len as usize;
        let child_len = varint::get_max(
            body,
            &mut pos,
            child_max as u64,
            "footer index child length",
        )?;
        if child_len < child_min as u64 {
            return invalid("footer index child length", child_len);
        }
        if children.last().is_some_and(|c| c.key >= key) {
            return invalid("footer key order", at);
        }
        children.push(Child {
            key,
            block: BlockRef {
                offset: at,
                len: child_len as u32,
            },
        });
        // Children come before their parent: a descent always moves down the file.
        at = match at.checked_add(child_len) {
            Some(end) if end <= node.offset => end,
            _ => return invalid("footer index child offset", at),
        };
    }
    if pos != body.len() {
        return invalid("footer index node length", len as u64);
    }
    Ok(IndexNode { children })
}

/// Decodes and verifies the whole tree of the key section `keys` (its bytes from
/// `header.key_offset`, at least `header.key_len` of them), top down: every node (as
/// [`decode_index_node`]), every fence key equal to its node's first fence key (the key blocks'
/// first keys are checked by the caller, which decodes them), the children of each level back to
/// back and ending where that level starts, and the key blocks starting right after the key
/// section's header. Returns the key blocks in order, each with its fence key.
pub(super) fn decode_tree<'a>(
    segment: u64,
    header: &LocationHeader,
    keys: &'a [u8],
) -> Result<Vec<Child<'a>>, Corruption> {
    let invalid = |field, value| Err(Corruption::InvalidField { field, value });
    let Some(root) = header.root() else {
        return Ok(Vec::new());
    };
    let bytes_at = |at: u64| -> Result<&'a [u8], Corruption> {
        match at.checked_sub(header.key_offset) {
            Some(rel) => Ok(keys.get(rel as usize..).unwrap_or(&[])),
            None => Err(Corruption::InvalidField {
                field: "footer index child offset",
                value: at,
            }),
        }
    };
    // The root has no fence key above it: its own first key stands in.
    let mut level: Vec<Child<'a>> = vec![Child {
        key: &[],
        block: root,
    }];
    for depth in (1..=header.depth).rev() {
        let level_start = level[0].block.offset;
        let mut below: Vec<Child<'a>> = Vec::new();
        for (i, n) in level.iter().enumerate() {
            let node = decode_index_node(segment, depth, &n.block, bytes_at(n.block.offset)?)?;
            let first = node.children[0];
            if depth != header.depth && first.key != n.key {
                return invalid("footer fence key", n.block.offset);
            }
            // Back to back with the previous node's children.
            if i > 0
                && below.last().map(|c| c.block.offset + c.block.len as u64)
                    != Some(first.block.offset)
            {
                return invalid("footer index child offset", first.block.offset);
            }
            below.extend(node.children);
        }
        let end = below.last().map(|c| c.block.offset + c.block.len as u64);
        if end != Some(level_start) {
            return invalid("footer index child offset", end.unwrap_or(0));
        }
        level = below;
    }
    let first = level[0].block.offset;
    if first != header.key_offset.saturating_add(KEYS_HEADER_LEN as u64) {
        return invalid("footer key block offset", first);
    }
    Ok(level)
}

#[cfg(test)]
mod tests;
