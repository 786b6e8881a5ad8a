//! Snapshots of a large state machine:
//!
//! - build: a [`StateMachine`] filled to `PODSTORE_BENCH_BUILD_GIB` GiB of 16 KiB values
//!   (applied through openraft's state machine trait directly: a cluster would hold the data in
//!   its logs as well, three times over), then one snapshot built by its builder: the time, and
//!   the bytes of the snapshot's files that were copied (a file with one link) rather than hard
//!   linked;
//! - ship and install: a one-node podstore-raft cluster (in-process router) filled with
//!   `PODSTORE_BENCH_SHIP_GIB` GiB, a snapshot built through Raft and the log purged behind it,
//!   then a new learner added: the time until it has the snapshot installed (shipped through the
//!   crate's transfer frames, written to the learner's disk, installed), and the bytes shipped.
//!
//! Everything is written under `PODSTORE_BENCH_DIR` (default the temporary directory) and
//! removed at the end.

use std::path::Path;
use std::time::{Duration, Instant};

use openraft::alias::EntryOf;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::entry::RaftEntry;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use podstore_raft::{Op, Request, StateMachine, TypeConfig};

use crate::common;
use crate::stats::env_f64;

const GIB: f64 = (1u64 << 30) as f64;
/// Values of the large state machines.
const VALUE: usize = 16 << 10;
/// Puts per log entry (1 MiB).
const PER_ENTRY: u64 = 64;

fn root() -> tempfile::TempDir {
    match std::env::var_os("PODSTORE_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    }
}

fn batch(from: u64, to: u64) -> Request {
    Request::Batch(
        (from..to)
            .map(|i| Op::Put {
                key: format!("s/{i:09}").into_bytes(),
                value: vec![(i % 251) as u8; VALUE],
            })
            .collect(),
    )
}

/// Bytes of the files under `dir`: (hard-linked, copied: one link only).
fn file_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut linked, mut copied) = (0, 0);
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_dir() {
            let (l, c) = file_bytes(&e.path());
            linked += l;
            copied += c;
        } else if m.nlink() > 1 {
            linked += m.len();
        } else {
            copied += m.len();
        }
    }
    (linked, copied)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

pub async fn run() {
    build(env_f64("PODSTORE_BENCH_BUILD_GIB", 1.0)).await;
    ship(env_f64("PODSTORE_BENCH_SHIP_GIB", 1.0)).await;
}

async fn build(gib: f64) {
    let root = root();
    let mut sm = StateMachine::open(root.path().join("sm"), root.path().join("snapshots")).unwrap();
    let keys = (gib * GIB) as u64 / VALUE as u64;
    let start = Instant::now();
    let (mut i, mut index) = (0u64, 1u64);
    while i < keys {
        let mut entries = Vec::new();
        for _ in 0..16 {
            if i >= keys {
                break;
            }
            let to = keys.min(i + PER_ENTRY);
            let log_id = openraft::testing::log_id::<TypeConfig>(1, 1, index);
            entries.push(Ok((
                EntryOf::<TypeConfig>::new_normal(log_id, batch(i, to)),
                None,
            )));
            (i, index) = (to, index + 1);
        }
        sm.apply(futures::stream::iter(entries)).await.unwrap();
    }
    let fill = start.elapsed().as_secs_f64();
    let (l, c) = file_bytes(&sm.data_dir());
    let mut builder = sm.get_snapshot_builder().await;
    let start = Instant::now();
    let snap = builder.build_snapshot().await.unwrap();
    let secs = start.elapsed().as_secs_f64();
    let (linked, copied) = file_bytes(snap.snapshot.path());
    println!(
        "snapshot build: state machine of {keys} keys of 16 KiB ({:.0} MiB in its store, filled in {fill:.1} s): built in {secs:.3} s; snapshot files {:.0} MiB hard-linked, {:.3} MiB copied",
        mib(l + c),
        mib(linked),
        mib(copied)
    );
    drop((builder, snap, sm));
}

async fn ship(gib: f64) {
    let c = crate::bench_cluster();
    let leader = c.start_cluster(&[1]).await;
    let node = c.node(leader);
    let keys = (gib * GIB) as u64 / VALUE as u64;
    let start = Instant::now();
    // Four writers, so that the fill is not one flush per entry.
    let writers: Vec<_> = (0..4u64)
        .map(|w| {
            let node = node.clone();
            tokio::spawn(async move {
                let mut i = w * PER_ENTRY;
                while i < keys {
                    node.write(batch(i, keys.min(i + PER_ENTRY))).await.unwrap();
                    i += 4 * PER_ENTRY;
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    let fill = start.elapsed().as_secs_f64();
    let last = node
        .raft()
        .metrics()
        .borrow_watched()
        .last_log_index
        .unwrap();
    c.wait_applied(leader, last).await;
    let applied = node.raft().metrics().borrow_watched().last_applied.unwrap();
    let start = Instant::now();
    node.raft().trigger().snapshot().await.unwrap();
    node.raft()
        .wait(Some(Duration::from_secs(600)))
        .snapshot(applied, "built")
        .await
        .unwrap();
    let build = start.elapsed().as_secs_f64();
    node.raft()
        .wait(Some(Duration::from_secs(60)))
        .purged(Some(applied), "purged")
        .await
        .unwrap();
    c.start(2).await;
    let start = Instant::now();
    node.add_learner(2, "node-2").await.unwrap();
    learner_wait(&c, applied.index).await;
    let install = start.elapsed().as_secs_f64();
    let learner = c.node(2);
    let (linked, copied) = file_bytes(&learner.state_machine().data_dir());
    println!(
        "snapshot ship: {keys} keys of 16 KiB (written in {fill:.1} s): built through Raft in {build:.3} s; shipped to a new learner and installed in {install:.2} s ({:.0} MiB in the learner's store)",
        mib(linked + copied)
    );
    for id in [1, 2] {
        c.stop(id).await;
    }
}

/// Waits (up to 10 minutes: a loaded machine) until the learner, node 2, has applied `index`.
async fn learner_wait(c: &common::Cluster, index: u64) {
    c.node(2)
        .raft()
        .wait(Some(Duration::from_secs(600)))
        .applied_index_at_least(Some(index), "the snapshot installed")
        .await
        .unwrap();
}
