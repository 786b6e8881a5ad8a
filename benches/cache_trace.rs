//! The size cap as a cache (issue 39): hit ratio on a zipfian read trace, with and without the
//! second chance ([`Options::second_chance`]). Each get that misses is filled by a put, as a
//! read-through cache does. Figures, not timings: the hit ratio and the bytes written per byte
//! inserted (second chances included) do not depend on the machine's speed.
//!
//! ```text
//! cargo bench --bench cache_trace
//! TRACE_GETS=400000 TRACE_SKEW=0.8 cargo bench --bench cache_trace
//! ```
//! Environment: `TRACE_CAP_MIB` (16: the cap; segments of 1 MiB), `TRACE_VALUE_KIB` (16),
//! `TRACE_KEYS_X` (10: keys, in multiples of the values the cap holds), `TRACE_GETS` (200000),
//! `TRACE_SKEW` (0.99: the zipf exponent, as in YCSB), `TRACE_SEED` (1).

use podstore::{Durability, Options, Store};

#[path = "../tests/common/mod.rs"]
mod common;
use common::{Random, XorShift};

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Ranks drawn with probability proportional to `1 / rank^skew`, by binary search in the CDF.
struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, skew: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut sum = 0.0;
        for r in 1..=n {
            sum += 1.0 / (r as f64).powf(skew);
            cdf.push(sum);
        }
        for c in &mut cdf {
            *c /= sum;
        }
        Zipf { cdf }
    }

    fn draw(&self, rng: &mut XorShift) -> usize {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

struct Run {
    hits: u64,
    gets: u64,
    inserted: u64,
    second_chances: u64,
    second_chance_bytes: u64,
    evicted_files: u64,
}

fn run(second_chance: bool) -> Run {
    let cap = env("TRACE_CAP_MIB", 16.0) as u64 * (1 << 20);
    let value = env("TRACE_VALUE_KIB", 16.0) as usize * 1024;
    let keys = (cap as usize / value) * env("TRACE_KEYS_X", 10.0) as usize;
    let gets = env("TRACE_GETS", 200_000.0) as u64;
    let zipf = Zipf::new(keys, env("TRACE_SKEW", 0.99));
    let mut rng = XorShift::new(env("TRACE_SEED", 1.0) as u64);
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .segment_size(1 << 20)
        .size_cap(Some(cap))
        .second_chance(second_chance)
        .durability(Durability::Buffered)
        .background_compaction(false)
        .cache_capacity(1 << 20);
    let store = Store::open_with(dir.path(), opts).unwrap();
    // Ranks are scattered over the key space, so that hot keys are not written together.
    let name = |rank: usize| {
        format!(
            "k{:016x}",
            (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )
    };
    let body = vec![0x5au8; value];
    let (mut hits, mut inserted) = (0, 0);
    for _ in 0..gets {
        let k = name(zipf.draw(&mut rng));
        if store.get(&k).unwrap().is_some() {
            hits += 1;
        } else {
            store.put(&k, &body).unwrap();
            inserted += value as u64;
        }
    }
    let s = store.stats();
    assert_eq!(s.capped_gets, gets);
    assert_eq!(s.capped_get_hits, hits);
    Run {
        hits,
        gets,
        inserted,
        second_chances: s.second_chances,
        second_chance_bytes: s.second_chance_bytes,
        evicted_files: s.evicted_files,
    }
}

fn main() {
    println!(
        "{:<14} {:>9} {:>10} {:>14} {:>16} {:>9}",
        "policy", "hit ratio", "gets", "second chances", "extra bytes/ins", "evicted"
    );
    for (label, on) in [("fifo", false), ("second chance", true)] {
        let r = run(on);
        println!(
            "{label:<14} {:>9.4} {:>10} {:>14} {:>16.4} {:>9}",
            r.hits as f64 / r.gets as f64,
            r.gets,
            r.second_chances,
            r.second_chance_bytes as f64 / r.inserted.max(1) as f64,
            r.evicted_files
        );
    }
}
