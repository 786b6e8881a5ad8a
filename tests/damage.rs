//! Issue 14, "Damage is never silent": hostile file names, files the store cannot account for,
//! and what open does with them.

mod common;
use common::files::{FileKind, dir_with, file_name};

use podstore::{Error, IoMode, Options, Store};

fn opts(mode: IoMode) -> Options {
    Options {
        io_mode: mode,
        background_compaction: false,
        flush_interval: None,
        ..Options::default()
    }
}

/// An empty `seg-ffffffffffffffff.pod` (and its neighbour one below) made open panic when
/// computing the next id (debug) or wrap the id to 0 (release). Open now refuses ids above the
/// store's range with a typed error naming the file, in every build.
#[test]
fn a_file_named_with_an_id_at_the_top_of_the_range_is_refused_not_a_panic() {
    for id in [u64::MAX, u64::MAX - 1, 1 << 63] {
        for kind in [FileKind::Log, FileKind::Blob] {
            let name = file_name(id, kind);
            let dir = dir_with([(name.clone(), &[][..])]);
            match Store::open_with(dir.path(), opts(IoMode::Buffered)) {
                Err(Error::FileIdOutOfRange {
                    path: Some(path),
                    id: got,
                }) => {
                    assert_eq!(path, dir.path().join(&name));
                    assert_eq!(got, id);
                }
                other => panic!("{name}: {other:?}"),
            }
            // Nothing was removed or written.
            assert!(dir.path().join(&name).exists(), "{name}");
        }
    }
}

/// The largest id the store uses is accepted; the write that would need the next one is
/// refused with a typed error (no panic, no wrap to id 0), and reads and a reopen still work.
#[test]
fn the_write_that_needs_an_id_past_the_last_is_refused() {
    let top = i64::MAX as u64;
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        {
            let store = Store::open_with(dir.path(), opts(mode)).unwrap();
            store.put(b"k", b"v").unwrap();
            store.close().unwrap();
        }
        // An empty file at the top id: holds nothing; its id is still spent.
        std::fs::write(dir.path().join(file_name(top, FileKind::Log)), b"").unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        for large in [false, true] {
            let value = vec![7u8; if large { 2 << 20 } else { 10 }];
            match store.put(b"k2", &value) {
                Err(Error::FileIdOutOfRange { path: None, id }) => {
                    assert_eq!(id, top + 1)
                }
                other => panic!("large {large}: {other:?}"),
            }
        }
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(store.get(b"k2").unwrap(), None);
        store.close().unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        store.close().unwrap();
    }
}

/// Names that are not exactly what the store writes (upper-case hex, a sign, too short) are
/// not store files: they are left alone, and never opened under another file's name.
#[test]
fn names_that_are_almost_store_names_are_not_store_files() {
    let names = [
        "seg-000000000000000A.pod",
        "seg-+000000000000001.pod",
        "blob-00000000000001.pod",
        "seg-00000000000000001.pod",
    ];
    let dir = dir_with(names.iter().map(|n| (n.to_string(), &b"junk"[..])));
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    store.put(b"k", b"v").unwrap();
    store.close().unwrap();
    for n in names {
        assert_eq!(std::fs::read(dir.path().join(n)).unwrap(), b"junk", "{n}");
    }
}
