//! Ordered listing (`Store::range`, `Store::prefix`) against a `BTreeMap` model: many keys over
//! many segments and blob files whose footers span many key blocks, through overwrites,
//! deletes, seals, reopens and compaction; while compaction moves keys under it; on the
//! old-format fixture; and on a damaged footer.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Random, XorShift, compat};
use podstore::{Durability, IoMode, Options, Result, Store};

fn options() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .large_value_threshold(32 << 10)
        .durability(Durability::Buffered)
        .flush_interval(None)
        .background_compaction(false)
        .compaction_threshold(0.1)
}

/// A key of the key space: a few prefixes, a number, sometimes long (up to 4 KiB).
fn key(rng: &mut XorShift) -> Vec<u8> {
    let prefix = ["a/", "ab/", "b/", "photo/", "photo/x/", "z"][rng.below(6)];
    let mut k = format!("{prefix}{:05}", rng.below(3000)).into_bytes();
    if rng.below(40) == 0 {
        k.resize(1 + rng.below(podstore::MAX_KEY_LEN), b'~');
    }
    k
}

fn listed(it: podstore::Keys<'_>) -> Vec<Vec<u8>> {
    it.collect::<Result<_>>().expect("listing")
}

/// Random ranges (every bound kind, at keys and between them) and prefixes, against the model.
fn check(store: &Store, model: &BTreeMap<Vec<u8>, usize>, rng: &mut XorShift, what: &str) {
    let all: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert_eq!(listed(store.range::<&[u8]>(..)), all, "{what}: range(..)");
    assert_eq!(store.len(), all.len(), "{what}");
    let probe = |rng: &mut XorShift| -> Vec<u8> {
        match rng.below(3) {
            0 if !all.is_empty() => all[rng.below(all.len())].clone(),
            1 if !all.is_empty() => {
                let mut k = all[rng.below(all.len())].clone();
                k.truncate(rng.below(k.len() + 1));
                k
            }
            _ => key(rng),
        }
    };
    for _ in 0..40 {
        let (a, b) = (probe(rng), probe(rng));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let bound = |rng: &mut XorShift, k: &[u8]| -> Bound<Vec<u8>> {
            match rng.below(3) {
                0 => Included(k.to_vec()),
                1 => Excluded(k.to_vec()),
                _ => Unbounded,
            }
        };
        let (s, e) = (bound(rng, &lo), bound(rng, &hi));
        if lo == hi && matches!((&s, &e), (Excluded(_), Excluded(_))) {
            continue; // BTreeMap refuses it
        }
        let want: Vec<Vec<u8>> = model
            .range((s.clone(), e.clone()))
            .map(|(k, _)| k.clone())
            .collect();
        let got = listed(store.range::<Vec<u8>>((s.clone(), e.clone())));
        assert_eq!(got, want, "{what}: range({s:?}, {e:?})");
        let p = probe(rng);
        let p = &p[..p.len().min(1 + rng.below(8))];
        let want: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(p)).cloned().collect();
        assert_eq!(listed(store.prefix(p)), want, "{what}: prefix({p:?})");
    }
}

#[test]
fn listing_matches_a_btreemap_through_writes_seals_reopens_and_compaction() {
    for mode in [IoMode::Direct, IoMode::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        let opts = options().io_mode(mode);
        let mut store = Store::open_with(dir.path(), opts.clone()).unwrap();
        let mut model: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut rng = XorShift::new(17);
        for round in 0..6 {
            for _ in 0..1500 {
                let k = key(&mut rng);
                if rng.below(5) == 0 {
                    store.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let len = if rng.below(200) == 0 {
                        40 << 10
                    } else {
                        rng.below(300)
                    };
                    store.put(&k, rng.bytes(len)).unwrap();
                    model.insert(k, len);
                }
            }
            let what = format!("{mode:?}, round {round}");
            check(&store, &model, &mut rng, &format!("{what}, written"));
            match round % 3 {
                0 => {
                    store.seal().unwrap();
                }
                1 => {
                    store.compact().unwrap();
                }
                _ => {
                    store.close().unwrap();
                    store = Store::open_with(dir.path(), opts.clone()).unwrap();
                }
            }
            check(&store, &model, &mut rng, &format!("{what}, after step"));
        }
        store.close().unwrap();
    }
}

/// Keys that no writer touches are listed exactly once, in order, by listings that run while
/// other keys are overwritten and compaction moves every live key to new files.
#[test]
fn keys_live_throughout_are_listed_once_while_compaction_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), options().compaction_threshold(0.01)).unwrap();
    let stable: BTreeSet<Vec<u8>> = (0..2000)
        .map(|i| format!("s/{i:05}").into_bytes())
        .collect();
    for k in &stable {
        store.put(k, b"stable value").unwrap();
    }
    let done = AtomicBool::new(false);
    let mut listings = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Overwrites make the segments holding the stable keys dead enough to compact:
            // every compaction moves stable keys to new files.
            for round in 0..6u64 {
                for i in 0..400u64 {
                    store
                        .put(format!("t/{:03}", (round * 7 + i) % 300), vec![7u8; 500])
                        .unwrap();
                }
                store.compact().unwrap();
            }
            done.store(true, Ordering::Release);
        });
        loop {
            let finished = done.load(Ordering::Acquire);
            let keys = listed(store.range::<&str>(..));
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "ascending, no duplicate"
            );
            let got: BTreeSet<Vec<u8>> =
                keys.into_iter().filter(|k| k.starts_with(b"s/")).collect();
            assert_eq!(got, stable);
            assert_eq!(listed(store.prefix("s/001")).len(), 100);
            listings += 1;
            if finished {
                break;
            }
        }
    });
    assert!(listings > 1, "{listings} listings");
}

/// A listing that is half way when compaction moves every key to new files (and removes the old
/// ones) still lists each key once: the rest comes from the files it started with, and the
/// index, which now names the copies, says the keys are live.
#[test]
fn a_listing_half_way_survives_a_compaction_that_moves_its_keys() {
    for seal_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), options().compaction_threshold(0.01)).unwrap();
        let keys: Vec<Vec<u8>> = (0..3000)
            .map(|i| format!("s/{i:05}").into_bytes())
            .collect();
        for k in &keys {
            store.put(k, b"stable value").unwrap();
        }
        for i in 0..600 {
            store
                .put(format!("t/{:03}", i % 50), vec![1u8; 200])
                .unwrap();
        }
        if seal_first {
            store.seal().unwrap();
        }
        let mut it = store.prefix("s/");
        let mut got: Vec<Vec<u8>> = (&mut it).take(1000).map(|k| k.unwrap()).collect();
        let report = store.compact().unwrap();
        assert!(report.segments_compacted >= 1, "{report:?}");
        got.extend(it.map(|k| k.unwrap()));
        assert!(
            got == keys,
            "sealed first: {seal_first}: {} keys listed of {}",
            got.len(),
            keys.len()
        );
    }
}

/// The old-format fixture (footers of version 1) lists in order, and again once compaction
/// rewrote it with footers of version 2.
#[test]
fn the_old_format_fixture_lists_in_order() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(compat::FIXTURE_DIR);
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&fixture).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let want: Vec<Vec<u8>> = compat::expected_contents()
        .into_keys()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let opts = compat::options(IoMode::Buffered).compaction_threshold(f64::MIN_POSITIVE);
    let store = Store::open_with(dir.path(), opts).unwrap();
    assert_eq!(listed(store.range::<&str>(..)), want);
    store.compact().unwrap();
    assert_eq!(listed(store.range::<&str>(..)), want);
}

/// A key block damaged under an open store is an error item naming the file (not a panic, not
/// a wrong key), and ends the listing; a listing that does not reach the block is not affected.
#[test]
fn a_damaged_key_block_is_an_error_item() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let opts = options().io_mode(IoMode::Buffered);
    let store = Store::open_with(dir.path(), opts.clone()).unwrap();
    for i in 0..3000 {
        store.put(format!("k/{i:05}"), b"v").unwrap();
    }
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts).unwrap();
    let seg = common::files::written_files(dir.path(), common::files::FileKind::Log)
        .into_iter()
        .next()
        .unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    let id = u64::from_str_radix(&seg.file_name().unwrap().to_string_lossy()[4..20], 16).unwrap();
    // A byte in the last key block: after every key but the last few hundred. The tree here is
    // one level, its root right after the last block.
    let t = common::records::trailer(&bytes).unwrap();
    let table = &bytes[t.table_offset as usize..][..t.table_len as usize];
    let h = podstore::format::footer::LocationHeader::decode(&t, table).unwrap();
    assert_eq!(h.depth, 1);
    let at = h.root_offset - 100;
    let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    file.write_all_at(&[bytes[at as usize] ^ 0x08], at).unwrap();
    drop(file);
    let items: Vec<Result<Vec<u8>>> = store.range::<&str>(..).collect();
    let last = items.last().unwrap();
    match last {
        Err(podstore::Error::Corruption {
            segment, offset, ..
        }) => {
            assert_eq!(*segment, id);
            assert!(
                *offset < at && at - *offset < 9000,
                "{offset} for a flip at {at}"
            );
        }
        other => panic!("expected a corruption item last, got {other:?}"),
    }
    assert!(items[..items.len() - 1].iter().all(|i| i.is_ok()));
    assert!(
        items.len() > 1000,
        "the blocks before it listed: {}",
        items.len()
    );
    // The start of the range is found without reading the damaged block.
    assert_eq!(listed(store.prefix("k/0000")).len(), 10);
    store.close().unwrap();
}
