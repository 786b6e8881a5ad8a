//! The sizes, thread counts and limits of a suite ([`Scale`]): the quick and full presets, their
//! JSON form (recorded in a suite's header line) and, for a `.jsonl` without a header, the
//! preset inferred from its runs.

use serde_json::Value;

/// Declares [`Scale`] once, with its JSON form (the suite's header line records it, so that
/// `compare report` describes a saved suite with the limits it ran with).
macro_rules! scale {
    ($($field:ident: $ty:ty,)*) => {
        /// The sizes, thread counts and limits of one suite.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Scale {
            $(pub $field: $ty,)*
        }

        impl Scale {
            pub fn to_json(&self) -> Value {
                let mut m = serde_json::Map::new();
                $(m.insert(stringify!($field).into(), serde_json::json!(self.$field));)*
                Value::Object(m)
            }

            /// Takes every field `v` has (fields it lacks keep their value).
            pub fn update_from_json(&mut self, v: &Value) {
                $(if let Some(x) = FromJson::from_json(&v[stringify!($field)]) {
                    self.$field = x;
                })*
            }
        }
    };
}

scale! {
    reps: usize,
    put_sizes: Vec<u64>,
    put_threads: Vec<u64>,
    put_secs: f64,
    put_max_bytes: u64,
    put_max_ops: u64,
    get_sizes: Vec<u64>,
    get_threads: Vec<u64>,
    get_warm_threads: Vec<u64>,
    get_dataset: u64,
    get_max_keys: u64,
    get_load_threads: u64,
    get_cold_ops: u64,
    // The most gets a warm row measures: it runs until `get_secs` unless it gets there first.
    get_warm_ops: u64,
    get_secs: f64,
    range_sizes: Vec<u64>,
    range_ops: u64,
    range_secs: f64,
    // ranges: random 4 KiB ranges over `ranges_keys` values of 10 MiB, `ranges_ops` per pass.
    ranges_keys: u64,
    ranges_ops: u64,
    seq_sizes: Vec<u64>,
    seq_total: u64,
    seq_secs: f64,
    mix_size: u64,
    mix_threads: u64,
    mix_dataset: u64,
    mix_ops: u64,
    mix_secs: f64,
    oldest_pct: u64,
    reopen_keys: u64,
    ycsb_mixes: Vec<String>,
    ycsb_records: u64,
    ycsb_ops: u64,
    ycsb_threads: u64,
    ycsb_size: u64,
    ycsb_secs: f64,
    // memlimit: the cgroup's memory limit, the data set, the run phases' operations, threads
    // and time limit, repetitions (at most `reps`), and the fio floor's seconds.
    memlimit_limit: u64,
    memlimit_records: u64,
    memlimit_size: u64,
    memlimit_ops: u64,
    memlimit_threads: u64,
    memlimit_secs: f64,
    memlimit_reps: usize,
    fio_secs: u64,
}

trait FromJson: Sized {
    fn from_json(v: &Value) -> Option<Self>;
}

impl FromJson for u64 {
    fn from_json(v: &Value) -> Option<u64> {
        v.as_u64()
    }
}

impl FromJson for usize {
    fn from_json(v: &Value) -> Option<usize> {
        v.as_u64()?.try_into().ok()
    }
}

impl FromJson for f64 {
    fn from_json(v: &Value) -> Option<f64> {
        v.as_f64()
    }
}

impl FromJson for Vec<String> {
    fn from_json(v: &Value) -> Option<Vec<String>> {
        v.as_array()?
            .iter()
            .map(|x| x.as_str().map(str::to_string))
            .collect()
    }
}

impl FromJson for Vec<u64> {
    fn from_json(v: &Value) -> Option<Vec<u64>> {
        v.as_array()?.iter().map(Value::as_u64).collect()
    }
}

/// For a `.jsonl` written before the suite recorded its scale: the preset (quick or full) whose
/// sizes and thread counts match the runs best, with every figure the runs do record (sizes,
/// thread counts, time limits, `seqwrite` totals, `reopen` keys, repetitions) taken from them.
/// Returns the scale and whether it is the quick preset.
pub fn infer_scale(runs: &[&Value]) -> (Scale, bool) {
    let of = |wl: &str, key: &str| -> Vec<u64> {
        let mut v: Vec<u64> = runs
            .iter()
            .filter(|r| r["workload"] == wl)
            .filter_map(|r| r["params"][key].as_u64())
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let secs = |wl: &str| {
        runs.iter()
            .filter(|r| r["workload"] == wl)
            .find_map(|r| r["params"]["secs_limit"].as_f64())
    };
    let observed: [(&str, Vec<u64>); 8] = [
        ("put_sizes", of("put", "size")),
        ("put_threads", of("put", "threads")),
        ("get_sizes", of("get", "size")),
        ("get_threads", of("get", "threads")),
        ("range_sizes", of("range", "size")),
        ("seq_sizes", of("seqwrite", "size")),
        ("seq_total", of("seqwrite", "total")),
        ("reopen_keys", of("reopen", "keys")),
    ];
    let score = |sc: &Scale| {
        let j = sc.to_json();
        observed
            .iter()
            .filter(|(k, v)| {
                !v.is_empty()
                    && (j[*k]
                        .as_array()
                        .is_some_and(|a| a.iter().filter_map(Value::as_u64).eq(v.iter().copied()))
                        || (v.len() == 1 && j[*k].as_u64() == Some(v[0])))
            })
            .count()
    };
    let quick = score(&scale(true)) > score(&scale(false));
    let mut sc = scale(quick);
    let mut rec = serde_json::Map::new();
    for (k, v) in &observed {
        match v.as_slice() {
            [] => {}
            [one] if matches!(*k, "seq_total" | "reopen_keys") => {
                rec.insert(k.to_string(), (*one).into());
            }
            _ if matches!(*k, "seq_total" | "reopen_keys") => {}
            _ => {
                rec.insert(k.to_string(), v.clone().into());
            }
        }
    }
    for (k, wl) in [
        ("put_secs", "put"),
        ("get_secs", "get"),
        ("seq_secs", "seqwrite"),
    ] {
        if let Some(x) = secs(wl) {
            rec.insert(k.into(), x.into());
        }
    }
    let reps = runs.iter().filter_map(|r| r["rep"].as_u64()).max();
    if let Some(r) = reps {
        rec.insert("reps".into(), (r + 1).into());
    }
    sc.update_from_json(&Value::Object(rec));
    (sc, quick)
}

pub const K: u64 = 1 << 10;
pub const M: u64 = 1 << 20;
pub const G: u64 = 1 << 30;

pub fn scale(quick: bool) -> Scale {
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
            get_warm_threads: vec![1, 64],
            get_dataset: 2 * M,
            get_max_keys: 2048,
            get_load_threads: 16,
            get_cold_ops: 500,
            get_warm_ops: 200_000,
            get_secs: 0.5,
            range_sizes: vec![4 * K, 100 * M],
            range_ops: 3,
            range_secs: 2.0,
            ranges_keys: 16,
            ranges_ops: 1_000,
            seq_sizes: vec![256 * K, 4 * M],
            seq_total: 256 * M,
            seq_secs: 5.0,
            mix_size: M,
            mix_threads: 16,
            mix_dataset: 64 * M,
            mix_ops: 200,
            mix_secs: 5.0,
            oldest_pct: 5,
            reopen_keys: 100_000,
            ycsb_mixes: ycsb_mixes(),
            ycsb_records: 20_000,
            ycsb_ops: 40_000,
            ycsb_threads: 8,
            ycsb_size: K,
            ycsb_secs: 10.0,
            // 4× the limit, as the full preset; below 256 MiB the engines' fixed memory (fjall's
            // 64 MiB memtables, podstore's index and buffers) leaves no room for their caches.
            memlimit_limit: 256 * M,
            memlimit_records: M,
            memlimit_size: K,
            memlimit_ops: 100_000,
            memlimit_threads: 8,
            memlimit_secs: 30.0,
            memlimit_reps: 1,
            fio_secs: 10,
        }
    } else {
        Scale {
            reps: 3,
            put_sizes: vec![K, 4 * K, 64 * K, 256 * K, M, 4 * M],
            put_threads: vec![1, 16, 64, 200],
            put_secs: 0.5,
            put_max_bytes: 256 * M,
            put_max_ops: 20_000,
            get_sizes: vec![K, 4 * K, 100 * K, M],
            get_threads: vec![1, 16, 64],
            get_warm_threads: vec![1, 16],
            get_dataset: 128 * M,
            get_max_keys: 20_000,
            get_load_threads: 100,
            get_cold_ops: 2_000,
            get_warm_ops: 5_000_000,
            get_secs: 0.5,
            range_sizes: vec![4 * K, M, 10 * M, 100 * M],
            range_ops: 4,
            range_secs: 3.0,
            ranges_keys: 100,
            ranges_ops: 3_000,
            seq_sizes: vec![256 * K, 4 * M],
            seq_total: 2 * G,
            seq_secs: 8.0,
            mix_size: M,
            mix_threads: 16,
            mix_dataset: 512 * M,
            mix_ops: 600,
            mix_secs: 10.0,
            oldest_pct: 5,
            reopen_keys: 1_000_000,
            ycsb_mixes: ycsb_mixes(),
            ycsb_records: 200_000,
            ycsb_ops: 400_000,
            ycsb_threads: 8,
            ycsb_size: K,
            ycsb_secs: 60.0,
            // Issue 23: a 1 GiB limit, 4 GiB of 1 KiB records. One repetition: each engine
            // loads 4 GiB under the limit, which takes minutes.
            memlimit_limit: G,
            memlimit_records: 4 * M,
            memlimit_size: K,
            memlimit_ops: 400_000,
            memlimit_threads: 8,
            memlimit_secs: 120.0,
            memlimit_reps: 1,
            fio_secs: 20,
        }
    }
}

/// The YCSB core workloads the suite runs.
fn ycsb_mixes() -> Vec<String> {
    ["a", "b", "c", "f"].map(String::from).to_vec()
}
