//! File-system steps the snapshot code makes durable one by one.

use std::fs::{self, File};
use std::io;
use std::path::Path;

/// fsyncs a directory, so that the names created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `dir` and any missing parents, each made durable: the parent of every directory
/// created is synced, so that a power loss cannot take away a directory whose contents were
/// synced (a state machine's `sm/`, whose `CURRENT` a later sync made durable, lost with its
/// name in `<node>/`). Nothing is synced when `dir` exists.
pub(crate) fn create_dirs(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dirs(parent)?;
    }
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        other => other?,
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    sync_dir(parent)
}

/// Whether podstore never changes a file of this name once it is sealed: log segments and blob
/// files. A store's other files (its `CATALOG`, appended to in place) are copied, never shared.
fn immutable_store_file(name: &str) -> bool {
    (name.starts_with("seg-") || name.starts_with("blob-")) && name.ends_with(".pod")
}

/// Fills the new directory `dest` with the podstore store of `src`, a sealed checkpoint (every
/// segment in it sealed, so that no store ever writes to them again): segments and blob files
/// hard-linked (copied where `src` is on another file system), every other file copied; the
/// copies and `dest` synced. `src` is only read: it may be another node's. `after_file` runs after
/// each file (a test stops or kills the process there, with `dest` partly filled).
///
/// A hard link needs no sync of its file: its contents were made durable where `src` was
/// built, and the link (a directory entry and the inode's link count, one journaled metadata
/// update) is made durable by the sync of `dest`.
pub(crate) fn link_store(
    src: &Path,
    dest: &Path,
    after_file: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    fs::create_dir(dest)?;
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue; // quarantine/: never part of a snapshot
        }
        let name = entry.file_name();
        let Some(text) = name.to_str() else { continue };
        if text == "LOCK" {
            continue;
        }
        let to = dest.join(&name);
        if !(immutable_store_file(text) && fs::hard_link(entry.path(), &to).is_ok()) {
            fs::copy(entry.path(), &to)?;
            File::open(&to)?.sync_all()?;
        }
        after_file()?;
    }
    sync_dir(dest)
}

/// Writes `bytes` to `path` durably: a temporary sibling written and synced, renamed over
/// `path`, the directory synced. A crash leaves the old file or the new one, whole.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_file_with(path, bytes, &mut || Ok(()))
}

/// The temporary sibling [`replace_file`] writes `path` into first.
pub(crate) fn temporary_for(path: &Path) -> io::Result<std::path::PathBuf> {
    let dir = path.parent().ok_or_else(|| io::Error::other("no parent"))?;
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    Ok(dir.join(tmp_name))
}

/// [`replace_file`], running `written` once the temporary file is written and synced, before
/// the rename (a test stops or kills the process there).
pub(crate) fn replace_file_with(
    path: &Path,
    bytes: &[u8],
    written: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("no parent"))?;
    let tmp = temporary_for(path)?;
    {
        let mut f = File::create(&tmp)?;
        io::Write::write_all(&mut f, bytes)?;
        f.sync_all()?;
    }
    written()?;
    fs::rename(&tmp, path)?;
    sync_dir(dir)
}

/// Removes a directory of ours (a snapshot or a state machine generation), if it exists.
pub(crate) fn remove_dir(dir: &Path) -> io::Result<()> {
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}
