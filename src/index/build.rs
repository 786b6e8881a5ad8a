//! Building the index at open from what the footers (and recovery scans) name, without keys.
//!
//! Files are loaded in any order (blob files interleave with log segments, and compaction
//! copies keep their sequence numbers), so each key's newest record — the highest sequence
//! number, a put or a tombstone — wins, whatever file it was read from; a key whose newest
//! record is a tombstone has no entry.
//!
//! A footer's location table names each record by its key's 64-bit hash, not its key. Records
//! whose hashes differ are of different keys, which is all open needs to know for almost every
//! record. Records that share a hash are usually one key written more than once (an overwrite
//! whose old record awaits compaction), but may be two keys: for those alone the keys are read
//! (`Builder::finish`'s `fetch_keys`, from the footers' key blocks), and compared.

use std::collections::HashMap;

use super::{Index, IndexEntry};
use crate::error::Result;

/// Reads the keys at some ordinals of a file's footer: `(file, ordinals) -> keys`, in order.
pub type FetchKeys<'a> = dyn FnMut(u64, &[u32]) -> Result<Vec<Vec<u8>>> + 'a;

/// One record noted at open.
#[derive(Debug, Clone, Copy)]
struct Noted {
    /// The key's full [`super::key_hash`] (as the footer wrote it).
    hash: u64,
    seq: u64,
    /// Where the record is (`entry.segment` is its file); for a tombstone only the place counts.
    entry: IndexEntry,
    tombstone: bool,
    /// The record's position in its footer's key order (to read its key if needed).
    ordinal: u32,
}

/// The records seen while files are loaded; [`Builder::finish`] keeps each key's newest.
#[derive(Debug, Default)]
pub struct Builder {
    noted: Vec<Noted>,
    /// Keys already in hand (records found by a recovery scan or in a footer of the old format),
    /// by position in `noted`.
    keys: HashMap<usize, Box<[u8]>>,
    max_seq: u64,
}

impl Builder {
    /// Notes a record: its key's full hash, its sequence number, where it is (`entry`) and
    /// whether it is a tombstone, its ordinal in its footer's key order, and its key if the
    /// caller has it.
    pub fn add(
        &mut self,
        hash: u64,
        seq: u64,
        entry: IndexEntry,
        tombstone: bool,
        ordinal: u32,
        key: Option<Vec<u8>>,
    ) {
        if let Some(k) = key {
            self.keys.insert(self.noted.len(), k.into_boxed_slice());
        }
        self.max_seq = self.max_seq.max(seq);
        self.noted.push(Noted {
            hash,
            seq,
            entry,
            tombstone,
            ordinal,
        });
    }

    /// Makes room for `additional` more records.
    pub fn reserve(&mut self, additional: usize) {
        self.noted.reserve(additional);
    }

    /// The highest sequence number noted (0 if none).
    pub fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// Loads each key's newest record into `index` (empty), if it is a put. `fetch_keys(file,
    /// ordinals)` returns the keys at those ordinals of a file's footer, in that order: it is
    /// asked only for records that share their hash with another record and came without a key.
    pub fn finish(self, index: &Index, fetch_keys: &mut FetchKeys<'_>) -> Result<()> {
        let Builder {
            mut noted,
            mut keys,
            ..
        } = self;
        // Sorted by hash, newest first; of two records with one sequence number (a compaction
        // copy and its original, both on disk after a crash), the first noted stays first.
        let mut order: Vec<u32> = (0..noted.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| {
            let (x, y) = (&noted[a as usize], &noted[b as usize]);
            (x.hash, std::cmp::Reverse(x.seq), a).cmp(&(y.hash, std::cmp::Reverse(y.seq), b))
        });
        // Runs of one hash with more than one record: their keys are needed.
        let mut wanted: HashMap<u64, Vec<(u32, usize)>> = HashMap::new();
        let mut start = 0;
        while start < order.len() {
            let hash = noted[order[start] as usize].hash;
            let end = start
                + order[start..]
                    .iter()
                    .take_while(|&&i| noted[i as usize].hash == hash)
                    .count();
            if end - start > 1 {
                for &i in &order[start..end] {
                    let i = i as usize;
                    if !keys.contains_key(&i) {
                        let n = &noted[i];
                        wanted
                            .entry(n.entry.segment)
                            .or_default()
                            .push((n.ordinal, i));
                    }
                }
            }
            start = end;
        }
        for (file, mut want) in wanted {
            want.sort_unstable();
            let ordinals: Vec<u32> = want.iter().map(|w| w.0).collect();
            let got = fetch_keys(file, &ordinals)?;
            debug_assert_eq!(got.len(), want.len());
            for ((_, i), key) in want.into_iter().zip(got) {
                keys.insert(i, key.into_boxed_slice());
            }
        }
        // The newest record of each key: within a run of one hash, the first of each key.
        let mut live: Vec<(u64, IndexEntry)> = Vec::with_capacity(noted.len());
        let mut start = 0;
        while start < order.len() {
            let hash = noted[order[start] as usize].hash;
            let run: Vec<usize> = order[start..]
                .iter()
                .take_while(|&&i| noted[i as usize].hash == hash)
                .map(|&i| i as usize)
                .collect();
            start += run.len();
            for (j, &i) in run.iter().enumerate() {
                let newest = run.len() == 1
                    || run[..j]
                        .iter()
                        .all(|&earlier| keys.get(&earlier) != keys.get(&i));
                if newest && !noted[i].tombstone {
                    live.push((index.hash_of(hash), noted[i].entry));
                }
            }
        }
        drop(order);
        noted.clear();
        noted.shrink_to_fit();
        drop(keys);
        // Per file, so that the load's usage accounting meets each file in one run.
        live.sort_unstable_by_key(|(_, e)| e.segment);
        index.load(live);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(segment: u64, offset: u64) -> IndexEntry {
        IndexEntry {
            segment,
            offset,
            value_len: 1,
            stored_len: 1,
            key_len: 1,
            flags: 0,
        }
    }

    /// Two keys whose full hashes are equal (as if xxh3 collided): open reads their keys and
    /// keeps each one's newest record; a tombstone hides only its own key.
    #[test]
    fn records_sharing_a_hash_are_told_apart_by_their_keys() {
        let index = Index::default();
        let mut b = Builder::default();
        let h = 0xdead_beef_0000_0001;
        // File 1: key "a" (seq 1) at ordinal 0, key "b" (seq 2) at ordinal 1.
        b.add(h, 1, at(1, 64), false, 0, None);
        b.add(h, 2, at(1, 200), false, 1, None);
        // File 2: key "a" again (seq 3), then a tombstone of "b" (seq 4): keys in hand.
        b.add(h, 3, at(2, 64), false, 0, Some(b"a".to_vec()));
        b.add(h, 4, at(2, 300), true, 1, Some(b"b".to_vec()));
        // A key of another hash, alone: never fetched.
        b.add(7, 5, at(2, 400), false, 2, None);
        let mut fetched = Vec::new();
        b.finish(&index, &mut |file, ordinals| {
            fetched.push((file, ordinals.to_vec()));
            assert_eq!(file, 1);
            Ok(ordinals
                .iter()
                .map(|&o| if o == 0 { b"a".to_vec() } else { b"b".to_vec() })
                .collect())
        })
        .unwrap();
        assert_eq!(fetched, vec![(1, vec![0, 1])]);
        assert_eq!(index.len(), 2);
        assert!(index.contains(h, 2, 64), "a's newest");
        assert!(!index.contains(h, 1, 64), "a's older record");
        assert!(!index.contains(h, 1, 200), "b deleted");
        assert!(index.contains(7, 2, 400));
    }

    #[test]
    fn without_shared_hashes_no_key_is_read() {
        let index = Index::default();
        let mut b = Builder::default();
        for i in 0..1000u64 {
            b.add(
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                i,
                at(1 + i % 3, 64 + i),
                i % 10 == 9,
                i as u32,
                None,
            );
        }
        b.finish(&index, &mut |_, _| panic!("no key needed"))
            .unwrap();
        assert_eq!(index.len(), 900);
    }
}
