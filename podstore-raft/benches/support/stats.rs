//! What a bench run measured: operations per second and latency percentiles, and the medians
//! of repeated runs.

#![allow(dead_code)]

use std::time::Duration;

/// How long each measured run lasts: `PODSTORE_BENCH_SECS` (default 2).
pub fn run_time() -> Duration {
    Duration::from_secs_f64(env_f64("PODSTORE_BENCH_SECS", 2.0))
}

/// How many interleaved rounds: `PODSTORE_BENCH_ROUNDS` (default 3).
pub fn rounds() -> usize {
    env_f64("PODSTORE_BENCH_ROUNDS", 3.0) as usize
}

pub fn env_f64(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One run: throughput and latency percentiles (in milliseconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    pub ops: f64,
    pub p50: f64,
    pub p99: f64,
}

impl Sample {
    /// From the latencies (in microseconds) of every operation of a run of `secs`.
    pub fn new(mut micros: Vec<u32>, secs: f64) -> Sample {
        if micros.is_empty() {
            return Sample::default();
        }
        micros.sort_unstable();
        let at = |q: f64| micros[((micros.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
        Sample {
            ops: micros.len() as f64 / secs,
            p50: at(0.50),
            p99: at(0.99),
        }
    }

    /// The median of each figure over `runs` (each figure separately).
    pub fn median(runs: &[Sample]) -> Sample {
        let med = |f: fn(&Sample) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(|a, b| a.total_cmp(b));
            v[v.len() / 2]
        };
        Sample {
            ops: med(|s| s.ops),
            p50: med(|s| s.p50),
            p99: med(|s| s.p99),
        }
    }

    /// `ops/s (p50 / p99 ms)` for a table cell.
    pub fn cell(&self) -> String {
        format!("{:.0} ({:.2} / {:.2})", self.ops, self.p50, self.p99)
    }
}

/// Microseconds since `start`, saturated.
pub fn micros(d: Duration) -> u32 {
    d.as_micros().min(u32::MAX as u128) as u32
}
