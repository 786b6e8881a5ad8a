//! A listing whose start races compaction: every key live throughout is listed.
//!
//! A listing takes the active segment's keys and the table of files as its sources. Until
//! 2026-12-07 it took the table after the keys, outside the append lock: a compaction in between
//! could append a key's copy past the keys taken (to a segment the listing then counts as
//! written since) and remove the key's old file from the table, so the key was in no source and
//! not listed, though live throughout. Seen once in CI's kill -9 test (a key missing from
//! `Store::keys` right after a reopen, while background compaction ran), then reproduced by
//! listing again and again beside it. The hook below puts the compaction exactly there.

use std::collections::BTreeSet;
use std::sync::mpsc;

use super::{new_sim, open, options};
use crate::Durability;
use crate::io::sim::SimConfig;
use crate::store::AFTER_ACTIVE_KEYS;

/// `stable` is written once, into a segment that overwrites of other keys then fill and make
/// dead; an active segment holds more writes. A listing starts; right after it has taken its
/// sources, another thread compacts (the active segment sealed first, the dead segment's live
/// records copied into a new active segment, the segment removed). The listing must still
/// list `stable`, and every other live key, once.
#[test]
fn a_key_compaction_moves_while_a_listing_starts_is_listed() {
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, options(Durability::Sync)).unwrap();
    store.put("stable", b"kept throughout").unwrap();
    let mut live = BTreeSet::from([b"stable".to_vec()]);
    // Overwrites of 32 keys: 1.5 MiB, so that the first segment is sealed with `stable` and
    // little else live in it.
    for i in 0..384u32 {
        let key = format!("churn/{:02}", i % 32).into_bytes();
        store.put(&key, vec![(i % 251) as u8; 4000]).unwrap();
        live.insert(key);
    }
    let first = store.files().unwrap()[0].id.expect("a segment header");
    assert!(
        store.files().unwrap().len() >= 2,
        "a sealed segment and the active one"
    );

    let (ask, asked) = mpsc::channel::<()>();
    let (done, finished) = mpsc::channel::<()>();
    let store = &store;
    let listed: BTreeSet<Vec<u8>> = std::thread::scope(|s| {
        s.spawn(move || {
            asked.recv().unwrap();
            let report = store.compact().unwrap();
            assert!(report.segments_compacted >= 1, "{report:?}");
            done.send(()).unwrap();
        });
        AFTER_ACTIVE_KEYS.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                ask.send(()).unwrap();
                finished.recv().unwrap();
            }))
        });
        store.keys().map(|k| k.unwrap()).collect()
    });
    // The compaction did move `stable`: its first file is gone.
    assert!(
        store.files().unwrap().iter().all(|f| f.id != Some(first)),
        "segment {first} compacted away"
    );
    let names = |keys: &BTreeSet<Vec<u8>>| -> Vec<String> {
        keys.iter()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .collect()
    };
    assert_eq!(names(&listed), names(&live));
    // And a listing after it agrees.
    let again: BTreeSet<Vec<u8>> = store.keys().map(|k| k.unwrap()).collect();
    assert_eq!(names(&again), names(&live));
}
