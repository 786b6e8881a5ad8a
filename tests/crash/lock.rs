//! A second process is locked out of a store directory until the holder dies.

use std::io::Read;
use std::path::Path;

use podstore::{Error, IoMode, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::support::{assert_reads, open};

const HELD_KEY: &[u8] = b"held-by-child";
const HELD_VALUE: &[u8] = b"written by the process holding the lock";

/// Opens the store, writes one key, says "ready" and holds the store until killed (or until the
/// parent closes stdin).
pub fn hold_child(dir: &Path, mode: IoMode) {
    let store = open(dir, mode);
    store.put(HELD_KEY, HELD_VALUE).unwrap();
    emit("ready");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    store.close().unwrap();
}

#[test]
fn second_process_is_locked_out_until_the_holder_is_killed() {
    let dir = TempDir::new().unwrap();
    let mut child = ChildProc::spawn(dir.path(), "hold direct");
    assert_eq!(child.next_message().as_deref(), Some("ready"));
    match Store::open(dir.path()) {
        Err(Error::Locked { path }) => assert_eq!(path, dir.path()),
        other => panic!("expected Error::Locked while the child holds the store, got {other:?}"),
    }
    child.kill();
    let store = open(dir.path(), IoMode::Direct);
    assert_reads(
        &store,
        HELD_KEY,
        Some(HELD_VALUE),
        "after the holder was killed",
    );
    assert_eq!(store.len(), 1);
    store.close().unwrap();
}
