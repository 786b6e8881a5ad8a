//! Crash-safety tests.
//!
//! - kill -9 of a process writing from several threads, round after round on one directory:
//!   single puts and deletes; then also atomic batches (all-or-nothing) and large values in blob
//!   files. `PODSTORE_CRASH_SEED` and `PODSTORE_CRASH_ROUNDS` vary them for long runs
//!   (scripts/crash-loop.sh);
//! - a second process refused by the directory lock until the holder dies;
//! - torn tails (truncations) and torn blocks (zeroes, garbage) in the segment being written,
//!   with the recovered store reopened again;
//! - a crash during recovery, between writing the new footer and cutting the torn tail;
//! - `Durability::Buffered` losing only a suffix of the writes at a crash;
//! - a sealed segment cut inside its footer, and the footer's recorded data end;
//! - flipped and zeroed bytes in sealed segments: reported as `Error::Corruption`, never
//!   returned as data.
//!
//! The multi-process tests run this same test binary again with `--exact crash_child`; that
//! test does nothing unless `PODSTORE_CRASH_CHILD` is set.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use podstore::format::footer::{TRAILER_LEN, Trailer};
use podstore::format::record::{
    FLAG_BATCH_CONTINUES, RECORD_HEADER_LEN, RecordHeader, RecordKind, RecordPlace, decode_record,
};
use podstore::format::scan::scan_segment;
use podstore::format::segment_header::SEGMENT_HEADER_LEN;
use podstore::{Durability, Error, IoMode, Options, Store};
use tempfile::TempDir;

/// Write block size of the test file system (ext4) and value chunk size.
const BLOCK: u64 = 4096;
const CHUNK: u64 = 4096;
const MODES: [IoMode; 2] = [IoMode::Direct, IoMode::Buffered];

// ---------------------------------------------------------------------------------------------
// Shared helpers: deterministic randomness, values, store files, scanned records, checks.
// ---------------------------------------------------------------------------------------------

/// splitmix64: small, deterministic, good enough for workloads and garbage.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len + 8);
        while out.len() < len {
            out.extend_from_slice(&self.next_u64().to_le_bytes());
        }
        out.truncate(len);
        out
    }

    /// Random bytes whose first byte is not zero (so that they never read as padding).
    fn garbage(&mut self, len: usize) -> Vec<u8> {
        let mut g = self.bytes(len);
        if let Some(b) = g.first_mut() {
            *b |= 0x80;
        }
        g
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xCBF2_9CE4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// The value written as version `version` of `key`: derived from both, so it can be verified.
fn value_for(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    Rng::new(fnv1a(key) ^ version.wrapping_mul(0x2545_F491_4F6C_DD1D)).bytes(len)
}

fn mode_name(mode: IoMode) -> &'static str {
    match mode {
        IoMode::Direct => "direct",
        IoMode::Buffered => "buffered",
        IoMode::Auto => "auto",
    }
}

fn parse_mode(name: &str) -> IoMode {
    MODES
        .into_iter()
        .find(|&m| mode_name(m) == name)
        .unwrap_or_else(|| panic!("unknown io mode {name}"))
}

/// Small segments (several per test) and small write buffers (values larger than one).
fn options(mode: IoMode, durability: Durability) -> Options {
    Options::default()
        .io_mode(mode)
        .durability(durability)
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
}

fn open(dir: &Path, mode: IoMode) -> Store {
    Store::open_with(dir, options(mode, Durability::Sync))
        .unwrap_or_else(|e| panic!("open {} ({}): {e}", dir.display(), mode_name(mode)))
}

fn segment_name(id: u64) -> String {
    format!("seg-{id:016x}.pod")
}

/// The two kinds of store file: log segments (`seg-`) and blob files (`blob-`, one large value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Log,
    Blob,
}

fn store_file_name(id: u64, kind: FileKind) -> String {
    match kind {
        FileKind::Log => segment_name(id),
        FileKind::Blob => format!("blob-{id:016x}.pod"),
    }
}

/// The store files in `dir` (log segments and blob files), by ascending id.
fn store_files(dir: &Path) -> Vec<(u64, FileKind)> {
    let mut files: Vec<(u64, FileKind)> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().ok()?;
            let (kind, rest) = match name.strip_prefix("seg-") {
                Some(rest) => (FileKind::Log, rest),
                None => (FileKind::Blob, name.strip_prefix("blob-")?),
            };
            let hex = rest.strip_suffix(".pod")?;
            Some((u64::from_str_radix(hex, 16).ok()?, kind))
        })
        .collect();
    files.sort_unstable_by_key(|f| f.0);
    files
}

/// Ids of the log segment files in `dir`, ascending.
fn segment_ids(dir: &Path) -> Vec<u64> {
    store_files(dir)
        .into_iter()
        .filter_map(|(id, kind)| (kind == FileKind::Log).then_some(id))
        .collect()
}

/// Every segment file of `dir` with its bytes, by ascending id.
fn read_segments(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    segment_ids(dir)
        .into_iter()
        .map(|id| (id, std::fs::read(dir.join(segment_name(id))).unwrap()))
        .collect()
}

/// A fresh store directory holding exactly these segment files.
fn store_with<'a>(files: impl IntoIterator<Item = (u64, &'a [u8])>) -> TempDir {
    let dir = TempDir::new().unwrap();
    for (id, bytes) in files {
        std::fs::write(dir.path().join(segment_name(id)), bytes).unwrap();
    }
    dir
}

/// A copy of the store files of `dir`, log segments and blob files (what the next opener of
/// `dir` would find).
fn copy_store(dir: &Path) -> TempDir {
    let copy = TempDir::new().unwrap();
    for (id, kind) in store_files(dir) {
        let name = store_file_name(id, kind);
        std::fs::copy(dir.join(&name), copy.path().join(&name)).unwrap();
    }
    copy
}

fn show_key(key: &[u8]) -> String {
    let s = String::from_utf8_lossy(key);
    if s.len() > 24 {
        format!("{}…", &s[..24])
    } else {
        s.into_owned()
    }
}

fn describe(v: Option<&[u8]>) -> String {
    match v {
        None => "absent".into(),
        Some(b) => format!("{} bytes (fnv {:016x})", b.len(), fnv1a(b)),
    }
}

/// Asserts that `key` reads back as `expected` (`None`: absent).
fn assert_reads(store: &Store, key: &[u8], expected: Option<&[u8]>, ctx: &str) {
    let got = store
        .get(key)
        .unwrap_or_else(|e| panic!("{ctx}: get {}: {e}", show_key(key)));
    assert!(
        got.as_deref() == expected,
        "{ctx}: key {}: got {}, expected {}",
        show_key(key),
        describe(got.as_deref()),
        describe(expected)
    );
}

/// Asserts that `get` of `key` fails with `Error::Corruption` in segment `segment`, at an offset
/// in `[lo, hi)`; returns the offset.
fn assert_corrupt(
    result: podstore::Result<Option<Vec<u8>>>,
    segment: u64,
    lo: u64,
    hi: u64,
    ctx: &str,
) -> u64 {
    match result {
        Err(Error::Corruption {
            segment: s, offset, ..
        }) => {
            assert_eq!(
                s, segment,
                "{ctx}: corruption reported in the wrong segment"
            );
            assert!(
                (lo..hi).contains(&offset),
                "{ctx}: corruption offset {offset} outside [{lo}, {hi})"
            );
            offset
        }
        Err(e) => panic!("{ctx}: expected Error::Corruption, got error {e}"),
        Ok(v) => panic!(
            "{ctx}: expected Error::Corruption, got {}",
            describe(v.as_deref())
        ),
    }
}

/// Threads for independent checks of many store copies (bound by fsync latency, not CPU).
const WORKERS: usize = 4;

/// Runs `check` on every item, on a few threads; a panic in any of them fails the caller.
fn for_each_parallel<T: Sync>(items: &[T], check: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    check(item);
                }
            });
        }
    });
}

/// A record found by scanning segment bytes, with its absolute offsets.
#[derive(Debug, Clone)]
struct Rec {
    segment: u64,
    key: Vec<u8>,
    kind: RecordKind,
    offset: u64,
    value_offset: u64,
    value_len: u64,
    table_offset: u64,
    end: u64,
}

impl Rec {
    fn chunks(&self) -> u64 {
        self.value_len.div_ceil(CHUNK)
    }
}

/// The whole records of a segment image, in file order (a sealed segment's stop at its footer).
fn scan_records(segment: u64, bytes: &[u8]) -> Vec<Rec> {
    let outcome = scan_segment(bytes, segment)
        .unwrap_or_else(|e| panic!("segment {segment}: scan failed: {e:?}"));
    outcome
        .records
        .iter()
        .map(|e| {
            let at = &bytes[e.offset as usize..];
            let header = RecordHeader::decode(at).expect("scanned record header");
            let place = RecordPlace {
                segment,
                offset: e.offset,
            };
            decode_record(at, place).expect("scanned record verifies");
            Rec {
                segment,
                key: e.key.clone(),
                kind: e.kind,
                offset: e.offset,
                value_offset: e.offset + header.value_offset(),
                value_len: header.value_len,
                table_offset: e.offset + header.table_offset(),
                end: e.offset + header.encoded_len(),
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Child processes.
// ---------------------------------------------------------------------------------------------

const CHILD_TEST: &str = "crash_child";
const CHILD_DIR_VAR: &str = "PODSTORE_CRASH_CHILD";
const CHILD_JOB_VAR: &str = "PODSTORE_CRASH_JOB";
/// Marks the child's messages among libtest's own output.
const MARK: &str = "@@";
/// Longest wait for one message from a child.
const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

const HELD_KEY: &[u8] = b"held-by-child";
const HELD_VALUE: &[u8] = b"written by the process holding the lock";

/// The child side of the multi-process tests; a no-op in an ordinary test run.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_DIR_VAR) else {
        return;
    };
    let job = std::env::var(CHILD_JOB_VAR).expect("job of the crash child");
    match job.split_whitespace().collect::<Vec<_>>()[..] {
        ["hold", mode] => hold_child(Path::new(&dir), parse_mode(mode)),
        ["failpoint", name, skip, mode] => failpoint_child(
            Path::new(&dir),
            name,
            skip.parse().unwrap(),
            parse_mode(mode),
        ),
        ["workload", mix, mode, seed, round] => workload_child(
            Path::new(&dir),
            Mix::parse(mix),
            parse_mode(mode),
            seed.parse().unwrap(),
            round.parse().unwrap(),
        ),
        _ => panic!("unknown crash child job {job:?}"),
    }
}

/// Sends one message line to the parent, flushed before returning, in one write (a pipe takes
/// it whole): a kill cannot leave half of it.
fn emit(msg: &str) {
    let line = format!("{MARK}{msg}\n");
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .expect("write to the parent");
}

/// Opens the store, writes one key, says "ready" and holds the store until killed (or until the
/// parent closes stdin).
fn hold_child(dir: &Path, mode: IoMode) {
    let store = open(dir, mode);
    store.put(HELD_KEY, HELD_VALUE).unwrap();
    emit("ready");
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    store.close().unwrap();
}

/// A running child, its messages read by a thread. Dropping it kills the child.
struct ChildProc {
    child: Child,
    messages: Receiver<String>,
    _stdin: ChildStdin,
}

impl ChildProc {
    fn spawn(dir: &Path, job: &str) -> ChildProc {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_VAR, dir)
            .env(CHILD_JOB_VAR, job)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn crash child");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                // A line without its newline was cut by the kill: it was never sent.
                match out.read_until(b'\n', &mut line) {
                    Ok(_) if line.last() == Some(&b'\n') => {}
                    _ => break,
                }
                let line = String::from_utf8_lossy(&line[..line.len() - 1]);
                // libtest may print "test crash_child ... " in front of the first message.
                if let Some(at) = line.find(MARK)
                    && tx.send(line[at + MARK.len()..].to_string()).is_err()
                {
                    break;
                }
            }
        });
        ChildProc {
            child,
            messages,
            _stdin: stdin,
        }
    }

    /// The child's next message; `None` once its output has ended (it exited or was killed).
    fn next_message(&mut self) -> Option<String> {
        match self.messages.recv_timeout(CHILD_TIMEOUT) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("crash child sent nothing for {CHILD_TIMEOUT:?}")
            }
        }
    }

    /// SIGKILL, and reap.
    fn kill(&mut self) {
        self.child.kill().expect("kill crash child");
        self.child.wait().expect("reap crash child");
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------
// A crash at each step of the compaction protocol (failpoints abort the process there).
// ---------------------------------------------------------------------------------------------

/// Keys of the failpoint workload.
const FP_KEYS: u64 = 240;

/// The value of failpoint-workload key `i` after the workload: `Some((version, len))`, or `None`
/// for a deleted key. Keys are written at version 1; every third is overwritten at version 2,
/// every third deleted; every tenth value is large (a blob file), so that overwrites and
/// deletes leave dead blob files as well as dead log records.
fn fp_final(i: u64) -> KeyState {
    let len = fp_len(i, 2);
    match i % 3 {
        0 => Some((2, len)),
        1 => None,
        _ => Some((1, fp_len(i, 1))),
    }
}

fn fp_key(i: u64) -> String {
    format!("fp-{i}")
}

fn fp_len(i: u64, version: u64) -> usize {
    if i.is_multiple_of(10) {
        (LARGE_LEN.0 + i * 97) as usize
    } else {
        ((i * 131 + version * 7919) % (12 << 10)) as usize
    }
}

fn fp_options(mode: IoMode) -> Options {
    options(mode, Durability::Sync)
        .large_value_threshold(LARGE_THRESHOLD)
        .compaction_threshold(0.25)
        .background_compaction(false)
}

/// Writes the failpoint workload, arms failpoint `name` (to fire after `skip` hits) and
/// compacts; says "survived" if the compaction returns.
fn failpoint_child(dir: &Path, name: &str, skip: u64, mode: IoMode) {
    let store = Store::open_with(dir, fp_options(mode)).unwrap();
    for i in 0..FP_KEYS {
        let key = fp_key(i);
        store
            .put(key.as_bytes(), &op_value(key.as_bytes(), 1, fp_len(i, 1)))
            .unwrap();
    }
    for i in 0..FP_KEYS {
        let key = fp_key(i);
        match fp_final(i) {
            Some((2, len)) => store
                .put(key.as_bytes(), &op_value(key.as_bytes(), 2, len))
                .unwrap(),
            None => assert!(store.delete(key.as_bytes()).unwrap()),
            Some(_) => {}
        }
    }
    podstore::arm_failpoint(name, skip);
    let report = store.compact().unwrap();
    emit(&format!("survived {report:?}"));
    store.close().unwrap();
}

fn fp_verify(store: &Store, ctx: &str) {
    for i in 0..FP_KEYS {
        assert_key_state(store, &fp_key(i), fp_final(i), ctx);
    }
    assert_eq!(
        store.len() as u64,
        (0..FP_KEYS).filter(|&i| fp_final(i).is_some()).count() as u64,
        "{ctx}: live keys"
    );
}

/// For every compaction failpoint, for its first and a later hit: the child aborts there; the
/// store it leaves opens with every value intact and no deleted key back, compacts again, and
/// still holds after a further reopen.
#[test]
fn crash_at_every_step_of_compaction() {
    for mode in MODES {
        for &name in podstore::COMPACTION_FAILPOINTS {
            for skip in [0, 1] {
                let ctx = format!("{} failpoint {name} after {skip} hits", mode_name(mode));
                let dir = TempDir::new().unwrap();
                let mut child = ChildProc::spawn(
                    dir.path(),
                    &format!("failpoint {name} {skip} {}", mode_name(mode)),
                );
                if let Some(msg) = child.next_message() {
                    panic!("{ctx}: the failpoint never fired: {msg}");
                }
                let status = child.child.wait().unwrap();
                assert!(!status.success(), "{ctx}: child exited cleanly: {status:?}");
                let store = Store::open_with(dir.path(), fp_options(mode))
                    .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
                fp_verify(&store, &format!("{ctx}, reopened"));
                store.compact().unwrap();
                fp_verify(&store, &format!("{ctx}, compacted again"));
                store.close().unwrap();
                let store = Store::open_with(dir.path(), fp_options(mode)).unwrap();
                fp_verify(&store, &format!("{ctx}, reopened again"));
                let stats = store.stats();
                assert!(
                    stats.disk_bytes < 2 * stats.live_bytes + (2 << 20),
                    "{ctx}: space not given back: {stats:?}"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// kill -9 during concurrent durable writes: single puts and deletes, then also atomic batches
// and large values written to blob files.
// ---------------------------------------------------------------------------------------------

const THREADS: usize = 4;
/// Rounds of each kill -9 test (one child, one kill each, all on one directory).
const ROUNDS: u64 = 5;
/// Overrides [`ROUNDS`] (for long runs: scripts/crash-loop.sh).
const ROUNDS_VAR: &str = "PODSTORE_CRASH_ROUNDS";
/// Varies the workloads and kill points of the kill -9 tests; 0, the default, is the fixed seed
/// they always run with.
const SEED_VAR: &str = "PODSTORE_CRASH_SEED";
/// Each round's child is killed after a number of acknowledged operations in this range.
const KILL_AFTER: (u64, u64) = (1, 250);
/// Operations per child thread if it is never killed (it always is, long before).
const CHILD_MAX_OPS: usize = 100_000;
/// `Options::large_value_threshold` of the mixed workload, below its large values.
const LARGE_THRESHOLD: u64 = 96 << 10;
/// Length range of the mixed workload's large values: a blob file each when put alone.
const LARGE_LEN: (u64, u64) = (100 << 10, 300 << 10);

fn env_u64(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{var}={s:?}: {e}")),
        Err(_) => default,
    }
}

/// `base` varied by the crash seed; seed 0 leaves it unchanged.
fn seeded(base: u64, seed: u64) -> u64 {
    base ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the threads of a kill -9 child do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mix {
    /// Single puts (up to 160 KiB, all through the log) and deletes of the round's own keys.
    Plain,
    /// Single puts and deletes, atomic batches of 2 to 6 puts and deletes, and large values put
    /// alone (blob files) or in batches (through the log). Keys of earlier rounds are
    /// overwritten and deleted, deleted keys are written again.
    Batches,
    /// [`Mix::Batches`] while the store compacts: a low threshold, the background compactor
    /// unthrottled, and one more thread calling `Store::compact` in a loop.
    Compact,
}

impl Mix {
    fn name(self) -> &'static str {
        match self {
            Mix::Plain => "plain",
            Mix::Batches => "batches",
            Mix::Compact => "compact",
        }
    }

    fn parse(name: &str) -> Mix {
        [Mix::Plain, Mix::Batches, Mix::Compact]
            .into_iter()
            .find(|m| m.name() == name)
            .unwrap_or_else(|| panic!("unknown workload mix {name}"))
    }

    fn options(self, mode: IoMode) -> Options {
        let opts = options(mode, Durability::Sync);
        match self {
            Mix::Plain => opts,
            Mix::Batches => opts.large_value_threshold(LARGE_THRESHOLD),
            Mix::Compact => opts
                .large_value_threshold(LARGE_THRESHOLD)
                .compaction_threshold(0.25)
                .compaction_rate(None),
        }
    }

    /// Names the test in messages and seeds its kill points.
    fn label(self, mode: IoMode) -> String {
        match self {
            Mix::Plain => mode_name(mode).to_string(),
            Mix::Batches => format!("batches {}", mode_name(mode)),
            Mix::Compact => format!("compact {}", mode_name(mode)),
        }
    }
}

fn open_mix(dir: &Path, mix: Mix, mode: IoMode) -> Store {
    Store::open_with(dir, mix.options(mode))
        .unwrap_or_else(|e| panic!("open {} ({}): {e}", dir.display(), mix.label(mode)))
}

/// The state of a key: `Some((version, len))` for a value, `None` when absent.
type KeyState = Option<(u64, usize)>;

/// The value of `key` at `version` in the kill -9 workloads: [`value_for`] with the version in
/// its first 8 bytes (when it has them), so that a value read back names the write it came from.
fn op_value(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut value = value_for(key, version, len);
    let n = len.min(8);
    value[..n].copy_from_slice(&version.to_le_bytes()[..n]);
    value
}

fn expected_value(key: &str, state: KeyState) -> Option<Vec<u8>> {
    state.map(|(version, len)| op_value(key.as_bytes(), version, len))
}

/// A value read back, with the version it claims.
fn describe_found(found: Option<&[u8]>) -> String {
    match found {
        Some(v) if v.len() >= 8 => format!(
            "{} (stamped version {})",
            describe(found),
            u64::from_le_bytes(v[..8].try_into().unwrap())
        ),
        _ => describe(found),
    }
}

/// One operation of a batch: a put of a value of this length (`Some`) or a delete (`None`).
type BatchOp = (String, Option<usize>);

/// One operation of a child thread. Each thread owns its keys and runs its operations in order,
/// so at the kill every key is in the state after the thread's last acknowledged operation or,
/// for the keys of the one operation that may have been in flight, after that operation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put {
        key: String,
        version: u64,
        len: usize,
    },
    Delete {
        key: String,
    },
    /// An atomic batch: every value it puts carries its version.
    Batch {
        version: u64,
        ops: Vec<BatchOp>,
    },
}

impl Op {
    /// The state of every key the operation writes, after it (a batch's later write of a key
    /// wins), in the order of first write.
    fn effects(&self) -> Vec<(String, KeyState)> {
        match self {
            Op::Put { key, version, len } => vec![(key.clone(), Some((*version, *len)))],
            Op::Delete { key } => vec![(key.clone(), None)],
            Op::Batch { version, ops } => {
                let mut out: Vec<(String, KeyState)> = Vec::new();
                for (key, len) in ops {
                    let state = len.map(|len| (*version, len));
                    match out.iter_mut().find(|(k, _)| k == key) {
                        Some(e) => e.1 = state,
                        None => out.push((key.clone(), state)),
                    }
                }
                out
            }
        }
    }

    /// How the child acknowledges it.
    fn describe(&self) -> String {
        match self {
            Op::Put { key, version, len } => format!("put {key} {version} {len}"),
            Op::Delete { key } => format!("del {key}"),
            Op::Batch { version, ops } => {
                let mut s = format!("batch {version}");
                for (key, len) in ops {
                    match len {
                        Some(len) => s += &format!(" {key}={len}"),
                        None => s += &format!(" {key}=del"),
                    }
                }
                s
            }
        }
    }

    fn run(&self, store: &Store) -> podstore::Result<()> {
        match self {
            Op::Put { key, version, len } => {
                store.put(key.as_bytes(), &op_value(key.as_bytes(), *version, *len))
            }
            Op::Delete { key } => match store.delete(key.as_bytes())? {
                true => Ok(()),
                false => Err(Error::InvalidOptions("delete of a live key found nothing")),
            },
            Op::Batch { version, ops } => {
                let mut batch = podstore::Batch::new();
                for (key, len) in ops {
                    match len {
                        Some(len) => {
                            batch.put(key.as_bytes(), &op_value(key.as_bytes(), *version, *len))
                        }
                        None => batch.delete(key.as_bytes()),
                    };
                }
                store.write(&batch)
            }
        }
    }
}

/// The thread that owns `key` (`r<round>-t<thread>-<n>`).
fn key_owner(key: &str) -> usize {
    key.split('-')
        .nth(1)
        .and_then(|t| t.strip_prefix('t'))
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("key {key:?} names no owner thread"))
}

/// The live keys a round's threads start from, per thread, sorted: those of earlier rounds for
/// [`Mix::Batches`] (the child reads them from the store, the parent from its model), none for
/// [`Mix::Plain`].
fn inherited_keys(mix: Mix, live: impl Iterator<Item = String>) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); THREADS];
    if mix != Mix::Plain {
        for key in live {
            out[key_owner(&key)].push(key);
        }
        for keys in &mut out {
            keys.sort_unstable();
        }
    }
    out
}

/// The deterministic operations of thread `thread` in round `round`.
///
/// [`Mix::Plain`]: new keys, overwrites of live keys, deletes of live keys (a deleted key is
/// never written again); versions count per key.
///
/// [`Mix::Batches`]: the same over the thread's keys of this and earlier rounds, deleted keys
/// written again, large values, and batches; versions are unique in the directory's history
/// (round and operation number), so a value read back names the operation that wrote it.
struct Workload {
    mix: Mix,
    rng: Rng,
    prefix: String,
    next_key: u64,
    /// Live keys, with the version of the next overwrite (used by [`Mix::Plain`]).
    live: Vec<(String, u64)>,
    /// Keys deleted in this round ([`Mix::Batches`]).
    dead: Vec<String>,
    next_version: u64,
}

impl Workload {
    fn new(mix: Mix, seed: u64, round: u64, thread: usize, inherited: Vec<String>) -> Workload {
        Workload {
            mix,
            rng: Rng::new(seeded(round << 8 | thread as u64, seed)),
            prefix: format!("r{round}-t{thread}"),
            next_key: 0,
            live: inherited.into_iter().map(|k| (k, 0)).collect(),
            dead: Vec::new(),
            next_version: round << 32,
        }
    }

    /// Mostly small and medium values, some empty, some larger than the 64 KiB write buffer.
    fn value_len(&mut self) -> usize {
        (match self.rng.below(20) {
            0 => self.rng.below(64),
            1 => self.rng.between(64 << 10, 160 << 10),
            _ => self.rng.below(40 << 10),
        }) as usize
    }

    fn new_key(&mut self) -> String {
        let key = format!("{}-{}", self.prefix, self.next_key);
        self.next_key += 1;
        key
    }

    fn plain(&mut self) -> Op {
        let roll = self.rng.below(100);
        if self.live.is_empty() || roll < 65 {
            let key = self.new_key();
            self.live.push((key.clone(), 0));
            Op::Put {
                key,
                version: 0,
                len: self.value_len(),
            }
        } else if roll < 82 {
            let i = self.rng.below(self.live.len() as u64) as usize;
            self.live[i].1 += 1;
            let (key, version) = self.live[i].clone();
            Op::Put {
                key,
                version,
                len: self.value_len(),
            }
        } else {
            let i = self.rng.below(self.live.len() as u64) as usize;
            Op::Delete {
                key: self.live.swap_remove(i).0,
            }
        }
    }

    /// A value that goes through the log: mostly small, some empty, some larger than the 64 KiB
    /// write buffer, all below the large value threshold.
    fn small_len(&mut self) -> usize {
        (match self.rng.below(20) {
            0 => self.rng.below(16),
            1 => self.rng.between(64 << 10, LARGE_THRESHOLD),
            _ => self.rng.below(24 << 10),
        }) as usize
    }

    fn large_len(&mut self) -> usize {
        self.rng.between(LARGE_LEN.0, LARGE_LEN.1) as usize
    }

    /// A value in a batch: batches also hold values that span write buffers and large ones
    /// (which a batch writes through the log).
    fn batch_len(&mut self) -> usize {
        match self.rng.below(30) {
            0 => self.large_len(),
            1..=3 => self.rng.between(64 << 10, 160 << 10) as usize,
            _ => self.rng.below(8 << 10) as usize,
        }
    }

    fn pick(&mut self, keys: usize) -> usize {
        self.rng.below(keys as u64) as usize
    }

    /// A key to put: a deleted one written again, a live one overwritten, or a new one.
    fn put_key(&mut self) -> String {
        let roll = self.rng.below(100);
        if !self.dead.is_empty() && roll < 10 {
            let i = self.pick(self.dead.len());
            self.dead[i].clone()
        } else if !self.live.is_empty() && roll < 55 {
            let i = self.pick(self.live.len());
            self.live[i].0.clone()
        } else {
            self.new_key()
        }
    }

    /// A key for a batch to delete: mostly a live one, sometimes one that is absent.
    fn batch_delete_key(&mut self) -> String {
        if !self.live.is_empty() && self.rng.below(4) != 0 {
            let i = self.pick(self.live.len());
            self.live[i].0.clone()
        } else if !self.dead.is_empty() && self.rng.below(2) == 0 {
            let i = self.pick(self.dead.len());
            self.dead[i].clone()
        } else {
            self.new_key()
        }
    }

    fn batches(&mut self) -> Op {
        let version = self.next_version;
        self.next_version += 1;
        let roll = self.rng.below(100);
        let op = if roll < 30 || (roll < 60 && self.live.is_empty()) {
            Op::Put {
                key: self.put_key(),
                version,
                len: self.small_len(),
            }
        } else if roll < 45 {
            Op::Put {
                key: self.put_key(),
                version,
                len: self.large_len(),
            }
        } else if roll < 60 {
            let i = self.pick(self.live.len());
            Op::Delete {
                key: self.live[i].0.clone(),
            }
        } else {
            let n = self.rng.between(2, 7) as usize;
            let mut ops: Vec<BatchOp> = Vec::with_capacity(n);
            for _ in 0..n {
                let put = self.rng.below(10) < 7;
                let key = if !ops.is_empty() && self.rng.below(8) == 0 {
                    // The same key again: the later operation wins.
                    let i = self.pick(ops.len());
                    ops[i].0.clone()
                } else if put {
                    self.put_key()
                } else {
                    self.batch_delete_key()
                };
                let len = if put { Some(self.batch_len()) } else { None };
                ops.push((key, len));
            }
            Op::Batch { version, ops }
        };
        for (key, state) in op.effects() {
            self.live.retain(|(k, _)| *k != key);
            self.dead.retain(|k| *k != key);
            match state {
                Some(_) => self.live.push((key, 0)),
                None => self.dead.push(key),
            }
        }
        op
    }
}

impl Iterator for Workload {
    type Item = Op;

    fn next(&mut self) -> Option<Op> {
        Some(match self.mix {
            Mix::Plain => self.plain(),
            Mix::Batches | Mix::Compact => self.batches(),
        })
    }
}

/// Runs the workload of `round` from `THREADS` threads, acknowledging every completed
/// operation, until killed.
fn workload_child(dir: &Path, mix: Mix, mode: IoMode, seed: u64, round: u64) {
    let store = open_mix(dir, mix, mode);
    let inherited = inherited_keys(
        mix,
        store
            .keys()
            .map(|k| String::from_utf8(k).expect("utf-8 key")),
    );
    let writing = std::sync::atomic::AtomicBool::new(true);
    std::thread::scope(|s| {
        if mix == Mix::Compact {
            let (store, writing) = (&store, &writing);
            s.spawn(move || {
                while writing.load(Ordering::Relaxed) {
                    match store.compact() {
                        Ok(r) if r.segments_compacted + r.blob_files_removed > 0 => emit(&format!(
                            "compacted {} {}",
                            r.segments_compacted, r.blob_files_removed
                        )),
                        Ok(_) => {}
                        Err(e) => {
                            emit(&format!("fail compaction: {e}"));
                            return;
                        }
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
        }
        let writing = &writing;
        for (t, keys) in inherited.into_iter().enumerate() {
            let store = &store;
            s.spawn(move || {
                let ops = Workload::new(mix, seed, round, t, keys);
                for (i, op) in ops.take(CHILD_MAX_OPS).enumerate() {
                    match op.run(store) {
                        Ok(()) => emit(&format!("ack {t} {i} {}", op.describe())),
                        Err(e) => {
                            emit(&format!("fail thread {t} op {i} ({}): {e}", op.describe()));
                            break;
                        }
                    }
                }
                writing.store(false, Ordering::Relaxed);
            });
        }
    });
    store.close().unwrap();
}

/// Runs one round's child and kills it after `kill_after` acknowledgements; returns every
/// acknowledgement it sent (also those sent between the count being reached and the kill),
/// per thread, in order. Counts the compactions it reported in `stats`.
fn run_until_killed(
    dir: &Path,
    job: &str,
    kill_after: usize,
    stats: &mut KillStats,
) -> Vec<Vec<String>> {
    let mut child = ChildProc::spawn(dir, job);
    let mut acked = vec![Vec::new(); THREADS];
    let mut count = 0;
    let mut killed = false;
    while let Some(msg) = child.next_message() {
        if let Some(fail) = msg.strip_prefix("fail ") {
            panic!("{job}: child failed: {fail}");
        }
        if let Some(counts) = msg.strip_prefix("compacted ") {
            let mut n = counts.split(' ').map(|n| n.parse::<usize>().unwrap());
            stats.segments_compacted += n.next().unwrap();
            stats.blobs_removed_by_compaction += n.next().unwrap();
            continue;
        }
        let rest = msg
            .strip_prefix("ack ")
            .unwrap_or_else(|| panic!("{job}: unexpected message {msg:?}"));
        let mut parts = rest.splitn(3, ' ');
        let (t, i, body) = (parts.next(), parts.next(), parts.next());
        let t: usize = t.unwrap().parse().unwrap();
        let i: usize = i.unwrap().parse().unwrap();
        assert_eq!(i, acked[t].len(), "{job}: acks of thread {t} out of order");
        acked[t].push(body.unwrap().to_string());
        count += 1;
        if count == kill_after {
            child.kill();
            killed = true;
        }
    }
    assert!(
        killed,
        "{job}: child stopped after {count} acks, before the kill ({:?})",
        child.child.wait()
    );
    acked
}

/// Asserts the state of one key of the kill -9 workload.
fn assert_key_state(store: &Store, key: &str, state: KeyState, ctx: &str) {
    let got = store
        .get(key.as_bytes())
        .unwrap_or_else(|e| panic!("{ctx}: get {key}: {e}"));
    let expected = expected_value(key, state);
    assert!(
        got == expected,
        "{ctx}: key {key}: got {}, expected {state:?}: {}",
        describe_found(got.as_deref()),
        describe(expected.as_deref())
    );
}

/// What the kill -9 rounds of one test checked.
#[derive(Debug, Default)]
struct KillStats {
    rounds: u64,
    acks: usize,
    /// In-flight operations found applied, found not applied, or that read the same either way.
    in_flight_applied: usize,
    in_flight_absent: usize,
    in_flight_either: usize,
    /// In-flight batches found whole, found absent.
    batches_applied: usize,
    batches_absent: usize,
    /// Recovered segments that held the first records of a batch after their last whole one:
    /// batches cut by the kill, which recovery dropped.
    torn_batches: usize,
    recovered_segments: usize,
    removed_blobs: usize,
    /// Log segments compacted and dead blob files removed by the child ([`Mix::Compact`]).
    segments_compacted: usize,
    blobs_removed_by_compaction: usize,
}

/// Checks the keys of thread `t` against its acknowledged operations `acks` (replayed from
/// `ops`), and the all-or-nothing of the operation after them; records what was found in `model`.
fn verify_thread(
    store: &Store,
    mut ops: Workload,
    t: usize,
    acks: &[String],
    model: &mut HashMap<String, KeyState>,
    stats: &mut KillStats,
    ctx: &str,
) {
    let mut state: HashMap<String, KeyState> = HashMap::new();
    for (i, ack) in acks.iter().enumerate() {
        let op = ops.next().unwrap();
        assert_eq!(
            &op.describe(),
            ack,
            "{ctx}: thread {t} op {i}: the child acknowledged another operation than the replay \
             (different keys inherited from earlier rounds?)"
        );
        state.extend(op.effects());
    }
    let in_flight = ops.next().unwrap();
    let effects = in_flight.effects();
    for (key, s) in &state {
        if !effects.iter().any(|(k, _)| k == key) {
            assert_key_state(store, key, *s, ctx);
            model.insert(key.clone(), *s);
        }
    }
    // The operation after the last acknowledged one may have happened: all of it, or none.
    let keys: Vec<(&str, KeyState, KeyState, Option<Vec<u8>>)> = effects
        .iter()
        .map(|(key, after)| {
            let before = state.get(key).or_else(|| model.get(key)).copied().flatten();
            let got = store
                .get(key.as_bytes())
                .unwrap_or_else(|e| panic!("{ctx}: get {key}: {e}"));
            (key.as_str(), before, *after, got)
        })
        .collect();
    let none = keys
        .iter()
        .all(|(key, before, _, got)| *got == expected_value(key, *before));
    let all = keys
        .iter()
        .all(|(key, _, after, got)| *got == expected_value(key, *after));
    assert!(
        none || all,
        "{ctx}: thread {t}: in-flight `{}` {}:{}",
        in_flight.describe(),
        if keys.len() > 1 {
            "is neither whole nor absent"
        } else {
            "left its key in another state"
        },
        keys.iter()
            .map(|(key, before, after, got)| format!(
                "\n  {key}: got {}; before {before:?}, after {after:?}",
                describe_found(got.as_deref())
            ))
            .collect::<String>()
    );
    let batch = matches!(in_flight, Op::Batch { .. });
    match (none, all) {
        (true, true) => stats.in_flight_either += 1,
        (true, false) => {
            stats.in_flight_absent += 1;
            stats.batches_absent += batch as usize;
        }
        _ => {
            stats.in_flight_applied += 1;
            stats.batches_applied += batch as usize;
        }
    }
    for (key, before, after, _) in keys {
        model.insert(key.to_string(), if all { after } else { before });
    }
    stats.acks += acks.len();
}

/// Checks every key ever written, and that the store holds no other key.
fn verify_model(store: &Store, model: &HashMap<String, KeyState>, ctx: &str) {
    for (key, s) in model {
        assert_key_state(store, key, *s, ctx);
    }
    let live = live_keys(model);
    let keys: HashSet<String> = store
        .keys()
        .map(|k| String::from_utf8(k).unwrap())
        .collect();
    assert_eq!(keys, live, "{ctx}: the store's keys");
    assert_eq!(store.len(), live.len(), "{ctx}: len");
}

fn live_keys(model: &HashMap<String, KeyState>) -> HashSet<String> {
    model
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(k, _)| k.clone())
        .collect()
}

/// Whether the whole records of a batch follow the last record recovery kept in segment
/// `segment` (bytes as the kill left them): records of a batch whose last one never reached the
/// file, which recovery dropped.
fn batch_cut_after(segment: u64, bytes: &[u8], data_end: u64) -> bool {
    let mut at = data_end as usize;
    let boundary = (data_end.div_ceil(BLOCK) * BLOCK) as usize;
    if bytes.len() >= boundary && bytes[at..boundary].iter().all(|&b| b == 0) {
        at = boundary; // the padding after a write group
    }
    let place = RecordPlace {
        segment,
        offset: at as u64,
    };
    bytes.get(at..).is_some_and(|rest| {
        decode_record(rest, place).is_ok_and(|r| r.header.flags & FLAG_BATCH_CONTINUES != 0)
    })
}

/// What opening a killed store may find and do, all in files new in this round: at most one log
/// segment left unsealed (the footer of the previous one is written before anything of the next
/// one), recovered; at most one log segment without a whole record and one unsealed blob file
/// per writing thread, removed. `before`: the files when the round started; `found`: when the
/// store was opened; `after`: once it was.
fn check_kill_report(
    store: &Store,
    before: &[(u64, FileKind)],
    found: &[(u64, FileKind)],
    after: &[(u64, FileKind)],
    stats: &mut KillStats,
    ctx: &str,
) {
    let report = store.recovery();
    let newest_before = before.last().map_or(0, |f| f.0);
    // At most the one log segment being written, and the blob files of the puts in flight (a
    // put killed between its record's sync and its footer's: the record is whole, and kept).
    let recovered_logs = report
        .recovered
        .iter()
        .filter(|r| found.contains(&(r.segment, FileKind::Log)))
        .count();
    assert!(
        recovered_logs <= 1 && report.recovered.len() - recovered_logs <= THREADS,
        "{ctx}: {report:?}"
    );
    for r in &report.recovered {
        assert!(
            found.contains(&(r.segment, FileKind::Log))
                || found.contains(&(r.segment, FileKind::Blob)),
            "{ctx}: recovered a file that is not the store's: {report:?}"
        );
        assert!(
            r.segment > newest_before,
            "{ctx}: old segment recovered: {report:?}"
        );
        assert!(r.data_end >= SEGMENT_HEADER_LEN as u64, "{ctx}: {report:?}");
    }
    let removed: Vec<(u64, FileKind)> = found
        .iter()
        .filter(|f| !after.contains(f))
        .copied()
        .collect();
    assert!(
        after.iter().all(|f| found.contains(f)),
        "{ctx}: open created files: found {found:?}, after {after:?}"
    );
    assert!(
        removed.iter().all(|f| f.0 > newest_before),
        "{ctx}: old files removed: {removed:?}"
    );
    let removed_blobs = removed.iter().filter(|f| f.1 == FileKind::Blob).count();
    // Unwritten blob files: one being written per thread, plus those a large put created ahead
    // (8 per directory fsync, so at most 7 spares per creation, one creation per thread).
    const BLOB_FILES_PER_CREATE: usize = 8;
    assert!(
        removed.len() - removed_blobs <= 1 && removed_blobs <= THREADS * BLOB_FILES_PER_CREATE,
        "{ctx}: removed {removed:?}"
    );
    assert_eq!(report.removed_segments, removed.len(), "{ctx}: {report:?}");
    assert_eq!(
        report.sealed_segments + report.recovered.len() + report.removed_segments,
        found.len(),
        "{ctx}: {report:?}"
    );
    stats.recovered_segments += report.recovered.len();
    stats.removed_blobs += removed_blobs;
}

/// `ROUNDS` rounds on one directory: a child writes with `mix` until killed at a random
/// acknowledgement; a copy of the directory is opened and checked against every acknowledged
/// operation, the next child recovers the directory itself. Prints a `crash-summary` line
/// (totalled by scripts/crash-loop.sh).
fn kill9_rounds(mix: Mix, mode: IoMode) {
    let seed = env_u64(SEED_VAR, 0);
    let rounds = env_u64(ROUNDS_VAR, ROUNDS);
    let label = mix.label(mode);
    let started = std::time::Instant::now();
    let dir = TempDir::new().unwrap();
    let mut rng = Rng::new(seeded(fnv1a(label.as_bytes()), seed));
    let mut model: HashMap<String, KeyState> = HashMap::new();
    let mut stats = KillStats::default();
    for round in 0..rounds {
        let before = store_files(dir.path());
        let inherited = inherited_keys(mix, live_keys(&model).into_iter());
        let kill_after = rng.between(KILL_AFTER.0, KILL_AFTER.1) as usize;
        let job = format!("workload {} {} {seed} {round}", mix.name(), mode_name(mode));
        let acked = run_until_killed(dir.path(), &job, kill_after, &mut stats);
        let ctx = format!(
            "{label} seed {seed} round {round} (killed after {} acks)",
            acked.iter().map(Vec::len).sum::<usize>()
        );
        // Check a copy, so that the next round's child recovers the crashed directory itself.
        let copy = copy_store(dir.path());
        let found = store_files(copy.path());
        let images = read_segments(copy.path());
        let store = open_mix(copy.path(), mix, mode);
        for r in &store.recovery().recovered {
            // Blob files (a put killed after its record was synced, before its footer) hold no
            // batches.
            if let Some((_, bytes)) = images.iter().find(|(id, _)| *id == r.segment) {
                stats.torn_batches += batch_cut_after(r.segment, bytes, r.data_end) as usize;
            }
        }
        check_kill_report(
            &store,
            &before,
            &found,
            &store_files(copy.path()),
            &mut stats,
            &ctx,
        );
        eprintln!("{ctx}: {} files, {:?}", found.len(), store.recovery());
        for (t, (acks, keys)) in acked.iter().zip(inherited).enumerate() {
            let ops = Workload::new(mix, seed, round, t, keys);
            verify_thread(&store, ops, t, acks, &mut model, &mut stats, &ctx);
        }
        verify_model(&store, &model, &ctx);
        stats.rounds += 1;
    }
    let store = open_mix(dir.path(), mix, mode);
    verify_model(&store, &model, &format!("{label} seed {seed} final reopen"));
    store.close().unwrap();
    if mix == Mix::Compact {
        // Otherwise the kills tested nothing of compaction.
        assert!(
            stats.segments_compacted > 0 && stats.blobs_removed_by_compaction > 0,
            "{label}: the children compacted nothing before their kills: {stats:?}"
        );
    }
    println!(
        "crash-summary: test={} seed={seed} rounds={} kills={} acks={} in_flight_applied={} \
         in_flight_absent={} in_flight_either={} batches_applied={} batches_absent={} \
         torn_batches={} recovered_segments={} removed_blobs={} segments_compacted={} \
         blobs_removed_by_compaction={} live_keys={} secs={:.1}",
        label.replace(' ', "-"),
        stats.rounds,
        stats.rounds,
        stats.acks,
        stats.in_flight_applied,
        stats.in_flight_absent,
        stats.in_flight_either,
        stats.batches_applied,
        stats.batches_absent,
        stats.torn_batches,
        stats.recovered_segments,
        stats.removed_blobs,
        stats.segments_compacted,
        stats.blobs_removed_by_compaction,
        live_keys(&model).len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn kill9_during_concurrent_sync_writes_direct() {
    kill9_rounds(Mix::Plain, IoMode::Direct);
}

#[test]
fn kill9_during_concurrent_sync_writes_buffered() {
    kill9_rounds(Mix::Plain, IoMode::Buffered);
}

#[test]
fn kill9_during_concurrent_batches_and_large_values_direct() {
    kill9_rounds(Mix::Batches, IoMode::Direct);
}

#[test]
fn kill9_during_concurrent_batches_and_large_values_buffered() {
    kill9_rounds(Mix::Batches, IoMode::Buffered);
}

#[test]
fn kill9_during_compaction_direct() {
    kill9_rounds(Mix::Compact, IoMode::Direct);
}

#[test]
fn kill9_during_compaction_buffered() {
    kill9_rounds(Mix::Compact, IoMode::Buffered);
}

// ---------------------------------------------------------------------------------------------
// A second process is locked out.
// ---------------------------------------------------------------------------------------------

#[test]
fn second_process_is_locked_out_until_the_holder_is_killed() {
    let dir = TempDir::new().unwrap();
    let mut child = ChildProc::spawn(dir.path(), "hold direct");
    assert_eq!(child.next_message().as_deref(), Some("ready"));
    match Store::open(dir.path()) {
        Err(Error::Locked { path }) => assert_eq!(path, dir.path()),
        other => panic!("expected Error::Locked while the child holds the store, got {other:?}"),
    }
    child.kill();
    let store = open(dir.path(), IoMode::Direct);
    assert_reads(
        &store,
        HELD_KEY,
        Some(HELD_VALUE),
        "after the holder was killed",
    );
    assert_eq!(store.len(), 1);
    store.close().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Torn tails and torn blocks in the segment being written; crashes during recovery; sealed
// segments cut inside their footer.
// ---------------------------------------------------------------------------------------------

/// One write of a single-threaded history: a put (`Some`) or a delete (`None`).
struct Written {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
}

/// Value bytes of a history.
const HISTORY_BYTES: usize = 1_400_000;

/// Value sizes around the chunk and block size, and larger than the 64 KiB write buffer.
const SIZES: [usize; 14] = [
    0, 1, 17, 300, 2000, 4095, 4096, 4097, 8192, 12_289, 40_000, 65_536, 70_000, 150_000,
];

/// A deterministic history of writes (new keys of varied lengths, overwrites, deletes) of
/// `HISTORY_BYTES` of values in all: more than one 1 MiB segment.
fn history(seed: u64) -> Vec<Written> {
    let mut rng = Rng::new(seed);
    let mut live: Vec<Vec<u8>> = Vec::new();
    let mut out = Vec::new();
    let mut bytes = 0;
    for i in 0.. {
        if bytes >= HISTORY_BYTES {
            break;
        }
        let roll = rng.below(100);
        let len = SIZES[rng.below(SIZES.len() as u64) as usize];
        let w = if live.is_empty() || roll < 72 {
            let key = format!("k{i:03}-{}", "x".repeat(rng.below(120) as usize)).into_bytes();
            live.push(key.clone());
            Written {
                value: Some(value_for(&key, i as u64, len)),
                key,
            }
        } else if roll < 86 {
            let key = live[rng.below(live.len() as u64) as usize].clone();
            Written {
                value: Some(value_for(&key, i as u64, len)),
                key,
            }
        } else {
            let key = live.swap_remove(rng.below(live.len() as u64) as usize);
            Written { key, value: None }
        };
        bytes += w.value.as_ref().map_or(0, Vec::len);
        out.push(w);
    }
    out
}

/// Checks that the first `kept` writes of `ops`, and only they, are visible in `store`: every
/// key has the value of its last write among them (absent if deleted or not yet written). Keys
/// in `length_only` are checked by value length.
fn check_history_prefix(
    store: &Store,
    ops: &[Written],
    kept: usize,
    length_only: &HashSet<&[u8]>,
    ctx: &str,
) {
    let mut expected: HashMap<&[u8], Option<&[u8]>> = HashMap::new();
    for w in &ops[..kept] {
        expected.insert(&w.key, w.value.as_deref());
    }
    let keys: BTreeSet<&[u8]> = ops.iter().map(|w| &w.key[..]).collect();
    for key in keys {
        let want = expected.get(key).copied().flatten();
        if length_only.contains(key) {
            let len = store.value_len(key).unwrap();
            let want = want.map(|v| v.len() as u64);
            assert_eq!(len, want, "{ctx}: length of {}", show_key(key));
        } else {
            assert_reads(store, key, want, ctx);
        }
    }
    let live = expected.values().filter(|v| v.is_some()).count();
    assert_eq!(store.len(), live, "{ctx}: len");
}

/// How the writes are grouped on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// `Durability::Sync`, one thread: every record is its own write group, padded to a block.
    SyncEach,
    /// `Durability::Buffered` with a flush every 1 to 4 writes: several records per group,
    /// records straddling blocks.
    Grouped,
}

/// The two layouts, each with one I/O mode.
const LAYOUTS: [(Layout, IoMode); 2] = [
    (Layout::SyncEach, IoMode::Direct),
    (Layout::Grouped, IoMode::Buffered),
];

/// Writes `ops` to a new store and makes all of them durable; returns the still open store.
fn write_history(dir: &Path, mode: IoMode, layout: Layout, ops: &[Written]) -> Store {
    let durability = match layout {
        Layout::SyncEach => Durability::Sync,
        Layout::Grouped => Durability::Buffered,
    };
    let store = Store::open_with(dir, options(mode, durability)).unwrap();
    let mut rng = Rng::new(99);
    let mut until_flush = 0;
    for w in ops {
        match &w.value {
            Some(v) => store.put(&w.key, v).unwrap(),
            None => assert!(store.delete(&w.key).unwrap()),
        }
        if layout == Layout::Grouped {
            if until_flush == 0 {
                store.flush().unwrap();
                until_flush = rng.between(1, 5);
            } else {
                until_flush -= 1;
            }
        }
    }
    store.flush().unwrap();
    store
}

/// The segment files of a store and the records in them, matched one to one with the history.
struct Image<'a> {
    ops: &'a [Written],
    mode: IoMode,
    /// Where the segments are. Copies hard-link the older ones from here (recovery only reads
    /// sealed segments; [`Image::assert_older_untouched`] checks it).
    dir: &'a Path,
    segments: Vec<(u64, Vec<u8>)>,
    recs: Vec<Rec>,
}

impl<'a> Image<'a> {
    fn read(dir: &'a Path, mode: IoMode, ops: &'a [Written]) -> Image<'a> {
        let segments = read_segments(dir);
        let recs: Vec<Rec> = segments
            .iter()
            .flat_map(|(id, bytes)| scan_records(*id, bytes))
            .collect();
        assert_eq!(recs.len(), ops.len(), "one record per write");
        for (r, w) in recs.iter().zip(ops) {
            assert_eq!(r.key, w.key);
            let kind = match w.value {
                Some(_) => RecordKind::Put,
                None => RecordKind::Tombstone,
            };
            assert_eq!(r.kind, kind);
            assert_eq!(r.value_len, w.value.as_ref().map_or(0, |v| v.len() as u64));
        }
        assert!(
            segments.len() >= 2,
            "the history should fill more than one segment"
        );
        Image {
            ops,
            mode,
            dir,
            segments,
            recs,
        }
    }

    /// The newest segment: its id and bytes.
    fn newest(&self) -> (u64, &[u8]) {
        let (id, bytes) = self.segments.last().unwrap();
        (*id, bytes)
    }

    /// A fresh store directory: the older segments (hard links) and `newest` as the newest.
    fn with_newest(&self, newest: &[u8]) -> TempDir {
        let copy = TempDir::new().unwrap();
        let (newest_id, _) = self.newest();
        for (id, _) in &self.segments[..self.segments.len() - 1] {
            let name = segment_name(*id);
            std::fs::hard_link(self.dir.join(&name), copy.path().join(&name)).unwrap();
        }
        std::fs::write(copy.path().join(segment_name(newest_id)), newest).unwrap();
        copy
    }

    /// The older segments, shared by every copy, were never written to.
    fn assert_older_untouched(&self) {
        for (id, bytes) in &self.segments[..self.segments.len() - 1] {
            let now = std::fs::read(self.dir.join(segment_name(*id))).unwrap();
            assert!(now == *bytes, "sealed segment {id} was modified by an open");
        }
    }

    /// Index of the first record of the newest segment.
    fn first_newest(&self) -> usize {
        let (id, _) = self.newest();
        self.recs.iter().position(|r| r.segment == id).unwrap()
    }

    /// The records of the newest segment.
    fn newest_recs(&self) -> &[Rec] {
        &self.recs[self.first_newest()..]
    }

    /// Checks that the first `kept` writes, and only they, are visible in `store`.
    ///
    /// Keys that the newest segment does not touch are the same for every prefix that keeps
    /// the older segments: their values are read in full only when everything is kept (once or
    /// a few times per test), otherwise only their length is checked (to keep O_DIRECT reads
    /// few).
    fn check_prefix(&self, store: &Store, kept: usize, ctx: &str) {
        let first = self.first_newest();
        let mut settled: HashSet<&[u8]> = HashSet::new();
        if (first..self.ops.len()).contains(&kept) {
            settled = self.ops[..first].iter().map(|w| &w.key[..]).collect();
            for w in &self.ops[first..] {
                settled.remove(&w.key[..]);
            }
        }
        check_history_prefix(store, self.ops, kept, &settled, ctx);
    }

    /// Opens a copy of the store whose newest segment is replaced by `newest` (a truncated or
    /// damaged version of it), and checks that exactly the records of that segment which end at
    /// or before `intact_to` are kept, plus everything in the older segments; then reopens the
    /// now sealed copy and checks again.
    fn check_recovers_prefix(&self, newest: &[u8], intact_to: u64, ctx: &str) {
        let (id, _) = self.newest();
        let older = self.segments.len() - 1;
        let dir = self.with_newest(newest);
        let first = self.first_newest();
        let whole = self.newest_recs().iter().take_while(|r| r.end <= intact_to);
        let kept = first + whole.clone().count();

        let store = Store::open_with(dir.path(), options(self.mode, Durability::Sync))
            .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
        let report = store.recovery();
        assert_eq!(report.sealed_segments, older, "{ctx}: {report:?}");
        if kept == first {
            assert!(report.recovered.is_empty(), "{ctx}: {report:?}");
            assert_eq!(report.removed_segments, 1, "{ctx}: {report:?}");
        } else {
            assert_eq!(report.removed_segments, 0, "{ctx}: {report:?}");
            assert_eq!(report.recovered.len(), 1, "{ctx}: {report:?}");
            let r = &report.recovered[0];
            let distinct: HashSet<&[u8]> = whole.map(|r| &r.key[..]).collect();
            assert_eq!(r.segment, id, "{ctx}: {report:?}");
            assert_eq!(r.data_end, self.recs[kept - 1].end, "{ctx}: {report:?}");
            assert_eq!(r.entries, distinct.len(), "{ctx}: {report:?}");
            if let Some(torn) = r.torn_at {
                assert!(
                    torn >= r.data_end && torn < newest.len() as u64,
                    "{ctx}: {report:?}"
                );
            }
        }
        self.check_prefix(&store, kept, ctx);
        store.close().unwrap();

        let store = open(dir.path(), self.mode);
        let report = store.recovery();
        assert!(report.recovered.is_empty(), "{ctx}, reopened: {report:?}");
        assert_eq!(report.removed_segments, 0, "{ctx}, reopened: {report:?}");
        self.check_prefix(&store, kept, &format!("{ctx}, reopened"));
        store.close().unwrap();
    }
}

/// Writes the history, crashes (no seal) and returns the directory.
fn crashed_store(layout: Layout, mode: IoMode, ops: &[Written]) -> TempDir {
    let dir = TempDir::new().unwrap();
    write_history(dir.path(), mode, layout, ops).simulate_crash();
    dir
}

/// Cuts of the sweep across the newest segment (besides those at and around every record).
const SWEEP_POINTS: u64 = 64;

/// Where to cut the newest segment: around every record boundary, inside headers, keys, values
/// and crc tables, and a sweep with an odd stride; all at or after the segment header.
fn cut_points(recs: &[Rec], len: u64) -> BTreeSet<u64> {
    let mut cuts = BTreeSet::new();
    for r in recs {
        let key_len = r.value_offset - r.offset - RECORD_HEADER_LEN as u64;
        cuts.extend([
            r.offset - 1,
            r.offset,
            r.offset + 1,
            r.offset + RECORD_HEADER_LEN as u64 / 2,
            r.offset + RECORD_HEADER_LEN as u64 + key_len / 2,
            r.value_offset + r.value_len / 2,
            r.table_offset + 2,
            r.table_offset + 4 * (r.chunks() / 2) + 1,
            r.end - 1,
            r.end,
            r.end + 1,
        ]);
    }
    let header = SEGMENT_HEADER_LEN as u64;
    cuts.extend((header..len).step_by(((len / SWEEP_POINTS) | 1) as usize));
    cuts.insert(len);
    cuts.retain(|c| (header..=len).contains(c));
    cuts
}

#[test]
fn torn_tail_keeps_exactly_the_whole_records_before_the_cut() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 1);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let cuts: Vec<u64> = cut_points(img.newest_recs(), bytes.len() as u64)
            .into_iter()
            .collect();
        for_each_parallel(&cuts, |&cut| {
            let ctx = format!("{layout:?}/{}: segment {id} cut at {cut}", mode_name(mode));
            img.check_recovers_prefix(&bytes[..cut as usize], cut, &ctx);
        });
        // An empty file is a segment whose creation was torn: removed, nothing else lost.
        img.check_recovers_prefix(&[], 0, &format!("{layout:?}: segment {id} cut to 0"));
        // Cuts inside the 64-byte segment header are not something a crash produces (the header
        // goes out in the segment's first block write): the open may refuse with Corruption, but
        // must never serve wrong data.
        for cut in [1, 32, SEGMENT_HEADER_LEN - 1] {
            let ctx = format!("{layout:?}: segment {id} cut at {cut} (inside its header)");
            let copy = img.with_newest(&bytes[..cut]);
            match Store::open_with(copy.path(), options(mode, Durability::Sync)) {
                Ok(store) => img.check_prefix(&store, img.first_newest(), &ctx),
                Err(Error::Corruption { segment, .. }) => {
                    assert_eq!(segment, id, "{ctx}");
                    eprintln!("note: {ctx}: open refused with Corruption");
                }
                Err(e) => panic!("{ctx}: {e}"),
            }
        }
        img.assert_older_untouched();
        eprintln!(
            "{layout:?}/{}: {} cuts of a {}-byte segment",
            mode_name(mode),
            cuts.len(),
            bytes.len()
        );
    }
}

/// Ways a write can be torn other than a short file.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Everything from the boundary on reads as zeroes (file length kept).
    ZeroTail,
    /// 5000 bytes of garbage from the boundary on (extending the file if needed).
    GarbageAfter,
    /// The first whole block at or after the boundary reads as zeroes (appended if past the end).
    ZeroBlock,
    /// The first whole block at or after the boundary holds garbage (appended if past the end).
    GarbageBlock,
}

impl Damage {
    const ALL: [Damage; 4] = [
        Damage::ZeroTail,
        Damage::GarbageAfter,
        Damage::ZeroBlock,
        Damage::GarbageBlock,
    ];

    /// Damages `bytes` from `boundary` on; returns where the damage starts.
    fn apply(self, bytes: &mut Vec<u8>, boundary: u64, rng: &mut Rng) -> u64 {
        let (start, len) = match self {
            Damage::ZeroTail => (boundary, bytes.len() as u64 - boundary),
            Damage::GarbageAfter => (boundary, 5000),
            Damage::ZeroBlock | Damage::GarbageBlock => (boundary.next_multiple_of(BLOCK), BLOCK),
        };
        let (s, e) = (start as usize, (start + len) as usize);
        if bytes.len() < e {
            bytes.resize(e, 0);
        }
        match self {
            Damage::ZeroTail | Damage::ZeroBlock => bytes[s..e].fill(0),
            Damage::GarbageAfter | Damage::GarbageBlock => {
                bytes[s..e].copy_from_slice(&rng.garbage(e - s))
            }
        }
        start
    }
}

#[test]
fn torn_block_or_garbage_after_a_record_keeps_the_records_before_it() {
    let mut rng = Rng::new(4);
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 11);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let recs = img.newest_recs();
        // About eight boundaries, always the first and the last record's end.
        let step = (recs.len() / 8).max(1);
        let mut boundaries: BTreeSet<u64> = recs.iter().step_by(step).map(|r| r.end).collect();
        boundaries.insert(recs.last().unwrap().end);
        let mut cases = Vec::new();
        for &b in &boundaries {
            for damage in Damage::ALL {
                let mut damaged = bytes.to_vec();
                let start = damage.apply(&mut damaged, b, &mut rng);
                let ctx = format!(
                    "{layout:?}/{}: segment {id}, {damage:?} after the record ending at {b} \
                     (damage from {start})",
                    mode_name(mode)
                );
                cases.push((damaged, start, ctx));
            }
        }
        for_each_parallel(&cases, |(damaged, start, ctx)| {
            img.check_recovers_prefix(damaged, *start, ctx)
        });
        img.assert_older_untouched();
    }
}

#[test]
fn sealed_segment_cut_inside_its_footer_is_rescanned() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 21);
        let dir = TempDir::new().unwrap();
        write_history(dir.path(), mode, layout, &ops)
            .close()
            .unwrap();
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        let len = bytes.len() as u64;
        let trailer = Trailer::decode(&bytes[bytes.len() - TRAILER_LEN..], len)
            .expect("a closed store's newest segment is sealed");
        let data_end = img.recs.last().unwrap().end;
        let table_end = trailer.table_offset + trailer.table_len;
        let trailer_at = len - TRAILER_LEN as u64;
        let cuts: BTreeSet<u64> = [
            data_end,
            data_end + 1,
            trailer.table_offset,
            trailer.table_offset + 1,
            data_end + 4,
            data_end + 8,
            data_end + 33,
            trailer.table_offset + trailer.table_len / 2,
            table_end - 1,
            table_end,
            table_end + 1,
            trailer_at,
            trailer_at + 1,
            trailer_at + 32,
            len - 1,
        ]
        .into_iter()
        .filter(|&c| c < len)
        .collect();
        for cut in cuts {
            let ctx = format!(
                "{layout:?}/{}: sealed segment {id} (data end {data_end}, table end \
                 {table_end}, length {len}) cut at {cut}",
                mode_name(mode)
            );
            img.check_recovers_prefix(&bytes[..cut as usize], cut, &ctx);
        }
        img.assert_older_untouched();
    }
}

/// A crash while recovery seals a segment: its footer (written on the block after the last
/// whole record) reached the file wholly or in part, but the torn tail was not cut off yet. The
/// next open must recover the segment again, to the same result.
#[test]
fn crash_during_recovery_while_the_footer_is_written_recovers_again() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 41);
        let dir = crashed_store(layout, mode, &ops);
        let img = Image::read(dir.path(), mode, &ops);
        let (id, bytes) = img.newest();
        // Tear the newest segment three quarters into its largest record, so that the torn tail
        // is longer than the footer recovery writes.
        let big = img
            .newest_recs()
            .iter()
            .max_by_key(|r| r.end - r.offset)
            .unwrap();
        let torn = &bytes[..(big.offset + (big.end - big.offset) * 3 / 4) as usize];
        // What a complete recovery writes: the footer after everything the file held, which
        // stays in place, torn tail included.
        let copy = img.with_newest(torn);
        open(copy.path(), mode).close().unwrap();
        let sealed = std::fs::read(copy.path().join(segment_name(id))).unwrap();
        let trailer =
            Trailer::decode(&sealed[sealed.len() - TRAILER_LEN..], sealed.len() as u64).unwrap();
        let footer_at = trailer.table_offset as usize;
        assert_eq!(footer_at as u64 % BLOCK, 0);
        assert!(
            footer_at >= torn.len(),
            "the footer must not overwrite the torn tail"
        );
        assert!(
            sealed[..torn.len()] == *torn,
            "recovery changed bytes it found"
        );
        let footer_len = sealed.len() - footer_at;
        for written in [
            512,
            footer_len / 2,
            footer_len - TRAILER_LEN,
            footer_len - 1,
        ] {
            let interrupted = &sealed[..footer_at + written];
            let ctx = format!(
                "{layout:?}/{}: segment {id} torn at {}, recovery interrupted after {written} \
                 of {footer_len} footer bytes at {footer_at}",
                mode_name(mode),
                torn.len()
            );
            img.check_recovers_prefix(interrupted, big.offset, &ctx);
        }
        img.assert_older_untouched();
    }
}

/// With `Durability::Buffered` a crash loses a suffix of the writes, never a middle part, and
/// nothing written before the last `flush`.
#[test]
fn buffered_writes_lose_only_a_suffix_at_a_crash() {
    for (seed, mode) in MODES.into_iter().enumerate() {
        let ops = history(seed as u64 + 51);
        let dir = TempDir::new().unwrap();
        let store = Store::open_with(dir.path(), options(mode, Durability::Buffered)).unwrap();
        let mut rng = Rng::new(seed as u64 + 5);
        let mut flushed = 0;
        for (i, w) in ops.iter().enumerate() {
            match &w.value {
                Some(v) => store.put(&w.key, v).unwrap(),
                None => assert!(store.delete(&w.key).unwrap()),
            }
            if rng.below(8) == 0 {
                store.flush().unwrap();
                flushed = i + 1;
            }
        }
        store.simulate_crash();
        // The whole records on disk are the history's first ones, in order.
        let recs: Vec<Rec> = read_segments(dir.path())
            .iter()
            .flat_map(|(id, bytes)| scan_records(*id, bytes))
            .collect();
        let kept = recs.len();
        let ctx = format!(
            "{}: buffered crash kept {kept} of {} writes, {flushed} flushed",
            mode_name(mode),
            ops.len()
        );
        assert!((flushed..=ops.len()).contains(&kept), "{ctx}");
        for (r, w) in recs.iter().zip(&ops) {
            assert_eq!(r.key, w.key, "{ctx}");
        }
        let store = open(dir.path(), mode);
        check_history_prefix(&store, &ops, kept, &HashSet::new(), &ctx);
        eprintln!("{ctx}");
    }
}

/// The trailer's `data end` is documented as one past the last record byte (format/footer.rs),
/// and that is what a footer written by recovery holds. Every segment sealed by the writer must
/// say the same, also when its last write group was padded to a block (synced writes).
#[test]
fn sealed_footer_data_end_is_one_past_the_last_record() {
    for (seed, (layout, mode)) in LAYOUTS.into_iter().enumerate() {
        let ops = history(seed as u64 + 31);
        let dir = TempDir::new().unwrap();
        write_history(dir.path(), mode, layout, &ops)
            .close()
            .unwrap();
        let img = Image::read(dir.path(), mode, &ops);
        for (id, bytes) in &img.segments {
            let trailer =
                Trailer::decode(&bytes[bytes.len() - TRAILER_LEN..], bytes.len() as u64).unwrap();
            let last = img.recs.iter().rfind(|r| r.segment == *id).unwrap();
            assert_eq!(
                trailer.data_end,
                last.end,
                "{layout:?}/{}: segment {id}: trailer data end (table at {})",
                mode_name(mode),
                trailer.table_offset
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Flipped and zeroed bytes in a sealed segment.
// ---------------------------------------------------------------------------------------------

/// Index in `Fixture::values` of the multi-chunk value.
const BIG: usize = 2;

/// A closed store of one sealed segment and a copy of its bytes.
struct Fixture {
    mode: IoMode,
    segment: u64,
    bytes: Vec<u8>,
    values: Vec<(Vec<u8>, Vec<u8>)>,
    recs: Vec<Rec>,
}

impl Fixture {
    fn new(mode: IoMode) -> Fixture {
        let sizes: [(&str, usize); 5] = [
            ("alpha", 100),
            ("beta", 5000),
            ("big", 12 * CHUNK as usize + 100),
            ("empty", 0),
            ("omega", 3000),
        ];
        let values: Vec<(Vec<u8>, Vec<u8>)> = sizes
            .iter()
            .map(|&(k, len)| (k.as_bytes().to_vec(), value_for(k.as_bytes(), 0, len)))
            .collect();
        let dir = TempDir::new().unwrap();
        let store = open(dir.path(), mode);
        for (k, v) in &values {
            store.put(k, v).unwrap();
        }
        store.close().unwrap();
        let mut segments = read_segments(dir.path());
        assert_eq!(segments.len(), 1);
        let (segment, bytes) = segments.pop().unwrap();
        let recs = scan_records(segment, &bytes);
        assert_eq!(recs.len(), values.len());
        Fixture {
            mode,
            segment,
            bytes,
            values,
            recs,
        }
    }

    /// A store directory holding the segment with `damage` applied to its bytes.
    fn damaged(&self, damage: impl FnOnce(&mut [u8])) -> TempDir {
        let mut bytes = self.bytes.clone();
        damage(&mut bytes);
        store_with([(self.segment, &bytes[..])])
    }

    /// The store with byte `at` flipped.
    fn flipped(&self, at: u64) -> TempDir {
        self.damaged(|b| b[at as usize] ^= 0x10)
    }

    fn ctx(&self, what: &str) -> String {
        format!("{}: {what}", mode_name(self.mode))
    }

    /// Asserts every value except `except` reads back intact.
    fn assert_others_intact(&self, store: &Store, except: usize, ctx: &str) {
        for (i, (k, v)) in self.values.iter().enumerate() {
            if i != except {
                assert_reads(store, k, Some(v), ctx);
            }
        }
    }

    /// Asserts that value `i`, whose chunk `bad` is damaged, fails with Corruption pointing
    /// inside its record, that range reads of the other chunks succeed and range reads touching
    /// `bad` fail, and that every other value reads back intact.
    fn assert_chunk_detected(&self, store: &Store, i: usize, bad: u64, ctx: &str) {
        let (key, value) = &self.values[i];
        let rec = &self.recs[i];
        let offset = assert_corrupt(store.get(key), self.segment, rec.offset, rec.end, ctx);
        assert_eq!(
            offset,
            rec.value_offset + bad * CHUNK,
            "{ctx}: offset of the damaged chunk"
        );
        let len = rec.value_len;
        for c in 0..rec.chunks() {
            let range = c * CHUNK..((c + 1) * CHUNK).min(len);
            let got = store.get_range(key, range.clone());
            let ctx = format!("{ctx}: get_range {range:?}");
            if c == bad {
                assert_corrupt(got, self.segment, rec.offset, rec.end, &ctx);
            } else {
                let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let want = &value[range.start as usize..range.end as usize];
                assert!(got.as_deref() == Some(want), "{ctx}: wrong bytes");
            }
        }
        // A small range reaching into the damaged chunk from the one before it.
        let start = (bad * CHUNK).saturating_sub(3);
        let range = start..(bad * CHUNK + 3).min(len);
        let ctx2 = format!("{ctx}: get_range {range:?}");
        assert_corrupt(
            store.get_range(key, range),
            self.segment,
            rec.offset,
            rec.end,
            &ctx2,
        );
        self.assert_others_intact(store, i, ctx);
    }

    /// Asserts that no key reads back wrong; returns the keys whose damage was detected.
    fn assert_never_wrong(&self, store: &Store, ctx: &str) -> Vec<String> {
        let mut detected = Vec::new();
        for (k, v) in &self.values {
            match store.get(k) {
                Ok(Some(got)) if got == *v => {}
                Err(Error::Corruption { segment, .. }) if segment == self.segment => {
                    detected.push(show_key(k))
                }
                Ok(got) => panic!(
                    "{ctx}: key {} read back WRONG: {} instead of {}",
                    show_key(k),
                    describe(got.as_deref()),
                    describe(Some(v))
                ),
                Err(e) => panic!("{ctx}: key {}: unexpected error {e}", show_key(k)),
            }
        }
        detected
    }
}

#[test]
fn flipped_value_byte_is_reported_as_corruption() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let big = &fx.recs[BIG];
        let cases = [
            (0, 0, fx.recs[0].value_offset + 50),
            (1, 1, fx.recs[1].value_offset + CHUNK + 7),
            (BIG, 3, big.value_offset + 3 * CHUNK + 123),
            (BIG, 0, big.value_offset),
            (BIG, 12, big.table_offset - 1),
        ];
        for (i, chunk, at) in cases {
            let ctx = fx.ctx(&format!("value byte {at} of record {i} flipped"));
            let dir = fx.flipped(at);
            let store = open(dir.path(), mode);
            fx.assert_chunk_detected(&store, i, chunk, &ctx);
        }
    }
}

#[test]
fn flipped_chunk_crc_is_reported_as_corruption() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        for (i, chunk, byte) in [(BIG, 2, 1), (BIG, 12, 3), (1, 1, 0), (0, 0, 2)] {
            let at = fx.recs[i].table_offset + 4 * chunk + byte;
            let ctx = fx.ctx(&format!(
                "crc of chunk {chunk} of record {i} flipped at {at}"
            ));
            let dir = fx.flipped(at);
            let store = open(dir.path(), mode);
            fx.assert_chunk_detected(&store, i, chunk, &ctx);
        }
    }
}

/// Reads verify the value chunks (bound to the segment and record offset) but not the record
/// header, which the index does not need (it comes from the footer). A flipped header byte in a
/// sealed segment may therefore go unnoticed by `get`; what is guaranteed is that no wrong bytes
/// are returned.
#[test]
fn flipped_record_header_byte_never_returns_wrong_bytes() {
    let fields: [(&str, u64); 9] = [
        ("magic", 0),
        ("version", 4),
        ("kind", 5),
        ("flags", 6),
        ("key length", 8),
        ("header crc", 12),
        ("value length", 16),
        ("sequence", 24),
        ("key", RECORD_HEADER_LEN as u64 + 1),
    ];
    for mode in MODES {
        let fx = Fixture::new(mode);
        for i in [1, BIG] {
            for (field, off) in fields {
                let at = fx.recs[i].offset + off;
                let ctx = fx.ctx(&format!("{field} of record {i} flipped at {at}"));
                let dir = fx.flipped(at);
                let store = open(dir.path(), mode);
                let detected = fx.assert_never_wrong(&store, &ctx);
                if detected.is_empty() {
                    eprintln!("note: {ctx}: not detected by get (values intact)");
                } else {
                    eprintln!("note: {ctx}: detected for {detected:?}");
                }
            }
        }
    }
}

#[test]
fn flipped_footer_or_trailer_byte_is_rescanned_or_reported() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let len = fx.bytes.len() as u64;
        let trailer = Trailer::decode(&fx.bytes[fx.bytes.len() - TRAILER_LEN..], len).unwrap();
        let table = trailer.table_offset;
        let trailer_at = len - TRAILER_LEN as u64;
        let places = [
            ("table magic", table),
            ("first entry's record offset", table + 8),
            ("first entry's value length", table + 16),
            ("middle of the table", table + trailer.table_len / 2),
            ("last key byte of the table", table + trailer.table_len - 1),
            ("trailer magic", trailer_at),
            ("trailer segment id", trailer_at + 8),
            ("trailer entry count", trailer_at + 16),
            ("trailer table offset", trailer_at + 24),
            ("trailer data end", trailer_at + 40),
            ("trailer table crc", trailer_at + 48),
            ("trailer crc", len - 1),
        ];
        for (what, at) in places {
            let ctx = fx.ctx(&format!("{what} flipped at {at}"));
            let dir = fx.flipped(at);
            match Store::open_with(dir.path(), options(mode, Durability::Sync)) {
                Ok(store) => {
                    // An invalid footer is ignored and rebuilt by a scan of intact records.
                    let report = store.recovery();
                    assert_eq!(report.recovered.len(), 1, "{ctx}: {report:?}");
                    assert_eq!(report.recovered[0].segment, fx.segment, "{ctx}");
                    let last_end = fx.recs.last().unwrap().end;
                    assert_eq!(report.recovered[0].data_end, last_end, "{ctx}");
                    fx.assert_others_intact(&store, usize::MAX, &ctx);
                    assert_eq!(store.len(), fx.values.len(), "{ctx}");
                    store.close().unwrap();
                    let store = open(dir.path(), mode);
                    assert!(
                        store.recovery().recovered.is_empty(),
                        "{ctx}: rebuilt footer"
                    );
                    fx.assert_others_intact(&store, usize::MAX, &format!("{ctx}, reopened"));
                }
                Err(Error::Corruption { segment, .. }) => {
                    assert_eq!(segment, fx.segment, "{ctx}");
                    eprintln!("note: {ctx}: open refused with Corruption");
                }
                Err(e) => panic!("{ctx}: unexpected error {e}"),
            }
        }
    }
}

/// A sealed segment that is not the newest was not being written at a crash: the next segment
/// got data only after this one's footer was written. If its footer and one of its records are
/// both damaged, reopening must not drop the intact records after the damaged one (nor cut them
/// off the file): either the open is refused with Corruption, or the damaged key reads as
/// Corruption and every other key as written.
#[test]
fn damaged_footer_and_record_in_an_older_segment_lose_no_intact_record() {
    for mode in MODES {
        let dir = TempDir::new().unwrap();
        let values: Vec<(Vec<u8>, Vec<u8>)> = (0..14)
            .map(|i| {
                let key = format!("s{i:02}").into_bytes();
                let value = value_for(&key, 0, 100_000);
                (key, value)
            })
            .collect();
        let store = open(dir.path(), mode);
        for (k, v) in &values {
            store.put(k, v).unwrap();
        }
        store.close().unwrap();
        let segments = read_segments(dir.path());
        assert!(segments.len() >= 2, "the values should fill two segments");
        let (id, bytes) = &segments[0];
        let recs = scan_records(*id, bytes);
        let victim = &recs[recs.len() / 2];
        let mut damaged = bytes.clone();
        damaged[(victim.value_offset + 10) as usize] ^= 0x10;
        damaged[bytes.len() - TRAILER_LEN + 20] ^= 0x10;
        std::fs::write(dir.path().join(segment_name(*id)), &damaged).unwrap();

        let ctx = format!(
            "{}: trailer and record {} ({}) of older segment {id} flipped",
            mode_name(mode),
            recs.len() / 2,
            show_key(&victim.key)
        );
        match Store::open_with(dir.path(), options(mode, Durability::Sync)) {
            Err(Error::Corruption { segment, .. }) => assert_eq!(segment, *id, "{ctx}"),
            Err(e) => panic!("{ctx}: unexpected error {e}"),
            Ok(store) => {
                for (k, v) in values.iter().filter(|(k, _)| *k != victim.key) {
                    assert_reads(&store, k, Some(v), &ctx);
                }
                let got = store.get(&victim.key);
                assert_corrupt(got, *id, victim.offset, victim.end, &ctx);
            }
        }
    }
}

#[test]
fn zeroed_block_inside_a_big_value_fails_get_and_reader() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let rec = &fx.recs[BIG];
        let (key, value) = &fx.values[BIG];
        let zero_at = (rec.value_offset + 5 * CHUNK).next_multiple_of(BLOCK);
        assert!(zero_at + BLOCK <= rec.table_offset);
        let first_bad = (zero_at - rec.value_offset) / CHUNK;
        let last_bad = (zero_at + BLOCK - 1 - rec.value_offset) / CHUNK;
        let ctx = fx.ctx(&format!(
            "block at {zero_at} zeroed (chunks {first_bad}..={last_bad})"
        ));
        let dir = fx.damaged(|b| b[zero_at as usize..(zero_at + BLOCK) as usize].fill(0));
        let store = open(dir.path(), mode);

        let offset = assert_corrupt(store.get(key), fx.segment, rec.offset, zero_at + 1, &ctx);
        assert_eq!(offset, rec.value_offset + first_bad * CHUNK, "{ctx}");
        fx.assert_others_intact(&store, BIG, &ctx);
        let before = 0..first_bad * CHUNK;
        let after = (last_bad + 1) * CHUNK..rec.value_len;
        for range in [before.clone(), after.clone()] {
            let got = store.get_range(key, range.clone()).unwrap();
            let want = &value[range.start as usize..range.end as usize];
            assert!(got.as_deref() == Some(want), "{ctx}: get_range {range:?}");
        }

        // A reader streams the chunks before the damage, then fails with InvalidData.
        let mut reader = store.reader(key).unwrap().unwrap();
        let mut buf = vec![0u8; CHUNK as usize];
        for c in 0..first_bad {
            reader.read_exact(&mut buf).unwrap();
            let at = (c * CHUNK) as usize;
            assert!(
                buf == value[at..at + CHUNK as usize],
                "{ctx}: reader chunk {c}"
            );
        }
        let err = reader
            .read(&mut buf)
            .expect_err("read over the zeroed block");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{ctx}: {err}");
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
        assert!(
            matches!(inner, Some(Error::Corruption { segment, .. }) if *segment == fx.segment),
            "{ctx}: reader error {err:?}"
        );
        // Reading the whole value in one go fails the same way.
        let mut whole = store.reader(key).unwrap().unwrap();
        let err = std::io::copy(&mut whole, &mut std::io::sink()).expect_err("copy");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{ctx}: {err}");
        // After the damage the reader works again.
        reader.seek(SeekFrom::Start(after.start)).unwrap();
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert!(
            rest == value[after.start as usize..],
            "{ctx}: reader after the damage"
        );
    }
}

/// A footer whose crcs verify but which this build cannot decode was written whole, by another
/// writer: opening refuses with Corruption rather than taking the file for unsealed (which, for a
/// blob file, would remove it).
#[test]
fn a_whole_footer_that_does_not_decode_refuses_to_open() {
    use podstore::format::footer::{decode_table, encode_footer};
    let dir = TempDir::new().unwrap();
    let opts = options(IoMode::Direct, Durability::Sync).large_value_threshold(64 << 10);
    let store = Store::open_with(dir.path(), opts.clone()).unwrap();
    store.put(b"big", &vec![9u8; 100 << 10]).unwrap();
    store.close().unwrap();
    let blob = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("blob-")
        })
        .expect("the large value has a blob file");
    let mut bytes = std::fs::read(&blob).unwrap();
    let len = bytes.len() as u64;
    let t = Trailer::decode(&bytes[bytes.len() - TRAILER_LEN..], len).unwrap();
    let table = &bytes[t.table_offset as usize..(t.table_offset + t.table_len) as usize];
    let mut entries = decode_table(&t, table).unwrap();
    entries[0].flags = 0x8000; // a flag no writer of this version sets
    let footer = encode_footer(
        t.segment,
        t.data_end,
        t.table_offset,
        t.block_size,
        &entries,
    );
    assert_eq!(t.table_offset + footer.len() as u64, len);
    bytes[t.table_offset as usize..].copy_from_slice(&footer);
    std::fs::write(&blob, &bytes).unwrap();

    match Store::open_with(dir.path(), opts) {
        Err(Error::Corruption { segment, .. }) => assert_eq!(segment, t.segment),
        other => panic!("expected Corruption, got {other:?}"),
    }
    assert!(blob.exists(), "the blob file must not be removed");
}
