//! kill -9 of a process writing to a store with a remote (`LocalFileSystem` in a directory, or
//! the S3 server of tests/common/s3.rs, which the parent runs), uploads and flushes running,
//! then: the surviving local store has every acknowledged write, and a restore into a fresh
//! directory from the bucket alone has every write covered by a completed `flush_remote`, byte
//! for byte. With a zero retention, each manifest replaced is deleted on the child's background
//! thread, so the kill can land in a deletion pass too.
//!
//! The child is this test binary run again as `kill9_child`. Rounds: 2 on local files and 1 on
//! S3, or 8 and 4 with `PODSTORE_TEST_LONG=1`.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use podstore::{Options, Store};
use podstore_remote::ObjectStoreRemote;

use common::s3::{self, S3Server};

const CHILD_VAR: &str = "PODSTORE_REMOTE_KILL9_CHILD";
const MARK: &str = "@@";

/// The bucket a backend spec names: `file:<directory>` or `s3:<endpoint>`.
fn bucket(spec: &str) -> Arc<dyn ObjectStore> {
    match spec.split_once(':').unwrap() {
        ("file", dir) => Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap()),
        ("s3", endpoint) => Arc::new(
            object_store::aws::AmazonS3Builder::new()
                .with_endpoint(endpoint)
                .with_allow_http(true)
                .with_bucket_name(s3::BUCKET)
                .with_region(s3::REGION)
                .with_access_key_id(s3::ACCESS_KEY)
                .with_secret_access_key(s3::SECRET_KEY)
                .build()
                .unwrap(),
        ),
        (other, _) => panic!("backend {other}"),
    }
}

fn opts(spec: &str) -> Options {
    let bucket = bucket(spec);
    let remote = Arc::new(
        ObjectStoreRemote::new(bucket)
            .unwrap()
            .with_part_size(5 << 20),
    );
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .remote(remote, "kill9")
        .remote_flush_interval(Some(Duration::from_millis(300)))
        // Every manifest replaced is deleted at once: the kill also lands in deletion passes.
        .remote_retention(Some(Duration::ZERO))
}

fn key(i: u64) -> String {
    format!("k{i:06}")
}

/// Every 16th value is 6 MiB (a blob file, uploaded in two parts); the others are small.
fn value(i: u64) -> Vec<u8> {
    let len = if i % 16 == 5 {
        6 << 20
    } else {
        100 + (i as usize * 37) % 5000
    };
    (0..len)
        .map(|b| (b as u64 ^ i.wrapping_mul(131)) as u8)
        .collect()
}

fn emit(msg: &str) {
    let mut out = std::io::stdout().lock();
    out.write_all(format!("{MARK}{msg}\n").as_bytes())
        .and_then(|()| out.flush())
        .unwrap();
}

/// The child: writes keys in order, says which are acknowledged and which a remote flush
/// covers, until it is killed.
#[test]
fn kill9_child() {
    let Ok(dirs) = std::env::var(CHILD_VAR) else {
        return;
    };
    let (dir, spec) = dirs.split_once('|').unwrap();
    let store = Store::open_with(dir, opts(spec)).unwrap();
    for i in 0.. {
        store.put(key(i), value(i)).unwrap();
        emit(&format!("acked {i}"));
        if i % 25 == 24 {
            store.flush_remote().unwrap();
            emit(&format!("flushed {i}"));
        }
    }
}

fn long() -> bool {
    std::env::var("PODSTORE_TEST_LONG").is_ok_and(|v| !v.is_empty() && v != "0")
}

#[test]
fn a_restore_after_kill9_has_every_flushed_write() {
    let rounds = if long() { 8 } else { 2 };
    for round in 0..rounds {
        let root = tempfile::tempdir().unwrap();
        let bucket = root.path().join("bucket");
        std::fs::create_dir(&bucket).unwrap();
        kill9_round(root.path(), &format!("file:{}", bucket.display()), round);
    }
}

#[test]
fn a_restore_from_s3_after_kill9_has_every_flushed_write() {
    let rounds = if long() { 4 } else { 1 };
    for round in 0..rounds {
        let root = tempfile::tempdir().unwrap();
        let server = S3Server::start(&root.path().join("s3"));
        kill9_round(root.path(), &format!("s3:{}", server.endpoint()), round);
    }
}

/// One round: a child writing to a store in `root` with the remote `spec`, killed after a
/// few flushes; then the restore from the remote and the local store are checked.
fn kill9_round(root: &Path, spec: &str, round: usize) {
    let dir = root.join("store");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill9_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, format!("{}|{spec}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    // Killed after a number of flushes that differs per round, part-way into the next.
    let kill_after = 2 + round % 3;
    let (mut acked, mut flushed) = (None, None);
    let mut flushes = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    for line in out.lines() {
        let line = line.unwrap();
        let Some(at) = line.find(MARK) else { continue };
        let (what, n) = line[at + MARK.len()..].split_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        match what {
            "acked" => acked = Some(n),
            "flushed" => {
                flushed = Some(n);
                flushes += 1;
            }
            other => panic!("child said {other}"),
        }
        let mid_round = acked.is_some_and(|a| a % 25 == 10 + round as u64 % 10);
        if (flushes >= kill_after && mid_round) || Instant::now() > deadline {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (acked, flushed) = (acked.unwrap(), flushed.expect("a flush before the kill"));

    // The bucket alone: every write a completed flush covered.
    let restored = Store::open_with(root.join("restored"), opts(spec)).unwrap();
    for i in 0..=flushed {
        assert!(
            restored.get(key(i)).unwrap() == Some(value(i)),
            "{spec} round {round}: key {i} (flushed through {flushed}) not restored"
        );
    }
    // The child deleted the manifests its flushes replaced, as it went; what the kill left
    // (it lands before or in a deletion pass, and the background flushes every 300 ms write
    // manifests the child does not report) goes at the next pass: the restored store took the
    // prefix, and with a zero retention only its own manifest stays, with the claim of each
    // writer that opened the prefix (the child's: manifest 1), kept for good as the mark that
    // fences the writer before it (docs/design-remote.md, "Fencing"). (Counting the manifests
    // right after the kill against the flushes the child reported failed once in the long run:
    // 3 manifests after 2 reported flushes.)
    restored.collect_remote_garbage().unwrap();
    let remote = ObjectStoreRemote::new(bucket(spec)).unwrap();
    let manifests = podstore::remote::Remote::list(&remote, "kill9/manifest/")
        .unwrap()
        .len();
    assert_eq!(
        manifests, 2,
        "{spec} round {round}: {manifests} manifests after a pass ({flushes} flushes reported)"
    );
    drop(restored);
    // The local store (opened without its remote): every acknowledged write.
    let local = Store::open(&dir).unwrap();
    for i in 0..=acked {
        assert!(
            local.get(key(i)).unwrap() == Some(value(i)),
            "round {round}: acknowledged key {i} lost locally"
        );
    }
    assert!(local.verify().unwrap().is_clean());
}
