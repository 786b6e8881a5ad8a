//! A write on a leader waits for its quorum-ack lease instead of being refused as if this node
//! were not the leader.
//!
//! openraft (0.10) lets a leader append a client's entry only while its *quorum-ack lease*
//! holds: while a quorum (the leader counting itself) has acknowledged an RPC the leader sent
//! less than the lease (`election_timeout_max`) ago. Otherwise it refuses the write before
//! appending anything, with a `ForwardToLeader` that names no leader (reason `LeaseExpired`):
//! this crate's `NotLeader { leader: None }`, HTTP 421 without `x-leader`, from the leader
//! itself.
//!
//! A leader just elected holds no lease at all until a follower has answered its first RPC, and
//! a follower answers an AppendEntries (a heartbeat too) only once its log is durable up to what
//! it has accepted: after its vote's sync and the fdatasync of the new leader's first entry. On a
//! loaded machine that takes hundreds of milliseconds, while every node already names the new
//! leader (a follower publishes the leader when it accepts the RPC, before it answers). A
//! client that found the leader and wrote at once was told there was none: the in-process
//! cluster tests failed that way under load (issue 40). So a write on a leader without a lease
//! first waits, at most one lease period, for a follower's answer: whatever openraft then
//! decides (a write, or a refusal if no follower answered in time) is what the caller gets.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::{Instant, RaftMetrics};

use super::Node;
use crate::{NodeId, TypeConfig};

/// What [`lease_state`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Lease {
    /// The write can go to openraft now: this node is not the leader (openraft answers
    /// `ForwardToLeader` naming the leader it knows), it is the only voter, or its lease
    /// holds for longer than `margin`.
    Go,
    /// This node leads but its lease has lapsed or holds for less than `margin`: a write now
    /// would be (or might be, by the time the Raft core takes it) refused.
    Wait,
}

/// Whether a write on node `id` should wait for its lease, by `m` (see the module docs).
/// `margin` is a heartbeat interval: a lease about to lapse is renewed by the next heartbeat's
/// answer, and waiting for it costs less than the refusal.
pub(crate) fn lease_state(
    id: NodeId,
    m: &RaftMetrics<TypeConfig>,
    lease: Duration,
    margin: Duration,
) -> Lease {
    if !m.state.is_leader() || m.current_leader != Some(id) {
        return Lease::Go;
    }
    let mut voters = m.membership_config.membership().voter_ids();
    if voters.next() == Some(id) && voters.next().is_none() {
        // A lone voter is its own quorum: openraft never refuses it.
        return Lease::Go;
    }
    match &m.last_quorum_acked {
        Some(acked) if acked.elapsed() + margin < lease => Lease::Go,
        _ => Lease::Wait,
    }
}

impl Node {
    /// Waits, at most one lease period, until a write on this node would not be refused for a
    /// lapsed lease (see the module docs); at once if it would not be.
    pub(crate) async fn await_lease(&self) {
        let config = self.raft.config();
        let lease = Duration::from_millis(config.election_timeout_max);
        let margin = Duration::from_millis(config.heartbeat_interval);
        let id = self.id;
        let go = move |m: &RaftMetrics<TypeConfig>| lease_state(id, m, lease, margin) == Lease::Go;
        if go(&self.raft.metrics().borrow_watched()) {
            return;
        }
        // Every answer from a follower renews the lease and changes the metrics (their
        // `last_quorum_acked`): the wait ends at the first one that makes it hold.
        let waited = std::time::Instant::now();
        let r = self
            .raft
            .wait(Some(lease))
            .metrics(go, "the leader's quorum-ack lease")
            .await;
        tracing::debug!(
            node = id,
            waited = ?waited.elapsed(),
            held = r.is_ok(),
            "a write waited for the leader's lease"
        );
    }
}
