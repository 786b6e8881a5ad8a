//! Issue 38, phase 2, through the adapter on `LocalFileSystem` (and `InMemory`): files evicted
//! past the local budget read back byte for byte, one ranged GET per value (counted by the
//! store's `Stats::remote_gets`), a 4 KiB range of a large evicted value fetching at most
//! 8 KiB, a damaged object refused as corruption, and a reopen that downloads no data.

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use podstore::remote::Remote;
use podstore::{Options, Store};
use podstore_remote::ObjectStoreRemote;

fn opts(remote: Arc<dyn Remote>) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .cache_capacity(0)
        .warm_cache(false)
        .remote(remote, "apps/one")
        .remote_flush_interval(None)
        .remote_local_budget(Some(0))
}

fn value(k: u32) -> Vec<u8> {
    // Key 7 is a 24 MiB blob; every ninth a 1 MiB one; the others 0.5-9 KiB.
    let len = match k {
        7 => 24 << 20,
        k if k % 9 == 4 => (1 << 20) + k as usize,
        k => 500 + (k as usize * 131) % 9000,
    };
    (0..len)
        .map(|i| (i as u32 ^ k.wrapping_mul(97)) as u8)
        .collect()
}

#[test]
fn evicted_files_read_through_object_store_backends() {
    let root = tempfile::tempdir().unwrap();
    let bucket = root.path().join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let backends: Vec<(&str, Arc<dyn ObjectStore>)> = vec![
        (
            "local",
            Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap()),
        ),
        ("in-memory", Arc::new(InMemory::new())),
    ];
    for (name, store_backend) in backends {
        let remote: Arc<dyn Remote> = Arc::new(ObjectStoreRemote::new(store_backend).unwrap());
        let dir = root.path().join(name);
        let store = Store::open_with(&dir, opts(remote.clone())).unwrap();
        for k in 0..200 {
            store.put(format!("k{k}"), value(k)).unwrap();
        }
        store.flush_remote().unwrap();
        let s = store.stats();
        assert!(s.remote_only_files >= 5, "{name}: {s:?}");
        assert!(s.local_bytes * 10 < s.disk_bytes, "{name}: {s:?}");
        for k in 0..200 {
            let before = store.stats().remote_gets;
            let got = store.get(format!("k{k}")).unwrap().unwrap();
            assert!(got == value(k), "{name}: k{k}");
            assert!(store.stats().remote_gets - before <= 1, "{name}: k{k}");
        }
        let big = value(7);
        for start in [123_456u64, 10 << 20, (24 << 20) - 70_000] {
            let (gets, bytes) = (store.stats().remote_gets, store.stats().remote_get_bytes);
            let got = store.get_range("k7", start..start + 4096).unwrap().unwrap();
            assert!(got == big[start as usize..start as usize + 4096], "{name}");
            let s = store.stats();
            assert_eq!(s.remote_gets - gets, 1, "{name}: at {start}");
            assert!(s.remote_get_bytes - bytes <= 8192, "{name}: at {start}");
        }
        drop(store);
        let store = Store::open_with(&dir, opts(remote)).unwrap();
        assert_eq!(store.stats().remote_gets, 0, "{name}: open read data");
        for k in (0..200).step_by(7) {
            assert!(store.get(format!("k{k}")).unwrap().unwrap() == value(k));
        }
    }
    // A damaged object (LocalFileSystem: a file under the bucket) is refused as corruption.
    let objects: Vec<_> = walk(&bucket)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("blob-"))
        .collect();
    assert!(!objects.is_empty());
    for p in &objects {
        let mut bytes = std::fs::read(p).unwrap();
        let at = bytes.len() / 2;
        bytes[at] ^= 1;
        std::fs::write(p, bytes).unwrap();
    }
    let remote: Arc<dyn Remote> = Arc::new(
        ObjectStoreRemote::new(Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap()))
            .unwrap(),
    );
    let store = Store::open_with(root.path().join("local"), opts(remote)).unwrap();
    let e = store.get("k7").unwrap_err();
    assert!(e.is_corruption(), "{e:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
