//! Model-based property test of expiry: random sequences of puts with and without expiries
//! (a time to live, or an instant), overwrites, deletes, `put_if_absent`, batches, clock jumps,
//! compactions, seals and reopens, run against a store on a [`MockClock`] and against a map;
//! after every operation every key's `get`, `get_range`, `metadata`, `contains`, the listing and
//! `len` agree with the map.
//!
//! Time is counted in slots of 1000 s: expiries fall on slot boundaries (an instant `T0 + k`
//! slots, or a time to live of whole slots) and the clock jumps by whole slots, while the real
//! time a case takes (well under a slot) only moves the clock within one. So a value of slot
//! `k` has expired exactly when the clock's slot is `k` or later, whatever the test's speed.
//! [`CASES`] cases per property, more under `PODSTORE_TEST_LONG`; `PROPTEST_CASES` overrides.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use podstore::testing::MockClock;
use podstore::{Batch, CompactOptions, IoMode, PutOptions, Store};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};

use super::common;
use super::common::store::{TestStore, quiet, small};

const CASES: u64 = 24;
const LONG_CASES: u64 = 200;
const SLOT: Duration = Duration::from_secs(1000);
const KEYS: u8 = 6;

/// When a put's value expires.
#[derive(Debug, Clone, Copy)]
enum Exp {
    Never,
    /// A time to live of this many slots (0: expired at once).
    Ttl(u64),
    /// At slot `T0 + k`.
    At(u64),
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, usize, Exp),
    PutIfAbsent(u8, usize, Exp),
    Delete(u8),
    /// `None`: a delete.
    Batch(Vec<(u8, Option<(usize, Exp)>)>),
    Advance(u64),
    /// At this dead fraction: low, every segment with a dead byte; high, only the segments
    /// (nearly) all dead, so that older records of a key are left while its newer ones go.
    Compact(f64),
    Seal,
    Reopen,
}

fn exp() -> impl Strategy<Value = Exp> {
    prop_oneof![
        2 => Just(Exp::Never),
        3 => (0u64..4).prop_map(Exp::Ttl),
        1 => (0u64..8).prop_map(Exp::At),
    ]
}

fn len() -> impl Strategy<Value = usize> {
    // Mostly small; some above the blob threshold of `store` (128 KiB).
    prop_oneof![6 => 0usize..3000, 1 => 130_000usize..140_000]
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..KEYS;
    prop_oneof![
        8 => (key.clone(), len(), exp()).prop_map(|(k, l, e)| Op::Put(k, l, e)),
        2 => (key.clone(), len(), exp()).prop_map(|(k, l, e)| Op::PutIfAbsent(k, l, e)),
        2 => key.clone().prop_map(Op::Delete),
        2 => prop::collection::vec(
            (key, prop::option::weighted(0.8, (0usize..3000, exp()))),
            1..4
        )
        .prop_map(Op::Batch),
        3 => (1u64..3).prop_map(Op::Advance),
        3 => prop_oneof![Just(0.01), Just(0.5), Just(1.0)].prop_map(Op::Compact),
        3 => Just(Op::Seal),
        2 => Just(Op::Reopen),
    ]
}

fn key(k: u8) -> Vec<u8> {
    format!("key-{k}").into_bytes()
}

/// The value of the `n`-th write, `len` bytes.
fn value(n: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (n as usize * 31 + i * 7) as u8).collect()
}

/// The map the store must agree with: per key its value and the slot it expires at.
#[derive(Default)]
struct Model {
    map: BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>,
    /// The clock's slot.
    slot: u64,
}

impl Model {
    fn live(&self, key: &[u8]) -> Option<&Vec<u8>> {
        match self.map.get(key) {
            Some((v, exp)) if exp.is_none_or(|e| e > self.slot) => Some(v),
            _ => None,
        }
    }

    /// The slot a put made now with `e` expires at.
    fn slot_of(&self, e: Exp) -> Option<u64> {
        match e {
            Exp::Never => None,
            Exp::Ttl(d) => Some(self.slot + d),
            Exp::At(k) => Some(k),
        }
    }
}

struct Run {
    t: TestStore,
    clock: MockClock,
    store: Option<Store>,
    t0: SystemTime,
    model: Model,
    writes: u64,
}

impl Run {
    fn store(&self) -> &Store {
        self.store.as_ref().expect("open")
    }

    fn options(&self, e: Exp) -> PutOptions {
        match e {
            Exp::Never => PutOptions::new(),
            Exp::Ttl(d) => PutOptions::new().ttl(SLOT * d as u32),
            Exp::At(k) => PutOptions::new().expires_at(self.t0 + SLOT * k as u32),
        }
    }

    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Put(k, len, e) => {
                self.writes += 1;
                let v = value(self.writes, *len);
                let opts = self.options(*e);
                self.store().put_with(key(*k), &v, &opts).unwrap();
                let exp = self.model.slot_of(*e);
                self.model.map.insert(key(*k), (v, exp));
            }
            Op::PutIfAbsent(k, len, e) => {
                self.writes += 1;
                let v = value(self.writes, *len);
                let opts = self.options(*e);
                let done = self.store().put_if_absent_with(key(*k), &v, &opts).unwrap();
                let absent = self.model.live(&key(*k)).is_none();
                prop_assert_eq!(done, absent, "put_if_absent of key {}", k);
                if absent {
                    let exp = self.model.slot_of(*e);
                    self.model.map.insert(key(*k), (v, exp));
                }
            }
            Op::Delete(k) => {
                let existed = self.store().delete(key(*k)).unwrap();
                prop_assert_eq!(existed, self.model.live(&key(*k)).is_some(), "delete {}", k);
                self.model.map.remove(&key(*k));
            }
            Op::Batch(ops) => {
                let mut batch = Batch::new();
                let mut after = Vec::new();
                for (k, put) in ops {
                    match put {
                        Some((len, e)) => {
                            self.writes += 1;
                            let v = value(self.writes, *len);
                            batch.put_with(key(*k), &v, &self.options(*e));
                            after.push((*k, Some((v, self.model.slot_of(*e)))));
                        }
                        None => {
                            batch.delete(key(*k));
                            after.push((*k, None));
                        }
                    }
                }
                self.store().write(&batch).unwrap();
                for (k, put) in after {
                    match put {
                        Some(p) => self.model.map.insert(key(k), p),
                        None => self.model.map.remove(&key(k)),
                    };
                }
            }
            Op::Advance(n) => {
                self.model.slot += n;
                self.clock.advance(SLOT * *n as u32);
            }
            Op::Compact(threshold) => {
                self.store()
                    .compact_with(CompactOptions::new().threshold(*threshold))
                    .unwrap();
            }
            Op::Seal => {
                self.store().seal().unwrap();
            }
            Op::Reopen => {
                let store = self.store.take().unwrap();
                self.store = Some(self.t.reopen(store));
            }
        }
        Ok(())
    }

    /// Every read of every key, the listing and the count agree with the model.
    fn check(&self, after: &Op) -> Result<(), TestCaseError> {
        let store = self.store();
        let mut live = BTreeSet::new();
        for k in 0..KEYS {
            let key = key(k);
            let want = self.model.live(&key);
            if want.is_some() {
                live.insert(key.clone());
            }
            let got = store.get(&key).unwrap();
            prop_assert!(got.as_ref() == want, "get key {} after {:?}", k, after);
            let range = store.get_range(&key, 0..5u64).unwrap();
            prop_assert_eq!(
                range.as_deref(),
                want.map(|v| &v[..v.len().min(5)]),
                "get_range key {} after {:?}",
                k,
                after
            );
            prop_assert_eq!(store.contains(&key).unwrap(), want.is_some());
            let meta = store.metadata(&key).unwrap();
            prop_assert_eq!(meta.is_some(), want.is_some(), "metadata key {}", k);
            if let (Some(meta), Some((_, exp))) = (meta, self.model.map.get(&key)) {
                // The expiry it reports is the slot the model has (to the millisecond, within
                // the real time the case has run).
                let slot = meta.expires_at().map(|at| {
                    let d = at.duration_since(self.t0).unwrap();
                    d.as_secs() / SLOT.as_secs()
                });
                prop_assert_eq!(slot, *exp, "expires_at of key {}", k);
            }
        }
        let listed: BTreeSet<Vec<u8>> = store.keys().map(|k| k.unwrap()).collect();
        prop_assert_eq!(&listed, &live, "listing after {:?}", after);
        prop_assert_eq!(store.len(), live.len(), "len after {:?}", after);
        Ok(())
    }
}

fn run(ops: &[Op], mode: IoMode) -> Result<(), TestCaseError> {
    let clock = MockClock::new();
    let opts = quiet(small().io_mode(mode))
        .large_value_threshold(128 << 10)
        .testing_clock(clock.clone());
    let t = TestStore::new(opts);
    let store = t.open();
    // Slot 0 starts now, rounded down to a whole second (so that `At` instants are whole ms).
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut run = Run {
        t,
        clock,
        store: Some(store),
        t0: SystemTime::UNIX_EPOCH + Duration::from_secs(now),
        model: Model::default(),
        writes: 0,
    };
    for op in ops {
        run.apply(op)?;
        run.check(op)?;
    }
    Ok(())
}

fn config() -> ProptestConfig {
    let cases = common::long::cases("PROPTEST_CASES", CASES, LONG_CASES) as u32;
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn expiry_matches_the_model_direct(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, IoMode::Direct)?;
    }

    #[test]
    fn expiry_matches_the_model_buffered(ops in prop::collection::vec(op(), 1..40)) {
        run(&ops, IoMode::Buffered)?;
    }
}

/// The sequence the tombstone rule is about, spelled out: an old value in one segment, its
/// expiring overwrite in the next, only the second compacted, then a reopen.
#[test]
fn an_expired_overwrite_compacted_alone_keeps_hiding_the_old_value() {
    for mode in [IoMode::Direct, IoMode::Buffered] {
        let ops = [
            Op::Put(0, 100, Exp::Never),
            Op::Put(1, 2000, Exp::Never),
            Op::Seal,
            Op::Put(0, 100, Exp::Ttl(1)),
            Op::Seal,
            Op::Advance(2),
            Op::Compact(1.0),
            Op::Reopen,
        ];
        run(&ops, mode).unwrap();
    }
}
