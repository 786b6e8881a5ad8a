//! SVG charts of a suite, written by hand: a few lines, rectangles, circles and text on log
//! axes are all they need, and plain SVG renders on GitHub, in browsers and in `rsvg-convert`
//! without a plotting crate (the plotting crates bring font loading, raster back ends and
//! dozens of dependencies to draw the same thing).
//!
//! - `put-<size>.svg`: one chart per value size, ops/s against writer threads, one line per
//!   engine, both axes logarithmic.
//! - `get-cold.svg`, `get-warm.svg`: ops/s per engine as grouped bars, one group per value
//!   size × reader threads, on one shared logarithmic scale so the two charts compare.
//!
//! Figures are the medians the tables show; with more than one repetition a whisker spans the
//! lowest to the highest run. Every engine keeps its colour in every chart ([`colour`]).

use std::fmt::Write as _;

use serde_json::Value;

use crate::report::{SuiteRun, fmt_num, median_spread};
use crate::suite::Config;
use crate::sys::fmt_size;

/// One chart, ready to write.
pub struct Chart {
    /// File name, e.g. `put-4k.svg`.
    pub file: String,
    /// The workload whose section links it.
    pub workload: &'static str,
    /// Alt text, e.g. `put 4 KiB`.
    pub alt: String,
    pub svg: String,
}

/// Every chart the suite's workloads have.
pub fn charts(run: &SuiteRun) -> Vec<Chart> {
    let mut out = Vec::new();
    if run.workloads.contains(&"put") {
        out.extend(put_charts(run));
    }
    if run.workloads.contains(&"get") {
        out.extend(get_charts(run));
    }
    out
}

/// An engine's colour, the same in every chart (Okabe–Ito, safe for colour-blind readers;
/// the two podstore modes in two blues, the raw floor in dark grey).
pub fn colour(engine: &str) -> &'static str {
    match engine {
        "podstore" => "#0072B2",
        "podstore-buffered" => "#56B4E9",
        "fjall" => "#E69F00",
        "redb" => "#D55E00",
        "heed" => "#009E73",
        "rocksdb" => "#8C564B",
        "files" => "#CC79A7",
        "raw" => "#404040",
        other => {
            const SPARE: [&str; 3] = ["#BCBD22", "#17BECF", "#7F7F7F"];
            SPARE[other.bytes().map(usize::from).sum::<usize>() % SPARE.len()]
        }
    }
}

/// The median, lowest and highest ops/s of a configuration's runs.
#[derive(Debug, Clone, Copy)]
struct Stat {
    med: f64,
    lo: f64,
    hi: f64,
}

fn ops_stat(results: &[Value]) -> Option<Stat> {
    let v: Vec<f64> = results
        .iter()
        .filter_map(|r| r["ops_per_sec"].as_f64())
        .filter(|x| x.is_finite())
        .collect();
    let (med, _) = median_spread(v.clone())?;
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // A log axis cannot show zero.
    (med > 0.0).then_some(Stat { med, lo, hi })
}

/// One engine's line in a put chart: (threads, figure) in thread order; `None`: no figure.
type Series<'a> = (&'a str, Vec<(u64, Option<Stat>)>);

/// One bar of a get chart.
#[derive(Debug, Clone, Copy)]
enum Bar {
    /// The suite has no such configuration.
    Absent,
    /// Configured, but no run gave a figure.
    Failed,
    Figure(Stat),
}

/// One group of a get chart: (value size, threads) and a bar per engine.
type Group<'a> = ((u64, u64), Vec<(&'a str, Bar)>);

fn slug(size: u64) -> String {
    fmt_size(size)
        .replace(' ', "")
        .replace("iB", "")
        .to_lowercase()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A logarithmic scale from values `lo..=hi` to pixels `a..=b` (b < a for a y axis).
struct LogScale {
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl LogScale {
    fn px(&self, v: f64) -> f64 {
        let t = (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10());
        self.a + t * (self.b - self.a)
    }
}

/// Pixels between the ends of a y axis and the plot frame, so that no mark sits on the frame
/// (bars start at the frame).
const PAD: f64 = 8.0;

/// The 1-2-5 steps just below `min` and just above `max`.
fn nice_bounds(min: f64, max: f64) -> (f64, f64) {
    let steps = |x: f64| {
        let p = 10f64.powf(x.log10().floor());
        [p, 2.0 * p, 5.0 * p, 10.0 * p]
    };
    let lo = steps(min)
        .into_iter()
        .rev()
        .find(|&s| s <= min * (1.0 + 1e-9))
        .unwrap_or(min);
    let hi = steps(max)
        .into_iter()
        .find(|&s| s >= max * (1.0 - 1e-9))
        .unwrap_or(max);
    if hi > lo { (lo, hi) } else { (lo, lo * 10.0) }
}

/// Ticks of a log axis over `lo..=hi`: every 1, 2 and 5 × 10^k, and whether it is a power of
/// ten.
fn log_ticks(lo: f64, hi: f64) -> Vec<(f64, bool)> {
    let mut out = Vec::new();
    let (e0, e1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    for e in e0..=e1 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powi(e);
            if v >= lo * (1.0 - 1e-9) && v <= hi * (1.0 + 1e-9) {
                out.push((v, m == 1.0));
            }
        }
    }
    out
}

/// `2000` → `2k`, `1500000` → `1.5M`, `0.5` → `0.5`.
fn fmt_tick(v: f64) -> String {
    let (x, suffix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let x = (x * 100.0).round() / 100.0;
    format!("{x}{suffix}")
}

/// The opening of a chart: canvas, white background, title and subtitle.
fn begin(w: f64, h: f64, left: f64, title: &str, subtitle: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w:.0}" height="{h:.0}" viewBox="0 0 {w:.0} {h:.0}" font-family="Helvetica, Arial, sans-serif" font-size="12" role="img" aria-label="{t}">"#,
        t = esc(title)
    );
    let _ = writeln!(s, "<title>{}</title>", esc(title));
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r##"<text x="{left:.0}" y="26" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
        esc(title)
    );
    let _ = writeln!(
        s,
        r##"<text x="{left:.0}" y="45" fill="#555">{}</text>"##,
        esc(subtitle)
    );
    s
}

/// The y axis: grid lines, tick labels (every 1-2-5 step when the axis spans at most three
/// decades, else powers of ten only) and the axis title.
fn y_axis(s: &mut String, y: &LogScale, x0: f64, x1: f64, title: &str) {
    let ticks = log_ticks(y.lo, y.hi);
    let all_labels = y.hi / y.lo <= 1000.0 * (1.0 + 1e-9);
    for (v, major) in ticks {
        let py = y.px(v);
        let grid = if major { "#d0d0d0" } else { "#ececec" };
        let _ = writeln!(
            s,
            r#"<line x1="{x0:.1}" y1="{py:.1}" x2="{x1:.1}" y2="{py:.1}" stroke="{grid}"/>"#
        );
        if major || all_labels {
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#333">{}</text>"##,
                x0 - 6.0,
                py + 4.0,
                fmt_tick(v)
            );
        }
    }
    let yc = (y.a + y.b) / 2.0;
    let _ = writeln!(
        s,
        r##"<text x="18" y="{yc:.1}" text-anchor="middle" transform="rotate(-90 18 {yc:.1})" fill="#222">{}</text>"##,
        esc(title)
    );
}

/// The plot frame.
fn frame(s: &mut String, x0: f64, y0: f64, x1: f64, y1: f64) {
    let _ = writeln!(
        s,
        r##"<rect x="{x0:.1}" y="{y0:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#888"/>"##,
        x1 - x0,
        y1 - y0
    );
}

/// A vertical min–max whisker with caps.
fn whisker(s: &mut String, x: f64, y_lo: f64, y_hi: f64, colour: &str) {
    let _ = writeln!(
        s,
        r#"<path d="M{x:.1} {y_lo:.1}V{y_hi:.1}M{:.1} {y_lo:.1}h6M{:.1} {y_hi:.1}h6" stroke="{colour}" stroke-width="1.2" fill="none"/>"#,
        x - 3.0,
        x - 3.0
    );
}

/// The legend, one row per engine, at the right of the plot; `sample` draws an engine's key.
fn legend(
    s: &mut String,
    x: f64,
    y: f64,
    engines: &[&str],
    sample: impl Fn(&mut String, f64, f64, &str),
) {
    let _ = writeln!(
        s,
        r##"<text x="{x:.1}" y="{y:.1}" font-weight="bold" fill="#222">engine</text>"##
    );
    for (i, e) in engines.iter().enumerate() {
        let ry = y + 20.0 + 20.0 * i as f64;
        sample(s, x, ry - 4.0, e);
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{ry:.1}" fill="#222">{}</text>"##,
            x + 32.0,
            esc(e)
        );
    }
}

/// How a chart's figures were made, for its subtitle.
fn figures_note(reps: usize) -> String {
    if reps > 1 {
        format!("median of {reps} runs, whiskers from the lowest to the highest")
    } else {
        "one run each".into()
    }
}

fn put_charts(run: &SuiteRun) -> Vec<Chart> {
    let engines = run.engines_in("put");
    let puts: Vec<&Config> = run.configs.iter().filter(|c| c.workload == "put").collect();
    let mut sizes: Vec<u64> = Vec::new();
    for c in &puts {
        if let Some(z) = c.num("size").filter(|z| !sizes.contains(z)) {
            sizes.push(z);
        }
    }
    let mut out = Vec::new();
    for size in sizes {
        // (engine, [(threads, stat)]) in thread order.
        let mut series: Vec<Series> = Vec::new();
        let mut threads: Vec<u64> = Vec::new();
        for &e in &engines {
            let mut pts: Vec<(u64, Option<Stat>)> = run
                .configs
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.workload == "put" && c.engine == e && c.num("size") == Some(size)
                })
                .filter_map(|(ci, c)| Some((c.num("threads")?, ops_stat(&run.results[ci]))))
                .collect();
            pts.sort_by_key(|p| p.0);
            for p in &pts {
                if !threads.contains(&p.0) {
                    threads.push(p.0);
                }
            }
            series.push((e, pts));
        }
        threads.sort_unstable();
        let stats: Vec<Stat> = series
            .iter()
            .flat_map(|s| &s.1)
            .filter_map(|p| p.1)
            .collect();
        if stats.is_empty() || threads.is_empty() {
            continue;
        }
        let title = format!("put, {} values: ops/s by writer threads", fmt_size(size));
        let subtitle = format!(
            "durable puts of fresh keys; {}; log scales",
            figures_note(run.sc.reps)
        );
        out.push(Chart {
            file: format!("put-{}.svg", slug(size)),
            workload: "put",
            alt: format!("put {}", fmt_size(size)),
            svg: line_chart(
                &title,
                &subtitle,
                &threads,
                &series,
                &stats,
                run.sc.reps > 1,
            ),
        });
    }
    out
}

/// Ops/s (log) against threads (log), one line per engine.
fn line_chart(
    title: &str,
    subtitle: &str,
    threads: &[u64],
    series: &[Series],
    stats: &[Stat],
    whiskers: bool,
) -> String {
    let (w, h) = (740.0, 440.0);
    let (left, right, top, bottom) = (72.0, 170.0, 62.0, 58.0);
    let (x0, x1, y0, y1) = (left, w - right, top, h - bottom);
    let min = stats
        .iter()
        .map(|s| if whiskers { s.lo } else { s.med })
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let max = stats
        .iter()
        .map(|s| if whiskers { s.hi } else { s.med })
        .fold(0.0, f64::max);
    let (lo, hi) = nice_bounds(min, max);
    let y = LogScale {
        lo,
        hi,
        a: y1 - PAD,
        b: y0 + PAD,
    };
    let (tmin, tmax) = (threads[0] as f64, threads[threads.len() - 1] as f64);
    let (tlo, thi) = if tmax > tmin {
        (tmin, tmax)
    } else {
        (tmin / 2.0, tmin * 2.0)
    };
    let pad = 0.06 * (x1 - x0);
    let x = LogScale {
        lo: tlo,
        hi: thi,
        a: x0 + pad,
        b: x1 - pad,
    };

    let mut s = begin(w, h, left, title, subtitle);
    y_axis(&mut s, &y, x0, x1, "ops/s (log scale)");
    for &t in threads {
        let px = x.px(t as f64);
        let _ = writeln!(
            s,
            r##"<line x1="{px:.1}" y1="{y0:.1}" x2="{px:.1}" y2="{y1:.1}" stroke="#ececec"/>"##
        );
        let _ = writeln!(
            s,
            r##"<text x="{px:.1}" y="{:.1}" text-anchor="middle" fill="#333">{t}</text>"##,
            y1 + 17.0
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">writer threads (log scale)</text>"##,
        (x0 + x1) / 2.0,
        y1 + 42.0
    );
    frame(&mut s, x0, y0, x1, y1);
    let style = |e: &str| {
        let width = if e == "podstore" { 2.75 } else { 1.75 };
        let dash = if e == "raw" {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        (width, dash)
    };
    for (e, pts) in series {
        let c = colour(e);
        let (width, dash) = style(e);
        // The line breaks where a configuration has no figure.
        let mut d = String::new();
        let mut pen_down = false;
        for &(t, st) in pts {
            match st {
                Some(st) => {
                    let _ = write!(
                        d,
                        "{}{:.1} {:.1}",
                        if pen_down { "L" } else { "M" },
                        x.px(t as f64),
                        y.px(st.med)
                    );
                    pen_down = true;
                }
                None => pen_down = false,
            }
        }
        let _ = writeln!(
            s,
            r#"<path d="{d}" fill="none" stroke="{c}" stroke-width="{width}"{dash} stroke-linejoin="round"/>"#
        );
        for &(t, st) in pts {
            let Some(st) = st else { continue };
            let (px, py) = (x.px(t as f64), y.px(st.med));
            if whiskers && st.hi > st.lo {
                whisker(&mut s, px, y.px(st.lo.max(lo)), y.px(st.hi), c);
            }
            let r = if *e == "podstore" { 4.5 } else { 3.5 };
            let _ = writeln!(
                s,
                r#"<circle cx="{px:.1}" cy="{py:.1}" r="{r}" fill="{c}" stroke="white" stroke-width="1"><title>{}, {}: {} ops/s</title></circle>"#,
                esc(e),
                plural(t, "thread", "threads"),
                fmt_num(st.med)
            );
        }
    }
    let names: Vec<&str> = series.iter().map(|s| s.0).collect();
    legend(&mut s, x1 + 18.0, y0 + 4.0, &names, |s, lx, ly, e| {
        let (width, dash) = style(e);
        let c = colour(e);
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{c}" stroke-width="{width}"{dash}/><circle cx="{:.1}" cy="{ly:.1}" r="3.5" fill="{c}"/>"#,
            lx + 24.0,
            lx + 12.0
        );
    });
    s.push_str("</svg>\n");
    s
}

fn get_charts(run: &SuiteRun) -> Vec<Chart> {
    let engines = run.engines_in("get");
    // Groups (size, threads) in matrix order.
    let mut groups: Vec<(u64, u64)> = Vec::new();
    for c in run.configs.iter().filter(|c| c.workload == "get") {
        if let (Some(z), Some(t)) = (c.num("size"), c.num("threads"))
            && !groups.contains(&(z, t))
        {
            groups.push((z, t));
        }
    }
    if groups.is_empty() || engines.is_empty() {
        return Vec::new();
    }
    let bar = |cache: &str, g: (u64, u64), e: &str| {
        let ci = run.configs.iter().position(|c| {
            c.workload == "get"
                && c.engine == e
                && c.param("cache") == Some(cache)
                && c.num("size") == Some(g.0)
                && c.num("threads") == Some(g.1)
        });
        match ci.map(|ci| ops_stat(&run.results[ci])) {
            None => Bar::Absent,
            Some(None) => Bar::Failed,
            Some(Some(st)) => Bar::Figure(st),
        }
    };
    let whiskers = run.sc.reps > 1;
    // One scale for cold and warm, so that the two charts compare.
    let mut all = Vec::new();
    for cache in ["cold", "warm"] {
        for &g in &groups {
            for e in &engines {
                if let Bar::Figure(st) = bar(cache, g, e) {
                    all.push(st);
                }
            }
        }
    }
    if all.is_empty() {
        return Vec::new();
    }
    let min = all
        .iter()
        .map(|s| if whiskers { s.lo } else { s.med })
        .filter(|&v| v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let max = all
        .iter()
        .map(|s| if whiskers { s.hi } else { s.med })
        .fold(0.0, f64::max);
    let bounds = nice_bounds(min, max);
    let dropped: Vec<bool> = run
        .configs
        .iter()
        .zip(&run.results)
        .filter(|(c, _)| c.workload == "get" && c.param("cache") == Some("cold"))
        .flat_map(|(_, r)| {
            r.iter()
                .filter_map(|v| v["params"]["page_cache_dropped"].as_bool())
        })
        .collect();
    let mut out = Vec::new();
    for cache in ["cold", "warm"] {
        // Only the groups this cache state was run for (warm rows are a subset).
        let data: Vec<Group> = groups
            .iter()
            .map(|&g| (g, engines.iter().map(|&e| (e, bar(cache, g, e))).collect()))
            .filter(|(_, v): &Group| v.iter().any(|(_, b)| !matches!(b, Bar::Absent)))
            .collect();
        if data.is_empty() {
            continue;
        }
        let how = match cache {
            "cold" if !dropped.is_empty() && dropped.iter().all(|&d| d) => {
                "page cache dropped, each key read at most once"
            }
            "cold" => "engine reopened, page cache NOT dropped (not root)",
            _ => "every key read once untimed, then random gets",
        };
        let title = format!("get, {cache} cache: ops/s by value size and reader threads");
        let subtitle = format!(
            "whole-value gets, {how}; {}; log scale",
            figures_note(run.sc.reps)
        );
        out.push(Chart {
            file: format!("get-{cache}.svg"),
            workload: "get",
            alt: format!("get {cache}"),
            svg: bar_chart(&title, &subtitle, &data, bounds, whiskers),
        });
    }
    out
}

/// Ops/s (log) as bars, one group per (size, threads), one bar per engine.
fn bar_chart(
    title: &str,
    subtitle: &str,
    data: &[Group],
    (lo, hi): (f64, f64),
    whiskers: bool,
) -> String {
    let n_eng = data[0].1.len().max(1) as f64;
    let n_groups = data.len() as f64;
    let (left, right, top, bottom) = (72.0, 170.0, 62.0, 72.0);
    // Wide enough for the subtitle (12 px text, about 6.5 px a character) when there are few
    // groups (the warm chart).
    let plot_w = (n_groups * (n_eng * 11.0 + 20.0))
        .max(500.0)
        .max(subtitle.chars().count() as f64 * 6.5 + 10.0 - right);
    let (w, h) = (left + plot_w + right, 440.0);
    let (x0, x1, y0, y1) = (left, left + plot_w, top, h - bottom);
    let y = LogScale {
        lo,
        hi,
        a: y1 - PAD,
        b: y0 + PAD,
    };
    let group_w = plot_w / n_groups;
    let bar_w = ((group_w - 20.0) / n_eng).min(18.0);

    let mut s = begin(w, h, left, title, subtitle);
    let mut any_failed = false;
    // Alternate group shading, under the grid.
    for (gi, _) in data.iter().enumerate() {
        if gi % 2 == 1 {
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{y0:.1}" width="{group_w:.1}" height="{:.1}" fill="#f6f6f6"/>"##,
                x0 + gi as f64 * group_w,
                y1 - y0
            );
        }
    }
    y_axis(&mut s, &y, x0, x1, "ops/s (log scale)");
    for (gi, ((size, threads), bars)) in data.iter().enumerate() {
        let gx = x0 + gi as f64 * group_w;
        let cx = gx + group_w / 2.0;
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            y1 + 17.0,
            fmt_size(*size)
        );
        let _ = writeln!(
            s,
            r##"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" fill="#333">{}</text>"##,
            y1 + 31.0,
            plural(*threads, "thread", "threads")
        );
        let bx0 = cx - bar_w * n_eng / 2.0;
        for (bi, (e, st)) in bars.iter().enumerate() {
            let c = colour(e);
            let bx = bx0 + bi as f64 * bar_w;
            let tip = format!(
                "{}, {}, {}",
                esc(e),
                fmt_size(*size),
                plural(*threads, "thread", "threads")
            );
            match st {
                Bar::Figure(st) => {
                    let top = y.px(st.med);
                    let _ = writeln!(
                        s,
                        r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{c}"><title>{tip}: {} ops/s</title></rect>"#,
                        bx + 0.5,
                        bar_w - 1.0,
                        (y1 - top).max(0.0),
                        fmt_num(st.med)
                    );
                    if whiskers && st.hi > st.lo {
                        whisker(
                            &mut s,
                            bx + bar_w / 2.0,
                            y.px(st.lo.max(lo)),
                            y.px(st.hi),
                            "#222",
                        );
                    }
                }
                Bar::Failed => {
                    any_failed = true;
                    let _ = writeln!(
                        s,
                        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="14" font-weight="bold" fill="{c}">×<title>{tip}: failed</title></text>"#,
                        bx + bar_w / 2.0,
                        y1 - 4.0
                    );
                }
                Bar::Absent => {}
            }
        }
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#222">value size, reader threads</text>"##,
        (x0 + x1) / 2.0,
        y1 + 55.0
    );
    frame(&mut s, x0, y0, x1, y1);
    let names: Vec<&str> = data[0].1.iter().map(|b| b.0).collect();
    legend(&mut s, x1 + 18.0, y0 + 4.0, &names, |s, lx, ly, e| {
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{:.1}" width="24" height="10" fill="{}"/>"#,
            lx,
            ly - 5.0,
            colour(e)
        );
    });
    if any_failed {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#555">× = failed, no figure</text>"##,
            x1 + 18.0,
            y0 + 4.0 + 20.0 * (names.len() as f64 + 1.5)
        );
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_ticks() {
        assert_eq!(nice_bounds(230.0, 27000.0), (200.0, 50000.0));
        assert_eq!(nice_bounds(100.0, 100.0), (100.0, 1000.0));
        let t: Vec<f64> = log_ticks(200.0, 50000.0).iter().map(|t| t.0).collect();
        assert_eq!(
            t,
            [
                200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0, 20000.0, 50000.0
            ]
        );
        assert_eq!(fmt_tick(20000.0), "20k");
        assert_eq!(fmt_tick(1.5e6), "1.5M");
        assert_eq!(fmt_tick(0.5), "0.5");
        assert_eq!(slug(4096), "4k");
        assert_eq!(slug(100 << 20), "100m");
        assert_eq!(slug(100), "100b");
    }

    #[test]
    fn escapes_text() {
        assert_eq!(esc("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
    }
}
