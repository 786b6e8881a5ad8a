//! Readers on other machines (issue 38, "Restore and readers") on the in-memory remote: a
//! `RemoteReader` opened on an empty cache serves the writer's last flush byte for byte,
//! follows it through deletes, overwrites and compaction, never a mix of two manifests under
//! a racing refresh, never writes to the remote nor fences the writer, refuses writes, and
//! reports an object gone from the remote as a typed error.

mod common;

use common::model::{self, Model};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use podstore::remote::{MemoryRemote, Remote, RemoteErrorKind};
use podstore::{Error, Options, RemoteReader, Store};

const PREFIX: &str = "tenant/store";

/// Small segments (several per test), no flush of the remote but the test's own, no
/// background compaction (the tests compact when they mean to).
fn opts(remote: Arc<dyn Remote>) -> Options {
    common::store::small()
        .background_compaction(false)
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:04}").into_bytes()
}

fn value(k: u64, round: u64) -> Vec<u8> {
    // Every 25th key a blob file of its own (past the large value threshold); the others
    // fill log segments.
    let len = if k % 25 == 3 {
        (1 << 20) + 100 + k as usize
    } else {
        500 + ((k * 7919 + round * 104_729) % 6_000) as usize
    };
    (0..len)
        .map(|i| (i as u64 ^ (k << 3) ^ (round * 31)) as u8)
        .collect()
}

/// Writes keys `0..keys` in round `round`: from round 1 on, every fifth key (shifted each
/// round) is deleted instead, the others overwritten.
fn write_round(store: &Store, model: &mut Model, keys: u64, round: u64) {
    model::write_round(store, model, (keys, round), 5, key, value);
}

/// A remote flush whose manifest names every file by its object: after a flush whose
/// manifest carried files, a second one (docs/design-remote.md, "Files in the manifest";
/// readers of carrying manifests: `tests/remote_carry.rs`).
fn flush_named(store: &Store) -> podstore::RemoteFlushReport {
    let flushed = store.flush_remote().unwrap();
    if flushed.files_in_manifest == 0 {
        return flushed;
    }
    let named = store.flush_remote().unwrap();
    assert_eq!(named.files_in_manifest, 0, "{named:?}");
    named
}

/// The reader serves exactly `model`: every value byte for byte, deleted keys absent, and
/// nothing else listed.
fn check(reader: &RemoteReader, model: &Model, what: &str) {
    model::check_values(model, what, |k| reader.get(k));
    let snapshot = reader.snapshot();
    let listed: Vec<Vec<u8>> = snapshot
        .store()
        .keys()
        .collect::<podstore::Result<_>>()
        .unwrap();
    let live = model::live_keys(model);
    assert_eq!(listed, live, "{what}: listed keys");
    assert_eq!(reader.len(), live.len(), "{what}: number of keys");
}

fn manifests(remote: &MemoryRemote) -> Vec<String> {
    model::objects(remote, PREFIX, "manifest")
}

#[test]
fn a_reader_on_an_empty_directory_serves_the_last_flush_byte_for_byte_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 100, 0);
    store.flush_remote().unwrap();
    // Not flushed: not the reader's.
    store.put("after", "the flush").unwrap();
    let objects = remote.names();

    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    assert_eq!(
        reader.manifest(),
        2,
        "manifest 1 is the writer's claim at open"
    );
    check(&reader, &model, "first open");
    assert_eq!(reader.get("after").unwrap(), None);
    // Ranges and streams of a blob value, and its metadata from the footers.
    let big = key(3);
    let v = value(3, 0);
    assert_eq!(
        reader.get_range(&big, 5000..9096).unwrap().unwrap(),
        &v[5000..9096]
    );
    let mut streamed = Vec::new();
    std::io::Read::read_to_end(&mut reader.reader(&big).unwrap().unwrap(), &mut streamed).unwrap();
    assert_eq!(streamed, v);
    assert_eq!(
        reader.metadata(&big).unwrap().unwrap().len(),
        v.len() as u64
    );

    // Reads only: the remote holds exactly what it held (no manifest, no object written).
    assert_eq!(remote.names(), objects);
    // Writes are refused, by type.
    let snapshot = reader.snapshot();
    let local = snapshot.store();
    assert!(matches!(local.put("k", "v"), Err(Error::ReadOnly)));
    assert!(matches!(local.delete(key(1)), Err(Error::ReadOnly)));
    assert!(matches!(local.writer("k"), Err(Error::ReadOnly)));
    assert!(local.compact().is_err());
    assert!(matches!(local.flush_remote(), Err(Error::ReadOnly)));
    drop(snapshot);
    // The writer is not fenced: it writes and flushes on.
    store.put("more", "writes").unwrap();
    let flushed = store.flush_remote().unwrap();
    assert_eq!(flushed.manifest, 3);
    assert_eq!(manifests(&remote).len(), 3);
}

#[test]
fn a_refresh_follows_the_writer_through_deletes_overwrites_and_compaction() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 60, 0);
    store.flush_remote().unwrap();
    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    check(&reader, &model, "round 0");
    // Nothing new: a refresh lists the manifests and changes nothing.
    let same = reader.refresh().unwrap();
    assert!(!same.changed && same.files_downloaded == 0, "{same:?}");

    for round in 1..=2 {
        let before = model.clone();
        write_round(&store, &mut model, 60, round);
        let report = store.compact().unwrap();
        assert!(
            report.segments_compacted + report.blob_files_removed > 0,
            "{report:?}"
        );
        let flushed = store.flush_remote().unwrap();
        // Until it refreshes, the reader serves the manifest it has.
        check(
            &reader,
            &before,
            &format!("round {round}, before its refresh"),
        );
        let refreshed = reader.refresh().unwrap();
        assert!(refreshed.changed, "{refreshed:?}");
        assert_eq!(refreshed.manifest, flushed.manifest);
        assert_eq!(refreshed.files, flushed.files);
        assert!(
            refreshed.files_downloaded <= flushed.files,
            "{refreshed:?} {flushed:?}"
        );
        check(&reader, &model, &format!("round {round}, refreshed"));
    }
    // Only the newest snapshot is left in the cache (the old ones were dropped with their
    // files), beside the marker and the lock.
    let mut names: Vec<String> = std::fs::read_dir(root.path().join("reader"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let newest = format!("manifest-{:020}", reader.manifest());
    assert_eq!(names, ["LOCK", "PODSTORE-READER", newest.as_str()]);
}

#[test]
fn a_refresh_reads_only_the_files_the_previous_manifest_did_not_name() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 60, 0);
    let first = flush_named(&store);
    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    // One more small value: one new log segment (the flush seals the active one).
    store.put("one", "more").unwrap();
    model.insert(b"one".to_vec(), Some(b"more".to_vec()));
    let second = flush_named(&store);
    assert_eq!(second.files, first.files + 1);
    let refreshed = reader.refresh().unwrap();
    assert_eq!(refreshed.files_downloaded, 1, "{refreshed:?}");
    assert!(refreshed.bytes_downloaded < 64 << 10, "{refreshed:?}");
    check(&reader, &model, "refreshed");
}

#[test]
fn a_read_racing_refreshes_returns_the_old_or_the_new_value_never_an_error() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    const KEYS: u64 = 24;
    // Round r: every key holds `value(k, r)`; each round compacted and flushed, so that each
    // manifest drops files the one before named.
    let mut model = Model::new();
    write_round(&store, &mut model, KEYS, 0);
    store.flush_remote().unwrap();
    let reader =
        Arc::new(RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap());
    const ROUNDS: u64 = 3;
    // Every round's values, made once (the readers compare each read with them).
    let values: Arc<Vec<Vec<Vec<u8>>>> = Arc::new(
        (0..KEYS)
            .map(|k| (0..=ROUNDS).map(|r| value(k, r)).collect())
            .collect(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (reader, stop, values) = (reader.clone(), stop.clone(), values.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let k = (reads * 7 + t) % KEYS;
                    let got = reader.get(key(k)).unwrap_or_else(|e| {
                        panic!("key {k}: {e}");
                    });
                    // Some round's value (keys are never deleted here), whole.
                    let got = got.unwrap_or_else(|| panic!("key {k} absent"));
                    assert!(
                        values[k as usize].contains(&got),
                        "key {k}: a value of no round"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        for k in 0..KEYS {
            store
                .put(key(k), &values[k as usize][round as usize])
                .unwrap();
        }
        store.compact().unwrap();
        store.flush_remote().unwrap();
        assert!(reader.refresh().unwrap().changed);
        // A snapshot taken now sees this round's values only, whatever refreshes follow.
        let snapshot = reader.snapshot();
        for k in (0..KEYS).step_by(9) {
            assert_eq!(
                snapshot.store().get(key(k)).unwrap(),
                Some(values[k as usize][round as usize].clone())
            );
        }
    }
    stop.store(true, Ordering::SeqCst);
    let reads: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(reads > 0);
}

#[test]
fn an_object_of_the_readers_manifest_gone_from_the_remote_is_a_typed_error() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 30, 0);
    flush_named(&store);
    drop(store);
    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    // The blob file of key 3 (the only blob file: a value of over 1 MiB), removed from the
    // remote as a retention window's deletion would.
    let blobs: Vec<String> = remote
        .names()
        .into_iter()
        .filter(|n| n.contains("/data/") && n.contains("blob-"))
        .collect();
    assert_eq!(blobs.len(), 2, "{blobs:?}");
    let gone = blobs
        .iter()
        .find(|n| remote.object(n).unwrap().len() > 1 << 20)
        .unwrap()
        .clone();
    remote.delete(&gone).unwrap();
    match reader.get(key(3)) {
        Err(Error::Remote { object, source, .. }) => {
            assert_eq!(object, gone);
            assert_eq!(source.kind(), RemoteErrorKind::NotFound);
        }
        other => panic!("a value whose object is gone read {other:?}"),
    }
    // Values in other objects are served on.
    assert_eq!(reader.get(key(1)).unwrap(), Some(value(1, 0)));
    // A new reader of that manifest does not open.
    match RemoteReader::open(root.path().join("reader-2"), opts(remote.clone())) {
        Err(Error::Remote { object, source, .. }) => {
            assert_eq!(object, gone);
            assert_eq!(source.kind(), RemoteErrorKind::NotFound);
        }
        other => panic!("a reader opened without an object: {other:?}"),
    }
    // ...and leaves nothing of its snapshot behind.
    let left: Vec<_> = std::fs::read_dir(root.path().join("reader-2"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("manifest-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_reader_started_before_the_writer_serves_nothing_then_picks_up_manifests_on_its_interval() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let every = opts(remote.clone()).remote_refresh_interval(Some(Duration::from_millis(20)));
    let reader = RemoteReader::open(root.path().join("reader"), every).unwrap();
    assert_eq!(reader.manifest(), 0);
    assert!(reader.is_empty());
    assert_eq!(reader.get("k").unwrap(), None);
    // The reader wrote nothing: the writer's open is the prefix's first manifest.
    assert!(remote.names().is_empty());

    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    store.put("k", "v1").unwrap();
    let flushed = store.flush_remote().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while reader.manifest() < flushed.manifest {
        assert!(Instant::now() < deadline, "the interval never refreshed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    drop(reader);
}

#[test]
fn the_cache_directory_is_the_readers_own() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    store.put("k", "v").unwrap();
    store.flush_remote().unwrap();
    let cache = root.path().join("reader");

    let reader = RemoteReader::open(&cache, opts(remote.clone())).unwrap();
    // One reader per cache.
    assert!(matches!(
        RemoteReader::open(&cache, opts(remote.clone())),
        Err(Error::Locked { .. })
    ));
    drop(reader);
    // Reopened: the earlier snapshot replaced, the value served.
    let reader = RemoteReader::open(&cache, opts(remote.clone())).unwrap();
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(reader);
    // Not the cache of another prefix...
    let other = opts(remote.clone()).remote(remote.clone(), "another/prefix");
    assert!(matches!(
        RemoteReader::open(&cache, other),
        Err(Error::InvalidOptions(_))
    ));
    // ...nor a directory of other files (the writer's, say).
    assert!(matches!(
        RemoteReader::open(root.path().join("writer"), opts(remote.clone())),
        Err(Error::ForeignFiles { .. })
    ));
    // Nor without a remote, nor with a refresh interval of zero.
    assert!(matches!(
        RemoteReader::open(root.path().join("x"), Options::default()),
        Err(Error::InvalidOptions(_))
    ));
    let zero = opts(remote.clone()).remote_refresh_interval(Some(Duration::ZERO));
    assert!(matches!(
        RemoteReader::open(root.path().join("x"), zero),
        Err(Error::InvalidOptions(_))
    ));
}

#[test]
fn a_stream_keeps_reading_the_manifest_it_started_on_after_refreshes_drop_its_files() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    let big = key(3);
    store.put(&big, value(3, 0)).unwrap();
    store.flush_remote().unwrap();
    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    let mut stream = reader.reader(&big).unwrap().unwrap();
    let mut head = vec![0u8; 1000];
    std::io::Read::read_exact(&mut stream, &mut head).unwrap();
    // The value overwritten, its blob file compacted away, and two refreshes: the snapshot
    // the stream started on is dropped, its directory removed.
    for round in 1..=2 {
        store.put(&big, value(3, round)).unwrap();
        store.compact().unwrap();
        store.flush_remote().unwrap();
        assert!(reader.refresh().unwrap().changed);
    }
    assert_eq!(reader.get(&big).unwrap(), Some(value(3, 2)));
    let first = format!("manifest-{:020}", 2);
    assert!(!root.path().join("reader").join(first).exists());
    // The stream reads on, the old value whole (its object is still in the remote: nothing
    // deletes objects here).
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut stream, &mut rest).unwrap();
    head.extend_from_slice(&rest);
    assert!(head == value(3, 0), "the stream read another value");
}

#[test]
fn a_refresh_that_fails_leaves_the_reader_on_its_manifest_and_a_later_one_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("writer"), opts(remote.clone())).unwrap();
    store.put("k", "v1").unwrap();
    let first = flush_named(&store);
    let reader = RemoteReader::open(root.path().join("reader"), opts(remote.clone())).unwrap();
    let objects = remote.names();
    store.put("k", "v2").unwrap();
    let second = flush_named(&store);
    // The object of the file the second manifest adds, gone for a while.
    let new: Vec<String> = remote
        .names()
        .into_iter()
        .filter(|n| n.contains("/data/") && !objects.contains(n))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    let bytes = remote.object(&new[0]).unwrap();
    remote.delete(&new[0]).unwrap();
    match reader.refresh() {
        Err(Error::Remote { object, source, .. }) => {
            assert_eq!(object, new[0]);
            assert_eq!(source.kind(), RemoteErrorKind::NotFound);
        }
        other => panic!("a refresh without an object: {other:?}"),
    }
    assert_eq!(reader.manifest(), first.manifest);
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    // Its half-built snapshot is gone.
    let mut names: Vec<String> = std::fs::read_dir(root.path().join("reader"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let served = format!("manifest-{:020}", first.manifest);
    assert_eq!(names, ["LOCK", "PODSTORE-READER", served.as_str()]);
    remote.set_object(&new[0], bytes);
    let refreshed = reader.refresh().unwrap();
    assert_eq!(refreshed.manifest, second.manifest);
    assert_eq!(reader.get("k").unwrap().as_deref(), Some(&b"v2"[..]));
}
