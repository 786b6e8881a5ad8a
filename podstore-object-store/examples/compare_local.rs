//! The backend against object_store's `LocalFileSystem` (one file per object), side by side in
//! one run: puts and gets of 1 KiB, 64 KiB and 4 MiB objects at 1 and 16 tasks, 4 KiB ranges of
//! 10 MiB objects, listing 100 keys under a prefix, and the adapter against the same operations
//! on `Store` directly. Each row alternates the two sides for several rounds and reports the
//! median of each and their ratio.
//!
//! Run: `cargo run --release -p podstore-object-store --example compare_local [DIR]
//!       [--rounds N] [--list-objects N] [--only put,get,range,list,adapter]`
//!
//! `--only` runs the named groups of rows (the gets read what the puts wrote: `get` writes its
//! objects itself when `put` is not run).
//!
//! What each side promises: `LocalFileSystem` never fsyncs, so it is compared with podstore at
//! `Durability::Buffered` (neither survives power loss; podstore's puts survive a crash of the
//! process); then podstore at `Durability::Sync` is compared with `LocalFileSystem` followed by an
//! fsync of the object's file and of its directory (what makes its rename durable).
//!
//! Everything is written under DIR (a fresh temporary directory by default, removed at the
//! end); a given DIR must be new or empty, and is left with what the run wrote.

use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use podstore::{Durability, Options, Store};
use podstore_object_store::PodstoreObjectStore;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

struct Args {
    dir: Option<PathBuf>,
    rounds: usize,
    list_objects: usize,
    /// The groups of rows to run (`put`, `get`, `range`, `list`, `adapter`); all when empty.
    only: Vec<String>,
}

impl Args {
    fn runs(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }
}

fn args() -> Args {
    let mut a = Args {
        dir: None,
        rounds: 5,
        list_objects: 100_000,
        only: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match arg.as_str() {
            "--rounds" => a.rounds = value("--rounds"),
            "--list-objects" => a.list_objects = value("--list-objects"),
            // The listing rows alone (a listing among many objects without the minutes of the
            // other rows): `--only list`.
            "--list-only" => a.only = vec!["list".to_string()],
            "--only" => {
                let groups = it.next().expect("--only needs a list of groups");
                a.only = groups.split(',').map(str::to_string).collect();
            }
            "-h" | "--help" => {
                println!(
                    "usage: compare_local [DIR] [--rounds N] [--list-objects N] \
                     [--only put,get,range,list,adapter]"
                );
                std::process::exit(0);
            }
            other if !other.starts_with('-') && a.dir.is_none() => a.dir = Some(other.into()),
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn main() {
    let args = args();
    let temp;
    let root = match &args.dir {
        Some(d) => {
            if d.exists() && std::fs::read_dir(d).unwrap().next().is_some() {
                eprintln!(
                    "{} is not empty: give a new or empty directory",
                    d.display()
                );
                std::process::exit(2);
            }
            std::fs::create_dir_all(d).unwrap();
            d.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("podstore-compare-local-")
                .tempdir()
                .unwrap();
            temp.path().to_path_buf()
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run(&root, &args));
}

/// One side of a comparison: an object store and, for `LocalFileSystem` + fsync, the directory
/// whose files to sync after each put.
#[derive(Clone)]
struct Side {
    name: &'static str,
    objects: Arc<dyn ObjectStore>,
    fsync_root: Option<PathBuf>,
}

fn podstore_side(dir: &FsPath, durability: Durability) -> (Arc<Store>, Side) {
    std::fs::create_dir_all(dir).unwrap();
    let store = Arc::new(Store::open_with(dir, Options::default().durability(durability)).unwrap());
    let name = match durability {
        Durability::Sync => "podstore Sync",
        Durability::Buffered => "podstore Buffered",
    };
    let side = Side {
        name,
        objects: Arc::new(PodstoreObjectStore::new(store.clone())),
        fsync_root: None,
    };
    (store, side)
}

fn local_side(dir: &FsPath, fsync: bool) -> Side {
    std::fs::create_dir_all(dir).unwrap();
    Side {
        name: if fsync { "LocalFS + fsync" } else { "LocalFS" },
        objects: Arc::new(LocalFileSystem::new_with_prefix(dir).unwrap()),
        fsync_root: fsync.then(|| dir.to_path_buf()),
    }
}

/// Makes a `LocalFileSystem` put durable: the file's data, then its directory entry.
fn fsync_object(root: &FsPath, location: &Path) {
    let file = root.join(location.as_ref());
    std::fs::File::open(&file).unwrap().sync_all().unwrap();
    std::fs::File::open(file.parent().unwrap())
        .unwrap()
        .sync_all()
        .unwrap();
}

/// `n` puts of `size` bytes spread over `tasks` tasks, under `prefix`; the elapsed time.
async fn puts(side: &Side, prefix: &str, size: usize, tasks: usize, n: usize) -> Duration {
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        // A value of each task's own: clones of one `Bytes` share one reference count, whose
        // cache line every task's put would then move between cores.
        let value = Bytes::from(vec![0x5a; size]);
        let (side, prefix) = (side.clone(), prefix.to_string());
        handles.push(tokio::spawn(async move {
            for i in (t..n).step_by(tasks) {
                let p = Path::from(format!("{prefix}/{i:08}"));
                side.objects.put(&p, value.clone().into()).await.unwrap();
                if let Some(root) = side.fsync_root.clone() {
                    tokio::task::spawn_blocking(move || fsync_object(&root, &p))
                        .await
                        .unwrap();
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

/// `n` gets of objects `prefix/0..count`, spread over `tasks` tasks: whole objects, or 4 KiB
/// ranges when `range` is set. The paths are built before the clock starts: a `Path` (its
/// segments checked and encoded) is the caller's cost, whatever the backend.
async fn gets(
    objects: &Arc<dyn ObjectStore>,
    prefix: &str,
    count: usize,
    size: usize,
    range: bool,
    tasks: usize,
    n: usize,
) -> Duration {
    let paths: Arc<Vec<Path>> = Arc::new(
        (0..count)
            .map(|i| Path::from(format!("{prefix}/{i:08}")))
            .collect(),
    );
    path_gets(objects, &paths, size, range, tasks, n).await
}

/// `n` gets of `paths` (picked at random) of objects of `size` bytes through the trait, spread
/// over `tasks` tasks: whole objects, or 4 KiB ranges when `range` is set.
async fn path_gets(
    objects: &Arc<dyn ObjectStore>,
    paths: &Arc<Vec<Path>>,
    size: usize,
    range: bool,
    tasks: usize,
    n: usize,
) -> Duration {
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        let (objects, paths) = (objects.clone(), paths.clone());
        handles.push(tokio::spawn(async move {
            let mut x = (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            for _ in (t..n).step_by(tasks) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let p = &paths[x as usize % paths.len()];
                if range {
                    let at = (x >> 20) % (size - 4 * KIB) as u64;
                    let b = objects.get_range(p, at..at + 4096).await.unwrap();
                    assert_eq!(b.len(), 4096);
                } else {
                    let b = objects.get(p).await.unwrap().bytes().await.unwrap();
                    assert_eq!(b.len(), size);
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Prints one row: each side's median ops/s over the rounds and the ratio podstore / other.
fn row(what: &str, a: &str, a_ops: Vec<f64>, b: &str, b_ops: Vec<f64>) {
    let (ma, mb) = (median(a_ops), median(b_ops));
    println!("| {what} | {a} {ma:.0} | {b} {mb:.0} | {:.2}x |", ma / mb);
}

async fn run(root: &FsPath, args: &Args) {
    let rounds = args.rounds;
    println!(
        "{} rounds per row, sides alternating; ops/s medians; ratio = first / second",
        rounds
    );
    println!("| row | first (ops/s) | second (ops/s) | ratio |");
    println!("|---|---|---|---|");
    let (buffered_store, buffered) =
        podstore_side(&root.join("pod-buffered"), Durability::Buffered);
    let (sync_store, sync) = podstore_side(&root.join("pod-sync"), Durability::Sync);
    let local = local_side(&root.join("local"), false);
    let local_fsync = local_side(&root.join("local-fsync"), true);
    if args.runs("put") {
        // Puts: fresh keys every round, same count on both sides.
        for (size, n) in [(KIB, 4000), (64 * KIB, 800), (4 * MIB, 24)] {
            for tasks in [1, 16] {
                for (pod, other) in [(&buffered, &local), (&sync, &local_fsync)] {
                    // Durable puts one at a time are slow on both sides: fewer of them.
                    let n = if pod.name == "podstore Sync" && tasks == 1 {
                        n / 4
                    } else {
                        n
                    };
                    let (mut a, mut b) = (Vec::new(), Vec::new());
                    for r in 0..rounds {
                        let prefix = format!("put-{size}-{tasks}-{r}");
                        let t = puts(pod, &prefix, size, tasks, n).await;
                        a.push(n as f64 / t.as_secs_f64());
                        let t = puts(other, &prefix, size, tasks, n).await;
                        b.push(n as f64 / t.as_secs_f64());
                    }
                    let what = format!("put {} KiB, {tasks} tasks", size / KIB);
                    row(&what, pod.name, a, other.name, b);
                }
            }
        }
    }

    if args.runs("get") {
        if !args.runs("put") {
            for (size, count) in [(KIB, 4000), (64 * KIB, 800), (4 * MIB, 24)] {
                let prefix = format!("put-{size}-16-0");
                puts(&buffered, &prefix, size, 16, count).await;
                puts(&local, &prefix, size, 16, count).await;
            }
        }
        // Gets of whole objects written once (by round 0 of the puts above).
        for (size, count, n) in [(KIB, 4000, 8000), (64 * KIB, 800, 2000), (4 * MIB, 24, 48)] {
            for tasks in [1, 16] {
                let prefix = format!("put-{size}-16-0");
                let (mut a, mut b) = (Vec::new(), Vec::new());
                for _ in 0..rounds {
                    let t = gets(&buffered.objects, &prefix, count, size, false, tasks, n).await;
                    a.push(n as f64 / t.as_secs_f64());
                    let t = gets(&local.objects, &prefix, count, size, false, tasks, n).await;
                    b.push(n as f64 / t.as_secs_f64());
                }
                let what = format!("get {} KiB, {tasks} tasks", size / KIB);
                row(&what, buffered.name, a, local.name, b);
            }
        }
    }

    if args.runs("range") {
        // 4 KiB ranges at random offsets of eight 10 MiB objects.
        puts(&buffered, "ranges", 10 * MIB, 8, 8).await;
        puts(&local, "ranges", 10 * MIB, 8, 8).await;
        for tasks in [1, 16] {
            let n = 4000;
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..rounds {
                let t = gets(&buffered.objects, "ranges", 8, 10 * MIB, true, tasks, n).await;
                a.push(n as f64 / t.as_secs_f64());
                let t = gets(&local.objects, "ranges", 8, 10 * MIB, true, tasks, n).await;
                b.push(n as f64 / t.as_secs_f64());
            }
            row(
                &format!("4 KiB range of 10 MiB, {tasks} tasks"),
                buffered.name,
                a,
                local.name,
                b,
            );
        }
    }

    if args.runs("list") {
        list_rows(args, &buffered_store, &buffered, &local).await;
    }

    if args.runs("adapter") {
        // The adapter's cost: the same puts and gets through PodstoreObjectStore and on the Store
        // directly (16 OS threads calling it), at Buffered (and puts at Sync too).
        // Buffered: 40,000 puts per round (a round of 8,000, a few ms, was noise), the paths
        // and keys built before the clock starts on both sides (a `Path` is the caller's cost).
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let n = 8000;
        let many = 5 * n;
        for r in 0..rounds {
            let paths: Arc<Vec<Path>> = Arc::new(
                (0..many)
                    .map(|i| Path::from(format!("adapter-{r}/{i:08}")))
                    .collect(),
            );
            let t = path_puts(&buffered.objects, &paths, KIB, 16).await;
            a.push(many as f64 / t.as_secs_f64());
            let store = buffered_store.clone();
            let keys: Vec<String> = (0..many).map(|i| format!("direct-{r}/{i:08}")).collect();
            let t = tokio::task::spawn_blocking(move || direct_puts(&store, &keys, KIB, 16))
                .await
                .unwrap();
            b.push(many as f64 / t.as_secs_f64());
        }
        row("put 1 KiB, 16 tasks", "adapter", a, "Store direct", b);
        // The same at Sync: both are bound by how many puts share each fsync.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let t = puts(&sync, &format!("adapter-sync-{r}"), KIB, 16, n / 2).await;
            a.push((n / 2) as f64 / t.as_secs_f64());
            let store = sync_store.clone();
            let keys: Vec<String> = (0..n / 2).map(|i| format!("direct-{r}/{i:08}")).collect();
            let t = tokio::task::spawn_blocking(move || direct_puts(&store, &keys, KIB, 16))
                .await
                .unwrap();
            b.push((n / 2) as f64 / t.as_secs_f64());
        }
        row("put 1 KiB Sync, 16 tasks", "adapter", a, "Store direct", b);
        // Gets of the 8000 objects written above (cached: each read once first), 25 per object
        // and round so that a round lasts ~0.1-0.5 s rather than a few ms (starting 16 threads
        // or tasks is then noise). The trait's get returns the value and its metadata, which
        // `Store::get_with_metadata` returns too; `Store::get` (the value alone) beside it.
        let reads = 25 * n;
        // The paths and keys are built once: building a `Path` (which checks and encodes each
        // segment) is the caller's cost, whatever the backend, not the adapter's.
        let paths: Arc<Vec<Path>> = Arc::new(
            (0..n)
                .map(|i| Path::from(format!("adapter-0/{i:08}")))
                .collect(),
        );
        let keys: Arc<Vec<String>> = Arc::new(paths.iter().map(|p| p.to_string()).collect());
        let store = buffered_store.clone();
        tokio::task::spawn_blocking(move || {
            for i in 0..n {
                store.get(format!("adapter-0/{i:08}")).unwrap().unwrap();
            }
        })
        .await
        .unwrap();
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            let t = path_gets(&buffered.objects, &paths, KIB, false, 16, reads).await;
            a.push(reads as f64 / t.as_secs_f64());
            for (with_meta, out) in [(true, &mut b), (false, &mut c)] {
                let (store, keys) = (buffered_store.clone(), keys.clone());
                let t = tokio::task::spawn_blocking(move || {
                    direct_gets(&store, &keys, reads, 16, with_meta)
                })
                .await
                .unwrap();
                out.push(reads as f64 / t.as_secs_f64());
            }
        }
        let plain = median(c.clone());
        row(
            "get 1 KiB, 16 tasks",
            "adapter",
            a.clone(),
            "Store get_with_metadata",
            b,
        );
        row("get 1 KiB, 16 tasks", "adapter", a, "Store get", c);
        eprintln!("(Store::get: {plain:.0} gets/s)");
    }
}

/// `lists` listings of 100 keys through `side`'s `ObjectStore::list`, of prefixes spread over
/// the `dirs` directories (round `r` starts elsewhere): listings per second.
async fn listings(side: &Side, lists: usize, dirs: usize, r: usize) -> f64 {
    let start = Instant::now();
    for i in 0..lists {
        let d = (i * 7919 + r) % dirs;
        let prefix = Path::from(format!("list/d{d:06}"));
        let listed: Vec<_> = side
            .objects
            .list(Some(&prefix))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(listed.len(), 100);
    }
    lists as f64 / start.elapsed().as_secs_f64()
}

/// Listing 100 keys under one prefix among `list_objects` objects (100 per prefix): the adapter
/// against `LocalFileSystem`, then `Store::prefix(..).entries()` with each entry's metadata
/// (what the adapter's listing calls) against the adapter.
async fn list_rows(args: &Args, buffered_store: &Arc<Store>, buffered: &Side, local: &Side) {
    let rounds = args.rounds;
    let dirs = args.list_objects / 100;
    for side in [buffered, local] {
        let mut handles = Vec::new();
        for t in 0..16 {
            let side = side.clone();
            handles.push(tokio::spawn(async move {
                for d in (t..dirs).step_by(16) {
                    for i in 0..100 {
                        let p = Path::from(format!("list/d{d:06}/{i:03}"));
                        side.objects
                            .put(&p, Bytes::from_static(b"x").into())
                            .await
                            .unwrap();
                    }
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    }
    let lists = 200;
    // First with the objects in the store's active segment (1M 1-byte objects are ~50 MiB, less
    // than a segment), whose keys a listing finds through the segment's sorted view (sorted by
    // the second listing; the first passes over them); then
    // sealed, when they come from a footer's sorted keys.
    for state in ["", " (sealed)"] {
        if !state.is_empty() {
            buffered_store.seal().unwrap();
        } else {
            // The first listing after the writes passes over the active segment's records (a
            // large backlog, not sorted yet), the second sorts them into the segment's sorted
            // view: both timed apart, as the medians hide them.
            let store = buffered_store.clone();
            let t = tokio::task::spawn_blocking(move || {
                [0, 1].map(|_| {
                    let start = Instant::now();
                    assert_eq!(store.prefix("list/d000000/").count(), 100);
                    start.elapsed()
                })
            })
            .await
            .unwrap();
            eprintln!(
                "first listings after the writes: {:?} (a pass over the active segment's \
                 records), {:?} (their sort into its view)",
                t[0], t[1]
            );
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            for (side, out) in [(buffered, &mut a), (local, &mut b)] {
                out.push(listings(side, lists, dirs, r).await);
            }
        }
        row(
            &format!("list 100 keys of {} objects{state}", dirs * 100),
            buffered.name,
            a,
            local.name,
            b,
        );

        let (mut a, mut b) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            let store = buffered_store.clone();
            let t = tokio::task::spawn_blocking(move || {
                let start = Instant::now();
                for i in 0..lists {
                    let d = (i * 7919 + r) % dirs;
                    let mut n = 0;
                    for e in store.prefix(format!("list/d{d:06}/")).entries() {
                        let meta = e.unwrap().metadata();
                        assert_eq!(meta.len(), 1);
                        n += 1;
                    }
                    assert_eq!(n, 100);
                }
                start.elapsed()
            })
            .await
            .unwrap();
            a.push(lists as f64 / t.as_secs_f64());
            b.push(listings(buffered, lists, dirs, r).await);
        }
        row(
            &format!(
                "list 100 keys of {} objects with metadata{state}",
                dirs * 100
            ),
            "Store entries",
            a,
            "adapter",
            b,
        );
    }
}

/// A put of `size` bytes under each of `keys`, from `threads` OS threads.
fn direct_puts(store: &Store, keys: &[String], size: usize, threads: usize) -> Duration {
    let value = vec![0x5a; size];
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let value = &value;
            s.spawn(move || {
                for key in keys.iter().skip(t).step_by(threads) {
                    store.put(key, value).unwrap();
                }
            });
        }
    });
    start.elapsed()
}

/// A put of `size` bytes at each of `paths` through the trait, from `tasks` tasks.
async fn path_puts(
    objects: &Arc<dyn ObjectStore>,
    paths: &Arc<Vec<Path>>,
    size: usize,
    tasks: usize,
) -> Duration {
    let start = Instant::now();
    let mut handles = Vec::new();
    for t in 0..tasks {
        // A value of each task's own (see `puts`).
        let value = Bytes::from(vec![0x5a; size]);
        let (objects, paths) = (objects.clone(), paths.clone());
        handles.push(tokio::spawn(async move {
            for p in paths.iter().skip(t).step_by(tasks) {
                objects.put(p, value.clone().into()).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    start.elapsed()
}

/// `n` gets of `keys` (picked at random) from `threads` OS threads, each with its metadata
/// (`Store::get_with_metadata`, what the trait's get returns) or without (`Store::get`).
fn direct_gets(
    store: &Store,
    keys: &[String],
    n: usize,
    threads: usize,
    with_meta: bool,
) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut x = (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                for _ in (t..n).step_by(threads) {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let key = &keys[x as usize % keys.len()];
                    let len = if with_meta {
                        let (value, meta) = store.get_with_metadata(key).unwrap().unwrap();
                        assert_eq!(meta.len(), value.len() as u64);
                        value.len()
                    } else {
                        store.get(key).unwrap().unwrap().len()
                    };
                    assert_eq!(len, KIB);
                }
            });
        }
    });
    start.elapsed()
}
