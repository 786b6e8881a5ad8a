//! Manifests in the remote: their names, the newest one found, and a new one written with a
//! conditional create, which is what fences an older writer (docs/design-remote.md, "Remote tier").

use super::retry;
use crate::error::{Error, FileKind, Result};
use crate::format::manifest::{self, Manifest};
use crate::io::remote::{PutOutcome, RemoteErrorKind};
use crate::options::RemoteConfig;

/// The prefix of every manifest's name.
fn manifests(prefix: &str) -> String {
    format!("{prefix}/manifest/")
}

/// The name of manifest `number`.
pub(super) fn manifest_name(prefix: &str, number: u64) -> String {
    format!("{}{number:020}", manifests(prefix))
}

/// The name of the object holding file `id` of `kind`, uploaded by the writer of `epoch`.
/// Each writer uploads under its own epoch, so that a fenced writer still uploading never
/// replaces an object a newer writer's manifest names (file ids are only unique within one
/// writer's history).
pub(super) fn data_name(prefix: &str, epoch: u64, kind: FileKind, id: u64) -> String {
    format!("{prefix}/data/{epoch:020}/{}", kind.file_name(id))
}

/// File `(epoch, kind, id)` of an object named by [`data_name`] under `prefix`; `None` for any
/// other name (not an object of ours: never deleted).
pub(super) fn parse_data_name(prefix: &str, name: &str) -> Option<(u64, FileKind, u64)> {
    let rest = name.strip_prefix(prefix)?.strip_prefix("/data/")?;
    let (epoch, file) = rest.split_once('/')?;
    if epoch.len() != manifest::NUMBER_DIGITS || !epoch.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (id, kind) = crate::segment::parse_file_name(file)?;
    Some((epoch.parse().ok()?, kind, id))
}

/// A manifest listed: its number, size and the time the remote dates it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listed {
    pub(super) number: u64,
    pub(super) size: u64,
    pub(super) modified: Option<std::time::SystemTime>,
}

/// Every manifest under the prefix, by increasing number. A name under `manifest/` that is
/// not 20 digits is not a manifest of ours and is passed over.
pub(super) fn list(config: &RemoteConfig) -> Result<Vec<Listed>> {
    let under = manifests(&config.prefix);
    let listed = retry(config, "remote: list manifests", &under, |_| {
        config.remote.list(&under)
    })?;
    let mut out: Vec<Listed> = listed
        .iter()
        .filter_map(|o| {
            let (number, size) = manifest::newest_listed([(o.name.as_str(), o.size)], &under)?;
            Some(Listed {
                number,
                size,
                modified: o.modified,
            })
        })
        .collect();
    out.sort_by_key(|l| l.number);
    Ok(out)
}

/// Manifest `number` of `size` bytes, read and decoded.
pub(super) fn read(config: &RemoteConfig, number: u64, size: u64) -> Result<Manifest> {
    let name = manifest_name(&config.prefix, number);
    let bytes = retry(config, "remote: read manifest", &name, |_| {
        config.remote.get_range(&name, 0..size)
    })?;
    let corrupt = |kind| Error::RemoteCorruption {
        object: name.clone(),
        kind,
    };
    manifest::decode_numbered(&bytes, number).map_err(corrupt)
}

/// The newest manifest under the prefix (the highest number), if any. A name under
/// `manifest/` that is not 20 digits is not a manifest of ours and is passed over.
pub(super) fn newest(config: &RemoteConfig) -> Result<Option<Manifest>> {
    match newest_number(config)? {
        Some((number, size)) => read(config, number, size).map(Some),
        None => Ok(None),
    }
}

/// The number and size of the newest manifest under the prefix, from one listing (no read).
pub(super) fn newest_number(config: &RemoteConfig) -> Result<Option<(u64, u64)>> {
    let under = manifests(&config.prefix);
    let listed = retry(config, "remote: list manifests", &under, |_| {
        config.remote.list(&under)
    })?;
    Ok(manifest::newest_listed(
        listed.iter().map(|o| (o.name.as_str(), o.size)),
        &under,
    ))
}

/// Writes manifest `m` with a conditional create, under its number or, when that number
/// holds a manifest of this writer's own epoch, the next free one (`m.number` is updated).
/// [`Error::Fenced`] when another writer created the number first.
///
/// A number can hold a manifest of our own epoch when an earlier create was carried out but
/// its reply lost (a transient error after the object was written): within one call, the
/// retry finds our exact bytes, and the write succeeded; after a call that gave up, a later
/// flush finds a manifest of our epoch and writer id there (ours: two writers that open the
/// prefix at once take the same epoch, but not the same random id), whose files were all
/// uploaded before it was written: a valid state, passed over.
///
/// A create can land in a hole only where a manifest was deleted, and deletion keeps every
/// writer's claim (its first manifest) unless the writer before it had closed
/// ([`Manifest::is_mark`]). So the number after a writer's last manifest is either free or
/// held for good by the claim of the writer that fenced it (a writer that closed creates
/// nothing more), unless this writer itself may have created that number (a create
/// whose outcome it does not know: `sure` false, or a create that needed a retry) or this is
/// a claim (`sure` false: an opener's read of the newest may be old by the time it creates).
/// Then, once created, the manifests are listed: one numbered above it means the number was
/// free only because a newer writer's deletion left a hole below its own newest manifest,
/// which it never deletes. This writer was fenced long ago: [`Error::Fenced`], as if the
/// number had been taken (docs/design-remote.md, "Fencing").
pub(super) fn write(config: &RemoteConfig, m: &mut Manifest, sure: bool) -> Result<()> {
    let at_once = create(config, m)?;
    if sure && at_once {
        return Ok(());
    }
    if let Some(above) = list(config)?.iter().rev().find(|l| l.number > m.number) {
        return Err(Error::Fenced {
            prefix: config.prefix.clone(),
            manifest: above.number,
        });
    }
    Ok(())
}

/// [`write`]'s conditional create, without the listing after it. Returns whether the
/// manifest was created at the first attempt, under the number it was given: a create whose
/// outcome was never in doubt.
fn create(config: &RemoteConfig, m: &mut Manifest) -> Result<bool> {
    let mut at_once = true;
    loop {
        let name = manifest_name(&config.prefix, m.number);
        let bytes = manifest::encode(m);
        let created = retry(config, "remote: write manifest", &name, |failed| {
            at_once &= failed == 0;
            match config.remote.put_if_absent(&name, &bytes)? {
                PutOutcome::Created => Ok(Some(true)),
                PutOutcome::AlreadyExists => {
                    at_once = false;
                    let found = read_whole(config, &name)?;
                    if found.as_deref() == Some(&bytes[..]) {
                        return Ok(Some(true));
                    }
                    let ours = found
                        .and_then(|b| manifest::decode(&b).ok())
                        .is_some_and(|found| found.epoch == m.epoch && found.writer == m.writer);
                    Ok(if ours { None } else { Some(false) })
                }
            }
        })?;
        match created {
            Some(true) => return Ok(at_once),
            Some(false) => {
                return Err(Error::Fenced {
                    prefix: config.prefix.clone(),
                    manifest: m.number,
                });
            }
            None => m.number += 1,
        }
    }
}

/// The bytes of object `name` (`None` if it is gone). The listing and the read are each
/// retried on their own: a transient failure of either does not send the create again (with
/// one retry budget for all three, a create whose reply was lost failed ten times more often
/// than one alone: each attempt then needs three calls to go through).
fn read_whole(
    config: &RemoteConfig,
    name: &str,
) -> std::result::Result<Option<Vec<u8>>, crate::io::remote::RemoteError> {
    use crate::io::remote::retry_transient;
    let listed = retry_transient(config.attempts, |_| config.remote.list(name))?;
    let Some(size) = listed.into_iter().find(|o| o.name == name).map(|o| o.size) else {
        return Ok(None);
    };
    match retry_transient(config.attempts, |_| config.remote.get_range(name, 0..size)) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == RemoteErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}
