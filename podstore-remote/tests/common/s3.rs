//! A real S3 server on 127.0.0.1 for the tests: `s3s-fs` (a directory served through `s3s`'s
//! S3 protocol layer, SigV4 signatures checked with a test key pair) on an ephemeral port, in
//! its own runtime, reached through `object_store`'s `AmazonS3Builder` over plain HTTP,
//! path-style. The server lives until the handle is dropped; another process (a kill -9
//! child, the command-line tool) reaches it by its endpoint.
//!
//! s3s-fs honours `If-None-Match: *` on `PutObject` and `CompleteMultipartUpload` (what
//! `PutMode::Create` sends with `object_store`'s default `S3ConditionalPut::ETagMatch`) and
//! `If-Match: <etag>`, but by a look at the file before the write: two creates of one name at
//! the same instant both succeed (measured: 268 of 300 races of two clients). S3 itself, and
//! object_store's `InMemory` and `LocalFileSystem`, let exactly one win. So that the server
//! has S3's semantics, the harness serves requests that carry a condition one at a time (the
//! others run in parallel): the fencing tests then test the client's side against it.
//!
//! [`S3Server::start_with`] makes the server fail requests the way S3 does under load, drawn
//! from a seeded generator ([`Throttle`]): 503 SlowDown and 429 before the request is served,
//! and (for conditional creates) a 503 after it was served, its reply lost, so that the
//! client's retry finds the object its first attempt created.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo};
use object_store::aws::AmazonS3Builder;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};

/// The bucket the server holds (a directory under its root).
pub const BUCKET: &str = "podstore-test";
/// The test key pair the server accepts (and nothing else).
pub const ACCESS_KEY: &str = "AKIAPODSTORETESTKEY1";
pub const SECRET_KEY: &str = "podstore/test/secret/key/not/a/real/one";
pub const REGION: &str = "us-east-1";

/// What [`S3Server::start_with`] injects. Rates are fractions of requests, in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Throttle {
    /// Requests answered 503 SlowDown or 429 (one or the other at random) without being
    /// served.
    pub refuse_rate: f64,
    /// Conditional creates (`If-None-Match: *`) served, and then answered 503 (the reply lost).
    pub lost_create_rate: f64,
    /// The generator's seed.
    pub seed: u64,
}

/// What a server injected so far.
#[derive(Debug, Default)]
pub struct Injected {
    pub refused: AtomicU64,
    pub lost_creates: AtomicU64,
}

/// A running s3s-fs server.
pub struct S3Server {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
    injected: Arc<Injected>,
}

/// A uniform draw in `[0, 1)` from `state` (xorshift64).
fn draw(state: &Mutex<u64>) -> f64 {
    let mut s = state.lock().unwrap();
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    (*s >> 11) as f64 / (1u64 << 53) as f64
}

/// An S3 error reply.
fn error_reply(status: u16, code: &str) -> hyper::Response<s3s::Body> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>\
         <Message>injected by the test server</Message></Error>"
    );
    hyper::Response::builder()
        .status(status)
        .header(hyper::header::CONTENT_TYPE, "application/xml")
        .body(s3s::Body::from(body))
        .unwrap()
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl S3Server {
    /// Serves `root` (created, with the bucket's directory in it) on an ephemeral port of
    /// 127.0.0.1.
    pub fn start(root: &Path) -> S3Server {
        S3Server::start_with(root, Throttle::default())
    }

    /// [`S3Server::start`], failing requests as `throttle` says.
    pub fn start_with(root: &Path, throttle: Throttle) -> S3Server {
        std::fs::create_dir_all(root.join(BUCKET)).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3s-fs")
            .enable_all()
            .build()
            .unwrap();
        let fs = s3s_fs::FileSystem::new(root).unwrap();
        let mut service = s3s::service::S3ServiceBuilder::new(fs);
        service.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = service.build();
        // Conditional requests one at a time (see the module's docs).
        let conditional = Arc::new(tokio::sync::Mutex::new(()));
        let rng = Arc::new(Mutex::new(throttle.seed | 1));
        let injected = Arc::new(Injected::default());
        let counts = injected.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let (service, conditional) = (service.clone(), conditional.clone());
            let (rng, counts) = (rng.clone(), counts.clone());
            async move {
                let headers = req.headers();
                let create = headers
                    .get(hyper::header::IF_NONE_MATCH)
                    .is_some_and(|v| v == "*");
                let one_at_a_time = headers.contains_key(hyper::header::IF_NONE_MATCH)
                    || headers.contains_key(hyper::header::IF_MATCH);
                if throttle.refuse_rate > 0.0 && draw(&rng) < throttle.refuse_rate {
                    counts.refused.fetch_add(1, Ordering::Relaxed);
                    return Ok(match draw(&rng) < 0.5 {
                        true => error_reply(503, "SlowDown"),
                        false => error_reply(429, "TooManyRequests"),
                    });
                }
                let lose = create
                    && throttle.lost_create_rate > 0.0
                    && draw(&rng) < throttle.lost_create_rate;
                let _turn = match one_at_a_time {
                    true => Some(conditional.lock_owned().await),
                    false => None,
                };
                let reply = Service::call(&service, req).await;
                if lose {
                    counts.lost_creates.fetch_add(1, Ordering::Relaxed);
                    return Ok(error_reply(503, "ServiceUnavailable"));
                }
                reply
            }
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                tokio::spawn(async move {
                    let http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = http.serve_connection(TokioIo::new(socket), service).await;
                });
            }
        });
        S3Server {
            runtime: Some(runtime),
            addr,
            injected,
        }
    }

    /// What the server injected so far.
    pub fn injected(&self) -> &Injected {
        &self.injected
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The environment a process reads its S3 settings from (`AmazonS3Builder::from_env`,
    /// `object_store::parse_url_opts`): this server's endpoint and key pair.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", REGION.into()),
        ]
    }

    /// A client of the bucket: HTTP, path-style, the test key pair; its retries of 5xx and 429
    /// replies wait 10 ms at first (object_store's default: 100 ms), at most 200 ms.
    pub fn builder(&self) -> AmazonS3Builder {
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(200),
                base: 2.0,
            },
            max_retries: 10,
            retry_timeout: Duration::from_secs(30),
        };
        AmazonS3Builder::new()
            .with_retry(retry)
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_bucket_name(BUCKET)
            .with_region(REGION)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
    }

    /// [`S3Server::builder`], built.
    pub fn store(&self) -> Arc<dyn ObjectStore> {
        Arc::new(self.builder().build().unwrap())
    }
}
