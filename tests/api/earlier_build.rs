//! A store written by an earlier build (tests/common/compat.rs).

use super::*;

/// Every file of `dir` with its bytes, by name.
fn dir_contents(dir: &std::path::Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("list fixture")
        .map(|e| {
            let e = e.expect("directory entry");
            let name = e.file_name().into_string().expect("utf-8 name");
            (name, std::fs::read(e.path()).expect("read fixture file"))
        })
        .collect()
}

/// Checks the store against the fixture's expected contents, deleted keys included, and that
/// `verify` finds nothing.
#[track_caller]
fn check_fixture_contents(store: &Store, model: &Model, what: &str) {
    assert_contents(store, model, what);
    for key in compat::all_keys() {
        if !model.contains_key(&key) {
            assert_eq!(store.get(&key).expect("get"), None, "{what}: deleted key");
        }
    }
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{what}: verify: {report:?}");
}

/// The committed old-format stores (tests/fixtures/store-130d492, store-3e7568a, store-3f9fb04)
/// open, recover
/// their unsealed segment, read back every key, verify clean, serve ranges of their blob-file
/// value, take more writes and reopen. They are opened from copies: the committed files are
/// never written.
#[test]
fn old_format_fixture_opens_reads_and_takes_more_writes() {
    for dir in compat::ALL_FIXTURES {
        old_format_fixture_opens_reads_and_takes_more_writes_in(dir);
    }
}

fn old_format_fixture_opens_reads_and_takes_more_writes_in(fixture_dir: &str) {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(fixture_dir);
    let pristine = dir_contents(&fixture);
    let (logs, blobs) = common::files::count_files(&fixture);
    assert!(
        logs >= 3 && blobs >= 1,
        "fixture files: {:?}",
        pristine.keys()
    );
    let expected = compat::expected_contents();
    for mode in modes() {
        let what = format!("old-format fixture {fixture_dir}, {mode:?}");
        let dir = tempfile::tempdir().expect("temporary directory");
        for (name, bytes) in &pristine {
            std::fs::write(dir.path().join(name), bytes).expect("copy the fixture");
        }
        let opts = compat::options(mode);
        let store = Store::open_with(dir.path(), opts.clone()).expect("open the fixture");
        let report = store.recovery();
        assert_eq!(report.recovered.len(), 1, "{what}: {report:?}");
        assert_eq!(report.removed_segments, 0, "{what}: {report:?}");
        let mut model = expected.clone();
        check_fixture_contents(&store, &model, &what);

        // Ranges of the value in the blob file, across its 4 KiB chunks.
        let large = &model[compat::LARGE_KEY];
        assert!(
            large.len() as u64 >= compat::LARGE,
            "{what}: the large value"
        );
        let len = large.len() as u64;
        for (a, b) in [
            (0, 1),
            (4095, 4097),
            (10_000, 30_000),
            (len - 100, len),
            (0, len),
        ] {
            check_range(&store, compat::LARGE_KEY, large, a..b, &what);
        }

        // More writes on top of the old files, then a reopen.
        let mut rng = XorShift::new(7);
        for i in 0..5 {
            let (key, value) = (format!("new/{i}").into_bytes(), rng.bytes(3000 * i));
            store.put(&key, &value).expect("put");
            model.insert(key, value);
        }
        assert!(store.delete(b"raw/0").expect("delete"));
        model.remove(&b"raw/0"[..]);
        let value = rng.bytes(compat::LARGE as usize + 1);
        store.put(b"new/large", &value).expect("put a new blob");
        model.insert(b"new/large".to_vec(), value);
        store.close().expect("close");
        let store = Store::open_with(dir.path(), opts).expect("reopen");
        assert!(store.recovery().recovered.is_empty(), "{what}: reopened");
        check_fixture_contents(&store, &model, &format!("{what}, written and reopened"));
        store.close().expect("close");
    }
    assert!(
        dir_contents(&fixture) == pristine,
        "the committed fixture was modified"
    );
}

/// The trailer versions of the files of `kind` in `dir` that end in a footer, by file name.
fn footer_versions(dir: &std::path::Path, kind: common::files::FileKind) -> BTreeMap<String, u8> {
    common::files::written_files(dir, kind)
        .iter()
        .filter_map(|p| {
            let t = common::records::trailer(&std::fs::read(p).unwrap()).ok()?;
            let name = p.file_name()?.to_string_lossy().into_owned();
            Some((name, t.version))
        })
        .collect()
}

/// The old-format fixture's files carry footers of version 1; `compact` rewrites its log
/// segments, and the files it writes carry footers of version 2 (keys sorted). Every value
/// still reads, before and after a reopen, and `verify` finds nothing.
#[test]
fn compaction_rewrites_old_footers_as_version_2() {
    use common::files::FileKind;
    use podstore::format::footer::{FOOTER_V1, FOOTER_V2};
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(compat::FIXTURE_DIR);
    let pristine = dir_contents(&fixture);
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, bytes) in &pristine {
        std::fs::write(dir.path().join(name), bytes).expect("copy the fixture");
    }
    let old_logs = footer_versions(dir.path(), FileKind::Log);
    assert!(
        old_logs.len() >= 2 && old_logs.values().all(|&v| v == FOOTER_V1),
        "the fixture's sealed segments: {old_logs:?}"
    );
    let old_blobs = footer_versions(dir.path(), FileKind::Blob);
    assert!(!old_blobs.is_empty() && old_blobs.values().all(|&v| v == FOOTER_V1));
    let model = compat::expected_contents();
    // Every log segment with any dead byte is rewritten.
    let opts = compat::options(IoMode::Buffered)
        .compaction_threshold(f64::MIN_POSITIVE)
        .background_compaction(false);
    let store = Store::open_with(dir.path(), opts.clone()).expect("open the fixture");
    check_fixture_contents(&store, &model, "fixture before compaction");
    let report = store.compact().expect("compact");
    assert!(report.segments_compacted >= 1, "{report:?}");
    check_fixture_contents(&store, &model, "fixture after compaction");
    store.close().expect("close");
    let logs = footer_versions(dir.path(), FileKind::Log);
    // Every old segment held a dead byte (the fixture overwrites and deletes), so none is left.
    assert!(
        old_logs.keys().all(|n| !logs.contains_key(n)),
        "{old_logs:?} -> {logs:?}"
    );
    let new: Vec<u8> = logs
        .iter()
        .filter(|(n, _)| !pristine.contains_key(*n))
        .map(|(_, &v)| v)
        .collect();
    assert!(
        !new.is_empty() && new.iter().all(|&v| v == FOOTER_V2),
        "log segments after compaction: {logs:?}"
    );
    let store = Store::open_with(dir.path(), opts).expect("reopen");
    check_fixture_contents(&store, &model, "fixture compacted and reopened");
    store.close().expect("close");
}

/// The store written by the last build before records that carry an expiry
/// (tests/fixtures/store-3f9fb04) is what this build still writes for values without one:
/// records of version 1, footers of version 2. A compaction rewrites every sealed segment as
/// footers of version 2 again (no expiry is ever put here), and the store reads back whole.
#[test]
fn the_store_before_expiry_is_what_values_without_one_are_written_as() {
    use common::files::FileKind;
    use podstore::format::footer::FOOTER_V2;
    use podstore::format::{FORMAT_VERSION, segment_header::SEGMENT_HEADER_LEN};
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(compat::FIXTURE_DIR_BEFORE_EXPIRY);
    let pristine = dir_contents(&fixture);
    let dir = tempfile::tempdir().expect("temporary directory");
    for (name, bytes) in &pristine {
        std::fs::write(dir.path().join(name), bytes).expect("copy the fixture");
    }
    for kind in [FileKind::Log, FileKind::Blob] {
        let versions = footer_versions(dir.path(), kind);
        assert!(
            !versions.is_empty() && versions.values().all(|&v| v == FOOTER_V2),
            "{kind:?}: {versions:?}"
        );
    }
    for path in common::files::written_files(dir.path(), FileKind::Log) {
        let bytes = std::fs::read(&path).unwrap();
        // The first record's version byte.
        assert_eq!(bytes[SEGMENT_HEADER_LEN + 4], FORMAT_VERSION, "{path:?}");
    }
    let model = compat::expected_contents();
    let opts = compat::options(IoMode::Buffered)
        .compaction_threshold(f64::MIN_POSITIVE)
        .background_compaction(false);
    let store = Store::open_with(dir.path(), opts.clone()).expect("open the fixture");
    check_fixture_contents(&store, &model, "fixture before compaction");
    let report = store.compact().expect("compact");
    assert!(report.segments_compacted >= 1, "{report:?}");
    store.close().expect("close");
    let logs = footer_versions(dir.path(), FileKind::Log);
    assert!(
        !logs.is_empty() && logs.values().all(|&v| v == FOOTER_V2),
        "log segments after compaction: {logs:?}"
    );
    let store = Store::open_with(dir.path(), opts).expect("reopen");
    check_fixture_contents(&store, &model, "fixture compacted and reopened");
    store.close().expect("close");
}

/// Writes the old-format fixture into `$PODSTORE_FIXTURE_OUT` (a new directory): see
/// tests/common/compat.rs. Run only to make a fixture for a new format version.
#[test]
#[ignore = "writes a fixture; run by hand with PODSTORE_FIXTURE_OUT set"]
fn write_old_format_fixture() {
    let out = std::env::var_os("PODSTORE_FIXTURE_OUT").expect("PODSTORE_FIXTURE_OUT");
    let out = std::path::Path::new(&out);
    std::fs::create_dir(out).expect("PODSTORE_FIXTURE_OUT must name a directory to create");
    compat::write_fixture(out);
    for (name, bytes) in dir_contents(out) {
        eprintln!("{name}: {} bytes", bytes.len());
    }
}

/// Error messages name the file by its real name (a blob file is `blob-…`, not "segment"), and
/// a path that is a regular file says so.
#[test]
fn errors_name_the_blob_file_and_a_path_that_is_a_file() {
    let fx = Fixture::new(Options::default().io_mode(IoMode::Direct));
    let store = fx.open();
    let big = pattern(2 << 20, 7);
    store.put(b"big", &big).unwrap();
    let store = {
        store.close().unwrap();
        let blob = common::files::written_files(fx.path(), common::files::FileKind::Blob)
            .pop()
            .expect("a blob file");
        let mut bytes = std::fs::read(&blob).unwrap();
        bytes[1 << 20] ^= 0xff;
        std::fs::write(&blob, bytes).unwrap();
        fx.open()
    };
    let err = store.get(b"big").unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("blob-0000000000000"), "{msg}");
    assert!(matches!(
        err,
        Error::Corruption {
            file: podstore::FileKind::Blob,
            ..
        }
    ));
    let report = store.verify().unwrap();
    assert_eq!(report.damage[0].file, podstore::FileKind::Blob);
    drop(store);

    let file = fx.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let err = Store::open(&file).unwrap_err();
    assert!(
        err.to_string().contains("is a file, not a directory"),
        "{err}"
    );
}

/// The index keeps 23 bytes per key, whatever the key's length: counted from what it allocated
/// (`Stats::index_bytes`), for short and long keys, after puts and after a reopen (which sizes
/// every shard to fit).
#[test]
fn the_index_takes_23_bytes_per_key_whatever_the_key_length() {
    const KEYS: u64 = 20_000;
    for key_len in [16usize, 1000] {
        let fx = Fixture::new(
            podstore::Options::default()
                .io_mode(podstore::IoMode::Buffered)
                .durability(podstore::Durability::Buffered),
        );
        let store = fx.open();
        let empty = store.stats().index_bytes;
        for i in 0..KEYS {
            let mut key = format!("{i:016}").into_bytes();
            key.resize(key_len, b'.');
            store.put(&key, b"v").unwrap();
        }
        let grown = store.stats().index_bytes - empty;
        // Shards grow by 1/16 of their length at a time: with about 0.3 keys per shard here,
        // by one entry at a time.
        assert_eq!(grown, KEYS * 23, "key length {key_len}");
        let store = fx.reopen(store);
        assert_eq!(
            store.stats().index_bytes - empty,
            KEYS * 23,
            "key length {key_len}, reopened"
        );
    }
}
