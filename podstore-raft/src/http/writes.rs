//! `POST /writes`: several independent writes in one request and one log entry (the route the
//! client's coalesced writes take, `podstore_raft::client`).
//!
//! The body is the writes as postcard encodes a `Vec<`[`crate::Request`]`>`, each a put, a
//! delete or a conditional one, under a request id ([`crate::Request::Once`]) or not, at most
//! [`MAX_WRITES`] of them and [`MAX_WRITES_BYTES`] in all, no two naming the same key; they are
//! proposed as one [`crate::Request::Many`]. The answer, `200` once the entry is applied, is
//! postcard's encoding of `(u64, Vec<`[`crate::Response`]`>)`: the entry's log index (the
//! version of each value written) and each write's own answer, in order. A write the state
//! machine refuses (a condition that does not hold, a request id refused, a key too long, a
//! key named twice) has its refusal there; the others are applied all the same. A value over
//! the node's `--max-value` refuses the whole request (`413 too_large`, nothing written), as
//! `PUT /kv/...` refuses it; the client then sends each of its writes alone.
//!
//! With a request id (`x-podstore-request-id: <client>:<seq>`, as on `PUT /kv/...`), the
//! request is applied at most once as a whole: a retry of the same writes under the same id
//! applies nothing and answers the first request's, each write's answer a
//! [`crate::Response::Replayed`] (the first index and answer); the same id on other writes
//! answers every write [`crate::Response::RequestIdRefused`]. One request-id record for the
//! request, where a request id on each write ([`crate::Request::Once`] in the body) costs one
//! record a write: the client puts its own ids on the writes given one by its caller only.
//!
//! postcard is the encoding of the node's own types, not a published format: the client of the
//! same version of this crate speaks it. Any HTTP client can use the `/kv` routes instead.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::api::{error, node_error, request_id};
use crate::{Node, Request, decode, encode};

/// The content type of a `POST /writes` body and answer.
pub const WRITES_CONTENT_TYPE: &str = "application/x-podstore-writes";
/// The most writes one `POST /writes` carries.
pub const MAX_WRITES: usize = 1024;
/// The largest `POST /writes` body (4 MiB): larger values take `PUT /kv/...`, streamed.
pub const MAX_WRITES_BYTES: usize = 4 << 20;

/// The length of the value `write` carries, if any.
fn value_len(write: &Request) -> usize {
    match write {
        Request::Put { value, .. }
        | Request::PutIfAbsent { value, .. }
        | Request::PutIf { value, .. } => value.len(),
        Request::Once { request, .. } => value_len(request),
        _ => 0,
    }
}

/// Answers `POST /writes` (see the module docs); `413 too_large` if a value is longer than
/// `max_value` (the node's `--max-value`, as `PUT /kv/...` would: nothing is written).
pub(super) async fn writes(
    State(node): State<Node>,
    headers: HeaderMap,
    body: Body,
    max_value: usize,
) -> Response {
    let id = match request_id(&headers) {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("writes of more than {MAX_WRITES_BYTES} bytes in one request"),
        )
    };
    let mut body = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(piece) = body.next().await {
        match piece {
            Ok(p) if bytes.len() + p.len() > MAX_WRITES_BYTES => return too_large(),
            Ok(p) => bytes.extend_from_slice(&p),
            Err(e) => return error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
        }
    }
    let writes: Vec<Request> = match decode(&bytes) {
        Ok(w) => w,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("a body that is not writes in postcard: {e}"),
            );
        }
    };
    if writes.is_empty() || writes.len() > MAX_WRITES {
        return error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!(
                "{} writes: a request carries 1 to {MAX_WRITES}",
                writes.len()
            ),
        );
    }
    if let Some(long) = writes.iter().map(value_len).find(|&n| n > max_value) {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "a value of {long} bytes, larger than this node takes (--max-value {max_value} \
                 bytes): nothing written"
            ),
        );
    }
    match node.write_many(writes, id).await {
        Ok(answer) => match encode(&answer) {
            Ok(bytes) => ([(header::CONTENT_TYPE, WRITES_CONTENT_TYPE)], bytes).into_response(),
            Err(e) => node_error(crate::NodeError::Io(e)),
        },
        Err(e) => node_error(e),
    }
}
