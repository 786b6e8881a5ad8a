//! A model of what a store should hold, for the tests that write rounds of puts and deletes
//! and check a store, a restored store or a remote reader against it (tests/remote*.rs).

use std::collections::BTreeMap;

use podstore::Store;
use podstore::remote::MemoryRemote;

/// What the store should hold: key -> value (`None`: deleted).
pub type Model = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Every key of `model` reads through `get` as the model says (deleted keys absent), byte for
/// byte; `what` names the step in the failure.
pub fn check_values(
    model: &Model,
    what: &str,
    get: impl Fn(&[u8]) -> podstore::Result<Option<Vec<u8>>>,
) {
    for (k, v) in model {
        let got = get(k).unwrap();
        assert!(
            got.as_deref() == v.as_deref(),
            "{what}: key {} reads {:?} bytes, expected {:?}",
            String::from_utf8_lossy(k),
            got.map(|g| g.len()),
            v.as_ref().map(|v| v.len())
        );
    }
}

/// The keys `model` holds a value for, in order.
pub fn live_keys(model: &Model) -> Vec<Vec<u8>> {
    model
        .iter()
        .filter(|(_, v)| v.is_some())
        .map(|(k, _)| k.clone())
        .collect()
}

/// Writes keys `0..keys` of round `round` to `store`: from round 1 on, every `delete_every`-th
/// key (shifted each round) is deleted instead, the others overwritten with `value(k, round)`.
pub fn write_round(
    store: &Store,
    model: &mut Model,
    (keys, round): (u64, u64),
    delete_every: u64,
    key: impl Fn(u64) -> Vec<u8>,
    value: impl Fn(u64, u64) -> Vec<u8>,
) {
    for k in 0..keys {
        if round > 0 && (k + round).is_multiple_of(delete_every) {
            store.delete(key(k)).unwrap();
            model.insert(key(k), None);
        } else {
            let v = value(k, round);
            store.put(key(k), &v).unwrap();
            model.insert(key(k), Some(v));
        }
    }
}

/// The names of `remote`'s objects under `prefix/dir/` (`dir`: `data`, `manifest`).
pub fn objects(remote: &MemoryRemote, prefix: &str, dir: &str) -> Vec<String> {
    let under = format!("{prefix}/{dir}/");
    remote
        .names()
        .into_iter()
        .filter(|n| n.starts_with(&under))
        .collect()
}
