//! Which directories open accepts. `Options::create(false)`: an existing store only; a missing
//! path, an empty directory or one holding other files is `Error::NotFound`, and nothing is
//! created or changed; a store, even one that was never written to, opens as usual. With the
//! default `create(true)`: a directory that holds other files and no store is
//! `Error::ForeignFiles` and left byte for byte as it was, unless
//! `Options::allow_foreign_files(true)`; a store opens whatever else it holds, and so does a
//! directory holding only what a store's creation writes first.

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

/// Opening `path` with `opts` is `ForeignFiles` naming `names` (and `total` in all), and
/// changes nothing under `root` (bytes, modification times, no new path).
#[track_caller]
fn assert_foreign(
    root: &std::path::Path,
    path: &std::path::Path,
    opts: Options,
    names: &[&str],
    total: usize,
) {
    let before = snapshot(root);
    match Store::open_with(path, opts) {
        Err(e @ Error::ForeignFiles { .. }) => {
            let message = e.to_string();
            let Error::ForeignFiles {
                path: named,
                names: shown,
                total: counted,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(named, path);
            assert_eq!(shown, names);
            assert_eq!(counted, total);
            assert!(message.contains("allow_foreign_files(true)"), "{message}");
            assert!(message.contains("nothing was written"), "{message}");
            assert!(message.contains(names[0]), "{message}");
        }
        other => panic!("{}: got {other:?}, want ForeignFiles", path.display()),
    }
    assert_eq!(snapshot(root), before, "the refused directory changed");
}

#[test]
fn a_directory_of_other_files_is_refused_and_left_byte_for_byte_as_it_was() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("home");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), b"mine").unwrap();
    std::fs::write(dir.join("cat.jpg"), [0xffu8, 0xd8, 0xff]).unwrap();
    std::fs::create_dir(dir.join("photos")).unwrap();
    std::fs::write(dir.join("photos/1.jpg"), b"x").unwrap();
    let names = ["cat.jpg", "notes.txt", "photos"];
    assert_foreign(root.path(), &dir, Options::default(), &names, 3);
    // Read-only too (it would write nothing, but it is no store either).
    assert_foreign(
        root.path(),
        &dir,
        Options::default().read_only(true),
        &names,
        3,
    );
    // A directory with a LOCK of another program's and its files (a LevelDB, say) is no store.
    std::fs::write(dir.join("LOCK"), b"").unwrap();
    std::fs::write(dir.join("CURRENT"), b"MANIFEST-000001").unwrap();
    let names = ["CURRENT", "cat.jpg", "notes.txt", "photos"];
    assert_foreign(root.path(), &dir, Options::default(), &names, 4);
    assert_foreign(root.path(), &dir, existing_only(), &names, 4);
    // The first five names are shown, in byte order, and the rest counted.
    for i in 0..4 {
        std::fs::write(dir.join(format!("z{i}")), b"").unwrap();
    }
    let names = ["CURRENT", "cat.jpg", "notes.txt", "photos", "z0"];
    assert_foreign(root.path(), &dir, Options::default(), &names, 8);
    let e = Store::open(&dir).unwrap_err();
    assert!(e.to_string().contains("z0 and 3 more"), "{e}");
    // A name that is not UTF-8 is foreign too.
    let odd = root.path().join("odd");
    std::fs::create_dir(&odd).unwrap();
    let name = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(b"\xffname");
    std::fs::write(odd.join(name), b"").unwrap();
    assert_foreign(root.path(), &odd, Options::default(), &["\u{fffd}name"], 1);
    // And as an io::Error: AlreadyExists, the podstore error inside.
    let io = std::io::Error::from(Store::open(&odd).unwrap_err());
    assert_eq!(io.kind(), std::io::ErrorKind::AlreadyExists);
    assert!(io.get_ref().unwrap().is::<Error>());
}

#[test]
fn allow_foreign_files_puts_the_store_beside_them_and_never_touches_them() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), b"mine").unwrap();
    let before = snapshot(root.path());
    let beside = Options::default().allow_foreign_files(true);
    let store = Store::open_with(root.path(), beside).unwrap();
    store.put(b"k", vec![3u8; 2 << 20]).unwrap();
    store.put(b"small", b"v").unwrap();
    store.compact().unwrap();
    store.close().unwrap();
    assert_eq!(
        tree::changed(&before, &snapshot(root.path())),
        Vec::<std::path::PathBuf>::new()
    );
    // Now a store: it opens with the default options, foreign files and all.
    for opts in [
        Options::default(),
        existing_only(),
        Options::default().read_only(true),
    ] {
        let store = Store::open_with(root.path(), opts).unwrap();
        assert_eq!(store.get(b"small").unwrap().as_deref(), Some(&b"v"[..]));
    }
    assert_eq!(
        std::fs::read(root.path().join("notes.txt")).unwrap(),
        b"mine"
    );
}

#[test]
fn a_store_opens_whatever_else_it_holds_and_so_does_a_creation_that_stopped_early() {
    // What a store's creation writes before its catalog, and what open makes: not foreign.
    let early: [&[&str]; 6] = [
        &["LOCK"],
        &["LOCK", "CATALOG.tmp"],
        &[".podstore-probe"],
        &["LOCK", ".podstore-probe"],
        &["quarantine/"],
        &["lost+found/"],
    ];
    for names in early {
        let root = tempfile::tempdir().unwrap();
        for name in names {
            match name.strip_suffix('/') {
                Some(d) => std::fs::create_dir(root.path().join(d)).unwrap(),
                None => std::fs::write(root.path().join(name), b"").unwrap(),
            }
        }
        let store = Store::open(root.path()).unwrap_or_else(|e| panic!("{names:?}: {e}"));
        store.put(b"k", b"v").unwrap();
        store.close().unwrap();
    }
    // A store of every format version, with a file of the user's beside it: a fixture without
    // a catalog (its segments make it a store), and one with.
    for fixture in common::compat::ALL_FIXTURES {
        let copy = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(fixture).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
        std::fs::write(copy.path().join("README.txt"), b"the backup of May").unwrap();
        for opts in [Options::default(), existing_only()] {
            let store = Store::open_with(copy.path(), opts).unwrap();
            assert!(!store.is_empty(), "{fixture}");
            store.close().unwrap();
        }
        assert_eq!(
            std::fs::read(copy.path().join("README.txt")).unwrap(),
            b"the backup of May"
        );
    }
    // A checkpoint of a store never written to holds its CATALOG alone (no LOCK, no
    // segment): a store, for `create(false)` too.
    let root = tempfile::tempdir().unwrap();
    let store = Store::open(root.path().join("s")).unwrap();
    store.checkpoint(root.path().join("ck")).unwrap();
    store.close().unwrap();
    let names: Vec<_> = std::fs::read_dir(root.path().join("ck"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["CATALOG"]);
    std::fs::write(root.path().join("ck/notes.txt"), b"mine").unwrap();
    Store::open_with(root.path().join("ck"), existing_only()).unwrap();
}
