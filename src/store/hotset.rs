//! The record of the hot set (`HOTSET`, `format/hotset.rs`): at close, the read cache's whole
//! values that the index still names are written into one file (those the table of hot values
//! holds first: the keys read again most recently), in large sequential writes,
//! so that the warm-up of the next open (`warm/hotset.rs`) reads back what was being read,
//! sequentially, before the newest segments. A store that is restarted (a service, YCSB's run
//! phase after a load, a phase of a benchmark after another) starts with the values its last
//! process read, where the newest segments are only the values written last.
//!
//! The file is a hint, never a source of data: every entry names the record it was read from
//! (file id, offset), and the warm-up keeps it only if the index names that record as its
//! key's (a value overwritten, deleted or moved since is not kept), under the key of that place
//! in the cache, like every cached value (`store/cache.rs`: never stale). So the file needs no
//! sync: one cut short or damaged by a crash is found by its crcs and ignored with a log line.
//! It is written as `HOTSET.tmp` and renamed, so a close that fails half-way leaves the last
//! whole one (or none).

use std::path::Path;

use bytes::Bytes;

use super::read::{KEPT_ON_WRITE, KEY_AT, Reader, cached_key_len, kept_weight};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::format::hotset::{
    HOT_ENTRY_MAX, HOTSET_ENTRIES_AT, HOTSET_HEADER_LEN, HOTSET_NAME, HOTSET_TMP, HotSetHeader,
    encode_entry, entry_len,
};
use crate::index::IndexEntry;
use crate::io::aligned::AlignedBuf;
use crate::io::file::{self, SegmentFile};
use crate::segment::SegmentKind;

/// The most value bytes recorded: about 0.4 s of writing at close at the project's disk's
/// sequential rate (~1.3 GB/s; not timed at a close).
pub(super) const HOTSET_MAX: u64 = 512 << 20;

/// Bytes written per write.
const STEP: usize = 4 << 20;

/// What [`record`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Recorded {
    /// Entries.
    pub(super) entries: u64,
    /// Bytes of entries.
    pub(super) bytes: u64,
}

/// Writes the cache's whole values that the index still names (at most [`HOTSET_MAX`] bytes of
/// them, those the table of hot values holds first) into `HOTSET`, replacing the one there: at
/// close, once nothing else writes.
///
/// With a size cap (`cap`), the record takes at most the room the store's files leave under it
/// (the old record counted: it stays beside the new one until the rename), so that a hint never
/// takes the store past its cap; with no room, no record.
pub(super) fn record(shared: &Shared, reader: &Reader, cap: Option<u64>) -> Result<Recorded> {
    let profile = &shared.profile;
    let dir = &shared.dir;
    let tmp = dir.join(HOTSET_TMP);
    // A left-over of a close that failed half-way: the store's own name.
    if file::exists(profile, &tmp)? {
        file::remove_file(profile, &tmp)?;
    }
    // Never more than a quarter of the free space: a hint does not fill a disk the store's
    // data needs.
    let free = profile
        .storage
        .free_space(dir)
        .map_err(|e| Error::io("statvfs", Some(dir.clone()), e))?;
    let mut max = free.map_or(HOTSET_MAX, |f| HOTSET_MAX.min(f / 4));
    // The room under the cap for the entries: what the files leave, less the header's place
    // and a block of padding at the end.
    let room = match cap {
        Some(cap) => {
            let used = super::compact::files_bytes(shared, |_, _| {})?;
            let fixed = HOTSET_ENTRIES_AT + u64::from(profile.block_size);
            Some(cap.saturating_sub(used).saturating_sub(fixed))
        }
        None => None,
    };
    if let Some(room) = room {
        max = max.min(room);
    }
    let (values, all) = reader.cache().whole_values(max, &Default::default());
    let path = dir.join(HOTSET_NAME);
    if values.is_empty() || room == Some(0) || segments_suffice(shared, reader, &values) {
        // Nothing to record, or nothing the walk of the newest segments would not give the
        // next open faster (in parts side by side): no record, and none left from before
        // (its own name) to be read in vain.
        if file::exists(profile, &path)? {
            file::remove_file(profile, &path)?;
        }
        return Ok(Recorded::default());
    }
    // A record, then: the table of hot values' first (the keys read again most recently),
    // which the next open reads back first and keeps if its room ends before the record does.
    // Asked only now: a look at every slot of the table. With every value already in hand,
    // they are put in that order as they are (what the cache's two passes would give, nothing
    // having changed it since); only a list the bytes bound cut short is asked for again.
    let first = shared.index.hot().map(|t| t.buffers()).unwrap_or_default();
    let values = if first.is_empty() {
        values
    } else if all {
        let (mut hot, rest): (Vec<_>, Vec<_>) = values
            .into_iter()
            .partition(|(_, _, b)| first.contains(&(b.as_ptr() as usize)));
        hot.extend(rest);
        hot
    } else {
        reader.cache().whole_values(max, &first).0
    };
    // `max` counted the values; the room must hold their entries' heads too.
    let values = match room {
        Some(room) => within(values, room),
        None => values,
    };
    if values.is_empty() {
        if file::exists(profile, &path)? {
            file::remove_file(profile, &path)?;
        }
        return Ok(Recorded::default());
    }
    let result = write(shared, &tmp, values);
    if result.is_err() {
        // A full disk, say: what was written of it goes, the last whole record stays.
        let _ = file::remove_file(profile, &tmp);
    }
    result
}

/// The first of `values` whose entries take at most `room` bytes.
fn within(values: Vec<(u64, u64, Bytes)>, room: u64) -> Vec<(u64, u64, Bytes)> {
    let mut used = 0u64;
    values
        .into_iter()
        .take_while(|(_, _, kept)| {
            used += entry_len(kept.len()) as u64;
            used <= room
        })
        .collect()
}

/// Writes `values` into `tmp`, then renames it to `HOTSET`.
fn write(shared: &Shared, tmp: &Path, values: Vec<(u64, u64, Bytes)>) -> Result<Recorded> {
    let profile = &shared.profile;
    let dir = &shared.dir;
    let out = SegmentFile::create(tmp, profile)?;
    let identity = |p: &Path| {
        profile
            .storage
            .identity(p)
            .map_err(|e| Error::io("stat", Some(p.to_path_buf()), e))
    };
    let d = identity(dir)?;
    let f = identity(tmp)?;
    let block = u64::from(profile.block_size).max(1) as usize;
    let mut staging = AlignedBuf::zeroed(STEP + 2 * block, profile.mem_align.max(1));
    let mut pending = Vec::with_capacity(STEP + (64 << 10));
    let mut at = HOTSET_ENTRIES_AT;
    let mut done = Recorded::default();
    let index = &shared.index;
    for (file_id, offset, kept) in values {
        if entry_len(kept.len()) > HOT_ENTRY_MAX || named(index, file_id, offset, &kept).is_none() {
            continue;
        }
        let before = pending.len();
        encode_entry(&mut pending, file_id, offset, &kept);
        done.entries += 1;
        done.bytes += (pending.len() - before) as u64;
        if pending.len() >= STEP {
            let n = pending.len() / block * block;
            write_aligned(&out, &mut staging, at, &pending[..n])?;
            at += n as u64;
            pending.drain(..n);
        }
    }
    if !pending.is_empty() {
        let n = pending.len().div_ceil(block) * block;
        pending.resize(n, 0);
        write_aligned(&out, &mut staging, at, &pending)?;
    }
    let header = HotSetHeader {
        dir_dev: d.dev,
        dir_ino: d.ino,
        dir_born: d.born,
        file_ino: f.ino,
        file_born: f.born,
        entries: done.entries,
        bytes: done.bytes,
    };
    let mut head = vec![0u8; block.max(HOTSET_HEADER_LEN)];
    head[..HOTSET_HEADER_LEN].copy_from_slice(&header.encode());
    write_aligned(&out, &mut staging, 0, &head)?;
    drop(out);
    file::rename(profile, tmp, &dir.join(HOTSET_NAME))?;
    Ok(done)
}

/// Whether the next open's walk of the newest segments gives the cache every value `values`
/// holds: none is larger than that walk keeps ([`KEPT_ON_WRITE`]), and the live records of the
/// log segments fit the cache's room (its capacity less a sixteenth, as the warm-up counts it).
/// A store that fits in its cache (YCSB's 200 000 values after their load) needs no record;
/// one larger than its cache, or whose hot values are larger, does.
fn segments_suffice(shared: &Shared, reader: &Reader, values: &[(u64, u64, Bytes)]) -> bool {
    let large = values.iter().any(|(_, _, kept)| {
        cached_key_len(kept).is_none_or(|k| (kept.len() - KEY_AT - k) as u64 > KEPT_ON_WRITE)
    });
    if large {
        return false;
    }
    let logs: std::collections::HashSet<u64> = shared
        .segments
        .snapshot()
        .into_iter()
        .filter(|(_, h)| h.kind == SegmentKind::Log)
        .map(|(id, _)| id)
        .collect();
    let live: u64 = shared
        .index
        .usage_all()
        .iter()
        .filter(|(id, _)| logs.contains(id))
        .map(|(_, u)| u.live_bytes)
        .sum();
    let capacity = reader.cache_figures().capacity;
    live + shared.index.len() * kept_weight(0, 0) <= capacity - capacity / 16
}

/// The index's entry of the record at `offset` of `file_id`, if the index names it as the
/// key's in `kept` (the cache's bytes for it: sequence number, key length, key, value) with
/// that value's length: what both the record's writer and its reader ask of every entry.
pub(super) fn named(
    index: &crate::index::Index,
    file_id: u64,
    offset: u64,
    kept: &[u8],
) -> Option<IndexEntry> {
    let key_len = cached_key_len(kept)?;
    let key = &kept[KEY_AT..KEY_AT + key_len];
    let value_len = (kept.len() - KEY_AT - key_len) as u64;
    index
        .candidates(index.hash(key), key_len as u32)
        .as_slice()
        .iter()
        .copied()
        .find(|c| c.segment == file_id && c.offset == offset && c.value_len == value_len)
}

/// Writes `bytes` (a multiple of the block size long) at `at` (block-aligned), through the
/// aligned `staging` buffer.
fn write_aligned(out: &SegmentFile, staging: &mut AlignedBuf, at: u64, bytes: &[u8]) -> Result<()> {
    let mut done = 0;
    while done < bytes.len() {
        let n = (bytes.len() - done).min(staging.len());
        staging[..n].copy_from_slice(&bytes[done..done + n]);
        out.write_all_at(&staging[..n], at + done as u64)?;
        done += n;
    }
    Ok(())
}
