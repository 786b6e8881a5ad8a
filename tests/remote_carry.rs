//! A flush of one round trip (issue 38; docs/design-remote.md, "Files in the manifest"): a
//! manifest carries the bytes of the files not in the remote yet, written while they are
//! uploaded. It stands alone: a store restored from it, or read by a `RemoteReader`, has every
//! value though no upload ever succeeded; a carried file is never evicted locally before its
//! object is whole; and the next manifest names the objects instead.

mod common;

use common::model::{self, Model};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use podstore::remote::{
    MemoryRemote, ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind,
};
use podstore::{Options, RemoteReader, Store};

const PREFIX: &str = "tenant/store";

/// A remote whose uploads of files fail while `refuse` is set (manifests are created as ever).
#[derive(Debug)]
struct NoUploads {
    inner: Arc<MemoryRemote>,
    refuse: AtomicBool,
}

impl NoUploads {
    fn new(inner: Arc<MemoryRemote>) -> Arc<Self> {
        Arc::new(NoUploads {
            inner,
            refuse: AtomicBool::new(true),
        })
    }
}

impl Remote for NoUploads {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        if self.refuse.load(Ordering::SeqCst) {
            return Err(RemoteError::new(RemoteErrorKind::Other, "uploads refused"));
        }
        self.inner.put(name, body)
    }
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.inner.put_if_absent(name, bytes)
    }
    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.inner.get_range(name, range)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.inner.list(prefix)
    }
    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.inner.delete(name)
    }
}

fn opts(remote: Arc<dyn Remote>) -> Options {
    common::store::small()
        .background_compaction(false)
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
        // One attempt: a refused upload fails at once.
        .remote_retries(1)
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:04}").into_bytes()
}

fn value(k: u64, round: u64) -> Vec<u8> {
    // Key 3 a blob file of its own (past the large value threshold); the others in segments.
    let len = if k == 3 {
        (1 << 20) + 100
    } else {
        300 + ((k * 7919 + round * 104_729) % 3_000) as usize
    };
    (0..len)
        .map(|i| (i as u64 ^ (k << 3) ^ (round * 31)) as u8)
        .collect()
}

fn write_round(store: &Store, model: &mut Model, keys: u64, round: u64) {
    model::write_round(store, model, (keys, round), 5, key, value);
}

#[test]
fn a_flush_whose_uploads_all_fail_is_durable_in_its_manifest_alone() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = NoUploads::new(memory.clone());
    // A local budget of nothing: every file a manifest names by its object is evicted.
    let o = opts(remote.clone()).remote_local_budget(Some(0));
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 200, 0);
    let flushed = store.flush_remote().unwrap();
    assert!(flushed.files >= 2, "{flushed:?}");
    assert_eq!(flushed.files_in_manifest, flushed.files, "{flushed:?}");
    assert_eq!(flushed.files_uploaded, 0, "{flushed:?}");
    assert!(model::objects(&memory, PREFIX, "data").is_empty());
    // Nothing was evicted: no object holds the files.
    model::check_values(&model, "the writer, uploads refused", |k| store.get(k));
    assert_eq!(store.stats().remote_uploaded_bytes, 0);

    // A restore elsewhere from the manifest alone (the writer still running: it is fenced).
    let restored = Store::open_with(root.path().join("b"), opts(memory.clone())).unwrap();
    model::check_values(&model, "restored from the manifest", |k| restored.get(k));
    drop(restored);
    assert!(store.flush_remote().is_err(), "the writer was not fenced");
}

#[test]
fn uploads_beside_the_manifest_let_the_next_one_name_the_objects() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = NoUploads::new(memory.clone());
    remote.refuse.store(false, Ordering::SeqCst);
    let o = opts(remote.clone()).remote_local_budget(Some(0));
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 200, 0);
    let first = store.flush_remote().unwrap();
    // Carried and uploaded at once.
    assert_eq!(first.files_in_manifest, first.files, "{first:?}");
    assert_eq!(first.files_uploaded, first.files, "{first:?}");
    assert_eq!(model::objects(&memory, PREFIX, "data").len(), first.files);
    // Their objects whole, they are evicted (the budget is nothing) and read from the remote.
    assert!(store.stats().remote_only_files > 0, "{:?}", store.stats());
    model::check_values(&model, "evicted after the carrying flush", |k| store.get(k));
    // One more write: the next manifest carries its segment only, and names the others.
    store.put("one more", "v").unwrap();
    model.insert(b"one more".to_vec(), Some(b"v".to_vec()));
    let second = store.flush_remote().unwrap();
    assert_eq!(second.files_in_manifest, 1, "{second:?}");
    let third = store.flush_remote().unwrap();
    assert_eq!(third.files_in_manifest, 0, "{third:?}");
    drop(store);
    // The manifest names objects only now: a restore reads them (from footers only).
    let o = opts(memory.clone()).remote_local_budget(Some(0));
    let restored = Store::open_with(root.path().join("b"), o).unwrap();
    model::check_values(&model, "restored from objects", |k| restored.get(k));
}

#[test]
fn more_than_a_manifest_carries_is_uploaded_first() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("a"), opts(memory.clone())).unwrap();
    // 5 MiB waiting: above what one manifest carries (4 MiB).
    store.put("big", vec![7u8; 5 << 20]).unwrap();
    store.put("small", "s").unwrap();
    let flushed = store.flush_remote().unwrap();
    assert_eq!(flushed.files_in_manifest, 0, "{flushed:?}");
    assert_eq!(flushed.files_uploaded, flushed.files, "{flushed:?}");
    let manifests = model::objects(&memory, PREFIX, "manifest");
    let newest = manifests.iter().max().unwrap();
    assert!(memory.object(newest).unwrap().len() < 4096);
}

#[test]
fn a_writer_taking_over_a_carrying_manifest_uploads_what_it_carried() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = NoUploads::new(memory.clone());
    let store = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 100, 0);
    assert!(store.flush_remote().unwrap().files_in_manifest > 0);
    // Its close repeats the carrying manifest, marked closed.
    drop(store);
    assert!(model::objects(&memory, PREFIX, "data").is_empty());
    // A new writer on a new machine: restored from the manifest, it writes and flushes.
    let next = Store::open_with(root.path().join("b"), opts(memory.clone())).unwrap();
    write_round(&next, &mut model, 100, 1);
    let flushed = next.flush_remote().unwrap();
    assert_eq!(flushed.files_uploaded, flushed.files, "{flushed:?}");
    drop(next);
    // Every file is an object now, of the new writer's epoch: a third restore reads them.
    let data = model::objects(&memory, PREFIX, "data");
    assert!(data.len() >= flushed.files, "{data:?}");
    let third = Store::open_with(root.path().join("c"), opts(memory.clone())).unwrap();
    model::check_values(&model, "restored after the take-over", |k| third.get(k));
}

#[test]
fn a_reader_follows_manifests_that_carry_files() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = NoUploads::new(memory.clone());
    let store = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let reader = RemoteReader::open(root.path().join("reader"), opts(memory.clone())).unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        write_round(&store, &mut model, 80, round);
        assert!(store.flush_remote().unwrap().files_in_manifest > 0);
        reader.refresh().unwrap();
        model::check_values(&model, &format!("reader, round {round}"), |k| reader.get(k));
        // From the second round on, uploads go through: a mix of carried and named files.
        remote.refuse.store(false, Ordering::SeqCst);
    }
}

#[test]
fn a_closing_manifest_names_the_objects_of_what_the_last_one_carried() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("a"), opts(memory.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 100, 0);
    let flushed = store.flush_remote().unwrap();
    assert_eq!(flushed.files_in_manifest, flushed.files, "{flushed:?}");
    assert_eq!(flushed.files_uploaded, flushed.files, "{flushed:?}");
    drop(store);
    // The manifest written at close repeats the last one's files, by their objects now (the
    // next writer's claim repeats it, and a claim may be kept for good).
    let newest = model::objects(&memory, PREFIX, "manifest")
        .into_iter()
        .max()
        .unwrap();
    let m = podstore::format::manifest::decode(&memory.object(&newest).unwrap()).unwrap();
    assert!(m.closed);
    assert_eq!(m.files.len(), flushed.files);
    assert!(m.inline.is_empty(), "{:?}", m.inline.keys());
    let restored = Store::open_with(root.path().join("b"), opts(memory.clone())).unwrap();
    model::check_values(&model, "restored after the close", |k| restored.get(k));
}
