//! Stores under test: I/O modes, option presets, a temporary store directory, assertions.

use std::path::Path;

use podstore::{Durability, IoMode, Options, Stats, Store};
use tempfile::TempDir;

/// Both I/O modes a store can be asked for explicitly.
pub const MODES: [IoMode; 2] = [IoMode::Direct, IoMode::Buffered];

pub fn mode_name(mode: IoMode) -> &'static str {
    match mode {
        IoMode::Direct => "direct",
        IoMode::Buffered => "buffered",
        IoMode::Auto => "auto",
        _ => "other",
    }
}

/// The mode [`mode_name`] names.
pub fn parse_mode(name: &str) -> IoMode {
    [IoMode::Direct, IoMode::Buffered, IoMode::Auto]
        .into_iter()
        .find(|&m| mode_name(m) == name)
        .unwrap_or_else(|| panic!("unknown io mode {name}"))
}

/// Short name of a configuration, for assertion messages.
pub fn label(opts: &Options) -> String {
    format!("{:?}/{:?}", opts.view().io_mode(), opts.view().durability())
}

/// The smallest segments (1 MiB) and write buffers (64 KiB) a store accepts: several segments
/// per test, values larger than a buffer.
pub fn small() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
}

/// [`small`] in `mode` with `durability`.
pub fn small_with(mode: IoMode, durability: Durability) -> Options {
    small().io_mode(mode).durability(durability)
}

/// `opts` without the background threads (flush ticker, compactor), for a store opened only to
/// be read and checked: it reads and verifies the same, and its close does not wait for threads
/// that may not have started yet (a close right after an open can otherwise wait out a whole
/// ticker or compactor interval).
pub fn quiet(opts: Options) -> Options {
    opts.flush_interval(None).background_compaction(false)
}

/// A temporary store directory and the options it is opened with.
pub struct TestStore {
    pub dir: TempDir,
    pub opts: Options,
}

impl TestStore {
    pub fn new(opts: Options) -> TestStore {
        TestStore {
            dir: tempfile::tempdir().expect("create temporary directory"),
            opts,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Opens the store, checking that the I/O mode asked for is the one in use.
    #[track_caller]
    pub fn open(&self) -> Store {
        let store = Store::open_with(self.path(), self.opts.clone())
            .unwrap_or_else(|e| panic!("open with {}: {e}", label(&self.opts)));
        assert_eq!(store.io_mode(), self.opts.view().io_mode(), "io_mode()");
        store
    }

    /// Closes `store` and opens it again.
    #[track_caller]
    pub fn reopen(&self, store: Store) -> Store {
        store.close().expect("close");
        self.open()
    }
}

/// Asserts byte equality without dumping megabytes of bytes when it fails.
#[track_caller]
pub fn assert_bytes_eq(got: &[u8], want: &[u8], what: &str) {
    if got != want {
        let first_difference = got.iter().zip(want).position(|(a, b)| a != b);
        panic!(
            "{what}: got {} bytes, want {}; first differing byte at {first_difference:?}",
            got.len(),
            want.len()
        );
    }
}

/// A key for messages: its first 24 characters.
pub fn show_key(key: &[u8]) -> String {
    let s = String::from_utf8_lossy(key);
    match s.char_indices().nth(24) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.into_owned(),
    }
}

/// A number from the environment variable `var`, or `default` when it is not set.
pub fn env_u64(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|e| panic!("{var}={s:?}: {e}")),
        Err(_) => default,
    }
}

/// Opens the damaged store in `dir`: asserts that the default open refuses it with
/// `Error::Damaged` naming exactly the files and problems of `expect` and changes nothing in
/// those files (it may have sealed or repaired others before its verdict), then opens it with
/// `RecoveryMode::Salvage` and asserts that it reports the same files lost.
#[track_caller]
pub fn open_salvaging(
    dir: &Path,
    opts: Options,
    expect: &[(String, podstore::FileProblem)],
) -> Store {
    let named = |p: &std::path::PathBuf| {
        let name = p.file_name().unwrap().to_string_lossy();
        expect.iter().any(|(n, _)| *n == name)
    };
    let snapshot = || -> Vec<(std::path::PathBuf, Vec<u8>)> {
        super::files::store_paths(dir)
            .into_iter()
            .filter(named)
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect()
    };
    let before = snapshot();
    let pairs = |files: &[podstore::DamagedFile]| -> Vec<(String, podstore::FileProblem)> {
        let mut v: Vec<_> = files
            .iter()
            .map(|f| (f.name.clone(), f.problem.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let mut want = expect.to_vec();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    match Store::open_with(dir, opts.clone()) {
        Err(podstore::Error::Damaged { dir: d, files }) => {
            assert_eq!(d, dir);
            assert_eq!(pairs(&files), want, "what the default open refused");
        }
        Err(e) => panic!("the default open failed with {e:?}, not Damaged"),
        Ok(s) => panic!(
            "the default open accepted a damaged store: {:?}",
            s.recovery()
        ),
    }
    assert!(
        snapshot() == before,
        "the refused open changed a file it named"
    );
    let store = Store::open_with(dir, opts.recovery_mode(podstore::RecoveryMode::Salvage))
        .expect("salvage open");
    assert_eq!(
        pairs(&store.recovery().lost),
        want,
        "what salvage reported lost"
    );
    store
}

/// Reads each of `hot` keys once and asserts that at least `min` of them were cache hits: the
/// hot set survived whatever was read or written in between (scan resistance).
pub fn assert_hot_survived(store: &Store, hot: impl IntoIterator<Item = String>, min: u64) {
    let before = store.stats().cache_hits;
    let mut n = 0;
    for key in hot {
        store.get(&key).unwrap().expect("a hot key has a value");
        n += 1;
    }
    let hits = store.stats().cache_hits - before;
    assert!(
        hits >= min,
        "only {hits} of {n} hot values survived the scan"
    );
}

/// Waits until the store's warm-up at open has ended (at most a minute); returns the store's
/// figures then.
#[track_caller]
pub fn wait_warm(store: &Store) -> Stats {
    let began = std::time::Instant::now();
    loop {
        let s = store.stats();
        if !s.cache_warming {
            return s;
        }
        assert!(
            began.elapsed() < std::time::Duration::from_secs(60),
            "the warm-up did not end: {s:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Gets each of `keys` (named by `key`), checking its value against `want`: the cache hits and
/// misses the gets counted (`Stats::cache_hits`, `cache_misses`).
#[track_caller]
pub fn read_counting(
    store: &Store,
    keys: impl IntoIterator<Item = usize>,
    key: impl Fn(usize) -> Vec<u8>,
    want: impl Fn(usize) -> Option<Vec<u8>>,
) -> (u64, u64) {
    let before = store.stats();
    for k in keys {
        assert_eq!(store.get(key(k)).unwrap(), want(k), "key {k}");
    }
    let after = store.stats();
    (
        after.cache_hits - before.cache_hits,
        after.cache_misses - before.cache_misses,
    )
}
