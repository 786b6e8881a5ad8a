//! Listing keys in order: [`Store::keys`](crate::Store::keys),
//! [`Store::range`](crate::Store::range), [`Store::prefix`](crate::Store::prefix).
//!
//! The index keeps no keys, so listing reads them where they are: the footer of every sealed
//! file, and the records the log keeps of the segments whose footer is not durable yet (the
//! active one among them). A key is listed when the record it was read from is its key's live
//! one: the index holds an entry at that record's place (a place names one record, so no key
//! is needed to tell). Keys written or deleted while a listing runs may or may not appear.

use std::ops::Bound;

use super::inner::Inner;
use crate::error::Result;
use crate::format::footer::FooterEntry;
use crate::format::record::RecordKind;
use crate::index::IndexEntry;
use crate::segment;

/// How a listing treats a footer it cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OnDamage {
    /// Fail the listing (an `Err` item).
    Fail,
    /// Leave the file's keys out (`verify`, which reports the file's damage itself).
    Skip,
}

/// The live keys within `bounds`, in ascending byte order, with their entries.
pub(super) fn live_entries(
    inner: &Inner,
    bounds: (Bound<&[u8]>, Bound<&[u8]>),
    on_damage: OnDamage,
) -> Result<Vec<(Vec<u8>, IndexEntry)>> {
    let shared = &inner.shared;
    let index = &shared.index;
    // Taken before the files: a segment sealed after this is listed from its records here, or
    // (once durable) from its footer.
    let unsealed = inner.log.unsealed_records();
    let mut live = Vec::new();
    let mut take = |id: u64, entries: &[FooterEntry]| {
        for e in entries {
            if e.kind != RecordKind::Put || !in_bounds(bounds, &e.key) {
                continue;
            }
            if index.contains(index.hash(&e.key), id, e.offset) {
                live.push((e.key.clone(), IndexEntry::of_footer_entry(id, e)));
            }
        }
    };
    for (id, records) in &unsealed.segments {
        take(*id, records);
    }
    for (id, handle) in shared.segments.snapshot() {
        if unsealed.segments.iter().any(|(s, _)| *s == id) {
            continue;
        }
        if let Some(records) = &handle.unsealed {
            take(id, records);
            continue;
        }
        if handle.sealed_at.is_none_or(|t| t > unsealed.syncs_done) {
            // Created after the records were taken: holds only writes made since.
            continue;
        }
        let len = handle.file.len()?;
        let entries = match segment::read_sealed_entries(
            &handle.file,
            id,
            len,
            &shared.profile,
            inner.reader.pool(),
        ) {
            Ok(e) => e,
            // Removed by compaction since the snapshot: its live keys were moved to a newer
            // file, listed from there.
            Err(_) if shared.segments.file(id).is_none() => continue,
            Err(_) if on_damage == OnDamage::Skip => continue,
            Err(e) => return Err(e),
        };
        take(id, &entries);
    }
    live.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    Ok(live)
}

/// Whether `key` lies within `bounds`.
fn in_bounds((start, end): (Bound<&[u8]>, Bound<&[u8]>), key: &[u8]) -> bool {
    let after_start = match start {
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
        Bound::Unbounded => true,
    };
    let before_end = match end {
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
        Bound::Unbounded => true,
    };
    after_start && before_end
}

/// Iterator over live keys in ascending byte order. Returned by
/// [`Store::keys`](crate::Store::keys), [`Store::range`](crate::Store::range) and
/// [`Store::prefix`](crate::Store::prefix).
///
/// A failed read of a footer is an item (`Err`), after which the iterator ends.
pub struct Keys {
    items: std::vec::IntoIter<(Vec<u8>, IndexEntry)>,
    error: Option<crate::Error>,
}

impl Keys {
    pub(super) fn new(listed: Result<Vec<(Vec<u8>, IndexEntry)>>) -> Keys {
        match listed {
            Ok(items) => Keys {
                items: items.into_iter(),
                error: None,
            },
            Err(e) => Keys {
                items: Vec::new().into_iter(),
                error: Some(e),
            },
        }
    }
}

impl Iterator for Keys {
    type Item = Result<Vec<u8>>;
    fn next(&mut self) -> Option<Result<Vec<u8>>> {
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        self.items.next().map(|(k, _)| Ok(k))
    }
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys").finish_non_exhaustive()
    }
}

/// The bounds of the keys that start with `prefix`.
pub(super) fn prefix_bounds(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let mut end = prefix.to_vec();
    // The first key after every key with the prefix: the prefix with its last byte that is
    // not 0xff incremented, the bytes after it dropped; none if the prefix is all 0xff.
    while let Some(&last) = end.last() {
        if last == 0xff {
            end.pop();
        } else {
            *end.last_mut().expect("not empty") += 1;
            return (Bound::Included(prefix.to_vec()), Bound::Excluded(end));
        }
    }
    (Bound::Included(prefix.to_vec()), Bound::Unbounded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_cover_exactly_the_prefix() {
        let (s, e) = prefix_bounds(b"ab");
        assert_eq!(s, Bound::Included(b"ab".to_vec()));
        assert_eq!(e, Bound::Excluded(b"ac".to_vec()));
        let (_, e) = prefix_bounds(b"a\xff\xff");
        assert_eq!(e, Bound::Excluded(b"b".to_vec()));
        let (_, e) = prefix_bounds(b"\xff");
        assert_eq!(e, Bound::Unbounded);
        let (_, e) = prefix_bounds(b"");
        assert_eq!(e, Bound::Unbounded);
    }
}
