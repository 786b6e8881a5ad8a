//! The warm-up's first source: the record of the hot set the last close wrote (`HOTSET`,
//! `store/hotset.rs`), read from start to end in large sequential reads, each entry kept if the
//! index still names the record it came from as its key's, until the cache's free room is used.
//!
//! **Never trusted, only checked.** A file whose header does not verify, or that names another
//! directory or another file than where it is (a copy, or a file moved from another store's
//! directory: its device and inode numbers differ from those it recorded), is not read; an entry
//! whose crc does not verify ends the reading (its length cannot be believed). Each is logged
//! once. An entry is kept under its record's place, only if the index names that place for the
//! entry's key with the entry's value length, so an entry of a value overwritten, deleted or
//! moved by compaction since is skipped, and one kept is never stale (`store/cache.rs`).

use std::io;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::{Walk, refresh_room};
use crate::format::align_down;
use crate::format::hotset::{
    HOTSET_ENTRIES_AT, HOTSET_HEADER_LEN, HOTSET_NAME, HotEntry, HotSetHeader, decode_entry,
};
use crate::io::aligned::AlignedBuf;
use crate::io::file::SegmentFile;
use crate::store::read::{KEY_AT, cached_key_len, cached_seq, kept_weight};

/// Bytes read per read.
const STEP: usize = 4 << 20;

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
        let file = SegmentFile::open(path, &profile).map_err(|e| e.to_string())?;
        let len = file.len().map_err(|e| e.to_string())?;
        let align = self.shared.profile.read_align.max(1);
        let mut buf = AlignedBuf::zeroed(STEP, profile.mem_align.max(1));
        let head_len = (align as usize).max(HOTSET_HEADER_LEN);
        let got = file
            .read_at_most(0, &mut buf[..head_len], align)
            .map_err(|e| e.to_string())?;
        let header = HotSetHeader::decode(&buf[..got]).map_err(|k| format!("header: {k}"))?;
        let h = &header;
        if (h.dir_dev, h.dir_ino, h.dir_born, h.file_ino, h.file_born)
            != (d.dev, d.ino, d.born, f.ino, f.born)
        {
            return Err("it was written for another directory or file".into());
        }
        let end = HOTSET_ENTRIES_AT + header.bytes;
        if end > len {
            return Err(format!(
                "it is cut short: {len} bytes, its header says {end}"
            ));
        }
        // Unparsed bytes carried from one read to the next (an entry across two reads).
        let mut carry: Vec<u8> = Vec::new();
        let mut pos = HOTSET_ENTRIES_AT;
        let mut entries = 0u64;
        while pos < end {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(HotEnd::Stopped);
            }
            let from = align_down(pos, align);
            let want = STEP.min((end - from).div_ceil(align) as usize * align as usize);
            let got = file
                .read_at_most(from, &mut buf[..want], align)
                .map_err(|e| e.to_string())?;
            let skip = (pos - from) as usize;
            if got <= skip {
                return Err(format!("it is cut short at {pos}"));
            }
            let upto = got.min((end - from) as usize);
            self.figures.read.fetch_add(got as u64, Ordering::Relaxed);
            carry.extend_from_slice(&buf[skip..upto]);
            pos = from + upto as u64;
            let mut used = 0;
            loop {
                match decode_entry(&carry[used..], STEP) {
                    Ok(Some((entry, n))) => {
                        used += n;
                        entries += 1;
                        if !self.keep_hot_entry(entry) {
                            return Ok(HotEnd::Full);
                        }
                    }
                    Ok(None) => break,
                    Err(kind) => {
                        return Err(format!(
                            "entry {entries} does not verify ({kind}); {} kept before it",
                            entries
                        ));
                    }
                }
            }
            carry.drain(..used);
        }
        if entries != header.entries || !carry.is_empty() {
            return Err(format!(
                "{entries} entries read, its header says {}",
                header.entries
            ));
        }
        Ok(HotEnd::Done)
    }

    /// Keeps `entry` if the index names its record as its key's; false when the cache has no
    /// room for it.
    fn keep_hot_entry(&mut self, entry: HotEntry<'_>) -> bool {
        let kept = entry.kept;
        let Some(key_len) = cached_key_len(kept) else {
            return true;
        };
        let (key, value) = kept[KEY_AT..].split_at(key_len);
        let index = &self.shared.index;
        let named = index
            .candidates(index.hash(key), key_len as u32)
            .as_slice()
            .iter()
            .copied()
            .find(|c| {
                c.segment == entry.file
                    && c.offset == entry.offset
                    && c.value_len == value.len() as u64
            });
        let Some(named) = named.filter(|e| self.reader.cache().holds_whole(e)) else {
            return true;
        };
        let weight = kept_weight(key_len, value.len() as u64);
        if weight > self.room {
            refresh_room(&self.reader, self.evictions, &mut self.room);
            if weight > self.room {
                return false;
            }
        }
        self.reader
            .keep_warmed(&named, cached_seq(kept), key, value);
        self.room = self.room.saturating_sub(weight);
        self.figures.values.fetch_add(1, Ordering::Relaxed);
        self.figures
            .bytes
            .fetch_add(value.len() as u64, Ordering::Relaxed);
        true
    }
}
