//! The client (`podstore_raft::client`, the `client` feature) against three real node processes
//! on 127.0.0.1: it follows the leader across a `kill -9` with no write failed and every
//! acknowledged write read back; a write retried under its request id after its first attempt
//! committed (the leader killed right after) is applied once and answers the first outcome;
//! the same id with another request is refused; and a restarted node does not send clients to
//! a leader it has not heard from since.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::procs::{Cluster, status, value, version, wait_moving};
use podstore_raft::Expect;
use podstore_raft::client::{Client, Error};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_rides_out_a_leader_killed_and_applies_retries_once() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), &[]).await;
    let client = Arc::new(Client::new(cluster.addrs.clone()));

    // Writes go on while the leader is killed: the client finds the new one, and no write
    // fails (a write whose answer was lost is retried under its request id).
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let writer = {
        let (client, stop, done) = (client.clone(), stop.clone(), done.clone());
        tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("c/{i}");
                match client.put(key.as_bytes(), value(i)).await {
                    Ok(w) => {
                        acked.push((i, w.version));
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("put {key}: {e}"),
                }
                i += 1;
            }
            acked
        })
    };
    let count = || done.load(Ordering::Relaxed);
    wait_moving(
        "30 writes",
        async || count(),
        async || (count() >= 30).then_some(()),
    )
    .await;
    let leader = cluster.leader().await;
    cluster.kill(leader);
    let new_leader = cluster.leader().await;
    let after = count();
    wait_moving(
        "30 writes by the new leader",
        async || count(),
        async || (count() >= after + 30).then_some(()),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let acked = writer.await.unwrap();
    assert!(acked.len() >= 60, "{} writes", acked.len());
    assert_eq!(
        client.leader().as_deref(),
        Some(cluster.addr(new_leader)),
        "the client found the new leader"
    );
    for &(i, version) in &acked {
        let v = client.get(format!("c/{i}").as_bytes()).await.unwrap();
        let v = v.unwrap_or_else(|| panic!("c/{i} acknowledged, then missing"));
        assert_eq!(v.bytes, value(i), "c/{i}");
        assert_eq!(v.version, version, "c/{i}");
    }
    cluster.restart(leader, &[]);

    // A conditional put and a delete, each answered, then the leader killed right after the
    // commit, then each sent again under its request id (as a client whose answer was lost
    // does): not applied again (else the put would fail its condition and the delete find
    // nothing), answered as the first time, version included.
    client.put(b"gone", b"x".to_vec()).await.unwrap();
    let (put_id, delete_id) = (client.request_id(), client.request_id());
    let first = client
        .put_with(b"once", b"v1".to_vec(), Some(Expect::Absent), put_id)
        .await
        .unwrap();
    assert!(!first.replayed);
    assert!(client.delete_with(b"gone", None, delete_id).await.unwrap());
    cluster.wait_applied(leader, Some(first.version)).await;
    let killed = cluster.leader().await;
    cluster.kill(killed);
    let again = client
        .put_with(b"once", b"v1".to_vec(), Some(Expect::Absent), put_id)
        .await
        .unwrap();
    assert_eq!(again.version, first.version);
    assert!(again.replayed);
    assert!(client.delete_with(b"gone", None, delete_id).await.unwrap());
    let read = client.get(b"once").await.unwrap().unwrap();
    assert_eq!(
        (read.bytes.as_ref(), read.version),
        (&b"v1"[..], first.version)
    );
    assert_eq!(client.get(b"gone").await.unwrap(), None);
    assert_ne!(client.leader().as_deref(), Some(cluster.addr(killed)));

    // The same id for another request is refused, nothing written.
    let other = client
        .put_with(b"once", b"v2".to_vec(), Some(Expect::Absent), put_id)
        .await;
    match other {
        Err(Error::Refused { status, code, .. }) => {
            assert_eq!((status, code.as_str()), (409, "request_id_refused"));
        }
        other => panic!("the same id for another request: {other:?}"),
    }
    let read = client.get(b"once").await.unwrap().unwrap();
    assert_eq!(read.bytes.as_ref(), b"v1");
    // A write without a condition, retried: one version, the first.
    let id = client.request_id();
    let first = client
        .put_with(b"p", b"1".to_vec(), None, id)
        .await
        .unwrap();
    let again = client
        .put_with(b"p", b"1".to_vec(), None, id)
        .await
        .unwrap();
    assert_eq!((again.version, again.replayed), (first.version, true));
    assert_eq!(
        client.get(b"p").await.unwrap().unwrap().version,
        first.version
    );
}

/// Concurrent writes through one client are coalesced: they share requests and log entries
/// (so versions), each with its own answer; writes of one key never share an entry, so a
/// version still names one value of a key. Without coalescing, each write goes on its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_through_one_client_share_requests_and_log_entries() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(root.path(), &["--max-value", "50000"]).await;
    let client = Arc::new(Client::new(cluster.addrs.clone()));
    let tasks: Vec<_> = (0..32u32)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut own = Vec::new();
                for i in 0..16u32 {
                    let key = format!("m/{t}/{i}");
                    let w = client
                        .put(key.as_bytes(), value(t * 100 + i))
                        .await
                        .unwrap();
                    own.push((key, t * 100 + i, w.version));
                }
                own
            })
        })
        .collect();
    let mut own = Vec::new();
    for t in tasks {
        own.extend(t.await.unwrap());
    }
    let versions: std::collections::BTreeSet<u64> = own.iter().map(|o| o.2).collect();
    assert!(
        versions.len() * 2 <= own.len(),
        "{} writes of distinct keys in {} log entries: not coalesced",
        own.len(),
        versions.len()
    );
    for (key, i, version) in &own {
        let v = client.get(key.as_bytes()).await.unwrap().unwrap();
        assert_eq!(
            (v.bytes.as_ref(), v.version),
            (&value(*i)[..], *version),
            "{key}"
        );
    }
    // One key written by many at once (each write then a conditional one that fails, in the
    // same requests as the others' writes): every write has a version of its own, and the
    // value read is the one written last.
    let tasks: Vec<_> = (0..8u32)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let mut shared = Vec::new();
                for i in 0..8u32 {
                    let v = format!("{t}:{i}");
                    let w = client.put(b"m/shared", v.clone()).await.unwrap();
                    shared.push((v, w.version));
                    match client.put_if(b"m/shared", "x", Expect::Absent).await {
                        Err(Error::ConditionFailed { current: Some(_) }) => {}
                        other => panic!("put_if absent over a value: {other:?}"),
                    }
                }
                shared
            })
        })
        .collect();
    let mut shared = Vec::new();
    for t in tasks {
        shared.extend(t.await.unwrap());
    }
    let shared_versions: std::collections::BTreeSet<u64> = shared.iter().map(|s| s.1).collect();
    assert_eq!(
        shared_versions.len(),
        shared.len(),
        "two writes of one key in one entry"
    );
    let last = shared.iter().max_by_key(|s| s.1).unwrap();
    let v = client.get(b"m/shared").await.unwrap().unwrap();
    assert_eq!((v.bytes.as_ref(), v.version), (last.0.as_bytes(), last.1));

    // A value over the node's limit, in a request with others: refused alone (as `PUT /kv`
    // refuses it), the others written.
    let tasks: Vec<_> = (0..16usize)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                let len = if t % 2 == 0 { 100 } else { 60_000 };
                let key = format!("l/{t}");
                (t, client.put(key.as_bytes(), vec![b'l'; len]).await)
            })
        })
        .collect();
    for task in tasks {
        match task.await.unwrap() {
            (t, Ok(_)) if t % 2 == 0 => {}
            (t, Err(Error::Refused { status, code, .. })) if t % 2 == 1 => {
                assert_eq!((status, code.as_str()), (413, "too_large"), "l/{t}");
                assert_eq!(client.get(format!("l/{t}").as_bytes()).await.unwrap(), None);
            }
            (t, other) => panic!("l/{t}: {other:?}"),
        }
    }

    // Without coalescing, each write is a request of its own (`PUT`/`DELETE /kv/...`).
    let single = Client::new(cluster.addrs.clone()).coalesce(0);
    let w = single.put(b"s/1", "one").await.unwrap();
    match single.put_if(b"s/1", "two", Expect::Absent).await {
        Err(Error::ConditionFailed { current }) => assert_eq!(current, Some(w.version)),
        other => panic!("put_if absent over a value: {other:?}"),
    }
    assert!(single.delete(b"s/1").await.unwrap());
    assert!(!single.delete(b"s/1").await.unwrap());
    assert_eq!(client.get(b"s/1").await.unwrap(), None);
}

/// A node restarted while its leader is down keeps that leader in its Raft vote; it must not
/// send clients there (`x-leader`) nor name it in its status before it has heard from it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_names_no_leader_it_has_not_heard_from() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), &[]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let url = format!("http://{}/kv/k", cluster.addr(leader));
    let r = http.put(url).body("v").send().await.unwrap();
    assert!(r.status().is_success());
    let follower = leader % 3 + 1;
    let other = follower % 3 + 1;
    assert_ne!(other, leader);
    cluster.wait_applied(follower, Some(version(&r))).await;
    // Before its restart it names the leader, heard from.
    let st = status(&http, cluster.addr(follower)).await.unwrap();
    assert_eq!(st.leader, Some(leader));

    // The leader and the third node down: the follower restarted alone cannot hear from any
    // leader (nor become one).
    cluster.kill(leader);
    cluster.kill(other);
    cluster.kill(follower);
    cluster.restart(follower, &[]);
    let addr = cluster.addr(follower).to_string();
    let st = cluster.serving(follower).await;
    assert_eq!(st.leader, None, "{st:?}");
    let r = http
        .put(format!("http://{addr}/kv/k"))
        .body("w")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(r.headers().get("x-leader"), None);
}

/// A value whose upload takes longer than the client's per-attempt limit: the limit counts
/// time without progress, and a write's body at `SLOWEST_UPLOAD` on top, so the put succeeds
/// (with a fixed limit of 1 s for the whole attempt, this 96 MiB put failed and was retried
/// in vain), and reading it back streams as long as it takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_longer_to_send_than_the_timeout_goes_through() {
    use podstore_raft::client::Retry;
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(root.path(), &[]).await;
    let retry = Retry {
        timeout: std::time::Duration::from_secs(1),
        ..Retry::default()
    };
    let client = Client::with_retry(cluster.addrs.clone(), retry);
    let len = 96usize << 20;
    let big: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    let started = std::time::Instant::now();
    let written = client.put(b"big", big.clone()).await.unwrap();
    eprintln!("96 MiB put in {:?}", started.elapsed());
    assert!(!written.replayed);
    let got = client.get(b"big").await.unwrap().expect("just written");
    assert_eq!(got.bytes.len(), len);
    assert!(got.bytes.as_ref() == big.as_slice(), "another value");
}

/// A node that reads a write's body slower than `SLOWEST_UPLOAD` (about 5 MiB/s; a loaded
/// leader reads at the pace it replicates) but steadily: the attempt waits on while the body
/// is read, so the put goes through in one attempt. Its limit was `timeout` + the body at
/// 8 MiB/s (1.1 s here, where reading it takes about 1.6 s): it failed, and each retry began
/// again. The node is a socket of the test's, with a small receive buffer, answering as a node
/// does. The body is twice what the client's socket buffers took at load 8-16 (up to about
/// 6 MiB): a body they hold whole shows the client no pace, and has the old limit only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_goes_on_while_the_node_reads_its_body_slowly() {
    use podstore_raft::client::Retry;
    use std::io::{Read, Write};
    use std::time::{Duration, Instant};

    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 << 10).unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(8).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let len = 8usize << 20;
    // One connection: a second attempt would wait unanswered.
    let node = tokio::spawn(async move {
        let conn = listener.accept().await.unwrap().0.into_std().unwrap();
        tokio::task::spawn_blocking(move || serve_slowly(conn, len))
            .await
            .unwrap()
    });
    fn serve_slowly(mut conn: std::net::TcpStream, len: usize) -> Duration {
        conn.set_nonblocking(false).unwrap();
        let mut buf = vec![0u8; 64 << 10];
        let mut head = Vec::new();
        let body_start = loop {
            let n = conn.read(&mut buf).unwrap();
            assert_ne!(n, 0, "the request ended in its head");
            head.extend_from_slice(&buf[..n]);
            if let Some(i) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let text = String::from_utf8_lossy(&head[..body_start]).to_lowercase();
        assert!(text.contains(&format!("content-length: {len}")), "{text}");
        let mut read = head.len() - body_start;
        // 32 KiB every 6 ms: 5.3 MiB/s at most.
        let started = Instant::now();
        while read < len {
            let n = conn.read(&mut buf[..32 << 10]).unwrap();
            assert_ne!(n, 0, "the body ended at {read} of {len} bytes");
            read += n;
            std::thread::sleep(Duration::from_millis(6));
        }
        let took = started.elapsed();
        conn.write_all(b"HTTP/1.1 200 OK\r\netag: \"7\"\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        took
    }
    let retry = Retry {
        timeout: Duration::from_millis(100),
        ..Retry::default()
    };
    let client = Client::with_retry([addr], retry);
    let written = client.put(b"slow", vec![7u8; len]).await.unwrap();
    assert_eq!((written.version, written.replayed), (7, false));
    let took = node.await.unwrap();
    // Slower than the old limit, or this test shows nothing.
    let old_limit =
        Duration::from_millis(100) + Duration::from_secs_f64(len as f64 / (8 << 20) as f64);
    assert!(took > old_limit, "read in {took:?}");
}
