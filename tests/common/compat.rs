//! The old-format fixture: a small store directory written by an earlier build and committed
//! under tests/fixtures/, which every later build must open, read and extend.
//!
//! [`history`] is the one description of what the fixture holds: [`write_fixture`] (run by the
//! ignored test `api::write_old_format_fixture`) writes it into a directory, and
//! [`expected_contents`] is what a store that went through it must read back.
//!
//! The committed copy, tests/fixtures/store-130d492, was written by commit 130d492 ("Simulator
//! stays test-only"), the commit before the store restructure; tests/fixtures/store-3e7568a by
//! commit 3e7568a, the last with version 1 footers (and the first with a catalog);
//! tests/fixtures/store-3f9fb04 by commit 3f9fb04, the last before records and footers that
//! carry an expiry (issue 39). To write a new one (only for a
//! new format version; the old copy stays, it is the point):
//!
//! ```text
//! PODSTORE_FIXTURE_OUT=/tmp/fixture cargo test --test api write_old_format_fixture -- --ignored
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use podstore::{Batch, Compression, Durability, IoMode, Options, Store};

use super::{Random, XorShift};

/// Where the committed fixture is, from the package root.
pub const FIXTURE_DIR: &str = "tests/fixtures/store-130d492";

/// The same history written by commit 3e7568a, the last build with version 1 footers and the
/// first with a catalog: its sealed log segments are listed as sealed, so open reads their
/// location tables alone (decoded from the old table), and reads keys by ordinal to tell records
/// of one hash apart.
pub const FIXTURE_DIR_WITH_CATALOG: &str = "tests/fixtures/store-3e7568a";

/// The same history written by commit 3f9fb04, the last build before records that carry an
/// expiry (record version 2, footer version 3): records of version 1, footers of version 2,
/// sequence numbers taken from the clock. Its files are what this build still writes for
/// values without an expiry.
pub const FIXTURE_DIR_BEFORE_EXPIRY: &str = "tests/fixtures/store-3f9fb04";

/// Every committed fixture.
pub const ALL_FIXTURES: [&str; 3] = [
    FIXTURE_DIR,
    FIXTURE_DIR_WITH_CATALOG,
    FIXTURE_DIR_BEFORE_EXPIRY,
];

/// Values of at least this many bytes, put with `Durability::Sync`, go to a blob file.
pub const LARGE: u64 = 64 << 10;

/// The key of the large value (a blob file).
pub const LARGE_KEY: &[u8] = b"large/blob";

/// The options the fixture is written (and read) with: the smallest segments and buffers, a
/// low large-value threshold; no background threads (nothing runs but the history).
pub fn options(mode: IoMode) -> Options {
    Options::default()
        .io_mode(mode)
        .durability(Durability::Sync)
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .large_value_threshold(LARGE)
        .flush_interval(None)
        .background_compaction(false)
}

/// One step of the fixture's history.
pub enum Step {
    /// Opens the store with [`options`] in this I/O mode, with this compression.
    Open(IoMode, Compression),
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// An atomic batch: puts (`Some`) and deletes (`None`).
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// A clean close: the active segment is sealed (its footer written).
    Close,
    /// `Store::simulate_crash`: the active segment is left unsealed, for the next open to
    /// recover.
    Crash,
}

/// Text-like bytes: lz4 shrinks them well.
fn text(rng: &mut XorShift, len: usize) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "old ", "format ", "fixture ", "segment ", "footer ", "blob ", "frame ", "record ",
    ];
    rng.words(&WORDS, len)
}

/// What the fixture holds, step by step: three lives of the store.
///
/// 1. Direct I/O, raw values: small values around the 4 KiB chunk, an empty one, overwrites,
///    a tombstone hiding an older value (and one whose key is written again later), an atomic
///    batch of puts and a delete (with a value larger than the write buffer, which a batch
///    writes through the log), the large value in a blob file; closed: its log segment is
///    sealed.
/// 2. Direct I/O, lz4: compressed values (a large one in a blob file, spanning many frames), one
///    replacing a raw value, a compressed batch; closed: sealed.
/// 3. Buffered I/O (no zero-ahead, so the unsealed file stays small): more writes, a delete,
///    then a simulated crash: the segment is left unsealed and recovered at the next open.
pub fn history() -> Vec<Step> {
    let mut rng = XorShift::new(130);
    let mut steps = vec![Step::Open(IoMode::Direct, Compression::None)];
    for (i, len) in [0usize, 1, 100, 4095, 4096, 4097, 9000]
        .into_iter()
        .enumerate()
    {
        steps.push(Step::Put(format!("raw/{i}").into_bytes(), rng.bytes(len)));
    }
    steps.push(Step::Put(b"raw/1".to_vec(), rng.bytes(333)));
    steps.push(Step::Put(b"gone/tombstoned".to_vec(), rng.bytes(5000)));
    steps.push(Step::Put(b"gone/again".to_vec(), rng.bytes(700)));
    steps.push(Step::Delete(b"gone/tombstoned".to_vec()));
    steps.push(Step::Delete(b"gone/again".to_vec()));
    steps.push(Step::Batch(vec![
        (b"batch/a".to_vec(), Some(rng.bytes(10))),
        (b"batch/b".to_vec(), Some(rng.bytes(5000))),
        (b"raw/wide".to_vec(), Some(rng.bytes(100_000))),
        (b"raw/2".to_vec(), None),
        (b"batch/c".to_vec(), Some(Vec::new())),
    ]));
    steps.push(Step::Put(
        LARGE_KEY.to_vec(),
        rng.bytes(LARGE as usize + 12_345),
    ));
    steps.push(Step::Close);

    steps.push(Step::Open(IoMode::Direct, Compression::Lz4));
    steps.push(Step::Put(b"lz4/text".to_vec(), text(&mut rng, 200_000)));
    steps.push(Step::Put(b"lz4/small".to_vec(), text(&mut rng, 3000)));
    steps.push(Step::Put(b"raw/3".to_vec(), text(&mut rng, 20_000)));
    steps.push(Step::Batch(vec![
        (b"lz4/batch/x".to_vec(), Some(text(&mut rng, 9000))),
        (b"lz4/batch/y".to_vec(), Some(text(&mut rng, 100))),
    ]));
    steps.push(Step::Close);

    steps.push(Step::Open(IoMode::Buffered, Compression::None));
    steps.push(Step::Put(b"gone/again".to_vec(), rng.bytes(1234)));
    steps.push(Step::Put(b"crash/a".to_vec(), rng.bytes(2000)));
    steps.push(Step::Put(b"raw/4".to_vec(), rng.bytes(50)));
    steps.push(Step::Delete(b"batch/a".to_vec()));
    steps.push(Step::Batch(vec![
        (b"crash/b".to_vec(), Some(rng.bytes(8000))),
        (b"crash/c".to_vec(), Some(rng.bytes(1))),
    ]));
    steps.push(Step::Crash);
    steps
}

/// What a store that went through [`history`] holds: key -> value.
pub fn expected_contents() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut map = BTreeMap::new();
    let mut apply = |key: Vec<u8>, value: Option<Vec<u8>>| match value {
        Some(v) => map.insert(key, v),
        None => map.remove(&key),
    };
    for step in history() {
        match step {
            Step::Put(k, v) => {
                apply(k, Some(v));
            }
            Step::Delete(k) => {
                apply(k, None);
            }
            Step::Batch(ops) => {
                for (k, v) in ops {
                    apply(k, v);
                }
            }
            Step::Open(..) | Step::Close | Step::Crash => {}
        }
    }
    map
}

/// Every key the history writes, live or deleted at its end.
pub fn all_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for step in history() {
        match step {
            Step::Put(k, _) | Step::Delete(k) => keys.push(k),
            Step::Batch(ops) => keys.extend(ops.into_iter().map(|(k, _)| k)),
            Step::Open(..) | Step::Close | Step::Crash => {}
        }
    }
    keys.sort();
    keys.dedup();
    keys
}

/// Writes the fixture's [`history`] into `dir` (a new, empty directory).
pub fn write_fixture(dir: &Path) {
    let mut store: Option<Store> = None;
    for step in history() {
        match step {
            Step::Open(mode, compression) => {
                assert!(store.is_none());
                let opts = options(mode).compression(compression);
                store = Some(Store::open_with(dir, opts).expect("open the fixture store"));
            }
            Step::Put(k, v) => {
                store.as_ref().unwrap().put(&k, &v).unwrap();
            }
            Step::Delete(k) => assert!(store.as_ref().unwrap().delete(&k).unwrap()),
            Step::Batch(ops) => {
                let mut batch = Batch::new();
                for (k, v) in &ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    };
                }
                store.as_ref().unwrap().write(&batch).unwrap();
            }
            Step::Close => store.take().unwrap().close().unwrap(),
            Step::Crash => store.take().unwrap().simulate_crash(),
        }
    }
    assert!(store.is_none(), "the history ends closed or crashed");
}
