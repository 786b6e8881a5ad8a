//! Store-level benchmarks of single operations. Run: `cargo bench --bench store`.
//!
//! The directory is under `PODSTORE_BENCH_DIR` (default: the system temp dir), which must be on
//! the disk you want to measure (tmpfs measures memory, not the disk).

use std::path::PathBuf;
use std::sync::LazyLock;

use divan::{Bencher, black_box};
use podstore::{Durability, IoMode, Options, Store};

fn main() {
    divan::main();
    // The benches' directories carry this process id; remove what they left.
    let base = std::env::var_os("PODSTORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let suffix = format!("-{}", std::process::id());
    if let Ok(rd) = std::fs::read_dir(&base) {
        for ent in rd.flatten() {
            let name = ent.file_name().to_string_lossy().into_owned();
            if name.starts_with("podstore-bench-") && name.ends_with(&suffix) {
                let _ = std::fs::remove_dir_all(ent.path());
            }
        }
    }
}

fn bench_dir(name: &str) -> PathBuf {
    let base = std::env::var_os("PODSTORE_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = base.join(format!("podstore-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const MODES: [IoMode; 2] = [IoMode::Direct, IoMode::Buffered];

/// One durable put from one thread: a write and an fdatasync.
#[divan::bench(args = MODES, consts = [1024, 65536])]
fn put_sync<const LEN: usize>(bencher: Bencher, mode: IoMode) {
    let dir = bench_dir("put");
    let store = Store::open_with(&dir, Options::default().io_mode(mode)).unwrap();
    let value = vec![7u8; LEN];
    let mut i = 0u64;
    bencher
        .counter(divan::counter::BytesCount::new(LEN))
        .bench_local(|| {
            i += 1;
            store.put(i.to_le_bytes(), &value).unwrap()
        });
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

struct Loaded {
    store: Store,
}

/// A store holding a 100 MiB value and 10 000 values of 4 KiB, shared by the read benches.
static LOADED: LazyLock<Loaded> = LazyLock::new(|| {
    let dir = bench_dir("read");
    let store = Store::open_with(
        &dir,
        Options::default()
            .io_mode(IoMode::Direct)
            .durability(Durability::Buffered),
    )
    .unwrap();
    store.put(b"big", vec![3u8; 100 << 20]).unwrap();
    for i in 0..10_000u32 {
        store.put(i.to_le_bytes(), [i as u8; 4096]).unwrap();
    }
    store.flush().unwrap();
    Loaded { store }
});

/// A 4 KiB range at a varying offset of a 100 MiB value.
#[divan::bench]
fn get_range_4k_of_100m(bencher: Bencher) {
    let store = &LOADED.store;
    let mut off = 0u64;
    bencher.bench_local(|| {
        off = (off + 7_777_777) % ((100 << 20) - 4096);
        store.get_range(b"big", off..off + 4096).unwrap()
    });
}

/// A whole 4 KiB value.
#[divan::bench]
fn get_4k(bencher: Bencher) {
    let store = &LOADED.store;
    let mut i = 0u32;
    bencher.bench_local(|| {
        i = (i + 7919) % 10_000;
        store.get(black_box(&i.to_le_bytes())).unwrap()
    });
}

/// An index lookup: `value_len` answers from the in-memory index alone (no I/O), for a key
/// present and a key absent among the 10 001 keys of the shared store.
#[divan::bench(args = [true, false])]
fn index_lookup(bencher: Bencher, present: bool) {
    let store = &LOADED.store;
    let mut i = 0u32;
    bencher.bench_local(|| {
        i = (i + 7919) % 10_000;
        let k = if present { i } else { i + 1_000_000 };
        store.value_len(black_box(&k.to_le_bytes())).unwrap()
    });
}

/// The copy into the write buffer: a put with `Durability::Buffered` returns once the record
/// (header, key, value, chunk crcs) is in the shared aligned buffer; the flush thread writes
/// full buffers (1 MiB) in the background, here through the page cache.
#[divan::bench(consts = [4096, 65536], sample_count = 50, sample_size = 64)]
fn put_buffered<const LEN: usize>(bencher: Bencher) {
    let dir = bench_dir("put-buffered");
    let store = Store::open_with(
        &dir,
        Options::default()
            .io_mode(IoMode::Buffered)
            .durability(Durability::Buffered),
    )
    .unwrap();
    let value = vec![7u8; LEN];
    let mut i = 0u64;
    bencher
        .counter(divan::counter::BytesCount::new(LEN))
        .bench_local(|| {
            i += 1;
            store.put(i.to_le_bytes(), black_box(&value)).unwrap()
        });
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// 1 KiB puts with `Durability::Buffered` from `threads` threads at once, 16,000 per iteration,
/// into one store that grows across the samples (the active segment's record list, which the
/// append lock extends and the ordered listing's sorted view reads, is its longest then): the
/// put path's CPU cost under the append lock.
#[divan::bench(args = [1, 16], sample_count = 20, sample_size = 1)]
fn put_buffered_1k_threads(bencher: Bencher, threads: usize) {
    const PER_ITERATION: usize = 16_000;
    let dir = bench_dir(&format!("put-buffered-threads-{threads}"));
    let store = Store::open_with(
        &dir,
        Options::default()
            .io_mode(IoMode::Buffered)
            .durability(Durability::Buffered),
    )
    .unwrap();
    let value = vec![7u8; 1024];
    let round = std::sync::atomic::AtomicU64::new(0);
    bencher
        .counter(divan::counter::ItemsCount::new(PER_ITERATION))
        .bench_local(|| {
            let r = round.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::thread::scope(|s| {
                for t in 0..threads {
                    let (store, value) = (&store, &value);
                    s.spawn(move || {
                        for i in (t..PER_ITERATION).step_by(threads) {
                            store
                                .put(format!("put/{r:04}/{i:08}"), black_box(value))
                                .unwrap();
                        }
                    });
                }
            });
        });
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Reopening a store of 100 000 small values: reads one footer per segment.
#[divan::bench(sample_count = 10, sample_size = 1)]
fn reopen_100k(bencher: Bencher) {
    static DIR: LazyLock<PathBuf> = LazyLock::new(|| {
        let dir = bench_dir("reopen");
        let store =
            Store::open_with(&dir, Options::default().durability(Durability::Buffered)).unwrap();
        for i in 0..100_000u32 {
            store
                .put(format!("object/{i:08}").as_bytes(), [i as u8; 100])
                .unwrap();
        }
        store.close().unwrap();
        dir
    });
    let dir = &*DIR;
    bencher.bench_local(|| {
        let store = Store::open(dir).unwrap();
        assert_eq!(store.len(), 100_000);
        store
    });
}
