//! Removing the entries of records an eviction drops (`store/compact/evict.rs`): by place,
//! never an unresolved one.

use std::sync::atomic::Ordering;

use super::{Index, IndexEntry, place_of, position};

/// What [`Index::remove_if`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The entry was removed.
    Removed,
    /// No entry names the record (any more).
    Gone,
    /// Kept: the entry is unresolved (older versions of its key may be behind it), or a write
    /// of its key is queued ([`PendingQueue::remove_if_idle`](super::PendingQueue::remove_if_idle)).
    Kept,
}

impl Index {
    /// Removes the entry `expected` (named by its place) of a key hashing to `h`, whose file an
    /// eviction drops: [`Removal::Removed`] if it did, [`Removal::Gone`] if no entry names that
    /// record any more (the key was written, deleted or moved since), [`Removal::Kept`]
    /// (and nothing removed) if older versions of the key may be behind it in its run (a lazy
    /// put's): removing it would bring them to the front.
    pub fn remove_if(&self, h: u64, expected: &IndexEntry) -> Removal {
        let (s, fp) = place_of(h);
        let mut shard = self.shard_mut(s);
        let Some(i) = position(&shard, fp, expected.place()) else {
            return Removal::Gone;
        };
        if shard[i].unresolved() {
            return Removal::Kept;
        }
        self.forget_hot(h);
        shard.remove(i);
        self.len.fetch_sub(1, Ordering::Relaxed);
        self.account(Some(expected), None);
        Removal::Removed
    }
}
