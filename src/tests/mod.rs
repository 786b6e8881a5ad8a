//! Crate-internal tests that run the store on the simulated file system (`io::sim`): power
//! loss at every kind of I/O ([`powerloss`]), I/O errors at every I/O site ([`faults`]), and
//! footers read at the segment layer ([`footer`]).
//! The sweeps run a sample of their cases by default and every case under
//! `PODSTORE_TEST_LONG=1` ([`long`]).
//! They reach the store through `Store::open_with_storage`, which is not public.

mod catalog;
mod expired_files;
mod faults;
mod footer;
mod group_commit;
mod hotset;
mod lazy;
mod list_race;
/// The long-test switch (`PODSTORE_TEST_LONG`) and the seeds of sampled sweeps: one file, shared
/// with the integration tests.
#[path = "../../tests/common/long.rs"]
#[allow(dead_code)]
pub(crate) mod long;
mod offer;
mod powerloss;
mod powerloss_evict;
mod powerloss_remote;
mod powerloss_ttl;
mod quarantine;
mod ranges;
mod reads;
mod versions;
mod zero_ahead;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::io::sim::Sim;
use crate::io::storage::Storage;
use crate::{Durability, Options, Result, Store};

/// A sampled sweep leaves no item out for good: over `every` consecutive seeds each item is
/// picked exactly once, and `pick` is the same for the same seed and item.
#[test]
fn a_sample_picks_every_item_under_some_seed() {
    for every in [1u64, 3, 5] {
        for i in 0..40 {
            let picked = (0..every)
                .filter(|&seed| long::Sample::with_seed("t", 1000 + seed).picks(i, every))
                .count();
            assert_eq!(picked, 1, "item {i}, one in {every}");
        }
    }
    let a = long::Sample::with_seed("t", 7);
    let b = long::Sample::with_seed("t", 7);
    let picks: Vec<u64> = (0..100).map(|i| a.pick(i, 10)).collect();
    assert_eq!(picks, (0..100).map(|i| b.pick(i, 10)).collect::<Vec<_>>());
    assert!(picks.iter().all(|&p| p < 10));
    // Not one value for all items.
    assert!(picks.iter().any(|&p| p != picks[0]));
}

#[test]
fn store_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<crate::Store>();
    assert_send_sync::<crate::ValueReader>();
}

/// The store directory inside a simulation.
pub const DIR: &str = "/sim/store";

/// Values of at least this many bytes put with `Durability::Sync` go to blob files.
pub const LARGE: usize = 48 << 10;

/// Small segments (1 MiB) and write buffers (64 KiB), so that a short workload rolls segments
/// over and hands off full buffers; blob files from 48 KiB; no background flush or compaction
/// (the tests decide when data becomes durable and when it moves).
pub fn options(durability: Durability) -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .large_value_threshold(LARGE as u64)
        .flush_interval(None)
        .durability(durability)
        // Compaction when the test says (`Store::compact`), at a low threshold so that it
        // rewrites segments even in short workloads.
        .background_compaction(false)
        .compaction_threshold(0.05)
}

/// Opens the store of a simulation.
pub fn open(sim: &Sim, opts: Options) -> Result<Store> {
    Store::open_with_storage(
        Path::new(DIR),
        opts,
        Arc::new(sim.clone()) as Arc<dyn Storage>,
    )
}

/// A simulation with the store directory created.
pub fn new_sim(config: crate::io::sim::SimConfig) -> Sim {
    let sim = Sim::new(config);
    sim.create_dir_all(Path::new(DIR)).expect("mkdir");
    sim
}

/// Lengths of the keys, one per key number: records land at every kind of offset.
const KEY_LENS: [usize; 8] = [1, 2, 7, 16, 100, 1000, 3000, crate::MAX_KEY_LEN];

/// Number of distinct keys.
pub const KEYS: u8 = KEY_LENS.len() as u8;

/// The bytes of key number `k`.
pub fn key(k: u8) -> Vec<u8> {
    let mut bytes = vec![b'.'; KEY_LENS[k as usize]];
    bytes[0] = b'A' + k;
    bytes
}

/// Random bytes that values are cut from (generated once: building values byte by byte is
/// slow in debug builds).
fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        let mut rng = crate::io::sim::Rng::new(0x5EED);
        let mut v = Vec::with_capacity(PATTERN_LEN);
        while v.len() < PATTERN_LEN {
            v.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        v
    })
}

const PATTERN_LEN: usize = 1 << 20;

/// The value of version `version` (unique per put) of `len` bytes: it starts with the version
/// number, and the rest is random bytes from a place that depends on the version, so that
/// another version's or another key's bytes never match it, nor do bytes moved within it.
pub fn value(version: u32, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = version.to_le_bytes().into_iter().take(len).collect();
    let mut at = (version as usize).wrapping_mul(2_654_435_761) % PATTERN_LEN;
    while v.len() < len {
        let n = (len - v.len()).min(PATTERN_LEN - at);
        v.extend_from_slice(&pattern()[at..at + n]);
        at = 0;
    }
    v
}

/// One write as the store acknowledges it: a put (`Some((version, length))`), a delete
/// (`None`), or a whole batch of them.
pub type Commit = Vec<(u8, Option<(u32, usize)>)>;

/// What a key was seen to hold: a value of at least 4 bytes is verified once and named by its
/// version (which it starts with); shorter ones are kept as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The exact value of this version, of this length.
    Version(u32, usize),
    /// A value of fewer than 4 bytes.
    Bytes(Vec<u8>),
}

impl Seen {
    /// How the value of version `v`, `len` bytes, is seen.
    pub fn of((v, len): (u32, usize)) -> Seen {
        if len >= 4 {
            Seen::Version(v, len)
        } else {
            Seen::Bytes(value(v, len))
        }
    }
}

/// The seen form of a model state.
pub fn seen_state(state: &BTreeMap<u8, (u32, usize)>) -> BTreeMap<u8, Seen> {
    state.iter().map(|(&k, &c)| (k, Seen::of(c))).collect()
}

/// What the store holds, read through its API. A value that is no version's exact bytes (torn,
/// another key's, stale bytes at the wrong place), or a failed read, is an error.
pub fn observe(store: &Store) -> Result<BTreeMap<u8, Seen>, String> {
    match observe_typed(store) {
        Ok(r) => r,
        Err(e) => Err(format!("read failed: {e}")),
    }
}

/// [`observe`], telling a failed read (the outer error) from wrong data (the inner one).
pub fn observe_typed(store: &Store) -> Result<Result<BTreeMap<u8, Seen>, String>> {
    let mut seen = BTreeMap::new();
    for k in 0..KEYS {
        let Some(bytes) = store.get(key(k))? else {
            continue;
        };
        if bytes.len() < 4 {
            seen.insert(k, Seen::Bytes(bytes));
            continue;
        }
        let v = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        if value(v, bytes.len()) != bytes {
            return Ok(Err(format!(
                "key {k} holds {} bytes that are no version's value",
                bytes.len()
            )));
        }
        seen.insert(k, Seen::Version(v, bytes.len()));
    }
    let mut listed: Vec<u8> = Vec::new();
    for kb in store.keys() {
        // Listing reads footers: a failed read is a failed read, like a get's.
        let kb = kb?;
        listed.push((0..KEYS).find(|&k| key(k) == kb).expect("a known key"));
    }
    if !listed.is_sorted() {
        return Ok(Err(format!("keys() lists {listed:?}, not in order")));
    }
    let want: Vec<u8> = seen.keys().copied().collect();
    if listed != want {
        return Ok(Err(format!("keys() lists {listed:?}, get finds {want:?}")));
    }
    Ok(Ok(seen))
}

/// The state after applying `commits` in order.
pub fn apply(commits: &[Commit]) -> BTreeMap<u8, (u32, usize)> {
    let mut state = BTreeMap::new();
    for c in commits {
        for &(k, cell) in c {
            match cell {
                Some(v) => {
                    state.insert(k, v);
                }
                None => {
                    state.remove(&k);
                }
            }
        }
    }
    state
}
