//! The caches under comparison, behind one small trait.

use podstore::{Durability, Options, Store};

use super::CacheSpec;
use crate::engines::Res;

/// A cache: every method takes `&self` and may be called from many threads.
pub trait CacheEngine: Send + Sync {
    /// The value of `key`, if the cache holds it.
    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>>;
    /// Keeps `value` under `key` (the cache may drop it, or others, to stay within its size).
    fn insert(&self, key: &[u8], value: &[u8]) -> Res<()>;
    /// Whether the engine expires values itself ([`CacheEngine::insert_for`]); else the TTL
    /// trace checks each value's expiry as its application would (`cache::phase`).
    fn expires(&self) -> bool {
        false
    }
    /// [`CacheEngine::insert`] of a value to be forgotten after `ttl`.
    fn insert_for(&self, key: &[u8], value: &[u8], _ttl: std::time::Duration) -> Res<()> {
        self.insert(key, value)
    }
    /// The engine's own counters, for the report.
    fn stats(&self) -> serde_json::Value;
}

pub fn open(name: &str, spec: &CacheSpec) -> Res<Box<dyn CacheEngine>> {
    match name {
        "podstore" => Ok(Box::new(Pod::open(spec)?)),
        #[cfg(feature = "foyer")]
        "foyer" => Ok(Box::new(foyer::Foyer::open(spec)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb-fifo" => Ok(Box::new(rocks::RocksFifo::open(spec)?)),
        other => Err(format!(
            "no cache engine {other:?} (built: podstore{}{})",
            if cfg!(feature = "foyer") {
                ", foyer"
            } else {
                "; foyer needs --features foyer"
            },
            if cfg!(feature = "rocksdb") {
                ", rocksdb-fifo"
            } else {
                "; rocksdb-fifo needs --features rocksdb"
            }
        )
        .into()),
    }
}

/// podstore as a cache: `Options::default()` with the memory budget as its read cache, a size
/// cap of the disk capacity less one segment (the cap keeps the store within the cap plus the
/// segment being written, so the whole stays within the capacity the other engines get), and
/// buffered durability (a cache refills what a crash loses). `--second-chance` turns on
/// `Options::second_chance`; `--offer` fills misses with `Store::offer`, and `--admission` with it
/// turns on `Options::admission(Admission::SecondOffer)`.
struct Pod {
    store: Store,
    offer: bool,
    /// Offers not written (turned away, or dropped), of keys that expire and of the others.
    refused_ttl: std::sync::atomic::AtomicU64,
    refused_plain: std::sync::atomic::AtomicU64,
}

impl Pod {
    fn open(spec: &CacheSpec) -> Res<Pod> {
        // A cap makes segments a thirty-second of it (unless set): the cap is the capacity
        // less the segment such a cap of the whole capacity would take.
        let segment = Options::default()
            .size_cap(Some(spec.disk))
            .view()
            .segment_size();
        let cap = spec.disk.saturating_sub(segment);
        let mut opts = Options::default()
            .cache_capacity(spec.memory)
            .size_cap(Some(cap))
            .second_chance(spec.second_chance)
            .durability(Durability::Buffered);
        if let Some(budget) = spec.chance_budget {
            opts = opts.second_chance_budget(budget);
        }
        if spec.admission {
            opts = opts.admission(podstore::Admission::SecondOffer);
        }
        if let Some(rate) = spec.compaction_rate {
            opts = opts.compaction_rate((rate > 0).then_some(rate));
        }
        if let Some(bytes) = spec.write_buffer {
            opts = opts.write_buffer_size(bytes as usize);
        }
        Ok(Pod {
            store: Store::open_with(&spec.dir, opts)?,
            offer: spec.offer,
            refused_ttl: Default::default(),
            refused_plain: Default::default(),
        })
    }
}

impl CacheEngine for Pod {
    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.store.get(key)?)
    }

    fn insert(&self, key: &[u8], value: &[u8]) -> Res<()> {
        if self.offer {
            if self.store.offer(key, value)?.is_none() {
                self.refused_plain.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        } else {
            self.store.put(key, value)?;
        }
        Ok(())
    }

    fn expires(&self) -> bool {
        true
    }

    fn insert_for(&self, key: &[u8], value: &[u8], ttl: std::time::Duration) -> Res<()> {
        let opts = podstore::PutOptions::new().ttl(ttl);
        if self.offer {
            if self.store.offer_with(key, value, &opts)?.is_none() {
                self.refused_ttl.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        } else {
            self.store.put_with(key, value, &opts)?;
        }
        Ok(())
    }

    fn stats(&self) -> serde_json::Value {
        let s = self.store.stats();
        serde_json::json!({
            "hit_ratio": s.hit_ratio(),
            "evicted_files": s.evicted_files,
            "evicted_bytes": s.evicted_bytes,
            "second_chances": s.second_chances,
            "second_chance_bytes": s.second_chance_bytes,
            "offers_dropped": s.offers_dropped,
            "offers_not_admitted": s.offers_not_admitted,
            "disk_bytes": s.disk_bytes,
            "user_bytes_written": s.user_bytes_written,
            "compaction_bytes_written": s.compaction_bytes_written,
            "segments_compacted": s.segments_compacted,
            "expired_bytes": s.expired_bytes,
            "expired_reclaimed_bytes": s.expired_reclaimed_bytes,
            "live_bytes": s.live_bytes,
            "dead_bytes": s.dead_bytes,
            "reclaimable_bytes": s.reclaimable_bytes,
            "below_threshold_bytes": s.below_threshold_bytes,
            "expired_keys": s.expired_keys,
            "live_keys": s.live_keys,
            "offers_refused_ttl": self.refused_ttl.load(std::sync::atomic::Ordering::Relaxed),
            "offers_refused_plain": self.refused_plain.load(std::sync::atomic::Ordering::Relaxed),
        })
    }
}

#[cfg(feature = "foyer")]
mod foyer {
    //! foyer's `HybridCache` (memory, then its block engine on a file device), at its defaults
    //! but for the sizes; a tokio runtime of its own, which the calls block on.

    use ::foyer::{
        BlockEngineConfig, DeviceBuilder, FsDeviceBuilder, HybridCache, HybridCacheBuilder,
    };

    use super::{CacheEngine, CacheSpec, Res};

    pub struct Foyer {
        cache: HybridCache<Vec<u8>, Vec<u8>>,
        rt: tokio::runtime::Runtime,
    }

    impl Foyer {
        pub fn open(spec: &CacheSpec) -> Res<Foyer> {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            // Direct I/O unless asked otherwise: buffered, the page cache holds the device's
            // whole capacity beside the memory budget (see the module `cache`).
            let device = FsDeviceBuilder::new(&spec.dir)
                .with_capacity(spec.disk as usize)
                .with_direct(!spec.foyer_buffered)
                .build()?;
            let memory = spec.memory as usize;
            let cache = rt.block_on(
                HybridCacheBuilder::new()
                    .memory(memory)
                    .with_weighter(|k: &Vec<u8>, v: &Vec<u8>| k.len() + v.len())
                    .storage()
                    .with_engine_config(BlockEngineConfig::new(device))
                    .build(),
            )?;
            Ok(Foyer { cache, rt })
        }
    }

    impl CacheEngine for Foyer {
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            let e = self.rt.block_on(self.cache.get(&key.to_vec()))?;
            Ok(e.map(|e| e.value().clone()))
        }

        fn insert(&self, key: &[u8], value: &[u8]) -> Res<()> {
            // Inside the runtime: foyer hands the entry to its flushers from there.
            let _guard = self.rt.enter();
            self.cache.insert(key.to_vec(), value.to_vec());
            Ok(())
        }

        fn stats(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
    }

    impl Drop for Foyer {
        fn drop(&mut self) {
            let _ = self.rt.block_on(self.cache.close());
        }
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    //! RocksDB with FIFO compaction (the suite's RocksDB, `--features rocksdb`), as a cache:
    //! SST files are dropped oldest first once they pass the disk capacity (less two memtables,
    //! so that what is flushed stays within it); the memory budget is its block cache and its
    //! two memtables (half and a quarter each); no WAL (a cache refills what a crash loses, as
    //! podstore's `Durability::Buffered` here); no compression; direct reads; a Bloom filter per
    //! file. No expiry of its
    //! own per value (its `ttl` is per file): the TTL trace checks expiry as for foyer.

    use rocksdb::{
        BlockBasedOptions, Cache, DB, DBCompactionStyle, DBCompressionType, FifoCompactOptions,
        Options, WriteOptions,
    };

    use super::{CacheEngine, CacheSpec, Res};

    pub struct RocksFifo {
        db: DB,
        write: WriteOptions,
        // Kept alive as long as the table factory that uses it.
        _cache: Cache,
    }

    impl RocksFifo {
        pub fn open(spec: &CacheSpec) -> Res<RocksFifo> {
            let memtable = (spec.memory / 4).max(1 << 20);
            let cache = Cache::new_lru_cache((spec.memory / 2) as usize);
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            // FIFO keeps every file in level 0, so a get asks each one: a Bloom filter per file
            // (10 bits a key) answers for most without a read, as a RocksDB cache is set up. The
            // filters and indexes go in the block cache, within the memory budget.
            table.set_bloom_filter(10.0, false);
            table.set_cache_index_and_filter_blocks(true);
            table.set_pin_l0_filter_and_index_blocks_in_cache(true);
            let mut fifo = FifoCompactOptions::default();
            fifo.set_max_table_files_size(spec.disk.saturating_sub(2 * memtable));
            let mut o = Options::default();
            o.create_if_missing(true);
            o.increase_parallelism(2);
            o.set_compression_type(DBCompressionType::None);
            o.set_compaction_style(DBCompactionStyle::Fifo);
            o.set_fifo_compaction_options(&fifo);
            o.set_write_buffer_size(memtable as usize);
            o.set_max_write_buffer_number(2);
            o.set_block_based_table_factory(&table);
            o.set_use_direct_reads(true);
            o.set_use_direct_io_for_flush_and_compaction(true);
            let db = DB::open(&o, &spec.dir)?;
            let mut write = WriteOptions::default();
            write.disable_wal(true);
            Ok(RocksFifo {
                db,
                write,
                _cache: cache,
            })
        }
    }

    impl CacheEngine for RocksFifo {
        fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
            Ok(self.db.get_pinned(key)?.map(|v| v.to_vec()))
        }

        fn insert(&self, key: &[u8], value: &[u8]) -> Res<()> {
            Ok(self.db.put_opt(key, value, &self.write)?)
        }

        fn stats(&self) -> serde_json::Value {
            serde_json::Value::Null
        }
    }
}
