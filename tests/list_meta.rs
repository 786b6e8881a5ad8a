//! Listing with metadata (`Entry::metadata`): each listed key's length and version, known
//! without reading its record, are what `Store::metadata` says of the key, across sealed
//! segments, the active one, blob files, overwrites, deletes, compaction, reopen and checkpoint;
//! and a listing reads no record (one whose records are all damaged lists as before).

mod common;

use std::collections::BTreeMap;
use std::ops::Bound;
use std::os::unix::fs::FileExt;

use common::files::{FileKind, file_name, store_files};
use common::records::scan_records;
use common::store::{MODES, TestStore, label, quiet, small_with};
use podstore::{Durability, Error, IoMode, Options, Store, ValueMeta, Version};

/// The model: each live key's length and the version its last put returned.
type Model = BTreeMap<Vec<u8>, (u64, Version)>;

fn opts(mode: IoMode, durability: Durability, cache: bool) -> Options {
    let o = quiet(small_with(mode, durability)).large_value_threshold(64 << 10);
    if cache { o } else { o.cache_capacity(0) }
}

fn key(i: usize) -> Vec<u8> {
    format!("obj/{:02}/{i:05}", i % 7).into_bytes()
}

/// Lengths across the cases: empty, small, a chunk and more, a blob file (over 64 KiB).
fn value(i: usize, round: usize) -> Vec<u8> {
    let len = [0usize, 10, 300, 5000, 70_000][(i + round) % 5];
    vec![(i + round) as u8; len]
}

fn put(store: &Store, model: &mut Model, i: usize, round: usize) {
    let v = value(i, round);
    let version = store.put(key(i), &v).unwrap();
    model.insert(key(i), (v.len() as u64, version));
}

/// Every listing with metadata (whole store forwards and backwards, a prefix, a range) against
/// `Store::metadata` and the model.
#[track_caller]
fn check(store: &Store, model: &Model, what: &str) {
    let listed: Vec<(Vec<u8>, ValueMeta)> = store
        .keys()
        .entries()
        .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
        .collect::<podstore::Result<_>>()
        .unwrap();
    let keys: Vec<&Vec<u8>> = listed.iter().map(|(k, _)| k).collect();
    assert_eq!(keys, model.keys().collect::<Vec<_>>(), "{what}: keys");
    for (k, meta) in &listed {
        let stored = store
            .metadata(k)
            .unwrap()
            .expect("a listed key has a value");
        assert_eq!(*meta, stored, "{what}: metadata of {k:?}");
        let (len, version) = model[k];
        assert_eq!(
            (meta.len(), meta.version()),
            (len, version),
            "{what}: {k:?}"
        );
    }
    let mut back: Vec<(Vec<u8>, ValueMeta)> = store
        .keys()
        .entries()
        .rev()
        .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
        .collect::<podstore::Result<_>>()
        .unwrap();
    back.reverse();
    assert_eq!(back, listed, "{what}: backwards");
    let prefix: Vec<(Vec<u8>, ValueMeta)> = store
        .prefix("obj/03/")
        .entries()
        .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
        .collect::<podstore::Result<_>>()
        .unwrap();
    let want: Vec<(Vec<u8>, ValueMeta)> = listed
        .iter()
        .filter(|(k, _)| k.starts_with(b"obj/03/"))
        .cloned()
        .collect();
    assert_eq!(prefix, want, "{what}: prefix");
    // The value an entry reads is the one its metadata describes.
    for e in store.prefix("obj/05/").entries() {
        let e = e.unwrap();
        assert_eq!(
            e.value().unwrap().len() as u64,
            e.metadata().len(),
            "{what}"
        );
    }
}

#[test]
fn listed_metadata_is_the_stores_across_the_life_of_a_store() {
    for mode in MODES {
        for (durability, cache) in [(Durability::Sync, true), (Durability::Buffered, false)] {
            let t = TestStore::new(opts(mode, durability, cache));
            let what = |step: &str| format!("{} cache {cache}: {step}", label(&t.opts));
            let mut store = t.open();
            let mut model = Model::new();
            // Several sealed 1 MiB segments, blob files, and keys in the active segment.
            for i in 0..600 {
                put(&store, &mut model, i, 0);
            }
            check(&store, &model, &what("written"));
            // Overwrites (some in the active segment, twice) and deletes.
            for i in (0..600).step_by(3) {
                put(&store, &mut model, i, 1);
            }
            for i in (0..600).step_by(9) {
                put(&store, &mut model, i, 2);
            }
            for i in (0..600).step_by(5) {
                store.delete(key(i)).unwrap();
                model.remove(&key(i));
            }
            check(&store, &model, &what("overwritten and deleted"));
            store.compact().unwrap();
            check(&store, &model, &what("compacted"));
            for i in 600..650 {
                put(&store, &mut model, i, 0);
            }
            check(&store, &model, &what("written after compaction"));
            store = t.reopen(store);
            check(&store, &model, &what("reopened"));
            let copy = tempfile::tempdir().unwrap();
            let dest = copy.path().join("cp");
            store.checkpoint(&dest).unwrap();
            let cp = Store::open_with(&dest, t.opts.clone()).unwrap();
            check(&cp, &model, &what("checkpoint"));
            cp.close().unwrap();
            store.close().unwrap();
        }
    }
}

/// Damages the header of every record of every file of the store in `dir` (one byte of its
/// sequence number, which its crc covers), in place: any read of a record header fails.
fn damage_every_record(dir: &std::path::Path) -> usize {
    let mut damaged = 0;
    for (id, kind) in store_files(dir) {
        let path = dir.join(file_name(id, kind));
        let bytes = std::fs::read(&path).unwrap();
        if bytes.len() < 64 {
            continue; // a spare blob file, or a segment nothing was written to yet
        }
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        for r in scan_records(id, &bytes) {
            let at = r.offset + 24;
            file.write_all_at(&[bytes[at as usize] ^ 0x55], at).unwrap();
            damaged += 1;
        }
        file.sync_all().unwrap();
        assert!(matches!(kind, FileKind::Log | FileKind::Blob));
    }
    damaged
}

#[test]
fn a_listing_with_metadata_reads_no_record() {
    for mode in MODES {
        // No read cache, so that nothing read before the damage answers for the files.
        let t = TestStore::new(opts(mode, Durability::Sync, false));
        let store = t.open();
        let mut model = Model::new();
        for i in 0..500 {
            put(&store, &mut model, i, 0);
        }
        for i in (0..500).step_by(4) {
            put(&store, &mut model, i, 1);
        }
        for i in (0..500).step_by(7) {
            store.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
        // Resolves what lazy puts left, which a listing would otherwise read records to tell.
        assert_eq!(store.len(), model.len());
        let want: Vec<(Vec<u8>, ValueMeta)> = model
            .keys()
            .map(|k| (k.clone(), store.metadata(k).unwrap().unwrap()))
            .collect();
        assert!(damage_every_record(t.path()) > model.len());
        // The damage is seen by whatever reads a record header: most keys' metadata now fails
        // (those whose records are still in the write buffer are read from there).
        let failing = model
            .keys()
            .filter(|k| matches!(store.metadata(k), Err(Error::Corruption { .. })))
            .count();
        assert!(
            failing > model.len() / 2,
            "{}: {failing} of {} reads failed",
            label(&t.opts),
            model.len()
        );
        let listed: Vec<(Vec<u8>, ValueMeta)> = store
            .keys()
            .entries()
            .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
            .collect::<podstore::Result<_>>()
            .unwrap_or_else(|e| panic!("{}: the listing read a record: {e}", label(&t.opts)));
        assert_eq!(listed, want, "{}", label(&t.opts));
        let mut back: Vec<(Vec<u8>, ValueMeta)> = store
            .prefix("obj/02/")
            .entries()
            .rev()
            .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
            .collect::<podstore::Result<_>>()
            .unwrap();
        back.reverse();
        let want_prefix: Vec<_> = want
            .iter()
            .filter(|(k, _)| k.starts_with(b"obj/02/"))
            .cloned()
            .collect();
        assert_eq!(back, want_prefix, "{}", label(&t.opts));
        // Reopened (open reads footers, not records), the maps come from open's read of the
        // location tables.
        let store = t.reopen(store);
        let listed: Vec<(Vec<u8>, ValueMeta)> = store
            .keys()
            .entries()
            .map(|e| e.map(|e| (e.key().to_vec(), e.metadata())))
            .collect::<podstore::Result<_>>()
            .unwrap_or_else(|e| panic!("{}: reopened, a record was read: {e}", label(&t.opts)));
        assert_eq!(listed, want, "{} reopened", label(&t.opts));
        drop(store);
    }
}

/// The old-format fixtures (footers of version 1, whose tables hold the sequence numbers, and
/// counter-numbered versions): listed metadata is `Store::metadata`'s, before and after a
/// compaction rewrites them.
#[test]
fn old_stores_list_their_metadata() {
    use common::compat;
    for fixture in compat::ALL_FIXTURES {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture);
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(&src).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
        }
        let opts = compat::options(podstore::IoMode::Buffered).compaction_threshold(0.01);
        let store = Store::open_with(dir.path(), opts).unwrap();
        let model: Model = store
            .keys()
            .map(|k| {
                let k = k.unwrap();
                let m = store.metadata(&k).unwrap().unwrap();
                (k, (m.len(), m.version()))
            })
            .collect();
        assert_eq!(model.len(), compat::expected_contents().len(), "{fixture}");
        check(&store, &model, fixture);
        store.compact().unwrap();
        check(&store, &model, &format!("{fixture}: compacted"));
        store.close().unwrap();
    }
}

/// A small deterministic generator (xorshift), so that a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn active_key(k: usize) -> Vec<u8> {
    format!("{:02}/{k:05}", k % 23).into_bytes()
}

/// A random range over the key space (keys, prefixes of keys, bytes between them; each bound
/// included, excluded or open) and the model's entries in it, in order.
fn random_range(rng: &mut Rng, model: &Model) -> (Bound<Vec<u8>>, Bound<Vec<u8>>, Vec<Entry>) {
    let edge = |rng: &mut Rng| {
        let mut k = active_key(rng.below(3000));
        match rng.below(3) {
            0 => k.truncate(1 + rng.below(k.len())),
            1 => k.push(b'!'),
            _ => {}
        }
        k
    };
    let (mut a, mut b) = (edge(rng), edge(rng));
    if a > b {
        std::mem::swap(&mut a, &mut b);
    }
    let bound = |rng: &mut Rng, k: Vec<u8>| match rng.below(4) {
        0 => Bound::Unbounded,
        1 => Bound::Excluded(k),
        _ => Bound::Included(k),
    };
    let (mut start, mut end) = (bound(rng, a), bound(rng, b));
    if let (Bound::Excluded(s) | Bound::Included(s), Bound::Excluded(e) | Bound::Included(e)) =
        (&start, &end)
        && s == e
    {
        // `BTreeMap::range` rejects an empty range with an excluded end.
        (start, end) = (Bound::Included(s.clone()), Bound::Included(e.clone()));
    }
    let want = model
        .range::<Vec<u8>, _>((start.clone(), end.clone()))
        .map(|(k, (len, v))| (k.clone(), *len, *v))
        .collect();
    (start, end, want)
}

/// A listed key with its value's length and version.
type Entry = (Vec<u8>, u64, Version);

/// Listings of `store` against `model`, `rounds` of them, each of a random range or prefix:
/// keys from the front, from the back, both ends mixed, and entries with their metadata.
#[track_caller]
fn check_ranges(store: &Store, model: &Model, rng: &mut Rng, rounds: usize, what: &str) {
    for _ in 0..rounds {
        let (start, end, want) = if rng.below(3) == 0 {
            let p = format!("{:02}/", rng.below(23)).into_bytes();
            let want = model
                .iter()
                .filter(|(k, _)| k.starts_with(&p))
                .map(|(k, (len, v))| (k.clone(), *len, *v))
                .collect();
            let mut end = p.clone();
            *end.last_mut().expect("a prefix") += 1;
            (Bound::Included(p), Bound::Excluded(end), want)
        } else {
            random_range(rng, model)
        };
        let what = format!("{what}: {start:?}..{end:?}");
        let range = || {
            store.range::<[u8]>((
                start.as_ref().map(Vec::as_slice),
                end.as_ref().map(Vec::as_slice),
            ))
        };
        let want_keys: Vec<Vec<u8>> = want.iter().map(|(k, _, _)| k.clone()).collect();
        match rng.below(4) {
            0 => {
                let got: Vec<Vec<u8>> = range().collect::<podstore::Result<_>>().unwrap();
                assert_eq!(got, want_keys, "{what}: forwards");
            }
            1 => {
                let mut got: Vec<Vec<u8>> = range().rev().collect::<podstore::Result<_>>().unwrap();
                got.reverse();
                assert_eq!(got, want_keys, "{what}: backwards");
            }
            2 => {
                let (mut front, mut back) = (Vec::new(), Vec::new());
                let mut keys = range();
                loop {
                    let next = if rng.below(2) == 0 {
                        keys.next().map(|k| front.push(k.unwrap()))
                    } else {
                        keys.next_back().map(|k| back.push(k.unwrap()))
                    };
                    if next.is_none() {
                        break;
                    }
                }
                front.extend(back.into_iter().rev());
                assert_eq!(front, want_keys, "{what}: both ends");
            }
            _ => {
                let got: Vec<Entry> = range()
                    .entries()
                    .map(|e| {
                        let e = e.unwrap();
                        let m = e.metadata();
                        (e.key().to_vec(), m.len(), m.version())
                    })
                    .collect();
                assert_eq!(got, want, "{what}: entries");
            }
        }
    }
}

/// Listings of keys in the active segment, which come from its sorted view (runs of the
/// records of full chunks, built by listings and merged) and from the chunk being filled:
/// thousands of records with overwrites and deletes, listed at random points (so that runs are
/// built at different sizes and merged), against a model, across a seal (keys move to the
/// footer), a compaction (live records copied into the active segment with their old
/// versions), a listing that runs across a seal, and a crash with the segment unsealed: listed
/// by a read-only open (a scan), then recovered and sealed by a writable open; and a large
/// backlog of records, which the first listing passes over and the next sorts.
/// (One test per I/O mode, so that the two run side by side.)
#[test]
fn active_segment_listings_match_a_model_direct() {
    active_segment_listings_match_a_model(IoMode::Direct);
}

/// See [`active_segment_listings_match_a_model_direct`].
#[test]
fn active_segment_listings_match_a_model_buffered() {
    active_segment_listings_match_a_model(IoMode::Buffered);
}

fn active_segment_listings_match_a_model(mode: IoMode) {
    {
        let opts = quiet(small_with(mode, Durability::Buffered))
            .segment_size(64 << 20)
            .compaction_threshold(0.2);
        let t = TestStore::new(opts);
        let what = |step: &str| format!("{}: {step}", label(&t.opts));
        let mut store = t.open();
        let mut model = Model::new();
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        // 12,000 operations in the long run, 6,000 by default; the seal, the listing across a
        // seal and the compaction at the same fractions of them.
        let ops: u64 = common::long::sized(6_000, 12_000);
        for op in 0..ops {
            let k = active_key(rng.below(3000));
            if rng.below(5) == 0 {
                store.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let len = rng.below(40);
                let version = store.put(&k, vec![op as u8; len]).unwrap();
                model.insert(k, (len as u64, version));
            }
            if rng.below(120) == 0 {
                check_ranges(&store, &model, &mut rng, 2, &what(&format!("op {op}")));
            }
            match op {
                _ if op == ops / 3 => {
                    store.seal().unwrap();
                    check_ranges(&store, &model, &mut rng, 20, &what("sealed"));
                }
                _ if op == ops * 7 / 12 => {
                    // A listing across a seal: the keys it has not reached yet move from the
                    // active segment's view to the new footer meanwhile.
                    let mut keys = store.keys();
                    let first: Vec<Vec<u8>> = keys
                        .by_ref()
                        .take(model.len() / 2)
                        .collect::<podstore::Result<_>>()
                        .unwrap();
                    store.seal().unwrap();
                    let rest: Vec<Vec<u8>> = keys.collect::<podstore::Result<_>>().unwrap();
                    let all: Vec<&Vec<u8>> = first.iter().chain(&rest).collect();
                    assert_eq!(
                        all,
                        model.keys().collect::<Vec<_>>(),
                        "{}",
                        what("across a seal")
                    );
                }
                _ if op == ops * 3 / 4 => {
                    store.compact().unwrap();
                    check_ranges(&store, &model, &mut rng, 20, &what("compacted"));
                }
                _ => {}
            }
        }
        check_ranges(&store, &model, &mut rng, 40, &what("written"));
        store.flush().unwrap();
        store.simulate_crash();
        let ro = Store::open_with(t.path(), t.opts.clone().read_only(true)).unwrap();
        check_ranges(&ro, &model, &mut rng, 20, &what("read-only, unsealed"));
        drop(ro);
        store = t.open();
        check_ranges(&store, &model, &mut rng, 20, &what("recovered"));
        check(&store, &model, &what("recovered"));
        // A backlog of more than 64 chunks of records no listing has met (70,000 puts of new
        // keys: an overwrite reads its key's record first, slow with direct I/O; and after the
        // read-only open, which scans an unsealed segment record by record at every listing):
        // the first listing passes over it, the next sorts it into the view.
        for i in 0..70_000 {
            let k = active_key(3000 + i);
            let version = store.put(&k, [i as u8]).unwrap();
            model.insert(k, (1, version));
        }
        check_ranges(&store, &model, &mut rng, 6, &what("a large backlog"));
        store.close().unwrap();
    }
}
