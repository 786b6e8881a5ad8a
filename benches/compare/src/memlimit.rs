//! The `memlimit` workload: YCSB on a data set several times larger than memory, each engine
//! loaded and run inside a memory cgroup whose limit counts the page cache ([`crate::cgroup`]).
//!
//! `compare run --workload memlimit --engine E` supervises, from outside the cgroup: it makes
//! the cgroup, then runs each phase in a child process (`compare memlimit-phase`) that moves
//! itself into the cgroup before it opens the engine: first the load (every record, in batches
//! of up to 10 000 puts: one write transaction each for LMDB and redb), then each YCSB run
//! phase in a fresh process (the engine's own caches empty, the page cache as the earlier
//! phases left it, charged to the cgroup). Around each child it reads the cgroup's peak memory
//! and OOM kills, and notes a child killed by SIGKILL; then it removes the cgroup. Every
//! engine's own cache is capped at half the limit (`--cache-cap`): a larger default (redb's
//! 1 GiB) is lowered to it, a smaller one (fjall's 32 MiB, podstore's) kept.
//!
//! `--engine device` measures the floor instead: fio, 4 KiB random O_DIRECT reads by as many
//! jobs as the phases have threads, on a file as large as the data set, on the same file
//! system (skipped, with the reason in the line, where fio is not installed).

use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Args;
use crate::cgroup::{self, Cgroup};
use crate::engines::{self, OpenSpec, Res};
use crate::sys;
use crate::values::ValuePool;
use crate::workloads::{load, padded};
use crate::ycsb::{Ycsb, ycsb_phase};

/// The pseudo-engine of the device's floor (fio).
pub const DEVICE: &str = "device";

/// The run phases, in the order they run: the read-only ones first, so that what they read is
/// what was loaded.
pub const PHASES: &[&str] = &["c", "c-uniform", "b", "a", "f"];

/// A phase's name as the report shows it.
pub fn phase_label(phase: &str) -> String {
    match phase.split_once('-') {
        Some((mix, dist)) => format!("{} {dist}", mix.to_ascii_uppercase()),
        None => format!("{} zipfian", phase.to_ascii_uppercase()),
    }
}

/// The parameters of a memlimit run, from `compare run`'s or `compare memlimit-phase`'s
/// arguments.
struct Spec {
    limit: u64,
    records: u64,
    size: u64,
    ops: u64,
    threads: usize,
    secs: f64,
    load_threads: usize,
    cache_cap: u64,
    seed: u64,
    /// `--warm-cache 0|1`: podstore's warm restart in the phases (`None`: its default, on).
    warm: Option<bool>,
}

impl Spec {
    fn from(args: &Args) -> Res<Spec> {
        let limit = args.size("mem-limit", 1 << 30)?;
        Ok(Spec {
            limit,
            records: args.num("records", 4 << 20)?.max(1),
            size: args.size("size", 1024)?,
            ops: args.num("ops", 400_000)?,
            threads: args.num("threads", 8)?.max(1) as usize,
            secs: args.secs("secs", 120.0)?,
            load_threads: args.num("load-threads", 16)?.max(1) as usize,
            cache_cap: args.size("cache-cap", limit / 2)?,
            seed: args.num("seed", 1)?,
            warm: match args.str("warm-cache") {
                None => None,
                Some("0") => Some(false),
                Some("1") => Some(true),
                Some(v) => return Err(format!("--warm-cache {v}: 0 or 1").into()),
            },
        })
    }

    /// The child's arguments besides its engine, directory, phase and cgroup.
    fn args(&self) -> Vec<String> {
        [
            ("mem-limit", self.limit.to_string()),
            ("records", self.records.to_string()),
            ("size", self.size.to_string()),
            ("ops", self.ops.to_string()),
            ("threads", self.threads.to_string()),
            ("secs", self.secs.to_string()),
            ("load-threads", self.load_threads.to_string()),
            ("cache-cap", self.cache_cap.to_string()),
            ("seed", self.seed.to_string()),
            ("key-len", crate::values::key(0).len().to_string()),
        ]
        .into_iter()
        .chain(
            self.warm
                .map(|w| ("warm-cache", if w { "1" } else { "0" }.to_string())),
        )
        .flat_map(|(k, v)| [format!("--{k}"), v])
        .collect()
    }

    /// The harness's own buffer of value bytes: 1/32 of the limit (at most 64 MiB), so that
    /// what the harness holds is a small part of what the engine is allowed.
    fn span(&self) -> usize {
        (self.limit / 32).clamp(1 << 20, 64 << 20) as usize
    }
}

/// `compare run --workload memlimit`: returns the run's params and fields.
pub fn run(args: &Args, engine: &str, dir: &Path) -> Res<(Value, Value)> {
    if engine == DEVICE {
        return device(args, dir);
    }
    let s = Spec::from(args)?;
    let phases: Vec<String> = match args.str("phases") {
        Some(list) => list.split(',').map(str::to_string).collect(),
        None => PHASES.iter().map(|p| p.to_string()).collect(),
    };
    if let Some(bad) = phases.iter().find(|p| !PHASES.contains(&p.as_str())) {
        return Err(format!(
            "--phases: unknown phase {bad:?} (known: {})",
            PHASES.join(",")
        )
        .into());
    }
    let load_timeout = args.secs("load-timeout", 3600.0)?;
    let mut params = json!({
        "mem-limit": s.limit, "records": s.records, "size": s.size, "ops": s.ops,
        "threads": s.threads, "secs_limit": s.secs, "load_threads": s.load_threads,
        "cache_cap": s.cache_cap, "phases": phases.join(","),
        "data_bytes": s.records * (crate::values::key(0).len() as u64 + s.size),
    });
    if let Some(why) = cgroup::unavailable() {
        eprintln!("compare: memlimit skipped: {why}");
        return Ok((params, json!({"skipped": why})));
    }
    let cg = Cgroup::create(s.limit)?;
    params["cgroup"] = json!(cg.version().name());
    params["limit_set"] = json!(cg.limit());
    params["cgroup_path"] = json!(cg.path().display().to_string());
    let exe = std::env::current_exe()?;
    let child = |phase: &str, timeout: f64| -> Value {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "memlimit-phase",
            "--engine",
            engine,
            "--phase",
            phase,
            "--path",
        ])
        .arg(dir)
        .arg("--procs")
        .arg(cg.procs_file())
        .args(s.args());
        let mut peak = cg.watch_peak();
        let oom0 = cg.oom_kills();
        let t = Instant::now();
        let (status, out, err) = match run_child(cmd, Duration::from_secs_f64(timeout)) {
            Ok(x) => x,
            Err(e) => return json!({"error": e}),
        };
        let mut row = out
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .and_then(|l| serde_json::from_str::<Value>(l).ok())
            .unwrap_or_else(|| json!({}));
        row["wall_secs"] = json!(t.elapsed().as_secs_f64());
        row["peak_bytes"] = json!(peak.peak());
        row["peak_since_cgroup_made"] = json!(peak.since_creation);
        row["oom_kills"] = json!(match (oom0, cg.oom_kills()) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        });
        row["usage_after_bytes"] = json!(cg.usage());
        use std::os::unix::process::ExitStatusExt;
        match status {
            None => row["error"] = json!(format!("timed out after {timeout:.0} s, killed")),
            Some(st) if st.signal() == Some(9) => {
                row["killed"] = json!(true);
                row["error"] = json!("killed by SIGKILL (the OOM killer, see oom_kills)");
            }
            Some(st) if !st.success() => {
                let tail: String = err
                    .trim()
                    .lines()
                    .last()
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect();
                row["error"] = json!(format!("exit {st}: {tail}"));
            }
            Some(_) => {}
        }
        if row.get("killed").is_none() {
            row["killed"] = json!(false);
        }
        row
    };
    let load = child("load", load_timeout);
    let loaded = load.get("error").is_none();
    let mut by_phase = serde_json::Map::new();
    for p in &phases {
        let row = if loaded {
            child(p, s.secs + 600.0)
        } else {
            json!({"error": "not run: the load did not finish"})
        };
        eprintln!("compare: memlimit {engine} {p}: {}", summary(&row));
        by_phase.insert(p.clone(), row);
    }
    let store_bytes = sys::dir_bytes(dir);
    let oom_total = cg.oom_kills();
    // A cgroup that cannot be removed (a process still in it) is reported, not fatal: the
    // phases' figures stand.
    if let Err(e) = cg.remove() {
        eprintln!("compare: {e}");
    }
    let fields = json!({
        "load": load,
        "phases": by_phase,
        "store_bytes": store_bytes,
        "oom_kills": oom_total,
    });
    Ok((params, fields))
}

/// One line about a phase, for the log.
pub fn summary(row: &Value) -> String {
    let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
    if let Some(e) = row["error"].as_str() {
        return format!("FAILED: {e}");
    }
    format!(
        "{:.0} ops/s, p99 {:.0} µs, {:.0} B read/op, peak {:.0} MiB",
        f("ops_per_sec"),
        f("p99_us"),
        f("disk_read_bytes_per_op"),
        f("peak_bytes") / (1u64 << 20) as f64
    )
}

/// Runs `cmd` to its end or until `timeout` (then kills it). Returns its status (`None`: timed
/// out), stdout and stderr.
fn run_child(
    mut cmd: Command,
    timeout: Duration,
) -> Result<(Option<ExitStatus>, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut so = child.stdout.take().expect("stdout");
    let mut se = child.stderr.take().expect("stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    let t = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if t.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    Ok((
        status,
        out_t.join().unwrap_or_default(),
        err_t.join().unwrap_or_default(),
    ))
}

/// `compare memlimit-phase`: one phase, in the cgroup.
pub fn phase(args: &Args) -> Result<String, String> {
    phase_inner(args).map_err(|e| e.to_string())
}

fn phase_inner(args: &Args) -> Res<String> {
    // Into the cgroup first: everything the engine and this process touch from now on is
    // charged to it. Die with the supervisor rather than run on unsupervised.
    if let Some(procs) = args.str("procs") {
        cgroup::enter(Path::new(procs))?;
    }
    rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
    let engine = args.need("engine")?;
    let dir = Path::new(args.need("path")?);
    let phase = args.need("phase")?;
    let s = Spec::from(args)?;
    let pacer = args
        .str("procs")
        .and_then(|p| Path::new(p).parent())
        .map(|cg| Pacer::start(cg, dir, s.limit / 8));
    let pool = ValuePool::with_span(s.size as usize, s.seed, s.span());
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: false,
        capacity: (s.records + s.ops) * padded(s.size),
        cache_cap: Some(s.cache_cap),
        // `--warm-cache 0`: podstore's phases open without the warm restart (an experiment;
        // the suite keeps the default, on).
        cold: s.warm == Some(false),
    };
    let io0 = sys::io_counters();
    let t = Instant::now();
    let e = engines::open(engine, &spec)?;
    let open_secs = t.elapsed().as_secs_f64();
    let mut fields = if phase == "load" {
        let secs = load(e.as_ref(), &pool, s.records, s.load_threads)?;
        let io = sys::io_counters().since(io0);
        json!({"load_secs": secs, "ops": s.records, "ops_per_sec": s.records as f64 / secs,
               "disk_write_bytes": io.write_bytes, "disk_read_bytes": io.read_bytes})
    } else {
        let (mix, uniform) = match phase.split_once('-') {
            Some((m, "uniform")) => (m, true),
            None => (phase, false),
            Some(_) => return Err(format!("unknown phase {phase:?}").into()),
        };
        let y = Ycsb {
            mix: mix.to_string(),
            uniform,
            size: s.size,
            records: s.records,
            ops: s.ops,
            threads: s.threads,
            secs: s.secs,
            // The same plan for every engine, a different one for every phase.
            seed: s.seed ^ PHASES.iter().position(|p| *p == phase).unwrap_or(0) as u64,
        };
        ycsb_phase(e.as_ref(), &pool, &y)?
    };
    e.close()?;
    if let Some(p) = pacer {
        fields["writeback_syncs"] = json!(p.stop());
    }
    fields["open_secs"] = json!(open_secs);
    fields["rss_peak_bytes"] = json!(sys::rss_peak_bytes());
    Ok(fields.to_string())
}

/// Starts the writeback of a cgroup's dirty page cache when the kernel would not: cgroup v1
/// does not throttle or write back a cgroup's dirty pages as it nears its limit (per-cgroup
/// writeback is v2's), so a buffered writer filled a 1 GiB cgroup with dirty pages that reclaim
/// could not free and was OOM-killed (fjall's load, with its memtables bounded). Every 50 ms,
/// when the cgroup holds more than `threshold` dirty bytes, every file under the engine's
/// directory is `fdatasync`ed, from this thread (the engine's threads go on). An engine that
/// writes with O_DIRECT never dirties a page, so it is never synced.
struct Pacer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Pacer {
    fn start(cgroup: &Path, dir: &Path, threshold: u64) -> Pacer {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (cg, dir, flag) = (cgroup.to_path_buf(), dir.to_path_buf(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut syncs = 0;
            while !flag.load(Ordering::Relaxed) {
                if cgroup::dirty_bytes(&cg).is_some_and(|d| d > threshold) {
                    sync_tree(&dir);
                    syncs += 1;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            syncs
        });
        Pacer { stop, thread }
    }

    /// Stops the thread; returns how many times it synced.
    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// `fdatasync` of every regular file under `dir` (errors ignored: a file may be deleted
/// meanwhile).
fn sync_tree(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => sync_tree(&e.path()),
            Ok(t) if t.is_file() => {
                if let Ok(f) = std::fs::File::open(e.path()) {
                    let _ = f.sync_data();
                }
            }
            _ => {}
        }
    }
}

/// The device's floor: fio, 4 KiB random O_DIRECT reads by `--threads` jobs on a file of
/// `--file-size` bytes (laid out first with large direct writes, untimed), for `--secs`.
fn device(args: &Args, dir: &Path) -> Res<(Value, Value)> {
    let threads = args.num("threads", 8)?.max(1);
    let file_size = args.size("file-size", 4 << 30)?;
    let secs = args.num("secs", 20)?.max(1);
    let params = json!({"threads": threads, "file-size": file_size, "secs_limit": secs,
                        "block": 4096});
    let version = match Command::new("fio").arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        _ => {
            let why = "fio is not installed (`apt-get install -y fio`): no device floor";
            eprintln!("compare: {why}");
            return Ok((params, json!({"skipped": why})));
        }
    };
    let file = dir.join("fio-floor");
    let common = [
        format!("--filename={}", file.display()),
        format!("--size={file_size}"),
        "--direct=1".into(),
        "--ioengine=psync".into(),
        "--output-format=json".into(),
    ];
    let layout = Command::new("fio")
        .args(["--name=layout", "--rw=write", "--bs=1M", "--end_fsync=1"])
        .args(&common)
        .output()?;
    if !layout.status.success() {
        return Err(format!(
            "fio layout: {}",
            String::from_utf8_lossy(&layout.stderr).trim()
        )
        .into());
    }
    let out = Command::new("fio")
        .args([
            "--name=randread",
            "--rw=randread",
            "--bs=4k",
            "--time_based",
            "--group_reporting",
        ])
        .arg(format!("--numjobs={threads}"))
        .arg(format!("--runtime={secs}"))
        .args(&common)
        .output()?;
    if !out.status.success() {
        return Err(format!("fio: {}", String::from_utf8_lossy(&out.stderr).trim()).into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let json_at = text.find('{').ok_or("fio printed no JSON")?;
    let v: Value = serde_json::from_str(&text[json_at..])?;
    let read = &v["jobs"][0]["read"];
    let iops = read["iops"].as_f64().ok_or("fio's JSON has no read iops")?;
    let pct = |p: &str| read["clat_ns"]["percentile"][p].as_f64().map(|ns| ns / 1e3);
    let _ = std::fs::remove_file(&file);
    Ok((
        params,
        json!({"fio": version, "ops_per_sec": iops, "p50_us": pct("50.000000"),
               "p99_us": pct("99.000000"), "disk_read_bytes_per_op": 4096,
               "ops": read["total_ios"], "seconds": secs}),
    ))
}
