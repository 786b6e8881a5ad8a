//! openraft's own storage test suite (`openraft::testing::log::Suite`) against the podstore log
//! store and state machine, each case on fresh directories.

use openraft::StorageError;
use openraft::testing::log::{StoreBuilder, Suite};
use podstore_raft::{LogStore, StateMachine, TypeConfig};
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError<TypeConfig>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = LogStore::open(dir.path().join("log")).expect("open log");
        let sm = StateMachine::open(dir.path().join("sm"), dir.path().join("snapshots"))
            .expect("open state machine");
        Ok((dir, log, sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite() {
    Suite::test_all(Builder)
        .await
        .expect("openraft's storage suite");
}
