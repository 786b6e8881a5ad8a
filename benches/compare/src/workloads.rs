//! `compare run`: one workload on one engine in a fresh directory, one JSON line out.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Args;
use crate::engines::{self, Engine, OpenSpec, Res};
use crate::sys::{self, ALIGN, IoCounters, round_up};
use crate::values::{Rng, ValuePool, key};

const MIB: f64 = (1u64 << 20) as f64;

/// What one measured phase did.
#[derive(Default)]
pub(crate) struct Measured {
    ops: u64,
    secs: f64,
    bytes: u64,
    lat_ns: Vec<u64>,
    io: IoCounters,
}

impl Measured {
    fn percentile_us(&self, p: f64) -> Option<f64> {
        if self.lat_ns.is_empty() {
            return None;
        }
        let mut v = self.lat_ns.clone();
        v.sort_unstable();
        // Nearest rank.
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        Some(v[rank.min(v.len()) - 1] as f64 / 1000.0)
    }

    pub(crate) fn fields(&self) -> Value {
        let per_op = |b: u64| {
            if self.ops == 0 {
                Value::Null
            } else {
                json!(b as f64 / self.ops as f64)
            }
        };
        json!({
            "ops": self.ops,
            "seconds": self.secs,
            "ops_per_sec": if self.secs > 0.0 { self.ops as f64 / self.secs } else { 0.0 },
            "mib_per_sec": if self.secs > 0.0 { self.bytes as f64 / MIB / self.secs } else { 0.0 },
            "p50_us": self.percentile_us(50.0),
            "p99_us": self.percentile_us(99.0),
            "disk_read_bytes_per_op": per_op(self.io.read_bytes),
            "disk_write_bytes_per_op": per_op(self.io.write_bytes),
        })
    }
}

/// Runs `op(i)` for i = 0, 1, ... on `threads` threads until `max_ops` ops were started or
/// `limit` has passed since the start (ops under way then finish). `op` returns the bytes it
/// moved. Latency is timed around each op; throughput over the whole phase.
fn drive(
    threads: usize,
    max_ops: u64,
    limit: Duration,
    op: impl Fn(u64) -> Res<u64> + Sync,
) -> Res<Measured> {
    Ok(drive_kinds(threads, max_ops, limit, 1, |i| Ok((op(i)?, 0)))?.0)
}

/// [`drive`] for ops of `kinds` kinds: `op(i)` returns the bytes it moved and its kind
/// (`< kinds`). Returns the whole phase and each kind's latencies (ns), in no order.
pub(crate) fn drive_kinds(
    threads: usize,
    max_ops: u64,
    limit: Duration,
    kinds: usize,
    op: impl Fn(u64) -> Res<(u64, usize)> + Sync,
) -> Res<(Measured, Vec<Vec<u64>>)> {
    let next = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let bytes = AtomicU64::new(0);
    let barrier = Barrier::new(threads + 1);
    let start: OnceLock<Instant> = OnceLock::new();
    let lats = Mutex::new(vec![Vec::new(); kinds]);
    let error: Mutex<Option<String>> = Mutex::new(None);
    let worker = || {
        let mut mine = vec![Vec::new(); kinds];
        let mut moved = 0;
        barrier.wait();
        let t0 = *start.get_or_init(Instant::now);
        loop {
            if stop.load(Ordering::Relaxed) || t0.elapsed() >= limit {
                break;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= max_ops {
                break;
            }
            let t = Instant::now();
            match op(i) {
                Ok((b, kind)) => {
                    moved += b;
                    mine[kind].push(t.elapsed().as_nanos() as u64);
                }
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    error.lock().unwrap().get_or_insert(format!("op {i}: {e}"));
                    break;
                }
            }
        }
        bytes.fetch_add(moved, Ordering::Relaxed);
        let mut all = lats.lock().unwrap();
        for (k, l) in mine.into_iter().enumerate() {
            all[k].extend(l);
        }
    };
    let io0 = sys::io_counters();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn_scoped(s, worker)
                    .expect("spawn worker")
            })
            .collect();
        barrier.wait();
        start.get_or_init(Instant::now);
        // Join each thread explicitly (pthread_join): the scope's implicit join returns when
        // the closures have returned, before the threads' TLS destructors have run, and LMDB's
        // destructor writes to its reader table, which closing the environment unmaps.
        for h in handles {
            h.join().expect("worker panicked");
        }
    });
    let secs = start.get().expect("started").elapsed().as_secs_f64();
    let io = sys::io_counters().since(io0);
    if let Some(e) = error.into_inner().unwrap() {
        return Err(e.into());
    }
    let by_kind = lats.into_inner().unwrap();
    let lat_ns: Vec<u64> = by_kind.iter().flatten().copied().collect();
    Ok((
        Measured {
            ops: lat_ns.len() as u64,
            secs,
            bytes: bytes.into_inner(),
            lat_ns,
            io,
        },
        by_kind,
    ))
}

/// A fresh directory for one run, removed on drop unless `--keep`.
struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    fn new(base: &Path, engine: &str, workload: &str, keep: bool) -> Res<RunDir> {
        sys::check_real_disk(base)?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = base.join(format!(
            "podstore-compare-{engine}-{workload}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path)?;
        Ok(RunDir { path, keep })
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Loads values `0..n` of `pool` with `threads` threads in batches of about 8 MiB
/// (at most 10 000 keys, and small enough that every thread has one), then syncs. Returns the
/// seconds that took; then lets the engine settle (fjall flushes its memtable), untimed.
pub fn load(engine: &dyn Engine, pool: &ValuePool, n: u64, threads: usize) -> Res<f64> {
    let per_batch = ((8u64 << 20) / pool.len().max(1) as u64)
        .min(n.div_ceil(threads.max(1) as u64))
        .clamp(1, 10_000);
    let batches = n.div_ceil(per_batch);
    let t = Instant::now();
    drive(threads, batches, Duration::MAX, |b| {
        let lo = b * per_batch;
        let hi = (lo + per_batch).min(n);
        let items: Vec<(Vec<u8>, &[u8])> = (lo..hi).map(|i| (key(i), pool.value(i))).collect();
        engine.put_batch(&items)?;
        Ok(0)
    })?;
    engine.sync()?;
    let secs = t.elapsed().as_secs_f64();
    engine.settle()?;
    Ok(secs)
}

pub fn padded(size: u64) -> u64 {
    round_up(size.max(1), ALIGN as u64)
}

/// Opens `engine` in bulk mode in `dir` with room for `capacity_values` values of the pool's
/// size and loads values `0..n` (see [`load`]). Returns the engine, its open spec and the load's
/// seconds.
pub(crate) fn open_loaded(
    engine: &str,
    dir: &Path,
    pool: &ValuePool,
    n: u64,
    capacity_values: u64,
    load_threads: usize,
) -> Res<(Box<dyn Engine>, OpenSpec, f64)> {
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: false,
        capacity: capacity_values * padded(pool.len() as u64),
        cache_cap: None,
        cold: false,
    };
    let e = engines::open(engine, &spec)?;
    let load_secs = load(e.as_ref(), pool, n, load_threads)?;
    Ok((e, spec, load_secs))
}

/// Adds `{name}s` (the count) and `{name}_p{P}_us` for each percentile `P` of `lat_ns`.
pub(crate) fn kind_fields(fields: &mut Value, name: &str, lat_ns: &[u64], percentiles: &[f64]) {
    let k = Measured {
        lat_ns: lat_ns.to_vec(),
        ..Measured::default()
    };
    fields[format!("{name}s")] = json!(k.lat_ns.len());
    for &p in percentiles {
        fields[format!("{name}_p{p:.0}_us")] = json!(k.percentile_us(p));
    }
}

pub fn run(args: &Args) -> Result<String, String> {
    run_inner(args).map_err(|e| e.to_string())
}

fn run_inner(args: &Args) -> Res<String> {
    let engine = args.need("engine")?.to_string();
    let workload = args.need("workload")?.to_string();
    let device = workload == "memlimit" && engine == crate::memlimit::DEVICE;
    if !engines::ALL.contains(&engine.as_str()) && !device {
        return Err(format!("unknown engine {engine:?}").into());
    }
    if let Some(why) = engines::skip_reason(&engine, &workload) {
        return Err(format!("{engine} does not run {workload}: {why}").into());
    }
    let base = sys::base_dir(args.str("dir"));
    let dir = RunDir::new(&base, &engine, &workload, args.flag("keep"))?;
    let seed = args.num("seed", 1)?;
    let load_threads = args.num("load-threads", 16)? as usize;
    let mut out = json!({
        "engine": engine,
        "workload": workload,
        "dir": base.display().to_string(),
        "fs": sys::mount_of(&base).fstype,
    });
    for (flag, _, cell) in engines::podstore::TUNING {
        if let Some(size) = args.str(flag) {
            if workload == "memlimit" && flag != "warm-cache" {
                return Err(format!("--{flag} is not for memlimit (see --cache-cap)").into());
            }
            if !engine.starts_with("podstore") {
                return Err(format!("--{flag} is for the podstore engines").into());
            }
            let _ = cell.set(sys::parse_size(size)?);
        }
    }
    let (mut params, fields) = match workload.as_str() {
        "put" => put(args, &engine, &dir.path, seed)?,
        "get" => get(args, &engine, &dir.path, seed, load_threads)?,
        "range" => range(args, &engine, &dir.path, seed)?,
        "ranges" => crate::ranges::ranges(args, &engine, &dir.path, seed)?,
        "seqwrite" => seqwrite(args, &engine, &dir.path, seed)?,
        "reopen" => reopen(args, &engine, &dir.path, seed, load_threads)?,
        "mix" | "oldest" => mixed(args, &engine, &workload, &dir.path, seed, load_threads)?,
        "ycsb" => crate::ycsb::ycsb(args, &engine, &dir.path, seed, load_threads)?,
        "memlimit" => crate::memlimit::run(args, &engine, &dir.path)?,
        other => return Err(format!("unknown workload {other:?}").into()),
    };
    for (_, field, cell) in engines::podstore::TUNING {
        if let Some(&size) = cell.get() {
            params[field] = json!(size);
        }
    }
    out["params"] = params;
    merge(&mut out, fields);
    Ok(out.to_string())
}

fn merge(out: &mut Value, fields: Value) {
    if let (Some(o), Value::Object(f)) = (out.as_object_mut(), fields) {
        o.extend(f);
    }
}

/// Durable puts of `size`-byte values from `threads` threads.
fn put(args: &Args, engine: &str, dir: &Path, seed: u64) -> Res<(Value, Value)> {
    let size = args.size("size", 4096)?;
    let threads = args.num("threads", 1)?.max(1) as usize;
    let max_ops = args.num("ops", 20_000)?;
    let max_bytes = args.size("max-bytes", 256 << 20)?;
    let secs = args.secs("secs", 1.5)?;
    let ops = max_ops.min((max_bytes / size.max(1)).max(1));
    let pool = ValuePool::new(size as usize, seed);
    let keys: Vec<Vec<u8>> = (0..ops).map(key).collect();
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: true,
        capacity: ops * padded(size),
        cache_cap: None,
        cold: false,
    };
    let e = engines::open(engine, &spec)?;
    let m = drive(threads, ops, Duration::from_secs_f64(secs), |i| {
        e.put(&keys[i as usize], pool.value(i))?;
        Ok(size)
    })?;
    e.close()?;
    let params = json!({"size": size, "threads": threads, "max_ops": ops, "secs_limit": secs,
                        "durable": true});
    Ok((params, m.fields()))
}

/// Random gets of `size`-byte values from `threads` threads, cold or warm.
fn get(
    args: &Args,
    engine: &str,
    dir: &Path,
    seed: u64,
    load_threads: usize,
) -> Res<(Value, Value)> {
    let size = args.size("size", 1024)?;
    let threads = args.num("threads", 1)?.max(1) as usize;
    let cache = args.str("cache").unwrap_or("cold").to_string();
    if cache != "cold" && cache != "warm" {
        return Err("--cache is cold or warm".into());
    }
    let dataset = args.size("dataset", 128 << 20)?;
    let max_ops = args.num("ops", 20_000)?;
    let secs = args.secs("secs", 1.0)?;
    let max_keys = args.num("max-keys", 20_000)?.max(64);
    let n = args.num("keys", (dataset / size.max(1)).clamp(64, max_keys))?;
    let pool = ValuePool::new(size as usize, seed);
    let (e, spec, load_secs) = open_loaded(engine, dir, &pool, n, n, load_threads)?;
    // Reopen so that no engine starts with what its own cache kept from loading; when cold,
    // drop the page cache while it is closed, and open without a warm-up (`OpenSpec::cold`).
    let spec = OpenSpec {
        cold: cache == "cold",
        ..spec
    };
    let mut dropped = None;
    let e = e.reopen(&spec, &mut || {
        if cache == "cold" {
            dropped = Some(sys::drop_caches());
        }
    })?;
    let mut rng = Rng::new(seed ^ 0x6765_7473);
    let order: Vec<u64> = if cache == "cold" {
        // Each key at most once: every get is a first touch after the cache was dropped.
        rng.permutation(n as usize)
            .into_iter()
            .map(|k| k as u64)
            .collect()
    } else {
        drive(load_threads, n, Duration::MAX, |i| {
            e.get(&key(i))?.ok_or("missing key")?;
            Ok(0)
        })?;
        (0..max_ops).map(|_| rng.below(n)).collect()
    };
    let keys: Vec<Vec<u8>> = order.iter().map(|&k| key(k)).collect();
    let ops = (order.len() as u64).min(max_ops);
    let m = drive(threads, ops, Duration::from_secs_f64(secs), |i| {
        let k = order[i as usize];
        let v = e.get(&keys[i as usize])?.ok_or("missing key")?;
        if v.len() as u64 != size || (i % 64 == 0 && v != pool.value(k)) {
            return Err(format!("wrong value for key {k}").into());
        }
        Ok(size)
    })?;
    e.close()?;
    let mut params = json!({"size": size, "threads": threads, "cache": cache, "keys": n,
                            "secs_limit": secs});
    if let Some(d) = dropped {
        params["page_cache_dropped"] = json!(d);
    }
    let mut fields = m.fields();
    fields["load_secs"] = json!(load_secs);
    Ok((params, fields))
}

/// Parses `whole` or `OFF+LEN`, where OFF may be `end-N`, against a value of `size` bytes.
pub fn parse_range(spec: &str, size: u64) -> Res<(u64, u64)> {
    if spec == "whole" {
        return Ok((0, size));
    }
    let (off, len) = spec
        .split_once('+')
        .ok_or_else(|| format!("range {spec:?}: expected whole or OFF+LEN"))?;
    let len = sys::parse_size(len)?;
    let off = match off.strip_prefix("end-") {
        Some(back) => size
            .checked_sub(sys::parse_size(back)?)
            .ok_or_else(|| format!("range {spec:?} starts before a {size}-byte value"))?,
        None => sys::parse_size(off)?,
    };
    if off.checked_add(len).is_none_or(|end| end > size) {
        return Err(format!("range {spec:?} is outside a {size}-byte value").into());
    }
    Ok((off, len))
}

/// Cold single-threaded range reads: before every op (untimed) the engine is closed, the page
/// cache dropped (when possible) and the engine opened again.
fn range(args: &Args, engine: &str, dir: &Path, seed: u64) -> Res<(Value, Value)> {
    let size = args.size("size", 1 << 20)?;
    let spec_s = args.str("range").unwrap_or("whole").to_string();
    let (off, len) = parse_range(&spec_s, size)?;
    let max_ops = args.num("ops", 12)?;
    let secs = args.secs("secs", 3.0)?;
    // Every read is cold whatever the key, so a few values suffice: one per op, at most
    // 128 MiB of them, at least one.
    let n = args.num("keys", max_ops.min((128u64 << 20) / size.max(1)).max(1))?;
    let pool = ValuePool::new(size as usize, seed);
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: false,
        capacity: n * padded(size),
        cache_cap: None,
        // Cold reads: the disk bytes per op are the read's own, no warm-up's at each reopen.
        cold: true,
    };
    let e = engines::open(engine, &spec)?;
    let load_secs = load(e.as_ref(), &pool, n, 4)?;
    let mut e = Some(e);
    let whole = off == 0 && len == size;
    let mut m = Measured::default();
    let mut dropped = true;
    let t_all = Instant::now();
    for i in 0..max_ops {
        if i > 0 && t_all.elapsed().as_secs_f64() >= secs {
            break;
        }
        // Cold: the engine closed, the page cache dropped, the engine opened again.
        let eng = e
            .take()
            .expect("engine")
            .reopen(&spec, &mut || dropped &= sys::drop_caches())?;
        let e = e.insert(eng);
        let k = i % n;
        let kb = key(k);
        let io0 = sys::io_counters();
        let t = Instant::now();
        let v = if whole {
            e.get(&kb)?
        } else {
            e.get_range(&kb, off, len)?
        };
        let ns = t.elapsed().as_nanos() as u64;
        let io = sys::io_counters().since(io0);
        let v = v.ok_or("missing key")?;
        if v.as_slice() != &pool.value(k)[off as usize..(off + len) as usize] {
            return Err(format!("wrong bytes for key {k} range {spec_s}").into());
        }
        m.ops += 1;
        m.secs += ns as f64 / 1e9;
        m.bytes += len;
        m.lat_ns.push(ns);
        m.io.read_bytes += io.read_bytes;
        m.io.write_bytes += io.write_bytes;
    }
    e.take().expect("engine").close()?;
    let params = json!({"size": size, "range": spec_s, "offset": off, "len": len, "keys": n,
                        "threads": 1, "page_cache_dropped": dropped});
    let mut fields = m.fields();
    fields["load_secs"] = json!(load_secs);
    Ok((params, fields))
}

/// One writer streams `total` bytes of `size`-byte values in batches of 16 MiB, then syncs;
/// the sync is inside the timing.
fn seqwrite(args: &Args, engine: &str, dir: &Path, seed: u64) -> Res<(Value, Value)> {
    let size = args.size("size", 256 << 10)?;
    let total = args.size("total", 2 << 30)?;
    let secs = args.secs("secs", 20.0)?;
    let n = (total / size.max(1)).max(1);
    let per_batch = ((16u64 << 20) / size.max(1)).max(1);
    let pool = ValuePool::new(size as usize, seed);
    let spec = OpenSpec {
        dir: dir.to_path_buf(),
        durable: false,
        capacity: n * padded(size),
        cache_cap: None,
        cold: false,
    };
    let e = engines::open(engine, &spec)?;
    let io0 = sys::io_counters();
    let t = Instant::now();
    let mut written = 0u64;
    let mut lat_ns = Vec::new();
    let mut i = 0;
    while i < n && t.elapsed().as_secs_f64() < secs {
        let hi = (i + per_batch).min(n);
        let items: Vec<(Vec<u8>, &[u8])> = (i..hi).map(|j| (key(j), pool.value(j))).collect();
        let tb = Instant::now();
        e.put_batch(&items)?;
        lat_ns.push(tb.elapsed().as_nanos() as u64);
        written += hi - i;
        i = hi;
    }
    e.sync()?;
    let elapsed = t.elapsed().as_secs_f64();
    let io = sys::io_counters().since(io0);
    e.close()?;
    let m = Measured {
        ops: written,
        secs: elapsed,
        bytes: written * size,
        lat_ns: Vec::new(),
        io,
    };
    let params = json!({"size": size, "total": total, "batch_values": per_batch,
                        "secs_limit": secs, "threads": 1});
    let mut fields = m.fields();
    let batches = Measured {
        lat_ns,
        ..Measured::default()
    };
    fields["batch_p50_us"] = json!(batches.percentile_us(50.0));
    fields["batch_p99_us"] = json!(batches.percentile_us(99.0));
    fields["bytes_written"] = json!(written * size);
    Ok((params, fields))
}

/// The single-file engine workloads on `size`-byte values (1 MiB): a data set of `--dataset`
/// bytes is loaded in bulk, the engine closed, the page cache dropped, the engine opened again
/// in durable mode, then `threads` threads run `--ops` operations:
///
/// - `mix`: each op is, at random (half and half), a durable put of a fresh key or a get of a
///   random loaded key;
/// - `oldest`: ops alternate between a durable put of a fresh key and a get of a random key
///   among the oldest `--oldest-pct` percent (5) of the loaded keys.
///
/// Reports the total time, and p50/p90/p99 for each kind of op.
fn mixed(
    args: &Args,
    engine: &str,
    workload: &str,
    dir: &Path,
    seed: u64,
    load_threads: usize,
) -> Res<(Value, Value)> {
    let size = args.size("size", 1 << 20)?;
    let threads = args.num("threads", 16)?.max(1) as usize;
    let dataset = args.size("dataset", 512 << 20)?;
    let max_ops = args.num("ops", 600)?;
    let secs = args.secs("secs", 10.0)?;
    let pct = args.num("oldest-pct", 5)?.clamp(1, 100);
    let n = args.num("keys", (dataset / size.max(1)).max(20))?;
    let oldest = (n * pct / 100).max(1);
    let pool = ValuePool::new(size as usize, seed);
    let (e, bulk, load_secs) = open_loaded(engine, dir, &pool, n, n + max_ops, load_threads)?;
    let durable = OpenSpec {
        durable: true,
        // Opened again after the page cache is dropped: cold, no warm-up reading meanwhile.
        cold: true,
        ..bulk
    };
    let mut dropped = true;
    let e = e.reopen(&durable, &mut || dropped = sys::drop_caches())?;
    const PUT: usize = 0;
    const GET: usize = 1;
    let mixing = workload == "mix";
    let plan: Vec<(usize, u64)> = {
        let mut rng = Rng::new(seed ^ 0x6d69_7865);
        (0..max_ops)
            .map(|i| {
                let put = if mixing {
                    rng.next_u64() & 1 == 0
                } else {
                    i % 2 == 0
                };
                if put {
                    (PUT, n + i)
                } else if mixing {
                    (GET, rng.below(n))
                } else {
                    (GET, rng.below(oldest))
                }
            })
            .collect()
    };
    let keys: Vec<Vec<u8>> = plan.iter().map(|&(_, k)| key(k)).collect();
    let (m, by_kind) = drive_kinds(threads, max_ops, Duration::from_secs_f64(secs), 2, |i| {
        let (kind, k) = plan[i as usize];
        if kind == PUT {
            e.put(&keys[i as usize], pool.value(k))?;
        } else {
            let v = e.get(&keys[i as usize])?.ok_or("missing key")?;
            if v.len() as u64 != size || (i % 16 == 1 && v != pool.value(k)) {
                return Err(format!("wrong value for key {k}").into());
            }
        }
        Ok((size, kind))
    })?;
    e.close()?;
    let mut params = json!({"size": size, "threads": threads, "keys": n, "max_ops": max_ops,
                            "secs_limit": secs, "durable": true, "page_cache_dropped": dropped});
    if !mixing {
        params["oldest_pct"] = json!(pct);
        params["oldest_keys"] = json!(oldest);
    }
    let mut fields = m.fields();
    fields["load_secs"] = json!(load_secs);
    fields["p90_us"] = json!(m.percentile_us(90.0));
    for (kind, name) in [(PUT, "put"), (GET, "get")] {
        kind_fields(&mut fields, name, &by_kind[kind], &[50.0, 90.0, 99.0]);
    }
    Ok((params, fields))
}

/// Loads `keys` small values, closes, drops the page cache, and has a fresh process open the
/// store: open time, bytes read by the open, RSS growth per key.
fn reopen(
    args: &Args,
    engine: &str,
    dir: &Path,
    seed: u64,
    load_threads: usize,
) -> Res<(Value, Value)> {
    let n = args.num("keys", 1_000_000)?;
    let size = args.size("size", 100)?;
    let pool = ValuePool::new(size as usize, seed);
    let (e, _, load_secs) = open_loaded(engine, dir, &pool, n, n, load_threads)?;
    e.close()?;
    let store_bytes = sys::dir_bytes(dir);
    let dropped = sys::drop_caches();
    let exe = std::env::current_exe()?;
    let out = std::process::Command::new(exe)
        .args(["probe-open", "--engine", engine, "--path"])
        .arg(dir)
        .args(["--keys", &n.to_string(), "--size", &size.to_string()])
        .args(["--seed", &seed.to_string()])
        .args(["--key-len", &key(0).len().to_string()])
        .output()?;
    if !out.status.success() {
        return Err(format!(
            "probe-open failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    let probe: Value = serde_json::from_slice(&out.stdout)?;
    let open_secs = probe["open_secs"].as_f64().unwrap_or(0.0);
    let mut fields = json!({
        "ops": 1,
        "seconds": open_secs,
        "ops_per_sec": if open_secs > 0.0 { 1.0 / open_secs } else { 0.0 },
        "mib_per_sec": null,
        "p50_us": null,
        "p99_us": null,
        "disk_read_bytes_per_op": probe["open_read_bytes"],
        "disk_write_bytes_per_op": null,
        "load_secs": load_secs,
    });
    merge(&mut fields, probe);
    // What the store holds on disk after closing (file sizes), and what the open read of it.
    fields["store_bytes"] = json!(store_bytes);
    fields["data_bytes"] = json!(n * (key(0).len() as u64 + size));
    fields["open_read_fraction"] = match fields["open_read_bytes"].as_f64() {
        Some(r) if store_bytes > 0 => json!(r / store_bytes as f64),
        _ => Value::Null,
    };
    let params =
        json!({"keys": n, "size": size, "key_len": key(0).len(), "page_cache_dropped": dropped});
    Ok((params, fields))
}

/// `compare probe-open`: the child half of `reopen`.
pub fn probe_open(args: &Args) -> Result<String, String> {
    probe_inner(args).map_err(|e| e.to_string())
}

fn probe_inner(args: &Args) -> Res<String> {
    let engine = args.need("engine")?;
    let path = PathBuf::from(args.need("path")?);
    let n = args.num("keys", 1)?;
    let size = args.size("size", 100)?;
    let seed = args.num("seed", 1)?;
    let spec = OpenSpec {
        dir: path,
        durable: true,
        capacity: 0,
        cache_cap: None,
        // What open itself reads and allocates: no warm-up reading in the background.
        cold: true,
    };
    let rss0 = sys::rss_bytes();
    let io0 = sys::io_counters();
    let t = Instant::now();
    let e = engines::open(engine, &spec)?;
    let open_secs = t.elapsed().as_secs_f64();
    let io = sys::io_counters().since(io0);
    let rss1 = sys::rss_bytes();
    let probe = n / 2;
    let t = Instant::now();
    let v = e
        .get(&key(probe))?
        .ok_or("probe key missing after reopen")?;
    let first_get_us = t.elapsed().as_secs_f64() * 1e6;
    let pool = ValuePool::new(size as usize, seed);
    if v != pool.value(probe) {
        return Err("probe key has the wrong value after reopen".into());
    }
    // A prefix of 100 keys (`key-` and the first 10 of 12 digits), from a cold page cache:
    // what a short listing reads.
    let prefix = {
        let k = key(probe);
        k[..14.min(k.len())].to_vec()
    };
    let dropped = sys::drop_caches();
    let io0 = sys::io_counters();
    let t = Instant::now();
    let listed = e.prefix(&prefix).transpose()?;
    let prefix_us = t.elapsed().as_secs_f64() * 1e6;
    let prefix_io = sys::io_counters().since(io0);
    e.close()?;
    let rss_delta = rss1.saturating_sub(rss0);
    let prefix_fields = match listed {
        Some(keys) => json!({
            "prefix_keys": keys.len(),
            "prefix_us": prefix_us,
            "prefix_read_bytes": prefix_io.read_bytes,
            // What the listing's read calls returned, without the code paged in after the
            // drop (see sys::IoCounters).
            "prefix_read_call_bytes": prefix_io.rchar,
            "prefix_cold": dropped,
        }),
        None => json!({}),
    };
    let mut out = json!({
        "open_secs": open_secs,
        "open_read_bytes": io.read_bytes,
        "rss_before_open_bytes": rss0,
        "rss_delta_bytes": rss_delta,
        "rss_bytes_per_key": rss_delta as f64 / n.max(1) as f64,
        "first_get_us": first_get_us,
    });
    merge(&mut out, prefix_fields);
    Ok(out.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let m = 1 << 20;
        assert_eq!(parse_range("whole", m).unwrap(), (0, m));
        assert_eq!(parse_range("1K+1K", m).unwrap(), (1024, 1024));
        assert_eq!(parse_range("end-4K+4K", m).unwrap(), (m - 4096, 4096));
        assert!(parse_range("1M+4K", m).is_err());
        assert!(parse_range("end-4K+4K", 1024).is_err());
    }

    #[test]
    fn percentiles() {
        let m = Measured {
            lat_ns: (1..=100).map(|i| i * 1000).collect(),
            ..Measured::default()
        };
        assert_eq!(m.percentile_us(50.0), Some(50.0));
        assert_eq!(m.percentile_us(99.0), Some(99.0));
    }
}
