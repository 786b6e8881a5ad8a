//! Mixed workload.

use super::*;

/// Keys shared by every thread of the mixed workload.
const MIXED_KEYS: usize = 64;

/// One thread of the mixed workload.
struct Worker {
    store: Arc<Store>,
    thread: usize,
    rng: XorShift,
    clock: Clock,
    /// Durability given to a quarter of the batches: the opposite of the store's.
    batch_override: Durability,
    counter: usize,
    events: Vec<Event>,
}

impl Worker {
    fn run(mut self, ops: usize) -> Vec<Event> {
        for _ in 0..ops {
            match self.rng.below(100) {
                0..30 => self.put(),
                30..55 => self.get(),
                55..70 => self.get_range(),
                70..80 => self.delete(),
                _ => self.batch(),
            }
        }
        self.events
    }

    fn random_key(&mut self) -> usize {
        self.rng.below(MIXED_KEYS)
    }

    /// `n` different keys.
    fn distinct_keys(&mut self, n: usize) -> Vec<usize> {
        let mut keys = Vec::with_capacity(n);
        while keys.len() < n {
            let key = self.random_key();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// Mostly small values, some medium ones (around the write buffer size and the large-value
    /// threshold) and a few large ones.
    fn value_len(&mut self) -> usize {
        match self.rng.below(100) {
            0..90 => self.rng.in_range(MIN_VALUE_LEN..8 * KIB),
            90..97 => self.rng.in_range(64 * KIB..200 * KIB),
            _ => self
                .rng
                .in_range(LARGE_VALUE_THRESHOLD..LARGE_VALUE_THRESHOLD + 128 * KIB),
        }
    }

    fn new_value(&mut self, key: usize) -> ValueId {
        self.counter += 1;
        ValueId {
            key,
            thread: self.thread,
            counter: self.counter,
            len: self.value_len(),
        }
    }

    /// Records an operation on `key` that ran from `start` to now.
    fn finish(
        &mut self,
        start: u64,
        op: &'static str,
        key: usize,
        write: Option<Write>,
        seen: Option<Seen>,
    ) {
        let end = self.clock.now();
        self.record(start..end, op, key, write, seen);
    }

    fn record(
        &mut self,
        span: Range<u64>,
        op: &'static str,
        key: usize,
        write: Option<Write>,
        seen: Option<Seen>,
    ) {
        let Range { start, end } = span;
        self.events.push(Event {
            thread: self.thread,
            op,
            key,
            write,
            seen,
            start,
            end,
        });
    }

    fn put(&mut self) {
        let key = self.random_key();
        let id = self.new_value(key);
        let value = id.bytes();
        let start = self.clock.now();
        self.store
            .put(key_name(key), &value)
            .unwrap_or_else(|e| panic!("put {id:?}: {e}"));
        self.finish(start, "put", key, Some(Write::Put(id)), None);
    }

    /// A read of a whole value, by one of the three calls that read one (`get`, `get_bytes`,
    /// `get_into` into a buffer that held another value).
    fn get(&mut self) {
        let key = self.random_key();
        let start = self.clock.now();
        let got = match self.rng.below(3) {
            0 => self.store.get(key_name(key)).expect("get"),
            1 => self
                .store
                .get_bytes(key_name(key))
                .expect("get_bytes")
                .map(|b| b.to_vec()),
            _ => {
                let mut buf = vec![0xee; self.rng.below(2 * KIB)];
                let found = self
                    .store
                    .get_into(key_name(key), &mut buf)
                    .expect("get_into");
                assert!(
                    found || buf.is_empty(),
                    "get_into left a missing key's buffer full"
                );
                found.then_some(buf)
            }
        };
        let seen = match got {
            None => Seen::Absent,
            Some(v) => Seen::Value(decode_value(key, &v).unwrap_or_else(|e| panic!("get: {e}"))),
        };
        self.finish(start, "get", key, None, Some(seen));
    }

    /// Reads a range inside the value the key had a moment before; the value may have changed
    /// since, so any answer is checked against whatever value it came from.
    fn get_range(&mut self) {
        let key = self.random_key();
        let name = key_name(key);
        let len_hint = self.store.value_len(&name).expect("value_len");
        let len_hint = len_hint.map_or(MIN_VALUE_LEN, |n| n as usize);
        let begin = self.rng.below(len_hint - MIN_RANGE_LEN + 1);
        let end = self.rng.in_range(begin + MIN_RANGE_LEN..len_hint + 1);
        let start = self.clock.now();
        let got = self.store.get_range(&name, begin as u64..end as u64);
        let seen = match got {
            Ok(None) => Seen::Absent,
            // The end of a range past the value is clamped to the value's end.
            Ok(Some(bytes)) if bytes.len() < end - begin => Seen::Length(begin + bytes.len()),
            Ok(Some(bytes)) => {
                assert_eq!(bytes.len(), end - begin, "get_range {begin}..{end} length");
                let id = decode_slice(key, begin, &bytes)
                    .unwrap_or_else(|e| panic!("get_range {begin}..{end}: {e}"));
                Seen::Value(id)
            }
            Err(Error::OutOfRange { len, .. }) => {
                assert!(
                    len < begin as u64,
                    "get_range {begin}..{end} of key {key}: OutOfRange for a {len}-byte value"
                );
                Seen::Length(len as usize)
            }
            Err(e) => panic!("get_range {begin}..{end} of key {key}: {e}"),
        };
        self.finish(start, "get_range", key, None, Some(seen));
    }

    fn delete(&mut self) {
        let key = self.random_key();
        let start = self.clock.now();
        let existed = self.store.delete(key_name(key)).expect("delete");
        let seen = if existed { Seen::Present } else { Seen::Absent };
        self.finish(start, "delete", key, Some(Write::Delete), Some(seen));
    }

    /// A batch of 2 to 5 puts and deletes of different keys.
    fn batch(&mut self) {
        let n = self.rng.in_range(2..6);
        let mut batch = Batch::new();
        let mut writes = Vec::with_capacity(n);
        for key in self.distinct_keys(n) {
            if self.rng.chance(70) {
                let id = self.new_value(key);
                batch.put(key_name(key), id.bytes());
                writes.push((key, Write::Put(id)));
            } else {
                batch.delete(key_name(key));
                writes.push((key, Write::Delete));
            }
        }
        if self.rng.chance(25) {
            batch.durability(self.batch_override);
        }
        let start = self.clock.now();
        self.store
            .write(&batch)
            .unwrap_or_else(|e| panic!("write batch {writes:?}: {e}"));
        let end = self.clock.now();
        for (key, write) in writes {
            self.record(start..end, "batch", key, Some(write), None);
        }
    }
}

/// Runs `threads` workers of `ops` operations each on one store and checks the final state
/// against the history; stops the store as `ending` says, reopens it and checks that it holds
/// exactly that state; last, checks what every read saw while the workers ran.
fn run_mixed(what: &str, opts: Options, threads: usize, ops: usize, ending: Ending) {
    run_mixed_with(what, opts, threads, ops, ending, false)
}

/// [`run_mixed`], with a thread that compacts the store over and over while the workers run
/// when `compacting` is set.
fn run_mixed_with(
    what: &str,
    opts: Options,
    threads: usize,
    ops: usize,
    ending: Ending,
    compacting: bool,
) {
    let batch_override = match opts.view().durability() {
        Durability::Sync => Durability::Buffered,
        Durability::Buffered => Durability::Sync,
    };
    let fx = Fixture::new(opts);
    let store = Arc::new(fx.open());
    let clock = Clock(Instant::now());
    let workers: Vec<_> = (0..threads)
        .map(|thread| {
            let worker = Worker {
                store: Arc::clone(&store),
                thread,
                rng: XorShift::new(0x5EED_0000 + thread as u64),
                clock,
                batch_override,
                counter: 0,
                events: Vec::new(),
            };
            thread::spawn(move || worker.run(ops))
        })
        .collect();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let compactor = compacting.then(|| {
        let (store, done) = (Arc::clone(&store), Arc::clone(&done));
        thread::spawn(move || {
            let mut compacted = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                compacted += store.compact().expect("compact").segments_compacted;
            }
            compacted
        })
    });
    let mut events: Vec<Event> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker thread panicked"))
        .collect();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    if let Some(c) = compactor {
        let compacted = c.join().expect("compactor panicked");
        assert!(compacted > 0, "{what}: nothing was compacted");
    }
    assert_exercised(&events, what);

    let final_at = clock.now();
    let contents = read_contents(&store, MIXED_KEYS, what);
    let ids = decode_contents(&contents, what);
    events.extend((0..MIXED_KEYS).map(|k| Event::final_read(k, ids.get(&k).copied(), final_at)));
    let is_final = |e: &Event| e.op == FINAL_GET;
    check_history(&events, is_final, &format!("{what}: final state"));

    let store = Arc::into_inner(store).expect("workers are done");
    let store = reopen(&fx, store, ending);
    let reopened_what = format!("{what} after {ending:?} and reopen");
    let reopened = read_contents(&store, MIXED_KEYS, &reopened_what);
    assert_same_contents(&reopened, &contents, &reopened_what);
    store.close().expect("close");

    // Last, so that a failure here does not hide the checks above.
    check_history(
        &events,
        |e| !is_final(e),
        &format!("{what}: reads while running"),
    );
}

/// Guards against a workload that silently stopped exercising what it is meant to.
#[track_caller]
fn assert_exercised(events: &[Event], what: &str) {
    let count = |f: fn(&Event) -> bool| events.iter().filter(|e| f(e)).count();
    let large_puts = count(|e| {
        e.op == "put" && matches!(e.write, Some(Write::Put(id)) if id.len >= LARGE_VALUE_THRESHOLD)
    });
    let values_seen = count(|e| e.op == "get" && matches!(e.seen, Some(Seen::Value(_))));
    let ranges_seen = count(|e| e.op == "get_range" && matches!(e.seen, Some(Seen::Value(_))));
    let deletes_done = count(|e| e.op == "delete" && e.seen == Some(Seen::Present));
    let batch_deletes = count(|e| e.op == "batch" && e.write == Some(Write::Delete));
    let counts = [
        large_puts,
        values_seen,
        ranges_seen,
        deletes_done,
        batch_deletes,
    ];
    assert!(
        counts.iter().all(|&n| n > 0),
        "{what}: workload too thin: large puts, values got, ranges got, deletes of present keys, \
         batch deletes = {counts:?}"
    );
}

/// Operations per thread of the 32-thread runs (the 64-thread run does half as many each):
/// enough for every kind of operation to race with every other; 200 in the long run, 120 by
/// default.
fn ops_per_thread() -> usize {
    crate::common::long::sized(120, 200)
}

#[test]
fn stress_mixed_ops_overlapping_keys() {
    let opts = stress_options(IoMode::Direct, Durability::Sync);
    let what = "32 threads, direct, sync";
    run_mixed(what, opts, 32, ops_per_thread(), Ending::Close);
}

#[test]
fn stress_mixed_ops_overlapping_keys_64_threads() {
    let opts = stress_options(IoMode::Direct, Durability::Sync);
    let what = "64 threads, direct, sync";
    run_mixed(what, opts, 64, ops_per_thread() / 2, Ending::Close);
}

/// The read cache under overwrites, deletes and compaction moves: a cache small enough to
/// evict all the time (values of up to 8 KiB are kept whole, larger ones' crc sectors), and a
/// thread that compacts the store over and over, moving values that readers have cached. Every
/// read must still see a value the history explains (never stale, never torn), and a thread's
/// read after its own write must see it.
#[test]
fn stress_mixed_ops_with_a_small_cache_and_compaction() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .cache_capacity(64 * KIB as u64)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, 64 KiB cache, compacting";
    run_mixed_with(what, opts, 32, ops_per_thread(), Ending::Close, true);
}

/// As above with a cache of 1 MiB: values above 128 KiB (the 64-200 KiB ones and the large
/// ones) are kept in 64 KiB pieces, read around and evicted all the time while compaction moves
/// them (issue 25).
#[test]
fn stress_mixed_ops_with_a_piece_cache_and_compaction() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .cache_capacity(1 << 20)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, 1 MiB cache (pieces), compacting";
    run_mixed_with(what, opts, 32, ops_per_thread(), Ending::Close, true);
}

/// The same history without a cache: what the others are measured against.
#[test]
fn stress_mixed_ops_without_a_cache() {
    let opts = stress_options(IoMode::Direct, Durability::Sync).cache_capacity(0);
    let what = "32 threads, direct, sync, no cache";
    run_mixed(what, opts, 32, ops_per_thread(), Ending::Close);
}

/// Lazy overwrites under concurrency: no cache and 4 bits of key hash (keys share
/// fingerprints), so that every overwrite goes to the front of its run without a read and
/// leaves its older version for the resolver thread, which removes it while writers, readers,
/// deletes and a compacting thread go on. No read may see an older value once a newer put
/// returned, nor a deleted key's older version.
#[test]
fn stress_mixed_ops_lazy_overwrites_colliding_and_compacting() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .cache_capacity(0)
        .testing_hash_bits(4)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, no cache, 4 hash bits, compacting";
    run_mixed_with(what, opts, 32, ops_per_thread(), Ending::Close, true);
}

/// Lazy overwrites with the read cache on: every small value written is kept in the cache once
/// acknowledged, so an overwrite's look often tells its key's entry from memory (and replaces it
/// in place), and otherwise goes to the front of its run lazily. With keys sharing fingerprints,
/// a cache small enough to evict all the time and a thread compacting, no read may see an older
/// value once a newer put returned, nor a deleted key's older version.
#[test]
fn stress_mixed_ops_lazy_overwrites_colliding_with_values_kept_on_write() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .cache_capacity(256 * KIB as u64)
        .testing_hash_bits(4)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, 256 KiB cache, 4 hash bits, compacting";
    run_mixed_with(what, opts, 32, ops_per_thread(), Ending::Close, true);
}

/// The table of hot values (`index/hot.rs`, on in a cache of 16 MiB and more) under the mixed
/// workload: keys sharing hashes (6 bits of hash for the 64 keys: many keys share their whole
/// hash, and so a slot), lazy overwrites, deletes and a thread compacting, while readers fill
/// the slots from the cache's hits (about 400 fills and 1,600 hits a run). No read may see an older value once a newer put returned, another key's
/// value, nor a deleted key's older version.
#[test]
fn stress_mixed_ops_with_hot_values_colliding_and_compacting() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .cache_capacity(32 << 20)
        .testing_hash_bits(6)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, 32 MiB cache (hot values), 6 hash bits, compacting";
    run_mixed_with(what, opts, 32, ops_per_thread(), Ending::Close, true);
}

/// The warm restart (`Options::warm_cache`) under the mixed workload: the store is closed and
/// opened again between rounds of it, and each round's threads start at once, while the warm-up
/// fills the cache from the newest segments (which hold other keys' small values too, so that it
/// runs a while), with a thread compacting and keys sharing fingerprints (10 bits of hash). No read
/// may see an older value once a newer put returned, nor a deleted key's, in any round.
#[test]
fn stress_mixed_ops_across_reopens_while_warming() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .testing_hash_bits(6)
        .compaction_threshold(0.2);
    let what = "32 threads, direct, sync, 10 hash bits, compacting, 4 warm restarts";
    let fx = Fixture::new(opts);
    // Small values of keys the workers never touch: every warm-up has several MiB to read.
    let filler = Store::open_with(fx.path(), fx.opts.clone().durability(Durability::Buffered))
        .expect("open");
    for i in 0..6000u32 {
        filler
            .put(format!("filler-{i}"), i.to_le_bytes().repeat(250))
            .expect("put");
    }
    filler.close().expect("close");
    let clock = Clock(Instant::now());
    let mut events = Vec::new();
    let mut caught_warming = 0;
    let threads = 32;
    let mut store = Arc::new(fx.open());
    for round in 0..4 {
        caught_warming += usize::from(store.stats().cache_warming);
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let thread = round * threads + t;
                let worker = Worker {
                    store: Arc::clone(&store),
                    thread,
                    rng: XorShift::new(0x3A2E_0000 + thread as u64),
                    clock,
                    batch_override: Durability::Buffered,
                    counter: 0,
                    events: Vec::new(),
                };
                thread::spawn(move || worker.run(ops_per_thread() / 2))
            })
            .collect();
        let compactor = {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for _ in 0..20 {
                    store.compact().expect("compact");
                }
            })
        };
        events.extend(
            workers
                .into_iter()
                .flat_map(|w| w.join().expect("worker thread panicked")),
        );
        compactor.join().expect("compactor panicked");
        let s = Arc::into_inner(store).expect("workers are done");
        s.close().expect("close");
        store = Arc::new(fx.open());
    }
    assert_exercised(&events, what);
    assert!(
        caught_warming > 0,
        "{what}: no round started while the warm-up ran"
    );
    let final_at = clock.now();
    // By `get` (the listing holds the filler keys too).
    let contents: Contents = (0..MIXED_KEYS)
        .filter_map(|k| store.get(key_name(k)).expect("get").map(|v| (k, v)))
        .collect();
    let ids = decode_contents(&contents, what);
    events.extend((0..MIXED_KEYS).map(|k| Event::final_read(k, ids.get(&k).copied(), final_at)));
    check_history(
        &events,
        |e| e.op == FINAL_GET,
        &format!("{what}: final state"),
    );
    check_history(
        &events,
        |e| e.op != FINAL_GET,
        &format!("{what}: reads while running"),
    );
    Arc::into_inner(store)
        .expect("one owner")
        .close()
        .expect("close");
}

/// Buffered writes are visible at once; `flush` makes them durable, so a crash right after it
/// loses nothing.
#[test]
fn stress_mixed_ops_buffered_durability() {
    let opts = stress_options(IoMode::Direct, Durability::Buffered);
    let what = "32 threads, direct, buffered";
    run_mixed(what, opts, 32, ops_per_thread(), Ending::FlushThenCrash);
}

#[test]
fn stress_mixed_ops_buffered_io() {
    let opts = stress_options(IoMode::Buffered, Durability::Sync);
    let what = "32 threads, buffered I/O, sync";
    run_mixed(what, opts, 32, ops_per_thread(), Ending::Close);
}
