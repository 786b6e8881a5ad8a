//! openraft's own storage test suite (`openraft::testing::log::Suite`) against the podstore log
//! store and state machine, each case on fresh directories: in memory (`/dev/shm`) in the
//! default run, on the disk with `PODSTORE_TEST_LONG=1` (see [`case_dir`]).

use crate::common::long::long;

use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};
use podstore_raft::{LogStore, StateMachine, TypeConfig};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = case_dir();
        let log = LogStore::open(dir.path().join("log")).expect("open log");
        let sm = StateMachine::open(dir.path().join("sm"), dir.path().join("snapshots"))
            .expect("open state machine");
        Ok((dir, log, sm))
    }
}

/// A directory for one case of the suite: on a memory file system (`/dev/shm`, if there is
/// one) in the default run, on the disk (the temporary directory) with `PODSTORE_TEST_LONG=1`.
/// The suite checks openraft's storage contract (what is read after what was written,
/// truncated, purged, applied), not durability, and on the disk it was nearly all syncs: about
/// 1,500 fsyncs and fdatasyncs of fresh stores, 16-21 s on a busy 2-core machine for 1 s of
/// CPU, against a second or two in memory. The long run keeps it on the disk, where podstore
/// uses direct I/O (a memory file system takes buffered I/O).
fn case_dir() -> TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if !long()
        && shm.is_dir()
        && let Ok(dir) = tempfile::tempdir_in(shm)
    {
        return dir;
    }
    tempfile::tempdir().expect("tempdir")
}

/// On paused time: the suite sleeps 1 s after each of its eight purges ("`purge()` does not have
/// to do the purge at once"), 8 s of its run, which pass at once here. That also holds the log
/// store to more than the suite asks: a purge is seen by every read as soon as it returns (the
/// records are deleted later, by the reclaim thread). Nothing else in the suite or the stores
/// uses tokio's clock.
#[tokio::test(start_paused = true)]
async fn openraft_storage_suite() {
    Suite::test_all(Builder)
        .await
        .expect("openraft's storage suite");
}
