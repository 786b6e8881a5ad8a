//! Keys that share a fingerprint in the index.
//!
//! The index keeps a fingerprint of each key, not the key; two keys may share one, and then only
//! their records tell them apart. These tests make collisions the rule with
//! `Options::testing_hash_bits` (test machinery: 0 bits makes every key share one fingerprint,
//! 1 bit two), and check that no write of one key ever touches another's value: puts,
//! overwrites, `put_if_absent`, deletes, batches, large (blob) values, compaction of either key,
//! reopen and concurrent writers.

mod common;

use std::collections::BTreeMap;

use common::store::{MODES, TestStore, small_with};
use podstore::{Batch, Durability, Options, Store};

fn opts(mode: podstore::IoMode, bits: u32, cache: u64) -> Options {
    small_with(mode, Durability::Sync)
        .testing_hash_bits(bits)
        .cache_capacity(cache)
        .background_compaction(false)
        .compaction_threshold(0.01)
}

fn key(i: usize) -> Vec<u8> {
    // Keys of different lengths, so that a record read for the wrong key has another layout.
    format!("key-{i}-{}", "x".repeat(i % 7)).into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    let len = [0, 3, 100, 4097, 20_000][(i + round) % 5];
    (0..len).map(|b| (b + i * 31 + round * 7) as u8).collect()
}

/// The store holds exactly `model`: every key's value, `len`, `contains`, and the listing.
#[track_caller]
fn check(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: usize, what: &str) {
    for i in 0..keys {
        let k = key(i);
        let got = store.get(&k).unwrap();
        assert_eq!(got.as_ref(), model.get(&k), "{what}: get {i}");
        assert_eq!(
            store.contains(&k).unwrap(),
            model.contains_key(&k),
            "{what}: contains {i}"
        );
        assert_eq!(
            store.value_len(&k).unwrap(),
            model.get(&k).map(|v| v.len() as u64),
            "{what}: value_len {i}"
        );
    }
    assert_eq!(store.len(), model.len(), "{what}: len");
    let listed: Vec<Vec<u8>> = store.keys().map(|k| k.unwrap()).collect();
    let want: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert_eq!(listed, want, "{what}: keys");
}

#[test]
fn colliding_keys_keep_their_own_values_through_every_write_and_compaction() {
    const KEYS: usize = 24;
    for mode in MODES {
        for (bits, cache) in [(0, 0), (0, 64 << 20), (1, 64 << 20)] {
            let what = format!("{mode:?}, {bits} bits, cache {cache}");
            let fx = TestStore::new(opts(mode, bits, cache));
            let mut store = fx.open();
            let mut model = BTreeMap::new();
            for round in 0..4 {
                for i in (round % 2..KEYS).step_by(1 + round % 3) {
                    let v = value(i, round);
                    store.put(key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
                // put_if_absent of a present key keeps its value; of an absent one inserts.
                for i in [1, KEYS + round] {
                    let v = value(i, 9);
                    let absent = !model.contains_key(&key(i));
                    assert_eq!(store.put_if_absent(key(i), &v).unwrap(), absent, "{what}");
                    model.entry(key(i)).or_insert(v);
                }
                // Deletes of present and absent keys.
                for i in [round * 5 % KEYS, 100 + round] {
                    let existed = model.remove(&key(i)).is_some();
                    assert_eq!(store.delete(key(i)).unwrap(), existed, "{what}: delete {i}");
                }
                // A batch that writes one key twice and deletes another.
                let mut batch = Batch::new();
                let (a, b) = (round + 2, round + 3);
                batch
                    .put(key(a), b"first")
                    .put(key(a), value(a, 7))
                    .delete(key(b));
                store.write(&batch).unwrap();
                model.insert(key(a), value(a, 7));
                model.remove(&key(b));
                check(&store, &model, KEYS + 8, &format!("{what}, round {round}"));
                store.compact().unwrap();
                check(
                    &store,
                    &model,
                    KEYS + 8,
                    &format!("{what}, compacted {round}"),
                );
                store = fx.reopen(store);
                check(
                    &store,
                    &model,
                    KEYS + 8,
                    &format!("{what}, reopened {round}"),
                );
            }
        }
    }
}

#[test]
fn colliding_large_values_in_blob_files_keep_their_own_values() {
    let fx = TestStore::new(
        opts(podstore::IoMode::Buffered, 0, 64 << 20).large_value_threshold(64 << 10),
    );
    let mut store = fx.open();
    let mut model = BTreeMap::new();
    for round in 0..3 {
        for i in 0..6 {
            let v: Vec<u8> = (0..(100 << 10) + i * 1000)
                .map(|b| (b + round + i) as u8)
                .collect();
            store.put(key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        let existed = model.remove(&key(round)).is_some();
        assert_eq!(store.delete(key(round)).unwrap(), existed);
        check(&store, &model, 8, &format!("round {round}"));
        store.compact().unwrap();
        store = fx.reopen(store);
        check(&store, &model, 8, &format!("reopened {round}"));
    }
}

/// Writers of different keys that share one fingerprint race: each write must find its own key's
/// entry (or none) however the others change the slot between its look and its append.
#[test]
fn concurrent_writers_of_colliding_keys_never_lose_or_mix_values() {
    const THREADS: usize = 4;
    const PER: usize = 6;
    for mode in MODES {
        let fx = TestStore::new(opts(mode, 0, 64 << 20).durability(Durability::Buffered));
        let store = fx.open();
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let store = &store;
                s.spawn(move || {
                    for round in 0..30 {
                        for j in 0..PER {
                            let i = t * PER + j;
                            match (round + j) % 4 {
                                3 => {
                                    store.delete(key(i)).unwrap();
                                }
                                _ => drop(store.put(key(i), value(i, round)).unwrap()),
                            }
                        }
                        if t == 0 && round % 10 == 9 {
                            store.compact().unwrap();
                        }
                    }
                });
            }
        });
        // Each key's last write was round 29: a delete when (29 + j) % 4 == 3.
        let mut model = BTreeMap::new();
        for t in 0..THREADS {
            for j in 0..PER {
                let i = t * PER + j;
                if (29 + j) % 4 != 3 {
                    model.insert(key(i), value(i, 29));
                }
            }
        }
        check(&store, &model, THREADS * PER, &format!("{mode:?}"));
        let store = fx.reopen(store);
        check(
            &store,
            &model,
            THREADS * PER,
            &format!("{mode:?}, reopened"),
        );
    }
}
