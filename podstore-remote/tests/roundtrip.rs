//! The adapter on object_store's `InMemory` and `LocalFileSystem`: flush then restore into an
//! empty directory, multipart uploads of large files, the conditional create that fences.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use podstore::remote::{PutOutcome, Remote, RemoteErrorKind};
use podstore::{Error, Options, Store};
use podstore_remote::ObjectStoreRemote;

fn backends(root: &std::path::Path) -> Vec<(&'static str, Arc<dyn ObjectStore>)> {
    let bucket = root.join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    vec![
        ("in-memory", Arc::new(InMemory::new())),
        (
            "local",
            Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap()),
        ),
    ]
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
    for (name, bucket) in backends(root.path()) {
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
    for (name, bucket) in backends(root.path()) {
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
fn a_stale_writer_is_fenced_through_the_adapter() {
    let root = tempfile::tempdir().unwrap();
    let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let remote = Arc::new(ObjectStoreRemote::new(bucket).unwrap());
    let first = Store::open_with(root.path().join("a"), opts(remote.clone())).unwrap();
    first.put("k", "v1").unwrap();
    first.flush_remote().unwrap();
    let second = Store::open_with(root.path().join("b"), opts(remote.clone())).unwrap();
    assert_eq!(second.get("k").unwrap().as_deref(), Some(&b"v1"[..]));
    assert!(matches!(first.flush_remote(), Err(Error::Fenced { .. })));
    assert!(matches!(first.put("k", "v2"), Err(Error::Fenced { .. })));
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
