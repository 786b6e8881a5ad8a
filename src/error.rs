//! The one error type of the crate.
//!
//! Callers match on variants, never on text: every condition a caller may want to handle
//! (a full disk, a locked store, a damaged file, a bad argument) has a variant of its own.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A `Result` whose error is [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

mod display;

/// What is wrong with bytes read from disk.
///
/// Produced by the pure decoders in the format module; the store wraps it in
/// [`Error::Corruption`] together with the segment and offset it was found at.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// A checksum did not match the bytes it covers.
    ChecksumMismatch {
        /// The checksum computed over the bytes as read.
        got: u32,
        /// The checksum stored on disk.
        expected: u32,
    },
    /// A structure did not start with its magic number.
    BadMagic {
        /// Which structure was expected ("record", "footer trailer", ...).
        structure: &'static str,
        /// The bytes found where the magic should be.
        found: [u8; 4],
    },
    /// A format version this build does not understand.
    UnsupportedVersion {
        /// The version found on disk.
        found: u32,
    },
    /// Fewer bytes were available than the structure needs.
    Truncated {
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// A field holds a value that no valid writer produces.
    InvalidField {
        /// The field's name.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// A frame of a compressed value is not a valid lz4 block of its length.
    Decompression {
        /// Index of the frame within the value.
        frame: u64,
    },
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::ChecksumMismatch { got, expected } => {
                write!(
                    f,
                    "checksum mismatch: computed {got:#010x}, stored {expected:#010x}"
                )
            }
            Corruption::BadMagic { structure, found } => {
                write!(f, "bad magic for {structure}: found {found:02x?}")
            }
            Corruption::UnsupportedVersion { found } => {
                write!(f, "unsupported format version {found}")
            }
            Corruption::Truncated { needed, available } => {
                write!(f, "truncated: needed {needed} bytes, {available} available")
            }
            Corruption::InvalidField { field, value } => {
                write!(f, "invalid value {value} in field {field}")
            }
            Corruption::Decompression { frame } => {
                write!(f, "frame {frame} does not decompress to its length")
            }
        }
    }
}

/// The two kinds of file a store holds. Both have the same format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileKind {
    /// A log segment, `seg-<id>.pod`: records written through the shared write buffer.
    Log,
    /// A blob file, `blob-<id>.pod`: one large (or streamed) value.
    Blob,
}

impl FileKind {
    /// The prefix of its file names.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            FileKind::Log => "seg-",
            FileKind::Blob => "blob-",
        }
    }

    /// The name of file `id` of this kind: `seg-<16 hex digits>.pod` or `blob-<...>.pod`.
    pub fn file_name(self, id: u64) -> String {
        format!("{}{id:016x}.pod", self.prefix())
    }
}

/// Every error podstore returns.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// What the store was doing ("write segment", "open store directory", ...).
        op: &'static str,
        /// The file involved, where there is one.
        path: Option<PathBuf>,
        /// The underlying error.
        source: io::Error,
    },
    /// The disk is full (ENOSPC or EDQUOT). Nothing acknowledged is lost; the write that hit
    /// the limit was not acknowledged. The store refuses further writes until it is reopened.
    StorageFull {
        /// The file being written.
        path: Option<PathBuf>,
    },
    /// Bytes on disk failed verification. They are never returned as data.
    Corruption {
        /// The kind of the file: with `segment`, its name (see [`FileKind::file_name`]).
        file: FileKind,
        /// Id of the file: a log segment (`seg-<id>.pod`) or a blob file (`blob-<id>.pod`),
        /// the id as 16 hex digits. Both kinds share one id space, so the id names one file.
        segment: u64,
        /// Byte offset in that file where the damaged structure starts.
        offset: u64,
        /// What is wrong.
        kind: Corruption,
    },
    /// The key is empty. Keys are 1 to [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) bytes.
    EmptyKey,
    /// The key is longer than [`MAX_KEY_LEN`](crate::MAX_KEY_LEN).
    KeyTooLarge {
        /// The key's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The value is longer than [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN).
    ValueTooLarge {
        /// The value's length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A read asked for bytes the value does not have: [`Store::get_range`] with a range
    /// that starts past the value's end (or ends before it starts, or has a negative bound), or
    /// [`ValueReader::read_exact_at`] past the end.
    ///
    /// [`Store::get_range`]: crate::Store::get_range
    /// [`ValueReader::read_exact_at`]: crate::ValueReader::read_exact_at
    OutOfRange {
        /// The key whose value was read.
        key: Vec<u8>,
        /// First byte asked for.
        start: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The value's length.
        len: u64,
    },
    /// Another `Store` (in this process or another) has the directory open.
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// A store opened [alongside a writer](crate::Options::alongside_writer): the writer
    /// changed the store (removed a file the catalog listed, or was in the middle of a catalog
    /// edit) during each of open's attempts to take a view of it. Nothing is wrong with the
    /// store, and nothing was written: try again.
    StoreChanged {
        /// The store directory.
        path: PathBuf,
        /// How many times open read the catalog.
        attempts: u32,
    },
    /// An earlier write or sync failed, so the state of unsynced data on disk is unknown.
    /// The store refuses writes until it is reopened; reopening recovers from what is on disk.
    Poisoned,
    /// An option is out of its documented range.
    InvalidOptions(&'static str),
    /// No store at this path, opened with [`Options::create`](crate::Options::create) set to
    /// `false`: the directory does not exist, or holds no store files (no `LOCK`, no `CATALOG`,
    /// no `seg-`/`blob-` file). Nothing was created.
    NotFound {
        /// The path given to open.
        path: PathBuf,
    },
    /// The directory holds no store but other files: open refuses to put a store among them
    /// (a mistyped path must not turn a home or data directory into a store). Nothing was
    /// written: no `LOCK`, no `CATALOG`, no segment. Give a new or empty directory, or set
    /// [`Options::allow_foreign_files`](crate::Options::allow_foreign_files) to create the
    /// store beside them.
    ///
    /// A directory holds a store when it has a `CATALOG` or a `seg-`/`blob-` file; the other
    /// names podstore writes (`LOCK`, `CATALOG.tmp`, `quarantine/`, `.podstore-probe`: a store
    /// whose creation stopped after its first files) are not foreign, nor is a file system's
    /// `lost+found`.
    ForeignFiles {
        /// The store directory.
        path: PathBuf,
        /// The first few names that are not podstore's (at most 5, in byte order).
        names: Vec<String>,
        /// How many names in the directory are not podstore's.
        total: usize,
    },
    /// `IoMode::Direct` was asked for but the file system refuses O_DIRECT.
    DirectIoUnsupported {
        /// The store directory.
        path: PathBuf,
    },
    /// A write (put, delete, batch, compaction) on a store opened with
    /// [`Options::read_only`](crate::Options::read_only).
    ReadOnly,
    /// A file id above the largest the store uses (2^63 - 1): a file in the
    /// directory is named with one (it was not made by the store; open refuses it rather than
    /// let the next id overflow), or the store has used up its ids (a write that needs a new
    /// file is refused).
    FileIdOutOfRange {
        /// The file named with the id, when one is (the store directory's entry).
        path: Option<PathBuf>,
        /// The id.
        id: u64,
    },
    /// Files the store's catalog lists are missing or not what it says (cut short, grown,
    /// footer damaged, renamed), or the catalog itself does not verify. Open refuses such a
    /// store rather than serve what is left: a key could read an older value, or a deleted
    /// key come back. Nothing was changed in the files named. Open with
    /// [`RecoveryMode::Salvage`](crate::RecoveryMode::Salvage) to keep every intact record
    /// and have the loss reported in [`RecoveryReport::lost`](crate::RecoveryReport::lost).
    Damaged {
        /// The store directory.
        dir: PathBuf,
        /// Every file found wrong.
        files: Vec<DamagedFile>,
    },
    /// A conditional write's condition did not hold ([`Store::put_if`], [`Store::delete_if`],
    /// [`ValueWriter::finish_if`], or a conditional operation of a [`Batch`]): nothing was
    /// written (for a batch: none of its operations).
    ///
    /// [`Store::put_if`]: crate::Store::put_if
    /// [`Store::delete_if`]: crate::Store::delete_if
    /// [`ValueWriter::finish_if`]: crate::ValueWriter::finish_if
    /// [`Batch`]: crate::Batch
    ConditionFailed {
        /// The key whose condition failed (for a batch, the first such key).
        key: Vec<u8>,
        /// The key's version when the condition was checked; `None` if it had no value.
        current: Option<crate::Version>,
    },
    /// A call to the store's [remote](crate::Options::remote) failed (after its retries, for
    /// a transient failure): nothing acknowledged is lost, the remote is behind.
    Remote {
        /// What the store was doing ("upload", "write manifest", "restore: read", ...).
        op: &'static str,
        /// The object's name in the remote.
        object: String,
        /// The remote's error.
        source: crate::remote::RemoteError,
    },
    /// An object read from the remote does not verify (a manifest that does not decode, a
    /// file whose size or crc32 is not the one its manifest gives, or the bytes of a value read
    /// from a file whose data is in the remote only, found damaged by the record's checksums):
    /// it is never used as data.
    RemoteCorruption {
        /// The object's name in the remote.
        object: String,
        /// What is wrong.
        kind: Corruption,
    },
    /// The store directory does not belong to the remote prefix it was opened with
    /// ([`Options::remote`](crate::Options::remote)): it records another (`REMOTE-PREFIX`,
    /// written when it first opened with a remote), or, recording none (a store made before
    /// the record, or without a remote), the prefix holds another store's manifest (none of
    /// the files it names is this directory's), or does not hold the objects of this store's
    /// remote-only files. Opening it there would publish its files over the other store's, and
    /// in time delete that store's objects. Nothing was written, locally (but the `LOCK` file
    /// any open makes where there is none) or in the remote.
    RemoteMismatch {
        /// The store directory.
        path: PathBuf,
        /// The prefix it records; `None`: it records none.
        recorded: Option<String>,
        /// The prefix given.
        given: String,
    },
    /// Another writer took the store's remote prefix (it opened the prefix after this store
    /// did and wrote manifest `manifest` first): this store no longer writes its manifests, and
    /// refuses writes from then on (its local files are intact; reopen it to take the prefix
    /// back, which fences the other writer in turn).
    Fenced {
        /// The remote prefix.
        prefix: String,
        /// The number of the manifest another writer wrote.
        manifest: u64,
    },
    /// A manifest being read from (a restore's) expired, and files it names were deleted
    /// from the remote: a newer manifest replaced it longer ago than the writer's
    /// [`remote_retention`](crate::Options::remote_retention). The manifest itself is deleted
    /// too, or kept as a mark (a writer's claim, which stays as what fences the writer
    /// before it: docs/design-remote.md, "Fencing"). Nothing was read from the files
    /// gone; read the newest manifest again (a restore that failed so leaves nothing behind:
    /// open again).
    ManifestExpired {
        /// The remote prefix.
        prefix: String,
        /// The number of the manifest expired.
        manifest: u64,
        /// The object it names that was found gone.
        object: String,
    },
}

/// A file of a store that is missing or not what the store's catalog says
/// ([`Error::Damaged`], [`RecoveryReport::lost`](crate::RecoveryReport::lost),
/// [`VerifyReport::files`](crate::VerifyReport::files)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DamagedFile {
    /// Its name in the store directory (`seg-<id>.pod`, `blob-<id>.pod` or `CATALOG`).
    pub name: String,
    /// What is wrong.
    pub problem: FileProblem,
}

/// What is wrong with a [`DamagedFile`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileProblem {
    /// The catalog lists the file and the directory does not have it: every record in it is
    /// lost (a deleted key whose tombstone was in it can come back).
    Missing {
        /// Its length when sealed; `None` for a file that was still being written.
        sealed_len: Option<u64>,
    },
    /// A sealed file whose length is not the one it was sealed with: cut short (its footer,
    /// and the records past the cut, are lost) or grown.
    LengthChanged {
        /// The length it was sealed with.
        expected: u64,
        /// Its length now.
        found: u64,
    },
    /// A sealed file whose footer no longer verifies: the record list of the file is lost
    /// (salvage recovers the records by scanning).
    FooterDamaged,
    /// A file whose header names another file id: renamed, or swapped with another, outside
    /// the store. Its records cannot be read under this name.
    Misnamed {
        /// The id its header gives.
        header_id: u64,
    },
    /// The catalog itself does not verify at `offset`: which files the store has is unknown
    /// (salvage rebuilds it from the directory).
    CatalogCorrupt {
        /// Byte offset in `CATALOG`.
        offset: u64,
        /// What is wrong.
        kind: Corruption,
    },
    /// `VERSIONS`, the reservation of version numbers, has no slot that verifies: the numbers
    /// given before are unknown, so a version could be given again (salvage replaces the file
    /// and starts above every number in a record, and at least at the clock).
    VersionsCorrupt {
        /// What is wrong (with its first slot).
        kind: Corruption,
    },
}

impl fmt::Display for DamagedFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.problem {
            FileProblem::Missing {
                sealed_len: Some(len),
            } => write!(f, "{name} is missing (sealed, {len} bytes)"),
            FileProblem::Missing { sealed_len: None } => {
                write!(f, "{name} is missing (it was being written)")
            }
            FileProblem::LengthChanged { expected, found } => write!(
                f,
                "{name} is {found} bytes long, but was sealed at {expected} bytes"
            ),
            FileProblem::FooterDamaged => write!(f, "{name}: its footer does not verify"),
            FileProblem::Misnamed { header_id } => write!(
                f,
                "{name} holds the bytes of file id {header_id:016x} (renamed or swapped)"
            ),
            FileProblem::CatalogCorrupt { offset, kind } => {
                write!(f, "{name} does not verify at offset {offset}: {kind}")
            }
            FileProblem::VersionsCorrupt { kind } => {
                write!(
                    f,
                    "{name}: no reservation of version numbers verifies: {kind}"
                )
            }
        }
    }
}

impl Error {
    /// Wraps an I/O error, turning ENOSPC/EDQUOT into [`Error::StorageFull`].
    pub(crate) fn io(op: &'static str, path: Option<PathBuf>, source: io::Error) -> Error {
        // A read of a file whose data is in the remote only, which the remote failed.
        let source = match source.downcast::<crate::io::remote::RemoteReadError>() {
            Ok(e) => {
                return Error::Remote {
                    op: "read a file whose data is in the remote",
                    object: e.object,
                    source: e.source,
                };
            }
            Err(source) => source,
        };
        match source.raw_os_error() {
            Some(code) if code == libc_enospc() || code == libc_edquot() => {
                Error::StorageFull { path }
            }
            _ => Error::Io { op, path, source },
        }
    }

    /// A [`Error::Corruption`] found where the file's kind was not known, said to be in a file
    /// of `kind`; any other error as it is.
    pub(crate) fn in_file(self, kind: FileKind) -> Error {
        match self {
            Error::Corruption {
                segment,
                offset,
                kind: what,
                ..
            } => Error::Corruption {
                file: kind,
                segment,
                offset,
                kind: what,
            },
            other => other,
        }
    }

    /// True for [`Error::Corruption`] and [`Error::RemoteCorruption`].
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::RemoteCorruption { .. }
        )
    }
}

fn libc_enospc() -> i32 {
    rustix::io::Errno::NOSPC.raw_os_error()
}

fn libc_edquot() -> i32 {
    rustix::io::Errno::DQUOT.raw_os_error()
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Remote { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl Error {
    /// The [`io::ErrorKind`] closest to this error, as [`From<Error> for io::Error`] maps it.
    fn io_kind(&self) -> io::ErrorKind {
        use io::ErrorKind as K;
        match self {
            Error::Io { source, .. } => source.kind(),
            Error::StorageFull { .. } => K::StorageFull,
            Error::Corruption { .. } | Error::Damaged { .. } | Error::RemoteCorruption { .. } => {
                K::InvalidData
            }
            Error::Remote { source, .. } => source.io_kind(),
            Error::EmptyKey
            | Error::KeyTooLarge { .. }
            | Error::ValueTooLarge { .. }
            | Error::OutOfRange { .. }
            | Error::InvalidOptions(_)
            | Error::RemoteMismatch { .. } => K::InvalidInput,
            // Not `WouldBlock`: code that reads it as "not ready, retry at once" would spin
            // while another process holds the store, perhaps for as long as it runs.
            Error::Locked { .. } | Error::StoreChanged { .. } => K::ResourceBusy,
            Error::NotFound { .. } | Error::ManifestExpired { .. } => K::NotFound,
            // The path is taken by something else, as `File::create_new` on an existing file.
            Error::ForeignFiles { .. } => K::AlreadyExists,
            Error::DirectIoUnsupported { .. } => K::Unsupported,
            Error::ReadOnly => K::ReadOnlyFilesystem,
            // A failed precondition (HTTP's 412): no io kind says it; the variant does.
            Error::ConditionFailed { .. } => K::Other,
            // A file in the directory the store did not name; else the ids are used up.
            Error::FileIdOutOfRange { path: Some(_), .. } => K::InvalidData,
            Error::FileIdOutOfRange { path: None, .. } | Error::Poisoned | Error::Fenced { .. } => {
                K::Other
            }
        }
    }
}

/// An [`Error`] as an [`io::Error`], for `?` in functions that return [`io::Result`]: its kind
/// is the closest [`io::ErrorKind`], and the podstore error is kept inside, as the io error's
/// source, so that its variant can still be matched:
///
/// | podstore error | io kind |
/// |---|---|
/// | [`Error::Io`] | the kind of the io error it wraps |
/// | [`Error::NotFound`], [`Error::ManifestExpired`] | `NotFound` |
/// | [`Error::EmptyKey`], [`Error::KeyTooLarge`], [`Error::ValueTooLarge`], [`Error::OutOfRange`], [`Error::InvalidOptions`], [`Error::RemoteMismatch`] | `InvalidInput` |
/// | [`Error::StorageFull`] | `StorageFull` |
/// | [`Error::Corruption`], [`Error::Damaged`], [`Error::RemoteCorruption`], [`Error::FileIdOutOfRange`] naming a file | `InvalidData` |
/// | [`Error::Remote`] | `NotFound` for a missing object, `TimedOut` for a transient failure, else `Other` |
/// | [`Error::Locked`], [`Error::StoreChanged`] | `ResourceBusy` (not `WouldBlock`, which callers retry at once) |
/// | [`Error::ForeignFiles`] | `AlreadyExists` |
/// | [`Error::DirectIoUnsupported`] | `Unsupported` |
/// | [`Error::ReadOnly`] | `ReadOnlyFilesystem` |
/// | [`Error::ConditionFailed`], [`Error::Poisoned`], [`Error::Fenced`], file ids used up | `Other` |
///
/// ```
/// use std::io;
/// fn first_bytes(store: &podstore::Store) -> io::Result<Vec<u8>> {
///     Ok(store.get_range("missing", 0..4)?.unwrap_or_default())
/// }
/// let dir = tempfile::tempdir()?;
/// let store = podstore::Store::open(dir.path())?;
/// store.put("k", "value")?;
/// let err = io::Error::from(store.get_range("k", 9..12).unwrap_err());
/// assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
/// // The podstore error is inside.
/// let inner = err.into_inner().unwrap().downcast::<podstore::Error>().unwrap();
/// assert!(matches!(*inner, podstore::Error::OutOfRange { .. }));
/// assert!(first_bytes(&store)?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::new(e.io_kind(), e)
    }
}

#[cfg(test)]
mod tests;
