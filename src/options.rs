//! Store configuration.

use std::time::Duration;

use crate::error::{Error, Result};

pub use crate::io::file::IoMode;
pub use view::OptionsView;

/// The options of a store used as a cache: the size cap, second chances, admission.
mod cache;
/// [`Options::remote`]: the remote tier's settings.
mod remote;
/// Reading an `Options` back ([`Options::view`]), apart from the setters.
mod view;

pub use cache::Admission;

pub(crate) use remote::RemoteConfig;

/// When a write is acknowledged.
// Exhaustive on purpose: a new durability level would change what an acknowledged write
// means, which code that matches on it must handle, not skip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// `put`/`delete` return after the record is on stable storage (fdatasync, plus a
    /// directory fsync when a segment file was created). Such a write survives kill -9 and
    /// power loss. Concurrent writers share one write and one fdatasync (group commit).
    ///
    /// **Space:** every durable write ends on a block boundary (a block is never written
    /// twice), so a lone durable put of a small value takes a whole block (4 KiB) on disk until
    /// compaction copies it: 5,000 lone puts of 100 bytes take about 20 MiB. Writes that share
    /// a sync share blocks: put from several threads at once (group commit), put many values
    /// in one [`Batch`](crate::Batch), or use `Buffered` and call
    /// [`Store::flush`](crate::Store::flush) when the data must be durable.
    /// [`Store::compact`](crate::Store::compact) gives the padding back.
    #[default]
    Sync,
    /// `put`/`delete` return once the record is in the write buffer: visible to readers at once,
    /// durable after [`Store::flush`](crate::Store::flush), [`Store::close`](crate::Store::close)
    /// or when the buffer fills. A crash loses a suffix of such writes, never a middle part.
    Buffered,
}

/// Whether values are compressed when they are written.
///
/// A compressed value is stored as independent lz4 frames of
/// [`Options::compression_frame_size`] uncompressed bytes and a small frame table, so that range
/// reads and [`ValueReader`](crate::ValueReader) decompress only the frames they touch. Reads
/// handle compressed and raw values alike whatever this option says: it only decides how new
/// values are written, and can be changed at every open.
///
/// The default is [`Compression::None`]: blobs are often compressed already (images, video,
/// archives), where lz4 costs CPU on every put and saves nothing; and a compressed value's range
/// read fetches and decompresses whole frames (64 KiB of value by default) instead of the 4 KiB
/// chunks a raw value's read fetches. Turn it on ([`Compression::Auto`] is the safe choice) for
/// text-like values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Values are stored as they are.
    #[default]
    None,
    /// Every non-empty value is stored compressed (a frame that lz4 does not shrink is kept raw
    /// inside it, so incompressible data costs a frame table of 16 bytes per frame plus 24).
    Lz4,
    /// A value is stored compressed only when that pays: lz4 is first run on a sample of the
    /// value (up to 8 slices of 4 KiB spread over it), and the value is stored raw when the
    /// estimated saving is below [`Options::compression_min_saving`]. When the sample passes,
    /// the value is compressed and still stored raw if the real saving falls short.
    Auto,
}

/// What open does with a store whose catalog reveals damage: a file it lists missing, cut
/// short or grown, a sealed file whose footer no longer verifies, a file renamed or swapped, a
/// catalog that does not verify. See [`Options::recovery_mode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RecoveryMode {
    /// Open fails with [`Error::Damaged`](crate::Error::Damaged), naming every such file and
    /// what is wrong with it, and changes nothing in them: serving what is left could let a
    /// key read an older value, or a deleted key come back. (Recovery from a crash needs no
    /// salvage: a torn write is not damage.)
    #[default]
    Strict,
    /// Open anyway: a missing file is forgotten, a damaged one recovered by scanning its
    /// records (intact ones are kept; what follows damage that cannot be skipped is lost), a
    /// misnamed one moved to `quarantine/`, the catalog rewritten to match; and every such
    /// file reported in [`RecoveryReport::lost`](crate::RecoveryReport::lost) (and logged).
    /// Later opens in the default mode then succeed. A key whose newest value or tombstone was
    /// in a lost file reads an older value: the report is the only notice.
    Salvage,
}

/// Options for [`Store::open_with`](crate::Store::open_with).
///
/// Built from [`Options::default`] with one method per option, each taking and returning the
/// options by value (`Options::default().segment_size(64 << 20)`); each option's current value
/// is read back by the same name on [`Options::view`] (`opts.view().segment_size()`). The fields are private, so options can be added without
/// breaking code that builds them.
///
/// ```
/// use podstore::{Durability, IoMode, Options};
/// let opts = Options::default()
///     .segment_size(64 << 20)
///     .io_mode(IoMode::Auto)
///     .durability(Durability::Sync);
/// assert_eq!(opts.view().segment_size(), 64 << 20);
/// ```
#[derive(Debug, Clone)]
#[must_use = "each setter returns the changed Options: pass them to `Store::open_with`, or they are lost"]
pub struct Options {
    /// See [`Options::segment_size`].
    pub(crate) segment_size: u64,
    /// Whether [`Options::segment_size`] was called (else a size cap chooses it).
    pub(crate) segment_size_set: bool,
    /// See [`Options::io_mode`].
    pub(crate) io_mode: IoMode,
    /// See [`Options::durability`].
    pub(crate) durability: Durability,
    /// See [`Options::write_buffer_size`].
    pub(crate) write_buffer_size: usize,
    /// See [`Options::max_group_bytes`].
    pub(crate) max_group_bytes: u64,
    /// See [`Options::max_group_records`].
    pub(crate) max_group_records: usize,
    /// See [`Options::large_value_threshold`].
    pub(crate) large_value_threshold: u64,
    /// See [`Options::flush_interval`].
    pub(crate) flush_interval: Option<Duration>,
    /// See [`Options::compression`].
    pub(crate) compression: Compression,
    /// See [`Options::compression_frame_size`].
    pub(crate) compression_frame_size: u32,
    /// See [`Options::compression_min_saving`].
    pub(crate) compression_min_saving: f64,
    /// See [`Options::compaction_threshold`].
    pub(crate) compaction_threshold: f64,
    /// See [`Options::size_cap`].
    pub(crate) size_cap: Option<u64>,
    /// See [`Options::second_chance`].
    pub(crate) second_chance: bool,
    /// See [`Options::second_chance_budget`].
    pub(crate) second_chance_budget: f64,
    /// See [`Options::admission`].
    pub(crate) admission: Admission,
    /// See [`Options::background_compaction`].
    pub(crate) background_compaction: bool,
    /// See [`Options::compaction_rate`].
    pub(crate) compaction_rate: Option<u64>,
    /// See [`Options::create`].
    pub(crate) create: bool,
    /// See [`Options::allow_foreign_files`].
    pub(crate) allow_foreign_files: bool,
    /// See [`Options::read_only`].
    pub(crate) read_only: bool,
    /// See [`Options::alongside_writer`].
    pub(crate) alongside_writer: bool,
    /// See [`Options::recovery_mode`].
    pub(crate) recovery_mode: RecoveryMode,
    /// See [`Options::cache_capacity`]; `None`: sized from the memory available at open.
    pub(crate) cache_capacity: Option<u64>,
    /// See [`Options::warm_cache`].
    pub(crate) warm_cache: bool,
    /// Bits of each key hash the index uses: 64, fewer only in tests (`testing_hash_bits`).
    pub(crate) hash_bits: u32,
    /// See [`Options::default_ttl`].
    pub(crate) default_ttl: Option<Duration>,
    /// The clock expiries are judged by (the system's; a test's with `testing_clock`).
    pub(crate) clock: crate::expiry::Clock,
    /// See [`Options::remote`].
    pub(crate) remote: Option<RemoteConfig>,
}

/// Largest segment size: record offsets in the index are 40 bits wide (a record larger than
/// the segment size gets a segment of its own, and is at most 4 GiB).
const MAX_SEGMENT_SIZE: u64 = 64 << 30;

impl Default for Options {
    fn default() -> Self {
        Options {
            segment_size: DEFAULT_SEGMENT_SIZE,
            segment_size_set: false,
            io_mode: IoMode::Auto,
            durability: Durability::Sync,
            write_buffer_size: 1 << 20,
            max_group_bytes: 8 << 20,
            max_group_records: 4096,
            large_value_threshold: 1 << 20,
            flush_interval: Some(Duration::from_millis(200)),
            compression: Compression::None,
            compression_frame_size: crate::format::frames::DEFAULT_FRAME_SIZE,
            compression_min_saving: 0.125,
            compaction_threshold: 0.5,
            size_cap: None,
            second_chance: false,
            second_chance_budget: 0.5,
            admission: Admission::All,
            background_compaction: true,
            compaction_rate: Some(64 << 20),
            create: true,
            allow_foreign_files: false,
            read_only: false,
            alongside_writer: false,
            recovery_mode: RecoveryMode::Strict,
            cache_capacity: None,
            warm_cache: true,
            hash_bits: 64,
            default_ttl: None,
            clock: crate::expiry::Clock::default(),
            remote: None,
        }
    }
}

/// [`Options::segment_size`]'s default without a size cap.
pub(super) const DEFAULT_SEGMENT_SIZE: u64 = 256 << 20;

/// With a size cap and no [`Options::segment_size`] of the user's, segments are this fraction
/// of the cap (within 1 MiB and the default), so that an eviction drops a thirty-second of the
/// cache, not a third of it. A thirty-second rather than a sixteenth: the store holds on
/// average about one segment less than its cap (eviction empties room for the segment being
/// written), and a cache's hit ratio grows with what it holds (issue 39's trace: 0.290 to
/// 0.302-0.305 at 64 KiB with eight threads, +0.004 to +0.005 elsewhere; a sixty-fourth added
/// under 0.003 and cost up to half the rate at 64 KiB: docs/benchmarks.md).
pub(super) const CAP_SEGMENTS: u64 = 32;

impl Options {
    /// Largest log segment file, in bytes: the active segment is sealed, and a new one started,
    /// before a record would take it past this size with its footer (default 256 MiB, at
    /// least 1 MiB; with a [`size_cap`](Options::size_cap) and no size set here, a thirty-second
    /// of the cap, rounded down to whole MiB, within 1 MiB and 256 MiB). A record larger than
    /// this gets a segment of its own.
    ///
    /// ```
    /// let opts = podstore::Options::default().segment_size(64 << 20);
    /// assert_eq!(opts.view().segment_size(), 64 << 20);
    /// ```
    pub fn segment_size(mut self, bytes: u64) -> Self {
        self.segment_size = bytes;
        self.segment_size_set = true;
        self
    }

    /// O_DIRECT or buffered I/O (default [`IoMode::Auto`]).
    ///
    /// ```
    /// let opts = podstore::Options::default().io_mode(podstore::IoMode::Buffered);
    /// assert_eq!(opts.view().io_mode(), podstore::IoMode::Buffered);
    /// ```
    pub fn io_mode(mut self, mode: IoMode) -> Self {
        self.io_mode = mode;
        self
    }

    /// When writes are acknowledged (default [`Durability::Sync`]).
    ///
    /// ```
    /// let opts = podstore::Options::default().durability(podstore::Durability::Buffered);
    /// assert_eq!(opts.view().durability(), podstore::Durability::Buffered);
    /// ```
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Size of each of the two write buffers, in bytes (default 1 MiB, 64 KiB to 64 MiB;
    /// rounded up to the write block size). A write larger than a buffer is streamed through both.
    ///
    /// ```
    /// let opts = podstore::Options::default().write_buffer_size(4 << 20);
    /// assert_eq!(opts.view().write_buffer_size(), 4 << 20);
    /// ```
    pub fn write_buffer_size(mut self, bytes: usize) -> Self {
        self.write_buffer_size = bytes;
        self
    }

    /// A group commit closes once it holds this many bytes of records (default 8 MiB): its
    /// writers are synced at once instead of waiting for more to join. Bounds the latency a
    /// writer can incur from the others in its group. Only a group with a
    /// [`Durability::Sync`] write in it is closed so: buffered writes alone have nobody
    /// waiting, and are made durable by the flush ticker, a flush, a durable write or a seal.
    ///
    /// ```
    /// let opts = podstore::Options::default().max_group_bytes(16 << 20);
    /// assert_eq!(opts.view().max_group_bytes(), 16 << 20);
    /// ```
    pub fn max_group_bytes(mut self, bytes: u64) -> Self {
        self.max_group_bytes = bytes;
        self
    }

    /// A group commit closes once it holds this many records (default 4096); like
    /// [`Options::max_group_bytes`], only a group with a [`Durability::Sync`] write in it.
    ///
    /// ```
    /// let opts = podstore::Options::default().max_group_records(1024);
    /// assert_eq!(opts.view().max_group_records(), 1024);
    /// ```
    pub fn max_group_records(mut self, records: usize) -> Self {
        self.max_group_records = records;
        self
    }

    /// Values of at least this many bytes (default 1 MiB) put with [`Durability::Sync`] bypass
    /// the shared write buffer: the writing thread writes them to a blob file of their own, so
    /// small writers never wait behind a large copy or its disk write. `u64::MAX` turns it off.
    ///
    /// ```
    /// let opts = podstore::Options::default().large_value_threshold(4 << 20);
    /// assert_eq!(opts.view().large_value_threshold(), 4 << 20);
    /// ```
    pub fn large_value_threshold(mut self, bytes: u64) -> Self {
        self.large_value_threshold = bytes;
        self
    }

    /// With [`Durability::Buffered`], writes are made durable by a background flush at most this
    /// long after they were made (default 200 ms). `None` leaves it to `flush`/`close`.
    ///
    /// ```
    /// let opts = podstore::Options::default().flush_interval(Some(std::time::Duration::from_millis(50)));
    /// assert_eq!(opts.view().flush_interval(), Some(std::time::Duration::from_millis(50)));
    /// ```
    pub fn flush_interval(mut self, interval: Option<Duration>) -> Self {
        self.flush_interval = interval;
        self
    }

    /// Whether new values are compressed (default [`Compression::None`]; see there why).
    ///
    /// ```
    /// let opts = podstore::Options::default().compression(podstore::Compression::Auto);
    /// assert_eq!(opts.view().compression(), podstore::Compression::Auto);
    /// ```
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// Uncompressed bytes per lz4 frame of a compressed value (default 64 KiB, 4 KiB to 4 MiB).
    /// A range read of a compressed value reads and decompresses whole frames: smaller frames
    /// make small range reads cheaper, larger ones compress a little better.
    ///
    /// ```
    /// let opts = podstore::Options::default().compression_frame_size(16 << 10);
    /// assert_eq!(opts.view().compression_frame_size(), 16 << 10);
    /// ```
    pub fn compression_frame_size(mut self, bytes: u32) -> Self {
        self.compression_frame_size = bytes;
        self
    }

    /// With [`Compression::Auto`], the fraction of a value's size that compression must save for
    /// the value to be stored compressed (default 0.125, i.e. at least 1/8 smaller; 0.0 to below
    /// 1.0). Below it, the CPU of decompressing every read is not worth the space.
    ///
    /// ```
    /// let opts = podstore::Options::default().compression_min_saving(0.25);
    /// assert_eq!(opts.view().compression_min_saving(), 0.25);
    /// ```
    pub fn compression_min_saving(mut self, fraction: f64) -> Self {
        self.compression_min_saving = fraction;
        self
    }

    /// A sealed segment is compacted once at least this fraction of its bytes is dead:
    /// overwritten or deleted values, and padding (default 0.5; above 0.0, at most 1.0).
    /// Lower keeps less dead data on disk (at most about `1 / (1 - threshold)` times the live
    /// data, plus the active segment) at the cost of copying more: each compaction copies the
    /// live `1 - threshold` of a segment or less to free the rest. See
    /// [`Store::compact`](crate::Store::compact).
    ///
    /// ```
    /// let opts = podstore::Options::default().compaction_threshold(0.3);
    /// assert_eq!(opts.view().compaction_threshold(), 0.3);
    /// ```
    pub fn compaction_threshold(mut self, fraction: f64) -> Self {
        self.compaction_threshold = fraction;
        self
    }

    /// Compact in a background thread, checking about twice a second (default `true`). With
    /// `false`, space is given back only by [`Store::compact`](crate::Store::compact).
    ///
    /// ```
    /// let opts = podstore::Options::default().background_compaction(false);
    /// assert_eq!(opts.view().background_compaction(), false);
    /// ```
    pub fn background_compaction(mut self, on: bool) -> Self {
        self.background_compaction = on;
        self
    }

    /// Bytes per second that background compaction may copy (default 64 MiB/s; `None`: no
    /// limit). Bounds the disk bandwidth it takes from foreground reads and writes.
    /// [`Store::compact`](crate::Store::compact) runs unthrottled.
    ///
    /// ```
    /// let opts = podstore::Options::default().compaction_rate(Some(16 << 20));
    /// assert_eq!(opts.view().compaction_rate(), Some(16 << 20));
    /// ```
    pub fn compaction_rate(mut self, bytes_per_second: Option<u64>) -> Self {
        self.compaction_rate = bytes_per_second;
        self
    }

    /// Whether opening a directory that holds no store creates one (default `true`). With
    /// `false`, [`Store::open_with`](crate::Store::open_with) only opens an existing store: a
    /// missing directory, or one that holds no store files, is
    /// [`Error::NotFound`](crate::Error::NotFound) and nothing is created. For tools that
    /// inspect a store (a mistyped path must not become a new, empty, "clean" store).
    ///
    /// ```
    /// use podstore::{Error, Options, Store};
    /// let dir = tempfile::tempdir()?;
    /// let missing = dir.path().join("mistyped");
    /// let opened = Store::open_with(&missing, Options::default().create(false));
    /// assert!(matches!(opened, Err(Error::NotFound { .. })));
    /// assert!(!missing.exists());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn create(mut self, create: bool) -> Self {
        self.create = create;
        self
    }

    /// Whether open may create a store in a directory that holds other files and no store
    /// (default `false`: open fails with
    /// [`Error::ForeignFiles`](crate::Error::ForeignFiles), naming them, and writes nothing).
    /// A directory holding a store opens whatever else it holds; an empty or missing one gets a
    /// new store either way. The store never reads, moves or removes a file it did not name.
    ///
    /// ```
    /// use podstore::{Error, Options, Store};
    /// let dir = tempfile::tempdir()?;
    /// std::fs::write(dir.path().join("notes.txt"), "mine")?;
    /// let refused = Store::open(dir.path());
    /// assert!(matches!(refused, Err(Error::ForeignFiles { total: 1, .. })));
    /// assert_eq!(std::fs::read_dir(dir.path())?.count(), 1); // nothing written
    /// let store = Store::open_with(dir.path(), Options::default().allow_foreign_files(true))?;
    /// store.put("k", "v")?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn allow_foreign_files(mut self, allow: bool) -> Self {
        self.allow_foreign_files = allow;
        self
    }

    /// Open for reading only (default `false`): a shared lock (several read-only `Store`s may
    /// have the directory open at once, a writer none), and no write of any kind: the directory
    /// must exist, nothing is created, sealed, removed or moved (a segment left unsealed is
    /// served from memory, a file open cannot use is reported and left in place), so it works
    /// on a read-only directory or mount. Writes return [`Error::ReadOnly`](crate::Error::ReadOnly).
    ///
    /// ```
    /// use podstore::{Error, Options, Store};
    /// let dir = tempfile::tempdir()?;
    /// Store::open(dir.path())?.put("k", "v")?;
    /// let a = Store::open_with(dir.path(), Options::default().read_only(true))?;
    /// let b = Store::open_with(dir.path(), Options::default().read_only(true))?;
    /// assert_eq!(b.get("k")?.as_deref(), Some(&b"v"[..]));
    /// assert!(matches!(a.put("k", "w"), Err(Error::ReadOnly)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// With [`Options::read_only`], open a store that another process (or another `Store` in
    /// this one) may have open for writing, without taking the directory lock (default
    /// `false`). Open fails with [`Error::InvalidOptions`](crate::Error::InvalidOptions) unless
    /// `read_only` is set too: the name says what it is for, and the two together say what it
    /// does.
    ///
    /// The `Store` is a view of the store as of its open, which the writer never notices:
    ///
    /// * It takes no lock at all (a shared lock would refuse a writer that opens later), and
    ///   writes nothing: no catalog edit, no seal, no removal, no quarantine, no hot-set file.
    /// * It reads the catalog, then opens every file the catalog lists as created or sealed,
    ///   and keeps them open: a file the writer removes afterwards (compaction) stays readable
    ///   through its open handle, so reads never fail or change because the writer moved on.
    ///   Every file is opened at open; nothing is opened by name later.
    /// * The log segment the writer is appending to is scanned up to its first record that is
    ///   not whole: that record and what follows are the writer's writes in flight, the end of
    ///   the view, never damage. Writes that the writer has written but not yet made durable may
    ///   be in the view.
    /// * Files the writer created after the catalog was read are not in the view.
    /// * When the writer removed a listed file before open could open it, or the catalog read
    ///   was caught in the middle of an edit, open reads the catalog again, a few times, and
    ///   then fails with [`Error::StoreChanged`](crate::Error::StoreChanged) (nothing is wrong
    ///   with the store; try again). A listed file that is missing while the catalog still
    ///   lists it is damage ([`Error::Damaged`](crate::Error::Damaged)), as in any open.
    /// * [`Store::verify`](crate::Store::verify) checks every checksum of every file in the
    ///   view (the active segment up to the view's end), but not the directory against the
    ///   catalog ([`VerifyReport::files`](crate::VerifyReport::files) is empty): the writer
    ///   removes and creates files while it runs.
    ///
    /// Without a writer it works too (the same view, unlocked: a writer may open meanwhile).
    ///
    /// ```
    /// use podstore::{Options, Store};
    /// let dir = tempfile::tempdir()?;
    /// let writer = Store::open(dir.path())?;
    /// writer.put("k", "v")?;
    /// let view = Options::default().read_only(true).alongside_writer(true);
    /// let observer = Store::open_with(dir.path(), view)?; // the writer keeps its lock
    /// writer.put("k", "w")?;
    /// assert_eq!(observer.get("k")?.as_deref(), Some(&b"v"[..])); // as of its open
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alongside_writer(mut self, alongside: bool) -> Self {
        self.alongside_writer = alongside;
        self
    }

    /// What open does when the store's catalog reveals a missing or damaged file (default
    /// [`RecoveryMode::Strict`]: refuse, with [`Error::Damaged`](crate::Error::Damaged)). See
    /// [`RecoveryMode`].
    ///
    /// ```
    /// use podstore::{Error, Options, RecoveryMode, Store};
    /// let dir = tempfile::tempdir()?;
    /// let store = Store::open(dir.path())?;
    /// store.put("k", "v")?;
    /// store.seal()?;
    /// store.close()?;
    /// // An operator deletes a sealed file by mistake.
    /// for entry in std::fs::read_dir(dir.path())? {
    ///     let path = entry?.path();
    ///     if path.file_name().unwrap().to_string_lossy().starts_with("seg-") {
    ///         std::fs::remove_file(path)?;
    ///     }
    /// }
    /// assert!(matches!(Store::open(dir.path()), Err(Error::Damaged { .. })));
    /// let store = Store::open_with(dir.path(), Options::default().recovery_mode(RecoveryMode::Salvage))?;
    /// assert_eq!(store.recovery().lost.len(), 1);
    /// assert_eq!(store.get("k")?, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recovery_mode(mut self, mode: RecoveryMode) -> Self {
        self.recovery_mode = mode;
        self
    }

    /// Bytes of memory for the read cache, exactly (0 turns it off), counting each entry's
    /// bookkeeping (about 128 bytes) as well as its bytes.
    ///
    /// Not set (the default), the capacity is sized at open from the memory available to the
    /// process: the smallest of its cgroup's memory limits (v2 `memory.max` and `memory.high`,
    /// v1 `memory.limit_in_bytes`, its ancestors' too) and the machine's `MemAvailable`. With
    /// direct I/O the cache gets half of it, less what the index takes at open (at least a
    /// sixteenth of it); with buffered I/O, where the page cache already keeps the data, at most
    /// 64 MiB; 64 MiB when nothing says how much memory there is. The cache allocates only as it
    /// fills, so a store that reads little costs little. [`Stats::cache_capacity`] says what was
    /// chosen, [`Stats::memory_available`] from what. The budget is per store: a process that
    /// opens several stores should set it.
    ///
    /// The cache holds verified bytes: values whole (at most 8 MiB, an eighth of the capacity
    /// and a quarter of one of its shards each), so that a repeated `get` reads no disk and
    /// `get_bytes` hands out the cache's own buffer, entered when they are read and, up to
    /// 4 KiB, when they are written (once the write is acknowledged: what was just written is
    /// read from memory; by a buffered put only for a key in use); larger values in verified
    /// pieces of 64 KiB, kept as reads fetch them (a range read of a value read before fetches
    /// its whole piece, but only while the cache has free room); and chunk checksums and frame
    /// tables, so that a range read near an earlier one is one disk read. It is scan-resistant: once it is full, a new
    /// value enters a small cold queue and is kept long only once it is read again, so that one
    /// pass over many values, read or written, does not push out the often-read ones. It can
    /// never serve an old value: entries are keyed by where the bytes are, which every
    /// overwrite, delete and compaction changes. [`Stats`] has its hits, misses, evictions and
    /// bytes.
    ///
    /// [`Stats`]: crate::Stats
    /// [`Stats::cache_capacity`]: crate::Stats::cache_capacity
    /// [`Stats::memory_available`]: crate::Stats::memory_available
    ///
    /// ```
    /// let opts = podstore::Options::default().cache_capacity(256 << 20);
    /// assert_eq!(opts.view().cache_capacity(), Some(256 << 20));
    /// let no_cache = podstore::Options::default().cache_capacity(0);
    /// # let _ = no_cache;
    /// ```
    pub fn cache_capacity(mut self, bytes: u64) -> Self {
        self.cache_capacity = Some(bytes);
        self
    }

    /// Whether the read cache is warmed at open (default on): a store closed and opened again (a
    /// restarted service) does not start cold.
    ///
    /// A background thread, started by open and never holding it up, reads the store's log
    /// segments newest first in large sequential reads (4 MiB, direct with direct I/O), checks
    /// each record's checksums, and keeps in the cache every value of at most 4 KiB (the size
    /// kept on write) that is still live: as many as fit in the cache's free room. It never
    /// evicts anything: a store larger than the cache warms its newest data up to the budget.
    /// Its next read is made ahead on a second thread, a segment with many live values is
    /// walked in parts side by side (one thread per core, up to 4), and a segment holding only
    /// larger values is not read.
    /// Reads and writes go on meanwhile; a value warmed is keyed by where its bytes are, like
    /// every cached value, so it can never be served once an overwrite, a delete or a
    /// compaction has moved its key on. Damaged records are skipped (logged; a read of one still
    /// fails), and the thread stops at close. [`Stats::cache_warming`],
    /// [`Stats::cache_warmed_values`] and [`Stats::cache_warmed_bytes`] tell what it did.
    ///
    /// Turn it off for a store opened briefly (a tool that reads one key), or to keep the disk
    /// idle after open. It does nothing with the cache off ([`Options::cache_capacity`] 0).
    ///
    /// [`Stats::cache_warming`]: crate::Stats::cache_warming
    /// [`Stats::cache_warmed_values`]: crate::Stats::cache_warmed_values
    /// [`Stats::cache_warmed_bytes`]: crate::Stats::cache_warmed_bytes
    ///
    /// ```
    /// let opts = podstore::Options::default().warm_cache(false);
    /// assert!(!opts.view().warm_cache());
    /// ```
    pub fn warm_cache(mut self, on: bool) -> Self {
        self.warm_cache = on;
        self
    }

    /// How long a value lives when its put says nothing of it ([`PutOptions`]): `None` (the
    /// default), forever. Applies to every put, batch put and streamed put made without an
    /// expiry of its own; [`PutOptions::no_expiry`] opts one out. An expired value is absent to
    /// every read at once; compaction reclaims its space.
    ///
    /// [`PutOptions`]: crate::PutOptions
    /// [`PutOptions::no_expiry`]: crate::PutOptions::no_expiry
    ///
    /// ```
    /// use std::time::Duration;
    /// let opts = podstore::Options::default().default_ttl(Some(Duration::from_secs(3600)));
    /// assert_eq!(opts.view().default_ttl(), Some(Duration::from_secs(3600)));
    /// ```
    pub fn default_ttl(mut self, ttl: Option<Duration>) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// Test machinery (the `testing` feature): expiries are judged by `clock` (the system clock
    /// plus an offset the test moves) instead of the system clock.
    #[cfg(any(test, feature = "testing"))]
    pub fn testing_clock(mut self, clock: crate::expiry::MockClock) -> Self {
        self.clock = crate::expiry::Clock::mocked(clock);
        self
    }

    /// Reads back the values these options hold: `opts.view().segment_size()`.
    ///
    /// The setters take the bare names (`Options::default().segment_size(64 << 20)`), so the
    /// getters, named for the option as the Rust API guidelines ask (C-GETTER), live on this
    /// view.
    ///
    /// ```
    /// let opts = podstore::Options::default().segment_size(64 << 20);
    /// assert_eq!(opts.view().segment_size(), 64 << 20);
    /// ```
    pub fn view(&self) -> OptionsView<'_> {
        OptionsView { opts: self }
    }

    /// Test machinery (the `testing` feature): the index keeps only the top `bits` bits of each
    /// key's hash, so that keys share fingerprints (0: every key collides with every other).
    /// Reads and writes stay correct, one record read per colliding key slower.
    #[cfg(feature = "testing")]
    pub fn testing_hash_bits(mut self, bits: u32) -> Self {
        self.hash_bits = bits.min(64);
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        use crate::format::frames::{MAX_FRAME_SIZE, MIN_FRAME_SIZE};
        if self.alongside_writer && !self.read_only {
            return Err(Error::InvalidOptions(
                "alongside_writer(true) needs read_only(true)",
            ));
        }
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&self.compression_frame_size) {
            return Err(Error::InvalidOptions(
                "compression_frame_size must be between 4 KiB and 4 MiB",
            ));
        }
        if !(0.0..1.0).contains(&self.compression_min_saving) {
            return Err(Error::InvalidOptions(
                "compression_min_saving must be at least 0.0 and below 1.0",
            ));
        }
        if !(self.compaction_threshold > 0.0 && self.compaction_threshold <= 1.0) {
            return Err(Error::InvalidOptions(
                "compaction_threshold must be above 0.0 and at most 1.0",
            ));
        }
        if !(self.second_chance_budget > 0.0 && self.second_chance_budget <= 1.0) {
            return Err(Error::InvalidOptions(
                "second_chance_budget must be above 0.0 and at most 1.0",
            ));
        }
        if self.size_cap.is_some_and(|cap| cap < 2 * self.segment_size) {
            return Err(Error::InvalidOptions(
                "size_cap must be at least twice segment_size",
            ));
        }
        if self.compaction_rate == Some(0) {
            return Err(Error::InvalidOptions(
                "compaction_rate must be positive (None for no limit)",
            ));
        }
        if !((1 << 20)..=MAX_SEGMENT_SIZE).contains(&self.segment_size) {
            return Err(Error::InvalidOptions(
                "segment_size must be between 1 MiB and 64 GiB",
            ));
        }
        if !((64 << 10)..=(64 << 20)).contains(&self.write_buffer_size) {
            return Err(Error::InvalidOptions(
                "write_buffer_size must be between 64 KiB and 64 MiB",
            ));
        }
        if self.max_group_bytes == 0 || self.max_group_records == 0 {
            return Err(Error::InvalidOptions(
                "max_group_bytes and max_group_records must be positive",
            ));
        }
        if self.flush_interval.is_some_and(|d| d.is_zero()) {
            return Err(Error::InvalidOptions("flush_interval must be positive"));
        }
        self.validate_remote()
    }
}
