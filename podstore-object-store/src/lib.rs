//! An [`object_store::ObjectStore`] backend on a [`podstore`] [`Store`].
//!
//! `object_store` is the blob interface of Apache Arrow's ecosystem (DataFusion, Polars,
//! delta-rs, iceberg-rust, LanceDB...). Its local backend keeps one file per object, without
//! fsync; this one keeps objects in a podstore: small objects packed into log segments and
//! crash-safe once acknowledged (with the store's [`Durability::Sync`](podstore::Durability)),
//! concurrent puts sharing one fsync, range reads that read only the chunks they cover.
//!
//! ```
//! use std::sync::Arc;
//! use object_store::{ObjectStore, ObjectStoreExt, PutMode, path::Path};
//! use podstore_object_store::PodstoreObjectStore;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let store = Arc::new(podstore::Store::open(dir.path())?);
//! let objects = PodstoreObjectStore::new(store);
//! let path = Path::from("tables/t1/part-0.parquet");
//! let put = objects.put(&path, "hello".into()).await?;
//! // Compare-and-swap: only if nobody wrote the object since.
//! objects
//!     .put_opts(&path, "hello again".into(), PutMode::Update(put.into()).into())
//!     .await?;
//! let bytes = objects.get_range(&path, 6..11).await?;
//! assert_eq!(bytes.as_ref(), b"again");
//! # Ok(())
//! # }
//! ```
//!
//! # How objects are kept
//!
//! - **Keys.** An object's podstore key is its [`Path`]'s canonical text (`a/b%2Fc/d.parquet`),
//!   so the store's ordered prefix listing is the object listing. Keys that are not the text of
//!   a `Path` (a leading `/`, empty segments, invalid UTF-8) are never listed; this crate keeps
//!   its staged multipart parts under such a prefix (`/mpu/`). Other programs may share the
//!   store, but every key that is a path's text is an object to this backend.
//! - **Metadata.** `size` is the value's length, `last_modified` the time the value was written
//!   and `e_tag` its [`Version`] (16 hex digits, quoted). Both come from the
//!   store's per-value metadata, which changes on every write of the key. `ObjectMeta::version`
//!   is `None`: podstore keeps only the newest value of a key, so `GetOptions::version` is only
//!   served when it names the current e-tag.
//! - **Conditional writes.** `PutMode::Create` is [`Store::put_if`] with `Condition::Absent`,
//!   `PutMode::Update` is `put_if` with the version the e-tag names (a compare-and-swap inside
//!   the store, atomic against every other writer). A failed condition is
//!   `Error::AlreadyExists` or `Error::Precondition`, as the trait asks.
//! - **Reads.** A get answers with one consistent value: its metadata is checked against
//!   `if_match`, `if_none_match`, `if_modified_since` and `if_unmodified_since`, and the bytes
//!   returned are that value's even if the key is overwritten meanwhile. A value the store's
//!   read cache holds is served from it (see Threading). A whole object the index says is at
//!   most 8 MiB is read as [`Store::get_with_metadata`] reads it: one read of its record, after
//!   which the store may keep it in its cache. Otherwise `get_opts` opens a
//!   [`ValueReader`](podstore::ValueReader) and reads only the requested range: every
//!   [`GetRange`](object_store::GetRange) form. A range of up to 8 MiB is one read; longer ones
//!   stream in 1 MiB reads.
//! - **Multipart uploads** (`put_multipart`, and [`MultipartStore`](object_store::multipart::MultipartStore))
//!   stage each part as a podstore value of its own under `/mpu/<upload>/<part>`, written
//!   without waiting for a sync (a crash loses an unfinished upload, which was never
//!   acknowledged). Parts may arrive in any order and concurrently; `complete` streams them in
//!   part order through a [`ValueWriter`](podstore::ValueWriter) (bounded memory: a 1 MiB copy
//!   buffer and the writer's own), commits the object atomically with the store's durability,
//!   and then deletes the parts. Staged bytes are written twice: that is the price of accepting
//!   parts out of order without holding them in memory. An upload dropped without `complete` or
//!   `abort` removes its parts when dropped inside a tokio runtime; parts left by a crash are
//!   removed by [`PodstoreObjectStore::remove_stale_uploads`].
//! - **Copy and rename** read the source through a `ValueReader` and write the destination (a
//!   single put up to 1 MiB, else streamed through a `ValueWriter`); `copy_if_not_exists` writes
//!   only if the destination is absent (atomically). `rename` of an object of up to 1 MiB is one
//!   atomic batch (put the destination, delete the source only if it is still the version
//!   copied); a larger one is a streamed copy followed by that conditional delete, so a source
//!   overwritten meanwhile is kept.
//!
//! # Threading
//!
//! The store is synchronous and a call into it may wait on the disk (a read, or a group
//! commit's fsync), so no such call runs on an async worker thread; the backend must be used
//! inside a tokio runtime, as every object_store backend is. Where each call runs, and why:
//!
//! - **Unconditional puts of up to 256 KiB** go to the backend's own put threads (up to four,
//!   started on the first put, stopped when the last clone of the backend is dropped) through a
//!   queue. A thread that wakes takes every put queued since its last batch (up to 256 puts or
//!   1 MiB) and writes them with one [`Store::write_with_versions`]: one append and one group
//!   commit (one fsync with `Durability::Sync`) for the batch, and one wakeup each way per put,
//!   where `spawn_blocking` costs two thread hand-offs and an append of its own per put. Each
//!   put keeps its own result: its future resolves only once its batch is written with the
//!   store's durability, with its own version as e-tag; a batch that fails (a key the store
//!   refuses...) is written again put by put, so one bad put fails no other. A put whose future
//!   is dropped once polled is still written (as a `spawn_blocking` task would be), and
//!   dropping the backend's last clone waits for the puts queued to be written. Puts of one key in
//!   one batch apply in queue order; the value a key ends with is the one whose put returned
//!   the highest e-tag.
//!   On a store opened with `Durability::Buffered` these puts (all but a backend's first) are
//!   instead written on the calling task, with one [`Store::put`] each: a buffered put copies
//!   into the store's write buffer and returns without waiting for the disk, except when both
//!   write buffers are full (the writer's back-pressure: the disk is behind), when it opens a
//!   new log segment (a file and a directory fsync, once per 256 MiB of log by default), or when
//!   it extends the store's reservation of version numbers (one 32-byte fdatasync per second of
//!   writes); the hand-off to a put thread and back cost several times such a put (the adapter
//!   against `Store`: docs/benchmarks.md). The backend's first put still goes to a put thread
//!   (on a new store it creates the first segment).
//! - **Gets served from memory** run in place, on the calling task: [`Store::get_cached`] looks
//!   in the store's read cache without ever reading a file, and a hand-off would cost many
//!   times the lookup. The bytes returned are the cache's own (a range is a slice of them).
//! - **Everything else** (conditional puts, larger puts, gets the cache cannot answer, deletes,
//!   listings, copies, renames, multipart parts) runs on tokio's blocking pool
//!   (`spawn_blocking`), one hand-off per call (per 1 MiB piece of a streamed get).
//!
//! # Not supported
//!
//! - **Attributes** (content type, user metadata...): podstore stores bytes and no per-object
//!   attributes, so a put with attributes fails with `Error::NotImplemented`, and gets return
//!   none. **Tags** are accepted and ignored, as `LocalFileSystem` does.
//! - **Object versions**: see above; `ObjectMeta::version` is `None`.
//!
//! # Listing cost
//!
//! A listing takes each object's size, version (its `e_tag`) and time from the store's ordered
//! listing ([`podstore::Entry::metadata`]), which reads the footers' sorted keys and the
//! location entries of the same key blocks, never an object's record: about two small reads per
//! store file for a prefix of a few objects (docs/benchmarks.md, "The object_store backend
//! against LocalFileSystem").
//!
//! # Conformance
//!
//! The crate's tests run object_store's own conformance suite (`object_store::integration`)
//! against this backend: `put_get_delete_list`, `put_get_attributes` (which accepts the
//! `NotImplemented` above), `get_opts`, `put_opts` (with updates), `list_uses_directories_correctly`,
//! `list_with_delimiter`, `list_with_offset_exclusivity`, `rename_and_copy`,
//! `copy_if_not_exists`, `copy_rename_nonexistent_object`, `get_nonexistent_object`,
//! `stream_get`, `multipart`, `multipart_put_part_out_of_order`, `multipart_race_condition`
//! (last writer wins) and `multipart_out_of_order`. Left out:
//! `multipart_with_opts` (it puts attributes, unsupported), `list_paginated` (needs
//! `PaginatedListStore`, not implemented) and `response_extensions` (HTTP backends only).

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod convert;
mod list;
mod multipart;
mod puts;
mod read;

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{BoxStream, StreamExt};
use object_store::path::Path;
use object_store::{
    CopyMode, CopyOptions, Error, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
    ObjectStore, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
    RenameTargetMode, Result,
};
use podstore::{Batch, Condition, Store, Version};

use convert::{blocking, e_tag, generic, key, not_found, parse_e_tag};

/// Values up to this size are copied (and put, and renamed) in one piece; larger ones stream
/// through a `ValueWriter` in pieces of this size.
const COPY_CHUNK: u64 = 1 << 20;

/// An [`ObjectStore`] on a podstore [`Store`]. See the [crate documentation](crate) for what it
/// keeps and how.
///
/// Cheap to clone (it holds the store in an `Arc`); the store itself stays usable directly.
#[derive(Clone)]
pub struct PodstoreObjectStore {
    store: Arc<Store>,
    /// The threads that write unconditional puts of small objects, batched.
    puts: Arc<puts::PutQueue>,
    /// Names multipart uploads uniquely: a random-enough prefix per instance and a counter.
    uploads: Arc<UploadIds>,
}

struct UploadIds {
    instance: u64,
    next: AtomicU64,
}

impl PodstoreObjectStore {
    /// The backend on `store`. Nothing is read or written until it is used.
    pub fn new(store: Arc<Store>) -> PodstoreObjectStore {
        // Upload ids need only differ from those of uploads still staged in the store: the
        // clock's nanoseconds, the process id and a count of instances in this process make
        // another instance's prefix (even one before a restart) a coincidence.
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let instance = nanos
            ^ (u64::from(std::process::id()) << 40)
            ^ INSTANCES.fetch_add(1, Ordering::Relaxed).rotate_right(8);
        let uploads = Arc::new(UploadIds {
            instance,
            next: AtomicU64::new(0),
        });
        let puts = Arc::new(puts::PutQueue::new(store.clone()));
        PodstoreObjectStore {
            store,
            puts,
            uploads,
        }
    }

    /// The store the objects are kept in.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Removes the staged parts of every multipart upload not completed or aborted: parts left
    /// by a crash or a process that exited mid-upload. Returns how many parts were removed.
    ///
    /// Call it when no upload is in progress on the store (at startup): it removes the parts of
    /// uploads in progress too, whose `complete` then fails.
    pub async fn remove_stale_uploads(&self) -> Result<u64> {
        let store = self.store.clone();
        blocking(move || multipart::remove_all_staged(&store)).await
    }

    fn next_upload_id(&self) -> String {
        let n = self.uploads.next.fetch_add(1, Ordering::Relaxed);
        format!("{:016x}{:08x}", self.uploads.instance, n)
    }
}

impl fmt::Debug for PodstoreObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodstoreObjectStore")
            .field("path", &self.store.path())
            .finish()
    }
}

impl fmt::Display for PodstoreObjectStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Podstore({})", self.store.path().display())
    }
}

/// What a put requires of the key's current value.
fn condition(location: &Path, mode: &PutMode) -> Result<Option<Condition>> {
    match mode {
        PutMode::Overwrite => Ok(None),
        PutMode::Create => Ok(Some(Condition::Absent)),
        PutMode::Update(v) => {
            let tag =
                v.e_tag
                    .as_deref()
                    .or(v.version.as_deref())
                    .ok_or_else(|| Error::Generic {
                        store: convert::STORE,
                        source: "PutMode::Update needs the e-tag of the object's current value"
                            .into(),
                    })?;
            match parse_e_tag(tag) {
                Some(version) => Ok(Some(Condition::Version(version))),
                // Not one of our e-tags: it cannot be the current value's.
                None => Err(Error::Precondition {
                    path: location.to_string(),
                    source: format!("{tag} is not an e-tag of this store").into(),
                }),
            }
        }
    }
}

/// The object_store error of a failed condition.
fn condition_failed(location: &Path, condition: Condition, current: Option<Version>) -> Error {
    let path = location.to_string();
    match condition {
        Condition::Absent => Error::AlreadyExists {
            path,
            source: "the object exists".into(),
        },
        Condition::Version(wanted) => Error::Precondition {
            path,
            source: match current {
                Some(v) => format!("e-tag {} is not {}", e_tag(v), e_tag(wanted)),
                None => "the object does not exist".to_string(),
            }
            .into(),
        },
    }
}

/// Maps a store error of a conditional write; others become `Generic`.
fn write_error(location: &Path, condition: Option<Condition>, e: podstore::Error) -> Error {
    match (condition, e) {
        (Some(c), podstore::Error::ConditionFailed { current, .. }) => {
            condition_failed(location, c, current)
        }
        (_, e) => generic(e),
    }
}

/// Writes a value made of `chunks` under `key`: one put when it is small, else streamed through a
/// `ValueWriter` (no copy of the whole value in memory).
fn write_chunks(
    store: &Store,
    location: &Path,
    chunks: &[Bytes],
    condition: Option<Condition>,
) -> Result<Version> {
    let key = &key(location);
    let len: u64 = chunks.iter().map(|c| c.len() as u64).sum();
    if chunks.len() <= 1 || len <= COPY_CHUNK {
        let joined;
        let value: &[u8] = match chunks {
            [] => &[],
            [one] => one,
            many => {
                joined = many.concat();
                &joined
            }
        };
        let written = match condition {
            None => store.put(key, value),
            Some(c) => store.put_if(key, value, c),
        };
        return written.map_err(|e| write_error(location, condition, e));
    }
    let mut writer = store.writer(key).map_err(generic)?;
    for chunk in chunks {
        std::io::Write::write_all(&mut writer, chunk).map_err(|e| Error::Generic {
            store: convert::STORE,
            source: Box::new(e),
        })?;
    }
    let written = match condition {
        None => writer.finish(),
        Some(c) => writer.finish_if(c),
    };
    written.map_err(|e| write_error(location, condition, e))
}

#[async_trait]
impl ObjectStore for PodstoreObjectStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        if !opts.attributes.is_empty() {
            return Err(Error::NotImplemented {
                operation: "put_opts with attributes".to_string(),
                implementer: "PodstoreObjectStore".to_string(),
            });
        }
        let condition = condition(location, &opts.mode)?;
        if condition.is_none() && payload.content_length() <= puts::BATCHED_MAX {
            let value = match payload.as_ref() {
                [] => Bytes::new(),
                [one] => one.clone(),
                many => Bytes::from(many.concat()),
            };
            let version = self.puts.put(location, value).await?;
            return Ok(PutResult {
                e_tag: Some(e_tag(version)),
                version: None,
                extensions: Default::default(),
            });
        }
        let (store, location) = (self.store.clone(), location.clone());
        blocking(move || {
            let chunks: Vec<Bytes> = payload.into_iter().collect();
            let version = write_chunks(&store, &location, &chunks, condition)?;
            Ok(PutResult {
                e_tag: Some(e_tag(version)),
                version: None,
                extensions: Default::default(),
            })
        })
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> Result<Box<dyn MultipartUpload>> {
        if !opts.attributes.is_empty() {
            return Err(Error::NotImplemented {
                operation: "put_multipart_opts with attributes".to_string(),
                implementer: "PodstoreObjectStore".to_string(),
            });
        }
        Ok(Box::new(multipart::Upload::new(
            self.store.clone(),
            location.clone(),
            self.next_upload_id(),
        )))
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        if let Some(hit) = read::get_cached(&self.store, location, &options)? {
            return Ok(hit);
        }
        read::get_opts(self.store.clone(), location.clone(), options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<Bytes>> {
        if let Some(hit) = read::ranges_cached(&self.store, location, ranges)? {
            return Ok(hit);
        }
        read::get_ranges(self.store.clone(), location.clone(), ranges.to_vec()).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let store = self.store.clone();
        // Several deletes in flight at once: with `Durability::Sync` they share fsyncs
        // (group commit) instead of waiting for one each.
        locations
            .map(move |location| {
                let store = store.clone();
                async move {
                    let location = location?;
                    blocking(move || {
                        // Deleting a missing object succeeds, as on S3.
                        store.delete(key(&location)).map_err(generic)?;
                        Ok(location)
                    })
                    .await
                }
            })
            .buffered(16)
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        list::list(self.store.clone(), prefix, None)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        list::list(self.store.clone(), prefix, Some(offset))
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        let (store, prefix) = (self.store.clone(), prefix.cloned());
        blocking(move || list::list_with_delimiter(&store, prefix.as_ref())).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        let condition = match options.mode {
            CopyMode::Overwrite => None,
            CopyMode::Create => Some(Condition::Absent),
        };
        let (store, from, to) = (self.store.clone(), from.clone(), to.clone());
        blocking(move || read::copy(&store, &from, &to, condition).map(|_| ())).await
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        let condition = match options.target_mode {
            RenameTargetMode::Overwrite => None,
            RenameTargetMode::Create => Some(Condition::Absent),
        };
        let (store, from, to) = (self.store.clone(), from.clone(), to.clone());
        blocking(move || rename(&store, &from, &to, condition)).await
    }
}

/// Moves `from` to `to`. An object of up to 1 MiB moves in one atomic batch; a larger one is
/// copied (streamed) and its source then deleted only if it is still the value copied.
fn rename(store: &Store, from: &Path, to: &Path, condition: Option<Condition>) -> Result<()> {
    let (from_key, to_key) = (key(from), key(to));
    // A source overwritten between the read and the batch fails the batch's condition on it:
    // read again. Bounded, so that a key rewritten without pause cannot hold the call forever.
    for _ in 0..16 {
        let Some((value, meta)) = small_value(store, &from_key)? else {
            let (source, _) = read::copy(store, from, to, condition)?;
            return match store.delete_if(&from_key, source) {
                Ok(()) | Err(podstore::Error::ConditionFailed { .. }) => Ok(()),
                Err(e) => Err(generic(e)),
            };
        };
        let mut batch = Batch::new();
        match condition {
            None => batch.put(&to_key, &value),
            Some(c) => batch.put_if(&to_key, &value, c),
        };
        batch.delete_if(&from_key, meta.version());
        match store.write(&batch) {
            Ok(()) => return Ok(()),
            Err(podstore::Error::ConditionFailed { key, current }) => {
                if key == to_key {
                    let c = condition.expect("only the destination's condition is on `to`");
                    return Err(condition_failed(to, c, current));
                }
                if current.is_none() {
                    return Err(not_found(from));
                }
            }
            Err(e) => return Err(generic(e)),
        }
    }
    Err(Error::Generic {
        store: convert::STORE,
        source: format!("{from} changed on every attempt to rename it").into(),
    })
}

/// The value and metadata of `key` if it is at most [`COPY_CHUNK`] long; `None` if it is longer.
/// A missing key is `NotFound`.
fn small_value(store: &Store, key: &[u8]) -> Result<Option<(Vec<u8>, podstore::ValueMeta)>> {
    let location = convert::path(key).unwrap_or_default();
    let meta = store
        .metadata(key)
        .map_err(generic)?
        .ok_or_else(|| not_found(&location))?;
    if meta.len() > COPY_CHUNK {
        return Ok(None);
    }
    match store.get_with_metadata(key).map_err(generic)? {
        Some((value, meta)) if meta.len() <= COPY_CHUNK => Ok(Some((value, meta))),
        Some(_) => Ok(None),
        None => Err(not_found(&location)),
    }
}
