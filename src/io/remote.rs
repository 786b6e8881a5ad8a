//! The seam to a remote tier (an object store): the [`Remote`] trait the store calls, its error,
//! and the bytes of an object being put ([`ObjectBody`]). Synchronous: an implementation on an
//! async client (the `podstore-remote` crate's, on `object_store`) owns the runtime it needs,
//! so that the library keeps no async dependency (docs/design-remote.md, "Remote tier").

use std::fmt;
use std::io;
use std::ops::Range;

#[cfg(any(test, feature = "testing"))]
mod faulty;
mod file;
#[cfg(any(test, feature = "testing"))]
mod memory;

#[cfg(any(test, feature = "testing"))]
pub use faulty::{Faults, FaultyRemote};
#[cfg(any(test, feature = "testing"))]
pub use memory::MemoryRemote;

pub(crate) use file::{RemoteFile, RemoteReadError, RemoteReads, RemoteSource, evicted_span};

/// An object store under the store's files: sealed files are put whole, manifests are created
/// only if absent, restore reads ranges. Object names are `/`-separated paths (no leading
/// `/`); the store gives every name under its prefix.
///
/// Every method may fail with a [`RemoteError`]; the store retries
/// [`RemoteErrorKind::Transient`] failures with backoff and gives up on the others.
pub trait Remote: Send + Sync + fmt::Debug {
    /// Writes object `name` with the bytes of `body`, replacing any object of that name. The
    /// object must be whole once this returns `Ok` (a multipart upload completed), and absent
    /// or whole after a failure. `body` can be read in any order and more than once (a retry).
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError>;

    /// Creates object `name` with `bytes` only if no object of that name exists, atomically
    /// (S3's `If-None-Match: *`, object_store's `PutMode::Create`): of two writers that create
    /// the same name, exactly one gets [`PutOutcome::Created`].
    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError>;

    /// Bytes `range` of object `name` (a range past its end is an error).
    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError>;

    /// Every object whose name starts with `prefix`, in any order, with its size and, where
    /// the remote keeps one, the time it was written ([`ObjectInfo::modified`]: by the remote's
    /// clock; the store dates manifests by it to keep them for
    /// [`Options::remote_retention`](crate::Options::remote_retention)).
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError>;

    /// Removes object `name` (no error if it does not exist).
    fn delete(&self, name: &str) -> Result<(), RemoteError>;
}

/// What [`Remote::put_if_absent`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object did not exist and now holds the bytes given.
    Created,
    /// An object of that name exists already; nothing was written.
    AlreadyExists,
}

/// An object [`Remote::list`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ObjectInfo {
    /// Its full name.
    pub name: String,
    /// Its length in bytes.
    pub size: u64,
    /// When it was written, by the remote's clock (S3's `LastModified`), if the remote says:
    /// the store dates its manifests by it (docs/design-remote.md, "Deletion"). An object
    /// without one is never taken to be old enough to delete.
    pub modified: Option<std::time::SystemTime>,
}

impl ObjectInfo {
    /// An object `name` of `size` bytes, of unknown age.
    pub fn new(name: impl Into<String>, size: u64) -> Self {
        ObjectInfo {
            name: name.into(),
            size,
            modified: None,
        }
    }

    /// The same object, written at `modified` (by the remote's clock).
    pub fn with_modified(mut self, modified: std::time::SystemTime) -> Self {
        self.modified = Some(modified);
        self
    }
}

/// The bytes of an object to put: its length and positional reads, so that an implementation
/// may upload a large file in parts (read from any offset, from several threads) and read a
/// part again to retry it, without the whole file in memory. The store gives its sealed files
/// this way (read through their open handle: a file compaction removes meanwhile stays
/// readable).
pub trait ObjectBody: Send + Sync {
    /// Its length in bytes.
    fn len(&self) -> u64;

    /// Whether it has no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Fills `buf` with the bytes at `offset..offset + buf.len()` (within [`ObjectBody::len`]).
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;

    /// The whole body in one buffer (for objects an implementation puts in one request).
    fn to_vec(&self) -> io::Result<Vec<u8>> {
        let len = usize::try_from(self.len())
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "body too large"))?;
        let mut buf = vec![0u8; len];
        self.read_exact_at(0, &mut buf)?;
        Ok(buf)
    }
}

impl ObjectBody for [u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let src = start
            .checked_add(buf.len())
            .and_then(|end| self.get(start..end))
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "past the body's end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

impl ObjectBody for Vec<u8> {
    fn len(&self) -> u64 {
        self.as_slice().len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.as_slice().read_exact_at(offset, buf)
    }
}

/// What kind of failure a [`RemoteError`] is: what the store does about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteErrorKind {
    /// The object does not exist.
    NotFound,
    /// Worth retrying: throttling (HTTP 429, 503), a timeout, a connection reset. The store
    /// retries with backoff.
    Transient,
    /// Anything else (refused credentials, a bad request): not retried.
    Other,
}

/// A failure of a [`Remote`] call.
#[derive(Debug)]
pub struct RemoteError {
    kind: RemoteErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl RemoteError {
    /// An error of `kind`, described by `message`.
    pub fn new(kind: RemoteErrorKind, message: impl Into<String>) -> Self {
        RemoteError {
            kind,
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `source` (kept for [`std::error::Error::source`]).
    pub fn with_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> RemoteErrorKind {
        self.kind
    }

    /// Whether the store retries it.
    pub fn is_transient(&self) -> bool {
        self.kind == RemoteErrorKind::Transient
    }

    /// The closest [`io::ErrorKind`].
    pub(crate) fn io_kind(&self) -> io::ErrorKind {
        match self.kind {
            RemoteErrorKind::NotFound => io::ErrorKind::NotFound,
            RemoteErrorKind::Transient => io::ErrorKind::TimedOut,
            RemoteErrorKind::Other => io::ErrorKind::Other,
        }
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            RemoteErrorKind::NotFound => "not found",
            RemoteErrorKind::Transient => "transient failure",
            RemoteErrorKind::Other => "failed",
        };
        write!(f, "{kind}: {}", self.message)
    }
}

impl std::error::Error for RemoteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The first wait between two attempts of a remote call that failed with a transient error
/// (doubled after each, up to [`RETRY_MAX_WAIT`]).
const RETRY_FIRST_WAIT: std::time::Duration = std::time::Duration::from_millis(20);
const RETRY_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Calls `call` until it succeeds, fails with an error that is not transient, or has failed
/// `attempts` times, waiting longer after each failure (20 ms, doubling up to 2 s). `call` gets
/// the number of failed attempts before it.
pub(crate) fn retry_transient<T>(
    attempts: u32,
    mut call: impl FnMut(u32) -> Result<T, RemoteError>,
) -> Result<T, RemoteError> {
    let mut wait = RETRY_FIRST_WAIT;
    let mut failed = 0;
    loop {
        match call(failed) {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() && failed + 1 < attempts => {
                log::debug!("podstore: remote call: {e}; retrying in {wait:?}");
                std::thread::sleep(wait);
                wait = (wait * 2).min(RETRY_MAX_WAIT);
                failed += 1;
            }
            Err(e) => return Err(e),
        }
    }
}
