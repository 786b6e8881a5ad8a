//! Listing with metadata (`Entry::metadata`): each listed key's length and version, known
//! without reading its record, are what `Store::metadata` says of the key, across sealed
//! segments, the active one, blob files, overwrites, deletes, compaction, reopen and checkpoint;
//! and a listing reads no record (one whose records are all damaged lists as before).

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::FileExt;

use common::files::{FileKind, file_name, store_files};
use common::records::scan_records;
use common::store::{MODES, TestStore, label, quiet, small_with};
use podstore::{Durability, Error, Options, Store, ValueMeta, Version};

/// The model: each live key's length and the version its last put returned.
type Model = BTreeMap<Vec<u8>, (u64, Version)>;

fn opts(mode: podstore::IoMode, durability: Durability, cache: bool) -> Options {
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
    for fixture in [compat::FIXTURE_DIR, compat::FIXTURE_DIR_WITH_CATALOG] {
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
        let listed: Model = store
            .keys()
            .entries()
            .map(|e| {
                let e = e.unwrap();
                let m = e.metadata();
                (e.key().to_vec(), (m.len(), m.version()))
            })
            .collect();
        assert_eq!(listed, model, "{fixture}");
        store.compact().unwrap();
        let listed: Model = store
            .keys()
            .entries()
            .map(|e| {
                let e = e.unwrap();
                let m = e.metadata();
                (e.key().to_vec(), (m.len(), m.version()))
            })
            .collect();
        assert_eq!(listed, model, "{fixture}: compacted");
        store.close().unwrap();
    }
}
