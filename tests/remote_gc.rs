//! Deletion in the remote (issue 38): manifests replaced longer than
//! `Options::remote_retention` ago, then the data objects no manifest left names. On the
//! in-memory remote, whose clock a test moves forward; a zero retention for "everything
//! replaced is old enough".

mod common;

use common::model::{self, Model};

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use podstore::format::manifest::{Manifest, decode};
use podstore::remote::{
    MemoryRemote, ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind,
};
use podstore::{Batch, Error, Options, Store};

const PREFIX: &str = "gc/store";

/// Small segments and blob files, no background flush or compaction: the test makes each.
fn opts(remote: Arc<dyn Remote>, retention: Option<Duration>) -> Options {
    common::store::small()
        .large_value_threshold(32 << 10)
        .background_compaction(false)
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
        .remote_retention(retention)
}

fn value(k: u64, round: u64) -> Vec<u8> {
    // Every 50th key a blob file of its own; the others fill segments.
    let len = if k % 50 == 7 { 40_000 } else { 2000 };
    (0..len)
        .map(|i| (i as u64 ^ (k << 3) ^ (round * 31)) as u8)
        .collect()
}

/// Overwrites keys `0..keys` (deleting every ninth from round 1): the files of the rounds
/// before are dead, for compaction to remove. Small values in one batch (one sync), large
/// ones put alone (a blob file each).
fn write_round(store: &Store, model: &mut Model, keys: u64, round: u64) {
    let mut batch = Batch::new();
    for k in 0..keys {
        let key = format!("key/{k:04}").into_bytes();
        if round > 0 && (k + round).is_multiple_of(9) {
            batch.delete(&key);
            model.insert(key, None);
        } else {
            let v = value(k, round);
            if v.len() > 32 << 10 {
                store.put(&key, &v).unwrap();
            } else {
                batch.put(&key, &v);
            }
            model.insert(key, Some(v));
        }
    }
    store.write(&batch).unwrap();
}

/// A restore from `remote` into `root/name` gives `model`.
fn check_restore(remote: Arc<MemoryRemote>, root: &Path, name: &str, model: &Model) {
    check(&restore(remote, root, name).unwrap(), model, name);
}

fn check(store: &Store, model: &Model, what: &str) {
    model::check_values(model, what, |k| store.get(k));
}

/// One cycle: a round written, compacted, flushed.
fn cycle(store: &Store, model: &mut Model, round: u64) {
    write_round(store, model, 120, round);
    store.compact().unwrap();
    store.flush_remote().unwrap();
}

/// The manifests in `remote`, decoded, by number.
fn manifests(remote: &MemoryRemote) -> BTreeMap<u64, Manifest> {
    model::objects(remote, PREFIX, "manifest")
        .into_iter()
        .map(|n| {
            let m = decode(&remote.object(&n).unwrap()).unwrap();
            (m.number, m)
        })
        .collect()
}

/// The marks among `ms`: claims (a writer's first manifest) not made after a close, which
/// deletion keeps for good (they fence the writer before them), though not their files once
/// they are replaced.
fn claims(ms: &BTreeMap<u64, Manifest>) -> BTreeSet<u64> {
    ms.values()
        .filter(|m| m.claim && !m.after_close)
        .map(|m| m.number)
        .collect()
}

/// The manifests in `remote` whose files deletion keeps: all but the claims replaced.
fn readable(remote: &MemoryRemote) -> BTreeMap<u64, Manifest> {
    let mut ms = manifests(remote);
    let newest = ms.keys().last().copied();
    for c in claims(&ms) {
        if Some(c) != newest {
            ms.remove(&c);
        }
    }
    ms
}

/// After a full deletion pass: one manifest left whose files are kept (the newest), and the
/// data objects in the remote are exactly those it names.
fn assert_only_the_newest_is_readable(remote: &MemoryRemote) {
    let ms = readable(remote);
    assert_eq!(ms.len(), 1, "{:?}", ms.keys());
    assert_eq!(
        data_objects(remote),
        named(remote, ms.values().next().unwrap())
    );
}

fn data_objects(remote: &MemoryRemote) -> BTreeSet<String> {
    model::objects(remote, PREFIX, "data").into_iter().collect()
}

/// The objects manifest `m` names, each checked to be there at its length.
fn named(remote: &MemoryRemote, m: &Manifest) -> BTreeSet<String> {
    m.files
        .iter()
        .map(|f| {
            let name = format!("{PREFIX}/data/{:020}/{}", f.epoch, f.kind.file_name(f.id));
            let object = remote.object(&name);
            assert_eq!(
                object.map(|o| o.len() as u64),
                Some(f.length),
                "{name}, named by manifest {}",
                m.number
            );
            name
        })
        .collect()
}

/// A copy of `remote`'s objects now: a restore from it does not take the live prefix (which
/// would fence its writer).
fn copy(remote: &MemoryRemote) -> Arc<MemoryRemote> {
    let copy = Arc::new(MemoryRemote::new());
    for name in remote.names() {
        copy.set_object(&name, remote.object(&name).unwrap());
    }
    copy
}

fn restore(remote: Arc<dyn Remote>, root: &Path, name: &str) -> podstore::Result<Store> {
    Store::open_with(root.join(name), opts(remote, None))
}

#[test]
fn after_deletion_the_prefix_holds_exactly_what_the_kept_manifests_name() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let kept = Arc::new(MemoryRemote::new());
    let (counted, counted_kept) = (
        CutDeletes::new(remote.clone()),
        CutDeletes::new(kept.clone()),
    );
    let store = Store::open_with(
        root.path().join("a"),
        opts(counted.clone(), Some(Duration::ZERO)),
    )
    .unwrap();
    // The same cycles on a store that deletes nothing: what the prefix would grow to.
    let keeper = Store::open_with(root.path().join("k"), opts(counted_kept.clone(), None)).unwrap();
    let mut model = Model::new();
    let cycles = 5;
    let passes = cycles + 1;
    for round in 0..cycles {
        cycle(&store, &mut model, round);
        cycle(&keeper, &mut Model::new(), round);
        // (The background thread may have made the pass already: this one then lists only.)
        let report = store.collect_remote_garbage().unwrap();
        assert!(report.requests >= 2, "two listings at least: {report:?}");
        // Zero retention: only the newest manifest is left, and exactly what it names, with
        // the store's claim (manifest 1), whose files went.
        let all = manifests(&remote);
        let ms = readable(&remote);
        assert_eq!(ms.len(), 1, "round {round}: {:?}", ms.keys());
        let newest = ms.values().next().unwrap();
        assert_eq!(
            all.keys().copied().collect::<Vec<_>>(),
            vec![1, newest.number],
            "round {round}"
        );
        assert_eq!(newest.number, store.stats().remote_manifest);
        assert_eq!(
            data_objects(&remote),
            named(&remote, newest),
            "round {round}"
        );
    }
    let stats = store.stats();
    let deleted = stats.remote_deleted_objects;
    assert_eq!(deleted, remote.deletes(), "every deletion counted once");
    assert!(deleted > 10, "{deleted} objects deleted");
    let (with, with_bytes) = remote.usage(PREFIX);
    let (without, without_bytes) = kept.usage(PREFIX);
    // Both stores made the same uploads and manifests: the difference is deletion's cost
    // (the background passes and the test's, two listings each at least).
    let requests = counted.calls.load(Ordering::SeqCst) - counted_kept.calls.load(Ordering::SeqCst);
    println!(
        "after {cycles} cycles (120 keys overwritten, compacted, flushed): with deletion \
         {with} objects, {with_bytes} bytes; without {without} objects, {without_bytes} bytes; \
         deletion: {deleted} objects, {} bytes, {requests} requests more than without \
         ({passes} passes asked for)",
        stats.remote_deleted_bytes
    );
    assert!(with < without && with_bytes * 2 < without_bytes);
    // A second pass finds nothing: listings only.
    let again = store.collect_remote_garbage().unwrap();
    assert_eq!(
        (again.manifests_deleted, again.objects_deleted),
        (0, 0),
        "{again:?}"
    );
    drop(store);
    let restored = restore(remote.clone(), root.path(), "b").unwrap();
    check(&restored, &model, "restored from the newest manifest");
}

#[test]
fn manifests_replaced_within_the_retention_stay_readable_and_older_ones_go() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(
        root.path().join("a"),
        opts(remote.clone(), Some(Duration::from_secs(3600))),
    )
    .unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        cycle(&store, &mut model, round);
    }
    let report = store.collect_remote_garbage().unwrap();
    assert_eq!(report.manifests_deleted, 0, "{report:?}");
    // Every manifest is kept, and every file each names (a reader holding it reads them).
    let ms = manifests(&remote);
    assert_eq!(ms.len(), 4, "the claim and three flushes");
    let mut all = BTreeSet::new();
    for m in ms.values() {
        all.extend(named(&remote, m));
    }
    assert_eq!(data_objects(&remote), all);

    // Two hours later by the remote's clock: a new manifest, and every manifest replaced
    // before it is past the window, but the one it replaced only now.
    remote.advance_clock(Duration::from_secs(7200));
    let previous = store.stats().remote_manifest;
    cycle(&store, &mut model, 3);
    let report = store.collect_remote_garbage().unwrap();
    // The claim (manifest 1) stays, but no longer keeps its files.
    assert_eq!(report.manifests_deleted, 2, "{report:?}");
    let ms = manifests(&remote);
    assert_eq!(
        ms.keys().copied().collect::<Vec<_>>(),
        vec![1, previous, previous + 1]
    );
    let ms = readable(&remote);
    let kept: BTreeSet<String> = ms.values().flat_map(|m| named(&remote, m)).collect();
    assert_eq!(data_objects(&remote), kept);
    drop(store);
    check_restore(remote, root.path(), "b", &model);
}

/// A remote that calls `hook` once, at the first read of a data object: a writer works while
/// a restore is under way.
struct Hooked {
    inner: Arc<MemoryRemote>,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for Hooked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hooked")
    }
}

impl Remote for Hooked {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.inner.put(name, body)
    }
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.inner.put_if_absent(name, bytes)
    }
    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        if name.contains("/data/") {
            let hook = self.hook.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
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
fn a_restore_whose_manifest_is_deleted_under_it_gets_a_clear_error_never_other_bytes() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let store = Arc::new(
        Store::open_with(
            root.path().join("a"),
            opts(memory.clone(), Some(Duration::ZERO)),
        )
        .unwrap(),
    );
    let mut model = Model::new();
    cycle(&store, &mut model, 0);
    // A manifest that names the objects (the cycle's last may carry its files: a restore
    // would then read no object).
    assert_eq!(store.flush_remote().unwrap().files_in_manifest, 0);
    let held = store.stats().remote_manifest;
    // While the restore reads manifest `held`'s files, the writer overwrites everything,
    // compacts, flushes and deletes what is replaced (zero retention).
    let writer = store.clone();
    let model_after = Arc::new(Mutex::new(model.clone()));
    let hook_model = model_after.clone();
    let hooked = Arc::new(Hooked {
        inner: memory.clone(),
        hook: Mutex::new(Some(Box::new(move || {
            let mut m = hook_model.lock().unwrap();
            cycle(&writer, &mut m, 1);
            writer.collect_remote_garbage().unwrap();
        }))),
    });
    let err = restore(hooked.clone(), root.path(), "b").expect_err("fails");
    match &err {
        Error::ManifestExpired {
            manifest, object, ..
        } => {
            assert_eq!(*manifest, held);
            assert!(object.starts_with(&format!("{PREFIX}/data/")), "{object}");
        }
        other => panic!("expected ManifestExpired, got {other:?}"),
    }
    assert_eq!(
        std::io::Error::from(err).kind(),
        std::io::ErrorKind::NotFound
    );
    // Nothing left behind: opening again restores from the newest manifest.
    assert!(!root.path().join("b").exists());
    assert!(!root.path().join("b.podstore-restore").exists());
    let restored = restore(hooked, root.path(), "b").unwrap();
    check(
        &restored,
        &model_after.lock().unwrap(),
        "restored from the newest",
    );
}

#[test]
fn a_manifest_of_its_own_whose_create_reply_was_lost_does_not_fence_the_writer() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = CutDeletes::new(memory.clone());
    let store = Store::open_with(
        root.path().join("a"),
        opts(remote.clone(), Some(Duration::ZERO)).remote_retries(1),
    )
    .unwrap();
    let mut model = Model::new();
    cycle(&store, &mut model, 0);
    // The next manifest is created, but the flush never learns it: newer than the newest this
    // writer knows it wrote.
    write_round(&store, &mut model, 120, 1);
    remote.lose_creates.store(true, Ordering::SeqCst);
    assert!(matches!(store.flush_remote(), Err(Error::Remote { .. })));
    remote.lose_creates.store(false, Ordering::SeqCst);
    let lost = store.stats().remote_manifest + 1;
    assert!(manifests(&memory).contains_key(&lost));
    // A deletion pass reads it, finds it its own: not fenced, and nothing deleted meanwhile.
    let asked = remote.asked.load(Ordering::SeqCst);
    let report = store.collect_remote_garbage().unwrap();
    assert_eq!(report.manifests_deleted + report.objects_deleted, 0);
    assert_eq!(remote.asked.load(Ordering::SeqCst), asked);
    // The next flush passes over it; its pass deletes it (replaced) like any other.
    store.put("after", "the lost reply").unwrap();
    model.insert(b"after".to_vec(), Some(b"the lost reply".to_vec()));
    assert_eq!(store.flush_remote().unwrap().manifest, lost + 1);
    store.collect_remote_garbage().unwrap();
    let ms = manifests(&memory);
    assert_eq!(ms.keys().copied().collect::<Vec<_>>(), vec![1, lost + 1]);
    assert_eq!(data_objects(&memory), named(&memory, &ms[&(lost + 1)]));
    drop(store);
    check_restore(memory, root.path(), "b", &model);
}

#[test]
fn a_fenced_writer_deletes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone(), Some(Duration::ZERO));
    // A's deletions, counted apart from B's.
    let a_remote = CutDeletes::new(remote.clone());
    let a = Store::open_with(
        root.path().join("a"),
        opts(a_remote.clone(), Some(Duration::ZERO)),
    )
    .unwrap();
    let mut model = Model::new();
    cycle(&a, &mut model, 0);
    cycle(&a, &mut model, 1);
    // A's garbage deleted now: no pass of A's is due until its next manifest.
    a.collect_remote_garbage().unwrap();
    let asked = a_remote.asked.load(Ordering::SeqCst);
    assert!(asked > 0);
    // B takes the prefix (a restore elsewhere); A does not know yet.
    let b = Store::open_with(root.path().join("b"), o).unwrap();
    let a_manifest = format!("{PREFIX}/manifest/{:020}", a.stats().remote_manifest);
    assert!(matches!(
        a.collect_remote_garbage(),
        Err(Error::Fenced { .. })
    ));
    assert_eq!(a_remote.asked.load(Ordering::SeqCst), asked, "A deleted");
    // Found fenced by the listing: A refuses writes from then on.
    assert!(matches!(a.put("k", "v"), Err(Error::Fenced { .. })));
    drop(a);
    // B's pass (its own or the background thread's) deletes A's newest manifest, replaced by
    // B's claim, and keeps the files B's claim names.
    b.collect_remote_garbage().unwrap();
    assert!(remote.object(&a_manifest).is_none());
    assert!(b.stats().remote_deleted_objects >= 1);
    check(&b, &model, "the new writer");
}

#[test]
fn a_fenced_writer_finds_its_next_number_held_for_good_by_the_claim_that_fenced_it() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone(), Some(Duration::ZERO));
    // A deletes nothing itself (its own pass would list B's manifest and find it fenced).
    let a_remote = CutDeletes::new(remote.clone());
    let a = Store::open_with(root.path().join("a"), opts(a_remote.clone(), None)).unwrap();
    let mut model = Model::new();
    cycle(&a, &mut model, 0);
    let a_next = a.stats().remote_manifest + 1;
    // B claims number `a_next`, flushes twice and deletes what is replaced: every manifest but
    // its newest and the claims (A's, B's).
    let b = Store::open_with(root.path().join("b"), o).unwrap();
    assert_eq!(b.stats().remote_manifest, a_next);
    cycle(&b, &mut model, 1);
    cycle(&b, &mut model, 2);
    b.collect_remote_garbage().unwrap();
    let b_newest = b.stats().remote_manifest;
    let ms = manifests(&remote);
    assert_eq!(
        ms.keys().copied().collect::<Vec<_>>(),
        vec![1, a_next, b_newest]
    );
    // A, sure of its last create, creates `a_next` without listing after it: B's claim holds
    // the number, so A is fenced by the create itself.
    let lists = a_remote.lists.load(Ordering::SeqCst);
    a.put("stale", "write").unwrap();
    match a.flush_remote() {
        Err(Error::Fenced { manifest, .. }) => assert_eq!(manifest, a_next),
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert_eq!(a_remote.lists.load(Ordering::SeqCst), lists, "A listed");
    assert!(matches!(a.put("k", "v"), Err(Error::Fenced { .. })));
    drop(a);
    // B's next pass removes A's uploads; B's newest restores.
    b.collect_remote_garbage().unwrap();
    assert_only_the_newest_is_readable(&remote);
    drop(b);
    check_restore(remote, root.path(), "c", &model);
}

#[test]
fn a_store_reopened_after_clean_closes_keeps_one_mark_not_one_per_open() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let mut model = Model::new();
    for round in 0..5 {
        let store = Store::open_with(
            root.path().join("a"),
            opts(remote.clone(), Some(Duration::ZERO)),
        )
        .unwrap();
        cycle(&store, &mut model, round);
        store.collect_remote_garbage().unwrap();
        // The first open's claim (nothing closed before it: a mark) and the newest. Every
        // later claim was made after a close (the manifest written at close, flagged closed),
        // so it marks nothing and goes once replaced.
        let ms = manifests(&remote);
        let newest = store.stats().remote_manifest;
        assert_eq!(
            ms.keys().copied().collect::<Vec<_>>(),
            vec![1, newest],
            "round {round}"
        );
        assert!(ms[&1].claim && !ms[&1].after_close);
        store.close().unwrap();
        let closed = manifests(&remote);
        let last = closed.values().next_back().unwrap();
        assert_eq!(last.number, newest + 1, "round {round}");
        assert!(last.closed && !last.claim, "round {round}");
        assert_eq!(last.files, ms[&newest].files, "round {round}");
    }
    check_restore(remote, root.path(), "b", &model);
}

#[test]
fn a_writer_unsure_of_its_last_create_lists_after_the_next_and_is_fenced_in_a_hole() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let o = opts(remote.clone(), Some(Duration::ZERO));
    let a_remote = CutDeletes::new(remote.clone());
    let a = Store::open_with(
        root.path().join("a"),
        opts(a_remote.clone(), None).remote_retries(1),
    )
    .unwrap();
    let mut model = Model::new();
    cycle(&a, &mut model, 0);
    // A's next manifest is created, but A never learns it (its reply lost).
    let lost = a.stats().remote_manifest + 1;
    write_round(&a, &mut Model::new(), 120, 1);
    a_remote.lose_creates.store(true, Ordering::SeqCst);
    assert!(matches!(a.flush_remote(), Err(Error::Remote { .. })));
    a_remote.lose_creates.store(false, Ordering::SeqCst);
    // B claims the number after it, flushes twice and deletes what is replaced: `lost`, A's
    // but not its claim, is deleted, and the number is free again.
    let b = Store::open_with(root.path().join("b"), o).unwrap();
    assert_eq!(b.stats().remote_manifest, lost + 1);
    cycle(&b, &mut model, 2);
    cycle(&b, &mut model, 3);
    b.collect_remote_garbage().unwrap();
    let lost_name = format!("{PREFIX}/manifest/{lost:020}");
    assert!(remote.object(&lost_name).is_none());
    // A's next create takes `lost` in the hole; unsure of its last create, A lists after it,
    // finds B's newer manifest and is fenced: its flush is not acknowledged.
    let lists = a_remote.lists.load(Ordering::SeqCst);
    match a.flush_remote() {
        Err(Error::Fenced { manifest, .. }) => {
            assert_eq!(manifest, b.stats().remote_manifest)
        }
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert!(remote.object(&lost_name).is_some(), "created in the hole");
    assert!(
        a_remote.lists.load(Ordering::SeqCst) > lists,
        "A did not list"
    );
    assert!(matches!(a.put("k", "v"), Err(Error::Fenced { .. })));
    drop(a);
    // B's pass after its next manifest (A's stale one is dated after B's newest until then)
    // removes A's stale manifest and uploads; B's newest restores.
    cycle(&b, &mut model, 4);
    b.collect_remote_garbage().unwrap();
    assert!(remote.object(&lost_name).is_none());
    assert_only_the_newest_is_readable(&remote);
    drop(b);
    check_restore(remote, root.path(), "c", &model);
}

/// A remote whose deletions are refused (not transient: not retried) once `allowed` of them
/// were made; `allowed` negative: none refused. Counts the deletions asked of it, and every
/// call (what the store asks, apart from the test's own looks at the remote).
#[derive(Debug)]
struct CutDeletes {
    inner: Arc<MemoryRemote>,
    allowed: AtomicI64,
    asked: AtomicU64,
    calls: AtomicU64,
    /// Listings of `manifest/` asked of it.
    lists: AtomicU64,
    /// Creates carried out, then answered with a transient error (their reply lost).
    lose_creates: AtomicBool,
}

impl CutDeletes {
    fn new(inner: Arc<MemoryRemote>) -> Arc<CutDeletes> {
        Arc::new(CutDeletes {
            inner,
            allowed: AtomicI64::new(-1),
            asked: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            lists: AtomicU64::new(0),
            lose_creates: AtomicBool::new(false),
        })
    }
}

impl Remote for CutDeletes {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.put(name, body)
    }
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let done = self.inner.put_if_absent(name, bytes)?;
        if self.lose_creates.load(Ordering::SeqCst) {
            return Err(RemoteError::new(RemoteErrorKind::Transient, "reply lost"));
        }
        Ok(done)
    }
    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.get_range(name, range)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if prefix.ends_with("/manifest/") {
            self.lists.fetch_add(1, Ordering::SeqCst);
        }
        self.inner.list(prefix)
    }
    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.asked.fetch_add(1, Ordering::SeqCst);
        let left = self.allowed.load(Ordering::SeqCst);
        if left == 0 {
            return Err(RemoteError::new(RemoteErrorKind::Other, "delete refused"));
        }
        if left > 0 {
            self.allowed.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.delete(name)
    }
}

#[test]
fn deletions_cut_off_part_way_leave_a_prefix_that_restores() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let cut = CutDeletes::new(memory.clone());
    let store = Store::open_with(
        root.path().join("a"),
        opts(cut.clone(), Some(Duration::ZERO)),
    )
    .unwrap();
    let mut model = Model::new();
    // (The first flush replaces only the claim, kept for good: nothing to delete.)
    cycle(&store, &mut model, 0);
    for round in 1..5 {
        // The pass after this flush (the background thread's or the test's) is cut off after
        // 0, 1, 2 or 3 deletions, at a manifest or at a data object.
        cut.allowed.store(round as i64 - 1, Ordering::SeqCst);
        cycle(&store, &mut model, round);
        match store.collect_remote_garbage() {
            Err(Error::Remote { op, .. }) => assert_eq!(op, "remote: delete"),
            other => panic!("round {round}: expected a refused deletion, got {other:?}"),
        }
        cut.allowed.store(-1, Ordering::SeqCst);
        // Whatever was deleted, every manifest left names only whole objects, and the
        // newest restores every value.
        for m in readable(&memory).values() {
            named(&memory, m);
        }
        let name = format!("r{round}");
        check(
            &restore(copy(&memory), root.path(), &name).unwrap(),
            &model,
            &name,
        );
    }
    // Without refusals, one pass finishes the work.
    store.collect_remote_garbage().unwrap();
    assert_only_the_newest_is_readable(&memory);
    assert_eq!(manifests(&memory).len(), 2, "the claim stays");
    drop(store);
    check_restore(memory, root.path(), "last", &model);
}

#[test]
fn the_background_thread_deletes_after_a_flush_and_none_retention_deletes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let remote = Arc::new(MemoryRemote::new());
    let store = Store::open_with(
        root.path().join("a"),
        opts(remote.clone(), Some(Duration::ZERO)),
    )
    .unwrap();
    let mut model = Model::new();
    cycle(&store, &mut model, 0);
    cycle(&store, &mut model, 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while readable(&remote).len() > 1 || manifests(&remote).len() > 2 {
        assert!(std::time::Instant::now() < deadline, "no deletion");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(store);

    let kept = Arc::new(MemoryRemote::new());
    let store = Store::open_with(root.path().join("k"), opts(kept.clone(), None)).unwrap();
    cycle(&store, &mut Model::new(), 0);
    cycle(&store, &mut Model::new(), 1);
    let report = store.collect_remote_garbage().unwrap();
    assert_eq!(report, podstore::RemoteGcReport::default());
    assert_eq!(kept.deletes(), 0);
}

/// A remote whose deletions each take `DELETE_WAIT`, and whose next listing of the manifests,
/// once armed, says so on `listing` and then takes `LIST_WAIT`: a deletion pass under way
/// while a flush comes.
struct SlowPass {
    inner: Arc<MemoryRemote>,
    armed: AtomicBool,
    listing: Mutex<Option<std::sync::mpsc::Sender<()>>>,
}

const DELETE_WAIT: Duration = Duration::from_millis(150);
const LIST_WAIT: Duration = Duration::from_millis(300);

impl std::fmt::Debug for SlowPass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SlowPass")
    }
}

impl Remote for SlowPass {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.inner.put(name, body)
    }
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.inner.put_if_absent(name, bytes)
    }
    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.inner.get_range(name, range)
    }
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        if prefix.ends_with("/manifest/") && self.armed.swap(false, Ordering::SeqCst) {
            if let Some(tx) = self.listing.lock().unwrap().take() {
                tx.send(()).unwrap();
            }
            std::thread::sleep(LIST_WAIT);
        }
        self.inner.list(prefix)
    }
    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        std::thread::sleep(DELETE_WAIT);
        self.inner.delete(name)
    }
}

#[test]
fn a_deletion_pass_gives_way_to_a_flush() {
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let (tx, listing) = std::sync::mpsc::channel();
    let remote = Arc::new(SlowPass {
        inner: memory.clone(),
        armed: AtomicBool::new(false),
        listing: Mutex::new(Some(tx)),
    });
    // An hour's retention: the background's pass after the open finds nothing old, and the
    // next is a minute away; the remote's clock then makes the first manifests old.
    let o = opts(remote.clone(), Some(Duration::from_secs(3600)));
    let store = Arc::new(Store::open_with(root.path().join("a"), o).unwrap());
    let mut model = Model::new();
    for round in 0..3 {
        cycle(&store, &mut model, round);
    }
    memory.advance_clock(Duration::from_secs(7200));
    store.put("late", "v").unwrap();
    model.insert(b"late".to_vec(), Some(b"v".to_vec()));
    store.flush_remote().unwrap();
    remote.armed.store(true, Ordering::SeqCst);
    let collector = store.clone();
    let pass = std::thread::spawn(move || collector.collect_remote_garbage().unwrap());
    // A pass is listing the manifests (the tier locked; the background's may be the one): a
    // flush comes, and waits.
    listing.recv().unwrap();
    store.put("during", "the pass").unwrap();
    model.insert(b"during".to_vec(), Some(b"the pass".to_vec()));
    let deletes = memory.deletes();
    store.flush_remote().unwrap();
    // The pass gave way before its deletions (at most one under way when the flush came
    // finishes first): without it, the flush waited for both old manifests' deletions and
    // their objects'.
    let during = memory.deletes() - deletes;
    assert!(during <= 1, "{during} deletions while the flush waited");
    pass.join().unwrap();
    // The passes after it (the call's, the background's) delete what is old.
    store.collect_remote_garbage().unwrap();
    let ms = manifests(&memory);
    assert!(
        !ms.contains_key(&2) && !ms.contains_key(&3),
        "{:?}",
        ms.keys()
    );
    drop(store);
    check_restore(memory, root.path(), "b", &model);
}
