//! `compare suite`: the workload matrix over the engines, each configuration in its own child
//! process (`compare run`), repeated; medians and spread into a markdown report.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::Args;
use crate::engines;
use crate::report::{self, Meta, Source, SuiteRun, fmt_bytes, fmt_us};
use crate::sys::{self, fmt_size};

use crate::scale::G;
pub use crate::scale::{Scale, infer_scale, scale};

pub const WORKLOADS: &[&str] = &[
    "put", "get", "range", "ranges", "seqwrite", "mix", "oldest", "reopen", "ycsb", "memlimit",
];

/// One configuration: one `compare run` command line.
pub struct Config {
    pub workload: &'static str,
    pub engine: &'static str,
    /// `--name value` pairs handed to `compare run`.
    pub params: Vec<(&'static str, String)>,
    /// Label columns of its table row (the same for every engine of one group).
    pub label: Vec<String>,
}

impl Config {
    pub fn group(&self) -> (&'static str, Vec<String>) {
        (self.workload, self.label.clone())
    }

    /// The value of `--name` handed to `compare run`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A numeric `--name` (sizes may have a unit: `4KiB`).
    pub fn num(&self, name: &str) -> Option<u64> {
        sys::parse_size(self.param(name)?).ok()
    }

    /// Whether the JSON line `run` is a run of this configuration: same workload and engine,
    /// and every parameter of `compare run` that the line's `params` echoes under the same
    /// name (size, threads, cache, range, total, keys) has the same value.
    pub fn matches(&self, run: &Value) -> bool {
        run["workload"] == self.workload
            && run["engine"] == self.engine
            && self.params.iter().all(|(k, v)| match &run["params"][*k] {
                Value::Null => true,
                Value::String(s) => s == v,
                n @ Value::Number(_) => n.as_u64().is_some() && n.as_u64() == self.num(k),
                _ => false,
            })
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

const RANGES: &[&str] = &["whole", "1K+1K", "1M+4K", "end-4K+4K"];

pub fn short(n: u64) -> String {
    fmt_size(n).replace(' ', "")
}

pub fn matrix(s: &Scale, engines: &[&'static str], workloads: &[&'static str]) -> Vec<Config> {
    let mut out = Vec::new();
    // The memlimit device floor, put before the engines' memlimit configurations at the end.
    let mut floor: Option<Config> = None;
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
                // Cold at every thread count; warm at the warm thread counts, after the cold rows
                // of their size.
                for &size in &s.get_sizes {
                    let runs = s.get_threads.iter().map(|&t| (t, "cold"));
                    let warm = s.get_warm_threads.iter().map(|&t| (t, "warm"));
                    for (t, cache) in runs.chain(warm) {
                        // Cold reads touch a small part of the data set (as random reads of a
                        // large one would), so that readahead cannot fetch it all. Warm rows run
                        // until the time limit: 20 000 warm gets of 1 KiB took 15-20 ms, too
                        // short to measure (pairs of the same two engines scattered 0.76-1.17).
                        let ops = if cache == "cold" {
                            s.get_cold_ops
                        } else {
                            s.get_warm_ops
                        };
                        add(
                            w,
                            vec![
                                ("size", short(size)),
                                ("threads", t.to_string()),
                                ("cache", cache.to_string()),
                                ("dataset", short(s.get_dataset)),
                                ("max-keys", s.get_max_keys.to_string()),
                                ("load-threads", s.get_load_threads.to_string()),
                                ("ops", ops.to_string()),
                                ("secs", s.get_secs.to_string()),
                            ],
                            vec![fmt_size(size), t.to_string(), cache.to_string()],
                        );
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
            "ranges" => add(
                w,
                vec![
                    ("keys", s.ranges_keys.to_string()),
                    ("ops", s.ranges_ops.to_string()),
                ],
                vec![fmt_size(10 << 20), s.ranges_keys.to_string()],
            ),
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
            "mix" | "oldest" => {
                let mut params = vec![
                    ("size", short(s.mix_size)),
                    ("threads", s.mix_threads.to_string()),
                    ("dataset", short(s.mix_dataset)),
                    ("ops", s.mix_ops.to_string()),
                    ("secs", s.mix_secs.to_string()),
                ];
                let mut label = vec![fmt_size(s.mix_size), s.mix_threads.to_string()];
                if w == "oldest" {
                    params.push(("oldest-pct", s.oldest_pct.to_string()));
                    label.push(format!("oldest {} %", s.oldest_pct));
                } else {
                    label.push("50 % put, 50 % get".into());
                }
                add(w, params, label);
            }
            "ycsb" => {
                for mix in &s.ycsb_mixes {
                    add(
                        w,
                        vec![
                            ("mix", mix.clone()),
                            ("records", s.ycsb_records.to_string()),
                            ("ops", s.ycsb_ops.to_string()),
                            ("threads", s.ycsb_threads.to_string()),
                            ("size", short(s.ycsb_size)),
                            ("secs", s.ycsb_secs.to_string()),
                        ],
                        vec![
                            mix.to_ascii_uppercase(),
                            fmt_size(s.ycsb_size),
                            s.ycsb_threads.to_string(),
                        ],
                    );
                }
            }
            "memlimit" => {
                // The device's floor first (fio), then each engine: load and every phase in one
                // configuration (one cgroup, one load).
                let data = s.memlimit_records * s.memlimit_size;
                floor = Some(Config {
                    workload: w,
                    engine: crate::memlimit::DEVICE,
                    params: vec![
                        ("file-size", short(data)),
                        ("threads", s.memlimit_threads.to_string()),
                        ("secs", s.fio_secs.to_string()),
                    ],
                    label: vec![fmt_size(s.memlimit_limit), fmt_size(data)],
                });
                add(
                    w,
                    vec![
                        ("mem-limit", short(s.memlimit_limit)),
                        ("records", s.memlimit_records.to_string()),
                        ("size", short(s.memlimit_size)),
                        ("ops", s.memlimit_ops.to_string()),
                        ("threads", s.memlimit_threads.to_string()),
                        ("secs", s.memlimit_secs.to_string()),
                    ],
                    vec![fmt_size(s.memlimit_limit), fmt_size(data)],
                );
            }
            "reopen" => add(
                w,
                vec![("keys", s.reopen_keys.to_string()), ("size", "100".into())],
                vec![s.reopen_keys.to_string(), "100 B".into()],
            ),
            _ => {}
        }
    }
    if let Some(f) = floor {
        let at = out
            .iter()
            .position(|c| c.workload == "memlimit")
            .unwrap_or(out.len());
        out.insert(at, f);
    }
    out
}

/// How many repetitions configuration `c` runs: `memlimit` runs at most `memlimit_reps`.
pub fn reps_for(sc: &Scale, c: &Config) -> usize {
    if c.workload == "memlimit" {
        sc.memlimit_reps.min(sc.reps)
    } else {
        sc.reps
    }
}

pub fn range_label(r: &str) -> String {
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

pub fn suite(args: &Args, argv: &[String]) -> Result<(), String> {
    let quick = args.flag("quick");
    let mut sc = scale(quick);
    if let Some(r) = args.str("reps") {
        sc.reps = r.parse().map_err(|_| "--reps: not a number")?;
    }
    // The memlimit mode's scale, to shrink it for a quick check.
    sc.memlimit_limit = args.size("mem-limit", sc.memlimit_limit)?;
    sc.memlimit_records = args.num("memlimit-records", sc.memlimit_records)?;
    sc.memlimit_ops = args.num("memlimit-ops", sc.memlimit_ops)?;
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
    let charts_dir = args.str("charts-dir").map(PathBuf::from);
    if let Some(parent) = jsonl_path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let mut jsonl =
        std::fs::File::create(&jsonl_path).map_err(|e| format!("{}: {e}", jsonl_path.display()))?;
    let total: usize = configs.iter().map(|c| reps_for(&sc, c)).sum();
    let mut run = SuiteRun {
        meta: Meta::of_this_run(argv, quick, &base, mount, &not_built),
        results: vec![Vec::new(); configs.len()],
        sc,
        engines_run,
        workloads,
        configs,
        failures: Vec::new(),
        wall: None,
        load_end: None,
        jsonl: jsonl_path.clone(),
        source: Source::Live,
    };
    // The header line: everything `compare report` needs besides the runs.
    let _ = writeln!(jsonl, "{}", report::header_record(&run));
    let t_all = Instant::now();
    eprintln!(
        "compare suite: {} configurations × {} repetition(s) (memlimit: {}) = {total} runs in {}",
        run.configs.len(),
        run.sc.reps,
        run.sc.memlimit_reps.min(run.sc.reps),
        base.display()
    );
    if run.workloads.contains(&"memlimit")
        && let Some(why) = crate::cgroup::unavailable()
    {
        eprintln!("compare suite: memlimit will be skipped: {why}");
    }
    let mut done = 0;
    for rep in 0..run.sc.reps {
        for ci in 0..run.configs.len() {
            let c = &run.configs[ci];
            if rep >= reps_for(&run.sc, c) {
                continue;
            }
            done += 1;
            let t = Instant::now();
            let timeout = if c.workload == "memlimit" {
                // The child's own limits: an hour for the load, each phase its time limit and
                // ten minutes more (to open, close and sync).
                let phases = crate::memlimit::PHASES.len() as f64;
                timeout.max(Duration::from_secs_f64(
                    3600.0 + phases * (run.sc.memlimit_secs + 600.0) + 600.0,
                ))
            } else {
                timeout
            };
            let r = run_child(&exe, &c.args(&base), timeout);
            let label = format!(
                "[{done:>4}/{total}] rep {}/{} {} {} {}",
                rep + 1,
                run.sc.reps,
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
                    run.results[ci].push(v);
                }
                Err(e) => {
                    eprintln!("{label}: FAILED: {e}");
                    let _ = writeln!(jsonl, "{}", report::failure_record(c, rep, &e));
                    run.failures.push((ci, rep, e));
                }
            }
        }
    }
    let wall = t_all.elapsed().as_secs_f64();
    run.wall = Some(wall);
    run.load_end = Some(sys::loadavg());
    let _ = writeln!(
        jsonl,
        "{}",
        report::end_record(wall, run.load_end.as_deref())
    );
    drop(jsonl);
    let charts = report::write_report(&run, &out_path, charts_dir.as_deref())?;
    eprintln!(
        "compare suite: {total} runs, {} failed, {:.0} s; report in {}{}, raw lines in {}",
        run.failures.len(),
        wall,
        out_path.display(),
        report::charts_note(&charts),
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
        "memlimit" if v["skipped"].is_string() => {
            format!("skipped: {}", v["skipped"].as_str().unwrap_or(""))
        }
        "memlimit" if v["engine"] == crate::memlimit::DEVICE => {
            format!(
                "fio: {:.0} IOPS, p99 {}",
                f("ops_per_sec"),
                fmt_us(f("p99_us"))
            )
        }
        "memlimit" => crate::memlimit::PHASES
            .iter()
            .filter(|p| v["phases"][**p].is_object())
            .map(|p| {
                let r = &v["phases"][*p];
                match r["ops_per_sec"].as_f64() {
                    Some(x) => format!("{p} {x:.0}"),
                    None => format!("{p} failed"),
                }
            })
            .collect::<Vec<_>>()
            .join(", "),
        "range" => format!(
            "{:.0} ops/s, {} read/op",
            f("ops_per_sec"),
            fmt_bytes(f("disk_read_bytes_per_op"))
        ),
        "ranges" => format!(
            "first {:.0} ops/s, {} read/op; again {:.0} ops/s; mixed {:.0} ops/s",
            f("first_ops_per_sec"),
            fmt_bytes(f("first_disk_read_bytes_per_op")),
            f("again_ops_per_sec"),
            f("mixed_ops_per_sec")
        ),
        _ => format!(
            "{:.0} ops/s, {:.1} MiB/s, p99 {}",
            f("ops_per_sec"),
            f("mib_per_sec"),
            fmt_us(f("p99_us"))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_matrix_skips_outside_ranges() {
        let sc = scale(true);
        let m = matrix(&sc, &["podstore"], &["range"]);
        // 4 KiB: whole, 1K+1K, end-4K+4K; 100 MiB: all four.
        assert_eq!(m.len(), 7);
    }

    #[test]
    fn scale_round_trips_through_json() {
        for quick in [true, false] {
            let sc = scale(quick);
            let mut other = scale(!quick);
            other.update_from_json(&sc.to_json());
            assert_eq!(other, sc);
        }
    }

    #[test]
    fn configs_match_their_own_runs_only() {
        let sc = scale(false);
        let m = matrix(&sc, &["podstore", "raw"], WORKLOADS);
        let run = serde_json::json!({"workload": "get", "engine": "raw",
            "params": {"size": 1024, "threads": 16, "cache": "warm", "keys": 8192}});
        let hits: Vec<&Config> = m.iter().filter(|c| c.matches(&run)).collect();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].label, ["1 KiB", "16", "warm"]);
        let run = serde_json::json!({"workload": "range", "engine": "podstore",
            "params": {"size": 1 << 20, "range": "end-4K+4K", "offset": 1044480, "len": 4096}});
        assert_eq!(m.iter().filter(|c| c.matches(&run)).count(), 1);
    }

    #[test]
    fn infers_the_preset_from_runs() {
        let sc = scale(true);
        let m = matrix(&sc, &["podstore"], &["put", "seqwrite"]);
        let runs: Vec<serde_json::Value> = m
            .iter()
            .map(|c| {
                let params = match c.workload {
                    "put" => serde_json::json!({"size": c.num("size"), "threads": c.num("threads"),
                        "secs_limit": sc.put_secs}),
                    _ => serde_json::json!({"size": c.num("size"), "total": c.num("total"),
                        "secs_limit": sc.seq_secs}),
                };
                serde_json::json!({"workload": c.workload, "engine": c.engine, "rep": 0,
                    "params": params})
            })
            .collect();
        let refs: Vec<&serde_json::Value> = runs.iter().collect();
        let (got, quick) = infer_scale(&refs);
        assert!(quick);
        assert_eq!(got, sc);
    }
}
