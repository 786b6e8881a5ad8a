//! The HTTP transport's guard against misdirected Raft RPCs: a node served on a real socket on
//! 127.0.0.1 refuses an RPC that names another node or none, and a membership that gives two
//! nodes one address leaves the Raft core running instead of feeding it its own messages.

use std::collections::BTreeMap;
use std::time::Duration;

use openraft::async_runtime::watch::WatchReceiver;

use podstore_raft::http::{HttpNetwork, TARGET_HEADER, router};
use podstore_raft::{Node, default_config};

/// Opens node `id` in `dir` and serves it on a fresh port; returns it and its address.
async fn serve(id: u64, dir: &std::path::Path) -> (Node, String) {
    serve_with(id, dir, default_config()).await
}

/// [`serve`] with Raft settings `config`.
async fn serve_with(id: u64, dir: &std::path::Path, config: openraft::Config) -> (Node, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let node = Node::open(id, dir, config, HttpNetwork::new())
        .await
        .unwrap();
    let app = router(node.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (node, addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_rpcs_meant_for_another_node_or_none_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (node, addr) = serve(1, dir.path()).await;
    let http = reqwest::Client::new();
    let members = BTreeMap::from([(1u64, addr.clone())]);
    let r = http
        .post(format!("http://{addr}/cluster/init"))
        .json(&members)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "init: {}", r.status());
    node.raft()
        .wait(Some(Duration::from_secs(10)))
        .current_leader(1, "node 1 leads")
        .await
        .unwrap();
    let term = node.raft().metrics().borrow_watched().current_term;

    for path in ["/raft/append", "/raft/vote", "/raft/snapshot"] {
        let url = format!("http://{addr}{path}");
        let to_two = http
            .post(&url)
            .header(TARGET_HEADER, "2")
            .body(vec![0u8; 16]);
        let r = to_two.send().await.unwrap();
        assert_eq!(
            r.status(),
            reqwest::StatusCode::MISDIRECTED_REQUEST,
            "{path}"
        );
        let text = r.text().await.unwrap();
        assert!(text.contains("not node 2"), "{path}: {text}");
        let r = http.post(&url).body(vec![0u8; 16]).send().await.unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST, "{path}");
        let r = http
            .post(&url)
            .header(TARGET_HEADER, "one")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST, "{path}");
    }
    // Meant for this node but garbage: refused by the decoder, as before.
    let r = http
        .post(format!("http://{addr}/raft/append"))
        .header(TARGET_HEADER, "1")
        .body(vec![0xffu8; 16])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::BAD_REQUEST);

    // None of it reached Raft: same term, still the leader, and writes go on.
    let m = node.raft().metrics().borrow_watched().clone();
    assert_eq!((m.current_term, m.current_leader), (term, Some(1)));
    let r = http
        .put(format!("http://{addr}/kv/k"))
        .body("v")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "put: {}", r.status());
    assert_eq!(node.get(b"k".to_vec()).await.unwrap().unwrap(), b"v");
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_at_one_address_leave_the_raft_core_running() {
    let dir = tempfile::tempdir().unwrap();
    // Elections every 150 to 300 ms of silence (1 to 2 s by default): the test waits for
    // several, not for a fixed time.
    let config = openraft::Config {
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        ..default_config()
    };
    let (node, addr) = serve_with(1, dir.path(), config).await;
    // Node 2's address is node 1's own: node 1 would ask itself for votes and, once leader,
    // send itself AppendEntries as its follower.
    let members = BTreeMap::from([(1u64, addr.clone()), (2u64, addr.clone())]);
    node.initialize(members).await.unwrap();
    // Several elections, each of which would have made it leader of itself: each one is a new
    // term (openraft runs no pre-vote by default).
    node.raft()
        .wait(Some(Duration::from_secs(20)))
        .metrics(|m| m.current_term >= 4, "three elections after the first")
        .await
        .unwrap();
    let state = node.raft().with_raft_state(|s| s.server_state).await;
    let state = state.expect("the Raft core is still running");
    assert!(!state.is_leader(), "leader with no second vote: {state:?}");
    let m = node.raft().metrics().borrow_watched().clone();
    assert!(m.running_state.is_ok(), "{:?}", m.running_state);
    assert_eq!(m.current_leader, None);
    node.shutdown().await.unwrap();
}
