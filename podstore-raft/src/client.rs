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
//! carries the same id. The state machine remembers the outcome of each client's last
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
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::{CONTENT_RANGE, ETAG, IF_MATCH, IF_NONE_MATCH};
use serde::Deserialize;

use crate::http::{REPLAYED_HEADER, REQUEST_ID_HEADER};
use crate::{Expect, RequestId};

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
/// [`Client::write_attempt`]).
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
#[derive(Debug)]
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
    http: reqwest::Client,
    nodes: Vec<String>,
    /// The node last found leading.
    leader: Mutex<Option<String>>,
    /// The node tried next when no leader is known.
    next: AtomicUsize,
    id: u64,
    seq: AtomicU64,
    retry: Retry,
}

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
        Client {
            http: reqwest::Client::builder()
                .connect_timeout(retry.timeout)
                .build()
                .unwrap_or_default(),
            nodes,
            leader: Mutex::new(None),
            next: AtomicUsize::new(0),
            id: random_id(),
            seq: AtomicU64::new(0),
            retry,
        }
    }

    /// This client's id (the first half of its request ids).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The address of the node last found leading, if any.
    pub fn leader(&self) -> Option<String> {
        self.leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A new request id of this client's (the next sequence number), for [`Client::put_with`]
    /// and [`Client::delete_with`]. Each write must have its own; its retries share it.
    pub fn request_id(&self) -> RequestId {
        RequestId {
            client: self.id,
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }

    /// The node to try: the leader if known, else the next in turn.
    fn target(&self) -> String {
        if let Some(l) = self.leader() {
            return l;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.nodes[i % self.nodes.len()].clone()
    }

    fn set_leader(&self, leader: Option<String>) {
        *self.leader.lock().unwrap_or_else(|e| e.into_inner()) = leader;
    }

    /// Sends the request `build` makes for a node's base URL (`http://host:port`) to the
    /// leader, following redirects and retrying (see the module docs), until a node answers
    /// something other than `421` or `503`.
    ///
    /// `body`: a write's body (`Some` even when empty: a write's exchange is bounded whole, a
    /// read's only until its answer's head).
    async fn send(
        &self,
        body: Option<Bytes>,
        build: impl Fn(&reqwest::Client, &str) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, Error> {
        let start = Instant::now();
        // A write's deadline grows with its body (see `SLOWEST_UPLOAD`); a read has no limit in
        // all, only the client's on connecting and on each read.
        let upload = body
            .as_ref()
            .map(|b| Duration::from_secs_f64(b.len() as f64 / SLOWEST_UPLOAD as f64));
        let deadline = self.retry.deadline + upload.unwrap_or_default();
        let mut backoff = self.retry.first_backoff;
        let mut last = String::from("no attempt made");
        // Whether the last attempt was sent where a 421 said: a second redirect in a row (two
        // nodes each naming the other while leadership moves) waits like a failure.
        let mut redirected = false;
        for _ in 0..self.retry.attempts.max(1) {
            let addr = self.target();
            let request = build(&self.http, &format!("http://{addr}"));
            // `Err`: the failure, to say if the request gives up.
            let sent: Result<reqwest::Response, String> = match (&body, upload) {
                // A write: its whole exchange, limited by its progress (`write_attempt`).
                (Some(body), Some(upload)) => self.write_attempt(request, body, upload).await,
                // A read: until its answer's head; its body is read with a limit per piece
                // (`body`), as long as it streams.
                _ => match tokio::time::timeout(self.retry.timeout, request.send()).await {
                    Ok(sent) => sent.map_err(|e| e.to_string()),
                    Err(_) => Err(format!("no answer in {:?}", self.retry.timeout)),
                },
            };
            match sent {
                Ok(r) if r.status() == StatusCode::MISDIRECTED_REQUEST => {
                    let named = r
                        .headers()
                        .get("x-leader")
                        .and_then(|v| v.to_str().ok())
                        .map(String::from);
                    match named {
                        // The leader is known: go there at once.
                        Some(l) if l != addr && !redirected => {
                            self.set_leader(Some(l));
                            redirected = true;
                            continue;
                        }
                        Some(l) if l != addr => {
                            last = format!("{addr}: not the leader, {l} is");
                            self.set_leader(Some(l));
                        }
                        _ => {
                            last = format!("{addr}: not the leader, and no leader known");
                            self.set_leader(None);
                        }
                    }
                }
                Ok(r) if r.status() == StatusCode::SERVICE_UNAVAILABLE => {
                    // Leadership changed under the request, or Raft is stopping: another node,
                    // later (a write under the same request id is applied once at most).
                    let e = refusal(r).await;
                    last = format!("{addr}: {e}");
                    self.set_leader(None);
                }
                Ok(r) => {
                    self.set_leader(Some(addr));
                    return Ok(r);
                }
                Err(e) => {
                    // Down, or the answer lost: the same, to a client.
                    last = format!("{addr}: {e}");
                    self.set_leader(None);
                }
            }
            redirected = false;
            if start.elapsed() + backoff > deadline {
                break;
            }
            tokio::time::sleep(self.jittered(backoff)).await;
            backoff = (backoff * 2).min(self.retry.max_backoff);
        }
        tracing::debug!(client = self.id, %last, "giving up");
        Err(Error::Unavailable(last))
    }

    /// One attempt of a write: `request` with `body`, sent in pieces of [`UPLOAD_PIECE`] bytes
    /// whose taking by the connection is noted. It fails only when the node stops making
    /// progress, never because the machine (or the link) is slower than some rate: while the
    /// node takes the body, the attempt waits on; it fails when no piece has been taken for
    /// [`Retry::timeout`] and the time the body takes at [`SLOWEST_UPLOAD`] (`upload`) has
    /// passed too (so a quiet machine's limits are the same as before), or when, the whole body
    /// taken, no answer came within [`Retry::timeout`] and the time the node takes to read
    /// [`UPLOAD_IN_FLIGHT`] bytes at the pace it read the rest (what the connection's buffers
    /// may still hold for it).
    async fn write_attempt(
        &self,
        request: reqwest::RequestBuilder,
        body: &Bytes,
        upload: Duration,
    ) -> Result<reqwest::Response, String> {
        let start = Instant::now();
        // The time of the last piece taken (since `start`), and whether it was the last.
        let taken = std::sync::Arc::new(Mutex::new((Duration::ZERO, body.is_empty())));
        let pieces = {
            let (body, taken) = (body.clone(), taken.clone());
            let n = body.len().div_ceil(UPLOAD_PIECE);
            futures::stream::iter((0..n).map(move |i| {
                let end = ((i + 1) * UPLOAD_PIECE).min(body.len());
                *taken.lock().unwrap_or_else(|e| e.into_inner()) =
                    (start.elapsed(), end == body.len());
                Ok::<Bytes, std::io::Error>(body.slice(i * UPLOAD_PIECE..end))
            }))
        };
        // The length said, as for a body sent whole (the node streams a long one in, and
        // refuses one over its limit before reading it).
        let request = request
            .header(reqwest::header::CONTENT_LENGTH, body.len())
            .body(reqwest::Body::wrap_stream(pieces))
            .send();
        tokio::pin!(request);
        let floor = self.retry.timeout + upload;
        loop {
            let (last, done) = *taken.lock().unwrap_or_else(|e| e.into_inner());
            let limit = if done {
                // The last piece went once all but what the buffers hold was read: the rest
                // is read at that pace (at most 4 times as long as the rest took: a body the
                // buffers hold nearly whole says little of the pace, and has the floor).
                let read = body.len().saturating_sub(UPLOAD_IN_FLIGHT).max(1) as f64;
                let in_flight = (UPLOAD_IN_FLIGHT as f64 / read).min(4.0);
                floor.max(last + self.retry.timeout + last.mul_f64(in_flight))
            } else {
                floor.max(last + self.retry.timeout)
            };
            let now = start.elapsed();
            if now >= limit {
                return Err(if done {
                    format!("no answer {:?} after the body was sent", now - last)
                } else {
                    format!("the body not read for {:?}", now - last)
                });
            }
            tokio::select! {
                sent = &mut request => return sent.map_err(|e| e.to_string()),
                // Checked again then: a piece taken meanwhile moves the limit on.
                () = tokio::time::sleep(limit - now) => {}
            }
        }
    }

    /// The body of `r`, each piece of it within [`Retry::timeout`] of the one before: a large
    /// value takes as long as it streams, a node that stops sending fails the read.
    async fn body(&self, mut r: reqwest::Response) -> Result<Bytes, Error> {
        let mut body = bytes::BytesMut::with_capacity(r.content_length().unwrap_or(0) as usize);
        loop {
            match tokio::time::timeout(self.retry.timeout, r.chunk()).await {
                Ok(Ok(Some(piece))) => body.extend_from_slice(&piece),
                Ok(Ok(None)) => return Ok(body.freeze()),
                Ok(Err(e)) => return Err(Error::Unavailable(format!("the value's body: {e}"))),
                Err(_) => {
                    return Err(Error::Unavailable(format!(
                        "the value's body: nothing for {:?}",
                        self.retry.timeout
                    )));
                }
            }
        }
    }

    /// `backoff` less up to half of it, so that clients that failed together do not all come
    /// back together.
    fn jittered(&self, backoff: Duration) -> Duration {
        let mut h = std::hash::RandomState::new().build_hasher();
        h.write_u64(self.id);
        let cut = h.finish() % (backoff.as_micros() as u64 / 2 + 1);
        backoff - Duration::from_micros(cut)
    }

    /// Sets `key` to `value`.
    pub async fn put(&self, key: &[u8], value: impl Into<Bytes>) -> Result<Written, Error> {
        self.put_with(key, value, None, self.request_id()).await
    }

    /// Sets `key` to `value` only if `expect` holds for its value; else
    /// [`Error::ConditionFailed`].
    pub async fn put_if(
        &self,
        key: &[u8],
        value: impl Into<Bytes>,
        expect: Expect,
    ) -> Result<Written, Error> {
        self.put_with(key, value, Some(expect), self.request_id())
            .await
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
        let (path, value) = (format!("/kv/{}", encode(key)), value.into());
        let request_id = format!("{}:{}", id.client, id.seq);
        let r = self
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

    /// Removes `key`; returns whether it had a value.
    pub async fn delete(&self, key: &[u8]) -> Result<bool, Error> {
        self.delete_with(key, None, self.request_id()).await
    }

    /// Removes `key` only if its value has version `version`; else
    /// [`Error::ConditionFailed`].
    pub async fn delete_if(&self, key: &[u8], version: u64) -> Result<(), Error> {
        self.delete_with(key, Some(version), self.request_id())
            .await
            .map(drop)
    }

    /// A delete (conditional if `version` is given) under request id `id` (see
    /// [`Client::put_with`]); returns whether the key had a value.
    pub async fn delete_with(
        &self,
        key: &[u8],
        version: Option<u64>,
        id: RequestId,
    ) -> Result<bool, Error> {
        let path = format!("/kv/{}", encode(key));
        let request_id = format!("{}:{}", id.client, id.seq);
        let r = self
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
        let bytes = self.body(r).await?;
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
