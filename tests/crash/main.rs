//! Crash-safety tests, one test binary (every test binary costs a link), a module per concern:
//!
//! - `kill9`: kill -9 of a process writing from several threads, round after round on one
//!   directory: single puts and deletes; then also atomic batches (all-or-nothing) and large
//!   values in blob files; then all that while the store compacts. 5 rounds each, 25 under
//!   `PODSTORE_TEST_LONG`; `PODSTORE_CRASH_SEED` and `PODSTORE_CRASH_ROUNDS` vary them for long
//!   runs (scripts/crash-loop.sh); what the parent checks after each kill in `kill9/check.rs`;
//! - `kill9_evict`: kill -9 of a process writing far past a small size cap while another thread
//!   compacts: after each kill the store opens within the cap and one segment, and every key
//!   reads nothing or a value no older than its newest acknowledged write;
//! - `midway`: a streamed put (`Store::writer`) killed mid-stream and after `finish`; a process
//!   taking checkpoints of a store being written, killed midway;
//! - `cas`: kill -9 of a process racing compare-and-swap increments with conditional batches:
//!   no acknowledged batch lost, every batch whole, no increment applied on a stale version;
//! - `compaction`: a process aborted at each step of the compaction protocol (failpoints);
//! - `evict`: a process aborted at each step of an eviction (failpoints);
//! - `lock`: a second process refused by the directory lock until the holder dies;
//! - `torn_tail`: torn tails (truncations) and torn blocks (zeroes, garbage) in the segment
//!   being written, with the recovered store reopened again; a crash during recovery, between
//!   writing the new footer and cutting the torn tail; `Durability::Buffered` losing only a
//!   suffix of the writes at a crash; a sealed segment cut inside its footer, and the footer's
//!   recorded data end;
//! - `damage`: flipped and zeroed bytes in sealed segments: reported as `Error::Corruption`,
//!   never returned as data.
//!
//! The multi-process tests run this same test binary again with `--exact crash_child`; that
//! test does nothing unless `PODSTORE_CRASH_CHILD` is set (see `child`).

#[path = "../common/mod.rs"]
mod common;

mod cas;
mod child;
mod compaction;
mod damage;
mod evict;
mod kill9;
mod kill9_evict;
mod lock;
mod midway;
mod support;
mod torn_tail;

use std::path::Path;

use common::store::parse_mode;

/// The child side of the multi-process tests; a no-op in an ordinary test run. Its name is the
/// one [`child::ChildProc::spawn`] runs: it stays at the root of the crate.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(child::CHILD_DIR_VAR) else {
        return;
    };
    let job = std::env::var(child::CHILD_JOB_VAR).expect("job of the crash child");
    match job.split_whitespace().collect::<Vec<_>>()[..] {
        ["hold", mode] => lock::hold_child(Path::new(&dir), parse_mode(mode)),
        ["failpoint", name, skip, mode] => compaction::failpoint_child(
            Path::new(&dir),
            name,
            skip.parse().unwrap(),
            parse_mode(mode),
        ),
        ["evict", name, skip, mode] => evict::evict_child(
            Path::new(&dir),
            name,
            skip.parse().unwrap(),
            parse_mode(mode),
        ),
        ["workload", mix, mode, seed, round] => kill9::workload_child(
            Path::new(&dir),
            kill9::Mix::parse(mix),
            parse_mode(mode),
            seed.parse().unwrap(),
            round.parse().unwrap(),
        ),
        ["kill9evict", mode, seed, round] => kill9_evict::kill9_evict_child(
            Path::new(&dir),
            parse_mode(mode),
            seed.parse().unwrap(),
            round.parse().unwrap(),
        ),
        ["cas", mode, round] => {
            cas::cas_child(Path::new(&dir), parse_mode(mode), round.parse().unwrap())
        }
        ["checkpoint", mode] => midway::checkpoint_child(Path::new(&dir), parse_mode(mode)),
        ["stream", mode, finish, lz4] => midway::stream_child(
            Path::new(&dir),
            parse_mode(mode),
            finish.parse().unwrap(),
            lz4.parse().unwrap(),
        ),
        _ => panic!("unknown crash child job {job:?}"),
    }
}
