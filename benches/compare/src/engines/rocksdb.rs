//! RocksDB (LSM tree) with BlobDB (integrated blob files) and direct I/O for reads, flushes and
//! compactions. Behind the `rocksdb` cargo feature, off by default: the C++ build needs
//! libclang-dev and a long compile.

use rocksdb::{DB, DBCompressionType, Options, WriteBatch, WriteOptions};

use super::{Engine, OpenSpec, Res};

pub struct Rocks {
    db: DB,
    write: WriteOptions,
}

/// The options every run opens with (see `settings("rocksdb")`).
fn options() -> Options {
    let mut o = Options::default();
    o.create_if_missing(true);
    // Two cores: flushes and compactions on two background threads.
    o.increase_parallelism(2);
    o.set_compression_type(DBCompressionType::None);
    // BlobDB: values of 1 KiB and more go to blob files (as fjall's key-value separation).
    o.set_enable_blob_files(true);
    o.set_min_blob_size(1024);
    o.set_blob_compression_type(DBCompressionType::None);
    // Direct I/O for user reads (SST and blob files) and for flush and compaction writes. The WAL
    // is written through the page cache and synced (RocksDB has no direct-I/O WAL option).
    o.set_use_direct_reads(true);
    o.set_use_direct_io_for_flush_and_compaction(true);
    o
}

impl Rocks {
    pub fn open(spec: &OpenSpec) -> Res<Rocks> {
        let db = DB::open(&options(), &spec.dir)?;
        let mut write = WriteOptions::default();
        // Durable: the WAL is synced before `put` returns (concurrent writers share one sync:
        // RocksDB's write groups). Bulk: the WAL is written, not synced, until `sync`.
        write.set_sync(spec.durable);
        Ok(Rocks { db, write })
    }
}

impl Engine for Rocks {
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()> {
        Ok(self.db.put_opt(key, value, &self.write)?)
    }

    fn put_batch(&self, items: &[(Vec<u8>, &[u8])]) -> Res<()> {
        let mut b = WriteBatch::default();
        for (k, v) in items {
            b.put(k, v);
        }
        Ok(self.db.write_opt(b, &self.write)?)
    }

    fn sync(&self) -> Res<()> {
        Ok(self.db.flush_wal(true)?)
    }

    fn settle(&self) -> Res<()> {
        // Memtable to an SST and blob files, as a data set larger than the memtable would be.
        Ok(self.db.flush()?)
    }

    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>> {
        Ok(self.db.get_pinned(key)?.map(|v| v.to_vec()))
    }

    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>> {
        // No partial value read: the whole blob is read, then sliced.
        let Some(v) = self.db.get_pinned(key)? else {
            return Ok(None);
        };
        let end = off + len;
        if end > v.len() as u64 {
            return Err(format!("range {off}+{len} outside a value of {} bytes", v.len()).into());
        }
        Ok(Some(v[off as usize..end as usize].to_vec()))
    }

    fn close(self: Box<Self>) -> Res<()> {
        self.db.flush_wal(true)?;
        drop(self.db);
        Ok(())
    }

    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>> {
        self.close()?;
        between();
        Ok(Box::new(Rocks::open(spec)?))
    }
}
