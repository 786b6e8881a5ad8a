//! The `ycsb` workload: YCSB's core workloads A, B, C and F on one engine, and the run phase
//! that the `memlimit` workload reuses ([`ycsb_phase`]).

use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Args;
use crate::engines::{Engine, OpenSpec, Res};
use crate::values::{Rng, ScrambledZipfian, ValuePool, key};
use crate::workloads::{drive_kinds, kind_fields, open_loaded, padded};

/// The YCSB core workloads A, B, C and F (`--mix a|b|c|f`), in YCSB's shape: `--records`
/// values of `--size` bytes are loaded (bulk, then synced), the engine is closed, and a fresh
/// process (`compare ycsb-phase`, [`phase_child`]) opens it again (its own caches and heap
/// empty, the page cache as the load left it, as YCSB's run phase is run) and runs `--ops`
/// operations on `--threads` threads (see [`ycsb_phase`]), on records chosen by YCSB's
/// scrambled zipfian distribution (θ = 0.99), or uniformly with `--distribution uniform`.
pub fn ycsb(
    args: &Args,
    engine: &str,
    dir: &Path,
    seed: u64,
    load_threads: usize,
) -> Res<(Value, Value)> {
    let y = Ycsb::from_args(args, seed)?;
    let pool = ValuePool::new(y.size as usize, seed);
    let (e, _, load_secs) = open_loaded(
        engine,
        dir,
        &pool,
        y.records,
        y.records + y.ops,
        load_threads,
    )?;
    e.close()?;
    // The run phase in a process of its own: what the engine keeps in its own memory (a read
    // cache, a warm-up's work, the allocator's free lists) does not outlive the load's process,
    // as it would across a close and open in one.
    let mut cmd = std::process::Command::new(std::env::current_exe()?);
    cmd.args(["ycsb-phase", "--engine", engine, "--path"])
        .arg(dir);
    for (k, v) in &args.map {
        if !["engine", "workload", "dir", "path"].contains(&k.as_str()) {
            cmd.arg(format!("--{k}")).arg(v);
        }
    }
    let out = cmd.stderr(std::process::Stdio::inherit()).output()?;
    if !out.status.success() {
        return Err(format!("ycsb-phase failed ({})", out.status).into());
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let line = line.lines().rev().find(|l| l.trim_start().starts_with('{'));
    let mut fields: Value = serde_json::from_str(line.ok_or("ycsb-phase printed no line")?)?;
    let params = json!({"mix": y.mix, "size": y.size, "threads": y.threads,
                        "records": y.records, "max_ops": y.ops, "secs_limit": y.secs,
                        "durable": false, "distribution": y.distribution(),
                        "run_process": "fresh"});
    fields["load_secs"] = json!(load_secs);
    Ok((params, fields))
}

/// `compare ycsb-phase`: the child half of `ycsb`, the run phase in a fresh process on the
/// engine loaded at `--path` (the same arguments as the parent's `run`). Prints the phase's
/// fields and `open_secs` as one JSON line.
pub fn phase_child(args: &Args) -> Result<String, String> {
    phase_inner(args).map_err(|e| e.to_string())
}

fn phase_inner(args: &Args) -> Res<String> {
    // Die with the parent rather than run on, unmeasured.
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    let engine = args.need("engine")?;
    if engine.starts_with("podstore") {
        for (flag, _, cell) in crate::engines::podstore::TUNING {
            if let Some(size) = args.str(flag) {
                let _ = cell.set(crate::sys::parse_size(size)?);
            }
        }
    }
    let seed = args.num("seed", 1)?;
    let y = Ycsb::from_args(args, seed)?;
    let pool = ValuePool::new(y.size as usize, seed);
    let spec = OpenSpec {
        dir: Path::new(args.need("path")?).to_path_buf(),
        durable: false,
        capacity: (y.records + y.ops) * padded(y.size),
        cache_cap: None,
        cold: false,
    };
    // Drawn before the open: the run's first operation follows the open at once, as in a
    // service restarted under load, so a warm-up the open starts gets no untimed head start.
    let plan = Plan::draw(&y)?;
    let t = Instant::now();
    let _ = log::set_logger(&WARM_END).map(|()| log::set_max_level(log::LevelFilter::Info));
    let _ = OPENED.set(t);
    let e = crate::engines::open(engine, &spec)?;
    let open_secs = t.elapsed().as_secs_f64();
    let mut fields = run_plan(e.as_ref(), &pool, &y, &plan)?;
    let run_to = t.elapsed().as_secs_f64();
    if let Some(f) = e.figures() {
        fields["engine_figures"] = f;
    }
    e.close()?;
    fields["open_secs"] = json!(open_secs);
    // When the run phase ended (it began at `open_secs`), and when podstore's warm-up ended
    // (its log line: the store, or as much as its cache holds, in memory), in seconds since
    // the open began: how the warm-up and the run overlapped.
    fields["run_to_secs"] = json!(run_to);
    fields["warm_end_secs"] = json!(WARM_END.0.get());
    Ok(fields.to_string())
}

/// When the open of the run phase began.
static OPENED: OnceLock<Instant> = OnceLock::new();

/// The run phase's logger: keeps when podstore's warm-up logged its end (seconds since
/// [`OPENED`]); prints nothing.
static WARM_END: WarmEnd = WarmEnd(OnceLock::new());

struct WarmEnd(OnceLock<f64>);

impl log::Log for WarmEnd {
    fn enabled(&self, m: &log::Metadata) -> bool {
        m.target().starts_with("podstore")
    }

    fn log(&self, r: &log::Record) {
        if self.enabled(r.metadata()) && std::env::var_os("COMPARE_LOG").is_some() {
            eprintln!("{:?} {}", OPENED.get().map(Instant::elapsed), r.args());
        }
        if self.enabled(r.metadata())
            && let Some(t) = OPENED.get()
            && r.args().to_string().starts_with("podstore: warm-up of ")
        {
            let _ = self.0.set(t.elapsed().as_secs_f64());
        }
    }

    fn flush(&self) {}
}

impl Ycsb {
    /// The run phase's parameters from `compare run`'s (or `ycsb-phase`'s) arguments.
    fn from_args(args: &Args, seed: u64) -> Res<Ycsb> {
        Ok(Ycsb {
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
        })
    }
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
/// p50/p99 (also per kind of operation), disk bytes per operation. The plan is drawn here, after
/// the engine was opened (the memlimit mode); [`run_plan`] runs one drawn before.
pub fn ycsb_phase(e: &dyn Engine, pool: &ValuePool, y: &Ycsb) -> Res<Value> {
    run_plan(e, pool, y, &Plan::draw(y)?)
}

/// The operations of a run phase, drawn before the clock starts: the key chooser's cost is
/// not the engine's.
pub struct Plan {
    ops: Vec<(usize, u64)>,
    keys: Vec<Vec<u8>>,
    rmw: bool,
}

const READ: usize = 0;
const WRITE: usize = 1;

impl Plan {
    /// `y.ops` operations of `y.mix` on records drawn as `y` says.
    pub fn draw(y: &Ycsb) -> Res<Plan> {
        let (read_pct, rmw) = match y.mix.as_str() {
            "a" => (50, false),
            "b" => (95, false),
            "c" => (100, false),
            "f" => (50, true),
            other => return Err(format!("--mix {other:?}: a, b, c or f").into()),
        };
        let records = y.records;
        let zipf = ScrambledZipfian::new(records);
        let mut rng = Rng::new(y.seed ^ 0x7963_7362);
        let ops: Vec<(usize, u64)> = (0..y.ops)
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
            .collect();
        let keys = ops.iter().map(|&(_, k)| key(k)).collect();
        Ok(Plan { ops, keys, rmw })
    }
}

/// [`ycsb_phase`] with the operations of `plan`.
pub fn run_plan(e: &dyn Engine, pool: &ValuePool, y: &Ycsb, plan: &Plan) -> Res<Value> {
    let (records, size, rmw) = (y.records, y.size, plan.rmw);
    let (plan, keys) = (&plan.ops, &plan.keys);
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
