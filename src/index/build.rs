//! Building the index at open from what the footers (and recovery scans) name.
//!
//! Files are loaded in any order (blob files interleave with log segments, and compaction
//! copies keep their sequence numbers), so each key's newest record — the highest sequence
//! number, a put or a tombstone — wins, whatever file it was read from; a key whose newest
//! record is a tombstone has no entry.

use std::collections::HashMap;

use super::{Index, IndexEntry};

/// The newest record seen per key while files are loaded.
#[derive(Debug, Default)]
pub struct Builder {
    newest: HashMap<Box<[u8]>, (u64, Option<IndexEntry>)>,
}

impl Builder {
    /// Notes a record of `key` with sequence number `seq`: a put at `entry`, or a tombstone
    /// (`None`). Of two records with one sequence number (a compaction copy and its original),
    /// the first noted stays.
    pub fn add(&mut self, key: Vec<u8>, seq: u64, entry: Option<IndexEntry>) {
        match self.newest.entry(key.into_boxed_slice()) {
            std::collections::hash_map::Entry::Occupied(mut o) => {
                if o.get().0 < seq {
                    o.insert((seq, entry));
                }
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert((seq, entry));
            }
        }
    }

    /// Makes room for `additional` more keys.
    pub fn reserve(&mut self, additional: usize) {
        self.newest.reserve(additional);
    }

    /// Loads the live entries into `index` (empty), freeing what was noted.
    pub fn finish(self, index: &Index) {
        let mut live: Vec<(u64, IndexEntry)> = Vec::with_capacity(self.newest.len());
        for (key, (_, entry)) in self.newest {
            if let Some(e) = entry {
                live.push((index.hash(&key), e));
            }
        }
        // Per file, so that the load's usage accounting meets each file in one run.
        live.sort_unstable_by_key(|(_, e)| e.segment);
        index.load(live);
    }
}
