//! Coalesced writes: a client's concurrent small writes sent together, as one `POST /writes`
//! that the leader proposes as one log entry ([`crate::Request::Many`]).
//!
//! Each write of a [`Client`](super::Client) would otherwise cost its own HTTP exchange at both
//! ends and its own Raft entry, which on a loaded machine is most of a small write's CPU
//! (docs/benchmarks.md, "Where a request's CPU goes"). Here a write joins a queue; at most
//! [`Client::coalesce`](super::Client::coalesce)'s number of requests are in flight, each sent
//! by a task that takes what the queue holds (up to [`MAX_WRITES_PER_REQUEST`] writes and
//! [`MAX_BYTES_PER_REQUEST`] bytes), sends it, hands each write its own answer, lets those
//! writers run (so that their next writes join the next request), and takes again until the
//! queue is empty. There is no timer: a write waits only while every request slot is
//! busy, so a lone write leaves at once and writes gather only under load (the group commit
//! of podstore's own writer, at the client). The tasks are tokio tasks, not the callers'
//! futures: a caller that stops waiting (a timeout around the call) does not take the other
//! writes of its request with it.
//!
//! A request carries no two writes of one key (its writes share a version, the entry's index):
//! a write whose key is already in the request waits for the next, behind it, so the writes of
//! one key leave in the order they were made.
//!
//! Each request has a request id of its own, taken when it is first sent and kept by its
//! retries: the state machine applies the request at most once, so a retry after a lost answer
//! replays each write's first outcome. One id a request, not one a write: each id costs every
//! node a record in its store, and with one a write a put cost two (measured: 64 writers
//! through one client, 17 % more writes per second and 10 µs less CPU a write without them;
//! docs/benchmarks.md). A write given an id by its caller ([`Client::put_with`](super::Client::put_with))
//! keeps it inside the request, for the caller's own retries.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use reqwest::header::CONTENT_TYPE;
use tokio::sync::oneshot;

use super::conn::Conn;
use super::{Error, refusal};
use crate::http::{REQUEST_ID_HEADER, WRITES_CONTENT_TYPE};
use crate::{Request, RequestId, Response};

/// A client's request ids: its id, and the last sequence number given (shared by the client's
/// own ids and its requests').
#[derive(Debug, Clone)]
pub(super) struct Ids {
    client: u64,
    seq: Arc<AtomicU64>,
}

impl Ids {
    pub(super) fn new(client: u64, seq: Arc<AtomicU64>) -> Ids {
        Ids { client, seq }
    }

    /// The next request id.
    pub(super) fn next(&self) -> RequestId {
        RequestId {
            client: self.client,
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
        }
    }
}

/// The most writes one request carries.
pub const MAX_WRITES_PER_REQUEST: usize = 256;
/// The most bytes of keys and values one request carries (a single larger write goes alone).
pub const MAX_BYTES_PER_REQUEST: usize = 1 << 20;
/// The largest value a put sends through the queue: a larger one takes `PUT /kv/...` on its
/// own (streamed, and not worth gathering: its body is the cost, not the exchange).
pub const MAX_COALESCED_VALUE: usize = 64 << 10;

/// The most times a sender yields after answering its writers, to let them write again
/// before it takes the next request (it stops at the first yield that brings none).
const MAX_GATHER_YIELDS: usize = 16;

/// One write's answer: the entry's index and the write's own response.
type Answer = Result<(u64, Response), Error>;

struct Pending {
    write: Request,
    bytes: usize,
    answer: oneshot::Sender<Answer>,
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Pending>,
    /// The bytes of the writes waiting.
    bytes: usize,
    /// Tasks sending (at most `Coalescer::in_flight`); while any is, the queue is emptied.
    senders: usize,
}

/// The queue of a client's coalesced writes.
pub(super) struct Coalescer {
    in_flight: usize,
    ids: Ids,
    queue: Mutex<Queue>,
}

impl std::fmt::Debug for Coalescer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer")
            .field("in_flight", &self.in_flight)
            .finish_non_exhaustive()
    }
}

/// A sender task's slot: given back when the queue is found empty (with the lock held, so a
/// write queued after sees a free slot), or when the task ends otherwise (a panic).
struct Slot {
    coalescer: Arc<Coalescer>,
    held: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.held {
            self.coalescer.lock().senders -= 1;
        }
    }
}

impl Slot {
    /// The next request's writes, in the order they came; `None` when none is waiting (the
    /// slot given back).
    fn take(&mut self) -> Option<Vec<Pending>> {
        let mut q = self.coalescer.lock();
        if q.waiting.is_empty() {
            q.senders -= 1;
            self.held = false;
            return None;
        }
        let mut taken = Vec::new();
        let mut keys: HashSet<Vec<u8>> = HashSet::new();
        let mut bytes = 0;
        let mut left = VecDeque::new();
        while let Some(p) = q.waiting.pop_front() {
            let full = taken.len() == MAX_WRITES_PER_REQUEST
                || (!taken.is_empty() && bytes + p.bytes > MAX_BYTES_PER_REQUEST);
            if full {
                left.push_back(p);
                left.extend(q.waiting.drain(..));
                break;
            }
            if keys.insert(p.write.key().unwrap_or_default().to_vec()) {
                bytes += p.bytes;
                q.bytes -= p.bytes;
                taken.push(p);
            } else {
                left.push_back(p);
            }
        }
        q.waiting = left;
        // In the order of their request ids (taken in the order the writes came, which may
        // differ by a little from the order their ids were given): applied in order, each id
        // moves its client's highest up by one (src/state_machine/once.rs). No two name one
        // key, so their order is no one's promise.
        taken.sort_by_key(|p| match &p.write {
            Request::Once { id, .. } => (id.client, id.seq),
            _ => (0, 0),
        });
        Some(taken)
    }
}

impl Coalescer {
    /// A queue sending at most `in_flight` requests at once (0: none; see [`Coalescer::on`]).
    pub(super) fn new(in_flight: usize, ids: Ids) -> Coalescer {
        Coalescer {
            in_flight,
            ids,
            queue: Mutex::new(Queue::default()),
        }
    }

    /// Whether writes are coalesced at all.
    pub(super) fn on(&self) -> bool {
        self.in_flight > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sends `write` with whatever other writes are waiting; its answer.
    pub(super) async fn write(self: &Arc<Self>, conn: &Arc<Conn>, write: Request) -> Answer {
        let (tx, rx) = oneshot::channel();
        let bytes = write.payload_len();
        let start = {
            let mut q = self.lock();
            q.waiting.push_back(Pending {
                write,
                bytes,
                answer: tx,
            });
            q.bytes += bytes;
            // A second request only when more is waiting than the requests in flight will
            // take: each request is a Raft round trip, whose fixed cost on every node its
            // writes share, and requests in flight together split the writes waiting (more
            // rounds for the same writes) and may be applied in either order (a client's
            // request ids out of order cost the state machine more: src/state_machine/once.rs).
            // Measured: two or three always in flight cost 12-20 % more CPU per write
            // (docs/design-replication.md, "Coalesced writes").
            let more = q.waiting.len() > q.senders * MAX_WRITES_PER_REQUEST
                || q.bytes > q.senders * MAX_BYTES_PER_REQUEST;
            let start = q.senders < self.in_flight && (q.senders == 0 || more);
            if start {
                q.senders += 1;
            }
            start
        };
        if start {
            let slot = Slot {
                coalescer: self.clone(),
                held: true,
            };
            tokio::spawn(send_all(slot, conn.clone()));
        }
        rx.await.unwrap_or_else(|_| {
            Err(Error::Unavailable(
                "the task sending this write ended without an answer".into(),
            ))
        })
    }
}

/// A sender task: requests until the queue is empty.
async fn send_all(mut slot: Slot, conn: Arc<Conn>) {
    let ids = slot.coalescer.ids.clone();
    while let Some(taken) = slot.take() {
        let (writes, answers): (Vec<Request>, Vec<oneshot::Sender<Answer>>) =
            taken.into_iter().map(|p| (p.write, p.answer)).unzip();
        match send(&conn, &writes, ids.next()).await {
            Ok((index, responses)) => {
                for (answer, response) in answers.into_iter().zip(responses) {
                    let _ = answer.send(Ok((index, response)));
                }
                // Let the writers just answered run before taking again: each writes its
                // next at once, and taken now the queue would hold only the few that were
                // already waiting. The next request would then leave with those few and the
                // rest wait a whole round behind it: requests of alternately a few writes
                // and nearly all, a round each. Measured (64 and 16 writers, three node
                // processes on one disk): +29 to +34 % and +41 to +69 % writes per second
                // (docs/benchmarks.md). One yield is not enough: it lets the tasks queued on
                // this worker run, while writers woken on another worker come a little later
                // (64 writers: 46 writes a request with one yield). So yield again as long as
                // the last yield brought more writes, up to [`MAX_GATHER_YIELDS`]: a writer
                // that does not write again costs one yield, as before. Measured (zram, medians
                // of 7 interleaved runs): 64 writers +8 %, 16 writers +10 %, 1 writer alike.
                let mut waiting = slot.coalescer.lock().waiting.len();
                for _ in 0..MAX_GATHER_YIELDS {
                    tokio::task::yield_now().await;
                    let now = slot.coalescer.lock().waiting.len();
                    if now == waiting {
                        break;
                    }
                    waiting = now;
                }
            }
            // A value over the node's limit refuses the whole request: each write alone, so
            // that only the ones too large are refused.
            Err(Error::Refused { status: 413, .. }) if writes.len() > 1 => {
                for (write, answer) in writes.into_iter().zip(answers) {
                    let alone = send(&conn, std::slice::from_ref(&write), ids.next()).await;
                    let _ = answer.send(alone.map(|(index, mut r)| (index, r.remove(0))));
                }
            }
            Err(e) => {
                for answer in answers {
                    let _ = answer.send(Err(e.clone()));
                }
            }
        }
    }
}

/// One `POST /writes` of `writes` under request id `id` (retried, redirected: [`Conn::send`]):
/// the entry's index and each write's answer.
async fn send(
    conn: &Conn,
    writes: &[Request],
    id: RequestId,
) -> Result<(u64, Vec<Response>), Error> {
    let body = Bytes::from(crate::encode(&writes).map_err(|e| Error::Unavailable(e.to_string()))?);
    let id = format!("{}:{}", id.client, id.seq);
    let r = conn
        .send(Some(body), |http, base| {
            http.post(format!("{base}/writes"))
                .header(CONTENT_TYPE, WRITES_CONTENT_TYPE)
                .header(REQUEST_ID_HEADER, &id)
        })
        .await?;
    if !r.status().is_success() {
        return Err(refusal(r).await);
    }
    let bytes = conn.body(r).await?;
    let (index, responses): (u64, Vec<Response>) = crate::decode(&bytes)
        .map_err(|e| Error::Unavailable(format!("a /writes answer not in postcard: {e}")))?;
    if responses.len() != writes.len() {
        return Err(Error::Unavailable(format!(
            "{} answers to {} writes",
            responses.len(),
            writes.len()
        )));
    }
    Ok((index, responses))
}
