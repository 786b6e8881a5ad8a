//! get_range.

use super::*;

#[test]
fn get_range_matches_slices_for_every_bound_combination() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        for &size in &VALUE_SIZES {
            let value = pattern(size, size as u64 + 7);
            let key = key(size);
            store.put(&key, &value).unwrap();
            let bounds = interesting_bounds(size as u64);
            for &start in &bounds {
                for &end in &bounds {
                    check_range(&store, &key, &value, (start, end), &what);
                }
            }
        }
    }
}

#[test]
fn get_range_examples() {
    use Bound::{Excluded, Included, Unbounded};
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let store = fx.open();
        let v = pattern(10_000, 5);
        let len = v.len() as u64;
        store.put(b"k", &v).unwrap();
        let range = |r: (Bound<u64>, Bound<u64>)| range_of(&store, b"k", r);

        assert_eq!(range_of(&store, b"k", ..), v);
        assert_eq!(range_of(&store, b"k", 0..1), &v[..1]);
        assert_eq!(range_of(&store, b"k", 0..0), b"");
        assert_eq!(range_of(&store, b"k", ..0), b"");
        assert_eq!(range_of(&store, b"k", 5000..5000), b"");
        assert_eq!(range_of(&store, b"k", len..len), b"");
        assert_eq!(range_of(&store, b"k", len..), b"");
        assert_eq!(range_of(&store, b"k", len - 1..len), &v[9999..]);
        assert_eq!(range_of(&store, b"k", len - 1..), &v[9999..]);
        assert_eq!(range_of(&store, b"k", ..=len - 1), v);
        assert_eq!(range_of(&store, b"k", ..4096), &v[..4096]);
        assert_eq!(range_of(&store, b"k", 4095..4097), &v[4095..4097]);
        assert_eq!(range_of(&store, b"k", 4096..8192), &v[4096..8192]);
        assert_eq!(range_of(&store, b"k", 100..=8300), &v[100..=8300]);
        assert_eq!(range((Excluded(4095), Included(4096))), &v[4096..=4096]);
        assert_eq!(range((Excluded(4095), Excluded(4097))), &v[4096..4097]);
        assert_eq!(range((Excluded(8000), Unbounded)), &v[8001..]);
        assert_eq!(range((Unbounded, Included(0))), &v[..1]);
    }
}

#[test]
fn get_range_clamps_the_end_and_refuses_a_start_past_the_end() {
    use Bound::{Excluded, Included, Unbounded};
    for mode in modes() {
        let fx = Fixture::new(Options::default().io_mode(mode));
        let store = fx.open();
        let len = 10_000u64;
        let v = pattern(len as usize, 1);
        store.put(b"k", &v).unwrap();
        let range = |r: (Bound<u64>, Bound<u64>)| store.get_range(b"k", r);

        // An end past the value is clamped to its end (HTTP/S3 range requests).
        assert_eq!(range_of(&store, b"k", len..len + 1), b"");
        assert_eq!(range_of(&store, b"k", 0..len + 1), v);
        assert_eq!(range_of(&store, b"k", len - 1..=len), &v[9999..]);
        assert_eq!(range_of(&store, b"k", ..=len), v);
        assert_eq!(range_of(&store, b"k", ..=u64::MAX), v);
        assert_eq!(range_of(&store, b"k", 0..4096 * 4), v);
        // The README's first range read, on a value shorter than the range.
        store.put("small", vec![3u8; 267]).unwrap();
        assert_eq!(
            store.get_range("small", 0..4096).unwrap().unwrap().len(),
            267
        );

        // A start past the end is an error naming the key.
        assert_out_of_range(store.get_range(b"k", len + 1..), len + 1, len, len);
        assert_out_of_range(store.get_range(b"k", 20_000..30_000), 20_000, 30_000, len);
        match store.get_range(b"k", 20_000..30_000) {
            Err(e @ Error::OutOfRange { .. }) => {
                assert!(e.to_string().contains("\"k\""), "{e}")
            }
            other => panic!("{other:?}"),
        }
        // Start past the end of the range, inside the value.
        assert_out_of_range(range((Included(5), Excluded(3))), 5, 3, len);
        assert_out_of_range(range((Included(4097), Excluded(4096))), 4097, 4096, len);
        // A start that overflows u64 once turned into a start..end pair.
        assert_out_of_range(range((Excluded(u64::MAX), Unbounded)), u64::MAX, len, len);

        // A missing key has no value to be out of.
        assert_eq!(store.get_range(b"missing", len..len + 1).unwrap(), None);
    }
}
