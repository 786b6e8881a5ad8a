//! The markdown report (and its charts) of a suite, shared by `compare suite`, which renders it
//! from the runs it just made, and `compare report`, which renders it from the `.jsonl` a suite
//! saved.
//!
//! A suite's `.jsonl` holds, one JSON object a line:
//!
//! - `{"suite": {...}}` first: the command, start time, machine, build, engine settings, engines,
//!   workloads and [`Scale`] (see [`header_record`]);
//! - every run's line as `compare run` printed it, plus `"rep"`;
//! - `{"failure": {...}}` for every run that failed (workload, engine, label, rep, error);
//! - `{"suite_end": {"wall_secs": ..., "loadavg_end": ...}}` when the suite finished.
//!
//! Files written before the header existed hold run lines only; `compare report` still reads
//! them, infers the scale from the runs ([`infer_scale`]) and says in the report what it could
//! not know.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::Args;
use crate::charts;
use crate::engines;
use crate::suite::{Config, Scale, WORKLOADS, infer_scale, matrix, scale, short};
use crate::sys::{self, Machine, MountInfo, fmt_size};

/// What a suite records about itself besides its runs.
pub struct Meta {
    /// The suite's command line (`None`: not recorded).
    pub command: Option<Vec<String>>,
    pub started: Option<String>,
    /// The load averages (1, 5, 15 min) when the suite started (`None`: not recorded).
    pub load_start: Option<String>,
    pub quick: bool,
    pub base: String,
    pub mount: MountInfo,
    pub machine: Machine,
    /// podstore's commit (`None`: not recorded).
    pub podstore: Option<String>,
    pub rustc: String,
    pub crates: String,
    /// Every engine's settings text, as the build that ran it had it.
    pub settings: BTreeMap<String, String>,
    pub podstore_defaults: String,
    /// Engines asked for but not compiled in.
    pub not_built: Vec<String>,
}

impl Meta {
    /// The facts of a suite starting now in this process.
    pub fn of_this_run(
        argv: &[String],
        quick: bool,
        base: &Path,
        mount: MountInfo,
        not_built: &[&str],
    ) -> Meta {
        let mut m = Meta::of_this_machine(quick, base, mount);
        m.command = Some(argv.to_vec());
        m.started = Some(sys::utc_now());
        m.load_start = Some(sys::loadavg());
        m.podstore = Some(podstore_version());
        m.not_built = not_built.iter().map(|s| s.to_string()).collect();
        m
    }

    /// What this machine and build can tell, for a `.jsonl` that does not say.
    fn of_this_machine(quick: bool, base: &Path, mount: MountInfo) -> Meta {
        Meta {
            command: None,
            started: None,
            load_start: None,
            quick,
            base: base.display().to_string(),
            mount,
            machine: sys::machine(),
            podstore: None,
            rustc: rustc_version(),
            crates: crate_versions(),
            settings: engines::ALL
                .iter()
                .map(|e| (e.to_string(), engines::settings(e).to_string()))
                .collect(),
            podstore_defaults: engines::podstore_defaults(),
            not_built: Vec::new(),
        }
    }

    fn settings(&self, engine: &str) -> &str {
        self.settings.get(engine).map_or("unknown", String::as_str)
    }
}

/// Where the figures of a report come from.
pub enum Source {
    /// The suite that just ran.
    Live,
    /// A saved `.jsonl`, read by `compare report`.
    Saved {
        /// The `compare report` command line and when it ran.
        command: Vec<String>,
        at: String,
        /// The file has no suite header (written before there was one): the scale was
        /// inferred, and the machine rows describe the machine that rebuilt the report.
        legacy: bool,
        /// The file has a header but no end record: the suite did not finish.
        unfinished: bool,
        /// Run lines that matched no configuration of the suite, left out.
        unmatched: usize,
    },
}

/// A suite's configurations and results: all a report is made from.
pub struct SuiteRun {
    pub meta: Meta,
    pub sc: Scale,
    pub engines_run: Vec<&'static str>,
    pub workloads: Vec<&'static str>,
    pub configs: Vec<Config>,
    /// The JSON lines of every configuration's successful runs.
    pub results: Vec<Vec<Value>>,
    /// (configuration, repetition, error).
    pub failures: Vec<(usize, usize, String)>,
    /// The suite's wall time (`None`: not recorded).
    pub wall: Option<f64>,
    /// The load averages when the suite ended (`None`: not recorded).
    pub load_end: Option<String>,
    /// The `.jsonl` holding every run's line.
    pub jsonl: PathBuf,
    pub source: Source,
}

impl SuiteRun {
    fn legacy(&self) -> bool {
        matches!(self.source, Source::Saved { legacy: true, .. })
    }

    /// The engines of `self.engines_run` that take part in `workload`.
    pub fn engines_in(&self, workload: &str) -> Vec<&'static str> {
        self.engines_run
            .iter()
            .copied()
            .filter(|e| engines::skip_reason(e, workload).is_none())
            .collect()
    }
}

fn mount_json(m: &MountInfo) -> Value {
    json!({"mount_point": m.mount_point, "fstype": m.fstype, "source": m.source,
           "options": m.options})
}

fn mount_from(v: &Value) -> MountInfo {
    let s = |k: &str| v[k].as_str().unwrap_or("unknown").to_string();
    MountInfo {
        mount_point: s("mount_point"),
        fstype: s("fstype"),
        source: s("source"),
        options: s("options"),
    }
}

/// The `.jsonl`'s first line: `{"suite": {...}}`.
pub fn header_record(run: &SuiteRun) -> Value {
    let m = &run.meta;
    let settings: serde_json::Map<String, Value> = run
        .engines_run
        .iter()
        .map(|&e| (e.to_string(), m.settings(e).into()))
        .collect();
    json!({"suite": {
        "format": 1,
        "command": m.command,
        "started": m.started,
        "loadavg_start": m.load_start,
        "quick": m.quick,
        "base": m.base,
        "mount": mount_json(&m.mount),
        "machine": {"nproc": m.machine.nproc, "mem_total": m.machine.mem_total,
                    "cpu": m.machine.cpu, "kernel": m.machine.kernel},
        "podstore": m.podstore,
        "rustc": m.rustc,
        "crates": m.crates,
        "engines": run.engines_run,
        "not_built": m.not_built,
        "workloads": run.workloads,
        "engine_settings": settings,
        "podstore_defaults": m.podstore_defaults,
        "scale": run.sc.to_json(),
    }})
}

/// A failed run's line: `{"failure": {...}}`.
pub fn failure_record(c: &Config, rep: usize, error: &str) -> Value {
    let params: serde_json::Map<String, Value> = c
        .params
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone().into()))
        .collect();
    json!({"failure": {"workload": c.workload, "engine": c.engine, "label": c.label,
                       "params": params, "rep": rep, "error": error}})
}

/// The `.jsonl`'s last line: `{"suite_end": {...}}`.
pub fn end_record(wall: f64, load_end: Option<&str>) -> Value {
    json!({"suite_end": {"wall_secs": wall, "loadavg_end": load_end}})
}

/// `name` as one of `known`'s `&'static str`s; a name this build does not know (a saved file
/// from another version) is leaked once, which a one-shot command can afford.
fn intern(name: &str, known: &[&'static str]) -> &'static str {
    known
        .iter()
        .copied()
        .find(|k| *k == name)
        .unwrap_or_else(|| Box::leak(name.to_string().into_boxed_str()))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads a suite's `.jsonl` back into a [`SuiteRun`].
pub fn load(path: &Path, command: &[String]) -> Result<SuiteRun, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut header: Option<Value> = None;
    let mut runs: Vec<Value> = Vec::new();
    let mut failed: Vec<Value> = Vec::new();
    let mut wall = None;
    let mut load_end = None;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "compare report: {}:{}: not JSON ({e}), skipped",
                    path.display(),
                    i + 1
                );
                continue;
            }
        };
        if v["suite"].is_object() {
            if header.is_some() {
                return Err(format!(
                    "{}:{}: a second suite header: one suite per file",
                    path.display(),
                    i + 1
                ));
            }
            header = Some(v["suite"].clone());
        } else if v["failure"].is_object() {
            failed.push(v["failure"].clone());
        } else if let Some(w) = v["suite_end"]["wall_secs"].as_f64() {
            wall = Some(w);
            load_end = v["suite_end"]["loadavg_end"].as_str().map(str::to_string);
        } else if v["workload"].is_string() && v["engine"].is_string() {
            runs.push(v);
        } else {
            eprintln!(
                "compare report: {}:{}: neither a run nor a suite record, skipped",
                path.display(),
                i + 1
            );
        }
    }
    if header.is_none() && runs.is_empty() {
        return Err(format!("{}: no runs", path.display()));
    }
    let base_of_runs = runs
        .iter()
        .find_map(|r| r["dir"].as_str())
        .unwrap_or("/tmp")
        .to_string();
    // First appearance order is matrix order: engines, then workloads.
    let first_seen = |key: &str, known: &[&'static str]| {
        let mut out: Vec<&'static str> = Vec::new();
        for r in &runs {
            let n = intern(r[key].as_str().unwrap_or_default(), known);
            if !out.contains(&n) {
                out.push(n);
            }
        }
        out
    };
    let legacy = header.is_none();
    let (meta, sc, engines_run, workloads) = match &header {
        Some(h) => {
            let quick = h["quick"].as_bool().unwrap_or(false);
            let mut sc = scale(quick);
            sc.update_from_json(&h["scale"]);
            let base = h["base"].as_str().unwrap_or(&base_of_runs).to_string();
            let s = |k: &str| h[k].as_str().unwrap_or("unknown").to_string();
            let machine = &h["machine"];
            let meta = Meta {
                command: h["command"].is_array().then(|| strings(&h["command"])),
                started: h["started"].as_str().map(str::to_string),
                load_start: h["loadavg_start"].as_str().map(str::to_string),
                quick,
                base,
                mount: mount_from(&h["mount"]),
                machine: Machine {
                    nproc: machine["nproc"].as_u64().unwrap_or(0) as usize,
                    mem_total: machine["mem_total"].as_str().unwrap_or("unknown").into(),
                    cpu: machine["cpu"].as_str().unwrap_or("unknown").into(),
                    kernel: machine["kernel"].as_str().unwrap_or("unknown").into(),
                },
                podstore: h["podstore"].as_str().map(str::to_string),
                rustc: s("rustc"),
                crates: s("crates"),
                settings: h["engine_settings"]
                    .as_object()
                    .map(|o| {
                        o.iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("unknown").into()))
                            .collect()
                    })
                    .unwrap_or_default(),
                podstore_defaults: s("podstore_defaults"),
                not_built: strings(&h["not_built"]),
            };
            let engines_run = strings(&h["engines"])
                .iter()
                .map(|e| intern(e, engines::ALL))
                .collect();
            let workloads = strings(&h["workloads"])
                .iter()
                .map(|w| intern(w, WORKLOADS))
                .collect();
            (meta, sc, engines_run, workloads)
        }
        None => {
            let refs: Vec<&Value> = runs.iter().collect();
            let (sc, quick) = infer_scale(&refs);
            let base = PathBuf::from(&base_of_runs);
            let meta = Meta::of_this_machine(quick, &base, sys::mount_of(&base));
            (
                meta,
                sc,
                first_seen("engine", engines::ALL),
                first_seen("workload", WORKLOADS),
            )
        }
    };
    let configs = matrix(&sc, &engines_run, &workloads);
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); configs.len()];
    let mut unmatched = 0;
    for r in runs {
        match configs.iter().position(|c| c.matches(&r)) {
            Some(ci) => results[ci].push(r),
            None => unmatched += 1,
        }
    }
    if unmatched > 0 {
        eprintln!(
            "compare report: {unmatched} run line(s) of {} match no configuration of the suite \
             and are left out",
            path.display()
        );
    }
    let mut failures: Vec<(usize, usize, String)> = Vec::new();
    for f in &failed {
        let ci = configs.iter().position(|c| {
            f["workload"] == c.workload
                && f["engine"] == c.engine
                && strings(&f["label"]) == c.label
        });
        if let (Some(ci), Some(rep)) = (ci, f["rep"].as_u64()) {
            failures.push((ci, rep as usize, f["error"].as_str().unwrap_or("").into()));
        }
    }
    // Runs neither in the file nor recorded as failed.
    let unfinished = !legacy && wall.is_none();
    for (ci, res) in results.iter().enumerate() {
        for rep in 0..crate::suite::reps_for(&sc, &configs[ci]) {
            let present = res.iter().any(|r| r["rep"].as_u64() == Some(rep as u64))
                || failures.iter().any(|&(c, r, _)| c == ci && r == rep);
            if !present {
                let why = if legacy {
                    "no line in the .jsonl: the run failed or did not run (the file predates \
                     failure records)"
                } else if unfinished {
                    "no line in the .jsonl: the suite stopped before this run"
                } else {
                    "no line in the .jsonl, and no failure record"
                };
                failures.push((ci, rep, why.into()));
            }
        }
    }
    failures.sort_by_key(|&(ci, rep, _)| (rep, ci));
    Ok(SuiteRun {
        meta,
        sc,
        engines_run,
        workloads,
        configs,
        results,
        failures,
        wall,
        load_end,
        jsonl: path.to_path_buf(),
        source: Source::Saved {
            command: command.to_vec(),
            at: sys::utc_now(),
            legacy,
            unfinished,
            unmatched,
        },
    })
}

/// `compare report --from FILE.jsonl [--out FILE.md] [--charts-dir DIR]`.
pub fn report(args: &Args, argv: &[String]) -> Result<(), String> {
    let from = PathBuf::from(args.need("from")?);
    let run = load(&from, argv)?;
    let out = match args.str("out") {
        Some(o) => PathBuf::from(o),
        None => {
            let o = from.with_extension("md");
            if run.legacy() && o.exists() {
                return Err(format!(
                    "{} exists and {} has no suite header (so a rebuilt report would lack its \
                     command, times and failure messages): pass --out",
                    o.display(),
                    from.display()
                ));
            }
            o
        }
    };
    let charts = write_report(&run, &out, args.str("charts-dir").map(Path::new))?;
    let runs: usize = run.results.iter().map(Vec::len).sum();
    eprintln!(
        "compare report: {runs} runs from {}; report in {}{}",
        from.display(),
        out.display(),
        charts_note(&charts)
    );
    Ok(())
}

/// Writes the charts into `charts_dir` (default: [`default_charts_dir`]) and the markdown
/// report, which links them by relative paths, to `out`. Returns where the charts went, if the
/// suite has any (put and get have).
pub fn write_report(
    run: &SuiteRun,
    out: &Path,
    charts_dir: Option<&Path>,
) -> Result<Option<PathBuf>, String> {
    let cwd = std::env::current_dir().map_err(|e| e.to_string())?;
    let out_abs = normalize(&cwd.join(out));
    let out_dir = out_abs.parent().unwrap_or(Path::new("/")).to_path_buf();
    let dir = match charts_dir {
        Some(d) => normalize(&cwd.join(d)),
        None => default_charts_dir(&cwd, &out_abs),
    };
    let made = charts::charts(run);
    let mut links = Vec::new();
    if !made.is_empty() {
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for c in made {
        let path = dir.join(&c.file);
        std::fs::write(&path, &c.svg).map_err(|e| format!("{}: {e}", path.display()))?;
        links.push(ChartLink {
            workload: c.workload,
            alt: c.alt,
            link: relative(&out_dir, &path),
        });
    }
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    std::fs::write(out, render(run, &links)).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((!links.is_empty()).then_some(dir))
}

/// `, charts in DIR` for a closing message.
pub fn charts_note(dir: &Option<PathBuf>) -> String {
    dir.as_ref()
        .map_or(String::new(), |d| format!(", charts in {}", d.display()))
}

/// A chart as the report links it.
pub struct ChartLink {
    pub workload: &'static str,
    pub alt: String,
    /// Relative to the report's directory, `/`-separated.
    pub link: String,
}

/// `docs/charts/` (relative to the current directory `cwd`) when the report `out` is under
/// `cwd/docs/`, else `charts/` next to the report. Both paths absolute.
pub fn default_charts_dir(cwd: &Path, out: &Path) -> PathBuf {
    let docs = cwd.join("docs");
    if out.starts_with(&docs) {
        docs.join("charts")
    } else {
        out.parent().unwrap_or(Path::new("/")).join("charts")
    }
}

/// `p` without `.` and with `..` applied, lexically (no symlinks resolved).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The path of `to` relative to the directory `from` (both absolute and normalized), with `/`.
fn relative(from: &Path, to: &Path) -> String {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".into(); f.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    parts.join("/")
}

/// Median, and (max − min) / median.
pub fn median_spread(mut v: Vec<f64>) -> Option<(f64, Option<f64>)> {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let med = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let spread = (n > 1 && med != 0.0).then(|| (v[n - 1] - v[0]) / med);
    Some((med, spread))
}

pub fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        "–".into()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

pub fn fmt_us(us: f64) -> String {
    if !us.is_finite() {
        "–".into()
    } else if us < 10.0 {
        format!("{us:.1} µs")
    } else if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

pub fn fmt_secs(secs: f64) -> String {
    fmt_us(secs * 1e6)
}

fn fmt_pct(fraction: f64) -> String {
    if !fraction.is_finite() {
        "–".into()
    } else if fraction < 0.001 {
        format!("{:.3} %", fraction * 100.0)
    } else {
        format!("{:.1} %", fraction * 100.0)
    }
}

pub fn fmt_bytes(b: f64) -> String {
    if !b.is_finite() {
        "–".into()
    } else if b < 1024.0 {
        format!("{b:.0} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else if b < 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1048576.0)
    } else {
        format!("{:.2} GiB", b / 1073741824.0)
    }
}

pub(crate) fn fmt_spread(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("±{:.0}%", s * 50.0))
}

pub(crate) fn fmt_ratio(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => {
            if x >= 10.0 {
                format!("{x:.0}×")
            } else if x >= 0.1 {
                format!("{x:.2}×")
            } else {
                format!("{x:.3}×")
            }
        }
        _ => "–".into(),
    }
}

/// One column of a results table.
struct Col {
    head: &'static str,
    key: &'static str,
    fmt: fn(f64) -> String,
}

/// The metric each workload is ranked by, and whether higher is better.
fn primary(workload: &str) -> (&'static str, &'static str, bool) {
    match workload {
        "seqwrite" => ("mib_per_sec", "MiB/s", true),
        "reopen" => ("open_secs", "open time", false),
        _ => ("ops_per_sec", "ops/s", true),
    }
}

fn columns(workload: &str) -> (Vec<&'static str>, Vec<Col>) {
    let c = |head, key, fmt| Col { head, key, fmt };
    let us = fmt_us as fn(f64) -> String;
    let num = fmt_num as fn(f64) -> String;
    let bytes = fmt_bytes as fn(f64) -> String;
    match workload {
        "put" => (
            vec!["value", "threads"],
            vec![
                c("MiB/s", "mib_per_sec", num),
                c("p50", "p50_us", us),
                c("p99", "p99_us", us),
                c("disk write/op", "disk_write_bytes_per_op", bytes),
            ],
        ),
        "get" => (
            vec!["value", "threads", "cache"],
            vec![
                c("MiB/s", "mib_per_sec", num),
                c("p50", "p50_us", us),
                c("p99", "p99_us", us),
                c("disk read/op", "disk_read_bytes_per_op", bytes),
            ],
        ),
        "range" => (
            vec!["value", "range"],
            vec![
                c("p50", "p50_us", us),
                c("p99", "p99_us", us),
                c("disk read/op", "disk_read_bytes_per_op", bytes),
            ],
        ),
        "seqwrite" => (
            vec!["value", "total"],
            vec![
                c("disk write/value", "disk_write_bytes_per_op", bytes),
                c("batch p50", "batch_p50_us", us),
                c("batch p99", "batch_p99_us", us),
            ],
        ),
        "mix" | "oldest" => (
            vec!["value", "threads", "ops"],
            vec![
                c("total time", "seconds", fmt_secs as fn(f64) -> String),
                c("put p50", "put_p50_us", us),
                c("put p90", "put_p90_us", us),
                c("put p99", "put_p99_us", us),
                c("get p50", "get_p50_us", us),
                c("get p90", "get_p90_us", us),
                c("get p99", "get_p99_us", us),
            ],
        ),
        "ycsb" => (
            vec!["workload", "value", "threads"],
            vec![
                c("read p50", "read_p50_us", us),
                c("read p99", "read_p99_us", us),
                c("update p50", "update_p50_us", us),
                c("update p99", "update_p99_us", us),
                c("rmw p50", "rmw_p50_us", us),
                c("rmw p99", "rmw_p99_us", us),
            ],
        ),
        "reopen" => (
            vec!["keys", "value"],
            vec![
                c("read by open", "open_read_bytes", bytes),
                c("store on disk", "store_bytes", bytes),
                c(
                    "read / stored",
                    "open_read_fraction",
                    fmt_pct as fn(f64) -> String,
                ),
                c("RSS/key (B)", "rss_bytes_per_key", num),
                c("first get", "first_get_us", us),
                c("load (s)", "load_secs", num),
            ],
        ),
        _ => (vec![], vec![]),
    }
}

pub fn metric(results: &[Value], key: &str) -> Option<(f64, Option<f64>)> {
    median_spread(results.iter().filter_map(|v| v[key].as_f64()).collect())
}

/// The markdown report; `charts` are linked under their workload's heading.
pub fn render(r: &SuiteRun, charts: &[ChartLink]) -> String {
    let mut s = String::new();
    let m = &r.meta;
    let w = |s: &mut String, t: &str| {
        s.push_str(t);
        s.push('\n');
    };
    w(&mut s, "# podstore compared with other embedded stores");
    w(&mut s, "");
    let _ = writeln!(
        s,
        "Generated by `benches/compare`{} ({} suite, {} repetition(s) of every \
         configuration{}).",
        m.started
            .as_ref()
            .map_or(String::new(), |t| format!(" on {t}")),
        if m.quick { "quick" } else { "full" },
        r.sc.reps,
        if r.workloads.contains(&"memlimit") {
            format!(" ({} of memlimit's)", r.sc.memlimit_reps.min(r.sc.reps))
        } else {
            String::new()
        } + &r
            .wall
            .map_or(String::new(), |t| format!(", {t:.0} s in all"))
    );
    w(&mut s, "");
    match &m.command {
        Some(c) => {
            let _ = writeln!(s, "Command: `{}`", shell_join(c));
        }
        None => w(&mut s, "Command: not recorded."),
    }
    w(&mut s, "");
    if let Source::Saved {
        command,
        at,
        legacy,
        unfinished,
        unmatched,
    } = &r.source
    {
        let _ = write!(
            s,
            "Rebuilt on {at} from the saved runs with `{}`.",
            shell_join(command)
        );
        if *legacy {
            let _ = write!(
                s,
                " The file predates suite headers, so its start time, duration, command and \
                 podstore commit are unknown, the limits in the workload descriptions that a run \
                 line does not record come from the {} preset of the harness that rebuilt the \
                 report, and the rows marked † below describe the machine and build that \
                 rebuilt it.",
                if m.quick { "quick" } else { "full" }
            );
        }
        if *unfinished {
            let _ = write!(
                s,
                " The suite did not finish (the file has no end record): runs it did not reach \
                 are listed under Failed runs."
            );
        }
        if *unmatched > 0 {
            let _ = write!(
                s,
                " {unmatched} line(s) of the file match no configuration of the suite and are \
                 left out."
            );
        }
        w(&mut s, "\n");
    }
    let _ = writeln!(
        s,
        "Every run's JSON line is in `{}`; to repeat one row, run `compare run` with the \
         parameters given under each workload below.",
        r.jsonl.display()
    );
    w(&mut s, "");
    // Rows a legacy file does not record come from the rebuilding machine: marked †.
    let dag = if r.legacy() { " †" } else { "" };
    w(&mut s, "## Machine");
    w(&mut s, "");
    w(&mut s, "| | |");
    w(&mut s, "| --- | --- |");
    let _ = writeln!(s, "| cores (nproc) | {}{dag} |", m.machine.nproc);
    let _ = writeln!(s, "| memory | {}{dag} |", m.machine.mem_total);
    let _ = writeln!(s, "| CPU | {}{dag} |", m.machine.cpu);
    let _ = writeln!(s, "| kernel | {}{dag} |", m.machine.kernel);
    let _ = writeln!(
        s,
        "| benchmark directory | `{}`: {} on `{}` mounted at `{}` ({}){dag} |",
        m.base, m.mount.fstype, m.mount.source, m.mount.mount_point, m.mount.options
    );
    let dropped: Vec<bool> = r
        .results
        .iter()
        .flatten()
        .filter_map(|v| v["params"]["page_cache_dropped"].as_bool())
        .collect();
    let drop_text = if dropped.is_empty() {
        "not needed by the workloads run".to_string()
    } else if dropped.iter().all(|&d| d) {
        "yes: `sync; echo 3 > /proc/sys/vm/drop_caches` worked (root), so cold rows are cold"
            .to_string()
    } else if dropped.iter().all(|&d| !d) {
        "**no** (not root): rows marked cold only had a fresh process and a reopened engine; \
         the page cache was not dropped"
            .to_string()
    } else {
        "only in some runs (see the JSON lines)".to_string()
    };
    let _ = writeln!(s, "| page cache dropped for cold reads | {drop_text} |");
    let _ = writeln!(
        s,
        "| podstore | {} |",
        m.podstore.as_deref().unwrap_or("not recorded")
    );
    let _ = writeln!(s, "| compiler | {}{dag} |", m.rustc);
    let _ = writeln!(s, "| other engines | {}{dag} |", m.crates);
    let _ = writeln!(
        s,
        "| load average (1, 5, 15 min) at start / at end | {} / {} |",
        m.load_start.as_deref().unwrap_or("not recorded"),
        r.load_end.as_deref().unwrap_or("not recorded")
    );
    w(&mut s, "");
    w(
        &mut s,
        "The machine is shared with other work (other developers compile on it while a suite \
               runs: see the load averages against its cores) and its virtual disk is noisy: \
               read the spread column before reading much into a ratio, and compare rows of one \
               run rather than figures across runs.",
    );
    w(&mut s, "");

    targets_section(&mut s, r);

    w(&mut s, "## How the figures are made");
    w(&mut s, "");
    let _ = writeln!(
        s,
        "- Every configuration runs {} time(s), each time as a separate `compare run` process \
         (started by `compare suite` through `std::env::current_exe()`) in a fresh directory \
         under the benchmark directory, removed afterwards. Repetitions are interleaved: the \
         whole matrix runs once, then again.",
        r.sc.reps
    );
    w(
        &mut s,
        "- A figure is the median of the repetitions; `±` is half the range \
               ((max − min) / 2) over the median, for the primary metric of the table.",
    );
    w(
        &mut s,
        "- `vs podstore` and `vs raw` divide the engine's median by podstore's and by the \
               raw floor's median of the same row group: above 1 is faster for throughputs, \
               and for `reopen` (a time) above 1 is slower.",
    );
    w(
        &mut s,
        "- Latencies are per operation, timed around the engine call on the calling \
               thread; p50/p99 are nearest-rank percentiles over all the operations of a run \
               (medians over repetitions).",
    );
    w(
        &mut s,
        "- `disk read/op` and `disk write/op` are the deltas of `read_bytes` and \
               `write_bytes` in `/proc/self/io` over the measured phase, divided by the \
               operations: bytes the process made the block layer move (page-cache misses, \
               readahead, O_DIRECT). Buffered writes are counted when they dirty the cache.",
    );
    w(
        &mut s,
        "- Values are deterministic pseudo-random (incompressible) bytes; keys are 16 \
               ASCII bytes `key-NNNNNNNNNNNN`.",
    );
    w(&mut s, "");

    w(&mut s, "## Engines");
    w(&mut s, "");
    for e in &r.engines_run {
        let _ = writeln!(s, "- **{e}**: {}", m.settings(e));
    }
    let _ = writeln!(
        s,
        "\npodstore's defaults in this build: `{}`{dag}.\n",
        m.podstore_defaults
    );
    for e in &m.not_built {
        let _ = writeln!(
            s,
            "- **{e}**: not compiled in (cargo feature `{e}` off): no figures."
        );
    }
    w(&mut s, "");
    w(
        &mut s,
        "Durable means: the write is on stable storage when the call returns. Bulk \
               (loading data sets, `seqwrite`) means: each engine's fastest write mode that is \
               made durable by one final sync, which is timed in `seqwrite`.",
    );
    w(&mut s, "");

    for &wl in &r.workloads {
        if wl == "memlimit" {
            crate::memlimit_report::section(&mut s, r);
        } else {
            workload_section(&mut s, r, wl, charts);
        }
    }

    if !r.failures.is_empty() {
        w(&mut s, "## Failed runs");
        w(&mut s, "");
        w(
            &mut s,
            "| workload | parameters | engine | repetition | error |",
        );
        w(&mut s, "| --- | --- | --- | --- | --- |");
        for (ci, rep, e) in &r.failures {
            let c = &r.configs[*ci];
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                c.workload,
                c.label.join(", "),
                c.engine,
                rep + 1,
                e.replace('|', "\\|")
            );
        }
        w(&mut s, "");
    }
    let skipped: Vec<String> = r
        .engines_run
        .iter()
        .flat_map(|&e| {
            r.workloads
                .iter()
                .filter_map(move |&wl| engines::skip_reason(e, wl).map(|why| (e, wl, why)))
        })
        .map(|(e, wl, why)| format!("- {e} in {wl}: {why}."))
        .collect();
    if !skipped.is_empty() {
        w(&mut s, "## Not run");
        w(&mut s, "");
        for l in skipped {
            w(&mut s, &l);
        }
        w(&mut s, "");
    }
    s
}

/// The median of `key` over the runs of the configuration of `workload` and `engine` that
/// `pick` accepts (the first such configuration).
pub(crate) fn figure(
    r: &SuiteRun,
    workload: &str,
    engine: &str,
    key: &str,
    pick: &dyn Fn(&Config) -> bool,
) -> Option<f64> {
    let ci = r
        .configs
        .iter()
        .position(|c| c.workload == workload && c.engine == engine && pick(c))?;
    metric(&r.results[ci], key).map(|(m, _)| m)
}

/// One target of issue #6: what it asks, the figures, and whether they meet it.
pub(crate) struct Target {
    pub what: String,
    pub figures: String,
    /// `None`: no data (a workload or engine was not run, or its runs failed).
    pub met: Option<bool>,
    /// By how much it is missed, when it is.
    pub short_by: String,
}

/// `x` as "0.61×".
pub(crate) fn times(x: f64) -> String {
    fmt_ratio(Some(x))
}

/// The targets of issues #6, #12 and #23, each met or not, from the suite's medians.
fn targets(r: &SuiteRun) -> Vec<Target> {
    let size_is = |n: u64| move |c: &Config| c.num("size") == Some(n);
    let mut out = Vec::new();
    // A ratio target: podstore's `key` over `other`'s at least `min`.
    let mut ratio = |what: String,
                     wl: &str,
                     other: &str,
                     key: &str,
                     min: f64,
                     pick: &dyn Fn(&Config) -> bool,
                     unit: &str| {
        let pod = figure(r, wl, "podstore", key, pick);
        let oth = figure(r, wl, other, key, pick);
        let (figures, met, short_by) = match (pod, oth) {
            (Some(p), Some(o)) if o > 0.0 => {
                let x = p / o;
                (
                    format!(
                        "podstore {} {unit}, {other} {} {unit}: **{}**",
                        fmt_num(p),
                        fmt_num(o),
                        times(x)
                    ),
                    Some(x >= min),
                    format!("{} of the {} asked", times(x), times(min)),
                )
            }
            _ => ("no data".into(), None, String::new()),
        };
        out.push(Target {
            what,
            figures,
            met,
            short_by,
        });
    };
    const K: u64 = 1024;
    const M: u64 = 1 << 20;
    for size in [256 * K, 4 * M] {
        ratio(
            format!(
                "sequential write of {} values ≥ 90 % of raw's MiB/s",
                fmt_size(size)
            ),
            "seqwrite",
            "raw",
            "mib_per_sec",
            0.9,
            &size_is(size),
            "MiB/s",
        );
    }
    let put = |t: u64| move |c: &Config| c.num("size") == Some(K) && c.num("threads") == Some(t);
    ratio(
        "durable 1 KiB puts, 64 threads: ≥ 10× files".into(),
        "put",
        "files",
        "ops_per_sec",
        10.0,
        &put(64),
        "ops/s",
    );
    ratio(
        "durable 1 KiB puts, 64 threads: ≥ 5× fjall".into(),
        "put",
        "fjall",
        "ops_per_sec",
        5.0,
        &put(64),
        "ops/s",
    );
    ratio(
        "durable 1 KiB puts, 1 thread: ≥ 0.8× raw".into(),
        "put",
        "raw",
        "ops_per_sec",
        0.8,
        &put(1),
        "ops/s",
    );
    let cold4k = |t: u64| {
        move |c: &Config| {
            c.num("size") == Some(4 * K)
                && c.num("threads") == Some(t)
                && c.param("cache") == Some("cold")
        }
    };
    ratio(
        "cold 4 KiB gets, 1 thread: ≥ 0.8× raw".into(),
        "get",
        "raw",
        "ops_per_sec",
        0.8,
        &cold4k(1),
        "ops/s",
    );
    for other in ["fjall", "redb", "heed"] {
        ratio(
            format!("cold 4 KiB gets, 16 threads: ahead of {other}"),
            "get",
            other,
            "ops_per_sec",
            1.0,
            &cold4k(16),
            "ops/s",
        );
    }
    // Issue #12: a lone durable writer without a hand-off, group commit kept, cold gets close
    // to one aligned pread.
    ratio(
        "durable 1 KiB puts, 1 thread: ≥ 0.9× raw (#12)".into(),
        "put",
        "raw",
        "ops_per_sec",
        0.9,
        &put(1),
        "ops/s",
    );
    ratio(
        "durable 1 KiB puts, 1 thread: ≥ 1.1× fjall (#12)".into(),
        "put",
        "fjall",
        "ops_per_sec",
        1.1,
        &put(1),
        "ops/s",
    );
    ratio(
        "durable 1 KiB puts, 64 threads: ≥ 10× fjall (#12)".into(),
        "put",
        "fjall",
        "ops_per_sec",
        10.0,
        &put(64),
        "ops/s",
    );
    ratio(
        "cold 4 KiB gets, 1 thread: ≥ 0.9× raw (#12)".into(),
        "get",
        "raw",
        "ops_per_sec",
        0.9,
        &cold4k(1),
        "ops/s",
    );
    // Issue #12: warm gets (the value was read before) from memory, as LMDB serves them.
    for t in [1, 16] {
        let warm1k = move |c: &Config| {
            c.num("size") == Some(K)
                && c.num("threads") == Some(t)
                && c.param("cache") == Some("warm")
        };
        ratio(
            format!(
                "warm 1 KiB gets, {t} thread{}: ≥ heed",
                if t == 1 { "" } else { "s" }
            ),
            "get",
            "heed",
            "ops_per_sec",
            1.0,
            &warm1k,
            "ops/s",
        );
    }
    // Issue #12: each YCSB workload at least as fast as the best peer on it.
    for mix in ["a", "b", "c", "f"] {
        let pick = move |c: &Config| c.param("mix") == Some(mix);
        let pod = figure(r, "ycsb", "podstore", "ops_per_sec", &pick);
        let best = ["fjall", "redb", "heed", "files"]
            .into_iter()
            .filter_map(|e| Some((e, figure(r, "ycsb", e, "ops_per_sec", &pick)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let what = format!("YCSB {}: ≥ the best peer (#12)", mix.to_ascii_uppercase());
        out.push(match (pod, best) {
            (Some(p), Some((e, o))) if o > 0.0 => Target {
                what,
                figures: format!(
                    "podstore {} ops/s, best peer {e} {} ops/s: **{}**",
                    fmt_num(p),
                    fmt_num(o),
                    times(p / o)
                ),
                met: Some(p >= o),
                short_by: format!("{} of the 1.00× asked", times(p / o)),
            },
            _ => Target {
                what,
                figures: "no data".into(),
                met: None,
                short_by: String::new(),
            },
        });
    }
    // Absolute targets.
    for size in [10 * M, 100 * M] {
        for range in ["1M+4K", "end-4K+4K"] {
            let pick =
                move |c: &Config| c.num("size") == Some(size) && c.param("range") == Some(range);
            let read = figure(r, "range", "podstore", "disk_read_bytes_per_op", &pick);
            out.push(Target {
                what: format!(
                    "a 4 KiB range ({}) of a {} value reads ≤ 8 KiB from disk",
                    crate::suite::range_label(range),
                    fmt_size(size)
                ),
                figures: read.map_or("no data".into(), |b| {
                    format!("podstore: **{}** read per op", fmt_bytes(b))
                }),
                met: read.map(|b| b <= 8192.0),
                short_by: read.map_or(String::new(), |b| format!("{} over", fmt_bytes(b - 8192.0))),
            });
        }
    }
    let any = |_: &Config| true;
    let open = figure(r, "reopen", "podstore", "open_secs", &any);
    let frac = figure(r, "reopen", "podstore", "open_read_fraction", &any);
    let read = figure(r, "reopen", "podstore", "open_read_bytes", &any);
    let stored = figure(r, "reopen", "podstore", "store_bytes", &any);
    let keys = r.sc.reopen_keys;
    out.push(Target {
        what: format!("reopen of {keys} values under 1 s"),
        figures: open.map_or("no data".into(), |t| {
            format!("podstore: **{}**", fmt_secs(t))
        }),
        met: open.map(|t| t < 1.0),
        short_by: open.map_or(String::new(), |t| format!("{:.2}× the time allowed", t)),
    });
    out.push(Target {
        what: format!("reopen of {keys} values reads under 2 % of the stored bytes"),
        figures: match (frac, read, stored) {
            (Some(f), Some(rd), Some(st)) => format!(
                "podstore: {} read of {} on disk: **{}**",
                fmt_bytes(rd),
                fmt_bytes(st),
                fmt_pct(f)
            ),
            _ => "no data".into(),
        },
        met: frac.map(|f| f < 0.02),
        short_by: frac.map_or(String::new(), |f| {
            format!("{:.0}× the fraction allowed", f / 0.02)
        }),
    });
    out.extend(crate::memlimit_report::targets(r));
    out
}

fn targets_section(s: &mut String, r: &SuiteRun) {
    let t = targets(r);
    if t.iter().all(|t| t.met.is_none()) {
        return;
    }
    let _ = writeln!(
        s,
        "## Targets\n\nThe targets of issues #6, #12 and #23, from the medians of this run (podstore \
         with direct I/O). How each figure is measured is under its workload below.\n"
    );
    let _ = writeln!(s, "| target | figures | |");
    let _ = writeln!(s, "| --- | --- | --- |");
    for t in &t {
        let verdict = match t.met {
            None => "no data".to_string(),
            Some(true) => "met".to_string(),
            Some(false) => format!("**not met** ({})", t.short_by),
        };
        let _ = writeln!(s, "| {} | {} | {verdict} |", t.what, t.figures);
    }
    let met = t.iter().filter(|t| t.met == Some(true)).count();
    let missed = t.iter().filter(|t| t.met == Some(false)).count();
    let _ = writeln!(
        s,
        "\n{met} met, {missed} not met{}. Why the missed ones are missed, and what would fix \
         them: docs/benchmarks.md, \"Targets\".\n",
        match t.iter().filter(|t| t.met.is_none()).count() {
            0 => String::new(),
            n => format!(", {n} without data"),
        }
    );
}

fn workload_text(r: &SuiteRun, wl: &str) -> String {
    let sc = &r.sc;
    let list = |v: &[u64]| {
        v.iter()
            .map(|&x| fmt_size(x))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let nums = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    match wl {
        "put" => format!(
            "Durable puts of fresh keys (each engine in its durable mode), values of {} from {} \
             threads. A run stops after {} operations, {} of values or {} s, whichever comes \
             first (operations under way finish). ops/s counts completed puts over the wall \
             time of the phase. Example: `compare run --engine podstore --workload put --size 4K \
             --threads 16 --secs {} --ops {} --max-bytes {}`.",
            list(&sc.put_sizes),
            nums(&sc.put_threads),
            sc.put_max_ops,
            fmt_size(sc.put_max_bytes),
            sc.put_secs,
            sc.put_secs,
            sc.put_max_ops,
            short(sc.put_max_bytes)
        ),
        "get" => format!(
            "A data set of about {} (N = {} / value size keys, clamped to 64..{}) is loaded \
             in bulk by {} threads (batches of at most 8 MiB, split so that every thread has \
             some), synced, and the engine is closed and opened again. **cold** (from {} \
             threads): the page cache is dropped while the engine is closed, then at most {} \
             keys (a small part of the data set when values are small, so that readahead \
             cannot bring the rest in) are read, each once, in a random order. **warm** (from {} \
             threads): every key is read once (untimed), then keys are drawn at random with \
             replacement, at most {} gets. Gets of whole values of {}; a run stops after {} \
             s. Example: `compare run --engine podstore --workload get --size 4K --threads 16 \
             --cache cold --dataset {} --max-keys {} --load-threads {} --ops {} --secs {}`.",
            fmt_size(sc.get_dataset),
            fmt_size(sc.get_dataset),
            sc.get_max_keys,
            sc.get_load_threads,
            nums(&sc.get_threads),
            sc.get_cold_ops,
            nums(&sc.get_warm_threads),
            sc.get_warm_ops,
            list(&sc.get_sizes),
            sc.get_secs,
            short(sc.get_dataset),
            sc.get_max_keys,
            sc.get_load_threads,
            sc.get_cold_ops,
            sc.get_secs
        ),
        "range" => format!(
            "One value per read (at most 128 MiB of values, at least one value) of {} is \
             loaded in bulk. Then {} single-threaded reads (fewer if {} s have passed), each \
             preceded (untimed) by closing the engine, dropping the page cache and opening the \
             engine again, so every read is cold (what the open itself read is not counted: \
             LMDB's open faults in the first pages of its file, which can hold the start of the \
             first value): the whole value \
             (`get`), 1 KiB at offset 1 KiB, 4 KiB at offset 1 MiB, and the last 4 KiB \
             (`get_range` where the engine has partial reads; fjall and redb read the whole \
             value and slice it). Ranges outside the value are left out. ops/s is 1 / mean \
             latency. Example: `compare run --engine podstore --workload range --size 100M \
             --range 1M+4K --ops {}` (`--range` is `whole` or `OFF+LEN`, OFF may be \
             `end-4K`).",
            list(&sc.range_sizes),
            sc.range_ops,
            sc.range_secs,
            sc.range_ops
        ),
        "seqwrite" => format!(
            "One writer streams {} of values of {} in bulk mode, handing the engine 16 MiB \
             batches (redb and heed: one write transaction per batch; the others: one put per \
             value), then syncs once; MiB/s covers everything up to the end of that sync. A run \
             stops issuing batches after {} s. Batch latencies are in the table. Example: \
             `compare run --engine podstore --workload seqwrite --size 4M --total {}`.",
            fmt_size(sc.seq_total),
            list(&sc.seq_sizes),
            sc.seq_secs,
            short(sc.seq_total)
        ),
        "mix" | "oldest" => format!(
            "The single-file engine workloads. A data set of {} of {} values ({} keys) is \
             loaded in bulk (16 threads), synced and settled; the engine is closed, the page \
             cache dropped, and the engine opened again in its durable mode. Then {} threads \
             run {} operations (a run stops issuing them after {} s): {} Puts are durable puts \
             of fresh keys. The table gives the total time of the operations, ops/s (both \
             kinds), and p50/p90/p99 latency of each kind. Example: `compare run --engine \
             podstore --workload {wl} --size {} --threads {} --dataset {} --ops {}{}`.",
            fmt_size(sc.mix_dataset),
            fmt_size(sc.mix_size),
            sc.mix_dataset / sc.mix_size.max(1),
            sc.mix_threads,
            sc.mix_ops,
            sc.mix_secs,
            if wl == "mix" {
                "each is at random (half and half) a put or a get of a random loaded key."
                    .to_string()
            } else {
                format!(
                    "puts and gets alternate; a get reads a random key among the oldest {} % \
                     of the loaded keys ({} keys: the first written).",
                    sc.oldest_pct,
                    (sc.mix_dataset / sc.mix_size.max(1) * sc.oldest_pct / 100).max(1)
                )
            },
            short(sc.mix_size),
            sc.mix_threads,
            short(sc.mix_dataset),
            sc.mix_ops,
            if wl == "oldest" {
                format!(" --oldest-pct {}", sc.oldest_pct)
            } else {
                String::new()
            }
        ),
        "ycsb" => format!(
            "YCSB's core workloads in YCSB's shape: {} records of {} are loaded in bulk (16 \
             threads) and synced; the engine is closed and opened again (its own caches empty, \
             the page cache as the load left it, like YCSB's run phase in a fresh process); \
             then {} threads run {} operations (a run stops issuing them after {} s) on records \
             chosen by YCSB's scrambled zipfian distribution (θ = 0.99). A: 50 % reads, 50 % \
             updates; B: 95 % reads, 5 % updates; C: reads only; F: 50 % reads, 50 % \
             read-modify-writes (a read and an update of one record, timed as one operation). \
             An update writes a whole new value and is not synced (bulk mode, as YCSB runs \
             against RocksDB). Example: `compare run --engine podstore --workload ycsb --mix a \
             --records {} --ops {} --threads {}`.",
            sc.ycsb_records,
            fmt_size(sc.ycsb_size),
            sc.ycsb_threads,
            sc.ycsb_ops,
            sc.ycsb_secs,
            sc.ycsb_records,
            sc.ycsb_ops,
            sc.ycsb_threads
        ),
        "reopen" => format!(
            "{} values of 100 B are loaded in bulk by 16 threads (batches of 10 000 keys), \
             synced, settled and the store closed; the page cache is dropped, then a new process \
             (`compare probe-open`) opens the store: open time, bytes the open read from \
             disk (also as a fraction of the store's size on disk: the sizes of its files after \
             closing), and VmRSS growth over the open divided by the number of keys; then it \
             times one get. Example: `compare run --engine podstore --workload reopen --keys {}`.",
            sc.reopen_keys, sc.reopen_keys
        ),
        _ => String::new(),
    }
}

fn workload_section(s: &mut String, r: &SuiteRun, wl: &str, charts: &[ChartLink]) {
    let (pkey, pname, higher_better) = primary(wl);
    let (labels, cols) = columns(wl);
    let _ = writeln!(s, "## {wl}\n");
    let _ = writeln!(s, "{}\n", workload_text(r, wl));
    for c in charts.iter().filter(|c| c.workload == wl) {
        let _ = writeln!(s, "![{}]({})\n", c.alt, c.link);
    }
    // Groups in matrix order.
    let mut groups: Vec<Vec<String>> = Vec::new();
    let mut by: BTreeMap<(Vec<String>, &str), &[Value]> = BTreeMap::new();
    for (ci, c) in r.configs.iter().enumerate() {
        if c.workload != wl {
            continue;
        }
        let (_, g) = c.group();
        if !groups.contains(&g) {
            groups.push(g.clone());
        }
        by.insert((g, c.engine), &r.results[ci]);
    }
    if groups.is_empty() {
        return;
    }
    let engines_here = r.engines_in(wl);
    let med = |g: &Vec<String>, e: &str| {
        by.get(&(g.clone(), e))
            .and_then(|res| metric(res, pkey))
            .map(|(m, _)| m)
    };

    // Summary: the primary metric's ratio to podstore.
    if engines_here.contains(&"podstore") && engines_here.len() > 1 {
        let _ = writeln!(
            s,
            "Summary: median {pname} relative to podstore ({}).\n",
            if higher_better {
                "above 1 = faster than podstore"
            } else {
                "above 1 = slower than podstore"
            }
        );
        let _ = writeln!(
            s,
            "| {} | podstore {pname} | {} |",
            labels.join(" | "),
            engines_here
                .iter()
                .filter(|&&e| e != "podstore")
                .copied()
                .collect::<Vec<_>>()
                .join(" | ")
        );
        let _ = writeln!(s, "|{}", " --- |".repeat(labels.len() + engines_here.len()));
        for g in &groups {
            let pod = med(g, "podstore");
            let podtxt = match pod {
                Some(p) if pkey == "open_secs" => fmt_us(p * 1e6),
                Some(p) => fmt_num(p),
                None => "–".into(),
            };
            let mut row = format!("| {} | {podtxt} |", g.join(" | "));
            for &e in engines_here.iter().filter(|&&e| e != "podstore") {
                let ratio = match (med(g, e), pod) {
                    (Some(x), Some(p)) if p > 0.0 => Some(x / p),
                    _ => None,
                };
                let _ = write!(row, " {} |", fmt_ratio(ratio));
            }
            let _ = writeln!(s, "{row}");
        }
        s.push('\n');
    }

    // Detail.
    let _ = writeln!(
        s,
        "| {} | engine | {pname} | ± | {} | vs podstore | vs raw |",
        labels.join(" | "),
        cols.iter().map(|c| c.head).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(s, "|{}", " --- |".repeat(labels.len() + 5 + cols.len()));
    for g in &groups {
        let pod = med(g, "podstore");
        let raw = med(g, "raw");
        for &e in &engines_here {
            let Some(res) = by.get(&(g.clone(), e)) else {
                continue;
            };
            let prim = metric(res, pkey);
            let primtxt = match prim {
                None => "failed".into(),
                Some((p, _)) if pkey == "open_secs" => fmt_us(p * 1e6),
                Some((p, _)) => fmt_num(p),
            };
            let ratio = |base: Option<f64>| match (prim, base) {
                (Some((x, _)), Some(b)) if b > 0.0 => Some(x / b),
                _ => None,
            };
            let mut row = format!(
                "| {} | {e} | {primtxt} | {} |",
                g.join(" | "),
                fmt_spread(prim.and_then(|p| p.1))
            );
            for c in &cols {
                let v = metric(res, c.key).map_or("–".into(), |(m, _)| (c.fmt)(m));
                let _ = write!(row, " {v} |");
            }
            let _ = write!(
                row,
                " {} | {} |",
                if e == "podstore" {
                    "1×".into()
                } else {
                    fmt_ratio(ratio(pod))
                },
                if e == "raw" {
                    "1×".into()
                } else {
                    fmt_ratio(ratio(raw))
                }
            );
            let _ = writeln!(s, "{row}");
        }
    }
    s.push('\n');
}

fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=,:+@%".contains(c))
            {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn git(args: &[&str]) -> Option<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn podstore_version() -> String {
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(c) => {
            let dirty = git(&["status", "--porcelain", "--", "src", "Cargo.toml"])
                .is_some_and(|s| !s.is_empty());
            format!(
                "commit `{c}`{}",
                if dirty {
                    " with uncommitted changes in `src/` or `Cargo.toml`"
                } else {
                    ""
                }
            )
        }
        None => "unknown commit (no git)".into(),
    }
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Versions of the other engines' crates, from this package's Cargo.lock.
fn crate_versions() -> String {
    let lock = include_str!("../Cargo.lock");
    let version = |name: &str| -> Option<String> {
        let needle = format!("name = \"{name}\"\nversion = \"");
        let at = lock.find(&needle)? + needle.len();
        Some(lock[at..].split('"').next()?.to_string())
    };
    let mut parts = Vec::new();
    for (name, feature) in [
        ("fjall", cfg!(feature = "fjall")),
        ("lsm-tree", cfg!(feature = "fjall")),
        ("redb", cfg!(feature = "redb")),
        ("heed", cfg!(feature = "heed")),
        ("lmdb-master-sys", cfg!(feature = "heed")),
        ("rocksdb", cfg!(feature = "rocksdb")),
        ("librocksdb-sys", cfg!(feature = "rocksdb")),
        ("rustix", true),
    ] {
        if let (true, Some(v)) = (feature, version(name)) {
            parts.push(format!("{name} {v}"));
        }
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median_spread(vec![3.0, 1.0, 2.0]), Some((2.0, Some(1.0))));
        assert_eq!(median_spread(vec![5.0]), Some((5.0, None)));
        assert_eq!(median_spread(vec![]), None);
    }

    #[test]
    fn lock_has_versions() {
        assert!(crate_versions().contains("rustix"));
    }

    #[test]
    fn chart_paths() {
        let cwd = Path::new("/repo");
        let d = |out: &str| default_charts_dir(cwd, &normalize(&cwd.join(out)));
        assert_eq!(d("docs/bench.md"), Path::new("/repo/docs/charts"));
        assert_eq!(d("docs/a/bench.md"), Path::new("/repo/docs/charts"));
        assert_eq!(d("./docs/../docs/b.md"), Path::new("/repo/docs/charts"));
        assert_eq!(d("/tmp/regen/report.md"), Path::new("/tmp/regen/charts"));
        assert_eq!(d("report.md"), Path::new("/repo/charts"));
        assert_eq!(d("docsy/report.md"), Path::new("/repo/docsy/charts"));
        let rel = |a: &str, b: &str| relative(Path::new(a), Path::new(b));
        assert_eq!(
            rel("/repo/docs", "/repo/docs/charts/put-4k.svg"),
            "charts/put-4k.svg"
        );
        assert_eq!(
            rel("/repo/docs/a", "/repo/docs/charts/x.svg"),
            "../charts/x.svg"
        );
        assert_eq!(rel("/tmp/r", "/var/c/x.svg"), "../../var/c/x.svg");
    }

    /// A made-up suite: every configuration of a small matrix with one or two results, one
    /// failure.
    fn sample() -> SuiteRun {
        let mut sc = scale(true);
        sc.reps = 2;
        let engines_run = vec!["podstore", "fjall", "raw"];
        let workloads = vec!["put", "get", "reopen"];
        let configs = matrix(&sc, &engines_run, &workloads);
        let mut results = vec![Vec::new(); configs.len()];
        let mut failures = Vec::new();
        for (ci, c) in configs.iter().enumerate() {
            for rep in 0..sc.reps {
                if ci == 3 && rep == 1 {
                    failures.push((ci, rep, "exit signal: 11 (SIGSEGV)".to_string()));
                    continue;
                }
                let x = (ci * 7 + rep * 3 + 1) as f64;
                let mut params = json!({});
                for (k, v) in &c.params {
                    if matches!(*k, "size" | "threads" | "keys" | "total") {
                        params[*k] = c.num(k).into();
                    } else if matches!(*k, "cache" | "range") {
                        params[*k] = v.clone().into();
                    }
                }
                results[ci].push(json!({"workload": c.workload, "engine": c.engine,
                    "rep": rep, "params": params, "ops_per_sec": 100.0 * x,
                    "mib_per_sec": x, "p50_us": x, "p99_us": 2.0 * x, "open_secs": x / 10.0,
                    "disk_write_bytes_per_op": 4096.0}));
            }
        }
        SuiteRun {
            meta: Meta::of_this_run(
                &["compare".into(), "suite".into(), "--quick".into()],
                true,
                Path::new("/tmp"),
                sys::mount_of(Path::new("/tmp")),
                &[],
            ),
            sc,
            engines_run,
            workloads,
            configs,
            results,
            failures,
            wall: Some(12.0),
            load_end: Some("1.50 1.20 0.90".into()),
            jsonl: PathBuf::from("/tmp/x.jsonl"),
            source: Source::Live,
        }
    }

    /// What the suite writes to its .jsonl and what `compare report` reads back render the
    /// same report, apart from the line saying it was rebuilt.
    #[test]
    fn saved_suite_renders_the_same_report() {
        let run = sample();
        let mut lines = vec![header_record(&run).to_string()];
        for rep in 0..run.sc.reps {
            for (ci, c) in run.configs.iter().enumerate() {
                if let Some(v) = run.results[ci].iter().find(|v| v["rep"] == rep) {
                    lines.push(v.to_string());
                }
                for (_, _, e) in run.failures.iter().filter(|f| f.0 == ci && f.1 == rep) {
                    lines.push(failure_record(c, rep, e).to_string());
                }
            }
        }
        lines.push(end_record(12.0, run.load_end.as_deref()).to_string());
        let dir = std::env::temp_dir().join(format!("compare-report-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let back = load(&path, &["compare".into(), "report".into()]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            back.source,
            Source::Saved {
                legacy: false,
                unfinished: false,
                unmatched: 0,
                ..
            }
        ));
        assert_eq!(back.failures, run.failures);
        // Apart from the paragraph saying it was rebuilt, and the .jsonl's path.
        let norm = |md: String| {
            let mut out: Vec<String> = Vec::new();
            for l in md.lines() {
                if l.starts_with("Rebuilt on") || l.starts_with("Every run's JSON") {
                    continue;
                }
                if !(l.is_empty() && out.last().is_some_and(|p| p.is_empty())) {
                    out.push(l.to_string());
                }
            }
            out
        };
        assert_eq!(norm(render(&back, &[])), norm(render(&run, &[])));
    }

    /// A .jsonl of run lines only (no header): the preset is inferred, a missing run listed.
    #[test]
    fn legacy_file_without_header() {
        let run = sample();
        let lines: Vec<String> = run.results.iter().flatten().map(Value::to_string).collect();
        let dir = std::env::temp_dir().join(format!("compare-legacy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let back = load(&path, &["compare".into(), "report".into()]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(back.meta.quick);
        assert_eq!(back.sc, run.sc);
        assert_eq!(back.engines_run, run.engines_run);
        assert_eq!(back.workloads, run.workloads);
        assert_eq!(back.failures.len(), 1);
        assert_eq!((back.failures[0].0, back.failures[0].1), (3, 1));
        let md = render(&back, &[]);
        assert!(md.contains("Command: not recorded."));
        assert!(md.contains("predates suite headers"));
    }
}
