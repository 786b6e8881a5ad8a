//! Range reads of large values, the way a user serving ranges reads them (issue 37): random
//! 4 KiB ranges over many 10 MiB values, read once and then again; a mixed trace (hot ranges of
//! a few values); and values streamed out through a `ValueReader` in 8 KiB reads. Each against
//! the same store with its read cache off and against one file per value (buffered `pread`,
//! the page cache dropped before each pass), interleaved, `RANGES_REPS` times: ops/s and bytes
//! read from the disk per op (`/proc/self/io` `read_bytes`, which direct reads and the page
//! cache's misses both count), medians and the per-repetition ratios.
//!
//! ```text
//! RANGES_DIR=/path/on/disk cargo bench --bench ranges    # 100 values of 10 MiB, 3 reps
//! ```
//! Environment: `RANGES_DIR` (a temporary directory if unset: it must take O_DIRECT, not
//! tmpfs), `RANGES_VALUES` (100), `RANGES_MIB` (10), `RANGES_OPS` (3000), `RANGES_REPS` (3),
//! `RANGES_STREAM_MIB` (30: bytes streamed per stream pass). Root drops the page cache before
//! each pass (`/proc/sys/vm/drop_caches`); elsewhere the files' rows are warm after the first.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use podstore::{Options, Store};

const KIB: u64 = 1 << 10;
const RANGE: u64 = 4 * KIB;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn disk_read_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|l| l.strip_prefix("read_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Drops the page cache (as root), then reads this program's own file back into it: its code,
/// dropped too, would otherwise be faulted back in during the pass that follows, slowing the
/// first reads and counting in their disk bytes.
fn drop_page_cache() {
    let _ = std::fs::write("/proc/sys/vm/drop_caches", "3");
    if let Ok(exe) = std::env::current_exe() {
        let _ = std::fs::read(exe);
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn key(i: u64) -> String {
    format!("objects/{i:05}.bin")
}

/// Where the ranges are read: a store (default options, or its cache off) or one file per value.
enum Engine {
    Store(Store),
    Files(PathBuf),
}

impl Engine {
    fn range(&self, i: u64, at: u64, out: &mut [u8]) {
        match self {
            Engine::Store(s) => {
                let got = s
                    .get_range(key(i), at..at + out.len() as u64)
                    .unwrap()
                    .expect("present");
                out.copy_from_slice(&got);
            }
            Engine::Files(dir) => {
                let f = File::open(dir.join(key(i).replace('/', "_"))).unwrap();
                f.read_exact_at(out, at).unwrap();
            }
        }
    }

    /// Streams value `i` out in 8 KiB reads.
    fn stream(&self, i: u64) -> u64 {
        let mut buf = [0u8; 8192];
        let mut total = 0;
        let mut reader: Box<dyn Read> = match self {
            Engine::Store(s) => Box::new(s.reader(key(i)).unwrap().expect("present")),
            Engine::Files(dir) => Box::new(File::open(dir.join(key(i).replace('/', "_"))).unwrap()),
        };
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                return total;
            }
            total += n as u64;
        }
    }
}

/// One pass of `n` operations: ops/s and disk bytes per op.
fn pass(n: usize, mut op: impl FnMut(usize)) -> (f64, f64) {
    let (bytes0, t) = (disk_read_bytes(), Instant::now());
    for i in 0..n {
        op(i);
    }
    let secs = t.elapsed().as_secs_f64();
    let read = disk_read_bytes() - bytes0;
    (n as f64 / secs, read as f64 / n as f64)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let values = env("RANGES_VALUES", 100);
    let len = env("RANGES_MIB", 10) << 20;
    let ops = env("RANGES_OPS", 3000) as usize;
    let reps = env("RANGES_REPS", 3);
    let stream_bytes = env("RANGES_STREAM_MIB", 30) << 20;
    let tmp;
    let root = match std::env::var_os("RANGES_DIR") {
        Some(d) => PathBuf::from(d).join("ranges-bench"),
        None => {
            tmp = tempfile::tempdir().expect("temporary directory");
            tmp.path().join("ranges-bench")
        }
    };
    let _ = std::fs::remove_dir_all(&root);
    let (store_dir, files_dir) = (root.join("store"), root.join("files"));
    std::fs::create_dir_all(&files_dir).unwrap();
    load(&store_dir, &files_dir, values, len);

    // The traces: random ranges (unaligned), and a mixed one: 90 % of reads in 32 hot 64 KiB
    // regions of 4 values, the rest random.
    let mut rng = Rng(0x5EED_0037);
    let random: Vec<(u64, u64)> = (0..ops)
        .map(|_| (rng.next() % values, rng.next() % (len - RANGE)))
        .collect();
    let hot: Vec<(u64, u64)> = (0..32)
        .map(|_| (rng.next() % 4, rng.next() % (len - (64 << 10))))
        .collect();
    let mixed: Vec<(u64, u64)> = (0..ops)
        .map(|_| {
            if rng.next() % 10 < 9 {
                let (i, base) = hot[(rng.next() % 32) as usize];
                (i, base + rng.next() % ((64 << 10) - RANGE))
            } else {
                (rng.next() % values, rng.next() % (len - RANGE))
            }
        })
        .collect();
    let streams = stream_bytes.div_ceil(len).max(1);

    let engines = ["podstore", "podstore cache off", "files"];
    let mut rows: BTreeMap<(String, &str), Vec<(f64, f64)>> = BTreeMap::new();
    for rep in 0..reps {
        // Interleaved, the order turned each repetition.
        for e in 0..engines.len() {
            let name = engines[(e + rep as usize) % engines.len()];
            let engine = match name {
                "podstore" => {
                    Engine::Store(Store::open_with(&store_dir, Options::default()).unwrap())
                }
                "podstore cache off" => Engine::Store(
                    Store::open_with(&store_dir, Options::default().cache_capacity(0)).unwrap(),
                ),
                _ => Engine::Files(files_dir.clone()),
            };
            // Whole values streamed out first, so that no earlier pass has read any of them:
            // MiB/s, and disk bytes per byte streamed.
            drop_page_cache();
            let (bytes0, t) = (disk_read_bytes(), Instant::now());
            let total: u64 = (0..streams)
                .map(|n| engine.stream((n * 11 + 3) % values))
                .sum();
            let mib_s = total as f64 / (1 << 20) as f64 / t.elapsed().as_secs_f64();
            let per_byte = (disk_read_bytes() - bytes0) as f64 / total as f64;
            rows.entry(("stream in 8 KiB reads (MiB/s)".into(), name))
                .or_default()
                .push((mib_s, per_byte));
            let mut buf = vec![0u8; RANGE as usize];
            let mut run = |what: &str, trace: &[(u64, u64)]| {
                let (ops_s, per_op) = pass(trace.len(), |n| {
                    let (i, at) = trace[n];
                    engine.range(i, at, &mut buf);
                });
                rows.entry((what.to_string(), name))
                    .or_default()
                    .push((ops_s, per_op));
            };
            drop_page_cache();
            run("random 4 KiB ranges, first pass", &random);
            run("random 4 KiB ranges, again", &random);
            run("mixed: 90 % in 32 hot 64 KiB regions", &mixed);
            if let Engine::Store(s) = engine {
                s.close().unwrap();
            }
            eprintln!("rep {rep}: {name} done");
        }
    }

    println!(
        "| workload | engine | ops/s (median) | disk bytes per op (median) | ops/s ÷ podstore cache off (per rep) | ops/s ÷ files (per rep) |"
    );
    println!("|---|---|---:|---:|---|---|");
    let workloads: Vec<String> = {
        let mut w: Vec<String> = rows.keys().map(|(w, _)| w.clone()).collect();
        w.dedup();
        w
    };
    for w in &workloads {
        for name in engines {
            let r = &rows[&(w.clone(), name)];
            let mut ops: Vec<f64> = r.iter().map(|x| x.0).collect();
            let mut bytes: Vec<f64> = r.iter().map(|x| x.1).collect();
            let ratio = |other: &str| {
                let o = &rows[&(w.clone(), other)];
                r.iter()
                    .zip(o)
                    .map(|(a, b)| format!("{:.2}", a.0 / b.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let per_op = if w.starts_with("stream") {
                format!("{:.3} B per B", median(&mut bytes))
            } else {
                format!("{:.1} KiB", median(&mut bytes) / 1024.0)
            };
            println!(
                "| {w} | {name} | {:.0} | {per_op} | {} | {} |",
                median(&mut ops),
                ratio("podstore cache off"),
                ratio("files")
            );
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// Writes the values into a store and into one file each (synced), unless already there.
fn load(store_dir: &Path, files_dir: &Path, values: u64, len: u64) {
    let store = Store::open_with(store_dir, Options::default()).unwrap();
    let mut rng = Rng(0xDA7A);
    let mut v = vec![0u8; len as usize];
    for i in 0..values {
        for w in v.chunks_mut(8) {
            let x = rng.next().to_le_bytes();
            w.copy_from_slice(&x[..w.len()]);
        }
        store.put(key(i), &v).unwrap();
        let path = files_dir.join(key(i).replace('/', "_"));
        std::fs::write(&path, &v).unwrap();
        File::open(&path).unwrap().sync_all().unwrap();
    }
    store.close().unwrap();
}
