//! Sustained overwrite churn: the space compaction gives back, what it costs in writes, and what
//! it does to foreground latency.
//!
//! Loads a live set of fixed-size values, then overwrites random keys (each key once per pass,
//! in random order) for several passes, with durable puts from several threads, once with the
//! background compactor on and once with it off. Every half second it samples the bytes on disk
//! and the live bytes; at the end it prints, per run, throughput, put latency percentiles, the
//! disk usage over time, and write amplification (bytes written by compaction per byte written
//! by users).
//!
//! ```text
//! cargo bench --bench churn                       # 1 GiB live set, 64 KiB values, 3 passes
//! CHURN_LIVE_MIB=256 CHURN_PASSES=2 cargo bench --bench churn
//! ```
//! Environment: `CHURN_LIVE_MIB` (1024), `CHURN_VALUE_KIB` (64), `CHURN_PASSES` (3),
//! `CHURN_THREADS` (8), `CHURN_DIR` (a temporary directory under the system's; put it on the
//! disk to measure), `CHURN_MODES` (`on,off`; also `on-unthrottled`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podstore::{Options, Stats, Store};

// The deterministic generator of the integration tests.
#[path = "../tests/common/mod.rs"]
mod common;
use common::{Random, XorShift};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Sample {
    secs: f64,
    disk: u64,
    live: u64,
}

struct Run {
    mode: String,
    load_secs: f64,
    churn_secs: f64,
    churn_bytes: u64,
    latencies_us: Vec<u64>,
    samples: Vec<Sample>,
    end: Stats,
}

fn value(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = XorShift::new(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn run(mode: &str, dir: &std::path::Path) -> Run {
    let live_bytes = env("CHURN_LIVE_MIB", 1024) << 20;
    let value_len = (env("CHURN_VALUE_KIB", 64) << 10) as usize;
    let passes = env("CHURN_PASSES", 3);
    let threads = env("CHURN_THREADS", 8) as usize;
    let keys = (live_bytes / value_len as u64) as usize;
    let opts = match mode {
        "on" => Options::default(),
        "on-unthrottled" => Options::default().compaction_rate(None),
        "off" => Options::default().background_compaction(false),
        other => panic!("unknown mode {other}"),
    };
    let store = Arc::new(Store::open_with(dir, opts).expect("open"));
    // A few distinct values, so that generating them costs nothing during the run.
    let values: Vec<Vec<u8>> = (0..16).map(|i| value(i + 1, value_len)).collect();
    let values = Arc::new(values);

    let started = Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (store, samples, done) = (store.clone(), samples.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                let s = store.stats();
                samples.lock().unwrap().push(Sample {
                    secs: started.elapsed().as_secs_f64(),
                    disk: s.disk_bytes,
                    live: s.live_bytes,
                });
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };

    // Work items: the load (every key once), then `passes` shuffled passes over the keys.
    let work = |order: Vec<usize>, record: bool| -> (f64, Vec<u64>) {
        let next = AtomicUsize::new(0);
        let t0 = Instant::now();
        let lat = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&k) = order.get(i) else { break };
                        let key = format!("churn-{k:08}");
                        let t = Instant::now();
                        store
                            .put(key.as_bytes(), &values[i % values.len()])
                            .expect("put");
                        if record {
                            mine.push(t.elapsed().as_micros() as u64);
                        }
                    }
                    lat.lock().unwrap().extend(mine);
                });
            }
        });
        (t0.elapsed().as_secs_f64(), lat.into_inner().unwrap())
    };
    let (load_secs, _) = work((0..keys).collect(), false);
    let mut order: Vec<usize> = Vec::with_capacity(keys * passes as usize);
    let mut rng = XorShift::new(passes);
    for _ in 0..passes {
        let mut pass: Vec<usize> = (0..keys).collect();
        for i in (1..keys).rev() {
            pass.swap(i, rng.below(i + 1));
        }
        order.extend(pass);
    }
    let churn_bytes = (order.len() * value_len) as u64;
    let (churn_secs, mut latencies_us) = work(order, true);
    // Let the compactor catch up for a few seconds (sampled), so the curve shows where it settles.
    std::thread::sleep(Duration::from_secs(if mode == "off" { 0 } else { 5 }));
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    latencies_us.sort_unstable();
    let end = store.stats();
    let samples = std::mem::take(&mut *samples.lock().unwrap());
    Run {
        mode: mode.to_string(),
        load_secs,
        churn_secs,
        churn_bytes,
        latencies_us,
        samples,
        end,
    }
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn mib(b: u64) -> f64 {
    b as f64 / (1 << 20) as f64
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would run it with other flags.
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let modes = std::env::var("CHURN_MODES").unwrap_or_else(|_| "on,off".into());
    let root = std::env::var("CHURN_DIR")
        .map(std::path::PathBuf::from)
        .ok();
    println!(
        "churn: live set {} MiB of {} KiB values, {} passes, {} threads",
        env("CHURN_LIVE_MIB", 1024),
        env("CHURN_VALUE_KIB", 64),
        env("CHURN_PASSES", 3),
        env("CHURN_THREADS", 8)
    );
    let mut runs = Vec::new();
    for mode in modes.split(',') {
        let dir = match &root {
            Some(r) => tempfile::tempdir_in(r),
            None => tempfile::tempdir(),
        }
        .expect("temp dir");
        runs.push(run(mode, dir.path()));
    }
    println!();
    println!(
        "| compaction | load s | churn MiB/s | put p50 µs | p99 µs | p99.9 µs | max disk MiB | end disk MiB | end live MiB | end disk / live | write amplification |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for r in &runs {
        let max_disk = r.samples.iter().map(|s| s.disk).max().unwrap_or(0);
        println!(
            "| {} | {:.1} | {:.0} | {} | {} | {} | {:.0} | {:.0} | {:.0} | {:.2} | {:.3} |",
            r.mode,
            r.load_secs,
            mib(r.churn_bytes) / r.churn_secs,
            pct(&r.latencies_us, 0.50),
            pct(&r.latencies_us, 0.99),
            pct(&r.latencies_us, 0.999),
            mib(max_disk),
            mib(r.end.disk_bytes),
            mib(r.end.live_bytes),
            r.end.disk_bytes as f64 / r.end.live_bytes.max(1) as f64,
            r.end.write_amplification()
        );
    }
    for r in &runs {
        println!();
        println!(
            "disk usage over time, compaction {} (s: disk MiB / live MiB):",
            r.mode
        );
        let step = (r.samples.len() / 24).max(1);
        let line: Vec<String> = r
            .samples
            .iter()
            .step_by(step)
            .map(|s| format!("{:.0}s {:.0}/{:.0}", s.secs, mib(s.disk), mib(s.live)))
            .collect();
        println!("{}", line.join(", "));
    }
}
