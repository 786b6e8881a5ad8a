//! [`Options::remote`] and the settings of the remote tier (docs/design.md, "Remote tier").

use std::sync::Arc;
use std::time::Duration;

use super::Options;
use crate::error::{Error, Result};
use crate::io::remote::Remote;

/// The remote tier a store was given: where, and how it uploads.
#[derive(Debug, Clone)]
pub(crate) struct RemoteConfig {
    /// The object store.
    pub(crate) remote: Arc<dyn Remote>,
    /// The prefix every object name of the store starts with (without a trailing `/`).
    pub(crate) prefix: String,
    /// See [`Options::remote_flush_interval`].
    pub(crate) flush_interval: Option<Duration>,
    /// See [`Options::remote_upload_threads`].
    pub(crate) upload_threads: usize,
    /// See [`Options::remote_retries`].
    pub(crate) attempts: u32,
}

impl Options {
    /// Gives the store a remote tier: an object store (any [`Remote`]; `podstore-remote`
    /// adapts every `object_store::ObjectStore`) under `prefix`, which this store alone writes.
    ///
    /// Sealed log segments and blob files are uploaded as they are (same bytes) by a
    /// background thread, and [`Store::flush_remote`](crate::Store::flush_remote) returns once
    /// every write made before it is named by a manifest in the remote. Opening a new or empty
    /// directory with a remote whose prefix holds a manifest restores the store from it.
    /// Opening the prefix fences any other store that wrote it: that store's next manifest
    /// fails with [`Error::Fenced`](crate::Error::Fenced), and it refuses writes from then on.
    /// Objects are never deleted from the remote in this version. Open reads and writes a
    /// manifest, so it fails with [`Error::Remote`](crate::Error::Remote) when the remote
    /// cannot be reached (after retries): a store that cannot take its prefix does not open.
    ///
    /// The prefix is a `/`-separated path without a leading or trailing `/` and without empty
    /// parts (else [`Error::InvalidOptions`] at open). A remote needs a writable store (not
    /// [`read_only`](Options::read_only)).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// use std::sync::Arc;
    /// use podstore::remote::MemoryRemote;
    /// # let dir = tempfile::tempdir().unwrap();
    /// // In memory (the `testing` feature); podstore_remote::ObjectStoreRemote for S3 & co.
    /// let remote = Arc::new(MemoryRemote::new());
    /// let opts = podstore::Options::default().remote(remote.clone(), "stores/photos");
    /// let store = podstore::Store::open_with(dir.path().join("a"), opts.clone())?;
    /// store.put("k", "v")?;
    /// store.flush_remote()?;
    /// drop(store);
    /// // The machine is lost: a new directory, the same remote.
    /// let store = podstore::Store::open_with(dir.path().join("b"), opts)?;
    /// assert_eq!(store.get("k")?.as_deref(), Some(&b"v"[..]));
    /// # Ok(()) }
    /// ```
    pub fn remote(mut self, remote: Arc<dyn Remote>, prefix: impl Into<String>) -> Self {
        let (flush_interval, upload_threads, attempts) = match &self.remote {
            Some(r) => (r.flush_interval, r.upload_threads, r.attempts),
            None => (
                Some(DEFAULT_FLUSH_INTERVAL),
                DEFAULT_UPLOAD_THREADS,
                DEFAULT_ATTEMPTS,
            ),
        };
        self.remote = Some(RemoteConfig {
            remote,
            prefix: prefix.into(),
            flush_interval,
            upload_threads,
            attempts,
        });
        self
    }

    /// How often the background thread makes a remote flush of its own (as
    /// [`Store::flush_remote`](crate::Store::flush_remote): seals the active segment, uploads,
    /// writes a manifest) when the store was written since the last one; `None`: only on
    /// request. Default 60 s. Each such flush seals the active segment, so a short interval
    /// makes small segments. Ignored without [`Options::remote`] (set it after that).
    pub fn remote_flush_interval(mut self, interval: Option<Duration>) -> Self {
        if let Some(r) = &mut self.remote {
            r.flush_interval = interval;
        }
        self
    }

    /// How many files are uploaded at once (default 4, at least 1). Ignored without
    /// [`Options::remote`] (set it after that).
    pub fn remote_upload_threads(mut self, threads: usize) -> Self {
        if let Some(r) = &mut self.remote {
            r.upload_threads = threads;
        }
        self
    }

    /// How many times a remote call that fails with a transient error
    /// ([`RemoteErrorKind::Transient`](crate::remote::RemoteErrorKind::Transient): throttling,
    /// timeouts) is attempted before the store gives up with
    /// [`Error::Remote`](crate::Error::Remote) (default 8, at least 1). The waits between
    /// attempts start at 20 ms and double, up to 2 s: 8 attempts wait 2.5 s in all. Ignored
    /// without [`Options::remote`] (set it after that).
    pub fn remote_retries(mut self, attempts: u32) -> Self {
        if let Some(r) = &mut self.remote {
            r.attempts = attempts;
        }
        self
    }

    /// The remote's checks, for [`Options::validate`].
    pub(super) fn validate_remote(&self) -> Result<()> {
        let Some(r) = &self.remote else {
            return Ok(());
        };
        if self.read_only {
            return Err(Error::InvalidOptions(
                "a remote needs a writable store (not read_only)",
            ));
        }
        if r.prefix.is_empty() || r.prefix.split('/').any(str::is_empty) {
            return Err(Error::InvalidOptions(
                "the remote prefix must be a path without empty parts or a leading or trailing /",
            ));
        }
        if r.upload_threads == 0 || r.attempts == 0 || r.flush_interval.is_some_and(|d| d.is_zero())
        {
            return Err(Error::InvalidOptions(
                "remote_upload_threads, remote_retries and remote_flush_interval must be positive",
            ));
        }
        Ok(())
    }
}

/// [`Options::remote_flush_interval`]'s default.
const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_secs(60);
/// [`Options::remote_upload_threads`]'s default.
const DEFAULT_UPLOAD_THREADS: usize = 4;
/// [`Options::remote_retries`]'s default.
const DEFAULT_ATTEMPTS: u32 = 8;
