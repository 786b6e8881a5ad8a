//! Values over 1 MiB through the client API of three real node processes: streamed in
//! (chunked bodies, no `Content-Length`) with their conditions and request ids, refused by a
//! follower (`421`, the leader named) before it reads them, read back whole (streamed out)
//! from a follower; a body that passes `--max-value` half-way answers `413` and
//! leaves nothing staged; a retry under a request id is answered from the first and leaves
//! nothing staged either.

use crate::common;

use std::time::Duration;

use bytes::Bytes;
use common::procs::{Cluster, version};
use reqwest::StatusCode;
use reqwest::header::{ETAG, IF_MATCH, IF_NONE_MATCH};
use serde_json::Value;

const MAX_VALUE: usize = 4_000_000;

/// `len` bytes of value `seed`, sent as a chunked body in pieces of 100 000 bytes.
fn body(seed: u8, len: usize) -> reqwest::Body {
    let bytes = value(seed, len);
    let pieces: Vec<Result<Bytes, std::io::Error>> = bytes
        .chunks(100_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    reqwest::Body::wrap_stream(futures::stream::iter(pieces))
}

fn value(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(seed) ^ (i >> 12) as u8)
        .collect()
}

/// The state machine's live keys on the node at `addr` (its metrics).
async fn sm_keys(http: &reqwest::Client, addr: &str) -> u64 {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("podstore_store_live_keys{store=\"sm\"} "))
        .and_then(|v| v.trim().parse().ok())
        .expect("podstore_store_live_keys of the state machine")
}

/// Waits until the node at `addr` has `n` live keys in its state machine.
async fn wait_keys(http: &reqwest::Client, addr: &str, n: u64, what: &str) {
    let mut last = 0;
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            last = sm_keys(http, addr).await;
            if last == n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(done.is_ok(), "{what}: {last} live keys, expected {n}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_values_stream_in_and_out_with_conditions_limits_and_request_ids() {
    let root = tempfile::tempdir().unwrap();
    let max = MAX_VALUE.to_string();
    let cluster = Cluster::start(root.path(), &["--max-value", &max]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let addr = cluster.addr(leader).to_string();
    let url = |key: &str| format!("http://{addr}/kv/{key}");
    let len = 3 << 20;
    let keys_before = sm_keys(&http, &addr).await;

    // Created if absent, streamed in: 201 with its version.
    let r = http
        .put(url("big"))
        .header(IF_NONE_MATCH, "*")
        .body(body(3, len))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let etag = r.headers()[ETAG].to_str().unwrap().to_string();
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["len"], len);
    assert_eq!(answer["etag"], etag);
    // Not again.
    let r = http
        .put(url("big"))
        .header(IF_NONE_MATCH, "*")
        .body(body(4, len))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PRECONDITION_FAILED);
    // Over its version: replaced.
    let r = http
        .put(url("big"))
        .header(IF_MATCH, &etag)
        .body(body(5, len))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let etag = r.headers()[ETAG].to_str().unwrap().to_string();
    let index = version(&r);

    // To a follower: 421 before it reads the body, naming the leader.
    let follower = leader % 3 + 1;
    let r = http
        .put(format!("http://{}/kv/big", cluster.addr(follower)))
        .body(body(8, len))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::MISDIRECTED_REQUEST);
    assert_eq!(r.headers()["x-leader"].to_str().unwrap(), addr);

    // Whole, from a follower, streamed out, once it has applied the write (see `version`).
    cluster.wait_applied(follower, Some(index)).await;
    let r = http
        .get(format!("http://{}/kv/big", cluster.addr(follower)))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[ETAG].to_str().unwrap(), etag);
    assert_eq!(r.content_length(), Some(len as u64));
    assert!(r.bytes().await.unwrap().as_ref() == value(5, len).as_slice());
    // One key more, and no staged chunk left (the refused write's were removed too).
    wait_keys(&http, &addr, keys_before + 1, "after the streamed puts").await;

    // Over --max-value half-way (no Content-Length to refuse it by): 413, nothing written,
    // and the chunks staged before the limit was passed are dropped (an abort entry).
    let r = http
        .put(url("over"))
        .body(body(6, MAX_VALUE + 1))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["error"], "too_large");
    let r = http.get(url("over")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    wait_keys(&http, &addr, keys_before + 1, "after the refused put").await;

    // Under a request id: a retry is answered from the first (its version), nothing applied
    // again, and the retry's own chunks dropped.
    let put = |seed| {
        http.put(url("once"))
            .header(podstore_raft::http::REQUEST_ID_HEADER, "77:1")
            .body(body(seed, len))
            .send()
    };
    let first = put(7).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let first_etag = first.headers()[ETAG].to_str().unwrap().to_string();
    let again = put(7).await.unwrap();
    assert_eq!(again.status(), StatusCode::OK);
    assert_eq!(again.headers()[ETAG].to_str().unwrap(), first_etag);
    assert_eq!(
        again.headers()[podstore_raft::http::REPLAYED_HEADER],
        "true"
    );
    let r = http.get(url("once")).send().await.unwrap();
    assert_eq!(r.headers()[ETAG].to_str().unwrap(), first_etag);
    assert!(r.bytes().await.unwrap().as_ref() == value(7, len).as_slice());
    // The value, and the client's request-id records: its head (`r/h`: highest id and latest
    // write), the id's answer in its slot (`r/s`), its place in the order of clients (`r/o`),
    // and the number of clients (`r/n`, one for all).
    wait_keys(&http, &addr, keys_before + 6, "after the retried put").await;
}

/// The leader killed while a value streams in: the chunks it staged on the followers are
/// dropped by the next leader's first entry (an upload belongs to its leader's term).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_whose_leader_dies_is_dropped_at_the_next_election() {
    let root = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(root.path(), &[]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let addr = cluster.addr(leader).to_string();
    let followers: Vec<u64> = (1..=3).filter(|&id| id != leader).collect();
    let keys_before = sm_keys(&http, &addr).await;

    // A slow body: 256 KiB every 20 ms, far longer than the test waits.
    let pieces = futures::stream::unfold(0u32, |i| async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        Some((
            Ok::<_, std::io::Error>(Bytes::from(vec![i as u8; 256 << 10])),
            i + 1,
        ))
    });
    let put = http
        .put(format!("http://{addr}/kv/abandoned"))
        .body(reqwest::Body::wrap_stream(pieces))
        .send();
    let put = tokio::spawn(put);

    // Chunks staged on a follower...
    let follower = cluster.addr(followers[0]).to_string();
    let staged = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let n = sm_keys(&http, &follower).await;
            if n >= keys_before + 2 {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("chunks staged on a follower");
    assert!(staged >= keys_before + 2);

    // ... then the leader killed: the next leader's blank entry drops them everywhere.
    cluster.kill(leader);
    let _ = put.await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);
    for id in followers {
        let a = cluster.addr(id).to_string();
        wait_keys(&http, &a, keys_before, "the abandoned upload dropped").await;
        let r = http
            .get(format!("http://{a}/kv/abandoned"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
    }
}
