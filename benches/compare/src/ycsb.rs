//! The `ycsb` workload: YCSB's core workloads A, B, C and F on one engine, and the run phase
//! that the `memlimit` workload reuses ([`ycsb_phase`]).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Args;
use crate::engines::{Engine, Res};
use crate::values::{Rng, ScrambledZipfian, ValuePool, key};
use crate::workloads::{drive_kinds, kind_fields, open_loaded};

/// The YCSB core workloads A, B, C and F (`--mix a|b|c|f`), in YCSB's shape: `--records`
/// values of `--size` bytes are loaded (bulk, then synced), the engine is closed and opened again
/// (its own caches empty, the page cache as the load left it, like YCSB's run phase in a fresh
/// process), then `--ops` operations run on `--threads` threads (see [`ycsb_phase`]), on records
/// chosen by YCSB's scrambled zipfian distribution (θ = 0.99), or uniformly with
/// `--distribution uniform`.
pub fn ycsb(
    args: &Args,
    engine: &str,
    dir: &Path,
    seed: u64,
    load_threads: usize,
) -> Res<(Value, Value)> {
    let y = Ycsb {
        mix: args.need("mix")?.to_ascii_lowercase(),
        uniform: match args.str("distribution").unwrap_or("zipfian") {
            "zipfian" => false,
            "uniform" => true,
            other => return Err(format!("--distribution {other:?}: zipfian or uniform").into()),
        },
        size: args.size("size", 1024)?,
        records: args.num("records", 200_000)?.max(1),
        ops: args.num("ops", 400_000)?,
        threads: args.num("threads", 8)?.max(1) as usize,
        secs: args.secs("secs", 60.0)?,
        seed,
    };
    let pool = ValuePool::new(y.size as usize, seed);
    let (e, spec, load_secs) = open_loaded(
        engine,
        dir,
        &pool,
        y.records,
        y.records + y.ops,
        load_threads,
    )?;
    let e = e.reopen(&spec, &mut || {})?;
    let mut fields = ycsb_phase(e.as_ref(), &pool, &y)?;
    e.close()?;
    let params = json!({"mix": y.mix, "size": y.size, "threads": y.threads,
                        "records": y.records, "max_ops": y.ops, "secs_limit": y.secs,
                        "durable": false, "distribution": y.distribution()});
    fields["load_secs"] = json!(load_secs);
    Ok((params, fields))
}

/// One YCSB run phase's parameters.
pub struct Ycsb {
    /// `a`, `b`, `c` or `f`.
    pub mix: String,
    /// Records drawn uniformly instead of by the scrambled zipfian distribution.
    pub uniform: bool,
    pub size: u64,
    pub records: u64,
    pub ops: u64,
    pub threads: usize,
    pub secs: f64,
    pub seed: u64,
}

impl Ycsb {
    pub fn distribution(&self) -> &'static str {
        if self.uniform {
            "uniform"
        } else {
            "scrambled zipfian, theta 0.99"
        }
    }
}

/// YCSB's run phase on an engine holding records `0..y.records` of `pool`: `y.ops` operations
/// on `y.threads` threads (a phase stops issuing them after `y.secs`):
/// - A: 50 % reads, 50 % updates; B: 95 % reads, 5 % updates; C: reads only;
/// - F: 50 % reads, 50 % read-modify-writes (a read, then an update of the same record, timed
///   as one operation).
///
/// An update writes a whole new value and is not synced (bulk mode, as YCSB runs against
/// RocksDB); the phase ends with one sync, untimed. Returns the run's fields: throughput,
/// p50/p99 (also per kind of operation), disk bytes per operation.
pub fn ycsb_phase(e: &dyn Engine, pool: &ValuePool, y: &Ycsb) -> Res<Value> {
    let (read_pct, rmw) = match y.mix.as_str() {
        "a" => (50, false),
        "b" => (95, false),
        "c" => (100, false),
        "f" => (50, true),
        other => return Err(format!("--mix {other:?}: a, b, c or f").into()),
    };
    let (records, size) = (y.records, y.size);
    const READ: usize = 0;
    const WRITE: usize = 1;
    // The plan is drawn before the clock starts: the key chooser's cost is not the engine's.
    let plan: Vec<(usize, u64)> = {
        let zipf = ScrambledZipfian::new(records);
        let mut rng = Rng::new(y.seed ^ 0x7963_7362);
        (0..y.ops)
            .map(|_| {
                let kind = if rng.below(100) < read_pct {
                    READ
                } else {
                    WRITE
                };
                let k = if y.uniform {
                    rng.below(records)
                } else {
                    zipf.next(&mut rng)
                };
                (kind, k)
            })
            .collect()
    };
    let keys: Vec<Vec<u8>> = plan.iter().map(|&(_, k)| key(k)).collect();
    let limit = Duration::from_secs_f64(y.secs);
    let (m, by_kind) = drive_kinds(y.threads, y.ops, limit, 2, |i| {
        let (kind, k) = plan[i as usize];
        let key = &keys[i as usize];
        if kind == READ || rmw {
            let v = e.get(key)?.ok_or("missing key")?;
            if v.len() as u64 != size {
                return Err(format!("wrong value length for key {k}").into());
            }
        }
        if kind == WRITE {
            // A new value each time (values are cut from the pool at a per-op offset).
            e.put(key, pool.value(records + i))?;
        }
        Ok((size, kind))
    })?;
    e.sync()?;
    let mut fields = m.fields();
    let write_name = if rmw { "rmw" } else { "update" };
    for (kind, name) in [(READ, "read"), (WRITE, write_name)] {
        kind_fields(&mut fields, name, &by_kind[kind], &[50.0, 99.0]);
    }
    Ok(fields)
}
