//! Three real node processes (the `podstore-raft` binary, with the `testing` feature's
//! failpoint) on 127.0.0.1, a client writing continuously and logging every acknowledged write;
//! a follower is SIGKILLed while it installs a snapshot, restarted, and catches up; at the end
//! every acknowledged write is read back from every node.
//!
//! Each round: a follower is killed (kill -9), the others write on until their logs are purged
//! past everything it has (a snapshot every 100 entries, no log kept behind it), so that it can
//! only catch up by a snapshot; it is restarted with `PODSTORE_RAFT_KILL_AT` naming an install
//! step, so that it SIGKILLs itself there while it installs the leader's snapshot; then it is
//! restarted without it and must catch up (from the snapshot it adopted, or one sent again, and
//! the log after it). The default run kills it at one step before the commit point and one
//! after; `PODSTORE_TEST_LONG=1` at every step a received snapshot goes through.

use crate::common;

use std::os::unix::process::ExitStatusExt;

use common::long::long;
use common::procs::{Cluster, Writer, status};
use podstore_raft::testing::{KILL_AT_VAR, install_steps};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_killed_during_snapshot_install_catches_up_and_loses_nothing() {
    let steps: Vec<&str> = if long() {
        // `adopting` is reached only by a snapshot in another node's directory, never by one
        // received over the network (it is already in this node's snapshot directory).
        install_steps()
            .into_iter()
            .filter(|s| *s != "adopting")
            .collect()
    } else {
        vec!["staging", "committed"]
    };
    let root = tempfile::tempdir().unwrap();
    let mut cluster =
        Cluster::start(root.path(), &["--snapshot-logs", "100", "--keep-logs", "0"]).await;
    let http = cluster.http.clone();
    let writer = Writer::start(
        http.clone(),
        cluster.addrs.clone(),
        root.path().join("acks.log"),
    );
    writer.wait_more(50, "50 acknowledged writes").await;

    for (round, step) in steps.iter().enumerate() {
        let leader = cluster.leader().await;
        let follower = [1, 2, 3]
            .into_iter()
            .filter(|&id| id != leader)
            .nth(round % 2)
            .unwrap();
        // Its log holds nothing beyond the leader's at the moment it dies.
        cluster.kill(follower);
        let had = status(&http, cluster.addr(leader))
            .await
            .expect("the leader's status")
            .last_log
            .unwrap();
        // Every other node purges its log past that: the follower can only catch up by a
        // snapshot.
        for other in [1, 2, 3].into_iter().filter(|&id| id != follower) {
            cluster
                .wait_for("the others to purge their logs", async || {
                    let s = status(&http, cluster.addr(other)).await?;
                    (s.purged? > had).then_some(())
                })
                .await;
        }

        // Restarted with the failpoint: it dies at `step` of the snapshot install.
        cluster.restart(follower, &[(KILL_AT_VAR, step)]);
        // As long as it works (a loaded machine sends and installs a snapshot slowly).
        let restarted = std::time::Instant::now();
        let died = cluster.exit_of(follower).await;
        if died.is_none() {
            // What each node says, for the failure's message: whether the leader was sending a
            // snapshot, whether the follower was reachable at all.
            let mut states = Vec::new();
            for id in [1, 2, 3] {
                states.push(format!(
                    "node {id}: {:?}",
                    status(&http, cluster.addr(id)).await
                ));
            }
            panic!(
                "round {round}: node {follower} was to kill itself at {step} of a snapshot \
                 install, and still runs {:?} after its restart (the wait gives up when it \
                 is idle for {:?}, or after {:?}; its log held {had}): {}",
                restarted.elapsed(),
                common::procs::STALL,
                common::procs::CEILING,
                states.join("; ")
            );
        }
        assert_eq!(
            died.and_then(|s| s.signal()),
            Some(9),
            "round {round}: node {follower} was to kill itself at {step} of a snapshot install: {died:?}"
        );

        // Restarted without it: it catches up while the writes go on.
        cluster.restart(follower, &[]);
        let leader = cluster.leader().await;
        let target = status(&http, cluster.addr(leader))
            .await
            .expect("the leader's status")
            .last_applied;
        cluster.wait_applied(follower, target).await;
        let s = status(&http, cluster.addr(follower)).await.unwrap();
        assert!(
            s.snapshot.is_some_and(|i| i > had),
            "round {round} ({step}): node {follower} caught up without a snapshot past {had}: {s:?}"
        );
        writer.wait_more(20, "writes after the restart").await;
    }
    let acked = writer.stop().await;
    cluster.check_acknowledged(&acked).await;
}
