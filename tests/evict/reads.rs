//! Every whole-value read of a capped store counts in its hit ratio and marks the value for a
//! second chance: `get`, `get_into` and `get_bytes` (the cache's zero-copy read) alike.

use podstore::{Options, Store};

#[test]
fn get_get_into_and_get_bytes_all_count_and_all_earn_a_second_chance() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(1 << 20)
        .size_cap(Some(8 << 20))
        .second_chance(true)
        .cache_capacity(0)
        .warm_cache(false);
    let store = Store::open_with(dir.path(), opts).unwrap();
    let value = |k: u64| vec![k as u8; 4096];
    let key = |k: u64| format!("k{k:03}");
    for k in 0..90 {
        store.put(key(k), value(k)).unwrap();
    }
    // Two keys in three read, each way a third of them; the rest never read.
    let mut buf = Vec::new();
    for k in (0..90).filter(|k| k % 3 != 2) {
        let got = match k % 3 {
            0 if k % 2 == 0 => store.get(key(k)).unwrap(),
            0 => store.get_bytes(key(k)).unwrap().map(|b| b.to_vec()),
            _ => store
                .get_into(key(k), &mut buf)
                .unwrap()
                .then(|| buf.clone()),
        };
        assert_eq!(got.unwrap(), value(k));
    }
    assert!(store.get_bytes("absent").unwrap().is_none());
    let s = store.stats();
    assert_eq!((s.capped_gets, s.capped_get_hits), (61, 60), "{s:?}");

    // Fill until the first eviction step has dropped the segment they are in (the second
    // chances land in the active segment: they go only with a later step).
    let filler = vec![0xAAu8; 64 << 10];
    let mut n = 0u64;
    while store.stats().evicted_files == 0 {
        store.put(format!("filler{n:05}"), &filler).unwrap();
        n += 1;
        assert!(n < 1000, "no eviction after {n} puts of 64 KiB");
    }
    let s = store.stats();
    assert!(s.second_chances >= 60, "{s:?}");
    for k in 0..90 {
        let got = store.get(key(k)).unwrap();
        if k % 3 == 2 {
            assert_eq!(got, None, "key {k}, never read, went with its file");
        } else {
            assert_eq!(got, Some(value(k)), "key {k} was read: kept");
        }
    }
}
