//! Compressed values end to end: round trips around frame boundaries, ranges inside and across
//! frames, streaming with seeks, the automatic mode's choice, damage confined to the frames it
//! touches, reopen and crash recovery. Every test runs with direct and with buffered I/O.

mod common;

use std::fs;
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use common::files::store_paths as pod_files;
use common::store::assert_bytes_eq as assert_bytes;
use common::{Random, XorShift};

use podstore::format::frames::{FRAME_TRAILER_MAGIC, FrameTableHeader, decode_table};
use podstore::{Batch, Compression, Corruption, Durability, Error, IoMode, Options, Store};

/// A small frame size keeps the values of these tests small while still spanning many frames.
const F: usize = 4096;

fn modes() -> [IoMode; 2] {
    common::store::MODES
}

fn opts(mode: IoMode, compression: Compression) -> Options {
    Options::default()
        .io_mode(mode)
        .compression(compression)
        .compression_frame_size(F as u32)
}

/// Text-like bytes (words from a small vocabulary): lz4 shrinks them to well under half.
fn text(len: usize, seed: u64) -> Vec<u8> {
    const WORDS: [&str; 12] = [
        "the ",
        "store ",
        "keeps ",
        "blobs ",
        "in ",
        "segments ",
        "and ",
        "reads ",
        "ranges ",
        "of ",
        "compressed ",
        "frames ",
    ];
    seeded(seed).words(&WORDS, len)
}

/// The generator of [`text`] and [`random`] for `seed` (seeded as these tests always were).
fn seeded(seed: u64) -> XorShift {
    XorShift::from_state(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
}

/// Pseudo-random bytes: incompressible.
fn random(len: usize, seed: u64) -> Vec<u8> {
    seeded(seed).bytes(len)
}

/// Checks every way of reading `key` against `want`.
#[track_caller]
fn check_value(store: &Store, key: &[u8], want: &[u8], what: &str) {
    let len = want.len() as u64;
    assert_eq!(
        store.value_len(key).unwrap(),
        Some(len),
        "{what}: value_len"
    );
    assert_bytes(&store.get(key).unwrap().unwrap(), want, what);
    for (a, b) in [(0, len), (0, len.min(1)), (len / 3, len / 2), (len, len)] {
        let got = store.get_range(key, a..b).unwrap().unwrap();
        assert_bytes(
            &got,
            &want[a as usize..b as usize],
            &format!("{what} {a}..{b}"),
        );
    }
    let mut streamed = Vec::new();
    store
        .reader(key)
        .unwrap()
        .unwrap()
        .read_to_end(&mut streamed)
        .unwrap();
    assert_bytes(&streamed, want, &format!("{what}: streamed"));
}

fn disk_bytes(dir: &Path) -> u64 {
    pod_files(dir)
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum()
}

#[test]
fn round_trips_around_frame_boundaries() {
    let sizes = [0, 1, F - 1, F, F + 1, 2 * F, 2 * F + 1, 5 * F + 3, 40 * F];
    for mode in modes() {
        for compression in [Compression::Lz4, Compression::Auto] {
            let dir = tempfile::tempdir().unwrap();
            let o = opts(mode, compression);
            let store = Store::open_with(dir.path(), o.clone()).unwrap();
            let mut want = Vec::new();
            for (i, &len) in sizes.iter().enumerate() {
                for (kind, value) in [("text", text(len, i as u64)), ("random", random(len, 7))] {
                    let key = format!("{kind}/{len}");
                    store.put(key.as_bytes(), &value).unwrap();
                    let stored = store.stored_len(key.as_bytes()).unwrap().unwrap();
                    if kind == "text" && len >= F {
                        assert!(stored < len as u64 / 2, "{key}: stored {stored}");
                    }
                    if len == 0 {
                        assert_eq!(stored, 0, "{key}: empty values are stored raw");
                    }
                    want.push((key, value));
                }
            }
            let what = format!("{mode:?}/{compression:?}");
            for (key, value) in &want {
                check_value(&store, key.as_bytes(), value, &format!("{what} {key}"));
            }
            let stored_before: Vec<_> = want
                .iter()
                .map(|(k, _)| store.stored_len(k.as_bytes()).unwrap())
                .collect();
            store.close().unwrap();
            let store = Store::open_with(dir.path(), o).unwrap();
            for ((key, value), stored) in want.iter().zip(stored_before) {
                check_value(
                    &store,
                    key.as_bytes(),
                    value,
                    &format!("{what} reopened {key}"),
                );
                assert_eq!(store.stored_len(key.as_bytes()).unwrap(), stored, "{key}");
            }
        }
    }
}

#[test]
fn ranges_inside_and_across_frames() {
    let f = F as u64;
    let value = text(10 * F + 123, 42);
    let len = value.len() as u64;
    let points = [
        0,
        1,
        f - 1,
        f,
        f + 1,
        2 * f - 1,
        2 * f + 5,
        5 * f,
        7 * f + 100,
        10 * f,
        len - 1,
        len,
    ];
    for mode in modes() {
        for durability in [Durability::Sync, Durability::Buffered] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_with(
                dir.path(),
                opts(mode, Compression::Lz4).durability(durability),
            )
            .unwrap();
            store.put(b"k", &value).unwrap();
            for &a in &points {
                for &b in &points {
                    if a > b {
                        continue;
                    }
                    let got = store.get_range(b"k", a..b).unwrap().unwrap();
                    assert_bytes(
                        &got,
                        &value[a as usize..b as usize],
                        &format!("{mode:?}/{durability:?} {a}..{b}"),
                    );
                }
            }
            assert!(matches!(
                store.get_range(b"k", len + 1..len + 2),
                Err(Error::OutOfRange { .. })
            ));
        }
    }
}

#[test]
fn streaming_with_seeks() {
    let value = text(20 * F + 77, 3);
    let len = value.len() as u64;
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), opts(mode, Compression::Lz4)).unwrap();
        store.put(b"k", &value).unwrap();
        let mut r = store.reader(b"k").unwrap().unwrap();
        assert_eq!(r.len(), len);
        // Small sequential reads cross every frame boundary.
        let mut buf = vec![0u8; 1000];
        let mut got = Vec::new();
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_bytes(&got, &value, "sequential");
        // Seeks in every direction, each followed by a read.
        let seeks = [
            SeekFrom::Start(0),
            SeekFrom::Start(F as u64 - 10),
            SeekFrom::Current(3 * F as u64 as i64),
            SeekFrom::Current(-(2 * F as i64) - 1),
            SeekFrom::End(-5),
            SeekFrom::End(-(len as i64)),
            SeekFrom::Start(len),
            SeekFrom::Start(len + 10),
        ];
        let mut pos = 0u64;
        for s in seeks {
            pos = match s {
                SeekFrom::Start(p) => p,
                SeekFrom::Current(d) => pos.checked_add_signed(d).unwrap(),
                SeekFrom::End(d) => len.checked_add_signed(d).unwrap(),
            };
            assert_eq!(r.seek(s).unwrap(), pos);
            let mut b = vec![0u8; 2 * F + 3];
            let n = r.read(&mut b).unwrap();
            let want = &value[(pos.min(len)) as usize..(pos + b.len() as u64).min(len) as usize];
            assert_bytes(&b[..n], want, &format!("after seek to {pos}"));
            pos += n as u64;
        }
        // Positional reads do not move the cursor.
        let mut b = [0u8; 100];
        r.read_exact_at(5 * F as u64 - 50, &mut b).unwrap();
        assert_bytes(&b, &value[5 * F - 50..5 * F + 50], "read_exact_at");
        assert!(matches!(
            r.read_exact_at(len - 99, &mut b),
            Err(Error::OutOfRange { .. })
        ));
    }
}

#[test]
fn auto_stores_random_bytes_raw_and_text_compressed() {
    for mode in modes() {
        let mut sizes = Vec::new();
        for compression in [Compression::None, Compression::Auto, Compression::Lz4] {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_with(dir.path(), opts(mode, compression)).unwrap();
            let t = text(256 << 10, 1);
            let r = random(256 << 10, 2);
            store.put(b"text", &t).unwrap();
            store.put(b"random", &r).unwrap();
            let text_stored = store.stored_len(b"text").unwrap().unwrap();
            let random_stored = store.stored_len(b"random").unwrap().unwrap();
            match compression {
                Compression::None => {
                    assert_eq!(text_stored, t.len() as u64);
                    assert_eq!(random_stored, r.len() as u64);
                }
                Compression::Auto => {
                    assert!(text_stored < t.len() as u64 / 2, "text {text_stored}");
                    assert_eq!(random_stored, r.len() as u64, "random bytes stored raw");
                }
                Compression::Lz4 => {
                    assert!(text_stored < t.len() as u64 / 2, "text {text_stored}");
                    // Framed anyway: raw frames plus the table.
                    let table = FrameTableHeader::new(r.len() as u64, F as u32).table_len();
                    assert_eq!(random_stored, r.len() as u64 + table);
                }
                other => panic!("untested compression {other:?}"),
            }
            check_value(&store, b"text", &t, "text");
            check_value(&store, b"random", &r, "random");
            store.close().unwrap();
            sizes.push(disk_bytes(dir.path()));
        }
        // What the files take on disk follows.
        assert!(sizes[1] < sizes[0] * 3 / 4, "{mode:?}: none {sizes:?}");
        assert!(sizes[2] < sizes[0] * 3 / 4, "{mode:?}: lz4 {sizes:?}");
    }
}

#[test]
fn auto_respects_the_minimum_saving() {
    // Half text, half random: saves somewhat under one half.
    let mut v = text(128 << 10, 5);
    v.extend(random(128 << 10, 6));
    for (min_saving, compressed) in [(0.1, true), (0.6, false)] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(
            dir.path(),
            opts(IoMode::Buffered, Compression::Auto).compression_min_saving(min_saving),
        )
        .unwrap();
        store.put(b"k", &v).unwrap();
        let stored = store.stored_len(b"k").unwrap().unwrap();
        assert_eq!(stored < v.len() as u64, compressed, "min {min_saving}");
        check_value(&store, b"k", &v, "half and half");
    }
}

#[test]
fn invalid_compression_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for o in [
        Options::default().compression_frame_size(4095),
        Options::default().compression_frame_size((4 << 20) + 1),
        Options::default().compression_min_saving(1.0),
        Options::default().compression_min_saving(-0.1),
        Options::default().compression_min_saving(f64::NAN),
    ] {
        assert!(matches!(
            Store::open_with(dir.path(), o),
            Err(Error::InvalidOptions(_))
        ));
    }
}

#[test]
fn values_written_compressed_stay_readable_with_other_options() {
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let t = text(50 * F, 9);
        let store = Store::open_with(dir.path(), opts(mode, Compression::Lz4)).unwrap();
        store.put(b"old", &t).unwrap();
        store.close().unwrap();
        let store = Store::open_with(
            dir.path(),
            Options::default()
                .io_mode(mode)
                .compression(Compression::None),
        )
        .unwrap();
        store.put(b"new", &t).unwrap();
        assert!(store.stored_len(b"old").unwrap().unwrap() < t.len() as u64 / 2);
        assert_eq!(store.stored_len(b"new").unwrap(), Some(t.len() as u64));
        check_value(&store, b"old", &t, "old");
        check_value(&store, b"new", &t, "new");
    }
}

#[test]
fn batches_and_large_values_are_compressed_too() {
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        // Values of 64 KiB and more go to blob files of their own.
        let o = opts(mode, Compression::Auto).large_value_threshold(64 << 10);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let big = text(300 << 10, 11);
        store.put(b"big", &big).unwrap();
        let small: Vec<Vec<u8>> = (0..5).map(|i| text(10 * F + i, 20 + i as u64)).collect();
        let mut batch = Batch::new();
        for (i, v) in small.iter().enumerate() {
            batch.put(format!("b{i}").as_bytes(), v);
        }
        batch.delete(b"nothing");
        store.write(&batch).unwrap();
        assert!(pod_files(dir.path()).iter().any(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("blob-")
        }));
        for (key, len) in [(&b"big"[..], big.len()), (b"b3", small[3].len())] {
            let s = store.stored_len(key).unwrap().unwrap();
            assert!(s < len as u64 / 2, "stored {s} of {len}");
        }
        store.close().unwrap();
        let store = Store::open_with(dir.path(), o).unwrap();
        check_value(&store, b"big", &big, "blob");
        for (i, v) in small.iter().enumerate() {
            check_value(&store, format!("b{i}").as_bytes(), v, "batch");
        }
    }
}

/// Where a compressed value's stored bytes start in its file: the magic of the frame table
/// header that ends them, confirmed by the whole table decoding for that stored length.
fn find_stored(dir: &Path, stored_len: u64) -> (PathBuf, usize) {
    let mut found = Vec::new();
    for p in pod_files(dir) {
        let bytes = fs::read(&p).unwrap();
        for end in stored_len as usize..=bytes.len() {
            let at = end - stored_len as usize;
            if bytes[end - 24..end - 20] == FRAME_TRAILER_MAGIC
                && decode_table(&bytes[at..end], stored_len).is_ok()
            {
                found.push((p.clone(), at));
            }
        }
    }
    assert_eq!(found.len(), 1, "one frame table in the store: {found:?}");
    found.pop().unwrap()
}

fn flip(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at] ^= 0x5a;
    fs::write(path, bytes).unwrap();
}

#[test]
fn a_damaged_frame_fails_only_the_reads_that_touch_it() {
    // Default 64 KiB frames: text compresses each to well over 8 KiB, so a frame has a 4 KiB
    // chunk of stored bytes to itself.
    const FR: u64 = 64 << 10;
    let value = text(8 * FR as usize + 100, 77);
    let len = value.len() as u64;
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options::default()
            .io_mode(mode)
            .compression(Compression::Lz4);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        store.put(b"k", &value).unwrap();
        store.put(b"other", b"unrelated").unwrap();
        let stored_len = store.stored_len(b"k").unwrap().unwrap();
        store.close().unwrap();

        let (path, at) = find_stored(dir.path(), stored_len);
        let file = fs::read(&path).unwrap();
        let (_, entries) = decode_table(&file[at..], stored_len).unwrap();
        let victim = 3;
        let e = entries[victim];
        // A chunk of the stored bytes that lies inside the victim frame.
        let chunk = e.offset.div_ceil(4096);
        assert!((chunk + 1) * 4096 <= e.end(), "frame {e:?} too small");
        flip(&path, at + (chunk * 4096 + 100) as usize);
        let bad_offset = at as u64 + chunk * 4096;

        let store = Store::open_with(dir.path(), o).unwrap();
        let what = format!("{mode:?}");
        let v = FR * victim as u64;
        // Reads of other frames work, up to the victim's edges.
        for (a, b) in [
            (0, FR),
            (0, v),
            (v + FR, len),
            (v - 10, v),
            (v + FR, v + FR + 10),
        ] {
            let got = store.get_range(b"k", a..b).unwrap().unwrap();
            assert_bytes(
                &got,
                &value[a as usize..b as usize],
                &format!("{what} {a}..{b}"),
            );
        }
        assert_eq!(store.get(b"other").unwrap().unwrap(), b"unrelated");
        // Reads that touch it fail, naming the damaged chunk.
        for (a, b) in [(v, v + 1), (v - 1, v + 1), (v + FR - 1, v + FR), (0, len)] {
            match store.get_range(b"k", a..b) {
                Err(Error::Corruption { offset, .. }) => {
                    assert_eq!(offset, bad_offset, "{what} {a}..{b}")
                }
                other => panic!("{what} {a}..{b}: {other:?}"),
            }
        }
        assert!(store.get(b"k").unwrap_err().is_corruption());
        // A stream delivers everything before the frame, then fails.
        let mut r = store.reader(b"k").unwrap().unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 10_000];
        let err = loop {
            match r.read(&mut buf) {
                Ok(0) => panic!("{what}: stream ended without an error"),
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) => break e,
            }
        };
        assert_eq!(err.kind(), ErrorKind::InvalidData);
        assert!(got.len() as u64 >= v - buf.len() as u64 && got.len() as u64 <= v);
        assert_bytes(&got, &value[..got.len()], "streamed before the damage");
        // Past it, streaming works again.
        r.seek(SeekFrom::Start(v + FR)).unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert_bytes(
            &rest,
            &value[(v + FR) as usize..],
            "streamed after the damage",
        );
        store.close().unwrap();

        // Damage in the chunk of the frame table header (the last 24 stored bytes) fails every
        // read of the value.
        let header_at = stored_len as usize - 22;
        flip(&path, at + header_at);
        let store = Store::open_with(dir.path(), Options::default().io_mode(mode)).unwrap();
        let chunk_at = at as u64 + (header_at as u64 / 4096) * 4096;
        for (a, b) in [(0, 1), (len - 1, len), (5 * FR, 5 * FR + 4096)] {
            match store.get_range(b"k", a..b) {
                Err(Error::Corruption { offset, kind, .. }) => {
                    assert_eq!(offset, chunk_at, "{what} {a}..{b}");
                    assert!(matches!(kind, Corruption::ChecksumMismatch { .. }));
                }
                other => panic!("{what} {a}..{b}: {other:?}"),
            }
        }
        assert_eq!(store.get(b"other").unwrap().unwrap(), b"unrelated");
    }
}

#[test]
fn compressed_values_survive_a_crash() {
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(mode, Compression::Auto).large_value_threshold(128 << 10);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let values: Vec<(String, Vec<u8>)> = (0..12)
            .map(|i| {
                let len = [1, F - 1, F + 1, 7 * F + 5, 200 << 10][i % 5];
                let v = if i % 3 == 2 {
                    random(len, i as u64)
                } else {
                    text(len, i as u64)
                };
                (format!("key/{i}"), v)
            })
            .collect();
        for (k, v) in &values {
            store.put(k.as_bytes(), v).unwrap();
        }
        store.simulate_crash();
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.recovered.len(), 1, "{mode:?}: {report:?}");
        assert!(report.recovered[0].damaged_records.is_empty());
        for (k, v) in &values {
            check_value(
                &store,
                k.as_bytes(),
                v,
                &format!("{mode:?} {k} after crash"),
            );
        }
        let compressed = values
            .iter()
            .filter(|(k, v)| store.stored_len(k.as_bytes()).unwrap().unwrap() < v.len() as u64)
            .count();
        assert!(compressed >= 5, "{compressed} values stored compressed");
        // Buffered writes: a flushed prefix survives; the rest is there whole or not at all.
        let store_b = {
            store.close().unwrap();
            Store::open_with(dir.path(), o.clone().durability(Durability::Buffered)).unwrap()
        };
        let more: Vec<Vec<u8>> = (0..6)
            .map(|i| text(3 * F + i * 1000, 100 + i as u64))
            .collect();
        for (i, v) in more.iter().enumerate() {
            store_b.put(format!("more/{i}").as_bytes(), v).unwrap();
            if i == 2 {
                store_b.flush().unwrap();
            }
        }
        store_b.simulate_crash();
        let store = Store::open_with(dir.path(), o).unwrap();
        for (i, v) in more.iter().enumerate() {
            let key = format!("more/{i}");
            match store.get(key.as_bytes()).unwrap() {
                Some(got) => assert_bytes(&got, v, &key),
                None => assert!(i > 2, "{mode:?}: flushed {key} lost"),
            }
        }
        for (k, v) in &values {
            check_value(
                &store,
                k.as_bytes(),
                v,
                &format!("{mode:?} {k} after two crashes"),
            );
        }
    }
}

#[test]
fn a_torn_compressed_record_is_cut_at_recovery() {
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(mode, Compression::Lz4);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let first = text(6 * F, 1);
        let last = text(9 * F, 2);
        store.put(b"first", &first).unwrap();
        store.put(b"last", &last).unwrap();
        let last_stored = store.stored_len(b"last").unwrap().unwrap();
        store.simulate_crash();
        // Cut the segment inside the last record's frames, as a torn write would.
        let (path, at) = find_stored(dir.path(), last_stored);
        let file = fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(at as u64 + last_stored / 2).unwrap();
        drop(file);
        let store = Store::open_with(dir.path(), o).unwrap();
        let report = &store.recovery().recovered;
        assert_eq!(report.len(), 1);
        assert!(report[0].torn_at.is_some(), "{report:?}");
        check_value(&store, b"first", &first, "before the torn record");
        assert_eq!(store.get(b"last").unwrap(), None);
    }
}

#[test]
fn a_sealed_segment_rescanned_keeps_a_damaged_compressed_record_and_reports_it() {
    for mode in modes() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(mode, Compression::Lz4);
        let store = Store::open_with(dir.path(), o.clone()).unwrap();
        let a = text(6 * F, 1);
        let b = text(9 * F, 2);
        let c = text(3 * F, 3);
        store.put(b"a", &a).unwrap();
        store.put(b"b", &b).unwrap();
        store.put(b"c", &c).unwrap();
        let b_stored = store.stored_len(b"b").unwrap().unwrap();
        store.close().unwrap();
        // Damage b's frame table header (its last 24 stored bytes) and the segment's trailer:
        // the open rescans the segment, which reaches the footer table, so nothing can be torn:
        // b is kept as damaged, without a length, and a and c as written.
        let (path, at) = find_stored(dir.path(), b_stored);
        flip(&path, at + b_stored as usize - 15);
        let len = fs::metadata(&path).unwrap().len() as usize;
        flip(&path, len - 1);
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let store = common::store::open_salvaging(
            dir.path(),
            o,
            &[(name, podstore::FileProblem::FooterDamaged)],
        );
        let report = &store.recovery().recovered;
        assert_eq!(report.len(), 1, "{mode:?}: {report:?}");
        assert_eq!(report[0].damaged_records.len(), 1, "{report:?}");
        check_value(&store, b"a", &a, "before the damaged record");
        check_value(&store, b"c", &c, "after the damaged record");
        assert_eq!(store.value_len(b"b").unwrap(), Some(0));
        assert!(store.get(b"b").unwrap_err().is_corruption());
        assert!(store.get_range(b"b", 0..0).unwrap_err().is_corruption());
        let err = store
            .reader(b"b")
            .unwrap()
            .unwrap()
            .read_to_end(&mut Vec::new())
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidData, "{mode:?}");
    }
}
