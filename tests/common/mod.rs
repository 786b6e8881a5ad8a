//! Helpers shared by the integration tests (and by benches/churn.rs, which includes this module
//! by path), each kept once:
//!
//! - `rng`: deterministic randomness (`XorShift`, the crash tests' `SplitMix`, the `Random`
//!   methods both have: numbers in ranges, random bytes, garbage, text);
//! - `files`: store file names (`seg-…`, `blob-…`), listing, counting, reading, copying;
//! - `records`: the records of a segment image as the recovery scan finds them, trailers;
//! - `store`: I/O modes, option presets (`small`, `quiet`), a temporary store (`TestStore`),
//!   assertions, `env_u64`;
//! - `long`: the `PODSTORE_TEST_LONG` switch between the default run and the long one, and the
//!   seeds of sampled sweeps (also included by src/tests/mod.rs);
//! - `parallel`: independent cases a few at a time;
//! - `compat`: the old-format fixture under tests/fixtures/ (what it holds, how it is written);
//! - `tree`: a directory tree's snapshot, to prove a run left existing files untouched;
//! - `memory`: resident memory and a cache-filling workload, for the memory-budget tests;
//! - `model`: what a store should hold, checked against a store or a remote reader, and the
//!   names of a remote's objects (tests/remote*.rs).
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code, unused_imports)]

pub mod compat;
pub mod files;
pub mod long;
pub mod loopfs;
pub mod memory;
pub mod model;
pub mod parallel;
pub mod records;
pub mod rng;
pub mod store;
pub mod tree;

pub use rng::{Random, SplitMix, XorShift, splitmix64};
