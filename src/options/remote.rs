//! [`Options::remote`] and the settings of the remote tier (docs/design-remote.md, "Remote tier").

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
    /// See [`Options::remote_local_budget`].
    pub(crate) local_budget: Option<u64>,
    /// See [`Options::remote_refresh_interval`].
    pub(crate) refresh_interval: Option<Duration>,
    /// See [`Options::remote_retention`].
    pub(crate) retention: Option<Duration>,
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
    /// Objects no manifest needs any more are deleted after
    /// [`remote_retention`](Options::remote_retention). Open reads and writes a
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
        let refresh_interval = self.remote.as_ref().and_then(|r| r.refresh_interval);
        let (flush_interval, upload_threads, attempts, local_budget, retention) = match &self.remote
        {
            Some(r) => (
                r.flush_interval,
                r.upload_threads,
                r.attempts,
                r.local_budget,
                r.retention,
            ),
            None => (
                Some(DEFAULT_FLUSH_INTERVAL),
                DEFAULT_UPLOAD_THREADS,
                DEFAULT_ATTEMPTS,
                None,
                Some(DEFAULT_RETENTION),
            ),
        };
        self.remote = Some(RemoteConfig {
            remote,
            prefix: prefix.into(),
            flush_interval,
            upload_threads,
            attempts,
            local_budget,
            refresh_interval,
            retention,
        });
        self
    }

    /// Keeps at most `bytes` of sealed files' data on the local disk (`None`, the default:
    /// every file whole): the local disk becomes a cache of the remote. After each remote flush
    /// (and on the background thread's ticks), while the sealed files' local bytes pass the
    /// budget, the oldest sealed files that the newest manifest this store wrote names have
    /// their local data given back (punched out of the file, which keeps its name, length and
    /// footer). A get of a value in such a file is one ranged GET of the remote (its record, or
    /// a range's chunks), checked against the record's checksums; the index, listings and
    /// open read only local footers. Files not yet named by a manifest are never evicted, so
    /// the budget can be passed until the next flush; the active segment and footers are not
    /// counted against it. A store with evicted files needs its remote to open. With a budget
    /// set, a restore (an empty directory opened against a prefix with a manifest) downloads
    /// only each file's footer, header and crc tables (about 1 % of the stored bytes), every
    /// file remote-only from the start.
    /// Ignored without [`Options::remote`] (set it after that).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let remote = std::sync::Arc::new(podstore::remote::MemoryRemote::new());
    /// let opts = podstore::Options::default()
    ///     .cache_capacity(0) // every get reads its file
    ///     .remote(remote, "db")
    ///     .remote_local_budget(Some(0));
    /// let store = podstore::Store::open_with(dir.path(), opts)?;
    /// store.put("big", vec![7u8; 4 << 20])?;
    /// store.flush_remote()?;
    /// assert_eq!(store.stats().remote_only_files, 1);
    /// // Read back from the remote: one ranged GET.
    /// assert_eq!(store.get("big")?.unwrap().len(), 4 << 20);
    /// assert_eq!(store.stats().remote_gets, 1);
    /// # Ok(()) }
    /// ```
    pub fn remote_local_budget(mut self, bytes: Option<u64>) -> Self {
        if let Some(r) = &mut self.remote {
            r.local_budget = bytes;
        }
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

    /// How long a manifest is kept in the remote after a newer one replaced it (default 1 hour;
    /// `None`: nothing is ever deleted from the remote). The store deletes, on its background
    /// thread after a remote flush (or when asked: [`Store::collect_remote_garbage`]), the
    /// manifests replaced longer ago than this, and then the uploaded files that no manifest
    /// left names and that the store does not hold: compaction's inputs, files uploaded but
    /// removed before a manifest named them, the uploads of writers it fenced. A reader that
    /// read a manifest (a restore elsewhere) can read every file it names for this long after
    /// a newer one appeared; after that it gets [`Error::ManifestExpired`], never other bytes.
    /// Ages are the remote's clock (the listing's last-modified times), not the machine's.
    /// The newest manifest and the files it names are never deleted. A checkpoint of a store
    /// with files in the remote only reads them from the remote: they are deleted once the
    /// store's manifests stop naming them and this time has passed (keep such checkpoints
    /// within it, or set `None`). Ignored without [`Options::remote`] (set it after that).
    ///
    /// [`Store::collect_remote_garbage`]: crate::Store::collect_remote_garbage
    pub fn remote_retention(mut self, retention: Option<Duration>) -> Self {
        if let Some(r) = &mut self.remote {
            r.retention = retention;
        }
        self
    }

    /// How many files are uploaded at once (default 4, at least 1), and downloaded at once by
    /// a restore or a [`RemoteReader`](crate::RemoteReader). Ignored without
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

    /// How often a [`RemoteReader`](crate::RemoteReader) looks for a newer manifest of its
    /// prefix, from a background thread of its own, and switches to it
    /// ([`RemoteReader::refresh`](crate::RemoteReader::refresh)); `None` (the default): only
    /// when asked. Each look is one listing of the prefix's manifests; a newer manifest costs
    /// the footers of the files it names that the reader does not have yet. Ignored by a
    /// [`Store`](crate::Store), and without [`Options::remote`] (set it after that).
    pub fn remote_refresh_interval(mut self, interval: Option<Duration>) -> Self {
        if let Some(r) = &mut self.remote {
            r.refresh_interval = interval;
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
/// [`Options::remote_retention`]'s default: an hour, much longer than a restore of a large
/// store's footers takes, short enough that a store compacting steadily keeps at most an hour
/// of replaced files.
const DEFAULT_RETENTION: Duration = Duration::from_secs(3600);
/// [`Options::remote_upload_threads`]'s default.
const DEFAULT_UPLOAD_THREADS: usize = 4;
/// [`Options::remote_retries`]'s default.
const DEFAULT_ATTEMPTS: u32 = 8;
