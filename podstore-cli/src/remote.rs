//! The remote tier from the command line: `restore`, `verify --remote`, `stats --remote`.
//!
//! A remote is a URL that `object_store::parse_url_opts` understands, whose path is the
//! store's prefix: `s3://bucket/stores/photos`, `file:///srv/backup/photos`. Settings and
//! credentials come from the environment as `object_store` reads them
//! (`AmazonS3Builder::from_env`): `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//! `AWS_ENDPOINT` and `AWS_ALLOW_HTTP` for a local server, and the rest of its `AWS_*` keys.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use podstore::inspect::{RemoteManifest, newest_manifest};
use podstore::remote::Remote;
use podstore::{Error, Options, Store};
use podstore_remote::ObjectStoreRemote;

use crate::{DAMAGED, Failure, NOT_FOUND, USAGE, size};

/// Bytes read per request when an object's crc32 is checked.
const CHUNK: u64 = 8 << 20;

/// A remote named by a URL: the object store and the prefix under it.
pub(crate) struct RemoteUrl {
    pub(crate) remote: Arc<ObjectStoreRemote>,
    pub(crate) prefix: String,
    pub(crate) url: String,
}

/// The prefix of the environment variables a scheme's builder reads.
fn env_prefix(scheme: &str) -> Option<&'static str> {
    match scheme {
        "s3" | "s3a" => Some("AWS_"),
        "gs" => Some("GOOGLE_"),
        "az" | "adl" | "azure" | "abfs" | "abfss" => Some("AZURE_"),
        _ => None,
    }
}

/// Opens the remote `text` names (see the module's docs).
pub(crate) fn open_remote(text: &str) -> Result<RemoteUrl, Failure> {
    let usage = |why: String| {
        Failure::new(
            USAGE,
            format!(
                "remote {text:?}: {why} (give a URL such as s3://bucket/prefix or \
                 file:///directory/prefix)"
            ),
        )
    };
    let url = url::Url::parse(text).map_err(|e| usage(e.to_string()))?;
    if url.scheme() == "memory" {
        return Err(usage(
            "memory:// lives inside one process: there is nothing in it to read".into(),
        ));
    }
    // Only the variables of the URL's scheme: another's (`ENDPOINT`...) could be read as one
    // of its keys.
    let options = std::env::vars()
        .filter(|(k, _)| env_prefix(url.scheme()).is_some_and(|p| k.starts_with(p)));
    let (store, path) =
        object_store::parse_url_opts(&url, options).map_err(|e| usage(e.to_string()))?;
    let prefix = path.to_string();
    if prefix.is_empty() {
        return Err(usage(
            "it names no prefix (the path after the bucket or directory)".into(),
        ));
    }
    let remote = ObjectStoreRemote::new(Arc::from(store))
        .map_err(|e| Failure::new(crate::OTHER, format!("starting the remote's runtime: {e}")))?;
    Ok(RemoteUrl {
        remote: Arc::new(remote),
        prefix,
        url: text.to_string(),
    })
}

/// The newest manifest, or [`no_store`].
fn manifest(r: &RemoteUrl) -> Result<RemoteManifest, Failure> {
    newest_manifest(&*r.remote, &r.prefix)?.ok_or_else(|| no_store(r))
}

/// No manifest under the prefix: no store there (exit 3).
fn no_store(r: &RemoteUrl) -> Failure {
    Failure::new(
        NOT_FOUND,
        format!(
            "no store at {} (no manifest under {}/manifest/)",
            r.url, r.prefix
        ),
    )
}

/// `podstore restore DIR URL`: the store rebuilt from the remote's newest manifest in a new or
/// empty directory.
pub(crate) fn restore(dir: &Path, url: &str) -> Result<(), Failure> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::new(
                    USAGE,
                    format!(
                        "restore: {} is not empty; nothing was written: restore into a new or \
                         empty directory",
                        dir.display()
                    ),
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(Failure::new(
                USAGE,
                format!("restore: {}: {e}", dir.display()),
            ));
        }
    }
    let r = open_remote(url)?;
    // Checked first: opening an empty directory on a prefix without a manifest would create a
    // new, empty store there.
    let m = manifest(&r)?;
    let opts = Options::default()
        .warm_cache(false)
        .remote(r.remote.clone(), r.prefix.clone())
        .remote_flush_interval(None);
    let store = Store::open_with(dir, opts)?;
    let s = store.stats();
    let claimed = s.remote_manifest;
    store.close()?;
    println!(
        "restored {} from {}: manifest {} ({} files, {}), {} keys",
        dir.display(),
        r.url,
        m.number,
        m.files.len(),
        size(m.files.iter().map(|f| f.length).sum()),
        s.live_keys
    );
    eprintln!(
        "the restored store took the prefix (manifest {claimed}): a store still writing it is \
         fenced (its next remote flush fails); the restored directory is a store of its own"
    );
    Ok(())
}

/// What the check of the remote found.
#[derive(Default)]
struct Found {
    objects: u64,
    bytes: u64,
    missing: u64,
    damaged: u64,
}

/// `podstore verify --remote URL [DIR]`: the newest manifest (it decodes, its checksum holds)
/// and every object it names (present, of its length, of its crc32), one line each; with DIR,
/// the local store as `verify DIR` checks it, and each of its files the manifest names against
/// the object (the same length and crc32).
pub(crate) fn verify_remote(url: &str, dir: Option<&Path>, hex: bool) -> Result<(), Failure> {
    let r = open_remote(url)?;
    let m = match newest_manifest(&*r.remote, &r.prefix) {
        Ok(Some(m)) => m,
        Ok(None) => return Err(no_store(&r)),
        Err(e @ Error::RemoteCorruption { .. }) => {
            println!("damaged: {e}");
            return Err(Failure::new(
                DAMAGED,
                format!("{} is damaged: its newest manifest does not verify", r.url),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    println!(
        "manifest {} (epoch {}, {} files): ok",
        m.object,
        m.epoch,
        m.files.len()
    );
    let found = check_objects(&r, &m)?;
    println!("{} objects, {} checked", found.objects, size(found.bytes));
    let differs = match dir {
        Some(dir) => compare_local(dir, &m)?,
        None => 0,
    };
    let local = dir.map(|dir| crate::verify::verify(dir, hex));
    if found.missing + found.damaged + differs > 0 {
        return Err(Failure::new(
            DAMAGED,
            format!(
                "{} is damaged: {} missing object(s), {} damaged, {} local file(s) differ",
                r.url, found.missing, found.damaged, differs
            ),
        ));
    }
    match local {
        Some(result) => result,
        None => {
            println!("clean");
            Ok(())
        }
    }
}

/// Checks every object `m` names, one line each.
fn check_objects(r: &RemoteUrl, m: &RemoteManifest) -> Result<Found, Failure> {
    let under = format!("{}/data/", r.prefix);
    let listed = r.remote.list(&under).map_err(|source| Error::Remote {
        op: "list objects",
        object: under.clone(),
        source,
    })?;
    let sizes: HashMap<String, u64> = listed.into_iter().map(|o| (o.name, o.size)).collect();
    let mut found = Found::default();
    for f in &m.files {
        found.objects += 1;
        match sizes.get(&f.object) {
            // Its bytes are in the manifest (checked as it was read), its object not uploaded
            // yet: nothing is missing. An object that is there is checked like any other.
            None if f.in_manifest => {
                found.bytes += f.length;
                println!("ok: {} ({}, in the manifest)", f.object, size(f.length));
            }
            None => {
                println!("missing: {}", f.object);
                found.missing += 1;
            }
            Some(&n) if n != f.length => {
                println!(
                    "damaged: {}: {n} bytes, the manifest says {}",
                    f.object, f.length
                );
                found.damaged += 1;
            }
            Some(_) => match crc_of(&*r.remote, &f.object, f.length) {
                Ok(crc) => {
                    found.bytes += f.length;
                    if crc == f.crc32 {
                        println!("ok: {} ({})", f.object, size(f.length));
                    } else {
                        println!(
                            "damaged: {}: crc32 {crc:08x}, the manifest says {:08x}",
                            f.object, f.crc32
                        );
                        found.damaged += 1;
                    }
                }
                Err(e) => {
                    println!("unreadable: {}: {e}", f.object);
                    found.damaged += 1;
                }
            },
        }
    }
    Ok(found)
}

/// The crc32 of object `name`, `len` bytes, read by ranges.
fn crc_of(remote: &dyn Remote, name: &str, len: u64) -> Result<u32, podstore::remote::RemoteError> {
    let mut hasher = crc32fast::Hasher::new();
    let mut at = 0;
    while at < len {
        let end = (at + CHUNK).min(len);
        hasher.update(&remote.get_range(name, at..end)?);
        at = end;
    }
    Ok(hasher.finalize())
}

/// Compares each local file of `dir` that `m` names with its object (length and crc32);
/// the number that differ. A file the directory no longer has (compacted since) is not.
fn compare_local(dir: &Path, m: &RemoteManifest) -> Result<u64, Failure> {
    use std::io::Read;
    let mut differs = 0;
    for f in &m.files {
        let path = dir.join(f.kind.file_name(f.id));
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(Failure::new(
                    crate::OTHER,
                    format!("{}: {e}", path.display()),
                ));
            }
        };
        let mut hasher = crc32fast::Hasher::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut len = 0u64;
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            len += n as u64;
        }
        let crc = hasher.finalize();
        if (len, crc) != (f.length, f.crc32) {
            println!(
                "differs: {} ({len} bytes, crc32 {crc:08x}) is not {} ({} bytes, crc32 {:08x})",
                path.display(),
                f.object,
                f.length,
                f.crc32
            );
            differs += 1;
        }
    }
    Ok(differs)
}

/// The remote side of a store for `stats --remote`: the newest manifest, and how the local
/// directory's sealed files compare with it.
pub(crate) struct RemoteSide {
    pub(crate) url: String,
    pub(crate) manifest: u64,
    pub(crate) epoch: u64,
    /// The manifest was written by its writer as it closed.
    pub(crate) closed: bool,
    pub(crate) files: usize,
    pub(crate) bytes: u64,
    /// Local sealed files the manifest does not name (or names with another length): not in
    /// the remote as of its newest manifest.
    pub(crate) waiting_files: u64,
    pub(crate) waiting_bytes: u64,
    /// Files the manifest names that the directory does not hold (compacted or evicted since,
    /// or a directory that is not the one writing the prefix).
    pub(crate) remote_only_files: u64,
}

/// Reads the remote side of `store` from `url` (nothing is written there).
pub(crate) fn remote_side(store: &Store, url: &str) -> Result<RemoteSide, Failure> {
    let r = open_remote(url)?;
    let m = manifest(&r)?;
    let named: HashMap<(u64, podstore::FileKind), u64> =
        m.files.iter().map(|f| ((f.id, f.kind), f.length)).collect();
    let sealed: HashMap<(u64, podstore::FileKind), u64> = store
        .files()?
        .into_iter()
        .filter(|f| f.sealed)
        .filter_map(|f| Some(((f.id?, f.kind), f.len)))
        .collect();
    let waiting = sealed.iter().filter(|(k, len)| named.get(k) != Some(len));
    let (waiting_files, waiting_bytes) = waiting.fold((0, 0), |(n, b), (_, len)| (n + 1, b + len));
    let remote_only_files = named
        .iter()
        .filter(|(k, len)| sealed.get(k) != Some(len))
        .count() as u64;
    Ok(RemoteSide {
        url: r.url,
        manifest: m.number,
        epoch: m.epoch,
        closed: m.closed,
        files: m.files.len(),
        bytes: m.files.iter().map(|f| f.length).sum(),
        waiting_files,
        waiting_bytes,
        remote_only_files,
    })
}
