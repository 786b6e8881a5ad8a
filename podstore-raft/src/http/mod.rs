//! An HTTP transport: the Raft RPCs between nodes (postcard bodies; snapshots as a stream of
//! length-prefixed [`crate::transfer`] frames) and the client API (src/http/api.rs).
//!
//! # The client API
//!
//! **Keys.** The path after `/kv/` is percent-decoded into the key's bytes, slashes kept:
//! `/kv/photo/42` and `/kv/photo%2F42` name the key `photo/42`, `/kv/%FF%00` the two bytes
//! `ff 00` (keys need not be UTF-8); a `+` is a `+`. A `%` not followed by two hex digits is
//! `400 bad_key`, so is an empty key or one longer than [`crate::MAX_KEY_LEN`] (4095 bytes: one
//! byte less than podstore's, which the state machine's prefix takes). HTTP clients resolve
//! `.` and `..` path segments before sending: encode them (`%2E`) to use them in a key.
//!
//! **Versions.** A value's version is the index of the log entry that wrote it, the same on
//! every node; it is the `ETag` (`"42"`, quoted) of every `PUT` and `GET` answer, and the
//! `If-Match` a conditional write names, checked when the write is applied, on every node
//! alike.
//!
//! **Errors** are JSON: `{"error": "<code>", "message": "..."}` (codes below). A write, a
//! linearizable read or a membership change sent to a follower answers `421 not_leader` with
//! the leader's address in the `x-leader` header (when known: only a leader it has heard from
//! in its current term, [`crate::Node::known_leader`]): clients resend it there.
//!
//! | request | answers |
//! |---|---|
//! | `PUT /kv/{key}` (body: the value) | `200` `{"version": 42, "etag": "\"42\"", "len": 5}` and `ETag` once replicated; `400 bad_key`; `413 too_large` (over `--max-value`, 1 GiB by default: at once when `Content-Length` says so, else as soon as the body passes it; nothing is written); `503 interrupted` (the leader lost its leadership while the value streamed in: nothing written, send it again). A value over 1 MiB is streamed in and replicated in chunks: a few MiB of memory per PUT whatever its size |
//! | `PUT` with `If-None-Match: *` | `201` (created) as above; `412 precondition_failed` if the key has a value |
//! | `PUT` with `If-Match: "42"` (or `*`) | `200` as above; `412 precondition_failed` (with the current `ETag`, if any) if the value has another version or none |
//! | `GET /kv/{key}[?linearizable=1]` | `200` the value, with `ETag` (a value over 1 MiB is streamed, 1 MiB at a time, with `Content-Length`); `404 not_found` |
//! | `GET /kv/{key}?start=S[&end=E]` | `206` bytes `S..E` (`end` exclusive, clamped to the value's end as `Store::get_range` does), with `ETag` and `Content-Range: bytes S-(E-1)/LEN`; `200` and no bytes when the range is empty (`S` at the end, or `S = E`); `416 range_not_satisfiable` with `Content-Range: bytes */LEN` when `S` is past the end or `E` before `S` |
//! | `DELETE /kv/{key}` | `204`; `404 not_found` if the key had no value |
//! | `DELETE` with `If-Match: "42"` (or `*`) | `204`; `412 precondition_failed` if the value has another version or none |
//! | `PUT` or `DELETE` with `x-podstore-request-id: <client>:<seq>` ([`REQUEST_ID_HEADER`]) | as without it the first time; a retry under the same id with the same request is not applied again and answers as the first did (its `ETag` too), with `x-podstore-replayed: true` ([`REPLAYED_HEADER`]); `409 request_id_refused` if the id was used for another request or is older than the state machine remembers ([`crate::REQUEST_ID_WINDOW`]) |
//! | `POST /writes` (body: the writes in postcard, [`WRITES_CONTENT_TYPE`]) | `200` postcard `(index, answers)`: up to [`MAX_WRITES`] puts and deletes (conditional, under request ids) in one log entry, each with its own answer (the client's coalesced writes); with [`REQUEST_ID_HEADER`], applied at most once as a whole (a retry answers each write's first outcome); `400 bad_request` (not postcard writes, none, too many, or a malformed request id); `413 too_large` over [`MAX_WRITES_BYTES`], or a value over `--max-value` (nothing written) |
//! | `GET /kv?prefix=P&limit=N&after=T[&linearizable=1]` | `200` `{"keys": [{"key": "photo/42", "len": 5}, ...], "next": T2}`: up to `N` keys (default 1000, at most 10 000) starting with `P`, in byte order, after token `T`; `next` is the token of the next page, `null` after the last; a key that is not UTF-8 is given as `"key_hex"` |
//! | `POST /cluster/init` | JSON `{"1": "127.0.0.1:21001", ...}`: start a cluster of these; `200` this node's status; `409 conflict` if it already is one |
//! | `POST /cluster/learner` | JSON `{"id": 4, "addr": "..."}`: add a learner and wait until it has caught up; `200` status |
//! | `POST /cluster/voters` | JSON `[1, 2, 3]`: make these the voters; `200` status; `409 conflict` while another change runs |
//! | `GET /cluster/status` | `200` JSON: id, leader (itself, or one it has heard from in its term), term, last applied, last log, purged and snapshot indexes, voters, learners; on the leader `replication`: each other member's `matched` index and `lag` (entries behind the leader's last) |
//! | `GET /metrics` | `200` the node's figures in the Prometheus text format (OpenMetrics): its stores' (`podstore_store_live_keys`, `_live_bytes`, `_disk_bytes`, `_cache_hits_total`, `_cache_misses_total`, `_cache_bytes`, `_user_bytes_written_total`, by `store="sm"` or `"log"`), Raft's (`podstore_raft_term`, `_is_leader`, `_last_log_index`, `_committed_index`, `_applied_index`, `_snapshot_index`, `_purged_index`; on the leader `_replication_matched_index` and `_replication_lag` by `follower`), requests (`podstore_raft_http_requests_total` and the histogram `podstore_raft_http_request_duration_seconds` by `route`, `method`, `status`) |
//!
//! The cluster routes read their body as JSON whatever its `Content-Type` (a bare `curl -d`
//! says `application/x-www-form-urlencoded`). Every route may also answer `400 bad_request`
//! (a malformed query, header or JSON body), `421 not_leader`, `503 outcome_unknown` (the
//! leader changed before the write was acknowledged, or the leader has heard from no quorum
//! for a lease, 2 s by default, since it took it: it may or may not have been applied),
//! `503 unavailable` (Raft is shutting down) and `500 internal` (the store failed: the node's
//! log has the error). A path no route takes answers `404 no_route`, a method a route does not
//! take `405 method_not_allowed`.
//!
//! # Raft RPCs
//!
//! Every Raft RPC names the node it is meant for in the [`TARGET_HEADER`] header. A node refuses
//! an RPC meant for another (`421`), or one that names none (`400`), before Raft sees it: a
//! membership that gives two nodes one address (a mistyped address, a port reused by another
//! node) would otherwise feed a node its own leader's messages, which Raft's engine treats as
//! a broken invariant and panics on. The sender takes the refusal as "unreachable". The node
//! binary's RPCs also name their sender, in [`SOURCE_HEADER`] (for what stands between nodes:
//! the partition test's proxy cuts links by it).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::{Stream, StreamExt};
use openraft::OptionalSend;
use openraft::alias::{SnapshotOf, VoteOf};
use openraft::async_runtime::watch::WatchReceiver;
use openraft::base::{BoxFuture, BoxStream};
use openraft::error::{NetworkError, RPCError, ReplicationClosed, StreamingError, Unreachable};
use openraft::network::{RPCOption, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, StreamAppendResult, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, RaftNetworkV2};
use serde::{Deserialize, Serialize};

use crate::transfer::{Deframer, framed, frames};
use crate::{Node, NodeId, SnapshotDir, TypeConfig, decode, encode};

mod api;
mod metrics;
mod query;
mod replication;
mod writes;

pub use replication::COMMIT_LINGER;

pub use api::{
    DEFAULT_LIST_LIMIT, DEFAULT_MAX_VALUE, MAX_LIST_LIMIT, REPLAYED_HEADER, REQUEST_ID_HEADER,
};
pub use writes::{MAX_WRITES, MAX_WRITES_BYTES, WRITES_CONTENT_TYPE};

/// The header of a Raft RPC that names the node it is meant for (its id, in decimal).
pub const TARGET_HEADER: &str = "x-podstore-raft-target";

/// The header in which a Raft RPC names the node that sends it, when its [`HttpNetwork`] was
/// given one ([`HttpNetwork::source`]; the node binary's is). Nodes do not read it: it is for
/// what stands between them (a proxy, a packet capture; the partition test's proxy cuts
/// links by it).
pub const SOURCE_HEADER: &str = "x-podstore-raft-source";

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
/// `/cluster`, values up to [`DEFAULT_MAX_VALUE`] bytes.
pub fn router(node: Node) -> axum::Router {
    router_with_max_value(node, DEFAULT_MAX_VALUE)
}

/// [`router`], taking values (request bodies of `PUT /kv/...`) up to `max_value` bytes
/// (`413` beyond).
pub fn router_with_max_value(node: Node, max_value: usize) -> axum::Router {
    // axum refuses bodies over 2 MB by default: an AppendEntries of large values would be
    // refused for ever. What they carry was bounded when the client's request was taken.
    let unlimited = DefaultBodyLimit::disable();
    let metrics = std::sync::Arc::new(metrics::Metrics::new(node.clone()));
    let scrape = metrics.clone();
    axum::Router::new()
        .route("/raft/append", post(raft_append).layer(unlimited))
        .route("/raft/vote", post(raft_vote).layer(unlimited))
        .route("/raft/snapshot", post(raft_snapshot).layer(unlimited))
        .merge(api::routes(max_value))
        .route(
            "/writes",
            // The handler enforces its own limit (a JSON `413`, not axum's plain text).
            post(move |node, headers, body| writes::writes(node, headers, body, max_value))
                .layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/metrics",
            axum::routing::get(move || metrics::serve(scrape.clone())),
        )
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::no_method)
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::track,
        ))
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
    let r = node.append_entries(rpc).await.map_err(|e| e.to_string());
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

/// What `GET /cluster/status` answers.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// The leader it knows of: itself, or a leader it has heard from in its current term.
    pub leader: Option<NodeId>,
    /// Its current term.
    pub term: u64,
    /// The last log index it has applied: the later of openraft's metrics and the applied id
    /// its state machine's store holds ([`StateMachine::applied_index`](crate::StateMachine::applied_index),
    /// written with the batch, before a write's answer is sent; the metrics move a moment
    /// after), so that read after a write's answer, the node that answered names it. To wait
    /// until another node serves a write, wait for its `last_applied` to reach the write's
    /// version (its `ETag`, the index of its entry).
    pub last_applied: Option<u64>,
    /// The last index in its log.
    pub last_log: Option<u64>,
    /// The last index its log has purged (the entries up to it are in a snapshot only).
    pub purged: Option<u64>,
    /// The last index of its newest snapshot.
    pub snapshot: Option<u64>,
    /// The voters of its membership.
    pub voters: Vec<NodeId>,
    /// The learners of its membership.
    #[serde(default)]
    pub learners: Vec<NodeId>,
    /// On the leader: each other member's replication (`None` elsewhere).
    #[serde(default)]
    pub replication: Option<BTreeMap<NodeId, Replication>>,
}

/// How far a follower or learner is behind the leader ([`Status::replication`]).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Replication {
    /// The last log index the leader knows it holds (`None`: none yet).
    pub matched: Option<u64>,
    /// Entries it lacks behind the leader's last log index.
    pub lag: u64,
}

/// The applied index `node`'s state machine's store holds (`None` if it cannot be read: the
/// metrics' stands alone then).
pub(crate) fn stored_applied(node: &Node) -> Option<u64> {
    node.state_machine().applied_index().ok().flatten()
}

/// The status of `node`, from its Raft metrics and its state machine's applied index.
pub(crate) fn status_of(node: &Node) -> Status {
    let m = node.raft().metrics().borrow_watched().clone();
    Status {
        id: node.id(),
        leader: node.known_leader(),
        term: m.current_term,
        last_applied: m.last_applied.map(|l| l.index()).max(stored_applied(node)),
        last_log: m.last_log_index,
        purged: m.purged.map(|l| l.index()),
        snapshot: m.snapshot.map(|l| l.index()),
        voters: m.membership_config.membership().voter_ids().collect(),
        learners: m.membership_config.membership().learner_ids().collect(),
        replication: m.replication.as_ref().map(|r| {
            let last = m.last_log_index.unwrap_or(0);
            r.iter()
                .filter(|(id, _)| **id != node.id())
                .map(|(id, l)| {
                    let matched = l.map(|l| l.index());
                    let lag = last.saturating_sub(matched.unwrap_or(0));
                    (*id, Replication { matched, lag })
                })
                .collect()
        }),
    }
}

// ---- client: the network openraft replicates through ----

/// openraft's network over HTTP: one [`HttpPeer`] per target node, at the address in its
/// membership entry.
#[derive(Clone, Debug)]
pub struct HttpNetwork {
    client: reqwest::Client,
    commit_linger: Duration,
    source: Option<NodeId>,
}

impl HttpNetwork {
    /// A network with its own connection pool.
    ///
    /// Its requests go straight to the peers: no proxy (a node started with `HTTP_PROXY` in
    /// its environment would otherwise send its Raft traffic through it) and no redirect
    /// followed (a peer answers, or the call fails: a Raft message is never sent on to
    /// another address). Each request also skips the proxy and redirect checks it would make.
    pub fn new() -> HttpNetwork {
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        HttpNetwork {
            client,
            commit_linger: COMMIT_LINGER,
            source: None,
        }
    }

    /// Names node `id` as the sender of every RPC, in [`SOURCE_HEADER`].
    pub fn source(mut self, id: NodeId) -> HttpNetwork {
        self.source = Some(id);
        self
    }

    /// How long an AppendEntries request that carries only a commit index waits for the next
    /// request to a follower, which carries it instead ([`COMMIT_LINGER`] by default; zero:
    /// each sent at once, as openraft makes them). See src/http/replication.rs.
    pub fn commit_linger(mut self, linger: Duration) -> HttpNetwork {
        self.commit_linger = linger;
        self
    }
}

impl Default for HttpNetwork {
    fn default() -> HttpNetwork {
        HttpNetwork::new()
    }
}

impl RaftNetworkFactory<TypeConfig> for HttpNetwork {
    type Network = HttpPeer;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> HttpPeer {
        HttpPeer {
            target,
            base: format!("http://{}", node.addr),
            client: self.client.clone(),
            commit_linger: self.commit_linger,
            source: self.source.map(reqwest::header::HeaderValue::from),
        }
    }
}

/// An answer in the stream of AppendEntries to a follower.
type StreamAnswer = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>;

/// The connection to one peer.
#[derive(Debug)]
pub struct HttpPeer {
    target: NodeId,
    base: String,
    client: reqwest::Client,
    commit_linger: Duration,
    /// The sender's id, for [`SOURCE_HEADER`].
    source: Option<reqwest::header::HeaderValue>,
}

fn rpc_error(e: impl std::fmt::Display, connect: bool) -> RPCError<TypeConfig> {
    if connect {
        RPCError::Unreachable(Unreachable::from_string(e))
    } else {
        RPCError::Network(NetworkError::from_string(e))
    }
}

impl HttpPeer {
    /// A POST to `path` of the target, naming it (and the sender, if known).
    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        let post = self
            .client
            .post(format!("{}{path}", self.base))
            .header(TARGET_HEADER, self.target);
        match &self.source {
            Some(source) => post.header(SOURCE_HEADER, source.clone()),
            None => post,
        }
    }

    async fn call<Req: Serialize, Resp: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, RPCError<TypeConfig>> {
        let body = encode(req).map_err(|e| rpc_error(e, false))?;
        let resp = self
            .post(path)
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

    fn stream_append<'s, S>(
        &'s mut self,
        input: S,
        option: RPCOption,
    ) -> BoxFuture<'s, Result<BoxStream<'s, StreamAnswer>, RPCError<TypeConfig>>>
    where
        S: Stream<Item = AppendEntriesRequest<TypeConfig>> + OptionalSend + Unpin + 'static,
    {
        let peer: &HttpPeer = self;
        let ttl = option.soft_ttl();
        let answers =
            replication::append_stream(input, peer.commit_linger, move |rpc| async move {
                peer.call("/raft/append", &rpc, ttl).await
            });
        Box::pin(async move { Ok(Box::pin(answers) as BoxStream<'s, StreamAnswer>) })
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
        tracing::info!(
            target_node = self.target,
            last_log_id = ?snapshot.meta.last_log_id,
            "sending a snapshot"
        );
        let stream = framed(frames(snapshot.snapshot, vote, snapshot.meta));
        let send = self
            .post("/raft/snapshot")
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
