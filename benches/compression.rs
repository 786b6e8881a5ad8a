//! Compression benchmarks: `Compression::None` vs `Lz4` vs `Auto` on text-like and
//! incompressible values of 4 KiB, 1 MiB and 10 MiB (put and get throughput, on-disk size), and a
//! 4 KiB `get_range` at random offsets of a 10 MiB compressible value: compressed vs uncompressed
//! vs the naive way (get the whole compressed value, then slice it).
//!
//! Run: `cargo bench --bench compression`
//!
//! Before divan's timings, it prints a report measured in one process, with direct I/O (so that
//! /proc/self/io `read_bytes` counts what each read really fetched from the disk): the on-disk
//! size of each value, and for the range reads, ops/s and bytes read from disk per op, as the
//! median of several interleaved rounds. `PODSTORE_BENCH_ROUNDS` sets the rounds (default 7),
//! `PODSTORE_BENCH_DIR` the directory (default: the system temp dir; it must be on a disk that
//! takes O_DIRECT, not tmpfs).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Instant;

use divan::{Bencher, black_box};
use podstore::format::frames::{DEFAULT_FRAME_SIZE, decode_value, encode_framed};
use podstore::{Compression, IoMode, Options, Store};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn main() {
    report();
    divan::main();
    // The benches' directories carry this process id; remove what they left.
    let suffix = format!("-{}", std::process::id());
    if let Ok(rd) = std::fs::read_dir(base_dir()) {
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with("podstore-bench-zip-") && name.ends_with(&suffix) {
                let _ = std::fs::remove_dir_all(ent.path());
            }
        }
    }
}

fn base_dir() -> PathBuf {
    std::env::var_os("PODSTORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn bench_dir(name: &str) -> PathBuf {
    let dir = base_dir().join(format!("podstore-bench-zip-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

// ---------------------------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Text-like bytes: log lines with timestamps, levels, paths, hex ids and numbers. lz4 stores
/// them in about 40 % of their size.
fn text(len: usize) -> Vec<u8> {
    const LEVELS: [&str; 4] = ["INFO ", "DEBUG", "WARN ", "INFO "];
    const PATHS: [&str; 6] = [
        "/api/v1/objects",
        "/api/v1/buckets",
        "/health",
        "/api/v2/uploads",
        "/api/v1/objects/meta",
        "/metrics",
    ];
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut out = Vec::with_capacity(len + 200);
    let mut t = 1_700_000_000_000u64;
    while out.len() < len {
        t += rng.next() % 50;
        let r = rng.next();
        let line = format!(
            "{}.{:03} {} req={:08x} {} {}/{} status={} bytes={} dur_ms={}\n",
            t / 1000,
            t % 1000,
            LEVELS[(r % 4) as usize],
            rng.next() as u32,
            ["GET", "PUT", "GET", "HEAD"][(r >> 8) as usize % 4],
            PATHS[(r >> 16) as usize % PATHS.len()],
            (r >> 24) % 100_000,
            [200, 200, 204, 404, 500][(r >> 40) as usize % 5],
            (r >> 44) % 1_000_000,
            (r >> 54) % 300,
        );
        out.extend_from_slice(line.as_bytes());
    }
    out.truncate(len);
    out
}

/// Pseudo-random bytes: incompressible.
fn random(len: usize) -> Vec<u8> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = vec![0u8; len];
    for w in out.chunks_mut(8) {
        w.copy_from_slice(&rng.next().to_le_bytes()[..w.len()]);
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Data {
    Text,
    Random,
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Data::Text => "text",
            Data::Random => "random",
        })
    }
}

fn data(kind: Data, len: usize) -> Vec<u8> {
    match kind {
        Data::Text => text(len),
        Data::Random => random(len),
    }
}

/// One compression setting, named for divan's output.
#[derive(Clone, Copy)]
struct Mode(Compression);

impl fmt::Debug for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Auto => "auto",
            _ => "other",
        })
    }
}

const MODES: [Mode; 3] = [
    Mode(Compression::None),
    Mode(Compression::Lz4),
    Mode(Compression::Auto),
];

fn options(mode: Mode) -> Options {
    Options::default()
        .io_mode(IoMode::Direct)
        .compression(mode.0)
}

// ---------------------------------------------------------------------------------------------
// The report: on-disk sizes and range reads with bytes read from disk
// ---------------------------------------------------------------------------------------------

/// Bytes this process has caused to be read from storage (Linux `/proc/self/io`).
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

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".pod"))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn report() {
    let rounds: usize = std::env::var("PODSTORE_BENCH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    println!("== on-disk size of one value (the .pod files of a store holding only it, closed)");
    println!(
        "{:<8} {:>8} {:>6} {:>12} {:>12} {:>7}",
        "data", "size", "mode", "stored_len", "file bytes", "ratio"
    );
    for kind in [Data::Text, Data::Random] {
        for len in [4 * KIB, MIB, 10 * MIB] {
            let value = data(kind, len);
            for mode in MODES {
                let dir = bench_dir("size");
                let store = Store::open_with(&dir, options(mode)).unwrap();
                store.put(b"v", &value).unwrap();
                let stored = store.stored_len(b"v").unwrap().unwrap();
                store.close().unwrap();
                let bytes = dir_bytes(&dir);
                println!(
                    "{:<8} {:>8} {:>6} {:>12} {:>12} {:>7.3}",
                    format!("{kind:?}"),
                    human(len),
                    format!("{mode:?}"),
                    stored,
                    bytes,
                    stored as f64 / len as f64
                );
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
    }

    println!();
    println!(
        "== get_range of 4 KiB at random offsets of a 10 MiB text value (direct I/O), \
         median of {rounds} rounds"
    );
    let ranges = &*RANGES;
    const OPS: usize = 300;
    let cases: [(&str, &Store, bool); 3] = [
        ("uncompressed", &ranges.raw, false),
        ("lz4 range", &ranges.lz4, false),
        ("lz4 whole+slice", &ranges.lz4, true),
    ];
    let mut ops_s = vec![Vec::new(); cases.len()];
    let mut bytes_op = vec![Vec::new(); cases.len()];
    let mut rng = Rng(77);
    for _ in 0..rounds {
        for (i, (_, store, naive)) in cases.iter().enumerate() {
            // The naive way moves 10 MiB per op: fewer ops keep the round short.
            let ops = if *naive { OPS / 10 } else { OPS };
            let offsets: Vec<u64> = (0..ops)
                .map(|_| rng.next() % (RANGE_VALUE_LEN as u64 - 4096))
                .collect();
            let before = disk_read_bytes();
            let t = Instant::now();
            for &off in &offsets {
                black_box(range_op(store, off, *naive));
            }
            let secs = t.elapsed().as_secs_f64();
            let read = disk_read_bytes() - before;
            ops_s[i].push(ops as f64 / secs);
            bytes_op[i].push(read as f64 / ops as f64);
        }
    }
    let meds: Vec<(f64, f64)> = (0..cases.len())
        .map(|i| (median(&mut ops_s[i]), median(&mut bytes_op[i])))
        .collect();
    println!(
        "{:<16} {:>10} {:>16} {:>22}",
        "read", "ops/s", "disk bytes/op", "time vs uncompressed"
    );
    for (i, (name, _, _)) in cases.iter().enumerate() {
        println!(
            "{:<16} {:>10.0} {:>16.0} {:>21.2}x",
            name,
            meds[i].0,
            meds[i].1,
            meds[0].0 / meds[i].0
        );
    }
    println!(
        "lz4 range is {:.1}x faster than lz4 whole+slice",
        meds[1].0 / meds[2].0
    );

    // The first read of a value since the store was opened also reads the chunks of its frame
    // table (the last two of its stored bytes; the first one in stores written before the
    // trailing table): one 4 KiB range of each of COLD_VALUES values, in a freshly opened store.
    println!();
    println!(
        "== first get_range of 4 KiB of each of {COLD_VALUES} values of 1 MiB text, right after \
         open (frame tables not cached yet), median of {rounds} rounds"
    );
    let cold = [
        ("uncompressed", cold_store("cold-raw", Compression::None)),
        ("lz4 range", cold_store("cold-lz4", Compression::Lz4)),
    ];
    let mut ops_s = vec![Vec::new(); cold.len()];
    let mut bytes_op = vec![Vec::new(); cold.len()];
    for _ in 0..rounds {
        for (i, (_, dir)) in cold.iter().enumerate() {
            let store = Store::open_with(dir, options(Mode(Compression::None))).unwrap();
            let offsets: Vec<u64> = (0..COLD_VALUES)
                .map(|_| rng.next() % (MIB as u64 - 4096))
                .collect();
            let before = disk_read_bytes();
            let t = Instant::now();
            for (k, &off) in offsets.iter().enumerate() {
                let key = format!("v{k}");
                black_box(store.get_range(key.as_bytes(), off..off + 4096).unwrap());
            }
            let secs = t.elapsed().as_secs_f64();
            let read = disk_read_bytes() - before;
            ops_s[i].push(COLD_VALUES as f64 / secs);
            bytes_op[i].push(read as f64 / COLD_VALUES as f64);
            store.close().unwrap();
        }
    }
    let meds: Vec<(f64, f64)> = (0..cold.len())
        .map(|i| (median(&mut ops_s[i]), median(&mut bytes_op[i])))
        .collect();
    println!(
        "{:<16} {:>10} {:>16} {:>22}",
        "read", "ops/s", "disk bytes/op", "time vs uncompressed"
    );
    for (i, (name, dir)) in cold.iter().enumerate() {
        println!(
            "{:<16} {:>10.0} {:>16.0} {:>21.2}x",
            name,
            meds[i].0,
            meds[i].1,
            meds[0].0 / meds[i].0
        );
        let _ = std::fs::remove_dir_all(dir);
    }
    println!();
}

const COLD_VALUES: usize = 64;

/// A closed store holding `COLD_VALUES` values of 1 MiB text (`v0`, `v1`, ...).
fn cold_store(name: &str, c: Compression) -> PathBuf {
    let dir = bench_dir(name);
    let store = Store::open_with(&dir, options(Mode(c))).unwrap();
    for k in 0..COLD_VALUES {
        let mut v = text(MIB);
        v[..8].copy_from_slice(&(k as u64).to_le_bytes());
        store.put(format!("v{k}").as_bytes(), &v).unwrap();
    }
    store.close().unwrap();
    dir
}

fn human(len: usize) -> String {
    if len >= MIB {
        format!("{}MiB", len / MIB)
    } else {
        format!("{}KiB", len / KIB)
    }
}

// ---------------------------------------------------------------------------------------------
// divan: put and get throughput
// ---------------------------------------------------------------------------------------------

const SIZES: [usize; 3] = [4 * KIB, MIB, 10 * MIB];

/// Durable puts (the default `Durability::Sync`; values of 1 MiB and more go to blob files),
/// overwriting one key.
fn put(bencher: Bencher, kind: Data, len: usize, mode: Mode) {
    let dir = bench_dir("put");
    let store = Store::open_with(&dir, options(mode)).unwrap();
    let value = data(kind, len);
    bencher
        .counter(divan::counter::BytesCount::new(len))
        .bench_local(|| store.put(b"key", black_box(&value)).unwrap());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[divan::bench(args = MODES, consts = SIZES, max_time = 3)]
fn put_text<const LEN: usize>(bencher: Bencher, mode: Mode) {
    put(bencher, Data::Text, LEN, mode);
}

#[divan::bench(args = MODES, consts = SIZES, max_time = 3)]
fn put_random<const LEN: usize>(bencher: Bencher, mode: Mode) {
    put(bencher, Data::Random, LEN, mode);
}

/// Stores holding one value per (data, size, mode), shared by the get benches.
static LOADED: LazyLock<Vec<(Data, usize, &'static str, Store)>> = LazyLock::new(|| {
    let mut out = Vec::new();
    for kind in [Data::Text, Data::Random] {
        for len in SIZES {
            let value = data(kind, len);
            for mode in MODES {
                let dir = bench_dir(&format!("get-{kind:?}-{len}-{mode:?}"));
                let store = Store::open_with(&dir, options(mode)).unwrap();
                store.put(b"key", &value).unwrap();
                let name: &'static str = Box::leak(format!("{mode:?}").into_boxed_str());
                out.push((kind, len, name, store));
            }
        }
    }
    out
});

fn get(bencher: Bencher, kind: Data, len: usize, mode: Mode) {
    let name = format!("{mode:?}");
    let store = &LOADED
        .iter()
        .find(|(k, l, m, _)| *k == kind && *l == len && *m == name)
        .expect("loaded")
        .3;
    bencher
        .counter(divan::counter::BytesCount::new(len))
        .bench_local(|| store.get(b"key").unwrap().unwrap());
}

/// Whole-value gets, read from disk (direct I/O), decompressed and verified.
#[divan::bench(args = MODES, consts = SIZES, max_time = 3)]
fn get_text<const LEN: usize>(bencher: Bencher, mode: Mode) {
    get(bencher, Data::Text, LEN, mode);
}

#[divan::bench(args = MODES, consts = SIZES, max_time = 3)]
fn get_random<const LEN: usize>(bencher: Bencher, mode: Mode) {
    get(bencher, Data::Random, LEN, mode);
}

// ---------------------------------------------------------------------------------------------
// divan: 4 KiB range reads of a 10 MiB text value
// ---------------------------------------------------------------------------------------------

const RANGE_VALUE_LEN: usize = 10 * MIB;

struct Ranges {
    raw: Store,
    lz4: Store,
}

static RANGES: LazyLock<Ranges> = LazyLock::new(|| {
    let value = text(RANGE_VALUE_LEN);
    let open = |name: &str, c| {
        let store = Store::open_with(bench_dir(name), options(Mode(c))).unwrap();
        store.put(b"big", &value).unwrap();
        store
    };
    Ranges {
        raw: open("range-raw", Compression::None),
        lz4: open("range-lz4", Compression::Lz4),
    }
});

fn range_op(store: &Store, off: u64, naive: bool) -> Vec<u8> {
    if naive {
        let whole = store.get(b"big").unwrap().unwrap();
        whole[off as usize..off as usize + 4096].to_vec()
    } else {
        store.get_range(b"big", off..off + 4096).unwrap().unwrap()
    }
}

fn range_bench(bencher: Bencher, store: &Store, naive: bool) {
    let mut rng = Rng(12345);
    bencher
        .with_inputs(|| rng.next() % (RANGE_VALUE_LEN as u64 - 4096))
        .bench_local_values(|off| range_op(store, off, naive));
}

#[divan::bench]
fn get_range_4k_of_10m_uncompressed(bencher: Bencher) {
    range_bench(bencher, &RANGES.raw, false);
}

#[divan::bench]
fn get_range_4k_of_10m_lz4(bencher: Bencher) {
    range_bench(bencher, &RANGES.lz4, false);
}

/// The naive way: decompress the whole value, then slice it.
#[divan::bench(max_time = 3)]
fn get_range_4k_of_10m_lz4_whole(bencher: Bencher) {
    range_bench(bencher, &RANGES.lz4, true);
}

// ---------------------------------------------------------------------------------------------
// divan: the codec alone (CPU)
// ---------------------------------------------------------------------------------------------

/// Framing a 1 MiB value with the default 64 KiB frames (compressing every frame).
#[divan::bench(args = [Data::Text, Data::Random])]
fn encode_framed_1m(bencher: Bencher, kind: Data) {
    let value = data(kind, MIB);
    bencher
        .counter(divan::counter::BytesCount::new(MIB))
        .bench(|| encode_framed(black_box(&value), DEFAULT_FRAME_SIZE));
}

/// Decoding a framed 1 MiB value: the table, every frame, every frame crc.
#[divan::bench(args = [Data::Text, Data::Random])]
fn decode_framed_1m(bencher: Bencher, kind: Data) {
    let stored = encode_framed(&data(kind, MIB), DEFAULT_FRAME_SIZE);
    bencher
        .counter(divan::counter::BytesCount::new(MIB))
        .bench(|| decode_value(black_box(&stored)).unwrap());
}
