//! `compare cache`: a disk cache in front of a slow source (issue 39). A zipfian read trace
//! (YCSB's scrambled zipfian, θ = 0.99) over ten times as many values as the cache's disk
//! capacity holds; a get that misses is filled by an insert of the value (what a read-through
//! cache does after fetching it from its source). The source is the value's bytes drawn from
//! an RNG on the missing thread, about 2.7 GB/s here (24 µs for 64 KiB), inside the timed
//! operation, the same for every engine: without it (a copy of a template, 2026-12-08), misses
//! outran the disk at 64 KiB with eight threads and podstore's offers, dropped when the
//! writer is behind, never filled the cache (docs/benchmarks.md). Each engine gets the same
//! memory budget, the same disk capacity and the same directory's disk.
//!
//! Reported: the hit ratio (gets that found their value, after a warm-up of as many operations
//! as the run, which fills the cache), operations per second, p50 and p99 latency of an
//! operation (a get, and the insert after a miss), the bytes the process wrote to the disk per
//! byte inserted (write amplification: from `/proc/self/io`, and from the device's counters in
//! `/proc/diskstats`, which also see io_uring's kernel workers but every other process too), and
//! the directory's size at the end against the capacity.
//!
//! The TTL trace (`--ttl-fraction F`, e.g. 0.5): that fraction of the keys (by key) are put
//! with a time to live of a sixtieth of the run, 60 s of a simulated hour. The run's length is
//! calibrated per engine: the first tenth of the warm-up runs without expiry, and its rate gives
//! the time the measured run will take; the warm-up's last tenth, with expiry, measures the
//! rate again and sets the run's time to live (`ttl_ops` in the line: what it came to in
//! operations, a sixtieth of the run's the aim). podstore expires values itself (`PutOptions::ttl`);
//! foyer has no expiry, so its values carry their expiry time (bytes 8..16) and a get checks
//! it, as an application would, an expired value counting as a miss. Every value an engine
//! returns is checked against its expiry: an expired value served is an error. Each line
//! carries `ttl_gets` and `ttl_hits`, the gets of the keys that expire and their hits, so
//! that the two halves' hit ratios can be told apart (and podstore's `offers_refused_ttl` and
//! `offers_refused_plain`: offers not written, of each half, warm-up included).
//!
//! Engines: `podstore` (`Options::default()` with the cache's memory budget as
//! `cache_capacity`, its disk capacity less one segment as the size cap, puts at
//! `Durability::Buffered`: a cache refills what a crash loses; `--second-chance` for
//! `Options::second_chance`, `--chance-budget F` for `Options::second_chance_budget`,
//! `--offer` for refills by `Store::offer`, `--admission` with it for
//! `Options::admission(Admission::SecondOffer)`) and
//! `foyer` (cargo feature `foyer`: a `HybridCache` of that memory with its block engine on a
//! file device of that capacity, at its defaults but for direct I/O: its file device is
//! buffered by default, and the page cache then holds its whole capacity in memory beside its
//! budget, where podstore and RocksDB read and write the disk; `--foyer-buffered` for its
//! default, as the runs before 2026-12-06 21:00 UTC measured it).

mod engines;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Args;
use crate::engines::Res;
use crate::sys;
use crate::values::{Rng, ScrambledZipfian};

pub use engines::CacheEngine;

/// What one engine is given.
#[derive(Debug, Clone)]
pub struct CacheSpec {
    /// The engine's directory (created; the caller removes it).
    pub dir: PathBuf,
    /// Memory budget in bytes (the in-memory tier or read cache).
    pub memory: u64,
    /// Disk capacity in bytes.
    pub disk: u64,
    /// podstore: `Options::second_chance` (`--second-chance`).
    pub second_chance: bool,
    /// podstore: `Options::second_chance_budget` (`--chance-budget F`; its default, 0.5, when
    /// not given).
    pub chance_budget: Option<f64>,
    /// podstore: misses are filled by `Store::offer` (dropped when the writer is behind the
    /// disk, as foyer's flushers drop entries), not `Store::put` (`--offer`).
    pub offer: bool,
    /// podstore: `Options::admission(Admission::SecondOffer)` (`--admission`, with `--offer`:
    /// a key's first offer after the store evicted is turned away, its second written).
    pub admission: bool,
    /// podstore: `Options::write_buffer_size` (`--write-buffer SIZE`; its default, 1 MiB, when
    /// not given).
    pub write_buffer: Option<u64>,
    /// podstore: `Options::compaction_rate` in bytes a second, 0 for no limit
    /// (`--compaction-rate SIZE`; its default, 64 MiB, when not given).
    pub compaction_rate: Option<u64>,
    /// foyer: its file device buffered (its default: the page cache holds what it writes),
    /// not direct (`--foyer-buffered`).
    pub foyer_buffered: bool,
}

/// The value of key `k`: `len` bytes that name the key, so that a hit can be checked.
fn value_of(k: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    let mut rng = Rng::new(k ^ 0x5EED);
    for chunk in v.chunks_mut(8) {
        let x = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&x[..chunk.len()]);
    }
    v[..8.min(len)].copy_from_slice(&k.to_le_bytes()[..8.min(len)]);
    v
}

fn key_of(k: u64) -> [u8; 16] {
    let mut key = *b"cache-0000000000";
    key[6..].copy_from_slice(format!("{:010}", k % 10_000_000_000).as_bytes());
    key
}

#[derive(Default)]
struct Counts {
    gets: AtomicU64,
    hits: AtomicU64,
    inserted: AtomicU64,
    /// Gets that found a value past its expiry (the application-level check, for engines
    /// without expiry of their own).
    expired: AtomicU64,
    /// Gets of the keys that expire (the TTL trace), and how many of them hit: the hit ratio
    /// of the two halves apart.
    ttl_gets: AtomicU64,
    ttl_hits: AtomicU64,
}

/// The TTL trace: which keys expire, and after how long.
#[derive(Debug, Clone, Copy)]
struct Ttl {
    /// Keys `k` with `k % 1000 < per_mille` get a time to live.
    per_mille: u64,
    ttl: Duration,
}

impl Ttl {
    fn of(&self, k: u64) -> Option<Duration> {
        // Scrambled: the zipfian's hot keys are not all on one side.
        ((k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % 1000 < self.per_mille).then_some(self.ttl)
    }
}

/// Milliseconds since the Unix epoch (the clock podstore judges expiry by).
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `compare cache --engine E --dir D [--value-size 16KiB] [--threads 1] [--memory 64MiB]
/// [--disk 1GiB] [--ops N]`: one run, one JSON line.
pub fn run(args: &Args) -> Result<String, String> {
    let engine = args.need("engine")?.to_string();
    let base = PathBuf::from(args.need("dir")?);
    let value_size = args.size("value-size", 16 << 10)? as usize;
    let threads = args.num("threads", 1)?.max(1) as usize;
    let memory = args.size("memory", 64 << 20)?;
    let disk = args.size("disk", 1 << 30)?;
    let records = (10 * disk / value_size as u64).max(1);
    let ops = args.num("ops", 4 * disk / value_size as u64)?;
    let dir = base.join(format!("cache-{engine}"));
    if dir.exists() {
        return Err(format!("{} exists: give an empty --dir", dir.display()));
    }
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let spec = CacheSpec {
        dir: dir.clone(),
        memory,
        disk,
        second_chance: args.flag("second-chance"),
        chance_budget: args
            .str("chance-budget")
            .map(|_| args.secs("chance-budget", 0.5))
            .transpose()?,
        offer: args.flag("offer"),
        admission: args.flag("admission"),
        compaction_rate: args
            .str("compaction-rate")
            .map(|_| args.size("compaction-rate", 64 << 20))
            .transpose()?,
        write_buffer: args
            .str("write-buffer")
            .map(|_| args.size("write-buffer", 1 << 20))
            .transpose()?,
        foyer_buffered: args.flag("foyer-buffered"),
    };
    if spec.admission && !spec.offer {
        return Err("--admission applies to offers: give --offer too".into());
    }
    let (spec_second_chance, spec_offer) = (spec.second_chance, spec.offer);
    let (spec_admission, spec_write_buffer) = (spec.admission, spec.write_buffer);
    let spec_compaction_rate = spec.compaction_rate;
    let spec_chance_budget = spec.chance_budget;
    let foyer_direct = engine == "foyer" && !spec.foyer_buffered;
    let cache = engines::open(&engine, &spec).map_err(|e| format!("open {engine}: {e}"))?;
    let cache: Arc<dyn CacheEngine> = Arc::from(cache);
    let zipf = Arc::new(ScrambledZipfian::new(records));
    let ttl_fraction = args.secs("ttl-fraction", 0.0)?;
    if !(0.0..=1.0).contains(&ttl_fraction) {
        return Err(format!("--ttl-fraction {ttl_fraction}: not within 0 and 1"));
    }
    // The warm-up: as many operations as the run, uncounted. With the TTL trace, its first
    // tenth (without expiry) gives the engine's rate, hence the run's length, whose sixtieth
    // is the time to live (60 s of a simulated hour). That rate is an empty cache's, which can
    // differ from the full one's by 2× either way (a store that admits every refill until it
    // first evicts, foyer's memory tier filling): the warm-up's last tenth, with expiry,
    // measures it again and sets the run's time to live, so that a value lives a sixtieth of
    // the run in operations whatever the engine (`ttl_ops` reports what it came to).
    let warm = Counts::default();
    let mut ttl = None;
    let phase = |ttl| Phase {
        cache: &cache,
        zipf: &zipf,
        threads,
        value_size,
        ttl,
    };
    let ttl_for = |secs: f64, done: u64| Ttl {
        per_mille: (ttl_fraction * 1000.0).round() as u64,
        ttl: Duration::from_secs_f64((secs * ops as f64 / done as f64 / 60.0).max(0.001)),
    };
    if ttl_fraction > 0.0 {
        let tenth = (ops / 10).max(1);
        let began = Instant::now();
        phase(None).run(tenth, 1, &warm, &mut Vec::new())?;
        let first = ttl_for(began.elapsed().as_secs_f64(), tenth);
        phase(Some(first)).run(ops.saturating_sub(2 * tenth), 3, &warm, &mut Vec::new())?;
        let began = Instant::now();
        phase(Some(first)).run(tenth, 4, &warm, &mut Vec::new())?;
        ttl = Some(ttl_for(began.elapsed().as_secs_f64(), tenth));
    } else {
        phase(None).run(ops, 3, &warm, &mut Vec::new())?;
    }
    let p = phase(ttl);
    let counts = Counts::default();
    let io0 = sys::io_counters();
    let device0 = device_sectors_written(&dir);
    let start = Instant::now();
    let mut lat = Vec::new();
    p.run(ops, 2, &counts, &mut lat)?;
    let secs = start.elapsed().as_secs_f64();
    let on_disk = sys::dir_bytes(&dir);
    let stats = cache.stats();
    // Closed and synced before the write counters are read: what an engine still held in its
    // buffers is written by then.
    drop(cache);
    rustix::fs::sync();
    let io = sys::io_counters().since(io0);
    let device = device_sectors_written(&dir).saturating_sub(device0) * 512;
    lat.sort_unstable();
    let at = |q: f64| {
        lat.get(((lat.len().max(1) - 1) as f64 * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let gets = counts.gets.load(Ordering::Relaxed);
    let hits = counts.hits.load(Ordering::Relaxed);
    let inserted = counts.inserted.load(Ordering::Relaxed);
    Ok(serde_json::json!({
        "workload": "cache",
        "engine": engine,
        "second_chance": spec_second_chance,
        "chance_budget": spec_chance_budget,
        "offer": spec_offer,
        "admission": spec_admission,
        "write_buffer": spec_write_buffer,
        "compaction_rate": spec_compaction_rate,
        "foyer_direct": foyer_direct,
        "value_size": value_size,
        "threads": threads,
        "memory": memory,
        "disk": disk,
        "records": records,
        "ops": gets,
        "secs": secs,
        "ops_per_sec": gets as f64 / secs,
        "hit_ratio": hits as f64 / gets.max(1) as f64,
        "p50_us": at(0.5),
        "p99_us": at(0.99),
        "bytes_inserted": inserted,
        "bytes_written": io.write_bytes,
        "write_amplification": io.write_bytes as f64 / inserted.max(1) as f64,
        "device_bytes_written": device,
        "device_write_amplification": device as f64 / inserted.max(1) as f64,
        "dir_bytes_end": on_disk,
        "ttl_fraction": ttl_fraction,
        "ttl_ms": ttl.map(|t| t.ttl.as_secs_f64() * 1000.0),
        // The time to live in operations of the measured run (a sixtieth of them is the aim).
        "ttl_ops": ttl.map(|t| t.ttl.as_secs_f64() * gets as f64 / secs),
        "expired_gets": counts.expired.load(Ordering::Relaxed),
        "ttl_gets": counts.ttl_gets.load(Ordering::Relaxed),
        "ttl_hits": counts.ttl_hits.load(Ordering::Relaxed),
        "engine_stats": stats,
        "loadavg": sys::loadavg(),
    })
    .to_string())
}

/// Sectors written to the block device under `dir` so far (`/proc/diskstats`, every process's
/// writes: meaningful on a quiet machine only). The process's own counter (`/proc/self/io`)
/// misses writes that io_uring's kernel workers make for it.
fn device_sectors_written(dir: &std::path::Path) -> u64 {
    let source = sys::mount_of(dir).source;
    let name = source.rsplit('/').next().unwrap_or_default().to_string();
    let text = std::fs::read_to_string("/proc/diskstats").unwrap_or_default();
    text.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 9 && f[2] == name)
        .and_then(|f| f[9].parse().ok())
        .unwrap_or(0)
}

/// What every operation of a run shares.
struct Phase<'a> {
    cache: &'a Arc<dyn CacheEngine>,
    zipf: &'a Arc<ScrambledZipfian>,
    threads: usize,
    value_size: usize,
    ttl: Option<Ttl>,
}

impl Phase<'_> {
    /// `threads` threads do `ops` operations in all; latencies (µs) into `lat`.
    fn run(&self, ops: u64, seed: u64, counts: &Counts, lat: &mut Vec<u32>) -> Result<(), String> {
        let (threads, value_size, ttl) = (self.threads, self.value_size, self.ttl);
        let native = self.cache.expires();
        let per = ops / threads as u64;
        let results: Vec<Res<Vec<u32>>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (cache, zipf) = (self.cache.clone(), self.zipf.clone());
                    s.spawn(move || -> Res<Vec<u32>> {
                        let mut rng = Rng::new(seed * 1000 + t as u64);
                        let mut lat = Vec::with_capacity(per as usize);
                        for _ in 0..per {
                            let k = zipf.next(&mut rng);
                            let key = key_of(k);
                            let expires = ttl.and_then(|t| t.of(k));
                            let op = Instant::now();
                            counts.gets.fetch_add(1, Ordering::Relaxed);
                            let mut hit = false;
                            if let Some(v) = cache.get(&key)? {
                                if v.len() != value_size
                                    || v[..8] != k.to_le_bytes()[..8.min(v.len())]
                                {
                                    return Err(format!("key {k}: a wrong value").into());
                                }
                                hit = true;
                                if expires.is_some() && v.len() >= 16 {
                                    let at = u64::from_le_bytes(v[8..16].try_into().unwrap());
                                    let now = now_ms();
                                    if now >= at {
                                        // An engine that expires values may have judged a
                                        // moment before this clock read; past that, it served
                                        // an expired value.
                                        if native && now > at + 50 {
                                            return Err(format!(
                                                "key {k}: served {} ms past its expiry",
                                                now - at
                                            )
                                            .into());
                                        }
                                        if !native {
                                            counts.expired.fetch_add(1, Ordering::Relaxed);
                                            hit = false;
                                        }
                                    }
                                }
                            }
                            if expires.is_some() {
                                counts.ttl_gets.fetch_add(1, Ordering::Relaxed);
                                if hit {
                                    counts.ttl_hits.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            if hit {
                                counts.hits.fetch_add(1, Ordering::Relaxed);
                            } else {
                                let mut v = value_of(k, value_size);
                                match expires {
                                    Some(ttl) if v.len() >= 16 => {
                                        let at = now_ms() + ttl.as_millis() as u64;
                                        v[8..16].copy_from_slice(&at.to_le_bytes());
                                        if native {
                                            cache.insert_for(&key, &v, ttl)?;
                                        } else {
                                            cache.insert(&key, &v)?;
                                        }
                                    }
                                    _ => cache.insert(&key, &v)?,
                                }
                                counts.inserted.fetch_add(v.len() as u64, Ordering::Relaxed);
                            }
                            lat.push(op.elapsed().as_micros().min(u32::MAX as u128) as u32);
                        }
                        Ok(lat)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            lat.extend(r.map_err(|e| e.to_string())?);
        }
        Ok(())
    }
}
