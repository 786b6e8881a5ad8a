//! Tests of the report's reading, formatting and rendering.

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
