//! `compare run --workload ranges`: random 4 KiB ranges of large values read over and over, the
//! way a server of ranges reads them (issue 37). `--keys` values of `--size` bytes (100 of
//! 10 MiB by default) are loaded, the engine is closed, the page cache dropped and the engine
//! opened again; then three passes, one after the other in that one process, each timed and
//! counted on its own (ops/s, p50/p99, disk bytes per op from `/proc/self/io`):
//!
//! - `first`: `--ops` random ranges (unaligned offsets) over all the values;
//! - `again`: the same ranges again (what a cache may serve);
//! - `mixed`: as many ranges, 90 % of them in 32 hot 64 KiB regions of 4 values, the rest
//!   random (a few hot places of a few values: what read-around and a page cache win).
//!
//! One JSON line with the fields of each pass under its name (`first_ops_per_sec`, ...), and
//! `ops_per_sec` the first pass's (the suite report's headline column).

use std::time::Instant;

use serde_json::{Value, json};

use crate::Args;
use crate::engines::{self, Engine, OpenSpec, Res};
use crate::sys;
use crate::values::{Rng, ValuePool, key};
use crate::workloads::{load, padded};

/// The length of every range.
const RANGE: u64 = 4096;

pub fn ranges(args: &Args, engine: &str, dir: &std::path::Path, seed: u64) -> Res<(Value, Value)> {
    let size = args.size("size", 10 << 20)?;
    let n = args.num("keys", 100)?.max(1);
    let ops = args.num("ops", 3000)?.max(1);
    if size < 64 << 10 {
        return Err("ranges: --size must be at least 64K".into());
    }
    let pool = ValuePool::new(size as usize, seed);
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: false,
        capacity: n * padded(size),
        cache_cap: None,
        // A fresh process's reads at default settings: podstore's warm-up reads no segment of
        // large values only, so it changes nothing here.
        cold: false,
    };
    let e = engines::open(engine, &spec)?;
    let load_secs = load(e.as_ref(), &pool, n, 4)?;
    let mut dropped = true;
    let e = e.reopen(&spec, &mut || dropped &= sys::drop_caches())?;

    let mut rng = Rng::new(seed ^ 0x0037);
    let first: Vec<(u64, u64)> = (0..ops)
        .map(|_| (rng.below(n), rng.below(size - RANGE)))
        .collect();
    let hot: Vec<(u64, u64)> = (0..32)
        .map(|_| (rng.below(n.min(4)), rng.below(size - (64 << 10))))
        .collect();
    let mixed: Vec<(u64, u64)> = (0..ops)
        .map(|_| {
            if rng.below(10) < 9 {
                let (k, base) = hot[rng.below(32) as usize];
                (k, base + rng.below((64 << 10) - RANGE))
            } else {
                (rng.below(n), rng.below(size - RANGE))
            }
        })
        .collect();
    let mut fields = json!({ "load_secs": load_secs });
    for (name, trace) in [("first", &first), ("again", &first), ("mixed", &mixed)] {
        let pass = run(e.as_ref(), &pool, trace)?;
        if let (Some(out), Value::Object(p)) = (fields.as_object_mut(), pass) {
            for (k, v) in p {
                out.insert(format!("{name}_{k}"), v);
            }
        }
    }
    // The suite's headline column: the first pass's.
    fields["ops_per_sec"] = fields["first_ops_per_sec"].clone();
    e.close()?;
    let params = json!({"size": size, "keys": n, "ops": ops, "range": RANGE, "threads": 1,
                        "page_cache_dropped": dropped});
    Ok((params, fields))
}

/// Reads every range of `trace`, checking its bytes: ops/s, latency percentiles, disk bytes per
/// op.
fn run(e: &dyn Engine, pool: &ValuePool, trace: &[(u64, u64)]) -> Res<Value> {
    let mut lat: Vec<u64> = Vec::with_capacity(trace.len());
    let io0 = sys::io_counters();
    let t_all = Instant::now();
    for &(k, off) in trace {
        let t = Instant::now();
        let v = e.get_range(&key(k), off, RANGE)?.ok_or("missing key")?;
        lat.push(t.elapsed().as_nanos() as u64);
        if v.as_slice() != &pool.value(k)[off as usize..(off + RANGE) as usize] {
            return Err(format!("wrong bytes for key {k} at {off}").into());
        }
    }
    let secs = t_all.elapsed().as_secs_f64();
    let io = sys::io_counters().since(io0);
    lat.sort_unstable();
    let pct = |p: f64| {
        let rank = ((p / 100.0) * lat.len() as f64).ceil().max(1.0) as usize;
        lat[rank.min(lat.len()) - 1] as f64 / 1000.0
    };
    Ok(json!({
        "ops_per_sec": trace.len() as f64 / secs,
        "p50_us": pct(50.0),
        "p99_us": pct(99.0),
        "disk_read_bytes_per_op": io.read_bytes as f64 / trace.len() as f64,
    }))
}
