//! Lazy overwrites (docs/design.md, "The index"): an overwrite of a key whose record the read
//! cache does not hold reads nothing on the put path; the older version stays in the index until
//! the resolver (held here, so that the test sees it) or a count removes it; a delete removes
//! every version. The simulated file system counts the reads.

use std::collections::BTreeMap;

use super::{new_sim, open, options};
use crate::io::sim::{OpKind, Sim, SimConfig};
use crate::{Durability, Store};

/// Disk reads (preads) through the seam so far.
fn reads(sim: &Sim) -> u64 {
    sim.stats().calls.get(&OpKind::Read).copied().unwrap_or(0)
}

fn key(i: usize) -> Vec<u8> {
    format!("key-{i:03}-{}", "k".repeat(i % 5)).into_bytes()
}

fn val(i: usize, round: usize) -> Vec<u8> {
    format!("value {i} of round {round} ")
        .repeat(1 + i % 4)
        .into_bytes()
}

fn check(store: &Store, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: usize, what: &str) {
    for i in 0..keys {
        let k = key(i);
        assert_eq!(
            store.get(&k).unwrap().as_ref(),
            model.get(&k),
            "{what}: key {i}"
        );
    }
    let listed: Vec<Vec<u8>> = store.keys().map(|k| k.unwrap()).collect();
    assert_eq!(
        listed,
        model.keys().cloned().collect::<Vec<_>>(),
        "{what}: listing"
    );
    assert_eq!(store.len(), model.len(), "{what}: len");
}

/// No read cache (nothing tells a key's entry without a read), and `bits` bits of key hash.
fn opts(bits: u32) -> crate::Options {
    options(Durability::Sync)
        .cache_capacity(0)
        .testing_hash_bits(bits)
}

#[test]
fn an_overwrite_reads_nothing_and_its_older_version_is_resolved_later() {
    const N: usize = 60;
    for bits in [64, 2] {
        let sim = new_sim(SimConfig::default());
        let mut model = BTreeMap::new();
        let store = open(&sim, opts(bits)).unwrap();
        for i in 0..N {
            store.put(key(i), val(i, 0)).unwrap();
            model.insert(key(i), val(i, 0));
        }
        store.close().unwrap();

        // After a reopen the records are on disk only: telling them apart takes a read.
        let store = open(&sim, opts(bits)).unwrap();
        store.testing_hold_resolver(true);
        let old_files: Vec<u64> = store.files().unwrap().iter().filter_map(|f| f.id).collect();
        let before = reads(&sim);
        for i in 0..N {
            store.put(key(i), val(i, 1)).unwrap();
            model.insert(key(i), val(i, 1));
        }
        assert_eq!(
            reads(&sim),
            before,
            "bits {bits}: overwrites read from disk"
        );
        // Every old entry is still there, behind its key's new one.
        assert_eq!(store.testing_index_entries(), 2 * N as u64, "bits {bits}");
        // Reads take the newest version, listing lists each key once.
        for i in 0..N {
            assert_eq!(store.get(key(i)).unwrap(), Some(val(i, 1)), "bits {bits}");
        }
        assert_eq!(store.testing_index_entries(), 2 * N as u64, "bits {bits}");

        // Counting resolves: one entry per key, the old records counted dead.
        assert_eq!(store.len(), N, "bits {bits}");
        assert_eq!(store.testing_index_entries(), N as u64, "bits {bits}");
        assert_eq!(store.stats().live_keys, N as u64);
        for f in store.files().unwrap() {
            if f.id.is_some_and(|id| old_files.contains(&id)) {
                assert_eq!(
                    f.live_bytes,
                    Some(0),
                    "bits {bits}: {} still counts live",
                    f.name
                );
            }
        }
        check(&store, &model, N, "after resolution");

        // Overwrite again (lazy), then delete half while the older versions are still there:
        // no older version comes back, now or after a reopen.
        for i in 0..N {
            store.put(key(i), val(i, 2)).unwrap();
            model.insert(key(i), val(i, 2));
        }
        assert_eq!(store.testing_index_entries(), 2 * N as u64, "bits {bits}");
        let before = reads(&sim);
        for i in (0..N).step_by(2) {
            assert!(store.delete(key(i)).unwrap());
            model.remove(&key(i));
        }
        // A delete reads: it must find every version of its key.
        assert!(reads(&sim) > before, "bits {bits}: deletes read nothing?");
        for i in (0..N).step_by(2) {
            assert_eq!(
                store.get(key(i)).unwrap(),
                None,
                "bits {bits}: key {i} resurrected"
            );
            assert!(
                !store.delete(key(i)).unwrap(),
                "bits {bits}: key {i} deleted twice"
            );
        }
        // put_if_absent decides by the newest version.
        for i in (1..N).step_by(4) {
            assert!(!store.put_if_absent(key(i), b"no").unwrap());
        }
        check(&store, &model, N, "after deletes");
        store.close().unwrap();
        let store = open(&sim, opts(bits)).unwrap();
        check(&store, &model, N, "after reopen");
        store.close().unwrap();
    }
}

#[test]
fn compaction_resolves_older_versions_before_it_copies() {
    const N: usize = 40;
    let sim = new_sim(SimConfig::default());
    let mut model = BTreeMap::new();
    let store = open(&sim, opts(2)).unwrap();
    for i in 0..N {
        store.put(key(i), val(i, 0)).unwrap();
        model.insert(key(i), val(i, 0));
    }
    store.close().unwrap();
    let store = open(&sim, opts(2)).unwrap();
    store.testing_hold_resolver(true);
    for i in 0..N {
        store.put(key(i), val(i, 1)).unwrap();
        model.insert(key(i), val(i, 1));
    }
    assert_eq!(store.testing_index_entries(), 2 * N as u64);
    let report = store.compact().unwrap();
    // The first segment held only older versions: compaction resolved their runs instead of
    // copying them (copied, they would still have entries). The active segment, sealed and
    // compacted too, holds the N live records.
    assert_eq!(report.segments_compacted, 2, "{report:?}");
    assert_eq!(
        report.records_copied, N as u64,
        "older versions copied: {report:?}"
    );
    assert_eq!(store.testing_index_entries(), N as u64);
    check(&store, &model, N, "after compaction");
    store.close().unwrap();
    let store = open(&sim, opts(2)).unwrap();
    check(&store, &model, N, "after reopen");
}

/// A cache refilling what expired (issue 39's TTL trace): a get of an expired value reads
/// nothing from disk, and the resolution of the refill reads only the expired record it
/// replaces, not the refill's own (its task names it). Nothing older comes back, after a
/// delete, a compaction or a reopen.
#[test]
fn a_refill_of_expired_values_reads_only_what_it_replaces() {
    use crate::PutOptions;
    use crate::expiry::MockClock;
    use std::time::Duration;

    const N: usize = 60;
    for bits in [64, 2] {
        let sim = new_sim(SimConfig::default());
        let clock = MockClock::new();
        // No read cache: only a read, or the task, can tell a record's key.
        let opts = opts(bits).warm_cache(false).testing_clock(clock.clone());
        let mut model = BTreeMap::new();
        let store = open(&sim, opts.clone()).unwrap();
        // Every key first without expiry, then, for one in two, a value that expires: the
        // expired put must keep hiding the first value.
        for i in 0..N {
            store.put(key(i), val(i, 0)).unwrap();
            model.insert(key(i), val(i, 0));
        }
        let minute = PutOptions::new().ttl(Duration::from_secs(60));
        for i in (0..N).step_by(2) {
            store.put_with(key(i), val(i, 1), &minute).unwrap();
            model.remove(&key(i));
        }
        store.close().unwrap();
        clock.advance(Duration::from_secs(61));

        let store = open(&sim, opts.clone()).unwrap();
        let before = reads(&sim);
        for i in (0..N).step_by(2) {
            assert_eq!(store.get(key(i)).unwrap(), None, "bits {bits}: key {i}");
        }
        if bits == 64 {
            // Each key in a run of its own: an expired entry is told without a read.
            assert_eq!(reads(&sim), before, "gets of expired values read");
        }
        let before = reads(&sim);
        for i in (0..N).step_by(2) {
            store.put(key(i), val(i, 2)).unwrap();
            model.insert(key(i), val(i, 2));
        }
        // Counting resolves every run the refills left.
        assert_eq!(store.len(), N, "bits {bits}");
        assert_eq!(store.testing_index_entries(), N as u64, "bits {bits}");
        if bits == 64 {
            // One read per refill: the expired record it replaces (read to learn it is the
            // key's), never the refill's own.
            assert_eq!(reads(&sim) - before, N as u64 / 2, "refills' resolution");
        }
        check(&store, &model, N, "after the refills");

        // A delete, then the clock stepped back past the expiry: a deleted key shows nothing,
        // a refilled one its refill.
        for i in (0..N).step_by(4) {
            assert!(store.delete(key(i)).unwrap(), "bits {bits}: key {i}");
            model.remove(&key(i));
        }
        clock.set_offset_ms(clock.offset_ms() - 61_000);
        for i in (0..N).step_by(2) {
            assert_eq!(
                store.get(key(i)).unwrap().as_ref(),
                model.get(&key(i)),
                "bits {bits}: key {i} with the clock back"
            );
        }
        clock.advance(Duration::from_secs(61));
        check(&store, &model, N, "after the deletes");

        // Compaction drops what expired; nothing older comes back, now or after a reopen.
        store.compact().unwrap();
        check(&store, &model, N, "after compaction");
        store.close().unwrap();
        let store = open(&sim, opts.clone()).unwrap();
        check(&store, &model, N, "after a reopen");
        store.close().unwrap();
    }
}

/// Two lazy refills of a key before the resolver gets to it, the first expired by then: the
/// resolver must still resolve the first (flagged unresolved itself, it is not one of the
/// expired leftovers it may pass over), or its run stays unresolved for good and its entry can
/// never be evicted.
#[test]
fn an_expired_refill_flagged_unresolved_is_resolved() {
    use crate::PutOptions;
    use crate::expiry::MockClock;
    use std::time::Duration;

    const N: usize = 30;
    let sim = new_sim(SimConfig::default());
    let clock = MockClock::new();
    let opts = opts(64).warm_cache(false).testing_clock(clock.clone());
    let store = open(&sim, opts.clone()).unwrap();
    for i in 0..N {
        store.put(key(i), val(i, 0)).unwrap();
    }
    store.close().unwrap();
    let store = open(&sim, opts.clone()).unwrap();
    store.testing_hold_resolver(true);
    let minute = PutOptions::new().ttl(Duration::from_secs(60));
    for i in 0..N {
        store.put_with(key(i), val(i, 1), &minute).unwrap();
    }
    clock.advance(Duration::from_secs(61));
    for i in 0..N {
        store.put(key(i), val(i, 2)).unwrap();
    }
    // Each key: its second refill, its expired first one and its first value, all in the index.
    assert_eq!(store.testing_index_entries(), 3 * N as u64);
    store.testing_hold_resolver(false);
    assert_eq!(store.len(), N);
    assert_eq!(
        store.testing_index_entries(),
        N as u64,
        "older versions left in the index"
    );
    for i in 0..N {
        assert_eq!(store.get(key(i)).unwrap(), Some(val(i, 2)));
    }
}
