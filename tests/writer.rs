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

/// Compressible bytes (words), as real text is.
fn text(seed: u64, len: usize) -> Vec<u8> {
    const WORDS: [&str; 10] = [
        "frame ", "stream ", "value ", "store ", "blob ", "range ", "the ", "of ", "lz4 ", "disk ",
    ];
    XorShift::new(seed).words(&WORDS, len)
}

/// Streams `value` into `key` in pieces of odd sizes, and finishes.
fn stream(store: &podstore::Store, key: &str, value: &[u8]) {
    let mut w = store.writer(key).unwrap();
    for piece in value.chunks(77_777) {
        w.write_all(piece).unwrap();
    }
    assert_eq!(w.len(), value.len() as u64);
    w.finish().unwrap();
}

/// `get` and random ranges of `key` match `value`.
fn check_value(store: &podstore::Store, key: &str, value: &[u8], what: &str) {
    assert_bytes_eq(&store.get(key).unwrap().unwrap(), value, what);
    let mut rng = XorShift::new(value.len() as u64);
    let len = value.len() as u64;
    for _ in 0..50 {
        let a = rng.below_u64(len + 1);
        let b = (a + rng.below_u64(200_000)).min(len);
        let got = store.get_range(key, a..b).unwrap().unwrap();
        assert_bytes_eq(
            &got,
            &value[a as usize..b as usize],
            &format!("{what} {a}..{b}"),
        );
    }
}

#[test]
fn a_streamed_value_is_stored_compressed_and_reads_back_whole_and_by_ranges() {
    // Lengths around the frame size (4 KiB frames here, and the 64 KiB default).
    let lens = [1, 4095, 4096, 4097, 100_000, 3 << 20];
    for compression in [Compression::Lz4, Compression::Auto] {
        for frame in [4096, 64 << 10] {
            for mode in common::store::MODES {
                let opts = Options::default()
                    .io_mode(mode)
                    .compression(compression)
                    .compression_frame_size(frame);
                let what = format!("{} {compression:?} frames of {frame}", label(&opts));
                let fx = Fixture::new(opts);
                let store = fx.open();
                for (i, len) in lens.into_iter().enumerate() {
                    let value = text(i as u64, len);
                    stream(&store, &format!("k{i}"), &value);
                    let stored = store.stored_len(format!("k{i}")).unwrap().unwrap();
                    if len >= 4096 {
                        let at_most = len as u64 * 3 / 4;
                        assert!(stored < at_most, "{what}: {len} stored in {stored}");
                    }
                    check_value(&store, &format!("k{i}"), &value, &what);
                }
                let store = fx.reopen(store);
                for (i, len) in lens.into_iter().enumerate() {
                    let value = text(i as u64, len);
                    check_value(
                        &store,
                        &format!("k{i}"),
                        &value,
                        &format!("{what}, reopened"),
                    );
                }
                assert!(store.verify().unwrap().is_clean(), "{what}");
            }
        }
    }
}

#[test]
fn auto_stores_a_stream_raw_when_its_first_frame_does_not_compress() {
    let opts = Options::default().io_mode(IoMode::Direct);
    let fx = Fixture::new(opts.clone().compression(Compression::Auto));
    let store = fx.open();
    let random = XorShift::new(5).bytes(1 << 20);
    stream(&store, "random", &random);
    assert_eq!(store.stored_len("random").unwrap(), Some(1 << 20));
    // A short value (under one frame) is stored as a put would store it: compressed if it
    // compresses, raw if not.
    let short = text(6, 10_000);
    stream(&store, "short", &short);
    assert!(store.stored_len("short").unwrap().unwrap() < 5_000);
    stream(&store, "short random", &random[..10_000]);
    assert_eq!(store.stored_len("short random").unwrap(), Some(10_000));
    // With Lz4 an incompressible stream is framed anyway: raw frames and the table.
    let fx = Fixture::new(opts.compression(Compression::Lz4));
    let store = fx.open();
    stream(&store, "random", &random);
    let stored = store.stored_len("random").unwrap().unwrap();
    assert_eq!(
        stored,
        (1 << 20) + 24 + 16 * 16,
        "16 raw frames of 64 KiB and the table"
    );
    check_value(&store, "random", &random, "lz4 random");
    stream(&store, "empty", b"");
    assert_eq!(store.get("empty").unwrap().unwrap(), b"");
    let store = fx.reopen(store);
    check_value(&store, "random", &random, "lz4 random, reopened");
    assert_eq!(store.get("empty").unwrap().unwrap(), b"");
}

#[test]
fn memory_stays_bounded_while_compressing() {
    let frame = 256 << 10;
    let fx = Fixture::new(
        Options::default()
            .io_mode(IoMode::Direct)
            .compression(Compression::Lz4)
            .compression_frame_size(frame),
    );
    let store = fx.open();
    let piece = text(7, 1 << 20);
    let mut w = store.writer("big").unwrap();
    let mut most = 0;
    for _ in 0..64 {
        w.write_all(&piece).unwrap();
        most = most.max(w.memory());
    }
    // 64 MiB written: the 1 MiB stream buffer, the head (under two blocks), the checksum
    // table of the stored bytes (at most 4 bytes per 4 KiB of value), one frame being filled
    // and one compressed (lz4's bound: a little over a frame), and 16 bytes per frame.
    let bound = (1 << 20) + 2 * 65536 + (64 << 20) / 1024 + 2 * frame as usize + 4096 + 16 * 256;
    assert!(
        most <= bound,
        "the writer held {most} bytes (bound {bound})"
    );
    w.finish().unwrap();
    assert_eq!(store.value_len("big").unwrap(), Some(64 << 20));
    assert!(store.stored_len("big").unwrap().unwrap() < 32 << 20);
    let tail = store.get_range("big", (64 << 20) - 10..).unwrap().unwrap();
    assert_eq!(tail, &piece[piece.len() - 10..]);
}

#[test]
fn a_streamed_value_overwrites_in_order() {
    let fx = Fixture::new(
        Options::default()
            .io_mode(IoMode::Direct)
            .compression(Compression::Lz4),
    );
    let store = fx.open();
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
