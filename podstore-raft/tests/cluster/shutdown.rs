//! Three real node processes (the `podstore-raft` binary) on 127.0.0.1 under continuous
//! writes: the leader stopped with `SIGTERM` and a follower with `SIGINT` each exit with 0
//! (cleanly, not killed by the signal), having closed their stores (the log's and the state
//! machine's open again with no recovery scan: every segment sealed), and once restarted from
//! their directories every acknowledged write is on every node.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::procs::{Cluster, Writer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigint_stop_a_node_cleanly_under_writes() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), &[]).await;
    let leader = cluster.leader().await;
    let writer = Writer::start(
        cluster.http.clone(),
        cluster.addrs.clone(),
        root.path().join("acks.log"),
    );
    writer.wait_more(100, "100 acknowledged writes").await;

    // The leader, with writes in flight.
    let mut stopped = cluster.signal(leader, "TERM");
    let status = stopped
        .exited_within(Duration::from_secs(20))
        .await
        .expect("the leader exits after SIGTERM");
    assert_eq!(status.code(), Some(0), "SIGTERM: {status}");
    closed_cleanly(&cluster.dirs[leader as usize - 1]);
    writer
        .wait_more(50, "writes acknowledged by a new leader")
        .await;
    cluster.restart(leader, &[]);
    writer.wait_more(50, "writes after the restart").await;

    // A follower, with Ctrl-C's signal.
    let new_leader = cluster.leader().await;
    let follower = (1..=3).find(|&id| id != new_leader).unwrap();
    let mut stopped = cluster.signal(follower, "INT");
    let status = stopped
        .exited_within(Duration::from_secs(20))
        .await
        .expect("the follower exits after SIGINT");
    assert_eq!(status.code(), Some(0), "SIGINT: {status}");
    closed_cleanly(&cluster.dirs[follower as usize - 1]);
    writer.wait_more(50, "writes with a follower down").await;
    cluster.restart(follower, &[]);
    writer.wait_more(50, "writes after its restart").await;

    let acked = writer.stop().await;
    cluster.check_acknowledged(&acked).await;
}

/// Asserts that node directory `dir`'s stores (its Raft log and its state machine's current
/// generation) were closed: opened read-only, neither recovers a segment by scanning.
fn closed_cleanly(dir: &Path) {
    let current = std::fs::read_to_string(dir.join("sm/CURRENT")).unwrap_or("sm-0".into());
    for store in [dir.join("log"), dir.join("sm").join(current.trim())] {
        let opts = podstore::Options::default().read_only(true);
        let s = podstore::Store::open_with(&store, opts)
            .unwrap_or_else(|e| panic!("{}: {e}", store.display()));
        let recovery = s.recovery();
        assert!(
            recovery.recovered.is_empty(),
            "{}: not closed cleanly, open scanned {:?}",
            store.display(),
            recovery.recovered
        );
        assert!(
            recovery.sealed_segments > 0,
            "{}: no segment",
            store.display()
        );
    }
}
