//! A client of a cluster of `podstore-raft` nodes over their HTTP API (the `client` feature).
//!
//! It is given the nodes' addresses and finds the leader itself: it sends each request to the
//! node it last found leading (at first, the first address), follows a `421` to the address in
//! its `x-leader` header, and when a node is down, answers `421` without a leader (an election
//! is under way) or `503`, or the connection fails or times out, tries the next node after a
//! pause that doubles from [`Retry::first_backoff`] to [`Retry::max_backoff`], for at most
//! [`Retry::attempts`] attempts and [`Retry::deadline`] in all.
//!
//! **Writes are retried safely.** Each write carries a request id (this client's random id and
//! a sequence number, in the `x-podstore-request-id` header), and every attempt of one write
//! carries the same id; coalesced writes share their request's id (see [`coalesce`]), and a
//! write given an id ([`Client::put_with`]) keeps its own too. The state machine remembers the outcome of each client's last
//! [`crate::REQUEST_ID_WINDOW`] ids: a retry whose first attempt was applied (the answer was
//! lost: the leader died after the commit, the connection was cut) is not applied again and
//! answers the first attempt's outcome, version included ([`Written::replayed`] says so). It
//! remembers [`crate::REQUEST_ID_CLIENTS`] clients, those whose latest write is the most
//! recent: a client whose latest write is older than that many other clients' first writes is
//! forgotten, and a retry from it is applied as a new write. A `Client` keeps its id for its
//! life: make one per process and reuse it, not one per request.
//!
//! Reads (`get`, `get_range`, `list`) are linearizable: they go to the leader, which confirms
//! its leadership with a quorum before reading.
//!
//! ```no_run
//! # async fn demo() -> Result<(), podstore_raft::client::Error> {
//! use podstore_raft::client::Client;
//!
//! let client = Client::new(["127.0.0.1:21001", "127.0.0.1:21002", "127.0.0.1:21003"]);
//! let written = client.put(b"photo.jpg", b"...".to_vec()).await?;
//! let value = client.get(b"photo.jpg").await?.expect("just written");
//! assert_eq!(value.version, written.version);
//! // Only over the version read: else `Error::ConditionFailed`.
//! client.put_if(b"photo.jpg", b"new".to_vec(), podstore_raft::Expect::Version(value.version)).await?;
//! assert!(client.delete(b"photo.jpg").await?);
//! # Ok(()) }
//! ```

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, ETAG, IF_MATCH, IF_NONE_MATCH};
use serde::Deserialize;

use crate::http::{REPLAYED_HEADER, REQUEST_ID_HEADER};
use crate::{Expect, Request, RequestId, Response};

pub mod coalesce;
mod conn;

use coalesce::{Coalescer, Ids};
use conn::Conn;

/// How a [`Client`] retries a request.
#[derive(Debug, Clone)]
pub struct Retry {
    /// The most attempts of one request (each node tried, a redirect followed: one attempt).
    pub attempts: u32,
    /// The pause after the first failed attempt; it doubles after each.
    pub first_backoff: Duration,
    /// The longest pause between attempts.
    pub max_backoff: Duration,
    /// The most time one request may take, all attempts together (no attempt starts after);
    /// a write's is longer by its body's time at [`SLOWEST_UPLOAD`].
    pub deadline: Duration,
    /// The most time an attempt may wait on a node: to connect, for a read's answer to begin
    /// and between two pieces of its body (a large value read takes as long as it streams);
    /// a write's whole exchange may take this long and its body's time at [`SLOWEST_UPLOAD`]
    /// more, and longer while the node goes on reading its body (a loaded machine, a slow
    /// link): it fails when the node has read nothing of it for this long.
    pub timeout: Duration,
}

/// The upload rate a write's time limits allow for its body at least, in bytes per second
/// (8 MiB/s): a 256 MiB value gets 32 s more than [`Retry::timeout`], where a fixed limit would
/// refuse every large value on a slow link and retry it in vain; and an upload slower than
/// this goes on as long as the node keeps reading it (a loaded node replicating as it reads).
pub const SLOWEST_UPLOAD: u64 = 8 << 20;

/// The pieces a write's body is handed to the connection in: each one taken is progress (see
/// `Conn::write_attempt`).
const UPLOAD_PIECE: usize = 256 << 10;

/// What a connection's buffers may hold of a write's body that the node has not read yet
/// (Linux's default maximum send buffer is 4 MiB and receive buffer up to 32 MiB): after the
/// last piece is taken, the node still has that much to read before it can answer.
const UPLOAD_IN_FLIGHT: usize = 40 << 20;

impl Default for Retry {
    /// 30 attempts, pauses from 50 ms doubling to 1 s, 20 s in all (an election takes 1 to 2 s
    /// with [`crate::default_config`]; a node restarting longer), 10 s per attempt.
    fn default() -> Retry {
        Retry {
            attempts: 30,
            first_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            deadline: Duration::from_secs(20),
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why a request failed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Error {
    /// A conditional write's condition did not hold: nothing was written. `current` is the
    /// key's version (`None`: it has no value).
    ConditionFailed {
        /// The key's version.
        current: Option<u64>,
    },
    /// A range that starts past the end of the value (or ends before it starts).
    RangeNotSatisfiable {
        /// The value's length.
        len: u64,
    },
    /// The node refused the request (`status`, and the API's error `code` and `message`):
    /// a bad key, a value too large, a request id refused, ...
    Refused {
        /// The HTTP status.
        status: u16,
        /// The error code (`bad_key`, `too_large`, `request_id_refused`, ...).
        code: String,
        /// What the node said.
        message: String,
    },
    /// No node answered within [`Retry`]'s bounds; the last failure. A write may or may not
    /// have been applied (once at most: retrying it with [`Client::put_with`] and the same
    /// request id tells).
    Unavailable(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::ConditionFailed { current: Some(v) } => {
                write!(f, "condition failed: the value has version {v}")
            }
            Error::ConditionFailed { current: None } => {
                write!(f, "condition failed: the key has no value")
            }
            Error::RangeNotSatisfiable { len } => {
                write!(f, "range outside the value ({len} bytes)")
            }
            Error::Refused {
                status,
                code,
                message,
            } => write!(f, "{status} {code}: {message}"),
            Error::Unavailable(e) => write!(f, "no node answered: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The version of the value written (the log index of the write; its `ETag`). For a
    /// delete, the index of the delete.
    pub version: u64,
    /// Whether the answer is that of an earlier attempt under the same request id (it was
    /// applied then, and not again).
    pub replayed: bool,
}

/// A value read, or a range of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value {
    /// The bytes read.
    pub bytes: Bytes,
    /// The value's version.
    pub version: u64,
    /// The value's whole length. (For a range read that came back empty, its start: a node
    /// does not tell the length with an empty range, whose start is at most the length.)
    pub len: u64,
}

/// One key of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The key.
    pub key: Vec<u8>,
    /// Its value's length.
    pub len: u64,
}

/// A page of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The keys, in byte order.
    pub keys: Vec<Listed>,
    /// The token of the next page (`after`), `None` after the last.
    pub next: Option<String>,
}

/// A client of a cluster (see the module docs). Cheap to share: its methods take `&self`.
#[derive(Debug)]
pub struct Client {
    conn: Arc<Conn>,
    /// Its request ids (its own id, and the next sequence number).
    ids: Ids,
    writes: Arc<Coalescer>,
}

/// How many coalesced requests a [`Client`] has in flight at most, by default (see
/// [`Client::coalesce`]).
pub const DEFAULT_COALESCED_IN_FLIGHT: usize = 4;

/// A random client id: std's randomly keyed hasher over the time and the process id (no
/// dependency for one number; two clients must not share one, not guess each other's).
fn random_id() -> u64 {
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.finish()
}

/// `bytes` percent-encoded for a path segment or a query value: every byte but ASCII letters,
/// digits, `-`, `_` and `~` (so `/`, `.` and `+` too: the node decodes them back, and no HTTP
/// layer resolves a `..` or reads a `+` as a space).
fn encode(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'~' {
            s.push(b as char);
        } else {
            let _ = write!(s, "%{b:02X}");
        }
    }
    s
}

fn etag_version(r: &reqwest::Response) -> Option<u64> {
    let tag = r.headers().get(ETAG)?.to_str().ok()?;
    tag.trim_matches('"').parse().ok()
}

#[derive(Deserialize)]
struct ApiError {
    error: String,
    message: String,
}

/// The error an answer that is not a success means.
async fn refusal(r: reqwest::Response) -> Error {
    let status = r.status();
    if status == StatusCode::PRECONDITION_FAILED {
        return Error::ConditionFailed {
            current: etag_version(&r),
        };
    }
    if status == StatusCode::RANGE_NOT_SATISFIABLE {
        let len = r
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("bytes */"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        return Error::RangeNotSatisfiable { len };
    }
    let (code, message) = match r.json::<ApiError>().await {
        Ok(e) => (e.error, e.message),
        Err(e) => (
            "unknown".into(),
            format!("an answer not in the API's shape: {e}"),
        ),
    };
    Error::Refused {
        status: status.as_u16(),
        code,
        message,
    }
}

impl Client {
    /// A client of the nodes at `nodes` (`host:port`), retrying as [`Retry::default`] says.
    pub fn new<S: Into<String>>(nodes: impl IntoIterator<Item = S>) -> Client {
        Client::with_retry(nodes, Retry::default())
    }

    /// A client of the nodes at `nodes` (`host:port`), retrying as `retry` says.
    pub fn with_retry<S: Into<String>>(nodes: impl IntoIterator<Item = S>, retry: Retry) -> Client {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        assert!(!nodes.is_empty(), "a client needs a node's address");
        let id = random_id();
        let ids = Ids::new(id, Arc::new(AtomicU64::new(0)));
        Client {
            conn: Arc::new(Conn {
                http: reqwest::Client::builder()
                    .connect_timeout(retry.timeout)
                    .build()
                    .unwrap_or_default(),
                nodes,
                leader: Mutex::new(None),
                next: AtomicUsize::new(0),
                id,
                retry,
            }),
            writes: Arc::new(Coalescer::new(DEFAULT_COALESCED_IN_FLIGHT, ids.clone())),
            ids,
        }
    }

    /// Sends this client's concurrent small writes together, at most `in_flight` requests at
    /// once (0: every write on its own, as `PUT`/`DELETE /kv/...`): see [`coalesce`]. On by
    /// default ([`DEFAULT_COALESCED_IN_FLIGHT`]).
    pub fn coalesce(mut self, in_flight: usize) -> Client {
        self.writes = Arc::new(Coalescer::new(in_flight, self.ids.clone()));
        self
    }

    /// This client's id (the first half of its request ids).
    pub fn id(&self) -> u64 {
        self.conn.id
    }

    /// The address of the node last found leading, if any.
    pub fn leader(&self) -> Option<String> {
        self.conn.leader()
    }

    /// A new request id of this client's (the next sequence number), for [`Client::put_with`]
    /// and [`Client::delete_with`]. Each write must have its own; its retries share it.
    pub fn request_id(&self) -> RequestId {
        self.ids.next()
    }

    /// Sets `key` to `value`.
    pub async fn put(&self, key: &[u8], value: impl Into<Bytes>) -> Result<Written, Error> {
        self.put_as(key, value.into(), None, None).await
    }

    /// Sets `key` to `value` only if `expect` holds for its value; else
    /// [`Error::ConditionFailed`].
    pub async fn put_if(
        &self,
        key: &[u8],
        value: impl Into<Bytes>,
        expect: Expect,
    ) -> Result<Written, Error> {
        self.put_as(key, value.into(), Some(expect), None).await
    }

    /// A put (conditional if `expect` is given) under request id `id`: a second call with the
    /// same id and the same request is not applied again and answers what the first did; with
    /// another request, or an id the state machine no longer remembers, it is refused
    /// ([`Error::Refused`], code `request_id_refused`).
    pub async fn put_with(
        &self,
        key: &[u8],
        value: impl Into<Bytes>,
        expect: Option<Expect>,
        id: RequestId,
    ) -> Result<Written, Error> {
        self.put_as(key, value.into(), expect, Some(id)).await
    }

    /// A put under request id `id`, or, coalesced, under its request's id only (see
    /// [`coalesce`]), or else under a new one.
    async fn put_as(
        &self,
        key: &[u8],
        value: Bytes,
        expect: Option<Expect>,
        id: Option<RequestId>,
    ) -> Result<Written, Error> {
        if self.writes.on() && value.len() <= coalesce::MAX_COALESCED_VALUE {
            let (key, value) = (key.to_vec(), value.to_vec());
            let write = match expect {
                None => Request::Put { key, value },
                Some(expect) => Request::PutIf { key, value, expect },
            };
            return match self.coalesced(write, id).await? {
                (written, Response::Done) => Ok(written),
                (_, other) => Err(refused(other)),
            };
        }
        let id = id.unwrap_or_else(|| self.request_id());
        let path = format!("/kv/{}", encode(key));
        let request_id = format!("{}:{}", id.client, id.seq);
        let r = self
            .conn
            .send(Some(value.clone()), |http, base| {
                let mut b = http
                    .put(format!("{base}{path}"))
                    .header(REQUEST_ID_HEADER, &request_id);
                b = match expect {
                    None => b,
                    Some(Expect::Absent) => b.header(IF_NONE_MATCH, "*"),
                    Some(Expect::Present) => b.header(IF_MATCH, "*"),
                    Some(Expect::Version(v)) => b.header(IF_MATCH, format!("\"{v}\"")),
                };
                b
            })
            .await?;
        if !r.status().is_success() {
            return Err(refusal(r).await);
        }
        let replayed = r.headers().contains_key(REPLAYED_HEADER);
        match etag_version(&r) {
            Some(version) => Ok(Written { version, replayed }),
            None => Err(Error::Refused {
                status: r.status().as_u16(),
                code: "unknown".into(),
                message: "a write's answer without an ETag".into(),
            }),
        }
    }

    /// `write`, under request id `id` if given, coalesced with this client's other writes
    /// (under their request's id): what it wrote (its version) and answered (the first
    /// attempt's, if it was replayed).
    async fn coalesced(
        &self,
        write: Request,
        id: Option<RequestId>,
    ) -> Result<(Written, Response), Error> {
        let key = write.key().unwrap_or_default();
        if key.is_empty() || key.len() > crate::MAX_KEY_LEN {
            // As `/kv/{key}` refuses it.
            return Err(Error::Refused {
                status: StatusCode::BAD_REQUEST.as_u16(),
                code: "bad_key".into(),
                message: format!(
                    "a key of {} bytes: keys are 1 to {} bytes",
                    key.len(),
                    crate::MAX_KEY_LEN
                ),
            });
        }
        let write = match id {
            Some(id) => Request::Once {
                id,
                request: Box::new(write),
            },
            None => write,
        };
        Ok(match self.writes.write(&self.conn, write).await? {
            (_, Response::Replayed { index, response }) => (
                Written {
                    version: index,
                    replayed: true,
                },
                *response,
            ),
            (index, response) => (
                Written {
                    version: index,
                    replayed: false,
                },
                response,
            ),
        })
    }

    /// Removes `key`; returns whether it had a value.
    pub async fn delete(&self, key: &[u8]) -> Result<bool, Error> {
        self.delete_as(key, None, None).await
    }

    /// Removes `key` only if its value has version `version`; else
    /// [`Error::ConditionFailed`].
    pub async fn delete_if(&self, key: &[u8], version: u64) -> Result<(), Error> {
        self.delete_as(key, Some(version), None).await.map(drop)
    }

    /// A delete (conditional if `version` is given) under request id `id` (see
    /// [`Client::put_with`]); returns whether the key had a value.
    pub async fn delete_with(
        &self,
        key: &[u8],
        version: Option<u64>,
        id: RequestId,
    ) -> Result<bool, Error> {
        self.delete_as(key, version, Some(id)).await
    }

    /// A delete under request id `id`, or, coalesced, under its request's id only (see
    /// [`coalesce`]), or else under a new one.
    async fn delete_as(
        &self,
        key: &[u8],
        version: Option<u64>,
        id: Option<RequestId>,
    ) -> Result<bool, Error> {
        if self.writes.on() {
            let key = key.to_vec();
            let write = match version {
                None => Request::Delete { key },
                Some(version) => Request::DeleteIf { key, version },
            };
            return match self.coalesced(write, id).await? {
                (_, Response::Existed(existed)) => Ok(existed),
                (_, other) => Err(refused(other)),
            };
        }
        let id = id.unwrap_or_else(|| self.request_id());
        let path = format!("/kv/{}", encode(key));
        let request_id = format!("{}:{}", id.client, id.seq);
        let r = self
            .conn
            .send(Some(Bytes::new()), |http, base| {
                let b = http
                    .delete(format!("{base}{path}"))
                    .header(REQUEST_ID_HEADER, &request_id);
                match version {
                    Some(v) => b.header(IF_MATCH, format!("\"{v}\"")),
                    None => b,
                }
            })
            .await?;
        match r.status() {
            StatusCode::NO_CONTENT => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            _ => Err(refusal(r).await),
        }
    }

    /// The value of `key` and its version (a linearizable read, through the leader).
    pub async fn get(&self, key: &[u8]) -> Result<Option<Value>, Error> {
        self.read(key, None).await
    }

    /// Bytes `start..end` of the value of `key` (`end` clamped to the value's end; `None`: to
    /// the end), its version and whole length; [`Error::RangeNotSatisfiable`] if `start` is
    /// past the end.
    pub async fn get_range(
        &self,
        key: &[u8],
        start: u64,
        end: Option<u64>,
    ) -> Result<Option<Value>, Error> {
        self.read(key, Some((start, end))).await
    }

    async fn read(
        &self,
        key: &[u8],
        range: Option<(u64, Option<u64>)>,
    ) -> Result<Option<Value>, Error> {
        let mut path = format!("/kv/{}?linearizable=1", encode(key));
        if let Some((start, end)) = range {
            path.push_str(&format!("&start={start}"));
            if let Some(end) = end {
                path.push_str(&format!("&end={end}"));
            }
        }
        let r = self
            .conn
            .send(None, |http, base| http.get(format!("{base}{path}")))
            .await?;
        match r.status() {
            StatusCode::OK | StatusCode::PARTIAL_CONTENT => {}
            StatusCode::NOT_FOUND => return Ok(None),
            _ => return Err(refusal(r).await),
        }
        let version = etag_version(&r).unwrap_or(0);
        // `bytes S-E/LEN` on a 206; the body is the whole value on a 200 (or an empty range).
        let whole = r
            .headers()
            .get(CONTENT_RANGE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.rsplit_once('/'))
            .and_then(|(_, len)| len.parse::<u64>().ok());
        let bytes = self.conn.body(r).await?;
        let len = match (whole, range) {
            (Some(len), _) => len,
            (None, None) => bytes.len() as u64,
            // An empty range answers 200 without Content-Range: its start is the length at
            // most; the length itself is not told.
            (None, Some((start, _))) => start,
        };
        Ok(Some(Value {
            bytes,
            version,
            len,
        }))
    }

    /// Up to `limit` keys starting with `prefix`, after the token `after` of the page before
    /// (a linearizable listing, through the leader).
    pub async fn list(
        &self,
        prefix: &[u8],
        after: Option<&str>,
        limit: usize,
    ) -> Result<Page, Error> {
        let mut path = format!("/kv?linearizable=1&prefix={}&limit={limit}", encode(prefix));
        if let Some(after) = after {
            path.push_str(&format!("&after={}", encode(after.as_bytes())));
        }
        let r = self
            .conn
            .send(None, |http, base| http.get(format!("{base}{path}")))
            .await?;
        if !r.status().is_success() {
            return Err(refusal(r).await);
        }
        #[derive(Deserialize)]
        struct Key {
            key: Option<String>,
            key_hex: Option<String>,
            len: u64,
        }
        #[derive(Deserialize)]
        struct Listing {
            keys: Vec<Key>,
            next: Option<String>,
        }
        let listing: Listing = r
            .json()
            .await
            .map_err(|e| Error::Unavailable(format!("a listing's body: {e}")))?;
        let keys = listing
            .keys
            .into_iter()
            .map(|k| Listed {
                key: match (k.key, k.key_hex) {
                    (Some(text), _) => text.into_bytes(),
                    (None, Some(hex)) => unhex(&hex),
                    (None, None) => Vec::new(),
                },
                len: k.len,
            })
            .collect();
        Ok(Page {
            keys,
            next: listing.next,
        })
    }
}

/// The error a write's answer from the state machine means (one that did not write).
fn refused(response: Response) -> Error {
    match response {
        Response::ConditionFailed { current } => Error::ConditionFailed { current },
        Response::Rejected(message) => Error::Refused {
            status: StatusCode::BAD_REQUEST.as_u16(),
            code: "bad_request".into(),
            message,
        },
        Response::RequestIdRefused(message) => Error::Refused {
            status: StatusCode::CONFLICT.as_u16(),
            code: "request_id_refused".into(),
            message,
        },
        other => Error::Refused {
            status: StatusCode::INTERNAL_SERVER_ERROR.as_u16(),
            code: "unknown".into(),
            message: format!("an answer the client does not know: {other:?}"),
        },
    }
}

/// The bytes of a listing's `key_hex`.
fn unhex(hex: &str) -> Vec<u8> {
    hex.as_bytes()
        .chunks(2)
        .filter_map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_percent_encoded_whole() {
        assert_eq!(encode(b"photo/42"), "photo%2F42");
        assert_eq!(encode(b"a.b+c d"), "a%2Eb%2Bc%20d");
        assert_eq!(encode(&[0xff, 0, b'k']), "%FF%00k");
        assert_eq!(unhex("ff006b"), [0xff, 0, b'k']);
    }

    /// The README's example is this module's doctest (compiled by `cargo test --doc`), less
    /// its hidden lines.
    #[test]
    fn the_readme_shows_the_compiled_example() {
        let source = include_str!("client.rs");
        let doctest: Vec<&str> = source
            .lines()
            .filter_map(|l| l.strip_prefix("//!"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .skip_while(|l| *l != "```no_run")
            .skip(1)
            .take_while(|l| *l != "```")
            .filter(|l| !l.starts_with('#'))
            .collect();
        assert!(doctest.len() > 3, "{doctest:?}");
        let example = format!("```rust\n{}\n```", doctest.join("\n"));
        let readme = include_str!("../../README.md");
        assert!(
            readme.contains(&example),
            "README.md should show:\n{example}"
        );
    }
}
