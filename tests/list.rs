//! Ordered listing (`Store::range`, `Store::prefix`) against a `BTreeMap` model: many keys over
//! many segments and blob files whose footers span many key blocks, through overwrites,
//! deletes, seals, reopens and compaction; while compaction moves keys under it; on the
//! old-format fixture; and on a damaged footer.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Random, XorShift, compat};
use podstore::{Durability, IoMode, Options, Result, Store};

fn options() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .write_buffer_size(64 << 10)
        .large_value_threshold(32 << 10)
        .durability(Durability::Buffered)
        .flush_interval(None)
        .background_compaction(false)
        .compaction_threshold(0.1)
}

/// A key of the key space: a few prefixes, a number, sometimes long (up to 4 KiB).
fn key(rng: &mut XorShift) -> Vec<u8> {
    let prefix = ["a/", "ab/", "b/", "photo/", "photo/x/", "z"][rng.below(6)];
    let mut k = format!("{prefix}{:05}", rng.below(3000)).into_bytes();
    if rng.below(40) == 0 {
        k.resize(1 + rng.below(podstore::MAX_KEY_LEN), b'~');
    }
    k
}

fn listed(it: podstore::Keys<'_>) -> Vec<Vec<u8>> {
    it.collect::<Result<_>>().expect("listing")
}

/// Random ranges (every bound kind, at keys and between them) and prefixes, against the model.
fn check(store: &Store, model: &BTreeMap<Vec<u8>, usize>, rng: &mut XorShift, what: &str) {
    let all: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert_eq!(listed(store.range::<&[u8]>(..)), all, "{what}: range(..)");
    assert_eq!(store.len(), all.len(), "{what}");
    let probe = |rng: &mut XorShift| -> Vec<u8> {
        match rng.below(3) {
            0 if !all.is_empty() => all[rng.below(all.len())].clone(),
            1 if !all.is_empty() => {
                let mut k = all[rng.below(all.len())].clone();
                k.truncate(rng.below(k.len() + 1));
                k
            }
            _ => key(rng),
        }
    };
    for _ in 0..40 {
        let (a, b) = (probe(rng), probe(rng));
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let bound = |rng: &mut XorShift, k: &[u8]| -> Bound<Vec<u8>> {
            match rng.below(3) {
                0 => Included(k.to_vec()),
                1 => Excluded(k.to_vec()),
                _ => Unbounded,
            }
        };
        let (s, e) = (bound(rng, &lo), bound(rng, &hi));
        if lo == hi && matches!((&s, &e), (Excluded(_), Excluded(_))) {
            continue; // BTreeMap refuses it
        }
        let want: Vec<Vec<u8>> = model
            .range((s.clone(), e.clone()))
            .map(|(k, _)| k.clone())
            .collect();
        let got = listed(store.range::<Vec<u8>>((s.clone(), e.clone())));
        assert_eq!(got, want, "{what}: range({s:?}, {e:?})");
        let p = probe(rng);
        let p = &p[..p.len().min(1 + rng.below(8))];
        let want: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(p)).cloned().collect();
        assert_eq!(listed(store.prefix(p)), want, "{what}: prefix({p:?})");
    }
}

#[test]
fn listing_matches_a_btreemap_through_writes_seals_reopens_and_compaction() {
    for mode in [IoMode::Direct, IoMode::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        let opts = options().io_mode(mode);
        let mut store = Store::open_with(dir.path(), opts.clone()).unwrap();
        let mut model: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        let mut rng = XorShift::new(17);
        for round in 0..6 {
            for _ in 0..1500 {
                let k = key(&mut rng);
                if rng.below(5) == 0 {
                    store.delete(&k).unwrap();
                    model.remove(&k);
                } else {
                    let len = if rng.below(200) == 0 {
                        40 << 10
                    } else {
                        rng.below(300)
                    };
                    store.put(&k, rng.bytes(len)).unwrap();
                    model.insert(k, len);
                }
            }
            let what = format!("{mode:?}, round {round}");
            check(&store, &model, &mut rng, &format!("{what}, written"));
            match round % 3 {
                0 => {
                    store.seal().unwrap();
                }
                1 => {
                    store.compact().unwrap();
                }
                _ => {
                    store.close().unwrap();
                    store = Store::open_with(dir.path(), opts.clone()).unwrap();
                }
            }
            check(&store, &model, &mut rng, &format!("{what}, after step"));
        }
        store.close().unwrap();
    }
}

/// Keys that no writer touches are listed exactly once, in order, by listings that run while
/// other keys are overwritten and compaction moves every live key to new files.
#[test]
fn keys_live_throughout_are_listed_once_while_compaction_moves_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with(dir.path(), options().compaction_threshold(0.01)).unwrap();
    let stable: BTreeSet<Vec<u8>> = (0..2000)
        .map(|i| format!("s/{i:05}").into_bytes())
        .collect();
    for k in &stable {
        store.put(k, b"stable value").unwrap();
    }
    let done = AtomicBool::new(false);
    let mut listings = 0;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Overwrites make the segments holding the stable keys dead enough to compact:
            // every compaction moves stable keys to new files.
            for round in 0..6u64 {
                for i in 0..400u64 {
                    store
                        .put(format!("t/{:03}", (round * 7 + i) % 300), vec![7u8; 500])
                        .unwrap();
                }
                store.compact().unwrap();
            }
            done.store(true, Ordering::Release);
        });
        loop {
            let finished = done.load(Ordering::Acquire);
            let keys = listed(store.range::<&str>(..));
            assert!(
                keys.windows(2).all(|w| w[0] < w[1]),
                "ascending, no duplicate"
            );
            let got: BTreeSet<Vec<u8>> =
                keys.into_iter().filter(|k| k.starts_with(b"s/")).collect();
            assert_eq!(got, stable);
            assert_eq!(listed(store.prefix("s/001")).len(), 100);
            // From the back, and from both ends at once, with the values.
            let mut back: Vec<Vec<u8>> = store.prefix("s/").rev().map(|k| k.unwrap()).collect();
            back.reverse();
            assert!(back.iter().eq(stable.iter()), "backwards");
            let mut it = store.prefix("s/").entries();
            let mut n = 0;
            while let Some(e) = if n % 2 == 0 {
                it.next()
            } else {
                it.next_back()
            } {
                assert_eq!(e.unwrap().value().unwrap(), b"stable value");
                n += 1;
            }
            assert_eq!(n, stable.len());
            listings += 1;
            if finished {
                break;
            }
        }
    });
    assert!(listings > 1, "{listings} listings");
}

/// A listing that is half way when compaction moves every key to new files (and removes the old
/// ones) still lists each key once: the rest comes from the files it started with, and the
/// index, which now names the copies, says the keys are live.
#[test]
fn a_listing_half_way_survives_a_compaction_that_moves_its_keys() {
    for seal_first in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open_with(dir.path(), options().compaction_threshold(0.01)).unwrap();
        let keys: Vec<Vec<u8>> = (0..3000)
            .map(|i| format!("s/{i:05}").into_bytes())
            .collect();
        for k in &keys {
            store.put(k, b"stable value").unwrap();
        }
        for i in 0..600 {
            store
                .put(format!("t/{:03}", i % 50), vec![1u8; 200])
                .unwrap();
        }
        if seal_first {
            store.seal().unwrap();
        }
        let mut it = store.prefix("s/");
        let mut got: Vec<Vec<u8>> = (&mut it).take(1000).map(|k| k.unwrap()).collect();
        let report = store.compact().unwrap();
        assert!(report.segments_compacted >= 1, "{report:?}");
        got.extend(it.map(|k| k.unwrap()));
        assert!(
            got == keys,
            "sealed first: {seal_first}: {} keys listed of {}",
            got.len(),
            keys.len()
        );
    }
}

/// The old-format fixture (footers of version 1) lists in order, and again once compaction
/// rewrote it with footers of version 2.
#[test]
fn the_old_format_fixture_lists_in_order() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(compat::FIXTURE_DIR);
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&fixture).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let want: Vec<Vec<u8>> = compat::expected_contents()
        .into_keys()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let opts = compat::options(IoMode::Buffered).compaction_threshold(f64::MIN_POSITIVE);
    let store = Store::open_with(dir.path(), opts).unwrap();
    assert_eq!(listed(store.range::<&str>(..)), want);
    store.compact().unwrap();
    assert_eq!(listed(store.range::<&str>(..)), want);
}

/// A key block damaged under an open store is an error item naming the file (not a panic, not
/// a wrong key), and ends the listing; a listing that does not reach the block is not affected.
#[test]
fn a_damaged_key_block_is_an_error_item() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let opts = options().io_mode(IoMode::Buffered);
    let store = Store::open_with(dir.path(), opts.clone()).unwrap();
    for i in 0..3000 {
        store.put(format!("k/{i:05}"), b"v").unwrap();
    }
    store.close().unwrap();
    let store = Store::open_with(dir.path(), opts).unwrap();
    let seg = common::files::written_files(dir.path(), common::files::FileKind::Log)
        .into_iter()
        .next()
        .unwrap();
    let bytes = std::fs::read(&seg).unwrap();
    let id = u64::from_str_radix(&seg.file_name().unwrap().to_string_lossy()[4..20], 16).unwrap();
    // A byte in the last key block: after every key but the last few hundred. The tree here is
    // one level, its root right after the last block.
    let t = common::records::trailer(&bytes).unwrap();
    let table = &bytes[t.table_offset as usize..][..t.table_len as usize];
    let h = podstore::format::footer::LocationHeader::decode(&t, table).unwrap();
    assert_eq!(h.depth, 1);
    let at = h.root_offset - 100;
    let file = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    file.write_all_at(&[bytes[at as usize] ^ 0x08], at).unwrap();
    drop(file);
    let items: Vec<Result<Vec<u8>>> = store.range::<&str>(..).collect();
    let last = items.last().unwrap();
    match last {
        Err(podstore::Error::Corruption {
            segment, offset, ..
        }) => {
            assert_eq!(*segment, id);
            assert!(
                *offset < at && at - *offset < 9000,
                "{offset} for a flip at {at}"
            );
        }
        other => panic!("expected a corruption item last, got {other:?}"),
    }
    assert!(items[..items.len() - 1].iter().all(|i| i.is_ok()));
    assert!(
        items.len() > 1000,
        "the blocks before it listed: {}",
        items.len()
    );
    // The start of the range is found without reading the damaged block.
    assert_eq!(listed(store.prefix("k/0000")).len(), 10);
    store.close().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Both directions and values, against a `BTreeMap` (proptest)
// ---------------------------------------------------------------------------------------------

mod both_ends {
    use super::*;
    use podstore::{CompactOptions, Entry};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    type Model = BTreeMap<Vec<u8>, Vec<u8>>;

    /// The key space: a few prefixes (one of them all `0xff`, which has no successor) and
    /// numbers; small, so that keys are overwritten and deleted often.
    fn key(i: u8) -> Vec<u8> {
        let prefix: &[u8] = [&b"a/"[..], b"ab/", b"b", b"\xff\xff", b"photo/"][(i % 5) as usize];
        let mut k = prefix.to_vec();
        k.extend_from_slice(format!("{}", i / 5).as_bytes());
        k
    }

    const KEYS: u8 = 40;

    /// Where a listing runs: bounds of every kind, or a prefix.
    #[derive(Debug, Clone)]
    enum Span {
        Range(Bound<u8>, Bound<u8>),
        Prefix(Vec<u8>),
    }

    impl Span {
        fn bounds(&self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
            match self {
                Span::Range(lo, hi) => (lo.map(key), hi.map(key)),
                Span::Prefix(_) => (Unbounded, Unbounded),
            }
        }

        fn contains(&self, k: &[u8]) -> bool {
            match self {
                Span::Range(..) => {
                    let after = match self.bounds().0 {
                        Included(s) => k >= s.as_slice(),
                        Excluded(s) => k > s.as_slice(),
                        Unbounded => true,
                    };
                    let before = match self.bounds().1 {
                        Included(e) => k <= e.as_slice(),
                        Excluded(e) => k < e.as_slice(),
                        Unbounded => true,
                    };
                    after && before
                }
                Span::Prefix(p) => k.starts_with(p),
            }
        }

        fn keys<'s>(&self, store: &'s Store) -> podstore::Keys<'s> {
            match self {
                Span::Range(..) => store.range::<Vec<u8>>(self.bounds()),
                Span::Prefix(p) => store.prefix(p),
            }
        }
    }

    /// One step of a listing, or a write between two of its steps.
    #[derive(Debug, Clone)]
    enum Step {
        Front,
        Back,
        Put(u8, usize),
        Delete(u8),
        Compact,
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(u8, usize),
        Delete(u8),
        Seal,
        Compact,
        Reopen,
        /// A listing driven by `steps`, with values or keys only, then drained from both ends.
        List {
            span: Span,
            values: bool,
            steps: Vec<Step>,
        },
    }

    fn bound() -> impl Strategy<Value = Bound<u8>> {
        prop_oneof![
            (0..KEYS).prop_map(Included),
            (0..KEYS).prop_map(Excluded),
            Just(Unbounded),
        ]
    }

    fn span() -> impl Strategy<Value = Span> {
        prop_oneof![
            3 => (bound(), bound()).prop_map(|(a, b)| Span::Range(a, b)),
            2 => prop::sample::select(vec![
                b"a".to_vec(), b"a/".to_vec(), b"ab/".to_vec(), b"\xff".to_vec(),
                b"\xff\xff".to_vec(), b"photo/1".to_vec(), b"z".to_vec(), Vec::new(),
            ])
            .prop_map(Span::Prefix),
        ]
    }

    fn value_len() -> impl Strategy<Value = usize> {
        prop_oneof![8 => 0..300usize, 1 => Just(40 << 10)]
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => Just(Step::Front),
            4 => Just(Step::Back),
            1 => (0..KEYS, value_len()).prop_map(|(k, n)| Step::Put(k, n)),
            1 => (0..KEYS).prop_map(Step::Delete),
            1 => Just(Step::Compact),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0..KEYS, value_len()).prop_map(|(k, n)| Op::Put(k, n)),
            3 => (0..KEYS).prop_map(Op::Delete),
            1 => Just(Op::Seal),
            1 => Just(Op::Compact),
            1 => Just(Op::Reopen),
            3 => (span(), any::<bool>(), prop::collection::vec(step(), 0..12))
                .prop_map(|(span, values, steps)| Op::List { span, values, steps }),
        ]
    }

    /// A fresh value: its bytes tell the write apart from every other.
    fn value(n: &mut u64, len: usize) -> Vec<u8> {
        *n += 1;
        XorShift::new(*n).bytes(len)
    }

    fn compact(store: &Store) {
        let r = store.compact_with(CompactOptions::new().threshold(0.05));
        r.expect("compact_with");
    }

    /// An entry checked against the model at the moment it is yielded: the key is live, in the
    /// span, with this value (its length known without a read; its bytes read whole and
    /// streamed).
    fn check_entry(e: &Entry<'_>, model: &Model, span: &Span) -> Vec<u8> {
        let k = e.key();
        assert!(span.contains(k), "{k:?} outside {span:?}");
        let want = model
            .get(k)
            .unwrap_or_else(|| panic!("{k:?} listed, not live"));
        assert_eq!(e.value_len(), want.len() as u64, "{k:?}");
        want.clone()
    }

    /// Runs a listing: `steps` (reads from either end, writes and compactions between them),
    /// then the rest from both ends alternately. Without writes the items are exactly the
    /// model's, end for end (a `VecDeque` of the model's range); with writes, a key written or
    /// deleted during the listing may or may not be listed, but every key is live when it is
    /// listed, with the value the model has then (read again at the end: the value as listed),
    /// each key at most once and in order, and every key live throughout exactly once.
    fn list(
        store: &Store,
        model: &mut Model,
        n: &mut u64,
        span: &Span,
        values: bool,
        steps: &[Step],
    ) {
        let at_start = model.clone();
        let mut want: VecDeque<Vec<u8>> =
            model.keys().filter(|k| span.contains(k)).cloned().collect();
        let mut touched = BTreeSet::new();
        let mut keys = Some(span.keys(store));
        let mut entries = None;
        if values {
            entries = keys.take().map(|k| k.entries());
        }
        let (mut front, mut back) = (Vec::new(), Vec::new());
        let mut held: Vec<(Entry<'_>, Vec<u8>)> = Vec::new();
        let mut pull = |back_end: bool, model: &Model| -> Option<Vec<u8>> {
            if let Some(it) = entries.as_mut() {
                let item = if back_end { it.next_back() } else { it.next() };
                let e = item?.expect("listing");
                let v = check_entry(&e, model, span);
                let k = e.key().to_vec();
                held.push((e, v));
                Some(k)
            } else {
                let it = keys.as_mut().expect("keys");
                let item = if back_end { it.next_back() } else { it.next() };
                let k = item.map(|r| r.expect("listing"));
                if let Some(k) = &k {
                    assert!(model.contains_key(k) && span.contains(k), "{k:?} listed");
                }
                k
            }
        };
        for s in steps {
            match *s {
                Step::Front | Step::Back => {
                    let b = matches!(s, Step::Back);
                    let got = pull(b, model);
                    let (side, expect) = if b {
                        (&mut back, want.pop_back())
                    } else {
                        (&mut front, want.pop_front())
                    };
                    if touched.is_empty() {
                        assert_eq!(got, expect, "{span:?} {s:?}");
                    }
                    side.extend(got);
                }
                Step::Put(k, len) => {
                    let v = value(n, len);
                    store.put(key(k), &v).unwrap();
                    model.insert(key(k), v);
                    touched.insert(key(k));
                }
                Step::Delete(k) => {
                    store.delete(key(k)).unwrap();
                    model.remove(&key(k));
                    touched.insert(key(k));
                }
                Step::Compact => compact(store),
            }
        }
        // The rest, alternately from each end.
        let mut b = false;
        while let Some(k) = pull(b, model) {
            if b {
                back.push(k)
            } else {
                front.push(k)
            }
            b = !b;
        }
        let mut all = front;
        all.extend(back.into_iter().rev());
        assert!(
            all.windows(2).all(|w| w[0] < w[1]),
            "{span:?}: in order, once: {all:?}"
        );
        let listed: BTreeSet<&Vec<u8>> = all.iter().collect();
        for (k, _) in at_start.iter().filter(|(k, _)| span.contains(k)) {
            if !touched.contains(k) {
                assert!(
                    listed.contains(k),
                    "{k:?} live throughout, not listed ({span:?})"
                );
            }
        }
        if touched.is_empty() {
            let whole: Vec<Vec<u8>> = at_start
                .keys()
                .filter(|k| span.contains(k))
                .cloned()
                .collect();
            assert_eq!(all, whole, "{span:?}");
        }
        // Each entry's value as it was listed, whatever was written since; streamed too.
        for (e, v) in &held {
            assert_eq!(&e.value().unwrap(), v, "{:?}", e.key());
            let mut streamed = Vec::new();
            std::io::Read::read_to_end(&mut e.reader(), &mut streamed).unwrap();
            assert_eq!(&streamed, v);
        }
    }

    fn run(ops: &[Op], durability: Durability) {
        let dir = tempfile::tempdir().unwrap();
        let opts = options().durability(durability);
        let mut store = Store::open_with(dir.path(), opts.clone()).unwrap();
        let mut model = Model::new();
        let mut n = 0u64;
        for op in ops {
            match op {
                Op::Put(k, len) => {
                    let v = value(&mut n, *len);
                    store.put(key(*k), &v).unwrap();
                    model.insert(key(*k), v);
                }
                Op::Delete(k) => {
                    store.delete(key(*k)).unwrap();
                    model.remove(&key(*k));
                }
                Op::Seal => {
                    store.seal().unwrap();
                }
                Op::Compact => compact(&store),
                Op::Reopen => {
                    store.close().unwrap();
                    store = Store::open_with(dir.path(), opts.clone()).unwrap();
                }
                Op::List {
                    span,
                    values,
                    steps,
                } => list(&store, &mut model, &mut n, span, *values, steps),
            }
            // The ends of the whole store.
            let first = store.first().unwrap();
            let last = store.last().unwrap();
            let want_first = model.iter().next();
            let want_last = model.iter().next_back();
            assert_eq!(
                first.as_ref().map(|e| e.key()),
                want_first.map(|(k, _)| k.as_slice())
            );
            assert_eq!(
                last.as_ref().map(|e| e.key()),
                want_last.map(|(k, _)| k.as_slice())
            );
            if let (Some(e), Some((_, v))) = (last, want_last) {
                assert_eq!(&e.value().unwrap(), v);
            }
        }
        store.close().unwrap();
    }

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: std::env::var("PROPTEST_CASES")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(24),
            ..ProptestConfig::default()
        }
    }

    proptest! {
        #![proptest_config(config())]

        /// Buffered writes: records packed, values in log segments.
        #[test]
        fn both_ends_and_values_match_a_btreemap(ops in prop::collection::vec(op(), 1..60)) {
            run(&ops, Durability::Buffered);
        }

        /// Durable writes: the 40 KiB values go to blob files of their own.
        #[test]
        fn both_ends_and_values_match_a_btreemap_with_blob_files(
            ops in prop::collection::vec(op(), 1..40)
        ) {
            run(&ops, Durability::Sync);
        }
    }
}
