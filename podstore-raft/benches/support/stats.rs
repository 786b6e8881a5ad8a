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

/// Where each node's directory goes: `PODSTORE_BENCH_NODE_DIRS`, parent directories separated
/// by commas, to give each node a disk of its own. Returns a fresh temporary directory made in
/// each parent (removed when dropped; node `i` goes in the `i`-th, cycling); none (the default)
/// for one temporary directory for all.
pub fn node_roots() -> Vec<tempfile::TempDir> {
    std::env::var("PODSTORE_BENCH_NODE_DIRS")
        .unwrap_or_default()
        .split(',')
        .filter(|d| !d.is_empty())
        .map(|p| tempfile::tempdir_in(p).unwrap_or_else(|e| panic!("a directory in {p}: {e}")))
        .collect()
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
    /// CPU time of the whole process (every node, the clients, the runtime) per operation, in
    /// microseconds, when measured (0 otherwise): what an operation costs, which a machine
    /// loaded by others distorts far less than the throughput.
    pub cpu_us: f64,
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
            cpu_us: 0.0,
        }
    }

    /// With the process's CPU time over the run (`cpu_secs`, see [`process_cpu_secs`]).
    pub fn with_cpu(mut self, cpu_secs: f64, secs: f64) -> Sample {
        let ops = self.ops * secs;
        if ops > 0.0 {
            self.cpu_us = cpu_secs * 1e6 / ops;
        }
        self
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
            cpu_us: med(|s| s.cpu_us),
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

/// The CPU time (user and system) this process has used so far, in seconds, from
/// `/proc/self/stat` (clock ticks of 10 ms).
pub fn process_cpu_secs() -> f64 {
    cpu_secs_of("self")
}

/// The CPU time (user and system) process `pid` (`self` for this one) has used so far, in
/// seconds, from `/proc/PID/stat` (clock ticks of 10 ms).
pub fn cpu_secs_of(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which may hold spaces, so after its closing ')'):
    // state is the first of them, utime the 12th and stime the 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}
