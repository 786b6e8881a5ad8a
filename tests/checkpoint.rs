//! `Store::checkpoint`: a consistent, openable copy of a live store while writes go on.

mod common;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use common::files::{FileKind, store_files};
use podstore::{Durability, IoMode, Options, Store};

fn opts(mode: IoMode) -> Options {
    common::store::small().io_mode(mode)
}

/// Writer `t` writes keys `t/0..KEYS` in rounds: value `round` of key `t/k`. Its state after
/// `n` acknowledged writes is therefore known exactly.
const KEYS: u64 = 40;

fn value(t: u64, k: u64, round: u64) -> Vec<u8> {
    let len = if k == 0 {
        (1 << 20) + 17
    } else {
        3_000 + (k * 997) % 30_000
    } as usize;
    let tag = (t * 31 + k * 7 + round) as u8;
    vec![tag; len]
}

/// The value of key `t/k` after `n` acknowledged writes of writer `t` (`None`: not yet written).
fn after(t: u64, k: u64, n: u64) -> Option<Vec<u8>> {
    if n <= k {
        return None;
    }
    let round = (n - 1 - k) / KEYS;
    Some(value(t, k, round))
}

/// Four writers (durable and buffered puts, blob files among them, segments rolling over)
/// write while checkpoints are taken. Each checkpoint opens with the default open, verifies
/// clean, and holds, for every writer, the state after some number of its writes between the
/// number acknowledged before the checkpoint began and the number acknowledged when it
/// returned, plus the one put then in flight: everything acknowledged before is there, and
/// nothing is torn.
#[test]
fn checkpoints_of_a_store_under_concurrent_writes_hold_what_was_acknowledged_before() {
    for mode in common::store::MODES {
        let dir = tempfile::TempDir::new().unwrap();
        let backups = tempfile::TempDir::new().unwrap();
        let store = Store::open_with(dir.path(), opts(mode)).unwrap();
        let acked: Vec<Mutex<u64>> = (0..4).map(|_| Mutex::new(0)).collect();
        let stop = AtomicBool::new(false);
        let mut checks = Vec::new();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (store, acked, stop) = (&store, &acked, &stop);
                s.spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let k = n % KEYS;
                        let v = value(t, k, n / KEYS);
                        let key = format!("{t}/{k}");
                        if t == 3 {
                            let mut b = podstore::Batch::new();
                            b.put(&key, &v);
                            store.write(b.durability(Durability::Buffered)).unwrap();
                        } else {
                            store.put(&key, &v).unwrap();
                        }
                        n += 1;
                        *acked[t as usize].lock().unwrap() = n;
                    }
                });
            }
            for c in 0..4 {
                std::thread::sleep(std::time::Duration::from_millis(60));
                let before: Vec<u64> = acked.iter().map(|a| *a.lock().unwrap()).collect();
                let dest = backups.path().join(format!("ck-{c}"));
                let report = store.checkpoint(&dest).unwrap();
                let after_: Vec<u64> = acked.iter().map(|a| *a.lock().unwrap()).collect();
                assert_eq!(report.path, dest);
                assert!(report.files_copied >= 1, "{report:?}");
                checks.push((dest, before, after_));
            }
            stop.store(true, Ordering::Relaxed);
        });
        store.close().unwrap();
        for (dest, before, after_) in &checks {
            let copy = Store::open_with(dest, opts(mode)).unwrap();
            assert!(copy.recovery().lost.is_empty());
            for t in 0..4u64 {
                let state = |n| (0..KEYS).map(|k| after(t, k, n)).collect::<Vec<_>>();
                let got: Vec<Option<Vec<u8>>> = (0..KEYS)
                    .map(|k| copy.get(format!("{t}/{k}")).unwrap())
                    .collect();
                // A writer has at most one put in flight: one that had not returned when the
                // checkpoint did may be in it or not (it was appended before the consistency
                // point and made durable by it, and is acknowledged once its thread runs again).
                let (lo, hi) = (before[t as usize], after_[t as usize] + 1);
                assert!(
                    (lo..=hi).any(|n| state(n) == got),
                    "{mode:?} {}: writer {t} holds no state between {lo} and {hi} writes",
                    dest.display()
                );
            }
            assert!(copy.verify().unwrap().is_clean());
            copy.close().unwrap();
        }
    }
}

/// Sealed files are hard links (the same inode) into the checkpoint; the store's later
/// compaction of them does not touch the checkpoint.
#[test]
fn sealed_files_are_linked_and_the_checkpoint_outlives_their_compaction() {
    let dir = tempfile::TempDir::new().unwrap();
    let backups = tempfile::TempDir::new().unwrap();
    let store =
        Store::open_with(dir.path(), opts(IoMode::Buffered).compaction_threshold(0.1)).unwrap();
    for i in 0..60u32 {
        store.put(format!("k{i}"), vec![i as u8; 50_000]).unwrap();
    }
    store.put("big", vec![1u8; 2 << 20]).unwrap();
    let dest = backups.path().join("ck");
    let report = store.checkpoint(&dest).unwrap();
    assert!(report.files_linked >= 2, "{report:?}");
    let linked: Vec<(u64, FileKind)> = store_files(&dest)
        .into_iter()
        .filter(|f| dir.path().join(common::files::file_name(f.0, f.1)).exists())
        .collect();
    let same_inode = linked
        .iter()
        .filter(|&&(id, kind)| {
            let name = common::files::file_name(id, kind);
            let a = std::fs::metadata(dir.path().join(&name)).unwrap();
            let b = std::fs::metadata(dest.join(&name)).unwrap();
            a.ino() == b.ino()
        })
        .count();
    assert_eq!(same_inode, report.files_linked, "{report:?}");
    for i in 0..60u32 {
        store.delete(format!("k{i}")).unwrap();
    }
    store.delete("big").unwrap();
    let compacted = store.compact().unwrap();
    assert!(compacted.segments_compacted + compacted.blob_files_removed > 0);
    store.close().unwrap();
    let copy = Store::open_with(&dest, opts(IoMode::Buffered)).unwrap();
    for i in 0..60u32 {
        assert_eq!(
            copy.get(format!("k{i}")).unwrap(),
            Some(vec![i as u8; 50_000])
        );
    }
    assert_eq!(copy.get("big").unwrap(), Some(vec![1u8; 2 << 20]));
}

/// On another file system (tmpfs in /dev/shm, when there is one) sealed files are copied.
#[test]
fn a_checkpoint_on_another_file_system_copies() {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("skipped: no /dev/shm");
        return;
    }
    let dir = tempfile::TempDir::new().unwrap();
    let backups = tempfile::TempDir::new_in(shm).unwrap();
    if std::fs::metadata(dir.path()).unwrap().dev()
        == std::fs::metadata(backups.path()).unwrap().dev()
    {
        eprintln!("skipped: /dev/shm is on the same file system");
        return;
    }
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    for i in 0..30u32 {
        store.put(format!("k{i}"), vec![i as u8; 70_000]).unwrap();
    }
    store.seal().unwrap();
    store.put("last", "in the active segment").unwrap();
    let dest = backups.path().join("ck");
    let report = store.checkpoint(&dest).unwrap();
    assert_eq!(report.files_linked, 0, "{report:?}");
    assert!(report.files_copied >= 2, "{report:?}");
    let copy = Store::open_with(&dest, opts(IoMode::Buffered)).unwrap();
    for i in 0..30u32 {
        assert_eq!(
            copy.get(format!("k{i}")).unwrap(),
            Some(vec![i as u8; 70_000])
        );
    }
    assert_eq!(
        copy.get("last").unwrap().as_deref(),
        Some(&b"in the active segment"[..])
    );
}

/// A destination that exists, or the directory an interrupted checkpoint left, is refused
/// (named in the error) and left as it is.
#[test]
fn an_existing_destination_is_refused_and_left_alone() {
    let dir = tempfile::TempDir::new().unwrap();
    let backups = tempfile::TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    store.put("k", "v").unwrap();
    let dest = backups.path().join("ck");
    std::fs::create_dir(&dest).unwrap();
    std::fs::write(dest.join("mine"), "user data").unwrap();
    match store.checkpoint(&dest) {
        Err(podstore::Error::Io { path, source, .. }) => {
            assert_eq!(path.as_deref(), Some(dest.as_path()));
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(dest.join("mine")).unwrap(), b"user data");
    let dest2 = backups.path().join("ck2");
    let partial = backups.path().join("ck2.podstore-partial");
    std::fs::create_dir(&partial).unwrap();
    match store.checkpoint(&dest2) {
        Err(podstore::Error::Io { path, .. }) => assert_eq!(path.as_deref(), Some(&*partial)),
        other => panic!("{other:?}"),
    }
    assert!(!dest2.exists());
    assert!(partial.exists());
}

/// A destination whose parent is missing is refused (an io error of kind NotFound naming the
/// parent), and nothing is created: no parent, no partial directory.
#[test]
fn a_missing_parent_is_refused_not_created() {
    let dir = tempfile::TempDir::new().unwrap();
    let backups = tempfile::TempDir::new().unwrap();
    let store = Store::open_with(dir.path(), opts(IoMode::Buffered)).unwrap();
    store.put("k", "v").unwrap();
    let parent = backups.path().join("missing/parent");
    match store.checkpoint(parent.join("ck")) {
        Err(podstore::Error::Io { path, source, .. }) => {
            assert_eq!(path.as_deref(), Some(parent.as_path()));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read_dir(backups.path()).unwrap().count(), 0);
    // A parent that exists is enough.
    store.checkpoint(backups.path().join("ck")).unwrap();
}
