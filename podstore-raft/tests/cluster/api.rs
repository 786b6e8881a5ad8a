//! The client API of three real node processes (the `podstore-raft` binary) on 127.0.0.1,
//! through a real HTTP client: every route's answers, hostile input included (malformed
//! percent-encoding, keys at and over the limit, ranges past the end, wrong `If-Match`,
//! bodies over `--max-value`), and that no answer names a key as the state machine stores it.

use crate::common;

use common::procs::Cluster;
use reqwest::header::{CONTENT_RANGE, ETAG, IF_MATCH, IF_NONE_MATCH};
use reqwest::{Response, StatusCode};
use serde_json::Value;

/// The limit the nodes are started with: above the 3 MB value below, small enough to send
/// one byte more in a test.
const MAX_VALUE: usize = 4_000_000;

/// Checks an error answer: `status`, and JSON `{"error": code, "message": "..."}`; returns the
/// message.
async fn error(r: Response, status: StatusCode, code: &str) -> String {
    assert_eq!(r.status(), status, "{:?}", r.headers());
    let body: Value = r.json().await.expect("an error's body is JSON");
    assert_eq!(body["error"], code, "{body}");
    let message = body["message"].as_str().expect("a message");
    assert!(!message.is_empty());
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
    message.to_string()
}

fn etag_of(r: &Response) -> String {
    r.headers()
        .get(ETAG)
        .expect("an ETag")
        .to_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_answers_its_documented_status_codes() {
    let root = tempfile::tempdir().unwrap();
    let max = MAX_VALUE.to_string();
    let cluster = Cluster::start(root.path(), &["--max-value", &max]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let base = format!("http://{}", cluster.addr(leader));
    let follower_id = leader % 3 + 1;
    let follower = format!("http://{}", cluster.addr(follower_id));
    let url = |path: &str| format!("{base}{path}");

    // A key with slashes, as a path or percent-encoded: one key.
    let r = http
        .put(url("/kv/photo/42"))
        .body("cat")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let etag = etag_of(&r);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["len"], 3);
    let version = body["version"].as_u64().unwrap();
    assert_eq!(etag, format!("\"{version}\""));
    assert_eq!(body["etag"], etag);
    for path in ["/kv/photo/42", "/kv/photo%2F42", "/kv/photo%2f42"] {
        let r = http.get(url(path)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(etag_of(&r), etag, "{path}");
        assert_eq!(r.bytes().await.unwrap(), "cat", "{path}");
    }
    // Any bytes, percent-encoded.
    let r = http
        .put(url("/kv/%FF%00k"))
        .body("bin")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http.get(url("/kv/%ff%00k")).send().await.unwrap();
    assert_eq!(r.bytes().await.unwrap(), "bin");
    // Malformed percent-encoding, and an empty key.
    for path in ["/kv/a%zz", "/kv/a%4", "/kv/%"] {
        let r = http.put(url(path)).body("x").send().await.unwrap();
        let message = error(r, StatusCode::BAD_REQUEST, "bad_key").await;
        assert!(message.contains("percent-encoding"), "{path}: {message}");
        let r = http.get(url(path)).send().await.unwrap();
        error(r, StatusCode::BAD_REQUEST, "bad_key").await;
    }
    let r = http.put(url("/kv/")).body("x").send().await.unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_key").await;

    // Keys at the limit (4095 bytes: podstore's 4096 less the state machine's prefix) and
    // over it; percent-encoded, the longest is 12 KiB of URL.
    let at_limit = "%41".repeat(podstore_raft::MAX_KEY_LEN);
    let r = http
        .put(url(&format!("/kv/{at_limit}")))
        .body("long")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .get(url(&format!("/kv/{at_limit}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap(), "long");
    let over = "A".repeat(podstore_raft::MAX_KEY_LEN + 1);
    let r = http
        .put(url(&format!("/kv/{over}")))
        .body("x")
        .send()
        .await
        .unwrap();
    let message = error(r, StatusCode::BAD_REQUEST, "bad_key").await;
    assert!(message.contains("4096 bytes"), "{message}");
    let r = http.get(url(&format!("/kv/{over}"))).send().await.unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_key").await;

    // Ranges of a 3 MB value.
    let photo: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let r = http
        .put(url("/kv/photo.jpg"))
        .body(photo.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let photo_etag = etag_of(&r);
    let r = http
        .get(url("/kv/photo.jpg?start=5000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()[CONTENT_RANGE], "bytes */3000000");
    let message = error(
        r,
        StatusCode::RANGE_NOT_SATISFIABLE,
        "range_not_satisfiable",
    )
    .await;
    assert!(
        !message.contains("dphoto"),
        "an internal key leaked: {message}"
    );
    let r = http
        .get(url("/kv/photo.jpg?start=10&end=5"))
        .send()
        .await
        .unwrap();
    error(
        r,
        StatusCode::RANGE_NOT_SATISFIABLE,
        "range_not_satisfiable",
    )
    .await;
    let r = http
        .get(url("/kv/photo.jpg?start=2999990&end=5000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(r.headers()[CONTENT_RANGE], "bytes 2999990-2999999/3000000");
    assert_eq!(etag_of(&r), photo_etag);
    assert_eq!(r.bytes().await.unwrap(), &photo[2_999_990..]);
    let r = http
        .get(url("/kv/photo.jpg?start=3000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = http
        .get(url("/kv/photo.jpg?start=ten"))
        .send()
        .await
        .unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_request").await;
    let r = http.get(url("/kv/missing?start=1")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;
    let r = http.get(url("/kv/missing")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;

    // A body over --max-value.
    let r = http
        .put(url("/kv/huge"))
        .body(vec![0u8; MAX_VALUE + 1])
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PAYLOAD_TOO_LARGE, "too_large").await;
    let r = http.get(url("/kv/huge")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;

    // Conditional writes.
    let r = http
        .put(url("/kv/photo/42"))
        .header(IF_NONE_MATCH, "*")
        .body("dog")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;
    let r = http
        .put(url("/kv/fresh"))
        .header(IF_NONE_MATCH, "*")
        .body("new")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let wrong = format!("\"{}\"", version + 1_000_000);
    let r = http
        .put(url("/kv/photo/42"))
        .header(IF_MATCH, &wrong)
        .body("dog")
        .send()
        .await
        .unwrap();
    assert_eq!(
        etag_of(&r),
        etag,
        "a failed condition names the current version"
    );
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;
    let r = http
        .put(url("/kv/photo/42"))
        .header(IF_MATCH, &etag)
        .body("dog")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let etag2 = etag_of(&r);
    assert_ne!(etag2, etag);
    // The old version again: the write it guards must not happen.
    let r = http
        .put(url("/kv/photo/42"))
        .header(IF_MATCH, &etag)
        .body("stale")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;
    let r = http.get(url("/kv/photo/42")).send().await.unwrap();
    assert_eq!(r.bytes().await.unwrap(), "dog");
    let r = http
        .put(url("/kv/photo/42"))
        .header(IF_MATCH, "not-a-tag")
        .body("x")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_request").await;
    let r = http
        .put(url("/kv/absent"))
        .header(IF_MATCH, "*")
        .body("x")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;

    // Deletes.
    let r = http
        .delete(url("/kv/photo/42"))
        .header(IF_MATCH, &etag)
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;
    let r = http
        .delete(url("/kv/photo%2F42"))
        .header(IF_MATCH, &etag2)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    assert!(r.bytes().await.unwrap().is_empty());
    let r = http.delete(url("/kv/photo/42")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;
    let r = http.delete(url("/kv/fresh")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = http
        .delete(url("/kv/fresh"))
        .header(IF_MATCH, "*")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::PRECONDITION_FAILED, "precondition_failed").await;

    // Listing, a page at a time.
    for k in ["list/a", "list/b", "list/c", "listz"] {
        let r = http
            .put(url(&format!("/kv/{k}")))
            .body(k)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
    }
    let r = http
        .get(url("/kv?prefix=list/&limit=2"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let page: Value = r.json().await.unwrap();
    assert_eq!(
        page["keys"],
        serde_json::json!([{"key": "list/a", "len": 6}, {"key": "list/b", "len": 6}])
    );
    let next = page["next"].as_str().expect("a token").to_string();
    let r = http
        .get(url(&format!("/kv?prefix=list%2F&limit=2&after={next}")))
        .send()
        .await
        .unwrap();
    let page: Value = r.json().await.unwrap();
    assert_eq!(
        page["keys"],
        serde_json::json!([{"key": "list/c", "len": 6}])
    );
    assert_eq!(page["next"], Value::Null);
    let r = http.get(url("/kv?prefix=%FF")).send().await.unwrap();
    let page: Value = r.json().await.unwrap();
    assert_eq!(
        page["keys"],
        serde_json::json!([{"key_hex": "ff006b", "len": 3}])
    );
    for bad in [
        "/kv?limit=0",
        "/kv?limit=10001",
        "/kv?after=xyz",
        "/kv?prefix=%zz",
    ] {
        let r = http.get(url(bad)).send().await.unwrap();
        error(r, StatusCode::BAD_REQUEST, "bad_request").await;
    }

    // A follower: reads (possibly stale), but writes and linearizable reads go to the leader.
    cluster
        .wait_applied(follower_id, status_applied(&cluster, leader).await)
        .await;
    let r = http
        .get(format!("{follower}/kv/list/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .put(format!("{follower}/kv/x"))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-leader"], cluster.addr(leader));
    error(r, StatusCode::MISDIRECTED_REQUEST, "not_leader").await;
    let r = http
        .get(format!("{follower}/kv/list/a?linearizable=1"))
        .send()
        .await
        .unwrap();
    error(r, StatusCode::MISDIRECTED_REQUEST, "not_leader").await;
    let r = http
        .get(url("/kv/list/a?linearizable=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.bytes().await.unwrap(), "list/a");

    // The cluster routes: JSON bodies with no content type (as `curl -d` sends them).
    let r = http
        .post(url("/cluster/voters"))
        .body("[1,2,3]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let status: podstore_raft::http::Status = r.json().await.unwrap();
    assert_eq!(status.voters, [1, 2, 3]);
    let r = http
        .post(url("/cluster/voters"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("[1,2,3]")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http
        .post(url("/cluster/learner"))
        .body("{\"id\":4}")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_request").await;
    let members = format!("{{\"1\":\"{}\"}}", cluster.addr(1));
    let r = http
        .post(url("/cluster/init"))
        .body(members)
        .send()
        .await
        .unwrap();
    error(r, StatusCode::CONFLICT, "conflict").await;
    let r = http
        .post(format!("{follower}/cluster/voters"))
        .body("[1,2,3]")
        .send()
        .await
        .unwrap();
    error(r, StatusCode::MISDIRECTED_REQUEST, "not_leader").await;

    // Read right after a write's answer, the status of the node that answered names the
    // write (openraft's metrics move a moment after the answer: the node reports its state
    // machine's index too). 4 writers at once, 50 writes each.
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (http, base) = (http.clone(), base.clone());
            let addr = cluster.addr(leader).to_string();
            tokio::spawn(async move {
                for i in 0..50 {
                    let r = http
                        .put(format!("{base}/kv/applied/{w}/{i}"))
                        .body("x")
                        .send()
                        .await
                        .unwrap();
                    assert_eq!(r.status(), StatusCode::OK);
                    let version = common::procs::version(&r);
                    let status = common::procs::status(&http, &addr).await.unwrap();
                    assert!(
                        status.last_applied >= Some(version),
                        "write {version} answered, status says {:?}",
                        status.last_applied
                    );
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }

    // `POST /writes`: independent writes in one log entry, each with its own answer.
    let writes = |w: Vec<podstore_raft::Request>| postcard::to_stdvec(&w).unwrap();
    let put = |k: &str, v: &str| podstore_raft::Request::Put {
        key: k.as_bytes().to_vec(),
        value: v.as_bytes().to_vec(),
    };
    let batch = vec![
        put("w/1", "one"),
        podstore_raft::Request::PutIf {
            key: b"w/1x".to_vec(),
            value: b"x".to_vec(),
            expect: podstore_raft::Expect::Present,
        },
        put("w/2", "two"),
    ];
    let r = http
        .post(url("/writes"))
        .body(writes(batch.clone()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (index, answers): (u64, Vec<podstore_raft::Response>) =
        postcard::from_bytes(&r.bytes().await.unwrap()).unwrap();
    use podstore_raft::Response as A;
    let failed = A::ConditionFailed { current: None };
    assert_eq!(answers, [A::Done, failed, A::Done]);
    for (key, value) in [("w/1", "one"), ("w/2", "two")] {
        let r = http.get(url(&format!("/kv/{key}"))).send().await.unwrap();
        assert_eq!(etag_of(&r), format!("\"{index}\""), "{key}");
        assert_eq!(r.bytes().await.unwrap(), value);
    }
    let r = http
        .post(format!("{follower}/writes"))
        .body(writes(batch))
        .send()
        .await
        .unwrap();
    error(r, StatusCode::MISDIRECTED_REQUEST, "not_leader").await;
    for bad in [b"\xff\xff\xff".to_vec(), writes(Vec::new())] {
        let r = http.post(url("/writes")).body(bad).send().await.unwrap();
        error(r, StatusCode::BAD_REQUEST, "bad_request").await;
    }
    let huge = writes(vec![put("w/huge", &"h".repeat(5 << 20))]);
    let r = http.post(url("/writes")).body(huge).send().await.unwrap();
    error(r, StatusCode::PAYLOAD_TOO_LARGE, "too_large").await;
    // Under the request's limit, but a value over the node's: nothing written.
    let over = writes(vec![
        put("w/3", "three"),
        put("w/long", &"h".repeat(MAX_VALUE + 1)),
    ]);
    let r = http.post(url("/writes")).body(over).send().await.unwrap();
    error(r, StatusCode::PAYLOAD_TOO_LARGE, "too_large").await;
    let r = http.get(url("/kv/w/3")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;

    // `POST /writes` under a request id: applied once as a whole; the same writes again
    // answer each write's first outcome, replayed; other writes under the id are refused.
    let id_header = podstore_raft::http::REQUEST_ID_HEADER;
    let once = vec![
        put("w/4", "four"),
        podstore_raft::Request::Delete {
            key: b"w/1".to_vec(),
        },
    ];
    let send = |w: Vec<podstore_raft::Request>, id: &'static str| {
        http.post(url("/writes"))
            .header(id_header, id)
            .body(writes(w))
            .send()
    };
    let answer = |b: bytes::Bytes| -> (u64, Vec<A>) { postcard::from_bytes(&b).unwrap() };
    let r = send(once.clone(), "91:1").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (first, answers) = answer(r.bytes().await.unwrap());
    assert_eq!(answers, [A::Done, A::Existed(true)]);
    // Meanwhile w/4 is written again: the replay must not write it back.
    let r = http.put(url("/kv/w/4")).body("later").send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = send(once.clone(), "91:1").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (_, replayed) = answer(r.bytes().await.unwrap());
    let replay = |a: A| A::Replayed {
        index: first,
        response: Box::new(a),
    };
    assert_eq!(replayed, [replay(A::Done), replay(A::Existed(true))]);
    let r = http.get(url("/kv/w/4")).send().await.unwrap();
    assert_eq!(r.bytes().await.unwrap(), "later");
    let r = send(vec![put("w/5", "five")], "91:1").await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (_, refused) = answer(r.bytes().await.unwrap());
    assert!(
        matches!(refused.as_slice(), [A::RequestIdRefused(_)]),
        "{refused:?}"
    );
    let r = http.get(url("/kv/w/5")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "not_found").await;
    let r = send(once, "91").await.unwrap();
    error(r, StatusCode::BAD_REQUEST, "bad_request").await;

    // No such route, no such method.
    let r = http.get(url("/nothing")).send().await.unwrap();
    error(r, StatusCode::NOT_FOUND, "no_route").await;
    let r = http.post(url("/kv/list/a")).body("x").send().await.unwrap();
    error(r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
}

async fn status_applied(cluster: &Cluster, id: u64) -> Option<u64> {
    common::procs::status(&cluster.http, cluster.addr(id))
        .await
        .unwrap()
        .last_applied
}
