//! `compare suite`: the workload matrix over the engines, each configuration in its own child
//! process (`compare run`), repeated; medians and spread into a markdown report.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Args;
use crate::engines;
use crate::sys::{self, fmt_size};

const WORKLOADS: &[&str] = &["put", "get", "range", "seqwrite", "reopen"];

/// One configuration: one `compare run` command line.
struct Config {
    workload: &'static str,
    engine: &'static str,
    /// `--name value` pairs handed to `compare run`.
    params: Vec<(&'static str, String)>,
    /// Label columns of its table row (the same for every engine of one group).
    label: Vec<String>,
}

impl Config {
    fn group(&self) -> (&'static str, Vec<String>) {
        (self.workload, self.label.clone())
    }

    fn args(&self, dir: &Path) -> Vec<String> {
        let mut a = vec![
            "run".to_string(),
            "--engine".into(),
            self.engine.into(),
            "--workload".into(),
            self.workload.into(),
            "--dir".into(),
            dir.display().to_string(),
        ];
        for (k, v) in &self.params {
            a.push(format!("--{k}"));
            a.push(v.clone());
        }
        a
    }
}

/// The sizes, thread counts and limits of one suite.
struct Scale {
    reps: usize,
    put_sizes: Vec<u64>,
    put_threads: Vec<u64>,
    put_secs: f64,
    put_max_bytes: u64,
    put_max_ops: u64,
    get_sizes: Vec<u64>,
    get_threads: Vec<u64>,
    get_dataset: u64,
    get_max_keys: u64,
    get_secs: f64,
    range_sizes: Vec<u64>,
    range_ops: u64,
    range_secs: f64,
    seq_sizes: Vec<u64>,
    seq_total: u64,
    seq_secs: f64,
    reopen_keys: u64,
}

const K: u64 = 1 << 10;
const M: u64 = 1 << 20;
const G: u64 = 1 << 30;

fn scale(quick: bool) -> Scale {
    if quick {
        Scale {
            reps: 1,
            put_sizes: vec![4 * K, 256 * K, 4 * M],
            put_threads: vec![1, 16, 200],
            put_secs: 0.5,
            put_max_bytes: 64 * M,
            put_max_ops: 20_000,
            get_sizes: vec![K, M],
            get_threads: vec![1, 64],
            get_dataset: 2 * M,
            get_max_keys: 2048,
            get_secs: 0.5,
            range_sizes: vec![4 * K, 100 * M],
            range_ops: 3,
            range_secs: 2.0,
            seq_sizes: vec![256 * K, 4 * M],
            seq_total: 256 * M,
            seq_secs: 5.0,
            reopen_keys: 100_000,
        }
    } else {
        Scale {
            reps: 3,
            put_sizes: vec![K, 4 * K, 64 * K, 256 * K, M, 4 * M],
            put_threads: vec![1, 16, 64, 200],
            put_secs: 0.5,
            put_max_bytes: 256 * M,
            put_max_ops: 20_000,
            get_sizes: vec![K, 100 * K, M],
            get_threads: vec![1, 16, 64],
            get_dataset: 64 * M,
            get_max_keys: 8192,
            get_secs: 0.6,
            range_sizes: vec![4 * K, M, 10 * M, 100 * M],
            range_ops: 6,
            range_secs: 4.0,
            seq_sizes: vec![256 * K, 4 * M],
            seq_total: 2 * G,
            seq_secs: 8.0,
            reopen_keys: 1_000_000,
        }
    }
}

const RANGES: &[&str] = &["whole", "1K+1K", "1M+4K", "end-4K+4K"];

fn short(n: u64) -> String {
    fmt_size(n).replace(' ', "")
}

fn matrix(s: &Scale, engines: &[&'static str], workloads: &[&'static str]) -> Vec<Config> {
    let mut out = Vec::new();
    let mut add = |w: &'static str, params: Vec<(&'static str, String)>, label: Vec<String>| {
        for &e in engines {
            if engines::skip_reason(e, w).is_none() {
                out.push(Config {
                    workload: w,
                    engine: e,
                    params: params.clone(),
                    label: label.clone(),
                });
            }
        }
    };
    for &w in workloads {
        match w {
            "put" => {
                for &size in &s.put_sizes {
                    for &t in &s.put_threads {
                        add(
                            w,
                            vec![
                                ("size", short(size)),
                                ("threads", t.to_string()),
                                ("secs", s.put_secs.to_string()),
                                ("ops", s.put_max_ops.to_string()),
                                ("max-bytes", short(s.put_max_bytes)),
                            ],
                            vec![fmt_size(size), t.to_string()],
                        );
                    }
                }
            }
            "get" => {
                for &size in &s.get_sizes {
                    for &t in &s.get_threads {
                        for cache in ["cold", "warm"] {
                            add(
                                w,
                                vec![
                                    ("size", short(size)),
                                    ("threads", t.to_string()),
                                    ("cache", cache.to_string()),
                                    ("dataset", short(s.get_dataset)),
                                    ("max-keys", s.get_max_keys.to_string()),
                                    ("secs", s.get_secs.to_string()),
                                ],
                                vec![fmt_size(size), t.to_string(), cache.to_string()],
                            );
                        }
                    }
                }
            }
            "range" => {
                for &size in &s.range_sizes {
                    for &r in RANGES {
                        if crate::workloads::parse_range(r, size).is_err() {
                            continue;
                        }
                        add(
                            w,
                            vec![
                                ("size", short(size)),
                                ("range", r.to_string()),
                                ("ops", s.range_ops.to_string()),
                                ("secs", s.range_secs.to_string()),
                            ],
                            vec![fmt_size(size), range_label(r)],
                        );
                    }
                }
            }
            "seqwrite" => {
                for &size in &s.seq_sizes {
                    add(
                        w,
                        vec![
                            ("size", short(size)),
                            ("total", short(s.seq_total)),
                            ("secs", s.seq_secs.to_string()),
                        ],
                        vec![fmt_size(size), fmt_size(s.seq_total)],
                    );
                }
            }
            "reopen" => add(
                w,
                vec![("keys", s.reopen_keys.to_string()), ("size", "100".into())],
                vec![s.reopen_keys.to_string(), "100 B".into()],
            ),
            _ => {}
        }
    }
    out
}

fn range_label(r: &str) -> String {
    match r {
        "whole" => "whole value".into(),
        "1K+1K" => "1 KiB at 1 KiB".into(),
        "1M+4K" => "4 KiB at 1 MiB".into(),
        "end-4K+4K" => "last 4 KiB".into(),
        other => other.into(),
    }
}

/// Runs one child; returns its JSON line or an error with the end of its stderr.
fn run_child(exe: &Path, args: &[String], timeout: Duration) -> Result<Value, String> {
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", exe.display()))?;
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
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("wait: {e}")),
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    let tail = |s: &str| {
        let s = s.trim();
        let cut = s.len().saturating_sub(400);
        let cut = (cut..=s.len())
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        s[cut..].replace('\n', " / ")
    };
    match status {
        None => Err(format!("timed out after {} s", timeout.as_secs())),
        Some(st) if !st.success() => Err(format!("exit {st}: {}", tail(&stderr))),
        Some(_) => {
            let line = stdout
                .lines()
                .rev()
                .find(|l| l.trim_start().starts_with('{'));
            let line = line.ok_or_else(|| format!("no JSON line; stderr: {}", tail(&stderr)))?;
            serde_json::from_str(line).map_err(|e| format!("bad JSON line ({e}): {line}"))
        }
    }
}

/// Median, and (max − min) / median.
fn median_spread(mut v: Vec<f64>) -> Option<(f64, Option<f64>)> {
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

pub fn suite(args: &Args, argv: &[String]) -> Result<(), String> {
    let quick = args.flag("quick");
    let mut sc = scale(quick);
    if let Some(r) = args.str("reps") {
        sc.reps = r.parse().map_err(|_| "--reps: not a number")?;
    }
    let base = sys::base_dir(args.str("dir"));
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let mount = sys::check_real_disk(&base)?;
    let out_path = PathBuf::from(args.str("out").unwrap_or("benches/compare/report.md"));
    let jsonl_path = args
        .str("jsonl")
        .map(PathBuf::from)
        .unwrap_or_else(|| out_path.with_extension("jsonl"));
    let wanted_engines: Vec<&'static str> = match args.str("engines") {
        None => engines::ALL.to_vec(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',') {
                let e = engines::ALL
                    .iter()
                    .find(|&&e| e == name)
                    .ok_or_else(|| format!("unknown engine {name:?}"))?;
                v.push(*e);
            }
            v
        }
    };
    let not_built: Vec<&str> = wanted_engines
        .iter()
        .copied()
        .filter(|e| !engines::available(e))
        .collect();
    let engines_run: Vec<&'static str> = wanted_engines
        .iter()
        .copied()
        .filter(|e| engines::available(e))
        .collect();
    let workloads: Vec<&'static str> = match args.str("workloads") {
        None => WORKLOADS.to_vec(),
        Some(list) => {
            let mut v = Vec::new();
            for name in list.split(',') {
                let w = WORKLOADS
                    .iter()
                    .find(|&&w| w == name)
                    .ok_or_else(|| format!("unknown workload {name:?}"))?;
                v.push(*w);
            }
            v
        }
    };
    if let Ok(st) = rustix::fs::statvfs(&base) {
        let free = st.f_bavail * st.f_frsize;
        let need = if quick { 2 * G } else { 6 * G };
        if free < need {
            eprintln!(
                "compare: warning: only {} free in {} (the suite may need {})",
                fmt_size(free),
                base.display(),
                fmt_size(need)
            );
        }
    }
    let configs = matrix(&sc, &engines_run, &workloads);
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let timeout = Duration::from_secs(args.num("timeout", 900)?);
    let mut jsonl =
        std::fs::File::create(&jsonl_path).map_err(|e| format!("{}: {e}", jsonl_path.display()))?;
    let started = sys::utc_now();
    let t_all = Instant::now();
    let total = configs.len() * sc.reps;
    eprintln!(
        "compare suite: {} configurations × {} repetition(s) = {total} runs in {}",
        configs.len(),
        sc.reps,
        base.display()
    );
    let mut results: Vec<Vec<Value>> = vec![Vec::new(); configs.len()];
    let mut failures: Vec<(usize, usize, String)> = Vec::new();
    let mut done = 0;
    for rep in 0..sc.reps {
        for (ci, c) in configs.iter().enumerate() {
            done += 1;
            let t = Instant::now();
            let r = run_child(&exe, &c.args(&base), timeout);
            let label = format!(
                "[{done:>4}/{total}] rep {}/{} {} {} {}",
                rep + 1,
                sc.reps,
                c.workload,
                c.label.join(" "),
                c.engine
            );
            match r {
                Ok(mut v) => {
                    eprintln!(
                        "{label}: {} ({:.1} s)",
                        headline(c.workload, &v),
                        t.elapsed().as_secs_f64()
                    );
                    v["rep"] = rep.into();
                    let _ = writeln!(jsonl, "{v}");
                    results[ci].push(v);
                }
                Err(e) => {
                    eprintln!("{label}: FAILED: {e}");
                    failures.push((ci, rep, e));
                }
            }
        }
    }
    let wall = t_all.elapsed().as_secs_f64();
    let report = render(&Render {
        args: argv,
        sc: &sc,
        quick,
        base: &base,
        mount,
        started,
        wall,
        configs: &configs,
        results: &results,
        failures: &failures,
        engines_run: &engines_run,
        not_built: &not_built,
        workloads: &workloads,
        jsonl: &jsonl_path,
    });
    if let Some(parent) = out_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(&out_path, report).map_err(|e| format!("{}: {e}", out_path.display()))?;
    eprintln!(
        "compare suite: {total} runs, {} failed, {:.0} s; report in {}, raw lines in {}",
        failures.len(),
        wall,
        out_path.display(),
        jsonl_path.display()
    );
    Ok(())
}

fn headline(workload: &str, v: &Value) -> String {
    let f = |k: &str| v[k].as_f64().unwrap_or(f64::NAN);
    match workload {
        "seqwrite" => format!("{:.0} MiB/s", f("mib_per_sec")),
        "reopen" => format!(
            "open {}, {} read, {:.0} B RSS/key",
            fmt_us(f("open_secs") * 1e6),
            fmt_bytes(f("open_read_bytes")),
            f("rss_bytes_per_key")
        ),
        "range" => format!(
            "{:.0} ops/s, {} read/op",
            f("ops_per_sec"),
            fmt_bytes(f("disk_read_bytes_per_op"))
        ),
        _ => format!(
            "{:.0} ops/s, {:.1} MiB/s, p99 {}",
            f("ops_per_sec"),
            f("mib_per_sec"),
            fmt_us(f("p99_us"))
        ),
    }
}

fn fmt_num(x: f64) -> String {
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

fn fmt_us(us: f64) -> String {
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

fn fmt_bytes(b: f64) -> String {
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

fn fmt_spread(s: Option<f64>) -> String {
    s.map_or("–".into(), |s| format!("±{:.0}%", s * 50.0))
}

fn fmt_ratio(x: Option<f64>) -> String {
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

struct Render<'a> {
    args: &'a [String],
    sc: &'a Scale,
    quick: bool,
    base: &'a Path,
    mount: sys::MountInfo,
    started: String,
    wall: f64,
    configs: &'a [Config],
    results: &'a [Vec<Value>],
    failures: &'a [(usize, usize, String)],
    engines_run: &'a [&'static str],
    not_built: &'a [&'a str],
    workloads: &'a [&'static str],
    jsonl: &'a Path,
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
        "reopen" => (
            vec!["keys", "value"],
            vec![
                c("read by open", "open_read_bytes", bytes),
                c("RSS/key (B)", "rss_bytes_per_key", num),
                c("first get", "first_get_us", us),
                c("load (s)", "load_secs", num),
            ],
        ),
        _ => (vec![], vec![]),
    }
}

fn metric(results: &[Value], key: &str) -> Option<(f64, Option<f64>)> {
    median_spread(results.iter().filter_map(|v| v[key].as_f64()).collect())
}

fn render(r: &Render) -> String {
    let mut s = String::new();
    let m = sys::machine();
    let w = |s: &mut String, t: &str| {
        s.push_str(t);
        s.push('\n');
    };
    w(&mut s, "# podstore compared with other embedded stores");
    w(&mut s, "");
    let _ = writeln!(
        s,
        "Generated by `benches/compare` on {} ({} suite, {} repetition(s) of every \
         configuration, {:.0} s in all).",
        r.started,
        if r.quick { "quick" } else { "full" },
        r.sc.reps,
        r.wall
    );
    w(&mut s, "");
    let _ = writeln!(s, "Command: `{}`", shell_join(r.args));
    w(&mut s, "");
    let _ = writeln!(
        s,
        "Every run's JSON line is in `{}`; to repeat one row, run `compare run` with the \
         parameters given under each workload below.",
        r.jsonl.display()
    );
    w(&mut s, "");
    w(&mut s, "## Machine");
    w(&mut s, "");
    w(&mut s, "| | |");
    w(&mut s, "| --- | --- |");
    let _ = writeln!(s, "| cores (nproc) | {} |", m.nproc);
    let _ = writeln!(s, "| memory | {} |", m.mem_total);
    let _ = writeln!(s, "| CPU | {} |", m.cpu);
    let _ = writeln!(s, "| kernel | {} |", m.kernel);
    let _ = writeln!(
        s,
        "| benchmark directory | `{}`: {} on `{}` mounted at `{}` ({}) |",
        r.base.display(),
        r.mount.fstype,
        r.mount.source,
        r.mount.mount_point,
        r.mount.options
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
    let _ = writeln!(s, "| podstore | {} |", podstore_version());
    let _ = writeln!(s, "| compiler | {} |", rustc_version());
    let _ = writeln!(s, "| other engines | {} |", crate_versions());
    w(&mut s, "");
    w(
        &mut s,
        "The machine is shared with other work and its virtual disk is noisy: read \
               the spread column before reading much into a ratio, and compare rows of one \
               run rather than figures across runs.",
    );
    w(&mut s, "");

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
    for e in r.engines_run {
        let _ = writeln!(s, "- **{e}**: {}", engines::settings(e));
    }
    let _ = writeln!(
        s,
        "\npodstore's defaults in this build: `{}`.\n",
        engines::podstore_defaults()
    );
    for e in r.not_built {
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

    for &wl in r.workloads {
        workload_section(&mut s, r, wl);
    }

    if !r.failures.is_empty() {
        w(&mut s, "## Failed runs");
        w(&mut s, "");
        w(
            &mut s,
            "| workload | parameters | engine | repetition | error |",
        );
        w(&mut s, "| --- | --- | --- | --- | --- |");
        for (ci, rep, e) in r.failures {
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

fn workload_text(r: &Render, wl: &str) -> String {
    let sc = r.sc;
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
             in bulk by 16 threads, synced, and the engine is closed and opened again. **cold**: \
             the page cache is dropped while the engine is closed, then every key is read at \
             most once, in a random order. **warm**: every key is read once (untimed), then keys are drawn at random \
             with replacement. Gets of whole values from {} threads, values of {}; at most \
             20 000 gets or {} s. Example: `compare run --engine podstore --workload get \
             --size 1K --threads 16 --cache cold --dataset {} --max-keys {} --secs {}`.",
            fmt_size(sc.get_dataset),
            fmt_size(sc.get_dataset),
            sc.get_max_keys,
            nums(&sc.get_threads),
            list(&sc.get_sizes),
            sc.get_secs,
            short(sc.get_dataset),
            sc.get_max_keys,
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
        "reopen" => format!(
            "{} values of 100 B are loaded in bulk by 16 threads (batches of 10 000 keys), \
             synced, settled and the store closed; the page cache is dropped, then a new process \
             (`compare probe-open`) opens the store: open time, bytes the open read from \
             disk, and VmRSS growth over the open divided by the number of keys; then it times \
             one get. Example: `compare run --engine podstore --workload reopen --keys {}`.",
            sc.reopen_keys, sc.reopen_keys
        ),
        _ => String::new(),
    }
}

fn workload_section(s: &mut String, r: &Render, wl: &str) {
    let (pkey, pname, higher_better) = primary(wl);
    let (labels, cols) = columns(wl);
    let _ = writeln!(s, "## {wl}\n");
    let _ = writeln!(s, "{}\n", workload_text(r, wl));
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
    let engines_here: Vec<&str> = r
        .engines_run
        .iter()
        .copied()
        .filter(|e| engines::skip_reason(e, wl).is_none())
        .collect();
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
    fn quick_matrix_skips_outside_ranges() {
        let sc = scale(true);
        let m = matrix(&sc, &["podstore"], &["range"]);
        // 4 KiB: whole, 1K+1K, end-4K+4K; 100 MiB: all four.
        assert_eq!(m.len(), 7);
    }

    #[test]
    fn lock_has_versions() {
        assert!(crate_versions().contains("rustix"));
    }
}
