//! `RemoteReader` through the adapter, on `LocalFileSystem` (and, with `PODSTORE_TEST_LONG=1`,
//! a real S3 server on 127.0.0.1: s3s-fs serves a request in ~25 ms on the shared test
//! machine, 4 s for this test): a reader on another directory serves the writer's flushed
//! state, follows it through overwrites, deletes and a compaction, writes nothing to the
//! bucket and leaves the writer unfenced.

mod common;

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use podstore::remote::Remote;
use podstore::{Error, Options, RemoteReader, Store};
use podstore_remote::ObjectStoreRemote;

use common::s3::S3Server;

fn opts(remote: Arc<dyn Remote>) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .background_compaction(false)
        .remote(remote, "apps/one")
        .remote_flush_interval(None)
}

/// Keys written (a multiple of 4: every fourth is deleted).
const KEYS: u32 = 44;

fn value(k: u32, round: u32) -> Vec<u8> {
    // Every eleventh key a 1.5 MiB blob file of its own; the others 0.5-6 KiB.
    let len = if k % 11 == 2 {
        (3 << 19) + k as usize
    } else {
        500 + (k as usize * 131 + round as usize * 977) % 5500
    };
    (0..len)
        .map(|i| (i as u32 ^ k.wrapping_mul(97) ^ round.wrapping_mul(7919)) as u8)
        .collect()
}

/// Every object's name under the bucket, sorted.
fn objects(remote: &dyn Remote) -> Vec<String> {
    let mut names: Vec<String> = remote
        .list("apps/one/")
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .collect();
    names.sort();
    names
}

#[test]
fn a_reader_follows_a_writer_through_object_store_backends() {
    let root = tempfile::tempdir().unwrap();
    let bucket = root.path().join("bucket");
    std::fs::create_dir(&bucket).unwrap();
    let mut backends: Vec<(&str, Arc<dyn ObjectStore>)> = vec![(
        "local",
        Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap()),
    )];
    let long = std::env::var("PODSTORE_TEST_LONG").is_ok_and(|v| !v.is_empty() && v != "0");
    let s3 = long.then(|| S3Server::start(&root.path().join("s3")));
    if let Some(s3) = &s3 {
        backends.push(("s3", s3.store()));
    }
    for (name, backend) in backends {
        let remote: Arc<dyn Remote> = Arc::new(ObjectStoreRemote::new(backend).unwrap());
        let store =
            Store::open_with(root.path().join("stores").join(name), opts(remote.clone())).unwrap();
        for k in 0..KEYS {
            store.put(format!("k{k}"), value(k, 0)).unwrap();
        }
        store.flush_remote().unwrap();
        let before = objects(&*remote);
        let reader =
            RemoteReader::open(root.path().join("readers").join(name), opts(remote.clone()))
                .unwrap();
        for k in 0..KEYS {
            let got = reader.get(format!("k{k}")).unwrap().unwrap();
            assert!(got == value(k, 0), "{name}: k{k}");
        }
        let big = value(2, 0);
        let range = reader.get_range("k2", 700_000..704_096).unwrap().unwrap();
        assert!(range == big[700_000..704_096], "{name}");
        assert_eq!(objects(&*remote), before, "{name}: the reader wrote");
        assert!(matches!(
            reader.snapshot().store().put("k", "v"),
            Err(Error::ReadOnly)
        ));

        // Overwrites, deletes, a compaction: the writer (not fenced) flushes them, the reader
        // follows.
        for k in 0..KEYS {
            if k % 4 == 0 {
                store.delete(format!("k{k}")).unwrap();
            } else {
                store.put(format!("k{k}"), value(k, 1)).unwrap();
            }
        }
        store.compact().unwrap();
        let flushed = store.flush_remote().unwrap();
        let refreshed = reader.refresh().unwrap();
        assert_eq!(refreshed.manifest, flushed.manifest, "{name}");
        for k in 0..KEYS {
            let got = reader.get(format!("k{k}")).unwrap();
            let expected = (k % 4 != 0).then(|| value(k, 1));
            assert!(got == expected, "{name}: k{k} after the refresh");
        }
        let keys = reader.snapshot().store().keys().count();
        assert_eq!(keys, KEYS as usize * 3 / 4, "{name}");
    }
}
