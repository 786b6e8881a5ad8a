//! An in-process cluster: nodes talk through a router that calls the target's Raft directly,
//! and can cut any node off (both directions) to partition the cluster. Snapshots go through
//! the crate's own transfer frames (chunked, crc-checked), not as a shared directory.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Config, RaftNetworkV2};
use podstore_raft::{Node, NodeId, SnapshotDir, TypeConfig, transfer};

/// The library's switch between the default test run and the long one
/// (`PODSTORE_TEST_LONG=1`), shared with its tests.
#[path = "../../../tests/common/long.rs"]
pub mod long;
pub mod procs;
pub mod proxy;

type Snapshot = openraft::alias::SnapshotOf<TypeConfig, SnapshotDir>;
type Vote = openraft::alias::VoteOf<TypeConfig>;

#[derive(Default)]
struct State {
    nodes: HashMap<NodeId, Node>,
    /// Nodes cut off from every other node.
    isolated: HashSet<NodeId>,
    /// Nodes whose answers to AppendEntries are held back (the RPC is handled at once).
    holding: HashSet<NodeId>,
}

/// The switchboard of an in-process cluster.
#[derive(Clone, Default)]
pub struct Router {
    state: Arc<Mutex<State>>,
}

impl Router {
    fn target(&self, from: NodeId, to: NodeId) -> Result<Node, String> {
        let s = self.state.lock().unwrap();
        if s.isolated.contains(&from) || s.isolated.contains(&to) {
            return Err(format!("{from} -> {to}: partitioned"));
        }
        s.nodes
            .get(&to)
            .cloned()
            .ok_or_else(|| format!("{from} -> {to}: node down"))
    }

    /// Holds back node `id`'s answers to AppendEntries (or lets them go): it accepts them, and
    /// names their leader, at once, but its leader hears nothing back, as from a follower whose
    /// log is slow to flush. A heartbeat's answer held past the heartbeat interval is lost (its
    /// RPC times out), a replication's is delivered when let go.
    pub fn hold_answers(&self, id: NodeId, on: bool) {
        let mut s = self.state.lock().unwrap();
        if on {
            s.holding.insert(id);
        } else {
            s.holding.remove(&id);
        }
    }

    fn holds(&self, id: NodeId) -> bool {
        self.state.lock().unwrap().holding.contains(&id)
    }

    /// Cuts `id` off from every other node (or reconnects it).
    pub fn isolate(&self, id: NodeId, on: bool) {
        let mut s = self.state.lock().unwrap();
        if on {
            s.isolated.insert(id);
        } else {
            s.isolated.remove(&id);
        }
    }
}

pub struct Net {
    from: NodeId,
    router: Router,
}

impl RaftNetworkFactory<TypeConfig> for Net {
    type Network = Client;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Client {
        Client {
            from: self.from,
            to: target,
            router: self.router.clone(),
        }
    }
}

pub struct Client {
    from: NodeId,
    to: NodeId,
    router: Router,
}

fn unreachable(e: String) -> RPCError<TypeConfig> {
    RPCError::Unreachable(Unreachable::from_string(e))
}

impl RaftNetworkV2<TypeConfig> for Client {
    type SnapshotData = SnapshotDir;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let node = self
            .router
            .target(self.from, self.to)
            .map_err(unreachable)?;
        // Through the node, as the HTTP transport does: it notes the leader it heard from.
        let answer = node.append_entries(rpc).await;
        while self.router.holds(self.to) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        answer.map_err(|e| unreachable(e.to_string()))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let node = self
            .router
            .target(self.from, self.to)
            .map_err(unreachable)?;
        node.raft()
            .vote(rpc)
            .await
            .map_err(|e| unreachable(e.to_string()))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: Snapshot,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let node = self
            .router
            .target(self.from, self.to)
            .map_err(|e| StreamingError::Unreachable(Unreachable::from_string(e)))?;
        let frames = transfer::frames(snapshot.snapshot, vote, snapshot.meta);
        node.receive_snapshot(frames)
            .await
            .map_err(|e| StreamingError::Network(NetworkError::from_string(e)))
    }
}

/// Raft settings for tests: fast heartbeats and elections, snapshots only when asked.
pub fn test_config() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        snapshot_policy: openraft::SnapshotPolicy::Never,
        max_in_snapshot_log_to_keep: 0,
        ..podstore_raft::default_config()
    }
}

/// An in-process cluster in one temporary directory (or one per node: [`Cluster::with_config_in`]).
pub struct Cluster {
    pub router: Router,
    pub root: tempfile::TempDir,
    /// With [`Cluster::with_config_in`]: node `id`'s directory is in the `id`-th (cycling).
    pub node_roots: Vec<tempfile::TempDir>,
    /// The Raft settings of every node ([`test_config`] unless [`Cluster::with_config`]).
    pub config: Config,
}

impl Cluster {
    pub fn new() -> Cluster {
        Cluster::with_config(test_config())
    }

    /// A cluster whose nodes run with `config` (the benches: elections slower than a loaded
    /// machine's pauses).
    pub fn with_config(config: Config) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        Cluster {
            router: Router::default(),
            root: tempfile::tempdir().unwrap(),
            node_roots: Vec::new(),
            config,
        }
    }

    /// A cluster whose nodes' directories are spread over `roots` (node `id` in the `id`-th,
    /// cycling): the benches' nodes on disks of their own. Empty `roots`:
    /// [`Cluster::with_config`].
    pub fn with_config_in(config: Config, roots: Vec<tempfile::TempDir>) -> Cluster {
        Cluster {
            node_roots: roots,
            ..Cluster::with_config(config)
        }
    }

    pub fn dir(&self, id: NodeId) -> PathBuf {
        let root = match self.node_roots.len() {
            0 => self.root.path(),
            n => self.node_roots[(id as usize).saturating_sub(1) % n].path(),
        };
        root.join(format!("node-{id}"))
    }

    /// Starts node `id` from its directory (created if new).
    pub async fn start(&self, id: NodeId) -> Node {
        let node = open_retrying(id, &self.dir(id), &self.router, &self.config).await;
        self.router
            .state
            .lock()
            .unwrap()
            .nodes
            .insert(id, node.clone());
        node
    }

    /// Stops node `id` (its Raft shut down, its stores closed): what a crash does to its
    /// peers; its directory stays.
    pub async fn stop(&self, id: NodeId) {
        let node = self.router.state.lock().unwrap().nodes.remove(&id);
        if let Some(node) = node {
            node.shutdown().await.unwrap();
        }
    }

    pub fn node(&self, id: NodeId) -> Node {
        self.router.state.lock().unwrap().nodes[&id].clone()
    }

    /// Starts nodes `ids` and makes them a cluster; returns once one is leader.
    pub async fn start_cluster(&self, ids: &[NodeId]) -> NodeId {
        for &id in ids {
            self.start(id).await;
        }
        let members: BTreeMap<NodeId, String> =
            ids.iter().map(|&id| (id, format!("node-{id}"))).collect();
        self.node(ids[0]).initialize(members).await.unwrap();
        self.leader(ids).await
    }

    /// Waits for a leader among `ids` that all of `ids` agree on.
    pub async fn leader(&self, ids: &[NodeId]) -> NodeId {
        for _ in 0..200 {
            let views: Vec<Option<NodeId>> = ids
                .iter()
                .map(|&id| {
                    self.node(id)
                        .raft()
                        .metrics()
                        .borrow_watched()
                        .current_leader
                })
                .collect();
            if let Some(Some(l)) = views.first()
                && ids.contains(l)
                && views.iter().all(|v| v == &Some(*l))
                && self.node(*l).raft().is_leader()
            {
                return *l;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no leader among {ids:?}");
    }

    /// Waits until node `id` has applied at least `index`.
    pub async fn wait_applied(&self, id: NodeId, index: u64) {
        let node = self.node(id);
        node.raft()
            .wait(Some(Duration::from_secs(20)))
            .applied_index_at_least(Some(index), "catch up")
            .await
            .unwrap_or_else(|e| panic!("node {id} did not apply {index}: {e}"));
    }
}

/// Opens a node, retrying while the stores of a node just stopped are still being closed
/// (its directory lock is released when the last handle to them is dropped).
async fn open_retrying(id: NodeId, dir: &Path, router: &Router, config: &Config) -> Node {
    let mut attempt = 0;
    loop {
        let net = Net {
            from: id,
            router: router.clone(),
        };
        match Node::open(id, dir, config.clone(), net).await {
            Ok(n) => return n,
            Err(e) if attempt < 50 => {
                attempt += 1;
                if attempt == 50 {
                    panic!("open node {id}: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("open node {id}: {e}"),
        }
    }
}
