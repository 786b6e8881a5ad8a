//! The leader's stream of AppendEntries to one follower: a request that carries only a commit
//! index waits a moment for the next, which carries the same commit or a newer one.
//!
//! openraft replicates to each follower through a stream of requests, one in flight at a time.
//! Under load every entry costs each follower two requests: the entry, and, once a majority has
//! it, an entry-less request that tells the follower the new commit index (openraft sends one
//! whenever the commit moves and no new entry is there to carry it). Measured with three node
//! processes and 64 writers: 2.0 requests a follower for each entry. An exchange costs both
//! ends mostly by the request (system calls, wake-ups of the threads that take it), not by
//! its bytes: without the entry-less half, 46 → 42 µs of CPU a put (docs/benchmarks.md).
//!
//! So a request without entries is held for at most [`COMMIT_LINGER`]: if the stream gives the
//! next request meanwhile, from the same point of the follower's log (`prev_log_id`) under the
//! same vote, only that one is sent, and its answer answers both: the held request asked "do
//! you have `prev_log_id`, and learn commit `c`"; the next asks the same of the same
//! `prev_log_id` with a commit at least `c` (and perhaps entries), so its success means the
//! held one's, and its refusal (a conflict at `prev_log_id`, a higher vote) is what the held one
//! would have met. The answers come out in the order of the requests, as openraft requires.
//!
//! What the wait costs: a follower learns a commit (and applies it) up to [`COMMIT_LINGER`]
//! later when no entry follows it. The leader's commit, and so every answer to a client, does
//! not wait: it needs the followers' acknowledgements of entries, not their knowledge of the
//! commit. A stream that ends at once (a heartbeat, a probe) is sent without waiting.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use futures::stream::{Stream, StreamExt};
use openraft::entry::RaftEntry;
use openraft::error::RPCError;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, StreamAppendResult};

use crate::TypeConfig;

/// How long a request that carries only a commit index waits for the next request, which
/// would carry it instead (see the module's docs). Under load the next entry comes well
/// within it: 1.03 requests a follower per entry with it, at 64 writers (an entry every
/// ~1.5 ms; docs/benchmarks.md). Only a follower's knowledge of a commit waits for it.
pub const COMMIT_LINGER: Duration = Duration::from_millis(1);

type Request = AppendEntriesRequest<TypeConfig>;
type Answer = Result<StreamAppendResult<TypeConfig>, RPCError<TypeConfig>>;

struct State<S, F> {
    input: futures::stream::Fuse<S>,
    send: F,
    linger: Duration,
    /// A request taken from the input while waiting, that could not stand in for the one held.
    next: Option<Request>,
    /// Answers ready to be given, in the order of their requests.
    ready: VecDeque<Answer>,
    /// An answer ended the stream (an error, a refusal, a partial success).
    done: bool,
}

/// The answers to `input`'s requests, sent by `send`, an entry-less request held up to
/// `linger` for a successor that can carry it (zero: every request sent as it comes).
pub(super) fn append_stream<'s, S, F, Fut>(
    input: S,
    linger: Duration,
    send: F,
) -> impl Stream<Item = Answer> + Send + 's
where
    S: Stream<Item = Request> + Send + Unpin + 's,
    F: FnMut(Request) -> Fut + Send + 's,
    Fut: Future<Output = Result<AppendEntriesResponse<TypeConfig>, RPCError<TypeConfig>>> + Send,
{
    let state = State {
        input: input.fuse(),
        send,
        linger,
        next: None,
        ready: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(answer) = st.ready.pop_front() {
                return Some((answer, st));
            }
            if st.done {
                return None;
            }
            let mut req = match st.next.take() {
                Some(r) => r,
                None => st.input.next().await?,
            };
            // The requests `req` stands in for: the point of the log each asked about.
            let mut held = 0usize;
            while req.entries.is_empty() && !st.linger.is_zero() {
                // Dropping a pending `next()` at the timeout loses nothing: the stream keeps
                // the request it is making, and gives it to the next call.
                match tokio::time::timeout(st.linger, st.input.next()).await {
                    Ok(Some(n)) if n.vote == req.vote && n.prev_log_id == req.prev_log_id => {
                        held += 1;
                        req = n;
                    }
                    Ok(Some(n)) => {
                        st.next = Some(n);
                        break;
                    }
                    Ok(None) | Err(_) => break,
                }
            }
            let prev = req.prev_log_id;
            let last = req.entries.last().map(RaftEntry::log_id).or(prev);
            match (st.send)(req).await {
                Ok(resp) => {
                    let partial = match &resp {
                        AppendEntriesResponse::PartialSuccess(p) => Some(*p),
                        _ => None,
                    };
                    let result = resp.into_stream_result(prev, last);
                    if result.is_ok() {
                        // Each held request asked about `prev`, which the follower has.
                        st.ready.extend((0..held).map(|_| Ok(Ok(prev))));
                        // A partial success ends the stream, as openraft's own sender does.
                        st.done = partial.is_some_and(|p| p != last);
                    } else {
                        // The first request (held or not) meets the refusal; the stream ends
                        // with it.
                        st.done = true;
                    }
                    st.ready.push_back(Ok(result));
                }
                Err(e) => {
                    st.ready.push_back(Err(e));
                    st.done = true;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use openraft::RaftTypeConfig;
    use openraft::alias::{EntryOf, LogIdOf, VoteOf};
    use openraft::raft::StreamAppendError;
    use openraft::vote::RaftLeaderIdExt;

    use super::*;

    fn log_id(index: u64) -> LogIdOf<TypeConfig> {
        LogIdOf::<TypeConfig>::new(
            <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
            index,
        )
    }

    fn req(prev: u64, entries: std::ops::Range<u64>, commit: u64) -> Request {
        AppendEntriesRequest {
            vote: VoteOf::<TypeConfig>::new_committed(1, 1),
            prev_log_id: Some(log_id(prev)),
            leader_commit: Some(log_id(commit)),
            entries: entries
                .map(|i| EntryOf::<TypeConfig>::new_blank(log_id(i)))
                .collect(),
        }
    }

    /// What a test compares of a request: its previous index, its entries' and its commit.
    type Shape = (Option<u64>, Vec<u64>, Option<u64>);

    fn shape(r: &Request) -> Shape {
        (
            r.prev_log_id.as_ref().map(|l| l.index),
            r.entries.iter().map(|e| e.log_id.index).collect(),
            r.leader_commit.as_ref().map(|l| l.index),
        )
    }

    fn shapes(rs: &[Request]) -> Vec<Shape> {
        rs.iter().map(shape).collect()
    }

    /// Runs `input` (each request after its delay, in ms) through the stream; the follower
    /// answers each request with `answer`. Returns what was sent and the answers.
    async fn run(
        input: Vec<(u64, Request)>,
        answer: impl Fn(&Request) -> AppendEntriesResponse<TypeConfig> + Send + Sync + 'static,
    ) -> (Vec<Shape>, Vec<Answer>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let input = Box::pin(futures::stream::iter(input).then(|(ms, r)| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            r
        }));
        let s = sent.clone();
        let answer = Arc::new(answer);
        let out = append_stream(input, COMMIT_LINGER, move |r: Request| {
            let a = answer(&r);
            s.lock().unwrap().push(shape(&r));
            async move { Ok(a) }
        })
        .collect::<Vec<_>>()
        .await;
        let sent = sent.lock().unwrap().clone();
        (sent, out)
    }

    #[tokio::test(start_paused = true)]
    async fn a_commit_followed_at_once_rides_with_the_next_request() {
        let (sent, out) = run(vec![(0, req(5, 6..6, 4)), (0, req(5, 6..8, 5))], |_| {
            AppendEntriesResponse::Success
        })
        .await;
        assert_eq!(sent, shapes(&[req(5, 6..8, 5)]));
        assert_eq!(
            out,
            vec![Ok(Ok(Some(log_id(5)))), Ok(Ok(Some(log_id(7))))],
            "one answer a request, in order"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn commits_in_a_row_are_sent_as_the_last() {
        let (sent, out) = run(
            vec![
                (0, req(5, 6..6, 3)),
                (0, req(5, 6..6, 4)),
                (2, req(5, 6..7, 5)),
            ],
            |_| AppendEntriesResponse::Success,
        )
        .await;
        // The third comes after the linger: the second goes alone, standing in for the first.
        assert_eq!(sent, shapes(&[req(5, 6..6, 4), req(5, 6..7, 5)]));
        assert_eq!(
            out,
            vec![
                Ok(Ok(Some(log_id(5)))),
                Ok(Ok(Some(log_id(5)))),
                Ok(Ok(Some(log_id(6))))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_request_is_sent_without_waiting() {
        let start = tokio::time::Instant::now();
        let (sent, out) = run(vec![(0, req(5, 6..6, 5))], |_| {
            AppendEntriesResponse::Success
        })
        .await;
        assert_eq!(sent, shapes(&[req(5, 6..6, 5)]));
        assert_eq!(out, vec![Ok(Ok(Some(log_id(5))))]);
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "a heartbeat's stream ends at once"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_from_another_point_is_not_merged() {
        // Not a stream openraft makes (its next request starts where the last ended), but
        // nothing is answered for a request that was not asked.
        let (sent, out) = run(vec![(0, req(5, 6..6, 4)), (0, req(6, 7..8, 5))], |_| {
            AppendEntriesResponse::Success
        })
        .await;
        assert_eq!(sent, shapes(&[req(5, 6..6, 4), req(6, 7..8, 5)]));
        assert_eq!(out, vec![Ok(Ok(Some(log_id(5)))), Ok(Ok(Some(log_id(7))))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_refusal_answers_the_first_request_and_ends_the_stream() {
        let (sent, out) = run(
            vec![
                (0, req(5, 6..6, 4)),
                (0, req(5, 6..8, 5)),
                (0, req(7, 8..9, 5)),
            ],
            |_| AppendEntriesResponse::Conflict,
        )
        .await;
        assert_eq!(sent, shapes(&[req(5, 6..8, 5)]));
        assert_eq!(out, vec![Ok(Err(StreamAppendError::Conflict(log_id(5))))]);
        let higher = VoteOf::<TypeConfig>::new(2, 2);
        let (_, out) = run(
            vec![(0, req(5, 6..6, 4)), (0, req(5, 6..8, 5))],
            move |_| AppendEntriesResponse::HigherVote(higher),
        )
        .await;
        assert_eq!(out, vec![Ok(Err(StreamAppendError::HigherVote(higher)))]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_partial_success_answers_all_it_covers_then_ends() {
        let (sent, out) = run(
            vec![
                (0, req(5, 6..6, 4)),
                (0, req(5, 6..9, 5)),
                (0, req(8, 9..10, 5)),
            ],
            |_| AppendEntriesResponse::PartialSuccess(Some(log_id(6))),
        )
        .await;
        assert_eq!(sent, shapes(&[req(5, 6..9, 5)]));
        assert_eq!(out, vec![Ok(Ok(Some(log_id(5)))), Ok(Ok(Some(log_id(6))))]);
    }
}
