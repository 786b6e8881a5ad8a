//! object_store's own conformance suite (`object_store::integration`) against the backend, one
//! fresh store per function. The crate docs list the functions left out and why.

use std::sync::Arc;

use object_store::integration::*;
use podstore::{Options, Store};
use podstore_object_store::PodstoreObjectStore;
use tempfile::TempDir;

/// A backend on a new store in a temporary directory (removed when the `TempDir` drops).
fn backend() -> (TempDir, PodstoreObjectStore) {
    let dir = tempfile::tempdir().unwrap();
    // Small segments, so that the suite's multi-megabyte objects also cross segment files.
    let store = Store::open_with(dir.path(), Options::default().segment_size(4 << 20)).unwrap();
    (dir, PodstoreObjectStore::new(Arc::new(store)))
}

/// [`backend`] without the store's read cache: every get goes the way of a value the cache does
/// not hold (no get is served in place).
fn uncached_backend() -> (TempDir, PodstoreObjectStore) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default().segment_size(4 << 20).cache_capacity(0);
    let store = Store::open_with(dir.path(), opts).unwrap();
    (dir, PodstoreObjectStore::new(Arc::new(store)))
}

/// [`backend`] on a store with `Durability::Buffered`: small unconditional puts are written on
/// the calling task instead of by the put threads (the crate docs, "Threading").
fn buffered_backend() -> (TempDir, PodstoreObjectStore) {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(4 << 20)
        .durability(podstore::Durability::Buffered);
    let store = Store::open_with(dir.path(), opts).unwrap();
    (dir, PodstoreObjectStore::new(Arc::new(store)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_get_delete_list_buffered() {
    let (_dir, s) = buffered_backend();
    put_get_delete_list(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_opts_buffered() {
    let (_dir, s) = buffered_backend();
    put_opts(&s, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_rename_and_copy_buffered() {
    let (_dir, s) = buffered_backend();
    rename_and_copy(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_get_opts_uncached() {
    let (_dir, s) = uncached_backend();
    get_opts(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_get_delete_list_uncached() {
    let (_dir, s) = uncached_backend();
    put_get_delete_list(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_get_delete_list() {
    let (_dir, s) = backend();
    put_get_delete_list(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_get_attributes() {
    // Attributes are not stored: the function accepts `NotImplemented`.
    let (_dir, s) = backend();
    put_get_attributes(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_get_opts() {
    let (_dir, s) = backend();
    get_opts(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_put_opts() {
    let (_dir, s) = backend();
    put_opts(&s, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_list_uses_directories_correctly() {
    let (_dir, s) = backend();
    list_uses_directories_correctly(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_list_with_delimiter() {
    let (_dir, s) = backend();
    list_with_delimiter(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_list_with_offset_exclusivity() {
    let (_dir, s) = backend();
    list_with_offset_exclusivity(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_rename_and_copy() {
    let (_dir, s) = backend();
    rename_and_copy(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_copy_if_not_exists() {
    let (_dir, s) = backend();
    copy_if_not_exists(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_copy_rename_nonexistent_object() {
    let (_dir, s) = backend();
    copy_rename_nonexistent_object(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_get_nonexistent_object() {
    let (_dir, s) = backend();
    let err = get_nonexistent_object(&s, None).await.unwrap_err();
    assert!(matches!(err, object_store::Error::NotFound { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_stream_get() {
    let (_dir, s) = backend();
    stream_get(&s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_multipart() {
    let (_dir, s) = backend();
    multipart(&s, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_multipart_put_part_out_of_order() {
    let (_dir, s) = backend();
    multipart_put_part_out_of_order(&s, &s).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_multipart_race_condition() {
    // Two uploads to one path: the one completed last is the object.
    let (_dir, s) = backend();
    multipart_race_condition(&s, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_multipart_out_of_order() {
    let (_dir, s) = backend();
    multipart_out_of_order(&s).await;
}
