//! fjall (LSM tree) with key-value separation.

use fjall::{Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, PersistMode};

use super::{Engine, OpenSpec, Res};

/// fjall's default block cache (`Config::cache`: 32 MiB in fjall 3).
const DEFAULT_CACHE: u64 = 32 << 20;

/// The least `max_journaling_size` fjall accepts.
const MIN_JOURNALING: u64 = 64 << 20;

pub struct Fjall {
    db: Database,
    ks: Keyspace,
    durable: bool,
}

impl Fjall {
    pub fn open(spec: &OpenSpec) -> Res<Fjall> {
        let mut builder = Database::builder(&spec.dir);
        if let Some(cap) = spec.cache_cap {
            if cap < DEFAULT_CACHE {
                builder = builder.cache_size(cap);
            }
            // A memory-capped run (`memlimit`): fjall does not bound its memtables by default,
            // only its journals (512 MiB), and memtables waiting for their flush are in memory
            // until then: a 4 GiB load under a 1 GiB limit was OOM-killed within a minute.
            // The journal bound (RocksDB's max_total_wal_size) at a quarter of the cap bounds
            // them.
            builder = builder.max_journaling_size((cap / 4).max(MIN_JOURNALING));
        }
        let db = builder.open()?;
        let ks = db.keyspace("blobs", || {
            KeyspaceCreateOptions::default()
                .with_kv_separation(Some(KvSeparationOptions::default()))
        })?;
        Ok(Fjall {
            db,
            ks,
            durable: spec.durable,
        })
    }
}

impl Engine for Fjall {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        self.ks.insert(key, value)?;
        if self.durable {
            self.db.persist(PersistMode::SyncData)?;
        }
        Ok(())
    }

    fn sync(&self) -> Res<()> {
        Ok(self.db.persist(PersistMode::SyncAll)?)
    }

    fn settle(&self) -> Res<()> {
        // A doc(hidden) fjall API: rotates the memtable and waits for its flush.
        Ok(self.ks.rotate_memtable_and_wait()?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.ks.get(key)?.map(|v| v.to_vec()))
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        let Some(v) = self.ks.get(key)? else {
            return Ok(None);
        };
        let end = off + len;
        if end > v.len() as u64 {
            return Err(format!("range {off}+{len} outside a value of {} bytes", v.len()).into());
        }
        Ok(Some(v[off as usize..end as usize].to_vec()))
    }

    fn close(self: Box<Self>) -> Res<()> {
        self.db.persist(PersistMode::SyncAll)?;
        drop(self.ks);
        drop(self.db);
        Ok(())
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.close()?;
        between();
        Ok(Box::new(Fjall::open(spec)?))
    }
}
