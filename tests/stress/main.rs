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

#[path = "../common/mod.rs"]
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

// The tests, a module per part (one test binary: every binary costs a link).
mod batches;
mod group_commit;
mod mixed;
