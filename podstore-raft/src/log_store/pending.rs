//! Appends written behind: an append of small entries is encoded into the open record of the
//! pending appends and made readable (the in-memory tail) at once; the flusher writes every
//! append pending as one record just before its flush, so the appends one fdatasync covers
//! are one record, not one each.
//!
//! Why: on the leader, openraft appends once per client write, so the log had a record per
//! put: a podstore put (an index look-up, a record header) on the Raft core's task, and, once
//! purged, a delete that reads the record back (podstore's index keeps no keys). The
//! reclaim thread's deletes were 13.4 µs of the leader's 77.5 µs of CPU per put at 64
//! clients (docs/benchmarks.md, "Where a request's CPU goes"). A record per flush divides
//! both by the appends per flush.
//!
//! Nothing changes for durability: an append's `IOFlushed` callback is completed by the
//! flusher after it has written the pending appends (its own among them) and flushed. A
//! crash takes the pending appends with it, as it takes buffered writes not flushed: only
//! appends not acknowledged, and only a suffix of the log (writes of entries reach the store
//! in order, under [`Shared::write_order`]). Pending appends stay readable: they are in the
//! tail, which holds the newest entries (at least [`super::tail::TAIL_ENTRIES`] and
//! [`super::tail::TAIL_BYTES`]; the pending ones are bounded far below: [`PENDING_BYTES`],
//! [`PENDING_ENTRIES`]) and drops none but a streamed value's chunks, which are written at
//! once, after the pending ones. Every other write of the log (a truncation, a purge, the
//! vote, the committed id at close) writes the pending appends first.

use std::io;
use std::sync::MutexGuard;

use openraft::alias::LogIdOf;

use super::record::{Builder, RECORD_BYTES};
use super::{Entry, Shared, write_records};
use crate::TypeConfig;

type LogId = LogIdOf<TypeConfig>;

/// Pending appends of more than this many encoded bytes are written at once by the append
/// that brings them there (on the calling task: a buffered write).
pub(super) const PENDING_BYTES: usize = RECORD_BYTES;
/// Likewise, of more than this many entries (well below the tail's bound, so the tail holds
/// every pending entry).
pub(super) const PENDING_ENTRIES: usize = 1024;

/// The appends not yet written to the store.
#[derive(Default)]
pub(super) struct Pending {
    /// Their records being built (the first from the spare buffer).
    builder: Option<Builder>,
    /// The committed id their records carry (the one known at the first of them).
    committed: Option<LogId>,
    entries: usize,
    bytes: usize,
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds an append's entries to the pending ones and makes them readable; writes the
    /// pending appends to the store if they reach [`PENDING_BYTES`] or [`PENDING_ENTRIES`].
    pub(super) fn append_pending(
        &self,
        entries: impl IntoIterator<Item = Entry>,
        committed: Option<LogId>,
    ) -> io::Result<()> {
        let full = {
            let mut p = self.pending();
            let p = &mut *p;
            let builder = match &mut p.builder {
                Some(b) => b,
                None => {
                    p.committed = committed;
                    let spare = std::mem::take(&mut *self.spare());
                    p.builder.insert(Builder::new(committed, spare))
                }
            };
            let mut sized = Vec::new();
            for e in entries {
                let len = builder.push(&e)?;
                p.bytes += len;
                sized.push((e, len));
            }
            p.entries += sized.len();
            // Readable before the lock is released: a write of the pending appends that takes
            // them next finds them in the tail and the log's extent.
            self.readable(sized);
            p.bytes >= PENDING_BYTES || p.entries >= PENDING_ENTRIES
        };
        if full {
            let _order = self.write_order();
            self.drain_ordered()?;
        }
        Ok(())
    }

    /// Writes the pending appends to the store (buffered), under [`Shared::write_order`].
    pub(super) fn drain_ordered(&self) -> io::Result<()> {
        let taken = std::mem::take(&mut *self.pending());
        let Some(builder) = taken.builder else {
            return Ok(());
        };
        write_records(self, &mut builder.finish())?;
        self.meta().saved_committed = taken.committed;
        Ok(())
    }

    /// Writes the pending appends and makes the store durable.
    pub(super) fn flush(&self) -> io::Result<()> {
        {
            let _order = self.write_order();
            self.drain_ordered()?;
        }
        self.store.flush().map_err(crate::io_err)
    }
}
