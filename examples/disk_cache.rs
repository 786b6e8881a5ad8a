//! A read-through disk cache in front of a slow source: values that expire, and a store that
//! stays within a size by forgetting its oldest files instead of failing when it is full.
//!
//! Run: `cargo run --release --example disk_cache [--requests N] [DIR]` (default 4000 requests)
//!
//! Without DIR the cache lives in a fresh temporary directory, removed at the end. A given DIR
//! must be new, empty or a podstore store; the cache is left there (at most 16 MiB and one
//! 1 MiB segment).
//!
//! The "source" is a function that takes 1 ms to make a thumbnail of 16 to 48 KiB for a name,
//! as an object store or an image service would; it creates nothing. Requests follow a skewed
//! pattern (a few names are asked for often, most rarely), over about three times as many
//! thumbnails as the cache holds. Thumbnails are kept for an hour (`PutOptions::ttl`); a
//! "latest" listing, which changes on the source, for 200 ms.

mod common;

use std::time::{Duration, Instant};

use common::{Args, Failure, finish, size};
use podstore::{Admission, Durability, Options, PutOptions, Store};

const USAGE: &str = "disk_cache [--requests N] [DIR]";

/// The cache's size cap: the store keeps its files within this plus one segment.
const CAP: u64 = 16 << 20;
/// Thumbnails the source can make: about three times what the cap holds.
const NAMES: u64 = 1500;

/// The slow source: 1 ms per request, bytes that name what they are.
fn fetch_from_source(name: &str) -> Vec<u8> {
    std::thread::sleep(Duration::from_millis(1));
    let seed = name
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    let len = 16_384 + (seed % 32_768) as usize;
    let mut v = format!("{name}:").into_bytes();
    v.resize(len, (seed % 251) as u8);
    v
}

/// A read-through get: the cache's copy if it has one, else the source's, kept for `ttl`.
fn get(cache: &Store, name: &str, ttl: Duration) -> Result<(Vec<u8>, bool), podstore::Error> {
    if let Some(v) = cache.get(name)? {
        return Ok((v, true));
    }
    let v = fetch_from_source(name);
    // `offer`, not `put`: a refill is written unless the write would wait for the disk (then
    // nothing is written, and the next miss fetches the value again), so a busy disk never
    // slows the requests down. A store of record would `put`.
    cache.offer_with(name, &v, &PutOptions::new().ttl(ttl))?;
    Ok((v, false))
}

/// A skewed draw of a thumbnail number: small numbers far more often than large ones.
fn skewed(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let u = (*state >> 11) as f64 / (1u64 << 53) as f64;
    ((NAMES as f64).powf(u) - 1.0) as u64
}

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let args = Args::parse(USAGE, &["--requests"], &[], 1)?;
    let requests: u64 = args.option("--requests", 4000)?;
    if !(1..=10_000_000).contains(&requests) {
        return Err(Failure::usage("--requests: 1 to 10000000"));
    }
    let dir = args.store_dir("disk_cache")?;
    let opts = Options::default()
        // Eviction drops whole segments: 1 MiB ones, a sixteenth of the cap (a cap alone would
        // choose 1 MiB too: a thirty-second of it, at least 1 MiB).
        .segment_size(1 << 20)
        .size_cap(Some(CAP))
        // A cache can fetch again what a crash loses: no fdatasync per put.
        .durability(Durability::Buffered)
        // A miss costs a request to the source: thumbnails read since they were written are
        // appended again before their segment is dropped, so that the popular ones stay.
        .second_chance(true)
        // Once the cache has evicted, a name's first refill is turned away and its second
        // written: names asked for once do not push out the ones asked for again. With second
        // chances, the setting that hit most on docs/benchmarks.md's cache traces.
        .admission(Admission::SecondOffer)
        .cache_capacity(4 << 20);
    let cache = dir.open(opts)?;
    println!("cache in {}, capped at {}", dir.path().display(), size(CAP));

    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let (mut hits, mut bytes) = (0u64, 0u64);
    let start = Instant::now();
    for _ in 0..requests {
        let name = format!("thumb/{}", skewed(&mut state));
        let (v, hit) = get(&cache, &name, Duration::from_secs(3600))?;
        assert!(
            v.starts_with(format!("{name}:").as_bytes()),
            "{name}: another value"
        );
        hits += hit as u64;
        bytes += v.len() as u64;
    }
    let elapsed = start.elapsed();
    let s = cache.stats();
    println!(
        "{requests} requests ({}) in {elapsed:.2?}: {:.1} % served from the cache",
        size(bytes),
        100.0 * hits as f64 / requests as f64
    );
    println!(
        "on disk: {} (cap {} + one segment); evicted {} files, {} of values; {} second chances; \
         {} refills turned away",
        size(s.disk_bytes),
        size(CAP),
        s.evicted_files,
        size(s.evicted_bytes),
        s.second_chances,
        s.offers_not_admitted
    );
    assert!(s.disk_bytes <= CAP + (1 << 20) + (64 << 10), "{s:?}");

    // A value with a short time to live: gone from the cache once it expires, so the next
    // request goes to the source again. A new name's first refill is turned away once the
    // cache has evicted (the doorkeeper); its second is written.
    let short = Duration::from_millis(200);
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(get(&cache, "latest", short)?.1);
    }
    std::thread::sleep(short + Duration::from_millis(50));
    let (_, expired) = get(&cache, "latest", short)?;
    let said = |hit: &bool| if *hit { "a hit" } else { "fetched" };
    println!(
        "\"latest\" (200 ms to live): {}, then after 250 ms {}",
        seen.iter().map(said).collect::<Vec<_>>().join(", "),
        if expired { "a hit" } else { "fetched again" }
    );
    assert!(seen[2] && !expired);

    cache.close()?;
    println!("{}", dir.farewell());
    Ok(())
}
