//! The ceiling without disks: the same openraft version and the same [`Request`]/[`Response`]
//! types on an in-memory log and state machine (modelled on openraft's own `mem-log` and
//! `raft-kv-memstore` examples: a map under a lock, `IOFlushed` completed at once), in an
//! in-process cluster with the same kind of router as `tests/common` (the target's Raft called
//! directly, no sockets) and the same Raft settings.
//!
//! Nothing here is durable: it is what openraft and the router cost with storage taken away.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::future::Future;
use std::io;
use std::ops::RangeBounds;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::{Stream, TryStreamExt};
use openraft::alias::{EntryOf, LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf, VoteOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::entry::RaftEntry;
use openraft::error::{RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::storage::{EntryResponder, IOFlushed, RaftLogStorage, RaftStateMachine};
use openraft::{
    BasicNode, EntryPayload, LogState, OptionalSend, RaftLogReader, RaftNetworkV2,
    RaftSnapshotBuilder,
};
use podstore_raft::{NodeId, Op, Request, Response, TypeConfig};

type Entry = EntryOf<TypeConfig>;
type LogId = LogIdOf<TypeConfig>;
type Vote = VoteOf<TypeConfig>;
type Membership = StoredMembershipOf<TypeConfig>;
type Meta = SnapshotMetaOf<TypeConfig>;
/// A snapshot of the in-memory state machine: its map, shared.
type Data = Arc<HashMap<Vec<u8>, Vec<u8>>>;

/// An openraft node on the in-memory stores.
pub type MemRaft = openraft::Raft<TypeConfig, MemSm>;

// ---- log ----

#[derive(Default)]
struct LogInner {
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
    entries: BTreeMap<u64, Entry>,
}

/// An in-memory Raft log: entries in a `BTreeMap`, every write "durable" at once.
#[derive(Clone, Default)]
pub struct MemLog {
    inner: Arc<Mutex<LogInner>>,
}

impl MemLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, LogInner> {
        self.inner.lock().unwrap()
    }
}

impl RaftLogReader<TypeConfig> for MemLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<Entry>> {
        Ok(self
            .lock()
            .entries
            .range(range)
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.lock().vote)
    }
}

impl RaftLogStorage<TypeConfig> for MemLog {
    type LogReader = MemLog;

    async fn get_log_state(&mut self) -> io::Result<LogState<TypeConfig>> {
        let l = self.lock();
        let last = l.entries.values().next_back().map(|e| e.log_id());
        Ok(LogState {
            last_purged_log_id: l.purged,
            last_log_id: last.or(l.purged),
        })
    }

    async fn get_log_reader(&mut self) -> MemLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> io::Result<()> {
        self.lock().vote = Some(*vote);
        Ok(())
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> io::Result<()> {
        self.lock().committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> io::Result<Option<LogId>> {
        Ok(self.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> io::Result<()>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        {
            let mut l = self.lock();
            for e in entries {
                l.entries.insert(e.index(), e);
            }
        }
        callback.io_completed(Ok(()));
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> io::Result<()> {
        let from = last_log_id.map_or(0, |l| l.index() + 1);
        self.lock().entries.split_off(&from);
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> io::Result<()> {
        let mut l = self.lock();
        let keep = l.entries.split_off(&(log_id.index() + 1));
        l.entries = keep;
        l.purged = Some(log_id);
        Ok(())
    }
}

// ---- state machine ----

#[derive(Default)]
struct SmInner {
    applied: Option<LogId>,
    membership: Membership,
    data: HashMap<Vec<u8>, Vec<u8>>,
}

/// An in-memory key-value state machine answering [`Request`]s as podstore-raft's does.
#[derive(Clone, Default)]
pub struct MemSm {
    inner: Arc<RwLock<SmInner>>,
    snapshot: Arc<Mutex<Option<(Meta, Data)>>>,
}

impl MemSm {
    /// The value of `key` (what this node has applied).
    pub fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.inner.read().unwrap().data.get(key).cloned()
    }
}

fn apply_one(data: &mut HashMap<Vec<u8>, Vec<u8>>, req: Request) -> Response {
    match req {
        Request::Put { key, value } => {
            data.insert(key, value);
            Response::Done
        }
        Request::Delete { key } => Response::Existed(data.remove(&key).is_some()),
        Request::PutIfAbsent { key, value } => {
            let absent = !data.contains_key(&key);
            if absent {
                data.insert(key, value);
            }
            Response::Inserted(absent)
        }
        Request::Batch(ops) => {
            for op in ops {
                match op {
                    Op::Put { key, value } => {
                        data.insert(key, value);
                    }
                    Op::Delete { key } => {
                        data.remove(&key);
                    }
                }
            }
            Response::Done
        }
        Request::Many(writes) => {
            Response::Many(writes.iter().map(|w| apply_one(data, w.clone())).collect())
        }
        // The benches compare puts and gets; this store keeps no versions to compare, nor
        // request ids, nor streamed uploads.
        Request::PutIf { .. }
        | Request::DeleteIf { .. }
        | Request::Once { .. }
        | Request::Chunk { .. }
        | Request::Commit { .. }
        | Request::Abort { .. } => Response::Rejected(
            "conditional writes, request ids, streamed values: not in the in-memory comparison"
                .into(),
        ),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for MemSm {
    type SnapshotData = Data;

    async fn build_snapshot(&mut self) -> io::Result<SnapshotOf<TypeConfig, Data>> {
        let (meta, data) = {
            let s = self.inner.read().unwrap();
            let meta = Meta {
                last_log_id: s.applied,
                last_membership: s.membership.clone(),
            };
            (meta, Arc::new(s.data.clone()))
        };
        *self.snapshot.lock().unwrap() = Some((meta.clone(), data.clone()));
        Ok(SnapshotOf::<TypeConfig, Data> {
            meta,
            snapshot: data,
        })
    }
}

impl RaftStateMachine<TypeConfig> for MemSm {
    type SnapshotData = Data;
    type SnapshotBuilder = MemSm;

    async fn applied_state(&mut self) -> io::Result<(Option<LogId>, Membership)> {
        let s = self.inner.read().unwrap();
        Ok((s.applied, s.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> io::Result<()>
    where
        Strm: Stream<Item = io::Result<EntryResponder<TypeConfig>>> + Unpin + OptionalSend,
    {
        while let Some((entry, responder)) = entries.try_next().await? {
            let response = {
                let mut s = self.inner.write().unwrap();
                let log_id = entry.log_id();
                s.applied = Some(log_id);
                match entry.payload {
                    EntryPayload::Blank => Response::Done,
                    EntryPayload::Membership(m) => {
                        s.membership = Membership::new(Some(log_id), m);
                        Response::Done
                    }
                    EntryPayload::Normal(req) => apply_one(&mut s.data, req),
                }
            };
            if let Some(r) = responder {
                r.send(response);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> MemSm {
        self.clone()
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Data) -> io::Result<()> {
        {
            let mut s = self.inner.write().unwrap();
            s.applied = meta.last_log_id;
            s.membership = meta.last_membership.clone();
            s.data = (*snapshot).clone();
        }
        *self.snapshot.lock().unwrap() = Some((meta.clone(), snapshot));
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<SnapshotOf<TypeConfig, Data>>> {
        Ok(self
            .snapshot
            .lock()
            .unwrap()
            .clone()
            .map(|(meta, snapshot)| SnapshotOf::<TypeConfig, Data> { meta, snapshot }))
    }
}

// ---- the in-process cluster ----

/// A node of the in-memory cluster.
#[derive(Clone)]
pub struct MemNode {
    pub raft: MemRaft,
    pub sm: MemSm,
}

/// The switchboard: node id to node.
#[derive(Clone, Default)]
pub struct MemRouter {
    nodes: Arc<Mutex<HashMap<NodeId, MemNode>>>,
}

impl MemRouter {
    fn target(&self, to: NodeId) -> Result<MemRaft, Unreachable<TypeConfig>> {
        self.nodes
            .lock()
            .unwrap()
            .get(&to)
            .map(|n| n.raft.clone())
            .ok_or_else(|| Unreachable::from_string(format!("node {to} down")))
    }
}

pub struct MemNet {
    router: MemRouter,
}

impl RaftNetworkFactory<TypeConfig> for MemNet {
    type Network = MemClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> MemClient {
        MemClient {
            to: target,
            router: self.router.clone(),
        }
    }
}

pub struct MemClient {
    to: NodeId,
    router: MemRouter,
}

impl RaftNetworkV2<TypeConfig> for MemClient {
    type SnapshotData = Data;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        let raft = self.router.target(self.to)?;
        raft.append_entries(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::from_string(e.to_string())))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        let raft = self.router.target(self.to)?;
        raft.vote(rpc)
            .await
            .map_err(|e| RPCError::Unreachable(Unreachable::from_string(e.to_string())))
    }

    async fn full_snapshot(
        &mut self,
        vote: Vote,
        snapshot: SnapshotOf<TypeConfig, Data>,
        _cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let raft = self.router.target(self.to)?;
        raft.install_full_snapshot(vote, snapshot)
            .await
            .map_err(|e| StreamingError::Unreachable(Unreachable::from_string(e.to_string())))
    }
}

/// Three in-memory nodes, one of them leader.
pub struct MemCluster {
    router: MemRouter,
    pub leader: MemNode,
}

impl MemCluster {
    /// Starts nodes 1, 2 and 3 with `config` and waits for a leader they all agree on.
    pub async fn start(config: openraft::Config) -> MemCluster {
        let router = MemRouter::default();
        let config = Arc::new(config.validate().unwrap());
        let ids = [1u64, 2, 3];
        for id in ids {
            let sm = MemSm::default();
            let net = MemNet {
                router: router.clone(),
            };
            let raft = MemRaft::new(id, config.clone(), net, MemLog::default(), sm.clone())
                .await
                .unwrap();
            router
                .nodes
                .lock()
                .unwrap()
                .insert(id, MemNode { raft, sm });
        }
        let node = |id| router.nodes.lock().unwrap()[&id].clone();
        let members: BTreeMap<NodeId, BasicNode> = ids
            .iter()
            .map(|&id| (id, BasicNode::new(format!("mem-{id}"))))
            .collect();
        node(1).raft.initialize(members).await.unwrap();
        for _ in 0..200 {
            let views: Vec<_> = ids
                .iter()
                .map(|&id| node(id).raft.metrics().borrow_watched().current_leader)
                .collect();
            if let Some(Some(l)) = views.first()
                && views.iter().all(|v| v == &Some(*l))
                && node(*l).raft.is_leader()
            {
                let leader = node(*l);
                return MemCluster { router, leader };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("no leader in the in-memory cluster");
    }

    pub async fn stop(self) {
        let nodes: Vec<MemNode> = self
            .router
            .nodes
            .lock()
            .unwrap()
            .drain()
            .map(|(_, n)| n)
            .collect();
        for n in nodes {
            n.raft.shutdown().await.unwrap();
        }
    }
}
