//! kill -9 during concurrent durable writes: single puts and deletes, then also atomic batches
//! and large values written to blob files, then all that while the store compacts.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use podstore::format::record::{FLAG_BATCH_CONTINUES, RecordPlace, decode_record};
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore::{Durability, Error, IoMode, Options, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::files::{
    FileKind, copy_dir, copy_dir_to, copy_store, read_segments, store_files, store_paths,
};
use crate::common::store::{env_u64, mode_name};
use crate::common::{Random, SplitMix};
use crate::support::{BLOCK, describe, fnv1a, options, value_for};

mod check;
pub use check::assert_key_state;
use check::*;

const THREADS: usize = 4;
/// Rounds of each kill -9 test (one child, one kill each, all on one directory).
const ROUNDS: u64 = 5;
/// Rounds under `PODSTORE_TEST_LONG`.
const LONG_ROUNDS: u64 = 25;
/// Overrides [`ROUNDS`] and [`LONG_ROUNDS`] (for long runs: scripts/crash-loop.sh).
const ROUNDS_VAR: &str = "PODSTORE_CRASH_ROUNDS";
/// Varies the workloads and kill points of the kill -9 tests; 0, the default, is the fixed seed
/// they always run with.
const SEED_VAR: &str = "PODSTORE_CRASH_SEED";
/// Each round's child is killed after a number of acknowledged operations in this range.
const KILL_AFTER: (u64, u64) = (1, 250);
/// Operations per child thread if it is never killed (it always is, long before).
const CHILD_MAX_OPS: usize = 100_000;
/// `Options::large_value_threshold` of the mixed workload, below its large values.
pub const LARGE_THRESHOLD: u64 = 96 << 10;
/// Length range of the mixed workload's large values: a blob file each when put alone.
pub const LARGE_LEN: (u64, u64) = (100 << 10, 300 << 10);

/// `base` varied by the crash seed; seed 0 leaves it unchanged.
fn seeded(base: u64, seed: u64) -> u64 {
    base ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the threads of a kill -9 child do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Single puts (up to 160 KiB, all through the log) and deletes of the round's own keys.
    Plain,
    /// Single puts and deletes, atomic batches of 2 to 6 puts and deletes, and large values put
    /// alone (blob files) or in batches (through the log). Keys of earlier rounds are
    /// overwritten and deleted, deleted keys are written again.
    Batches,
    /// [`Mix::Batches`] while the store compacts: a low threshold, the background compactor
    /// unthrottled, and one more thread calling `Store::compact` in a loop.
    Compact,
}

impl Mix {
    fn name(self) -> &'static str {
        match self {
            Mix::Plain => "plain",
            Mix::Batches => "batches",
            Mix::Compact => "compact",
        }
    }

    pub fn parse(name: &str) -> Mix {
        [Mix::Plain, Mix::Batches, Mix::Compact]
            .into_iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("unknown workload mix {name}"))
    }

    fn options(self, mode: IoMode) -> Options {
        let opts = options(mode, Durability::Sync);
        match self {
            Mix::Plain => opts,
            Mix::Batches => opts.large_value_threshold(LARGE_THRESHOLD),
            Mix::Compact => opts
                .large_value_threshold(LARGE_THRESHOLD)
                .compaction_threshold(0.25)
                .compaction_rate(None),
        }
    }

    /// Names the test in messages and seeds its kill points.
    fn label(self, mode: IoMode) -> String {
        match self {
            Mix::Plain => mode_name(mode).to_string(),
            Mix::Batches => format!("batches {}", mode_name(mode)),
            Mix::Compact => format!("compact {}", mode_name(mode)),
        }
    }
}

fn open_mix(dir: &Path, mix: Mix, mode: IoMode) -> Store {
    Store::open_with(dir, mix.options(mode))
        .unwrap_or_else(|e| panic!("open {} ({}): {e}", dir.display(), mix.label(mode)))
}

/// The state of a key: `Some((version, len))` for a value, `None` when absent.
pub type KeyState = Option<(u64, usize)>;

/// The value of `key` at `version` in the kill -9 workloads: [`value_for`] with the version in
/// its first 8 bytes (when it has them), so that a value read back names the write it came from.
pub fn op_value(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut value = value_for(key, version, len);
    let n = len.min(8);
    value[..n].copy_from_slice(&version.to_le_bytes()[..n]);
    value
}

fn expected_value(key: &str, state: KeyState) -> Option<Vec<u8>> {
    state.map(|(version, len)| op_value(key.as_bytes(), version, len))
}

/// A value read back, with the version it claims.
fn describe_found(found: Option<&[u8]>) -> String {
    match found {
        Some(v) if v.len() >= 8 => format!(
            "{} (stamped version {})",
            describe(found),
            u64::from_le_bytes(v[..8].try_into().unwrap())
        ),
        _ => describe(found),
    }
}

/// One operation of a batch: a put of a value of this length (`Some`) or a delete (`None`).
type BatchOp = (String, Option<usize>);

/// One operation of a child thread. Each thread owns its keys and runs its operations in order,
/// so at the kill every key is in the state after the thread's last acknowledged operation or,
/// for the keys of the one operation that may have been in flight, after that operation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put {
        key: String,
        version: u64,
        len: usize,
    },
    Delete {
        key: String,
    },
    /// An atomic batch: every value it puts carries its version.
    Batch {
        version: u64,
        ops: Vec<BatchOp>,
    },
}

impl Op {
    /// The state of every key the operation writes, after it (a batch's later write of a key
    /// wins), in the order of first write.
    fn effects(&self) -> Vec<(String, KeyState)> {
        match self {
            Op::Put { key, version, len } => vec![(key.clone(), Some((*version, *len)))],
            Op::Delete { key } => vec![(key.clone(), None)],
            Op::Batch { version, ops } => {
                let mut out: Vec<(String, KeyState)> = Vec::new();
                for (key, len) in ops {
                    let state = len.map(|len| (*version, len));
                    match out.iter_mut().find(|(k, _)| k == key) {
                        Some(e) => e.1 = state,
                        None => out.push((key.clone(), state)),
                    }
                }
                out
            }
        }
    }

    /// How the child acknowledges it.
    fn describe(&self) -> String {
        match self {
            Op::Put { key, version, len } => format!("put {key} {version} {len}"),
            Op::Delete { key } => format!("del {key}"),
            Op::Batch { version, ops } => {
                let mut s = format!("batch {version}");
                for (key, len) in ops {
                    match len {
                        Some(len) => s += &format!(" {key}={len}"),
                        None => s += &format!(" {key}=del"),
                    }
                }
                s
            }
        }
    }

    fn run(&self, store: &Store) -> podstore::Result<()> {
        match self {
            Op::Put { key, version, len } => store
                .put(key.as_bytes(), op_value(key.as_bytes(), *version, *len))
                .map(drop),
            Op::Delete { key } => match store.delete(key.as_bytes())? {
                true => Ok(()),
                false => Err(Error::InvalidOptions("delete of a live key found nothing")),
            },
            Op::Batch { version, ops } => {
                let mut batch = podstore::Batch::new();
                for (key, len) in ops {
                    match len {
                        Some(len) => {
                            batch.put(key.as_bytes(), op_value(key.as_bytes(), *version, *len))
                        }
                        None => batch.delete(key.as_bytes()),
                    };
                }
                store.write(&batch)
            }
        }
    }
}

/// The thread that owns `key` (`r<round>-t<thread>-<n>`).
fn key_owner(key: &str) -> usize {
    key.split('-')
        .nth(1)
        .and_then(|t| t.strip_prefix('t'))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("key {key:?} names no owner thread"))
}

/// The live keys a round's threads start from, per thread, sorted: those of earlier rounds for
/// [`Mix::Batches`] (the child reads them from the store, the parent from its model), none for
/// [`Mix::Plain`].
fn inherited_keys(mix: Mix, live: impl Iterator<Item = String>) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); THREADS];
    if mix != Mix::Plain {
        for key in live {
            out[key_owner(&key)].push(key);
        }
        for keys in &mut out {
            keys.sort_unstable();
        }
    }
    out
}

/// The deterministic operations of thread `thread` in round `round`.
///
/// [`Mix::Plain`]: new keys, overwrites of live keys, deletes of live keys (a deleted key is
/// never written again); versions count per key.
///
/// [`Mix::Batches`]: the same over the thread's keys of this and earlier rounds, deleted keys
/// written again, large values, and batches; versions are unique in the directory's history
/// (round and operation number), so a value read back names the operation that wrote it.
struct Workload {
    mix: Mix,
    rng: SplitMix,
    prefix: String,
    next_key: u64,
    /// Live keys, with the version of the next overwrite (used by [`Mix::Plain`]).
    live: Vec<(String, u64)>,
    /// Keys deleted in this round ([`Mix::Batches`]).
    dead: Vec<String>,
    next_version: u64,
}

impl Workload {
    fn new(mix: Mix, seed: u64, round: u64, thread: usize, inherited: Vec<String>) -> Workload {
        Workload {
            mix,
            rng: SplitMix::new(seeded(round << 8 | thread as u64, seed)),
            prefix: format!("r{round}-t{thread}"),
            next_key: 0,
            live: inherited.into_iter().map(|k| (k, 0)).collect(),
            dead: Vec::new(),
            next_version: round << 32,
        }
    }

    /// Mostly small and medium values, some empty, some larger than the 64 KiB write buffer.
    fn value_len(&mut self) -> usize {
        (match self.rng.below_u64(20) {
            0 => self.rng.below_u64(64),
            1 => self.rng.between(64 << 10, 160 << 10),
            _ => self.rng.below_u64(40 << 10),
        }) as usize
    }

    fn new_key(&mut self) -> String {
        let key = format!("{}-{}", self.prefix, self.next_key);
        self.next_key += 1;
        key
    }

    fn plain(&mut self) -> Op {
        let roll = self.rng.below_u64(100);
        if self.live.is_empty() || roll < 65 {
            let key = self.new_key();
            self.live.push((key.clone(), 0));
            Op::Put {
                key,
                version: 0,
                len: self.value_len(),
            }
        } else if roll < 82 {
            let i = self.rng.below_u64(self.live.len() as u64) as usize;
            self.live[i].1 += 1;
            let (key, version) = self.live[i].clone();
            Op::Put {
                key,
                version,
                len: self.value_len(),
            }
        } else {
            let i = self.rng.below_u64(self.live.len() as u64) as usize;
            Op::Delete {
                key: self.live.swap_remove(i).0,
            }
        }
    }

    /// A value that goes through the log: mostly small, some empty, some larger than the 64 KiB
    /// write buffer, all below the large value threshold.
    fn small_len(&mut self) -> usize {
        (match self.rng.below_u64(20) {
            0 => self.rng.below_u64(16),
            1 => self.rng.between(64 << 10, LARGE_THRESHOLD),
            _ => self.rng.below_u64(24 << 10),
        }) as usize
    }

    fn large_len(&mut self) -> usize {
        self.rng.between(LARGE_LEN.0, LARGE_LEN.1) as usize
    }

    /// A value in a batch: batches also hold values that span write buffers and large ones
    /// (which a batch writes through the log).
    fn batch_len(&mut self) -> usize {
        match self.rng.below_u64(30) {
            0 => self.large_len(),
            1..=3 => self.rng.between(64 << 10, 160 << 10) as usize,
            _ => self.rng.below_u64(8 << 10) as usize,
        }
    }

    fn pick(&mut self, keys: usize) -> usize {
        self.rng.below_u64(keys as u64) as usize
    }

    /// A key to put: a deleted one written again, a live one overwritten, or a new one.
    fn put_key(&mut self) -> String {
        let roll = self.rng.below_u64(100);
        if !self.dead.is_empty() && roll < 10 {
            let i = self.pick(self.dead.len());
            self.dead[i].clone()
        } else if !self.live.is_empty() && roll < 55 {
            let i = self.pick(self.live.len());
            self.live[i].0.clone()
        } else {
            self.new_key()
        }
    }

    /// A key for a batch to delete: mostly a live one, sometimes one that is absent.
    fn batch_delete_key(&mut self) -> String {
        if !self.live.is_empty() && self.rng.below_u64(4) != 0 {
            let i = self.pick(self.live.len());
            self.live[i].0.clone()
        } else if !self.dead.is_empty() && self.rng.below_u64(2) == 0 {
            let i = self.pick(self.dead.len());
            self.dead[i].clone()
        } else {
            self.new_key()
        }
    }

    fn batches(&mut self) -> Op {
        let version = self.next_version;
        self.next_version += 1;
        let roll = self.rng.below_u64(100);
        let op = if roll < 30 || (roll < 60 && self.live.is_empty()) {
            Op::Put {
                key: self.put_key(),
                version,
                len: self.small_len(),
            }
        } else if roll < 45 {
            Op::Put {
                key: self.put_key(),
                version,
                len: self.large_len(),
            }
        } else if roll < 60 {
            let i = self.pick(self.live.len());
            Op::Delete {
                key: self.live[i].0.clone(),
            }
        } else {
            let n = self.rng.between(2, 7) as usize;
            let mut ops: Vec<BatchOp> = Vec::with_capacity(n);
            for _ in 0..n {
                let put = self.rng.below_u64(10) < 7;
                let key = if !ops.is_empty() && self.rng.below_u64(8) == 0 {
                    // The same key again: the later operation wins.
                    let i = self.pick(ops.len());
                    ops[i].0.clone()
                } else if put {
                    self.put_key()
                } else {
                    self.batch_delete_key()
                };
                let len = if put { Some(self.batch_len()) } else { None };
                ops.push((key, len));
            }
            Op::Batch { version, ops }
        };
        for (key, state) in op.effects() {
            self.live.retain(|(k, _)| *k != key);
            self.dead.retain(|k| *k != key);
            match state {
                Some(_) => self.live.push((key, 0)),
                None => self.dead.push(key),
            }
        }
        op
    }
}

impl Iterator for Workload {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        Some(match self.mix {
            Mix::Plain => self.plain(),
            Mix::Batches | Mix::Compact => self.batches(),
        })
    }
}

/// Runs the workload of `round` from `THREADS` threads, acknowledging every completed
/// operation, until killed.
pub fn workload_child(dir: &Path, mix: Mix, mode: IoMode, seed: u64, round: u64) {
    let store = open_mix(dir, mix, mode);
    let inherited = inherited_keys(
        mix,
        store
            .keys()
            .map(|k| String::from_utf8(k.unwrap()).expect("utf-8 key")),
    );
    let writing = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        if mix == Mix::Compact {
            let (store, writing) = (&store, &writing);
            s.spawn(move || {
                while writing.load(Ordering::Relaxed) {
                    match store.compact() {
                        Ok(r) if r.segments_compacted + r.blob_files_removed > 0 => emit(&format!(
                            "compacted {} {}",
                            r.segments_compacted, r.blob_files_removed
                        )),
                        Ok(_) => {}
                        Err(e) => {
                            emit(&format!("fail compaction: {e}"));
                            return;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
        let writing = &writing;
        for (t, keys) in inherited.into_iter().enumerate() {
            let store = &store;
            s.spawn(move || {
                let ops = Workload::new(mix, seed, round, t, keys);
                for (i, op) in ops.take(CHILD_MAX_OPS).enumerate() {
                    match op.run(store) {
                        Ok(()) => emit(&format!("ack {t} {i} {}", op.describe())),
                        Err(e) => {
                            emit(&format!("fail thread {t} op {i} ({}): {e}", op.describe()));
                            break;
                        }
                    }
                }
                writing.store(false, Ordering::Relaxed);
            });
        }
    });
    store.close().unwrap();
}

/// Runs one round's child and kills it after `kill_after` acknowledgements; returns every
/// acknowledgement it sent (also those sent between the count being reached and the kill),
/// per thread, in order. Counts the compactions it reported in `stats`.
fn run_until_killed(
    dir: &Path,
    job: &str,
    kill_after: usize,
    stats: &mut KillStats,
) -> Vec<Vec<String>> {
    let mut child = ChildProc::spawn(dir, job);
    let mut acked = vec![Vec::new(); THREADS];
    let mut count = 0;
    let mut killed = false;
    while let Some(msg) = child.next_message() {
        if let Some(fail) = msg.strip_prefix("fail ") {
            panic!("{job}: child failed: {fail}");
        }
        if let Some(counts) = msg.strip_prefix("compacted ") {
            let mut n = counts.split(' ').map(|n| n.parse::<usize>().unwrap());
            stats.segments_compacted += n.next().unwrap();
            stats.blobs_removed_by_compaction += n.next().unwrap();
            continue;
        }
        let rest = msg
            .strip_prefix("ack ")
            .unwrap_or_else(|| panic!("{job}: unexpected message {msg:?}"));
        let mut parts = rest.splitn(3, ' ');
        let (t, i, body) = (parts.next(), parts.next(), parts.next());
        let t: usize = t.unwrap().parse().unwrap();
        let i: usize = i.unwrap().parse().unwrap();
        assert_eq!(i, acked[t].len(), "{job}: acks of thread {t} out of order");
        acked[t].push(body.unwrap().to_string());
        count += 1;
        if count == kill_after {
            child.kill();
            killed = true;
        }
    }
    assert!(
        killed,
        "{job}: child stopped after {count} acks, before the kill ({:?})",
        child.child.wait()
    );
    acked
}

/// `ROUNDS` rounds on one directory: a child writes with `mix` until killed at a random
/// acknowledgement; a copy of the directory is opened and checked against every acknowledged
/// operation, the next child recovers the directory itself. Prints a `crash-summary` line
/// (totalled by scripts/crash-loop.sh).
fn kill9_rounds(mix: Mix, mode: IoMode) {
    let seed = env_u64(SEED_VAR, 0);
    let rounds = crate::common::long::cases(ROUNDS_VAR, ROUNDS, LONG_ROUNDS);
    let label = mix.label(mode);
    let started = std::time::Instant::now();
    let dir = TempDir::new().unwrap();
    let mut rng = SplitMix::new(seeded(fnv1a(label.as_bytes()), seed));
    let mut model: HashMap<String, KeyState> = HashMap::new();
    let mut stats = KillStats::default();
    for round in 0..rounds {
        let before = store_files(dir.path());
        let inherited = inherited_keys(mix, live_keys(&model).into_iter());
        let kill_after = rng.between(KILL_AFTER.0, KILL_AFTER.1) as usize;
        let job = format!("workload {} {} {seed} {round}", mix.name(), mode_name(mode));
        let acked = run_until_killed(dir.path(), &job, kill_after, &mut stats);
        let ctx = format!(
            "{label} seed {seed} round {round} (killed after {} acks; {})",
            acked.iter().map(Vec::len).sum::<usize>(),
            if round % 2 == 0 {
                "opened with its catalog"
            } else {
                "opened without a catalog"
            }
        );
        // Check a copy, so that the next round's child recovers the crashed directory itself.
        // Even rounds copy the whole directory, catalog and all, and open it as a restart
        // does; odd rounds copy the segment and blob files alone, a store without a catalog
        // whose files are judged by their bytes (the salvage path, and a store of a version
        // before the catalog). The files the catalog lists as removed (compaction had proven
        // them garbage and was about to unlink them) are removed by the first kind of open,
        // and loaded by the second.
        let with_catalog = round % 2 == 0;
        let copy = if with_catalog {
            copy_dir(dir.path())
        } else {
            copy_store(dir.path())
        };
        let garbage = removed_in_catalog(copy.path());
        let found = store_files(copy.path());
        let images = read_segments(copy.path());
        let store = open_mix(copy.path(), mix, mode);
        for r in &store.recovery().recovered {
            // Blob files (a put killed after its record was synced, before its footer) hold no
            // batches.
            if let Some((_, bytes)) = images.iter().find(|(id, _)| *id == r.segment) {
                stats.torn_batches += batch_cut_after(r.segment, bytes, r.data_end) as usize;
            }
        }
        check_kill_report(
            &store,
            &before,
            (&found, &garbage),
            &store_files(copy.path()),
            &mut stats,
            &ctx,
        );
        eprintln!("{ctx}: {} files, {:?}", found.len(), store.recovery());
        for (t, (acks, keys)) in acked.iter().zip(inherited).enumerate() {
            let ops = Workload::new(mix, seed, round, t, keys);
            verify_thread(&store, ops, t, acks, &mut model, &mut stats, &ctx);
        }
        verify_model(&store, &model, &ctx);
        stats.rounds += 1;
    }
    let store = open_mix(dir.path(), mix, mode);
    verify_model(&store, &model, &format!("{label} seed {seed} final reopen"));
    store.close().unwrap();
    if mix == Mix::Compact {
        // Otherwise the kills tested nothing of compaction.
        assert!(
            stats.segments_compacted > 0 && stats.blobs_removed_by_compaction > 0,
            "{label}: the children compacted nothing before their kills: {stats:?}"
        );
    }
    println!(
        "crash-summary: test={} seed={seed} rounds={} kills={} acks={} in_flight_applied={} \
         in_flight_absent={} in_flight_either={} batches_applied={} batches_absent={} \
         torn_batches={} recovered_segments={} removed_blobs={} garbage_removed={} \
         segments_compacted={} blobs_removed_by_compaction={} live_keys={} secs={:.1}",
        label.replace(' ', "-"),
        stats.rounds,
        stats.rounds,
        stats.acks,
        stats.in_flight_applied,
        stats.in_flight_absent,
        stats.in_flight_either,
        stats.batches_applied,
        stats.batches_absent,
        stats.torn_batches,
        stats.recovered_segments,
        stats.removed_blobs,
        stats.garbage_removed,
        stats.segments_compacted,
        stats.blobs_removed_by_compaction,
        live_keys(&model).len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kill9_during_concurrent_sync_writes_direct() {
    kill9_rounds(Mix::Plain, IoMode::Direct);
}

#[test]
fn kill9_during_concurrent_sync_writes_buffered() {
    kill9_rounds(Mix::Plain, IoMode::Buffered);
}

#[test]
fn kill9_during_concurrent_batches_and_large_values_direct() {
    kill9_rounds(Mix::Batches, IoMode::Direct);
}

#[test]
fn kill9_during_concurrent_batches_and_large_values_buffered() {
    kill9_rounds(Mix::Batches, IoMode::Buffered);
}

#[test]
fn kill9_during_compaction_direct() {
    kill9_rounds(Mix::Compact, IoMode::Direct);
}

#[test]
fn kill9_during_compaction_buffered() {
    kill9_rounds(Mix::Compact, IoMode::Buffered);
}
