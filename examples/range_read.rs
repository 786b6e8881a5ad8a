//! Range reads: store a large value, read small ranges of it, and stream it whole.
//!
//! Run: `cargo run --release --example range_read [DIR] [VALUE_MIB]`
//!
//! It prints how many bytes each read fetched from the disk (from /proc/self/io, Linux only):
//! with direct I/O a 4 KiB range of a 100 MiB value reads a few KiB, not the value.

use std::io::{Read, Seek, SeekFrom};
use std::time::Instant;

use podstore::{Options, Store};

/// Bytes this process has caused to be read from storage so far (Linux `/proc/self/io`).
fn disk_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

fn measured<T>(what: &str, f: impl FnOnce() -> podstore::Result<T>) -> podstore::Result<T> {
    let before = disk_read_bytes();
    let t = Instant::now();
    let out = f()?;
    let elapsed = t.elapsed();
    match (before, disk_read_bytes()) {
        (Some(b), Some(a)) => println!(
            "{what:<44} {elapsed:>10.2?}  {:>11} bytes read from disk",
            a - b
        ),
        _ => println!("{what:<44} {elapsed:>10.2?}"),
    }
    Ok(out)
}

fn main() -> podstore::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("podstore-range-{}", std::process::id()))
        });
    let mib: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let len = mib << 20;

    // A value whose every byte is predictable, so the example can check what it reads.
    let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let store = Store::open_with(&dir, Options::default())?;
    println!(
        "store in {} ({:?} I/O), value of {mib} MiB",
        dir.display(),
        store.io_mode()
    );
    measured("put (durable)", || store.put(b"big", &value))?;

    let cases = [
        (0, 4096),
        (1 << 20, 4096),
        (len - 4096, 4096),
        (12_345, 100),
    ];
    for (start, n) in cases {
        let bytes = measured(&format!("get_range({start}..{})", start + n), || {
            store.get_range(b"big", start..start + n)
        })?
        .expect("the key exists");
        assert_eq!(bytes, value[start as usize..(start + n) as usize]);
    }

    // Stream the whole value through a small buffer, as a server would send it.
    let mut reader = store.reader(b"big")?.expect("the key exists");
    let streamed = measured("stream the whole value (64 KiB reads)", || {
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0u64;
        loop {
            let n = reader.read(&mut buf).map_err(|e| podstore::Error::Io {
                op: "stream value",
                path: None,
                source: e,
            })?;
            if n == 0 {
                break;
            }
            assert_eq!(buf[..n], value[total as usize..total as usize + n]);
            total += n as u64;
        }
        Ok(total)
    })?;
    println!("streamed {streamed} bytes");

    // Seek and read, like an HTTP Range request.
    reader.seek(SeekFrom::End(-10)).expect("seek");
    let mut tail = Vec::new();
    reader.read_to_end(&mut tail).expect("read");
    assert_eq!(tail, value[value.len() - 10..]);
    println!("last 10 bytes via seek: {tail:?}");

    // Past the end is an error, not a short read.
    match store.get_range(b"big", len - 10..len + 10) {
        Err(podstore::Error::OutOfRange {
            start, end, len, ..
        }) => {
            println!("range {start}..{end} of a {len}-byte value: OutOfRange, as documented")
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }

    store.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
