//! The second chance ([`Options::second_chance`](crate::Options::second_chance)): values read
//! since they were written are appended again, under a new sequence number, before eviction
//! drops their file, the way S3-FIFO and foyer keep a FIFO cache's hot items. Bounded: a step
//! writes at most [`Options::second_chance_budget`](crate::Options::second_chance_budget) of
//! the bytes it frees (half by default).
//!
//! A read is remembered by the sequence number of the value's record (`ReadMarks`), which a
//! get learns whether the value came from the cache or a file; a copy made by compaction keeps
//! the number, so the mark follows the value. A value appended again gets a new number, unmarked:
//! it must be read again to get another chance.
//!
//! The records given a chance are read in file order through a 1 MiB window
//! ([`ReadAhead`]), not one device read each: the step runs in the writer whose put sealed a
//! segment, and at 1 KiB values a segment of 15 MiB gives thousands of chances (issue 39's
//! cache trace: a read per record halved the puts' rate of the run, 133k to 57k ops/s).

use std::borrow::Cow;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::time::Duration;

use super::Compactor;
use crate::store::append::AppendGuard;
use bytes::Bytes;

use crate::error::Result;
use crate::format::cursor::ByteSource;
use crate::format::read_ahead::{ReadAhead, SCAN_WINDOW};
use crate::format::record::RecordKind;
use crate::index::IndexEntry;
use crate::segment;
use crate::store::compress::StoredValue;
use crate::store::read::Located;
use crate::store::segments::SegmentHandle;

/// Shards of the set of read sequence numbers (a lock each, so that readers rarely meet).
const SHARDS: usize = 32;

/// How long a chance waits, without the append lock, for the buffer it needs to come back
/// from the disk before looking again ([`Compactor::lock_with_room`]); and for how long in all
/// (20 ms: a full buffer written several times over; other writers may take each buffer first)
/// before it waits under the lock, as any put does. (Longer in the unit tests, so that a test
/// holding the device can look while the chance waits.)
const ROOM_WAIT: Duration = Duration::from_micros(50);
const ROOM_WAIT_FOR: Duration = if cfg!(test) {
    Duration::from_secs(5)
} else {
    Duration::from_millis(20)
};

/// The sequence numbers of the values read since they were written.
#[derive(Default)]
pub(in crate::store) struct ReadMarks {
    shards: [Mutex<HashSet<u64, BuildHasherDefault<SeqHasher>>>; SHARDS],
}

/// Hashes a sequence number by a multiplication and a fold: the numbers are the store's own,
/// not an adversary's, and every get of a capped store with second chances marks one (std's
/// SipHash and its table's growth were a tenth of such a get's CPU on issue 39's cache trace).
/// Another multiplier than the shard's, so that the table's top bits still vary in a shard.
#[derive(Default)]
pub(in crate::store) struct SeqHasher(u64);

impl Hasher for SeqHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0xd6e8_feb8_6659_fd93);
        self.0 = h ^ (h >> 32);
    }
}

impl ReadMarks {
    fn shard(
        &self,
        seq: u64,
    ) -> std::sync::MutexGuard<'_, HashSet<u64, BuildHasherDefault<SeqHasher>>> {
        let i = (seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 59) as usize % SHARDS;
        self.shards[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers that the value of record `seq` was read.
    pub(in crate::store) fn mark(&self, seq: u64) {
        self.shard(seq).insert(seq);
    }

    /// Whether the value of record `seq` was read since it was written.
    fn marked(&self, seq: u64) -> bool {
        self.shard(seq).contains(&seq)
    }

    /// Forgets the marks at or below `through` (records an eviction dropped, or gave a new
    /// number): the set holds marks of live values only, and of values overwritten since.
    pub(super) fn forget_through(&self, through: u64) {
        for s in &self.shards {
            s.lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|&seq| seq > through);
        }
    }
}

/// A value a second chance appended again.
struct Moved {
    key: Vec<u8>,
    /// Its record before, and the new one (numbered `seq`).
    old: IndexEntry,
    new: IndexEntry,
    seq: u64,
    /// Its bytes, if the read cache keeps it whole: it was read since it was written, so it
    /// goes to the cache at its new place, and its next get does not read it from the file.
    keep: Option<Vec<u8>>,
}

impl Compactor {
    /// Whether gets are counted: the store has a size cap (it is a cache, and its hit ratio
    /// is reported).
    pub(in crate::store) fn counts_gets(&self) -> bool {
        self.cap.is_some()
    }

    /// Counts a get of a store with a size cap, which found the value of record `seq` (or
    /// nothing), and remembers the read if the store gives second chances.
    pub(in crate::store) fn note_get(&self, seq: Option<u64>) {
        self.shared.counters.capped_get(seq.is_some());
        if let (Some(marks), Some(seq)) = (&self.read_marks, seq) {
            marks.mark(seq);
        }
    }

    /// Appends again, each under a new sequence number, the live values of `files` that were
    /// read since they were written, up to `budget` bytes of records, and points the index at
    /// the new records once they are durable; returns the bytes appended. Called by eviction
    /// (in its turn to change files) before it drops the files.
    ///
    /// A value is appended again only if, under the append lock, the index still names its
    /// record and no write of its key is queued: a later write of the key then takes a higher
    /// number than the new record, and an earlier one is already applied. The index is switched
    /// with a compare-and-set, as for compaction's copies: a key written meanwhile keeps its
    /// newer value (and its higher number wins at open too).
    pub(super) fn second_chance(&self, files: &[(u64, SegmentHandle)], budget: u64) -> Result<u64> {
        let Some(marks) = &self.read_marks else {
            return Ok(0);
        };
        let p = &self.shared;
        let now = p.now_ms();
        let mut written = 0u64;
        let mut moved: Vec<Moved> = Vec::new();
        let mut value = Vec::new();
        'files: for (id, h) in files {
            let len = h.file.len()?;
            let mut entries =
                segment::read_sealed_entries(&h.file, *id, len, &p.profile, self.reader.pool())?;
            entries.sort_unstable_by_key(|e| e.offset);
            let src = segment::FileSource {
                file: &h.file,
                pool: self.reader.pool(),
                read_align: p.profile.read_align,
                len,
            };
            let window = ReadAhead::new(&src, SCAN_WINDOW);
            for e in entries
                .iter()
                .filter(|e| e.kind == RecordKind::Put && marks.marked(e.seq))
            {
                // A value that has expired gets no second chance (it is gone to every read).
                if e.expires_at.is_some_and(|t| t <= now) {
                    continue;
                }
                let bytes = e.record_len();
                if written + bytes > budget {
                    break 'files;
                }
                let old = IndexEntry::of_footer_entry(*id, e);
                let hash = p.index.hash(&e.key);
                if !p.index.contains(hash, old.segment, old.offset) {
                    continue;
                }
                // A value read since it was written is often still in the read cache: taken
                // from there (verified when it was kept), the chance reads nothing from the disk.
                let cached = self.reader.cached_value(&old, &e.key);
                if cached.is_none() {
                    value.resize(old.stored_len as usize, 0);
                    let mut found = Located::new(old, e.seq, h.file.clone());
                    // A record that fits a window is read through it (and verified where it
                    // is); a larger one (a blob file's value) as a get reads it.
                    if bytes < SCAN_WINDOW as u64 / 2 {
                        let mut record = vec![0u8; bytes as usize];
                        window
                            .read_exact_at(old.offset, &mut record)
                            .map_err(|err| {
                                segment::read_error(*id, old.offset, h.file.path(), err)
                            })?;
                        found = found.with_record(Bytes::from(record));
                    }
                    self.reader.read_stored(&found, &mut value)?;
                }
                let stored_bytes: &[u8] = cached.as_deref().unwrap_or(&value);
                let stored = StoredValue {
                    bytes: Cow::Borrowed(stored_bytes),
                    value_len: old.value_len,
                    compressed: old.is_compressed(),
                    expires_at: old.expires_at,
                };
                let mut app = self.lock_with_room(&e.key, &stored);
                if !p.index.contains(hash, old.segment, old.offset)
                    || p.pending.last_queued(&e.key, hash).is_some()
                {
                    continue;
                }
                let seq = app.take_seq()?;
                let new = app.append_copy(&e.key, Some(&stored), seq, bytes)?;
                drop(app);
                written += bytes;
                let keep = self.reader.keeps_whole(&new).then(|| stored_bytes.to_vec());
                moved.push(Moved {
                    key: e.key.clone(),
                    old,
                    new,
                    seq,
                    keep,
                });
            }
        }
        if moved.is_empty() {
            return Ok(0);
        }
        self.log.sync_all()?;
        let mut given = 0;
        for m in &moved {
            let hash = p.index.hash(&m.key);
            if p.pending
                .replace_if_idle(&m.key, hash, &m.old, m.new, &p.index)
            {
                given += 1;
                if let Some(value) = &m.keep {
                    self.reader.keep_whole(&m.new, m.seq, &m.key, value);
                }
            }
        }
        p.counters.second_chances(given, written);
        Ok(written)
    }

    /// The append lock, taken once the record of `key` and `value` can be appended without
    /// waiting for the disk ([`AppendGuard::room_now`]), or after [`ROOM_WAIT_FOR`]. A
    /// chance is a write that cannot be dropped; made under the lock while its buffer is being
    /// written, it held every other writer behind it, and the offers of a cache's other threads
    /// waited for the disk instead of being dropped (docs/benchmarks.md, the cache against foyer).
    /// Waiting here without the lock lets them see the disk busy and drop.
    fn lock_with_room(&self, key: &[u8], value: &StoredValue<'_>) -> AppendGuard<'_> {
        let began = std::time::Instant::now();
        while began.elapsed() < ROOM_WAIT_FOR {
            let mut app = self.log.lock();
            if app.room_now(key, value) {
                return app;
            }
            drop(app);
            std::thread::sleep(ROOM_WAIT);
        }
        self.log.lock()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use crate::Durability;
    use crate::io::sim::SimConfig;
    use crate::tests::{new_sim, open, options};

    /// A value the read cache holds whole gets its chance from there: the step reads the
    /// segment's footer, not the values. With the cache off, the same chances read every value
    /// from the disk (what the test would see if the cache were not asked).
    #[test]
    fn a_chance_for_a_cached_value_reads_nothing_from_the_disk() {
        let value = |i: u32| vec![(i % 251) as u8; 8 << 10];
        let run = |cache: u64| {
            let sim = new_sim(SimConfig::default());
            let opts = options(Durability::Buffered)
                .size_cap(Some(8 << 20))
                .second_chance(true)
                .cache_capacity(cache);
            let store = open(&sim, opts).unwrap();
            // 1 MiB segments of 8 KiB values: the first is sealed after about 127.
            for i in 0..160u32 {
                store.put(format!("k/{i}"), value(i)).unwrap();
            }
            for i in 0..64u32 {
                assert_eq!(store.get(format!("k/{i}")).unwrap().unwrap(), value(i));
            }
            let first = super::super::first_sealed_log(&store);
            let before = sim.stats().read_bytes;
            let written = store
                .inner
                .compactor
                .second_chance(&first, u64::MAX)
                .unwrap();
            let read = sim.stats().read_bytes - before;
            assert!(written >= 64 * (8 << 10), "{written} bytes of chances");
            for i in 0..64u32 {
                assert_eq!(store.get(format!("k/{i}")).unwrap().unwrap(), value(i));
            }
            (read, written)
        };
        let (cached, written) = run(16 << 20);
        // The footer of the segment (a few KiB), none of the 512 KiB of values.
        assert!(
            cached < 64 << 10,
            "read {cached} bytes for {written} of chances"
        );
        let (uncached, _) = run(0);
        assert!(
            uncached >= 64 * (8 << 10),
            "read {uncached} bytes without a cache"
        );
    }

    /// With the device holding every write and both write buffers full, a second chance
    /// waiting for room does not hold the append lock: an offer from another thread meanwhile
    /// is dropped at once (the disk is busy) instead of waiting behind the chance for the
    /// device. Once the device takes writes again, the chance is made and its value read back
    /// from its new place.
    #[test]
    fn a_chance_waiting_for_the_disk_lets_offers_be_dropped() {
        let sim = new_sim(SimConfig::default());
        let opts = options(Durability::Buffered)
            .size_cap(Some(8 << 20))
            .second_chance(true)
            .cache_capacity(0);
        let store = open(&sim, opts).unwrap();
        let value = |i: u32| vec![(i % 251) as u8; 8 << 10];
        // 1 MiB segments of 8 KiB values: the first is sealed after about 127.
        for i in 0..160u32 {
            store.put(format!("k/{i}"), value(i)).unwrap();
        }
        for i in 0..8u32 {
            assert_eq!(store.get(format!("k/{i}")).unwrap().unwrap(), value(i));
        }
        let compactor = &store.inner.compactor;
        let first = super::super::first_sealed_log(&store);
        let _held = sim.hold_writes_guarded();
        // Fill both buffers: offers are dropped from then on.
        let mut filled = false;
        for i in 0..64u32 {
            if store
                .offer(format!("fill/{i}"), value(i))
                .unwrap()
                .is_none()
            {
                filled = true;
                break;
            }
        }
        assert!(filled, "the buffers never filled");
        let given = std::thread::scope(|s| {
            let chance = s.spawn(|| compactor.second_chance(&first, u64::MAX));
            std::thread::sleep(Duration::from_millis(20));
            // Each look is an offer in a thread of its own, so that one waiting for the held
            // device fails the test instead of hanging it.
            for i in 0..5u32 {
                let (tx, rx) = mpsc::channel();
                let store = &store;
                s.spawn(move || {
                    let _ = tx.send(store.offer(format!("probe/{i}"), value(i)).unwrap());
                });
                match rx.recv_timeout(Duration::from_secs(2)) {
                    Ok(outcome) => assert_eq!(outcome, None, "an offer was written while held"),
                    Err(_) => {
                        sim.release_writes();
                        panic!("an offer waited behind the second chance for the device");
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            sim.release_writes();
            chance.join().unwrap().unwrap()
        });
        assert!(given > 0, "no value got its chance");
        for i in 0..8u32 {
            assert_eq!(store.get(format!("k/{i}")).unwrap().unwrap(), value(i));
        }
        assert!(store.stats().second_chances >= 8, "{:?}", store.stats());
    }
}
