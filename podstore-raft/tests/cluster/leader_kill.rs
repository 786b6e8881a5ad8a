//! Three real node processes (the `podstore-raft` binary) on 127.0.0.1: a client writes
//! continuously and logs every acknowledged write, the leader is killed with SIGKILL mid-stream
//! and restarted from its directory, and then every acknowledged write is read back from every
//! node.

use crate::common;

use common::procs::{Cluster, Writer, status, version, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_and_restarted_loses_no_acknowledged_write() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), &[]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let writer = Writer::start(
        http.clone(),
        cluster.addrs.clone(),
        root.path().join("acks.log"),
    );
    writer.wait_more(100, "100 acknowledged writes").await;

    // SIGKILL the leader mid-stream.
    cluster.kill(leader);
    writer
        .wait_more(50, "writes acknowledged by a new leader")
        .await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);

    // Restart it from its directory; writes go on meanwhile.
    cluster.restart(leader, &[]);
    writer.wait_more(50, "writes after the restart").await;
    let acked = writer.stop().await;

    let new_leader = cluster.leader().await;
    let leader_addr = cluster.addr(new_leader).to_string();
    // A linearizable read on the leader first (it has applied everything committed).
    let r = http
        .get(format!("http://{leader_addr}/kv/k0?linearizable=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.bytes().await.unwrap().as_ref(),
        &common::procs::value(0)[..]
    );
    // A value larger than a default HTTP body limit, and a range of it from a follower.
    let big: Vec<u8> = (0..5u32 << 20).map(|i| (i % 253) as u8).collect();
    let r = http
        .put(format!("http://{leader_addr}/kv/big"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "big put: {}", r.status());
    // The index of the commit entry that published it: the follower serves the value once it
    // has applied that entry. (Not the leader's `last_applied` read after the answer: it may
    // still name the entry before, the last chunk, and the follower passes that before it has
    // applied the commit: the 404 of issue 40.)
    let index = version(&r);
    let follower_id = new_leader % 3 + 1;
    let follower = cluster.addr(follower_id).to_string();
    wait_for("the follower to apply the big put", async || {
        (status(&http, &follower).await?.last_applied >= Some(index)).then_some(())
    })
    .await;
    let r = http
        .get(format!(
            "http://{follower}/kv/big?start=4000000&end=4100000"
        ))
        .send()
        .await
        .unwrap();
    let answer = r.status();
    let bytes = r.bytes().await.unwrap();
    if bytes.as_ref() != &big[4_000_000..4_100_000] {
        // What each node says now: which one answered, and whether it had applied the commit.
        let mut nodes = Vec::new();
        for id in 1..=3 {
            nodes.push((id, status(&http, cluster.addr(id)).await));
        }
        panic!(
            "node {follower_id} ({follower}) answered {answer}: {} bytes, {:?}; the value's \
             commit is entry {index} (leader {new_leader}); nodes now: {nodes:#?}",
            bytes.len(),
            String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
        );
    }

    // Every node, once it has applied what the leader has and every acknowledged write, holds
    // every acknowledged write.
    cluster.check_acknowledged(&acked).await;
}
