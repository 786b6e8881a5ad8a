//! The connection half of a [`Client`](super::Client): the nodes, the leader last found, and
//! the sending of one request with redirects and retries. Shared (behind an `Arc`) with the
//! tasks that send coalesced writes ([`super::coalesce`]), which outlive the call that started
//! them.

use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::StatusCode;

use super::{Error, Retry, SLOWEST_UPLOAD, UPLOAD_IN_FLIGHT, UPLOAD_PIECE, refusal};

/// What a [`Client`](super::Client) sends requests with.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) http: reqwest::Client,
    pub(super) nodes: Vec<String>,
    /// The node last found leading.
    pub(super) leader: Mutex<Option<String>>,
    /// The node tried next when no leader is known.
    pub(super) next: AtomicUsize,
    pub(super) id: u64,
    pub(super) retry: Retry,
}

impl Conn {
    /// The address of the node last found leading, if any.
    pub(super) fn leader(&self) -> Option<String> {
        self.leader
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
    pub(super) async fn send(
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
    pub(super) async fn body(&self, mut r: reqwest::Response) -> Result<Bytes, Error> {
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
}
