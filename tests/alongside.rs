//! A read-only store opened alongside its writer (`Options::alongside_writer`, issue 40): it
//! takes no lock and writes nothing, sees the store as of its open (the active segment up to
//! its writer's writes in flight), keeps reading what it saw while the writer compacts files
//! away, and never reports the writer's progress as damage. The writer here is a `Store` in
//! this process (the directory lock is per open file description, so it excludes another
//! `Store` here as it would another process); podstore-cli/tests/live.rs runs one in another
//! process under the real command-line tool.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use podstore::{CompactOptions, Error, Options, Store};

/// Keys written over and over; a few of them big enough for a file of their own.
const KEYS: usize = 40;

fn key(i: usize) -> Vec<u8> {
    if i % 10 == 9 {
        format!("big/{i:02}").into_bytes()
    } else {
        format!("key/{i:02}").into_bytes()
    }
}

/// The value of key `i` at `round`: names its key and round, so that any value read can be
/// checked to be one written for that key, whole.
fn value(i: usize, round: u64) -> Vec<u8> {
    let head = format!("{}#{round}#", String::from_utf8(key(i)).unwrap());
    let len = if i % 10 == 9 {
        70_000 + (round as usize * 977) % 20_000
    } else {
        500 + (i * 131 + round as usize * 17) % 9_000
    };
    head.bytes().cycle().take(len.max(head.len())).collect()
}

/// Panics unless `got` is a value written for key `i` (at some round).
fn check_value(i: usize, got: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(&got[..got.len().min(40)]).into_owned();
    let mut parts = text.splitn(3, '#');
    let (name, round) = (parts.next().unwrap(), parts.next());
    assert_eq!(
        name.as_bytes(),
        key(i),
        "key {i} read another key's value: {text:?}"
    );
    let round: u64 = round
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("key {i}: not a value the writer wrote: {text:?}"));
    assert!(
        got == value(i, round),
        "key {i}: round {round}'s value, not whole or not its bytes"
    );
    round
}

/// The writer's options: small segments (seals every few rounds), values of 64 KiB and more in
/// files of their own, no background compaction (the writer compacts itself, often).
fn writer_options() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .large_value_threshold(64 << 10)
        .background_compaction(false)
}

fn alongside() -> Options {
    Options::default()
        .create(false)
        .read_only(true)
        .alongside_writer(true)
        .warm_cache(false)
}

/// Every key the view has, checked; returns them with their rounds.
fn read_all(view: &Store) -> BTreeMap<usize, u64> {
    let mut seen = BTreeMap::new();
    for i in 0..KEYS {
        if let Some(v) = view.get(key(i)).unwrap() {
            seen.insert(i, check_value(i, &v));
        }
    }
    seen
}

#[test]
fn views_taken_while_the_writer_writes_and_compacts_read_only_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(Store::open_with(dir.path(), writer_options()).unwrap());
    for i in 0..KEYS {
        writer.put(key(i), value(i, 0)).unwrap();
    }
    // A view kept open for the whole run: compaction removes the files it read.
    let first = Store::open_with(dir.path(), alongside()).unwrap();
    let first_seen = read_all(&first);
    assert_eq!(first_seen.len(), KEYS);
    let first_files = common::files::store_files(dir.path());

    let rounds = common::long::sized(60, 400);
    let stop = Arc::new(AtomicBool::new(false));
    let model = Arc::new(Mutex::new(BTreeMap::new()));
    let compacted = Arc::new(Mutex::new(0usize));
    // Views taken so far: the writer goes on past `rounds` until there are a few (on a fast
    // machine it finished its rounds before a second view was taken), at most 20 times over.
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let writing = {
        let (writer, stop, model, compacted, taken) = (
            writer.clone(),
            stop.clone(),
            model.clone(),
            compacted.clone(),
            taken.clone(),
        );
        std::thread::spawn(move || {
            let mut round = 0;
            while round < rounds || (taken.load(Ordering::SeqCst) < 3 && round < 20 * rounds) {
                round += 1;
                for i in 0..KEYS {
                    // Every fifth round deletes a few keys, which the next one writes again.
                    if round % 5 == 0 && i % 7 == 0 {
                        writer.delete(key(i)).unwrap();
                        model.lock().unwrap().remove(&i);
                        continue;
                    }
                    writer.put(key(i), value(i, round)).unwrap();
                    model.lock().unwrap().insert(i, round);
                }
                if round % 4 == 0 {
                    let report = writer
                        .compact_with(CompactOptions::new().threshold(0.2))
                        .unwrap();
                    *compacted.lock().unwrap() +=
                        report.segments_compacted + report.blob_files_removed;
                }
            }
            stop.store(true, Ordering::SeqCst);
            round
        })
    };
    let mut views = 0;
    let mut busy = 0;
    while !stop.load(Ordering::SeqCst) {
        // A writer that compacts without pause can change the store under each of an open's
        // attempts: the documented answer is `StoreChanged`, try again (the writer goes on
        // until a few views are taken).
        let view = match Store::open_with(dir.path(), alongside()) {
            Ok(view) => view,
            Err(podstore::Error::StoreChanged { .. }) => {
                busy += 1;
                continue;
            }
            Err(e) => panic!("a view: {e}"),
        };
        let seen = read_all(&view);
        // Deleted keys aside, every key has a value in every view.
        assert!(seen.len() >= KEYS - KEYS / 7 - 1, "{} keys", seen.len());
        let report = view.verify().unwrap();
        assert!(
            report.is_clean(),
            "a view called the live store damaged: {report:?}"
        );
        assert!(view.recovery().lost.is_empty() && view.recovery().quarantined.is_empty());
        assert_eq!(view.keys().count(), seen.len());
        // The view is as of its open: the writer's later writes do not change it.
        assert_eq!(read_all(&view), seen);
        // Closing writes nothing either (no seal recorded for a file it found sealed, no
        // reservation given back): it succeeds.
        view.close().unwrap();
        views += 1;
        taken.store(views, Ordering::SeqCst);
    }
    let rounds = writing.join().unwrap();
    eprintln!(
        "{views} views taken while the writer wrote {rounds} rounds ({busy} opens found the \
         store changing throughout)"
    );
    assert!(views >= 2, "{views} views taken");
    assert!(*compacted.lock().unwrap() > 0, "the writer never compacted");
    // Files the first view read were compacted away; it reads what it saw, through them.
    let now = common::files::store_files(dir.path());
    assert!(
        first_files.iter().any(|f| !now.contains(f)),
        "no file of the first view was removed"
    );
    assert_eq!(read_all(&first), first_seen);
    assert!(first.verify().unwrap().is_clean());
    first.close().unwrap();

    // The writer noticed nothing: it closes cleanly, and its store opens with no recovery
    // scan and every last value.
    let model = model.lock().unwrap().clone();
    Arc::try_unwrap(writer).ok().unwrap().close().unwrap();
    let store = Store::open_with(dir.path(), writer_options()).unwrap();
    let r = store.recovery();
    assert!(
        r.recovered.is_empty() && r.lost.is_empty() && r.quarantined.is_empty(),
        "{r:?}"
    );
    for i in 0..KEYS {
        match model.get(&i) {
            Some(&round) => assert_eq!(store.get(key(i)).unwrap(), Some(value(i, round))),
            None => assert_eq!(store.get(key(i)).unwrap(), None),
        }
    }
}

#[test]
fn a_view_of_an_unsealed_active_segment_reads_it_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Store::open_with(dir.path(), writer_options().segment_size(64 << 20)).unwrap();
    for i in 0..KEYS {
        writer.put(key(i), value(i, 1)).unwrap();
    }
    let before = common::tree::snapshot(dir.path());
    let view = Store::open_with(dir.path(), alongside()).unwrap();
    for i in 0..KEYS {
        assert_eq!(view.get(key(i)).unwrap(), Some(value(i, 1)));
    }
    // The writer's active segment was scanned, not sealed; its blob files read from footers.
    let recovered = &view.recovery().recovered;
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(!recovered[0].sealed);
    assert!(view.verify().unwrap().is_clean());
    assert_eq!(view.stats().live_keys, KEYS as u64);
    assert!(matches!(view.put("k", "v"), Err(Error::ReadOnly)));
    drop(view);
    let after = common::tree::snapshot(dir.path());
    assert!(common::tree::changed(&before, &after).is_empty());
    assert!(common::tree::added(&before, &after).is_empty());
    // The writer goes on as if nothing happened.
    writer.put(key(0), value(0, 2)).unwrap();
    writer.close().unwrap();
    let store = Store::open_with(dir.path(), writer_options()).unwrap();
    assert!(store.recovery().recovered.is_empty());
    assert_eq!(store.get(key(0)).unwrap(), Some(value(0, 2)));
}

#[test]
fn a_view_holds_no_lock_and_needs_read_only() {
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path()).unwrap().put("k", "v").unwrap();
    let unlocked = Options::default().alongside_writer(true);
    assert!(matches!(
        Store::open_with(dir.path(), unlocked),
        Err(Error::InvalidOptions(_))
    ));
    // A view first, then a writer: the view excludes no one.
    let view = Store::open_with(dir.path(), alongside()).unwrap();
    let writer = Store::open(dir.path()).unwrap();
    writer.put("k", "w").unwrap();
    assert_eq!(view.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    // A plain read-only open still waits for the writer to close.
    let shared = Options::default().read_only(true);
    assert!(matches!(
        Store::open_with(dir.path(), shared),
        Err(Error::Locked { .. })
    ));
    let second = Store::open_with(dir.path(), alongside()).unwrap();
    assert_eq!(second.get("k").unwrap().as_deref(), Some(&b"w"[..]));
}

#[test]
fn a_file_missing_while_the_catalog_still_lists_it_is_damage_not_a_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), writer_options()).unwrap();
    for i in 0..KEYS {
        store.put(key(i), value(i, 0)).unwrap();
    }
    store.close().unwrap();
    let (id, kind) = common::files::store_files(dir.path())[0];
    std::fs::remove_file(dir.path().join(common::files::file_name(id, kind))).unwrap();
    match Store::open_with(dir.path(), alongside()) {
        Err(Error::Damaged { files, .. }) => assert_eq!(files.len(), 1, "{files:?}"),
        other => panic!("{:?}", other.map(|_| ())),
    }
}

#[test]
fn a_checkpoint_of_a_view_holds_the_active_segment_and_files_compacted_away() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Store::open_with(dir.path(), writer_options()).unwrap();
    for round in 0..6 {
        for i in 0..KEYS {
            writer.put(key(i), value(i, round)).unwrap();
        }
    }
    let view = Store::open_with(dir.path(), alongside()).unwrap();
    let seen = read_all(&view);
    let report = writer
        .compact_with(CompactOptions::new().threshold(0.01))
        .unwrap();
    assert!(
        report.segments_compacted + report.blob_files_removed > 0,
        "{report:?}"
    );
    let out = tempfile::tempdir().unwrap();
    let dest = out.path().join("copy");
    view.checkpoint(&dest).unwrap();
    let copy = Store::open_with(&dest, Options::default().read_only(true)).unwrap();
    assert_eq!(read_all(&copy), seen);
}
