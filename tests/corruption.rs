//! Random damage to the segment files of a closed store: flipped bits and zeroed 512 B and 4 KiB
//! blocks, anywhere in any segment file (log segments and blob files; headers, records, values
//! raw and compressed, padding, footer tables, trailers).
//!
//! tests/crash/damage.rs damages chosen bytes of one small segment; this test plants damage at random,
//! round after round, in a store of many segments and keys, and checks after each reopen:
//!
//! - the open never panics; if it refuses, the error is `Error::Corruption` naming the damaged
//!   segment;
//! - every read of a key whose value bytes or checksums were hit fails with `Error::Corruption`
//!   naming that segment and an offset inside the key's record (`get` and a streaming reader);
//! - every other key reads back exactly its value, and every deleted key stays deleted: no read
//!   ever returns wrong bytes;
//! - `Store::verify` names exactly the keys whose reads fail, reports damage only in the damaged
//!   segment, and reports every damage to bytes the store checks, unless the open already
//!   repaired it (a damaged footer is rebuilt by a rescan).
//!
//! `PODSTORE_CORRUPTION_ROUNDS` (default 30, 300 under `PODSTORE_TEST_LONG`) and
//! `PODSTORE_CORRUPTION_SEED` vary the run; the
//! test prints the counts of damage planted and detected.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use common::files::{FileKind, dir_with, parse_name, written_files};
use common::parallel::map_parallel;
use common::records::{Rec, footer_start, scan_records, trailer};
use common::store::{env_u64, show_key as show};
use common::{Random, XorShift};
use podstore::format::footer::TRAILER_LEN;
use podstore::format::record::RecordKind;
use podstore::format::scan::scan_segment;
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore::{Batch, Compression, Durability, Error, IoMode, Options, Store, Structure};
use tempfile::TempDir;

/// Values of at least this many bytes go to blob files of their own (lowered from the default
/// 1 MiB so that the store has several blob files without taking long to read).
const LARGE: u64 = 128 << 10;

fn options() -> Options {
    Options::default()
        .io_mode(IoMode::Auto)
        .durability(Durability::Sync)
        .segment_size(1 << 20)
        .large_value_threshold(LARGE)
        .flush_interval(None)
}

/// Text-like (compressible) bytes.
fn text(rng: &mut XorShift, len: usize) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "segment ", "record ", "value ", "chunk ", "footer ", "frame ", "key ", "crc ",
    ];
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
        if rng.chance(10) {
            out.extend_from_slice(format!("{} ", rng.next_u64() % 1000).as_bytes());
        }
    }
    out.truncate(len);
    out
}

/// One segment file of the pristine store.
struct SegFile {
    name: String,
    id: u64,
    bytes: Vec<u8>,
    records: Vec<Rec>,
    data_end: u64,
    table_offset: u64,
    table_end: u64,
}

impl SegFile {
    fn parse(name: String, bytes: Vec<u8>) -> SegFile {
        let (id, _) = parse_name(&name).expect("a store file");
        let trailer = trailer(&bytes).unwrap_or_else(|c| panic!("{name}: pristine trailer: {c}"));
        let outcome = scan_segment(&bytes[..], id).unwrap_or_else(|_| panic!("{name}: scan"));
        assert!(outcome.damaged.is_empty(), "{name}: pristine records");
        assert_eq!(outcome.data_end, trailer.data_end, "{name}");
        let footer_at = footer_start(&bytes);
        SegFile {
            name,
            id,
            records: scan_records(id, &bytes),
            bytes,
            data_end: trailer.data_end,
            // The footer's start: its key section (version 2), then the location table.
            table_offset: footer_at,
            table_end: trailer.table_offset + trailer.table_len,
        }
    }

    fn len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// A closed store, its files and the value of every key written.
struct Fixture {
    files: Vec<SegFile>,
    /// Final state of every key ever written: `None` once deleted.
    model: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Where each live key's value is: (file index, record).
    live: HashMap<Vec<u8>, (usize, Rec)>,
}

impl Fixture {
    fn build(seed: u64) -> Fixture {
        let dir = TempDir::new().unwrap();
        let mut rng = XorShift::new(seed);
        let mut model: BTreeMap<Vec<u8>, Option<Vec<u8>>> = BTreeMap::new();
        // First life: raw values of every size class, overwrites, deletes, a batch.
        let store = Store::open_with(dir.path(), options()).unwrap();
        let mut put = |store: &Store, key: Vec<u8>, value: Vec<u8>| {
            store.put(&key, &value).unwrap();
            model.insert(key, Some(value));
        };
        for i in 0..60 {
            let len = rng.below(300);
            put(&store, format!("small/{i:03}").into_bytes(), rng.bytes(len));
        }
        for i in 0..48 {
            let len = rng.in_range(4096..48_000);
            put(
                &store,
                format!("medium/{i:03}").into_bytes(),
                rng.bytes(len),
            );
        }
        put(&store, b"blob/0".to_vec(), rng.bytes((1 << 20) + 333));
        for i in 1..3 {
            let len = rng.in_range(LARGE as usize..(300 << 10));
            put(&store, format!("blob/{i}").into_bytes(), rng.bytes(len));
        }
        put(&store, b"empty".to_vec(), Vec::new());
        for i in (0..60).step_by(4) {
            let len = rng.below(5000);
            put(&store, format!("small/{i:03}").into_bytes(), rng.bytes(len));
        }
        let mut batch = Batch::new();
        for i in 0..6 {
            let key = format!("batch/{i}").into_bytes();
            let value = rng.bytes(700 * i);
            batch.put(&key, &value);
            model.insert(key, Some(value));
        }
        store.write(&batch).unwrap();
        for i in (1..60).step_by(7) {
            let key = format!("small/{i:03}").into_bytes();
            assert!(store.delete(&key).unwrap());
            model.insert(key, None);
        }
        store.close().unwrap();

        // Second life: compressed values (small frames, so values have many), some replacing
        // raw ones, a compressed blob file, and more deletes.
        let opts = options()
            .compression(Compression::Lz4)
            .compression_frame_size(8 << 10);
        let store = Store::open_with(dir.path(), opts).unwrap();
        for i in 0..25 {
            let len = rng.in_range(100..100_000);
            let value = text(&mut rng, len);
            let key = format!("text/{i:03}").into_bytes();
            store.put(&key, &value).unwrap();
            model.insert(key, Some(value));
        }
        for i in (2..48).step_by(5) {
            let len = rng.in_range(5000..60_000);
            let value = text(&mut rng, len);
            let key = format!("medium/{i:03}").into_bytes();
            store.put(&key, &value).unwrap();
            model.insert(key, Some(value));
        }
        let value = text(&mut rng, (1 << 20) + 5000);
        store.put(b"blob/text", &value).unwrap();
        model.insert(b"blob/text".to_vec(), Some(value));
        for key in ["medium/007", "text/004"] {
            assert!(store.delete(key.as_bytes()).unwrap());
            model.insert(key.as_bytes().to_vec(), None);
        }
        let clean = store.verify().unwrap();
        assert!(clean.is_clean(), "a new store verifies clean: {clean:?}");
        assert!(clean.affected_keys.is_empty());
        store.close().unwrap();

        let mut files: Vec<SegFile> = [FileKind::Log, FileKind::Blob]
            .into_iter()
            .flat_map(|kind| written_files(dir.path(), kind))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                SegFile::parse(name, std::fs::read(&p).unwrap())
            })
            .collect();
        files.sort_by_key(|f| f.id);
        assert!(files.iter().filter(|f| f.name.starts_with("blob-")).count() >= 4);
        assert!(files.iter().filter(|f| f.name.starts_with("seg-")).count() >= 3);

        // Each live key's newest record (by sequence number, as the index has it).
        let mut live: HashMap<Vec<u8>, (usize, Rec)> = HashMap::new();
        for (i, f) in files.iter().enumerate() {
            for r in &f.records {
                if live.get(&r.key).is_none_or(|(_, old)| old.seq < r.seq) {
                    live.insert(r.key.clone(), (i, r.clone()));
                }
            }
        }
        live.retain(|k, (_, r)| {
            let alive = model.get(k).is_some_and(|v| v.is_some());
            assert_eq!(alive, r.kind == RecordKind::Put, "{}", show(k));
            alive
        });
        assert_eq!(live.len(), model.values().filter(|v| v.is_some()).count());
        Fixture { files, model, live }
    }

    /// A store directory holding every file, `victim` with `damaged` bytes.
    fn store_dir(&self, victim: usize, damaged: &[u8]) -> TempDir {
        dir_with(self.files.iter().enumerate().map(|(i, f)| {
            let bytes = if i == victim { damaged } else { &f.bytes[..] };
            (f.name.clone(), bytes)
        }))
    }
}

/// Where in a segment file a damaged byte is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Header,
    /// Record header or key.
    RecordHead,
    /// Value bytes or chunk crcs.
    Value,
    /// Padding between write groups.
    Padding,
    /// Between the data end and the footer table: bytes nothing reads.
    Unused,
    Table,
    FooterPadding,
    Trailer,
}

fn place_of(f: &SegFile, at: u64) -> Place {
    if at < SEGMENT_HEADER_LEN as u64 {
        return Place::Header;
    }
    if at < f.data_end {
        let i = f.records.partition_point(|r| r.end <= at);
        return match f.records.get(i) {
            Some(r) if r.offset <= at && at < r.value_offset => Place::RecordHead,
            Some(r) if r.offset <= at => Place::Value,
            _ => Place::Padding,
        };
    }
    if at < f.table_offset {
        Place::Unused
    } else if at < f.table_end {
        Place::Table
    } else if at < f.len() - TRAILER_LEN as u64 {
        Place::FooterPadding
    } else {
        Place::Trailer
    }
}

/// Plants one random damage in a copy of `f`; returns the bytes and a description.
fn plant(rng: &mut XorShift, f: &SegFile) -> (Vec<u8>, String) {
    let mut bytes = f.bytes.clone();
    let len = f.len();
    // Aim at the small structures often: a uniform place would nearly always be value bytes.
    let target = match rng.below(10) {
        0 => rng.below(SEGMENT_HEADER_LEN) as u64,
        1 => len - 1 - rng.below(TRAILER_LEN) as u64,
        2 => f.table_offset + rng.below((f.table_end - f.table_offset) as usize) as u64,
        3 => {
            let r = &f.records[rng.below(f.records.len())];
            r.offset + rng.below((r.value_offset - r.offset) as usize) as u64
        }
        _ => rng.below(len as usize) as u64,
    };
    let what = match rng.below(4) {
        0 | 1 => {
            let bits = rng.in_range(1..9);
            let span = rng.in_range(1..65) as u64;
            for _ in 0..bits {
                let at = (target + rng.below(span as usize) as u64).min(len - 1);
                bytes[at as usize] ^= 1 << rng.below(8);
            }
            format!("{bits} bit flips in {span} bytes from {target}")
        }
        2 => {
            let at = target & !511;
            bytes[at as usize..(at + 512).min(len) as usize].fill(0);
            format!("512 B zeroed at {at}")
        }
        _ => {
            let at = target & !4095;
            bytes[at as usize..(at + 4096).min(len) as usize].fill(0);
            format!("4 KiB zeroed at {at}")
        }
    };
    (bytes, what)
}

#[derive(Debug, Default)]
struct Counts {
    rounds: u64,
    planted: u64,
    no_change: u64,
    /// Damage confined to bytes nothing reads (between the data end and the footer table).
    harmless: u64,
    open_refused: u64,
    /// Verify clean after the open rebuilt a damaged footer by a rescan.
    rebuilt: u64,
    reported_by_verify: u64,
    reads_failed: u64,
    reads_exact: u64,
}

/// Rounds drawn and checked at a time (each holds a damaged copy of one file in memory).
const ROUND_CHUNK: u64 = 16;

#[test]
fn random_damage_is_detected_and_never_read_as_data() {
    let seed = env_u64("PODSTORE_CORRUPTION_SEED", 5);
    let rounds = common::long::cases("PODSTORE_CORRUPTION_ROUNDS", 30, 300);
    let fx = Fixture::build(seed);
    let mut rng = XorShift::new(seed ^ 0xC0FF_EE00);
    let mut counts = Counts::default();
    // The damage of every round is drawn in order from one generator (so a seed names the
    // same rounds as ever); the rounds are then checked a chunk at a time, in parallel (each
    // on its own copy of the store), and counted in order.
    let mut round = 0;
    while round < rounds {
        let chunk: Vec<(u64, usize, Vec<u8>, String)> = (round..rounds.min(round + ROUND_CHUNK))
            .map(|r| {
                let victim = rng.below(fx.files.len());
                let (bytes, what) = plant(&mut rng, &fx.files[victim]);
                (r, victim, bytes, what)
            })
            .collect();
        round += chunk.len() as u64;
        let results = map_parallel(&chunk, |(round, victim, bytes, what)| {
            let f = &fx.files[*victim];
            let changed: Vec<u64> = (0..bytes.len())
                .filter(|&i| bytes[i] != f.bytes[i])
                .map(|i| i as u64)
                .collect();
            if changed.is_empty() {
                return None;
            }
            let places: BTreeSet<Place> = changed.iter().map(|&at| place_of(f, at)).collect();
            let ctx = format!(
                "seed {seed} round {round}: {} ({} bytes changed, {:?}): {what}",
                f.name,
                changed.len(),
                places
            );
            let dir = fx.store_dir(*victim, bytes);
            let outcome = check_round(&fx, *victim, &changed, &places, dir.path(), &ctx);
            Some((outcome, places, ctx))
        });
        for result in results {
            counts.rounds += 1;
            let Some((outcome, places, ctx)) = result else {
                counts.no_change += 1;
                continue;
            };
            counts.planted += 1;
            match outcome {
                Outcome::Refused => counts.open_refused += 1,
                Outcome::Opened {
                    rescanned,
                    reported,
                    failed,
                    exact,
                } => {
                    counts.reads_failed += failed;
                    counts.reads_exact += exact;
                    if reported {
                        counts.reported_by_verify += 1;
                    } else if rescanned {
                        counts.rebuilt += 1;
                    } else {
                        assert!(
                            places.iter().all(|p| *p == Place::Unused),
                            "{ctx}: damage neither reported nor repaired"
                        );
                        counts.harmless += 1;
                    }
                }
            }
        }
    }
    let blobs = fx
        .files
        .iter()
        .filter(|f| f.name.starts_with("blob-"))
        .count();
    eprintln!(
        "corruption: store of {} log segments and {blobs} blob files, {} live keys, {} deleted",
        fx.files.len() - blobs,
        fx.live.len(),
        fx.model.len() - fx.live.len()
    );
    eprintln!(
        "corruption: seed {seed}, {} rounds: {} damages planted, {} detected ({} reported by \
         verify, {} footers rebuilt at open, {} opens refused), {} in bytes nothing reads, {} \
         changed nothing; reads: {} failed with Corruption, {} exact, 0 wrong",
        counts.rounds,
        counts.planted,
        counts.reported_by_verify + counts.rebuilt + counts.open_refused,
        counts.reported_by_verify,
        counts.rebuilt,
        counts.open_refused,
        counts.harmless,
        counts.no_change,
        counts.reads_failed,
        counts.reads_exact,
    );
    assert_eq!(
        counts.planted,
        counts.reported_by_verify + counts.rebuilt + counts.open_refused + counts.harmless
    );
}

enum Outcome {
    Refused,
    Opened {
        rescanned: bool,
        reported: bool,
        failed: u64,
        exact: u64,
    },
}

fn check_round(
    fx: &Fixture,
    victim: usize,
    changed: &[u64],
    places: &BTreeSet<Place>,
    dir: &Path,
    ctx: &str,
) -> Outcome {
    let f = &fx.files[victim];
    let store = match Store::open_with(dir, options()) {
        Ok(s) => s,
        Err(Error::Corruption {
            segment, offset, ..
        }) => {
            assert_eq!(segment, f.id, "{ctx}: open refused naming another segment");
            assert!(offset < f.len(), "{ctx}: open refused at offset {offset}");
            return Outcome::Refused;
        }
        Err(e) => panic!("{ctx}: open failed with {e}"),
    };
    let hit = |from: u64, to: u64| changed.iter().any(|&c| from <= c && c < to);
    let mut failed_keys = BTreeSet::new();
    let (mut failed, mut exact) = (0, 0);
    for (key, want) in &fx.model {
        let kctx = format!("{ctx}: key {}", show(key));
        let got = store.get(key);
        let Some(want) = want else {
            match got {
                Ok(None) => continue,
                other => panic!(
                    "{kctx}: deleted key reads {:?}",
                    other.map(|v| v.map(|v| v.len()))
                ),
            }
        };
        let (file, rec) = &fx.live[key];
        let in_victim = *file == victim;
        let value_hit = in_victim && hit(rec.value_offset, rec.end);
        let head_hit = in_victim && hit(rec.offset, rec.value_offset);
        match got {
            Ok(Some(v)) if v == *want => {
                assert!(!value_hit, "{kctx}: value damaged but read without error");
                exact += 1;
            }
            Ok(other) => panic!(
                "{kctx}: read WRONG bytes: {:?} bytes instead of {}",
                other.map(|v| v.len()),
                want.len()
            ),
            Err(Error::Corruption {
                segment, offset, ..
            }) => {
                assert!(
                    value_hit || head_hit,
                    "{kctx}: Corruption at {segment:x}/{offset} but its record is intact"
                );
                assert_eq!(segment, f.id, "{kctx}: error names another segment");
                assert!(
                    rec.offset <= offset && offset < rec.end,
                    "{kctx}: error offset {offset} outside its record {}..{}",
                    rec.offset,
                    rec.end
                );
                // A streaming reader fails too, with the same error inside: when it is opened
                // (a damaged record header or key: opening checks the key in its record) or
                // when it reads.
                match store.reader(key) {
                    Err(Error::Corruption { segment, .. }) => {
                        assert_eq!(segment, f.id, "{kctx}: reader names another segment");
                    }
                    Err(e) => panic!("{kctx}: reader: unexpected error {e}"),
                    Ok(reader) => {
                        let mut reader = reader.expect("live");
                        let err = std::io::copy(&mut reader, &mut std::io::sink())
                            .expect_err("reader of a damaged value");
                        let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
                        assert!(
                            matches!(inner, Some(Error::Corruption { segment, .. }) if *segment == f.id),
                            "{kctx}: reader error {err:?}"
                        );
                    }
                }
                failed_keys.insert(key.clone());
                failed += 1;
            }
            Err(e) => panic!("{kctx}: unexpected error {e}"),
        }
    }
    assert_eq!(store.len(), fx.live.len(), "{ctx}: live key count");
    let rescanned = store.recovery().recovered.iter().any(|r| r.segment == f.id);
    let report = store
        .verify()
        .unwrap_or_else(|e| panic!("{ctx}: verify: {e}"));
    for d in &report.damage {
        assert_eq!(d.segment, f.id, "{ctx}: damage reported elsewhere: {d:?}");
        if d.structure == Structure::Value {
            let r = d.record.expect("value damage names its record");
            assert!(
                hit(r, f.len()),
                "{ctx}: value damage before any change: {d:?}"
            );
        }
    }
    let affected: BTreeSet<Vec<u8>> = report.affected_keys.iter().cloned().collect();
    assert_eq!(
        affected.iter().map(|k| show(k)).collect::<Vec<_>>(),
        failed_keys.iter().map(|k| show(k)).collect::<Vec<_>>(),
        "{ctx}: verify's affected keys are the keys whose reads fail; report {report:?}"
    );
    let checked_places = places.iter().any(|p| {
        matches!(
            p,
            Place::Header
                | Place::RecordHead
                | Place::Value
                | Place::Padding
                | Place::FooterPadding
        )
    });
    if checked_places && !rescanned {
        assert!(!report.is_clean(), "{ctx}: verify found nothing");
    }
    store.close().unwrap();
    Outcome::Opened {
        rescanned,
        reported: !report.is_clean(),
        failed,
        exact,
    }
}

/// The blob file of a new store with one large value, and the value.
fn one_blob_store(rng: &mut XorShift) -> (TempDir, std::path::PathBuf, Vec<u8>) {
    let dir = TempDir::new().unwrap();
    let value = rng.bytes(200 << 10);
    let store = Store::open_with(dir.path(), options()).unwrap();
    store.put(b"big", &value).unwrap();
    store.put(b"small", b"after the blob").unwrap();
    store.close().unwrap();
    let blob = written_files(dir.path(), FileKind::Blob)
        .pop()
        .expect("a blob file");
    (dir, blob, value)
}

/// A blob file whose footer (table or trailer) is damaged but whose record is whole keeps its
/// value: it used to be taken for an unfinished put and removed, so the key read as absent.
/// The footer is rebuilt from the record (as after a power loss took it: a blob file's footer
/// is not synced before its seal is recorded).
#[test]
fn blob_file_with_damaged_footer_keeps_its_value() {
    let mut rng = XorShift::new(11);
    for (what, from_end) in [("table", None), ("trailer", Some(20u64))] {
        let (dir, blob, value) = one_blob_store(&mut rng);
        let mut bytes = std::fs::read(&blob).unwrap();
        let len = bytes.len() as u64;
        let t = trailer(&bytes).unwrap();
        let at = from_end.map_or(t.table_offset + 9, |d| len - d);
        bytes[at as usize] ^= 0x04;
        std::fs::write(&blob, &bytes).unwrap();
        // The footer is derived from the record, which is whole: the default open rebuilds it.
        let store = Store::open_with(dir.path(), options()).unwrap();
        assert!(store.recovery().lost.is_empty());
        assert_eq!(
            store.recovery().recovered.len(),
            1,
            "{what}: footer rebuilt"
        );
        assert!(
            store.get(b"big").unwrap() == Some(value),
            "{what}: value kept"
        );
        assert!(
            store.verify().unwrap().is_clean(),
            "{what}: rebuilt footer verifies"
        );
    }
}

/// A lost sector at the start of a footer table holds no record bytes (the table starts on a
/// block of its own): every value of the segment survives the rescan (of salvage: the default
/// open refuses the store). Before, the sector also
/// held the end of the last record, which the rescan then took for a torn write and dropped
/// (the key read as absent, or as its older value).
#[test]
fn lost_sector_at_the_start_of_a_footer_loses_no_record() {
    let mut rng = XorShift::new(12);
    let (dir, blob, value) = one_blob_store(&mut rng);
    let log = written_files(dir.path(), FileKind::Log);
    assert_eq!(log.len(), 1);
    for file in [&blob, &log[0]] {
        let mut bytes = std::fs::read(file).unwrap();
        let t = trailer(&bytes).unwrap();
        let at = (t.table_offset & !511) as usize;
        assert!(
            at as u64 >= t.data_end,
            "{file:?}: the table shares a sector with a record"
        );
        bytes[at..at + 512].fill(0);
        std::fs::write(file, &bytes).unwrap();
    }
    // The blob file's footer is rebuilt from its record; the log segment's cannot be.
    let name = log[0].file_name().unwrap().to_string_lossy().into_owned();
    let damaged = [(name, podstore::FileProblem::FooterDamaged)];
    let store = common::store::open_salvaging(dir.path(), options(), &damaged);
    assert!(store.get(b"big").unwrap() == Some(value));
    assert_eq!(
        store.get(b"small").unwrap().as_deref(),
        Some(&b"after the blob"[..])
    );
}

/// `verify` runs beside writers (buffered and durable puts, deletes, segment rollovers, blob
/// files) and finds nothing wrong in an undamaged store, the segment being written included.
#[test]
fn verify_beside_concurrent_writers_finds_nothing() {
    let dir = TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), options()).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let ops = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (store, stop, ops) = (&store, &stop, &ops);
            s.spawn(move || {
                let mut rng = XorShift::new(100 + t);
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let key = format!("w{t}/{}", i % 50).into_bytes();
                    let len = if rng.chance(3) {
                        LARGE as usize + rng.below(1000)
                    } else {
                        rng.below(30_000)
                    };
                    let value = rng.bytes(len);
                    if rng.chance(10) {
                        store.delete(&key).unwrap();
                    } else if rng.chance(50) {
                        let mut b = Batch::new();
                        b.put(&key, &value).durability(Durability::Buffered);
                        store.write(&b).unwrap();
                    } else {
                        store.put(&key, &value).unwrap();
                    }
                    i += 1;
                    ops.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        // The writers stop however this ends: a failed verify must fail the test, not leave the
        // scope waiting for writers that never stop.
        struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        // Verify again and again while the writers write 400 operations.
        let mut checked = 0;
        while checked < 5 || ops.load(std::sync::atomic::Ordering::Relaxed) < 400 {
            let report = store.verify().unwrap();
            assert!(report.is_clean(), "{report:?}");
            assert!(report.affected_keys.is_empty());
            checked += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let report = store.verify().unwrap();
    assert!(report.is_clean() && report.segments >= 2, "{report:?}");
}
