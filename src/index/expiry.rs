//! The index's side table of expiries (issue 39): for each entry whose value expires, its
//! instant and its record's length, by the record's place (file id, offset).
//!
//! Why a side table and not a field of every packed entry: 8 bytes more per key would cost every
//! store 35 % more index memory whether or not it holds anything that expires; here a store
//! without expiring values pays one empty map and one atomic load per expiring-flagged lookup
//! (none). The packed entry carries one bit (`packed.rs`, bit 38 of the stored length) that says
//! "look me up here".
//!
//! Consistency: a record's place names it for its whole life and its expiry never changes, so
//! the table is a function of the place. Every change of the index adds the places it packs and
//! removes those it drops while it holds the shard's write lock (`Index::account`), and a lookup
//! unpacks under the shard's read lock, so no reader finds a flagged entry without its expiry.
//! Lock order: a shard, then this table; never the reverse.

use std::collections::BTreeMap;
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// One expiring entry: when its value expires, and what its record takes on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiring {
    /// Milliseconds since the Unix epoch.
    pub at: u64,
    /// Bytes of the record (header, key, stored value, checksums).
    pub record_len: u64,
}

/// Expiries by place (see the module doc).
#[derive(Debug, Default)]
pub struct ExpiryTable {
    by_place: RwLock<BTreeMap<(u64, u64), Expiring>>,
    /// Entries in the table: lets a store that never held an expiring value skip the lock.
    len: AtomicU64,
}

impl ExpiryTable {
    /// Notes the expiry of the entry at `place`.
    pub fn insert(&self, place: (u64, u64), e: Expiring) {
        let mut t = self.by_place.write().unwrap_or_else(|p| p.into_inner());
        if t.insert(place, e).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets the entry at `place` (nothing if it has no expiry).
    pub fn remove(&self, place: (u64, u64)) {
        if self.is_empty() {
            return;
        }
        let mut t = self.by_place.write().unwrap_or_else(|p| p.into_inner());
        if t.remove(&place).is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// The expiry of the entry at `place`, if it has one.
    pub fn get(&self, place: (u64, u64)) -> Option<Expiring> {
        if self.is_empty() {
            return None;
        }
        let t = self.by_place.read().unwrap_or_else(|p| p.into_inner());
        t.get(&place).copied()
    }

    /// Number of expiring entries.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    /// True when no entry expires.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes and count of the records whose value has expired at `now_ms` (expiry at or
    /// before it), in file `file` only if given.
    pub fn expired(&self, now_ms: u64, file: Option<u64>) -> (u64, u64) {
        if self.is_empty() {
            return (0, 0);
        }
        let t = self.by_place.read().unwrap_or_else(|p| p.into_inner());
        let range = match file {
            Some(f) => t.range((f, 0)..(f.saturating_add(1), 0)),
            None => t.range(..),
        };
        range
            .filter(|(_, e)| e.at <= now_ms)
            .fold((0, 0), |(b, n), (_, e)| (b + e.record_len, n + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(at: u64, len: u64) -> Expiring {
        Expiring {
            at,
            record_len: len,
        }
    }

    #[test]
    fn insert_get_remove_and_count() {
        let t = ExpiryTable::default();
        assert!(t.is_empty());
        assert_eq!(t.get((1, 64)), None);
        t.insert((1, 64), e(10, 100));
        t.insert((1, 64), e(10, 100)); // again: counted once
        t.insert((2, 64), e(20, 200));
        assert_eq!(t.len(), 2);
        assert_eq!(t.get((1, 64)), Some(e(10, 100)));
        assert_eq!(t.get((1, 65)), None);
        t.remove((1, 64));
        t.remove((1, 64)); // gone already: no underflow
        t.remove((9, 9));
        assert_eq!(t.len(), 1);
        assert_eq!(t.get((1, 64)), None);
        assert_eq!(t.get((2, 64)), Some(e(20, 200)));
    }

    #[test]
    fn expired_counts_what_is_due_at_or_before_now_per_file() {
        let t = ExpiryTable::default();
        t.insert((1, 64), e(10, 100));
        t.insert((1, 500), e(30, 1000));
        t.insert((2, 64), e(10, 7));
        t.insert((3, 0), e(5, 1));
        assert_eq!(t.expired(9, None), (1, 1));
        // At exactly the instant it is due.
        assert_eq!(t.expired(10, None), (108, 3));
        assert_eq!(t.expired(10, Some(1)), (100, 1));
        assert_eq!(t.expired(30, Some(1)), (1100, 2));
        assert_eq!(t.expired(30, Some(4)), (0, 0));
        assert_eq!(t.expired(u64::MAX, Some(u64::MAX)), (0, 0));
    }
}
