//! A [`podstore`] remote tier on any [`object_store::ObjectStore`]: S3, GCS, Azure Blob, an
//! HTTP store, local files, memory.
//!
//! [`ObjectStoreRemote`] implements [`podstore::remote::Remote`], the synchronous seam through
//! which a store uploads its sealed files and writes its manifests
//! ([`Options::remote`](podstore::Options::remote)). It owns a small tokio runtime: the object
//! store's futures run on its threads, and the calling thread (one of the store's) waits on a
//! channel, so the store stays synchronous and a call made from inside another runtime does not
//! panic.
//!
//! ```
//! use std::sync::Arc;
//! use object_store::memory::InMemory;
//! use podstore_remote::ObjectStoreRemote;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let bucket = Arc::new(InMemory::new());
//! let remote = Arc::new(ObjectStoreRemote::new(bucket)?);
//! let opts = podstore::Options::default().remote(remote, "stores/photos");
//! let store = podstore::Store::open_with(dir.path().join("a"), opts.clone())?;
//! store.put("k", "v")?;
//! store.flush_remote()?;
//! drop(store);
//! // A new machine: an empty directory, the same bucket.
//! let store = podstore::Store::open_with(dir.path().join("b"), opts)?;
//! assert_eq!(store.get("k")?.as_deref(), Some(&b"v"[..]));
//! # Ok(())
//! # }
//! ```
//!
//! # How calls map
//!
//! | `Remote` | `ObjectStore` |
//! |---|---|
//! | `put` | one `put` up to [`ObjectStoreRemote::with_part_size`] bytes (default 16 MiB), else a multipart upload of parts of that size (two in flight), aborted on failure |
//! | `put_if_absent` | `put_opts` with `PutMode::Create`; `AlreadyExists` or `Precondition` → `PutOutcome::AlreadyExists` |
//! | `get_range` | `get_range` |
//! | `list` | `list` of the prefix's directory, filtered to names starting with the prefix |
//! | `delete` | `delete` (a missing object is not an error) |
//!
//! Errors: `NotFound` is [`RemoteErrorKind::NotFound`]; `Generic` (a backend's own error,
//! after its client's retries: timeouts, throttling, connections) is
//! [`RemoteErrorKind::Transient`], which the store retries with backoff; the others
//! (permissions, credentials, bad paths, unsupported operations) are
//! [`RemoteErrorKind::Other`]. A backend without conditional puts (S3 without
//! `AWS_CONDITIONAL_PUT` support) answers `put_if_absent` with `NotImplemented`/
//! `NotSupported`: the store then cannot take the prefix, and open fails with
//! [`Error::Remote`](podstore::Error::Remote).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use podstore::remote::{ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind};

/// Parts of a multipart upload in flight at once.
const PARTS_IN_FLIGHT: usize = 2;
/// The default part size, and the largest object put in one request.
const DEFAULT_PART_SIZE: usize = 16 << 20;
/// S3's smallest part (all but the last).
const MIN_PART_SIZE: usize = 5 << 20;

/// A [`Remote`] on an [`ObjectStore`], with a runtime of its own.
pub struct ObjectStoreRemote {
    store: Arc<dyn ObjectStore>,
    /// Always `Some` until dropped (then shut down without blocking: see `Drop`).
    runtime: Option<tokio::runtime::Runtime>,
    part_size: usize,
}

impl Drop for ObjectStoreRemote {
    /// Shuts the runtime down without waiting for it: dropping a runtime blocks, which panics
    /// when the last handle to the remote (inside a `Store`'s options) is dropped by async
    /// code. No call is in flight: each call waits for its future.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for ObjectStoreRemote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectStoreRemote")
            .field("store", &self.store.to_string())
            .field("part_size", &self.part_size)
            .finish_non_exhaustive()
    }
}

impl ObjectStoreRemote {
    /// A remote on `store`, with a runtime of two worker threads (the store's own threads
    /// wait on them; the work is network I/O).
    pub fn new(store: Arc<dyn ObjectStore>) -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("podstore-remote-io")
            .enable_all()
            .build()?;
        Ok(ObjectStoreRemote {
            store,
            runtime: Some(runtime),
            part_size: DEFAULT_PART_SIZE,
        })
    }

    /// Objects larger than `bytes` are uploaded in parts of `bytes` (at least 5 MiB, S3's
    /// smallest part; default 16 MiB).
    pub fn with_part_size(mut self, bytes: usize) -> Self {
        self.part_size = bytes.max(MIN_PART_SIZE);
        self
    }

    /// The adapter's runtime.
    fn runtime(&self) -> &tokio::runtime::Runtime {
        self.runtime
            .as_ref()
            .expect("the runtime lives until the adapter is dropped")
    }

    /// Runs `fut` on the adapter's runtime and waits for it on this thread.
    fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime().spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv()
            .expect("the adapter's runtime lives as long as the adapter")
    }

    /// Uploads `body` in parts; aborts the upload on failure.
    fn put_multipart(&self, path: &Path, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        let store = self.store.clone();
        let at = path.clone();
        let mut upload = self
            .run(async move { store.put_multipart(&at).await })
            .map_err(|e| convert(e, "start a multipart upload"))?;
        let result = (|| {
            let mut in_flight = std::collections::VecDeque::new();
            let mut offset = 0;
            while offset < body.len() {
                let n = (body.len() - offset).min(self.part_size as u64) as usize;
                let mut part = vec![0u8; n];
                body.read_exact_at(offset, &mut part).map_err(|e| {
                    RemoteError::new(RemoteErrorKind::Other, "reading the body failed")
                        .with_source(e)
                })?;
                offset += n as u64;
                let sent = {
                    // Some backends start the part's work when it is asked for.
                    let _in_runtime = self.runtime().enter();
                    upload.put_part(PutPayload::from(part))
                };
                in_flight.push_back(self.runtime().spawn(sent));
                if in_flight.len() >= PARTS_IN_FLIGHT {
                    let first = in_flight.pop_front().expect("not empty");
                    self.join(first)?;
                }
            }
            while let Some(part) = in_flight.pop_front() {
                self.join(part)?;
            }
            Ok(())
        })();
        let finished = match result {
            Ok(()) => self.run(async move {
                let done = upload.complete().await;
                if done.is_err() {
                    let _ = upload.abort().await;
                }
                done
            }),
            Err(e) => {
                self.run(async move {
                    let _ = upload.abort().await;
                });
                return Err(e);
            }
        };
        finished
            .map(|_| ())
            .map_err(|e| convert(e, "complete a multipart upload"))
    }

    /// Waits for a part's upload.
    fn join(
        &self,
        part: tokio::task::JoinHandle<object_store::Result<()>>,
    ) -> Result<(), RemoteError> {
        match self.run(part) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(convert(e, "upload a part")),
            Err(e) => Err(
                RemoteError::new(RemoteErrorKind::Transient, "a part's task failed").with_source(e),
            ),
        }
    }
}

/// The object store path of `name`.
fn path(name: &str) -> Result<Path, RemoteError> {
    Path::parse(name).map_err(|e| {
        RemoteError::new(
            RemoteErrorKind::Other,
            format!("not an object path: {name}"),
        )
        .with_source(e)
    })
}

/// An object_store error as a [`RemoteError`] (see the crate docs for the kinds).
fn convert(e: object_store::Error, what: &str) -> RemoteError {
    let kind = match &e {
        object_store::Error::NotFound { .. } => RemoteErrorKind::NotFound,
        // (`JoinError` exists only with object_store's `tokio` feature, which the backends
        // that spawn tasks enable; it falls under `Other`.)
        object_store::Error::Generic { .. } => RemoteErrorKind::Transient,
        _ => RemoteErrorKind::Other,
    };
    RemoteError::new(kind, what.to_string()).with_source(e)
}

impl Remote for ObjectStoreRemote {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        let at = path(name)?;
        if body.len() > self.part_size as u64 {
            return self.put_multipart(&at, body);
        }
        let bytes = body.to_vec().map_err(|e| {
            RemoteError::new(RemoteErrorKind::Other, "reading the body failed").with_source(e)
        })?;
        let store = self.store.clone();
        self.run(async move { store.put(&at, PutPayload::from(bytes)).await })
            .map(|_| ())
            .map_err(|e| convert(e, "put"))
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        let at = path(name)?;
        let store = self.store.clone();
        let payload = PutPayload::from(bytes.to_vec());
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self.run(async move { store.put_opts(&at, payload, opts).await }) {
            Ok(_) => Ok(PutOutcome::Created),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(convert(e, "conditional put")),
        }
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        let at = path(name)?;
        let store = self.store.clone();
        self.run(async move { store.get_range(&at, range).await })
            .map(|b| b.to_vec())
            .map_err(|e| convert(e, "get range"))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        // Listings are by whole path segments: list the directory the prefix is in, keep the
        // names that start with it.
        let dir = match prefix.rfind('/') {
            Some(i) => Some(path(&prefix[..i])?),
            None => None,
        };
        let store = self.store.clone();
        let wanted = prefix.to_string();
        self.run(async move {
            let mut out = Vec::new();
            let mut listing = store.list(dir.as_ref());
            while let Some(meta) = listing.next().await {
                let meta = meta.map_err(|e| convert(e, "list"))?;
                let name = meta.location.to_string();
                if name.starts_with(&wanted) {
                    // object_store's `last_modified` (S3's LastModified, a file's mtime): the
                    // remote's clock, by which the store dates its manifests.
                    let modified = std::time::SystemTime::from(meta.last_modified);
                    out.push(ObjectInfo::new(name, meta.size).with_modified(modified));
                }
            }
            Ok(out)
        })
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        let at = path(name)?;
        let store = self.store.clone();
        match self.run(async move { store.delete(&at).await }) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(convert(e, "delete")),
        }
    }
}
