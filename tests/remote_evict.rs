//! The local disk as a cache of the remote (issue 38, phase 2) on the in-memory remote: files
//! evicted past `Options::remote_local_budget` read back byte for byte, one ranged GET per
//! value; a 4 KiB range of a large evicted value fetches at most 8 KiB; a damaged object and an
//! unreachable remote give typed errors; a reopen downloads no data; compaction and the size
//! cap on a store with evicted files.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use podstore::remote::RemoteErrorKind;
use podstore::remote::{MemoryRemote, ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError};
use podstore::{Error, Options, Store};

const PREFIX: &str = "tenant/store";

/// A remote that counts the ranged GETs of data objects (not manifests) and their bytes, can
/// be cut off, and can hold GETs until a number of them are in flight together
/// ([`Counting::gather`]).
#[derive(Debug)]
struct Counting {
    inner: Arc<MemoryRemote>,
    gets: AtomicU64,
    bytes: AtomicU64,
    down: AtomicBool,
    /// Data GETs to wait for (0: none): each waits, up to [`GATHER_WAIT`], until this many
    /// have arrived since [`Counting::gather`].
    gather: AtomicU64,
    arrived: AtomicU64,
    /// GETs that gave up waiting: the others never came while they waited.
    alone: AtomicU64,
}

/// How long a held GET waits for the others: GETs made one after the other never meet.
const GATHER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Counting {
    fn new(inner: Arc<MemoryRemote>) -> Arc<Counting> {
        Arc::new(Counting {
            inner,
            gets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            down: AtomicBool::new(false),
            gather: AtomicU64::new(0),
            arrived: AtomicU64::new(0),
            alone: AtomicU64::new(0),
        })
    }

    /// From now on, each data GET waits until `n` have arrived (0: no waiting).
    fn gather(&self, n: u64) {
        self.arrived.store(0, Ordering::SeqCst);
        self.alone.store(0, Ordering::SeqCst);
        self.gather.store(n, Ordering::SeqCst);
    }

    /// Holds a data GET as [`Counting::gather`] asks.
    fn wait_for_others(&self) {
        let n = self.gather.load(Ordering::SeqCst);
        if n == 0 {
            return;
        }
        self.arrived.fetch_add(1, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + GATHER_WAIT;
        while self.arrived.load(Ordering::SeqCst) < n {
            if std::time::Instant::now() >= deadline {
                self.alone.fetch_add(1, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    fn counts(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::SeqCst),
            self.bytes.load(Ordering::SeqCst),
        )
    }

    fn check_up(&self) -> Result<(), RemoteError> {
        if self.down.load(Ordering::SeqCst) {
            return Err(RemoteError::new(RemoteErrorKind::Other, "unreachable"));
        }
        Ok(())
    }
}

impl Remote for Counting {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.check_up()?;
        self.inner.put(name, body)
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.check_up()?;
        self.inner.put_if_absent(name, bytes)
    }

    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.check_up()?;
        if name.contains("/data/") {
            self.wait_for_others();
        }
        let got = self.inner.get_range(name, range)?;
        if name.contains("/data/") {
            self.gets.fetch_add(1, Ordering::SeqCst);
            self.bytes.fetch_add(got.len() as u64, Ordering::SeqCst);
        }
        Ok(got)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.check_up()?;
        self.inner.list(prefix)
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.check_up()?;
        self.inner.delete(name)
    }
}

/// Small segments, no cache (every get reads its file), no warm-up, no flush but the test's,
/// every sealed file's data evicted once a manifest names it.
fn opts(remote: Arc<dyn Remote>) -> Options {
    common::store::small()
        .cache_capacity(0)
        .warm_cache(false)
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
        .remote_retries(2)
        .remote_local_budget(Some(0))
}

fn key(k: u64) -> Vec<u8> {
    format!("key/{k:05}").into_bytes()
}

fn value(k: u64) -> Vec<u8> {
    // Every tenth a blob file of its own (1 MiB and more); the others 1-9 KiB in segments.
    let len = if k % 10 == 3 {
        (1 << 20) + 5000 + k as usize * 13
    } else {
        1024 + (k as usize * 7919) % 8192
    };
    (0..len).map(|i| (i as u64 ^ (k * 31)) as u8).collect()
}

/// A store with `n` keys, flushed to the remote and evicted.
fn written(
    remote: Arc<dyn Remote>,
    dir: &std::path::Path,
    n: u64,
) -> (Store, BTreeMap<Vec<u8>, Vec<u8>>) {
    let store = Store::open_with(dir, opts(remote)).unwrap();
    let mut model = BTreeMap::new();
    for k in 0..n {
        store.put(key(k), value(k)).unwrap();
        model.insert(key(k), value(k));
    }
    store.flush_remote().unwrap();
    (store, model)
}

#[test]
fn evicted_values_read_back_byte_for_byte_each_with_one_ranged_get() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    let (store, model) = written(remote.clone(), dir.path(), 400);
    let s = store.stats();
    assert!(s.remote_only_files >= 10, "{s:?}");
    assert!(
        s.local_bytes * 20 < s.disk_bytes,
        "local {} of {} bytes",
        s.local_bytes,
        s.disk_bytes
    );
    assert_eq!(s.remote_only_bytes + s.local_bytes, s.disk_bytes);
    let (mut one, mut none) = (0, 0);
    for (k, v) in &model {
        let (before, stat_before) = (remote.counts(), store.stats().remote_gets);
        let got = store.get(k).unwrap().expect("present");
        assert!(got == *v, "key {}", String::from_utf8_lossy(k));
        let gets = remote.counts().0 - before.0;
        assert_eq!(store.stats().remote_gets - stat_before, gets);
        assert!(gets <= 1, "key {}: {gets} GETs", String::from_utf8_lossy(k));
        if v.len() > 1 << 20 {
            assert_eq!(gets, 1, "a blob's value: one GET");
        }
        if gets == 1 { one += 1 } else { none += 1 }
    }
    // Only the records in the first 8 KiB of a file (kept locally) read without a GET.
    assert!(none * 10 < one, "{one} gets with a GET, {none} without");
}

#[test]
fn a_4_kib_range_of_an_evicted_large_value_is_one_get_of_at_most_8_kib() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    let store = Store::open_with(dir.path(), opts(remote.clone())).unwrap();
    let big: Vec<u8> = (0..(100u64 << 20))
        .map(|i| (i * 7 + i / 4093) as u8)
        .collect();
    store.put("big", &big).unwrap();
    store.flush_remote().unwrap();
    assert_eq!(store.stats().remote_only_files, 1);
    // The file keeps its length; its data's disk space is given back.
    // (The largest blob file: others are empty ones reserved ahead.)
    let blob = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("blob-")
        })
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .expect("the blob file");
    let meta = std::fs::metadata(&blob).unwrap();
    assert!(
        meta.len() > 100 << 20,
        "{} bytes: {}",
        meta.len(),
        blob.display()
    );
    {
        use std::os::unix::fs::MetadataExt;
        assert!(
            meta.blocks() * 512 < 1 << 20,
            "{} bytes allocated",
            meta.blocks() * 512
        );
    }
    for start in [
        0u64,
        1,
        4095,
        4096,
        12_345_678,
        (100 << 20) - 4096,
        77 << 20,
    ] {
        let before = remote.counts();
        let got = store
            .get_range("big", start..start + 4096)
            .unwrap()
            .unwrap();
        assert!(
            got == big[start as usize..start as usize + 4096],
            "at {start}"
        );
        let (gets, bytes) = (remote.counts().0 - before.0, remote.counts().1 - before.1);
        // The first 8 KiB of the file (header, key, the value's first chunk) and its last
        // blocks (crc table, footer, the last chunks before them) stay local.
        let middle = start >= 8192 && start + 4096 < (100 << 20) - 8192;
        assert!(gets <= 1, "at {start}: {gets} GETs");
        if middle {
            assert_eq!(gets, 1, "at {start}");
        }
        assert!(bytes <= 8192, "at {start}: {bytes} bytes fetched");
    }
    // The whole value: one GET of its data.
    let before = remote.counts();
    assert!(store.get("big").unwrap().unwrap() == big);
    assert_eq!(remote.counts().0 - before.0, 1);
}

#[test]
fn a_damaged_remote_object_is_a_corruption_error_never_data() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = Counting::new(memory.clone());
    let (store, model) = written(remote, dir.path(), 40);
    // Flip a byte in the middle of every data object: every value read from one fails.
    let mut damaged = 0;
    for name in memory.names().into_iter().filter(|n| n.contains("/data/")) {
        let mut bytes = memory.object(&name).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 0x40;
        memory.set_object(&name, bytes);
        damaged += 1;
    }
    assert!(damaged > 0);
    let mut refused = 0;
    for (k, v) in &model {
        match store.get(k) {
            Ok(got) => assert!(got.as_deref() == Some(&v[..]), "wrong bytes returned"),
            Err(e) => {
                assert!(e.is_corruption(), "{e:?}");
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "no read met the damage");
}

/// `len` bytes no other value of a test shares (no window of them repeats elsewhere).
fn noise(seed: u64, len: usize) -> Vec<u8> {
    use common::Random;
    common::SplitMix::new(seed).bytes(len)
}

/// The data object holding `needle` in its evicted span (past the first 16 KiB, before its
/// last 128 KiB: the bytes an evicted file's local copy no longer holds), and where.
fn object_holding(memory: &MemoryRemote, needle: &[u8]) -> (String, usize) {
    for name in memory.names().into_iter().filter(|n| n.contains("/data/")) {
        let bytes = memory.object(&name).unwrap();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle)
            && at >= 16 << 10
            && at + needle.len() + (128 << 10) <= bytes.len()
        {
            return (name, at);
        }
    }
    panic!("no data object holds those bytes in its evicted span");
}

/// Flips one bit of object `name` at `at` (as bit rot in the bucket would).
fn flip(memory: &MemoryRemote, name: &str, at: usize) {
    let mut bytes = memory.object(name).unwrap();
    bytes[at] ^= 0x10;
    memory.set_object(name, bytes);
}

/// The error of `result`: [`Error::RemoteCorruption`] naming `object`.
fn assert_remote_corruption<T>(result: podstore::Result<T>, object: &str) {
    match result {
        Err(ref e @ Error::RemoteCorruption { object: ref o, .. }) => {
            assert_eq!(o, object, "{e}");
            assert!(e.is_corruption());
        }
        other => panic!(
            "expected RemoteCorruption naming {object}, got {:?}",
            other.map(|_| "a value")
        ),
    }
}

#[test]
fn a_damaged_object_is_remote_corruption_naming_it_and_its_undamaged_chunks_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let store = Store::open_with(dir.path(), opts(memory.clone())).unwrap();
    // Log segments of 1 MiB: 8 KiB values fill several; one 1 MiB value in a blob file.
    let small: Vec<(Vec<u8>, Vec<u8>)> = (0..300).map(|k| (key(k), noise(k, 8 << 10))).collect();
    for (k, v) in &small {
        store.put(k, v).unwrap();
    }
    let big = noise(1000, 1 << 20);
    store.put("big", &big).unwrap();
    store.flush_remote().unwrap();
    assert!(store.stats().remote_only_files >= 3, "{:?}", store.stats());

    // A value in a log segment's object: one bit of its second chunk flipped.
    let (victim, others) = small.split_at(100);
    let (vk, vv) = victim.last().unwrap();
    let (seg, at) = object_holding(&memory, &vv[..64]);
    assert!(seg.contains("seg-"), "{seg}");
    flip(&memory, &seg, at + 4096 + 5);
    assert_remote_corruption(store.get(vk), &seg);
    assert_remote_corruption(store.get_range(vk, 5000..5010), &seg);
    let mut stream = store.reader(vk).unwrap().unwrap();
    let mut buf = Vec::new();
    let err = std::io::Read::read_to_end(&mut stream, &mut buf).unwrap_err();
    let inner = err.into_inner().unwrap().downcast::<Error>().unwrap();
    assert_remote_corruption(Err::<(), _>(*inner), &seg);
    // Its undamaged chunks, and the other values of that object, still read.
    assert_eq!(store.get_range(vk, 0..4096).unwrap().unwrap(), vv[..4096]);
    // (The values written right after it, most of them in the same segment.)
    let seg_bytes = memory.object(&seg).unwrap();
    let mut same_object = 0;
    for (k, v) in &others[..10] {
        if seg_bytes.windows(64).any(|w| w == &v[..64]) {
            same_object += 1;
            assert!(store.get(k).unwrap().unwrap() == *v);
            assert_eq!(
                store.get_range(k, 100..4196).unwrap().unwrap(),
                v[100..4196]
            );
        }
    }
    assert!(same_object > 0, "no other value in {seg}");

    // The 1 MiB value's blob file: one bit of a chunk in its middle flipped.
    let (blob, at) = object_holding(&memory, &big[(512 << 10)..(512 << 10) + 64]);
    assert!(blob.contains("blob-"), "{blob}");
    flip(&memory, &blob, at + 100);
    assert_remote_corruption(store.get("big"), &blob);
    assert_remote_corruption(store.get_range("big", (512 << 10)..(512 << 10) + 10), &blob);
    // A 4 KiB range of one of its other chunks (remote too), and every other value, still read.
    let r = (256 << 10)..(260 << 10);
    assert_eq!(store.get_range("big", r.clone()).unwrap().unwrap(), big[r]);
    for (k, v) in others.iter().step_by(20) {
        assert!(store.get(k).unwrap().unwrap() == *v);
    }
    // Compaction of the damaged segment (every other value deleted) leaves it in place,
    // reported damaged, as a damaged local segment is.
    for (k, _) in small.iter().filter(|(k, _)| k != vk) {
        store.delete(k).unwrap();
    }
    let report = store.compact().unwrap();
    assert_eq!(report.damaged_segments.len(), 1, "{report:?}");
    assert!(
        seg.ends_with(&format!("{:016x}.pod", report.damaged_segments[0])),
        "{report:?}"
    );
    assert_remote_corruption(store.get(vk), &seg);
    store.close().unwrap();
}

#[test]
fn a_reopened_store_reads_no_data_at_open_and_every_value_after() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    let (store, model) = written(remote.clone(), dir.path(), 200);
    let evicted = store.stats().remote_only_files;
    assert!(evicted > 0);
    let local = store.stats().local_bytes;
    drop(store);
    let before = remote.counts();
    let store = Store::open_with(dir.path(), opts(remote.clone())).unwrap();
    assert_eq!(remote.counts(), before, "open fetched data");
    let s = store.stats();
    assert_eq!(s.remote_only_files, evicted);
    assert!(
        s.local_bytes <= local + (64 << 10),
        "{} > {local}",
        s.local_bytes
    );
    for (k, v) in &model {
        assert!(store.get(k).unwrap().as_deref() == Some(&v[..]));
    }
    // A flush after the reopen names the evicted files again without reading them.
    let before = remote.counts();
    store.put("new", "value").unwrap();
    let flushed = store.flush_remote().unwrap();
    assert_eq!(remote.counts(), before, "the flush read evicted data");
    assert_eq!(flushed.files_uploaded, 1, "{flushed:?}");
    drop(store);
    // And a restore from the remote alone has everything.
    let other = tempfile::tempdir().unwrap();
    let restored = Store::open_with(other.path().join("r"), opts(remote)).unwrap();
    for (k, v) in &model {
        assert!(restored.get(k).unwrap().as_deref() == Some(&v[..]));
    }
}

#[test]
fn an_unreachable_remote_fails_reads_of_evicted_values_by_type_and_serves_local_ones() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    let (store, model) = written(remote.clone(), dir.path(), 100);
    store.put("local", "still here").unwrap();
    remote.down.store(true, Ordering::SeqCst);
    let mut failed = 0;
    for k in model.keys() {
        match store.get(k) {
            Ok(got) => assert!(got.as_deref() == Some(&model[k][..])),
            Err(Error::Remote { object, .. }) => {
                assert!(object.starts_with(&format!("{PREFIX}/data/")), "{object}");
                failed += 1;
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(failed * 2 > model.len(), "{failed} of {}", model.len());
    assert_eq!(
        store.get("local").unwrap().as_deref(),
        Some(&b"still here"[..])
    );
    remote.down.store(false, Ordering::SeqCst);
    for (k, v) in &model {
        assert!(store.get(k).unwrap().as_deref() == Some(&v[..]));
    }
}

#[test]
fn compaction_of_evicted_segments_fetches_only_live_records_and_keeps_every_value() {
    const N: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = Counting::new(memory.clone());
    let opts = |remote| opts(remote).remote_retention(Some(std::time::Duration::ZERO));
    let store = Store::open_with(dir.path(), opts(remote.clone())).unwrap();
    let mut model = BTreeMap::new();
    // Small values in one batch (one sync), large ones alone (a blob file each).
    let mut batch = podstore::Batch::new();
    for k in 0..N {
        if k % 10 == 3 {
            store.put(key(k), value(k)).unwrap();
        } else {
            batch.put(key(k), value(k));
        }
        model.insert(key(k), value(k));
    }
    store.write(&batch).unwrap();
    store.flush_remote().unwrap();
    let evicted = store.stats().remote_only_files;
    let evicted_bytes = store.stats().remote_only_bytes;
    assert!(evicted > 3, "{evicted}");
    // Overwrite and delete two keys in three: the evicted segments are mostly dead. The
    // values left in them: keys 2, 5, 8, ... that are not blobs.
    let mut batch = podstore::Batch::new();
    for k in 0..N {
        if k % 3 == 0 {
            batch.delete(key(k));
            model.remove(&key(k));
        } else if k % 3 == 1 {
            let v = vec![k as u8; 500];
            batch.put(key(k), &v);
            model.insert(key(k), v);
        }
    }
    store.write(&batch).unwrap();
    let live: Vec<u64> = (0..N).filter(|k| k % 3 == 2 && k % 10 != 3).collect();
    let live_bytes: u64 = live.iter().map(|&k| value(k).len() as u64).sum();
    // (Overwrites whose older record is evicted are resolved by reading its header: settled
    // first, so that what compaction fetches is counted alone.)
    let _ = store.stats();
    let before = remote.counts();
    let report = store.compact().unwrap();
    let (gets, bytes) = (remote.counts().0 - before.0, remote.counts().1 - before.1);
    println!(
        "compaction of {evicted} evicted files ({evicted_bytes} bytes in the remote): {gets} \
         GETs, {bytes} bytes for {} live records of {live_bytes} bytes; {report:?}",
        live.len()
    );
    // The evicted log segments were compacted: at most one GET per live record, fetching the
    // records (headers and keys besides values), not the files.
    assert!(report.segments_compacted > 0, "{report:?}");
    assert!(gets > 0 && gets <= live.len() as u64, "{gets} GETs");
    assert!(
        bytes < live_bytes + live.len() as u64 * 256,
        "{bytes} bytes"
    );
    let s = store.stats();
    assert!(s.remote_only_files < evicted, "{s:?}");
    for (k, v) in &model {
        assert!(store.get(k).unwrap().as_deref() == Some(&v[..]));
    }
    for k in (0..N).step_by(3) {
        assert_eq!(store.get(key(k)).unwrap(), None);
    }
    // The next flush no longer names the compacted files: their objects are deleted.
    store.flush_remote().unwrap();
    store.collect_remote_garbage().unwrap();
    assert!(store.stats().remote_deleted_objects >= report.segments_compacted as u64);
    drop(store);
    let store = Store::open_with(dir.path(), opts(remote.clone())).unwrap();
    for (k, v) in &model {
        assert!(store.get(k).unwrap().as_deref() == Some(&v[..]));
    }
    assert_eq!(store.len(), model.len());
    drop(store);
    // And a restore elsewhere from what is left has every value.
    let other = tempfile::tempdir().unwrap();
    let store = Store::open_with(other.path().join("r"), opts(memory)).unwrap();
    for (k, v) in &model {
        assert!(store.get(k).unwrap().as_deref() == Some(&v[..]));
    }
}

#[test]
fn the_size_cap_drops_evicted_files_whole_without_fetching_them() {
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    // Compaction only of wholly dead segments: compacting evicted segments fetches their live
    // records (tested above); what is checked here is that the cap fetches nothing.
    let capped = || {
        opts(remote.clone())
            .size_cap(Some(8 << 20))
            .compaction_threshold(1.0)
    };
    let store = Store::open_with(dir.path(), capped()).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..6u64 {
        for k in round * 40..(round + 1) * 40 {
            store.put(key(k), value(k)).unwrap();
            model.insert(key(k), value(k));
        }
        store.flush_remote().unwrap();
    }
    let _ = store.stats();
    let before = remote.counts();
    store.compact().unwrap();
    assert_eq!(remote.counts().0, before.0, "the cap fetched evicted data");
    let s = store.stats();
    assert!(s.evicted_files > 0 && s.remote_only_files > 0, "{s:?}");
    assert!(s.disk_bytes <= 8 << 20, "{s:?}");
    // Every key reads its value or nothing (dropped by the cap), never other bytes; the
    // newest round is whole.
    let check = |store: &Store| {
        for (k, v) in &model {
            if let Some(got) = store.get(k).unwrap() {
                assert!(got == *v, "key {}", String::from_utf8_lossy(k));
            }
        }
        for k in 200..240 {
            assert!(
                store.get(key(k)).unwrap().is_some(),
                "key {k} of the last round"
            );
        }
    };
    check(&store);
    drop(store);
    check(&Store::open_with(dir.path(), capped()).unwrap());
}

#[test]
fn a_restore_with_a_budget_reads_footers_only_and_serves_every_value() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let remote = Counting::new(memory.clone());
    let (store, model) = written(remote.clone(), &dir.path().join("a"), 300);
    let files = (store.stats().log_segments + store.stats().blob_files) as u64;
    drop(store);
    let stored: u64 = memory
        .names()
        .iter()
        .filter(|n| n.contains("/data/"))
        .map(|n| memory.object(n).unwrap().len() as u64)
        .sum();
    let before = remote.counts();
    let restored = Store::open_with(dir.path().join("b"), opts(remote.clone())).unwrap();
    let (gets, bytes) = (remote.counts().0 - before.0, remote.counts().1 - before.1);
    let s = restored.stats();
    assert_eq!(s.remote_only_files, files, "{s:?}");
    // Three ranged reads per file (trailer, head, end); a few per cent of the bytes with these
    // small (1 MiB) segments: docs/benchmarks.md measures larger ones.
    assert_eq!(gets, 3 * files);
    assert!(bytes * 100 < 5 * stored, "{bytes} of {stored} bytes read");
    assert_eq!(s.remote_gets, 0, "open read data");
    for (k, v) in &model {
        let before = remote.counts().0;
        assert!(restored.get(k).unwrap().as_deref() == Some(&v[..]));
        assert!(remote.counts().0 - before <= 1);
    }
    println!(
        "restore: {bytes} of {stored} bytes read ({:.2} %), {gets} GETs for {files} files",
        100.0 * bytes as f64 / stored as f64
    );
}

#[test]
fn values_over_64_kib_in_evicted_log_segments_get_in_one_get_and_range_in_one_or_three() {
    // What puts a value in a log segment: below `large_value_threshold` (1 MiB by default;
    // 2 MiB here, so that a 1 MiB value is in one) with `Durability::Sync`. The store's read
    // cache is on (32 MiB): "cold" is each value's first read since open.
    let dir = tempfile::tempdir().unwrap();
    let remote = Counting::new(Arc::new(MemoryRemote::new()));
    let o = opts(remote.clone())
        .segment_size(8 << 20)
        .large_value_threshold(2 << 20)
        .cache_capacity(32 << 20);
    let store = Store::open_with(dir.path(), o.clone()).unwrap();
    // Fillers around them: no measured record in the locally kept head or crc tables.
    let filler = noise(99, 64 << 10);
    let sizes = [100usize << 10, 1 << 20, 100 << 10, 1 << 20];
    let values: Vec<Vec<u8>> = (0..4).map(|i| noise(i as u64, sizes[i])).collect();
    store.put("filler/a", &filler).unwrap();
    for (i, v) in values.iter().enumerate() {
        store.put(key(i as u64), v).unwrap();
    }
    store.put("filler/b", &filler).unwrap();
    store.flush_remote().unwrap();
    store.close().unwrap();
    let store = Store::open_with(dir.path(), o).unwrap();
    let s = store.stats();
    assert_eq!(s.remote_only_files, 1, "one log segment, evicted: {s:?}");
    let blobs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            let name = name.to_string_lossy();
            name.starts_with("blob-")
                && std::fs::metadata(e.as_ref().unwrap().path()).unwrap().len() > 0
        })
        .count();
    assert_eq!(blobs, 0, "no value in a blob file");
    let counts = |store: &Store| {
        let s = store.stats();
        (s.remote_gets, s.remote_get_bytes)
    };
    // A cold get: the record whole (header, key, value, crcs) in one GET.
    for i in [0, 1] {
        let before = counts(&store);
        assert!(store.get(key(i)).unwrap().unwrap() == values[i as usize]);
        let (gets, bytes) = (counts(&store).0 - before.0, counts(&store).1 - before.1);
        assert_eq!(gets, 1, "get of {} bytes", sizes[i as usize]);
        assert!(bytes < sizes[i as usize] as u64 + 8192, "{bytes} bytes");
    }
    // A cold 4 KiB range in the middle: the record's header and key (its key is checked), the
    // range's chunks and their crcs (at the record's end), read together. A 100 KiB record's
    // three places are less than 64 KiB apart: one GET of the record. A 1 MiB record's are
    // half a MiB apart: three GETs of about 4 KiB each (one would fetch the whole record),
    // in flight together: one round trip (each GET is held here until all three have
    // arrived; made one after the other, each would wait alone). A blob file keeps its header
    // and crc table locally (one GET: the test above); a log segment's evicted span holds its
    // records' headers and crc tables.
    for (i, most_bytes) in [(2u64, 110 << 10), (3, 12 << 10)] {
        let v = &values[i as usize];
        let mid = v.len() as u64 / 2 + 1000;
        let want = if v.len() < 128 << 10 { 1 } else { 3 };
        let before = counts(&store);
        remote.gather(want);
        let got = store.get_range(key(i), mid..mid + 4096).unwrap().unwrap();
        let alone = remote.alone.load(Ordering::SeqCst);
        remote.gather(0);
        assert!(got == v[mid as usize..mid as usize + 4096]);
        let (gets, bytes) = (counts(&store).0 - before.0, counts(&store).1 - before.1);
        assert_eq!(gets, want, "range of a value of {} bytes", v.len());
        assert_eq!(
            alone, 0,
            "the GETs of one range were made one after the other"
        );
        assert!(bytes <= most_bytes, "{bytes} bytes");
    }
    store.close().unwrap();
}
