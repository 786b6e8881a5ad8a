//! [`OptionsView`]: the values an [`Options`] holds, read back by the names of their setters.

use std::time::Duration;

use super::{Admission, Compression, Durability, IoMode, Options, RecoveryMode};

/// The values an [`Options`] holds, read back by name: `opts.view().cache_capacity()`.
///
/// Returned by [`Options::view`]. Each getter is named for its option; the setter of the same
/// name is on [`Options`] (`Options::default().cache_capacity(256 << 20)`).
///
/// ```
/// use podstore::{Durability, Options};
/// let opts = Options::default().durability(Durability::Buffered).cache_capacity(0);
/// let view = opts.view();
/// assert_eq!(view.durability(), Durability::Buffered);
/// assert_eq!(view.cache_capacity(), Some(0));
/// assert_eq!(view.segment_size(), 256 << 20, "the default");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OptionsView<'a> {
    pub(super) opts: &'a Options,
}

impl OptionsView<'_> {
    /// The value set by [`Options::segment_size`].
    pub fn segment_size(&self) -> u64 {
        self.opts.segment_size
    }

    /// The value set by [`Options::io_mode`].
    pub fn io_mode(&self) -> IoMode {
        self.opts.io_mode
    }

    /// The value set by [`Options::durability`].
    pub fn durability(&self) -> Durability {
        self.opts.durability
    }

    /// The value set by [`Options::write_buffer_size`].
    pub fn write_buffer_size(&self) -> usize {
        self.opts.write_buffer_size
    }

    /// The value set by [`Options::max_group_bytes`].
    pub fn max_group_bytes(&self) -> u64 {
        self.opts.max_group_bytes
    }

    /// The value set by [`Options::max_group_records`].
    pub fn max_group_records(&self) -> usize {
        self.opts.max_group_records
    }

    /// The value set by [`Options::large_value_threshold`].
    pub fn large_value_threshold(&self) -> u64 {
        self.opts.large_value_threshold
    }

    /// The value set by [`Options::flush_interval`].
    pub fn flush_interval(&self) -> Option<Duration> {
        self.opts.flush_interval
    }

    /// The value set by [`Options::compression`].
    pub fn compression(&self) -> Compression {
        self.opts.compression
    }

    /// The value set by [`Options::compression_frame_size`].
    pub fn compression_frame_size(&self) -> u32 {
        self.opts.compression_frame_size
    }

    /// The value set by [`Options::compression_min_saving`].
    pub fn compression_min_saving(&self) -> f64 {
        self.opts.compression_min_saving
    }

    /// The value set by [`Options::compaction_threshold`].
    pub fn compaction_threshold(&self) -> f64 {
        self.opts.compaction_threshold
    }

    /// The value set by [`Options::size_cap`].
    pub fn size_cap(&self) -> Option<u64> {
        self.opts.size_cap
    }

    /// The value set by [`Options::second_chance`].
    pub fn second_chance(&self) -> bool {
        self.opts.second_chance
    }

    /// The value set by [`Options::second_chance_budget`].
    pub fn second_chance_budget(&self) -> f64 {
        self.opts.second_chance_budget
    }

    /// The value set by [`Options::admission`].
    pub fn admission(&self) -> Admission {
        self.opts.admission
    }

    /// The value set by [`Options::background_compaction`].
    pub fn background_compaction(&self) -> bool {
        self.opts.background_compaction
    }

    /// The value set by [`Options::compaction_rate`].
    pub fn compaction_rate(&self) -> Option<u64> {
        self.opts.compaction_rate
    }

    /// The value set by [`Options::create`].
    pub fn create(&self) -> bool {
        self.opts.create
    }

    /// The value set by [`Options::allow_foreign_files`].
    pub fn allow_foreign_files(&self) -> bool {
        self.opts.allow_foreign_files
    }

    /// The value set by [`Options::read_only`].
    pub fn read_only(&self) -> bool {
        self.opts.read_only
    }

    /// The value set by [`Options::alongside_writer`].
    pub fn alongside_writer(&self) -> bool {
        self.opts.alongside_writer
    }

    /// The value set by [`Options::recovery_mode`].
    pub fn recovery_mode(&self) -> RecoveryMode {
        self.opts.recovery_mode
    }

    /// The value set by [`Options::cache_capacity`]; `None` (the default): sized from the
    /// memory available when the store is opened ([`Stats::cache_capacity`] says to what).
    ///
    /// [`Stats::cache_capacity`]: crate::Stats::cache_capacity
    pub fn cache_capacity(&self) -> Option<u64> {
        self.opts.cache_capacity
    }

    /// The value set by [`Options::warm_cache`].
    pub fn warm_cache(&self) -> bool {
        self.opts.warm_cache
    }

    /// The value set by [`Options::default_ttl`].
    pub fn default_ttl(&self) -> Option<Duration> {
        self.opts.default_ttl
    }

    /// The prefix given to [`Options::remote`] (`None`: no remote).
    ///
    /// ```
    /// // In memory (the `testing` feature); podstore_remote::ObjectStoreRemote for S3 & co.
    /// let remote = std::sync::Arc::new(podstore::remote::MemoryRemote::new());
    /// let opts = podstore::Options::default().remote(remote, "db/one");
    /// assert_eq!(opts.view().remote_prefix(), Some("db/one"));
    /// assert_eq!(opts.view().remote_upload_threads(), Some(4));
    /// ```
    pub fn remote_prefix(&self) -> Option<&str> {
        self.opts.remote.as_ref().map(|r| r.prefix.as_str())
    }

    /// The value set by [`Options::remote_flush_interval`] (`None` also without a remote).
    pub fn remote_flush_interval(&self) -> Option<Duration> {
        self.opts.remote.as_ref().and_then(|r| r.flush_interval)
    }

    /// The value set by [`Options::remote_upload_threads`] (`None`: no remote).
    pub fn remote_upload_threads(&self) -> Option<usize> {
        self.opts.remote.as_ref().map(|r| r.upload_threads)
    }

    /// The value set by [`Options::remote_retries`] (`None`: no remote).
    pub fn remote_retries(&self) -> Option<u32> {
        self.opts.remote.as_ref().map(|r| r.attempts)
    }
}
