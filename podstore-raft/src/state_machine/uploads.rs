//! Values streamed in chunks ([`Request::Chunk`], [`Request::Commit`], [`Request::Abort`]).
//!
//! A chunk is staged in the state machine's own store, under `s/` + the upload's term and
//! number (8 bytes each, big-endian) + the chunk's index (8 bytes, big-endian): snapshots carry
//! staged chunks like any other key, so a follower that catches up by snapshot half-way
//! through an upload can still apply its commit. The commit streams the chunks, one at a time,
//! into the value's key through [`podstore::Store::writer`] (the version header first) and
//! removes them: memory at apply time is one chunk, whatever the value's size.
//!
//! Every decision reads only the store and the entry (its term and index), so every node
//! decides alike. Entries that read staged chunks (a commit, an abort, and the blank entry
//! that drops older terms' uploads) are applied after the writes of the entries before them
//! reached the store (`apply_entries` writes its batch first: see [`reads_staged`]).
//!
//! **Abandoned uploads.** A chunk is staged only if its entry's term is its upload's term, and
//! the blank entry a leader appends when it is elected drops every upload staged in an older
//! term: an upload whose leader died or lost leadership half-way is dropped at the next
//! election, and no chunk of it can be staged after that. An upload abandoned while its leader
//! stays (the client went away, the value grew past the limit) is dropped by the
//! [`Request::Abort`] the leader proposes then; if that proposal fails, at the next election.
//!
//! **Applied again after a crash.** The store is written buffered: a crash loses a suffix of
//! its batches, and openraft applies the entries after the durable applied id again. A chunk
//! puts the same bytes under the same key. A commit writes its value with a writer of its own
//! before the batch that removes the chunks and records the applied id: if that batch was
//! lost, the chunks are still staged, and the value found under the key is this very entry's
//! (its version is the entry's index, which no other entry writes): the condition is taken as
//! held and the value is not written again.

use std::io::{self, Write};

use podstore::Store;

use super::values::HEADER_LEN;
use super::{Writes, check, data_key};
use crate::{Expect, Request, Response, UploadId, io_err};

/// The prefix of staged chunks.
const STAGED: &[u8] = b"s/";

/// The keys of upload `upload`'s chunks start with this.
fn upload_prefix(upload: UploadId) -> Vec<u8> {
    let mut k = STAGED.to_vec();
    k.extend_from_slice(&upload.term.to_be_bytes());
    k.extend_from_slice(&upload.nonce.to_be_bytes());
    k
}

/// The key of chunk `index` of `upload`.
fn chunk_key(upload: UploadId, index: u64) -> Vec<u8> {
    let mut k = upload_prefix(upload);
    k.extend_from_slice(&index.to_be_bytes());
    k
}

/// The staged keys from `start` (inclusive) to `end` (exclusive), in order.
fn staged_keys(store: &Store, start: Vec<u8>, end: Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
    store
        .range::<Vec<u8>>(start..end)
        .map(|k| k.map_err(io_err))
        .collect()
}

/// The staged keys of `upload`.
fn keys_of(store: &Store, upload: UploadId) -> io::Result<Vec<Vec<u8>>> {
    let start = upload_prefix(upload);
    let mut end = start.clone();
    // The prefix is never all 0xff bytes (it starts with `s/`): incrementing its last byte
    // that is not 0xff gives the first key after it.
    while end.last() == Some(&0xff) {
        end.pop();
    }
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    staged_keys(store, start, end)
}

/// Whether applying `request` reads staged chunks from the store (so the writes of the
/// entries before it must be in the store first).
pub(super) fn reads_staged(request: &Request) -> bool {
    match request {
        Request::Commit { .. } | Request::Abort { .. } => true,
        Request::Once { request, .. } => reads_staged(request),
        _ => false,
    }
}

/// The number of staged chunks (all uploads) in `store`: for tests.
#[cfg(test)]
pub(super) fn staged_in(store: &Store) -> usize {
    store
        .range::<Vec<u8>>(b"s/".to_vec()..b"s0".to_vec())
        .count()
}

impl Writes<'_> {
    /// Stages chunk `index` of `upload` (see the module docs).
    pub(super) fn chunk(&mut self, upload: UploadId, index: u64, bytes: &[u8]) -> Response {
        if upload.term != self.term {
            return Response::Rejected(format!(
                "a chunk of an upload of term {} in an entry of term {}: its leader lost its \
                 leadership",
                upload.term, self.term
            ));
        }
        self.batch.put(chunk_key(upload, index), bytes);
        Response::Done
    }

    /// Removes every chunk `upload` staged.
    pub(super) fn abort(&mut self, upload: UploadId) -> io::Result<Response> {
        for k in keys_of(self.store, upload)? {
            self.batch.delete(&k);
        }
        Ok(Response::Done)
    }

    /// Removes every chunk staged by an upload of a term before this entry's (applied for the
    /// blank entry a new leader appends).
    pub(super) fn drop_older_terms(&mut self) -> io::Result<()> {
        let mut end = STAGED.to_vec();
        end.extend_from_slice(&self.term.to_be_bytes());
        let keys = staged_keys(self.store, STAGED.to_vec(), end)?;
        if !keys.is_empty() {
            tracing::info!(
                chunks = keys.len(),
                term = self.term,
                "dropping the chunks of uploads of older terms"
            );
        }
        for k in keys {
            self.batch.delete(&k);
        }
        Ok(())
    }

    /// Publishes `upload` under `key` (see [`Request::Commit`] and the module docs).
    ///
    /// A commit refused is logged at warn: the leader proposes a commit only once all its
    /// chunks were applied there, so a refusal means the upload was cut short by a change of
    /// leader, or that this node's state differs from the leader's; the log line (its entry's
    /// index, the upload, what was staged) tells which. A failed condition (the client's
    /// `If-Match`, answered `412`) and a commit that publishes its value log at debug.
    pub(super) fn commit(
        &mut self,
        upload: UploadId,
        key: &[u8],
        chunks: u64,
        len: u64,
        crc: u32,
        expect: Option<Expect>,
    ) -> io::Result<Response> {
        let staged = keys_of(self.store, upload)?;
        let count = staged.len();
        let response = self.commit_staged(upload, staged, key, (chunks, len, crc), expect)?;
        match &response {
            Response::Done | Response::ConditionFailed { .. } => tracing::debug!(
                index = self.version,
                term = self.term,
                upload.term,
                upload.nonce,
                chunks,
                answer = ?response,
                "upload's commit applied"
            ),
            refused => tracing::warn!(
                index = self.version,
                term = self.term,
                upload.term,
                upload.nonce,
                chunks,
                staged = count,
                len,
                answer = ?refused,
                "an upload's commit was refused: nothing published"
            ),
        }
        Ok(response)
    }

    /// [`Writes::commit`] of `upload`, whose staged chunks are `staged`, unlogged.
    fn commit_staged(
        &mut self,
        upload: UploadId,
        staged: Vec<Vec<u8>>,
        key: &[u8],
        (chunks, len, crc): (u64, u64, u32),
        expect: Option<Expect>,
    ) -> io::Result<Response> {
        // The chunks go whatever the answer.
        for k in &staged {
            self.batch.delete(k);
        }
        if let Err(e) = check(key, None) {
            return Ok(Response::Rejected(e));
        }
        let max_value = podstore::MAX_VALUE_LEN - HEADER_LEN as u64;
        if len > max_value {
            return Ok(Response::Rejected(format!(
                "value longer than {max_value} bytes"
            )));
        }
        let whole = staged.len() as u64 == chunks
            && staged
                .iter()
                .enumerate()
                .all(|(i, k)| *k == chunk_key(upload, i as u64));
        if !whole {
            return Ok(Response::Rejected(format!(
                "upload {}:{} has {} of its {chunks} chunks staged (the others were dropped \
                 when the term changed)",
                upload.term,
                upload.nonce,
                staged.len()
            )));
        }
        let k = data_key(key);
        let current = self.current(&k)?;
        // Written by this very entry before a crash lost the batch that followed it.
        let written = current == Some(self.version);
        let holds = written
            || match expect {
                None => true,
                Some(Expect::Absent) => current.is_none(),
                Some(Expect::Present) => current.is_some(),
                Some(Expect::Version(v)) => current == Some(v),
            };
        if !holds {
            return Ok(Response::ConditionFailed { current });
        }
        if !written && let Some(refused) = self.assemble(&k, &staged, len, crc)? {
            return Ok(refused);
        }
        if let Some(o) = self.overlay.as_mut() {
            o.insert(k, Some(self.version));
        }
        Ok(Response::Done)
    }

    /// Writes the staged chunks `staged`, in order, behind the version header, as the value of
    /// data key `k`, if they are `len` bytes with crc32 `crc`; else writes nothing and answers
    /// why.
    fn assemble(
        &mut self,
        k: &[u8],
        staged: &[Vec<u8>],
        len: u64,
        crc: u32,
    ) -> io::Result<Option<Response>> {
        let mut writer = self.store.writer(k).map_err(io_err)?;
        writer.write_all(&self.version.to_be_bytes())?;
        let mut hasher = crc32fast::Hasher::new();
        let mut got = 0u64;
        for key in staged {
            // A range read, not a get: podstore's read cache keeps a value of up to 8 MiB
            // whole when it is got, and would fill with chunks read once.
            let chunk = self
                .store
                .get_range(key, 0..u64::MAX)
                .map_err(io_err)?
                .ok_or_else(|| {
                    io::Error::other("a staged chunk vanished while its upload was committed")
                })?;
            hasher.update(&chunk);
            got += chunk.len() as u64;
            writer.write_all(&chunk)?;
        }
        let got_crc = hasher.finalize();
        if got != len || got_crc != crc {
            // Dropped unfinished: the writer stores nothing.
            return Ok(Some(Response::Rejected(format!(
                "the upload's chunks are {got} bytes with crc32 {got_crc:08x}, its commit says \
                 {len} bytes with crc32 {crc:08x}"
            ))));
        }
        writer.finish().map_err(io_err)?;
        Ok(None)
    }
}

#[cfg(test)]
mod tests;
