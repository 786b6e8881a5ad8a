//! Which index entry a write replaces: the writer's look at its key before it appends
//! ([`seen`]), and the second look when the index changed in between ([`settle`]). Why a write
//! must look at all: `index/pending.rs`.

use super::read::Reader;
use super::shared::Shared;
use crate::error::Result;
use crate::index::Seen;

/// What the index holds for `key` now, for a write of it: its hash and [`Seen`].
pub(super) fn seen(shared: &Shared, reader: &Reader, key: &[u8]) -> Result<(u64, Seen)> {
    let hash = shared.index.hash(key);
    Ok((hash, reader.seen(key, hash)?))
}

/// Resolves the writes of `keys` that were queued unresolved (the index changed between the
/// writer's look and its append), looking again until each is. Called without the append lock.
/// A record that cannot be read to tell its key leaves the write resolved as if its key were
/// new, with a warning: the write itself is in the log, and must become visible.
pub(super) fn settle(shared: &Shared, reader: &Reader, unresolved: &[(u64, &[u8])]) {
    let (index, pending) = (&shared.index, &shared.pending);
    for &(seq, key) in unresolved {
        loop {
            let seen = match seen(shared, reader, key) {
                Ok((_, seen)) => seen,
                Err(e) => {
                    log::warn!("podstore: reading a record to resolve a write failed: {e}");
                    Seen {
                        places: index.places(index.hash(key)),
                        current: None,
                    }
                }
            };
            if pending.resolve(seq, &seen, index) {
                break;
            }
        }
    }
}
