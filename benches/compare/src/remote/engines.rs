//! The two engines behind one small interface, each on the same `Arc<dyn ObjectStore>`.
//!
//! - podstore: a `Store` with `Options::remote` (podstore-remote's `ObjectStoreRemote`, its
//!   own runtime of 2 threads). A write is one `Batch` with `Durability::Buffered` (the
//!   local log's fdatasync skipped: the durability asked for is the remote's, as SlateDB's;
//!   engine `podstore-sync` keeps the default `Sync`, podstore's local acknowledgement, to
//!   show its cost), made durable in the remote by `Store::flush_remote` (the active segment
//!   sealed and uploaded, a manifest created; concurrent calls share flushes). No background remote flush
//!   (`remote_flush_interval(None)`). Cold: a restore on an empty directory with
//!   `remote_local_budget(Some(0))` and `cache_capacity(0)`: footers local, data in the remote
//!   only, no read cache.
//! - SlateDB: a `Db` whose calls run on a runtime of 2 threads (`block_on`). A write is one
//!   `WriteBatch` (`Db::write`), made durable in the remote by `Db::flush` (the WAL written to
//!   an object at once, rather than waiting up to `flush_interval`, 100 ms, as
//!   `WriteHandle::await_durable` would). Its compactor and garbage collector are off (as
//!   podstore's compaction never runs here: the counts are the reads' and writes' own).
//!   Cold: the memtable flushed to an L0 SST and the `Db` closed, then a new `Db` opened on
//!   the same path: its block and metadata caches (the default in-memory `SplitCache`) start
//!   empty and no object-store disk cache is configured. SlateDB has no range read: a value
//!   that is read by ranges is stored in chunks of 64 KiB under keys `<key>/<chunk>` and a
//!   range reads the chunks it touches.

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use podstore::{Batch, Durability, Options, Store};
use podstore_remote::ObjectStoreRemote;
use slatedb::config::{FlushOptions, FlushType, Settings};

/// The chunk size of a value SlateDB is asked to read by ranges.
pub const SLATE_CHUNK: u64 = 64 << 10;

pub trait Engine {
    /// Writes `items` as one batch.
    fn write(&self, items: &[(Vec<u8>, &[u8])]) -> Result<(), String>;
    /// Makes every earlier write durable in the remote.
    fn sync_remote(&self) -> Result<(), String>;
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
    /// Writes a value that is read by ranges (SlateDB: in chunks, in batches of 1 MiB).
    fn put_ranged(&self, key: &[u8], value: &[u8]) -> Result<(), String>;
    fn get_range(&self, key: &[u8], start: u64, len: u64) -> Result<Vec<u8>, String>;
}

pub struct Pod {
    pub store: Store,
    /// Batches written with `Durability::Sync` (fdatasync of the local log before the remote
    /// flush: podstore's own acknowledgement) rather than `Buffered` (durable only by the
    /// remote flush, as SlateDB's writes are).
    pub sync_writes: bool,
}

impl Pod {
    /// Opens (or restores, on an empty directory) a store on `prefix`; `cold`: the local disk
    /// keeps footers only and there is no read cache.
    pub fn open(
        dir: &Path,
        objects: &Arc<dyn ObjectStore>,
        prefix: &str,
        cold: bool,
    ) -> Result<Pod, String> {
        let remote = ObjectStoreRemote::new(objects.clone()).map_err(|e| e.to_string())?;
        let mut opts = Options::default();
        if cold {
            opts = opts.cache_capacity(0).warm_cache(false);
        }
        opts = opts
            .remote(Arc::new(remote), prefix)
            .remote_flush_interval(None);
        if cold {
            opts = opts.remote_local_budget(Some(0));
        }
        let store = Store::open_with(dir, opts).map_err(|e| format!("podstore open: {e}"))?;
        Ok(Pod {
            store,
            sync_writes: false,
        })
    }
}

impl Engine for Pod {
    fn write(&self, items: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut batch = Batch::new();
        for (k, v) in items {
            batch.put(k, v);
        }
        if !self.sync_writes {
            batch.durability(Durability::Buffered);
        }
        self.store.write(&batch).map_err(|e| e.to_string())
    }

    fn sync_remote(&self) -> Result<(), String> {
        self.store
            .flush_remote()
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.store.get(key).map_err(|e| e.to_string())
    }

    fn put_ranged(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.store
            .put(key, value)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn get_range(&self, key: &[u8], start: u64, len: u64) -> Result<Vec<u8>, String> {
        self.store
            .get_range(key, start..start + len)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "range: no such key".to_string())
    }
}

pub struct Slate {
    pub db: slatedb::Db,
    rt: Arc<tokio::runtime::Runtime>,
}

impl Slate {
    pub fn open(
        rt: &Arc<tokio::runtime::Runtime>,
        objects: &Arc<dyn ObjectStore>,
        path: &str,
    ) -> Result<Slate, String> {
        let settings = Settings {
            compactor_options: None,
            garbage_collector_options: None,
            ..Settings::default()
        };
        let db = rt
            .block_on(
                slatedb::Db::builder(path.to_string(), objects.clone())
                    .with_settings(settings)
                    .build(),
            )
            .map_err(|e| format!("slatedb open: {e}"))?;
        Ok(Slate { db, rt: rt.clone() })
    }

    /// Flushes the memtable to an L0 SST (so that a reopen reads SSTs, not a replayed WAL)
    /// and closes.
    pub fn close(self) -> Result<(), String> {
        self.rt
            .block_on(async {
                self.db
                    .flush_with_options(FlushOptions {
                        flush_type: FlushType::MemTable,
                    })
                    .await?;
                self.db.close().await
            })
            .map_err(|e| format!("slatedb close: {e}"))
    }
}

fn chunk_key(key: &[u8], chunk: u64) -> Vec<u8> {
    let mut k = key.to_vec();
    k.extend_from_slice(format!("/{chunk:06}").as_bytes());
    k
}

impl Engine for Slate {
    fn write(&self, items: &[(Vec<u8>, &[u8])]) -> Result<(), String> {
        let mut batch = slatedb::WriteBatch::new();
        for (k, v) in items {
            batch.put(k, v);
        }
        self.rt
            .block_on(self.db.write(batch))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn sync_remote(&self) -> Result<(), String> {
        self.rt.block_on(self.db.flush()).map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.rt
            .block_on(self.db.get(key))
            .map(|v| v.map(|b| b.to_vec()))
            .map_err(|e| e.to_string())
    }

    fn put_ranged(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let chunks: Vec<(Vec<u8>, &[u8])> = value
            .chunks(SLATE_CHUNK as usize)
            .enumerate()
            .map(|(i, c)| (chunk_key(key, i as u64), c))
            .collect();
        for batch in chunks.chunks(16) {
            self.write(batch)?;
        }
        Ok(())
    }

    fn get_range(&self, key: &[u8], start: u64, len: u64) -> Result<Vec<u8>, String> {
        let (first, last) = (start / SLATE_CHUNK, (start + len - 1) / SLATE_CHUNK);
        let mut out = Vec::with_capacity(len as usize);
        for chunk in first..=last {
            let bytes = self
                .get(&chunk_key(key, chunk))?
                .ok_or_else(|| format!("range: no chunk {chunk}"))?;
            let base = chunk * SLATE_CHUNK;
            let from = start.max(base) - base;
            let to = (start + len).min(base + bytes.len() as u64) - base;
            out.extend_from_slice(&bytes[from as usize..to as usize]);
        }
        Ok(out)
    }
}
