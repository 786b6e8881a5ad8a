//! The one switch between the default test run and the long one.
//!
//! `cargo test` runs every kind of case of every sweep, a sample of each (a few minutes in
//! all). `PODSTORE_TEST_LONG=1 cargo test` runs the long versions: every crash point of the
//! crash sweeps, every call of the fault sweeps, thousands of property cases, more kill -9
//! rounds (CI sets it; README.md says what each costs). The variables a test had before
//! (`PROPTEST_CASES`, `PODSTORE_CRASH_ROUNDS`, `PODSTORE_CORRUPTION_ROUNDS`) still override it.
//!
//! A sampled sweep draws its sample from a seed: `PODSTORE_TEST_SEED` if set, else a new one
//! per run, so that runs over time cover what one run leaves out. [`Sample`] prints the seed
//! when the test fails, and how to run that sample again.
//!
//! This file is shared: the integration tests have it as `common::long`, the crate's unit
//! tests (src/tests/mod.rs) include it by path.

use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable that turns the long versions on (any value but empty or `0`).
pub const LONG_VAR: &str = "PODSTORE_TEST_LONG";

/// The environment variable that fixes the seed of sampled sweeps.
pub const SEED_VAR: &str = "PODSTORE_TEST_SEED";

/// Whether the long versions run (`PODSTORE_TEST_LONG=1`).
pub fn long() -> bool {
    std::env::var(LONG_VAR).is_ok_and(|v| !v.trim().is_empty() && v.trim() != "0")
}

/// `default` in the default run, `long` under `PODSTORE_TEST_LONG=1`.
pub fn sized<T>(default: T, long_value: T) -> T {
    if long() { long_value } else { default }
}

/// The number of cases: the environment variable `var` if set (a number), else [`sized`].
pub fn cases(var: &str, default: u64, long_value: u64) -> u64 {
    match std::env::var(var) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{var}={s:?}: {e}")),
        Err(_) => sized(default, long_value),
    }
}

/// The seed of one sampled sweep, printed if the test fails.
#[derive(Debug)]
pub struct Sample {
    test: &'static str,
    seed: u64,
}

impl Sample {
    /// The seed of the sweep `test` (its name, for the message): `PODSTORE_TEST_SEED`, or a new
    /// one from the clock.
    pub fn new(test: &'static str) -> Sample {
        let seed = match std::env::var(SEED_VAR) {
            Ok(s) => s
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("{SEED_VAR}={s:?}: {e}")),
            Err(_) => {
                let t = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0);
                // Two sweeps started in the same nanosecond still differ.
                t ^ (test.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            }
        };
        Sample::with_seed(test, seed)
    }

    /// The sample of the sweep `test` drawn from `seed`.
    pub fn with_seed(test: &'static str, seed: u64) -> Sample {
        Sample { test, seed }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Whether item `i` (a crash point, a call number) is in a sample of about one in `every`;
    /// every item when `every` is 1. The sample starts at a seeded offset and strides by
    /// `every`, so that consecutive items are spread out and every item is chosen by some seed.
    pub fn picks(&self, i: u64, every: u64) -> bool {
        every <= 1 || i % every == self.seed % every
    }

    /// A number in `0..n` for item `i`, the same for the same seed and item.
    pub fn pick(&self, i: u64, n: u64) -> u64 {
        let mut z = self.seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

impl Drop for Sample {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "{}: sampled with {SEED_VAR}={} ({}); run again with that variable for the same \
                 sample, or with {LONG_VAR}=1 for every case",
                self.test,
                self.seed,
                if long() { "long run" } else { "default run" },
            );
        }
    }
}
