//! podstore, with O_DIRECT or buffered I/O.

use std::sync::OnceLock;

use podstore::{Durability, IoMode, Options, Store};

use super::{Engine, OpenSpec, Res};

/// `compare run --write-buffer SIZE`: podstore's `Options::write_buffer_size` for this run
/// (default: podstore's default), for experiments; the suite never sets it.
pub static WRITE_BUFFER: OnceLock<u64> = OnceLock::new();

/// `compare run --cache-capacity SIZE`: podstore's `Options::cache_capacity` for this run
/// (0 turns the read cache off; default: podstore's default), for experiments such as the
/// cost of the cache on cold reads and puts; the suite never sets it.
pub static CACHE_CAPACITY: OnceLock<u64> = OnceLock::new();

/// `compare run --warm-cache 0|1`: podstore's `Options::warm_cache` for this run (default:
/// podstore's default, on, except in the cold workloads, `OpenSpec::cold`: off), to measure
/// what the warm restart does; the suite never sets it.
pub static WARM_CACHE: OnceLock<u64> = OnceLock::new();

/// The experiment flags above: flag, JSON field, where the value goes.
pub static TUNING: [(&str, &str, &OnceLock<u64>); 3] = [
    ("write-buffer", "write_buffer", &WRITE_BUFFER),
    ("cache-capacity", "cache_capacity", &CACHE_CAPACITY),
    ("warm-cache", "warm_cache", &WARM_CACHE),
];

pub struct Pod {
    store: Store,
    mode: IoMode,
}

impl Pod {
    pub fn open(spec: &OpenSpec, mode: IoMode) -> Res<Pod> {
        let durability = if spec.durable {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        let mut opts = Options::default().io_mode(mode).durability(durability);
        if let Some(&size) = WRITE_BUFFER.get() {
            opts = opts.write_buffer_size(size as usize);
        }
        // Capped, never raised. Unset, podstore sizes its cache at open from the memory
        // available, a cgroup's limit included: half of it, less the index (within the cap).
        if let Some(cap) = spec.cache_cap
            && opts.view().cache_capacity().is_some_and(|c| c > cap)
        {
            opts = opts.cache_capacity(cap);
        }
        if let Some(&bytes) = CACHE_CAPACITY.get() {
            opts = opts.cache_capacity(bytes);
        }
        // A cold row measures reads from the disk: no warm-up fills the cache meanwhile (nor
        // counts its reads in the row's), unless the flag below asks for one.
        if spec.cold {
            opts = opts.warm_cache(false);
        }
        if let Some(&on) = WARM_CACHE.get() {
            opts = opts.warm_cache(on != 0);
        }
        let store = Store::open_with(&spec.dir, opts)?;
        if store.io_mode() != mode {
            return Err(format!("asked for {mode:?}, store runs {:?}", store.io_mode()).into());
        }
        Ok(Pod { store, mode })
    }
}

impl Engine for Pod {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        self.store.put(key, value)?;
        Ok(())
    }

    fn prefix(&self, prefix: &[u8]) -> Option<Res<Vec<Vec<u8>>>> {
        Some(
            self.store
                .prefix(prefix)
                .collect::<podstore::Result<Vec<_>>>()
                .map_err(Into::into),
        )
    }

    fn sync(&self) -> Res<()> {
        Ok(self.store.flush()?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.store.get(key)?)
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        Ok(self.store.get_range(key, off..off + len)?)
    }

    fn figures(&self) -> Option<serde_json::Value> {
        let s = self.store.stats();
        Some(serde_json::json!({
            "cache_hits": s.cache_hits,
            "cache_misses": s.cache_misses,
            "cache_warming": s.cache_warming,
            "cache_warmed_values": s.cache_warmed_values,
            "cache_warm_read_bytes": s.cache_warm_read_bytes,
        }))
    }

    fn close(self: Box<Self>) -> Res<()> {
        Ok(self.store.close()?)
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        let mode = self.mode;
        self.close()?;
        between();
        Ok(Box::new(Pod::open(spec, mode)?))
    }
}
