//! redb (copy-on-write B-tree), one write transaction per put.

use std::sync::atomic::{AtomicU64, Ordering};

use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::{Engine, OpenSpec, Res};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blobs");

/// redb's default cache (`Builder::new`: 1 GiB in redb 4).
const DEFAULT_CACHE: u64 = 1 << 30;

/// In a memory-capped run, the most non-durable puts between two durable commits.
const DURABLE_EVERY: u64 = 1000;

pub struct Redb {
    db: Database,
    durable: bool,
    /// A memory-capped run (`OpenSpec::cache_cap`, the `memlimit` workload): redb keeps what a
    /// non-durable commit wrote and freed in memory until a durable commit, which a 4 GiB load
    /// of non-durable batches grew past a 1 GiB limit (OOM-killed). So loading batches commit
    /// durably and every [`DURABLE_EVERY`]th non-durable put too.
    bounded: bool,
    since_durable: AtomicU64,
}

impl Redb {
    pub fn open(spec: &OpenSpec) -> Res<Redb> {
        let mut builder = Database::builder();
        if let Some(cap) = spec.cache_cap
            && cap < DEFAULT_CACHE
        {
            builder.set_cache_size(usize::try_from(cap)?);
        }
        let db = builder.create(spec.dir.join("redb"))?;
        // Create the table, so that readers never find it missing.
        let tx = db.begin_write()?;
        tx.open_table(TABLE)?;
        tx.commit()?;
        Ok(Redb {
            db,
            durable: spec.durable,
            bounded: spec.cache_cap.is_some(),
            since_durable: AtomicU64::new(0),
        })
    }

    fn durability(&self) -> Durability {
        let due =
            self.bounded && self.since_durable.fetch_add(1, Ordering::Relaxed) + 1 >= DURABLE_EVERY;
        if due {
            self.since_durable.store(0, Ordering::Relaxed);
        }
        if self.durable || due {
            Durability::Immediate
        } else {
            Durability::None
        }
    }
}

impl Engine for Redb {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(self.durability())?;
        {
            let mut t = tx.open_table(TABLE)?;
            t.insert(key, value)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn put_batch(&self, items: &[(Vec<u8>, &[u8])]) -> Res<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(if self.bounded {
            Durability::Immediate
        } else {
            self.durability()
        })?;
        {
            let mut t = tx.open_table(TABLE)?;
            for (k, v) in items {
                t.insert(k.as_slice(), *v)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn sync(&self) -> Res<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        tx.commit()?;
        Ok(())
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(TABLE)?;
        Ok(t.get(key)?.map(|g| g.value().to_vec()))
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(TABLE)?;
        let Some(g) = t.get(key)? else {
            return Ok(None);
        };
        let v = g.value();
        let end = off + len;
        if end > v.len() as u64 {
            return Err(format!("range {off}+{len} outside a value of {} bytes", v.len()).into());
        }
        Ok(Some(v[off as usize..end as usize].to_vec()))
    }

    fn close(self: Box<Self>) -> Res<()> {
        if !self.durable {
            self.sync()?;
        }
        drop(self.db);
        Ok(())
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.close()?;
        between();
        Ok(Box::new(Redb::open(spec)?))
    }
}
