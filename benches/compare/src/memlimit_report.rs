//! The report's `memlimit` section and issue #23's targets for that regime (see
//! [`crate::memlimit`] for how the figures are made).

use std::fmt::Write as _;

use serde_json::Value;

use crate::memlimit::{DEVICE, PHASES, phase_label};
use crate::report::{
    SuiteRun, Target, fmt_bytes, fmt_num, fmt_ratio, fmt_secs, fmt_spread, fmt_us, median_spread,
    metric, times,
};
use crate::sys::fmt_size;

/// The runs of `engine`'s memlimit configuration (none if it was not run).
fn runs<'a>(r: &'a SuiteRun, engine: &str) -> &'a [Value] {
    r.configs
        .iter()
        .position(|c| c.workload == "memlimit" && c.engine == engine)
        .map_or(&[], |ci| r.results[ci].as_slice())
}

/// The engines of the mode, in report order (podstore first).
fn engines(r: &SuiteRun) -> Vec<&'static str> {
    r.configs
        .iter()
        .filter(|c| c.workload == "memlimit" && c.engine != DEVICE)
        .map(|c| c.engine)
        .collect()
}

/// The rows of `phase` (`"load"` or a run phase) of `engine` that finished, one per repetition.
fn finished(r: &SuiteRun, engine: &str, phase: &str) -> Vec<Value> {
    runs(r, engine)
        .iter()
        .map(|v| {
            if phase == "load" {
                v["load"].clone()
            } else {
                v["phases"][phase].clone()
            }
        })
        .filter(|row| row.is_object() && row.get("error").is_none())
        .collect()
}

/// Every row of `phase` of `engine`, finished or not.
fn all_rows(r: &SuiteRun, engine: &str, phase: &str) -> Vec<Value> {
    runs(r, engine)
        .iter()
        .filter(|v| v.get("skipped").is_none())
        .map(|v| {
            if phase == "load" {
                v["load"].clone()
            } else {
                v["phases"][phase].clone()
            }
        })
        .filter(Value::is_object)
        .collect()
}

/// What a phase without a figure shows instead: `killed (OOM)` when the OOM killer (or another
/// SIGKILL) ended it, `not run` when the load did not finish, else `failed: <error>`.
fn no_figure(rows: &[Value]) -> String {
    if let Some(v) = rows.iter().find(|v| v["killed"] == true) {
        return if v["oom_kills"].as_u64().unwrap_or(0) > 0 {
            "killed (OOM)".into()
        } else {
            "killed (SIGKILL)".into()
        };
    }
    match rows.iter().find_map(|v| v["error"].as_str()) {
        Some(e) if e.starts_with("not run") => "not run (load failed)".into(),
        Some(e) => format!("failed: {}", e.replace('|', "\\|")),
        None => "failed".into(),
    }
}

/// The median ops/s of `phase` of `engine`.
fn ops(r: &SuiteRun, engine: &str, phase: &str) -> Option<f64> {
    metric(&finished(r, engine, phase), "ops_per_sec").map(|(m, _)| m)
}

/// The device floor's median IOPS.
fn device_iops(r: &SuiteRun) -> Option<f64> {
    let res = runs(r, DEVICE);
    let done: Vec<Value> = res
        .iter()
        .filter(|v| v.get("skipped").is_none())
        .cloned()
        .collect();
    metric(&done, "ops_per_sec").map(|(m, _)| m)
}

/// The best engine other than podstore's two modes on `phase`, with its ops/s.
fn best_peer(r: &SuiteRun, phase: &str) -> Option<(&'static str, f64)> {
    engines(r)
        .into_iter()
        .filter(|e| !e.starts_with("podstore"))
        .filter_map(|e| Some((e, ops(r, e, phase)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// OOM kills over every repetition of `phase` (`None`: never read).
fn oom_kills(rows: &[Value]) -> Option<u64> {
    let counts: Vec<u64> = rows
        .iter()
        .filter_map(|v| v["oom_kills"].as_u64())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

/// Why the mode did not run, if every run of it says so.
fn skipped(r: &SuiteRun) -> Option<String> {
    let all: Vec<&Value> = engines(r).iter().flat_map(|e| runs(r, e)).collect();
    if all.is_empty() {
        return None;
    }
    let why: Vec<&str> = all.iter().filter_map(|v| v["skipped"].as_str()).collect();
    (why.len() == all.len()).then(|| why[0].to_string())
}

fn text(r: &SuiteRun) -> String {
    let sc = &r.sc;
    let data = sc.memlimit_records * sc.memlimit_size;
    format!(
        "Larger than memory (issue #23). Each engine is loaded and run inside a memory cgroup of \
         its own whose limit, {limit}, counts the page cache as well as the process's memory \
         (cgroup v1 `memory.limit_in_bytes`, v2 `memory.max`; made below the harness's own \
         cgroup for the run and removed after it). {records} records of {size} ({data}, {x:.0}× \
         the limit) are loaded by 16 threads in batches of up to 10 000 puts (8 MiB: 8 192 \
         values of 1 KiB; one write transaction per batch for LMDB and redb), synced and \
         settled. Then each phase runs in a fresh process moved into the same cgroup before it \
         opens the engine (its own caches empty, the page cache as the earlier phases left it): \
         YCSB C, B, A and F on scrambled zipfian keys (θ = 0.99) and C on uniform keys, in the \
         order {order}, {ops} operations on {threads} threads each (a phase stops issuing them \
         after {secs} s), updates not synced, as under `ycsb`. Every engine's own cache is capped \
         at half the limit ({half}): a larger default is lowered to it (redb: 1 GiB, \
         `set_cache_size`), a smaller one kept (podstore: `Options::default()`'s \
         `cache_capacity`; fjall: its 32 MiB block cache, `cache_size`); LMDB has none (its \
         map, 64 GiB, holds the data; its cache is the page cache). What each peer needs to live \
         in a limit is in its settings above (redb: durable commits; fjall: bounded journals; \
         LMDB: `MDB_NORDAHEAD`); on cgroup v1, which does not write back a cgroup's dirty \
         pages as it nears its limit, each phase `fdatasync`s the engine's files whenever more \
         than 1/8 of the limit is dirty (never needed by podstore's O_DIRECT writes). **peak memory** is the cgroup's peak during the phase (v1 \
         `memory.max_usage_in_bytes`, reset before each phase; v2 `memory.peak`), page cache \
         included; **OOM kills** come from `memory.oom_control` (v2 `memory.events`): a phase \
         killed is shown as such. **disk read/op** is the phase process's `read_bytes` \
         (`/proc/self/io`) over the operations. The **device** row is fio's floor on the same \
         file system in the same suite: 4 KiB random O_DIRECT reads (`psync`) by {threads} jobs \
         for {fio} s on a file of {data}, laid out first. One repetition by default (each load \
         is minutes long); needs root, and is skipped with the reason otherwise. Example: \
         `compare run --engine podstore --workload memlimit --mem-limit {limit_s} --records \
         {records} --ops {ops} --threads {threads}` (`--phases c,a` for fewer phases; `compare \
         suite --workloads memlimit --mem-limit 256M --memlimit-records 1048576 \
         --memlimit-ops 100000` for a quick check, which `suite --quick` runs).",
        limit = fmt_size(sc.memlimit_limit),
        limit_s = crate::suite::short(sc.memlimit_limit),
        records = sc.memlimit_records,
        size = fmt_size(sc.memlimit_size),
        data = fmt_size(data),
        x = data as f64 / sc.memlimit_limit.max(1) as f64,
        order = PHASES.join(", "),
        ops = sc.memlimit_ops,
        threads = sc.memlimit_threads,
        secs = sc.memlimit_secs,
        half = fmt_size(sc.memlimit_limit / 2),
        fio = sc.fio_secs,
    )
}

/// `## memlimit`: the summary against podstore, the detail per phase and engine, the loads.
pub fn section(s: &mut String, r: &SuiteRun) {
    let _ = writeln!(s, "## memlimit\n\n{}\n", text(r));
    if let Some(why) = skipped(r) {
        let _ = writeln!(s, "**Skipped**: {why}.\n");
        return;
    }
    let engs = engines(r);
    let dev = device_iops(r);
    if let Some(why) = runs(r, DEVICE).iter().find_map(|v| v["skipped"].as_str()) {
        let _ = writeln!(s, "Device floor: **skipped**: {why}.\n");
    }
    // Summary.
    if engs.contains(&"podstore") {
        let others: Vec<&str> = engs.iter().copied().filter(|e| *e != "podstore").collect();
        let _ = writeln!(
            s,
            "Summary: median ops/s relative to podstore (above 1 = faster than podstore; \
             \"killed (OOM)\": the OOM killer ended the phase).\n"
        );
        let _ = writeln!(
            s,
            "| phase | podstore ops/s | {} | podstore ÷ best peer | podstore ÷ device |",
            others.join(" | ")
        );
        let _ = writeln!(s, "|{}", " --- |".repeat(others.len() + 4));
        for p in PHASES {
            let pod = ops(r, "podstore", p);
            let mut row = format!(
                "| {} | {} |",
                phase_label(p),
                pod.map_or("–".into(), fmt_num)
            );
            for e in &others {
                let rows = all_rows(r, e, p);
                let cell = match (ops(r, e, p), pod) {
                    (Some(x), Some(y)) if y > 0.0 => fmt_ratio(Some(x / y)),
                    (None, _) if !rows.is_empty() => no_figure(&rows),
                    _ => "–".into(),
                };
                let _ = write!(row, " {cell} |");
            }
            let best = match (pod, best_peer(r, p)) {
                (Some(x), Some((e, b))) if b > 0.0 => format!("{} ({e})", times(x / b)),
                _ => "–".into(),
            };
            let device = match (pod, dev) {
                (Some(x), Some(d)) if d > 0.0 => times(x / d),
                _ => "–".into(),
            };
            let _ = writeln!(s, "{row} {best} | {device} |");
        }
        s.push('\n');
    }
    // Detail.
    let _ = writeln!(
        s,
        "| phase | engine | ops/s | ± | p50 | p99 | disk read/op | peak memory | OOM kills | vs \
         podstore | vs device |"
    );
    let _ = writeln!(s, "|{}", " --- |".repeat(11));
    for p in PHASES {
        let pod = ops(r, "podstore", p);
        for e in &engs {
            let rows = all_rows(r, e, p);
            if rows.is_empty() {
                continue;
            }
            let done = finished(r, e, p);
            let prim = metric(&done, "ops_per_sec");
            let m =
                |k: &str, f: fn(f64) -> String| metric(&done, k).map_or("–".into(), |x| f(x.0));
            let peak = median_spread(
                rows.iter()
                    .filter_map(|v| v["peak_bytes"].as_f64())
                    .collect(),
            );
            let primtxt = prim.map_or_else(|| no_figure(&rows), |(x, _)| fmt_num(x));
            let ratio = |b: Option<f64>| match (prim, b) {
                (Some((x, _)), Some(b)) if b > 0.0 => fmt_ratio(Some(x / b)),
                _ => "–".into(),
            };
            let _ = writeln!(
                s,
                "| {} | {e} | {primtxt} | {} | {} | {} | {} | {} | {} | {} | {} |",
                phase_label(p),
                fmt_spread(prim.and_then(|p| p.1)),
                m("p50_us", fmt_us),
                m("p99_us", fmt_us),
                m("disk_read_bytes_per_op", fmt_bytes),
                peak.map_or("–".into(), |(b, _)| fmt_bytes(b)),
                oom_kills(&rows).map_or("–".into(), |n| n.to_string()),
                if *e == "podstore" && prim.is_some() {
                    "1×".into()
                } else {
                    ratio(pod)
                },
                ratio(dev),
            );
        }
    }
    let fio: Vec<Value> = runs(r, DEVICE)
        .iter()
        .filter(|v| v.get("skipped").is_none())
        .cloned()
        .collect();
    if let Some((iops, spread)) = metric(&fio, "ops_per_sec") {
        let m = |k: &str| metric(&fio, k).map_or("–".into(), |x| fmt_us(x.0));
        let _ = writeln!(
            s,
            "| 4 KiB random reads | device (fio, {} jobs) | {} | {} | {} | {} | 4 KiB | – | – | {} | 1× |",
            r.sc.memlimit_threads,
            fmt_num(iops),
            fmt_spread(spread),
            m("p50_us"),
            m("p99_us"),
            ratio_of(ops(r, "podstore", "c-uniform"), Some(iops)).map_or("–".into(), |x| {
                format!("{} (podstore C uniform ÷ fio)", times(x))
            }),
        );
    }
    s.push('\n');
    // Loads.
    let _ = writeln!(
        s,
        "Loads ({} records in the cgroup; the time includes the final sync):\n",
        r.sc.memlimit_records
    );
    let _ = writeln!(
        s,
        "| engine | load time | records/s | peak memory | OOM kills | process peak RSS | on disk after the run |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- |");
    for e in &engs {
        let rows = all_rows(r, e, "load");
        if rows.is_empty() {
            continue;
        }
        let done = finished(r, e, "load");
        let time = metric(&done, "load_secs").map(|x| x.0);
        let timetxt = time.map_or_else(|| no_figure(&rows), fmt_secs);
        let peak = median_spread(
            rows.iter()
                .filter_map(|v| v["peak_bytes"].as_f64())
                .collect(),
        );
        let rss = metric(&done, "rss_peak_bytes");
        let disk = metric(runs(r, e), "store_bytes");
        let _ = writeln!(
            s,
            "| {e} | {timetxt} | {} | {} | {} | {} | {} |",
            metric(&done, "ops_per_sec").map_or("–".into(), |x| fmt_num(x.0)),
            peak.map_or("–".into(), |(b, _)| fmt_bytes(b)),
            oom_kills(&rows).map_or("–".into(), |n| n.to_string()),
            rss.map_or("–".into(), |x| fmt_bytes(x.0)),
            disk.map_or("–".into(), |x| fmt_bytes(x.0)),
        );
    }
    s.push('\n');
}

fn ratio_of(x: Option<f64>, base: Option<f64>) -> Option<f64> {
    match (x, base) {
        (Some(x), Some(b)) if b > 0.0 => Some(x / b),
        _ => None,
    }
}

/// Issue #23's targets for this regime: B and C zipfian ≥ 3× the best peer, A and F zipfian
/// ≥ 2×, C uniform ≥ 2× and ≥ 1.0× the device's IOPS, podstore never OOM-killed. None when the
/// mode was not in the suite.
pub fn targets(r: &SuiteRun) -> Vec<Target> {
    if !r.workloads.contains(&"memlimit") {
        return Vec::new();
    }
    let regime = format!(
        "larger than memory ({} limit, {})",
        fmt_size(r.sc.memlimit_limit),
        fmt_size(r.sc.memlimit_records * r.sc.memlimit_size)
    );
    let none = |what: String| Target {
        what,
        figures: "no data".into(),
        met: None,
        short_by: String::new(),
    };
    let mut out = Vec::new();
    for (p, min) in [
        ("b", 3.0),
        ("c", 3.0),
        ("a", 2.0),
        ("f", 2.0),
        ("c-uniform", 2.0),
    ] {
        let what = format!(
            "{regime}: YCSB {} ≥ {} the best peer (#23)",
            phase_label(p),
            times(min)
        );
        out.push(match (ops(r, "podstore", p), best_peer(r, p)) {
            (Some(x), Some((e, b))) if b > 0.0 => Target {
                what,
                figures: format!(
                    "podstore {} ops/s, best peer {e} {} ops/s: **{}**",
                    fmt_num(x),
                    fmt_num(b),
                    times(x / b)
                ),
                met: Some(x / b >= min),
                short_by: format!("{} of the {} asked", times(x / b), times(min)),
            },
            _ => none(what),
        });
    }
    let what = format!("{regime}: YCSB C uniform ≥ 1.0× the device's 4 KiB random-read IOPS (#23)");
    out.push(match (ops(r, "podstore", "c-uniform"), device_iops(r)) {
        (Some(x), Some(d)) if d > 0.0 => Target {
            what,
            figures: format!(
                "podstore {} ops/s, fio {} IOPS ({} jobs): **{}**",
                fmt_num(x),
                fmt_num(d),
                r.sc.memlimit_threads,
                times(x / d)
            ),
            met: Some(x >= d),
            short_by: format!("{} of the 1.00× asked", times(x / d)),
        },
        _ => none(what),
    });
    let what = format!("{regime}: podstore within the limit (no OOM kill) (#23)");
    let rows: Vec<Value> = ["load"]
        .into_iter()
        .chain(PHASES.iter().copied())
        .flat_map(|p| all_rows(r, "podstore", p))
        .collect();
    out.push(if rows.is_empty() {
        none(what)
    } else {
        // The cgroup's count, or the phases ended by SIGKILL where it could not be read.
        let killed = rows.iter().filter(|v| v["killed"] == true).count() as u64;
        let kills = oom_kills(&rows).unwrap_or(0).max(killed);
        let peak = rows
            .iter()
            .filter_map(|v| v["peak_bytes"].as_f64())
            .fold(f64::NAN, f64::max);
        Target {
            what,
            figures: format!(
                "podstore: {kills} OOM kill(s) in the load and {} phases, highest peak {}",
                PHASES.len(),
                fmt_bytes(peak)
            ),
            met: Some(kills == 0),
            short_by: format!("{kills} kill(s)"),
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Meta, Source, end_record, header_record, load, render};
    use crate::suite::{matrix, scale};
    use serde_json::json;
    use std::path::{Path, PathBuf};

    /// A phase row as `compare run --workload memlimit` records it.
    fn row(ops: f64) -> Value {
        json!({"ops_per_sec": ops, "p50_us": 10.0, "p99_us": 200.0,
               "disk_read_bytes_per_op": 1500.0, "peak_bytes": 900.0 * 1048576.0,
               "oom_kills": 0, "killed": false})
    }

    fn killed() -> Value {
        json!({"error": "killed by SIGKILL (the OOM killer, see oom_kills)", "killed": true,
               "oom_kills": 1, "peak_bytes": 1073741824.0})
    }

    /// A made-up suite of the mode alone: podstore, fjall (killed in A), heed, and fio.
    fn sample(skipped: bool) -> SuiteRun {
        let sc = scale(true);
        let engines_run = vec!["podstore", "fjall", "heed", "raw"];
        let workloads = vec!["memlimit"];
        let configs = matrix(&sc, &engines_run, &workloads);
        let figures = |e: &str| -> [f64; 5] {
            // c, c-uniform, b, a, f
            match e {
                "podstore" => [200e3, 50e3, 300e3, 100e3, 80e3],
                "fjall" => [100e3, 20e3, 100e3, 0.0, 30e3],
                _ => [50e3, 30e3, 50e3, 40e3, 50e3],
            }
        };
        let results = configs
            .iter()
            .map(|c| {
                let mut params = json!({});
                for (k, _) in &c.params {
                    params[*k] = c.num(k).into();
                }
                let mut v = json!({"workload": "memlimit", "engine": c.engine, "rep": 0,
                                   "params": params});
                if skipped {
                    v["skipped"] = "needs root".into();
                } else if c.engine == DEVICE {
                    v["ops_per_sec"] = 40e3.into();
                    v["p99_us"] = 1200.0.into();
                } else {
                    let mut phases = serde_json::Map::new();
                    for (p, x) in PHASES.iter().zip(figures(c.engine)) {
                        phases.insert(p.to_string(), if x > 0.0 { row(x) } else { killed() });
                    }
                    v["phases"] = phases.into();
                    v["load"] = json!({"load_secs": 60.0, "ops_per_sec": 70e3,
                                       "peak_bytes": 1e9, "oom_kills": 0, "killed": false});
                }
                vec![v]
            })
            .collect();
        SuiteRun {
            meta: Meta::of_this_run(
                &["compare".into(), "suite".into()],
                true,
                Path::new("/tmp"),
                crate::sys::mount_of(Path::new("/tmp")),
                &[],
            ),
            sc,
            engines_run,
            workloads,
            configs,
            results,
            failures: Vec::new(),
            wall: Some(1.0),
            load_end: None,
            jsonl: PathBuf::from("/tmp/m.jsonl"),
            source: Source::Live,
        }
    }

    #[test]
    fn the_floor_comes_first_and_raw_is_left_out() {
        let r = sample(false);
        let engines: Vec<&str> = r.configs.iter().map(|c| c.engine).collect();
        assert_eq!(engines, [DEVICE, "podstore", "fjall", "heed"]);
    }

    #[test]
    fn targets_against_the_best_peer_and_the_device() {
        let r = sample(false);
        let t = targets(&r);
        let by = |what: &str| {
            t.iter()
                .find(|t| t.what.contains(what))
                .unwrap_or_else(|| panic!("no target {what}"))
        };
        // B: 300k against fjall's 100k: 3×, met.
        assert_eq!(by("YCSB B zipfian").met, Some(true));
        assert!(by("YCSB B zipfian").figures.contains("fjall"));
        // C: 200k against fjall's 100k: 2×, 3× asked.
        assert_eq!(by("YCSB C zipfian").met, Some(false));
        // A: fjall was killed, so the best peer is heed (40k): 2.5×, met.
        assert_eq!(by("YCSB A zipfian").met, Some(true));
        assert!(by("YCSB A zipfian").figures.contains("heed"));
        // C uniform: 50k against heed's 30k (1.67×, 2× asked), and against fio's 40k IOPS.
        assert_eq!(by("C uniform ≥ 2.00×").met, Some(false));
        assert_eq!(by("device").met, Some(true));
        assert_eq!(by("within the limit").met, Some(true));
        let md = render(&r, &[]);
        assert!(md.contains("| A zipfian | fjall | killed (OOM) |"), "{md}");
        assert!(md.contains("device (fio, 8 jobs) | 40000 |"), "{md}");
    }

    #[test]
    fn skipped_everywhere_says_why() {
        let r = sample(true);
        let md = render(&r, &[]);
        assert!(md.contains("**Skipped**: needs root."), "{md}");
        assert!(targets(&r).iter().all(|t| t.met.is_none()));
    }

    /// The mode's runs survive the suite's .jsonl: the rebuilt report is the same.
    #[test]
    fn saved_runs_render_the_same_section() {
        let r = sample(false);
        let mut lines = vec![header_record(&r).to_string()];
        lines.extend(r.results.iter().flatten().map(Value::to_string));
        lines.push(end_record(1.0, None).to_string());
        let dir = std::env::temp_dir().join(format!("compare-memlimit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.jsonl");
        std::fs::write(&path, lines.join("\n")).unwrap();
        let back = load(&path, &["compare".into(), "report".into()]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(back.failures.is_empty(), "{:?}", back.failures);
        let section = |md: String| md[md.find("## memlimit").unwrap()..].to_string();
        assert_eq!(section(render(&back, &[])), section(render(&r, &[])));
    }
}
