//! The `ObjectStore` both engines are handed: a wrapper that waits `latency` before every
//! request it passes on (the first-byte latency of S3 Standard, ~20 ms; client-side, so it
//! costs both engines alike and adds nothing to the server's work) and counts requests by kind
//! and the bytes they carry.
//!
//! A request is what an S3 client sends: a GET (ranged or whole; `get_ranges` is left to the
//! trait's default, which calls `get_opts` once per merged range, so each is counted), a HEAD, a
//! PUT (a conditional create counted apart), a multipart upload's start, each part and its
//! completion, a LIST call, a DELETE, a COPY. On `LocalFileSystem` the same calls are file
//! operations, counted the same way.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    UploadPart,
};

/// Request and byte counts (monotonic; a row takes the difference of two snapshots).
#[derive(Debug, Default)]
pub struct Counters {
    pub gets: AtomicU64,
    pub get_bytes: AtomicU64,
    pub heads: AtomicU64,
    pub puts: AtomicU64,
    pub creates: AtomicU64,
    pub put_bytes: AtomicU64,
    pub multipart_starts: AtomicU64,
    pub parts: AtomicU64,
    pub completes: AtomicU64,
    pub lists: AtomicU64,
    pub deletes: AtomicU64,
    pub copies: AtomicU64,
}

/// A copy of [`Counters`] at one instant.
#[derive(Debug, Default, Clone, Copy)]
pub struct Snapshot {
    pub gets: u64,
    pub get_bytes: u64,
    pub heads: u64,
    pub puts: u64,
    pub creates: u64,
    pub put_bytes: u64,
    pub multipart: u64,
    pub lists: u64,
    pub deletes: u64,
    pub copies: u64,
}

impl Snapshot {
    /// Every request, of any kind.
    pub fn requests(&self) -> u64 {
        self.gets
            + self.heads
            + self.puts
            + self.creates
            + self.multipart
            + self.lists
            + self.deletes
            + self.copies
    }

    /// Requests that write (PUTs, creates, multipart requests, deletes, copies).
    pub fn writes(&self) -> u64 {
        self.puts + self.creates + self.multipart + self.deletes + self.copies
    }

    /// `self - before`.
    pub fn since(&self, b: &Snapshot) -> Snapshot {
        Snapshot {
            gets: self.gets - b.gets,
            get_bytes: self.get_bytes - b.get_bytes,
            heads: self.heads - b.heads,
            puts: self.puts - b.puts,
            creates: self.creates - b.creates,
            put_bytes: self.put_bytes - b.put_bytes,
            multipart: self.multipart - b.multipart,
            lists: self.lists - b.lists,
            deletes: self.deletes - b.deletes,
            copies: self.copies - b.copies,
        }
    }

    /// The counts as JSON fields, each divided by `ops` (per operation).
    pub fn per_op(&self, ops: f64) -> serde_json::Value {
        let d = |n: u64| n as f64 / ops;
        serde_json::json!({
            "requests_per_op": d(self.requests()),
            "gets_per_op": d(self.gets),
            "heads_per_op": d(self.heads),
            "lists_per_op": d(self.lists),
            "writes_per_op": d(self.writes()),
            "bytes_fetched_per_op": d(self.get_bytes),
            "bytes_put_per_op": d(self.put_bytes),
        })
    }
}

impl Counters {
    pub fn snapshot(&self) -> Snapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Snapshot {
            gets: l(&self.gets),
            get_bytes: l(&self.get_bytes),
            heads: l(&self.heads),
            puts: l(&self.puts),
            creates: l(&self.creates),
            put_bytes: l(&self.put_bytes),
            multipart: l(&self.multipart_starts) + l(&self.parts) + l(&self.completes),
            lists: l(&self.lists),
            deletes: l(&self.deletes),
            copies: l(&self.copies),
        }
    }
}

fn bump(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// The wrapper.
pub struct Metered {
    inner: Arc<dyn ObjectStore>,
    latency: Duration,
    counters: Arc<Counters>,
}

impl Metered {
    pub fn new(inner: Arc<dyn ObjectStore>, latency: Duration) -> Metered {
        Metered {
            inner,
            latency,
            counters: Arc::new(Counters::default()),
        }
    }

    pub fn counters(&self) -> Arc<Counters> {
        self.counters.clone()
    }

    async fn wait(&self) {
        wait(self.latency).await;
    }
}

/// `COMPARE_REMOTE_TRACE=1`: every GET and LIST printed on stderr (what a row's requests are).
fn trace() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("COMPARE_REMOTE_TRACE").is_some())
}

async fn wait(latency: Duration) {
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
}

impl fmt::Debug for Metered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Metered({}, {:?})", self.inner, self.latency)
    }
}

impl fmt::Display for Metered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Metered({})", self.inner)
    }
}

#[async_trait]
impl ObjectStore for Metered {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        self.wait().await;
        match opts.mode {
            PutMode::Overwrite => bump(&self.counters.puts, 1),
            _ => bump(&self.counters.creates, 1),
        }
        bump(&self.counters.put_bytes, payload.content_length() as u64);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        self.wait().await;
        bump(&self.counters.multipart_starts, 1);
        let inner = self.inner.put_multipart_opts(location, opts).await?;
        Ok(Box::new(MeteredUpload {
            inner,
            latency: self.latency,
            counters: self.counters.clone(),
        }))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        // Counted when sent, as S3 counts (and bills) them: a reader may drop a request in
        // flight (SlateDB's read-ahead of the next block, when the get is answered first).
        match options.head {
            true => bump(&self.counters.heads, 1),
            false => bump(&self.counters.gets, 1),
        }
        if trace() {
            eprintln!("GET> {location} {:?}", options.range);
        }
        self.wait().await;
        let (head, asked) = (options.head, options.range.clone());
        let result = self.inner.get_opts(location, options).await?;
        if trace() {
            eprintln!("GET {location} {asked:?} -> {:?}", result.range);
        }
        if !head {
            // The bytes the reply carries (the body is read by the caller after this returns).
            bump(
                &self.counters.get_bytes,
                result.range.end - result.range.start,
            );
        }
        Ok(result)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let (inner, counters, latency) = (self.inner.clone(), self.counters.clone(), self.latency);
        locations
            .then(move |at| {
                let (inner, counters) = (inner.clone(), counters.clone());
                async move {
                    let at = at?;
                    wait(latency).await;
                    bump(&counters.deletes, 1);
                    inner.delete(&at).await.map(|()| at)
                }
            })
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let (inner, counters, latency) = (self.inner.clone(), self.counters.clone(), self.latency);
        let prefix = prefix.cloned();
        // One request per listing (a listing of more than 1 000 objects is several pages on
        // S3; none of the listings here is that long).
        futures::stream::once(async move {
            if trace() {
                eprintln!("LIST {prefix:?}");
            }
            wait(latency).await;
            bump(&counters.lists, 1);
            inner.list(prefix.as_ref())
        })
        .flatten()
        .boxed()
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.wait().await;
        bump(&self.counters.lists, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.wait().await;
        bump(&self.counters.copies, 1);
        self.inner.copy_opts(from, to, options).await
    }
}

/// A multipart upload of a [`Metered`] store: each part and the completion is a request.
#[derive(Debug)]
struct MeteredUpload {
    inner: Box<dyn MultipartUpload>,
    latency: Duration,
    counters: Arc<Counters>,
}

#[async_trait]
impl MultipartUpload for MeteredUpload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        bump(&self.counters.parts, 1);
        bump(&self.counters.put_bytes, data.content_length() as u64);
        let part = self.inner.put_part(data);
        let latency = self.latency;
        Box::pin(async move {
            wait(latency).await;
            part.await
        })
    }

    async fn complete(&mut self) -> Result<PutResult> {
        wait(self.latency).await;
        bump(&self.counters.completes, 1);
        self.inner.complete().await
    }

    async fn abort(&mut self) -> Result<()> {
        wait(self.latency).await;
        self.inner.abort().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    /// Each kind of request is counted once per request sent, and the bytes each carries.
    #[test]
    fn counts_requests_by_kind_and_bytes() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let metered = Metered::new(Arc::new(InMemory::new()), Duration::ZERO);
        let counters = metered.counters();
        let store: Arc<dyn ObjectStore> = Arc::new(metered);
        rt.block_on(async {
            let a = Path::from("p/a");
            store.put(&a, vec![7u8; 1000].into()).await.unwrap();
            let create = PutOptions {
                mode: PutMode::Create,
                ..PutOptions::default()
            };
            let b = Path::from("p/b");
            store
                .put_opts(&b, vec![1u8; 10].into(), create.clone())
                .await
                .unwrap();
            // A refused create is still a request sent.
            assert!(
                store
                    .put_opts(&b, vec![1u8; 10].into(), create)
                    .await
                    .is_err()
            );
            assert_eq!(store.get_range(&a, 100..400).await.unwrap().len(), 300);
            assert_eq!(store.head(&a).await.unwrap().size, 1000);
            let listed: Vec<_> = store.list(Some(&Path::from("p"))).collect().await;
            assert_eq!(listed.len(), 2);
            let mut upload = store.put_multipart(&Path::from("p/c")).await.unwrap();
            upload.put_part(vec![2u8; 300].into()).await.unwrap();
            upload.put_part(vec![3u8; 200].into()).await.unwrap();
            upload.complete().await.unwrap();
            store.delete(&a).await.unwrap();
        });
        let c = counters.snapshot();
        assert_eq!(
            (c.puts, c.creates, c.put_bytes),
            (1, 2, 1000 + 10 + 10 + 500)
        );
        assert_eq!((c.gets, c.get_bytes, c.heads), (1, 300, 1));
        assert_eq!((c.lists, c.multipart, c.deletes, c.copies), (1, 4, 1, 0));
        assert_eq!(c.requests(), 1 + 2 + 1 + 1 + 1 + 4 + 1);
        let per = c.since(&Snapshot::default()).per_op(2.0);
        assert_eq!(per["gets_per_op"], 0.5);
        assert_eq!(per["bytes_fetched_per_op"], 150.0);
    }
}
