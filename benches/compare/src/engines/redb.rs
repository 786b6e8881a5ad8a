//! redb (copy-on-write B-tree), one write transaction per put.

use redb::{Database, Durability, ReadableDatabase, TableDefinition};

use super::{Engine, OpenSpec, Res};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("blobs");

pub struct Redb {
    db: Database,
    durable: bool,
}

impl Redb {
    pub fn open(spec: &OpenSpec) -> Res<Redb> {
        let mut builder = Database::builder();
        if let Some(bytes) = spec.cache_bytes {
            builder.set_cache_size(usize::try_from(bytes)?);
        }
        let db = builder.create(spec.dir.join("redb"))?;
        // Create the table, so that readers never find it missing.
        let tx = db.begin_write()?;
        tx.open_table(TABLE)?;
        tx.commit()?;
        Ok(Redb {
            db,
            durable: spec.durable,
        })
    }

    fn durability(&self) -> Durability {
        if self.durable {
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
        tx.set_durability(self.durability())?;
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
