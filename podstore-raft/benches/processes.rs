//! What a user gets: three `podstore-raft` node processes on 127.0.0.1 (the crate's binary,
//! default settings), a cluster formed through `POST /cluster/init`, and 1, 16 and 64 client
//! tasks on the leader over HTTP: replicated durable 1 KiB puts (`PUT /kv/{key}`), 4 KiB gets
//! (`GET /kv/{key}`) and linearizable 4 KiB gets (`?linearizable=1`); ops/s and p50/p99, rounds
//! interleaved, medians.
//!
//! `cargo bench -p podstore-raft --bench processes`; `PODSTORE_BENCH_SECS` (per run, default 2),
//! `PODSTORE_BENCH_ROUNDS` (default 3), `PODSTORE_BENCH_NODE_DIRS=/mnt/a,/mnt/b,/mnt/c` (one
//! parent directory per node: a disk each). The nodes' directories are in a temporary directory,
//! removed at the end; the processes are killed at the end.

#[path = "support/stats.rs"]
mod stats;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use podstore_raft::http::Status;
use stats::{Sample, micros, rounds, run_time};

const PRELOAD: u64 = 4096;
const CLIENTS: [usize; 3] = [1, 16, 64];

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `n` distinct free ports: each listener is held until all are chosen, or the kernel may hand
/// one port out twice and two nodes would share an address.
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

async fn status(http: &reqwest::Client, addr: &str) -> Option<Status> {
    let r = http
        .get(format!("http://{addr}/cluster/status"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

async fn wait_for<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(v) = f().await {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Work {
    Put,
    Get,
    GetLinearizable,
}

async fn put(http: &reqwest::Client, addr: &str, key: &str, value: Vec<u8>) {
    let r = http
        .put(format!("http://{addr}/kv/{key}"))
        .body(value)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "put {key}: {}", r.status());
}

async fn drive(http: &reqwest::Client, addr: &str, work: Work, clients: usize) -> Sample {
    let run = run_time();
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|t| {
            let (http, addr) = (http.clone(), addr.to_string());
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = t as u64 * 7919;
                while start.elapsed() < run {
                    let op = Instant::now();
                    match work {
                        Work::Put => put(&http, &addr, &format!("k{t}-{i}"), vec![7u8; 1024]).await,
                        Work::Get | Work::GetLinearizable => {
                            let lin = if work == Work::GetLinearizable {
                                "?linearizable=1"
                            } else {
                                ""
                            };
                            let r = http
                                .get(format!("http://{addr}/kv/g{}{lin}", i % PRELOAD))
                                .send()
                                .await
                                .unwrap();
                            assert!(r.status().is_success(), "get: {}", r.status());
                            assert_eq!(r.bytes().await.unwrap().len(), 4096);
                        }
                    }
                    lat.push(micros(op.elapsed()));
                    i += 1;
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    Sample::new(all, start.elapsed().as_secs_f64())
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run());
}

async fn run() {
    let root = tempfile::tempdir().unwrap();
    // With `PODSTORE_BENCH_NODE_DIRS`: node `i` in the `i`-th of these (cycling).
    let parents = stats::node_roots();
    let node_dir = |id: u64| match parents.len() {
        0 => root.path().join(format!("n{id}")),
        n => parents[(id as usize - 1) % n].path().join(format!("n{id}")),
    };
    let addrs: Vec<String> = free_ports(3)
        .into_iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    let _procs: Vec<Proc> = (1..=3u64)
        .map(|id| {
            let child = Command::new(env!("CARGO_BIN_EXE_podstore-raft"))
                .args(["--id", &id.to_string(), "--dir"])
                .arg(node_dir(id))
                .args(["--addr", &addrs[id as usize - 1]])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("start a node");
            Proc(child)
        })
        .collect();
    let http = reqwest::Client::new();
    for a in &addrs {
        wait_for("a node to serve", async || status(&http, a).await).await;
    }
    let members: BTreeMap<u64, String> = (1..=3u64).zip(addrs.iter().cloned()).collect();
    let r = http
        .post(format!("http://{}/cluster/init", addrs[0]))
        .json(&members)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "init: {}", r.status());
    let leader = wait_for("a leader", async || status(&http, &addrs[0]).await?.leader).await;
    let addr = addrs[leader as usize - 1].clone();
    // The keys the gets read, from 16 writers.
    let loaders: Vec<_> = (0..16u64)
        .map(|w| {
            let (http, addr) = (http.clone(), addr.clone());
            tokio::spawn(async move {
                for i in (w..PRELOAD).step_by(16) {
                    put(&http, &addr, &format!("g{i}"), vec![4u8; 4096]).await;
                }
            })
        })
        .collect();
    for l in loaders {
        l.await.unwrap();
    }

    let mut runs: BTreeMap<(Work, usize), Vec<Sample>> = BTreeMap::new();
    for round in 0..rounds() {
        for clients in CLIENTS {
            for work in [Work::Put, Work::Get, Work::GetLinearizable] {
                let s = drive(&http, &addr, work, clients).await;
                runs.entry((work, clients)).or_default().push(s);
            }
            eprintln!("round {round}, {clients} clients done");
        }
    }
    let m = |work, clients| Sample::median(&runs[&(work, clients)]);
    println!(
        "Three processes over 127.0.0.1 (HTTP): ops/s (p50 / p99 ms), medians of {} rounds",
        rounds()
    );
    println!();
    println!("| clients | 1 KiB puts | 4 KiB gets | 4 KiB linearizable gets |");
    println!("|---:|---:|---:|---:|");
    for c in CLIENTS {
        println!(
            "| {c} | {} | {} | {} |",
            m(Work::Put, c).cell(),
            m(Work::Get, c).cell(),
            m(Work::GetLinearizable, c).cell()
        );
    }
}
