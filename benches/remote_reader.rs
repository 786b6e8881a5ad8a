//! What a `RemoteReader` costs (issue 38, readers): its open on an empty cache and its
//! refreshes, in requests, bytes read from the remote and time, for a store of 10 000 values of
//! 4 KiB (log segments of 8 MiB) and 100 of 1 MiB (a blob file each), on the in-memory remote
//! of the `testing` feature, with no latency and with 20 ms added to every request (the order
//! of S3's first byte). docs/benchmarks.md, "Remote tier: readers (issue 38)".
//!
//! `cargo bench --bench remote_reader`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use podstore::remote::{MemoryRemote, ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError};
use podstore::{Options, RemoteReader, Store};

/// A remote that counts requests and bytes read, and waits `latency` before each request.
#[derive(Debug)]
struct Counted {
    inner: Arc<MemoryRemote>,
    latency: Duration,
    lists: AtomicU64,
    gets: AtomicU64,
    bytes: AtomicU64,
    writes: AtomicU64,
}

impl Counted {
    fn wait(&self) {
        if !self.latency.is_zero() {
            std::thread::sleep(self.latency);
        }
    }

    fn counts(&self) -> [u64; 4] {
        [&self.lists, &self.gets, &self.bytes, &self.writes].map(|c| c.load(Ordering::SeqCst))
    }
}

impl Remote for Counted {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.put(name, body)
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.put_if_absent(name, bytes)
    }

    fn get_range(&self, name: &str, range: std::ops::Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.wait();
        let got = self.inner.get_range(name, range)?;
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.bytes.fetch_add(got.len() as u64, Ordering::SeqCst);
        Ok(got)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.wait();
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix)
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.delete(name)
    }
}

fn main() -> podstore::Result<()> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let memory = Arc::new(MemoryRemote::new());
    let writer_opts = Options::default()
        .segment_size(8 << 20)
        .background_compaction(false)
        .remote(memory.clone(), "bench")
        .remote_flush_interval(None);
    let store = Store::open_with(dir.path().join("writer"), writer_opts)?;
    let small = 10_000u64;
    for k in 0..small {
        store.put(format!("s{k:06}"), vec![(k % 251) as u8; 4096])?;
    }
    for k in 0..100u64 {
        store.put(format!("l{k:03}"), vec![(k % 251) as u8; 1 << 20])?;
    }
    let flushed = store.flush_remote()?;
    let stored = store.stats().disk_bytes;
    println!(
        "store: {} files, {stored} B; 10 000 values of 4 KiB, 100 of 1 MiB",
        flushed.files
    );
    println!(
        "| latency | step | files named | files read | LISTs | GETs | bytes read | % of stored | writes | time |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (run, latency) in [Duration::ZERO, Duration::from_millis(20)]
        .into_iter()
        .enumerate()
    {
        let remote = Arc::new(Counted {
            inner: memory.clone(),
            latency,
            lists: AtomicU64::new(0),
            gets: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let opts = Options::default().remote(remote.clone(), "bench");
        let row =
            |step: &str, files: usize, read: Option<usize>, before: [u64; 4], took: Duration| {
                let after = remote.counts();
                let d: Vec<u64> = (0..4).map(|i| after[i] - before[i]).collect();
                println!(
                    "| {} ms | {step} | {files} | {} | {} | {} | {} | {:.3} % | {} | {:.1} ms |",
                    latency.as_millis(),
                    read.map_or("-".to_string(), |r| r.to_string()),
                    d[0],
                    d[1],
                    d[2],
                    100.0 * d[2] as f64 / stored as f64,
                    d[3],
                    took.as_secs_f64() * 1000.0
                );
            };
        let before = remote.counts();
        let began = Instant::now();
        let reader = RemoteReader::open(dir.path().join(format!("reader-{run}")), opts)?;
        row(
            "open (empty cache)",
            flushed.files,
            None,
            before,
            began.elapsed(),
        );

        let before = remote.counts();
        let began = Instant::now();
        let r = reader.refresh()?;
        row(
            "refresh, nothing new",
            r.files,
            Some(r.files_downloaded),
            before,
            began.elapsed(),
        );

        for k in 0..100u64 {
            store.put(format!("s{:06}", k * 97), vec![run as u8; 4096])?;
        }
        store.flush_remote()?;
        let before = remote.counts();
        let began = Instant::now();
        let r = reader.refresh()?;
        row(
            "refresh, 100 overwrites",
            r.files,
            Some(r.files_downloaded),
            before,
            began.elapsed(),
        );

        for k in 0..small / 2 {
            store.put(format!("s{k:06}"), vec![7 + run as u8; 4096])?;
        }
        store.compact()?;
        store.flush_remote()?;
        let before = remote.counts();
        let began = Instant::now();
        let r = reader.refresh()?;
        row(
            "refresh, 5 000 overwrites + compaction",
            r.files,
            Some(r.files_downloaded),
            before,
            began.elapsed(),
        );
        assert_eq!(reader.get("s000000")?, Some(vec![7 + run as u8; 4096]));
    }
    Ok(())
}
