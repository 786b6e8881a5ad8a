//! The adapter under injected faults (tests/common/faulty.rs, under the adapter): throttling
//! and timeouts retried by the store with nothing lost, a refusal not retried, a multipart
//! upload cut off between parts aborted (no object left) and retried, and the same seed giving
//! the same faults. And the S3 server itself answering 503 SlowDown and 429, and losing the
//! replies of conditional creates it carried out (tests/common/s3.rs, `Throttle`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use podstore::remote::{Remote, RemoteErrorKind};
use podstore::{Error, Options, Store};
use podstore_remote::ObjectStoreRemote;

use common::faulty::{Faults, FaultyStore};
use common::s3::{S3Server, Throttle};

fn opts(remote: Arc<dyn Remote>) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .remote(remote, "faulty")
        .remote_flush_interval(None)
}

fn value(k: u32) -> Vec<u8> {
    // Key 3 is 11 MiB: a multipart upload of three 5 MiB parts.
    let len = if k == 3 {
        11 << 20
    } else {
        300 + (k as usize * 577) % 6000
    };
    (0..len)
        .map(|i| (i as u32 ^ k.wrapping_mul(31)) as u8)
        .collect()
}

fn remote(store: &FaultyStore) -> Arc<ObjectStoreRemote> {
    Arc::new(
        ObjectStoreRemote::new(Arc::new(store.clone()))
            .unwrap()
            .with_part_size(5 << 20),
    )
}

/// A restore from the fault-free bucket under `faulty` has every key of `keys`.
fn restored_from(bucket: Arc<dyn ObjectStore>, at: &std::path::Path, keys: u32) {
    let clean = Arc::new(ObjectStoreRemote::new(bucket).unwrap());
    let restored = Store::open_with(at, opts(clean)).unwrap();
    for k in 0..keys {
        assert!(
            restored.get(format!("k{k}")).unwrap() == Some(value(k)),
            "key k{k} not restored"
        );
    }
    assert!(restored.verify().unwrap().is_clean());
}

#[test]
fn throttling_and_timeouts_are_retried_and_nothing_flushed_is_lost() {
    let root = tempfile::tempdir().unwrap();
    let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faults = Faults {
        throttle_rate: 0.25,
        timeout_rate: 0.1,
        timeout: Duration::from_millis(30),
        max_delay: Duration::from_millis(2),
        ..Faults::default()
    };
    let faulty = FaultyStore::new(bucket.clone(), faults, 38);
    // (20 attempts: a call fails for good with a chance of 0.35^20, about 1e-9.)
    let opts = opts(remote(&faulty)).remote_retries(20);
    let store = Store::open_with(root.path().join("a"), opts).unwrap();
    for k in 0..120 {
        store.put(format!("k{k}"), value(k)).unwrap();
        if k % 10 == 9 {
            store.flush_remote().unwrap();
        }
    }
    let log = faulty.log();
    assert!(
        log.iter().any(|l| l.ends_with("throttled"))
            && log.iter().any(|l| l.ends_with("timed out")),
        "{log:?}"
    );
    drop(store);
    restored_from(bucket, &root.path().join("b"), 120);
}

#[test]
fn a_refusal_is_not_retried_and_a_later_flush_succeeds() {
    let root = tempfile::tempdir().unwrap();
    let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(bucket.clone(), Faults::default(), 1);
    let store = Store::open_with(root.path().join("a"), opts(remote(&faulty))).unwrap();
    for k in 0..10 {
        store.put(format!("k{k}"), value(k)).unwrap();
    }
    faulty.set_faults(Faults {
        denied_rate: 1.0,
        ..Faults::default()
    });
    let refused = store.flush_remote();
    assert!(
        matches!(&refused, Err(Error::Remote { source, .. }) if source.kind() == RemoteErrorKind::Other),
        "{refused:?}"
    );
    // Refused, not retried: each object the flush tried was refused once. The background
    // thread's upload round (every 250 ms, whatever the flush interval) may also have tried an
    // object once between the faults being set and the flush (seen under load), so at most
    // twice; a retry of a refusal would be `remote_retries` attempts (8) in a row.
    let log = faulty.log();
    let mut tried: Vec<_> = log.iter().map(|l| l.split(' ').nth(1).unwrap()).collect();
    tried.sort();
    let most = tried
        .chunk_by(|a, b| a == b)
        .map(<[_]>::len)
        .max()
        .unwrap_or(0);
    assert!(!log.is_empty() && most <= 2, "{log:?}");
    faulty.set_faults(Faults::default());
    store.flush_remote().unwrap();
    drop(store);
    restored_from(bucket, &root.path().join("b"), 10);
}

#[test]
fn a_multipart_upload_cut_off_is_aborted_leaves_no_object_and_is_retried() {
    let bucket: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let faulty = FaultyStore::new(
        bucket.clone(),
        Faults {
            cut_uploads: 1,
            cut_at_part: 1,
            ..Faults::default()
        },
        2,
    );
    // Through the adapter alone: the failed put is transient and leaves nothing.
    let adapter = remote(&faulty);
    let body = value(3);
    let failed = adapter.put("p/big", &body).unwrap_err();
    assert_eq!(failed.kind(), RemoteErrorKind::Transient, "{failed}");
    assert_eq!(faulty.aborted(), 1);
    assert!(adapter.list("p/").unwrap().is_empty());
    adapter.put("p/big", &body).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let got = rt.block_on(bucket.get(&Path::from("p/big"))).unwrap();
    assert_eq!(rt.block_on(got.bytes()).unwrap().as_ref(), &body[..]);

    // Through a store: the cut upload is retried inside the flush.
    let root = tempfile::tempdir().unwrap();
    faulty.set_faults(Faults {
        cut_uploads: 2,
        cut_at_part: 2,
        ..Faults::default()
    });
    let store = Store::open_with(root.path().join("a"), opts(remote(&faulty))).unwrap();
    for k in 0..6 {
        store.put(format!("k{k}"), value(k)).unwrap();
    }
    store.flush_remote().unwrap();
    assert_eq!(faulty.aborted(), 3);
    drop(store);
    restored_from(bucket, &root.path().join("b"), 6);
}

#[test]
fn the_same_seed_gives_the_same_faults() {
    let run = |seed| {
        let faulty = FaultyStore::new(
            Arc::new(InMemory::new()),
            Faults {
                throttle_rate: 0.2,
                denied_rate: 0.1,
                ..Faults::default()
            },
            seed,
        );
        let adapter = remote(&faulty);
        for i in 0..60 {
            let name = format!("p/{i}");
            let _ = adapter.put(&name, &b"x".to_vec());
            let _ = adapter.get_range(&name, 0..1);
            let _ = adapter.list("p/");
        }
        faulty.log()
    };
    let (a, b, c) = (run(5), run(5), run(6));
    assert!(a.len() > 20, "{}", a.len());
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn an_s3_server_that_throttles_and_loses_create_replies_loses_nothing() {
    // 503 SlowDown and 429 on a fifth of the requests (object_store's client retries them),
    // and half the manifest creates carried out with their reply lost: the client's retry
    // gets 412, and the store finds its own manifest there.
    let root = tempfile::tempdir().unwrap();
    let throttle = Throttle {
        refuse_rate: 0.2,
        lost_create_rate: 0.5,
        seed: 38,
    };
    let server = S3Server::start_with(&root.path().join("s3"), throttle);
    let remote = |server: &S3Server| {
        Arc::new(
            ObjectStoreRemote::new(server.store())
                .unwrap()
                .with_part_size(5 << 20),
        )
    };
    let store = Store::open_with(root.path().join("a"), opts(remote(&server))).unwrap();
    for k in 0..60 {
        store.put(format!("k{k}"), value(k)).unwrap();
        if k % 20 == 19 {
            store.flush_remote().unwrap();
        }
    }
    // A second writer takes the prefix through the same server: the first is fenced.
    let second = Store::open_with(root.path().join("b"), opts(remote(&server))).unwrap();
    assert!(matches!(store.flush_remote(), Err(Error::Fenced { .. })));
    for k in 0..60 {
        assert!(
            second.get(format!("k{k}")).unwrap() == Some(value(k)),
            "k{k}"
        );
    }
    let injected = server.injected();
    let refused = injected.refused.load(std::sync::atomic::Ordering::Relaxed);
    let lost = injected
        .lost_creates
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(refused > 0 && lost > 0, "{refused} refused, {lost} lost");
}
