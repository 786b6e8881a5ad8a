//! The remote tier (issue 38, phase 1) on the in-memory remote: uploads of sealed files,
//! `flush_remote` then a restore into an empty directory, damage found on restore, fencing of
//! an older writer, uploads through seeded faults.

mod common;

use common::model::{self, Model};

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use podstore::remote::{
    Faults, FaultyRemote, MemoryRemote, ObjectInfo, PutOutcome, Remote, RemoteError,
    RemoteErrorKind,
};
use podstore::{Durability, Error, Options, Store};

const PREFIX: &str = "tenant/store";

/// Small segments (several per test), no flush of the remote but the test's own.
fn opts(remote: Arc<dyn Remote>) -> Options {
    common::store::small()
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
}

fn value(k: u64, round: u64) -> Vec<u8> {
    // Every tenth key is a large value (a blob file of its own); the others fill segments.
    let len = if k % 10 == 3 {
        (1 << 20) + 4096 + k as usize
    } else {
        1000 + ((k * 7919 + round * 104_729) % 20_000) as usize
    };
    let mut v = vec![0u8; len];
    for (i, b) in v.iter_mut().enumerate() {
        *b = (i as u64 ^ (k << 3) ^ round) as u8;
    }
    v
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:05}").into_bytes()
}

/// Writes `keys` keys in round `round`, deleting every seventh: several sealed segments and a
/// few blob files.
fn write_round(store: &Store, model: &mut Model, keys: u64, round: u64) {
    model::write_round(store, model, (keys, round), 7, key, value);
}

fn check(store: &Store, model: &Model, what: &str) {
    model::check_values(model, what, |k| store.get(k));
    assert_eq!(
        store.len(),
        model::live_keys(model).len(),
        "{what}: number of keys"
    );
}

/// Opens a store in a new directory with `remote`: a restore from the newest manifest.
fn restore(remote: Arc<dyn Remote>, root: &Path, name: &str) -> podstore::Result<Store> {
    Store::open_with(root.join(name), opts(remote))
}

fn data_objects(remote: &MemoryRemote) -> Vec<String> {
    model::objects(remote, PREFIX, "data")
}

#[test]
fn flush_remote_then_restore_into_an_empty_directory_gives_every_value() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 120, 0);
    write_round(&store, &mut model, 120, 1);
    let flushed = store.flush_remote().unwrap();
    assert!(flushed.files >= 3, "{flushed:?}");
    assert_eq!(flushed.manifest, 2, "manifest 1 is the claim at open");
    let stats = store.stats();
    assert_eq!(stats.remote_waiting_files, 0);
    assert_eq!(stats.remote_lag, None);
    assert!(stats.remote_uploaded_bytes > 10 << 20, "{stats:?}");
    // Writes after the flush are not promised to a restore: the machine is lost now.
    store.put("after", "the flush").unwrap();
    assert!(store.stats().remote_lag.is_some());
    drop(store);

    let restored = restore(remote.clone(), root.path(), "b").unwrap();
    check(&restored, &model, "restored");
    // The restored store is a store like any other: it verifies and takes writes.
    assert!(restored.verify().unwrap().is_clean());
    restored.put("new", "write").unwrap();
    restored.close().unwrap();
    // Uploaded byte for byte: each data object is its local file's bytes.
    for name in data_objects(&remote) {
        let file = name.rsplit('/').next().unwrap();
        if let Ok(local) = std::fs::read(root.path().join("b").join(file)) {
            assert_eq!(remote.object(&name).unwrap(), local, "{name}");
        }
    }
}

#[test]
fn sealed_files_are_uploaded_in_the_background() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path(), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 100, 0);
    store.seal().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while store.stats().remote_waiting_files > 0 {
        assert!(
            Instant::now() < deadline,
            "uploads did not finish: {:?}",
            store.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = store.stats();
    assert!(stats.remote_uploaded_files >= 3, "{stats:?}");
    // Every sealed local file is in the remote, byte for byte.
    let objects = data_objects(&remote);
    for f in store.files().unwrap() {
        let object = objects
            .iter()
            .find(|o| o.ends_with(&format!("/{}", f.name)))
            .unwrap_or_else(|| panic!("{} not uploaded: {objects:?}", f.name));
        let local = std::fs::read(root.path().join(&f.name)).unwrap();
        assert_eq!(remote.object(object).unwrap(), local, "{}", f.name);
    }
    // No manifest but the claim yet: uploads alone do not publish anything.
    assert_eq!(stats.remote_manifest, 1);
    assert!(stats.remote_lag.is_some());
}

#[test]
fn compaction_between_flushes_drops_files_from_the_next_manifest_and_loses_nothing() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone()).background_compaction(false);
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 80, 0);
    let first = store.flush_remote().unwrap();
    for round in 1..4 {
        write_round(&store, &mut model, 80, round);
    }
    let report = store.compact().unwrap();
    assert!(report.segments_compacted > 0, "{report:?}");
    let second = store.flush_remote().unwrap();
    assert_eq!(second.manifest, first.manifest + 1);
    let local: Vec<String> = store.files().unwrap().into_iter().map(|f| f.name).collect();
    assert_eq!(
        second.files,
        local.len(),
        "the manifest names the local files"
    );
    drop(store);
    let restored = restore(remote, root.path(), "b").unwrap();
    check(&restored, &model, "restored after compaction");
}

#[test]
fn a_damaged_remote_object_is_a_typed_error_and_never_data() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 60, 0);
    let flushed = store.flush_remote().unwrap();
    drop(store);

    // One byte of a data file changed: its crc32 no longer matches the manifest's.
    let victim = data_objects(&remote).into_iter().next().unwrap();
    let good = remote.object(&victim).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    remote.set_object(&victim, bad);
    match restore(remote.clone(), root.path(), "b") {
        Err(Error::RemoteCorruption { object, .. }) => assert_eq!(object, victim),
        other => panic!("expected RemoteCorruption of {victim}, got {other:?}"),
    }
    // Nothing is left behind: no store, no half-restored directory in the way.
    assert!(!root.path().join("b").exists());
    assert!(!root.path().join("b.podstore-restore").exists());

    // Cut short: found before the download.
    remote.set_object(&victim, good[..good.len() - 1].to_vec());
    match restore(remote.clone(), root.path(), "b") {
        Err(Error::RemoteCorruption { object, .. }) => assert_eq!(object, victim),
        other => panic!("expected RemoteCorruption of {victim}, got {other:?}"),
    }
    remote.set_object(&victim, good);

    // The newest manifest damaged: the one written at close, after the flush's.
    let manifest = model::objects(&remote, PREFIX, "manifest").pop().unwrap();
    assert_eq!(
        manifest,
        format!("{PREFIX}/manifest/{:020}", flushed.manifest + 1)
    );
    let mut m = remote.object(&manifest).unwrap();
    m[70] ^= 1;
    remote.set_object(&manifest, m);
    match restore(remote.clone(), root.path(), "b") {
        Err(e @ Error::RemoteCorruption { .. }) => {
            assert!(e.is_corruption());
            assert!(e.to_string().contains(&manifest), "{e}");
        }
        other => panic!("expected RemoteCorruption of {manifest}, got {other:?}"),
    }
}

#[test]
fn a_second_writer_fences_the_first_and_keeps_everything_it_acknowledged() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let first = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&first, &mut model, 60, 0);
    first.flush_remote().unwrap();
    // The first writer goes on writing; these writes are its own, never flushed.
    first.put("only-in-a", "x").unwrap();

    // A second machine takes the prefix (a restore of the first's flush).
    let second = restore(remote.clone(), root.path(), "b").unwrap();
    check(&second, &model, "second writer after restore");
    write_round(&second, &mut model, 60, 1);
    let won = second.flush_remote().unwrap();

    // The first writer's next manifest is refused, and so are its writes from then on.
    match first.flush_remote() {
        Err(Error::Fenced { prefix, .. }) => assert_eq!(prefix, PREFIX),
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(matches!(first.put("k", "v"), Err(Error::Fenced { .. })));
    assert!(matches!(first.delete("k"), Err(Error::Fenced { .. })));
    // Its local data is intact and readable.
    assert_eq!(first.get("only-in-a").unwrap().as_deref(), Some(&b"x"[..]));
    drop(first);

    // The winner's manifests go on, and a restore holds everything it acknowledged.
    write_round(&second, &mut model, 30, 2);
    let last = second.flush_remote().unwrap();
    assert_eq!(last.manifest, won.manifest + 1);
    assert!(last.epoch > 1);
    drop(second);
    let third = restore(remote, root.path(), "c").unwrap();
    check(&third, &model, "restore of the winner");
    assert_eq!(third.get("only-in-a").unwrap(), None);
}

#[test]
fn two_writers_opening_the_prefix_at_once_cannot_both_take_it() {
    // Both read the newest manifest, then race to create the next number: exactly one does.
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    Store::open_with(root.path().join("seed"), opts(remote.clone()))
        .unwrap()
        .close()
        .unwrap();
    for round in 0..5 {
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let opened: Vec<_> = ["x", "y"]
            .into_iter()
            .map(|name| {
                let dir = root.path().join(format!("{name}{round}"));
                std::fs::create_dir(&dir).unwrap();
                let remote = remote.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open_with(&dir, opts(remote))
                })
            })
            .collect();
        let results: Vec<_> = opened.into_iter().map(|t| t.join().unwrap()).collect();
        let stores: Vec<&Store> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
        assert!(
            !stores.is_empty(),
            "round {round}: neither opened: {results:?}"
        );
        for r in &results {
            if let Err(e) = r {
                assert!(matches!(e, Error::Fenced { .. }), "round {round}: {e:?}");
            }
        }
        // Of those that opened, only the newest writer can write a manifest.
        let flushed: Vec<_> = stores.iter().map(|s| s.flush_remote()).collect();
        assert_eq!(
            flushed.iter().filter(|f| f.is_ok()).count(),
            1,
            "round {round}: {flushed:?}"
        );
    }
}

#[test]
fn uploads_and_flushes_go_through_transient_faults() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let sample = common::long::Sample::new("uploads_and_flushes_go_through_transient_faults");
    let seed = sample.seed();
    let faulty = Arc::new(FaultyRemote::new(
        memory.clone(),
        Faults::new(0.25, 0.15, Duration::from_millis(2)),
        seed,
    ));
    // A call fails an attempt with probability 0.25 + 0.75 * 0.15 = 0.36: with 16 attempts,
    // one of the few hundred calls gives up in about one run in ten million (with the
    // default 8, one run in twenty would fail).
    let o = opts(faulty.clone())
        .remote_upload_threads(3)
        .remote_retries(16);
    let store = match Store::open_with(root.path().join("a"), o) {
        Ok(s) => s,
        Err(e) => panic!("seed {seed}: open: {e}"),
    };
    let mut model = Model::new();
    for round in 0..3 {
        write_round(&store, &mut model, 50, round);
        store
            .flush_remote()
            .unwrap_or_else(|e| panic!("seed {seed}: flush {round}: {e}"));
    }
    assert!(faulty.injected() > 0, "seed {seed}: no fault was injected");
    drop(store);
    // Restored through the faults too.
    let o = opts(faulty).remote_retries(16);
    let restored = Store::open_with(root.path().join("b"), o)
        .unwrap_or_else(|e| panic!("seed {seed}: restore: {e}"));
    check(&restored, &model, &format!("seed {seed}"));
}

#[test]
fn a_reopened_store_keeps_its_prefix_and_uploads_nothing_twice() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path(), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 60, 0);
    let first = store.flush_remote().unwrap();
    store.close().unwrap();
    let objects = data_objects(&remote).len();
    let store = Store::open_with(root.path(), opts(remote.clone())).unwrap();
    let again = store.flush_remote().unwrap();
    assert_eq!(again.files_uploaded, 0, "{again:?}");
    assert_eq!(again.files, first.files);
    assert_eq!(again.epoch, first.epoch + 1);
    assert_eq!(data_objects(&remote).len(), objects);
    check(&store, &model, "reopened");
}

#[test]
fn options_of_a_remote_are_checked() {
    let root = tempfile::tempdir().unwrap();
    let remote: Arc<dyn Remote> = Arc::new(MemoryRemote::new());
    for prefix in ["", "/abs", "trailing/", "a//b"] {
        let o = Options::default().remote(remote.clone(), prefix);
        assert!(
            matches!(
                Store::open_with(root.path(), o),
                Err(Error::InvalidOptions(_))
            ),
            "prefix {prefix:?}"
        );
    }
    let o = Options::default()
        .remote(remote.clone(), "p")
        .read_only(true);
    assert!(matches!(
        Store::open_with(root.path(), o),
        Err(Error::InvalidOptions(_))
    ));
    let plain =
        Store::open_with(root.path(), Options::default().durability(Durability::Sync)).unwrap();
    assert!(matches!(
        plain.flush_remote(),
        Err(Error::InvalidOptions(_))
    ));
}

#[test]
fn the_background_thread_flushes_on_its_interval() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone()).remote_flush_interval(Some(Duration::from_millis(200)));
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 40, 0);
    assert!(store.stats().remote_lag.is_some());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats = store.stats();
        if stats.remote_manifest > 1 && stats.remote_lag.is_none() {
            break;
        }
        assert!(Instant::now() < deadline, "no flush of its own: {stats:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A restore elsewhere, while the writer still runs, has every write.
    let copy = tempfile::tempdir().unwrap();
    let o = opts(Arc::new(ReadThrough(remote.clone())));
    let restored = Store::open_with(copy.path().join("b"), o).unwrap();
    check(&restored, &model, "restored from a background flush");
}

/// A remote that reads `0`'s objects and refuses every create: a restore that does not take
/// the prefix (so that the writer under test is not fenced).
#[derive(Debug)]
struct ReadThrough(Arc<MemoryRemote>);

impl Remote for ReadThrough {
    fn put(&self, _: &str, _: &dyn podstore::remote::ObjectBody) -> Result<(), RemoteError> {
        Err(RemoteError::new(RemoteErrorKind::Other, "read only"))
    }
    fn put_if_absent(&self, _: &str, _: &[u8]) -> Result<PutOutcome, RemoteError> {
        // Taking a number nobody takes: the copy "owns" a prefix no one else writes to.
        Ok(PutOutcome::Created)
    }
    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.0.get_range(name, range)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.0.list(prefix)
    }
    fn delete(&self, _: &str) -> Result<(), RemoteError> {
        Err(RemoteError::new(RemoteErrorKind::Other, "read only"))
    }
}

#[test]
fn a_restore_keeps_what_an_eviction_dropped_dropped() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone())
        .size_cap(Some(4 << 20))
        .background_compaction(false);
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        write_round(&store, &mut model, 150, round);
    }
    store.flush_remote().unwrap();
    let stats = store.stats();
    assert!(stats.evicted_through > 0, "nothing evicted: {stats:?}");
    // What the store serves now, key by key: evicted keys read nothing.
    let served: Vec<_> = model
        .keys()
        .map(|k| (k.clone(), store.get(k).unwrap()))
        .collect();
    assert!(served.iter().any(|(_, v)| v.is_none()));
    drop(store);
    let restored = restore(remote, root.path(), "b").unwrap();
    assert_eq!(restored.stats().evicted_through, stats.evicted_through);
    for (k, v) in served {
        assert!(
            restored.get(&k).unwrap() == v,
            "key {}",
            String::from_utf8_lossy(&k)
        );
    }
}

#[test]
fn a_directory_taking_the_prefix_back_does_not_trust_a_file_id_it_shares_with_the_other() {
    // A flushes; A puts a blob (file id N, not flushed); B restores from A's flush and puts a
    // blob of the same length under the same id N; B flushes. A, reopened, takes the prefix
    // back: B's manifest names an object for id N of A's file's length, but other bytes.
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let a_dir = root.path().join("a");
    let a = Store::open_with(&a_dir, opts(remote.clone())).unwrap();
    a.put("small", "x").unwrap();
    a.flush_remote().unwrap();
    let blob_a = vec![0xaa; 3 << 20];
    let blob_b = vec![0xbb; 3 << 20];
    a.put("blob-a", &blob_a).unwrap();
    let b = restore(remote.clone(), root.path(), "b").unwrap();
    b.put("blob-b", &blob_b).unwrap();
    b.flush_remote().unwrap();
    let ids = |s: &Store| {
        s.files()
            .unwrap()
            .into_iter()
            .filter(|f| f.name.starts_with("blob-"))
            .map(|f| (f.name, f.len))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&a), ids(&b), "the case needs the same name and length");
    drop(a);
    drop(b);

    let a = Store::open_with(&a_dir, opts(remote.clone())).unwrap();
    a.flush_remote().unwrap();
    // Its blob went up again, under its own epoch (by the flush or the background thread).
    let stats = a.stats();
    assert!(stats.remote_uploaded_files >= 1, "{stats:?}");
    drop(a);
    let c = restore(remote, root.path(), "c").unwrap();
    assert_eq!(c.get("blob-a").unwrap(), Some(blob_a));
    assert_eq!(c.get("blob-b").unwrap(), None);
    assert_eq!(c.get("small").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn the_lag_dates_the_oldest_write_not_in_the_remote() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path(), opts(remote)).unwrap();
    assert_eq!(store.stats().remote_lag, None, "nothing written");
    store.put("first", "1").unwrap();
    let after_first = Instant::now();
    std::thread::sleep(Duration::from_millis(60));
    store.put("second", "2").unwrap();
    let lag = store
        .stats()
        .remote_lag
        .expect("two writes not in the remote");
    assert!(
        lag >= after_first.elapsed().min(Duration::from_millis(60)),
        "{lag:?}"
    );
    store.flush_remote().unwrap();
    assert_eq!(store.stats().remote_lag, None);
    // Reads, seals of nothing and flushes are not writes.
    store.get("first").unwrap();
    store.flush_remote().unwrap();
    assert_eq!(store.stats().remote_lag, None);
}

#[test]
fn a_remote_that_keeps_failing_is_an_error_and_the_next_flush_catches_up() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let faulty = Arc::new(FaultyRemote::new(memory.clone(), Faults::none(), 7));
    // Three attempts (20 + 40 ms of waits) per call, not eight (2.5 s).
    let opts = |remote| opts(remote).remote_retries(3);
    let store = Store::open_with(root.path().join("a"), opts(faulty.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 40, 0);
    // Every call refused: the flush gives up after its retries, with a typed error.
    faulty.set_faults(Faults::new(1.0, 0.0, Duration::ZERO));
    match store.flush_remote() {
        Err(Error::Remote { source, .. }) => assert!(source.is_transient()),
        other => panic!("expected Error::Remote, got {other:?}"),
    }
    // Writes go on meanwhile: acknowledged locally, waiting for the remote.
    write_round(&store, &mut model, 40, 1);
    assert!(store.stats().remote_lag.is_some());
    faulty.set_faults(Faults::none());
    store.flush_remote().unwrap();
    drop(store);
    check(
        &restore(memory, root.path(), "b").unwrap(),
        &model,
        "after the outage",
    );
    // Open itself needs the remote (it takes the prefix).
    faulty.set_faults(Faults::new(1.0, 0.0, Duration::ZERO));
    assert!(matches!(
        Store::open_with(root.path().join("c"), opts(faulty)),
        Err(Error::Remote { .. })
    ));
    assert!(!root.path().join("c").exists());
}

/// Passes calls to a memory remote; while `lose` is set, a conditional create that creates its
/// object is answered with a transient error (its reply lost).
#[derive(Debug)]
struct LoseCreateReplies {
    inner: Arc<MemoryRemote>,
    lose: std::sync::atomic::AtomicBool,
}

impl Remote for LoseCreateReplies {
    fn put(&self, name: &str, body: &dyn podstore::remote::ObjectBody) -> Result<(), RemoteError> {
        self.inner.put(name, body)
    }
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        let done = self.inner.put_if_absent(name, bytes)?;
        if done == PutOutcome::Created && self.lose.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(RemoteError::new(RemoteErrorKind::Transient, "reply lost"));
        }
        Ok(done)
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

#[test]
fn a_manifest_whose_create_reply_was_lost_is_not_taken_for_another_writers() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = Arc::new(LoseCreateReplies {
        inner: memory.clone(),
        lose: false.into(),
    });
    let store = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    let mut model = Model::new();
    write_round(&store, &mut model, 30, 0);
    store.flush_remote().unwrap();
    write_round(&store, &mut model, 30, 1);
    // The create's reply lost: the retry finds the flush's own bytes, and it succeeds.
    remote.lose.store(true, std::sync::atomic::Ordering::SeqCst);
    let third = store.flush_remote();
    remote
        .lose
        .store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(third.unwrap().manifest, 3);
    drop(store);

    // A store that gives up after one attempt leaves its manifest behind unacknowledged; its
    // next flush finds a manifest of its own epoch and id at that number and takes the next.
    let o = opts(remote.clone()).remote_retries(1);
    let store = Store::open_with(root.path().join("a"), o).unwrap();
    write_round(&store, &mut model, 30, 2);
    remote.lose.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(store.flush_remote(), Err(Error::Remote { .. })));
    remote
        .lose
        .store(false, std::sync::atomic::Ordering::SeqCst);
    write_round(&store, &mut model, 30, 3);
    let next = store
        .flush_remote()
        .expect("not fenced by its own manifest");
    assert_eq!(
        next.manifest, 7,
        "4: the first store's at its close, 5: the claim, 6: the lost reply's"
    );
    drop(store);
    check(
        &restore(memory, root.path(), "b").unwrap(),
        &model,
        "restored",
    );
}

#[test]
fn flushes_racing_writes_and_compactions_cover_every_write_made_before_them() {
    // One thread overwrites keys round after round (values tagged with their round), another
    // compacts; the test flushes meanwhile. A restore from the last flush must give each key
    // a value at least as new as the one acknowledged before that flush began, and one that
    // was written (never torn, never another key's).
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    const KEYS: u64 = 64;
    let tagged = |k: u64, round: u64| {
        let mut v = value(k, round);
        v[..8].copy_from_slice(&round.to_le_bytes());
        v
    };
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone()).compaction_threshold(0.2);
    let store = Arc::new(Store::open_with(root.path().join("a"), o).unwrap());
    let acked = Arc::new(Mutex::new(vec![None::<u64>; KEYS as usize]));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, acked, stop) = (store.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut round = 0;
            while !stop.load(Ordering::SeqCst) {
                for k in 0..KEYS {
                    // Small values only (every tenth key of `value` is large).
                    let v = tagged(k, round);
                    store.put(key(k), &v[..v.len().min(6000)]).unwrap();
                    acked.lock().unwrap()[k as usize] = Some(round);
                }
                round += 1;
            }
        })
    };
    let compactor = {
        let (store, stop) = (store.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                store.compact().unwrap();
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let mut before_last = Vec::new();
    for _ in 0..6 {
        std::thread::sleep(Duration::from_millis(100));
        before_last = acked.lock().unwrap().clone();
        store.flush_remote().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    compactor.join().unwrap();
    let last = acked.lock().unwrap().clone();
    drop(store);
    let restored = restore(remote, root.path(), "b").unwrap();
    for k in 0..KEYS {
        let got = restored.get(key(k)).unwrap();
        let Some(floor) = before_last[k as usize] else {
            continue;
        };
        let got = got.unwrap_or_else(|| panic!("key {k}: acknowledged round {floor}, lost"));
        let round = u64::from_le_bytes(got[..8].try_into().unwrap());
        assert!(
            round >= floor && Some(round) <= last[k as usize],
            "key {k}: round {round}, acknowledged {floor} before the flush"
        );
        let want = tagged(k, round);
        assert_eq!(got, want[..want.len().min(6000)], "key {k} round {round}");
    }
}
