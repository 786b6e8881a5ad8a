//! Multipart uploads: parts staged as podstore values under `/mpu/<upload>/<part>`, assembled in
//! part order through a `ValueWriter` on completion.
//!
//! Why staging in the store rather than writing parts straight into one `ValueWriter`: parts
//! may be uploaded concurrently and complete in any order (`multipart_out_of_order`), and a
//! writer takes bytes only in order; holding the early-finished parts in memory until their turn
//! would make memory unbounded. Staged parts cost a second write of their bytes, and nothing
//! more: memory stays at one part in flight per caller plus a 1 MiB copy buffer.

use std::fmt;
use std::io::Write;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{
    Error, MultipartId, MultipartUpload, PutPayload, PutResult, Result, UploadPart,
};
use podstore::{Batch, Durability, Store, Version};

use crate::convert::{STORE, blocking, e_tag, generic, key};
use crate::{COPY_CHUNK, PodstoreObjectStore};

/// Where staged parts live: a key with an empty first segment is never a path's text, so no
/// listing shows them.
const STAGING: &str = "/mpu/";

fn upload_prefix(id: &str) -> String {
    format!("{STAGING}{id}/")
}

fn part_key(id: &str, part: usize) -> String {
    // Zero-padded: the parts of an upload sort in part order.
    format!("{STAGING}{id}/{part:020}")
}

/// Upload ids come from callers of `MultipartStore`: only ids this crate could have made are
/// accepted, so that an id cannot reach outside its own staging prefix.
fn check_id(id: &str) -> Result<()> {
    if !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(Error::Generic {
            store: STORE,
            source: format!("{id:?} is not a multipart upload id of this store").into(),
        })
    }
}

fn io_error(e: std::io::Error) -> Error {
    Error::Generic {
        store: STORE,
        source: Box::new(e),
    }
}

/// Stages one part. Written without waiting for a sync: an upload is acknowledged only by
/// `complete`, whose commit is durable (with `Durability::Sync`) and comes after these in the
/// log, so it makes them durable too.
fn stage(store: &Store, part: &str, data: PutPayload) -> Result<()> {
    let chunks: Vec<Bytes> = data.into_iter().collect();
    let value: Bytes = match chunks.as_slice() {
        [] => Bytes::new(),
        [one] => one.clone(),
        many => many.concat().into(),
    };
    let mut batch = Batch::new();
    batch.put(part, &value).durability(Durability::Buffered);
    store.write(&batch).map_err(generic)
}

/// Writes the staged `parts`, in this order, as `location`'s value (atomically, with the store's
/// durability), then removes them.
fn assemble(store: &Store, location: &Path, parts: &[String]) -> Result<Version> {
    let mut writer = store.writer(key(location)).map_err(generic)?;
    let mut buf = vec![0u8; COPY_CHUNK as usize];
    for part in parts {
        let reader = store
            .reader(part)
            .map_err(generic)?
            .ok_or_else(|| Error::Generic {
                store: STORE,
                source: format!(
                    "part {part} of the upload to {location} is missing: its put_part was not \
                     awaited, or the upload was aborted"
                )
                .into(),
            })?;
        let len = reader.len();
        let mut pos = 0;
        while pos < len {
            let n = (len - pos).min(COPY_CHUNK) as usize;
            reader.read_exact_at(pos, &mut buf[..n]).map_err(generic)?;
            writer.write_all(&buf[..n]).map_err(io_error)?;
            pos += n as u64;
        }
    }
    let version = writer.finish().map_err(generic)?;
    remove(store, parts.iter().map(String::as_bytes))?;
    Ok(version)
}

/// Deletes `keys` in one batch, without waiting for a sync (a staged part that comes back after
/// a crash is removed by `remove_stale_uploads`).
fn remove<'a>(store: &Store, keys: impl Iterator<Item = &'a [u8]>) -> Result<u64> {
    let mut batch = Batch::new();
    batch.durability(Durability::Buffered);
    let mut n = 0;
    for k in keys {
        batch.delete(k);
        n += 1;
    }
    if n > 0 {
        store.write(&batch).map_err(generic)?;
    }
    Ok(n)
}

fn remove_prefix(store: &Store, prefix: &str) -> Result<u64> {
    let keys: Vec<Vec<u8>> = store
        .prefix(prefix)
        .collect::<podstore::Result<_>>()
        .map_err(generic)?;
    remove(store, keys.iter().map(Vec::as_slice))
}

pub(crate) fn remove_all_staged(store: &Store) -> Result<u64> {
    remove_prefix(store, STAGING)
}

/// An upload from `put_multipart`: parts numbered in the order `put_part` is called.
pub(crate) struct Upload {
    store: Arc<Store>,
    location: Path,
    id: String,
    parts: usize,
    /// Completed or aborted: nothing to clean up on drop.
    done: bool,
}

impl Upload {
    pub(crate) fn new(store: Arc<Store>, location: Path, id: String) -> Upload {
        Upload {
            store,
            location,
            id,
            parts: 0,
            done: false,
        }
    }
}

impl fmt::Debug for Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upload")
            .field("location", &self.location)
            .field("id", &self.id)
            .field("parts", &self.parts)
            .finish()
    }
}

#[async_trait]
impl MultipartUpload for Upload {
    fn put_part(&mut self, data: PutPayload) -> UploadPart {
        let part = part_key(&self.id, self.parts);
        self.parts += 1;
        let store = self.store.clone();
        Box::pin(async move { blocking(move || stage(&store, &part, data)).await })
    }

    async fn complete(&mut self) -> Result<PutResult> {
        let parts: Vec<String> = (0..self.parts).map(|i| part_key(&self.id, i)).collect();
        let (store, location) = (self.store.clone(), self.location.clone());
        let version = blocking(move || assemble(&store, &location, &parts)).await?;
        self.done = true;
        Ok(PutResult {
            e_tag: Some(e_tag(version)),
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort(&mut self) -> Result<()> {
        let (store, prefix) = (self.store.clone(), upload_prefix(&self.id));
        blocking(move || remove_prefix(&store, &prefix)).await?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        // Dropped mid-upload: remove its parts in the background if a runtime is at hand (a
        // drop cannot wait); otherwise `remove_stale_uploads` will.
        if self.done || self.parts == 0 {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (store, prefix) = (self.store.clone(), upload_prefix(&self.id));
            runtime.spawn_blocking(move || {
                if let Err(e) = remove_prefix(&store, &prefix) {
                    // Nothing to return it to; the parts stay until remove_stale_uploads.
                    let _ = e;
                }
            });
        }
    }
}

#[async_trait]
impl MultipartStore for PodstoreObjectStore {
    async fn create_multipart(&self, _path: &Path) -> Result<MultipartId> {
        Ok(self.next_upload_id())
    }

    async fn put_part(
        &self,
        _path: &Path,
        id: &MultipartId,
        part_idx: usize,
        data: PutPayload,
    ) -> Result<PartId> {
        check_id(id)?;
        let (store, part) = (self.store.clone(), part_key(id, part_idx));
        blocking(move || stage(&store, &part, data)).await?;
        Ok(PartId {
            content_id: part_idx.to_string(),
        })
    }

    async fn complete_multipart(
        &self,
        path: &Path,
        id: &MultipartId,
        parts: Vec<PartId>,
    ) -> Result<PutResult> {
        check_id(id)?;
        let parts = parts
            .iter()
            .map(|p| match p.content_id.parse::<usize>() {
                Ok(i) => Ok(part_key(id, i)),
                Err(_) => Err(Error::Generic {
                    store: STORE,
                    source: format!("{:?} is not a part of this store", p.content_id).into(),
                }),
            })
            .collect::<Result<Vec<_>>>()?;
        let (store, location, prefix) = (self.store.clone(), path.clone(), upload_prefix(id));
        let version = blocking(move || {
            let version = assemble(&store, &location, &parts)?;
            // Parts uploaded but not named in the completion are dropped with the upload.
            remove_prefix(&store, &prefix)?;
            Ok(version)
        })
        .await?;
        Ok(PutResult {
            e_tag: Some(e_tag(version)),
            version: None,
            extensions: Default::default(),
        })
    }

    async fn abort_multipart(&self, _path: &Path, id: &MultipartId) -> Result<()> {
        check_id(id)?;
        let (store, prefix) = (self.store.clone(), upload_prefix(id));
        blocking(move || remove_prefix(&store, &prefix).map(|_| ())).await
    }
}
