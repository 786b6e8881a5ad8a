//! Listings: the store's keys in ascending order under a prefix of path segments.

use std::ops::Bound;
use std::sync::Arc;

use futures::stream::{self, BoxStream, StreamExt, TryStreamExt};
use object_store::path::{DELIMITER, Path};
use object_store::{ListResult, ObjectMeta, Result};
use podstore::{Entry, Store};

use crate::convert::{blocking, generic, key, object_meta, path};

/// Keys read per trip to the blocking pool.
const PAGE: usize = 1000;

/// The key prefix of the objects under `prefix`: its text and a delimiter, so that `foo` lists
/// `foo/x` but not `foo.bar/y` (nor the object `foo` itself); nothing for the root.
fn key_prefix(prefix: Option<&Path>) -> Vec<u8> {
    match prefix {
        Some(p) if !p.as_ref().is_empty() => {
            let mut k = key(p);
            k.extend_from_slice(DELIMITER.as_bytes());
            k
        }
        _ => Vec::new(),
    }
}

/// The end of the range of the keys that start with `prefix`: the first key after all of them
/// (trailing `0xff` bytes dropped, the last byte incremented), unbounded for an empty or all-`0xff`
/// prefix. A listing bounded by it reads only the keys under the prefix (of the footers, and of
/// the active segment's sorted view), not every key after it.
fn prefix_end(prefix: &[u8]) -> Bound<Vec<u8>> {
    let mut end = prefix.to_vec();
    while end.last() == Some(&0xff) {
        end.pop();
    }
    match end.last_mut() {
        Some(b) => {
            *b += 1;
            Bound::Excluded(end)
        }
        None => Bound::Unbounded,
    }
}

/// The metadata of a listed entry (the listing knows it without a read), or `None` when its key
/// is not an object (not a path's text).
fn meta_of(entry: &Entry<'_>) -> Option<ObjectMeta> {
    path(entry.key()).map(|location| object_meta(location, &entry.metadata()))
}

/// The objects under `prefix` after `offset` (exclusive), in ascending order, a page of
/// [`PAGE`] keys at a time.
pub(crate) fn list(
    store: Arc<Store>,
    prefix: Option<&Path>,
    offset: Option<&Path>,
) -> BoxStream<'static, Result<ObjectMeta>> {
    let prefix = Arc::new(key_prefix(prefix));
    let start = match offset.map(key) {
        Some(offset) if offset >= *prefix => Bound::Excluded(offset),
        _ => Bound::Included(prefix.to_vec()),
    };
    stream::try_unfold(Some(start), move |start| {
        let (store, prefix) = (store.clone(), prefix.clone());
        async move {
            let Some(start) = start else {
                return Ok::<_, object_store::Error>(None);
            };
            let (page, next) = blocking(move || page(&store, &prefix, start)).await?;
            Ok(Some((stream::iter(page.into_iter().map(Ok)), next)))
        }
    })
    .try_flatten()
    .boxed()
}

/// Up to [`PAGE`] keys from `start` under `prefix`, and where the next page starts (`None` at
/// the end).
type Page = (Vec<ObjectMeta>, Option<Bound<Vec<u8>>>);

fn page(store: &Store, prefix: &[u8], start: Bound<Vec<u8>>) -> Result<Page> {
    let mut out = Vec::new();
    let mut seen = 0;
    for e in store
        .range::<Vec<u8>>((start, prefix_end(prefix)))
        .entries()
    {
        let e = e.map_err(generic)?;
        if !e.key().starts_with(prefix) {
            return Ok((out, None));
        }
        if let Some(meta) = meta_of(&e) {
            out.push(meta);
        }
        seen += 1;
        if seen == PAGE {
            return Ok((out, Some(Bound::Excluded(e.into_key()))));
        }
    }
    Ok((out, None))
}

/// The objects directly under `prefix` and the "directories" below it: each key with a further
/// delimiter contributes its first segment once, and the listing then skips past every key under
/// that segment (one seek, however many objects it holds).
pub(crate) fn list_with_delimiter(store: &Store, prefix: Option<&Path>) -> Result<ListResult> {
    let prefix = key_prefix(prefix);
    let mut result = ListResult {
        common_prefixes: Vec::new(),
        objects: Vec::new(),
        extensions: Default::default(),
    };
    let mut start = Bound::Included(prefix.clone());
    'seek: loop {
        for e in store
            .range::<Vec<u8>>((start.clone(), prefix_end(&prefix)))
            .entries()
        {
            let e = e.map_err(generic)?;
            let k = e.key();
            if !k.starts_with(&prefix) {
                break 'seek;
            }
            match k[prefix.len()..].iter().position(|&b| b == b'/') {
                None => {
                    if let Some(meta) = meta_of(&e) {
                        result.objects.push(meta);
                    }
                }
                Some(at) => {
                    let dir = &k[..prefix.len() + at];
                    // An empty segment (the staging area's `/mpu/`, or a key that is not a
                    // path) is no directory; its keys are skipped all the same.
                    if let Some(p) = path(dir).filter(|p| !p.as_ref().is_empty()) {
                        result.common_prefixes.push(p);
                    }
                    // The first key after every `dir/...`: `0` is the byte after `/`.
                    let mut next = dir.to_vec();
                    next.push(b'/' + 1);
                    start = Bound::Included(next);
                    continue 'seek;
                }
            }
        }
        break;
    }
    Ok(result)
}
