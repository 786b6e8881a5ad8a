//! Test machinery (the `testing` feature only, never in a user's build): a failpoint that makes
//! the process kill itself with SIGKILL at a named step of a snapshot install, as `kill -9`
//! would, so that a test can check what a restart finds there.
//!
//! Set [`KILL_AT_VAR`] to one of [`install_steps`] in the environment of a process (the
//! `podstore-raft` binary, or a test's child) before it installs a snapshot: the first install
//! that reaches that step kills the process there. The variable is read when an install
//! starts.

use crate::state_machine::Step;

/// The environment variable naming the install step at which the process kills itself.
pub const KILL_AT_VAR: &str = "PODSTORE_RAFT_KILL_AT";

/// The names of the install steps, in order: a kill at each leaves, once the node restarts, the
/// old state machine or the new one, whole (`docs/design-replication.md`, "Replication").
///
/// - `adopting`: a file of the snapshot linked into `snapshots/snap-*.partial` (reached only
///   when the snapshot is another node's directory, not one received over the network);
/// - `adopted`: the snapshot is whole in this node's `snapshots/`;
/// - `staging`: a file linked into `sm/sm-<gen+1>.staging`; `staged`: all of them, synced;
/// - `renamed`: renamed to `sm-<gen+1>`; `root-synced`: `sm/` synced;
/// - `current-written`: `sm/CURRENT.tmp` names the new generation, not yet renamed;
/// - `committed`: `sm/CURRENT` names it (the commit point);
/// - `swapped`: the new store is the live one; `done`: the old generation removed.
pub fn install_steps() -> Vec<&'static str> {
    Step::ALL.iter().map(|s| s.name()).collect()
}

/// The step [`KILL_AT_VAR`] names, if any. An unknown name panics: a test that misspells a step
/// would otherwise never kill anything.
pub(crate) fn kill_at() -> Option<Step> {
    let name = std::env::var(KILL_AT_VAR).ok()?;
    let step = Step::ALL.into_iter().find(|s| s.name() == name.trim());
    Some(step.unwrap_or_else(|| {
        panic!(
            "{KILL_AT_VAR}={name:?} names no install step (one of {:?})",
            install_steps()
        )
    }))
}

/// Sends SIGKILL to this process: nothing after it runs (no destructor, no flush, no unwinding).
pub(crate) fn kill_self() -> ! {
    let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    // SIGKILL cannot be caught or ignored; should the call itself fail, die anyway.
    std::process::abort()
}
