//! The replicated store's integration tests, in one binary so that they run two at a time
//! (most of their time is spent waiting for elections, timeouts and processes, not on a CPU;
//! one binary per file ran them one after another). Each module says what it covers.

/// The in-process cluster and the node processes, shared with the benches.
#[path = "../common/mod.rs"]
mod common;

/// The HTTP API's routes and status codes, against real node processes.
mod api;
/// Large PUTs streamed in chunks: conditions, request ids, limits, a leader killed mid-upload.
mod api_streamed;
/// The client across a leader `kill -9`: retries applied once.
mod client;
/// Raft RPCs refused when misdirected.
mod http;
/// An in-process cluster: partitions, membership changes, leader loss, snapshots.
mod in_process;
/// kill -9 at each step of a snapshot install.
mod install_crash;
/// A leader process killed and restarted: nothing acknowledged lost.
mod leader_kill;
/// A PUT several times larger than a node's memory limit (cgroup v1) streams through.
mod memory;
/// `/metrics` follows requests and replication.
mod metrics;
/// The client across a partition of real processes (the leader cut off by proxies).
mod partition;
/// README.md's Replication section, every command run with `sh` as written.
mod readme;
/// SIGTERM and SIGINT stop a node cleanly under writes.
mod shutdown;
/// A follower process killed during a snapshot install catches up.
mod snapshot_kill;
/// openraft's own storage test suite.
mod suite;
