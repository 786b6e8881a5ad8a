//! File names: the kind and id in a segment or blob file name, listing a store directory, and
//! allocating ids.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::file::{IoProfile, list_dir};

/// The two kinds of segment file. Both have the same format; they differ in how they are
/// written, and so in what an unsealed one means at open: `Log` (`seg-<id>.pod`, written through
/// the shared double buffer) and `Blob` (`blob-<id>.pod`, one value, written by its putting
/// thread and sealed before the put is acknowledged; one without a valid footer was never
/// acknowledged).
pub use crate::error::FileKind as SegmentKind;

/// File name of segment `id`.
pub fn file_name(id: u64, kind: SegmentKind) -> String {
    kind.file_name(id)
}

/// The kind of the segment file at `path` (a log segment unless its name says blob).
pub(crate) fn kind_of(path: &Path) -> SegmentKind {
    path.file_name()
        .and_then(|n| n.to_str())
        .and_then(parse_file_name)
        .map_or(SegmentKind::Log, |(_, kind)| kind)
}

/// The largest file id the store uses (2^40 − 1: the index keeps ids in 40 bits). Ids are
/// handed out one by one from 1, so a store never gets near it (a trillion files); a name above
/// it in the directory was not made by the store, and is refused at open
/// ([`Error::FileIdOutOfRange`]) rather than let the next id overflow or wrap.
pub const MAX_FILE_ID: u64 = (1 << 40) - 1;

/// The id and kind in a segment file name: exactly what [`file_name`] writes (16 lowercase hex
/// digits), so that the name parsed is the name opened.
pub fn parse_file_name(name: &str) -> Option<(u64, SegmentKind)> {
    [SegmentKind::Log, SegmentKind::Blob]
        .into_iter()
        .find_map(|kind| {
            let hex = name.strip_prefix(kind.prefix())?.strip_suffix(".pod")?;
            let digits = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
            if hex.len() != 16 || !hex.bytes().all(|b| digits(&b)) {
                return None;
            }
            u64::from_str_radix(hex, 16).ok().map(|id| (id, kind))
        })
}

/// Whether a name in a directory marks a store: its `CATALOG`, or a segment or blob file.
/// A store that has ever held data has one (a store of a version without a catalog has its
/// files), so a directory with one is a store whatever else it holds.
pub fn marks_store(name: &str) -> bool {
    name == super::CATALOG_NAME || parse_file_name(name).is_some()
}

/// Whether a name in a directory is not one podstore writes: neither a name that marks a store
/// nor one a store's creation writes before those (`LOCK`, `CATALOG.tmp`, a left-over
/// `.podstore-probe`, `REMOTE-PREFIX`), open makes (`quarantine/`) or close writes (`HOTSET`). Open refuses a directory without a store
/// that holds one ([`Error::ForeignFiles`]). A file system's `lost+found` is not foreign: the
/// root of a volume given to a store holds it from its creation.
pub fn is_foreign(name: &str) -> bool {
    !marks_store(name)
        && ![
            crate::io::file::LOCK_NAME,
            super::catalog::CATALOG_TMP,
            crate::format::versions::VERSIONS_NAME,
            crate::format::versions::VERSIONS_TMP,
            crate::format::hotset::HOTSET_NAME,
            crate::format::hotset::HOTSET_TMP,
            crate::io::storage::PROBE_NAME,
            crate::format::prefix_record::PREFIX_RECORD_NAME,
            crate::format::prefix_record::PREFIX_RECORD_TMP,
            super::QUARANTINE_DIR,
            "lost+found",
        ]
        .contains(&name)
}

/// The segment files in `dir`, by ascending id. A name whose id is above [`MAX_FILE_ID`] is
/// refused with [`Error::FileIdOutOfRange`].
pub fn list(profile: &IoProfile, dir: &Path) -> Result<Vec<(u64, SegmentKind)>> {
    let mut ids = Vec::new();
    for name in list_dir(profile, dir)? {
        if let Some((id, kind)) = parse_file_name(&name) {
            if id > MAX_FILE_ID {
                return Err(Error::FileIdOutOfRange {
                    path: Some(dir.join(&name)),
                    id,
                });
            }
            ids.push((id, kind));
        }
    }
    ids.sort_unstable_by_key(|&(id, _)| id);
    Ok(ids)
}

/// `count` file ids from `next`, and the id after them, or [`Error::FileIdOutOfRange`] when
/// they would go past [`MAX_FILE_ID`].
pub fn allocate_ids(next: u64, count: u64) -> Result<(std::ops::Range<u64>, u64)> {
    match next.checked_add(count) {
        Some(end) if end <= MAX_FILE_ID.saturating_add(1) => Ok((next..end, end)),
        _ => Err(Error::FileIdOutOfRange {
            path: None,
            id: next,
        }),
    }
}

/// Path of segment `id` in `dir`.
pub fn path(dir: &Path, id: u64, kind: SegmentKind) -> PathBuf {
    dir.join(file_name(id, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_allocated_with_checked_arithmetic() {
        assert_eq!(allocate_ids(1, 8).unwrap(), (1..9, 9));
        assert_eq!(
            allocate_ids(MAX_FILE_ID, 1).unwrap(),
            (MAX_FILE_ID..MAX_FILE_ID + 1, MAX_FILE_ID + 1)
        );
        for (next, count) in [
            (MAX_FILE_ID, 2),
            (MAX_FILE_ID + 1, 1),
            (u64::MAX, 1),
            (3, u64::MAX),
        ] {
            assert!(
                matches!(allocate_ids(next, count), Err(Error::FileIdOutOfRange { path: None, id }) if id == next),
                "{next} + {count}"
            );
        }
    }

    #[test]
    fn a_store_is_told_by_its_catalog_or_files_and_its_own_names_are_not_foreign() {
        for name in [
            "CATALOG",
            "seg-0000000000000001.pod",
            "blob-00000000000000ff.pod",
        ] {
            assert!(marks_store(name) && !is_foreign(name), "{name}");
        }
        for name in [
            "LOCK",
            "CATALOG.tmp",
            ".podstore-probe",
            "quarantine",
            "lost+found",
        ] {
            assert!(!marks_store(name) && !is_foreign(name), "{name}");
        }
        for name in [
            "cat.jpg",
            "LOCK.bak",
            "catalog",
            "seg-1.pod",
            "CURRENT",
            ".DS_Store",
        ] {
            assert!(!marks_store(name) && is_foreign(name), "{name}");
        }
    }

    #[test]
    fn only_the_names_the_store_writes_parse() {
        for id in [0, 1, 0xabc, MAX_FILE_ID, u64::MAX] {
            for kind in [SegmentKind::Log, SegmentKind::Blob] {
                assert_eq!(parse_file_name(&file_name(id, kind)), Some((id, kind)));
            }
        }
        for name in [
            "seg-000000000000000A.pod",
            "seg-+000000000000001.pod",
            "seg-1.pod",
            "blob-.pod",
        ] {
            assert_eq!(parse_file_name(name), None, "{name}");
        }
    }
}
