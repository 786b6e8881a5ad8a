//! The steps of a snapshot install ([`super::StateMachine`]'s `install_steps`), named for the
//! tests and the `testing` feature's failpoint that stop an install after each.

/// The steps of a snapshot install, in order, and what a crash right after each leaves. Before
/// [`Step::Committed`], `CURRENT` names the old generation: a restart opens it, whole, and
/// removes every other `sm-*` (and a `CURRENT.tmp`); from it on, `CURRENT` names the new one,
/// whole, and the old one is what a restart removes. A power loss after a step loses nothing
/// the step synced: every file and directory of the new generation is synced before the rename
/// that publishes it, and the old generation is removed only after the new `CURRENT` is durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Step {
    /// A file of the snapshot linked into `snapshots/snap-*.partial` (after each file; only when
    /// the snapshot is another node's directory). A restart removes the partial directory.
    Adopting,
    /// The snapshot is one of this node's (whole, synced, renamed into its snapshot directory):
    /// a restart of a node finds it as its newest snapshot, and openraft installs it again if
    /// it is newer than the state machine.
    Adopted,
    /// A file linked (or copied and synced) into `sm-<gen+1>.staging` (after each file).
    Staging,
    /// Its store linked into `sm-<gen+1>.staging`, synced.
    Staged,
    /// Renamed to `sm-<gen+1>`.
    Renamed,
    /// `sm/` synced: the rename is durable.
    RootSynced,
    /// `CURRENT.tmp` names the new generation, synced, not yet renamed over `CURRENT`.
    CurrentWritten,
    /// `CURRENT` names the new generation, durably (the commit point).
    Committed,
    /// The new store is the live one.
    Swapped,
    /// The old generation removed.
    Done,
}

#[cfg(any(test, feature = "testing"))]
impl Step {
    /// Every step, in order.
    pub(crate) const ALL: [Step; 10] = [
        Step::Adopting,
        Step::Adopted,
        Step::Staging,
        Step::Staged,
        Step::Renamed,
        Step::RootSynced,
        Step::CurrentWritten,
        Step::Committed,
        Step::Swapped,
        Step::Done,
    ];

    /// Its name (`PODSTORE_RAFT_KILL_AT`'s values).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Step::Adopting => "adopting",
            Step::Adopted => "adopted",
            Step::Staging => "staging",
            Step::Staged => "staged",
            Step::Renamed => "renamed",
            Step::RootSynced => "root-synced",
            Step::CurrentWritten => "current-written",
            Step::Committed => "committed",
            Step::Swapped => "swapped",
            Step::Done => "done",
        }
    }
}
