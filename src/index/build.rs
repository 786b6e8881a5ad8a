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

use super::packed::Packed;
use super::{Index, IndexEntry, SegmentUsage};
use crate::error::Result;

/// Reads the keys at some ordinals of a file's footer: `(file, ordinals) -> keys`, in order.
pub type FetchKeys<'a> = dyn FnMut(u64, &[u32]) -> Result<Vec<Vec<u8>>> + 'a;

/// One record noted at open.
#[derive(Debug, Clone, Copy, Default)]
struct Noted {
    /// The key's full [`super::key_hash`] (as the footer wrote it).
    hash: u64,
    seq: u64,
    /// Where the record is (`entry.segment` is its file); for a tombstone only the place counts.
    entry: IndexEntry,
    /// The record's position in its footer's key order (to read its key if needed).
    ordinal: u32,
    tombstone: bool,
}

/// Bits of the hash that split the records into buckets, each sorted on its own: the index's
/// shards.
const BUCKET_BITS: u32 = super::SHARD_BITS;

/// The records seen while files are loaded; [`Builder::finish`] keeps each key's newest.
#[derive(Debug)]
pub struct Builder {
    /// Per file, in the order loaded (one vector each: no vector of every record regrows).
    files: Vec<Vec<Noted>>,
    /// Keys already in hand (records found by a recovery scan), by file and ordinal.
    keys: HashMap<(u64, u32), Box<[u8]>>,
    /// Records per bucket (see [`Builder::finish`]).
    counts: Vec<usize>,
    /// What the puts of each file take; `finish` takes out the dead ones.
    usage: HashMap<u64, SegmentUsage>,
    /// The file started last and what its puts take so far (added to `usage` when the next
    /// starts: no map lookup per record).
    current: Option<(u64, SegmentUsage)>,
    max_seq: u64,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            files: Vec::new(),
            keys: HashMap::new(),
            counts: vec![0; 1 << BUCKET_BITS],
            usage: HashMap::new(),
            current: None,
            max_seq: 0,
        }
    }
}

fn bucket_of(hash: u64) -> usize {
    (hash >> (64 - BUCKET_BITS)) as usize
}

impl Builder {
    /// Starts the records of file `segment`, about `records` of them.
    pub fn start_file(&mut self, segment: u64, records: usize) {
        self.files.push(Vec::with_capacity(records));
        self.end_file();
        self.current = Some((segment, SegmentUsage::default()));
    }

    /// Adds what the puts of the file started last take to `usage`.
    fn end_file(&mut self) {
        if let Some((segment, u)) = self.current.take() {
            let t = self.usage.entry(segment).or_default();
            t.live_bytes += u.live_bytes;
            t.live_records += u.live_records;
        }
    }

    /// Notes a record of the file started last: its key's full hash, its sequence number,
    /// where it is (`entry`) and whether it is a tombstone, its ordinal in its footer's key
    /// order (or any number unique in its file, with its key), and its key if the caller has it.
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
            self.keys
                .insert((entry.segment, ordinal), k.into_boxed_slice());
        }
        self.max_seq = self.max_seq.max(seq);
        if self
            .current
            .as_ref()
            .is_none_or(|(segment, _)| *segment != entry.segment)
        {
            self.start_file(entry.segment, 0);
        }
        self.counts[bucket_of(hash)] += 1;
        if !tombstone && let Some((_, u)) = &mut self.current {
            u.live_bytes += entry.record_len();
            u.live_records += 1;
        }
        let file = self.files.last_mut().expect("a file started");
        file.push(Noted {
            hash,
            seq,
            entry,
            ordinal,
            tombstone,
        });
    }

    /// The highest sequence number noted (0 if none).
    pub fn max_seq(&self) -> u64 {
        self.max_seq
    }

    /// Loads each key's newest record into `index` (empty), if it is a put. `fetch_keys(file,
    /// ordinals)` returns the keys at those ordinals of a file's footer, in that order: it is
    /// asked only for records that share their hash with another record and came without a key.
    ///
    /// The records are spread into 65 536 buckets by the top bits of their hash (one pass, each
    /// file's vector freed as it is emptied), and each bucket, a few hundred records, is sorted
    /// on its own: by hash, newest first (ties, a compaction copy and its original both on disk
    /// after a crash, hold one value; the lower file and offset wins, so that open is
    /// deterministic).
    pub fn finish(mut self, index: &Index, fetch_keys: &mut FetchKeys<'_>) -> Result<()> {
        self.end_file();
        let Builder {
            files,
            mut keys,
            counts,
            mut usage,
            ..
        } = self;
        let mut starts = vec![0usize; (1 << BUCKET_BITS) + 1];
        for (b, n) in counts.into_iter().enumerate() {
            starts[b + 1] = starts[b] + n;
        }
        let total = starts[starts.len() - 1];
        let mut sorted = vec![Noted::default(); total];
        let mut next = starts.clone();
        for file in files {
            for n in file {
                let b = bucket_of(n.hash);
                sorted[next[b]] = n;
                next[b] += 1;
            }
        }
        drop(next);
        let order = |x: &Noted, y: &Noted| {
            (
                x.hash,
                std::cmp::Reverse(x.seq),
                x.entry.segment,
                x.entry.offset,
            )
                .cmp(&(
                    y.hash,
                    std::cmp::Reverse(y.seq),
                    y.entry.segment,
                    y.entry.offset,
                ))
        };
        // Sorted per bucket; runs of one hash with more than one record need their keys.
        let mut wanted: HashMap<u64, Vec<u32>> = HashMap::new();
        for b in 0..1 << BUCKET_BITS {
            let bucket = &mut sorted[starts[b]..starts[b + 1]];
            bucket.sort_unstable_by(order);
            for run in bucket.chunk_by(|x, y| x.hash == y.hash) {
                if run.len() > 1 {
                    for n in run {
                        if !keys.contains_key(&(n.entry.segment, n.ordinal)) {
                            wanted.entry(n.entry.segment).or_default().push(n.ordinal);
                        }
                    }
                }
            }
        }
        for (file, mut ordinals) in wanted {
            ordinals.sort_unstable();
            let got = fetch_keys(file, &ordinals)?;
            debug_assert_eq!(got.len(), ordinals.len());
            for (o, key) in ordinals.into_iter().zip(got) {
                keys.insert((file, o), key.into_boxed_slice());
            }
        }
        // The newest record of each key: within a run of one hash, the first of each key. With
        // the whole hash in use, buckets are the index's shards and each is in fingerprint
        // order already: its live entries become the shard, allocated to fit, with no list of
        // every live entry in between.
        let direct = index.hash_of(u64::MAX) == u64::MAX;
        let mut live: Vec<(u64, IndexEntry)> = Vec::new();
        let mut shards: Vec<Vec<Packed>> =
            Vec::with_capacity(if direct { 1 << BUCKET_BITS } else { 0 });
        for b in 0..1 << BUCKET_BITS {
            let bucket = &sorted[starts[b]..starts[b + 1]];
            let mut shard = Vec::with_capacity(if direct { bucket.len() } else { 0 });
            for run in bucket.chunk_by(|x, y| x.hash == y.hash) {
                let key = |n: &Noted| keys.get(&(n.entry.segment, n.ordinal));
                for (j, n) in run.iter().enumerate() {
                    let newest = j == 0 || run[..j].iter().all(|earlier| key(earlier) != key(n));
                    if n.tombstone {
                        continue;
                    }
                    if !newest {
                        // A put that a newer record of its key replaced: not live after all.
                        if let Some(u) = usage.get_mut(&n.entry.segment) {
                            u.live_bytes -= n.entry.record_len();
                            u.live_records -= 1;
                        }
                    } else if direct {
                        shard.push(Packed::pack(super::place_of(n.hash).1, &n.entry));
                    } else {
                        live.push((index.hash_of(n.hash), n.entry));
                    }
                }
            }
            if direct {
                shard.shrink_to_fit();
                shards.push(shard);
            }
        }
        drop(sorted);
        drop(keys);
        usage.retain(|_, u| u.live_records > 0);
        let usage = usage.into_iter().collect();
        if direct {
            index.install(shards, usage);
        } else {
            index.load(live, usage);
        }
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
        b.start_file(1, 2);
        // File 1: key "a" (seq 1) at ordinal 0, key "b" (seq 2) at ordinal 1.
        b.add(h, 1, at(1, 64), false, 0, None);
        b.add(h, 2, at(1, 200), false, 1, None);
        // File 2: key "a" again (seq 3), then a tombstone of "b" (seq 4): keys in hand.
        b.start_file(2, 3);
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
        b.start_file(1, 1000);
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
