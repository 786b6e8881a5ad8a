//! `Options::create(false)`: open an existing store only. A missing path, an empty directory or
//! one holding other files is `Error::NotFound`, and nothing is created or changed; a store,
//! even one that was never written to, opens as usual.

mod common;
use common::tree::{self, snapshot};

use podstore::{Error, Options, Store};

fn existing_only() -> Options {
    Options::default().create(false)
}

/// Opening `path` with `create(false)` is `NotFound` naming it, and changes nothing under
/// `root`.
fn assert_not_found(root: &std::path::Path, path: &std::path::Path) {
    let before = snapshot(root);
    match Store::open_with(path, existing_only()) {
        Err(Error::NotFound { path: named }) => assert_eq!(named, path),
        other => panic!("{}: got {other:?}, want NotFound", path.display()),
    }
    let after = snapshot(root);
    assert_eq!(
        tree::added(&before, &after),
        Vec::<std::path::PathBuf>::new()
    );
    assert_eq!(
        tree::changed(&before, &after),
        Vec::<std::path::PathBuf>::new()
    );
}

#[test]
fn a_missing_path_is_not_found_and_nothing_is_created() {
    let root = tempfile::tempdir().unwrap();
    assert_not_found(root.path(), &root.path().join("store"));
    assert_not_found(root.path(), &root.path().join("missing/parent/store"));
    assert!(snapshot(root.path()).is_empty());
}

#[test]
fn a_directory_without_a_store_is_not_found_and_left_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    assert_not_found(root.path(), root.path());
    std::fs::write(root.path().join("notes.txt"), b"not a store").unwrap();
    std::fs::create_dir(root.path().join("seg-0000000000000001.pod.d")).unwrap();
    assert_not_found(root.path(), root.path());
}

#[test]
fn a_regular_file_is_an_error_and_left_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("store");
    std::fs::write(&file, b"a file, not a directory").unwrap();
    let before = snapshot(root.path());
    let opened = Store::open_with(&file, existing_only());
    assert!(opened.is_err(), "{opened:?}");
    assert_eq!(snapshot(root.path()), before);
}

#[test]
fn an_existing_store_opens_written_or_not() {
    let root = tempfile::tempdir().unwrap();
    let written = root.path().join("written");
    let store = Store::open(&written).unwrap();
    store.put(b"k", b"v").unwrap();
    store.close().unwrap();
    let store = Store::open_with(&written, existing_only()).unwrap();
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    store.put(b"k2", b"v2").unwrap();
    store.close().unwrap();

    let never_written = root.path().join("empty");
    Store::open(&never_written).unwrap().close().unwrap();
    let store = Store::open_with(&never_written, existing_only()).unwrap();
    assert!(store.is_empty());
}

#[test]
fn an_open_store_is_locked_not_missing() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let second = Store::open_with(dir.path(), existing_only());
    assert!(matches!(second, Err(Error::Locked { .. })), "{second:?}");
    drop(store);
}
