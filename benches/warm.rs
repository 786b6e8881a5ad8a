//! The warm restart's own speed: how long the warm-up thread at open
//! ([`Options::warm_cache`]) takes to fill the read cache from a store's segments, on an
//! otherwise idle store (no readers competing for the CPU or the cache).
//!
//! Loads `WARM_RECORDS` values of `WARM_VALUE` bytes (keys as YCSB's, `user` and 12 digits)
//! into a store under `WARM_DIR` (a temporary directory if unset; put it on the disk to
//! measure: direct I/O needs a file system that supports it), closes it, then opens it
//! `WARM_REPS` times and waits for each warm-up to end, printing its wall time, the values it
//! kept and the bytes it read, and the median.
//!
//! ```text
//! WARM_DIR=/path/on/disk cargo bench --bench warm        # 200 000 values of 1 KiB, 5 opens
//! ```
//! Environment: `WARM_RECORDS` (200000), `WARM_VALUE` (1024), `WARM_REPS` (5), `WARM_DIR`.

use std::time::{Duration, Instant};

use podstore::{Durability, Options, Store};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let records = env("WARM_RECORDS", 200_000);
    let size = env("WARM_VALUE", 1024) as usize;
    let reps = env("WARM_REPS", 5);
    let tmp;
    let dir = match std::env::var_os("WARM_DIR") {
        Some(d) => std::path::PathBuf::from(d).join("warm-bench"),
        None => {
            tmp = tempfile::tempdir().expect("temporary directory");
            tmp.path().join("warm-bench")
        }
    };
    let _ = std::fs::remove_dir_all(&dir);
    let load = Instant::now();
    {
        let store = Store::open_with(
            &dir,
            Options::default()
                .durability(Durability::Buffered)
                .warm_cache(false),
        )
        .expect("open");
        let mut value = vec![0u8; size];
        for i in 0..records {
            value[..8].copy_from_slice(&i.to_le_bytes());
            store
                .put(format!("user{i:012}").as_bytes(), &value)
                .expect("put");
        }
        store.close().expect("close");
    }
    println!(
        "loaded {records} values of {size} B in {:.2?}",
        load.elapsed()
    );
    let mut times = Vec::new();
    for rep in 0..reps {
        let began = Instant::now();
        let store = Store::open_with(&dir, Options::default()).expect("open");
        let opened = began.elapsed();
        let stats = loop {
            let s = store.stats();
            if !s.cache_warming {
                break s;
            }
            // Stats walks the index: polled sparingly, not to take the warm-up's CPU.
            std::thread::sleep(Duration::from_millis(10));
        };
        let took = began.elapsed();
        println!(
            "rep {rep}: open {opened:.2?}, warm-up done after {took:.2?}: {} values ({} B) \
             kept, {} B read, cache capacity {} B",
            stats.cache_warmed_values,
            stats.cache_warmed_bytes,
            stats.cache_warm_read_bytes,
            stats.cache_capacity
        );
        times.push(took);
        store.close().expect("close");
    }
    times.sort();
    if let Some(m) = times.get(times.len() / 2) {
        println!("median warm-up: {m:.2?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
