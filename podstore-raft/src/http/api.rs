//! The client API: keys and values under `/kv`, the cluster under `/cluster` (the table of
//! routes and answers is in the module docs of [`crate::http`]).
//!
//! Every error is JSON of one shape, `{"error": "<code>", "message": "..."}`, and never names
//! a key as the state machine stores it (behind its one-byte prefix): errors the store reports
//! about a key are mapped to a status here, and an unexpected one is logged in full and
//! answered as `internal`, without its text.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;

use super::query::{Query, decode_path, hex, unhex};
use super::{Status, status_of};
use crate::state_machine::{OpenValue, Whole};
use crate::{CHUNK_LEN, Expect, MAX_KEY_LEN, Node, NodeError, NodeId, Read, RequestId, Written};

/// The header of a write's request id, `<client>:<seq>` in decimal (see
/// [`crate::Request::Once`]): a write whose id the state machine remembers is not applied
/// again, and answers what the first one did. Not `x-request-id`, which proxies set to ids of
/// their own (for tracing) that a node would have to refuse or, worse, misread.
pub const REQUEST_ID_HEADER: &str = "x-podstore-request-id";
/// The header of an answer that is the remembered outcome of an earlier write under the same
/// request id (`true`): nothing was applied again.
pub const REPLAYED_HEADER: &str = "x-podstore-replayed";

/// The default limit of a value's size over HTTP (`--max-value` of the binary): `413` beyond.
/// A value larger than [`crate::CHUNK_LEN`] is streamed in and replicated in chunks (memory
/// per PUT stays a few MiB whatever its size: [`Node::put_stream`]), so the limit is about
/// disk, not memory: a streamed value takes about three times its size on each node until
/// its commit is applied (its entries in the log, its staged chunks, the value).
pub const DEFAULT_MAX_VALUE: usize = 1 << 30;
/// The most keys a listing answers, whatever its `limit`.
pub const MAX_LIST_LIMIT: usize = 10_000;
/// A listing's `limit` when it gives none.
pub const DEFAULT_LIST_LIMIT: usize = 1_000;

/// An error answer: `status` with `{"error": code, "message": message}`.
pub(super) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": self.code, "message": self.message });
        (self.status, Json(body)).into_response()
    }
}

/// An error answer (see [`ApiError`]).
pub(super) fn error(
    status: StatusCode,
    code: &'static str,
    message: impl Into<String>,
) -> Response {
    refusal(status, code, message).into_response()
}

fn refusal(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
    let message = message.into();
    ApiError {
        status,
        code,
        message,
    }
}

fn bad_request(message: impl Into<String>) -> ApiError {
    refusal(StatusCode::BAD_REQUEST, "bad_request", message)
}

fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "not_found", "the key has no value")
}

/// The answer to a failed request.
pub(super) fn node_error(e: NodeError) -> Response {
    match e {
        NodeError::NotLeader { addr, leader } => {
            let mut r = error(
                StatusCode::MISDIRECTED_REQUEST,
                "not_leader",
                match (leader, &addr) {
                    (Some(l), Some(a)) => format!("not the leader: node {l} at {a} is"),
                    _ => "not the leader, and no leader is known yet".to_string(),
                },
            );
            if let Some(v) = addr.and_then(|a| HeaderValue::from_str(&a).ok()) {
                r.headers_mut().insert("x-leader", v);
            }
            r
        }
        NodeError::Unknown(e) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "outcome_unknown",
            format!("leadership changed before the write was acknowledged: {e}"),
        ),
        NodeError::Raft(e) => error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e),
        NodeError::Refused(e) => error(StatusCode::CONFLICT, "conflict", e),
        NodeError::Rejected(e) => bad_request(e).into_response(),
        NodeError::RequestIdRefused(e) => error(StatusCode::CONFLICT, "request_id_refused", e),
        NodeError::TooLarge { max } => too_large(max as usize).into_response(),
        NodeError::Body(e) => bad_request(e).into_response(),
        NodeError::Interrupted(e) => error(StatusCode::SERVICE_UNAVAILABLE, "interrupted", e),
        NodeError::ConditionFailed { current } => {
            let mut r = error(
                StatusCode::PRECONDITION_FAILED,
                "precondition_failed",
                match current {
                    Some(v) => format!("the value has version {v}"),
                    None => "the key has no value".to_string(),
                },
            );
            if let Some(v) = current {
                r.headers_mut().insert(header::ETAG, etag(v));
            }
            r
        }
        // The store's errors may name the stored key (with the state machine's prefix): the
        // whole error goes to the log, the client gets none of its text.
        other => {
            tracing::error!(error = %other, "client request failed");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the node's store failed (see its log)",
            )
        }
    }
}

/// A version as an entity tag: the decimal log index, quoted.
fn etag(version: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{version}\"")).expect("digits and quotes")
}

/// The version an `If-Match` names: one entity tag, `"<version>"` (quotes optional), or `*`
/// (`None`: any value).
fn parse_etag(v: &HeaderValue) -> Result<Option<u64>, ApiError> {
    let bad = || {
        bad_request(
            "If-Match takes one entity tag, as an ETag header gave it (\"<version>\"), or *",
        )
    };
    let s = v.to_str().map_err(|_| bad())?.trim();
    if s == "*" {
        return Ok(None);
    }
    let s = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s);
    s.parse::<u64>().map(Some).map_err(|_| bad())
}

/// The request id of a write ([`REQUEST_ID_HEADER`]), if it has one.
pub(super) fn request_id(headers: &HeaderMap) -> Result<Option<RequestId>, ApiError> {
    let Some(v) = headers.get(REQUEST_ID_HEADER) else {
        return Ok(None);
    };
    let parsed = v.to_str().ok().and_then(|s| {
        let (client, seq) = s.trim().split_once(':')?;
        Some(RequestId {
            client: client.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    });
    match parsed {
        Some(id) => Ok(Some(id)),
        None => Err(bad_request(format!(
            "{REQUEST_ID_HEADER} takes <client>:<seq>, two decimal numbers"
        ))),
    }
}

/// Marks `r` as the outcome of an earlier write under the same request id, if it is one.
fn replayed(mut r: Response, written: Written) -> Response {
    if written.replayed {
        r.headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    r
}

/// The key a `/kv/...` path names: the rest of the path, percent-decoded into bytes.
fn key_of(uri: &Uri) -> Result<Vec<u8>, ApiError> {
    let raw = uri.path().strip_prefix("/kv/").unwrap_or("");
    let key = decode_path(raw).map_err(|e| refusal(StatusCode::BAD_REQUEST, "bad_key", e))?;
    if key.is_empty() {
        return Err(refusal(StatusCode::BAD_REQUEST, "bad_key", "empty key"));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "bad_key",
            format!(
                "key of {} bytes, longer than {MAX_KEY_LEN} bytes",
                key.len()
            ),
        ));
    }
    Ok(key)
}

/// The client routes, values up to `max_value` bytes.
pub(super) fn routes(max_value: usize) -> axum::Router<Node> {
    // The PUT handler reads its body as a stream and enforces `max_value` itself (axum's
    // `DefaultBodyLimit` applies to bodies taken whole).
    let kv: MethodRouter<Node> = get(kv_get)
        .put(move |node, uri, headers, body| kv_put(node, uri, headers, body, max_value))
        .delete(kv_delete);
    axum::Router::new()
        .route("/kv", get(kv_list))
        .route("/kv/", get(kv_list).put(kv_list).delete(kv_list))
        .route("/kv/{*key}", kv)
        .route("/cluster/init", post(cluster_init))
        .route("/cluster/learner", post(cluster_learner))
        .route("/cluster/voters", post(cluster_voters))
        .route("/cluster/status", get(cluster_status))
}

/// Answers a request no route takes.
pub(super) async fn no_route(uri: Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no_route",
        format!("no route {}", uri.path()),
    )
}

/// Answers a method a route does not take.
pub(super) async fn no_method() -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

fn too_large(max_value: usize) -> ApiError {
    refusal(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the value is larger than this node takes (--max-value {max_value} bytes)"),
    )
}

/// The body of a PUT: whole if it is at most [`CHUNK_LEN`] bytes, else the bytes read so far
/// (just over [`CHUNK_LEN`]) and the rest of the stream; or the answer to one too large
/// (`413`, from its `Content-Length` before anything is read, or as soon as it passes
/// `max_value`) or cut short (`400`).
async fn read_body(
    headers: &HeaderMap,
    body: Body,
    max_value: usize,
) -> Result<(Vec<u8>, Option<BodyStream>), ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut stream = body.into_data_stream();
    if declared.is_some_and(|n| n > max_value as u64) {
        drain_unless_expecting(headers, &mut stream).await;
        return Err(too_large(max_value));
    }
    let mut head = Vec::new();
    while head.len() <= CHUNK_LEN {
        match stream.next().await {
            Some(Ok(piece)) => {
                if head.len() + piece.len() > max_value {
                    drain(&mut stream).await;
                    return Err(too_large(max_value));
                }
                head.extend_from_slice(&piece);
            }
            Some(Err(e)) => return Err(bad_request(format!("reading the body: {e}"))),
            None => return Ok((head, None)),
        }
    }
    Ok((head, Some(stream)))
}

/// The most bytes of a refused body read and dropped before the answer.
const DRAIN_BYTES: u64 = 16 << 20;

/// Reads and drops what is left of a body refused as too large, up to [`DRAIN_BYTES`]: a
/// client that writes its whole body before it reads the answer (most do, without
/// `Expect: 100-continue`) would otherwise meet a closed connection, not the `413`. A larger
/// body is cut off (the connection closed) after that.
async fn drain(stream: &mut BodyStream) {
    let mut dropped = 0u64;
    while dropped < DRAIN_BYTES {
        match stream.next().await {
            Some(Ok(piece)) => dropped += piece.len() as u64,
            _ => return,
        }
    }
}

/// [`drain`], unless the client waits for `100 Continue` (`Expect`): then it has sent nothing,
/// and reading the body would ask it to send.
async fn drain_unless_expecting(headers: &HeaderMap, stream: &mut BodyStream) {
    if !headers.contains_key(header::EXPECT) {
        drain(stream).await;
    }
}

/// The rest of a body that is streamed.
type BodyStream = axum::body::BodyDataStream;

async fn kv_put(
    State(node): State<Node>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
    max_value: usize,
) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(r) => return r.into_response(),
    };
    let expect = match (
        headers.get(header::IF_MATCH),
        headers.get(header::IF_NONE_MATCH),
    ) {
        (Some(_), Some(_)) => {
            return bad_request("If-Match and If-None-Match together").into_response();
        }
        (Some(m), None) => match parse_etag(m) {
            Ok(Some(v)) => Some(Expect::Version(v)),
            Ok(None) => Some(Expect::Present),
            Err(r) => return r.into_response(),
        },
        (None, Some(n)) if n.as_bytes() == b"*" => Some(Expect::Absent),
        (None, Some(_)) => {
            return bad_request("If-None-Match takes only * on a PUT").into_response();
        }
        (None, None) => None,
    };
    let id = match request_id(&headers) {
        Ok(id) => id,
        Err(r) => return r.into_response(),
    };
    // A body that may be streamed goes to the leader only: a follower says so before it
    // reads any of it (the first chunk's write would say it after).
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_none_or(|n| n > CHUNK_LEN as u64)
        && let Some(e) = node.unless_leader()
    {
        drain_unless_expecting(&headers, &mut body.into_data_stream()).await;
        return node_error(e);
    }
    let (head, rest) = match read_body(&headers, body, max_value).await {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let (put, len) = match rest {
        None => {
            let len = head.len() as u64;
            (node.put_with(key, head, expect, id).await, len)
        }
        Some(mut rest) => {
            // Counted as it streams: the answer says how long the value was.
            let counted = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let count = counted.clone();
            let value = futures::stream::iter([Ok(Bytes::from(head))])
                .chain(&mut rest)
                .inspect(move |piece| {
                    if let Ok(p) = piece {
                        count.fetch_add(p.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    }
                });
            let put = node
                .put_stream(key, Box::pin(value), max_value as u64, expect, id)
                .await;
            if let Err(NodeError::TooLarge { .. }) = put {
                drain(&mut rest).await;
            }
            (put, counted.load(std::sync::atomic::Ordering::Relaxed))
        }
    };
    match put {
        Ok(written) => {
            let version = written.index;
            let status = if expect == Some(Expect::Absent) {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            let body = json!({ "version": version, "etag": format!("\"{version}\""), "len": len });
            let r = (status, [(header::ETAG, etag(version))], Json(body)).into_response();
            replayed(r, written)
        }
        Err(e) => node_error(e),
    }
}

async fn kv_delete(State(node): State<Node>, uri: Uri, headers: HeaderMap) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(r) => return r.into_response(),
    };
    let condition = match headers.get(header::IF_MATCH).map(parse_etag) {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(r)) => return r.into_response(),
    };
    let id = match request_id(&headers) {
        Ok(id) => id,
        Err(r) => return r.into_response(),
    };
    let deleted = match condition {
        None => node.delete_with(key, None, id).await,
        Some(version) => match node.delete_with(key, version, id).await {
            // `If-Match: *`: any value, and none is a failed condition (not a 404).
            Ok((false, _)) => Err(NodeError::ConditionFailed { current: None }),
            other => other,
        },
    };
    match deleted {
        Ok((true, written)) => replayed(StatusCode::NO_CONTENT.into_response(), written),
        Ok((false, written)) => replayed(not_found(), written),
        Err(e) => node_error(e),
    }
}

/// What `GET /kv/{key}` and `GET /kv` read from the query.
fn flag(q: &Query, name: &str) -> Result<bool, ApiError> {
    match q.text(name).map_err(bad_request)?.as_deref() {
        None | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(v) => Err(bad_request(format!("{name}={v}: 1 or 0"))),
    }
}

async fn kv_get(State(node): State<Node>, uri: Uri) -> Response {
    let key = match key_of(&uri) {
        Ok(k) => k,
        Err(r) => return r.into_response(),
    };
    let q = match Query::parse(uri.query()) {
        Ok(q) => q,
        Err(e) => return bad_request(e).into_response(),
    };
    let (linearizable, start, end) = match (flag(&q, "linearizable"), q.u64("start"), q.u64("end"))
    {
        (Ok(l), Ok(s), Ok(e)) => (l, s, e),
        (Err(r), _, _) => return r.into_response(),
        (_, Err(e), _) | (_, _, Err(e)) => return bad_request(e).into_response(),
    };
    if linearizable && let Err(e) = node.linearize().await {
        return node_error(e);
    }
    let range = (start.is_some() || end.is_some()).then(|| (start.unwrap_or(0), end));
    let read = match range {
        None => match node.read_or_open(key, CHUNK_LEN as u64).await {
            Ok(Whole::Read(r)) => Ok(r),
            Ok(Whole::Open(value)) => return streamed(value),
            Err(e) => Err(e),
        },
        Some(_) => node.read(key, range).await,
    };
    match read {
        Ok(Read::Value(v)) => {
            let tag = [(header::ETAG, etag(v.version))];
            let octets = (header::CONTENT_TYPE, "application/octet-stream");
            if range.is_some() && !v.bytes.is_empty() {
                let last = v.start + v.bytes.len() as u64 - 1;
                let content_range = format!("bytes {}-{last}/{}", v.start, v.len);
                let range = (header::CONTENT_RANGE, content_range);
                (StatusCode::PARTIAL_CONTENT, tag, [octets], [range], v.bytes).into_response()
            } else {
                (StatusCode::OK, tag, [octets], v.bytes).into_response()
            }
        }
        Ok(Read::Missing) => not_found(),
        Ok(Read::OutOfRange { len }) => {
            let mut r = error(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "range_not_satisfiable",
                format!(
                    "start={} end={end:?} is outside the value ({len} bytes)",
                    start.unwrap_or(0)
                ),
            );
            let all = HeaderValue::from_str(&format!("bytes */{len}")).expect("digits");
            r.headers_mut().insert(header::CONTENT_RANGE, all);
            r
        }
        Err(e) => node_error(e),
    }
}

/// The answer to a GET of a whole value too large to read whole: its bytes read and sent
/// [`CHUNK_LEN`] at a time (each read on a blocking thread), all of the same write. A read that
/// fails half-way cuts the response short (the client sees fewer bytes than `Content-Length`).
fn streamed(value: OpenValue) -> Response {
    let (len, version) = (value.len, value.version);
    let pieces = futures::stream::try_unfold(0u64, move |at| {
        let value = value.clone();
        async move {
            if at >= len {
                return Ok::<_, std::io::Error>(None);
            }
            let n = (len - at).min(CHUNK_LEN as u64) as usize;
            let piece = tokio::task::spawn_blocking(move || value.read_at(at, n))
                .await
                .map_err(std::io::Error::other)??;
            Ok(Some((piece, at + n as u64)))
        }
    });
    let headers = [
        (header::ETAG, etag(version)),
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/octet-stream"),
        ),
        (header::CONTENT_LENGTH, HeaderValue::from(len)),
    ];
    (StatusCode::OK, headers, Body::from_stream(pieces)).into_response()
}

async fn kv_list(State(node): State<Node>, uri: Uri) -> Response {
    if uri.path() == "/kv/" {
        return error(StatusCode::BAD_REQUEST, "bad_key", "empty key");
    }
    let q = match Query::parse(uri.query()) {
        Ok(q) => q,
        Err(e) => return bad_request(e).into_response(),
    };
    let linearizable = match flag(&q, "linearizable") {
        Ok(l) => l,
        Err(r) => return r.into_response(),
    };
    let prefix = q.bytes("prefix").unwrap_or_default();
    let after = match q.text("after").map_err(bad_request) {
        Ok(None) => None,
        Ok(Some(t)) => match unhex(&t) {
            Some(k) => Some(k),
            None => return bad_request("after: not a token a listing gave").into_response(),
        },
        Err(r) => return r.into_response(),
    };
    let limit = match q.u64("limit") {
        Ok(None) => DEFAULT_LIST_LIMIT,
        Ok(Some(n)) if (1..=MAX_LIST_LIMIT as u64).contains(&n) => n as usize,
        Ok(Some(n)) => {
            return bad_request(format!("limit={n}: 1 to {MAX_LIST_LIMIT}")).into_response();
        }
        Err(e) => return bad_request(e).into_response(),
    };
    if linearizable && let Err(e) = node.linearize().await {
        return node_error(e);
    }
    match node.list(prefix, after, limit).await {
        Ok((keys, more)) => {
            let next = more.then(|| keys.last().map(|k| hex(&k.key))).flatten();
            let keys: Vec<_> = keys
                .iter()
                .map(|k| match std::str::from_utf8(&k.key) {
                    Ok(text) => json!({ "key": text, "len": k.len }),
                    Err(_) => json!({ "key_hex": hex(&k.key), "len": k.len }),
                })
                .collect();
            Json(json!({ "keys": keys, "next": next })).into_response()
        }
        Err(e) => node_error(e),
    }
}

/// A JSON body, whatever its content type says (a `curl -d` sends
/// `application/x-www-form-urlencoded`).
fn json_body<T: for<'de> Deserialize<'de>>(body: &[u8], shape: &str) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| bad_request(format!("expected {shape}: {e}")))
}

/// The answer to a cluster request that succeeded: this node's status.
fn cluster_done(node: &Node) -> Response {
    Json(status_of(node)).into_response()
}

async fn cluster_init(State(node): State<Node>, body: Bytes) -> Response {
    let members: BTreeMap<NodeId, String> =
        match json_body(&body, r#"{"<id>": "<host:port>", ...}"#) {
            Ok(m) => m,
            Err(r) => return r.into_response(),
        };
    tracing::info!(?members, "initializing a cluster");
    match node.initialize(members).await {
        Ok(()) => {
            // The status answered shows the new membership, not the empty one before it (it
            // takes effect a moment after `initialize` returns); a leader is elected later.
            let wait = node.raft().wait(Some(Duration::from_secs(2)));
            let applied = |m: &openraft::RaftMetrics<crate::TypeConfig>| {
                m.membership_config
                    .membership()
                    .voter_ids()
                    .next()
                    .is_some()
            };
            let _ = wait.metrics(applied, "the membership applied").await;
            cluster_done(&node)
        }
        Err(e) => node_error(e),
    }
}

/// Body of `POST /cluster/learner`.
#[derive(Deserialize)]
struct Learner {
    id: NodeId,
    addr: String,
}

async fn cluster_learner(State(node): State<Node>, body: Bytes) -> Response {
    let l: Learner = match json_body(&body, r#"{"id": <id>, "addr": "<host:port>"}"#) {
        Ok(l) => l,
        Err(r) => return r.into_response(),
    };
    tracing::info!(id = l.id, addr = %l.addr, "adding a learner");
    match node.add_learner(l.id, l.addr).await {
        Ok(()) => cluster_done(&node),
        Err(e) => node_error(e),
    }
}

async fn cluster_voters(State(node): State<Node>, body: Bytes) -> Response {
    let voters: BTreeSet<NodeId> = match json_body(&body, "[<id>, ...]") {
        Ok(v) => v,
        Err(r) => return r.into_response(),
    };
    tracing::info!(?voters, "changing the voters");
    match node.change_membership(voters).await {
        Ok(()) => cluster_done(&node),
        Err(e) => node_error(e),
    }
}

async fn cluster_status(State(node): State<Node>) -> Json<Status> {
    Json(status_of(&node))
}
