//! In-process three-node clusters (routers that call the target's Raft directly: no sockets, so
//! this measures the storage path and openraft, not a network):
//!
//! - replicated durable 1 KiB puts and 4 KiB gets (local, and linearizable through
//!   `ensure_linearizable`) from 1, 16 and 64 concurrent clients on the leader, ops/s and
//!   p50/p99, on podstore-raft's cluster, on the same openraft cluster over an in-memory log
//!   and state machine (`support/mem.rs`: the ceiling without disks), and on one podstore store
//!   alone (`Durability::Sync` puts, gets, from as many threads); rounds interleaved, medians;
//! - `-- snapshot`: building a snapshot of a large state machine (time, bytes copied), and
//!   shipping one to a new learner and installing it (`support/snapshot.rs`).
//!
//! `cargo bench -p podstore-raft --bench replicated [-- puts|snapshot]`. Settings from the
//! environment: `PODSTORE_BENCH_SECS` (per run, default 2), `PODSTORE_BENCH_ROUNDS` (default 3),
//! `PODSTORE_BENCH_BUILD_GIB` (default 1), `PODSTORE_BENCH_SHIP_GIB` (default 1),
//! `PODSTORE_BENCH_DIR` (where the snapshot build's data goes, default the temporary
//! directory), `PODSTORE_BENCH_NODE_DIRS=/mnt/a,/mnt/b,/mnt/c` (the cluster nodes' directories,
//! one parent per node: a disk each; default one temporary directory),
//! `PODSTORE_BENCH_PROFILE=64` (only the podstore-raft cluster's puts from 64
//! clients: for `perf record -g`).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "support/mem.rs"]
mod mem;
#[path = "support/snapshot.rs"]
mod snapshot;
#[path = "support/stats.rs"]
mod stats;

use std::collections::BTreeMap;
use std::time::Instant;

use stats::{Sample, micros, process_cpu_secs, rounds, run_time};

/// Keys of 4 KiB written before the gets (16 MiB).
const PRELOAD: u64 = 4096;
const CLIENTS: [usize; 3] = [1, 16, 64];

/// The Raft settings of both clusters: the tests' (snapshots only when asked), with heartbeats
/// and elections as slow as the crate's defaults, so that a loaded machine's pauses do not
/// depose a leader mid-run.
fn bench_config() -> openraft::Config {
    openraft::Config {
        heartbeat_interval: 250,
        election_timeout_min: 1500,
        election_timeout_max: 3000,
        ..common::test_config()
    }
}

/// A podstore-raft cluster with the bench's settings, its nodes' directories where
/// `PODSTORE_BENCH_NODE_DIRS` says.
fn bench_cluster() -> common::Cluster {
    common::Cluster::with_config_in(bench_config(), stats::node_roots())
}

/// What a client does in a loop.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Work {
    Put,
    Get,
    GetLinearizable,
}

/// The leader of a cluster under test.
#[derive(Clone)]
enum Leader {
    Podstore(podstore_raft::Node),
    Memory(mem::MemNode),
}

impl Leader {
    async fn write(&self, request: podstore_raft::Request) {
        match self {
            Leader::Podstore(n) => {
                n.write(request).await.unwrap();
            }
            Leader::Memory(n) => {
                n.raft.client_write(request).await.unwrap();
            }
        }
    }

    async fn get(&self, key: Vec<u8>, linearizable: bool) -> Option<Vec<u8>> {
        match self {
            Leader::Podstore(n) if linearizable => n.get_linearizable(key).await.unwrap(),
            Leader::Podstore(n) => n.get(key).await.unwrap(),
            Leader::Memory(n) => {
                if linearizable {
                    n.raft
                        .ensure_linearizable(openraft::ReadPolicy::ReadIndex)
                        .await
                        .unwrap();
                }
                n.sm.get(&key)
            }
        }
    }
}

fn get_key(i: u64) -> Vec<u8> {
    format!("g/{:05}", i % PRELOAD).into_bytes()
}

/// The batches of puts that write the keys the gets read.
fn preload_batches() -> impl Iterator<Item = podstore_raft::Request> {
    (0..PRELOAD).step_by(256).map(|from| {
        podstore_raft::Request::Batch(
            (from..from + 256)
                .map(|i| podstore_raft::Op::Put {
                    key: get_key(i),
                    value: vec![4u8; 4096],
                })
                .collect(),
        )
    })
}

/// Writes the keys the gets read, in batches.
async fn preload(leader: &Leader) {
    for batch in preload_batches() {
        leader.write(batch).await;
    }
}

/// [`preload`] on the podstore cluster `c` whose leader is `id`, through whichever node leads:
/// on a loaded machine a freshly elected leader sometimes steps down before its first write
/// (`NotLeader { leader: None }` at the first preload write, 2 of 9 runs at load 8-10), and
/// the preload (idempotent puts, not measured) starts again on the next leader. Returns the
/// leader it wrote through.
async fn preload_podstore(c: &common::Cluster, mut id: u64) -> u64 {
    'again: for attempt in 1.. {
        let node = c.node(id);
        for batch in preload_batches() {
            if let Err(e) = node.write(batch).await {
                assert!(attempt < 5, "preload failed {attempt} times, last: {e}");
                eprintln!("preload through node {id}: {e}; waiting for a leader");
                id = c.leader(&[1, 2, 3]).await;
                continue 'again;
            }
        }
        break;
    }
    id
}

/// `clients` tasks doing `work` on `leader` for the run time.
async fn drive(leader: &Leader, work: Work, clients: usize) -> Sample {
    let run = run_time();
    let cpu = process_cpu_secs();
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|t| {
            let leader = leader.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = t as u64 * 7919;
                while start.elapsed() < run {
                    let op = Instant::now();
                    match work {
                        Work::Put => {
                            let request = podstore_raft::Request::Put {
                                key: format!("k/{t}/{i}").into_bytes(),
                                value: vec![7u8; 1024],
                            };
                            leader.write(request).await;
                        }
                        Work::Get | Work::GetLinearizable => {
                            let v = leader.get(get_key(i), work == Work::GetLinearizable).await;
                            assert_eq!(v.map(|v| v.len()), Some(4096));
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
    let secs = start.elapsed().as_secs_f64();
    Sample::new(all, secs).with_cpu(process_cpu_secs() - cpu, secs)
}

/// Every kind of work, in order, on one fresh three-node cluster.
async fn cluster(memory: bool, clients: usize) -> Vec<(Work, Sample)> {
    let mut out = Vec::new();
    if memory {
        let c = mem::MemCluster::start(bench_config()).await;
        let leader = Leader::Memory(c.leader.clone());
        preload(&leader).await;
        for work in [Work::Put, Work::Get, Work::GetLinearizable] {
            out.push((work, drive(&leader, work, clients).await));
        }
        c.stop().await;
    } else {
        let c = bench_cluster();
        let id = c.start_cluster(&[1, 2, 3]).await;
        let id = preload_podstore(&c, id).await;
        let leader = Leader::Podstore(c.node(id));
        for work in [Work::Put, Work::Get, Work::GetLinearizable] {
            out.push((work, drive(&leader, work, clients).await));
        }
        drop(leader);
        for id in [1, 2, 3] {
            c.stop(id).await;
        }
    }
    out
}

/// One podstore store alone: `Durability::Sync` puts, then gets, from `threads` threads.
fn alone(threads: usize) -> Vec<(Work, Sample)> {
    let dir = tempfile::tempdir().unwrap();
    let store = podstore::Store::open(dir.path()).unwrap();
    let mut batch = podstore::Batch::new();
    for i in 0..PRELOAD {
        batch.put(get_key(i), [4u8; 4096]);
    }
    store.write(&batch).unwrap();
    let run = run_time();
    let mut out = Vec::new();
    for work in [Work::Put, Work::Get] {
        let cpu = process_cpu_secs();
        let start = Instant::now();
        let lat: Vec<Vec<u32>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let store = &store;
                    s.spawn(move || {
                        let mut lat = Vec::new();
                        let mut i = t as u64 * 7919;
                        while start.elapsed() < run {
                            let op = Instant::now();
                            if work == Work::Put {
                                store.put(format!("k/{t}/{i}"), [7u8; 1024]).unwrap();
                            } else {
                                let v = store.get(get_key(i)).unwrap();
                                assert_eq!(v.map(|v| v.len()), Some(4096));
                            }
                            lat.push(micros(op.elapsed()));
                            i += 1;
                        }
                        lat
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let secs = start.elapsed().as_secs_f64();
        let cpu = process_cpu_secs() - cpu;
        out.push((work, Sample::new(lat.concat(), secs).with_cpu(cpu, secs)));
    }
    out
}

type Key = (&'static str, Work, usize);

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let args: Vec<String> = std::env::args().collect();
    let only = |what: &str| {
        let picked: Vec<&String> = args
            .iter()
            .skip(1)
            .filter(|a| *a == "puts" || *a == "snapshot")
            .collect();
        picked.is_empty() || picked.iter().any(|a| *a == what)
    };
    if only("puts") {
        puts_and_gets(&rt);
    }
    if only("snapshot") {
        rt.block_on(snapshot::run());
    }
}

/// `PODSTORE_BENCH_PROFILE=<clients>`: only the podstore-raft cluster's puts from that many
/// clients, for as long as the run time says (`perf record -g` on it); with
/// `PODSTORE_BENCH_CLUSTER=memory`, the in-memory cluster's.
fn profile(rt: &tokio::runtime::Runtime, clients: usize) {
    let memory = std::env::var("PODSTORE_BENCH_CLUSTER").is_ok_and(|c| c == "memory");
    let s = rt.block_on(async {
        if memory {
            let c = mem::MemCluster::start(bench_config()).await;
            let s = drive(&Leader::Memory(c.leader.clone()), Work::Put, clients).await;
            c.stop().await;
            return s;
        }
        let c = bench_cluster();
        let id = c.start_cluster(&[1, 2, 3]).await;
        let leader = Leader::Podstore(c.node(id));
        let s = drive(&leader, Work::Put, clients).await;
        drop(leader);
        for id in [1, 2, 3] {
            c.stop(id).await;
        }
        s
    });
    let name = if memory { "in-memory" } else { "podstore-raft" };
    println!(
        "{name} cluster, {clients} clients, puts: {}, {:.1} us of CPU per put",
        s.cell(),
        s.cpu_us
    );
}

fn puts_and_gets(rt: &tokio::runtime::Runtime) {
    if let Ok(clients) = std::env::var("PODSTORE_BENCH_PROFILE") {
        return profile(rt, clients.parse().unwrap());
    }
    let mut runs: BTreeMap<Key, Vec<Sample>> = BTreeMap::new();
    for round in 0..rounds() {
        for clients in CLIENTS {
            let mut record = |system: &'static str, samples: Vec<(Work, Sample)>| {
                for (work, s) in samples {
                    runs.entry((system, work, clients)).or_default().push(s);
                }
            };
            record("podstore", rt.block_on(cluster(false, clients)));
            record("memory", rt.block_on(cluster(true, clients)));
            record("alone", alone(clients));
            eprintln!("round {round}, {clients} clients done");
        }
    }
    let med: BTreeMap<Key, Sample> = runs.iter().map(|(k, v)| (*k, Sample::median(v))).collect();
    let m = |system, work, clients| med[&(system, work, clients)];
    // The three systems' put samples at `clients`: the cluster, the in-memory cluster, alone.
    let puts = |clients| {
        (
            m("podstore", Work::Put, clients),
            m("memory", Work::Put, clients),
            m("alone", Work::Put, clients),
        )
    };
    println!(
        "Replicated durable 1 KiB puts: ops/s (p50 / p99 ms), medians of {} rounds",
        rounds()
    );
    println!();
    println!(
        "| clients | podstore-raft cluster | in-memory cluster | podstore alone (Sync) | cluster / alone | cluster / in-memory |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for c in CLIENTS {
        let (p, mm, a) = puts(c);
        println!(
            "| {c} | {} | {} | {} | {:.2} | {:.2} |",
            p.cell(),
            mm.cell(),
            a.cell(),
            p.ops / a.ops,
            p.ops / mm.ops
        );
    }
    println!();
    println!(
        "CPU per put (the whole process's user and system time over the run, every node and \
         the clients, divided by the puts), microseconds"
    );
    println!();
    println!(
        "| clients | podstore-raft cluster | in-memory cluster | podstore alone (Sync) | cluster / in-memory |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for c in CLIENTS {
        let (p, mm, a) = puts(c);
        println!(
            "| {c} | {:.1} | {:.1} | {:.1} | {:.2} |",
            p.cpu_us,
            mm.cpu_us,
            a.cpu_us,
            p.cpu_us / mm.cpu_us
        );
    }
    println!();
    println!("4 KiB gets on the leader: ops/s (p50 / p99 ms)");
    println!();
    println!(
        "| clients | podstore-raft local | podstore-raft linearizable | in-memory local | in-memory linearizable | podstore alone |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for c in CLIENTS {
        println!(
            "| {c} | {} | {} | {} | {} | {} |",
            m("podstore", Work::Get, c).cell(),
            m("podstore", Work::GetLinearizable, c).cell(),
            m("memory", Work::Get, c).cell(),
            m("memory", Work::GetLinearizable, c).cell(),
            m("alone", Work::Get, c).cell(),
        );
    }
}
