//! Torn tails and torn blocks in the segment being written; crashes during recovery; sealed
//! segments cut inside their footer; `Durability::Buffered` losing only a suffix at a crash.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

use podstore::format::footer::TRAILER_LEN;
use podstore::format::record::{RECORD_HEADER_LEN, RecordKind};
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore::{Durability, Error, IoMode, Store};
use tempfile::TempDir;

use crate::common::files::{read_segments, segment_name};
use crate::common::parallel::for_each_parallel;
use crate::common::records::{Rec, footer_start, scan_records, trailer};
use crate::common::store::{MODES, mode_name, show_key};
use crate::common::{Random, SplitMix};
use crate::support::{BLOCK, assert_reads, check_options, open, options, value_for};

/// One write of a single-threaded history: a put (`Some`) or a delete (`None`).
struct Written {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

/// Value bytes of a history.
const HISTORY_BYTES: usize = 1_400_000;

/// Value sizes around the chunk and block size, and larger than the 64 KiB write buffer.
const SIZES: [usize; 14] = [
    0, 1, 17, 300, 2000, 4095, 4096, 4097, 8192, 12_289, 40_000, 65_536, 70_000, 150_000,
];

/// A deterministic history of writes (new keys of varied lengths, overwrites, deletes) of
/// `HISTORY_BYTES` of values in all: more than one 1 MiB segment.
fn history(seed: u64) -> Vec<Written> {
    let mut rng = SplitMix::new(seed);
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut out = Vec::new();
    let mut bytes = 0;
    for i in 0.. {
        if bytes >= HISTORY_BYTES {
            break;
        }
        let roll = rng.below_u64(100);
        let len = SIZES[rng.below_u64(SIZES.len() as u64) as usize];
        let w = if live.is_empty() || roll < 72 {
            let key = format!("k{i:03}-{}", "x".repeat(rng.below_u64(120) as usize)).into_bytes();
            live.push(key.clone());
            Written {
                value: Some(value_for(&key, i as u64, len)),
                key,
            }
        } else if roll < 86 {
            let key = live[rng.below_u64(live.len() as u64) as usize].clone();
            Written {
                value: Some(value_for(&key, i as u64, len)),
                key,
            }
        } else {
            let key = live.swap_remove(rng.below_u64(live.len() as u64) as usize);
            Written { key, value: None }
        };
        bytes += w.value.as_ref().map_or(0, Vec::len);
        out.push(w);
    }
    out
}

/// Checks that the first `kept` writes of `ops`, and only they, are visible in `store`: every
/// key has the value of its last write among them (absent if deleted or not yet written). Keys
/// in `length_only` are checked by value length.
fn check_history_prefix(
    store: &Store,
    ops: &[Written],
    kept: usize,
    length_only: &HashSet<&[u8]>,
    ctx: &str,
) {
    let mut expected: HashMap<&[u8], Option<&[u8]>> = HashMap::new();
    for w in &ops[..kept] {
        expected.insert(&w.key, w.value.as_deref());
    }
    let keys: BTreeSet<&[u8]> = ops.iter().map(|w| &w.key[..]).collect();
    for key in keys {
        let want = expected.get(key).copied().flatten();
        if length_only.contains(key) {
            let len = store.value_len(key).unwrap();
            let want = want.map(|v| v.len() as u64);
            assert_eq!(len, want, "{ctx}: length of {}", show_key(key));
        } else {
            assert_reads(store, key, want, ctx);
        }
    }
    let live = expected.values().filter(|v| v.is_some()).count();
    assert_eq!(store.len(), live, "{ctx}: len");
}

/// How the writes are grouped on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `Durability::Sync`, one thread: every record is its own write group, padded to a block.
    SyncEach,
    /// `Durability::Buffered` with a flush every 1 to 4 writes: several records per group,
    /// records straddling blocks.
    Grouped,
}

/// The two layouts, each with one I/O mode.
const LAYOUTS: [(Layout, IoMode); 2] = [
    (Layout::SyncEach, IoMode::Direct),
    (Layout::Grouped, IoMode::Buffered),
];

/// Writes `ops` to a new store and makes all of them durable; returns the still open store.
fn write_history(dir: &Path, mode: IoMode, layout: Layout, ops: &[Written]) -> Store {
    let durability = match layout {
        Layout::SyncEach => Durability::Sync,
        Layout::Grouped => Durability::Buffered,
    };
    // No compaction, not even the pass at close: the image must hold one record per write.
    let store =
        Store::open_with(dir, options(mode, durability).background_compaction(false)).unwrap();
    let mut rng = SplitMix::new(99);
    let mut until_flush = 0;
    for w in ops {
        match &w.value {
            Some(v) => drop(store.put(&w.key, v).unwrap()),
            None => assert!(store.delete(&w.key).unwrap()),
        }
        if layout == Layout::Grouped {
            if until_flush == 0 {
                store.flush().unwrap();
                until_flush = rng.between(1, 5);
            } else {
                until_flush -= 1;
            }
        }
    }
    store.flush().unwrap();
    store
}

/// The segment files of a store and the records in them, matched one to one with the history.
struct Image<'a> {
    ops: &'a [Written],
    mode: IoMode,
    /// Where the segments are. Copies hard-link the older ones from here (recovery only reads
    /// sealed segments; [`Image::assert_older_untouched`] checks it).
    dir: &'a Path,
    segments: Vec<(u64, Vec<u8>)>,
    recs: Vec<Rec>,
}

impl<'a> Image<'a> {
    fn read(dir: &'a Path, mode: IoMode, ops: &'a [Written]) -> Image<'a> {
        let segments = read_segments(dir);
        let recs: Vec<Rec> = segments
            .iter()
            .flat_map(|(id, bytes)| scan_records(*id, bytes))
            .collect();
        assert_eq!(recs.len(), ops.len(), "one record per write");
        for (r, w) in recs.iter().zip(ops) {
            assert_eq!(r.key, w.key);
            let kind = match w.value {
                Some(_) => RecordKind::Put,
                None => RecordKind::Tombstone,
            };
            assert_eq!(r.kind, kind);
            assert_eq!(r.value_len, w.value.as_ref().map_or(0, |v| v.len() as u64));
        }
        assert!(
            segments.len() >= 2,
            "the history should fill more than one segment"
        );
        Image {
            ops,
            mode,
            dir,
            segments,
            recs,
        }
    }

    /// The newest segment: its id and bytes.
    fn newest(&self) -> (u64, &[u8]) {
        let (id, bytes) = self.segments.last().unwrap();
        (*id, bytes)
    }

    /// A fresh store directory: the older segments (hard links) and `newest` as the newest.
    fn with_newest(&self, newest: &[u8]) -> TempDir {
        let copy = TempDir::new().unwrap();
        let (newest_id, _) = self.newest();
        for (id, _) in &self.segments[..self.segments.len() - 1] {
            let name = segment_name(*id);
            std::fs::hard_link(self.dir.join(&name), copy.path().join(&name)).unwrap();
        }
        std::fs::write(copy.path().join(segment_name(newest_id)), newest).unwrap();
        copy
    }

    /// The older segments, shared by every copy, were never written to.
    fn assert_older_untouched(&self) {
        for (id, bytes) in &self.segments[..self.segments.len() - 1] {
            let now = std::fs::read(self.dir.join(segment_name(*id))).unwrap();
            assert!(now == *bytes, "sealed segment {id} was modified by an open");
        }
    }

    /// Index of the first record of the newest segment.
    fn first_newest(&self) -> usize {
        let (id, _) = self.newest();
        self.recs.iter().position(|r| r.segment == id).unwrap()
    }

    /// The records of the newest segment.
    fn newest_recs(&self) -> &[Rec] {
        &self.recs[self.first_newest()..]
    }

    /// Checks that the first `kept` writes, and only they, are visible in `store`.
    ///
    /// Keys that the newest segment does not touch are the same for every prefix that keeps
    /// the older segments: their values are read in full only when everything is kept (once or
    /// a few times per test), otherwise only their length is checked (to keep O_DIRECT reads
    /// few).
    fn check_prefix(&self, store: &Store, kept: usize, ctx: &str) {
        let first = self.first_newest();
        let mut settled: HashSet<&[u8]> = HashSet::new();
        if (first..self.ops.len()).contains(&kept) {
            settled = self.ops[..first].iter().map(|w| &w.key[..]).collect();
            for w in &self.ops[first..] {
                settled.remove(&w.key[..]);
            }
        }
        check_history_prefix(store, self.ops, kept, &settled, ctx);
    }

    /// Opens a copy of the store whose newest segment is replaced by `newest` (a truncated or
    /// damaged version of it), and checks that exactly the records of that segment which end at
    /// or before `intact_to` are kept, plus everything in the older segments; then reopens the
    /// now sealed copy and checks again.
    fn check_recovers_prefix(&self, newest: &[u8], intact_to: u64, ctx: &str) {
        let (id, _) = self.newest();
        let older = self.segments.len() - 1;
        let dir = self.with_newest(newest);
        let first = self.first_newest();
        let whole = self.newest_recs().iter().take_while(|r| r.end <= intact_to);
        let kept = first + whole.clone().count();

        let store = Store::open_with(dir.path(), check_options(self.mode))
            .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
        let report = store.recovery();
        assert_eq!(report.sealed_segments, older, "{ctx}: {report:?}");
        if kept == first {
            assert!(report.recovered.is_empty(), "{ctx}: {report:?}");
            // All zero: removed; other bytes (a torn first write): set aside, never removed.
            assert_eq!(
                report.removed_segments + report.quarantined.len(),
                1,
                "{ctx}: {report:?}"
            );
            for q in &report.quarantined {
                assert!(
                    q.moved_to.as_ref().is_some_and(|p| p.exists()),
                    "{ctx}: {report:?}"
                );
            }
        } else {
            assert_eq!(report.removed_segments, 0, "{ctx}: {report:?}");
            assert!(report.quarantined.is_empty(), "{ctx}: {report:?}");
            assert_eq!(report.recovered.len(), 1, "{ctx}: {report:?}");
            let r = &report.recovered[0];
            let distinct: HashSet<&[u8]> = whole.map(|r| &r.key[..]).collect();
            assert_eq!(r.segment, id, "{ctx}: {report:?}");
            assert_eq!(r.data_end, self.recs[kept - 1].end, "{ctx}: {report:?}");
            assert_eq!(r.entries, distinct.len(), "{ctx}: {report:?}");
            if let Some(torn) = r.torn_at {
                assert!(
                    torn >= r.data_end && torn < newest.len() as u64,
                    "{ctx}: {report:?}"
                );
            }
        }
        self.check_prefix(&store, kept, ctx);
        store.close().unwrap();

        let store = open(dir.path(), self.mode);
        let report = store.recovery();
        assert!(report.recovered.is_empty(), "{ctx}, reopened: {report:?}");
        assert_eq!(report.removed_segments, 0, "{ctx}, reopened: {report:?}");
        self.check_prefix(&store, kept, &format!("{ctx}, reopened"));
        store.close().unwrap();
    }
}

/// Writes the history, crashes (no seal) and returns the directory.
fn crashed_store(layout: Layout, mode: IoMode, ops: &[Written]) -> TempDir {
    let dir = TempDir::new().unwrap();
    write_history(dir.path(), mode, layout, ops).simulate_crash();
    dir
}

/// Cuts of the sweep across the newest segment (besides those at and around every record).
const SWEEP_POINTS: u64 = 64;

/// Where to cut the newest segment: around every record boundary, inside headers, keys, values
/// and crc tables, and a sweep with an odd stride; all at or after the segment header.
fn cut_points(recs: &[Rec], len: u64) -> BTreeSet<u64> {
    let mut cuts = BTreeSet::new();
    for r in recs {
        let key_len = r.value_offset - r.offset - RECORD_HEADER_LEN as u64;
        cuts.extend([
            r.offset - 1,
            r.offset,
            r.offset + 1,
            r.offset + RECORD_HEADER_LEN as u64 / 2,
            r.offset + RECORD_HEADER_LEN as u64 + key_len / 2,
            r.value_offset + r.value_len / 2,
            r.table_offset + 2,
            r.table_offset + 4 * (r.chunks() / 2) + 1,
            r.end - 1,
            r.end,
            r.end + 1,
        ]);
    }
    let header = SEGMENT_HEADER_LEN as u64;
    cuts.extend((header..len).step_by(((len / SWEEP_POINTS) | 1) as usize));
    cuts.insert(len);
    cuts.retain(|c| (header..=len).contains(c));
    cuts
}

#[test]
fn torn_tail_keeps_exactly_the_whole_records_before_the_cut() {
    // Every cut in the long run; by default half of them, every other one in file order (which
    // half rotates with the seed).
    let sample = crate::common::long::Sample::new("torn_tail");
    let every = crate::common::long::sized(2, 1);
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 1);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let cuts: Vec<u64> = cut_points(img.newest_recs(), bytes.len() as u64)
            .into_iter()
            .enumerate()
            .filter(|(i, _)| sample.picks(*i as u64, every))
            .map(|(_, cut)| cut)
            .collect();
        for_each_parallel(&cuts, |&cut| {
            let ctx = format!("{layout:?}/{}: segment {id} cut at {cut}", mode_name(mode));
            img.check_recovers_prefix(&bytes[..cut as usize], cut, &ctx);
        });
        // An empty file is a segment whose creation was torn: removed, nothing else lost.
        img.check_recovers_prefix(&[], 0, &format!("{layout:?}: segment {id} cut to 0"));
        // Cuts inside the 64-byte segment header are not something a crash produces (the header
        // goes out in the segment's first block write): the open may refuse with Corruption, but
        // must never serve wrong data.
        for cut in [1, 32, SEGMENT_HEADER_LEN - 1] {
            let ctx = format!("{layout:?}: segment {id} cut at {cut} (inside its header)");
            let copy = img.with_newest(&bytes[..cut]);
            match Store::open_with(copy.path(), check_options(mode)) {
                Ok(store) => img.check_prefix(&store, img.first_newest(), &ctx),
                Err(Error::Corruption { segment, .. }) => {
                    assert_eq!(segment, id, "{ctx}");
                    eprintln!("note: {ctx}: open refused with Corruption");
                }
                Err(e) => panic!("{ctx}: {e}"),
            }
        }
        img.assert_older_untouched();
        eprintln!(
            "{layout:?}/{}: {} cuts of a {}-byte segment",
            mode_name(mode),
            cuts.len(),
            bytes.len()
        );
    }
}

/// Ways a write can be torn other than a short file.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Everything from the boundary on reads as zeroes (file length kept).
    ZeroTail,
    /// 5000 bytes of garbage from the boundary on (extending the file if needed).
    GarbageAfter,
    /// The first whole block at or after the boundary reads as zeroes (appended if past the end).
    ZeroBlock,
    /// The first whole block at or after the boundary holds garbage (appended if past the end).
    GarbageBlock,
}

impl Damage {
    const ALL: [Damage; 4] = [
        Damage::ZeroTail,
        Damage::GarbageAfter,
        Damage::ZeroBlock,
        Damage::GarbageBlock,
    ];

    /// Damages `bytes` from `boundary` on; returns where the damage starts.
    fn apply(self, bytes: &mut Vec<u8>, boundary: u64, rng: &mut SplitMix) -> u64 {
        let (start, len) = match self {
            Damage::ZeroTail => (boundary, bytes.len() as u64 - boundary),
            Damage::GarbageAfter => (boundary, 5000),
            Damage::ZeroBlock | Damage::GarbageBlock => (boundary.next_multiple_of(BLOCK), BLOCK),
        };
        let (s, e) = (start as usize, (start + len) as usize);
        if bytes.len() < e {
            bytes.resize(e, 0);
        }
        match self {
            Damage::ZeroTail | Damage::ZeroBlock => bytes[s..e].fill(0),
            Damage::GarbageAfter | Damage::GarbageBlock => {
                bytes[s..e].copy_from_slice(&rng.garbage(e - s))
            }
        }
        start
    }
}

#[test]
fn torn_block_or_garbage_after_a_record_keeps_the_records_before_it() {
    let mut rng = SplitMix::new(4);
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 11);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let recs = img.newest_recs();
        // About eight boundaries, always the first and the last record's end.
        let step = (recs.len() / 8).max(1);
        let mut boundaries: BTreeSet<u64> = recs.iter().step_by(step).map(|r| r.end).collect();
        boundaries.insert(recs.last().unwrap().end);
        let mut cases = Vec::new();
        for &b in &boundaries {
            for damage in Damage::ALL {
                let mut damaged = bytes.to_vec();
                let start = damage.apply(&mut damaged, b, &mut rng);
                let ctx = format!(
                    "{layout:?}/{}: segment {id}, {damage:?} after the record ending at {b} \
                     (damage from {start})",
                    mode_name(mode)
                );
                cases.push((damaged, start, ctx));
            }
        }
        for_each_parallel(&cases, |(damaged, start, ctx)| {
            img.check_recovers_prefix(damaged, *start, ctx)
        });
        img.assert_older_untouched();
    }
}

#[test]
fn sealed_segment_cut_inside_its_footer_is_rescanned() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 21);
        let dir = TempDir::new().unwrap();
        write_history(dir.path(), mode, layout, &ops)
            .close()
            .unwrap();
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let len = bytes.len() as u64;
        let trailer = trailer(bytes).expect("a closed store's newest segment is sealed");
        let data_end = img.recs.last().unwrap().end;
        let table_end = trailer.table_offset + trailer.table_len;
        let trailer_at = len - TRAILER_LEN as u64;
        let footer_at = footer_start(bytes);
        let cuts: BTreeSet<u64> = [
            data_end,
            data_end + 1,
            footer_at,
            footer_at + 1,
            footer_at + 9,
            (footer_at + trailer.table_offset) / 2,
            trailer.table_offset,
            trailer.table_offset + 1,
            data_end + 4,
            data_end + 8,
            data_end + 33,
            trailer.table_offset + trailer.table_len / 2,
            table_end - 1,
            table_end,
            table_end + 1,
            trailer_at,
            trailer_at + 1,
            trailer_at + 32,
            len - 1,
        ]
        .into_iter()
        .filter(|&c| c < len)
        .collect();
        for cut in cuts {
            let ctx = format!(
                "{layout:?}/{}: sealed segment {id} (data end {data_end}, table end \
                 {table_end}, length {len}) cut at {cut}",
                mode_name(mode)
            );
            img.check_recovers_prefix(&bytes[..cut as usize], cut, &ctx);
        }
        img.assert_older_untouched();
    }
}

/// A crash while recovery seals a segment: its footer (written on the block after the last
/// whole record) reached the file wholly or in part, but the torn tail was not cut off yet. The
/// next open must recover the segment again, to the same result.
#[test]
fn crash_during_recovery_while_the_footer_is_written_recovers_again() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 41);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        // Tear the newest segment three quarters into its largest record, so that the torn tail
        // is longer than the footer recovery writes.
        let big = img
            .newest_recs()
            .iter()
            .max_by_key(|r| r.end - r.offset)
            .unwrap();
        let torn = &bytes[..(big.offset + (big.end - big.offset) * 3 / 4) as usize];
        // What a complete recovery writes: the footer after everything the file held, which
        // stays in place, torn tail included.
        let copy = img.with_newest(torn);
        open(copy.path(), mode).close().unwrap();
        let sealed = std::fs::read(copy.path().join(segment_name(id))).unwrap();
        let footer_at = footer_start(&sealed) as usize;
        assert_eq!(footer_at as u64 % BLOCK, 0);
        assert!(
            footer_at >= torn.len(),
            "the footer must not overwrite the torn tail"
        );
        assert!(
            sealed[..torn.len()] == *torn,
            "recovery changed bytes it found"
        );
        let footer_len = sealed.len() - footer_at;
        for written in [
            512,
            footer_len / 2,
            footer_len - TRAILER_LEN,
            footer_len - 1,
        ] {
            let interrupted = &sealed[..footer_at + written];
            let ctx = format!(
                "{layout:?}/{}: segment {id} torn at {}, recovery interrupted after {written} \
                 of {footer_len} footer bytes at {footer_at}",
                mode_name(mode),
                torn.len()
            );
            img.check_recovers_prefix(interrupted, big.offset, &ctx);
        }
        img.assert_older_untouched();
    }
}

/// With `Durability::Buffered` a crash loses a suffix of the writes, never a middle part, and
/// nothing written before the last `flush`.
#[test]
fn buffered_writes_lose_only_a_suffix_at_a_crash() {
    for (seed, mode) in MODES.into_iter().enumerate() {
        let ops = history(seed as u64 + 51);
        let dir = TempDir::new().unwrap();
        let store = Store::open_with(dir.path(), options(mode, Durability::Buffered)).unwrap();
        let mut rng = SplitMix::new(seed as u64 + 5);
        let mut flushed = 0;
        for (i, w) in ops.iter().enumerate() {
            match &w.value {
                Some(v) => drop(store.put(&w.key, v).unwrap()),
                None => assert!(store.delete(&w.key).unwrap()),
            }
            if rng.below_u64(8) == 0 {
                store.flush().unwrap();
                flushed = i + 1;
            }
        }
        store.simulate_crash();
        // The whole records on disk are the history's first ones, in order.
        let recs: Vec<Rec> = read_segments(dir.path())
            .iter()
            .flat_map(|(id, bytes)| scan_records(*id, bytes))
            .collect();
        let kept = recs.len();
        let ctx = format!(
            "{}: buffered crash kept {kept} of {} writes, {flushed} flushed",
            mode_name(mode),
            ops.len()
        );
        assert!((flushed..=ops.len()).contains(&kept), "{ctx}");
        for (r, w) in recs.iter().zip(&ops) {
            assert_eq!(r.key, w.key, "{ctx}");
        }
        let store = open(dir.path(), mode);
        check_history_prefix(&store, &ops, kept, &HashSet::new(), &ctx);
        eprintln!("{ctx}");
    }
}

/// The trailer's `data end` is documented as one past the last record byte (format/footer.rs),
/// and that is what a footer written by recovery holds. Every segment sealed by the writer must
/// say the same, also when its last write group was padded to a block (synced writes).
#[test]
fn sealed_footer_data_end_is_one_past_the_last_record() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 31);
        let dir = TempDir::new().unwrap();
        write_history(dir.path(), mode, layout, &ops)
            .close()
            .unwrap();
        let img = Image::read(dir.path(), mode, &ops);
        for (id, bytes) in &img.segments {
            let trailer = trailer(bytes).unwrap();
            let last = img.recs.iter().rfind(|r| r.segment == *id).unwrap();
            assert_eq!(
                trailer.data_end,
                last.end,
                "{layout:?}/{}: segment {id}: trailer data end (table at {})",
                mode_name(mode),
                trailer.table_offset
            );
        }
    }
}
