//! Requests and bytes per cold get of a store whose files are evicted to its remote (issue 38,
//! phase 2): 1 KiB values (in log segments), 1 MiB values (blob files), 4 KiB ranges of a
//! 100 MiB value and of 512 KiB values (in log segments), read once each with no cache,
//! counted by the store's `Stats::remote_gets` and `Stats::remote_get_bytes` (the in-memory
//! remote of the `testing` feature: what is measured is requests and bytes, not time; but for
//! one row, timed with 20 ms waited before every GET, the order of S3's first byte: the GETs of
//! one read are in flight together). docs/benchmarks.md, "Remote tier: cold reads (issue 38)".
//!
//! `cargo bench --bench remote_cold`

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use podstore::remote::{MemoryRemote, ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError};
use podstore::{Options, Store};

/// The in-memory remote, with [`GET_WAIT`] waited before each GET while `slow` is set.
#[derive(Debug)]
struct Delayed {
    inner: Arc<MemoryRemote>,
    slow: AtomicBool,
}

/// What a GET waits while [`Delayed::slow`] is set.
const GET_WAIT: Duration = Duration::from_millis(20);

impl Remote for Delayed {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.inner.put(name, body)
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.inner.put_if_absent(name, bytes)
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        if self.slow.load(Ordering::Relaxed) {
            std::thread::sleep(GET_WAIT);
        }
        self.inner.get_range(name, range)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.inner.list(prefix)
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.inner.delete(name)
    }
}

fn main() -> podstore::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let remote = Arc::new(MemoryRemote::new());
    let delayed = Arc::new(Delayed {
        inner: remote.clone(),
        slow: AtomicBool::new(false),
    });
    let opts = || {
        Options::default()
            .cache_capacity(0)
            .warm_cache(false)
            .remote(delayed.clone(), "bench")
            .remote_flush_interval(None)
            .remote_local_budget(Some(0))
    };
    let store = Store::open_with(dir.path().join("a"), opts())?;
    let small = 20_000u64;
    let large = 64u64;
    for k in 0..small {
        store.put(format!("s{k:06}"), vec![(k % 251) as u8; 1024])?;
    }
    for k in 0..large {
        store.put(format!("l{k:03}"), vec![(k % 251) as u8; 1 << 20])?;
    }
    // Below `large_value_threshold` (1 MiB): in log segments, each record's header, chunks and
    // crcs (at its end) far enough apart to be fetched by a GET each.
    let medium = 32u64;
    for k in 0..medium {
        store.put(format!("m{k:03}"), vec![(k % 251) as u8; 512 << 10])?;
    }
    let huge: Vec<u8> = (0..100u64 << 20).map(|i| (i % 253) as u8).collect();
    store.put("huge", &huge)?;
    store.flush_remote()?;
    let s = store.stats();
    println!(
        "files: {} remote-only of {} B, {} B local ({:.2} %)",
        s.remote_only_files,
        s.disk_bytes,
        s.local_bytes,
        100.0 * s.local_bytes as f64 / s.disk_bytes as f64
    );
    println!("| read | ops | GETs per op | bytes fetched per op | bytes asked per op |");
    println!("|---|---|---|---|---|");
    let row = |what: &str,
               ops: u64,
               asked: u64,
               run: &mut dyn FnMut(u64) -> podstore::Result<()>|
     -> podstore::Result<()> {
        let before = store.stats();
        for i in 0..ops {
            run(i)?;
        }
        let after = store.stats();
        println!(
            "| {what} | {ops} | {:.3} | {:.0} | {asked} |",
            (after.remote_gets - before.remote_gets) as f64 / ops as f64,
            (after.remote_get_bytes - before.remote_get_bytes) as f64 / ops as f64,
        );
        Ok(())
    };
    // Every 7th key (spread over all segments), each read once.
    row("get, 1 KiB value", small / 7, 1024, &mut |i| {
        store.get(format!("s{:06}", i * 7))?.expect("present");
        Ok(())
    })?;
    row("get, 1 MiB value", large, 1 << 20, &mut |i| {
        store.get(format!("l{i:03}"))?.expect("present");
        Ok(())
    })?;
    let ranges = 2000u64;
    row(
        "get_range, 4 KiB of a 100 MiB value",
        ranges,
        4096,
        &mut |i| {
            // Spread over the value, at offsets that are not chunk-aligned.
            let start = (i * 52_433 + 1_234) % ((100 << 20) - 4096);
            let got = store
                .get_range("huge", start..start + 4096)?
                .expect("present");
            assert!(got[..] == huge[start as usize..start as usize + 4096]);
            Ok(())
        },
    )?;
    // The middle of each 512 KiB value, twice over: the first 16 values counted, the next 16
    // timed with 20 ms before every GET.
    let mid = (256u64 << 10) + 1_000;
    row(
        "get_range, 4 KiB of a 512 KiB value (log segment)",
        medium / 2,
        4096,
        &mut |i| {
            let got = store
                .get_range(format!("m{i:03}"), mid..mid + 4096)?
                .expect("present");
            assert!(got[..] == vec![(i % 251) as u8; 4096][..]);
            Ok(())
        },
    )?;
    delayed.slow.store(true, Ordering::Relaxed);
    let mut took: Vec<Duration> = (medium / 2..medium)
        .map(|i| {
            let started = Instant::now();
            store
                .get_range(format!("m{i:03}"), mid..mid + 4096)
                .map(|got| {
                    got.expect("present");
                    started.elapsed()
                })
        })
        .collect::<podstore::Result<_>>()?;
    delayed.slow.store(false, Ordering::Relaxed);
    took.sort();
    println!(
        "4 KiB of a 512 KiB value (log segment), {GET_WAIT:?} before every GET: p50 {:.1} ms, \
         max {:.1} ms ({} reads)",
        took[took.len() / 2].as_secs_f64() * 1e3,
        took[took.len() - 1].as_secs_f64() * 1e3,
        took.len()
    );
    drop(store);
    // Restore on an empty directory: footers only (the local budget is set).
    let requests = remote.requests();
    let started = std::time::Instant::now();
    let restored = Store::open_with(dir.path().join("b"), opts())?;
    let took = started.elapsed();
    let s = restored.stats();
    let files = s.log_segments + s.blob_files;
    // What the restore downloaded: the files' local bytes, and each trailer read first.
    let read = s.local_bytes + 64 * files as u64;
    println!(
        "restore: {files} files, {read} of {} B read ({:.2} %), {} remote calls, {took:.0?}",
        s.disk_bytes,
        100.0 * read as f64 / s.disk_bytes as f64,
        remote.requests() - requests,
    );
    assert!(restored.get("huge")?.expect("present") == huge);
    drop(restored);
    // Reads again, at the default read cache (sized from the memory available): what is read
    // from the remote is kept in memory, at the granularity it was read, and nothing is written
    // back to the local disk (docs/design-remote.md, "Refills"). Each trace is read twice, by
    // a store restored on an empty directory (the writer's own directory would bring back the
    // hot set it recorded at close, values and all).
    let warm = Store::open_with(
        dir.path().join("c"),
        Options::default()
            .warm_cache(false)
            .remote(delayed.clone(), "bench")
            .remote_flush_interval(None)
            .remote_local_budget(Some(0)),
    )?;
    println!(
        "default read cache: {} MiB",
        warm.stats().cache_capacity >> 20
    );
    println!(
        "| read (default cache) | pass | ops | GETs per op | bytes fetched per op | local bytes |"
    );
    println!("|---|---|---|---|---|---|");
    // Random 4 KiB ranges (splitmix64 of the op's number), and the cold table's ranges in
    // order, 52 KB apart: a forward stream, which the read-around (store/read/pattern.rs)
    // meets with reads of up to 1 MiB (fewer requests, more bytes).
    let random = |i: u64| {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % ((100 << 20) - 4096)
    };
    let traces: [(&str, u64); 3] = [
        ("get, 1 KiB value", small / 7),
        (
            "get_range, 4 KiB at random offsets of a 100 MiB value",
            ranges,
        ),
        (
            "get_range, 4 KiB of a 100 MiB value, 52 KB apart in order",
            ranges,
        ),
    ];
    for pass in 1..=2 {
        for (t, (what, ops)) in traces.iter().enumerate() {
            let before = warm.stats();
            for i in 0..*ops {
                let got = match t {
                    0 => warm.get(format!("s{:06}", i * 7))?,
                    1 => warm.get_range("huge", random(i)..random(i) + 4096)?,
                    _ => {
                        let start = (i * 52_433 + 1_234) % ((100 << 20) - 4096);
                        warm.get_range("huge", start..start + 4096)?
                    }
                };
                got.expect("present");
            }
            let after = warm.stats();
            println!(
                "| {what} | {pass} | {ops} | {:.3} | {:.0} | {} |",
                (after.remote_gets - before.remote_gets) as f64 / *ops as f64,
                (after.remote_get_bytes - before.remote_get_bytes) as f64 / *ops as f64,
                after.local_bytes,
            );
        }
    }
    Ok(())
}
