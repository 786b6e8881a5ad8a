//! Every whole-value read of a capped store counts in its hit ratio and marks the value for a
//! second chance: `get`, `get_into` and `get_bytes` (the cache's zero-copy read) alike.

use podstore::{Durability, Options, Store};

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

/// `Options::second_chance_budget` bounds what the steps append again: with every value read
/// (each earns a chance), the bytes of second chances stay within the budget's share of the
/// bytes evicted, and a larger budget appends more.
#[test]
fn the_budget_bounds_what_second_chances_append() {
    let run = |budget: Option<f64>| {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = Options::default()
            .segment_size(1 << 20)
            .size_cap(Some(8 << 20))
            .second_chance(true)
            .cache_capacity(0)
            .warm_cache(false)
            .durability(Durability::Buffered);
        if let Some(b) = budget {
            opts = opts.second_chance_budget(b);
        }
        let store = Store::open_with(dir.path(), opts).unwrap();
        for k in 0..8000u64 {
            let value = vec![k as u8; 4096];
            store.put(format!("k{k:05}"), &value).unwrap();
            // Read once: marked for a chance.
            assert_eq!(store.get(format!("k{k:05}")).unwrap().unwrap(), value);
        }
        let s = store.stats();
        assert!(s.evicted_bytes > 16 << 20, "{s:?}");
        (s.second_chance_bytes, s.evicted_bytes)
    };
    let (chances, evicted) = run(Some(0.1));
    assert!(chances > 0, "no chance given");
    assert!(
        chances as f64 <= 0.1 * evicted as f64,
        "{chances} bytes of chances for {evicted} evicted under a budget of a tenth"
    );
    let (chances, evicted) = run(None);
    assert!(
        chances as f64 > 0.2 * evicted as f64 && chances as f64 <= 0.5 * evicted as f64,
        "{chances} bytes of chances for {evicted} evicted under the default half"
    );
}
