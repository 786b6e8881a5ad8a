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

mod fmt;
mod render;
mod targets;
#[cfg(test)]
mod tests;

pub(crate) use fmt::*;
pub(crate) use render::*;
pub(crate) use targets::*;

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
