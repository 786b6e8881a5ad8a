//! A key whose newest record is evicted while a file that stays holds an older record of it:
//! the older one must not come back, neither at once nor after a reopen (which rebuilds the
//! index from the files' footers). Files are not dropped in id order but by their newest
//! record, and compaction's copies keep their old sequence numbers, so the older record can
//! sit in a newer file: here, a compaction copy in a log segment written after the blob file
//! that holds the key's newest value.

use podstore::{CompactOptions, Durability, Options, Store};

use crate::values::{check, dir_bytes, make};

const SEGMENT: u64 = 1 << 20;
const CAP: u64 = 4 * SEGMENT;

fn opts() -> Options {
    Options::default()
        .segment_size(SEGMENT)
        .size_cap(Some(CAP))
        .durability(Durability::Sync)
        .large_value_threshold(256 << 10)
        .background_compaction(false)
}

/// The blob files in `dir` that hold a value.
fn blob_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        // Spare blob files, made ahead of the puts that will use them, are empty.
        .filter(|e| e.metadata().unwrap().len() > 0)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("blob-"))
        .collect();
    names.sort();
    names
}

#[test]
fn an_evicted_newest_value_does_not_bring_an_older_copy_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    let k = b"the-key".to_vec();
    // Write 1 of the key, in segment 1 among values deleted at once: compaction copies it
    // forward (keeping its sequence number) into the segment being written.
    store.put(&k, make(&k, 1, 100)).unwrap();
    for i in 0..40u32 {
        let f = format!("filler-{i}");
        store.put(&f, make(f.as_bytes(), 0, 8 << 10)).unwrap();
    }
    store.seal().unwrap();
    for i in 0..40u32 {
        store.delete(format!("filler-{i}")).unwrap();
    }
    let report = store
        .compact_with(CompactOptions::new().threshold(0.1))
        .unwrap();
    assert_eq!(report.records_copied, 1, "{report:?}");
    // Write 2, the newest: a blob file of its own, older than what follows in the log.
    store.put(&k, make(&k, 2, 1 << 20)).unwrap();
    let blob = blob_files(dir.path());
    assert_eq!(blob.len(), 1);
    assert_eq!(check(&k, &store.get(&k).unwrap().unwrap()), 2);
    // New values until the cap drops a file: the blob file goes first (its newest record is
    // the oldest), while the segment holding the copy of write 1 stays.
    let mut i = 0u32;
    while store.stats().evicted_files == 0 {
        let g = format!("more-{i}");
        store.put(&g, make(g.as_bytes(), 0, 32 << 10)).unwrap();
        i += 1;
        assert!(i < 1000, "nothing evicted");
    }
    assert!(
        blob_files(dir.path()).is_empty(),
        "the blob file was not the one dropped"
    );
    let stats = store.stats();
    assert_eq!(stats.evicted_files, 1, "only the blob file: {stats:?}");
    assert_eq!(store.get(&k).unwrap(), None, "write 1 came back at once");
    // The later values are all there: eviction took the oldest file only.
    for j in 0..i {
        let g = format!("more-{j}");
        assert_eq!(check(g.as_bytes(), &store.get(&g).unwrap().unwrap()), 0);
    }
    // A checkpoint links the segment holding the copy: its catalog carries the watermark.
    let copy = tempfile::tempdir().unwrap();
    let at = copy.path().join("checkpoint");
    store.checkpoint(&at).unwrap();
    store.close().unwrap();
    let restored = Store::open(&at).unwrap();
    assert_eq!(
        restored.get(&k).unwrap(),
        None,
        "write 1 came back in a checkpoint"
    );
    assert!(restored.get("more-0").unwrap().is_some());
    restored.close().unwrap();
    let store = Store::open_with(dir.path(), opts()).unwrap();
    assert_eq!(
        store.get(&k).unwrap(),
        None,
        "write 1 came back after a reopen"
    );
    assert!(
        !store.keys().any(|key| key.unwrap() == k),
        "listed after a reopen"
    );
    for j in 0..i {
        let g = format!("more-{j}");
        assert_eq!(
            check(g.as_bytes(), &store.get(&g).unwrap().unwrap()),
            0,
            "{g}"
        );
    }
    assert!(dir_bytes(dir.path()) <= CAP + SEGMENT);
}
