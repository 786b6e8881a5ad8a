//! The engines under comparison, behind one small trait.

use std::path::PathBuf;

mod files;
#[cfg(feature = "fjall")]
mod fjall;
#[cfg(feature = "heed")]
mod heed;
pub mod podstore;
mod raw;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;

pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// How an engine is opened.
#[derive(Debug, Clone)]
pub struct OpenSpec {
    /// The engine's own directory (created if missing).
    pub dir: PathBuf,
    /// true: every `put` is on stable storage when it returns. false ("bulk"): writes are
    /// durable after [`Engine::sync`].
    pub durable: bool,
    /// Bytes the workload will write at most (the `raw` engine preallocates and zeroes this much;
    /// the others ignore it).
    pub capacity: u64,
    /// The most the engine's own cache may hold, where the workload caps it (`memlimit`: half
    /// the memory limit): an engine whose default cache is larger gets this much, a smaller
    /// default is kept; `None`: the engine's default. podstore: `Options::cache_capacity`
    /// (its default: `Options::default()`'s); fjall: the block cache (`cache_size`, 32 MiB by
    /// default); redb: `Builder::set_cache_size` (1 GiB by default). LMDB has no cache of its
    /// own (the page cache through its memory map is its cache).
    pub cache_cap: Option<u64>,
    /// The workload measures reads after a cold open (`get --cache cold`, `range`, `mixed`,
    /// `reopen`): an engine that fills its cache from its files in the background at open does
    /// not, so that neither its reads (in `/proc/self/io`, the process's counters) nor the
    /// values it kept count in the row. podstore: `Options::warm_cache(false)` (on by default:
    /// the warm restart), unless `compare run --warm-cache` sets it. The others have no such
    /// thread.
    pub cold: bool,
}

/// One key-value engine. Every method takes `&self` and may be called from many threads.
pub trait Engine: Send + Sync {
    /// Inserts `key`. Durable on return when opened with `durable`.
    fn put(&self, key: &[u8], value: &[u8]) -> Res<()>;

    /// Inserts many keys, for loading data sets: one write transaction where the engine has
    /// transactions, else a loop of puts.
    fn put_batch(&self, items: &[(Vec<u8>, &[u8])]) -> Res<()> {
        for (k, v) in items {
            self.put(k, v)?;
        }
        Ok(())
    }

    /// Makes every earlier write durable.
    fn sync(&self) -> Res<()>;

    /// After loading a data set: moves what the engine still holds in memory to its on-disk
    /// form, as a data set larger than its memory buffers would be (fjall: flush the memtable to
    /// tables and blob files). Others: nothing.
    fn settle(&self) -> Res<()> {
        Ok(())
    }

    /// The whole value of `key`, copied into a new vector.
    fn get(&self, key: &[u8]) -> Res<Option<Vec<u8>>>;

    /// Bytes `off..off + len` of the value of `key`, copied into a new vector.
    fn get_range(&self, key: &[u8], off: u64, len: u64) -> Res<Option<Vec<u8>>>;

    /// The keys that start with `prefix`, in order, where the engine lists by prefix (`None`:
    /// not measured for it).
    fn prefix(&self, _prefix: &[u8]) -> Option<Res<Vec<Vec<u8>>>> {
        None
    }

    /// The engine's own figures after a run, for the run's line (podstore: its read cache's
    /// hits and misses, what the warm-up kept); `None` for engines that give none.
    fn figures(&self) -> Option<serde_json::Value> {
        None
    }

    /// Flushes and closes.
    fn close(self: Box<Self>) -> Res<()>;

    /// Closes, runs `between` (to drop the page cache), and opens again: the engine's own
    /// caches start empty. `raw` keeps its in-memory index.
    fn reopen(self: Box<Self>, spec: &OpenSpec, between: &mut dyn FnMut()) -> Res<Box<dyn Engine>>;
}

/// Every engine this build knows, in report order.
pub const ALL: &[&str] = &[
    "podstore",
    "podstore-buffered",
    "fjall",
    "redb",
    "heed",
    "rocksdb",
    "files",
    "raw",
];

/// Whether `name` was compiled in (the fjall, redb, heed and rocksdb engines are cargo
/// features; rocksdb is off by default).
pub fn available(name: &str) -> bool {
    matches!(name, "podstore" | "podstore-buffered" | "files" | "raw")
        || (name == "fjall" && cfg!(feature = "fjall"))
        || (name == "redb" && cfg!(feature = "redb"))
        || (name == "heed" && cfg!(feature = "heed"))
        || (name == "rocksdb" && cfg!(feature = "rocksdb"))
}

pub fn open(name: &str, spec: &OpenSpec) -> Res<Box<dyn Engine>> {
    std::fs::create_dir_all(&spec.dir)?;
    match name {
        "podstore" => Ok(Box::new(podstore::Pod::open(
            spec,
            ::podstore::IoMode::Direct,
        )?)),
        "podstore-buffered" => Ok(Box::new(podstore::Pod::open(
            spec,
            ::podstore::IoMode::Buffered,
        )?)),
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall::Fjall::open(spec)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(redb::Redb::open(spec)?)),
        #[cfg(feature = "heed")]
        "heed" => Ok(Box::new(heed::Heed::open(spec)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocksdb::Rocks::open(spec)?)),
        "files" => Ok(Box::new(files::Files::open(spec)?)),
        "raw" => Ok(Box::new(raw::Raw::open(spec)?)),
        other if ALL.contains(&other) => {
            Err(format!("engine {other} was not compiled in (cargo feature {other})").into())
        }
        other => Err(format!("unknown engine {other:?}; known: {}", ALL.join(", ")).into()),
    }
}

/// Which workloads an engine takes part in, and why not when it does not.
pub fn skip_reason(engine: &str, workload: &str) -> Option<&'static str> {
    match (engine, workload) {
        ("raw", "ycsb") => Some(
            "raw is a floor for single operations: it preallocates and zeroes a file as large as \
             every write a run will make, and a workload mix is not what it measures",
        ),
        ("raw", "reopen") => Some("raw keeps its index in memory only: there is nothing to reopen"),
        ("files", "reopen") => Some(
            "files has no index of its own (the file system's directory is the index): opening \
             it is opening a directory",
        ),
        ("raw", "memlimit") => Some(
            "raw is a floor for single operations (see ycsb); the device's floor in this mode is \
             fio's random-read rate",
        ),
        ("files", "memlimit") => Some(
            "one file per value would be millions of files of 1 KiB in one directory (an inode \
             and a 4 KiB block each): a file-system benchmark, not a store's",
        ),
        ("rocksdb", "memlimit") => Some(
            "not written yet for this mode: its block cache is not set to half the limit (the \
             rocksdb feature takes 20-40 minutes to build on the 2-core machine)",
        ),
        _ => None,
    }
}

/// podstore's `Options::default()` as this build has it (Debug form), for the report.
pub fn podstore_defaults() -> String {
    format!("{:?}", ::podstore::Options::default())
}

/// How each engine is configured, word for word, for the report.
pub fn settings(name: &str) -> &'static str {
    match name {
        "podstore" => {
            "podstore (this repository), `Options::default().io_mode(IoMode::Direct)`, O_DIRECT \
             segment I/O; the defaults it builds with are listed below. Durable: \
             `Durability::Sync` (on stable storage before `put` returns; concurrent puts are \
             group-committed). Bulk: `Durability::Buffered`, one `put` per value, then `flush()`. \
             Range reads: `get_range`."
        }
        "podstore-buffered" => {
            "podstore as above with `IoMode::Buffered`: the same format through the page cache."
        }
        "fjall" => {
            "fjall 3 (LSM tree) with defaults (32 MiB block cache, 64 MiB memtables, 512 MiB \
             journal limit, LZ4 journal compression for values ≥ 4 KiB, min(cores, 4) worker \
             threads), one keyspace with key-value separation `KvSeparationOptions::default()` \
             (values ≥ 1 KiB go to blob files, 64 MiB blob files, LZ4 blob compression). Durable: \
             `insert` then `Database::persist(PersistMode::SyncData)` per put (no group commit: \
             each writer syncs the journal). Bulk: no persist, then `persist(SyncAll)`. Range \
             reads: whole `get`, then slice (fjall has no partial value read). In `memlimit` \
             (memory-capped): its 32 MiB block cache kept (under the cap), journals bounded at \
             a quarter of the cap (`max_journaling_size`, at least 64 MiB), which bounds the memtables \
             waiting for their flush."
        }
        "redb" => {
            "redb 4 with defaults (1 GiB cache), one table `&[u8] → &[u8]`. Durable: one write \
             transaction per put with `Durability::Immediate`. Bulk: `Durability::None` per put \
             (or one transaction per batch when loading), then an empty `Immediate` commit. \
             Range reads: whole `get`, then slice. In `memlimit` (memory-capped): cache capped \
             at half the limit, every loading batch committed `Immediate`, and every 1 000th \
             bulk put too (a non-durable commit keeps what it wrote and freed in memory until a \
             durable one)."
        }
        "heed" => {
            "heed 0.23 (LMDB, mdb.master) with a 64 GiB map, 512 reader slots, default flags \
             (durable commits: data and meta page synced). Durable: one write transaction per put. \
             Bulk: environment opened with `MDB_NOSYNC` (one transaction per batch when loading), \
             then `mdb_env_sync(force)`. Reads go through the memory map with LMDB's default \
             readahead; range reads copy only the slice, so only its pages fault in. In \
             `memlimit` (memory-capped): `MDB_NORDAHEAD`, as LMDB recommends for a database \
             larger than RAM."
        }
        "rocksdb" => {
            "RocksDB 10 (crate `rocksdb` 0.25, cargo feature `rocksdb`, off by default) with \
             BlobDB: `enable_blob_files`, `min_blob_size` 1 KiB (values ≥ 1 KiB go to blob \
             files; default 256 MiB blob files), no compression (SST or blob), direct I/O for \
             reads (`use_direct_reads`) and for flushes and compactions, \
             `increase_parallelism(2)`, otherwise defaults (64 MiB memtable, 8 MiB block cache). \
             Durable: `put` with `WriteOptions::set_sync(true)` (the WAL, written through the page \
             cache, is synced before `put` returns; concurrent writers are group-committed by \
             RocksDB's write groups). Bulk: `sync(false)` (one `WriteBatch` per batch when \
             loading), then `flush_wal(true)`. Range reads: whole `get_pinned`, then slice \
             (BlobDB reads the whole blob)."
        }
        "files" => {
            "one file per value in one directory, named by the hex key: `openat(dir, \".\", \
             O_TMPFILE|O_WRONLY)`, write, `fdatasync`, `linkat(/proc/self/fd/N, name, \
             AT_SYMLINK_FOLLOW)`, then `fsync(dir)` so the name is durable too (durable mode; an \
             existing name is replaced through a temporary name and `renameat`). Bulk: no syncs, \
             then `syncfs`. Reads: `openat` + `fstat` + `pread`."
        }
        "raw" => {
            "the floor: one preallocated file whose blocks were written with zeros and synced \
             before timing; each value is padded to 4 KiB and written with one O_DIRECT `pwrite` \
             at the next free offset (an atomic counter), then `fdatasync` (durable mode; bulk: \
             one fdatasync at the end). No record format, no checksums, index in memory only. \
             Reads: one aligned O_DIRECT `pread` of the blocks holding the range."
        }
        _ => "unknown",
    }
}

pub(crate) fn hex(key: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(key.len() * 2);
    for b in key {
        let _ = write!(s, "{b:02x}");
    }
    s
}
