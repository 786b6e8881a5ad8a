//! heed (LMDB), one write transaction per put.

use heed::types::Bytes;
use heed::{CommitOrAbort, Database, Env, EnvFlags, EnvOpenOptions};

use super::{Engine, OpenSpec, Res};

pub struct Heed {
    // `db` is only a handle number; it is dropped (it has no drop glue) before `env` closes.
    db: Database<'static, Bytes, Bytes>,
    env: Env,
}

impl Heed {
    pub fn open(spec: &OpenSpec) -> Res<Heed> {
        let mut opts = EnvOpenOptions::new();
        opts.map_size(64 << 30).max_readers(512).max_dbs(1);
        let mut flags = EnvFlags::empty();
        if !spec.durable {
            flags |= EnvFlags::NO_SYNC;
        }
        if spec.cache_cap.is_some() {
            // A memory-capped run (`memlimit`): LMDB's documentation recommends MDB_NORDAHEAD
            // when the database is larger than RAM; with the kernel's readahead (8 MiB on this
            // machine's disk) each random get read 6-8 MiB under a 1 GiB limit.
            flags |= EnvFlags::NO_READ_AHEAD;
        }
        if !flags.is_empty() {
            // SAFETY: MDB_NOSYNC only weakens durability (`sync` forces a flush); MDB_NORDAHEAD
            // only advises the kernel not to read ahead.
            unsafe {
                opts.flags(flags);
            }
        }
        // SAFETY: this process is the only one that opens the directory, and nothing else
        // modifies the file while it is mapped.
        let env = unsafe { opts.open(&spec.dir)? };
        let wtxn = env.write_txn()?;
        let db = env
            .create_databases_and_commit(wtxn, |dbo, wtxn| {
                dbo.create_database::<Bytes, Bytes>(wtxn, None)
                    .map(CommitOrAbort::<_, ()>::Commit)
            })?
            .unwrap_commit();
        // SAFETY: `Database` holds a database number and an environment identifier and borrows
        // nothing; its lifetime only ties it to `env`, which this struct owns and outlives it.
        let db: Database<'static, Bytes, Bytes> = unsafe { std::mem::transmute(db) };
        Ok(Heed { db, env })
    }
}

impl Engine for Heed {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        let mut w = self.env.write_txn()?;
        self.db.put(&mut w, key, value)?;
        w.commit()?;
        Ok(())
    }

    fn put_batch(&self, items: &[(Vec<u8>, &[u8])]) -> Res<()> {
        let mut w = self.env.write_txn()?;
        for (k, v) in items {
            self.db.put(&mut w, k, v)?;
        }
        w.commit()?;
        Ok(())
    }

    fn sync(&self) -> Res<()> {
        Ok(self.env.force_sync()?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        let r = self.env.read_txn()?;
        Ok(self.db.get(&r, key)?.map(<[u8]>::to_vec))
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        let r = self.env.read_txn()?;
        let Some(v) = self.db.get(&r, key)? else {
            return Ok(None);
        };
        let end = off + len;
        if end > v.len() as u64 {
            return Err(format!("range {off}+{len} outside a value of {} bytes", v.len()).into());
        }
        Ok(Some(v[off as usize..end as usize].to_vec()))
    }

    fn close(self: Box<Self>) -> Res<()> {
        self.env.force_sync()?;
        let Heed { db, env } = *self;
        let _ = db;
        let closed = env.prepare_for_closing();
        closed.wait();
        Ok(())
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.close()?;
        between();
        Ok(Box::new(Heed::open(spec)?))
    }
}
