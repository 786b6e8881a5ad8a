//! Issue 14, "Missing and truncated sealed files go unnoticed": the catalog. Every sealed file
//! of a store, deleted or cut, is found by open (which refuses the store, naming the file) and
//! by `verify` of a store that has it open; salvage opens what is left and reports the loss; a
//! deleted key never silently comes back and a key never silently reads an older value.

mod common;
use std::collections::BTreeMap;
use std::path::Path;

use common::files::{FileKind, file_name, store_files};
use podstore::{Error, FileProblem, IoMode, Options, RecoveryMode, Store};

fn opts(mode: IoMode) -> Options {
    common::store::quiet(common::store::small().io_mode(mode))
}

/// A store with several sealed log segments and blob files, overwrites and deletes spread over
/// them (a tombstone in a later file hides a value in an earlier one). Returns what it holds.
fn build(dir: &Path, mode: IoMode) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let store = Store::open_with(dir, opts(mode)).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3u8 {
        for i in 0..12u8 {
            let key = format!("k{i:02}").into_bytes();
            let value = vec![round * 16 + i; 90_000];
            store.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        let key = format!("blob{round}").into_bytes();
        let value = vec![round; (1 << 20) + 7];
        store.put(&key, &value).unwrap();
        model.insert(key, value);
        // Deletes of values written in an earlier file.
        let gone = format!("k{:02}", round * 3).into_bytes();
        store.delete(&gone).unwrap();
        model.remove(&gone);
    }
    store.close().unwrap();
    model
}

/// Copies the whole store directory (catalog included) into a new temporary directory.
fn copy_dir(from: &Path) -> tempfile::TempDir {
    let to = tempfile::TempDir::new().unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.path().join(entry.file_name())).unwrap();
        }
    }
    to
}

fn cut(path: &Path, len: u64) {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

/// Every store file deleted, and cut at several places, one at a time: the default open refuses
/// the store naming that file and what is wrong (so does a read-only open), changing nothing
/// (but a blob file cut only in its footer, which is rebuilt from its whole record);
/// salvage reports it, and every key it serves reads its newest value or, for a key whose
/// newest record was in the lost file, a value it had before (never bytes it never had).
#[test]
fn every_sealed_file_deleted_or_cut_is_found_every_time() {
    for mode in common::store::MODES {
        let original = tempfile::TempDir::new().unwrap();
        let model = build(original.path(), mode);
        let files = store_files(original.path());
        assert!(
            files.iter().filter(|f| f.1 == FileKind::Log).count() >= 3
                && files.iter().filter(|f| f.1 == FileKind::Blob).count() == 3,
            "{files:?}"
        );
        let mut cases = 0;
        for &(id, kind) in &files {
            let name = file_name(id, kind);
            let len = std::fs::metadata(original.path().join(&name))
                .unwrap()
                .len();
            let bytes = std::fs::read(original.path().join(&name)).unwrap();
            let footer_at = common::records::footer_start(&bytes);
            let mut damages: Vec<(String, Option<u64>)> = vec![("deleted".into(), None)];
            for c in [len - 1, len - 8192, len / 2, 64, 0] {
                damages.push((format!("cut to {c}"), Some(c)));
            }
            for (what, cut_to) in damages {
                let ctx = format!("{mode:?}: {name} {what}");
                let copy = copy_dir(original.path());
                let path = copy.path().join(&name);
                let expected = match cut_to {
                    None => {
                        std::fs::remove_file(&path).unwrap();
                        FileProblem::Missing {
                            sealed_len: Some(len),
                        }
                    }
                    Some(c) => {
                        cut(&path, c);
                        FileProblem::LengthChanged {
                            expected: len,
                            found: c,
                        }
                    }
                };
                if kind == FileKind::Blob && cut_to.is_some_and(|c| c >= footer_at) {
                    // Only a blob file's footer is cut: it is rebuilt from the record (its footer
                    // is not synced before the seal is recorded, so a power loss can take it).
                    let store = Store::open_with(copy.path(), opts(mode)).unwrap();
                    let rec = &store.recovery().recovered;
                    assert!(rec.iter().any(|r| r.segment == id), "{ctx}: {rec:?}");
                    for (k, v) in &model {
                        assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{ctx}");
                    }
                    assert!(store.verify().unwrap().is_clean(), "{ctx}");
                    store.close().unwrap();
                    cases += 1;
                    continue;
                }
                let ro = opts(mode).read_only(true);
                match Store::open_with(copy.path(), ro) {
                    Err(Error::Damaged { files, .. }) => {
                        assert_eq!(files.len(), 1, "{ctx}: {files:?}");
                        assert_eq!(files[0].name, name, "{ctx}");
                        assert_eq!(files[0].problem, expected, "{ctx}");
                    }
                    other => panic!("{ctx}: read-only open: {:?}", other.map(|_| ())),
                }
                let store = common::store::open_salvaging(
                    copy.path(),
                    opts(mode),
                    &[(name.clone(), expected)],
                );
                for key in model.keys() {
                    match store.get(key) {
                        Ok(Some(v)) if model.get(key) == Some(&v) => {}
                        // Only a key whose newest record could have been in the lost file may
                        // read otherwise: an older value, or none. Always one it had.
                        Ok(got) => assert!(
                            could_have_had(key, got.as_deref()),
                            "{ctx}: {} read bytes it never had",
                            String::from_utf8_lossy(key)
                        ),
                        Err(e) => assert!(e.is_corruption(), "{ctx}: {e}"),
                    }
                }
                store.close().unwrap();
                // Salvage brought the catalog in line: the default open works again.
                let store = Store::open_with(copy.path(), opts(mode)).unwrap();
                assert!(store.recovery().lost.is_empty(), "{ctx}");
                store.close().unwrap();
                cases += 1;
            }
        }
        assert!(cases >= 6 * 6, "{cases}");
    }
}

/// What `build` ever stored under `key` (or none).
fn could_have_had(key: &[u8], got: Option<&[u8]>) -> bool {
    let Some(v) = got else { return true };
    let k = String::from_utf8_lossy(key);
    if let Some(round) = k.strip_prefix("blob") {
        let r: u8 = round.parse().unwrap();
        return v.len() == (1 << 20) + 7 && v.iter().all(|&b| b == r);
    }
    let i: u8 = k[1..].parse().unwrap();
    v.len() == 90_000 && (0..3u8).any(|round| v.iter().all(|&b| b == round * 16 + i))
}

/// `verify` of an open store reports a sealed file deleted or cut under it (the store still
/// reads the deleted file through its open handle, so only the catalog can tell).
#[test]
fn verify_reports_files_deleted_or_cut_while_the_store_is_open() {
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        build(dir.path(), mode);
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert!(store.verify().unwrap().is_clean());
        let files = store_files(dir.path());
        let (gone, gone_kind) = files[0];
        let (short, short_kind) = files[files.len() - 1];
        let gone_name = file_name(gone, gone_kind);
        let short_name = file_name(short, short_kind);
        let gone_len = std::fs::metadata(dir.path().join(&gone_name))
            .unwrap()
            .len();
        let short_len = std::fs::metadata(dir.path().join(&short_name))
            .unwrap()
            .len();
        std::fs::remove_file(dir.path().join(&gone_name)).unwrap();
        cut(&dir.path().join(&short_name), short_len - 4096);
        let report = store.verify().unwrap();
        assert!(!report.is_clean());
        let mut found: Vec<_> = report
            .files
            .iter()
            .map(|f| (f.name.clone(), f.problem.clone()))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            found,
            vec![
                (
                    gone_name,
                    FileProblem::Missing {
                        sealed_len: Some(gone_len)
                    }
                ),
                (
                    short_name,
                    FileProblem::LengthChanged {
                        expected: short_len,
                        found: short_len - 4096
                    }
                ),
            ],
            "{mode:?}"
        );
    }
}

/// A store written by a version without a catalog (the fixture of an earlier release) opens
/// as it is; open writes its catalog, and from then on a deleted file is found.
#[test]
fn a_store_without_a_catalog_gets_one_at_open() {
    let dir = tempfile::TempDir::new().unwrap();
    build(dir.path(), IoMode::Buffered);
    std::fs::remove_file(dir.path().join("CATALOG")).unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    assert!(store.recovery().catalog_written);
    assert!(store.recovery().lost.is_empty());
    store.close().unwrap();
    assert!(dir.path().join("CATALOG").exists());
    let (id, kind) = store_files(dir.path())[1];
    std::fs::remove_file(dir.path().join(file_name(id, kind))).unwrap();
    assert!(matches!(
        Store::open_with(dir.path(), opts(IoMode::Buffered)),
        Err(Error::Damaged { .. })
    ));
}

/// A catalog damaged in the middle (not a torn last edit) is refused; salvage rebuilds it from
/// the directory, and reports it.
#[test]
fn a_damaged_catalog_is_refused_and_salvage_rebuilds_it() {
    let dir = tempfile::TempDir::new().unwrap();
    let model = build(dir.path(), IoMode::Buffered);
    let path = dir.path().join("CATALOG");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[32 + 9] ^= 1; // the first edit's file id
    std::fs::write(&path, &bytes).unwrap();
    match Store::open_with(dir.path(), opts(IoMode::Buffered)) {
        Err(Error::Damaged { files, .. }) => {
            assert_eq!(files[0].name, "CATALOG");
            assert!(matches!(
                files[0].problem,
                FileProblem::CatalogCorrupt { offset: 32, .. }
            ));
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
    let store = Store::open_with(
        dir.path(),
        opts(IoMode::Buffered).recovery_mode(RecoveryMode::Salvage),
    )
    .unwrap();
    assert_eq!(store.recovery().lost.len(), 1);
    assert!(store.recovery().catalog_written);
    for (k, v) in &model {
        assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
    }
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    assert!(store.recovery().lost.is_empty());
}

/// Salvage of a sealed segment that lost its footer (cut) and has a damaged record in the
/// middle keeps every intact record, those after the damage included: the catalog says the
/// segment was sealed, so nothing in it can be a torn write.
#[test]
fn salvage_of_a_cut_sealed_segment_keeps_the_records_after_a_damaged_one() {
    use common::records::{scan_records, trailer};
    let dir = tempfile::TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    let values: Vec<(Vec<u8>, Vec<u8>)> =
        (0..8u8).map(|i| (vec![b'k', i], vec![i; 70_000])).collect();
    for (k, v) in &values {
        store.put(k, v).unwrap();
    }
    store.close().unwrap();
    let (id, _) = store_files(dir.path())[0];
    let path = dir.path().join(file_name(id, FileKind::Log));
    let mut bytes = std::fs::read(&path).unwrap();
    let len = bytes.len() as u64;
    let recs = scan_records(id, &bytes);
    assert_eq!(recs.len(), 8);
    let victim = &recs[3];
    bytes[(victim.value_offset + 100) as usize] ^= 0x20;
    let data_end = trailer(&bytes).unwrap().data_end;
    bytes.truncate(data_end as usize);
    std::fs::write(&path, &bytes).unwrap();
    let store = common::store::open_salvaging(
        dir.path(),
        opts(IoMode::Buffered),
        &[(
            file_name(id, FileKind::Log),
            FileProblem::LengthChanged {
                expected: len,
                found: data_end,
            },
        )],
    );
    for (k, v) in &values {
        if *k == victim.key {
            assert!(store.get(k).unwrap_err().is_corruption());
        } else {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{k:?}");
        }
    }
    assert_eq!(
        store.recovery().recovered[0].damaged_records,
        vec![victim.offset]
    );
}

/// A log segment's seal is in the catalog as soon as its footer is durable (recorded by the
/// writer), not at the next background tick or at close: a segment cut right after its seal is
/// found too.
#[test]
fn a_seal_is_recorded_as_soon_as_the_footer_is_durable() {
    use podstore::inspect::{Listed, read_catalog};
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        // No background compactor, no flush ticker: nothing records seals behind the writer.
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        store.put("k", vec![1u8; 10_000]).unwrap();
        assert!(store.seal().unwrap());
        let (id, kind) = store_files(dir.path())[0];
        let name = file_name(id, kind);
        let len = std::fs::metadata(dir.path().join(&name)).unwrap().len();
        let listed = read_catalog(dir.path()).unwrap().unwrap();
        let entry = listed.iter().find(|e| e.name == name).expect("listed");
        assert_eq!(entry.listed, Listed::Sealed { len }, "{mode:?}");
        // Cut while the store is open: verify and the next open find it.
        cut(&dir.path().join(&name), len - 4096);
        assert!(!store.verify().unwrap().is_clean());
        drop(store);
        assert!(matches!(
            Store::open_with(dir.path(), opts(mode)),
            Err(Error::Damaged { .. })
        ));
    }
}

/// A blob file's footer is not synced before its put's seal is recorded: a power loss can keep
/// its trailer and location table and lose the start of its key section (no crc covers the
/// section's magic). Open takes that footer for torn and rebuilds it from the record, like a
/// footer lost whole, instead of refusing the store. (Found by the random power-loss test.)
#[test]
fn a_blob_footer_whose_key_section_was_lost_is_rebuilt_at_open() {
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        let value = vec![42u8; 2 << 20];
        {
            let store = Store::open_with(dir.path(), opts(mode)).unwrap();
            store.put(b"large", &value).unwrap();
            store.close().unwrap();
        }
        let blobs: Vec<_> = store_files(dir.path())
            .into_iter()
            .filter(|(_, kind)| *kind == FileKind::Blob)
            .collect();
        assert_eq!(blobs.len(), 1, "{mode:?}");
        let path = dir.path().join(file_name(blobs[0].0, FileKind::Blob));
        let bytes = std::fs::read(&path).unwrap();
        let start = common::records::footer_start(&bytes) as usize;
        let mut torn = bytes.clone();
        torn[start..start + 16].fill(0);
        std::fs::write(&path, &torn).unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).expect("open rebuilds the footer");
        assert_eq!(
            store.get(b"large").unwrap().as_deref(),
            Some(&value[..]),
            "{mode:?}"
        );
        assert!(store.verify().unwrap().is_clean(), "{mode:?}");
        store.close().unwrap();
        assert_eq!(
            std::fs::read(&path).unwrap(),
            bytes,
            "{mode:?}: rebuilt as it was"
        );
    }
}

/// The version byte of the catalog of `dir`, and its slots up to the first all-zero one.
fn catalog_slots(dir: &Path) -> (u8, Vec<Vec<u8>>) {
    let bytes = std::fs::read(dir.join("CATALOG")).unwrap();
    let slots = bytes
        .chunks_exact(32)
        .take_while(|s| s.iter().any(|&b| b != 0))
        .map(<[u8]>::to_vec)
        .collect();
    (bytes[4], slots)
}

/// A version-1 catalog (the committed fixture of a build before the size cap) is left version
/// 1 by this build when it does not evict: an open (which recovers and seals the fixture's
/// unsealed segment), writes, a reopen. Its header and every edit it had stay byte for byte,
/// and no edit is an eviction (op 4), so the builds before the cap still open it.
#[test]
fn a_version_1_catalog_without_evictions_stays_version_1_byte_for_byte() {
    let fixture = Path::new(common::compat::FIXTURE_DIR_BEFORE_EXPIRY);
    let (version, had) = catalog_slots(fixture);
    assert_eq!(version, 1, "the fixture's catalog is of version 1");
    let dir = common::files::copy_store(fixture);
    std::fs::copy(fixture.join("CATALOG"), dir.path().join("CATALOG")).unwrap();
    let opts = || common::compat::options(IoMode::Buffered);
    let store = Store::open_with(dir.path(), opts()).unwrap();
    assert!(!store.recovery().catalog_written);
    for i in 0..40u32 {
        store
            .put(format!("new-{i}"), vec![i as u8; 40_000])
            .unwrap();
    }
    store.delete("new-0").unwrap();
    store.seal().unwrap();
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    assert_eq!(store.stats().evicted_files, 0);
    assert_eq!(store.get("new-1").unwrap(), Some(vec![1u8; 40_000]));
    store.close().unwrap();
    let (version, now) = catalog_slots(dir.path());
    assert_eq!(version, 1);
    assert!(now.len() > had.len(), "the writes recorded new files");
    assert_eq!(now[..had.len()], had[..], "the fixture's header and edits");
    assert!(now[1..].iter().all(|s| s[0] != 4), "an eviction edit");
}

/// A store whose cap evicts gets a version-2 catalog at its first eviction (version 1 until
/// then); it opens again as version 2, and a checkpoint of it keeps version 2 (and with it
/// the watermark).
#[test]
fn the_first_eviction_makes_the_catalog_version_2_and_it_stays() {
    let dir = tempfile::TempDir::new().unwrap();
    let opts = || {
        common::store::quiet(common::store::small().io_mode(IoMode::Buffered))
            .segment_size(1 << 20)
            .size_cap(Some(3 << 20))
            .background_compaction(false)
    };
    let store = Store::open_with(dir.path(), opts()).unwrap();
    let mut i = 0u32;
    while store.stats().evicted_files == 0 {
        assert_eq!(catalog_slots(dir.path()).0, 1, "before any eviction");
        store.put(format!("k{i}"), vec![i as u8; 60_000]).unwrap();
        i += 1;
        assert!(i < 1000, "no eviction after {i} puts");
    }
    let (version, slots) = catalog_slots(dir.path());
    assert_eq!(version, 2);
    assert!(slots[1..].iter().any(|s| s[0] == 4), "an eviction edit");
    // Later edits (more evictions, seals) are appended to it.
    for j in i..i + 200 {
        store.put(format!("k{j}"), vec![j as u8; 60_000]).unwrap();
    }
    let through = store.stats().evicted_through;
    let ckpt = tempfile::TempDir::new().unwrap();
    let ckpt_dir = ckpt.path().join("copy");
    store.checkpoint(&ckpt_dir).unwrap();
    store.close().unwrap();
    assert_eq!(catalog_slots(&ckpt_dir).0, 2, "the checkpoint's catalog");
    for d in [dir.path(), ckpt_dir.as_path()] {
        let store = Store::open_with(d, opts()).unwrap();
        assert_eq!(store.stats().evicted_through, through, "{}", d.display());
        assert_eq!(store.get("k0").unwrap(), None, "k0 was evicted");
        store.close().unwrap();
        assert_eq!(catalog_slots(d).0, 2);
    }
}
