//! Failpoints: named steps of a protocol (compaction) where a test can make the process stop
//! dead, as kill -9 or a power cut would, to check that every step is crash-safe.
//!
//! Compiled only with the `testing` cargo feature: without it, [`hit`] is an empty inline
//! function and nothing here can be named by a user. With it, a disarmed failpoint costs one
//! relaxed atomic load.

#[cfg(feature = "testing")]
pub use armed::{COMPACTION_FAILPOINTS, EVICTION_FAILPOINTS, arm_failpoint, hit};

/// Passes failpoint `name`: nothing, in a build without the `testing` feature.
#[cfg(not(feature = "testing"))]
#[inline(always)]
pub(crate) fn hit(_name: &'static str) {}

#[cfg(feature = "testing")]
mod armed {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    static ARMED_ANY: AtomicBool = AtomicBool::new(false);
    /// The armed failpoint: its name and how many hits to let pass before it fires.
    static ARMED: Mutex<Option<(String, u64)>> = Mutex::new(None);

    /// Arms failpoint `name`: its `skip + 1`-th hit in this process aborts the process
    /// (`std::process::abort`: no destructor runs, no buffer is flushed). For crash tests only.
    #[doc(hidden)]
    pub fn arm_failpoint(name: &str, skip: u64) {
        *ARMED.lock().unwrap_or_else(|p| p.into_inner()) = Some((name.to_string(), skip));
        ARMED_ANY.store(true, Ordering::SeqCst);
    }

    /// The failpoints compaction passes, in protocol order (see docs/design.md, "Compaction").
    #[doc(hidden)]
    pub const COMPACTION_FAILPOINTS: &[&str] = &[
        "compact:copied",
        "compact:synced",
        "compact:switched",
        "compact:removed",
        "compact:blob-before-remove",
        "compact:blob-removed",
    ];

    /// The failpoints an eviction step passes, in protocol order (see docs/design.md,
    /// "Eviction"): the drop and its watermark recorded; the index entries removed; the files
    /// unlinked.
    #[doc(hidden)]
    pub const EVICTION_FAILPOINTS: &[&str] =
        &["evict:recorded", "evict:forgotten", "evict:removed"];

    /// Passes failpoint `name`: aborts the process if it is armed and due.
    pub fn hit(name: &'static str) {
        if !ARMED_ANY.load(Ordering::Relaxed) {
            return;
        }
        debug_assert!(
            COMPACTION_FAILPOINTS.contains(&name) || EVICTION_FAILPOINTS.contains(&name),
            "unlisted failpoint {name}"
        );
        let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((armed_name, skip)) = armed.as_mut()
            && armed_name == name
        {
            if *skip == 0 {
                std::process::abort();
            }
            *skip -= 1;
        }
    }
}
