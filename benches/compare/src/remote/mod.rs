//! `compare remote`: podstore's remote tier against SlateDB on the same `ObjectStore`
//! (issue 38's benchmarks; docs/benchmarks.md, "Remote tier against SlateDB (issue 38)").
//!
//! ```text
//! compare remote --object-store local|s3 [--latency-ms 20] [--reps 2] [--dir DIR]
//!     [--groups put,read,restore,upload] [--engines podstore,slatedb] [sizes, below]
//! ```
//!
//! Both engines get one `Arc<dyn ObjectStore>`: `LocalFileSystem` on a directory, or an S3
//! client (object_store's `AmazonS3`, HTTP, path-style) of an s3s-fs server started in this
//! process on 127.0.0.1; either wrapped in [`metered::Metered`], which waits `--latency-ms`
//! before every request and counts requests and bytes, so that every row reports requests and
//! bytes per operation for both engines alike. Groups run in turn and, within a group, the
//! engines in turn; `--reps` repeats the whole (interleaved). Each row is one JSON line on
//! stdout; a table of medians goes to stderr at the end.
//!
//! Groups (sizes are the defaults, sized so that one run of everything takes a few minutes
//! on the 2-core machine):
//! - `put`: values of 1 KiB, 64 KiB and 1 MiB, 32 batches of 1 MiB each (`--put-batches`),
//!   each batch written and then made durable in the remote before the next one; a fresh store
//!   per row. ops = values; latency = one batch's (write and remote flush). Then
//!   `put-1K-x8`: 8 threads at once (`--put-threads`), each writing 32 batches of 64 KiB of
//!   1 KiB values, each batch made durable by its own call. Engines `--put-engines` (default podstore, podstore-sync, slatedb: see engines.rs).
//! - `read`: 20 000 values of 1 KiB (`--small-keys`), 32 of 1 MiB (`--large-values`) and one
//!   of 100 MiB loaded and made durable; `get-warm-1K`: after a pass over every small key,
//!   20 000 gets of random ones (`--warm-ops`) from the writer (files local, default caches);
//!   then cold (see engines.rs): `get-cold-1K` reads 300 small keys spread evenly (one at a
//!   random place in each stride)
//!   (`--cold-ops`), `get-cold-1M` every large value once, `range-4K` 100 ranges of 4 KiB at
//!   unaligned offsets spread over the 100 MiB value (`--range-ops`); each read once.
//!   `open-cold` is the cold open itself (podstore: a restore of this store).
//! - `restore`: 1 000 000 keys (`--restore-keys`) of 256 B (`--restore-size`) loaded, made
//!   durable, the engine closed; then the time, requests and bytes of an open on an empty
//!   directory (SlateDB: a new `Db` on the path, after its memtable was flushed at close,
//!   so nothing is replayed), and of its first get.
//! - `upload`: podstore's upload of its sealed files (256 MiB, `--upload-mib`, of 64 KiB
//!   values in segments of 64 MiB, written with no remote and then opened with one: the time
//!   of that open and `flush_remote`) against object_store's `put_multipart` of the same
//!   files (4 files at a time, parts of 16 MiB, 2 in flight per file: the adapter's own
//!   settings) to another prefix of the same store.

mod engines;
mod metered;
mod s3;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::local::LocalFileSystem;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};

use crate::Args;
use crate::values::ValuePool;
use engines::{Engine, Pod, Slate};
use metered::{Counters, Metered, Snapshot};

/// What every row shares.
struct Ctx {
    objects: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
    rt: Arc<tokio::runtime::Runtime>,
    work: PathBuf,
    next: std::cell::Cell<u64>,
    head: Value,
    rows: std::cell::RefCell<Vec<Value>>,
}

impl Ctx {
    /// A fresh name (prefix, directory) for one store.
    fn fresh(&self, what: &str) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{what}-{n:03}")
    }

    fn snap(&self) -> Snapshot {
        self.counters.snapshot()
    }

    /// Emits one row: `fields` plus the run's settings and the load average.
    fn emit(&self, engine: &str, row: &str, fields: Value) {
        let mut line = self.head.clone();
        let obj = line.as_object_mut().expect("an object");
        obj.insert("engine".into(), engine.into());
        obj.insert("row".into(), row.into());
        obj.insert("load".into(), crate::sys::loadavg().into());
        for (k, v) in fields.as_object().expect("an object") {
            obj.insert(k.clone(), v.clone());
        }
        println!("{line}");
        self.rows.borrow_mut().push(line);
    }
}

/// The measured part of a row: per-op latencies, the wall time, the counters' difference.
struct Timed {
    lat: Vec<Duration>,
    secs: f64,
    counts: Snapshot,
}

impl Timed {
    /// Runs `op(i)` for `i in 0..ops`, timing each.
    fn run(
        ctx: &Ctx,
        ops: u64,
        mut op: impl FnMut(u64) -> Result<(), String>,
    ) -> Result<Timed, String> {
        let before = ctx.snap();
        let mut lat = Vec::with_capacity(ops as usize);
        let started = Instant::now();
        for i in 0..ops {
            let t = Instant::now();
            op(i)?;
            lat.push(t.elapsed());
        }
        let secs = started.elapsed().as_secs_f64();
        Ok(Timed {
            lat,
            secs,
            counts: ctx.snap().since(&before),
        })
    }

    /// Runs `op(t, i)` for `i in 0..ops` on each of `threads` threads at once, timing each
    /// call (every thread's calls in one list).
    fn run_threads(
        ctx: &Ctx,
        threads: u64,
        ops: u64,
        op: impl Fn(u64, u64) -> Result<(), String> + Sync,
    ) -> Result<Timed, String> {
        let before = ctx.snap();
        let started = Instant::now();
        let lat = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let op = &op;
                    scope.spawn(move || {
                        let mut lat = Vec::with_capacity(ops as usize);
                        for i in 0..ops {
                            let began = Instant::now();
                            op(t, i)?;
                            lat.push(began.elapsed());
                        }
                        Ok::<_, String>(lat)
                    })
                })
                .collect();
            let mut all = Vec::new();
            for h in handles {
                all.extend(
                    h.join()
                        .map_err(|_| "a writer thread panicked".to_string())??,
                );
            }
            Ok::<_, String>(all)
        })?;
        let secs = started.elapsed().as_secs_f64();
        Ok(Timed {
            lat,
            secs,
            counts: ctx.snap().since(&before),
        })
    }

    /// The row's fields: `ops` operations (which may differ from the timed calls: a put
    /// batch holds many values), ops/s, latency percentiles of the timed calls, counts per op.
    fn fields(mut self, ops: u64) -> Value {
        self.lat.sort();
        let pct = |p: f64| {
            let i = ((self.lat.len() as f64 * p).ceil() as usize).clamp(1, self.lat.len()) - 1;
            self.lat[i].as_secs_f64() * 1e3
        };
        let mut v = json!({
            "ops": ops,
            "secs": self.secs,
            "ops_per_sec": ops as f64 / self.secs,
            "calls": self.lat.len(),
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
        });
        let per = self.counts.per_op(ops as f64);
        for (k, x) in per.as_object().expect("an object") {
            v[k] = x.clone();
        }
        v["requests"] = self.counts.requests().into();
        v["requests_per_call"] = (self.counts.requests() as f64 / self.lat.len() as f64).into();
        v["bytes_fetched"] = self.counts.get_bytes.into();
        v
    }
}

fn key(prefix: &str, i: u64) -> Vec<u8> {
    format!("{prefix}{i:010}").into_bytes()
}

/// Opens an engine for writing on a fresh prefix; `name` is returned for a later cold open.
enum Opened {
    Pod(Pod),
    Slate(Slate),
}

impl Opened {
    fn engine(&self) -> &(dyn Engine + Sync) {
        match self {
            Opened::Pod(p) => p,
            Opened::Slate(s) => s,
        }
    }

    fn close(self) -> Result<(), String> {
        match self {
            Opened::Pod(p) => p.store.close().map_err(|e| e.to_string()),
            Opened::Slate(s) => s.close(),
        }
    }
}

fn open(ctx: &Ctx, engine: &str, name: &str, cold: bool) -> Result<Opened, String> {
    match engine {
        "podstore" | "podstore-sync" => {
            // A cold open is a new machine: a directory of its own, empty.
            let dir = ctx
                .work
                .join("local")
                .join(format!("{name}{}", if cold { "-cold" } else { "" }));
            let mut pod = Pod::open(&dir, &ctx.objects, name, cold)?;
            pod.sync_writes = engine == "podstore-sync";
            Ok(Opened::Pod(pod))
        }
        "slatedb" => Slate::open(&ctx.rt, &ctx.objects, name).map(Opened::Slate),
        other => Err(format!("unknown engine {other:?} (podstore, slatedb)")),
    }
}

/// Writes `count` values of `pool` under `prefix` in batches of about 1 MiB, not synced.
fn load(e: &dyn Engine, prefix: &str, pool: &ValuePool, count: u64) -> Result<(), String> {
    let per = ((1u64 << 20) / pool.len() as u64).max(1);
    let mut i = 0;
    while i < count {
        let n = per.min(count - i);
        let items: Vec<(Vec<u8>, &[u8])> = (i..i + n)
            .map(|j| (key(prefix, j), pool.value(j)))
            .collect();
        e.write(&items)?;
        i += n;
    }
    Ok(())
}

struct Sizes {
    put_batches: u64,
    /// Writer threads of the concurrent put row.
    put_threads: u64,
    small_keys: u64,
    large_values: u64,
    warm_ops: u64,
    cold_ops: u64,
    range_ops: u64,
    restore_keys: u64,
    restore_size: u64,
    upload_mib: u64,
}

fn put_group(ctx: &Ctx, engines: &[String], s: &Sizes) -> Result<(), String> {
    for (label, size) in [("1K", 1u64 << 10), ("64K", 64 << 10), ("1M", 1 << 20)] {
        let pool = ValuePool::new(size as usize, size);
        let per = (1u64 << 20) / size;
        for engine in engines {
            let name = ctx.fresh(&format!("put-{engine}"));
            let opened = open(ctx, engine, &name, false)?;
            let e = opened.engine();
            let timed = Timed::run(ctx, s.put_batches, |b| {
                let items: Vec<(Vec<u8>, &[u8])> = (b * per..(b + 1) * per)
                    .map(|j| (key("p", j), pool.value(j)))
                    .collect();
                e.write(&items)?;
                e.sync_remote()
            })?;
            let mut f = timed.fields(s.put_batches * per);
            f["values_per_batch"] = per.into();
            f["mib_per_sec"] = (s.put_batches as f64 / f["secs"].as_f64().unwrap_or(1.0)).into();
            ctx.emit(engine, &format!("put-{label}"), f);
            opened.close()?;
        }
    }
    // Writers at once: each thread writes 64 KiB batches of 1 KiB values, each made durable
    // in the remote by its own call (podstore's concurrent `flush_remote` calls share
    // flushes; SlateDB's `flush` of its WAL).
    let (threads, per) = (s.put_threads, 64u64);
    let pool = ValuePool::new(1 << 10, 1 << 10);
    for engine in engines {
        let name = ctx.fresh(&format!("putx-{engine}"));
        let opened = open(ctx, engine, &name, false)?;
        let e = opened.engine();
        let timed = Timed::run_threads(ctx, threads, s.put_batches, |t, b| {
            let first = (t * s.put_batches + b) * per;
            let items: Vec<(Vec<u8>, &[u8])> = (first..first + per)
                .map(|j| (key("x", j), pool.value(j)))
                .collect();
            e.write(&items)?;
            e.sync_remote()
        })?;
        let mut f = timed.fields(threads * s.put_batches * per);
        f["values_per_batch"] = per.into();
        f["threads"] = threads.into();
        let mib = (threads * s.put_batches * per) as f64 / 1024.0;
        f["mib_per_sec"] = (mib / f["secs"].as_f64().unwrap_or(1.0)).into();
        ctx.emit(engine, &format!("put-1K-x{threads}"), f);
        opened.close()?;
    }
    Ok(())
}

/// The 100 MiB value's bytes (the same for both engines; checked by every range read).
fn huge_value() -> Vec<u8> {
    ValuePool::with_span(100 << 20, 7, 8).value(0).to_vec()
}

fn read_group(ctx: &Ctx, engines: &[String], s: &Sizes, huge: &[u8]) -> Result<(), String> {
    let small = ValuePool::new(1 << 10, 1);
    let large = ValuePool::new(1 << 20, 2);
    for engine in engines {
        let name = ctx.fresh(&format!("read-{engine}"));
        let opened = open(ctx, engine, &name, false)?;
        let e = opened.engine();
        load(e, "s", &small, s.small_keys)?;
        load(e, "l", &large, s.large_values)?;
        e.put_ranged(b"huge", huge)?;
        e.sync_remote()?;
        // Warm: every small key read once, then random ones.
        for i in 0..s.small_keys {
            e.get(&key("s", i))?.ok_or("warm-up: missing key")?;
        }
        let mut rng = crate::values::Rng::new(9);
        let timed = Timed::run(ctx, s.warm_ops, |_| {
            let i = rng.below(s.small_keys);
            let v = e.get(&key("s", i))?.ok_or("warm: missing key")?;
            (v == small.value(i))
                .then_some(())
                .ok_or("warm: wrong bytes".into())
        })?;
        ctx.emit(engine, "get-warm-1K", timed.fields(s.warm_ops));
        opened.close()?;

        let before = ctx.snap();
        let started = Instant::now();
        let cold = open(ctx, engine, &name, true)?;
        let secs = started.elapsed().as_secs_f64();
        let counts = ctx.snap().since(&before);
        let mut f = counts.per_op(1.0);
        f["secs"] = secs.into();
        ctx.emit(engine, "open-cold", f);
        let e = cold.engine();
        let step = (s.small_keys / s.cold_ops).max(1);
        let mut rng = crate::values::Rng::new(11);
        let timed = Timed::run(ctx, s.cold_ops, |i| {
            // One key in each stride of `step`, at a random place in it: a fixed place would
            // put every key at the same place in its SlateDB block (3 values of 1 KiB to a
            // block; the last one of a block costs SlateDB a second GET, of the next block).
            let k = (i * step + rng.below(step)) % s.small_keys;
            let v = e.get(&key("s", k))?.ok_or("cold: missing key")?;
            (v == small.value(k))
                .then_some(())
                .ok_or("cold: wrong bytes".into())
        })?;
        ctx.emit(engine, "get-cold-1K", timed.fields(s.cold_ops));
        let timed = Timed::run(ctx, s.large_values, |i| {
            let v = e.get(&key("l", i))?.ok_or("cold: missing key")?;
            (v == large.value(i))
                .then_some(())
                .ok_or("cold: wrong bytes".into())
        })?;
        ctx.emit(engine, "get-cold-1M", timed.fields(s.large_values));
        let step = (huge.len() as u64 - 8192) / s.range_ops.max(1);
        let timed = Timed::run(ctx, s.range_ops, |i| {
            // Spread evenly over the value (no two in one 64 KiB chunk while there are fewer
            // than 1 600 of them), never 4 KiB-aligned.
            let start = i * step + 1_234;
            let got = e.get_range(b"huge", start, 4096)?;
            (got[..] == huge[start as usize..start as usize + 4096])
                .then_some(())
                .ok_or("range: wrong bytes".into())
        })?;
        ctx.emit(engine, "range-4K", timed.fields(s.range_ops));
        cold.close()?;
    }
    Ok(())
}

/// Bytes stored under `prefix` (a listing of the unmetered store).
fn stored_bytes(inner: &Arc<dyn ObjectStore>, rt: &tokio::runtime::Runtime, prefix: &str) -> u64 {
    use futures::StreamExt;
    let at = object_store::path::Path::from(prefix);
    rt.block_on(async {
        let mut total = 0;
        let mut listing = inner.list(Some(&at));
        while let Some(Ok(meta)) = listing.next().await {
            total += meta.size;
        }
        total
    })
}

fn restore_group(
    ctx: &Ctx,
    inner: &Arc<dyn ObjectStore>,
    engines: &[String],
    s: &Sizes,
) -> Result<(), String> {
    let pool = ValuePool::new(s.restore_size as usize, 3);
    for engine in engines {
        let name = ctx.fresh(&format!("restore-{engine}"));
        let opened = open(ctx, engine, &name, false)?;
        let load_started = Instant::now();
        load(opened.engine(), "r", &pool, s.restore_keys)?;
        opened.engine().sync_remote()?;
        let load_secs = load_started.elapsed().as_secs_f64();
        opened.close()?;
        let stored = stored_bytes(inner, &ctx.rt, &name);
        let before = ctx.snap();
        let started = Instant::now();
        let cold = open(ctx, engine, &name, true)?;
        let secs = started.elapsed().as_secs_f64();
        let counts = ctx.snap().since(&before);
        let probe = s.restore_keys / 2 + 1;
        let t = Instant::now();
        let v = cold
            .engine()
            .get(&key("r", probe))?
            .ok_or("restore: missing key")?;
        let first_get_ms = t.elapsed().as_secs_f64() * 1e3;
        if v != pool.value(probe) {
            return Err("restore: wrong bytes".into());
        }
        let after_get = ctx.snap().since(&before);
        let mut f = counts.per_op(1.0);
        f["secs"] = secs.into();
        f["keys"] = s.restore_keys.into();
        f["value_size"] = s.restore_size.into();
        f["stored_bytes"] = stored.into();
        f["fetched_pct"] = (100.0 * counts.get_bytes as f64 / stored as f64).into();
        f["load_secs"] = load_secs.into();
        f["first_get_ms"] = first_get_ms.into();
        f["first_get_requests"] = (after_get.requests() - counts.requests()).into();
        f["first_get_bytes"] = (after_get.get_bytes - counts.get_bytes).into();
        ctx.emit(engine, "restore", f);
        cold.close()?;
    }
    Ok(())
}

fn upload_group(ctx: &Ctx, inner: &Arc<dyn ObjectStore>, s: &Sizes) -> Result<(), String> {
    let name = ctx.fresh("upload-podstore");
    let dir = ctx.work.join("local").join(&name);
    {
        // Written with no remote: every file waits for upload when the remote is given.
        let opts = podstore::Options::default().segment_size(64 << 20);
        let store = podstore::Store::open_with(&dir, opts).map_err(|e| e.to_string())?;
        let pool = ValuePool::new(64 << 10, 4);
        let values = (s.upload_mib << 20) / (64 << 10);
        let mut batch = podstore::Batch::new();
        for i in 0..values {
            batch.put(key("u", i), pool.value(i));
            if batch.len() == 16 {
                store.write(&batch).map_err(|e| e.to_string())?;
                batch = podstore::Batch::new();
            }
        }
        if !batch.is_empty() {
            store.write(&batch).map_err(|e| e.to_string())?;
        }
        store.close().map_err(|e| e.to_string())?;
    }
    let before = ctx.snap();
    let started = Instant::now();
    let pod = Pod::open(&dir, &ctx.objects, &name, false)?;
    let report = pod.store.flush_remote().map_err(|e| e.to_string())?;
    let secs = started.elapsed().as_secs_f64();
    let counts = ctx.snap().since(&before);
    let uploaded = stored_bytes(inner, &ctx.rt, &format!("{name}/data"));
    ctx.emit(
        "podstore",
        "upload",
        json!({
            "secs": secs, "files": report.files, "bytes": uploaded,
            "mib_per_sec": uploaded as f64 / (1 << 20) as f64 / secs,
            "requests": counts.requests(),
        }),
    );
    pod.store.close().map_err(|e| e.to_string())?;
    // The same files, by name, from the local directory.
    let files: Vec<(PathBuf, String)> = {
        use futures::StreamExt;
        let at = object_store::path::Path::from(format!("{name}/data"));
        let names: Vec<String> = ctx.rt.block_on(async {
            let mut out = Vec::new();
            let mut listing = inner.list(Some(&at));
            while let Some(Ok(meta)) = listing.next().await {
                out.push(meta.location.filename().unwrap_or_default().to_string());
            }
            out
        });
        names.into_iter().map(|n| (dir.join(&n), n)).collect()
    };
    let plain = ctx.fresh("upload-plain");
    let before = ctx.snap();
    let started = Instant::now();
    let bytes = plain_upload(ctx, &files, &plain)?;
    let secs = started.elapsed().as_secs_f64();
    let counts = ctx.snap().since(&before);
    ctx.emit(
        "plain-multipart",
        "upload",
        json!({
            "secs": secs, "files": files.len(), "bytes": bytes,
            "mib_per_sec": bytes as f64 / (1 << 20) as f64 / secs,
            "requests": counts.requests(),
        }),
    );
    Ok(())
}

/// `put_multipart` of each file (4 files at a time, 16 MiB parts, 2 in flight per file).
fn plain_upload(ctx: &Ctx, files: &[(PathBuf, String)], prefix: &str) -> Result<u64, String> {
    use futures::StreamExt;
    let objects = ctx.objects.clone();
    let jobs = files.iter().cloned().map(|(path, name)| {
        let objects = objects.clone();
        let at = object_store::path::Path::from(format!("{prefix}/{name}"));
        async move {
            let data = tokio::fs::read(&path)
                .await
                .map_err(|e| format!("{path:?}: {e}"))?;
            let upload = objects
                .put_multipart(&at)
                .await
                .map_err(|e| e.to_string())?;
            let mut w = object_store::WriteMultipart::new_with_chunk_size(upload, 16 << 20);
            for part in data.chunks(16 << 20) {
                w.wait_for_capacity(2).await.map_err(|e| e.to_string())?;
                w.write(part);
            }
            w.finish().await.map_err(|e| e.to_string())?;
            Ok::<u64, String>(data.len() as u64)
        }
    });
    ctx.rt.block_on(async {
        let done: Vec<Result<u64, String>> = futures::stream::iter(jobs)
            .buffer_unordered(4)
            .collect()
            .await;
        done.into_iter().sum()
    })
}

pub fn run(args: &Args) -> Result<(), String> {
    let kind = args.str("object-store").unwrap_or("local");
    let latency = Duration::from_millis(args.num("latency-ms", 0)?);
    let reps = args.num("reps", 1)?;
    let list = |name: &str, default: &str| -> Vec<String> {
        args.str(name)
            .unwrap_or(default)
            .split(',')
            .map(str::to_string)
            .collect()
    };
    let groups = list("groups", "put,read,restore,upload");
    let engines = list("engines", "podstore,slatedb");
    let put_engines = list("put-engines", "podstore,podstore-sync,slatedb");
    let s = Sizes {
        put_batches: args.num("put-batches", 32)?,
        put_threads: args.num("put-threads", 8)?,
        small_keys: args.num("small-keys", 20_000)?,
        large_values: args.num("large-values", 32)?,
        warm_ops: args.num("warm-ops", 20_000)?,
        cold_ops: args.num("cold-ops", 300)?,
        range_ops: args.num("range-ops", 100)?,
        restore_keys: args.num("restore-keys", 1_000_000)?,
        restore_size: args.size("restore-size", 256)?,
        upload_mib: args.num("upload-mib", 256)?,
    };
    let base = crate::sys::base_dir(args.str("dir"));
    crate::sys::check_real_disk(&base)?;
    let work = base.join(format!("podstore-remote-bench-{}", std::process::id()));
    let bucket = work.join("bucket");
    std::fs::create_dir_all(&bucket).map_err(|e| format!("{bucket:?}: {e}"))?;
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?,
    );
    let mut _server = None;
    let inner: Arc<dyn ObjectStore> = match kind {
        "local" => Arc::new(LocalFileSystem::new_with_prefix(&bucket).map_err(|e| e.to_string())?),
        "s3" => {
            let server = s3::S3Server::start(&bucket)?;
            let store = server.store()?;
            _server = Some(server);
            store
        }
        other => return Err(format!("--object-store {other:?}: local or s3")),
    };
    let metered = Metered::new(inner.clone(), latency);
    let counters = metered.counters();
    let ctx = Ctx {
        objects: Arc::new(metered),
        counters,
        rt,
        work: work.clone(),
        next: std::cell::Cell::new(0),
        head: json!({
            "bench": "remote", "date": crate::sys::utc_now(), "object_store": kind,
            "latency_ms": latency.as_millis() as u64,
        }),
        rows: Default::default(),
    };
    let huge = groups.iter().any(|g| g == "read").then(huge_value);
    for rep in 0..reps {
        eprintln!("rep {rep}: {}", crate::sys::loadavg());
        for g in &groups {
            match g.as_str() {
                "put" => put_group(&ctx, &put_engines, &s)?,
                "read" => read_group(&ctx, &engines, &s, huge.as_deref().unwrap_or(&[]))?,
                "restore" => restore_group(&ctx, &inner, &engines, &s)?,
                "upload" => upload_group(&ctx, &inner, &s)?,
                other => return Err(format!("unknown group {other:?}")),
            }
        }
    }
    summary(&ctx.rows.borrow());
    if !args.flag("keep") {
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Medians over the repetitions, one line per row and engine, on stderr.
fn summary(rows: &[Value]) {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (
            r["row"].as_str().unwrap_or("").to_string(),
            r["engine"].as_str().unwrap_or("").to_string(),
        );
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    eprintln!(
        "| row | engine | reps | ops/s | p50 ms | p99 ms | requests/op | requests/call | bytes fetched/op | secs | MiB/s |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|---|---|---|");
    for (row, engine) in keys {
        let of: Vec<&Value> = rows
            .iter()
            .filter(|r| r["row"] == row.as_str() && r["engine"] == engine.as_str())
            .collect();
        let m = |f: &str| median(of.iter().filter_map(|r| r[f].as_f64()).collect());
        eprintln!(
            "| {row} | {engine} | {} | {:.0} | {:.2} | {:.2} | {:.3} | {:.2} | {:.0} | {:.3} | {:.1} |",
            of.len(),
            m("ops_per_sec"),
            m("p50_ms"),
            m("p99_ms"),
            m("requests_per_op"),
            m("requests_per_call"),
            m("bytes_fetched_per_op"),
            m("secs"),
            m("mib_per_sec"),
        );
    }
}
