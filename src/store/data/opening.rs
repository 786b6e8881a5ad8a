//! Opening a store: [`Store::open`], [`Store::open_with`] and a view's open alongside a writer
//! (retried while the writer changes the store under it). The open procedure itself (lock,
//! catalog, footers, index) is `store/open.rs`.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::io::storage::{RealStorage, Storage};
use crate::options::Options;
use crate::store::inner::Inner;
use crate::store::{Store, open};

/// Views an open alongside a writer takes before it gives up with [`Error::StoreChanged`]: 25
/// attempts, 2 ms more apart each time (0.65 s of waits), outlast a compaction's removals.
const OPEN_ATTEMPTS: u32 = 25;

impl Store {
    /// Opens the store in `dir` with default [`Options`], creating it if needed.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = podstore::Store::open(dir.path().join("photos"))?;
    /// store.put("cat.jpg", [0xffu8, 0xd8])?;
    /// store.close()?;
    /// # Ok(()) }
    /// ```
    pub fn open(dir: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(dir, Options::default())
    }

    /// Opens the store in `dir`, creating it if needed (unless [`Options::create`] is `false`:
    /// then a missing store is [`Error::NotFound`](crate::Error::NotFound)).
    ///
    /// Reads the footer of every sealed segment (not their records). A segment that was being
    /// written when the process or machine stopped is scanned, cut after its last whole record
    /// and sealed; [`Store::recovery`] says what was found.
    ///
    /// Fails with [`Error::Locked`](crate::Error::Locked) if another `Store` has the directory
    /// open.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// use podstore::{Durability, Options, Store};
    /// let opts = Options::default().durability(Durability::Buffered);
    /// let store = Store::open_with(dir.path(), opts)?;
    /// store.put("k", "v")?;
    /// store.flush()?; // durable now
    /// # Ok(()) }
    /// ```
    pub fn open_with(dir: impl AsRef<Path>, opts: Options) -> Result<Store> {
        Store::open_with_storage(dir.as_ref(), opts, Arc::new(RealStorage))
    }

    /// [`Store::open_with`] on another storage backend (tests: power loss, I/O errors).
    pub(crate) fn open_with_storage(
        dir: &Path,
        opts: Options,
        storage: Arc<dyn Storage>,
    ) -> Result<Store> {
        opts.validate()?;
        if opts.alongside_writer {
            return Store::open_alongside(dir, opts, storage);
        }
        if let Some(remote) = &opts.remote {
            crate::store::remote::restore_if_empty(dir, remote, &storage)?;
        }
        let (lock, profile) = open::prepare(dir, &opts, storage)?;
        let read_only = opts.read_only;
        // The prefix is taken (fencing its older writers) with the directory locked, and
        // before anything is written: a store that cannot take it does not open.
        // The directory must be the prefix's (`REMOTE-PREFIX`, or its files named by the
        // prefix's manifest) before the prefix is taken: taken by another store's directory,
        // its next manifests would name that directory's files, and the prefix's own be
        // deleted in time.
        let remote = match &opts.remote {
            Some(config) => {
                crate::store::remote::check_prefix(dir, config, &profile)?;
                Some(crate::store::remote::RemoteTier::attach(config.clone())?)
            }
            None => None,
        };
        let mut inner = Inner::start(dir.to_path_buf(), opts, profile, None)?;
        inner.remote = remote;
        let inner = Arc::new(inner);
        if !read_only {
            inner.start_background()?;
        }
        inner.start_warm();
        Ok(Store {
            inner,
            closed: false,
            _lock: lock,
        })
    }

    /// [`Options::alongside_writer`]: takes the view again while the writer changes the store
    /// under it (a file removed, a catalog edit half read), [`OPEN_ATTEMPTS`] times at most.
    fn open_alongside(dir: &Path, opts: Options, storage: Arc<dyn Storage>) -> Result<Store> {
        for attempt in 1..=OPEN_ATTEMPTS {
            let alongside = open::Alongside {
                last_attempt: attempt == OPEN_ATTEMPTS,
            };
            let started = open::prepare(dir, &opts, storage.clone()).and_then(|(lock, profile)| {
                let inner = Inner::start(dir.to_path_buf(), opts.clone(), profile, Some(alongside));
                Ok((lock, inner?))
            });
            match started {
                Ok((lock, inner)) => {
                    let inner = Arc::new(inner);
                    inner.start_warm();
                    return Ok(Store {
                        inner,
                        closed: false,
                        _lock: lock,
                    });
                }
                Err(Error::StoreChanged { .. }) => {}
                // The probe's sample file, removed between the listing and the probe.
                Err(Error::Io { ref source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            // The writer is in the middle of a compaction: let it get further.
            std::thread::sleep(std::time::Duration::from_millis(2 * attempt as u64));
        }
        Err(Error::StoreChanged {
            path: dir.to_path_buf(),
            attempts: OPEN_ATTEMPTS,
        })
    }
}
