//! Replicated durable 1 KiB puts on an in-process three-node cluster (the router of
//! tests/common: no sockets, so this measures the storage path and openraft, not a network)
//! from 1, 16 and 64 concurrent clients, against one podstore store alone (`Durability::Sync`
//! puts from as many threads); and the time to build a snapshot.
//!
//! `cargo bench -p podstore-raft --bench replicated` (release). Prints a table; rounds are
//! interleaved and the median of three is reported.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use openraft::async_runtime::watch::WatchReceiver;

const RUN: Duration = Duration::from_secs(3);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

async fn replicated(clients: usize) -> f64 {
    let c = common::Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let node = c.node(leader);
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|t| {
            let (node, done) = (node.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = 0u64;
                while start.elapsed() < RUN {
                    node.put(format!("k/{t}/{i}").into_bytes(), vec![7u8; 1024])
                        .await
                        .unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let ops = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
    ops
}

fn alone(threads: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let store = podstore::Store::open(dir.path()).unwrap();
    let done = AtomicU64::new(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let (store, done) = (&store, &done);
            s.spawn(move || {
                let mut i = 0u64;
                while start.elapsed() < RUN {
                    store.put(format!("k/{t}/{i}"), [7u8; 1024]).unwrap();
                    done.fetch_add(1, Ordering::Relaxed);
                    i += 1;
                }
            });
        }
    });
    done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64()
}

async fn snapshot_build(keys: u64) -> (f64, u64) {
    let c = common::Cluster::new();
    let leader = c.start_cluster(&[1, 2, 3]).await;
    let node = c.node(leader);
    let mut batch = Vec::new();
    for i in 0..keys {
        batch.push(podstore_raft::Op::Put {
            key: format!("s/{i}").into_bytes(),
            value: vec![1u8; 4096],
        });
        if batch.len() == 256 || i + 1 == keys {
            node.write(podstore_raft::Request::Batch(std::mem::take(&mut batch)))
                .await
                .unwrap();
        }
    }
    // The applied id in the metrics may lag the last answer by a moment: wait for it.
    let last = node
        .raft()
        .metrics()
        .borrow_watched()
        .last_log_index
        .unwrap();
    c.wait_applied(leader, last).await;
    let applied = node.raft().metrics().borrow_watched().last_applied.unwrap();
    let start = Instant::now();
    node.raft().trigger().snapshot().await.unwrap();
    node.raft()
        .wait(Some(Duration::from_secs(600)))
        .snapshot(applied, "built")
        .await
        .unwrap();
    let secs = start.elapsed().as_secs_f64();
    let bytes = node.state_machine().data_dir().read_dir().unwrap().count() as u64;
    for id in [1, 2, 3] {
        c.stop(id).await;
    }
    (secs, bytes)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // `-- snapshot`: only the snapshot rows.
    if !std::env::args().any(|a| a == "snapshot") {
        puts(&rt);
    }
    for keys in [10_000u64, 50_000] {
        let (secs, files) = rt.block_on(snapshot_build(keys));
        println!(
            "snapshot of {keys} keys of 4 KiB ({} MiB): built in {:.3} s ({files} files in the state machine's store)",
            (keys * 4096) >> 20,
            secs
        );
    }
}

fn puts(rt: &tokio::runtime::Runtime) {
    println!("| clients | replicated puts/s | podstore alone puts/s | ratio |");
    println!("|---:|---:|---:|---:|");
    for clients in [1, 16, 64] {
        let (mut r, mut a) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            r.push(rt.block_on(replicated(clients)));
            a.push(alone(clients));
        }
        let (r, a) = (median(r), median(a));
        println!("| {clients} | {r:.0} | {a:.0} | {:.2} |", r / a);
    }
}
