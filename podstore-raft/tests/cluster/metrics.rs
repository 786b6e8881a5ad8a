//! `GET /metrics` of real node processes (the `podstore-raft` binary) on 127.0.0.1: named
//! series move as requests are answered (request counts and latency by route and status, the
//! state machine's keys and cache, Raft's indexes), the leader reports each follower's
//! replication, and `/cluster/status` each follower's lag.

use crate::common;

use common::procs::{Cluster, status, wait_for};

/// The value of the series `name` (with its labels, as written: `name{a="b"}`) in `text`.
fn series(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

async fn scrape(http: &reqwest::Client, addr: &str) -> String {
    let r = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let kind = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    r.text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_move_with_requests_and_show_replication() {
    let root = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(root.path(), &[]).await;
    let http = cluster.http.clone();
    let leader = cluster.leader().await;
    let addr = cluster.addr(leader).to_string();

    let put_ok =
        r#"podstore_raft_http_requests_total{route="/kv/{*key}",method="PUT",status="200"}"#;
    let get_404 =
        r#"podstore_raft_http_requests_total{route="/kv/{*key}",method="GET",status="404"}"#;
    let put_latency = r#"podstore_raft_http_request_duration_seconds_count{route="/kv/{*key}",method="PUT",status="200"}"#;
    let keys = r#"podstore_store_live_keys{store="sm"}"#;
    let hits = r#"podstore_store_cache_hits_total{store="sm"}"#;
    let applied = "podstore_raft_applied_index";

    let before = scrape(&http, &addr).await;
    assert_eq!(series(&before, "podstore_raft_is_leader"), Some(1.0));
    assert!(series(&before, "podstore_raft_term").unwrap() >= 1.0);
    let keys_before = series(&before, keys).unwrap();
    let applied_before = series(&before, applied).unwrap();
    let hits_before = series(&before, hits).unwrap_or(0.0);

    for i in 0..10 {
        let r = http
            .put(format!("http://{addr}/kv/m/{i}"))
            .body(format!("value {i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    for i in 0..10 {
        let r = http
            .get(format!("http://{addr}/kv/m/{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = http
        .get(format!("http://{addr}/kv/none"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    let after = scrape(&http, &addr).await;
    assert_eq!(series(&after, put_ok), Some(10.0), "{after}");
    assert_eq!(series(&after, put_latency), Some(10.0));
    assert_eq!(series(&after, get_404), Some(1.0));
    assert_eq!(series(&after, keys).unwrap(), keys_before + 10.0);
    assert!(series(&after, applied).unwrap() >= applied_before + 10.0);
    assert!(series(&after, hits).unwrap() > hits_before, "{after}");
    // No key in a label: the route's pattern only.
    assert!(!after.contains("m/3"), "{after}");

    // The leader's view of its followers, in the metrics and in the status, once they hold
    // everything.
    let last = series(&after, "podstore_raft_last_log_index").unwrap() as u64;
    let s = wait_for("the followers to match the leader", async || {
        let s = status(&http, &addr).await?;
        let r = s.replication.as_ref()?;
        (r.len() == 2 && r.values().all(|f| f.matched >= Some(last) && f.lag == 0)).then_some(s)
    })
    .await;
    assert!(s.learners.is_empty());
    let text = scrape(&http, &addr).await;
    for id in (1..=3).filter(|&id| id != leader) {
        let lag = format!(r#"podstore_raft_replication_lag{{follower="{id}"}}"#);
        let matched = format!(r#"podstore_raft_replication_matched_index{{follower="{id}"}}"#);
        assert!(series(&text, &lag).is_some(), "{text}");
        assert!(series(&text, &matched).unwrap() >= last as f64);
        // A follower has no replication figures, and says it does not lead.
        let follower = scrape(&http, cluster.addr(id)).await;
        assert_eq!(series(&follower, "podstore_raft_is_leader"), Some(0.0));
        assert!(!follower.contains("podstore_raft_replication_lag"));
        assert_eq!(
            status(&http, cluster.addr(id)).await.unwrap().replication,
            None
        );
    }
}
