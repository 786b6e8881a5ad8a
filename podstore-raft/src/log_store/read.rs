//! The log's reads: from the in-memory tail where it holds the entries, from the store
//! otherwise (on a blocking thread), at most [`READ_BYTES`] at a time.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};

use openraft::{OptionalSend, RaftLogReader};

use super::record::{Parsed, bound, extent};
use super::{Entry, LogStore, Vote};
use crate::{TypeConfig, io_err};

/// The start and end (exclusive) of a range of indexes.
fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

/// The encoded bytes of entries a bounded read returns at most (past the first entry):
/// replication (`limited_get_log_entries`: one AppendEntries) and the state machine's applies
/// (`entries_stream`) hold no more than this of the log in memory at a time, whatever
/// `max_payload_entries` says and however large the entries (the chunks of a streamed value
/// are 1 MiB each).
const READ_BYTES: usize = 1 << 20;

impl LogStore {
    /// The entries `start..end` the log holds, from `start` on, up to the first that brings
    /// their encoded bytes to `max_bytes` (at least one if the log holds `start`).
    async fn read_entries(&self, start: u64, end: u64, max_bytes: usize) -> io::Result<Vec<Entry>> {
        // Entries the in-memory tail holds are served on this task: replication asks for each
        // entry right after it was appended, and a hop to a blocking thread cost more than
        // the copy.
        let Some((first, stop)) = self.shared.live_range(start, end) else {
            return Ok(Vec::new());
        };
        {
            let tail = self.shared.tail();
            if tail.first().is_some_and(|t| t <= first) {
                return Ok(tail.read(first, stop, &mut max_bytes.max(1)));
            }
        }
        self.blocking(move |sh| {
            let mut budget = max_bytes.max(1);
            let Some((first, stop)) = sh.live_range(start, end) else {
                return Ok(Vec::new());
            };
            let mut out = Vec::with_capacity(stop.saturating_sub(first) as usize);
            // The entries before the in-memory tail from the store, the rest from the tail.
            let tail_start = sh.tail().first();
            let store_end = tail_start.map_or(stop, |t| t.clamp(first, stop));
            if first < store_end {
                // From the record holding `first` (it may start before it) on.
                let holding = sh
                    .store
                    .range(&bound(0)[..]..&bound(first.saturating_add(1))[..])
                    .next_back()
                    .transpose()
                    .map_err(io_err)?
                    .map(|k| extent(&k))
                    .transpose()?;
                // Its first index, not its key: a truncation may rewrite it under another.
                let from = match holding {
                    Some((start, last)) if last >= first => start,
                    _ => first,
                };
                let records = sh.store.range(&bound(from)[..]..&bound(store_end)[..]);
                for record in records.entries() {
                    let record = record.map_err(io_err)?;
                    let value = record.value().map_err(io_err)?;
                    let record = Parsed::new(record.key(), &value)?;
                    let next = first + out.len() as u64;
                    if record.first > next || record.last < next {
                        // Truncated or purged while we read: what was read is a prefix.
                        return Ok(out);
                    }
                    record.decode_range(next, store_end, &mut out, &mut budget)?;
                    if budget == 0 {
                        return Ok(out);
                    }
                }
                if first + (out.len() as u64) < store_end {
                    return Ok(out);
                }
            }
            out.extend(sh.tail().read(store_end, stop, &mut budget));
            Ok(out)
        })
        .await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> io::Result<Vec<Entry>> {
        let (start, end) = bounds(&range);
        self.read_entries(start, end, usize::MAX).await
    }

    /// At most 1 MiB of entries (past the first): one AppendEntries.
    async fn limited_get_log_entries(&mut self, start: u64, end: u64) -> io::Result<Vec<Entry>> {
        self.read_entries(start, end, READ_BYTES).await
    }

    /// The entries, read 1 MiB at a time as the state machine takes them (openraft's
    /// default reads the whole range at once: all the chunks of a streamed value).
    async fn entries_stream<RB>(
        &mut self,
        range: RB,
    ) -> impl futures::Stream<Item = io::Result<Entry>> + OptionalSend
    where
        RB: RangeBounds<u64> + Clone + Debug + OptionalSend,
    {
        use futures::StreamExt;
        let (start, end) = bounds(&range);
        let log = self.clone();
        futures::stream::try_unfold(start, move |next| {
            let log = log.clone();
            async move {
                if next >= end {
                    return Ok(None);
                }
                let entries = log.read_entries(next, end, READ_BYTES).await?;
                if entries.is_empty() {
                    return Ok(None);
                }
                let after = next + entries.len() as u64;
                Ok(Some((
                    futures::stream::iter(entries.into_iter().map(Ok::<_, io::Error>)),
                    after,
                )))
            }
        })
        .map(|batch| match batch {
            Ok(entries) => entries.left_stream(),
            Err(e) => futures::stream::iter([Err(e)]).right_stream(),
        })
        .flatten()
    }

    async fn read_vote(&mut self) -> io::Result<Option<Vote>> {
        Ok(self.shared.meta().vote)
    }
}
