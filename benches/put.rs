//! The durable put matrix: value sizes × writer threads, podstore against the design it
//! replaces (one file per value via O_TMPFILE + linkat + fdatasync) and the disk's own floor
//! (one aligned O_DIRECT write + fdatasync into a pre-zeroed file, single thread).
//!
//! Each iteration runs `threads` writers that each make `per_thread` puts; divan's item and
//! byte counters then give aggregate ops/s and MiB/s.
//!
//! Run: `cargo bench --bench put` (set `PODSTORE_BENCH_DIR` to a directory on the disk to
//! measure; the default is the system temp dir). Filter with divan's arguments, e.g.
//! `cargo bench --bench put -- podstore`.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use divan::Bencher;
use divan::counter::{BytesCount, ItemsCount};
use podstore::{IoMode, Options, Store};

fn main() {
    divan::main();
}

const KIB: usize = 1024;
const SIZES: [usize; 7] = [
    KIB,
    4 * KIB,
    16 * KIB,
    64 * KIB,
    256 * KIB,
    1024 * KIB,
    4096 * KIB,
];
const THREADS: [usize; 4] = [1, 16, 64, 200];
/// Bytes written per iteration, at most (at least one put per thread).
const ITERATION_BYTES: usize = 32 << 20;
/// Puts per iteration, at most.
const ITERATION_OPS: usize = 2000;

fn per_thread(size: usize, threads: usize) -> usize {
    (ITERATION_BYTES / (size * threads))
        .min(ITERATION_OPS / threads)
        .max(1)
}

struct BenchDir(PathBuf);

impl BenchDir {
    fn new(name: &str) -> BenchDir {
        static N: AtomicU64 = AtomicU64::new(0);
        let base = std::env::var_os("PODSTORE_BENCH_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("podstore-put-{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        BenchDir(dir)
    }
}

impl Drop for BenchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

type Task = Arc<dyn Fn(usize) + Send + Sync>;

/// Writer threads kept alive across iterations, so thread start-up is not measured.
struct Crew {
    orders: Vec<Sender<Task>>,
    done: Receiver<()>,
    handles: Vec<JoinHandle<()>>,
}

impl Crew {
    fn new(n: usize) -> Crew {
        let (done_tx, done) = channel();
        let mut orders = Vec::new();
        let mut handles = Vec::new();
        for i in 0..n {
            let (tx, rx) = channel::<Task>();
            let done_tx = done_tx.clone();
            orders.push(tx);
            handles.push(std::thread::spawn(move || {
                for task in rx {
                    task(i);
                    done_tx.send(()).unwrap();
                }
            }));
        }
        Crew {
            orders,
            done,
            handles,
        }
    }

    fn run(&self, task: &Task) {
        for tx in &self.orders {
            tx.send(task.clone()).unwrap();
        }
        for _ in &self.orders {
            self.done.recv().unwrap();
        }
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.orders.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Runs `put(thread, n)` for `per_thread` puts on each of `threads` threads per iteration.
fn bench_puts(
    bencher: Bencher,
    size: usize,
    threads: usize,
    put: impl Fn(usize, u64) + Send + Sync + 'static,
) {
    let per = per_thread(size, threads);
    let crew = Crew::new(threads);
    let next = Arc::new(AtomicU64::new(0));
    let put = Arc::new(put);
    let task: Task = Arc::new(move |t| {
        for _ in 0..per {
            put(t, next.fetch_add(1, Ordering::Relaxed));
        }
    });
    bencher
        .counter(ItemsCount::new(per * threads))
        .counter(BytesCount::new(per * threads * size))
        .bench_local(|| crew.run(&task));
}

fn value(size: usize) -> Arc<Vec<u8>> {
    Arc::new((0..size).map(|i| (i * 7 + 13) as u8).collect())
}

#[divan::bench(consts = SIZES, args = THREADS, sample_count = 5, sample_size = 1)]
fn podstore<const SIZE: usize>(bencher: Bencher, threads: usize) {
    let dir = BenchDir::new("podstore");
    let store =
        Arc::new(Store::open_with(&dir.0, Options::default().io_mode(IoMode::Direct)).unwrap());
    let v = value(SIZE);
    let s = store.clone();
    bench_puts(bencher, SIZE, threads, move |_, n| {
        s.put(n.to_le_bytes(), &v[..]).unwrap();
    });
    drop(store);
}

/// One thread writing `Batch`es of `n` 1 KiB puts under new keys (each batch one durable
/// write): the cost a batch adds per put as it grows (a batch of 1 024 puts is what
/// `compare remote` writes before each remote flush).
#[divan::bench(args = [16, 256, 1024, 4096], sample_count = 5, sample_size = 1)]
fn podstore_batch(bencher: Bencher, n: usize) {
    let dir = BenchDir::new("batch");
    let store = Store::open_with(&dir.0, Options::default().io_mode(IoMode::Direct)).unwrap();
    let v = value(KIB);
    let batches = (ITERATION_OPS * 4 / n).max(1);
    let mut next = 0u64;
    bencher
        .counter(ItemsCount::new(batches * n))
        .counter(BytesCount::new(batches * n * KIB))
        .bench_local(|| {
            for _ in 0..batches {
                let mut batch = podstore::Batch::new();
                for _ in 0..n {
                    batch.put(next.to_le_bytes(), &v[..]);
                    next += 1;
                }
                store.write(&batch).unwrap();
            }
        });
}

#[divan::bench(consts = SIZES, args = THREADS, sample_count = 5, sample_size = 1)]
fn file_per_value<const SIZE: usize>(bencher: Bencher, threads: usize) {
    let dir = BenchDir::new("files");
    let path = Arc::new(dir.0.clone());
    let v = value(SIZE);
    bench_puts(bencher, SIZE, threads, move |_, n| {
        put_file(&path, &format!("{n:016x}"), &v);
    });
}

/// The design podstore replaces: write into an anonymous O_TMPFILE, fdatasync, then give it its
/// name with linkat (no directory fsync, as in the object stores it comes from).
fn put_file(dir: &Path, name: &str, value: &[u8]) {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags};
    let fd = rustix::fs::open(
        dir,
        OFlags::TMPFILE | OFlags::WRONLY,
        Mode::from_raw_mode(0o644),
    )
    .unwrap();
    let file = File::from(fd);
    file.write_all_at(value, 0).unwrap();
    file.sync_data().unwrap();
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    rustix::fs::linkat(
        CWD,
        proc_path.as_str(),
        CWD,
        dir.join(name),
        AtFlags::SYMLINK_FOLLOW,
    )
    .unwrap();
}

/// The floor: one thread, one aligned O_DIRECT write of the value (padded to 4 KiB) at the next
/// offset of a pre-zeroed file, then fdatasync.
#[divan::bench(consts = SIZES, sample_count = 5, sample_size = 1)]
fn raw_floor<const SIZE: usize>(bencher: Bencher) {
    const ALIGN: usize = 4096;
    let dir = BenchDir::new("raw");
    let padded = SIZE.div_ceil(ALIGN) * ALIGN;
    let per = per_thread(SIZE, 1);
    let samples = 5 + 1;
    let file_len = (padded * per * samples) as u64;
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
        .open(dir.0.join("raw"))
        .unwrap();
    let buf = AlignedBytes::new(padded.max(1 << 20), ALIGN);
    // Pre-zero the whole file so no write allocates blocks or grows the file.
    for off in (0..file_len).step_by(buf.len()) {
        let n = (file_len - off).min(buf.len() as u64) as usize;
        file.write_all_at(&buf.as_slice()[..n], off).unwrap();
    }
    file.sync_all().unwrap();
    let offset = Mutex::new(0u64);
    bencher
        .counter(ItemsCount::new(per))
        .counter(BytesCount::new(per * SIZE))
        .bench_local(|| {
            for _ in 0..per {
                let mut off = offset.lock().unwrap();
                if *off + padded as u64 > file_len {
                    *off = 0;
                }
                file.write_all_at(&buf.as_slice()[..padded], *off).unwrap();
                file.sync_data().unwrap();
                *off += padded as u64;
            }
        });
}

/// What a 4 KiB O_DIRECT write + fdatasync costs by the state of the blocks it lands in: appended
/// to a growing file, in a fallocated (unwritten) extent, or in already-written zeroes. This is
/// the measurement behind podstore's zero-ahead preallocation.
#[divan::bench(args = ["append", "fallocate", "zeroed"], sample_count = 5, sample_size = 1)]
fn sync_cost_4k(bencher: Bencher, layout: &str) {
    const ALIGN: usize = 4096;
    const OPS: usize = 500;
    let dir = BenchDir::new("sync-cost");
    let file_len = (ALIGN * OPS * 6) as u64;
    let buf = AlignedBytes::new(1 << 20, ALIGN);
    let mut round = 0;
    bencher
        .counter(ItemsCount::new(OPS))
        .with_inputs(|| {
            round += 1;
            let file = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
                .open(dir.0.join(format!("f{round}")))
                .unwrap();
            match layout {
                "fallocate" => {
                    rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, file_len)
                        .unwrap()
                }
                "zeroed" => {
                    for off in (0..file_len).step_by(buf.len()) {
                        let n = (file_len - off).min(buf.len() as u64) as usize;
                        file.write_all_at(&buf.as_slice()[..n], off).unwrap();
                    }
                }
                _ => {}
            }
            file.sync_all().unwrap();
            file
        })
        .bench_local_values(|file| {
            for i in 0..OPS {
                file.write_all_at(&buf.as_slice()[..ALIGN], (i * ALIGN) as u64)
                    .unwrap();
                file.sync_data().unwrap();
            }
        });
}

/// A zeroed, aligned heap buffer for the raw floor (the crate's own allocator is private).
struct AlignedBytes(Vec<u8>, usize);

impl AlignedBytes {
    fn new(len: usize, align: usize) -> AlignedBytes {
        AlignedBytes(vec![0u8; len + align], align)
    }
    fn as_slice(&self) -> &[u8] {
        let skew = self.0.as_ptr().align_offset(self.1);
        &self.0[skew..skew + self.len()]
    }
    fn len(&self) -> usize {
        self.0.len() - self.1
    }
}
