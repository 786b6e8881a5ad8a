//! Manifests in the remote: their names, the newest one found, and a new one written with a
//! conditional create, which is what fences an older writer (docs/design.md, "Remote tier").

use super::retry;
use crate::error::{Error, FileKind, Result};
use crate::format::manifest::{self, Manifest};
use crate::io::remote::{PutOutcome, RemoteErrorKind};
use crate::options::RemoteConfig;

/// Digits of a manifest number in its object's name: every `u64`, so that names sort as
/// numbers do.
const NUMBER_DIGITS: usize = 20;

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

/// The newest manifest under the prefix (the highest number), if any. A name under
/// `manifest/` that is not 20 digits is not a manifest of ours and is passed over.
pub(super) fn newest(config: &RemoteConfig) -> Result<Option<Manifest>> {
    let under = manifests(&config.prefix);
    let listed = retry(config, "remote: list manifests", &under, |_| {
        config.remote.list(&under)
    })?;
    let newest = listed
        .iter()
        .filter_map(|o| {
            let digits = o.name.strip_prefix(&under)?;
            let ours = digits.len() == NUMBER_DIGITS && digits.bytes().all(|b| b.is_ascii_digit());
            ours.then(|| Some((digits.parse::<u64>().ok()?, o.size)))?
        })
        .max();
    let Some((number, size)) = newest else {
        return Ok(None);
    };
    let name = manifest_name(&config.prefix, number);
    let bytes = retry(config, "remote: read manifest", &name, |_| {
        config.remote.get_range(&name, 0..size)
    })?;
    let corrupt = |kind| Error::RemoteCorruption {
        object: name.clone(),
        kind,
    };
    let m = manifest::decode(&bytes).map_err(corrupt)?;
    if m.number != number {
        return Err(corrupt(crate::error::Corruption::InvalidField {
            field: "manifest number (not the one its name gives)",
            value: m.number,
        }));
    }
    Ok(Some(m))
}

/// Writes manifest `m` (its number not taken yet) with a conditional create.
/// [`Error::Fenced`] when another writer created that number first.
///
/// A create whose reply was lost (a transient error after the object was written) is retried
/// and then finds the object: it is ours if it holds exactly our bytes (each manifest carries
/// its writer's epoch, so another writer's bytes differ), and the write succeeded.
pub(super) fn write(config: &RemoteConfig, m: &Manifest) -> Result<()> {
    let name = manifest_name(&config.prefix, m.number);
    let bytes = manifest::encode(m);
    let outcome = retry(config, "remote: write manifest", &name, |failed| {
        match config.remote.put_if_absent(&name, &bytes)? {
            PutOutcome::AlreadyExists if failed > 0 => {
                let len = bytes.len() as u64;
                match config.remote.get_range(&name, 0..len) {
                    Ok(found) if found == bytes => Ok(PutOutcome::Created),
                    Ok(_) => Ok(PutOutcome::AlreadyExists),
                    // Shorter than ours: another writer's.
                    Err(e) if e.kind() == RemoteErrorKind::Other => Ok(PutOutcome::AlreadyExists),
                    Err(e) => Err(e),
                }
            }
            outcome => Ok(outcome),
        }
    })?;
    match outcome {
        PutOutcome::Created => Ok(()),
        PutOutcome::AlreadyExists => Err(Error::Fenced {
            prefix: config.prefix.clone(),
            manifest: m.number,
        }),
    }
}
