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
//!
//! Memory: each record noted costs 48 bytes ([`Noted`]), in one vector of every record, which
//! `finish` permutes in place into buckets: no second array. It is one large allocation, which
//! grows without copying (the allocator remaps it) and goes back to the system when freed (many
//! small vectors, one per bucket, were tried: freed among the shards that outlive them, their
//! memory stayed resident, 10 bytes per key). Much of open's time is the kernel handing out
//! zeroed pages for such transient memory (about 0.5 s per GiB on the development machine), so
//! the less of it, the faster.

use std::collections::HashMap;

use super::packed::Packed;
use super::{Index, IndexEntry, SegmentUsage};
use crate::error::Result;

/// Reads the keys at some ordinals of a file's footer: `(file, ordinals) -> keys`, in order.
pub type FetchKeys<'a> = dyn FnMut(u64, &[u32]) -> Result<Vec<Vec<u8>>> + 'a;

/// One record noted at open: 48 bytes.
#[derive(Debug, Clone, Copy)]
struct Noted {
    /// The key's full [`super::key_hash`] (as the footer wrote it).
    hash: u64,
    seq: u64,
    /// Where the record is and its lengths, as the index will keep it (for a tombstone only
    /// the place counts).
    packed: Packed,
    /// The record's key length (for what the record takes on disk).
    key_len: u16,
    /// The record's position in its footer's key order (to read its key if needed).
    ordinal: u32,
    tombstone: bool,
}

impl Noted {
    fn segment(&self) -> u64 {
        self.packed.place().0
    }

    fn entry(&self) -> IndexEntry {
        self.packed.unpack(self.key_len as u32)
    }

    /// Sort order within a bucket: by hash, newest first; ties (a compaction copy and its
    /// original both on disk after a crash, which hold one value) by place, lower first.
    fn order(&self, other: &Noted) -> std::cmp::Ordering {
        (self.hash, std::cmp::Reverse(self.seq))
            .cmp(&(other.hash, std::cmp::Reverse(other.seq)))
            .then_with(|| self.packed.place().cmp(&other.packed.place()))
    }
}

const _: () = assert!(
    std::mem::size_of::<Noted>() == 48,
    "what the module doc says"
);

/// Bits of the hash that split the records into buckets, each sorted on its own: the index's
/// shards.
const BUCKET_BITS: u32 = super::SHARD_BITS;

/// Below this many records, `finish` works on one thread (starting others costs more).
const PARALLEL_MIN_RECORDS: usize = 1 << 16;

/// The records seen while files are loaded; [`Builder::finish`] keeps each key's newest.
#[derive(Debug)]
pub struct Builder {
    /// Every record, in the order noted.
    records: Vec<Noted>,
    /// Records per bucket (see [`Builder::finish`]).
    counts: Vec<usize>,
    /// Keys already in hand (records found by a recovery scan), by file and ordinal.
    keys: HashMap<(u64, u32), Box<[u8]>>,
    /// What the puts of each file take; `finish` takes out the dead ones.
    usage: HashMap<u64, SegmentUsage>,
    /// The file started last and what its puts take so far (added to `usage` when the next
    /// starts: no map lookup per record).
    current: Option<(u64, SegmentUsage)>,
    max_seq: u64,
    /// Records at or below this sequence number were evicted: not loaded (0: none).
    evicted_through: u64,
    /// The puts whose values expire: key hash, place, expiry (the index's side table keeps
    /// those of the live entries: `Noted` stays 48 bytes for the records that don't expire).
    expiries: Vec<(u64, (u64, u64), super::expiry::Expiring)>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            records: Vec::new(),
            counts: vec![0; 1 << BUCKET_BITS],
            keys: HashMap::new(),
            usage: HashMap::new(),
            current: None,
            max_seq: 0,
            evicted_through: 0,
            expiries: Vec::new(),
        }
    }
}

fn bucket_of(hash: u64) -> usize {
    (hash >> (64 - BUCKET_BITS)) as usize
}

/// What one thread of [`Builder::finish`] built from its buckets.
#[derive(Default)]
struct Built {
    /// Each bucket's shard (the whole hash in use), in bucket order.
    shards: Vec<Vec<Packed>>,
    /// The live entries with their (masked) hashes (a testing index with fewer hash bits).
    live: Vec<(u64, IndexEntry)>,
    /// Per file, what its puts that newer records replaced take: bytes, records.
    dead: HashMap<u64, (u64, u64)>,
}

impl Builder {
    /// Ignores every record noted from now on whose sequence number is at most `seq`: an
    /// eviction dropped them (docs/design.md, "Eviction"). Their sequence numbers still count
    /// in [`Builder::max_seq`]; their bytes count as dead.
    pub fn evicted_through(&mut self, seq: u64) {
        self.evicted_through = seq;
    }

    /// Starts the records of file `segment`, about `records` of them.
    pub fn start_file(&mut self, segment: u64, records: usize) {
        self.records.reserve(records);
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
    /// `entry` fits the index ([`Packed::fits`]): the caller checked the file id, and footers
    /// and scans bound offsets and lengths.
    pub fn add(
        &mut self,
        hash: u64,
        seq: u64,
        entry: IndexEntry,
        tombstone: bool,
        ordinal: u32,
        key: Option<Vec<u8>>,
    ) {
        self.max_seq = self.max_seq.max(seq);
        if self.evicted_through > 0 && seq <= self.evicted_through {
            return;
        }
        if let Some(k) = key {
            self.keys
                .insert((entry.segment, ordinal), k.into_boxed_slice());
        }
        if self
            .current
            .as_ref()
            .is_none_or(|(segment, _)| *segment != entry.segment)
        {
            self.start_file(entry.segment, 0);
        }
        if !tombstone && let Some(at) = entry.expires_at {
            let record_len = entry.record_len();
            let e = super::expiry::Expiring { at, record_len };
            self.expiries.push((hash, entry.place(), e));
        }
        if !tombstone && let Some((_, u)) = &mut self.current {
            u.live_bytes += entry.record_len();
            u.live_records += 1;
        }
        debug_assert!(entry.key_len <= u16::MAX as u32);
        self.counts[bucket_of(hash)] += 1;
        self.records.push(Noted {
            hash,
            seq,
            packed: Packed::pack(super::place_of(hash).1, &entry),
            key_len: entry.key_len as u16,
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
    /// The records are put in 65 536 buckets by the top bits of their hash (in place, see
    /// [`into_buckets`]), and each bucket, a few hundred records, is sorted on its own
    /// ([`Noted::order`]). Buckets are shared out between threads (one per core, at most 8) for
    /// the sorting and for building the shards.
    pub fn finish(mut self, index: &Index, fetch_keys: &mut FetchKeys<'_>) -> Result<()> {
        self.end_file();
        let Builder {
            records: mut sorted,
            mut keys,
            counts,
            mut usage,
            expiries,
            ..
        } = self;
        let mut starts = vec![0usize; (1 << BUCKET_BITS) + 1];
        for (b, n) in counts.into_iter().enumerate() {
            starts[b + 1] = starts[b] + n;
        }
        let total = sorted.len();
        debug_assert_eq!(starts[starts.len() - 1], total);
        into_buckets(&mut sorted, &starts);
        let threads = if total < PARALLEL_MIN_RECORDS {
            1
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
        };
        let parts = split(&mut sorted, &starts, threads);
        // Sorted per bucket; runs of one hash with more than one record need their keys.
        let wanted: Vec<(u64, u32)> = std::thread::scope(|s| {
            let keys = &keys;
            let workers: Vec<_> = parts
                .into_iter()
                .map(|(records, starts)| s.spawn(move || sort_buckets(records, starts, keys)))
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("a sorting thread panicked"))
                .collect()
        });
        let mut by_file: HashMap<u64, Vec<u32>> = HashMap::new();
        for (file, ordinal) in wanted {
            by_file.entry(file).or_default().push(ordinal);
        }
        for (file, mut ordinals) in by_file {
            ordinals.sort_unstable();
            let got = fetch_keys(file, &ordinals)?;
            debug_assert_eq!(got.len(), ordinals.len());
            for (o, key) in ordinals.into_iter().zip(got) {
                keys.insert((file, o), key.into_boxed_slice());
            }
        }
        // With the whole hash in use, buckets are the index's shards and each is in
        // fingerprint order already: its live entries become the shard, allocated to fit, with
        // no list of every live entry in between.
        let direct = index.hash_of(u64::MAX) == u64::MAX;
        let parts = split(&mut sorted, &starts, threads);
        let built: Vec<Built> = std::thread::scope(|s| {
            let keys = &keys;
            let workers: Vec<_> = parts
                .into_iter()
                .map(|(records, starts)| {
                    s.spawn(move || build_shards(records, starts, keys, index, direct))
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("an index building thread panicked"))
                .collect()
        });
        drop(sorted);
        drop(keys);
        let mut shards = Vec::with_capacity(if direct { 1 << BUCKET_BITS } else { 0 });
        let mut live = Vec::new();
        for b in built {
            shards.extend(b.shards);
            live.extend(b.live);
            for (file, (bytes, records)) in b.dead {
                if let Some(u) = usage.get_mut(&file) {
                    u.live_bytes -= bytes;
                    u.live_records -= records;
                }
            }
        }
        usage.retain(|_, u| u.live_records > 0);
        let usage = usage.into_iter().collect();
        if direct {
            index.install(shards, usage);
        } else {
            index.load(live, usage);
        }
        index.note_found_expiries(expiries);
        Ok(())
    }
}

/// Permutes `records` in place so that bucket `b` ([`bucket_of`] the hash) is at
/// `starts[b]..starts[b + 1]` (`starts` counted from them), with no second array of every
/// record: two "American flag" passes (every swap puts one record in its part for good), by the
/// top 8 bits of the hash over all the records, then by the next 8 within each of those 256
/// parts. Two passes of 256 parts each keep the slots being filled few enough to stay in the
/// processor's caches; one pass of 65 536 was slower than copying into a second array.
fn into_buckets(records: &mut [Noted], starts: &[usize]) {
    const DIGIT: u32 = BUCKET_BITS / 2;
    const FAN: usize = 1 << DIGIT;
    let coarse: Vec<usize> = starts.iter().step_by(FAN).copied().collect();
    flag_pass(records, &coarse, |h| (h >> (64 - DIGIT)) as usize);
    for (c, w) in coarse.windows(2).enumerate() {
        let part = &mut records[w[0]..w[1]];
        let fine: Vec<usize> = starts[c * FAN..=(c + 1) * FAN]
            .iter()
            .map(|s| s - w[0])
            .collect();
        flag_pass(part, &fine, |h| {
            (h >> (64 - BUCKET_BITS)) as usize & (FAN - 1)
        });
    }
}

/// One in-place pass: puts each record of `records` in part `digit(hash)`, part `p` being
/// `starts[p]..starts[p + 1]`.
fn flag_pass(records: &mut [Noted], starts: &[usize], digit: impl Fn(u64) -> usize) {
    let mut next = starts[..starts.len() - 1].to_vec();
    for p in 0..next.len() {
        let end = starts[p + 1];
        while next[p] < end {
            let d = digit(records[next[p]].hash);
            if d == p {
                next[p] += 1;
            } else {
                // The record at next[p] belongs to part d: swap it into d's next free slot
                // (the slots of d before it hold d's own records) and look at what came back.
                records.swap(next[p], next[d]);
                next[d] += 1;
            }
        }
    }
}

/// `records` (sorted by bucket; bucket `b` at `starts[b]..starts[b + 1]`) cut into `parts`
/// runs of whole buckets, each with its buckets' starts (relative to the whole).
fn split<'a>(
    mut records: &'a mut [Noted],
    starts: &'a [usize],
    parts: usize,
) -> Vec<(&'a mut [Noted], &'a [usize])> {
    let buckets = starts.len() - 1;
    let per = buckets.div_ceil(parts);
    let mut out = Vec::with_capacity(parts);
    let mut b = 0;
    while b < buckets {
        let end = (b + per).min(buckets);
        let (head, tail) = records.split_at_mut(starts[end] - starts[b]);
        out.push((head, &starts[b..=end]));
        records = tail;
        b = end;
    }
    out
}

/// The buckets of `records`, bucket `i` at `starts[i] - starts[0]..starts[i + 1] - starts[0]`.
fn buckets<'a>(records: &'a [Noted], starts: &'a [usize]) -> impl Iterator<Item = &'a [Noted]> {
    starts
        .windows(2)
        .map(move |w| &records[w[0] - starts[0]..w[1] - starts[0]])
}

/// Sorts each bucket of `records`; returns the records whose keys must be read: those that
/// share their hash with another record and whose keys are not in `keys`.
fn sort_buckets(
    records: &mut [Noted],
    starts: &[usize],
    keys: &HashMap<(u64, u32), Box<[u8]>>,
) -> Vec<(u64, u32)> {
    let mut wanted = Vec::new();
    for w in starts.windows(2) {
        let bucket = &mut records[w[0] - starts[0]..w[1] - starts[0]];
        bucket.sort_unstable_by(Noted::order);
        for run in bucket.chunk_by(|x, y| x.hash == y.hash) {
            if run.len() > 1 {
                for n in run {
                    if !keys.contains_key(&(n.segment(), n.ordinal)) {
                        wanted.push((n.segment(), n.ordinal));
                    }
                }
            }
        }
    }
    wanted
}

/// The live entries of the sorted buckets of `records`: within a run of one hash, the first
/// record of each key, if a put.
fn build_shards(
    records: &[Noted],
    starts: &[usize],
    keys: &HashMap<(u64, u32), Box<[u8]>>,
    index: &Index,
    direct: bool,
) -> Built {
    let mut built = Built::default();
    let key = |n: &Noted| keys.get(&(n.segment(), n.ordinal));
    for bucket in buckets(records, starts) {
        let mut shard = Vec::with_capacity(if direct { bucket.len() } else { 0 });
        for run in bucket.chunk_by(|x, y| x.hash == y.hash) {
            for (j, n) in run.iter().enumerate() {
                if n.tombstone {
                    continue;
                }
                let newest = j == 0 || run[..j].iter().all(|earlier| key(earlier) != key(n));
                if !newest {
                    // A put that a newer record of its key replaced: not live after all.
                    let d = built.dead.entry(n.segment()).or_default();
                    d.0 += n.entry().record_len();
                    d.1 += 1;
                } else if direct {
                    shard.push(n.packed);
                } else {
                    built.live.push((index.hash_of(n.hash), n.entry()));
                }
            }
        }
        if direct {
            shard.shrink_to_fit();
            built.shards.push(shard);
        }
    }
    built
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
            expires_at: None,
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

    /// Enough records for `finish` to share the buckets out between threads: each key's newest
    /// record wins wherever its bucket fell, and what the dead ones took leaves the usage.
    #[test]
    fn many_records_keep_each_keys_newest() {
        let index = Index::default();
        let mut b = Builder::default();
        let keys = 3 * PARALLEL_MIN_RECORDS as u64;
        let hash = |k: u64| (k + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        // File 1 writes every key; file 2 overwrites every third and deletes every fifth.
        b.start_file(1, keys as usize);
        for k in 0..keys {
            b.add(hash(k), k, at(1, 64 + k), false, k as u32, None);
        }
        b.start_file(2, keys as usize);
        for k in 0..keys {
            if k % 3 == 0 || k % 5 == 0 {
                b.add(hash(k), keys + k, at(2, 64 + k), k % 5 == 0, k as u32, None);
            }
        }
        let mut fetched = 0;
        b.finish(&index, &mut |_, ordinals| {
            // Every shared hash is one key written twice: the same key at both places.
            fetched += ordinals.len();
            Ok(ordinals.iter().map(|o| o.to_le_bytes().to_vec()).collect())
        })
        .unwrap();
        let twice = (0..keys).filter(|k| k % 3 == 0 || k % 5 == 0).count();
        assert_eq!(fetched, 2 * twice);
        let mut live = 0;
        for k in 0..keys {
            let (in1, in2) = (
                index.contains(hash(k), 1, 64 + k),
                index.contains(hash(k), 2, 64 + k),
            );
            match (k % 5 == 0, k % 3 == 0) {
                (true, _) => assert!(!in1 && !in2, "key {k} deleted"),
                (false, true) => assert!(!in1 && in2, "key {k} overwritten"),
                (false, false) => assert!(in1 && !in2, "key {k} written once"),
            }
            live += u64::from(in1 || in2);
        }
        assert_eq!(index.len(), live);
        let only1 = (0..keys).filter(|k| k % 3 != 0 && k % 5 != 0).count() as u64;
        assert_eq!(index.usage(1).live_records, only1);
        assert_eq!(index.usage(1).live_bytes, only1 * at(1, 0).record_len());
        assert_eq!(index.usage(2).live_records, live - only1);
    }
}
