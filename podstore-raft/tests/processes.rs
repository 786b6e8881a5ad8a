//! Three real node processes (the `podstore-raft` binary) on 127.0.0.1: a client writes
//! continuously and logs every acknowledged write, the leader is killed with SIGKILL mid-stream
//! and restarted from its directory, and then every acknowledged write is read back from every
//! node.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podstore_raft::http::Status;

struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn(id: u64, dir: &Path, addr: &str) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_podstore-raft"))
        .args(["--id", &id.to_string(), "--dir"])
        .arg(dir)
        .args(["--addr", addr])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start a node");
    Proc { child }
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

fn value(i: u32) -> Vec<u8> {
    format!("value of {i};").repeat(8).into_bytes()
}

/// Writes keys `from..` until `stop`, following the leader; returns the acknowledged ones.
async fn writer(
    http: reqwest::Client,
    addrs: Vec<String>,
    from: u32,
    acked: Arc<Mutex<Vec<u32>>>,
    log: PathBuf,
    stop: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut log = std::fs::File::create(log).unwrap();
    let mut target = 0usize;
    let mut i = from;
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let addr = &addrs[target % addrs.len()];
        let r = http
            .put(format!("http://{addr}/kv/k{i}"))
            .timeout(Duration::from_secs(3))
            .body(value(i))
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                writeln!(log, "ack k{i}").unwrap();
                acked.lock().unwrap().push(i);
                i += 1;
            }
            Ok(r) if r.status() == reqwest::StatusCode::MISDIRECTED_REQUEST => {
                let leader = r
                    .headers()
                    .get("x-leader")
                    .and_then(|v| v.to_str().ok())
                    .map(String::from);
                match leader.and_then(|l| addrs.iter().position(|a| *a == l)) {
                    Some(p) => target = p,
                    None => {
                        target += 1;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
            // Down, or the outcome unknown: not acknowledged; try elsewhere (the same key again:
            // a put is idempotent).
            _ => {
                target += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_killed_and_restarted_loses_no_acknowledged_write() {
    let root = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let dirs: Vec<PathBuf> = (1..=3).map(|i| root.path().join(format!("n{i}"))).collect();
    let mut procs: BTreeMap<u64, Proc> = (1..=3u64)
        .map(|id| {
            (
                id,
                spawn(id, &dirs[id as usize - 1], &addrs[id as usize - 1]),
            )
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

    let acked = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = tokio::spawn(writer(
        http.clone(),
        addrs.clone(),
        0,
        acked.clone(),
        root.path().join("acks.log"),
        stop.clone(),
    ));
    let count = || acked.lock().unwrap().len();
    wait_for("100 acknowledged writes", async || {
        (count() >= 100).then_some(())
    })
    .await;

    // SIGKILL the leader mid-stream.
    drop(procs.remove(&leader));
    let at_kill = count();
    wait_for("writes acknowledged by a new leader", async || {
        (count() >= at_kill + 50).then_some(())
    })
    .await;
    let new_leader = wait_for("the new leader", async || {
        let a = &addrs[(leader % 3) as usize];
        status(&http, a).await?.leader
    })
    .await;
    assert_ne!(new_leader, leader);

    // Restart it from its directory; writes go on meanwhile.
    let i = leader as usize - 1;
    procs.insert(leader, spawn(leader, &dirs[i], &addrs[i]));
    let at_restart = count();
    wait_for("writes after the restart", async || {
        (count() >= at_restart + 50).then_some(())
    })
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    task.await.unwrap();

    // Every node, once it has applied what the leader has, holds every acknowledged write.
    let acked = acked.lock().unwrap().clone();
    let log = std::fs::read_to_string(root.path().join("acks.log")).unwrap();
    assert_eq!(log.lines().count(), acked.len());
    let leader_addr = &addrs[new_leader as usize - 1];
    // A linearizable read on the leader first (it has applied everything committed).
    let r = http
        .get(format!("http://{leader_addr}/kv/k0?linearizable=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap().as_ref(), &value(0)[..]);
    // A value larger than a default HTTP body limit, and a range of it from a follower.
    let big: Vec<u8> = (0..5u32 << 20).map(|i| (i % 253) as u8).collect();
    let r = http
        .put(format!("http://{leader_addr}/kv/big"))
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "big put: {}", r.status());
    let target = status(&http, leader_addr).await.unwrap().last_applied;
    let follower = &addrs[(new_leader % 3) as usize];
    wait_for("the follower to apply the big put", async || {
        (status(&http, follower).await?.last_applied >= target).then_some(())
    })
    .await;
    let r = http
        .get(format!(
            "http://{follower}/kv/big?start=4000000&end=4100000"
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.bytes().await.unwrap().as_ref(),
        &big[4_000_000..4_100_000]
    );

    for a in &addrs {
        wait_for("a node to catch up", async || {
            (status(&http, a).await?.last_applied >= target).then_some(())
        })
        .await;
        for &k in &acked {
            let r = http
                .get(format!("http://{a}/kv/k{k}"))
                .send()
                .await
                .unwrap();
            assert!(
                r.status().is_success(),
                "{a}: k{k} acknowledged, then {}",
                r.status()
            );
            assert_eq!(
                r.bytes().await.unwrap().as_ref(),
                &value(k)[..],
                "{a}: k{k}"
            );
        }
    }
}
