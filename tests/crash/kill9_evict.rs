//! kill -9 of a process writing from several threads into a store whose size cap is small
//! enough that eviction runs all the time, while another thread compacts (issue 39). After each
//! kill the store opens (a dropped file is never taken for damage), the directory holds no
//! more than the cap and one segment (by the file system), and every key reads either nothing
//! (eviction may drop any value) or a value no older than its newest acknowledged write: that
//! value, or one written after it (maybe unacknowledged); never an older one, never one a
//! delete replaced, never another key's bytes. Rounds as in `kill9` (`PODSTORE_CRASH_ROUNDS`,
//! `PODSTORE_CRASH_SEED`, more under `PODSTORE_TEST_LONG`; scripts/crash-loop.sh runs them).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use podstore::{Durability, IoMode, Options, Store};
use tempfile::TempDir;

use crate::child::{ChildProc, emit};
use crate::common::store::{env_u64, mode_name};
use crate::common::{Random, SplitMix};
use crate::kill9::op_value;
use crate::support::options;

const THREADS: u64 = 3;
const KEYS_PER_THREAD: u64 = 50;
const SEGMENT: u64 = 1 << 20;
/// Three segments: the children write several times that in every round.
const CAP: u64 = 3 * SEGMENT;
const ROUNDS: u64 = 4;
const LONG_ROUNDS: u64 = 25;
/// Each round's child is killed after a number of acknowledged operations in this range.
const KILL_AFTER: (u64, u64) = (60, 300);

fn ev_options(mode: IoMode) -> Options {
    options(mode, Durability::Sync)
        .segment_size(SEGMENT)
        .size_cap(Some(CAP))
        .large_value_threshold(96 << 10)
        .compaction_threshold(0.25)
        .compaction_rate(None)
        .background_compaction(true)
}

/// A version unique in the directory's history and growing with each key's writes: round,
/// thread, operation.
fn version(round: u64, thread: u64, op: u64) -> u64 {
    round << 40 | thread << 32 | op
}

/// Thread `t`'s operations in `round`: (key, version, `Some(len)` for a put, `None` for a
/// delete). Mostly log values, some blob files of their own.
fn ops(seed: u64, round: u64, t: u64) -> impl Iterator<Item = (String, u64, Option<usize>)> {
    let mut rng = SplitMix::new(seed ^ (round << 8 | t).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..).map(move |i| {
        let key = format!("e-t{t}-{}", rng.below_u64(KEYS_PER_THREAD));
        let len = match rng.below_u64(100) {
            0..=11 => None,
            12..=24 => Some(rng.between(100 << 10, 300 << 10) as usize),
            _ => Some(rng.between(16, 40 << 10) as usize),
        };
        (key, version(round, t, i), len)
    })
}

/// The child: writes until killed, saying before each operation what it writes (`w`), and
/// after it that it was acknowledged (`ack`).
pub fn kill9_evict_child(dir: &Path, mode: IoMode, seed: u64, round: u64) {
    let store = Store::open_with(dir, ev_options(mode)).unwrap();
    let writing = AtomicBool::new(true);
    std::thread::scope(|s| {
        let (st, w) = (&store, &writing);
        s.spawn(move || {
            while w.load(Ordering::Relaxed) {
                match st.compact() {
                    Ok(r) if r.segments_compacted + r.blob_files_removed > 0 => {
                        emit(&format!("compacted {}", r.segments_compacted))
                    }
                    Ok(_) => {}
                    Err(e) => return emit(&format!("fail compaction: {e}")),
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        for t in 0..THREADS {
            s.spawn(move || {
                for (key, version, len) in ops(seed, round, t).take(100_000) {
                    let len_s = len.map_or("del".to_string(), |l| l.to_string());
                    emit(&format!("w {t} {key} {version} {len_s}"));
                    let done = match len {
                        Some(len) => st
                            .put(key.as_bytes(), op_value(key.as_bytes(), version, len))
                            .map(drop),
                        None => st.delete(key.as_bytes()).map(drop),
                    };
                    match done {
                        Ok(()) => emit(&format!("ack {t}")),
                        Err(e) => return emit(&format!("fail {key} {version}: {e}")),
                    }
                }
                w.store(false, Ordering::Relaxed);
            });
        }
    });
}

/// What the parent knows of a key.
#[derive(Default)]
struct KeyModel {
    /// Every put ever started: version to length.
    written: HashMap<u64, usize>,
    /// The newest acknowledged write: its version, and whether it was a put.
    floor: Option<(u64, bool)>,
}

#[derive(Default)]
struct Counts {
    kills: u64,
    acks: u64,
    gets_value: u64,
    gets_none: u64,
    compactions: u64,
}

/// The bytes of the files in `dir` by the file system, but `HOTSET` (and `HOTSET.tmp`): the
/// cache's values that a close writes for the next warm-up, which the cap does not count (a
/// limit of the cap, docs/design.md "Eviction"); the files (name and length), all of them.
fn file_bytes(dir: &Path) -> (u64, Vec<(String, u64)>) {
    let mut files: Vec<(String, u64)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    files.sort();
    let capped = files
        .iter()
        .filter(|f| !f.0.starts_with("HOTSET"))
        .map(|f| f.1)
        .sum();
    (capped, files)
}

fn kill9_evict_rounds(mode: IoMode) {
    let seed = env_u64("PODSTORE_CRASH_SEED", 0);
    let rounds = crate::common::long::cases("PODSTORE_CRASH_ROUNDS", ROUNDS, LONG_ROUNDS);
    let label = format!("evict-{}", mode_name(mode));
    let started = std::time::Instant::now();
    let dir = TempDir::new().unwrap();
    let mut rng = SplitMix::new(seed ^ 0xE71C7);
    let mut model: HashMap<String, KeyModel> = HashMap::new();
    let mut c = Counts::default();
    let mut evicted_through = 0;
    for round in 0..rounds {
        let kill_after = rng.between(KILL_AFTER.0, KILL_AFTER.1);
        let job = format!("kill9evict {} {seed} {round}", mode_name(mode));
        let mut child = ChildProc::spawn(dir.path(), &job);
        let mut pending: HashMap<u64, (String, u64, bool)> = HashMap::new();
        let (mut acks, mut killed) = (0, false);
        while let Some(msg) = child.next_message() {
            let parts: Vec<&str> = msg.split(' ').collect();
            match parts[..] {
                ["w", t, key, version, len] => {
                    let version: u64 = version.parse().unwrap();
                    let m = model.entry(key.to_string()).or_default();
                    if let Ok(len) = len.parse() {
                        m.written.insert(version, len);
                    }
                    pending.insert(t.parse().unwrap(), (key.to_string(), version, len != "del"));
                }
                ["ack", t] => {
                    let (key, version, put) = pending.remove(&t.parse().unwrap()).unwrap();
                    model.get_mut(&key).unwrap().floor = Some((version, put));
                    acks += 1;
                    if acks == kill_after {
                        child.kill();
                        killed = true;
                    }
                }
                ["compacted", _] => c.compactions += 1,
                _ => panic!("{label} round {round}: child says {msg:?}"),
            }
        }
        assert!(killed, "{label} round {round}: the child stopped by itself");
        c.kills += 1;
        c.acks += acks;
        let ctx = format!("{label} seed {seed} round {round} (killed after {acks} acks)");
        // The file system's count, as the kill left it and after recovery.
        let (bytes, files) = file_bytes(dir.path());
        assert!(
            bytes <= CAP + SEGMENT,
            "{ctx}: {bytes} bytes on disk: {files:?}"
        );
        let store = Store::open_with(dir.path(), crate::support::check_options(mode))
            .unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
        for (key, m) in &model {
            let Some(v) = store.get(key.as_bytes()).unwrap() else {
                c.gets_none += 1;
                continue;
            };
            c.gets_value += 1;
            assert!(v.len() >= 8, "{ctx}: {key}: a value of {} bytes", v.len());
            let stamp = u64::from_le_bytes(v[..8].try_into().unwrap());
            let len = *m
                .written
                .get(&stamp)
                .unwrap_or_else(|| panic!("{ctx}: {key}: a value never written ({stamp:#x})"));
            assert!(
                v == op_value(key.as_bytes(), stamp, len),
                "{ctx}: {key}: the bytes of write {stamp:#x} are not as written"
            );
            if let Some((floor, put)) = m.floor {
                assert!(
                    stamp > floor || (stamp == floor && put),
                    "{ctx}: {key}: write {stamp:#x} is older than the acknowledged {} {floor:#x}",
                    if put { "put" } else { "delete" }
                );
            }
        }
        for k in store.keys() {
            let k = String::from_utf8(k.unwrap()).unwrap();
            assert!(model.contains_key(&k), "{ctx}: a key never written: {k}");
        }
        let report = store.verify().unwrap();
        assert!(report.is_clean(), "{ctx}: verify: {report:?}");
        evicted_through = store.stats().evicted_through;
        store.close().unwrap();
        let (bytes, files) = file_bytes(dir.path());
        assert!(
            bytes <= CAP + SEGMENT,
            "{ctx}: {bytes} bytes after recovery: {files:?}"
        );
        eprintln!("{ctx}: evicted through {evicted_through:#x}, {bytes} bytes");
    }
    // Otherwise the kills tested nothing of eviction.
    assert!(evicted_through > 0, "{label}: nothing was ever evicted");
    println!(
        "crash-summary: test={label} seed={seed} rounds={rounds} kills={} acks={} \
         gets_value={} gets_none={} compactions={} secs={:.1}",
        c.kills,
        c.acks,
        c.gets_value,
        c.gets_none,
        c.compactions,
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kill9_with_eviction_and_compaction_buffered() {
    kill9_evict_rounds(IoMode::Buffered);
}

#[test]
fn kill9_with_eviction_and_compaction_direct() {
    kill9_evict_rounds(IoMode::Direct);
}
