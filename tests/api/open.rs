//! Opening, options, locking.

use super::*;

#[test]
fn fresh_store_is_empty() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        assert_eq!(store.path(), fx.path(), "{what}");
        assert_contents(&store, &Model::new(), &what);
        assert_eq!(store.get(b"k").unwrap(), None, "{what}");
        assert_eq!(store.get_range(b"k", 0..1).unwrap(), None, "{what}");
        assert!(store.reader(b"k").unwrap().is_none(), "{what}");
        assert_eq!(store.recovery(), &RecoveryReport::default(), "{what}");
        store.flush().unwrap();
        store.close().unwrap();
    }
}

#[test]
fn open_with_default_options_resolves_auto_io_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert_ne!(store.io_mode(), IoMode::Auto);
    store.put(b"k", b"v").unwrap();
    let store = {
        store.close().unwrap();
        Store::open(dir.path()).unwrap()
    };
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn options_out_of_range_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let invalid = [
        Options::default().segment_size((1 << 20) - 1),
        Options::default().write_buffer_size(64 * KIB - 1),
        Options::default().write_buffer_size(64 * MIB + 1),
    ];
    for opts in invalid {
        let result = Store::open_with(dir.path(), opts.clone());
        assert!(
            matches!(result, Err(Error::InvalidOptions(_))),
            "{opts:?} gave {result:?}"
        );
    }
    let smallest = Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 * KIB);
    let store = Store::open_with(dir.path(), smallest).unwrap();
    store.put(b"k", b"v").unwrap();
    assert_eq!(store.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn second_open_of_an_open_store_is_locked() {
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let first = fx.open();
        first.put(b"k", b"v").unwrap();
        let attempts = [
            Store::open_with(fx.path(), fx.opts.clone()),
            Store::open(fx.path()),
        ];
        for attempt in attempts {
            match attempt {
                Err(Error::Locked { path }) => assert_eq!(path, fx.path(), "{mode:?}"),
                other => panic!("{mode:?}: second open gave {other:?}, want Locked"),
            }
        }
        // The failed attempts changed nothing.
        assert_eq!(first.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));

        first.close().unwrap();
        let second = fx.open();
        assert_eq!(second.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        drop(second);
        let third = fx.open();
        assert_eq!(third.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    }
}
