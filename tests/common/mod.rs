//! Helpers shared by the integration tests (and by benches/churn.rs, which includes this module
//! by path): deterministic randomness, store files and their names, scanned records, option
//! presets, temporary stores, assertions.
//!
//! Each test binary compiles this module and uses part of it.
#![allow(dead_code, unused_imports)]

pub mod compat;
pub mod files;
pub mod parallel;
pub mod records;
pub mod rng;
pub mod store;

pub use rng::{Random, SplitMix, XorShift, splitmix64};
