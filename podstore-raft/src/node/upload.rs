//! A value streamed into the leader and replicated in chunks ([`Node::put_stream`]).
//!
//! The leader cuts the value into [`CHUNK_LEN`] pieces as it arrives and proposes each as a
//! [`Request::Chunk`] entry, with at most [`WINDOW`] of them proposed and not yet applied: so
//! at most `WINDOW + 1` chunks of a value are in the leader's memory at a time, whatever its
//! size. Then a [`Request::Commit`] publishes the value (see src/state_machine/uploads.rs for
//! how the state machine stages and assembles it). An upload that stops half-way (the body
//! ends in an error, grows past the limit, a chunk is refused, the request is dropped because
//! the client went away) is dropped by a [`Request::Abort`], proposed once the chunks in
//! flight are settled.

use std::collections::VecDeque;
use std::fmt::Display;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tokio::task::JoinHandle;

use super::{Node, NodeError, Written, unexpected, write_error};
use crate::{CHUNK_LEN, Expect, Request, RequestId, Response, UploadId};

/// The most chunks of one upload proposed and not yet applied: enough to keep replication
/// busy while the next chunk is read, few enough that memory stays a few MiB.
pub(crate) const WINDOW: usize = 2;

type ChunkWrite = JoinHandle<Result<Response, NodeError>>;

/// Drops the upload's staged chunks unless disarmed (see the module docs).
struct Upload {
    node: Node,
    id: UploadId,
    /// The chunk writes in flight, oldest first.
    pending: VecDeque<ChunkWrite>,
    armed: bool,
}

impl Upload {
    /// Proposes chunk `index`; waits while [`WINDOW`] are in flight.
    async fn propose(&mut self, index: u64, bytes: Vec<u8>) -> Result<(), NodeError> {
        let node = self.node.clone();
        let request = Request::Chunk {
            upload: self.id,
            index,
            bytes,
        };
        // A task of its own: the write goes on while the body is read.
        self.pending.push_back(tokio::spawn(async move {
            node.await_lease().await;
            let r = node.raft.client_write(request).await;
            r.map(|r| r.data).map_err(|e| write_error(&node, e))
        }));
        while self.pending.len() >= WINDOW {
            self.settle_one().await?;
        }
        Ok(())
    }

    /// Waits for the oldest chunk write in flight.
    async fn settle_one(&mut self) -> Result<(), NodeError> {
        // Awaited where it is, taken out only once it has finished: if the upload is dropped
        // meanwhile (the client went away), the write is still in `pending`, and the abort
        // waits for it. Taken out first, it would go on detached, unwaited for, and might be
        // appended after the abort: its chunk staged until the next election.
        let Some(write) = self.pending.front_mut() else {
            return Ok(());
        };
        let written = write.await;
        self.pending.pop_front();
        match written.map_err(|e| NodeError::Raft(e.to_string()))?? {
            Response::Done => Ok(()),
            Response::Rejected(e) => Err(NodeError::Interrupted(e)),
            other => Err(unexpected(other)),
        }
    }
}

impl Drop for Upload {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (node, upload) = (self.node.clone(), self.id);
        let pending = std::mem::take(&mut self.pending);
        rt.spawn(async move {
            // After the chunks in flight: an abort applied before one of them would leave it
            // staged (until the next election).
            for write in pending {
                let _ = write.await;
            }
            node.await_lease().await;
            match node.raft.client_write(Request::Abort { upload }).await {
                Ok(_) => tracing::debug!(?upload, "upload aborted"),
                Err(e) => tracing::info!(
                    ?upload,
                    error = %e,
                    "an upload's abort failed: its chunks are dropped at the next election"
                ),
            }
        });
    }
}

impl Node {
    /// Sets `key` to the value `body` streams, if `expect` holds (always, if `None`), under
    /// request id `id` if given (see [`Node::put_with`]): replicated in chunks of
    /// [`CHUNK_LEN`] bytes, with at most a few of them in this node's memory at a time whatever
    /// the value's size, then published at once by a final entry (readers see the old value or
    /// the whole new one). Fails with [`NodeError::TooLarge`] as soon as the body passes
    /// `max_len` bytes, [`NodeError::Body`] if the body fails, [`NodeError::Interrupted`] if
    /// this node lost its leadership half-way; what was staged is then dropped.
    ///
    /// For a value of at most [`CHUNK_LEN`] bytes, [`Node::put_with`] costs one entry
    /// instead of two.
    pub async fn put_stream<S, E>(
        &self,
        key: impl Into<Vec<u8>>,
        mut body: S,
        max_len: u64,
        expect: Option<Expect>,
        id: Option<RequestId>,
    ) -> Result<Written, NodeError>
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: Display,
    {
        let key = key.into();
        let term = {
            use openraft::async_runtime::watch::WatchReceiver;
            self.raft.metrics().borrow_watched().current_term
        };
        let mut upload = Upload {
            node: self.clone(),
            id: UploadId {
                term,
                nonce: self.uploads.fetch_add(1, Ordering::Relaxed),
            },
            pending: VecDeque::new(),
            armed: true,
        };
        let mut buf = Vec::with_capacity(CHUNK_LEN);
        let (mut chunks, mut len) = (0u64, 0u64);
        let mut crc = crc32fast::Hasher::new();
        while let Some(piece) = body.next().await {
            let piece = piece.map_err(|e| NodeError::Body(e.to_string()))?;
            len += piece.len() as u64;
            if len > max_len {
                return Err(NodeError::TooLarge { max: max_len });
            }
            crc.update(&piece);
            let mut rest = &piece[..];
            while !rest.is_empty() {
                let take = rest.len().min(CHUNK_LEN - buf.len());
                buf.extend_from_slice(&rest[..take]);
                rest = &rest[take..];
                if buf.len() == CHUNK_LEN {
                    let full = std::mem::replace(&mut buf, Vec::with_capacity(CHUNK_LEN));
                    upload.propose(chunks, full).await?;
                    chunks += 1;
                }
            }
        }
        if !buf.is_empty() {
            upload.propose(chunks, buf).await?;
            chunks += 1;
        }
        while !upload.pending.is_empty() {
            upload.settle_one().await?;
        }
        let commit = Request::Commit {
            upload: upload.id,
            key,
            chunks,
            len,
            crc: crc.finalize(),
            expect,
        };
        let outcome = self.write_once(commit, id).await?;
        // Applied (whatever it answered), the commit removed the staged chunks; not when it
        // was a retry's (replayed) or its request id was refused.
        let (written, response) = &outcome;
        if !written.replayed && !matches!(response, Response::RequestIdRefused(_)) {
            upload.armed = false;
        }
        match outcome {
            (written, Response::Done) => Ok(written),
            (_, other) => Err(unexpected(other)),
        }
    }
}
