//! `Store::writer`: a streamed put. Durable and atomic at `finish`, nothing visible without it,
//! memory bounded whatever the value's length. (A power loss mid-stream and during `finish` is
//! in src/tests/powerloss.rs, a kill -9 mid-stream in tests/crash/kill9.rs.)

mod common;
use common::files::{FileKind, written_files};
use common::store::{TestStore as Fixture, assert_bytes_eq, label};
use common::{Random, XorShift};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use podstore::{Compression, Durability, IoMode, Options};

fn configs() -> impl Iterator<Item = Options> {
    common::store::MODES.into_iter().flat_map(|mode| {
        [Durability::Sync, Durability::Buffered]
            .into_iter()
            .map(move |d| Options::default().io_mode(mode).durability(d))
    })
}

/// Lengths around the head blocks (the first block holds 96 bytes of header and the key) and
/// the 4 KiB checksum chunks, and a few large ones.
const LENS: [usize; 10] = [
    0,
    1,
    4000,
    4096 - 97,
    4096 - 96,
    4096,
    8192 + 5,
    100_000,
    1 << 20,
    3 << 20,
];

#[test]
fn finish_is_durable_and_reopen_reads_the_value() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        for (i, len) in LENS.into_iter().enumerate() {
            let value = XorShift::new(i as u64).bytes(len);
            let key = format!("k{i}");
            let mut w = store.writer(&key).unwrap();
            // Pieces of odd sizes, so that writes straddle every boundary.
            for piece in value.chunks(7919) {
                w.write_all(piece).unwrap();
            }
            assert_eq!(w.len(), len as u64);
            w.finish().unwrap();
            assert_bytes_eq(&store.get(&key).unwrap().unwrap(), &value, &what);
        }
        // A simulated crash right after: nothing is flushed, so the values must already be on
        // disk.
        store.simulate_crash();
        let store = fx.open();
        for (i, len) in LENS.into_iter().enumerate() {
            let value = XorShift::new(i as u64).bytes(len);
            let got = store
                .get(format!("k{i}"))
                .unwrap()
                .expect("present after reopen");
            assert_bytes_eq(&got, &value, &format!("{what}: {len} after reopen"));
            assert_eq!(store.stored_len(format!("k{i}")).unwrap(), Some(len as u64));
        }
        assert!(store.verify().unwrap().is_clean(), "{what}");
    }
}

#[test]
fn dropping_a_writer_stores_nothing_and_leaves_no_file() {
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put("k", "old").unwrap();
        let blobs_before = written_files(fx.path(), FileKind::Blob).len();
        {
            let mut w = store.writer("k").unwrap();
            w.write_all(&vec![5u8; 3 << 20]).unwrap();
            let mut fresh = store.writer("fresh").unwrap();
            fresh.write_all(b"never").unwrap();
        }
        assert_eq!(store.get("k").unwrap().unwrap(), b"old", "{what}");
        assert_eq!(store.get("fresh").unwrap(), None, "{what}");
        assert_eq!(
            written_files(fx.path(), FileKind::Blob).len(),
            blobs_before,
            "{what}: an abandoned value's file is removed"
        );
        let store = fx.reopen(store);
        assert_eq!(store.get("k").unwrap().unwrap(), b"old", "{what}");
        assert_eq!(store.len(), 1, "{what}");
    }
}

#[test]
fn readers_see_the_old_value_or_the_whole_new_one() {
    let old = XorShift::new(1).bytes(200_000);
    let new = XorShift::new(2).bytes(2 << 20);
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put("k", &old).unwrap();
        let done = AtomicBool::new(false);
        thread::scope(|s| {
            s.spawn(|| {
                let mut saw_new = false;
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let got = store.get("k").unwrap().unwrap();
                    if got.len() == new.len() {
                        assert!(got == new, "{what}: a torn new value");
                        saw_new = true;
                    } else {
                        assert!(got == old, "{what}: neither old nor new");
                        assert!(!saw_new, "{what}: the old value came back");
                    }
                    if finished {
                        assert!(saw_new, "{what}: new value not visible after finish");
                        break;
                    }
                }
            });
            let mut w = store.writer("k").unwrap();
            for piece in new.chunks(64 << 10) {
                w.write_all(piece).unwrap();
                thread::yield_now();
            }
            w.finish().unwrap();
            done.store(true, Ordering::Release);
        });
    }
}

#[test]
fn memory_stays_bounded_whatever_the_length() {
    let fx = Fixture::new(Options::default().io_mode(IoMode::Direct));
    let store = fx.open();
    let piece = XorShift::new(3).bytes(64 << 10);
    let mut w = store.writer("big").unwrap();
    let mut most = 0;
    for _ in 0..1024 {
        w.write_all(&piece).unwrap();
        most = most.max(w.memory());
    }
    // 64 MiB written: the 1 MiB stream buffer, the head (under two blocks) and the checksum
    // table (4 bytes per 4 KiB chunk: 64 KiB here).
    let bound = (1 << 20) + 2 * 65536 + (64 << 20) / 1024;
    assert!(
        most <= bound,
        "the writer held {most} bytes (bound {bound})"
    );
    w.finish().unwrap();
    assert_eq!(store.value_len("big").unwrap(), Some(64 << 20));
    let tail = store.get_range("big", (64 << 20) - 10..).unwrap().unwrap();
    assert_eq!(tail, &piece[piece.len() - 10..]);
}

#[test]
fn a_streamed_value_is_stored_uncompressed_and_overwrites_in_order() {
    let fx = Fixture::new(
        Options::default()
            .io_mode(IoMode::Direct)
            .compression(Compression::Lz4),
    );
    let store = fx.open();
    let text = b"the same words again and again ".repeat(10_000);
    let mut w = store.writer("text").unwrap();
    w.write_all(&text).unwrap();
    w.finish().unwrap();
    assert_eq!(store.stored_len("text").unwrap(), Some(text.len() as u64));
    // A put of the key while a writer streams is overwritten when the writer finishes.
    let mut w = store.writer("text").unwrap();
    w.write_all(b"streamed").unwrap();
    store.put("text", "put meanwhile").unwrap();
    assert_eq!(store.get("text").unwrap().unwrap(), b"put meanwhile");
    w.finish().unwrap();
    assert_eq!(store.get("text").unwrap().unwrap(), b"streamed");
    let store = fx.reopen(store);
    assert_eq!(store.get("text").unwrap().unwrap(), b"streamed");
}
