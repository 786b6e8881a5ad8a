//! `GET /metrics`: a node's figures in the Prometheus text format (OpenMetrics), with
//! prometheus-client.
//!
//! Two kinds:
//!
//! - read when scraped, from the node itself ([`NodeCollector`]): its stores' figures
//!   (`Store::stats` of the state machine and of the log, `store="sm"` / `store="log"`), and
//!   Raft's (term, leadership, last log, committed, applied, snapshot and purged indexes and,
//!   on the leader, each follower's matched index and lag);
//! - counted as requests are answered (a layer over every route, [`track`]): requests and their
//!   latency (until the handler's answer is ready; a body streamed after it is not counted) by
//!   route (the route's pattern, `/kv/{*key}`, never a key), method and status.
//!
//! One registry per router, not a process-wide one: several nodes in one process (the
//! in-process tests, an embedder) keep their figures apart.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use openraft::async_runtime::watch::WatchReceiver;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::Node;

/// The labels of a request's figures.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

/// Latency buckets: 100 µs to about 3.3 s, doubling (a cached get to a write that waits for
/// an fsync on a majority, or a snapshot's chunk).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// A node's metrics: the registry `/metrics` encodes, and the request figures [`track`] counts.
#[derive(Debug)]
pub(super) struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
}

impl Metrics {
    pub(super) fn new(node: Node) -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<RequestLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "podstore_raft_http_requests",
            "HTTP requests answered, by route, method and status",
            requests.clone(),
        );
        registry.register(
            "podstore_raft_http_request_duration_seconds",
            "Time to answer an HTTP request (until the answer's headers), by route, method and status",
            latency.clone(),
        );
        registry.register_collector(Box::new(NodeCollector { node }));
        Metrics {
            registry,
            requests,
            latency,
        }
    }

    /// The figures, as Prometheus reads them.
    fn encode(&self) -> Result<String, std::fmt::Error> {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
        Ok(text)
    }
}

/// A method as a label: the ones the API takes, others as `other` (a client's made-up methods
/// must not make new series).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::PUT => "PUT",
        Method::POST => "POST",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}

/// Counts a request and its latency (a layer over the whole router).
pub(super) async fn track(State(m): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(req.method()).to_owned();
    let start = Instant::now();
    let response = next.run(req).await;
    let labels = RequestLabels {
        route,
        method,
        status: response.status().as_u16(),
    };
    m.requests.get_or_create(&labels).inc();
    m.latency
        .get_or_create(&labels)
        .observe(start.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`.
pub(super) async fn serve(m: Arc<Metrics>) -> Response {
    // The stores' figures are taken under their locks (`Store::stats`): off the runtime's
    // threads, as other store calls are.
    match tokio::task::spawn_blocking(move || m.encode()).await {
        Ok(Ok(text)) => (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        _ => super::api::error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the metrics could not be encoded",
        ),
    }
}

/// The figures read from the node at each scrape.
#[derive(Debug)]
struct NodeCollector {
    node: Node,
}

/// Encodes one gauge or counter family: `(labels, value)` for each series.
fn family<S: EncodeLabelSet>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    series: &[(S, u64)],
) -> Result<(), std::fmt::Error> {
    if series.is_empty() {
        return Ok(());
    }
    let mut m = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, value) in series {
        let e = m.encode_family(labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(*value).encode(e)?,
            _ => ConstGauge::new(i64::try_from(*value).unwrap_or(i64::MAX)).encode(e)?,
        }
    }
    Ok(())
}

/// A figure of each store: its name, help, type, and how it is read from `Store::stats`.
type StoreFigure = (
    &'static str,
    &'static str,
    MetricType,
    fn(&podstore::Stats) -> u64,
);

/// A figure without labels.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: Option<u64>,
) -> Result<(), std::fmt::Error> {
    match value {
        Some(v) => {
            let m = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX)).encode(m)
        }
        None => Ok(()),
    }
}

impl Collector for NodeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        let stores = [
            ("sm", self.node.state_machine().stats()),
            ("log", self.node.log_store().store().stats()),
        ];
        let per_store = |f: fn(&podstore::Stats) -> u64| -> Vec<([(&str, &str); 1], u64)> {
            stores
                .iter()
                .map(|(name, s)| ([("store", *name)], f(s)))
                .collect()
        };
        use MetricType::{Counter as C, Gauge as G};
        let store_figures: [StoreFigure; 7] = [
            ("podstore_store_live_keys", "Keys with a value", G, |s| {
                s.live_keys
            }),
            (
                "podstore_store_live_bytes",
                "Bytes of the records of live values",
                G,
                |s| s.live_bytes,
            ),
            (
                "podstore_store_disk_bytes",
                "Length of all segment and blob files",
                G,
                |s| s.disk_bytes,
            ),
            (
                "podstore_store_cache_hits",
                "Lookups the read cache answered since open",
                C,
                |s| s.cache_hits,
            ),
            (
                "podstore_store_cache_misses",
                "Lookups of the read cache that found nothing since open",
                C,
                |s| s.cache_misses,
            ),
            (
                "podstore_store_cache_bytes",
                "Bytes the read cache holds",
                G,
                |s| s.cache_bytes,
            ),
            (
                "podstore_store_user_bytes_written",
                "Record bytes written by puts, deletes and batches since open",
                C,
                |s| s.user_bytes_written,
            ),
        ];
        for (name, help, kind, f) in store_figures {
            family(e, name, help, kind, &per_store(f))?;
        }

        let m = self.node.raft().metrics().borrow_watched().clone();
        let index = |l: Option<openraft::alias::LogIdOf<crate::TypeConfig>>| l.map(|l| l.index());
        gauge(
            e,
            "podstore_raft_term",
            "The node's current term",
            Some(m.current_term),
        )?;
        let leads = u64::from(self.node.known_leader() == Some(self.node.id()));
        gauge(
            e,
            "podstore_raft_is_leader",
            "1 on the leader, 0 elsewhere",
            Some(leads),
        )?;
        gauge(
            e,
            "podstore_raft_last_log_index",
            "The last index in the node's log",
            m.last_log_index,
        )?;
        gauge(
            e,
            "podstore_raft_committed_index",
            "The last index the node knows committed",
            index(m.local_committed),
        )?;
        gauge(
            e,
            "podstore_raft_applied_index",
            "The last index the node has applied",
            index(m.last_applied).max(super::stored_applied(&self.node)),
        )?;
        gauge(
            e,
            "podstore_raft_snapshot_index",
            "The last index of the node's newest snapshot",
            index(m.snapshot),
        )?;
        gauge(
            e,
            "podstore_raft_purged_index",
            "The last index purged from the node's log",
            index(m.purged),
        )?;
        if let Some(replication) = &m.replication {
            let last = m.last_log_index.unwrap_or(0);
            let mut matched = Vec::new();
            let mut lag = Vec::new();
            for (id, l) in replication.iter().filter(|(id, _)| **id != m.id) {
                let follower = [("follower", id.to_string())];
                let at = index(*l);
                matched.push((follower.clone(), at.unwrap_or(0)));
                lag.push((follower, last.saturating_sub(at.unwrap_or(0))));
            }
            family(
                e,
                "podstore_raft_replication_matched_index",
                "On the leader: the last index each follower or learner is known to hold",
                G,
                &matched,
            )?;
            family(
                e,
                "podstore_raft_replication_lag",
                "On the leader: entries each follower or learner lacks behind the leader's last",
                G,
                &lag,
            )?;
        }
        Ok(())
    }
}
