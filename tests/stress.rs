//! Concurrency stress tests: many threads putting, deleting, batching and reading an overlapping
//! set of keys, with every answer checked against the real-time order of the operations and the
//! final contents checked across a reopen (or a simulated crash).
//!
//! Every value describes itself: it is a run of 16-byte blocks, each holding the value's id (key,
//! writer thread, per-thread counter, length), the block's index and a check word. Any value, or
//! slice of one, that a read returns can thus be traced to the one write that made it and checked
//! byte for byte.
//!
//! The work is bounded by operation counts, never by time, and nothing asserts on timing.

mod common;
use common::store::TestStore as Fixture;
use common::{Random, XorShift, splitmix64};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use podstore::{Batch, Durability, Error, IoMode, Options, Store};

const KIB: usize = 1 << 10;

/// Values at least this long put with `Durability::Sync` go to blob files of their own. Low, so
/// that blob files are exercised without writing much.
const LARGE_VALUE_THRESHOLD: usize = 128 * KIB;

/// Size of the self-describing blocks values are made of.
const BLOCK: usize = 16;

/// Shortest value: two blocks.
const MIN_VALUE_LEN: usize = 2 * BLOCK;

/// Shortest range read: wherever it starts, it holds a whole block.
const MIN_RANGE_LEN: usize = 2 * BLOCK - 1;

// ---------------------------------------------------------------------------------------------
// Self-describing values
// ---------------------------------------------------------------------------------------------

/// Identifies one value ever written: the key it was written to, the writing thread, that
/// thread's counter (unique per thread) and the value's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ValueId {
    key: usize,
    thread: usize,
    counter: usize,
    len: usize,
}

/// Bits of key, thread, counter and length in a value's tag.
const TAG_FIELD_BITS: [u32; 4] = [12, 12, 16, 24];

impl ValueId {
    /// The fields packed into one word, stored in every block of the value.
    fn tag(self) -> u64 {
        let fields = [self.key, self.thread, self.counter, self.len];
        fields
            .into_iter()
            .zip(TAG_FIELD_BITS)
            .fold(0, |tag, (field, bits)| {
                assert!((field as u64) < 1 << bits, "{self:?} does not fit in a tag");
                (tag << bits) | field as u64
            })
    }

    fn from_tag(mut tag: u64) -> ValueId {
        let mut fields = [0usize; 4];
        for (field, bits) in fields.iter_mut().zip(TAG_FIELD_BITS).rev() {
            *field = (tag & ((1 << bits) - 1)) as usize;
            tag >>= bits;
        }
        let [key, thread, counter, len] = fields;
        ValueId {
            key,
            thread,
            counter,
            len,
        }
    }

    /// The whole value.
    fn bytes(self) -> Vec<u8> {
        self.slice(0..self.len)
    }

    /// Bytes `range` of the value: block `i` is the tag, `i` and a check word of both.
    fn slice(self, range: Range<usize>) -> Vec<u8> {
        let tag = self.tag();
        let first = range.start / BLOCK;
        let mut out = Vec::with_capacity(range.len() + 2 * BLOCK);
        for i in first..range.end.div_ceil(BLOCK) {
            let check = splitmix64(tag ^ (i as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)) as u32;
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&(i as u32).to_le_bytes());
            out.extend_from_slice(&check.to_le_bytes());
        }
        let skip = range.start - first * BLOCK;
        out[skip..skip + range.len()].to_vec()
    }
}

/// The id of the value that `bytes`, found at offset `start` of a value of `key`, belong to,
/// after checking every byte against that value.
fn decode_slice(key: usize, start: usize, bytes: &[u8]) -> Result<ValueId, String> {
    let block_at = start.next_multiple_of(BLOCK) - start;
    let block = bytes.get(block_at..block_at + BLOCK).ok_or_else(|| {
        format!(
            "{} bytes at offset {start} hold no whole block",
            bytes.len()
        )
    })?;
    let id = ValueId::from_tag(u64::from_le_bytes(block[..8].try_into().unwrap()));
    let end = start + bytes.len();
    if id.key != key {
        return Err(format!("bytes of key {key} carry the tag of {id:?}"));
    }
    if id.len < end {
        return Err(format!("bytes {start}..{end} carry the tag of {id:?}"));
    }
    let want = id.slice(start..end);
    if let Some(at) = want.iter().zip(bytes).position(|(a, b)| a != b) {
        return Err(format!(
            "bytes {start}..{end} of key {key} differ from {id:?} at offset {}",
            start + at
        ));
    }
    Ok(id)
}

/// The id of `value`, read whole from `key`, after checking that it is a whole value written to
/// that key.
fn decode_value(key: usize, value: &[u8]) -> Result<ValueId, String> {
    let id = decode_slice(key, 0, value)?;
    if id.len != value.len() {
        return Err(format!("{}-byte value of key {key} is {id:?}", value.len()));
    }
    Ok(id)
}

fn key_name(key: usize) -> Vec<u8> {
    format!("stress/{key:04}").into_bytes()
}

fn key_index(name: &[u8]) -> usize {
    std::str::from_utf8(name)
        .ok()
        .and_then(|s| s.strip_prefix("stress/"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("unexpected key {:?}", String::from_utf8_lossy(name)))
}

// ---------------------------------------------------------------------------------------------
// Stores and their contents
// ---------------------------------------------------------------------------------------------

/// Options shared by the tests: small segments and write buffers so that segments roll and
/// values stream through both buffers, and a low large-value threshold.
fn stress_options(io_mode: IoMode, durability: Durability) -> Options {
    Options::default()
        .io_mode(io_mode)
        .durability(durability)
        .segment_size(2 << 20)
        .write_buffer_size(64 * KIB)
        .large_value_threshold(LARGE_VALUE_THRESHOLD as u64)
}

/// Ends `store` as `ending` says and opens it again.
#[track_caller]
fn reopen(fx: &Fixture, store: Store, ending: Ending) -> Store {
    match ending {
        Ending::Close => store.close().expect("close"),
        Ending::FlushThenCrash => {
            store.flush().expect("flush");
            store.simulate_crash();
        }
        Ending::Crash => store.simulate_crash(),
    }
    fx.open()
}

/// How a store is stopped before it is reopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Close,
    FlushThenCrash,
    Crash,
}

/// The live keys of a store (by index) and their values.
type Contents = BTreeMap<usize, Vec<u8>>;

/// Reads keys `0..keys` with `get`, checking that `keys()` and `len()` agree with it.
#[track_caller]
fn read_contents(store: &Store, keys: usize, what: &str) -> Contents {
    let contents: Contents = (0..keys)
        .filter_map(|k| {
            let value = store.get(key_name(k)).expect("get");
            value.map(|v| (k, v))
        })
        .collect();
    let mut listed: Vec<usize> = store
        .keys()
        .map(|name| key_index(&name.expect("listing reads")))
        .collect();
    listed.sort_unstable();
    let present: Vec<usize> = contents.keys().copied().collect();
    assert_eq!(listed, present, "{what}: keys() against get()");
    assert_eq!(store.len(), contents.len(), "{what}: len()");
    contents
}

/// The id of every value of `contents`, each checked to be a whole value written to its key.
#[track_caller]
fn decode_contents(contents: &Contents, what: &str) -> BTreeMap<usize, ValueId> {
    contents
        .iter()
        .map(|(&k, v)| {
            let id = decode_value(k, v).unwrap_or_else(|e| panic!("{what}: {e}"));
            (k, id)
        })
        .collect()
}

/// Asserts that `got` holds exactly the keys and values of `want`, byte for byte.
#[track_caller]
fn assert_same_contents(got: &Contents, want: &Contents, what: &str) {
    let got_ids = decode_contents(got, what);
    let want_ids = decode_contents(want, what);
    assert_eq!(got_ids, want_ids, "{what}: contents");
    for (k, v) in got {
        assert!(v == &want[k], "{what}: bytes of key {k} differ");
    }
}

// ---------------------------------------------------------------------------------------------
// Histories
// ---------------------------------------------------------------------------------------------

/// Nanoseconds since the start of a test, plus one: 0 is before every operation.
#[derive(Clone, Copy)]
struct Clock(Instant);

impl Clock {
    fn now(self) -> u64 {
        self.0.elapsed().as_nanos() as u64 + 1
    }
}

/// What an operation did to a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Write {
    Put(ValueId),
    Delete,
}

/// What an operation saw of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    /// No value (`get` gave `None`, `delete` gave `false`).
    Absent,
    /// Some value (`delete` gave `true`).
    Present,
    /// This value, or a slice of it.
    Value(ValueId),
    /// A value of this length (`get_range` answered `OutOfRange`, or fewer bytes than asked).
    Length(usize),
}

impl Seen {
    fn is_explained_by(self, write: Write) -> bool {
        match (self, write) {
            (Seen::Absent, Write::Delete) => true,
            (Seen::Present, Write::Put(_)) => true,
            (Seen::Value(seen), Write::Put(id)) => seen == id,
            (Seen::Length(len), Write::Put(id)) => id.len == len,
            _ => false,
        }
    }
}

/// The `op` of the reads made after every worker finished.
const FINAL_GET: &str = "final get";

/// One operation on one key, as recorded by the thread that made it. A batch gives one event
/// per key it touches, all with the batch's times.
#[derive(Debug, Clone)]
struct Event {
    thread: usize,
    op: &'static str,
    key: usize,
    write: Option<Write>,
    seen: Option<Seen>,
    start: u64,
    end: u64,
}

impl Event {
    /// The state of every key before the first operation: as if deleted.
    fn initial(key: usize) -> Event {
        Event {
            thread: usize::MAX,
            op: "initial state",
            key,
            write: Some(Write::Delete),
            seen: None,
            start: 0,
            end: 0,
        }
    }

    /// A read of `key` made after every other operation had finished.
    fn final_read(key: usize, id: Option<ValueId>, at: u64) -> Event {
        Event {
            thread: usize::MAX,
            op: FINAL_GET,
            key,
            write: None,
            seen: Some(id.map_or(Seen::Absent, Seen::Value)),
            start: at,
            end: at,
        }
    }
}

/// Checks the observations of the reads `reads` selects against the writes to the same key, in
/// real time: what a read saw must be the result of a write `w` that started before the read
/// ended and that is not strictly superseded, i.e. no other write to the key ran wholly between
/// the end of `w` and the start of the read. For a read made after everything finished, `w` is
/// a write after whose end no other write to the key started.
///
/// A `delete` is a write (of "absent") even when it answers `false`: it then says the key was
/// absent at some point during the call, so a value whose put had ended before it started must
/// not be read after it ends.
#[track_caller]
fn check_history(events: &[Event], reads: impl Fn(&Event) -> bool, what: &str) {
    let mut by_key: BTreeMap<usize, Vec<&Event>> = BTreeMap::new();
    for e in events {
        by_key.entry(e.key).or_default().push(e);
    }
    for (key, events) in by_key {
        check_key_history(key, &events, &reads, what);
    }
}

#[track_caller]
fn check_key_history(key: usize, events: &[&Event], reads: &dyn Fn(&Event) -> bool, what: &str) {
    let initial = Event::initial(key);
    let writes: Vec<&Event> = std::iter::once(&initial)
        .chain(events.iter().copied().filter(|e| e.write.is_some()))
        .collect();
    // For each write, the write that strictly supersedes it first: of the writes that started
    // after it ended, the one that ended first.
    let superseded_by: Vec<Option<&Event>> = writes
        .iter()
        .map(|w| {
            let later = writes.iter().filter(|w2| w2.start > w.end);
            later.min_by_key(|w2| w2.end).copied()
        })
        .collect();
    for read in events.iter().filter(|e| e.seen.is_some() && reads(e)) {
        let seen = read.seen.unwrap();
        let sources = || {
            writes.iter().zip(&superseded_by).filter(|(w, _)| {
                !std::ptr::eq(**w, *read) && seen.is_explained_by(w.write.unwrap())
            })
        };
        let explained = sources().any(|(w, superseded_by)| {
            w.start < read.end && superseded_by.is_none_or(|w2| w2.end >= read.start)
        });
        if !explained {
            let sources: Vec<(&Event, Option<&Event>)> =
                sources().take(8).map(|(w, by)| (*w, *by)).collect();
            report_unexplained(key, read, &sources, events, what);
        }
    }
}

/// Panics with what `read` saw, the writes that could have produced it, and every operation on
/// the key from the first of them to the end of the read.
#[track_caller]
fn report_unexplained(
    key: usize,
    read: &Event,
    sources: &[(&Event, Option<&Event>)],
    events: &[&Event],
    what: &str,
) -> ! {
    let mut message = format!(
        "{what}: key {key}: {}, which no write explains; writes that could have produced it:",
        describe(read)
    );
    for (w, superseded_by) in sources {
        let by = superseded_by.map_or("nothing".to_string(), describe);
        message += &format!("\n  {}, superseded by {by}", describe(w));
    }
    if sources.is_empty() {
        message += " none";
    }
    let from = sources
        .iter()
        .map(|(w, _)| w.start)
        .min()
        .unwrap_or(read.start);
    let mut window: Vec<&&Event> = events
        .iter()
        .filter(|e| e.end >= from && e.start <= read.end)
        .collect();
    window.sort_by_key(|e| e.start);
    message += "\noperations on the key meanwhile:";
    for e in window.iter().take(24) {
        message += &format!("\n  {}", describe(e));
    }
    panic!("{message}");
}

fn describe(e: &Event) -> String {
    let what = match (e.write, e.seen) {
        (Some(w), Some(s)) => format!("{w:?} (saw {s:?})"),
        (Some(w), None) => format!("{w:?}"),
        (None, Some(s)) => format!("saw {s:?}"),
        (None, None) => String::new(),
    };
    format!(
        "{} {what} by thread {} in {}..{}",
        e.op, e.thread, e.start, e.end
    )
}

// ---------------------------------------------------------------------------------------------
// Mixed workload
// ---------------------------------------------------------------------------------------------

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
/// enough for every kind of operation to race with every other, within the CI time budget.
const OPS_PER_THREAD: usize = 200;

#[test]
fn stress_mixed_ops_overlapping_keys() {
    let opts = stress_options(IoMode::Direct, Durability::Sync);
    let what = "32 threads, direct, sync";
    run_mixed(what, opts, 32, OPS_PER_THREAD, Ending::Close);
}

#[test]
fn stress_mixed_ops_overlapping_keys_64_threads() {
    let opts = stress_options(IoMode::Direct, Durability::Sync);
    let what = "64 threads, direct, sync";
    run_mixed(what, opts, 64, OPS_PER_THREAD / 2, Ending::Close);
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
    run_mixed_with(what, opts, 32, OPS_PER_THREAD, Ending::Close, true);
}

/// The same history without a cache: what the others are measured against.
#[test]
fn stress_mixed_ops_without_a_cache() {
    let opts = stress_options(IoMode::Direct, Durability::Sync).cache_capacity(0);
    let what = "32 threads, direct, sync, no cache";
    run_mixed(what, opts, 32, OPS_PER_THREAD, Ending::Close);
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
    run_mixed_with(what, opts, 32, OPS_PER_THREAD, Ending::Close, true);
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
    run_mixed_with(what, opts, 32, OPS_PER_THREAD, Ending::Close, true);
}

/// The warm restart (`Options::warm_cache`) under the mixed workload: the store is closed and
/// opened again between rounds of it, and each round's threads start at once, while the warm-up
/// fills the cache from the newest segments (which hold other keys' small values too, so that it
/// runs a while), with a thread compacting and keys sharing fingerprints (10 bits of hash). No read
/// may see an older value once a newer put returned, nor a deleted key's, in any round.
#[test]
fn stress_mixed_ops_across_reopens_while_warming() {
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .testing_hash_bits(10)
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
                thread::spawn(move || worker.run(OPS_PER_THREAD / 2))
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
    run_mixed(what, opts, 32, OPS_PER_THREAD, Ending::FlushThenCrash);
}

#[test]
fn stress_mixed_ops_buffered_io() {
    let opts = stress_options(IoMode::Buffered, Durability::Sync);
    let what = "32 threads, buffered I/O, sync";
    run_mixed(what, opts, 32, OPS_PER_THREAD, Ending::Close);
}

// ---------------------------------------------------------------------------------------------
// Atomic batches
// ---------------------------------------------------------------------------------------------

const GROUPS: usize = 6;
const MEMBERS: usize = 4;

fn member_key(group: usize, member: usize) -> usize {
    group * MEMBERS + member
}

/// Runs writers that each write `batches` batches putting one version (their thread and batch
/// number) to all the keys of a group (or deleting all of them), and readers that check every
/// value they read is intact. Returns the contents once everyone is done.
fn write_group_batches(store: &Arc<Store>, writers: usize, batches: usize) -> Contents {
    let writers: Vec<_> = (0..writers)
        .map(|thread| {
            let store = Arc::clone(store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0xBA7C_0000 + thread as u64);
                for counter in 1..=batches {
                    let group = rng.below(GROUPS);
                    let mut batch = Batch::new();
                    let delete = rng.chance(10);
                    for member in 0..MEMBERS {
                        let key = member_key(group, member);
                        if delete {
                            batch.delete(key_name(key));
                        } else {
                            let len = match rng.below(100) {
                                0..90 => rng.in_range(MIN_VALUE_LEN..16 * KIB),
                                _ => rng.in_range(64 * KIB..300 * KIB),
                            };
                            let id = ValueId {
                                key,
                                thread,
                                counter,
                                len,
                            };
                            batch.put(key_name(key), id.bytes());
                        }
                    }
                    store.write(&batch).expect("write batch");
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..2)
        .map(|reader| {
            let store = Arc::clone(store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0x8EAD_0000 + reader);
                for _ in 0..400 {
                    let key = rng.below(GROUPS * MEMBERS);
                    if let Some(v) = store.get(key_name(key)).expect("get") {
                        decode_value(key, &v).unwrap_or_else(|e| panic!("concurrent get: {e}"));
                    }
                }
            })
        })
        .collect();
    for handle in writers.into_iter().chain(readers) {
        handle.join().expect("thread panicked");
    }
    read_contents(store, GROUPS * MEMBERS, "after the writers")
}

/// Asserts that the keys of every group are all absent or all carry one version.
#[track_caller]
fn assert_groups_atomic(contents: &Contents, what: &str) {
    let ids = decode_contents(contents, what);
    for group in 0..GROUPS {
        let versions: Vec<Option<(usize, usize)>> = (0..MEMBERS)
            .map(|m| {
                ids.get(&member_key(group, m))
                    .map(|id| (id.thread, id.counter))
            })
            .collect();
        assert!(
            versions.iter().all(|v| *v == versions[0]),
            "{what}: group {group} mixes versions (thread, batch) {versions:?}"
        );
    }
}

fn run_group_batches(what: &str, durability: Durability, ending: Ending) {
    let fx = Fixture::new(stress_options(IoMode::Direct, durability).segment_size(1 << 20));
    let store = Arc::new(fx.open());
    let before = write_group_batches(&store, 8, 40);
    assert_groups_atomic(&before, what);
    assert!(!before.is_empty(), "{what}: every group ended deleted");

    let store = reopen(
        &fx,
        Arc::into_inner(store).expect("threads are done"),
        ending,
    );
    let what = format!("{what} after {ending:?} and reopen");
    let after = read_contents(&store, GROUPS * MEMBERS, &what);
    assert_groups_atomic(&after, &what);
    if durability == Durability::Sync {
        // Every batch was durable when it returned.
        assert_same_contents(&after, &before, &what);
    }
    store.close().expect("close");
}

#[test]
fn batches_are_atomic_to_concurrent_readers_after_commit() {
    run_group_batches("sync batches", Durability::Sync, Ending::Close);
}

#[test]
fn sync_batches_survive_a_crash_whole() {
    run_group_batches("sync batches", Durability::Sync, Ending::Crash);
}

/// A crash loses the buffered batches still in the write buffer, possibly one cut in the middle
/// by a buffer boundary: recovery must drop such a batch whole.
#[test]
fn buffered_batches_stay_atomic_when_a_crash_loses_some() {
    run_group_batches("buffered batches", Durability::Buffered, Ending::Crash);
}

// ---------------------------------------------------------------------------------------------
// Group commit caps
// ---------------------------------------------------------------------------------------------

#[test]
fn group_commit_caps_keep_working() {
    const THREADS: usize = 16;
    const PUTS: usize = 60;
    const KEYS_PER_THREAD: usize = 20;
    let opts = stress_options(IoMode::Direct, Durability::Sync)
        .segment_size(1 << 20)
        .max_group_records(3)
        .max_group_bytes(16 * KIB as u64);
    let fx = Fixture::new(opts);
    let store = Arc::new(fx.open());
    let writers: Vec<_> = (0..THREADS)
        .map(|thread| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                let mut rng = XorShift::new(0xCA95_0000 + thread as u64);
                let mut last: HashMap<usize, ValueId> = HashMap::new();
                for counter in 1..=PUTS {
                    let key = thread * KEYS_PER_THREAD + rng.below(KEYS_PER_THREAD);
                    // Some values alone exceed the group's byte cap.
                    let len = match rng.below(100) {
                        0..85 => rng.in_range(MIN_VALUE_LEN..8 * KIB),
                        _ => rng.in_range(16 * KIB..48 * KIB),
                    };
                    let id = ValueId {
                        key,
                        thread,
                        counter,
                        len,
                    };
                    let name = key_name(key);
                    store.put(&name, id.bytes()).expect("put");
                    // Only this thread writes this key: it reads back what it wrote.
                    let got = store.get(&name).expect("get").expect("own key present");
                    assert_eq!(decode_value(key, &got), Ok(id), "read own write");
                    last.insert(key, id);
                }
                last
            })
        })
        .collect();
    let expected: BTreeMap<usize, ValueId> = writers
        .into_iter()
        .flat_map(|w| w.join().expect("writer thread panicked"))
        .collect();
    let keys = THREADS * KEYS_PER_THREAD;
    let before = read_contents(&store, keys, "after the writers");
    assert_eq!(decode_contents(&before, "after the writers"), expected);

    let store = reopen(
        &fx,
        Arc::into_inner(store).expect("writers are done"),
        Ending::Crash,
    );
    assert!(
        !store.recovery().recovered.is_empty(),
        "the crash left an unsealed segment to recover: {:?}",
        store.recovery()
    );
    let after = read_contents(&store, keys, "after crash and reopen");
    assert_eq!(
        decode_contents(&after, "after crash and reopen"),
        expected,
        "every acknowledged put survives the crash"
    );
    store.close().expect("close");
}
