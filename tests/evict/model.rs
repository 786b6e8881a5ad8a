//! A property test against a map: with a cap small enough that every sequence evicts, a get
//! returns the map's current value of its key or nothing (evicted), never an older value or a
//! deleted one, at any point and across reopens; a listing names no key the map does not hold.

use std::collections::HashMap;

use podstore::{CompactOptions, Durability, Options, Store};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

use crate::common::long;
use crate::values::{check, make};

const SEGMENT: u64 = 1 << 20;
const KEYS: u8 = 12;

#[derive(Debug, Clone)]
enum Op {
    /// A put of key `.0`, `.1` bytes long.
    Put(u8, usize),
    Delete(u8),
    Get(u8),
    Compact,
    Seal,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..KEYS, 1usize..(160 << 10)).prop_map(|(k, len)| Op::Put(k, len)),
        2 => (0..KEYS).prop_map(Op::Delete),
        6 => (0..KEYS).prop_map(Op::Get),
        1 => Just(Op::Compact),
        1 => Just(Op::Seal),
        1 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn opts(durability: Durability, second_chance: bool) -> Options {
    Options::default()
        .second_chance(second_chance)
        .segment_size(SEGMENT)
        .size_cap(Some(2 * SEGMENT))
        .durability(durability)
        // Some values get blob files of their own (with durable puts).
        .large_value_threshold(96 << 10)
        .background_compaction(false)
}

/// Runs `ops`, checking every get against `model` (the newest write of each key: `Some(n)`
/// for write number n, `None` deleted).
fn run(ops: &[Op], durability: Durability, second_chance: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open_with(dir.path(), opts(durability, second_chance)).unwrap();
    let mut model: HashMap<u8, Option<u64>> = HashMap::new();
    let mut counter = 0;
    let get =
        |store: &Store, model: &HashMap<u8, Option<u64>>, k: u8| -> Result<(), TestCaseError> {
            let got = store.get(key(k)).unwrap();
            if let Some(v) = got {
                let n = check(&key(k), &v);
                prop_assert_eq!(model.get(&k).copied().flatten(), Some(n), "key {}", k);
            }
            Ok(())
        };
    for op in ops {
        match *op {
            Op::Put(k, len) => {
                counter += 1;
                store.put(key(k), make(&key(k), counter, len)).unwrap();
                model.insert(k, Some(counter));
            }
            Op::Delete(k) => {
                store.delete(key(k)).unwrap();
                model.insert(k, None);
            }
            Op::Get(k) => get(&store, &model, k)?,
            Op::Compact => {
                store
                    .compact_with(CompactOptions::new().threshold(0.2))
                    .unwrap();
            }
            Op::Seal => {
                store.seal().unwrap();
            }
            Op::Reopen => {
                store.close().unwrap();
                store = Store::open_with(dir.path(), opts(durability, second_chance)).unwrap();
            }
        }
    }
    for pass in 0..2 {
        for k in 0..KEYS {
            get(&store, &model, k)?;
        }
        for listed in store.keys() {
            let listed = listed.unwrap();
            let k: u8 = std::str::from_utf8(&listed[1..]).unwrap().parse().unwrap();
            prop_assert!(
                model.get(&k).copied().flatten().is_some(),
                "key {} listed",
                k
            );
        }
        if pass == 0 {
            store.close().unwrap();
            store = Store::open_with(dir.path(), opts(durability, second_chance)).unwrap();
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: long::sized(24, 200),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn buffered_gets_are_current_or_evicted(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops, Durability::Buffered, false)?;
    }

    #[test]
    fn buffered_gets_with_second_chances_are_current_or_evicted(
        ops in prop::collection::vec(op(), 1..60)
    ) {
        run(&ops, Durability::Buffered, true)?;
    }

    /// With second chances (values read since written appended again before eviction).
    #[test]
    fn durable_gets_are_current_or_evicted(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, Durability::Sync, true)?;
    }
}
