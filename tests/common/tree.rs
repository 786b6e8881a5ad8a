//! A snapshot of a directory tree (every path under it; each file's bytes and modification
//! time), to prove that code given a directory left what was already there untouched and
//! created nothing where it should not.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// What a path under the snapshot's root is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File {
        bytes: Vec<u8>,
        modified: SystemTime,
    },
    /// A symlink, socket, ...: compared by existence only.
    Other,
}

/// Every path under a root (relative to it, the root itself excluded) and what it is.
pub type Tree = BTreeMap<PathBuf, Entry>;

/// The tree under `root`; empty if `root` does not exist.
pub fn snapshot(root: &Path) -> Tree {
    let mut tree = Tree::new();
    add(root, root, &mut tree);
    tree
}

fn add(root: &Path, dir: &Path, tree: &mut Tree) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let rel = path.strip_prefix(root).unwrap().to_path_buf();
        if meta.is_dir() {
            tree.insert(rel, Entry::Dir);
            add(root, &path, tree);
        } else if meta.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            let modified = meta.modified().unwrap();
            tree.insert(rel, Entry::File { bytes, modified });
        } else {
            tree.insert(rel, Entry::Other);
        }
    }
}

/// The paths of `before` that are gone or changed in `after`.
pub fn changed(before: &Tree, after: &Tree) -> Vec<PathBuf> {
    before
        .iter()
        .filter(|&(path, entry)| after.get(path) != Some(entry))
        .map(|(path, _)| path.clone())
        .collect()
}

/// The paths of `after` that were not in `before`.
pub fn added(before: &Tree, after: &Tree) -> Vec<PathBuf> {
    after
        .keys()
        .filter(|path| !before.contains_key(*path))
        .cloned()
        .collect()
}
