//! A Raft node on podstore: its log store, its state machine and openraft, with the client API.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use futures::Stream;
use openraft::alias::{SnapshotOf, WatchReceiverOf};
use openraft::error::ForwardToLeader;
use openraft::error::{ClientWriteError, RaftError};
use openraft::network::{NetSnapshot, RaftNetworkFactory};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse};
use openraft::{BasicNode, Config, ReadPolicy};

use bytes::Bytes;

use crate::state_machine::{Listed, Read, Whole};

mod lease;
mod upload;
use crate::{
    Expect, LogStore, NodeId, Raft, Request, RequestId, Response, SnapshotDir, StateMachine,
    TypeConfig,
};

/// Why a client request to a [`Node`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    /// This node is not the leader: send the request to `leader` (when known), at `addr`.
    NotLeader {
        /// The leader's id, if this node knows it.
        leader: Option<NodeId>,
        /// The leader's address, if this node knows it.
        addr: Option<String>,
    },
    /// The entry was discarded when leadership changed: it may or may not have been applied
    /// (not acknowledged, so not promised either way).
    Unknown(String),
    /// Raft has stopped (it is shutting down, or met a fatal error).
    Raft(String),
    /// Raft refused the request in the cluster's present state (a membership change while
    /// another is in progress, initializing a cluster that already is one): nothing was done.
    Refused(String),
    /// The state machine refused the request (a key or value podstore rejects): nothing of it
    /// was applied.
    Rejected(String),
    /// A conditional write's condition did not hold: nothing was written. `current` is the
    /// key's version (`None`: it has no value).
    ConditionFailed {
        /// The key's version when the request was applied.
        current: Option<u64>,
    },
    /// A write under a request id ([`Request::Once`]) refused, nothing applied: the id was
    /// used for another request, or is older than the state machine remembers.
    RequestIdRefused(String),
    /// The local store failed.
    Io(io::Error),
    /// A streamed value ([`Node::put_stream`]) passed `max` bytes: nothing was written.
    TooLarge {
        /// The limit.
        max: u64,
    },
    /// The body of a streamed value failed (the client went away): nothing was written.
    Body(String),
    /// A streamed value was interrupted (this node lost its leadership half-way): nothing was
    /// written; sending it again (to the leader) may succeed.
    Interrupted(String),
}

impl std::fmt::Display for NodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeError::NotLeader { leader, addr } => {
                write!(f, "not the leader (leader: {leader:?} at {addr:?})")
            }
            NodeError::Unknown(e) => write!(f, "outcome unknown: {e}"),
            NodeError::Raft(e) => write!(f, "raft: {e}"),
            NodeError::Refused(e) => write!(f, "refused: {e}"),
            NodeError::Rejected(e) => write!(f, "rejected: {e}"),
            NodeError::ConditionFailed { current: Some(v) } => {
                write!(f, "condition failed: the value has version {v}")
            }
            NodeError::ConditionFailed { current: None } => {
                write!(f, "condition failed: the key has no value")
            }
            NodeError::RequestIdRefused(e) => write!(f, "request id refused: {e}"),
            NodeError::Io(e) => write!(f, "i/o: {e}"),
            NodeError::TooLarge { max } => write!(f, "value larger than {max} bytes"),
            NodeError::Body(e) => write!(f, "the value's body failed: {e}"),
            NodeError::Interrupted(e) => write!(f, "upload interrupted: {e}"),
        }
    }
}

impl std::error::Error for NodeError {}

impl From<io::Error> for NodeError {
    fn from(e: io::Error) -> NodeError {
        NodeError::Io(e)
    }
}

fn write_error(node: &Node, e: RaftError<TypeConfig, ClientWriteError<TypeConfig>>) -> NodeError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => node.not_leader(&f),
        RaftError::APIError(ClientWriteError::LogEntryDiscarded(f)) => {
            NodeError::Unknown(f.to_string())
        }
        RaftError::APIError(other) => NodeError::Refused(other.to_string()),
        RaftError::Fatal(f) => NodeError::Raft(f.to_string()),
    }
}

/// Logs (at info) what an operator follows in a node's life: elections and leader changes,
/// membership changes, snapshots built or installed. Ends when Raft does.
async fn log_changes(
    id: NodeId,
    mut metrics: WatchReceiverOf<TypeConfig, openraft::RaftMetrics<TypeConfig>>,
) {
    use openraft::async_runtime::watch::WatchReceiver;
    let (mut term, mut leader, mut membership, mut snapshot) = (0, None, None, None);
    loop {
        {
            let m = metrics.borrow_watched();
            if m.current_term != term || m.current_leader != leader {
                if m.current_term != term && m.current_leader.is_none() {
                    tracing::info!(node = id, term = m.current_term, "election");
                } else if m.current_leader != leader {
                    tracing::info!(node = id, term = m.current_term, leader = ?m.current_leader, "leader changed");
                }
                (term, leader) = (m.current_term, m.current_leader);
            }
            let now = m.membership_config.log_id().map(|l| l.index());
            if now != membership {
                let voters: Vec<NodeId> = m.membership_config.membership().voter_ids().collect();
                let learners: Vec<NodeId> =
                    m.membership_config.membership().learner_ids().collect();
                tracing::info!(node = id, ?voters, ?learners, "membership");
                membership = now;
            }
            let snap = m.snapshot.map(|l| l.index());
            if snap != snapshot {
                tracing::info!(node = id, last_index = ?snap, "snapshot (built or installed)");
                snapshot = snap;
            }
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}

/// The error for an answer a request should not get.
fn unexpected(response: Response) -> NodeError {
    match response {
        Response::Rejected(e) => NodeError::Rejected(e),
        Response::ConditionFailed { current } => NodeError::ConditionFailed { current },
        Response::RequestIdRefused(e) => NodeError::RequestIdRefused(e),
        other => NodeError::Raft(format!("unexpected answer {other:?}")),
    }
}

/// A Raft node: a [`LogStore`] in `<dir>/log`, a [`StateMachine`] in `<dir>/sm` with its
/// snapshots in `<dir>/snapshots`, and openraft over them.
#[derive(Clone)]
pub struct Node {
    id: NodeId,
    dir: PathBuf,
    raft: Raft,
    sm: StateMachine,
    log: LogStore,
    /// The leader this node has last accepted an AppendEntries from, and its term (see
    /// [`Node::known_leader`]).
    heard: Arc<Mutex<Option<(u64, NodeId)>>>,
    /// The number of this node's next streamed upload ([`crate::UploadId`]).
    uploads: Arc<AtomicU64>,
}

/// What a write applied ([`Node::put_with`], [`Node::delete_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The log index of the write: the version of what it wrote.
    pub index: u64,
    /// Whether this is the answer of an earlier request under the same request id, remembered
    /// by the state machine (nothing was applied again).
    pub replayed: bool,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .finish()
    }
}

/// The Raft settings this crate starts from: heartbeats every 250 ms, elections after 1 to 2 s
/// of silence, a snapshot every 10 000 entries, 1 000 entries kept behind it (a lagging
/// follower within them catches up from the log, not by a snapshot), at most 64 entries per
/// AppendEntries.
///
/// openraft gives an AppendEntries RPC the heartbeat interval to complete (`RPCOption`): an
/// RPC that carries large values must fit in it. With values of many MiB, raise
/// `heartbeat_interval` (and the election timeouts with it) or lower `max_payload_entries`.
pub fn default_config() -> Config {
    Config {
        cluster_name: "podstore-raft".into(),
        heartbeat_interval: 250,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        max_payload_entries: 64,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(10_000),
        max_in_snapshot_log_to_keep: 1_000,
        ..Default::default()
    }
}

impl Node {
    /// Opens (or creates) node `id` in `dir` and starts Raft with `config` and `network`.
    pub async fn open<N>(
        id: NodeId,
        dir: impl AsRef<Path>,
        config: Config,
        network: N,
    ) -> io::Result<Node>
    where
        N: RaftNetworkFactory<TypeConfig>,
        N::Network: NetSnapshot<TypeConfig, SnapshotData = SnapshotDir>,
    {
        let dir = dir.as_ref().to_path_buf();
        let d = dir.clone();
        let (log, sm) = tokio::task::spawn_blocking(move || -> io::Result<_> {
            crate::fsutil::create_dirs(&d)?;
            let log = LogStore::open(d.join("log"))?;
            let sm = StateMachine::open(d.join("sm"), d.join("snapshots"))?;
            Ok((log, sm))
        })
        .await
        .map_err(io::Error::other)??;
        let config = Arc::new(config.validate().map_err(io::Error::other)?);
        let raft = Raft::new(id, config, network, log.clone(), sm.clone())
            .await
            .map_err(io::Error::other)?;
        tokio::spawn(log_changes(id, raft.metrics()));
        Ok(Node {
            id,
            dir,
            raft,
            sm,
            log,
            heard: Arc::new(Mutex::new(None)),
            uploads: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Hands an AppendEntries RPC to Raft; notes its sender as a leader this node has heard
    /// from in its term when Raft accepts it (see [`Node::known_leader`]). Transports call this,
    /// not `raft().append_entries`.
    pub async fn append_entries(
        &self,
        rpc: AppendEntriesRequest<TypeConfig>,
    ) -> Result<AppendEntriesResponse<TypeConfig>, openraft::error::RaftError<TypeConfig>> {
        use openraft::vote::RaftLeaderId;
        let sender = {
            let leader = rpc.vote.leader_id();
            (leader.term(), *leader.node_id())
        };
        let r = self.raft.append_entries(rpc).await;
        if matches!(&r, Ok(a) if !matches!(a, AppendEntriesResponse::HigherVote(_))) {
            *self.heard.lock().unwrap_or_else(|e| e.into_inner()) = Some(sender);
        }
        r
    }

    /// The leader this node knows, for clients and `x-leader`: itself when it leads, else the
    /// leader Raft names only if this node has accepted an AppendEntries from it in the
    /// current term. A node restarted keeps the vote of its last term, leader included, until
    /// it hears otherwise: without this, it would send clients to a leader it has not heard
    /// from since (possibly the node that was just killed).
    pub fn known_leader(&self) -> Option<NodeId> {
        use openraft::async_runtime::watch::WatchReceiver;
        let (term, leader) = {
            let m = self.raft.metrics();
            let m = m.borrow_watched();
            (m.current_term, m.current_leader)
        };
        let leader = leader?;
        let heard = *self.heard.lock().unwrap_or_else(|e| e.into_inner());
        (leader == self.id || heard == Some((term, leader))).then_some(leader)
    }

    /// [`NodeError::NotLeader`] for openraft's forward, naming its leader only if
    /// [`Node::known_leader`] does.
    fn not_leader(&self, f: &ForwardToLeader<TypeConfig>) -> NodeError {
        match f.leader_id {
            Some(l) if self.known_leader() == Some(l) => NodeError::NotLeader {
                leader: Some(l),
                addr: f.leader_node.as_ref().map(|n| n.addr.clone()),
            },
            _ => NodeError::NotLeader {
                leader: None,
                addr: None,
            },
        }
    }

    /// [`NodeError::NotLeader`] naming the leader this node knows ([`Node::known_leader`]) if
    /// it is not the leader itself; `None` if it is. Asked before a streamed value's body is
    /// read: a follower answers at once rather than after reading a first chunk of it.
    pub(crate) fn unless_leader(&self) -> Option<NodeError> {
        use openraft::async_runtime::watch::WatchReceiver;
        let leader = self.known_leader();
        if leader == Some(self.id) {
            return None;
        }
        let addr = leader.and_then(|l| {
            let m = self.raft.metrics();
            let m = m.borrow_watched();
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| n.addr.clone())
        });
        Some(NodeError::NotLeader { leader, addr })
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// This node's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The openraft handle (metrics, membership, snapshots).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The state machine (local reads).
    pub fn state_machine(&self) -> &StateMachine {
        &self.sm
    }

    /// The log store.
    pub fn log_store(&self) -> &LogStore {
        &self.log
    }

    /// Makes this node the first member of a new cluster of `members` (id to address).
    pub async fn initialize(&self, members: BTreeMap<NodeId, String>) -> Result<(), NodeError> {
        let members: BTreeMap<NodeId, BasicNode> = members
            .into_iter()
            .map(|(id, addr)| (id, BasicNode::new(addr)))
            .collect();
        self.raft.initialize(members).await.map_err(|e| match e {
            RaftError::APIError(e) => NodeError::Refused(e.to_string()),
            RaftError::Fatal(f) => NodeError::Raft(f.to_string()),
        })
    }

    /// Replicates `request` and returns what applying it answered, once a majority has it
    /// durably in its log and this node (the leader) has applied it.
    pub async fn write(&self, request: Request) -> Result<Response, NodeError> {
        Ok(self.write_indexed(request).await?.1)
    }

    /// [`Node::write`], with the index of the request's log entry: the version of every value
    /// it wrote.
    ///
    /// A [`Request::Once`] whose id the state machine remembers answers
    /// [`Response::Replayed`], with the index of the first request in it.
    pub async fn write_indexed(&self, request: Request) -> Result<(u64, Response), NodeError> {
        self.await_lease().await;
        // A leader cut off from its quorum holds the write until it hears of another leader:
        // answered "unknown" once its lease has lapsed (src/node/lease.rs).
        let r = tokio::select! {
            r = self.raft.client_write(request) => r.map_err(|e| write_error(self, e))?,
            why = self.lease_lost() => return Err(NodeError::Unknown(why)),
        };
        Ok((r.log_id.index(), r.data))
    }

    /// Replicates `writes` in one log entry ([`Request::Many`]), under request id `id` if given
    /// (the whole `Many` applied at most once: [`Request::Once`]): returns the entry's index
    /// (the version of every value they wrote) and what each write answered, in order. A
    /// request id already applied answers each write [`Response::Replayed`] with the first
    /// request's index and the write's first answer (unless that was itself a replay); a
    /// request id refused refuses every write ([`Response::RequestIdRefused`]). An error is the
    /// whole entry's (none of them was applied, or, `NodeError::Unknown`, it is not known).
    pub async fn write_many(
        &self,
        writes: Vec<Request>,
        id: Option<RequestId>,
    ) -> Result<(u64, Vec<Response>), NodeError> {
        let count = writes.len();
        let many = Request::Many(writes.into());
        let request = match id {
            Some(id) => Request::Once {
                id,
                request: Box::new(many),
            },
            None => many,
        };
        match self.write_indexed(request).await? {
            (index, Response::Many(answers)) => Ok((index, answers)),
            (
                index,
                Response::Replayed {
                    index: first,
                    response,
                },
            ) => match *response {
                Response::Many(answers) => Ok((
                    index,
                    answers
                        .into_iter()
                        .map(|a| match a {
                            a @ Response::Replayed { .. } => a,
                            a => Response::Replayed {
                                index: first,
                                response: Box::new(a),
                            },
                        })
                        .collect(),
                )),
                other => Err(unexpected(other)),
            },
            (index, refused @ Response::RequestIdRefused(_)) => Ok((index, vec![refused; count])),
            (_, other) => Err(unexpected(other)),
        }
    }

    /// Replicates `request`, under request id `id` if given ([`Request::Once`]): returns the
    /// write's log index and answer, those of the first request under `id` if it was one.
    async fn write_once(
        &self,
        request: Request,
        id: Option<RequestId>,
    ) -> Result<(Written, Response), NodeError> {
        let request = match id {
            Some(id) => Request::Once {
                id,
                request: Box::new(request),
            },
            None => request,
        };
        Ok(match self.write_indexed(request).await? {
            (_, Response::Replayed { index, response }) => (
                Written {
                    index,
                    replayed: true,
                },
                *response,
            ),
            (index, response) => (
                Written {
                    index,
                    replayed: false,
                },
                response,
            ),
        })
    }

    /// Sets `key` to `value` if `expect` holds (always, if `None`), under request id `id` if
    /// given: a request id the state machine remembers is not applied again, and answers what
    /// its first request did (see [`Request::Once`]).
    pub async fn put_with(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        expect: Option<Expect>,
        id: Option<RequestId>,
    ) -> Result<Written, NodeError> {
        let (key, value) = (key.into(), value.into());
        let request = match expect {
            None => Request::Put { key, value },
            Some(expect) => Request::PutIf { key, value, expect },
        };
        match self.write_once(request, id).await? {
            (written, Response::Done) => Ok(written),
            (_, other) => Err(unexpected(other)),
        }
    }

    /// Removes `key` if its value has version `version` (any value, if `None`), under request
    /// id `id` if given (see [`Node::put_with`]); returns whether it existed.
    pub async fn delete_with(
        &self,
        key: impl Into<Vec<u8>>,
        version: Option<u64>,
        id: Option<RequestId>,
    ) -> Result<(bool, Written), NodeError> {
        let key = key.into();
        let request = match version {
            None => Request::Delete { key },
            Some(version) => Request::DeleteIf { key, version },
        };
        match self.write_once(request, id).await? {
            (written, Response::Existed(e)) => Ok((e, written)),
            (_, other) => Err(unexpected(other)),
        }
    }

    /// Sets `key` to `value` (replicated); returns the value's version.
    pub async fn put(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
    ) -> Result<u64, NodeError> {
        Ok(self.put_with(key, value, None, None).await?.index)
    }

    /// Sets `key` to `value` only if `expect` holds for its value when the write is applied
    /// (replicated; every node decides alike); returns the value's version, or
    /// [`NodeError::ConditionFailed`].
    pub async fn put_if(
        &self,
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        expect: Expect,
    ) -> Result<u64, NodeError> {
        Ok(self.put_with(key, value, Some(expect), None).await?.index)
    }

    /// Removes `key` (replicated); returns whether it existed.
    pub async fn delete(&self, key: impl Into<Vec<u8>>) -> Result<bool, NodeError> {
        Ok(self.delete_with(key, None, None).await?.0)
    }

    /// Removes `key` only if its value has version `version` when the delete is applied
    /// (replicated); else [`NodeError::ConditionFailed`].
    pub async fn delete_if(&self, key: impl Into<Vec<u8>>, version: u64) -> Result<(), NodeError> {
        match self.delete_with(key, Some(version), None).await? {
            (true, _) => Ok(()),
            // A DeleteIf answers `Existed(true)` or a failed condition.
            (false, _) => Err(NodeError::ConditionFailed { current: None }),
        }
    }

    /// Waits until a read on this node's state machine sees every write acknowledged before the
    /// call (the leader's read index, confirmed by a quorum's heartbeat, then applied here).
    pub async fn linearize(&self) -> Result<(), NodeError> {
        self.raft
            .ensure_linearizable(ReadPolicy::ReadIndex)
            .await
            .map_err(|e| match e.forward_to_leader() {
                Some(f) => self.not_leader(f),
                None => NodeError::Raft(e.to_string()),
            })?;
        Ok(())
    }

    /// The value of `key` on this node (what it has applied: possibly stale on a follower).
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<Option<Vec<u8>>, NodeError> {
        Ok(self.get_versioned(key).await?.map(|(v, _)| v.to_vec()))
    }

    /// The value of `key` on this node and its version (the index of the log entry that wrote
    /// it, the same on every node), without a copy of a value in the read cache.
    pub async fn get_versioned(
        &self,
        key: impl Into<Vec<u8>>,
    ) -> Result<Option<(Bytes, u64)>, NodeError> {
        let (sm, key) = (self.sm.clone(), key.into());
        // A value the read cache holds is served here, without the hand-off to a blocking
        // thread (which cost more than the read itself: docs/benchmarks.md, Replication).
        if let Some(value) = sm.get_cached(&key)? {
            return Ok(Some(value));
        }
        Ok(tokio::task::spawn_blocking(move || sm.get_versioned(&key))
            .await
            .map_err(io::Error::other)??)
    }

    /// The value of `key` on this node, read whole if it is at most `max_whole` bytes, else
    /// opened to be read in pieces.
    pub(crate) async fn read_or_open(
        &self,
        key: Vec<u8>,
        max_whole: u64,
    ) -> Result<Whole, NodeError> {
        let sm = self.sm.clone();
        if let Some(value) = sm.get_cached(&key)? {
            return Ok(Whole::Read(Read::whole(Some(value))));
        }
        Ok(
            tokio::task::spawn_blocking(move || sm.read_or_open(&key, max_whole))
                .await
                .map_err(io::Error::other)??,
        )
    }

    /// The value of `key` on this node, or bytes `start..end` of it (see
    /// [`StateMachine::read`]), with its version and length.
    pub async fn read(
        &self,
        key: impl Into<Vec<u8>>,
        range: Option<(u64, Option<u64>)>,
    ) -> Result<Read, NodeError> {
        if range.is_none() {
            return Ok(Read::whole(self.get_versioned(key).await?));
        }
        let (sm, key) = (self.sm.clone(), key.into());
        Ok(tokio::task::spawn_blocking(move || sm.read(&key, range))
            .await
            .map_err(io::Error::other)??)
    }

    /// Up to `limit` keys of this node starting with `prefix`, after `after` (exclusive), with
    /// their values' lengths; and whether more follow (see [`StateMachine::list`]).
    pub async fn list(
        &self,
        prefix: Vec<u8>,
        after: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<(Vec<Listed>, bool), NodeError> {
        let sm = self.sm.clone();
        Ok(
            tokio::task::spawn_blocking(move || sm.list(&prefix, after.as_deref(), limit))
                .await
                .map_err(io::Error::other)??,
        )
    }

    /// Bytes `start..end` of the value of `key` on this node (`None`: to the end).
    pub async fn get_range(
        &self,
        key: impl Into<Vec<u8>>,
        start: u64,
        end: Option<u64>,
    ) -> Result<Option<Vec<u8>>, NodeError> {
        let (sm, key) = (self.sm.clone(), key.into());
        Ok(
            tokio::task::spawn_blocking(move || sm.get_range(&key, start, end))
                .await
                .map_err(io::Error::other)??,
        )
    }

    /// A linearizable read of `key`: on the leader only.
    pub async fn get_linearizable(
        &self,
        key: impl Into<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, NodeError> {
        self.linearize().await?;
        self.get(key).await
    }

    /// A linearizable read of bytes `start..end` of the value of `key`: on the leader only.
    pub async fn get_range_linearizable(
        &self,
        key: impl Into<Vec<u8>>,
        start: u64,
        end: Option<u64>,
    ) -> Result<Option<Vec<u8>>, NodeError> {
        self.linearize().await?;
        self.get_range(key, start, end).await
    }

    /// Adds `id` at `addr` as a learner and waits until it has caught up: until it holds the
    /// membership entry that added it, and so every entry before it (or until this node is no
    /// longer the leader, or the learner has been removed meanwhile).
    pub async fn add_learner(&self, id: NodeId, addr: impl Into<String>) -> Result<(), NodeError> {
        self.await_lease().await;
        let added = self
            .raft
            .add_learner(id, BasicNode::new(addr.into()), true)
            .await
            .map_err(|e| write_error(self, e))?
            .log_id
            .index();
        // openraft's own wait (`blocking`) ends once the learner is within
        // `replication_lag_threshold` (5 000 entries) of the leader, which a learner that holds
        // nothing yet is on a young cluster: its status then showed no matched index at all.
        self.raft
            .wait(None)
            .metrics(
                |m| match &m.replication {
                    None => true,
                    Some(r) => match r.get(&id) {
                        Some(matched) => matched.as_ref().map(|l| l.index()) >= Some(added),
                        None => m.membership_config.membership().get_node(&id).is_none(),
                    },
                },
                "the new learner to hold the entry that added it",
            )
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        Ok(())
    }

    /// Makes `voters` the voting members (learners among them are promoted; voters not in it
    /// are removed from the cluster).
    pub async fn change_membership(&self, voters: BTreeSet<NodeId>) -> Result<(), NodeError> {
        self.await_lease().await;
        self.raft
            .change_membership(voters, false)
            .await
            .map_err(|e| write_error(self, e))?;
        Ok(())
    }

    /// Receives a snapshot shipped by the leader ([`crate::transfer::frames`]) and installs it.
    pub async fn receive_snapshot(
        &self,
        frames: impl Stream<Item = io::Result<Vec<u8>>> + Unpin,
    ) -> Result<SnapshotResponse<TypeConfig>, NodeError> {
        let (vote, meta, dir) = crate::transfer::receive(self.sm.snapshots(), frames).await?;
        let snapshot = SnapshotOf::<TypeConfig, SnapshotDir> {
            meta,
            snapshot: dir,
        };
        self.raft
            .install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))
    }

    /// Stops Raft, then flushes the state machine and the log (a restart then applies nothing
    /// again). The stores close when the last handle to them is dropped.
    pub async fn shutdown(&self) -> Result<(), NodeError> {
        self.raft
            .shutdown()
            .await
            .map_err(|e| NodeError::Raft(e.to_string()))?;
        let (sm, log) = (self.sm.clone(), self.log.clone());
        tokio::task::spawn_blocking(move || -> io::Result<()> {
            sm.flush()?;
            log.flush()
        })
        .await
        .map_err(io::Error::other)??;
        tracing::info!(node = self.id, "stopped; stores flushed");
        Ok(())
    }
}
