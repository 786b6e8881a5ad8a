//! The remote side of a store, for tools (`podstore verify --remote`, `podstore stats
//! --remote`): its newest manifest and the objects it names, read without taking the prefix
//! (no epoch claimed, no manifest written: the store writing it is not fenced).

use crate::error::{Error, FileKind, Result};
use crate::format::manifest;
use crate::io::remote::Remote;

/// A manifest of a store's remote tier: the sealed files that make up the store there.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteManifest {
    /// Its object's name: `<prefix>/manifest/<number as 20 digits>`.
    pub object: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its number (the newest is the store).
    pub number: u64,
    /// The epoch of the writer that wrote it.
    pub epoch: u64,
    /// No record in its files has a higher sequence number.
    pub max_seq: u64,
    /// The files it names, by increasing id.
    pub files: Vec<RemoteFile>,
    /// Written by its writer as it closed: the writer writes no manifest after it (a newest
    /// manifest that is not closed is of a writer still running, or one that crashed).
    pub closed: bool,
}

/// A sealed file a [`RemoteManifest`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteFile {
    /// Its id: its local name is `kind.file_name(id)`.
    pub id: u64,
    /// Log segment or blob file.
    pub kind: FileKind,
    /// Its length in bytes.
    pub length: u64,
    /// crc32 of all its bytes.
    pub crc32: u32,
    /// The epoch of the writer that uploaded it.
    pub epoch: u64,
    /// Its object's name: `<prefix>/data/<epoch as 20 digits>/<file name>`.
    pub object: String,
    /// Its bytes are in the manifest itself (checked against its crc32 as the manifest was
    /// read): its object may not exist yet (docs/design-remote.md, "Files in the manifest").
    pub in_manifest: bool,
}

/// The newest manifest under `prefix` in `remote` (the highest number; `None` when there is
/// none), decoded and checked (its trailer's crc32, its number against its name). Names under
/// `manifest/` that are not 20 digits are not manifests and are passed over.
///
/// Errors: [`Error::Remote`] when the remote fails (no retries here beyond the remote's
/// own), [`Error::RemoteCorruption`] when the manifest does not verify.
pub fn newest_manifest(remote: &dyn Remote, prefix: &str) -> Result<Option<RemoteManifest>> {
    let under = format!("{prefix}/manifest/");
    let listed = remote.list(&under).map_err(|source| Error::Remote {
        op: "list manifests",
        object: under.clone(),
        source,
    })?;
    let newest = manifest::newest_listed(listed.iter().map(|o| (o.name.as_str(), o.size)), &under);
    let Some((number, size)) = newest else {
        return Ok(None);
    };
    let object = format!("{under}{number:020}");
    let bytes = remote
        .get_range(&object, 0..size)
        .map_err(|source| Error::Remote {
            op: "read manifest",
            object: object.clone(),
            source,
        })?;
    let corrupt = |kind| Error::RemoteCorruption {
        object: object.clone(),
        kind,
    };
    let m = manifest::decode_numbered(&bytes, number).map_err(corrupt)?;
    let files = m
        .files
        .iter()
        .map(|f| RemoteFile {
            id: f.id,
            kind: f.kind,
            length: f.length,
            crc32: f.crc,
            epoch: f.epoch,
            object: format!("{prefix}/data/{:020}/{}", f.epoch, f.kind.file_name(f.id)),
            in_manifest: m.inline.contains_key(&f.id),
        })
        .collect();
    Ok(Some(RemoteManifest {
        object,
        size,
        number: m.number,
        epoch: m.epoch,
        max_seq: m.max_seq,
        files,
        closed: m.closed,
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::io::remote::MemoryRemote;

    #[test]
    fn the_newest_manifest_names_the_objects_a_store_uploaded() {
        let dir = tempfile::tempdir().unwrap();
        let remote = Arc::new(MemoryRemote::new());
        assert_eq!(newest_manifest(&*remote, "a/b").unwrap(), None);
        let opts = crate::Options::default()
            .segment_size(1 << 20)
            .remote(remote.clone(), "a/b")
            .remote_flush_interval(None);
        let store = crate::Store::open_with(dir.path(), opts).unwrap();
        store.put("small", "v").unwrap();
        store.put("large", vec![3u8; 2 << 20]).unwrap();
        let flushed = store.flush_remote().unwrap();
        let m = newest_manifest(&*remote, "a/b").unwrap().unwrap();
        assert_eq!((m.number, m.epoch), (flushed.manifest, flushed.epoch));
        assert_eq!(m.files.len(), flushed.files);
        // Every object it names is there, of its length (the names are the store's own).
        let listed = remote.list("a/b/data/").unwrap();
        for f in &m.files {
            let found = listed.iter().find(|o| o.name == f.object);
            assert_eq!(found.map(|o| o.size), Some(f.length), "{}", f.object);
            let bytes = remote.get_range(&f.object, 0..f.length).unwrap();
            assert_eq!(crc32fast::hash(&bytes), f.crc32);
        }
        assert!(m.files.iter().any(|f| f.kind == FileKind::Blob));
        // A manifest that does not verify is said to be one.
        let mut bytes = remote.get_range(&m.object, 0..m.size).unwrap();
        bytes[20] ^= 1;
        remote.put(&m.object, &bytes).unwrap();
        let err = newest_manifest(&*remote, "a/b").unwrap_err();
        assert!(
            matches!(&err, Error::RemoteCorruption { object, .. } if *object == m.object),
            "{err}"
        );
    }
}
