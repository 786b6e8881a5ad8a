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
//!
//! It waits when the leader has had no answer yet in its term, or when its lease lapsed less
//! than a lease ago (followers slow to answer, or just gone). A leader that has heard from no
//! quorum for longer (cut off from the others: openraft does not make it step down) is refused
//! at once, as before, so that a client of a partitioned leader moves on without a wait per
//! write.

use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;
use openraft::{Instant, RaftMetrics};

use super::Node;
use crate::{NodeId, TypeConfig};

/// What [`lease_state`] found.
#[derive(Debug, PartialEq, Eq)]
enum Lease {
    /// The write can go to openraft now: this node is not the leader (openraft answers
    /// `ForwardToLeader` naming the leader it knows), it is the only voter, its lease holds for
    /// longer than `margin`, or it has been without one for more than a lease (cut off).
    Go,
    /// This node leads but has had no answer in its term yet, or its lease lapsed lately or
    /// holds for less than `margin`: a write now would be (or might be, by the time the Raft
    /// core takes it) refused.
    Wait,
}

/// Whether node `id`, by `m`, leads voters other than itself: only such a leader has a lease
/// to wait for or to lose (a lone voter is its own quorum: openraft never refuses it).
fn leads_others(id: NodeId, m: &RaftMetrics<TypeConfig>) -> bool {
    if !m.state.is_leader() || m.current_leader != Some(id) {
        return false;
    }
    let mut voters = m.membership_config.membership().voter_ids();
    !(voters.next() == Some(id) && voters.next().is_none())
}

/// Whether a write on node `id` should wait for its lease, by `m` (see the module docs).
/// `margin` is a heartbeat interval: a lease about to lapse is renewed by the next heartbeat's
/// answer, and waiting for it costs less than the refusal.
fn lease_state(
    id: NodeId,
    m: &RaftMetrics<TypeConfig>,
    lease: Duration,
    margin: Duration,
) -> Lease {
    if !leads_others(id, m) {
        return Lease::Go;
    }
    match &m.last_quorum_acked {
        // Just elected: no follower has answered yet.
        None => Lease::Wait,
        Some(acked) => {
            let age = acked.elapsed();
            if age + margin < lease || age >= 2 * lease {
                Lease::Go
            } else {
                Lease::Wait
            }
        }
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

/// Whether node `id`, by `m`, leads but has heard from no quorum for a lease or longer: cut
/// off, it cannot commit what it holds, and openraft keeps it leading (and the writes it took
/// waiting) until it hears of another leader.
fn lease_lost(id: NodeId, m: &RaftMetrics<TypeConfig>, lease: Duration) -> bool {
    leads_others(id, m)
        && m.last_quorum_acked
            .as_ref()
            .is_none_or(|acked| acked.elapsed() >= lease)
}

impl Node {
    /// Returns when this node leads and has heard from no quorum for a lease or longer (see
    /// [`lease_lost`]); never while it does not lead. A write taken before waits on such a
    /// leader until the partition heals: [`Node::write_indexed`] answers it "outcome unknown"
    /// instead, so that its client goes on to another node (and retries under the same
    /// request id, which the state machine applies once). It looks first after one lease (a
    /// write answered sooner never looks), then every heartbeat interval.
    pub(crate) async fn lease_lost(&self) -> String {
        let config = self.raft.config();
        let lease = Duration::from_millis(config.election_timeout_max);
        let every = Duration::from_millis(config.heartbeat_interval);
        tokio::time::sleep(lease).await;
        while !lease_lost(self.id, &self.raft.metrics().borrow_watched(), lease) {
            tokio::time::sleep(every).await;
        }
        format!(
            "node {} leads but has heard from no quorum for {lease:?}: the write may be applied \
             or not (send it again under its request id)",
            self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::collections::BTreeSet;
    use std::sync::Arc;

    use openraft::alias::{InstantOf, StoredMembershipOf};
    use openraft::metrics::SerdeInstant;
    use openraft::{Membership, ServerState};

    const LEASE: Duration = Duration::from_millis(600);
    const MARGIN: Duration = Duration::from_millis(50);

    /// Node 1's metrics as leader of `voters`, its last quorum ack `acked_ago` ago.
    fn leading(voters: &[NodeId], acked_ago: Option<Duration>) -> RaftMetrics<TypeConfig> {
        let mut m = RaftMetrics::new_initial(1);
        m.state = ServerState::Leader;
        m.current_leader = Some(1);
        let voters: BTreeSet<NodeId> = voters.iter().copied().collect();
        m.membership_config = Arc::new(StoredMembershipOf::<TypeConfig>::new(
            None,
            Membership::new_with_defaults(vec![voters], []),
        ));
        m.last_quorum_acked =
            acked_ago.map(|d| SerdeInstant::new(InstantOf::<TypeConfig>::now() - d));
        m
    }

    fn state(m: &RaftMetrics<TypeConfig>) -> Lease {
        lease_state(1, m, LEASE, MARGIN)
    }

    #[test]
    fn a_write_waits_only_for_a_lease_that_may_come() {
        let ms = Duration::from_millis;
        // Just elected, no answer yet: wait.
        assert_eq!(state(&leading(&[1, 2, 3], None)), Lease::Wait);
        // Held, with more than a heartbeat of it left: go.
        assert_eq!(state(&leading(&[1, 2, 3], Some(ms(100)))), Lease::Go);
        // About to lapse, or lapsed lately (answers slow): wait for the next answer.
        assert_eq!(state(&leading(&[1, 2, 3], Some(ms(580)))), Lease::Wait);
        assert_eq!(state(&leading(&[1, 2, 3], Some(ms(900)))), Lease::Wait);
        // No answer for two leases: cut off, refused at once by openraft.
        assert_eq!(state(&leading(&[1, 2, 3], Some(ms(1300)))), Lease::Go);
        // A lone voter is its own quorum.
        assert_eq!(state(&leading(&[1], None)), Lease::Go);
        // Not the leader: openraft names the one it knows.
        let mut follower = leading(&[1, 2, 3], None);
        follower.state = ServerState::Follower;
        follower.current_leader = Some(2);
        assert_eq!(state(&follower), Lease::Go);
    }

    #[test]
    fn a_leader_loses_its_writes_to_unknown_only_when_cut_off() {
        let ms = Duration::from_millis;
        let lost = |m: &RaftMetrics<TypeConfig>| lease_lost(1, m, LEASE);
        assert!(!lost(&leading(&[1, 2, 3], Some(ms(100)))));
        assert!(lost(&leading(&[1, 2, 3], Some(ms(700)))));
        assert!(lost(&leading(&[1, 2, 3], None)));
        assert!(
            !lost(&leading(&[1], None)),
            "a lone voter is its own quorum"
        );
        let mut follower = leading(&[1, 2, 3], Some(ms(700)));
        follower.state = ServerState::Follower;
        follower.current_leader = Some(2);
        assert!(!lost(&follower), "a follower's writes end by themselves");
    }
}
