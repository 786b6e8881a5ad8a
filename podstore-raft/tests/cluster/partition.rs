//! The client across a partition of real node processes: the leader cut off from both
//! followers by the proxies in front of the nodes (tests/common/proxy.rs), while the clients
//! still reach every node. The old leader takes writes until its lease lapses (then refuses
//! them, `421`), and answers those it took but cannot commit `503 outcome_unknown` once the
//! lease has lapsed (it would hold them until the partition heals); the client moves on to the
//! new leader and retries under the same request ids. Every write is a put on a fresh key if it
//! has none, so a retry applied a second time would answer "condition failed": every write must
//! succeed, and every acknowledged one be read back from every node at the version it
//! answered, once the partition has healed.

use crate::common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::procs::{Cluster, status, value, version};
use common::proxy::Links;
use podstore_raft::Expect;
use podstore_raft::client::{Client, Retry};

/// Writer tasks: the first half share one client (as its docs advise: their writes are
/// coalesced), the others have a client each (one write in flight each).
const WRITERS: u32 = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_rides_out_a_leader_cut_off_and_applies_retries_once() {
    let root = tempfile::tempdir().unwrap();
    let links = Arc::new(Links::default());
    let cluster = Cluster::start_behind_proxies(root.path(), links.clone()).await;
    // The client's defaults but for a longer deadline: its 10 s per attempt is longer than
    // the old leader takes to answer what it cannot commit, so no write here ends by the
    // client's timeout.
    let retry = Retry {
        deadline: Duration::from_secs(60),
        ..Retry::default()
    };
    let shared = Arc::new(Client::with_retry(cluster.addrs.clone(), retry.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    // (key, value number, version answered, replayed)
    let acked = Arc::new(Mutex::new(Vec::new()));
    let writers: Vec<_> = (0..WRITERS)
        .map(|t| {
            let client = match t < WRITERS / 2 {
                true => shared.clone(),
                false => Arc::new(Client::with_retry(cluster.addrs.clone(), retry.clone())),
            };
            let (stop, done, acked) = (stop.clone(), done.clone(), acked.clone());
            tokio::spawn(async move {
                let mut i = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("p/{t}/{i}");
                    let n = t * 100_000 + i;
                    match client
                        .put_if(key.as_bytes(), value(n), Expect::Absent)
                        .await
                    {
                        Ok(w) => {
                            acked.lock().unwrap().push((key, n, w.version, w.replayed));
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => panic!("put {key}: {e}"),
                    }
                    i += 1;
                }
            })
        })
        .collect();
    let count = || done.load(Ordering::Relaxed);
    let more = async |n: usize, what: &str| {
        let from = count();
        cluster
            .wait_for(what, async || (count() >= from + n).then_some(()))
            .await;
    };
    more(40, "40 writes").await;

    // Cut the leader off from both followers; the clients still reach all three.
    let old = cluster.leader().await;
    let others: Vec<u64> = (1..=3).filter(|&i| i != old).collect();
    links.cut(old, &others);
    // A write sent to the old leader now (its lease still holds: it takes it) is answered,
    // not held until the partition heals.
    let raw = {
        let (http, addr) = (cluster.http.clone(), cluster.addr(old).to_string());
        tokio::spawn(async move {
            http.put(format!("http://{addr}/kv/raw"))
                .body("x")
                .timeout(Duration::from_secs(20))
                .send()
                .await
        })
    };
    let new = cluster
        .wait_for("a leader among the others", async || {
            for &id in &others {
                let s = status(&cluster.http, cluster.addr(id)).await?;
                let other = others.iter().find(|&&o| o != id).unwrap();
                let o = status(&cluster.http, cluster.addr(*other)).await?;
                if s.leader == Some(id) && o.leader == Some(id) {
                    return Some(id);
                }
            }
            None
        })
        .await;
    assert_ne!(new, old);
    more(40, "40 writes through the new leader, the old one cut off").await;
    let r = raw
        .await
        .unwrap()
        .expect("the cut-off leader answers a write it took");
    assert_eq!(r.status(), 503, "a write taken by the cut-off leader");
    let body = r.text().await.unwrap();
    assert!(body.contains("outcome_unknown"), "{body}");

    links.heal();
    more(40, "40 writes once healed").await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("a writer failed");
    }

    // The old leader has stepped down; every node applies all that was acknowledged and
    // serves each write at the version it answered.
    let leader = cluster.leader().await;
    assert_ne!(leader, old, "the cut-off leader still leads");
    let acked = acked.lock().unwrap().clone();
    let top = acked.iter().map(|a| a.2).max();
    for a in &cluster.addrs {
        cluster
            .wait_for("a node to apply every acknowledged write", async || {
                (status(&cluster.http, a).await?.last_applied >= top).then_some(())
            })
            .await;
        for (key, n, v, _) in &acked {
            let r = cluster
                .http
                .get(format!("http://{a}/kv/{key}"))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{a}: {key}: {}", r.status());
            assert_eq!(version(&r), *v, "{a}: {key}: another version than answered");
            assert_eq!(
                r.bytes().await.unwrap().as_ref(),
                &value(*n)[..],
                "{a}: {key}"
            );
        }
    }
    let replayed = acked.iter().filter(|a| a.3).count();
    eprintln!(
        "{} writes acknowledged, {replayed} of them answered by a replay of their first attempt",
        acked.len()
    );
}
