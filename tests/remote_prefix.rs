//! The remote prefix a store directory belongs to (issue 38): recorded in `REMOTE-PREFIX` at
//! the first open with a remote (or a restore), checked before the prefix is taken. A
//! directory of one prefix opened with another, and a store recording none given a prefix
//! that holds another store's manifests, are refused with `Error::RemoteMismatch`, nothing
//! written locally or in the remote; a store recording none adopts a prefix that is its own
//! or holds nothing.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use podstore::remote::{MemoryRemote, Remote};
use podstore::{Error, Options, Store};

const RECORD: &str = "REMOTE-PREFIX";

fn opts(remote: Arc<dyn Remote>, prefix: &str) -> Options {
    common::store::quiet(common::store::small())
        .warm_cache(false)
        .remote(remote, prefix)
        .remote_flush_interval(None)
}

/// Every object of the remote with its bytes.
fn objects(memory: &MemoryRemote) -> BTreeMap<String, Vec<u8>> {
    memory
        .names()
        .into_iter()
        .map(|n| {
            let bytes = memory.object(&n).unwrap();
            (n, bytes)
        })
        .collect()
}

/// A store in `dir` with `n` values (one a blob file), flushed to `prefix` when there is one.
fn written(dir: &Path, memory: &Arc<MemoryRemote>, prefix: Option<&str>, n: u64, budget: bool) {
    let o = match prefix {
        Some(p) => opts(memory.clone(), p),
        None => common::store::quiet(common::store::small()),
    };
    let o = if budget {
        o.remote_local_budget(Some(0))
    } else {
        o
    };
    let store = Store::open_with(dir, o).unwrap();
    for k in 0..n {
        let len = if k == 3 { 1 << 20 } else { 3000 + k as usize };
        store.put(format!("k{k}"), vec![k as u8; len]).unwrap();
    }
    if prefix.is_some() {
        store.flush_remote().unwrap();
    }
    store.close().unwrap();
}

/// Opening `dir` with `prefix` is refused as `RemoteMismatch` recording `recorded`, and
/// changes nothing in the directory (but the `LOCK` an open makes) or the remote.
fn refused(dir: &Path, memory: &Arc<MemoryRemote>, prefix: &str, recorded: Option<&str>) {
    let (tree, remote) = (common::tree::snapshot(dir), objects(memory));
    match Store::open_with(dir, opts(memory.clone(), prefix)) {
        Err(Error::RemoteMismatch {
            path,
            recorded: r,
            given,
        }) => {
            assert_eq!(path, dir);
            assert_eq!(r.as_deref(), recorded);
            assert_eq!(given, prefix);
        }
        other => panic!(
            "expected RemoteMismatch, got {:?}",
            other.map(|_| "a store")
        ),
    }
    let after = common::tree::snapshot(dir);
    // (The lock any open takes: `LOCK`, made where there is none, as in a checkpoint.)
    let (changed, added) = (
        common::tree::changed(&tree, &after),
        common::tree::added(&tree, &after)
            .into_iter()
            .filter(|p| p.as_os_str() != "LOCK")
            .collect::<Vec<_>>(),
    );
    assert!(
        changed.is_empty() && added.is_empty(),
        "{changed:?} {added:?}"
    );
    assert!(objects(memory) == remote, "the remote changed");
}

fn record(dir: &Path) -> Option<String> {
    std::fs::read_to_string(dir.join(RECORD)).ok()
}

#[test]
fn a_directory_of_one_prefix_is_refused_with_another_and_opens_with_its_own() {
    let memory = Arc::new(MemoryRemote::new());
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    written(a.path(), &memory, Some("one"), 20, false);
    assert_eq!(record(a.path()).unwrap(), "podstore remote prefix 1\none\n");
    // Another store's prefix, and an empty one.
    written(b.path(), &memory, Some("two"), 5, false);
    refused(a.path(), &memory, "two", Some("one"));
    refused(a.path(), &memory, "three", Some("one"));
    // Its own: opens, every value there; and the other store's prefix is untouched. A
    // checkpoint of it is of its prefix too.
    let store = Store::open_with(a.path(), opts(memory.clone(), "one")).unwrap();
    assert_eq!(store.get("k19").unwrap().unwrap(), vec![19u8; 3019]);
    let cp = a.path().with_extension("checkpoint");
    store.checkpoint(&cp).unwrap();
    store.close().unwrap();
    assert_eq!(record(&cp).unwrap(), "podstore remote prefix 1\none\n");
    refused(&cp, &memory, "two", Some("one"));
    std::fs::remove_dir_all(&cp).unwrap();
    let store = Store::open_with(b.path(), opts(memory.clone(), "two")).unwrap();
    assert_eq!(store.get("k4").unwrap().unwrap(), vec![4u8; 3004]);
    store.close().unwrap();
    // A restore records its prefix too.
    let c = tempfile::tempdir().unwrap();
    let restored = c.path().join("restored");
    Store::open_with(&restored, opts(memory.clone(), "one"))
        .unwrap()
        .close()
        .unwrap();
    assert_eq!(
        record(&restored).unwrap(),
        "podstore remote prefix 1\none\n"
    );
    refused(&restored, &memory, "two", Some("one"));
}

#[test]
fn a_store_recording_no_prefix_is_refused_by_another_stores_prefix() {
    let memory = Arc::new(MemoryRemote::new());
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    written(a.path(), &memory, Some("one"), 20, false);
    // A store made without a remote, given the other's prefix.
    written(b.path(), &memory, None, 10, false);
    assert!(record(b.path()).is_none());
    refused(b.path(), &memory, "one", None);
    // A store made before the record (its record removed) whose data is in the remote only,
    // given a prefix without a manifest: its objects are not there.
    let c = tempfile::tempdir().unwrap();
    written(c.path(), &memory, Some("evicted"), 20, true);
    std::fs::remove_file(c.path().join(RECORD)).unwrap();
    refused(c.path(), &memory, "elsewhere", None);
    // The other store still opens with its prefix, every value there.
    let store = Store::open_with(a.path(), opts(memory.clone(), "one")).unwrap();
    assert_eq!(store.get("k3").unwrap().unwrap(), vec![3u8; 1 << 20]);
    store.close().unwrap();
}

#[test]
fn a_store_recording_no_prefix_adopts_its_own_or_an_empty_one() {
    let memory = Arc::new(MemoryRemote::new());
    // A store made before the record, with its prefix: local files (matched by crc32), and
    // files in the remote only (matched by their catalog edits).
    for budget in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("before/{budget}");
        written(dir.path(), &memory, Some(&prefix), 20, budget);
        std::fs::remove_file(dir.path().join(RECORD)).unwrap();
        let store = Store::open_with(dir.path(), opts(memory.clone(), &prefix)).unwrap();
        assert_eq!(store.get("k3").unwrap().unwrap(), vec![3u8; 1 << 20]);
        store.flush_remote().unwrap();
        store.close().unwrap();
        assert_eq!(
            record(dir.path()).unwrap(),
            format!("podstore remote prefix 1\n{prefix}\n")
        );
    }
    // A store made without a remote, given an empty prefix: adopts it, and is then that
    // prefix's.
    let dir = tempfile::tempdir().unwrap();
    written(dir.path(), &memory, None, 10, false);
    let store = Store::open_with(dir.path(), opts(memory.clone(), "fresh")).unwrap();
    store.flush_remote().unwrap();
    store.close().unwrap();
    assert_eq!(
        record(dir.path()).unwrap(),
        "podstore remote prefix 1\nfresh\n"
    );
    refused(dir.path(), &memory, "before/false", Some("fresh"));
}
