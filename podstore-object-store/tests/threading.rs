//! The backend's threading: batched puts (each with its own result, error and version; written
//! before they are acknowledged; the last acknowledged value of a key wins) and gets served from
//! the store's read cache in place (the same answers as a get that reads).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{
    Error, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutPayload, UpdateVersion,
};
use podstore::{Durability, Options, Store, Version};
use podstore_object_store::PodstoreObjectStore;

fn open(dir: &std::path::Path, durability: Durability, cache: u64) -> Arc<Store> {
    let opts = Options::default()
        .durability(durability)
        .cache_capacity(cache);
    Arc::new(Store::open_with(dir, opts).unwrap())
}

fn version(e_tag: &str) -> Version {
    e_tag.trim_matches('"').parse().unwrap()
}

/// Many concurrent puts, so that the put threads find several queued and batch them.
async fn concurrent_puts(
    objects: &PodstoreObjectStore,
    prefix: &str,
    n: usize,
) -> Vec<(Path, Bytes, String)> {
    let mut tasks = Vec::new();
    for i in 0..n {
        let objects = objects.clone();
        let path = Path::from(format!("{prefix}/{i:05}"));
        let value = Bytes::from(format!("value of {i} ").repeat(1 + i % 50));
        tasks.push(tokio::spawn(async move {
            let put = objects.put(&path, value.clone().into()).await.unwrap();
            (path, value, put.e_tag.expect("an e-tag"))
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_puts_each_get_their_own_version_and_are_durable_when_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Sync, 64 << 20);
    let objects = PodstoreObjectStore::new(store.clone());
    let done = concurrent_puts(&objects, "sync", 400).await;
    // Versions are distinct (one per put, not one per batch) and name each value.
    let mut seen = HashMap::new();
    for (path, value, e_tag) in &done {
        assert!(
            seen.insert(e_tag.clone(), path.clone()).is_none(),
            "{e_tag} twice"
        );
        let (stored, meta) = store
            .get_with_metadata(path.as_ref())
            .unwrap()
            .expect("written before acknowledged");
        assert_eq!(&stored[..], &value[..]);
        assert_eq!(meta.version(), version(e_tag));
    }
    // The put threads hold the store only while the backend lives: then it can be closed, and
    // what was acknowledged is in the reopened store.
    drop(objects);
    let store = Arc::try_unwrap(store).unwrap_or_else(|_| panic!("a put thread holds the store"));
    store.close().unwrap();
    let store = open(dir.path(), Durability::Sync, 0);
    for (path, value, e_tag) in &done {
        let (stored, meta) = store.get_with_metadata(path.as_ref()).unwrap().unwrap();
        assert_eq!(&stored[..], &value[..]);
        assert_eq!(meta.version(), version(e_tag));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_put_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered, 64 << 20);
    let objects = PodstoreObjectStore::new(store.clone());
    // Puts the store refuses (a key longer than it takes; the empty path, an empty key) queued
    // among good ones: a batch holding them fails, and each put is then tried alone.
    let long = Path::from("k".repeat(podstore::MAX_KEY_LEN + 1));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let objects = objects.clone();
        let path = match i % 50 {
            7 => long.clone(),
            8 => Path::from(""),
            _ => Path::from(format!("ok/{i}")),
        };
        tasks.push(tokio::spawn(async move {
            let result = objects
                .put(&path, Bytes::from(vec![i as u8; 100]).into())
                .await;
            (i, path, result)
        }));
    }
    for t in tasks {
        let (i, path, result) = t.await.unwrap();
        match i % 50 {
            7 | 8 => assert!(
                matches!(result, Err(Error::Generic { .. })),
                "{path}: {result:?}"
            ),
            _ => {
                let e_tag = result.unwrap().e_tag.unwrap();
                let (value, meta) = store.get_with_metadata(path.as_ref()).unwrap().unwrap();
                assert_eq!(value, vec![i as u8; 100]);
                assert_eq!(meta.version(), version(&e_tag));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_puts_of_one_key_end_with_the_last_acknowledged_value() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered, 64 << 20);
    let objects = PodstoreObjectStore::new(store.clone());
    let path = Path::from("contended");
    let mut tasks = Vec::new();
    for t in 0..16u32 {
        let (objects, path) = (objects.clone(), path.clone());
        tasks.push(tokio::spawn(async move {
            let mut acks = Vec::new();
            for i in 0..50u32 {
                let value = format!("{t}-{i}");
                let put = objects.put(&path, value.clone().into()).await.unwrap();
                acks.push((version(&put.e_tag.unwrap()), value));
            }
            acks
        }));
    }
    let mut acks = Vec::new();
    for t in tasks {
        acks.extend(t.await.unwrap());
    }
    let versions: std::collections::HashSet<_> = acks.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        versions.len(),
        acks.len(),
        "every put has a version of its own"
    );
    // The newest version acknowledged is the value the object has, whatever batches the puts
    // shared.
    let (newest, value) = acks.iter().max_by_key(|(v, _)| *v).unwrap();
    let got = objects.get(&path).await.unwrap();
    assert_eq!(got.meta.e_tag.as_deref().map(version), Some(*newest));
    assert_eq!(got.bytes().await.unwrap(), value.as_bytes());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conditional_puts_keep_their_semantics_beside_batched_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Durability::Buffered, 64 << 20);
    let objects = PodstoreObjectStore::new(store.clone());
    let path = Path::from("cas");
    let first = objects.put(&path, "0".into()).await.unwrap();
    // Unconditional puts of other keys keep the put threads busy meanwhile.
    let background = {
        let objects = objects.clone();
        tokio::spawn(async move { concurrent_puts(&objects, "noise", 300).await })
    };
    let create = objects
        .put_opts(&path, "x".into(), PutMode::Create.into())
        .await;
    assert!(
        matches!(create, Err(Error::AlreadyExists { .. })),
        "{create:?}"
    );
    let update = |e_tag: Option<String>| {
        PutMode::Update(UpdateVersion {
            e_tag,
            version: None,
        })
    };
    let second = objects
        .put_opts(&path, "1".into(), update(first.e_tag.clone()).into())
        .await
        .unwrap();
    // The e-tag of a batched put is the one a compare-and-swap compares.
    let stale = objects
        .put_opts(&path, "2".into(), update(first.e_tag.clone()).into())
        .await;
    assert!(
        matches!(stale, Err(Error::Precondition { .. })),
        "{stale:?}"
    );
    let batched = objects.put(&path, "3".into()).await.unwrap();
    assert_ne!(batched.e_tag, second.e_tag);
    objects
        .put_opts(&path, "4".into(), update(batched.e_tag).into())
        .await
        .unwrap();
    assert_eq!(
        objects.get(&path).await.unwrap().bytes().await.unwrap(),
        "4"
    );
    background.await.unwrap();
}

/// The answers of a get served from the read cache in place and of one that reads: the same
/// bytes, metadata, ranges and condition errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_and_read_gets_answer_alike() {
    let dir = tempfile::tempdir().unwrap();
    let cached = PodstoreObjectStore::new(open(&dir.path().join("c"), Durability::Sync, 64 << 20));
    let uncached = PodstoreObjectStore::new(open(&dir.path().join("u"), Durability::Sync, 0));
    let sizes = [0usize, 1, 1000, 70_000, 300_000];
    for s in [&cached, &uncached] {
        for size in sizes {
            let value: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
            let path = Path::from(format!("obj/{size}"));
            s.put(&path, PutPayload::from(value)).await.unwrap();
        }
    }
    for size in sizes {
        let path = Path::from(format!("obj/{size}"));
        let mut answers = Vec::new();
        for s in [&cached, &uncached] {
            // Twice: the first read of a value may fill the cache.
            for _ in 0..2 {
                let whole = s.get(&path).await.unwrap();
                let meta = whole.meta.clone();
                let range = whole.range.clone();
                let bytes = whole.bytes().await.unwrap();
                let head = s.head(&path).await.unwrap();
                assert_eq!(head.size, meta.size);
                let suffix = s
                    .get_opts(
                        &path,
                        GetOptions {
                            range: Some(GetRange::Suffix(10)),
                            ..Default::default()
                        },
                    )
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                let ranges = if size > 0 {
                    let r = [0..1, (size as u64 / 2)..(size as u64)];
                    s.get_ranges(&path, &r).await.unwrap()
                } else {
                    Vec::new()
                };
                let unmatched = s
                    .get_opts(
                        &path,
                        GetOptions {
                            if_match: Some("\"0000000000000001\"".to_string()),
                            ..Default::default()
                        },
                    )
                    .await;
                assert!(
                    matches!(unmatched, Err(Error::Precondition { .. })),
                    "{unmatched:?}"
                );
                let not_modified = s
                    .get_opts(
                        &path,
                        GetOptions {
                            if_none_match: meta.e_tag.clone(),
                            ..Default::default()
                        },
                    )
                    .await;
                assert!(
                    matches!(not_modified, Err(Error::NotModified { .. })),
                    "{not_modified:?}"
                );
                answers.push((meta.size, range, bytes, suffix, ranges));
            }
        }
        let value: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        for (len, range, bytes, suffix, ranges) in &answers {
            assert_eq!(*len, size as u64);
            assert_eq!(*range, 0..size as u64);
            assert_eq!(&bytes[..], &value[..]);
            assert_eq!(&suffix[..], &value[size.saturating_sub(10)..]);
            if size > 0 {
                assert_eq!(&ranges[0][..], &value[..1]);
                assert_eq!(&ranges[1][..], &value[size / 2..]);
            }
        }
    }
    for s in [&cached, &uncached] {
        let missing = s.get(&Path::from("obj/missing")).await;
        assert!(
            matches!(missing, Err(Error::NotFound { .. })),
            "{missing:?}"
        );
    }
}

/// A value overwritten after it was cached: the in-place get serves the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_get_sees_the_newest_value() {
    let dir = tempfile::tempdir().unwrap();
    // Durable puts keep their values in the read cache: every get below is served in place.
    let store = open(dir.path(), Durability::Sync, 64 << 20);
    let objects = PodstoreObjectStore::new(store.clone());
    let path = Path::from("k");
    for i in 0..100u32 {
        let put = objects.put(&path, i.to_string().into()).await.unwrap();
        let (value, meta) = store.get_cached(path.as_ref()).unwrap().expect("kept");
        assert_eq!(&value[..], i.to_string().as_bytes());
        assert_eq!(Some(meta.version()), put.e_tag.as_deref().map(version));
        let got = objects.get(&path).await.unwrap();
        assert_eq!(got.meta.e_tag, put.e_tag);
        assert_eq!(got.bytes().await.unwrap(), i.to_string().as_bytes());
    }
}

/// Batches of values near the batching limit in a store of the smallest segments: each batch
/// lands whole in a segment, and every value reads back after a reopen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_fit_small_segments() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .durability(Durability::Buffered)
        .segment_size(1 << 20);
    let store = Arc::new(Store::open_with(dir.path(), opts).unwrap());
    let objects = PodstoreObjectStore::new(store.clone());
    let mut tasks = Vec::new();
    for i in 0..48u8 {
        let objects = objects.clone();
        tasks.push(tokio::spawn(async move {
            let path = Path::from(format!("big/{i}"));
            let value = Bytes::from(vec![i; 200 << 10]);
            let put = objects.put(&path, value.into()).await.unwrap();
            (path, i, put.e_tag.unwrap())
        }));
    }
    let mut done = Vec::new();
    for t in tasks {
        done.push(t.await.unwrap());
    }
    drop(objects);
    let store = Arc::try_unwrap(store).unwrap_or_else(|_| panic!("a put thread holds the store"));
    store.close().unwrap();
    let store = Store::open(dir.path()).unwrap();
    for (path, i, e_tag) in done {
        let (value, meta) = store.get_with_metadata(path.as_ref()).unwrap().unwrap();
        assert_eq!(value, vec![i; 200 << 10]);
        assert_eq!(meta.version(), version(&e_tag));
    }
}
