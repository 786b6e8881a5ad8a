//! kill -9 during conditional batches: threads race to increment shared counters, two at a time,
//! with batches whose puts are conditional on the versions the thread read (compare-and-swap),
//! each batch also writing a log entry that names the increments it made. After each kill, on
//! the reopened store: every acknowledged batch is there; every batch found is whole (its log
//! entry, and both counters counting it); and no increment was applied on a stale version (the
//! values the batches wrote to a counter are exactly 1, 2, ..., its value: none written twice,
//! none skipped).

use std::collections::BTreeMap;
use std::path::Path;

use podstore::{Batch, Condition, Durability, Error, IoMode, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::store::mode_name;
use crate::common::{Random, SplitMix};
use crate::support::options;

const THREADS: usize = 4;
const COUNTERS: usize = 3;
const ROUNDS: u64 = 3;
/// Each round's child is killed after a number of acknowledged batches in this range.
const KILL_AFTER: (u64, u64) = (5, 80);

fn counter(i: usize) -> String {
    format!("counter/{i}")
}

/// A counter's value and version; 0 and `None` while it has none.
fn read_counter(store: &Store, i: usize) -> podstore::Result<(u64, Option<podstore::Version>)> {
    Ok(match store.get_with_metadata(counter(i))? {
        Some((bytes, meta)) => (
            String::from_utf8(bytes).unwrap().parse().unwrap(),
            Some(meta.version()),
        ),
        None => (0, None),
    })
}

/// Increments counters by conditional batches from [`THREADS`] threads, acknowledging each
/// batch written, until killed.
pub fn cas_child(dir: &Path, mode: IoMode, round: u64) {
    let store = Store::open_with(dir, options(mode, Durability::Sync)).unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let store = &store;
            s.spawn(move || {
                for i in 0.. {
                    let a = (t + i) % COUNTERS;
                    let b = (a + 1 + i % (COUNTERS - 1)) % COUNTERS;
                    loop {
                        let ((na, va), (nb, vb)) =
                            match (read_counter(store, a), read_counter(store, b)) {
                                (Ok(x), Ok(y)) => (x, y),
                                (Err(e), _) | (_, Err(e)) => {
                                    emit(&format!("fail read: {e}"));
                                    return;
                                }
                            };
                        let cond = |v: Option<podstore::Version>| match v {
                            Some(v) => Condition::Version(v),
                            None => Condition::Absent,
                        };
                        let mut batch = Batch::new();
                        batch
                            .put_if(counter(a), (na + 1).to_string(), cond(va))
                            .put(
                                format!("log/r{round}-t{t}-{i}"),
                                format!("{a} {} {b} {}", na + 1, nb + 1),
                            )
                            .put_if(counter(b), (nb + 1).to_string(), cond(vb));
                        match store.write(&batch) {
                            Ok(()) => {
                                emit(&format!("ack log/r{round}-t{t}-{i}"));
                                break;
                            }
                            Err(Error::ConditionFailed { .. }) => {}
                            Err(e) => {
                                emit(&format!("fail write: {e}"));
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
}

fn kill9_cas_rounds(mode: IoMode) {
    let dir = TempDir::new().unwrap();
    let mut rng = SplitMix::new(25);
    let mut acked: Vec<String> = Vec::new();
    let mut found_batches = 0;
    for round in 0..ROUNDS {
        let ctx = format!("cas {} round {round}", mode_name(mode));
        let job = format!("cas {} {round}", mode_name(mode));
        let kill_after = rng.between(KILL_AFTER.0, KILL_AFTER.1) as usize;
        let mut child = ChildProc::spawn(dir.path(), &job);
        let mut count = 0;
        while let Some(msg) = child.next_message() {
            if let Some(fail) = msg.strip_prefix("fail ") {
                panic!("{ctx}: child failed: {fail}");
            }
            let key = msg
                .strip_prefix("ack ")
                .unwrap_or_else(|| panic!("{ctx}: unexpected message {msg:?}"));
            acked.push(key.to_string());
            count += 1;
            if count == kill_after {
                child.kill();
                break;
            }
        }
        assert_eq!(
            count, kill_after,
            "{ctx}: the child stopped before the kill"
        );
        // Messages sent between the count and the kill are acknowledged too.
        while let Some(msg) = child.next_message() {
            if let Some(key) = msg.strip_prefix("ack ") {
                acked.push(key.to_string());
            }
        }

        let store = Store::open_with(dir.path(), options(mode, Durability::Sync)).unwrap();
        for key in &acked {
            assert!(
                store.contains(key).unwrap(),
                "{ctx}: acknowledged batch {key} lost"
            );
        }
        // The values each counter was given, by every batch found.
        let mut given: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
        let mut batches = 0;
        for key in store.prefix("log/") {
            let key = key.unwrap();
            let entry = String::from_utf8(store.get(&key).unwrap().unwrap()).unwrap();
            let f: Vec<u64> = entry.split(' ').map(|n| n.parse().unwrap()).collect();
            given.entry(f[0] as usize).or_default().push(f[1]);
            given.entry(f[2] as usize).or_default().push(f[3]);
            batches += 1;
        }
        for i in 0..COUNTERS {
            let (value, _) = read_counter(&store, i).unwrap();
            let mut values = given.remove(&i).unwrap_or_default();
            values.sort_unstable();
            let want: Vec<u64> = (1..=value).collect();
            assert!(
                values == want,
                "{ctx}: counter {i} is {value}, the batches found gave it {values:?}"
            );
        }
        assert!(batches >= acked.len(), "{ctx}");
        found_batches = batches;
        store.close().unwrap();
    }
    assert!(found_batches >= ROUNDS as usize * KILL_AFTER.0 as usize);
}

#[test]
fn kill9_during_conditional_batches_direct() {
    kill9_cas_rounds(IoMode::Direct);
}

#[test]
fn kill9_during_conditional_batches_buffered() {
    kill9_cas_rounds(IoMode::Buffered);
}
