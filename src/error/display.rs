//! The messages of [`Error`]: what a person reads. Callers match on variants, never on these.

use std::fmt;

use super::*;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => match path {
                Some(p) => write!(f, "{op} ({}): {source}", p.display()),
                None => write!(f, "{op}: {source}"),
            },
            Error::StorageFull { path } => match path {
                Some(p) => write!(f, "no space left on device ({})", p.display()),
                None => write!(f, "no space left on device"),
            },
            Error::Corruption {
                file,
                segment,
                offset,
                kind,
            } => write!(
                f,
                "corruption in {} at offset {offset}: {kind}",
                file.file_name(*segment)
            ),
            Error::EmptyKey => write!(f, "keys must not be empty"),
            Error::KeyTooLarge { len, max } => {
                write!(f, "key of {len} bytes is longer than the limit of {max}")
            }
            Error::ValueTooLarge { len, max } => {
                write!(f, "value of {len} bytes is longer than the limit of {max}")
            }
            Error::OutOfRange {
                key,
                start,
                end,
                len,
            } => write!(
                f,
                "range {start}..{end} is outside the value of key \"{}\" ({len} bytes)",
                ShowKey(key)
            ),
            Error::Locked { path } => write!(
                f,
                "store {} is already open (locked by another Store)",
                path.display()
            ),
            Error::StoreChanged { path, attempts } => write!(
                f,
                "store {} changed under each of {attempts} attempts to take a read-only view \
                 of it beside its writer; try again",
                path.display()
            ),
            Error::Poisoned => write!(
                f,
                "an earlier write or sync failed; reopen the store to recover"
            ),
            Error::InvalidOptions(what) => write!(f, "invalid options: {what}"),
            Error::NotFound { path } => write!(
                f,
                "no store at {} (nothing created: opened with Options::create(false))",
                path.display()
            ),
            Error::ForeignFiles { path, names, total } => {
                write!(
                    f,
                    "{} holds files that are not a podstore store's: ",
                    path.display()
                )?;
                for (i, name) in names.iter().enumerate() {
                    let sep = if i > 0 { ", " } else { "" };
                    write!(f, "{sep}{}", name.escape_debug())?;
                }
                if *total > names.len() {
                    write!(f, " and {} more", total - names.len())?;
                }
                write!(
                    f,
                    "; nothing was written (use a new or empty directory, or \
                     Options::allow_foreign_files(true) to create the store beside them)"
                )
            }
            Error::DirectIoUnsupported { path } => write!(
                f,
                "the file system of {} refuses O_DIRECT (use IoMode::Auto or Buffered)",
                path.display()
            ),
            Error::ReadOnly => write!(f, "the store was opened read-only"),
            Error::ConditionFailed { key, current } => match current {
                Some(v) => write!(
                    f,
                    "condition failed for key \"{}\": its current version is {v}",
                    ShowKey(key)
                ),
                None => write!(
                    f,
                    "condition failed for key \"{}\": it has no value",
                    ShowKey(key)
                ),
            },
            Error::FileIdOutOfRange { path, id } => match path {
                Some(p) => write!(
                    f,
                    "file {} has id {id:#x}, above the largest the store uses",
                    p.display()
                ),
                None => write!(f, "file ids used up: the next would be {id:#x}"),
            },
            Error::Damaged { dir, files } => {
                write!(f, "store {} is damaged: ", dir.display())?;
                for (i, file) in files.iter().enumerate() {
                    if i > 0 {
                        write!(f, "; ")?;
                    }
                    write!(f, "{file}")?;
                }
                write!(
                    f,
                    " (nothing was changed; RecoveryMode::Salvage opens what is left and reports \
                     what was lost)"
                )
            }
            Error::Remote { op, object, source } => write!(f, "{op} ({object}): {source}"),
            Error::RemoteCorruption { object, kind } => {
                write!(f, "remote object {object} does not verify: {kind}")
            }
            Error::RemoteMismatch {
                path,
                recorded: Some(recorded),
                given,
            } => write!(
                f,
                "store {} belongs to remote prefix {recorded}, not {given}: nothing written",
                path.display()
            ),
            Error::RemoteMismatch {
                path,
                recorded: None,
                given,
            } => write!(
                f,
                "store {} records no remote prefix, and remote prefix {given} is another \
                 store's (its newest manifest names none of this store's files, or not the \
                 objects of its remote-only files): nothing written",
                path.display()
            ),
            Error::Fenced { prefix, manifest } => write!(
                f,
                "another writer took remote prefix {prefix} (it wrote manifest {manifest}); \
                 this store refuses writes until it is reopened"
            ),
            Error::ManifestExpired {
                prefix,
                manifest,
                object,
            } => write!(
                f,
                "manifest {manifest} of remote prefix {prefix} expired (replaced longer ago \
                 than the writer's retention), and {object}, which it names, was deleted: read \
                 the newest manifest again"
            ),
        }
    }
}

/// A key in a message: printable ASCII as it is, other bytes escaped, at most 100 bytes shown.
struct ShowKey<'a>(&'a [u8]);

impl fmt::Display for ShowKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 100;
        let shown = &self.0[..self.0.len().min(SHOWN)];
        write!(f, "{}", shown.escape_ascii())?;
        if self.0.len() > SHOWN {
            write!(f, "... ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}
