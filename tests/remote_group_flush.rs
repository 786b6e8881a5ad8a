//! Concurrent `Store::flush_remote` calls share flushes (group commit, issue 38): a call that
//! waited for another flush returns a flush that began after it, and that flush's manifest
//! holds the call's writes. On the in-memory remote behind a wrapper that makes every call
//! slow (up to 40 ms, 20 on average: an object store's round trip), so that the calls overlap.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use podstore::remote::{Faults, FaultyRemote, MemoryRemote, Remote};
use podstore::{Options, Store};

const PREFIX: &str = "group/store";

fn opts(remote: Arc<dyn Remote>) -> Options {
    common::store::small()
        .remote(remote, PREFIX)
        .remote_flush_interval(None)
}

/// The objects of `remote` without the manifests numbered above `newest`: a restore from it
/// reads manifest `newest`.
fn as_of(remote: &MemoryRemote, newest: u64) -> Arc<MemoryRemote> {
    let copy = Arc::new(MemoryRemote::new());
    let manifests = format!("{PREFIX}/manifest/");
    for name in remote.names() {
        let later = name
            .strip_prefix(&manifests)
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n > newest);
        if !later {
            copy.set_object(&name, remote.object(&name).unwrap());
        }
    }
    copy
}

#[test]
fn concurrent_flushes_share_manifests_and_each_holds_its_callers_writes() {
    const THREADS: u64 = 8;
    let root = tempfile::tempdir().unwrap();
    let memory = Arc::new(MemoryRemote::new());
    let slow = Arc::new(FaultyRemote::new(
        memory.clone(),
        Faults::new(0.0, 0.0, Duration::from_millis(40)),
        38,
    ));
    let store = Arc::new(Store::open_with(root.path().join("a"), opts(slow)).unwrap());
    let start = Arc::new(Barrier::new(THREADS as usize));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                let value = format!("written by thread {t}");
                store.put(format!("t{t}"), &value).unwrap();
                (t, store.flush_remote().unwrap().manifest)
            })
        })
        .collect();
    let flushed: Vec<(u64, u64)> = threads.into_iter().map(|h| h.join().unwrap()).collect();
    // Each call's manifest, alone the newest, restores the call's own write.
    for &(t, manifest) in &flushed {
        let name = format!("t{t}-at-{manifest}");
        let restored =
            Store::open_with(root.path().join(name), opts(as_of(&memory, manifest))).unwrap();
        assert_eq!(
            restored.get(format!("t{t}")).unwrap().as_deref(),
            Some(format!("written by thread {t}").as_bytes()),
            "thread {t}: manifest {manifest} lacks its write"
        );
    }
    // Eight calls at once: the first flush holds the others for its slow requests, and one
    // flush after it covers them all. Without sharing, each call makes a manifest of its own.
    let mut manifests: Vec<u64> = flushed.iter().map(|&(_, m)| m).collect();
    manifests.sort_unstable();
    manifests.dedup();
    assert!(
        manifests.len() <= 4,
        "{} manifests for {THREADS} calls: {flushed:?}",
        manifests.len()
    );
}
