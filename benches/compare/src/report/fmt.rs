//! Number, size and time formatting of the report, and the build facts it records (git, rustc, crate versions).

use super::*;

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

pub(crate) fn fmt_pct(fraction: f64) -> String {
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

pub(crate) fn shell_join(args: &[String]) -> String {
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

pub(crate) fn git(args: &[&str]) -> Option<String> {
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

pub(crate) fn podstore_version() -> String {
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

pub(crate) fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// Versions of the other engines' crates, from this package's Cargo.lock.
pub(crate) fn crate_versions() -> String {
    let lock = include_str!("../../Cargo.lock");
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
