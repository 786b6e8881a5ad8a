//! Reads: `get_opts` (conditions, ranges, streaming), `get_ranges` and copies.

use std::io::Write;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use futures::stream::{self, StreamExt};
use object_store::path::Path;
use object_store::{Error, GetOptions, GetRange, GetResult, GetResultPayload, ObjectMeta, Result};
use podstore::{Condition, Store, ValueReader, Version};

use crate::convert::{STORE, blocking, generic, key, key_ref, not_found, object_meta};
use crate::{COPY_CHUNK, write_error};

/// A range of up to this many bytes is read in one read; a longer one streams.
const ONE_READ: u64 = 8 << 20;
/// The size of each read of a streamed range.
const STREAM_CHUNK: u64 = 1 << 20;

fn range_error(e: impl std::error::Error + Send + Sync + 'static) -> Error {
    Error::Generic {
        store: STORE,
        source: Box::new(e),
    }
}

/// Reads `range` of the reader's value into a new buffer.
fn read_at(reader: &ValueReader, range: Range<u64>) -> Result<Bytes> {
    let mut buf = vec![0u8; (range.end - range.start) as usize];
    reader
        .read_exact_at(range.start, &mut buf)
        .map_err(generic)?;
    Ok(buf.into())
}

/// The range of the object a get returns, after checking the get's conditions against the
/// metadata of the value it will return.
fn checked_range(location: &Path, meta: &ObjectMeta, options: &GetOptions) -> Result<Range<u64>> {
    options.check_preconditions(meta)?;
    if let Some(version) = &options.version
        && Some(version) != meta.e_tag.as_ref()
    {
        return Err(Error::NotFound {
            path: location.to_string(),
            source: format!(
                "version {version} is not the current one, and podstore keeps no other"
            )
            .into(),
        });
    }
    match &options.range {
        Some(r) => r.as_range(meta.size).map_err(range_error),
        None => Ok(0..meta.size),
    }
}

/// What a get returns: bytes read, or a reader to stream them from.
enum Body {
    Bytes(Bytes),
    Stream(Arc<ValueReader>),
}

fn get_result(
    payload: futures::stream::BoxStream<'static, Result<Bytes>>,
    meta: ObjectMeta,
    range: Range<u64>,
) -> GetResult {
    GetResult {
        payload: GetResultPayload::Stream(payload),
        meta,
        range,
        attributes: Default::default(),
        extensions: Default::default(),
    }
}

/// A get the store's read cache can answer, served in place, on the calling thread: looking in
/// the cache never waits on the disk, and a hand-off to the blocking pool and back would cost
/// many times the lookup. Its bytes are the cache's own (a range is a slice of them). Borrows
/// the store and the path (no reference count touched: with every task sharing one `Arc`, its
/// count's cache line moves between cores on each get) and allocates only what `GetResult` must
/// own: the path, the e-tag and the boxed stream. `Ok(None)`: not in the cache.
pub(crate) fn get_cached(
    store: &Store,
    location: &Path,
    options: &GetOptions,
) -> Result<Option<GetResult>> {
    let Some((value, meta)) = store.get_cached(key_ref(location)).map_err(generic)? else {
        return Ok(None);
    };
    let meta = object_meta(location.clone(), &meta);
    let range = checked_range(location, &meta, options)?;
    let bytes = if options.head {
        Bytes::new()
    } else {
        value.slice(range.start as usize..range.end as usize)
    };
    Ok(Some(get_result(
        stream::once(async move { Ok(bytes) }).boxed(),
        meta,
        range,
    )))
}

/// A get the read cache did not answer ([`get_cached`] first): on the blocking pool.
pub(crate) async fn get_opts(
    store: Arc<Store>,
    location: Path,
    options: GetOptions,
) -> Result<GetResult> {
    let (body, meta, range) = blocking(move || {
        let key = key(&location);
        if options.range.is_none()
            && !options.head
            && store
                .value_len_bound(&key)
                .map_err(generic)?
                .is_some_and(|n| n <= ONE_READ)
        {
            // The whole of a value short enough for one read: read as `Store::get` reads, one
            // read of its record (which the store may then keep in its read cache, so that the
            // next get of it is served in place). The conditions are checked against the
            // metadata of the bytes read.
            let (value, meta) = store
                .get_with_metadata(&key)
                .map_err(generic)?
                .ok_or_else(|| not_found(&location))?;
            let meta = object_meta(location.clone(), &meta);
            let range = checked_range(&location, &meta, &options)?;
            return Ok((Body::Bytes(Bytes::from(value)), meta, range));
        }
        let reader = store
            .reader(&key)
            .map_err(generic)?
            .ok_or_else(|| not_found(&location))?;
        // The reader is one value, fixed when it was opened: the conditions are checked against
        // the metadata of the bytes that will be returned, even if the key changes meanwhile.
        let meta = object_meta(location.clone(), reader.metadata());
        let range = checked_range(&location, &meta, &options)?;
        // A head, or a range short enough for one read: no stream to set up.
        let body = if options.head {
            Body::Bytes(Bytes::new())
        } else if range.end - range.start <= ONE_READ {
            Body::Bytes(read_at(&reader, range.clone())?)
        } else {
            Body::Stream(Arc::new(reader))
        };
        Ok((body, meta, range))
    })
    .await?;
    let payload = match body {
        Body::Bytes(bytes) => stream::once(async move { Ok(bytes) }).boxed(),
        Body::Stream(reader) => stream_range(reader, range.clone()),
    };
    Ok(get_result(payload, meta, range))
}

/// The bytes of `range` as a stream of reads of [`STREAM_CHUNK`] bytes, each on the blocking
/// pool when the stream is polled (memory: the chunk being read).
fn stream_range(
    reader: Arc<ValueReader>,
    range: Range<u64>,
) -> futures::stream::BoxStream<'static, Result<Bytes>> {
    stream::try_unfold(range.start, move |pos| {
        let reader = reader.clone();
        let end = range.end;
        async move {
            if pos >= end {
                return Ok(None);
            }
            let next = (pos + STREAM_CHUNK).min(end);
            let bytes = blocking(move || read_at(&reader, pos..next)).await?;
            Ok(Some((bytes, next)))
        }
    })
    .boxed()
}

/// Ranges of a value the read cache holds, in place, as in [`get_cached`]; `Ok(None)`: not in
/// the cache.
pub(crate) fn ranges_cached(
    store: &Store,
    location: &Path,
    ranges: &[Range<u64>],
) -> Result<Option<Vec<Bytes>>> {
    let Some((value, _)) = store.get_cached(key_ref(location)).map_err(generic)? else {
        return Ok(None);
    };
    ranges
        .iter()
        .map(|r| {
            let r = GetRange::Bounded(r.clone())
                .as_range(value.len() as u64)
                .map_err(range_error)?;
            Ok(value.slice(r.start as usize..r.end as usize))
        })
        .collect::<Result<_>>()
        .map(Some)
}

/// Ranges the read cache did not answer ([`ranges_cached`] first): on the blocking pool.
pub(crate) async fn get_ranges(
    store: Arc<Store>,
    location: Path,
    ranges: Vec<Range<u64>>,
) -> Result<Vec<Bytes>> {
    blocking(move || {
        // One reader for every range: they all read the same value.
        let reader = store
            .reader(key(&location))
            .map_err(generic)?
            .ok_or_else(|| not_found(&location))?;
        ranges
            .into_iter()
            .map(|r| {
                let r = GetRange::Bounded(r)
                    .as_range(reader.len())
                    .map_err(range_error)?;
                read_at(&reader, r)
            })
            .collect()
    })
    .await
}

/// Copies `from`'s value to `to` (written only if `condition` holds for `to`). Returns the
/// version copied and the version written. Up to [`COPY_CHUNK`] bytes are one put; a longer value
/// streams through a `ValueWriter` in pieces of that size.
pub(crate) fn copy(
    store: &Store,
    from: &Path,
    to: &Path,
    condition: Option<Condition>,
) -> Result<(Version, Version)> {
    let reader = store
        .reader(key(from))
        .map_err(generic)?
        .ok_or_else(|| not_found(from))?;
    let source = reader.metadata().version();
    let len = reader.len();
    let to_key = key(to);
    let written = if len <= COPY_CHUNK {
        let value = read_at(&reader, 0..len)?;
        match condition {
            None => store.put(&to_key, &value),
            Some(c) => store.put_if(&to_key, &value, c),
        }
    } else {
        let mut writer = store.writer(&to_key).map_err(generic)?;
        let mut pos = 0;
        while pos < len {
            let next = (pos + COPY_CHUNK).min(len);
            let chunk = read_at(&reader, pos..next)?;
            writer.write_all(&chunk).map_err(|e| Error::Generic {
                store: STORE,
                source: Box::new(e),
            })?;
            pos = next;
        }
        match condition {
            None => writer.finish(),
            Some(c) => writer.finish_if(c),
        }
    };
    let written = written.map_err(|e| write_error(to, condition, e))?;
    Ok((source, written))
}
