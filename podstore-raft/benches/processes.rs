//! What a user gets: three `podstore-raft` node processes on 127.0.0.1 (the crate's binary,
//! default settings), a cluster formed through `POST /cluster/init`, and 1, 16 and 64 clients
//! (`podstore_raft::client::Client`, one per task: it finds the leader and sends request ids):
//! replicated durable 1 KiB puts (by tasks with a client each, and by tasks sharing one, whose
//! concurrent writes it coalesces; and the same puts sent straight to the leader without the
//! client and its request ids: what those cost), 4 KiB gets served by the leader alone (`GET /kv/{key}`
//! straight, as before the client) and the client's linearizable 4 KiB gets; ops/s and
//! p50/p99, rounds interleaved, medians; and the CPU time every node process and the client
//! process spent per operation (`/proc/PID/stat`), which is what bounds this machine.
//! Then values of 1 MiB and 64 MiB put through the client (1 and 4 clients): MiB/s, and the
//! peak resident memory of each node during each size (`VmHWM`, reset before each through
//! `/proc/PID/clear_refs`), which should not grow with the value's size.
//!
//! `cargo bench -p podstore-raft --bench processes`; `PODSTORE_BENCH_SECS` (per run, default 2),
//! `PODSTORE_BENCH_ROUNDS` (default 3), `PODSTORE_BENCH_LARGE=0` (no large values),
//! `PODSTORE_BENCH_ONLY=<Put|PutShared|PutRaw|Get|GetLinearizable>` (that run alone, printed
//! per run: a profile's window),
//! `PODSTORE_BENCH_NODE_DIRS=/mnt/a,/mnt/b,/mnt/c` (one
//! parent directory per node: a disk each), `PODSTORE_BENCH_NODE_BIN` (the node binary to run
//! instead of this build's: another build's, for before/after runs side by side). The nodes' directories are in a temporary directory,
//! removed at the end; the processes are killed at the end.

#[path = "support/stats.rs"]
mod stats;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use podstore_raft::client::Client;
use podstore_raft::http::Status;
use stats::{Sample, micros, rounds, run_time};

const PRELOAD: u64 = 4096;
const CLIENTS: [usize; 3] = [1, 16, 64];
/// Large values: (size, clients, puts per client per round).
const LARGE: [(usize, usize, usize); 4] = [
    (1 << 20, 1, 64),
    (1 << 20, 4, 32),
    (64 << 20, 1, 3),
    (64 << 20, 4, 1),
];

/// CPU time (user and system) of process `pid` so far, in seconds.
fn cpu_secs(pid: u32) -> f64 {
    stats::cpu_secs_of(&pid.to_string())
}

/// Peak resident memory of `pid` since its last reset, in MiB (`VmHWM`).
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Resets `pid`'s peak resident memory to its current one (Linux 4.0+; `5` in `clear_refs`).
fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

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
    /// Puts by tasks that share one [`Client`] (as the client's docs advise: one per process),
    /// which coalesces their concurrent writes into shared requests and log entries.
    PutShared,
    /// A put straight to the leader, without the client or a request id (`PUT /kv/{key}` over
    /// one keep-alive connection per task): what the request-id records and the client cost.
    PutRaw,
    Get,
    GetLinearizable,
}

async fn put(client: &Client, key: &str, value: Vec<u8>) {
    if let Err(e) = client.put(key.as_bytes(), value).await {
        panic!("put {key}: {e}");
    }
}

/// One run of `work` by `clients` clients, each a [`Client`] of its own; the CPU time of the
/// node processes `pids` and of this process over the run, per operation, in `cpu_us` (all of
/// them together).
async fn drive(addrs: &[String], leader: &str, pids: &[u32], work: Work, clients: usize) -> Sample {
    // Every run's puts write keys of their own (as the in-process bench's, one fresh cluster
    // per run, do): inserts, not overwrites of an earlier run's keys, which podstore must
    // identify by reading the records back (its resolver).
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_id = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let run = run_time();
    let shared = std::sync::Arc::new(Client::new(addrs.to_vec()));
    let clients: Vec<std::sync::Arc<Client>> = (0..clients)
        .map(|_| match work {
            Work::PutShared => shared.clone(),
            _ => std::sync::Arc::new(Client::new(addrs.to_vec())),
        })
        .collect();
    // Each client finds the leader before the clock starts.
    for c in &clients {
        c.get(b"g0").await.unwrap();
    }
    let cpu = || pids.iter().map(|&p| cpu_secs(p)).sum::<f64>() + stats::process_cpu_secs();
    let cpu0 = cpu();
    let start = Instant::now();
    let tasks: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(t, client)| {
            let leader = leader.to_string();
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let mut lat = Vec::new();
                let mut i = t as u64 * 7919;
                while start.elapsed() < run {
                    let op = Instant::now();
                    match work {
                        Work::Put | Work::PutShared => {
                            put(&client, &format!("k{run_id}-{t}-{i}"), vec![7u8; 1024]).await
                        }
                        Work::PutRaw => {
                            let r = http
                                .put(format!("http://{leader}/kv/r{run_id}-{t}-{i}"))
                                .body(vec![7u8; 1024])
                                .send()
                                .await
                                .unwrap();
                            assert!(r.status().is_success(), "put: {}", r.status());
                            r.bytes().await.unwrap();
                        }
                        Work::Get => {
                            let r = http
                                .get(format!("http://{leader}/kv/g{}", i % PRELOAD))
                                .send()
                                .await
                                .unwrap();
                            assert!(r.status().is_success(), "get: {}", r.status());
                            assert_eq!(r.bytes().await.unwrap().len(), 4096);
                        }
                        Work::GetLinearizable => {
                            let key = format!("g{}", i % PRELOAD);
                            let v = client
                                .get(key.as_bytes())
                                .await
                                .unwrap()
                                .expect("preloaded");
                            assert_eq!(v.bytes.len(), 4096);
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
    Sample::new(all, secs).with_cpu(cpu() - cpu0, secs)
}

/// `clients` clients each putting `puts` values of `size` bytes: MiB/s and p50/p99 (ms) in a
/// [`Sample`] whose `ops` is MiB/s.
async fn drive_large(addrs: &[String], size: usize, clients: usize, puts: usize) -> Sample {
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|t| {
            let client = Client::new(addrs.to_vec());
            tokio::spawn(async move {
                let value = vec![(t as u8).wrapping_add(1); size];
                let mut lat = Vec::new();
                for i in 0..puts {
                    let op = Instant::now();
                    put(&client, &format!("large-{size}-{t}-{i}"), value.clone()).await;
                    lat.push(micros(op.elapsed()));
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
    let mut s = Sample::new(all, secs);
    s.ops = (clients * puts * size) as f64 / secs / (1 << 20) as f64;
    s
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
    let procs: Vec<Proc> = (1..=3u64)
        .map(|id| {
            let bin = std::env::var_os("PODSTORE_BENCH_NODE_BIN")
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_podstore-raft").into());
            let child = Command::new(bin)
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
    let pids: Vec<u32> = procs.iter().map(|p| p.0.id()).collect();
    // The keys the gets read, from 16 writers.
    let loaders: Vec<_> = (0..16u64)
        .map(|w| {
            let client = Client::new(addrs.clone());
            tokio::spawn(async move {
                for i in (w..PRELOAD).step_by(16) {
                    put(&client, &format!("g{i}"), vec![4u8; 4096]).await;
                }
            })
        })
        .collect();
    for l in loaders {
        l.await.unwrap();
    }

    let mut runs: BTreeMap<(Work, usize), Vec<Sample>> = BTreeMap::new();
    let mut large: BTreeMap<(usize, usize), Vec<Sample>> = BTreeMap::new();
    // Peak resident MiB of each node while each size was put (the largest over the rounds).
    let mut peaks: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for round in 0..rounds() {
        for clients in CLIENTS {
            for work in [
                Work::Put,
                Work::PutShared,
                Work::PutRaw,
                Work::Get,
                Work::GetLinearizable,
            ] {
                if std::env::var("PODSTORE_BENCH_ONLY").is_ok_and(|o| o != format!("{work:?}")) {
                    continue;
                }
                let s = drive(&addrs, &addr, &pids, work, clients).await;
                eprintln!(
                    "{work:?}, {clients} clients: {}, {:.0} µs CPU/op",
                    s.cell(),
                    s.cpu_us
                );
                runs.entry((work, clients)).or_default().push(s);
            }
            eprintln!("round {round}, {clients} clients done");
        }
        // `PODSTORE_BENCH_LARGE=0`: the small values only (a CPU-per-put study needs no more).
        let large_too = std::env::var("PODSTORE_BENCH_LARGE").map_or(true, |v| v != "0");
        for size in [1024usize, 1 << 20, 64 << 20] {
            if !large_too {
                break;
            }
            pids.iter().for_each(|&p| reset_peak_rss(p));
            if size == 1024 {
                drive(&addrs, &addr, &pids, Work::Put, 64).await;
            }
            for &(s, clients, puts) in LARGE.iter().filter(|l| l.0 == size) {
                let sample = drive_large(&addrs, s, clients, puts).await;
                large.entry((s, clients)).or_default().push(sample);
            }
            let now: Vec<f64> = pids.iter().map(|&p| peak_rss_mib(p)).collect();
            let most = peaks.entry(size).or_insert_with(|| vec![0.0; now.len()]);
            for (m, n) in most.iter_mut().zip(now) {
                *m = m.max(n);
            }
        }
        eprintln!("round {round}, large values done");
    }
    if std::env::var("PODSTORE_BENCH_ONLY").is_ok() {
        return; // One kind of run: its lines above.
    }
    let m = |work, clients| Sample::median(&runs[&(work, clients)]);
    println!(
        "Three processes over 127.0.0.1, through podstore_raft::client: ops/s (p50 / p99 ms), \
         medians of {} rounds; CPU per operation of the three nodes and the client together",
        rounds()
    );
    println!();
    println!(
        "| clients | 1 KiB puts, a Client each | CPU/put (µs) | 1 KiB puts, one shared Client | CPU/put (µs) | 1 KiB puts, raw (leader, no request id) | CPU/put (µs) | 4 KiB gets (leader, local) | 4 KiB linearizable gets (client) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in CLIENTS {
        println!(
            "| {c} | {} | {:.0} | {} | {:.0} | {} | {:.0} | {} | {} |",
            m(Work::Put, c).cell(),
            m(Work::Put, c).cpu_us,
            m(Work::PutShared, c).cell(),
            m(Work::PutShared, c).cpu_us,
            m(Work::PutRaw, c).cell(),
            m(Work::PutRaw, c).cpu_us,
            m(Work::Get, c).cell(),
            m(Work::GetLinearizable, c).cell()
        );
    }
    println!();
    println!("| value | clients | MiB/s (p50 / p99 ms per put) |");
    println!("|---:|---:|---:|");
    for ((size, clients), samples) in &large {
        println!(
            "| {} MiB | {clients} | {} |",
            size >> 20,
            Sample::median(samples).cell()
        );
    }
    println!();
    println!("| puts of | peak resident MiB, node 1 / 2 / 3 (leader: node {leader}) |");
    println!("|---:|---:|");
    for (size, peak) in &peaks {
        let label = if *size < 1 << 20 {
            "1 KiB (64 clients)".to_string()
        } else {
            format!("{} MiB", size >> 20)
        };
        let cells: Vec<String> = peak.iter().map(|p| format!("{p:.0}")).collect();
        println!("| {label} | {} |", cells.join(" / "));
    }
}
