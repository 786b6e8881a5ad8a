//! Range reads: store a large value, read small ranges of it, and stream it whole.
//!
//! Run: `cargo run --release --example range_read [--mib N] [DIR]` (a value of N MiB,
//! default 100)
//!
//! Without DIR the store lives in a fresh temporary directory, removed at the end. A given DIR
//! must be new, empty or a podstore store; the store (with the value, under the key `big`) is
//! left there.
//!
//! It prints how many bytes each read fetched from the disk (from /proc/self/io, Linux only):
//! with direct I/O a 4 KiB range of a 100 MiB value reads a few KiB, not the value.

mod common;

use std::io::{Read, Seek, SeekFrom};
use std::time::Instant;

use common::{Args, Failure, finish, size};
use podstore::Options;

const USAGE: &str = "range_read [--mib N] [DIR]";

/// Bytes this process has caused to be read from storage so far (Linux `/proc/self/io`).
fn disk_read_bytes() -> Option<u64> {
    let io = std::fs::read_to_string("/proc/self/io").ok()?;
    io.lines()
        .find_map(|l| l.strip_prefix("read_bytes: "))
        .and_then(|v| v.trim().parse().ok())
}

fn measured<T, E>(what: &str, f: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    let before = disk_read_bytes();
    let t = Instant::now();
    let out = f()?;
    let elapsed = t.elapsed();
    match (before, disk_read_bytes()) {
        (Some(b), Some(a)) => println!(
            "{what:<40} {elapsed:>10.2?}  {:>10} read from disk",
            size(a - b)
        ),
        _ => println!("{what:<40} {elapsed:>10.2?}"),
    }
    Ok(out)
}

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let args = Args::parse(USAGE, &["--mib"], &[], 1)?;
    let mib: u64 = args.option("--mib", 100)?;
    if !(1..=4096).contains(&mib) {
        return Err(Failure::usage("--mib: a value of 1 to 4096 MiB"));
    }
    let dir = args.store_dir("range_read")?;
    let len = mib << 20;

    // A value whose every byte is predictable, so the example can check what it reads.
    let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let store = dir.open(Options::default())?;
    println!(
        "store in {} ({:?} I/O), a value of {mib} MiB",
        dir.path().display(),
        store.io_mode()
    );
    measured("put (durable)", || store.put(b"big", &value))?;

    for (start, n) in [
        (0, 4096),
        (len / 2, 4096),
        (len - 4096, 4096),
        (12_345, 100),
    ] {
        let what = format!("get_range({start}..{})", start + n);
        let bytes =
            measured(&what, || store.get_range(b"big", start..start + n))?.expect("the key exists");
        assert_eq!(bytes, value[start as usize..(start + n) as usize]);
    }

    // Stream the whole value through a small buffer, as a server would send it.
    let mut reader = store.reader(b"big")?.expect("the key exists");
    let streamed = measured("stream the whole value (64 KiB reads)", || {
        let mut buf = vec![0u8; 64 << 10];
        let mut total = 0;
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                return Ok::<u64, std::io::Error>(total);
            }
            assert_eq!(buf[..n], value[total as usize..total as usize + n]);
            total += n as u64;
        }
    })?;
    println!("streamed {streamed} bytes, all as written");

    // Seek and read, like an HTTP Range request for the last bytes.
    reader.seek(SeekFrom::End(-10))?;
    let mut tail = Vec::new();
    reader.read_to_end(&mut tail)?;
    assert_eq!(tail, value[value.len() - 10..]);
    println!("last 10 bytes, through seek: {tail:?}");

    // A range that starts past the end of the value is an error, not an empty read.
    match store.get_range(b"big", len + 1..len + 10) {
        Err(e @ podstore::Error::OutOfRange { .. }) => {
            println!("get_range({}..{}): {e}", len + 1, len + 10)
        }
        other => panic!("expected OutOfRange, got {other:?}"),
    }

    store.close()?;
    println!("{}", dir.farewell());
    Ok(())
}
