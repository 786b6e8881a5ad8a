//! Recovery after a crash: how long `Store::open` takes to recover a log segment that was
//! being written (no footer: its records are scanned), at `Options::default()`. 200,000
//! values of 1 KiB (a 204 MiB segment) are written in batches of 256, the store is stopped as a
//! crash would stop it (`simulate_crash`, the `testing` feature: the active segment is left
//! unsealed), and a new `Store` opens the directory: its open scans the segment, seals it and
//! serves every value (checked). Three rounds, each on a store of its own; the median.
//! docs/benchmarks.md, "Recovery after a crash".
//!
//! `cargo bench --bench recover` (`-- KEYS` for another count)

use std::time::{Duration, Instant};

use podstore::{Batch, Options, Store};

fn main() -> podstore::Result<()> {
    let keys: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200_000);
    let value = vec![0x5Au8; 1024];
    let mut times: Vec<Duration> = Vec::new();
    let mut segment_bytes = 0;
    for round in 0..3 {
        let dir = tempfile::tempdir().expect("temporary directory");
        let store = Store::open_with(dir.path(), Options::default())?;
        let mut batch = Batch::new();
        for k in 0..keys {
            batch.put(format!("key{k:012}"), &value);
            if batch.len() == 256 || k + 1 == keys {
                store.write(&batch)?;
                batch = Batch::new();
            }
        }
        store.simulate_crash();
        segment_bytes = std::fs::read_dir(dir.path())
            .expect("the store's directory")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("seg-"))
            .map(|e| e.metadata().map_or(0, |m| m.len()))
            .sum::<u64>();
        let t = Instant::now();
        let store = Store::open_with(dir.path(), Options::default().warm_cache(false))?;
        let took = t.elapsed();
        let recovered = store.stats().live_keys;
        assert_eq!(recovered, keys, "round {round}: keys after recovery");
        assert_eq!(
            store.get(format!("key{:012}", keys / 2))?,
            Some(value.clone())
        );
        println!("round {round}: open {took:?}, {recovered} keys");
        times.push(took);
    }
    times.sort();
    let median = times[1];
    println!(
        "| {keys} × 1 KiB, {:.0} MiB unsealed | {:.3} s | {:.0} MiB/s |",
        segment_bytes as f64 / (1 << 20) as f64,
        median.as_secs_f64(),
        segment_bytes as f64 / (1 << 20) as f64 / median.as_secs_f64()
    );
    Ok(())
}
