//! An HTTP transport: the Raft RPCs between nodes (postcard bodies; snapshots as a stream of
//! length-prefixed [`crate::transfer`] frames) and a small client API.
//!
//! Client API (keys are the URL path segment, values raw bodies):
//!
//! | request | what |
//! |---|---|
//! | `PUT /kv/{key}` | put (replicated); `200` once acknowledged |
//! | `GET /kv/{key}[?linearizable=1][&start=S][&end=E]` | get, or bytes `S..E`; `404` if absent |
//! | `DELETE /kv/{key}` | delete; answers `true` or `false` (existed) |
//! | `POST /cluster/init` | JSON `{"1": "127.0.0.1:21001", ...}`: start a cluster of these |
//! | `POST /cluster/learner` | JSON `{"id": 4, "addr": "..."}`: add a learner, wait for it |
//! | `POST /cluster/voters` | JSON `[1, 2, 3]`: make these the voters |
//! | `GET /cluster/status` | JSON: id, leader, term, last applied, last log, purged and snapshot indexes, voters |
//!
//! A write or a linearizable read sent to a follower answers `421 Misdirected Request` with the
//! leader's address in the `x-leader` header (when known): clients resend it there.
//!
//! Every Raft RPC names the node it is meant for in the [`TARGET_HEADER`] header. A node refuses
//! an RPC meant for another (`421`), or one that names none (`400`), before Raft sees it: a
//! membership that gives two nodes one address (a mistyped address, a port reused by another
//! node) would otherwise feed a node its own leader's messages, which Raft's engine treats as
//! a broken invariant and panics on. The sender takes the refusal as "unreachable".

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RaftNetworkV2};
use serde::{Deserialize, Serialize};

use crate::transfer::{Deframer, framed, frames};
use crate::{Node, NodeError, NodeId, SnapshotDir, TypeConfig, decode, encode};

/// The header of a Raft RPC that names the node it is meant for (its id, in decimal).
pub const TARGET_HEADER: &str = "x-podstore-raft-target";

// ---- server ----

/// The refusal of an RPC that is not meant for `node` (see [`TARGET_HEADER`]), if it is not.
fn misdirected(node: &Node, headers: &HeaderMap) -> Option<Response> {
    let named = headers
        .get(TARGET_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<NodeId>().ok());
    match named {
        Some(id) if id == node.id() => None,
        Some(id) => Some(
            (
                StatusCode::MISDIRECTED_REQUEST,
                format!("this is node {}, not node {id}", node.id()),
            )
                .into_response(),
        ),
        None => Some(
            (
                StatusCode::BAD_REQUEST,
                format!("a Raft RPC must name its target node in {TARGET_HEADER}"),
            )
                .into_response(),
        ),
    }
}

/// The HTTP routes of `node`: Raft RPCs under `/raft`, the client API under `/kv` and
/// `/cluster`.
pub fn router(node: Node) -> axum::Router {
    axum::Router::new()
        .route("/raft/append", post(raft_append))
        .route("/raft/vote", post(raft_vote))
        .route("/raft/snapshot", post(raft_snapshot))
        .route("/kv/{key}", get(kv_get).put(kv_put).delete(kv_delete))
        .route("/cluster/init", post(cluster_init))
        .route("/cluster/learner", post(cluster_learner))
        .route("/cluster/voters", post(cluster_voters))
        .route("/cluster/status", get(cluster_status))
        // axum refuses bodies over 2 MB by default: an AppendEntries of large values, or a put
        // of one, would be refused for ever. Values are bounded by podstore's own limit.
        .layer(DefaultBodyLimit::disable())
        .with_state(node)
}

fn postcard_reply<T: Serialize>(value: &T) -> Response {
    match encode(value) {
        Ok(bytes) => bytes.into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn raft_append(State(node): State<Node>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = misdirected(&node, &headers) {
        return refused;
    }
    let rpc: AppendEntriesRequest<TypeConfig> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let r = node
        .raft()
        .append_entries(rpc)
        .await
        .map_err(|e| e.to_string());
    postcard_reply(&r)
}

async fn raft_vote(State(node): State<Node>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(refused) = misdirected(&node, &headers) {
        return refused;
    }
    let rpc: VoteRequest<TypeConfig> = match decode(&body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let r = node.raft().vote(rpc).await.map_err(|e| e.to_string());
    postcard_reply(&r)
}

async fn raft_snapshot(State(node): State<Node>, headers: HeaderMap, body: Body) -> Response {
    if let Some(refused) = misdirected(&node, &headers) {
        return refused;
    }
    // Bytes to frames, frames to the receiver: a chunk at a time, whatever the size.
    let frames = body_frames(body.into_data_stream());
    let r = node
        .receive_snapshot(Box::pin(frames))
        .await
        .map_err(|e| e.to_string());
    postcard_reply(&r)
}

/// The frames of a body, read as they arrive.
fn body_frames(
    body: impl futures::Stream<Item = Result<Bytes, axum::Error>> + Unpin,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> {
    let state = (body, Deframer::default(), VecDeque::new(), false);
    futures::stream::unfold(
        state,
        |(mut body, mut deframer, mut ready, mut ended)| async move {
            loop {
                if let Some(f) = ready.pop_front() {
                    return Some((Ok(f), (body, deframer, ready, ended)));
                }
                if ended {
                    return None;
                }
                let err = match body.next().await {
                    Some(Ok(bytes)) => match deframer.push(&bytes) {
                        Ok(frames) => {
                            ready.extend(frames);
                            continue;
                        }
                        Err(e) => e,
                    },
                    Some(Err(e)) => std::io::Error::other(e),
                    None if deframer.is_empty() => return None,
                    None => std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        "snapshot body ends inside a frame",
                    ),
                };
                ended = true;
                return Some((Err(err), (body, deframer, ready, ended)));
            }
        },
    )
}

fn node_error(e: NodeError) -> Response {
    match e {
        NodeError::NotLeader { addr, leader } => {
            let mut headers = HeaderMap::new();
            if let Some(v) = addr.and_then(|a| HeaderValue::from_str(&a).ok()) {
                headers.insert("x-leader", v);
            }
            (
                StatusCode::MISDIRECTED_REQUEST,
                headers,
                format!("not the leader (leader: {leader:?})"),
            )
                .into_response()
        }
        NodeError::Unknown(e) => (StatusCode::SERVICE_UNAVAILABLE, e).into_response(),
        other => (StatusCode::INTERNAL_SERVER_ERROR, other.to_string()).into_response(),
    }
}

async fn kv_put(State(node): State<Node>, Path(key): Path<String>, body: Bytes) -> Response {
    match node.put(key.into_bytes(), body.to_vec()).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => node_error(e),
    }
}

async fn kv_delete(State(node): State<Node>, Path(key): Path<String>) -> Response {
    match node.delete(key.into_bytes()).await {
        Ok(existed) => existed.to_string().into_response(),
        Err(e) => node_error(e),
    }
}

/// Query of `GET /kv/{key}`.
#[derive(Deserialize)]
struct GetQuery {
    linearizable: Option<u8>,
    start: Option<u64>,
    end: Option<u64>,
}

async fn kv_get(
    State(node): State<Node>,
    Path(key): Path<String>,
    Query(q): Query<GetQuery>,
) -> Response {
    if q.linearizable.unwrap_or(0) != 0
        && let Err(e) = node.linearize().await
    {
        return node_error(e);
    }
    let key = key.into_bytes();
    let value = match (q.start, q.end) {
        (None, None) => node.get(key).await,
        (start, end) => node.get_range(key, start.unwrap_or(0), end).await,
    };
    match value {
        Ok(Some(v)) => v.into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => node_error(e),
    }
}

async fn cluster_init(
    State(node): State<Node>,
    Json(members): Json<BTreeMap<NodeId, String>>,
) -> Response {
    match node.initialize(members).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => node_error(e),
    }
}

/// Body of `POST /cluster/learner`.
#[derive(Deserialize)]
struct Learner {
    id: NodeId,
    addr: String,
}

async fn cluster_learner(State(node): State<Node>, Json(l): Json<Learner>) -> Response {
    match node.add_learner(l.id, l.addr).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => node_error(e),
    }
}

async fn cluster_voters(
    State(node): State<Node>,
    Json(voters): Json<BTreeSet<NodeId>>,
) -> Response {
    match node.change_membership(voters).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => node_error(e),
    }
}

/// What `GET /cluster/status` answers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// Its current term.
    pub term: u64,
    /// The last log index it has applied.
    pub last_applied: Option<u64>,
    /// The last index in its log.
    pub last_log: Option<u64>,
    /// The last index its log has purged (the entries up to it are in a snapshot only).
    pub purged: Option<u64>,
    /// The last index of its newest snapshot.
    pub snapshot: Option<u64>,
    /// The voters of its membership.
    pub voters: Vec<NodeId>,
}

async fn cluster_status(State(node): State<Node>) -> Response {
    let status = {
        let m = node.raft().metrics().borrow_watched().clone();
        Status {
            id: node.id(),
            leader: m.current_leader,
            term: m.current_term,
            last_applied: m.last_applied.map(|l| l.index()),
            last_log: m.last_log_index,
            purged: m.purged.map(|l| l.index()),
            snapshot: m.snapshot.map(|l| l.index()),
            voters: m.membership_config.membership().voter_ids().collect(),
        }
    };
    Json(status).into_response()
}

// ---- client: the network openraft replicates through ----

/// openraft's network over HTTP: one [`HttpPeer`] per target node, at the address in its
/// membership entry.
#[derive(Clone, Debug, Default)]
pub struct HttpNetwork {
    client: reqwest::Client,
}

impl HttpNetwork {
    /// A network with its own connection pool.
    pub fn new() -> HttpNetwork {
        HttpNetwork::default()
    }
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> HttpPeer {
        HttpPeer {
            target,
            base: format!("http://{}", node.addr),
            client: self.client.clone(),
        }
    }
}

/// The connection to one peer.
#[derive(Debug)]
pub struct HttpPeer {
    target: NodeId,
    base: String,
    client: reqwest::Client,
}

fn rpc_error(e: impl std::fmt::Display, connect: bool) -> RPCError<TypeConfig> {
    if connect {
        RPCError::Unreachable(Unreachable::from_string(e))
    } else {
        RPCError::Network(NetworkError::from_string(e))
    }
}

impl HttpPeer {
    async fn call<Req: Serialize, Resp: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>> {
        let body = encode(req).map_err(|e| rpc_error(e, false))?;
        let resp = self
            .client
            .post(format!("{}{path}", self.base))
            .header(TARGET_HEADER, self.target)
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| rpc_error(&e, e.is_connect()))?;
        if !resp.status().is_success() {
            // 421: another node answers at this address; it is not the target.
            let misdirected = resp.status() == StatusCode::MISDIRECTED_REQUEST;
            return Err(rpc_error(
                format!("{}: {}", self.target, resp.status()),
                misdirected,
            ));
        }
        let bytes = resp.bytes().await.map_err(|e| rpc_error(e, false))?;
        let r: Result<Resp, String> = decode(&bytes).map_err(|e| rpc_error(e, false))?;
        // The remote Raft refused (it is shutting down): as good as unreachable.
        r.map_err(|e| rpc_error(e, true))
    }
}

impl RaftNetworkV2<TypeConfig> for HttpPeer {
    type SnapshotData = SnapshotDir;

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call("/raft/append", &rpc, option.soft_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<VoteResponse<TypeConfig>, RPCError<TypeConfig>> {
        self.call("/raft/vote", &rpc, option.soft_ttl()).await
    }

    async fn full_snapshot(
        &mut self,
        vote: VoteOf<TypeConfig>,
        snapshot: SnapshotOf<TypeConfig, SnapshotDir>,
        cancel: impl Future<Output = ReplicationClosed> + Send + 'static,
        _option: RPCOption,
    ) -> Result<SnapshotResponse<TypeConfig>, StreamingError<TypeConfig>> {
        let stream = framed(frames(snapshot.snapshot, vote, snapshot.meta));
        let send = self
            .client
            .post(format!("{}/raft/snapshot", self.base))
            .header(TARGET_HEADER, self.target)
            .body(reqwest::Body::wrap_stream(stream))
            .send();
        let resp = tokio::select! {
            r = send => r,
            closed = cancel => return Err(StreamingError::Closed(closed)),
        };
        let net = |e: String| StreamingError::Network(NetworkError::from_string(e));
        let resp = resp.map_err(|e| {
            if e.is_connect() {
                StreamingError::Unreachable(Unreachable::from_string(&e))
            } else {
                net(e.to_string())
            }
        })?;
        if resp.status() == StatusCode::MISDIRECTED_REQUEST {
            let e = format!("{}: {}", self.target, resp.status());
            return Err(StreamingError::Unreachable(Unreachable::from_string(e)));
        }
        if !resp.status().is_success() {
            return Err(net(format!("{}: {}", self.target, resp.status())));
        }
        let bytes = resp.bytes().await.map_err(|e| net(e.to_string()))?;
        let r: Result<SnapshotResponse<TypeConfig>, String> =
            decode(&bytes).map_err(|e| net(e.to_string()))?;
        r.map_err(net)
    }
}
