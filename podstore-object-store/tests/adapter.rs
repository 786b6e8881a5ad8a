//! What the conformance suite does not reach: long listings (several pages), streamed gets and
//! puts past the one-read size, renames of large objects, the staging area of multipart uploads,
//! and the agreement between the backend's metadata and the store's.

use std::sync::Arc;

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutPayload, UpdateVersion,
};
use podstore::{Options, Store};
use podstore_object_store::PodstoreObjectStore;
use tempfile::TempDir;

fn backend() -> (TempDir, Arc<Store>, PodstoreObjectStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(
        Store::open_with(
            dir.path(),
            Options::default().durability(podstore::Durability::Buffered),
        )
        .unwrap(),
    );
    let objects = PodstoreObjectStore::new(store.clone());
    (dir, store, objects)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64 * 31 + seed as u64 * 7 + (i as u64 >> 12)) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_span_pages_and_skip_directories_whole() {
    let (_dir, _store, s) = backend();
    // 2,500 objects under one prefix: three pages of the listing's 1,000 keys.
    let mut expected = Vec::new();
    for i in 0..2500 {
        let p = Path::from(format!("big/{i:05}"));
        s.put(&p, "x".into()).await.unwrap();
        expected.push(p);
    }
    for p in ["big2/a", "bi/g", "big/sub/deep/x", "big/sub/y", "top"] {
        s.put(&Path::from(p), "y".into()).await.unwrap();
    }
    let listed: Vec<Path> = s
        .list(Some(&Path::from("big")))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    let mut want = expected.clone();
    want.push(Path::from("big/sub/deep/x"));
    want.push(Path::from("big/sub/y"));
    want.sort();
    assert_eq!(listed, want, "in ascending order, nothing of big2/ or bi/");

    // An offset in the middle of the second page: exclusive, and in order.
    let after: Vec<Path> = s
        .list_with_offset(Some(&Path::from("big")), &Path::from("big/01499"))
        .map_ok(|m| m.location)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(after.first(), Some(&Path::from("big/01500")));
    assert_eq!(after.len(), 1000 + 2);

    let root = s.list_with_delimiter(None).await.unwrap();
    let prefixes: Vec<&str> = root.common_prefixes.iter().map(|p| p.as_ref()).collect();
    assert_eq!(prefixes, ["bi", "big", "big2"]);
    assert_eq!(root.objects.len(), 1);
    assert_eq!(root.objects[0].location, Path::from("top"));

    let big = s
        .list_with_delimiter(Some(&Path::from("big")))
        .await
        .unwrap();
    assert_eq!(big.common_prefixes, [Path::from("big/sub")]);
    assert_eq!(big.objects.len(), 2500);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_stream_in_and_out_and_ranges_read_what_they_ask() {
    let (_dir, store, s) = backend();
    let data = pattern(12 << 20, 1);
    let p = Path::from("large/object.bin");
    // A payload of several chunks past 1 MiB streams through a ValueWriter.
    let payload: PutPayload = data.chunks(3 << 20).map(Bytes::copy_from_slice).collect();
    let put = s.put(&p, payload).await.unwrap();
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), data);

    // Past 8 MiB the body streams in 1 MiB reads.
    let got = s.get(&p).await.unwrap();
    assert_eq!(got.meta.e_tag, put.e_tag);
    assert_eq!(got.range, 0..data.len() as u64);
    let chunks: Vec<Bytes> = got.into_stream().try_collect().await.unwrap();
    assert_eq!(chunks.len(), 12);
    assert_eq!(chunks.concat(), data);

    let len = data.len() as u64;
    for (range, want) in [
        (GetRange::Bounded(5..9), 5..9),
        (GetRange::Bounded(len - 3..len + 100), len - 3..len),
        (GetRange::Offset(len - 10), len - 10..len),
        (GetRange::Suffix(4096), len - 4096..len),
        (GetRange::Suffix(len + 1), 0..len),
    ] {
        let r = s
            .get_opts(&p, GetOptions::new().with_range(Some(range.clone())))
            .await
            .unwrap();
        assert_eq!(r.range, want, "{range:?}");
        assert_eq!(r.meta.size, len);
        let bytes = r.bytes().await.unwrap();
        assert_eq!(
            bytes.as_ref(),
            &data[want.start as usize..want.end as usize]
        );
    }
    for bad in [GetRange::Bounded(len..len + 1), GetRange::Offset(len + 1)] {
        s.get_opts(&p, GetOptions::new().with_range(Some(bad)))
            .await
            .unwrap_err();
    }
    let ranges = s.get_ranges(&p, &[0..3, len - 2..len]).await.unwrap();
    assert_eq!(ranges[0].as_ref(), &data[..3]);
    assert_eq!(ranges[1].as_ref(), &data[data.len() - 2..]);

    // A head reads no body; its metadata is the store's.
    let head = s.head(&p).await.unwrap();
    let meta = store.metadata(p.as_ref()).unwrap().unwrap();
    assert_eq!(head.size, meta.len());
    assert_eq!(head.e_tag, Some(format!("\"{}\"", meta.version())));
    assert_eq!(
        head.last_modified,
        chrono::DateTime::<chrono::Utc>::from(meta.written_at())
    );

    // A large rename is a streamed copy and a delete of the version copied.
    let q = Path::from("large/renamed.bin");
    s.rename(&p, &q).await.unwrap();
    assert!(store.get(p.as_ref()).unwrap().is_none());
    assert_eq!(store.get(q.as_ref()).unwrap().unwrap(), data);
    // copy_if_not_exists onto a large existing object fails and changes nothing.
    s.put(&p, "small".into()).await.unwrap();
    let err = s.copy_if_not_exists(&q, &p).await.unwrap_err();
    assert!(
        matches!(err, object_store::Error::AlreadyExists { .. }),
        "{err}"
    );
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), b"small");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn e_tags_are_versions_and_updates_compare_them() {
    let (_dir, store, s) = backend();
    let p = Path::from("cas");
    let v1 = s.put(&p, "1".into()).await.unwrap();
    // Someone writes the key through the store directly: the old e-tag no longer matches.
    store.put(p.as_ref(), b"2").unwrap();
    let err = s
        .put_opts(&p, "3".into(), PutMode::Update(v1.clone().into()).into())
        .await
        .unwrap_err();
    assert!(
        matches!(err, object_store::Error::Precondition { .. }),
        "{err}"
    );
    let head = s.head(&p).await.unwrap();
    assert_ne!(head.e_tag, v1.e_tag);
    let update = UpdateVersion {
        e_tag: head.e_tag.clone(),
        version: None,
    };
    s.put_opts(&p, "3".into(), PutMode::Update(update).into())
        .await
        .unwrap();
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), b"3");
    // A tag that is not one of ours cannot match.
    let foreign = UpdateVersion {
        e_tag: Some("\"abc\"".into()),
        version: None,
    };
    let err = s
        .put_opts(&p, "4".into(), PutMode::Update(foreign).into())
        .await
        .unwrap_err();
    assert!(
        matches!(err, object_store::Error::Precondition { .. }),
        "{err}"
    );
    // `GetOptions::version` serves the current version only.
    let current = s.head(&p).await.unwrap().e_tag.unwrap();
    s.get_opts(&p, GetOptions::new().with_version(Some(current)))
        .await
        .unwrap();
    let err = s
        .get_opts(&p, GetOptions::new().with_version(Some(v1.e_tag.unwrap())))
        .await
        .unwrap_err();
    assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_parts_are_hidden_and_removed() {
    let (_dir, store, s) = backend();
    let p = Path::from("up/load");
    let staged = |store: &Store| store.prefix("/mpu/").count();

    // Parts in the store while the upload runs, never in a listing.
    let mut upload = s.put_multipart(&p).await.unwrap();
    upload.put_part(vec![1u8; 1000].into()).await.unwrap();
    upload.put_part(vec![2u8; 1000].into()).await.unwrap();
    assert_eq!(staged(&store), 2);
    assert!(
        s.list(None)
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .is_empty()
    );
    let root = s.list_with_delimiter(None).await.unwrap();
    assert!(root.common_prefixes.is_empty() && root.objects.is_empty());
    upload.complete().await.unwrap();
    assert_eq!(staged(&store), 0, "complete removes the parts");
    let mut want = vec![1u8; 1000];
    want.extend(vec![2u8; 1000]);
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), want);

    // A dropped upload removes its parts in the background.
    let mut dropped = s.put_multipart(&p).await.unwrap();
    dropped.put_part(vec![3u8; 10].into()).await.unwrap();
    assert_eq!(staged(&store), 1);
    drop(dropped);
    for _ in 0..200 {
        if staged(&store) == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(staged(&store), 0, "a dropped upload's parts are removed");
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), want, "unchanged");

    // Parts left behind (as by a crash) are removed on request.
    let mut left = s.put_multipart(&p).await.unwrap();
    left.put_part(vec![4u8; 10].into()).await.unwrap();
    left.put_part(vec![5u8; 10].into()).await.unwrap();
    assert_eq!(s.remove_stale_uploads().await.unwrap(), 2);
    assert_eq!(staged(&store), 0);
    // Its completion then fails, and the object is unchanged.
    left.complete().await.unwrap_err();
    assert_eq!(store.get(p.as_ref()).unwrap().unwrap(), want);
}
