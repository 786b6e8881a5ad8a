//! Tests of the index: runs, moves, lazy puts, loading, and the side table of expiries.

use super::*;

fn entry(segment: u64, offset: u64) -> IndexEntry {
    IndexEntry {
        segment,
        offset,
        value_len: 10,
        stored_len: 10,
        key_len: 3,
        flags: 0,
        expires_at: None,
    }
}

#[test]
fn colliding_keys_keep_their_own_entries() {
    // Two bits of hash: every key falls into one of four slots.
    let index = Index::with_hash_bits(2);
    let keys: Vec<Vec<u8>> = (0..64u32).map(|i| i.to_le_bytes().to_vec()).collect();
    for (i, k) in keys.iter().enumerate() {
        index.apply(index.hash(k), None, Some(&entry(1, 64 + i as u64)));
    }
    assert_eq!(index.len(), 64);
    for (i, k) in keys.iter().enumerate() {
        let h = index.hash(k);
        assert!(index.contains(h, 1, 64 + i as u64));
        assert!(index.places(h).len() > 1);
    }
    // Moving, replacing and removing one key's entry leaves the others alone.
    let h0 = index.hash(&keys[0]);
    assert!(index.replace_if(h0, &entry(1, 64), entry(2, 64)));
    assert!(!index.replace_if(h0, &entry(1, 64), entry(3, 64)));
    index.apply(h0, Some(&entry(2, 64)), None);
    assert_eq!(index.len(), 63);
    assert!(!index.contains(h0, 2, 64));
    for (i, k) in keys.iter().enumerate().skip(1) {
        assert!(index.contains(index.hash(k), 1, 64 + i as u64));
    }
    assert_eq!(index.usage(1).live_records, 63);
    assert_eq!(index.usage(2).live_records, 0);
}

#[test]
fn entries_of_a_segment_are_its_live_entries_by_offset() {
    let index = Index::default();
    let keys: Vec<Vec<u8>> = (0..500u32).map(|i| i.to_le_bytes().to_vec()).collect();
    // Keys in two segments, written out of offset order.
    for (i, k) in keys.iter().enumerate() {
        let (segment, offset) = (1 + (i % 2) as u64, 64 * (500 - i as u64));
        index.apply(index.hash(k), None, Some(&entry(segment, offset)));
    }
    // One key of segment 1 moved to segment 3, one deleted.
    let (moved, gone) = (index.hash(&keys[0]), index.hash(&keys[2]));
    assert!(index.replace_if(moved, &entry(1, 64 * 500), entry(3, 64)));
    index.apply(gone, Some(&entry(1, 64 * 498)), None);
    let of1 = index.entries_of(1);
    let want: Vec<u64> = (4..500u32)
        .step_by(2)
        .rev()
        .map(|i| 64 * (500 - u64::from(i)))
        .collect();
    assert_eq!(of1.iter().map(|e| e.offset).collect::<Vec<_>>(), want);
    assert!(
        of1.iter()
            .all(|e| e.segment == 1 && e.key_len == 0 && e.value_len == 10)
    );
    assert_eq!(index.entries_of(2).len(), 250);
    assert_eq!(
        index
            .entries_of(3)
            .iter()
            .map(|e| e.place())
            .collect::<Vec<_>>(),
        [(3, 64)]
    );
    assert!(index.entries_of(4).is_empty());
}

#[test]
fn a_lazy_put_goes_to_the_front_flagged_and_resolution_removes_the_older_versions() {
    // Every key in one run.
    let index = Index::with_hash_bits(0);
    let h = index.hash(b"k");
    index.apply(h, None, Some(&entry(1, 64))); // another key
    index.apply(h, None, Some(&entry(1, 128))); // the key's first version
    assert!(!index.candidates(h, 3).unresolved());
    index.apply_write(h, 3, Placement::Front, &[], Some(&entry(2, 64)));
    let c = index.candidates(h, 3);
    assert!(c.unresolved());
    assert_eq!(c.places(), [(2, 64), (1, 64), (1, 128)]);
    assert_eq!(index.len(), 3);
    assert_eq!(index.names(h, 2, 64), Naming::Live);
    assert_eq!(index.names(h, 1, 128), Naming::Behind);
    assert_eq!(index.names(h, 9, 9), Naming::No);
    // A write that replaces the newest version keeps its place and flag; so does a move.
    index.apply(h, Some(&entry(2, 64)), Some(&entry(2, 192)));
    assert!(index.replace_if(h, &entry(2, 192), entry(3, 64)));
    assert_eq!(index.places(h), [(3, 64), (1, 64), (1, 128)]);
    assert!(index.candidates(h, 3).unresolved());
    // Both versions count live until resolved.
    assert_eq!(index.usage(1).live_records, 2);
    index.resolve(h, 3, (3, 64), &[(1, 128)]);
    assert_eq!(index.places(h), [(3, 64), (1, 64)]);
    assert!(!index.candidates(h, 3).unresolved());
    assert_eq!(index.len(), 2);
    assert_eq!(index.usage(1).live_records, 1);
    assert_eq!(index.usage(3).live_records, 1);
    // A delete removes the versions it names, tolerating those already gone.
    index.apply_write(h, 3, Placement::Front, &[], Some(&entry(4, 64)));
    index.apply_write(
        h,
        3,
        Placement::Replace(Some(entry(4, 64))),
        &[(4, 64), (3, 64), (5, 5)],
        None,
    );
    assert_eq!(index.places(h), [(1, 64)]);
    assert_eq!(index.len(), 1);
    assert_eq!(index.usage(3).live_records + index.usage(4).live_records, 0);
}

#[test]
fn load_fits_shards_to_their_entries() {
    let index = Index::default();
    let n = 100_000u64;
    let entries: Vec<(u64, IndexEntry)> = (0..n)
        .map(|i| (key_hash(&i.to_le_bytes()), entry(1 + i / 50_000, 64 + i)))
        .collect();
    let mut usage = BTreeMap::new();
    for (_, e) in &entries {
        let u: &mut SegmentUsage = usage.entry(e.segment).or_default();
        u.live_bytes += e.record_len();
        u.live_records += 1;
    }
    index.load(entries, usage);
    assert_eq!(index.len(), n);
    assert_eq!(
        index.memory_bytes(),
        n * PACKED_LEN as u64 + (SHARDS * std::mem::size_of::<Shard>()) as u64
    );
    for i in (0..n).step_by(997) {
        assert!(index.contains(key_hash(&i.to_le_bytes()), 1 + i / 50_000, 64 + i));
    }
    assert_eq!(index.usage(1).live_records, 50_000);
    assert_eq!(index.usage(2).live_records, 50_000);
}

fn expiring(segment: u64, offset: u64, at: u64) -> IndexEntry {
    IndexEntry {
        flags: crate::format::record::FLAG_EXPIRES,
        expires_at: Some(at),
        ..entry(segment, offset)
    }
}

#[test]
fn expiries_live_in_the_side_table_and_follow_their_entries() {
    let index = Index::with_hash_bits(0); // one run: every operation meets every entry
    let (h, k) = (index.hash(b"k"), 3);
    index.apply(h, None, Some(&expiring(1, 64, 100)));
    index.apply(h, None, Some(&entry(1, 128)));
    // A lookup gives the expiry back, and places the value after the expiry field.
    let c = index.candidates(h, k);
    assert_eq!(c.as_slice()[0].expires_at, Some(100));
    assert_eq!(c.as_slice()[0].value_offset(), 64 + 40 + 3);
    assert_eq!(c.as_slice()[1].expires_at, None);
    assert_eq!(c.as_slice()[1].value_offset(), 128 + 32 + 3);
    let len = expiring(1, 64, 100).record_len();
    assert_eq!(len, entry(1, 64).record_len() + 8);
    assert_eq!(index.usage(1).live_bytes, len + entry(1, 128).record_len());
    // Expired at its instant, not before.
    assert_eq!(index.expired(99, None), (0, 0));
    assert_eq!(index.expired(100, None), (len, 1));
    assert_eq!(index.expired(100, Some(2)), (0, 0));
    // A compaction move takes the expiry to the new place.
    assert!(index.replace_if(h, &expiring(1, 64, 100), expiring(2, 64, 100)));
    assert_eq!(index.expired(100, Some(1)), (0, 0));
    assert_eq!(index.expired(100, Some(2)), (len, 1));
    assert_eq!(index.candidates(h, k).as_slice()[0].expires_at, Some(100));
    // An overwrite without expiry drops it; one with an expiry brings its own.
    index.apply(h, Some(&expiring(2, 64, 100)), Some(&entry(3, 64)));
    assert_eq!(index.expired(u64::MAX, None), (0, 0));
    index.apply(h, Some(&entry(3, 64)), Some(&expiring(3, 512, 7)));
    assert_eq!(index.expired(7, None).1, 1);
    // Removed by compaction (it had expired), and by a delete.
    assert_eq!(index.remove_if(h, &expiring(3, 512, 7)), Removal::Removed);
    assert_eq!(index.remove_if(h, &expiring(3, 512, 7)), Removal::Gone);
    assert_eq!(index.expired(u64::MAX, None), (0, 0));
    assert_eq!(index.len(), 1);
    index.apply(h, None, Some(&expiring(4, 64, 9)));
    index.apply_write(
        h,
        k,
        Placement::Replace(Some(expiring(4, 64, 9))),
        &[],
        None,
    );
    assert_eq!(index.expired(u64::MAX, None), (0, 0));
}

#[test]
fn an_unresolved_entry_is_not_removed_for_its_expiry() {
    // Older versions of its key may be behind it: removing it would bring them back.
    let index = Index::with_hash_bits(0);
    let h = index.hash(b"k");
    index.apply(h, None, Some(&entry(1, 64)));
    index.apply_write(h, 3, Placement::Front, &[], Some(&expiring(2, 64, 5)));
    assert!(index.candidates(h, 3).unresolved());
    assert_eq!(index.remove_if(h, &expiring(2, 64, 5)), Removal::Kept);
    index.resolve(h, 3, (2, 64), &[(1, 64)]);
    assert_eq!(index.remove_if(h, &expiring(2, 64, 5)), Removal::Removed);
    assert!(index.is_empty());
}

#[test]
fn load_notes_the_expiries_of_the_entries_it_loads() {
    let index = Index::default();
    let e = expiring(1, 64, 50);
    let mut usage = BTreeMap::new();
    usage.insert(
        1,
        SegmentUsage {
            live_bytes: e.record_len(),
            live_records: 1,
        },
    );
    index.load(vec![(key_hash(b"k"), e)], usage);
    let got = index.candidates(key_hash(b"k"), 1);
    assert_eq!(got.as_slice()[0].expires_at, Some(50));
    assert_eq!(index.expired(50, Some(1)), (e.record_len(), 1));
}
