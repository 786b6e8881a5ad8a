//! An upper bound on the length of a footer, kept up as records are appended to a log segment,
//! so that the segment is sealed before its footer would take the file past the segment size:
//! a sealed segment is then at most [`Options::segment_size`](crate::Options::segment_size)
//! bytes (a lone record larger than that excepted), which the size cap counts on.
//!
//! The bound follows the encoders (`keys.rs`, `tree.rs`, `locations.rs`) term by term:
//! - the key section: its header; per entry, the key's length varint, the key and the record
//!   offset varint; per key block, its count and crc. A block other than the last closes once it
//!   holds [`KEY_BLOCK_TARGET`] bytes or more, so there are at most
//!   `entry bytes / (KEY_BLOCK_TARGET - 2) + 1` blocks;
//! - the fence-key tree: one entry per child (the child's first key, at most the longest key,
//!   with two varints) and a 16-byte header and crc per node. Every node but a level's last has
//!   two children or more, so a level above `E` children has at most `E / 2 + 1` entries: all
//!   levels together hold at most `2 B + 2 depth` entries over `B` key blocks, in at most
//!   `B + 2 depth + 1` nodes, with `depth <= log2(B) + 2`;
//! - the location table: its header and each entry's own varints (a duplicate key, whose older
//!   record the footer leaves out, is counted anyway);
//! - the trailer, and a block of padding each before and after the footer (the records end
//!   on a block boundary before it; the trailer ends the file on one).

use super::keys::{KEY_BLOCK_TARGET, KEYS_HEADER_LEN};
use super::locations::LOCATION_HEADER_LEN;
use super::tree::NODE_HEADER_LEN;
use super::{MAX_LOCATION_ENTRY_LEN, TRAILER_LEN, varint};
use crate::format::record::{FLAG_COMPRESSED, FooterEntry};

/// A key block's count (2 bytes) and crc (4).
const KEY_BLOCK_FIXED: u64 = 2 + 4;
/// A tree node's header and crc.
const NODE_FIXED: u64 = NODE_HEADER_LEN as u64 + 4;
/// A tree entry's two varints: the key's length (at most 4096: 2 bytes) and the child's length
/// (under 2^14: 2 bytes).
const NODE_ENTRY_VARINTS: u64 = 2 + 2;
/// The most a key-section entry's varints take: the key's length (2) and a record offset (10).
const MAX_KEY_ENTRY_VARINTS: u64 = 2 + 10;

/// An upper bound on the length of the footer of the entries added so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FooterBound {
    /// Bytes of the key section's entries: key, its length and the record offset.
    key_entry_bytes: u64,
    /// Bytes of the location table's entries.
    location_bytes: u64,
    /// The longest key.
    longest_key: u64,
}

impl FooterBound {
    /// Counts the entry `e`.
    pub fn add(&mut self, e: &FooterEntry) {
        let key = e.key.len() as u64;
        self.key_entry_bytes += varint::len(key) as u64 + key + varint::len(e.offset) as u64;
        let mut loc = 8
            + varint::len(e.seq)
            + varint::len(e.offset)
            + varint::len(e.stored_len)
            + varint::len(key)
            + 1;
        if e.flags & FLAG_COMPRESSED != 0 {
            loc += varint::len(e.value_len);
        }
        if let Some(at) = e.expires_at {
            loc += varint::len(at);
        }
        self.location_bytes += loc as u64;
        self.longest_key = self.longest_key.max(key);
    }

    /// The bound with one more entry of a `key_len`-byte key whose other fields are not known
    /// yet (counted at their longest).
    pub fn with_key(mut self, key_len: usize) -> FooterBound {
        let key = key_len as u64;
        self.key_entry_bytes += key + MAX_KEY_ENTRY_VARINTS;
        self.location_bytes += MAX_LOCATION_ENTRY_LEN as u64;
        self.longest_key = self.longest_key.max(key);
        self
    }

    /// At most how many bytes the footer of the entries counted adds to a segment whose records
    /// end where it starts, padding before and after included, for blocks of `block_size`.
    pub fn footer_len(&self, block_size: u64) -> u64 {
        let blocks = if self.key_entry_bytes == 0 {
            0
        } else {
            self.key_entry_bytes / (KEY_BLOCK_TARGET as u64 - 2) + 1
        };
        let depth = 64 - u64::from(blocks.leading_zeros()) + 2;
        let tree_entries = 2 * blocks + 2 * depth;
        let tree_nodes = blocks + 2 * depth + 1;
        let tree = tree_entries * (self.longest_key + NODE_ENTRY_VARINTS) + tree_nodes * NODE_FIXED;
        let keys = KEYS_HEADER_LEN as u64 + self.key_entry_bytes + blocks * KEY_BLOCK_FIXED;
        let locations = LOCATION_HEADER_LEN as u64 + self.location_bytes;
        keys + tree + locations + TRAILER_LEN as u64 + 2 * (block_size - 1)
    }
}
