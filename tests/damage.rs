//! Issue 14, "Damage is never silent": hostile file names, files the store cannot account for,
//! and what open does with them.

mod common;
use common::Random;
use common::files::{FileKind, dir_with, file_name};

use podstore::{Error, FileProblem, IoMode, Options, Store};

fn opts(mode: IoMode) -> Options {
    Options::default()
        .io_mode(mode)
        .background_compaction(false)
        .flush_interval(None)
}

/// An empty `seg-ffffffffffffffff.pod` (and its neighbour one below) made open panic when
/// computing the next id (debug) or wrap the id to 0 (release). Open now refuses ids above the
/// store's range with a typed error naming the file, in every build.
#[test]
fn a_file_named_with_an_id_at_the_top_of_the_range_is_refused_not_a_panic() {
    for id in [u64::MAX, u64::MAX - 1, 1 << 63, 1 << 40] {
        for kind in [FileKind::Log, FileKind::Blob] {
            let name = file_name(id, kind);
            let dir = dir_with([(name.clone(), &[][..])]);
            match Store::open_with(dir.path(), opts(IoMode::Buffered)) {
                Err(Error::FileIdOutOfRange {
                    path: Some(path),
                    id: got,
                }) => {
                    assert_eq!(path, dir.path().join(&name));
                    assert_eq!(got, id);
                }
                other => panic!("{name}: {other:?}"),
            }
            // Nothing was removed or written.
            assert!(dir.path().join(&name).exists(), "{name}");
        }
    }
}

/// The largest id the store uses is accepted; the write that would need the next one is
/// refused with a typed error (no panic, no wrap to id 0), and reads and a reopen still work.
#[test]
fn the_write_that_needs_an_id_past_the_last_is_refused() {
    let top = (1u64 << 40) - 1; // segment::names::MAX_FILE_ID
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        {
            let store = Store::open_with(dir.path(), opts(mode)).unwrap();
            store.put(b"k", b"v").unwrap();
            store.close().unwrap();
        }
        // An empty file at the top id: holds nothing; its id is still spent.
        std::fs::write(dir.path().join(file_name(top, FileKind::Log)), b"").unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        for large in [false, true] {
            let value = vec![7u8; if large { 2 << 20 } else { 10 }];
            match store.put(b"k2", &value) {
                Err(Error::FileIdOutOfRange { path: None, id }) => {
                    assert_eq!(id, top + 1)
                }
                other => panic!("large {large}: {other:?}"),
            }
        }
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(store.get(b"k2").unwrap(), None);
        store.close().unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        store.close().unwrap();
    }
}

/// Names that are not exactly what the store writes (upper-case hex, a sign, too short) are
/// not store files: a directory of them is no store (open refuses it as foreign), and a store
/// made beside them leaves them alone and never opens one under another file's name.
#[test]
fn names_that_are_almost_store_names_are_not_store_files() {
    let names = [
        "seg-000000000000000A.pod",
        "seg-+000000000000001.pod",
        "blob-00000000000001.pod",
        "seg-00000000000000001.pod",
    ];
    let dir = dir_with(names.iter().map(|n| (n.to_string(), &b"junk"[..])));
    match Store::open_with(dir.path(), opts(IoMode::Buffered)) {
        Err(Error::ForeignFiles { total, .. }) => assert_eq!(total, names.len()),
        other => panic!("{other:?}"),
    }
    let beside = opts(IoMode::Buffered).allow_foreign_files(true);
    let store = Store::open_with(dir.path(), beside).unwrap();
    store.put(b"k", b"v").unwrap();
    store.close().unwrap();
    for n in names {
        assert_eq!(std::fs::read(dir.path().join(n)).unwrap(), b"junk", "{n}");
    }
}

/// The blob files of `dir`, by id.
fn blob_files(dir: &std::path::Path) -> Vec<u64> {
    common::files::store_files(dir)
        .into_iter()
        .filter(|f| f.1 == FileKind::Blob)
        .map(|f| f.0)
        .collect()
}

/// A closed store with small older versions of `a` and `b` in the log and their newest
/// versions in blob files (in this order), and the ids of those two blob files.
fn store_with_two_blobs(mode: IoMode) -> (tempfile::TempDir, u64, u64) {
    let dir = tempfile::TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts(mode)).unwrap();
    store.put(b"a", b"old a").unwrap();
    store.put(b"b", b"old b").unwrap();
    store.put(b"a", big(b'a')).unwrap();
    store.put(b"b", big(b'b')).unwrap();
    store.close().unwrap();
    let blobs = blob_files(dir.path());
    assert_eq!(blobs.len(), 2, "{blobs:?}");
    (dir, blobs[0], blobs[1])
}

fn big(byte: u8) -> Vec<u8> {
    vec![byte; (1 << 20) + 5]
}

fn blob_path(dir: &std::path::Path, id: u64) -> std::path::PathBuf {
    dir.join(file_name(id, FileKind::Blob))
}

/// Every quarantined file of `report` is in `dir/quarantine/` with `bytes[name]` as content.
fn assert_quarantined(
    dir: &std::path::Path,
    report: &podstore::RecoveryReport,
    expected: &[(String, Vec<u8>)],
) {
    let mut names: Vec<&str> = report.quarantined.iter().map(|q| q.name.as_str()).collect();
    names.sort_unstable();
    let mut want: Vec<&str> = expected.iter().map(|(n, _)| n.as_str()).collect();
    want.sort_unstable();
    assert_eq!(names, want, "{report:?}");
    for (name, bytes) in expected {
        let q = report.quarantined.iter().find(|q| &q.name == name).unwrap();
        assert_eq!(q.moved_to, Some(dir.join("quarantine").join(name)));
        assert!(
            std::fs::read(q.moved_to.as_ref().unwrap()).unwrap() == *bytes,
            "{name}: content changed"
        );
        assert!(
            !dir.join(name).exists(),
            "{name} still in the store directory"
        );
    }
}

/// Issue 14: two blob files with swapped names were both deleted at open. The catalog lists
/// both as sealed and each header names the other's id: the default open refuses the store,
/// naming both. Salvage sets both aside in quarantine/ with their bytes, reports them lost, and
/// the keys are not served from a file under the wrong id. The next open finds nothing more to
/// do.
#[test]
fn swapped_blob_files_are_quarantined_and_reported_never_deleted() {
    for mode in common::store::MODES {
        let (dir, x, y) = store_with_two_blobs(mode);
        let (px, py) = (blob_path(dir.path(), x), blob_path(dir.path(), y));
        let (bx, by) = (std::fs::read(&px).unwrap(), std::fs::read(&py).unwrap());
        std::fs::rename(&px, dir.path().join("tmp")).unwrap();
        std::fs::rename(&py, &px).unwrap();
        std::fs::rename(dir.path().join("tmp"), &py).unwrap();
        let (nx, ny) = (file_name(x, FileKind::Blob), file_name(y, FileKind::Blob));
        // The catalog lists both as sealed: the default open refuses the store, naming both.
        let store = common::store::open_salvaging(
            dir.path(),
            opts(mode),
            &[
                (nx.clone(), FileProblem::Misnamed { header_id: y }),
                (ny.clone(), FileProblem::Misnamed { header_id: x }),
            ],
        );
        let report = store.recovery().clone();
        // blob x now holds y's bytes and the other way round.
        assert_quarantined(dir.path(), &report, &[(nx.clone(), by), (ny.clone(), bx)]);
        for q in &report.quarantined {
            let other = if q.name == nx { y } else { x };
            assert_eq!(
                q.reason,
                podstore::QuarantineReason::Misnamed { header_id: other },
                "{report:?}"
            );
        }
        assert_eq!(report.removed_segments, 0);
        // Never another key's bytes, never a value read from a misnamed file.
        for (key, old) in [(&b"a"[..], &b"old a"[..]), (b"b", b"old b")] {
            let got = store.get(key).unwrap();
            assert!(got.is_none() || got.as_deref() == Some(old), "{got:?}");
        }
        store.close().unwrap();
        // Salvage brought the catalog in line: the default open works again.
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert!(store.recovery().quarantined.is_empty());
        assert!(store.recovery().lost.is_empty());
        store.close().unwrap();
        assert_eq!(
            std::fs::read_dir(dir.path().join("quarantine"))
                .unwrap()
                .count(),
            2
        );
    }
}

/// A blob file renamed to an unused id, and a file of random bytes named like a blob file,
/// were deleted at open. The default open refuses the store (the catalog's blob x is missing);
/// salvage sets both aside and reports them; every other value reads back.
#[test]
fn renamed_and_random_blob_files_are_quarantined_never_deleted() {
    for mode in common::store::MODES {
        let (dir, x, y) = store_with_two_blobs(mode);
        let renamed = file_name(y + 100, FileKind::Blob);
        let bytes_x = std::fs::read(blob_path(dir.path(), x)).unwrap();
        std::fs::rename(blob_path(dir.path(), x), dir.path().join(&renamed)).unwrap();
        let mut rng = common::XorShift::new(14);
        let random: Vec<u8> = (0..100_000).map(|_| rng.next_u64() as u8).collect();
        let random_name = file_name(y + 50, FileKind::Blob);
        std::fs::write(dir.path().join(&random_name), &random).unwrap();
        // A blob file of zeroes holds nothing: it may be removed.
        let zeroes_name = file_name(y + 60, FileKind::Blob);
        std::fs::write(dir.path().join(&zeroes_name), vec![0u8; 8192]).unwrap();
        // Blob x is gone from its name: the default open refuses the store.
        let sealed_len = bytes_x.len() as u64;
        let store = common::store::open_salvaging(
            dir.path(),
            opts(mode),
            &[(
                file_name(x, FileKind::Blob),
                FileProblem::Missing {
                    sealed_len: Some(sealed_len),
                },
            )],
        );
        let report = store.recovery().clone();
        assert_quarantined(
            dir.path(),
            &report,
            &[(renamed.clone(), bytes_x), (random_name.clone(), random)],
        );
        let reason = |n: &str| {
            &report
                .quarantined
                .iter()
                .find(|q| q.name == n)
                .unwrap()
                .reason
        };
        assert_eq!(
            reason(&renamed),
            &podstore::QuarantineReason::Misnamed { header_id: x }
        );
        assert_eq!(
            reason(&random_name),
            &podstore::QuarantineReason::BlobNotWhole
        );
        assert_eq!(report.removed_segments, 1, "{report:?}");
        assert!(!dir.path().join(&zeroes_name).exists());
        // a's newest value was in the renamed file; b's is intact.
        assert_eq!(store.get(b"b").unwrap(), Some(big(b'b')));
        assert_eq!(store.get(b"a").unwrap().as_deref(), Some(&b"old a"[..]));
        store.close().unwrap();
    }
}

/// A blob file whose footer and record are both damaged (two faults) was deleted, and the key's
/// older version came back without a word. The default open now refuses the store; salvage
/// sets the file aside and reports it.
#[test]
fn a_blob_file_damaged_twice_is_quarantined_and_reported() {
    let (dir, x, _) = store_with_two_blobs(IoMode::Buffered);
    let path = blob_path(dir.path(), x);
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    bytes[n - 10] ^= 0xff; // the trailer
    bytes[5000] ^= 0xff; // a value byte
    std::fs::write(&path, &bytes).unwrap();
    let store = common::store::open_salvaging(
        dir.path(),
        opts(IoMode::Buffered),
        &[(file_name(x, FileKind::Blob), FileProblem::FooterDamaged)],
    );
    let report = store.recovery().clone();
    assert_quarantined(
        dir.path(),
        &report,
        &[(file_name(x, FileKind::Blob), bytes)],
    );
    assert_eq!(
        report.quarantined[0].reason,
        podstore::QuarantineReason::BlobNotWhole
    );
    store.close().unwrap();
}

/// Issue 14: on a full disk the direct-I/O probe's write got ENOSPC, and `IoMode::Direct`
/// reported `DirectIoUnsupported` (`Auto` fell back silently). The probe no longer writes: an
/// existing store file, or an unnamed file (O_TMPFILE) in an empty store, is asked.
#[test]
fn a_full_disk_does_not_make_direct_io_look_unsupported() {
    let Some(fs) = common::loopfs::LoopFs::new(64, "full disk probe") else {
        return;
    };
    let empty = fs.path().join("empty");
    let used = fs.path().join("used");
    std::fs::create_dir(&empty).unwrap();
    {
        let store = Store::open_with(&used, opts(IoMode::Direct)).unwrap();
        store.put(b"k", b"v").unwrap();
        store.close().unwrap();
    }
    fs.fill();
    for dir in [&empty, &used] {
        for mode in [IoMode::Direct, IoMode::Auto] {
            let store = Store::open_with(dir, opts(mode))
                .unwrap_or_else(|e| panic!("{} {mode:?}: {e:?}", dir.display()));
            assert_eq!(store.io_mode(), IoMode::Direct, "{}", dir.display());
            store.close().unwrap();
        }
        assert!(
            !dir.join(".podstore-probe").exists(),
            "{}: probe file left",
            dir.display()
        );
    }
}

/// Issue 14: a store filled to `StorageFull` and closed could not be reopened, even for
/// reading: recovery had to write the unsealed log segment's footer. It now serves the
/// recovered records from memory (the footer is written by a later open with space), and
/// compaction, which only unlinks dead blob files, gives space back.
#[test]
fn a_store_filled_to_storage_full_reopens_and_serves_reads() {
    let Some(fs) = common::loopfs::LoopFs::new(64, "full disk reopen") else {
        return;
    };
    for mode in common::store::MODES {
        let dir = fs.path().join(format!("{mode:?}"));
        let mut model = std::collections::BTreeMap::new();
        let mut full = false;
        {
            let store = Store::open_with(&dir, opts(mode)).unwrap();
            for i in 0u32.. {
                // Large values in blob files (three keys: older ones die), small ones in the log.
                let (key, value) = if i % 2 == 0 {
                    let v = vec![(i % 251) as u8; 1 << 20];
                    (format!("big{}", i % 3).into_bytes(), v)
                } else {
                    (format!("small{i}").into_bytes(), vec![i as u8; 100])
                };
                match store.put(&key, &value) {
                    Ok(_) => {
                        model.insert(key, value);
                    }
                    Err(Error::StorageFull { .. }) => {
                        full = true;
                        break;
                    }
                    Err(Error::Poisoned) => break,
                    Err(e) => panic!("put {i}: {e:?}"),
                }
                assert!(i < 1000, "never full");
            }
            // The process dies: the log segment is left unsealed, and its recovery needs a
            // footer that the full disk has no room for.
            store.simulate_crash();
        }
        assert!(full);
        // Whatever the crash released, taken too.
        fs.fill();
        let store = Store::open_with(&dir, opts(mode))
            .unwrap_or_else(|e| panic!("{mode:?}: reopen on a full disk: {e:?}"));
        let unsealed = store
            .recovery()
            .recovered
            .iter()
            .filter(|r| !r.sealed)
            .count();
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{mode:?}");
        }
        // Compaction removes the dead blob files (unlinks only), which frees space.
        let report = store
            .compact()
            .unwrap_or_else(|e| panic!("{mode:?}: compact: {e:?}"));
        assert!(report.blob_files_removed > 0, "{mode:?}: {report:?}");
        store.put(b"after", b"space came back").unwrap();
        store.close().unwrap();
        // With space, the next open seals what the full one could not.
        let store = Store::open_with(&dir, opts(mode)).unwrap();
        assert!(store.recovery().recovered.iter().all(|r| r.sealed));
        assert_eq!(unsealed, 1, "{mode:?}");
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v), "{mode:?}");
        }
        store.close().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Every file under `dir` (recursively): path relative to it, and bytes.
fn snapshot(dir: &std::path::Path) -> std::collections::BTreeMap<std::path::PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(
                    p.strip_prefix(dir).unwrap().to_path_buf(),
                    std::fs::read(&p).unwrap(),
                );
            }
        }
    }
    out
}

/// A store left by a crash (an unsealed log segment), with a torn blob file and an empty one:
/// every kind of file whose open writes something. Returns the values it holds.
fn crashed_store_at(dir: &std::path::Path, mode: IoMode) -> Vec<(Vec<u8>, Vec<u8>)> {
    let store = Store::open_with(dir, opts(mode)).unwrap();
    let mut model = Vec::new();
    for i in 0..20u32 {
        let v = vec![i as u8; if i % 7 == 0 { (1 << 20) + 1 } else { 300 }];
        store.put(i.to_be_bytes(), &v).unwrap();
        model.push((i.to_be_bytes().to_vec(), v));
    }
    store.simulate_crash();
    std::fs::write(dir.join(file_name(1000, FileKind::Blob)), vec![9u8; 5000]).unwrap();
    std::fs::write(dir.join(file_name(1001, FileKind::Blob)), b"").unwrap();
    model
}

/// Issue 14: a read-only open (`Options::read_only`) writes nothing at all (no probe file, no
/// recovery footer, no quarantine, no removal, no lock file), serves every value, refuses
/// writes with a typed error, and reports what a writer would have fixed.
#[test]
fn a_read_only_open_writes_nothing_and_serves_reads() {
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        let model = crashed_store_at(dir.path(), mode);
        std::fs::remove_file(dir.path().join("LOCK")).unwrap();
        let before = snapshot(dir.path());
        let store = Store::open_with(dir.path(), opts(mode).read_only(true)).unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.recovered.len(), 1, "{report:?}");
        assert!(!report.recovered[0].sealed, "{report:?}");
        assert_eq!(report.quarantined.len(), 1, "{report:?}");
        assert_eq!(report.quarantined[0].moved_to, None, "{report:?}");
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
        }
        assert!(matches!(store.put(b"x", b"y"), Err(Error::ReadOnly)));
        assert!(matches!(store.delete(&model[0].0), Err(Error::ReadOnly)));
        assert!(matches!(store.compact(), Err(Error::ReadOnly)));
        assert!(matches!(store.seal(), Err(Error::ReadOnly)));
        assert!(matches!(store.writer(b"x"), Err(Error::ReadOnly)));
        let mut batch = podstore::Batch::new();
        batch.put(b"x", b"y");
        assert!(matches!(store.write(&batch), Err(Error::ReadOnly)));
        store.flush().unwrap();
        // The segment recovery found unsealed is checked up to where recovery cut it: its
        // missing footer and its torn tail are what a crash leaves, not damage.
        let verified = store.verify().unwrap();
        assert!(verified.is_clean(), "{mode:?}: {verified:?}");
        store.close().unwrap();
        assert!(
            before == snapshot(dir.path()),
            "{mode:?}: a read-only open changed files"
        );
        // A writer then does what the reader only reported.
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert!(store.recovery().recovered.iter().all(|r| r.sealed));
        assert_eq!(store.recovery().quarantined.len(), 1);
        store.close().unwrap();
    }
}

/// Readers share the store; a writer excludes readers and readers exclude a writer.
#[test]
fn read_only_stores_coexist_and_exclude_a_writer() {
    let dir = tempfile::TempDir::new().unwrap();
    Store::open_with(dir.path(), opts(IoMode::Buffered))
        .unwrap()
        .close()
        .unwrap();
    let ro = opts(IoMode::Buffered).read_only(true);
    let a = Store::open_with(dir.path(), ro.clone()).unwrap();
    let b = Store::open_with(dir.path(), ro.clone()).unwrap();
    assert!(matches!(
        Store::open_with(dir.path(), opts(IoMode::Buffered)),
        Err(Error::Locked { .. })
    ));
    drop(a);
    b.close().unwrap();
    let w = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    assert!(matches!(
        Store::open_with(dir.path(), ro),
        Err(Error::Locked { .. })
    ));
    w.close().unwrap();
}

/// Issue 14: with `LOCK` deleted while a store was open, a second opener got in. The lock is
/// now taken on the directory itself as well, which cannot be deleted by accident.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_store_in() {
    let dir = tempfile::TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    for ro in [false, true] {
        assert!(
            matches!(
                Store::open_with(dir.path(), opts(IoMode::Buffered).read_only(ro)),
                Err(Error::Locked { .. })
            ),
            "read_only {ro}"
        );
    }
    store.close().unwrap();
}

/// A read-only open works on a read-only mount (root only), where any write fails with EROFS;
/// a writer's open there fails with a typed error.
#[test]
fn a_read_only_open_works_on_a_read_only_mount() {
    let Some(fs) = common::loopfs::LoopFs::new(64, "read-only mount") else {
        return;
    };
    let dir = fs.path().join("store");
    let model = crashed_store_at(&dir, IoMode::Direct);
    fs.remount(true);
    for mode in common::store::MODES {
        let store = Store::open_with(&dir, opts(mode).read_only(true))
            .unwrap_or_else(|e| panic!("{mode:?}: {e:?}"));
        for (k, v) in &model {
            assert_eq!(store.get(k).unwrap().as_ref(), Some(v));
        }
        store.close().unwrap();
    }
    let two = [
        Store::open_with(&dir, opts(IoMode::Direct).read_only(true)).unwrap(),
        Store::open_with(&dir, opts(IoMode::Direct).read_only(true)).unwrap(),
    ];
    drop(two);
    match Store::open_with(&dir, opts(IoMode::Direct)) {
        Err(Error::Io { .. }) => {}
        other => panic!("writer on a read-only mount: {:?}", other.map(|_| ())),
    }
    fs.remount(false);
}

/// Issue 14: a store opened and closed faster than its background compactor ticks (500 ms)
/// never compacted: thousands of dead blob files piled up. Close now runs a short pass.
#[test]
fn a_short_lived_store_gives_dead_blob_files_back_at_close() {
    let dir = tempfile::TempDir::new().unwrap();
    let o = Options::default()
        .io_mode(IoMode::Buffered)
        .flush_interval(None);
    for round in 0..10u8 {
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        for k in 0..3u8 {
            store.put([k], vec![round; (1 << 20) + 1]).unwrap();
        }
        store.close().unwrap();
        let blobs = blob_files(dir.path());
        // Three live values; every overwritten one's file was removed at close.
        assert_eq!(blobs.len(), 3, "round {round}: {blobs:?}");
    }
    let store = Store::open_with(dir.path(), o).unwrap();
    for k in 0..3u8 {
        assert_eq!(store.get([k]).unwrap(), Some(vec![9; (1 << 20) + 1]));
    }
    store.close().unwrap();
}
