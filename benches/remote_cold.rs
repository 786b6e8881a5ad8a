//! Requests and bytes per cold get of a store whose files are evicted to its remote (issue 38,
//! phase 2): 1 KiB values (in log segments), 1 MiB values (blob files) and 4 KiB ranges of a
//! 100 MiB value, read once each with no cache, counted by the store's `Stats::remote_gets` and
//! `Stats::remote_get_bytes` (the in-memory remote of the `testing` feature: what is measured
//! is requests and bytes, not time). docs/benchmarks.md, "Remote tier: cold reads (issue 38)".
//!
//! `cargo bench --bench remote_cold`

use std::sync::Arc;

use podstore::remote::MemoryRemote;
use podstore::{Options, Store};

fn main() -> podstore::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let remote = Arc::new(MemoryRemote::new());
    let opts = || {
        Options::default()
            .cache_capacity(0)
            .warm_cache(false)
            .remote(remote.clone(), "bench")
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
    Ok(())
}
