//! The warm-up's first source: the record of the hot set the last close wrote (`HOTSET`,
//! `store/hotset.rs`), read from start to end in large sequential reads, each entry kept if the
//! index still names the record it came from as its key's, until the cache's free room is used.
//!
//! **Never trusted, only checked.** A file whose header does not verify, or that names another
//! directory or another file than where it is (a copy, or a file moved from another store's
//! directory: its device and inode numbers and birth times differ from those it recorded), is
//! not read; an entry
//! whose crc does not verify ends the reading (its length cannot be believed). Each is logged
//! once. An entry is kept under its record's place, only if the index names that place for the
//! entry's key with the entry's value length, so an entry of a value overwritten, deleted or
//! moved by compaction since is skipped, and one kept is never stale (`store/cache.rs`).

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{Walk, WarmFigures, refresh_room};
use crate::format::hotset::{
    HOT_ENTRY_MAX, HOTSET_ENTRIES_AT, HOTSET_HEADER_LEN, HOTSET_NAME, HotEntry, HotSetHeader,
    decode_entry,
};
use crate::io::file::SegmentFile;
use crate::store::read::{KEY_AT, Reader, cached_key_len, cached_seq, kept_weight};
use crate::store::shared::Shared;

/// How often (in bytes of the file) the room is looked at again and a close is heeded.
const STEP: u64 = 4 << 20;

/// The window's name for the file it reads (file ids are below 2^40).
const HOT_FILE: u64 = u64::MAX;

/// Bytes of an entry up to the end of its length field.
const ENTRY_LEN_END: usize = 8;

/// The longest entry read (the writer records none longer).
const MAX_ENTRY: usize = HOT_ENTRY_MAX;

/// How reading the hot set ended.
pub(super) enum HotEnd {
    /// No file, or none to trust: nothing read.
    None,
    /// Every entry was read.
    Done,
    /// The cache's free room is used.
    Full,
    /// The store is closing.
    Stopped,
}

impl Walk {
    /// Keeps the entries of the record of the hot set, if there is one to trust.
    pub(super) fn hot_set(&mut self) -> HotEnd {
        let dir = self.shared.dir.clone();
        let path = dir.join(HOTSET_NAME);
        match self.read_hot_set(&dir, &path) {
            Ok(end) => end,
            Err(why) => {
                log::info!(
                    "podstore: warm-up: {} is not used ({why}); the newest segments are read",
                    path.display()
                );
                HotEnd::None
            }
        }
    }

    fn read_hot_set(&mut self, dir: &Path, path: &Path) -> Result<HotEnd, String> {
        let profile = self.shared.profile.clone();
        let storage = &profile.storage;
        let f = match storage.identity(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HotEnd::None),
            Err(e) => return Err(e.to_string()),
        };
        let d = storage.identity(dir).map_err(|e| e.to_string())?;
        let file = Arc::new(SegmentFile::open(path, &profile).map_err(|e| e.to_string())?);
        let len = file.len().map_err(|e| e.to_string())?;
        // Read through the walk's window: 4 MiB reads, the next one made ahead on its thread.
        self.win.file = HOT_FILE;
        self.win.at = (0, 0);
        let cut = |at: u64| format!("it is cut short at {at}");
        let header = match self.win.bytes(&file, 0, HOTSET_HEADER_LEN, len) {
            Ok(Some(b)) => HotSetHeader::decode(b).map_err(|k| format!("header: {k}"))?,
            Ok(None) => return Err(cut(0)),
            Err(e) => return Err(e.to_string()),
        };
        let h = &header;
        if (h.dir_dev, h.dir_ino, h.dir_born, h.file_ino, h.file_born)
            != (d.dev, d.ino, d.born, f.ino, f.born)
        {
            return Err("it was written for another directory or file".into());
        }
        let end = HOTSET_ENTRIES_AT + header.bytes;
        if end > len {
            return Err(format!("it is {len} bytes long, its header says {end}"));
        }
        let mut pos = HOTSET_ENTRIES_AT;
        let mut entries = 0u64;
        let mut next_check = pos;
        while pos < end {
            if pos >= next_check {
                if self.stop.load(Ordering::Relaxed) {
                    return Ok(HotEnd::Stopped);
                }
                // Every 4 MiB: the cache's room as it is now. Readers fill the cache too; once
                // it has evicted anything the warm-up stops (it never makes the cache evict).
                if !refresh_room(&self.reader, self.evictions, &mut self.room) {
                    return Ok(HotEnd::Full);
                }
                next_check = pos + STEP;
            }
            let head = match self.win.bytes(&file, pos, ENTRY_LEN_END, end) {
                Ok(Some(b)) => b,
                Ok(None) => return Err(cut(pos)),
                Err(e) => return Err(e.to_string()),
            };
            let total =
                ENTRY_LEN_END + u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
            if total > MAX_ENTRY {
                return Err(format!("entry {entries} is {total} bytes long"));
            }
            let bytes = match self.win.bytes(&file, pos, total, end) {
                Ok(Some(b)) => b,
                Ok(None) => return Err(cut(pos)),
                Err(e) => return Err(e.to_string()),
            };
            let entry = match decode_entry(bytes, MAX_ENTRY) {
                Ok(Some((entry, _))) => entry,
                Ok(None) => return Err(cut(pos)),
                Err(kind) => {
                    return Err(format!(
                        "entry {entries} does not verify ({kind}); the {entries} before it were used"
                    ));
                }
            };
            entries += 1;
            pos += total as u64;
            if !keep(
                &self.reader,
                &self.shared,
                &self.figures,
                &mut self.room,
                self.evictions,
                entry,
            ) {
                return Ok(HotEnd::Full);
            }
        }
        if entries != header.entries {
            return Err(format!(
                "{entries} entries read, its header says {}",
                header.entries
            ));
        }
        Ok(HotEnd::Done)
    }
}

/// Keeps `entry` if the index names its record as its key's; false when the cache has no
/// room for it.
fn keep(
    reader: &Reader,
    shared: &Shared,
    figures: &WarmFigures,
    room: &mut u64,
    evictions: u64,
    entry: HotEntry<'_>,
) -> bool {
    let kept = entry.kept;
    let Some(key_len) = cached_key_len(kept) else {
        return true;
    };
    let (key, value) = kept[KEY_AT..].split_at(key_len);
    let named = crate::store::hotset::named(&shared.index, entry.file, entry.offset, kept);
    let Some(named) = named.filter(|e| reader.cache().holds_whole(e)) else {
        return true;
    };
    let weight = kept_weight(key_len, value.len() as u64);
    if weight > *room {
        refresh_room(reader, evictions, room);
        if weight > *room {
            return false;
        }
    }
    reader.keep_warmed(&named, cached_seq(kept), key, value);
    *room = room.saturating_sub(weight);
    figures.values.fetch_add(1, Ordering::Relaxed);
    figures
        .bytes
        .fetch_add(value.len() as u64, Ordering::Relaxed);
    true
}
