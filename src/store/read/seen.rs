//! A writer's look at its key ([`Reader::seen`]): which of the index entries with its
//! fingerprint is the key's, from the read cache, a record known to be the key's, or a read of
//! the record, as far as the [`Look`] asks. Why a write must look at all, and what a lazy put
//! is: `index/pending.rs`.

use std::sync::Arc;

use super::{Identity, KEY_AT, Located, Reader, WHOLE_RECORD_READ, cached_seq, cached_whole};
use crate::error::Result;
use crate::index::{IndexEntry, Known, Seen};
use crate::io::file::SegmentFile;
use crate::store::cache::{Key, Part};

/// How much a writer's look ([`Reader::seen`]) reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::store) enum Look {
    /// A put: what the read cache tells, and no read of a file; if that is not enough, the
    /// look says "unknown" and the put goes to the front of its run (a lazy put).
    Lazy,
    /// The key's newest entry, reading records until it is found (`put_if_absent`, a put under
    /// back-pressure).
    First,
    /// Every entry of the key, its older versions too (a delete, the resolver); reads past the
    /// first only in a run with an unresolved entry.
    ///
    /// The resolver reads every entry it cannot tell otherwise, an expired one too: an entry
    /// left in the index must name a record its file's footer lists, and a footer lists only
    /// the last record of each key in its segment (`segment::last_per_key`). An expired older
    /// version left behind its key's newest in the same segment named a record no footer
    /// lists, which neither eviction nor compaction could then take out: a capped store grew to
    /// four times its cap (tried, 2026-12-06).
    All,
}

impl Reader {
    /// What the index holds for `key` right now, for a writer ([`Seen`]): the entries with its
    /// fingerprint, and which of them is the key's (read from their records, or the cache), as
    /// far as `look` asks. No read at all for a key whose fingerprint is new.
    pub(in crate::store) fn seen(&self, key: &[u8], hash: u64, look: Look) -> Result<Seen> {
        self.seen_knowing(key, hash, look, None)
    }

    /// [`Reader::seen`], taking the record `known` as the key's without reading it.
    pub(in crate::store) fn seen_knowing(
        &self,
        key: &[u8],
        hash: u64,
        look: Look,
        known: Option<Known>,
    ) -> Result<Seen> {
        let mut last = None;
        loop {
            let candidates = self.index.candidates(hash, key.len() as u32);
            // Older versions of the key can only be behind an unresolved entry.
            let all = look == Look::All && candidates.unresolved();
            let mut seen = Seen::default();
            let mut gone = false;
            for c in candidates.as_slice() {
                let identity = if let Some(k) = known.filter(|k| k.place == c.place()) {
                    match self.segments.file(c.segment) {
                        Some(file) => Identity::Mine {
                            found: Located::new(*c, k.seq, file),
                            cached: None,
                        },
                        None => Identity::Gone,
                    }
                } else if look == Look::Lazy {
                    match self.identify_cached(key, *c) {
                        Some(i) => i,
                        // Telling would take a read: the put goes to the front instead.
                        None => {
                            seen.unknown = true;
                            break;
                        }
                    }
                } else {
                    self.identify(key, *c, true)?
                };
                match identity {
                    Identity::Mine { found, .. } if seen.current.is_none() => {
                        seen.current = Some(found.entry);
                        seen.current_seq = found.seq;
                        if !all {
                            break;
                        }
                    }
                    Identity::Mine { found, .. } => seen.older.push(found.entry.place()),
                    Identity::Other => {}
                    Identity::Gone => gone = true,
                }
            }
            seen.places = candidates.places();
            if seen.unknown {
                seen.current = None;
                seen.older.clear();
                return Ok(seen);
            }
            if !gone || (seen.current.is_some() && !all) {
                return Ok(seen);
            }
            self.check_not_stuck(&mut last, seen.places)?;
        }
    }

    /// Whether `entry` is `key`'s, if the read cache tells without a read of the file: a whole
    /// value kept with its key, or the key of a large value read before. A file gone (moved by
    /// compaction) does not tell either.
    fn identify_cached(&self, key: &[u8], entry: IndexEntry) -> Option<Identity> {
        let file = self.segments.file(entry.segment)?;
        if self.cache.holds_whole(&entry) {
            return self.by_cached_value(key, entry, &file);
        }
        if entry.record_len() > WHOLE_RECORD_READ {
            return self.by_cached_key(key, entry, &file);
        }
        None
    }

    /// Whether `entry` is `key`'s, by the whole value the cache keeps with its key (key, then
    /// value, in one buffer); `None` if the cache does not hold it.
    pub(super) fn by_cached_value(
        &self,
        key: &[u8],
        entry: IndexEntry,
        file: &Arc<SegmentFile>,
    ) -> Option<Identity> {
        let b = self.cache.get_bytes(&Key::of(&entry, Part::Value))?;
        Some(match cached_whole(&b, key, entry.value_len) {
            Some((seq, value)) => Identity::Mine {
                found: Located::new(entry, seq, file.clone()),
                cached: Some(value),
            },
            None => Identity::Other,
        })
    }

    /// Whether `entry` is `key`'s, by the key of a large value the cache kept when it was read
    /// before; `None` if the cache does not hold it.
    pub(super) fn by_cached_key(
        &self,
        key: &[u8],
        entry: IndexEntry,
        file: &Arc<SegmentFile>,
    ) -> Option<Identity> {
        let k = self.cache.get_bytes(&Key::of(&entry, Part::Key))?;
        Some(if k.len() == KEY_AT + key.len() && &k[KEY_AT..] == key {
            Identity::Mine {
                found: Located::new(entry, cached_seq(&k), file.clone()),
                cached: None,
            }
        } else {
            Identity::Other
        })
    }
}
