//! Keys and values.

use super::*;

#[test]
fn put_then_read_back_every_value_size() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model: Model = VALUE_SIZES
            .iter()
            .map(|&n| (key(n), pattern(n, n as u64)))
            .collect();
        for (key, value) in &model {
            store.put(key, value).unwrap();
            assert_bytes_eq(&get_present(&store, key), value, &what);
            assert_bytes_eq(&read_through_reader(&store, key), value, &what);
        }
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        for (key, value) in &model {
            assert_bytes_eq(&read_through_reader(&store, key), value, &what);
        }
    }
}

#[test]
fn empty_value() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let mut store = fx.open();
        store.put(b"empty", b"").unwrap();
        for pass in ["before reopen", "after reopen"] {
            let what = format!("{what} {pass}");
            assert_eq!(store.get(b"empty").unwrap(), Some(vec![]), "{what}");
            assert_eq!(store.value_len(b"empty").unwrap(), Some(0), "{what}");
            assert!(store.contains(b"empty").unwrap(), "{what}");
            assert_eq!(store.len(), 1, "{what}");
            assert_eq!(
                store.get_range(b"empty", 0..0).unwrap(),
                Some(vec![]),
                "{what}"
            );
            assert_eq!(
                store.get_range(b"empty", ..).unwrap(),
                Some(vec![]),
                "{what}"
            );
            assert_eq!(
                store.get_range(b"empty", 0..1).unwrap(),
                Some(vec![]),
                "{what}: an end past the value is clamped"
            );
            assert_out_of_range(store.get_range(b"empty", 1..), 1, 0, 0);

            let mut reader = store.reader(b"empty").unwrap().expect("present");
            assert_eq!(reader.len(), 0, "{what}");
            assert!(reader.is_empty(), "{what}");
            assert_eq!(reader.read(&mut [0u8; 16]).unwrap(), 0, "{what}");
            store = fx.reopen(store);
        }
    }
}

#[test]
fn key_of_max_len_works() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        // Arbitrary bytes, zeroes included.
        let max_key = pattern(MAX_KEY_LEN, 4096);
        let value = pattern(5000, 1);
        store.put(&max_key, &value).unwrap();
        let model = Model::from([(max_key.clone(), value.clone())]);
        assert_contents(&store, &model, &what);
        check_range(&store, &max_key, &value, 4000..4200, &what);

        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        assert!(store.delete(&max_key).unwrap(), "{what}");
        assert!(store.is_empty(), "{what}");
    }
}

#[test]
fn empty_and_too_long_keys_are_rejected_by_every_method() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", b"v").unwrap();

        for (method, err) in errors_for_key(&store, b"") {
            assert!(
                matches!(err, Some(Error::EmptyKey)),
                "{what}: {method} with an empty key gave {err:?}"
            );
        }
        let long = vec![b'x'; MAX_KEY_LEN + 1];
        for (method, err) in errors_for_key(&store, &long) {
            assert!(
                matches!(err, Some(Error::KeyTooLarge { len, max })
                    if len == MAX_KEY_LEN + 1 && max == MAX_KEY_LEN),
                "{what}: {method} with a {}-byte key gave {err:?}",
                long.len()
            );
        }
        // Nothing was written by the rejected calls.
        let model = Model::from([(b"k".to_vec(), b"v".to_vec())]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn value_longer_than_max_value_len_is_rejected() {
    let len = usize::try_from(MAX_VALUE_LEN + 1).expect("64-bit target");
    // A zeroed allocation is mapped lazily: this costs address space, not memory, as long as
    // nothing touches the bytes (put must reject the value by its length alone).
    if Vec::<u8>::new().try_reserve_exact(len).is_err() {
        eprintln!("skipped: cannot reserve {len} bytes of address space");
        return;
    }
    let value = vec![0u8; len];
    let fx = Fixture::new(Options::default());
    let store = Store::open_with(fx.path(), fx.opts.clone()).unwrap();
    match store.put(b"k", &value) {
        Err(Error::ValueTooLarge { len: l, max }) => {
            assert_eq!((l, max), (MAX_VALUE_LEN + 1, MAX_VALUE_LEN))
        }
        other => panic!("put of a {len}-byte value gave {other:?}"),
    }
    assert!(store.is_empty());
}

#[test]
fn overwrite_keeps_the_last_value() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"other", b"unchanged").unwrap();
        let versions = [
            pattern(10_000, 1),
            pattern(5, 2),
            Vec::new(),
            pattern(4097, 3),
        ];
        for value in &versions {
            store.put(b"k", value).unwrap();
            assert_bytes_eq(&get_present(&store, b"k"), value, &what);
            assert_eq!(store.value_len(b"k").unwrap(), Some(value.len() as u64));
            assert_eq!(store.len(), 2, "{what}: overwriting must not add a key");
        }
        let model = Model::from([
            (b"k".to_vec(), versions.last().unwrap().clone()),
            (b"other".to_vec(), b"unchanged".to_vec()),
        ]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
    }
}

#[test]
fn delete_removes_the_key_and_reports_whether_it_existed() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        assert!(
            !store.delete(b"a").unwrap(),
            "{what}: delete of a missing key"
        );
        assert!(
            store.is_empty(),
            "{what}: deleting a missing key must not add it"
        );

        store.put(b"a", pattern(9000, 1)).unwrap();
        store.put(b"b", b"bee").unwrap();
        assert!(store.delete(b"a").unwrap(), "{what}");
        assert_eq!(store.get(b"a").unwrap(), None, "{what}");
        assert_eq!(store.get_range(b"a", 0..1).unwrap(), None, "{what}");
        assert!(store.reader(b"a").unwrap().is_none(), "{what}");
        assert_eq!(store.value_len(b"a").unwrap(), None, "{what}");
        assert!(!store.contains(b"a").unwrap(), "{what}");
        assert!(!store.delete(b"a").unwrap(), "{what}: second delete");
        let model = Model::from([(b"b".to_vec(), b"bee".to_vec())]);
        assert_contents(&store, &model, &what);

        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));
        assert!(!store.delete(b"a").unwrap(), "{what}: delete after reopen");

        store.put(b"a", b"again").unwrap();
        let model = Model::from([
            (b"a".to_vec(), b"again".to_vec()),
            (b"b".to_vec(), b"bee".to_vec()),
        ]);
        assert_contents(&store, &model, &what);
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after second reopen"));
    }
}

#[test]
fn len_is_empty_contains_and_keys_track_every_operation() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let mut model = Model::new();
        let mut rng = XorShift::new(42);
        for step in 0..150 {
            let key = key(rng.below(20));
            if rng.below(3) == 0 {
                let existed = model.remove(&key).is_some();
                assert_eq!(store.delete(&key).unwrap(), existed, "{what} step {step}");
            } else {
                let value = pattern(rng.below(6000), step);
                store.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            assert_contents(&store, &model, &format!("{what} step {step}"));
        }
        let store = fx.reopen(store);
        assert_contents(&store, &model, &format!("{what} after reopen"));

        for key in model.keys() {
            assert!(store.delete(key).unwrap(), "{what}");
        }
        assert_contents(&store, &Model::new(), &format!("{what} all deleted"));
        let store = fx.reopen(store);
        assert_contents(
            &store,
            &Model::new(),
            &format!("{what} all deleted, reopened"),
        );
    }
}
