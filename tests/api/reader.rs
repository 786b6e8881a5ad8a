//! ValueReader.

use super::*;

#[test]
fn reader_streams_a_64_mib_value_in_odd_sized_reads() {
    let value = pattern(64 * MIB, 64);
    let len = value.len() as u64;
    let read_sizes = [1, 7, 4093, 4097, 65_537, 1_000_003, 12_345];
    let mut buf = vec![0u8; read_sizes.iter().copied().max().unwrap()];
    for mode in modes() {
        // Buffered durability: the value's tail is still in the write buffer while its head is
        // on disk, so the reader crosses from one to the other.
        let fx = Fixture::new(
            Options::default()
                .io_mode(mode)
                .durability(Durability::Buffered),
        );
        let store = fx.open();
        store.put(b"big", &value).unwrap();
        let mut reader = store.reader(b"big").unwrap().expect("present");
        assert_eq!(reader.len(), len);

        let mut pos = 0;
        for &size in read_sizes.iter().cycle() {
            let n = reader.read(&mut buf[..size]).unwrap();
            if n == 0 {
                break;
            }
            assert!(
                n <= size,
                "{mode:?}: read {n} bytes into a {size}-byte buffer"
            );
            assert_bytes_eq(
                &buf[..n],
                &value[pos..pos + n],
                &format!("{mode:?} at {pos}"),
            );
            pos += n;
        }
        assert_eq!(pos, value.len(), "{mode:?}: bytes streamed");
        assert_eq!(
            reader.read(&mut buf).unwrap(),
            0,
            "{mode:?}: read at the end"
        );

        let mid = len / 2;
        for range in [0..1, 4095..4097, mid - 1..mid + 4097, len - 5000..len] {
            check_range(&store, b"big", &value, range, &format!("{mode:?}"));
        }
    }
}

#[test]
fn reader_seeks_from_start_end_and_current() {
    let value = pattern(100_000, 9);
    let len = value.len() as u64;
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", &value).unwrap();
        let mut r = store.reader(b"k").unwrap().expect("present");

        assert_eq!(r.seek(SeekFrom::Start(4090)).unwrap(), 4090, "{what}");
        assert_bytes_eq(&read_n(&mut r, 10), &value[4090..4100], &what);
        assert_eq!(r.stream_position().unwrap(), 4100, "{what}");

        assert_eq!(r.seek(SeekFrom::Current(-100)).unwrap(), 4000, "{what}");
        assert_bytes_eq(&read_n(&mut r, 200), &value[4000..4200], &what);
        assert_eq!(r.seek(SeekFrom::Current(50_000)).unwrap(), 54_200, "{what}");
        assert_bytes_eq(&read_n(&mut r, 8192), &value[54_200..62_392], &what);

        assert_eq!(r.seek(SeekFrom::End(-1)).unwrap(), len - 1, "{what}");
        let mut tail = Vec::new();
        r.read_to_end(&mut tail).unwrap();
        assert_eq!(tail, &value[value.len() - 1..], "{what}");
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read at the end"
        );

        assert_eq!(r.seek(SeekFrom::End(0)).unwrap(), len, "{what}");
        assert_eq!(r.read(&mut [0u8; 10]).unwrap(), 0, "{what}: read at End(0)");
        assert_eq!(
            r.seek(SeekFrom::Start(len + 100)).unwrap(),
            len + 100,
            "{what}"
        );
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read past the end"
        );
        assert_eq!(r.seek(SeekFrom::End(100)).unwrap(), len + 100, "{what}");
        assert_eq!(
            r.read(&mut [0u8; 10]).unwrap(),
            0,
            "{what}: read past the end"
        );

        // Seeking before the start fails and leaves the cursor where it was.
        assert_eq!(r.seek(SeekFrom::Start(10)).unwrap(), 10);
        let before_start = [SeekFrom::Current(-11), SeekFrom::End(-(len as i64) - 1)];
        for target in before_start {
            let err = r.seek(target).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{what}: {target:?}");
            assert_eq!(r.stream_position().unwrap(), 10, "{what}: after {target:?}");
        }
        assert_eq!(r.seek(SeekFrom::End(-(len as i64))).unwrap(), 0, "{what}");
        assert_bytes_eq(&read_n(&mut r, 5000), &value[..5000], &what);

        // Positional reads ignore and keep the cursor.
        let mut at = [0u8; 10];
        r.read_exact_at(99_990, &mut at).unwrap();
        assert_eq!(at, value[99_990..], "{what}");
        assert_eq!(r.stream_position().unwrap(), 5000, "{what}");
        match r.read_exact_at(99_995, &mut at) {
            Err(Error::OutOfRange {
                key,
                start,
                end,
                len: l,
            }) => {
                assert_eq!((start, end, l), (99_995, 100_005, len), "{what}");
                assert_eq!(key, b"k", "{what}: OutOfRange names the key");
            }
            other => panic!("{what}: read_exact_at past the end gave {other:?}"),
        }
    }
}

#[test]
fn reader_keeps_reading_the_value_it_was_opened_on() {
    let old = pattern(100_000, 1);
    let new = pattern(7000, 2);
    for opts in configs() {
        let what = label(&opts);
        let fx = Fixture::new(opts);
        let store = fx.open();
        store.put(b"k", &old).unwrap();
        let mut before_overwrite = store.reader(b"k").unwrap().expect("present");
        store.put(b"k", &new).unwrap();
        let mut before_delete = store.reader(b"k").unwrap().expect("present");
        assert!(store.delete(b"k").unwrap());
        assert!(store.reader(b"k").unwrap().is_none(), "{what}");

        let mut got = Vec::new();
        before_overwrite.read_to_end(&mut got).unwrap();
        assert_bytes_eq(
            &got,
            &old,
            &format!("{what}: reader opened before the overwrite"),
        );
        got.clear();
        before_delete.read_to_end(&mut got).unwrap();
        assert_bytes_eq(
            &got,
            &new,
            &format!("{what}: reader opened before the delete"),
        );
    }
}
