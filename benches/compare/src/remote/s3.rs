//! An S3 server in this process: s3s-fs (a directory served through s3s's S3 protocol layer,
//! SigV4 checked) on an ephemeral port of 127.0.0.1, in a runtime of its own, reached through
//! object_store's `AmazonS3Builder` over plain HTTP, path-style. The minimal start of
//! podstore-remote/tests/common/s3.rs, without its throttling: requests that carry a
//! condition (`If-None-Match`, `If-Match`) are served one at a time, because s3s-fs checks the
//! condition by a look before the write, and two racing creates could both succeed where S3
//! lets one win (the engines' manifests rely on it).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::Service;
use hyper_util::rt::{TokioExecutor, TokioIo};
use object_store::aws::AmazonS3Builder;
use object_store::{BackoffConfig, ObjectStore, RetryConfig};

const BUCKET: &str = "bench";
const ACCESS_KEY: &str = "AKIAPODSTOREBENCHKEY";
const SECRET_KEY: &str = "podstore/bench/secret/key/not/a/real/one";
const REGION: &str = "us-east-1";

/// A running server; stops when dropped.
pub struct S3Server {
    runtime: Option<tokio::runtime::Runtime>,
    addr: SocketAddr,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl S3Server {
    /// Serves `root` (created, with the bucket's directory in it).
    pub fn start(root: &Path) -> Result<S3Server, String> {
        std::fs::create_dir_all(root.join(BUCKET)).map_err(|e| format!("{root:?}: {e}"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3s-fs")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("s3s-fs: {e:?}"))?;
        let mut service = s3s::service::S3ServiceBuilder::new(fs);
        service.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
        let service = service.build();
        let conditional = Arc::new(tokio::sync::Mutex::new(()));
        let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let (service, conditional) = (service.clone(), conditional.clone());
            async move {
                let headers = req.headers();
                let one_at_a_time = headers.contains_key(hyper::header::IF_NONE_MATCH)
                    || headers.contains_key(hyper::header::IF_MATCH);
                let _turn = match one_at_a_time {
                    true => Some(conditional.lock_owned().await),
                    false => None,
                };
                Service::call(&service, req).await
            }
        });
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        runtime.spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                // Without it a reply's last segment can wait for the client's delayed ACK
                // (~40 ms on Linux): measured, it added 40 ms to every small GET.
                let _ = socket.set_nodelay(true);
                let service = service.clone();
                tokio::spawn(async move {
                    let http = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = http.serve_connection(TokioIo::new(socket), service).await;
                });
            }
        });
        Ok(S3Server {
            runtime: Some(runtime),
            addr,
        })
    }

    /// A client of the bucket: HTTP, path-style, the server's key pair; retries of 5xx and
    /// 429 replies start at 10 ms.
    pub fn store(&self) -> Result<Arc<dyn ObjectStore>, String> {
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(200),
                base: 2.0,
            },
            max_retries: 10,
            retry_timeout: Duration::from_secs(60),
        };
        let s3 = AmazonS3Builder::new()
            .with_retry(retry)
            .with_endpoint(format!("http://{}", self.addr))
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_bucket_name(BUCKET)
            .with_region(REGION)
            .with_access_key_id(ACCESS_KEY)
            .with_secret_access_key(SECRET_KEY)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Arc::new(s3))
    }
}
