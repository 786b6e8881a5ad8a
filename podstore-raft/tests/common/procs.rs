//! Real node processes (the `podstore-raft` binary, built with the `testing` feature) on
//! 127.0.0.1, and a client that writes continuously and logs every acknowledged write.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use podstore_raft::http::Status;

/// A node process, SIGKILLed when dropped.
pub struct Proc {
    child: Child,
}

impl Proc {
    /// Waits up to `timeout` for the process to exit by itself.
    pub async fn exited_within(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }
}

impl Proc {
    /// Sends the process signal `name` (`TERM`, `INT`) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name}: {status}");
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` distinct free ports on 127.0.0.1 for nodes that are killed and restarted on the same
/// port. They are taken below the kernel's ephemeral range (`ip_local_port_range`), so no
/// client connection (this test's own among them) can hold a node's port while it is down; and
/// each is held until all are chosen, so no two nodes get one port (a node would then receive
/// RPCs meant for another).
pub fn free_ports(n: usize) -> Vec<u16> {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let mut held = Vec::new();
    if low > 11_000 {
        // A start that differs between test processes run at once.
        let mut x = u64::from(std::process::id())
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
        let span = u64::from(low - 10_000);
        for _ in 0..1000 {
            if held.len() == n {
                break;
            }
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let port = 10_000 + ((x >> 33) % span) as u16;
            if let Ok(l) = TcpListener::bind(("127.0.0.1", port)) {
                held.push(l);
            }
        }
    }
    while held.len() < n {
        held.push(TcpListener::bind("127.0.0.1:0").unwrap());
    }
    held.iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

impl Proc {
    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }
}

/// Starts node `id` with extra `args` and environment variables `env`. Its log goes to the
/// test's stderr: errors only, unless the test runs with `RUST_LOG` (which the node inherits);
/// with `PODSTORE_RAFT_TEST_LOGS=<dir>`, to `<dir>/n<id>.log` instead (appended: a restarted
/// node's log follows its first run's), so that each node's log can be read on its own after
/// the test (the test's directory is removed when it ends, failed or not).
pub fn spawn(id: u64, dir: &Path, addr: &str, args: &[&str], env: &[(&str, &str)]) -> Proc {
    spawn_in(id, dir, addr, args, env, None)
}

/// [`spawn`], the process in cgroup `cgroup` (a cgroup v1 directory) from its first
/// instruction: a shell writes its own pid into the cgroup, then `exec`s the node (same pid),
/// so the node's store sizes its cache from the cgroup's limit, as it would under an operator
/// who starts it there.
pub fn spawn_in(
    id: u64,
    dir: &Path,
    addr: &str,
    args: &[&str],
    env: &[(&str, &str)],
    cgroup: Option<&Path>,
) -> Proc {
    let bin = env!("CARGO_BIN_EXE_podstore-raft");
    let mut command = match cgroup {
        None => Command::new(bin),
        Some(cg) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg("echo $$ > \"$0/cgroup.procs\" && exec \"$@\"")
                .arg(cg)
                .arg(bin);
            c
        }
    };
    if std::env::var_os("RUST_LOG").is_none() {
        command.env("RUST_LOG", "error");
    }
    // A proxy in the environment that refuses every connection: the nodes' Raft traffic must
    // not go through one (src/http/mod.rs, `HttpNetwork::new`), so every cluster test checks it.
    for proxy in ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"] {
        command.env(proxy, "http://127.0.0.1:9");
    }
    let child = command
        .args(["--id", &id.to_string(), "--dir"])
        .arg(dir)
        .args(["--addr", addr])
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(node_log(id))
        .spawn()
        .expect("start a node");
    Proc { child }
}

/// Where node `id`'s log goes (see [`spawn`]).
fn node_log(id: u64) -> Stdio {
    let Some(dir) = std::env::var_os("PODSTORE_RAFT_TEST_LOGS") else {
        return Stdio::inherit();
    };
    let path = Path::new(&dir).join(format!("n{id}.log"));
    match std::fs::File::options()
        .create(true)
        .append(true)
        .open(&path)
    {
        Ok(f) => Stdio::from(f),
        Err(e) => panic!("open the node log {}: {e}", path.display()),
    }
}

/// The version a successful write answered (its `ETag`): the index of its log entry. A node
/// whose `last_applied` has reached it serves the write. Wait for this, not for the leader's
/// `last_applied` read after the answer: the leader answers a write as soon as it has applied
/// it, and openraft moves the applied index in its metrics (which `/cluster/status` reports) a
/// moment later, so a status read right after the answer may still name the entry before it.
pub fn version(r: &reqwest::Response) -> u64 {
    let tag = r.headers()[reqwest::header::ETAG].to_str().unwrap();
    tag.trim_matches('"')
        .parse()
        .unwrap_or_else(|e| panic!("ETag {tag}: {e}"))
}

pub async fn status(http: &reqwest::Client, addr: &str) -> Option<Status> {
    let r = http
        .get(format!("http://{addr}/cluster/status"))
        .timeout(Duration::from_secs(2))
        .send()
        .await
        .ok()?;
    r.json().await.ok()
}

/// How long a wait may see nothing move before it fails. Every wait here is for something a
/// cluster does (a node opening its stores, an election, writes, catching up), and on a loaded
/// machine each of those may take many times its quiet time (at load 7-16 on 2 cores, a node's
/// open waited on the disk for over 30 s): a wait fails when its cluster stops moving, not
/// after a fixed time.
pub const STALL: Duration = Duration::from_secs(30);

/// The longest a wait lasts even while things move: a cluster that elects leader after leader
/// and never serves is stuck too.
pub const CEILING: Duration = Duration::from_secs(180);

/// Waits for `f` to answer something; fails after [`STALL`] with nothing answered.
pub async fn wait_for<T>(what: &str, f: impl AsyncFnMut() -> Option<T>) -> T {
    wait_moving(what, async || (), f).await
}

/// Waits for `f` to answer something, while `moving` answers something new at least every
/// [`STALL`] (and for [`CEILING`] at most).
pub async fn wait_moving<T, P: PartialEq + std::fmt::Debug>(
    what: &str,
    mut moving: impl AsyncFnMut() -> P,
    mut f: impl AsyncFnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    let mut seen = moving().await;
    let mut since = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        let now = moving().await;
        if now != seen {
            seen = now;
            since = Instant::now();
        }
        if since.elapsed() > STALL || start.elapsed() > CEILING {
            panic!(
                "timed out waiting for {what}: nothing moved for {:?} ({:?} in all); last seen: \
                 {seen:?}",
                since.elapsed(),
                start.elapsed()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What process `pid` has done so far: CPU ticks and bytes read and written (`None` once it
/// has exited, or off Linux). Moving while a node opens its stores, even if it answers nothing.
fn work(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's name (in parentheses, which may hold spaces): state is field 3,
    // utime and stime fields 14 and 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    if fields.first() == Some(&"Z") {
        return None;
    }
    let cpu = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let io = std::fs::read_to_string(format!("/proc/{pid}/io"))
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("rchar:") || l.starts_with("wchar:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0);
    Some((cpu, io))
}

pub fn value(i: u32) -> Vec<u8> {
    format!("value of {i};").repeat(8).into_bytes()
}

/// Three nodes in `root`, each started with `args`, made a cluster.
pub struct Cluster {
    /// The nodes' addresses in the membership, where clients reach them.
    pub addrs: Vec<String>,
    /// The addresses the nodes listen on: their `addrs`, or behind proxies another.
    pub binds: Vec<String>,
    pub dirs: Vec<PathBuf>,
    pub procs: BTreeMap<u64, Proc>,
    pub args: Vec<String>,
    pub http: reqwest::Client,
    /// The cgroup each node runs in, if any (see [`spawn_in`]).
    pub cgroups: BTreeMap<u64, PathBuf>,
}

impl Cluster {
    /// Starts nodes 1, 2 and 3 and initializes the cluster at node 1; returns once it has a
    /// leader.
    pub async fn start(root: &Path, args: &[&str]) -> Cluster {
        Cluster::start_in(root, args, BTreeMap::new()).await
    }

    /// [`Cluster::start`], node `id` in cgroup `cgroups[id]` where given (see [`spawn_in`]).
    pub async fn start_in(root: &Path, args: &[&str], cgroups: BTreeMap<u64, PathBuf>) -> Cluster {
        let addrs: Vec<String> = free_ports(3)
            .into_iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        Cluster::start_at(root, args, cgroups, addrs.clone(), addrs).await
    }

    /// [`Cluster::start`] with each node behind a proxy ([`crate::common::proxy`]), whose
    /// address is the node's in the membership and the clients': `links` cuts them apart.
    pub async fn start_behind_proxies(
        root: &Path,
        links: Arc<crate::common::proxy::Links>,
    ) -> Cluster {
        let ports = free_ports(6);
        let addr = |p: &u16| format!("127.0.0.1:{p}");
        let binds: Vec<String> = ports[..3].iter().map(addr).collect();
        let addrs: Vec<String> = ports[3..].iter().map(addr).collect();
        for (i, (a, b)) in addrs.iter().zip(&binds).enumerate() {
            let listener = TcpListener::bind(a).unwrap();
            crate::common::proxy::spawn(i as u64 + 1, listener, b.clone(), links.clone());
        }
        Cluster::start_at(root, &[], BTreeMap::new(), addrs, binds).await
    }

    async fn start_at(
        root: &Path,
        args: &[&str],
        cgroups: BTreeMap<u64, PathBuf>,
        addrs: Vec<String>,
        binds: Vec<String>,
    ) -> Cluster {
        let dirs: Vec<PathBuf> = (1..=3).map(|i| root.join(format!("n{i}"))).collect();
        let mut cluster = Cluster {
            addrs,
            binds,
            dirs,
            procs: BTreeMap::new(),
            args: args.iter().map(|s| s.to_string()).collect(),
            http: reqwest::Client::new(),
            cgroups,
        };
        for id in 1..=3 {
            cluster.restart(id, &[]);
        }
        for id in 1..=3 {
            cluster.serving(id).await;
        }
        let members: BTreeMap<u64, String> =
            (1..=3u64).zip(cluster.addrs.iter().cloned()).collect();
        let r = cluster
            .http
            .post(format!("http://{}/cluster/init", cluster.addrs[0]))
            .json(&members)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "init: {}", r.status());
        cluster.leader().await;
        cluster
    }

    pub fn addr(&self, id: u64) -> &str {
        &self.addrs[id as usize - 1]
    }

    /// What the running nodes say of their progress (term, leader, last log and applied
    /// indexes, snapshot, purge) and what their processes have done: what a wait on the
    /// cluster watches move (see [`STALL`]).
    pub async fn progress(&self) -> Vec<(u64, Option<String>, Option<(u64, u64)>)> {
        let mut seen = Vec::new();
        for (&id, proc) in &self.procs {
            let s = status(&self.http, self.addr(id)).await.map(|s| {
                format!(
                    "term {} leader {:?} log {:?} applied {:?} snapshot {:?} purged {:?}",
                    s.term, s.leader, s.last_log, s.last_applied, s.snapshot, s.purged
                )
            });
            seen.push((id, s, work(proc.pid())));
        }
        seen
    }

    /// Waits for `f` to answer something while the cluster moves (see [`STALL`]).
    pub async fn wait_for<T>(&self, what: &str, f: impl AsyncFnMut() -> Option<T>) -> T {
        wait_moving(what, async || self.progress().await, f).await
    }

    /// Waits for node `id`'s process to exit by itself while it works (see [`STALL`]); `None`
    /// when it stops working (or [`CEILING`] passes) and still runs.
    pub async fn exit_of(&mut self, id: u64) -> Option<ExitStatus> {
        let pid = self.procs[&id].pid();
        let start = Instant::now();
        let mut seen = work(pid);
        let mut since = Instant::now();
        loop {
            if let Some(exit) = self.procs.get_mut(&id)?.exited() {
                return Some(exit);
            }
            let now = work(pid);
            if now != seen {
                seen = now;
                since = Instant::now();
            }
            if since.elapsed() > STALL || start.elapsed() > CEILING {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until node `id` answers its status; fails at once if its process exits, and when
    /// it stops working without answering (see [`STALL`]).
    pub async fn serving(&mut self, id: u64) -> Status {
        let addr = self.addr(id).to_string();
        let http = self.http.clone();
        let pid = self.procs[&id].pid();
        wait_moving(
            &format!("node {id} to serve"),
            async || work(pid),
            async || {
                if let Some(exit) = self.procs.get_mut(&id).and_then(Proc::exited) {
                    panic!("node {id} exited before it served: {exit}");
                }
                status(&http, &addr).await
            },
        )
        .await
    }

    /// (Re)starts node `id` from its directory, with the cluster's arguments and `env`.
    pub fn restart(&mut self, id: u64, env: &[(&str, &str)]) {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let i = id as usize - 1;
        let cgroup = self.cgroups.get(&id).map(PathBuf::as_path);
        let proc = spawn_in(id, &self.dirs[i], &self.binds[i], &args, env, cgroup);
        self.procs.insert(id, proc);
    }

    /// SIGKILLs node `id`.
    pub fn kill(&mut self, id: u64) {
        drop(self.procs.remove(&id));
    }

    /// Sends node `id` signal `name`; returns its process, to wait for.
    pub fn signal(&mut self, id: u64, name: &str) -> Proc {
        let proc = self.procs.remove(&id).expect("a running node");
        proc.signal(name);
        proc
    }

    /// The leader: a running node that says it leads, and that a majority of the running nodes
    /// (itself among them) name as leader (a node just restarted may still name an old one).
    pub async fn leader(&self) -> u64 {
        self.wait_for("a leader", async || {
            let mut views = BTreeMap::new();
            for &id in self.procs.keys() {
                if let Some(s) = status(&self.http, self.addr(id)).await {
                    views.insert(id, s.leader);
                }
            }
            views
                .iter()
                .filter(|(id, l)| **l == Some(**id))
                .map(|(id, _)| *id)
                .find(|l| views.values().filter(|v| **v == Some(*l)).count() >= 2)
        })
        .await
    }

    /// Waits until node `id` has applied at least `index`.
    pub async fn wait_applied(&self, id: u64, index: Option<u64>) {
        self.wait_for(&format!("node {id} to apply {index:?}"), async || {
            (status(&self.http, self.addr(id)).await?.last_applied >= index).then_some(())
        })
        .await
    }

    /// Checks that every node holds every acknowledged write, once it has applied all that
    /// the leader has and every acknowledged write (see [`version`]).
    pub async fn check_acknowledged(&self, acked: &Acked) {
        let leader = self.leader().await;
        let target = status(&self.http, self.addr(leader))
            .await
            .unwrap()
            .last_applied
            .max(acked.version);
        for a in &self.addrs {
            self.wait_for("a node to catch up", async || {
                (status(&self.http, a).await?.last_applied >= target).then_some(())
            })
            .await;
            for &k in &acked.keys {
                let r = self
                    .http
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
}

/// What a [`Writer`] had acknowledged when it stopped.
pub struct Acked {
    /// The keys' numbers (`k<i>`), in the order they were acknowledged.
    pub keys: Vec<u32>,
    /// The highest version an acknowledged write answered (see [`version`]).
    pub version: Option<u64>,
}

/// A client writing keys `k0, k1, ...` continuously, following the leader; every acknowledged
/// write is logged (a line `ack k<i>` in `log`) and kept, with the highest version answered.
pub struct Writer {
    pub acked: Arc<Mutex<Vec<u32>>>,
    version: Arc<Mutex<Option<u64>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    log: PathBuf,
}

impl Writer {
    pub fn start(http: reqwest::Client, addrs: Vec<String>, log: PathBuf) -> Writer {
        let acked = Arc::new(Mutex::new(Vec::new()));
        let version = Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(write_loop(
            http,
            addrs,
            acked.clone(),
            version.clone(),
            log.clone(),
            stop.clone(),
        ));
        Writer {
            acked,
            version,
            stop,
            task,
            log,
        }
    }

    /// Writes acknowledged so far.
    pub fn count(&self) -> usize {
        self.acked.lock().unwrap().len()
    }

    /// Waits until `n` more writes than now are acknowledged; fails when none is for
    /// [`STALL`] (a loaded machine writes slowly, a stuck cluster not at all).
    pub async fn wait_more(&self, n: usize, what: &str) {
        let at = self.count();
        wait_moving(
            what,
            async || self.count(),
            async || (self.count() >= at + n).then_some(()),
        )
        .await
    }

    /// Stops writing; returns what was acknowledged (the keys checked against the log).
    pub async fn stop(self) -> Acked {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap();
        let acked = self.acked.lock().unwrap().clone();
        let log = std::fs::read_to_string(&self.log).unwrap();
        let logged: Vec<u32> = log
            .lines()
            .map(|l| l.strip_prefix("ack k").unwrap().parse().unwrap())
            .collect();
        assert_eq!(logged, acked);
        let version = *self.version.lock().unwrap();
        Acked {
            keys: acked,
            version,
        }
    }
}

async fn write_loop(
    http: reqwest::Client,
    addrs: Vec<String>,
    acked: Arc<Mutex<Vec<u32>>>,
    version: Arc<Mutex<Option<u64>>>,
    log: PathBuf,
    stop: Arc<AtomicBool>,
) {
    let mut log = std::fs::File::create(log).unwrap();
    let mut target = 0usize;
    let mut i = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let addr = &addrs[target % addrs.len()];
        let r = http
            .put(format!("http://{addr}/kv/k{i}"))
            .timeout(Duration::from_secs(3))
            .body(value(i))
            .send()
            .await;
        match r {
            Ok(r) if r.status().is_success() => {
                let v = self::version(&r);
                let mut highest = version.lock().unwrap();
                *highest = (*highest).max(Some(v));
                drop(highest);
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
