//! Large values, segments, reopening.

use super::*;

#[test]
fn values_larger_than_the_write_buffer() {
    let big = pattern(3 * MIB, 3);
    for opts in configs() {
        let opts = opts.write_buffer_size(64 * KIB);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let model = Model::from([
            (b"a-before".to_vec(), pattern(100, 1)),
            (b"big".to_vec(), big.clone()),
            (b"z-after".to_vec(), pattern(70_000, 2)),
        ]);
        put_all(&store, &model);
        let check = |store: &Store, what: &str| {
            assert_contents(store, &model, what);
            assert_bytes_eq(&read_through_reader(store, b"big"), &big, what);
            let buffer = 64 * KIB as u64;
            for range in [
                buffer - 10..buffer + 10,
                5 * buffer - 1..7 * buffer + 1,
                0..3 * MIB as u64,
            ] {
                check_range(store, b"big", &big, range, what);
            }
        };
        check(&store, &what);
        let store = fx.reopen(store);
        check(&store, &format!("{what} after reopen"));
    }
}

#[test]
fn segments_roll_and_everything_survives_reopen() {
    for opts in configs() {
        let opts = opts.segment_size(1 << 20);
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        let mut model: Model = (0..40)
            .map(|i| (key(i), pattern(100_000, i as u64)))
            .collect();
        // Larger than a whole segment.
        model.insert(b"huge".to_vec(), pattern(5 * MIB / 2, 1000));
        put_all(&store, &model);
        // Overwrite and delete keys whose first records are in earlier segments.
        model.insert(key(0), pattern(3000, 2000));
        store.put(key(0), &model[&key(0)]).unwrap();
        model.remove(&key(1));
        assert!(store.delete(key(1)).unwrap());
        assert_contents(&store, &model, &what);

        let store = fx.reopen(store);
        // Log segments, and with Durability::Sync the blob file of the value larger than a
        // segment: recovery counts both as sealed.
        let files = store_file_count(&fx);
        assert!(
            files >= 5,
            "{what}: only {files} store files (log segments and blob files) for ~6.5 MiB"
        );
        let report = store.recovery();
        assert_eq!(report.sealed_segments, files, "{what}: {report:?}");
        assert!(report.recovered.is_empty(), "{what}: {report:?}");
        assert_eq!(report.removed_segments, 0, "{what}: {report:?}");
        assert_contents(&store, &model, &format!("{what} after reopen"));

        // Writing continues in new segments after a reopen.
        for i in 40..60 {
            let value = pattern(100_000, i as u64);
            store.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        }
        assert!(store.delete(key(2)).unwrap());
        model.remove(&key(2));
        let store = fx.reopen(store);
        assert!(
            store_file_count(&fx) > files,
            "{what}: no new segment after reopen"
        );
        assert_contents(&store, &model, &format!("{what} after second reopen"));
    }
}

#[test]
fn reopen_after_close_and_after_drop() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let mut model: Model = (0..20)
            .map(|i| (key(i), pattern(i * 1500, i as u64)))
            .collect();

        let store = fx.open();
        put_all(&store, &model);
        for i in [3, 7, 11] {
            assert!(store.delete(key(i)).unwrap());
            model.remove(&key(i));
        }
        store.close().unwrap();

        let store = fx.open();
        assert_contents(&store, &model, &format!("{what} after close"));
        assert!(
            store.recovery().recovered.is_empty(),
            "{what}: {:?}",
            store.recovery()
        );
        for i in 20..30 {
            let value = pattern(i * 700, i as u64);
            store.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        }
        assert!(store.delete(key(0)).unwrap());
        model.remove(&key(0));
        drop(store);

        let store = fx.open();
        assert_contents(&store, &model, &format!("{what} after drop"));
        assert!(
            store.recovery().recovered.is_empty(),
            "{what}: {:?}",
            store.recovery()
        );
    }
}
