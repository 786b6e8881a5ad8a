//! [`FaultyStore`]: an `ObjectStore` around another that injects the failures a real object
//! store has, as `object_store` reports them, drawn from a seeded generator so that a failing
//! run can be repeated.
//!
//! The library's `FaultyRemote` injects faults at the `Remote` seam (transient errors, lost
//! replies, delays): it tests the store's retries, not the adapter. This wrapper sits under
//! the adapter, so that what is tested is the whole path: `object_store`'s errors mapped to the
//! store's kinds (throttling and timeouts retried, a refusal not), and a multipart upload cut
//! off between its parts aborted and retried.

#![allow(dead_code)]

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    UploadPart,
};

/// What a [`FaultyStore`] injects. Rates are fractions of calls, in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    /// Calls refused as `object_store` reports throttling once its own retries are spent
    /// (`Error::Generic`, a 503 SlowDown): the store retries them.
    pub throttle_rate: f64,
    /// Calls that hang for [`Faults::timeout`] and then fail as a timed-out request
    /// (`Error::Generic`): the store retries them.
    pub timeout_rate: f64,
    /// How long a timed-out call hangs.
    pub timeout: Duration,
    /// Calls refused for good (`Error::PermissionDenied`, a 403): the store does not retry.
    pub denied_rate: f64,
    /// Each call first waits a random time up to this.
    pub max_delay: Duration,
    /// The next this many multipart uploads fail at their part of index
    /// [`Faults::cut_at_part`] (a connection lost mid-upload, `Error::Generic`).
    pub cut_uploads: u64,
    /// See [`Faults::cut_uploads`].
    pub cut_at_part: usize,
}

/// State shared with the uploads a [`FaultyStore`] hands out.
#[derive(Debug)]
struct Shared {
    faults: Mutex<Faults>,
    rng: Mutex<u64>,
    /// Every fault injected, in order: `"<call> <path>: <fault>"`.
    log: Mutex<Vec<String>>,
    aborted: AtomicU64,
}

impl Shared {
    fn faults(&self) -> Faults {
        *self.faults.lock().unwrap()
    }

    /// A uniform draw in `[0, 1)` (xorshift64).
    fn draw(&self) -> f64 {
        let mut s = self.rng.lock().unwrap();
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s >> 11) as f64 / (1u64 << 53) as f64
    }

    fn note(&self, call: &str, path: &str, fault: &str) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{call} {path}: {fault}"));
    }

    /// The fault for one call, drawn now (so that the draws follow the order of the calls):
    /// a delay, then maybe an error.
    fn plan(&self, call: &'static str, path: &str) -> Plan {
        let f = self.faults();
        let delay = f.max_delay.mul_f64(self.draw());
        let roll = self.draw();
        let error = if roll < f.throttle_rate {
            Some(Fault::Throttled)
        } else if roll < f.throttle_rate + f.timeout_rate {
            Some(Fault::TimedOut(f.timeout))
        } else if roll < f.throttle_rate + f.timeout_rate + f.denied_rate {
            Some(Fault::Denied)
        } else {
            None
        };
        if let Some(e) = &error {
            self.note(call, path, e.name());
        }
        Plan {
            delay,
            error,
            path: path.to_string(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Fault {
    Throttled,
    TimedOut(Duration),
    Denied,
}

impl Fault {
    fn name(&self) -> &'static str {
        match self {
            Fault::Throttled => "throttled",
            Fault::TimedOut(_) => "timed out",
            Fault::Denied => "denied",
        }
    }
}

/// What one call does before (or instead of) reaching the inner store.
struct Plan {
    delay: Duration,
    error: Option<Fault>,
    path: String,
}

impl Plan {
    /// Waits, then fails or lets the call through.
    async fn run(self) -> Result<()> {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        match self.error {
            None => Ok(()),
            Some(Fault::Throttled) => Err(Error::Generic {
                store: "S3",
                source: "Server returned non-2xx status code: 503 Service Unavailable: \
                         <Error><Code>SlowDown</Code></Error> (injected, after retries)"
                    .into(),
            }),
            Some(Fault::TimedOut(after)) => {
                tokio::time::sleep(after).await;
                Err(Error::Generic {
                    store: "S3",
                    source: format!("request timed out after {after:?} (injected)").into(),
                })
            }
            Some(Fault::Denied) => Err(Error::PermissionDenied {
                path: self.path,
                source: "403 AccessDenied (injected)".into(),
            }),
        }
    }
}

/// An `ObjectStore` that passes calls to another and injects [`Faults`].
#[derive(Debug, Clone)]
pub struct FaultyStore {
    inner: Arc<dyn ObjectStore>,
    shared: Arc<Shared>,
}

impl fmt::Display for FaultyStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FaultyStore({})", self.inner)
    }
}

impl FaultyStore {
    /// Wraps `inner`, injecting `faults` drawn from `seed`.
    pub fn new(inner: Arc<dyn ObjectStore>, faults: Faults, seed: u64) -> FaultyStore {
        FaultyStore {
            inner,
            shared: Arc::new(Shared {
                faults: Mutex::new(faults),
                // xorshift needs a nonzero state.
                rng: Mutex::new(seed | 1),
                log: Mutex::new(Vec::new()),
                aborted: AtomicU64::new(0),
            }),
        }
    }

    /// Changes the faults injected from now on.
    pub fn set_faults(&self, faults: Faults) {
        *self.shared.faults.lock().unwrap() = faults;
    }

    /// Every fault injected so far, in order.
    pub fn log(&self) -> Vec<String> {
        self.shared.log.lock().unwrap().clone()
    }

    /// Multipart uploads aborted so far.
    pub fn aborted(&self) -> u64 {
        self.shared.aborted.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl ObjectStore for FaultyStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.shared.plan("put", location.as_ref()).run().await?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.shared
            .plan("put_multipart", location.as_ref())
            .run()
            .await?;
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        let cut_at = {
            let mut f = self.shared.faults.lock().unwrap();
            (f.cut_uploads > 0).then(|| {
                f.cut_uploads -= 1;
                f.cut_at_part
            })
        };
        Ok(Box::new(FaultyUpload {
            inner,
            parts: 0,
            cut_at,
            path: location.to_string(),
            shared: self.shared.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.shared.plan("get", location.as_ref()).run().await?;
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> Result<Vec<bytes::Bytes>> {
        self.shared
            .plan("get_ranges", location.as_ref())
            .run()
            .await?;
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let shared = self.shared.clone();
        let inner = self.inner.clone();
        // Each location's fault decided in turn; the ones let through go to the inner store.
        locations
            .then(move |at| {
                let (shared, inner) = (shared.clone(), inner.clone());
                async move {
                    let at = at?;
                    shared.plan("delete", at.as_ref()).run().await?;
                    inner.delete(&at).await.map(|()| at)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let at = prefix.map_or(String::new(), |p| p.to_string());
        let plan = self.shared.plan("list", &at);
        let (inner, prefix) = (self.inner.clone(), prefix.cloned());
        futures::stream::once(async move { plan.run().await.map(|()| inner.list(prefix.as_ref())) })
            .flat_map(|ready| match ready {
                Ok(listing) => listing,
                Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
            })
            .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let at = prefix.map_or(String::new(), |p| p.to_string());
        self.shared.plan("list", &at).run().await?;
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.shared.plan("copy", from.as_ref()).run().await?;
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload of a [`FaultyStore`]: may be cut off at one part.
#[derive(Debug)]
struct FaultyUpload {
    inner: Box<dyn MultipartUpload>,
    parts: usize,
    cut_at: Option<usize>,
    path: String,
    shared: Arc<Shared>,
}

#[async_trait]
impl MultipartUpload for FaultyUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let n = self.parts;
        self.parts += 1;
        if self.cut_at == Some(n) {
            self.shared.note("put_part", &self.path, "cut off");
            return Box::pin(async move {
                Err(Error::Generic {
                    store: "S3",
                    source: format!("connection reset uploading part {n} (injected)").into(),
                })
            });
        }
        self.inner.put_part(data)
    }

    async fn complete(&mut self) -> Result<PutResult> {
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        self.shared.aborted.fetch_add(1, Ordering::Relaxed);
        self.inner.abort().await
    }
}
