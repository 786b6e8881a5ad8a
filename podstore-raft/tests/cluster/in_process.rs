//! In-process clusters over a router that can cut nodes off (tests/common): writes and reads,
//! a leader lost, a minority partition, a restart from the directory, a learner caught up by
//! snapshot after a purge, membership 3 -> 5 -> 3.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use common::Cluster;
use podstore_raft::{Node, NodeError, Op, Request, Response};

fn key(i: u32) -> Vec<u8> {
    format!("key/{i:05}").into_bytes()
}

fn value(i: u32) -> Vec<u8> {
    format!("value {i} ").repeat(20).into_bytes()
}

async fn write_many(node: &Node, range: std::ops::Range<u32>) {
    for i in range {
        node.put(key(i), value(i)).await.unwrap();
    }
}

async fn assert_all(node: &Node, range: std::ops::Range<u32>) {
    for i in range {
        assert_eq!(
            node.get(key(i)).await.unwrap().as_deref(),
            Some(&value(i)[..]),
            "node {} key {i}",
            node.id()
        );
    }
}

/// The index of the last entry in `node`'s log: after a write returned on the leader, all of
/// them are committed (its applied index, in the metrics, may lag the answer by a moment).
fn last_applied(node: &Node) -> u64 {
    node.raft()
        .metrics()
        .borrow_watched()
        .last_log_index
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_write_and_read() {
    let c = Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let l = c.node(leader);
    write_many(&l, 0..40).await;

    // The other kinds of writes, and what they answer.
    assert_eq!(
        l.write(Request::PutIfAbsent {
            key: key(0),
            value: b"other".to_vec()
        })
        .await
        .unwrap(),
        Response::Inserted(false)
    );
    assert_eq!(
        l.write(Request::PutIfAbsent {
            key: b"fresh".to_vec(),
            value: b"v".to_vec()
        })
        .await
        .unwrap(),
        Response::Inserted(true)
    );
    assert!(l.delete(key(1)).await.unwrap());
    assert!(!l.delete(key(1)).await.unwrap());
    let batch = Request::Batch(vec![
        Op::Put {
            key: b"b1".to_vec(),
            value: b"1".to_vec(),
        },
        Op::Delete { key: key(2) },
        Op::Put {
            key: b"b2".to_vec(),
            value: b"2".to_vec(),
        },
    ]);
    assert_eq!(l.write(batch).await.unwrap(), Response::Done);
    assert!(matches!(
        l.write(Request::Put {
            key: Vec::new(),
            value: b"v".to_vec()
        })
        .await
        .unwrap(),
        Response::Rejected(_)
    ));

    // A large value, read back in part with a linearizable range read on the leader.
    let big: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
    l.put(b"big".to_vec(), big.clone()).await.unwrap();
    let part = l
        .get_range_linearizable(b"big".to_vec(), 1_000_000, Some(1_070_000))
        .await
        .unwrap();
    assert_eq!(part.as_deref(), Some(&big[1_000_000..1_070_000]));
    assert_eq!(l.get_linearizable(key(0)).await.unwrap(), Some(value(0)));

    // A follower refuses a linearizable read (it is the leader's), serves local ones.
    let index = last_applied(&l);
    for id in [1, 2, 3] {
        c.wait_applied(id, index).await;
        let n = c.node(id);
        if id != leader {
            assert!(
                matches!(n.get_linearizable(key(0)).await, Err(NodeError::NotLeader { leader: Some(x), .. }) if x == leader)
            );
            assert!(matches!(
                n.put(b"x".to_vec(), b"y".to_vec()).await,
                Err(NodeError::NotLeader { .. })
            ));
        }
        assert_eq!(n.get(key(1)).await.unwrap(), None);
        assert_eq!(n.get(key(2)).await.unwrap(), None);
        assert_eq!(
            n.get(b"b2".to_vec()).await.unwrap().as_deref(),
            Some(&b"2"[..])
        );
        assert_eq!(
            n.get(b"fresh".to_vec()).await.unwrap().as_deref(),
            Some(&b"v"[..])
        );
        assert_all(&n, 3..40).await;
        let tail = n
            .get_range(b"big".to_vec(), (3 << 20) - 10, None)
            .await
            .unwrap();
        assert_eq!(tail.as_deref(), Some(&big[(3 << 20) - 10..]));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_lost_new_leader_keeps_every_acknowledged_write() {
    let c = Cluster::new();
    let first = c.start_cluster(&[1, 2, 3]).await;
    write_many(&c.node(first), 0..30).await;
    c.router.isolate(first, true);
    c.stop(first).await;
    let rest: Vec<u64> = [1, 2, 3].into_iter().filter(|&i| i != first).collect();
    let second = c.leader(&rest).await;
    assert_ne!(second, first);
    let l = c.node(second);
    for i in 0..30 {
        assert_eq!(
            l.get_linearizable(key(i)).await.unwrap(),
            Some(value(i)),
            "key {i}"
        );
    }
    write_many(&l, 30..40).await;
    // The old leader comes back from its directory and catches up.
    c.router.isolate(first, false);
    c.start(first).await;
    c.wait_applied(first, last_applied(&l)).await;
    assert_all(&c.node(first), 0..40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn minority_partition_commits_nothing_and_its_leader_steps_down() {
    let c = Cluster::new();
    let old = c.start_cluster(&[1, 2, 3]).await;
    write_many(&c.node(old), 0..10).await;
    let old_term = c.node(old).raft().metrics().borrow_watched().current_term;

    // The leader alone on its side: its write is never acknowledged (checked once healed,
    // below; it waits meanwhile, while the majority goes on).
    c.router.isolate(old, true);
    let stale = c.node(old);
    let attempt = tokio::spawn({
        let stale = stale.clone();
        async move { stale.put(b"minority".to_vec(), b"lost".to_vec()).await }
    });

    // The majority elects a leader and goes on.
    let rest: Vec<u64> = [1, 2, 3].into_iter().filter(|&i| i != old).collect();
    let new = c.leader(&rest).await;
    write_many(&c.node(new), 10..20).await;

    // Healed: the stale leader steps down, follows the new one, and the write of the minority
    // is nowhere.
    c.router.isolate(old, false);
    let index = last_applied(&c.node(new));
    c.wait_applied(old, index).await;
    for _ in 0..100 {
        if !stale.raft().is_leader() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!stale.raft().is_leader());
    assert!(stale.raft().metrics().borrow_watched().current_term > old_term);
    // Its entry is discarded when it steps down: the write fails then (`Unknown`; or
    // `NotLeader` if it was refused for want of a lease), never succeeds.
    let attempt = tokio::time::timeout(Duration::from_secs(2), attempt).await;
    assert!(
        !matches!(attempt, Ok(Ok(Ok(_)))),
        "a minority acknowledged a write: {attempt:?}"
    );
    assert_eq!(c.leader(&[1, 2, 3]).await, new);
    c.node(new).linearize().await.unwrap();
    for id in [1, 2, 3] {
        c.wait_applied(id, index).await;
        assert_eq!(c.node(id).get(b"minority".to_vec()).await.unwrap(), None);
        assert_all(&c.node(id), 0..20).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarted_follower_catches_up_from_its_directory() {
    let c = Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let l = c.node(leader);
    write_many(&l, 0..20).await;
    let follower = [1, 2, 3].into_iter().find(|&i| i != leader).unwrap();
    c.wait_applied(follower, last_applied(&l)).await;
    c.stop(follower).await;
    write_many(&l, 20..40).await;
    let n = c.start(follower).await;
    // What it had before it stopped is there at once, from its own directory.
    assert_all(&n, 0..20).await;
    c.wait_applied(follower, last_applied(&l)).await;
    assert_all(&n, 0..40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learner_added_after_a_purge_catches_up_by_snapshot() {
    let c = Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let l = c.node(leader);
    write_many(&l, 0..50).await;
    let index = l.raft().metrics().borrow_watched().last_log_index.unwrap();
    c.wait_applied(leader, index).await;
    // (A metrics borrow is never held across an await: it would block the Raft core.)
    let applied = l.raft().metrics().borrow_watched().last_applied;
    l.raft().trigger().snapshot().await.unwrap();
    l.raft()
        .wait(Some(Duration::from_secs(20)))
        .snapshot(applied.unwrap(), "snapshot built")
        .await
        .unwrap();
    l.raft().trigger().purge_log(index).await.unwrap();
    l.raft()
        .wait(Some(Duration::from_secs(20)))
        .purged(applied, "purged")
        .await
        .unwrap();
    // The log no longer has the early entries: only a snapshot can bring a new node up.
    let mut reader = l.log_store().clone();
    let early = openraft::RaftLogReader::try_get_log_entries(&mut reader, 0..5)
        .await
        .unwrap();
    assert!(early.is_empty());

    let learner = c.start(4).await;
    l.add_learner(4, "node-4").await.unwrap();
    c.wait_applied(4, index).await;
    assert_all(&learner, 0..50).await;
    // It got there through a snapshot: it holds one, and its state machine was installed.
    let snaps: Vec<_> = std::fs::read_dir(learner.state_machine().snapshot_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("snap-"))
        .collect();
    assert_eq!(
        snaps.len(),
        1,
        "the learner holds the snapshot it installed"
    );
    assert!(learner.state_machine().data_dir().ends_with("sm-1"));
    // And later writes reach it through the log.
    write_many(&l, 50..60).await;
    c.wait_applied(4, last_applied(&l)).await;
    assert_all(&learner, 0..60).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn membership_three_to_five_to_three() {
    let c = Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let l = c.node(leader);
    write_many(&l, 0..10).await;
    for id in [4, 5] {
        c.start(id).await;
        l.add_learner(id, format!("node-{id}")).await.unwrap();
    }
    l.change_membership(BTreeSet::from([1, 2, 3, 4, 5]))
        .await
        .unwrap();
    write_many(&l, 10..20).await;
    let voters: BTreeSet<u64> = l.raft().voter_ids().collect();
    assert_eq!(voters, BTreeSet::from([1, 2, 3, 4, 5]));

    // Down to three, without the leader: it hands over.
    let keep: BTreeSet<u64> = [1, 2, 3, 4, 5]
        .into_iter()
        .filter(|&i| i != leader)
        .take(3)
        .collect();
    l.change_membership(keep.clone()).await.unwrap();
    let ids: Vec<u64> = keep.iter().copied().collect();
    let new = c.leader(&ids).await;
    let n = c.node(new);
    write_many(&n, 20..30).await;
    let voters: BTreeSet<u64> = n.raft().voter_ids().collect();
    assert_eq!(voters, keep);
    for &id in &ids {
        c.wait_applied(id, last_applied(&n)).await;
        assert_all(&c.node(id), 0..30).await;
    }
}

/// A leader just elected holds no quorum-ack lease until a follower has answered it (a follower
/// answers once its log is durable, slow on a loaded machine), while every node already names it.
/// A write on it then waits for the lease, at most one lease period, instead of being refused at
/// once with `NotLeader { leader: None }` from the leader itself (issue 40: the first write of
/// these tests failed so under load).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_on_a_leader_just_elected_waits_for_its_lease() {
    let c = Cluster::new();
    for id in [1, 2, 3] {
        c.router.hold_answers(id, true);
    }
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let l = c.node(leader);
    let acked = |n: &Node| n.raft().metrics().borrow_watched().last_quorum_acked;
    assert!(acked(&l).is_none(), "a follower has answered the leader");

    // No follower answers: after one lease period the write is refused, nothing written.
    let lease = Duration::from_millis(c.config.election_timeout_max);
    let started = std::time::Instant::now();
    let refused = l.put(key(0), value(0)).await;
    assert!(
        matches!(refused, Err(NodeError::NotLeader { leader: None, .. })),
        "{refused:?}"
    );
    assert!(started.elapsed() >= lease - Duration::from_millis(50));

    // The followers' answers come 100 ms after the write: it waits for them and is applied.
    let write = tokio::spawn({
        let l = l.clone();
        async move { l.put(key(1), value(1)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !write.is_finished(),
        "the write was answered before any follower answered the leader"
    );
    for id in [1, 2, 3] {
        c.router.hold_answers(id, false);
    }
    write.await.unwrap().unwrap();
    assert!(acked(&l).is_some());
    assert_all(&l, 1..2).await;
    assert_eq!(l.get(key(0)).await.unwrap(), None);
}
