//! kill -9 at each step of a snapshot install, in a real process: for every step the install
//! goes through (`podstore_raft::testing::install_steps`), a child process (this test binary,
//! re-run) opens a state machine holding an old state and installs another node's snapshot
//! with `PODSTORE_RAFT_KILL_AT` naming that step, so that it SIGKILLs itself there. This
//! process then reopens the state machine from its directory and checks that it holds exactly
//! the old state or exactly the new one, byte for byte (every key and value, the applied log id,
//! the membership), with no generation, partial snapshot or temporary file left behind; and
//! that installing the snapshot again succeeds.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use openraft::alias::{EntryOf, LogIdOf, SnapshotMetaOf, StoredMembershipOf};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::vote::RaftLeaderIdExt;
use openraft::{Membership, RaftTypeConfig};
use podstore_raft::testing::{KILL_AT_VAR, install_steps};
use podstore_raft::{Request, SnapshotDir, StateMachine, TypeConfig};

type Meta = SnapshotMetaOf<TypeConfig>;
type LogId = LogIdOf<TypeConfig>;

/// The child's node directory, the snapshot it installs and that snapshot's metadata (JSON).
const CHILD_DIR: &str = "PODSTORE_RAFT_TEST_INSTALL_DIR";
const CHILD_SNAPSHOT: &str = "PODSTORE_RAFT_TEST_INSTALL_SNAPSHOT";
const CHILD_META: &str = "PODSTORE_RAFT_TEST_INSTALL_META";

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(
        <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(term, 1),
        index,
    )
}

fn put(id: LogId, key: &str, value: &str) -> EntryOf<TypeConfig> {
    EntryOf::<TypeConfig>::new_normal(
        id,
        Request::Put {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        },
    )
}

fn membership(id: LogId, voters: &[u64]) -> EntryOf<TypeConfig> {
    let voters: BTreeSet<u64> = voters.iter().copied().collect();
    EntryOf::<TypeConfig>::new_membership(id, Membership::new_with_defaults(vec![voters], []))
}

async fn apply(sm: &mut StateMachine, entries: Vec<EntryOf<TypeConfig>>) {
    let items = entries.into_iter().map(|e| Ok((e, None)));
    sm.apply(futures::stream::iter(items)).await.unwrap();
}

fn open(dir: &Path) -> StateMachine {
    StateMachine::open(dir.join("sm"), dir.join("snapshots")).unwrap()
}

/// What a state machine holds, read from its directory: every key and value of its live store
/// (the data, `m/applied`, `m/membership`), and the applied id and membership it reports.
#[derive(Debug, PartialEq)]
struct State {
    store: BTreeMap<Vec<u8>, Vec<u8>>,
    applied: Option<LogId>,
    membership: StoredMembershipOf<TypeConfig>,
}

async fn state(dir: &Path) -> State {
    let mut sm = open(dir);
    let (applied, membership) = sm.applied_state().await.unwrap();
    let data = sm.data_dir();
    drop(sm); // closes the store: it is read below as a plain podstore store
    let store = podstore::Store::open(&data).unwrap();
    let contents = store
        .keys()
        .entries()
        .map(|e| {
            let e = e.unwrap();
            (e.key().to_vec(), e.value().unwrap())
        })
        .collect();
    store.close().unwrap();
    State {
        store: contents,
        applied,
        membership,
    }
}

/// The old state, in `dir`: one voter, keys `old/0..10` and `shared`, applied up to (1, 12).
async fn write_old_state(dir: &Path) {
    let mut sm = open(dir);
    let mut entries = vec![membership(log_id(1, 1), &[1])];
    entries.extend((0..10).map(|i| put(log_id(1, i + 2), &format!("old/{i}"), "old")));
    entries.push(put(log_id(1, 12), "shared", "the old value"));
    apply(&mut sm, entries).await;
}

/// The other node's snapshot: three voters, keys `new/0..40` and `shared`, applied up to
/// (2, 43), in a store of several sealed segments (a snapshot seals the active one, and two
/// were built), so that an install links several files.
async fn leader_snapshot(dir: &Path) -> (Meta, SnapshotDir) {
    let mut sm = open(dir);
    let mut entries = vec![membership(log_id(2, 1), &[1, 2, 3])];
    entries.extend((0..20).map(|i| put(log_id(2, i + 2), &format!("new/{i}"), "new")));
    apply(&mut sm, entries).await;
    sm.get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut entries: Vec<_> = (20..40)
        .map(|i| put(log_id(2, i + 2), &format!("new/{i}"), &"new".repeat(1000)))
        .collect();
    entries.push(put(log_id(2, 42), "shared", "the new value"));
    entries.push(put(log_id(2, 43), "new/0", "overwritten"));
    apply(&mut sm, entries).await;
    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(2, 43)));
    let segments = std::fs::read_dir(snap.snapshot.path().join("data"))
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("seg-")
        })
        .count();
    assert!(segments >= 2, "{segments} segments in the snapshot");
    (snap.meta, snap.snapshot)
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.insert(e.path(), std::fs::read(e.path()).unwrap());
        }
    }
    out
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_killed_at_each_step_leaves_the_old_or_the_new_state_whole() {
    let leader = tempfile::tempdir().unwrap();
    let (meta, snapshot) = leader_snapshot(leader.path()).await;
    let new_state = {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = open(dir.path());
        sm.install_snapshot(&meta, snapshot.clone()).await.unwrap();
        drop(sm);
        state(dir.path()).await
    };
    let old_state = {
        let dir = tempfile::tempdir().unwrap();
        write_old_state(dir.path()).await;
        state(dir.path()).await
    };
    assert_eq!(new_state.applied, meta.last_log_id);
    assert_eq!(new_state.membership, meta.last_membership);
    // The raw store: the data key's prefix `d`, the value behind its 8-byte version header.
    let shared = new_state.store.get(&b"dshared"[..]).expect("the new value");
    assert_eq!(&shared[8..], b"the new value");
    assert_eq!(old_state.applied, Some(log_id(1, 12)));
    assert_ne!(old_state.membership, new_state.membership);
    let source_files = files(snapshot.path());
    let steps = install_steps();
    let committed = steps.iter().position(|s| *s == "committed").unwrap();

    for (n, step) in steps.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        write_old_state(dir.path()).await;
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "install_crash::child_installs_a_snapshot",
                "--ignored",
            ])
            .args(["--nocapture", "--test-threads=1"])
            .env(CHILD_DIR, dir.path())
            .env(CHILD_SNAPSHOT, snapshot.path())
            .env(CHILD_META, serde_json::to_string(&meta).unwrap())
            .env(KILL_AT_VAR, step)
            .output()
            .unwrap();
        assert_eq!(
            out.status.signal(),
            Some(9),
            "the child was to kill itself at {step} ({:?}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        // Reopened: exactly the old state before the commit point, exactly the new one from it.
        let after = state(dir.path()).await;
        let (expected, which) = if n < committed {
            (&old_state, "old")
        } else {
            (&new_state, "new")
        };
        assert!(
            after == *expected,
            "killed at {step}: not the {which} state: {after:#?}"
        );
        // Nothing left of the interrupted install but the adopted snapshot.
        let generation = if n < committed { "sm-0" } else { "sm-1" };
        assert_eq!(
            names(&dir.path().join("sm")),
            ["CURRENT", generation],
            "killed at {step}"
        );
        let partial: Vec<_> = names(&dir.path().join("snapshots"))
            .into_iter()
            .filter(|n| !n.starts_with("snap-") || n.ends_with(".partial"))
            .collect();
        assert!(partial.is_empty(), "killed at {step}: left {partial:?}");

        // Installed again (as openraft does at restart when the snapshot is newer): the new state.
        let mut sm = open(dir.path());
        sm.install_snapshot(&meta, snapshot.clone()).await.unwrap();
        let current = sm.get_current_snapshot().await.unwrap().unwrap();
        assert_eq!(current.meta, meta, "killed at {step}");
        drop(sm);
        assert!(
            state(dir.path()).await == new_state,
            "killed at {step}: installed again, not the new state"
        );
    }

    // The other node's snapshot is as it was: every install linked or copied it, never moved or
    // changed it.
    assert_eq!(files(snapshot.path()), source_files);
}

/// Run by `install_killed_at_each_step_leaves_the_old_or_the_new_state_whole` in a process of
/// its own: installs the snapshot it is given with `PODSTORE_RAFT_KILL_AT` set, so that it never
/// returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by install_killed_at_each_step_leaves_the_old_or_the_new_state_whole"]
async fn child_installs_a_snapshot() {
    let dir = PathBuf::from(std::env::var_os(CHILD_DIR).expect("run by the parent test"));
    let snapshot = SnapshotDir::new(std::env::var_os(CHILD_SNAPSHOT).unwrap());
    let meta: Meta = serde_json::from_str(&std::env::var(CHILD_META).unwrap()).unwrap();
    let step = std::env::var(KILL_AT_VAR).expect("a step to be killed at");
    let mut sm = open(&dir);
    sm.install_snapshot(&meta, snapshot).await.unwrap();
    panic!("the install returned: it was to be killed at {step}");
}
