//! kill -9 of a streamed put (mid-stream and after `finish`) and of a checkpoint midway.

use std::path::Path;
use std::time::Duration;

use podstore::{Compression, Durability, IoMode, Options, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::files::{FileKind, store_files};
use crate::common::{Random, SplitMix};
use crate::support::{options, value_for};

/// The child of [`a_streamed_put_killed_mid_stream_leaves_the_old_value`]: puts the old value,
/// streams a new one (8 MiB, then "streaming"), and with `finish` commits it ("finished") and
/// waits to be killed; without, it streams on until killed. With `lz4`, the value is compressed
/// frame by frame as it streams.
pub fn stream_child(dir: &Path, mode: IoMode, finish: bool, lz4: bool) {
    use std::io::Write;
    let compression = if lz4 {
        Compression::Lz4
    } else {
        Compression::None
    };
    let opts = Options::default().io_mode(mode).compression(compression);
    let store = Store::open_with(dir, opts).unwrap();
    store.put("k", "old").unwrap();
    let mut writer = store.writer("k").unwrap();
    let chunk = vec![5u8; 1 << 20];
    for _ in 0..8 {
        writer.write_all(&chunk).unwrap();
    }
    emit("streaming");
    if finish {
        writer.finish().unwrap();
        emit("finished");
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
        return;
    }
    loop {
        writer.write_all(&chunk).unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// kill -9 of a process in the middle of a streamed put (`Store::writer`): the key keeps its
/// old value and the next open removes the unfinished file; killed after `finish` returned, the
/// new value is there, whole.
#[test]
fn a_streamed_put_killed_mid_stream_leaves_the_old_value() {
    for (finish, lz4) in [(false, false), (true, false), (false, true), (true, true)] {
        let dir = TempDir::new().unwrap();
        let job = format!("stream direct {finish} {lz4}");
        let mut child = ChildProc::spawn(dir.path(), &job);
        assert_eq!(child.next_message().as_deref(), Some("streaming"));
        if finish {
            assert_eq!(child.next_message().as_deref(), Some("finished"));
        }
        child.kill();
        let store =
            Store::open_with(dir.path(), options(IoMode::Direct, Durability::Sync)).unwrap();
        let got = store.get("k").unwrap().unwrap();
        if finish {
            assert_eq!(got.len(), 8 << 20, "{job}");
            assert!(got.iter().all(|&b| b == 5), "{job}");
            let stored = store.stored_len("k").unwrap().unwrap();
            assert_eq!(stored < 1 << 20, lz4, "{job}: stored in {stored} bytes");
        } else {
            assert_eq!(got, b"old", "{job}");
        }
        store.close().unwrap();
        let blobs: Vec<_> = store_files(dir.path())
            .into_iter()
            .filter(|f| f.1 == FileKind::Blob)
            .collect();
        assert_eq!(
            blobs.len(),
            usize::from(finish),
            "{job}: blob files {blobs:?}"
        );
    }
}

/// The child of [`a_checkpoint_killed_midway_never_looks_complete`]: a store in `base/store`
/// written by a thread while checkpoints go to `base/ck-<n>`, one after another.
pub fn checkpoint_child(base: &Path, mode: IoMode) {
    let store = Store::open_with(base.join("store"), Options::default().io_mode(mode)).unwrap();
    for i in 0..40u32 {
        store
            .put(format!("seed{i}"), vec![i as u8; 100_000])
            .unwrap();
    }
    store.put("blob", vec![9u8; 3 << 20]).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0u64.. {
                let key = format!("w{}", i % 500);
                store
                    .put(&key, value_for(key.as_bytes(), i, 20_000))
                    .unwrap();
            }
        });
        for n in 0.. {
            store.checkpoint(base.join(format!("ck-{n}"))).unwrap();
            emit(&format!("ck-{n}"));
        }
    });
}

/// kill -9 of a process while it takes checkpoints of a store being written: every `ck-<n>`
/// that exists (those the child reported done, and any it finished before dying) opens with
/// the default, strict open, verifies clean and holds the values written before; an
/// interrupted one is left only as `ck-<n>.podstore-partial`, never under its name.
#[test]
fn a_checkpoint_killed_midway_never_looks_complete() {
    let mut rng = SplitMix::new(0xC4EC);
    for round in 0..4 {
        let base = TempDir::new().unwrap();
        let mut child = ChildProc::spawn(base.path(), "checkpoint direct");
        let wanted = 1 + round;
        let mut done = Vec::new();
        while done.len() < wanted {
            done.push(child.next_message().expect("a checkpoint"));
        }
        std::thread::sleep(Duration::from_millis(rng.below_u64(40)));
        child.kill();
        let mut opened = 0;
        for entry in std::fs::read_dir(base.path()).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            if !name.starts_with("ck-") || name.ends_with(".podstore-partial") {
                continue;
            }
            let store = Store::open_with(
                base.path().join(&name),
                crate::support::check_options(IoMode::Direct),
            )
            .unwrap_or_else(|e| panic!("round {round}: {name}: {e}"));
            for i in 0..40u32 {
                let got = store.get(format!("seed{i}")).unwrap();
                assert_eq!(got, Some(vec![i as u8; 100_000]), "{name}");
            }
            assert_eq!(
                store.get("blob").unwrap(),
                Some(vec![9u8; 3 << 20]),
                "{name}"
            );
            assert!(store.verify().unwrap().is_clean(), "{name}");
            store.close().unwrap();
            opened += 1;
        }
        assert!(
            opened >= done.len(),
            "round {round}: {done:?}, {opened} opened"
        );
    }
}
