//! The adapter on object_store's `InMemory` and `LocalFileSystem`, and on a real S3 server on
//! 127.0.0.1 (s3s-fs, through `AmazonS3Builder`): flush then restore into an empty directory,
//! multipart uploads of large files, the conditional create that fences, deletion in the
//! remote.

mod common;

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use podstore::remote::{PutOutcome, Remote, RemoteErrorKind};
use podstore::{Error, Options, Store};
use podstore_remote::ObjectStoreRemote;

use common::s3::{self, S3Server};

/// Each backend, by name.
type Backends = Vec<(&'static str, Arc<dyn ObjectStore>)>;

/// The backends, and the S3 server (serving while it is kept).
fn backends(root: &std::path::Path) -> (Backends, S3Server) {
    let bucket = root.join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let s3 = S3Server::start(&root.join("s3"));
    let backends = vec![
        (
            "in-memory",
            Arc::new(InMemory::new()) as Arc<dyn ObjectStore>,
        ),
        (
            "local",
            Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap()),
        ),
        ("s3", s3.store()),
    ];
    (backends, s3)
}

fn opts(remote: Arc<dyn Remote>) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .remote(remote, "apps/one")
        .remote_flush_interval(None)
}

fn value(k: u32) -> Vec<u8> {
    // Key 7 is a 12 MiB blob: uploaded in parts of 5 MiB (three parts, the last short).
    let len = if k == 7 {
        12 << 20
    } else {
        500 + (k as usize * 131) % 9000
    };
    (0..len)
        .map(|i| (i as u32 ^ k.wrapping_mul(97)) as u8)
        .collect()
}

#[test]
fn flush_then_restore_through_object_store_backends() {
    let root = tempfile::tempdir().unwrap();
    let (backends, _s3) = backends(root.path());
    for (name, bucket) in backends {
        let remote = Arc::new(
            ObjectStoreRemote::new(bucket)
                .unwrap()
                .with_part_size(5 << 20),
        );
        let a = root.path().join(format!("{name}-a"));
        let store = Store::open_with(&a, opts(remote.clone())).unwrap();
        for k in 0..300 {
            store.put(format!("k{k}"), value(k)).unwrap();
        }
        for k in (0..300).step_by(5) {
            store.delete(format!("k{k}")).unwrap();
        }
        let flushed = store.flush_remote().unwrap();
        // (The background thread may have uploaded some of them before the flush.)
        let uploaded = store.stats().remote_uploaded_files;
        assert!(
            flushed.files >= 2 && uploaded >= 2,
            "{name}: {flushed:?}, {uploaded}"
        );
        drop(store);

        let b = root.path().join(format!("{name}-b"));
        let restored = Store::open_with(&b, opts(remote.clone())).unwrap();
        for k in 0..300 {
            let got = restored.get(format!("k{k}")).unwrap();
            let want = (k % 5 != 0).then(|| value(k));
            assert!(got == want, "{name}: key k{k}");
        }
        assert!(restored.verify().unwrap().is_clean(), "{name}");
        // The large file went up in parts and came back whole.
        assert!(std::fs::read_dir(&b).unwrap().any(|e| {
            let e = e.unwrap();
            e.file_name().to_string_lossy().starts_with("blob-")
                && e.metadata().unwrap().len() > 12 << 20
        }));
        if name == "s3" {
            // Through the server: its directory holds the bucket's objects.
            let served = root
                .path()
                .join("s3")
                .join(s3::BUCKET)
                .join("apps/one/manifest");
            assert!(
                std::fs::read_dir(&served).unwrap().count() >= 2,
                "{served:?}"
            );
        }
        // The restored store took the prefix: the first is fenced now.
        drop(restored);
        let first = Store::open_with(&a, opts(remote.clone()));
        // Reopening the first directory takes it back (its local files are intact).
        let first = first.unwrap();
        first.put("again", "x").unwrap();
        first.flush_remote().unwrap();
    }
}

#[test]
fn the_conditional_create_lets_one_writer_win() {
    let root = tempfile::tempdir().unwrap();
    let (backends, _s3) = backends(root.path());
    for (name, bucket) in backends {
        let remote = ObjectStoreRemote::new(bucket).unwrap();
        assert_eq!(
            remote.put_if_absent("p/manifest/1", b"first").unwrap(),
            PutOutcome::Created,
            "{name}"
        );
        assert_eq!(
            remote.put_if_absent("p/manifest/1", b"second").unwrap(),
            PutOutcome::AlreadyExists,
            "{name}"
        );
        assert_eq!(remote.get_range("p/manifest/1", 1..4).unwrap(), b"irs");
        let listed = remote.list("p/manifest/").unwrap();
        assert_eq!(listed.len(), 1, "{name}");
        assert_eq!(
            (listed[0].name.as_str(), listed[0].size),
            ("p/manifest/1", 5)
        );
        assert!(
            remote.list("p/man").unwrap().len() == 1,
            "{name}: a partial segment"
        );
        assert!(remote.list("q/").unwrap().is_empty(), "{name}");
        let missing = remote.get_range("p/none", 0..1).unwrap_err();
        assert_eq!(missing.kind(), RemoteErrorKind::NotFound, "{name}");
        remote.delete("p/manifest/1").unwrap();
        remote.delete("p/manifest/1").unwrap();
        assert!(remote.list("p/").unwrap().is_empty(), "{name}");
    }
}

#[test]
fn racing_creates_of_one_name_let_exactly_one_win() {
    // Two clients (each its own adapter and connections) create the same names at the same
    // instant: on every backend exactly one gets `Created`, and the object holds its bytes.
    let root = tempfile::tempdir().unwrap();
    let (backends, _s3) = backends(root.path());
    for (name, bucket) in backends {
        let writers: Vec<_> = (0..2)
            .map(|_| Arc::new(ObjectStoreRemote::new(bucket.clone()).unwrap()))
            .collect();
        for race in 0..40 {
            let object = format!("race/{race}");
            let barrier = Arc::new(std::sync::Barrier::new(writers.len()));
            let racers: Vec<_> = writers
                .iter()
                .enumerate()
                .map(|(w, remote)| {
                    let (remote, object, barrier) =
                        (remote.clone(), object.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        let outcome =
                            remote.put_if_absent(&object, format!("writer {w}").as_bytes());
                        (w, outcome.unwrap())
                    })
                })
                .collect();
            let outcomes: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
            let won: Vec<_> = outcomes
                .iter()
                .filter(|(_, o)| *o == PutOutcome::Created)
                .map(|(w, _)| *w)
                .collect();
            assert_eq!(won.len(), 1, "{name}, race {race}: {outcomes:?}");
            let held = writers[0].get_range(&object, 0..8).unwrap();
            assert_eq!(held, format!("writer {}", won[0]).as_bytes(), "{name}");
        }
    }
}

#[test]
fn a_stale_writer_is_fenced_through_the_adapter() {
    let root = tempfile::tempdir().unwrap();
    let (backends, _s3) = backends(root.path());
    for (name, bucket) in backends {
        let remote = Arc::new(ObjectStoreRemote::new(bucket).unwrap());
        let first =
            Store::open_with(root.path().join(format!("{name}-a")), opts(remote.clone())).unwrap();
        first.put("k", "v1").unwrap();
        first.flush_remote().unwrap();
        let second =
            Store::open_with(root.path().join(format!("{name}-b")), opts(remote.clone())).unwrap();
        assert_eq!(
            second.get("k").unwrap().as_deref(),
            Some(&b"v1"[..]),
            "{name}"
        );
        assert!(
            matches!(first.flush_remote(), Err(Error::Fenced { .. })),
            "{name}"
        );
        assert!(
            matches!(first.put("k", "v2"), Err(Error::Fenced { .. })),
            "{name}"
        );
        // The winner goes on writing.
        second.put("k", "v3").unwrap();
        second.flush_remote().unwrap();
    }
}

#[test]
fn the_s3_server_checks_signatures_and_a_refused_key_is_not_retried() {
    // The server is a real one: a client with the wrong secret is refused (403), which the
    // adapter reports as a failure the store does not retry, and open fails with it.
    let root = tempfile::tempdir().unwrap();
    let server = S3Server::start(&root.path().join("s3"));
    let wrong = Arc::new(
        server
            .builder()
            .with_secret_access_key("not-the-secret")
            .build()
            .unwrap(),
    );
    let remote = ObjectStoreRemote::new(wrong).unwrap();
    let refused = remote.put_if_absent("p/x", b"1").unwrap_err();
    assert_eq!(refused.kind(), RemoteErrorKind::Other, "{refused}");
    let opened = Store::open_with(root.path().join("a"), opts(Arc::new(remote)));
    assert!(matches!(opened, Err(Error::Remote { .. })), "{opened:?}");
    // The right key pair is taken; nothing was written by the refused one.
    let right = ObjectStoreRemote::new(server.store()).unwrap();
    assert!(right.list("apps/").unwrap().is_empty());
    assert!(right.list("p/").unwrap().is_empty());
}

#[test]
fn the_adapter_is_called_and_dropped_from_inside_another_runtime() {
    // A store used from async code: calls block the calling thread (never `block_on`), and
    // the last handle dropped there does not block on the adapter's runtime (which panics).
    let outer = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    outer.block_on(async {
        let remote = ObjectStoreRemote::new(Arc::new(InMemory::new())).unwrap();
        assert_eq!(
            remote.put_if_absent("p/x", b"1").unwrap(),
            PutOutcome::Created
        );
        assert_eq!(remote.get_range("p/x", 0..1).unwrap(), b"1");
        drop(remote);
    });
}

#[test]
fn deletion_leaves_the_newest_manifest_and_its_files_on_local_files_and_s3() {
    let root = tempfile::tempdir().unwrap();
    let (backends, _s3) = backends(root.path());
    // (InMemory dates its objects as LocalFileSystem does; the S3 server by its listing's
    // LastModified.)
    for (name, bucket) in backends
        .into_iter()
        .filter(|(name, _)| *name != "in-memory")
    {
        let remote = Arc::new(ObjectStoreRemote::new(bucket).unwrap());
        let o = opts(remote.clone())
            .background_compaction(false)
            .remote_retention(Some(std::time::Duration::ZERO));
        let store = Store::open_with(root.path().join(format!("gc-{name}")), o).unwrap();
        // Small values in one batch a round (one sync): every round's files dead after the
        // next.
        let small = |k: u32, round: u32| value(k + round * 1000 + 100);
        for round in 0..3u32 {
            let mut batch = podstore::Batch::new();
            for k in 0..200 {
                batch.put(format!("k{k}"), small(k, round));
            }
            store.write(&batch).unwrap();
            store.compact().unwrap();
            store.flush_remote().unwrap();
        }
        store.collect_remote_garbage().unwrap();
        assert!(store.stats().remote_deleted_objects >= 3, "{name}");
        // Dated by the backend (the listing's last-modified), and exactly the newest
        // manifest and the files it names are left, with the store's claim (manifest 1, kept
        // for good as the mark that fences older writers; its files went).
        let mut manifests = remote.list("apps/one/manifest/").unwrap();
        manifests.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(manifests.len(), 2, "{name}: {manifests:?}");
        assert!(
            manifests[0].name.ends_with(&format!("/{:020}", 1)),
            "{name}"
        );
        let newest = &manifests[1];
        assert!(newest.modified.is_some(), "{name}");
        let m = podstore::format::manifest::decode(
            &remote.get_range(&newest.name, 0..newest.size).unwrap(),
        )
        .unwrap();
        let mut named: Vec<String> = m
            .files
            .iter()
            .map(|f| format!("apps/one/data/{:020}/{}", f.epoch, f.kind.file_name(f.id)))
            .collect();
        let mut listed: Vec<String> = remote
            .list("apps/one/data/")
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect();
        named.sort();
        listed.sort();
        assert_eq!(listed, named, "{name}");
        drop(store);
        let restored =
            Store::open_with(root.path().join(format!("gc-{name}-b")), opts(remote)).unwrap();
        for k in 0..200 {
            let got = restored.get(format!("k{k}")).unwrap();
            assert!(got == Some(small(k, 2)), "{name}: key k{k}");
        }
    }
}
