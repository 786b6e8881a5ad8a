//! The files of a store directory: log segments (`seg-<id>.pod`) and blob files
//! (`blob-<id>.pod`, one large value each), their names, listing, reading and copying.

use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// The two kinds of store file: log segments (`seg-`) and blob files (`blob-`, one large value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Log,
    Blob,
}

/// The name of store file `id` of `kind`.
pub fn file_name(id: u64, kind: FileKind) -> String {
    match kind {
        FileKind::Log => format!("seg-{id:016x}.pod"),
        FileKind::Blob => format!("blob-{id:016x}.pod"),
    }
}

/// The name of log segment `id`.
pub fn segment_name(id: u64) -> String {
    file_name(id, FileKind::Log)
}

/// The id and kind a store file's name gives; `None` for any other name.
pub fn parse_name(name: &str) -> Option<(u64, FileKind)> {
    let (kind, rest) = match name.strip_prefix("seg-") {
        Some(rest) => (FileKind::Log, rest),
        None => (FileKind::Blob, name.strip_prefix("blob-")?),
    };
    let hex = rest.strip_suffix(".pod")?;
    Some((u64::from_str_radix(hex, 16).ok()?, kind))
}

/// The store files in `dir` (log segments and blob files, empty ones created ahead included),
/// by ascending id.
pub fn store_files(dir: &Path) -> Vec<(u64, FileKind)> {
    let mut files: Vec<(u64, FileKind)> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("list {}: {e}", dir.display()))
        .filter_map(|e| parse_name(e.unwrap().file_name().to_str()?))
        .collect();
    files.sort_unstable_by_key(|f| f.0);
    files
}

/// How many store files of each kind `dir` holds: (log segments, blob files).
pub fn count_files(dir: &Path) -> (usize, usize) {
    let files = store_files(dir);
    let logs = files.iter().filter(|f| f.1 == FileKind::Log).count();
    (logs, files.len() - logs)
}

/// Paths of the store files of `kind` in `dir` that are not empty (blob files are created
/// ahead, empty, before a large value is written to one), by ascending id.
pub fn written_files(dir: &Path, kind: FileKind) -> Vec<PathBuf> {
    store_files(dir)
        .into_iter()
        .filter(|f| f.1 == kind)
        .map(|(id, kind)| dir.join(file_name(id, kind)))
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .collect()
}

/// Ids of the log segment files in `dir`, ascending.
pub fn segment_ids(dir: &Path) -> Vec<u64> {
    store_files(dir)
        .into_iter()
        .filter_map(|(id, kind)| (kind == FileKind::Log).then_some(id))
        .collect()
}

/// Every log segment file of `dir` with its bytes, by ascending id.
pub fn read_segments(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    segment_ids(dir)
        .into_iter()
        .map(|id| (id, std::fs::read(dir.join(segment_name(id))).unwrap()))
        .collect()
}

/// A fresh temporary directory holding exactly these files (name, bytes).
pub fn dir_with<'a>(files: impl IntoIterator<Item = (String, &'a [u8])>) -> TempDir {
    let dir = TempDir::new().unwrap();
    for (name, bytes) in files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// A fresh store directory holding exactly these log segments (id, bytes).
pub fn store_with<'a>(segments: impl IntoIterator<Item = (u64, &'a [u8])>) -> TempDir {
    dir_with(
        segments
            .into_iter()
            .map(|(id, bytes)| (segment_name(id), bytes)),
    )
}

/// A copy of the store files of `dir`, log segments and blob files (what the next opener of
/// `dir` would find), in a fresh temporary directory.
pub fn copy_store(dir: &Path) -> TempDir {
    let copy = TempDir::new().unwrap();
    copy_store_to(dir, copy.path());
    copy
}

/// A copy of every file of store directory `dir` (its catalog and other files too, not its
/// subdirectories), in a new temporary directory.
pub fn copy_dir(dir: &Path) -> TempDir {
    let copy = TempDir::new().unwrap();
    copy_dir_to(dir, copy.path())
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", dir.display(), copy.path().display()));
    copy
}

/// Copies every file of directory `from` (not its subdirectories) into the directory `to`,
/// passing over a file removed meanwhile (a live store's compaction).
pub fn copy_dir_to(from: &Path, to: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(from)? {
        let e = e?;
        if !e.file_type()?.is_file() {
            continue;
        }
        match std::fs::copy(e.path(), to.join(e.file_name())) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            r => {
                r?;
            }
        }
    }
    Ok(())
}

/// Copies the store files of `from` into the directory `to`.
pub fn copy_store_to(from: &Path, to: &Path) {
    for (id, kind) in store_files(from) {
        let name = file_name(id, kind);
        std::fs::copy(from.join(&name), to.join(&name))
            .unwrap_or_else(|e| panic!("copy {}: {e}", from.join(&name).display()));
    }
}

/// Paths of every store file in `dir`, by ascending id.
pub fn store_paths(dir: &Path) -> Vec<PathBuf> {
    store_files(dir)
        .into_iter()
        .map(|(id, kind)| dir.join(file_name(id, kind)))
        .collect()
}
