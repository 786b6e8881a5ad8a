//! Running a sequence of operations against the store and the model, and checking every answer.

use super::*;

/// The read cache's capacity for most properties: podstore's default.
pub(super) const DEFAULT_CACHE: u64 = 64 << 20;

/// How a property's store is set up beyond its I/O mode and durability.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tuning {
    pub(super) compression: Compression,
    /// Read cache capacity (0: none).
    pub(super) cache: u64,
    /// Bits of each key hash the index keeps (64 in a store; fewer makes keys share
    /// fingerprints, so that the index must tell them apart by reading their records).
    pub(super) hash_bits: u32,
    /// Keep the background resolver from removing the older index entries that overwrites
    /// leave (the test hook `testing_hold_resolver`), so that every get, listing, delete and
    /// compaction meets them; `len` still resolves them.
    pub(super) hold_resolver: bool,
}

impl Tuning {
    pub(super) fn new(compression: Compression, cache: u64) -> Tuning {
        Tuning {
            compression,
            cache,
            hash_bits: 64,
            hold_resolver: false,
        }
    }
}

pub(super) fn open(
    dir: &Path,
    io_mode: IoMode,
    durability: Durability,
    Tuning {
        compression,
        cache,
        hash_bits,
        hold_resolver,
    }: Tuning,
) -> Result<Store, String> {
    let opts = common::store::small_with(io_mode, durability)
        .compression(compression)
        .cache_capacity(cache)
        .testing_hash_bits(hash_bits)
        .compression_frame_size(4096)
        // Compaction runs when the sequence says (deterministic); at a low threshold, so that
        // it moves values often.
        .background_compaction(false)
        .compaction_threshold(0.2);
    let store = Store::open_with(dir, opts).map_err(|e| format!("open: {e}"))?;
    store.testing_hold_resolver(hold_resolver);
    if store.io_mode() != io_mode {
        return Err(format!(
            "asked for {io_mode:?}, store uses {:?}",
            store.io_mode()
        ));
    }
    Ok(store)
}

/// Everything the store holds, read through `keys()` and `get()`.
pub(super) fn contents(store: &Store) -> Result<Map, String> {
    let keys: Vec<Vec<u8>> = store
        .keys()
        .collect::<podstore::Result<_>>()
        .map_err(|e| format!("keys(): {e}"))?;
    if !keys.is_sorted() {
        return Err("keys() is not in ascending order".into());
    }
    let distinct: HashSet<&Vec<u8>> = keys.iter().collect();
    if distinct.len() != keys.len() {
        return Err(format!(
            "keys() yields duplicates: {} keys, {} distinct",
            keys.len(),
            distinct.len()
        ));
    }
    if store.len() != keys.len() {
        return Err(format!(
            "len() is {}, keys() yields {}",
            store.len(),
            keys.len()
        ));
    }
    let mut map = Map::new();
    for k in keys {
        match store.get(&k) {
            Ok(Some(v)) => map.insert(k, v),
            Ok(None) => {
                return Err(format!(
                    "keys() yields {}, get() finds nothing",
                    key_label(&k)
                ));
            }
            Err(e) => return Err(format!("get({}): {e}", key_label(&k))),
        };
    }
    Ok(map)
}

pub(super) fn check_contents(store: &Store, expected: &Map) -> Result<(), String> {
    let got = contents(store)?;
    if &got != expected {
        return Err(format!(
            "contents differ from the model: {}",
            diff(expected, &got)
        ));
    }
    check_listing(store, expected)
}

/// Ordered listing against the model as a `BTreeMap`: the whole range, ranges of every bound
/// kind between keys of the key space, and prefixes (a key's first letter, its first two bytes,
/// a prefix no key has).
pub(super) fn check_listing(store: &Store, expected: &Map) -> Result<(), String> {
    use std::ops::Bound::{self, Excluded, Included, Unbounded};
    let model: std::collections::BTreeSet<&[u8]> = expected.keys().map(Vec::as_slice).collect();
    let listed = |it: podstore::Keys<'_>| -> Result<Vec<Vec<u8>>, String> {
        it.collect::<podstore::Result<_>>()
            .map_err(|e| format!("listing: {e}"))
    };
    let labels = |keys: &[Vec<u8>]| keys.iter().map(|k| key_label(k)).collect::<Vec<_>>();
    let check = |what: String, got: Vec<Vec<u8>>, want: Vec<Vec<u8>>| {
        if got == want {
            Ok(())
        } else {
            Err(format!(
                "{what}: listed {:?}, the model has {:?}",
                labels(&got),
                labels(&want)
            ))
        }
    };
    let all: Vec<Vec<u8>> = model.iter().map(|k| k.to_vec()).collect();
    check(
        "range(..)".into(),
        listed(store.range::<&[u8]>(..))?,
        all.clone(),
    )?;
    // Backwards, and with the values (colliding fingerprints, compressed values, the cache).
    let mut back = all.clone();
    back.reverse();
    let rev = store.keys().rev().collect::<podstore::Result<Vec<_>>>();
    check(
        "keys().rev()".into(),
        rev.map_err(|e| format!("{e}"))?,
        back,
    )?;
    let mut entries = 0;
    for entry in store.keys().entries().rev() {
        let (k, v) = entry
            .and_then(|e| e.into_pair())
            .map_err(|e| format!("entries: {e}"))?;
        if expected.get(&k) != Some(&v) {
            return Err(format!("entries: {} has the wrong value", key_label(&k)));
        }
        entries += 1;
    }
    if entries != expected.len() {
        return Err(format!("entries: {entries} of {}", expected.len()));
    }
    let n = KEY_LENS.len() as u8;
    for a in 0..n {
        let b = (a + 4).min(n - 1);
        let (ka, kb) = (key(a), key(b));
        type Bounds<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);
        let bounds: [Bounds<'_>; 4] = [
            (Included(&ka), Excluded(&kb)),
            (Excluded(&ka), Included(&kb)),
            (Included(&ka), Unbounded),
            (Unbounded, Excluded(&ka)),
        ];
        for (lo, hi) in bounds {
            let want: Vec<Vec<u8>> = model
                .range::<[u8], _>((lo, hi))
                .map(|k| k.to_vec())
                .collect();
            let got = listed(store.range::<&[u8]>((lo, hi)))?;
            check(format!("range({lo:?}, {hi:?})"), got, want)?;
        }
        for p in [&ka[..1], &ka[..ka.len().min(2)], b"Z".as_slice()] {
            let want: Vec<Vec<u8>> = model
                .iter()
                .filter(|k| k.starts_with(p))
                .map(|k| k.to_vec())
                .collect();
            check(format!("prefix({p:?})"), listed(store.prefix(p))?, want)?;
        }
    }
    Ok(())
}

/// Runs `ops` on a fresh store and on the model, checking every answer. A final clean reopen
/// checks the contents once more.
pub(super) fn run(
    ops: &[Op],
    io_mode: IoMode,
    durability: Durability,
    compression: Compression,
) -> Result<(), TestCaseError> {
    run_cached(
        ops,
        io_mode,
        durability,
        Tuning::new(compression, DEFAULT_CACHE),
    )
}

/// [`run`] with a read cache of `cache` bytes (0: none).
pub(super) fn run_cached(
    ops: &[Op],
    io_mode: IoMode,
    durability: Durability,
    tuning: Tuning,
) -> Result<(), TestCaseError> {
    let dir = tempfile::Builder::new()
        .prefix("podstore-model-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map_err(|e| TestCaseError::fail(format!("temp dir: {e}")))?;
    let mut store = open(dir.path(), io_mode, durability, tuning).map_err(TestCaseError::fail)?;
    let mut model = Model::new(durability);
    let mut puts = 0u32;
    let final_reopen = Op::Reopen;
    for (i, op) in ops.iter().chain([&final_reopen]).enumerate() {
        store = step(
            store,
            dir.path(),
            &mut model,
            &mut puts,
            op,
            (io_mode, tuning),
        )
        .map_err(|e| TestCaseError::fail(format!("op #{i} {op:?}: {e}")))?;
        if store.len() != model.live.len() {
            return Err(TestCaseError::fail(format!(
                "after op #{i} {op:?}: len() is {}, the model has {} keys",
                store.len(),
                model.live.len()
            )));
        }
    }
    store
        .close()
        .map_err(|e| TestCaseError::fail(format!("final close: {e}")))
}

/// Runs one operation on the store and the model; returns the store (a new one after a reopen).
pub(super) fn step(
    store: Store,
    dir: &Path,
    model: &mut Model,
    puts: &mut u32,
    op: &Op,
    (io_mode, tuning): (IoMode, Tuning),
) -> Result<Store, String> {
    match *op {
        Op::Put { key: k, len } => {
            *puts += 1;
            let v = value(*puts, len);
            store.put(key(k), &v).map_err(|e| format!("put: {e}"))?;
            model.write(key(k), Some(v));
        }
        Op::Get { key: k } => {
            let k = key(k);
            let expected = model.live.get(&k);
            let got = store.get(&k).map_err(|e| format!("get: {e}"))?;
            match (&got, expected) {
                (None, None) => {}
                (Some(g), Some(v)) if g == v => {}
                (Some(g), Some(v)) => return Err(format!("get: value {}", value_diff(v, g))),
                _ => {
                    return Err(format!(
                        "get: got {:?}, expected {:?}",
                        got.map(|g| g.len()),
                        expected.map(|v| v.len())
                    ));
                }
            }
            // The other two whole-value reads (the second read of a value comes from the
            // cache, when it has one) agree with `get`.
            let shared = store.get_bytes(&k).map_err(|e| format!("get_bytes: {e}"))?;
            if shared.as_deref() != got.as_deref() {
                return Err("get_bytes differs from get".into());
            }
            let mut buf = b"left over".to_vec();
            let found = store
                .get_into(&k, &mut buf)
                .map_err(|e| format!("get_into: {e}"))?;
            if (found, buf.as_slice()) != (got.is_some(), got.as_deref().unwrap_or_default()) {
                return Err("get_into differs from get".into());
            }
            let contains = store.contains(&k).map_err(|e| format!("contains: {e}"))?;
            if contains != expected.is_some() {
                return Err(format!("contains is {contains}"));
            }
            let len = store.value_len(&k).map_err(|e| format!("value_len: {e}"))?;
            if len != expected.map(|v| v.len() as u64) {
                return Err(format!(
                    "value_len is {len:?}, expected {:?}",
                    expected.map(|v| v.len())
                ));
            }
        }
        Op::GetRange { key: k, start, end } => {
            let k = key(k);
            let got = store.get_range(&k, resolve(model.live.get(&k), start, end));
            check_range(model.live.get(&k), start, end, got)?;
        }
        Op::Delete { key: k } => {
            let k = key(k);
            let existed = store.delete(&k).map_err(|e| format!("delete: {e}"))?;
            let expected = model.live.contains_key(&k);
            if existed != expected {
                return Err(format!("delete returned {existed}, expected {expected}"));
            }
            if existed {
                model.write(k, None);
            }
        }
        Op::Flush => {
            store.flush().map_err(|e| format!("flush: {e}"))?;
            model.all_durable();
        }
        Op::PutIfAbsent { key: k, len } => {
            *puts += 1;
            let v = value(*puts, len);
            let k = key(k);
            let inserted = store
                .put_if_absent(&k, &v)
                .map_err(|e| format!("put_if_absent: {e}"))?;
            let expected = !model.live.contains_key(&k);
            if inserted != expected {
                return Err(format!(
                    "put_if_absent returned {inserted}, expected {expected}"
                ));
            }
            if inserted {
                model.write(k, Some(v));
            }
        }
        Op::Batch { ref ops } => {
            let mut batch = podstore::Batch::new();
            let mut writes = Vec::new();
            for &(k, len) in ops {
                let value = len.map(|len| {
                    *puts += 1;
                    value(*puts, len)
                });
                match &value {
                    Some(v) => batch.put(key(k), v),
                    None => batch.delete(key(k)),
                };
                writes.push((key(k), value));
            }
            store
                .write(&batch)
                .map_err(|e| format!("write batch: {e}"))?;
            for (k, v) in writes {
                model.write(k, v);
            }
        }
        Op::List {
            bounds: (ref start, ref end),
            ref prefix,
        } => {
            let mut all: Vec<&Vec<u8>> = model.live.keys().collect();
            all.sort();
            let list = |keys: podstore::Keys, what: &str| {
                keys.collect::<podstore::Result<Vec<Vec<u8>>>>()
                    .map_err(|e| format!("{what}: {e}"))
            };
            let want: Vec<Vec<u8>> = all.iter().map(|k| k.to_vec()).collect();
            let got = list(store.keys(), "keys()")?;
            if got != want {
                return Err(format!("keys() gave {got:?}, want {want:?}"));
            }
            let bounds = (start.bound(), end.bound());
            let want: Vec<Vec<u8>> = all
                .iter()
                .filter(|k| <_ as std::ops::RangeBounds<[u8]>>::contains(&bounds, k.as_slice()))
                .map(|k| k.to_vec())
                .collect();
            let got = list(store.range::<&[u8]>(bounds), "range")?;
            if got != want {
                return Err(format!("range({bounds:?}) gave {got:?}, want {want:?}"));
            }
            let want: Vec<Vec<u8>> = all
                .iter()
                .filter(|k| k.starts_with(prefix))
                .map(|k| k.to_vec())
                .collect();
            let got = list(store.prefix(prefix), "prefix")?;
            if got != want {
                return Err(format!("prefix({prefix:?}) gave {got:?}, want {want:?}"));
            }
        }
        Op::Compact => {
            store.compact().map_err(|e| format!("compact: {e}"))?;
            model.all_durable();
            check_contents(&store, &model.live)?;
        }
        Op::Reopen => {
            store.close().map_err(|e| format!("close: {e}"))?;
            model.all_durable();
            let store = open(dir, io_mode, model.durability, tuning)?;
            let report = store.recovery();
            if !report.recovered.is_empty() || report.removed_segments != 0 {
                return Err(format!("recovery after a clean close: {report:?}"));
            }
            check_contents(&store, &model.live)?;
            return Ok(store);
        }
        Op::CrashReopen => {
            store.simulate_crash();
            let store = open(dir, io_mode, model.durability, tuning)?;
            model.crashed(contents(&store)?)?;
            return Ok(store);
        }
    }
    Ok(store)
}

/// The range `start..end` resolved against the current value of the key (any range will do
/// for a missing key).
pub(super) fn resolve(value: Option<&Vec<u8>>, start: At, end: At) -> std::ops::Range<u64> {
    let len = value.map_or(0, |v| v.len() as u64);
    start.resolve(len)..end.resolve(len)
}

pub(super) fn check_range(
    value: Option<&Vec<u8>>,
    start: At,
    end: At,
    got: podstore::Result<Option<Vec<u8>>>,
) -> Result<(), String> {
    let range = resolve(value, start, end);
    let Some(v) = value else {
        return match got {
            Ok(None) => Ok(()),
            Ok(Some(g)) => Err(format!("missing key: got {} bytes", g.len())),
            Err(e) => Err(format!("missing key: got error {e}")),
        };
    };
    let len = v.len() as u64;
    // HTTP/S3 range rule: an end past the value is clamped, a start past it is an error.
    let in_range = range.start <= range.end && range.start <= len;
    match got {
        Ok(Some(g)) if in_range => {
            let expected = &v[range.start as usize..range.end.min(len) as usize];
            if g != expected {
                return Err(format!("{range:?} of {len}: {}", value_diff(expected, &g)));
            }
            Ok(())
        }
        Err(Error::OutOfRange {
            start: s,
            end: e,
            len: l,
            ..
        }) if !in_range => {
            if (s, e, l) != (range.start, range.end, len) {
                return Err(format!(
                    "{range:?} of {len}: OutOfRange reports {s}..{e} of {l}"
                ));
            }
            Ok(())
        }
        Ok(g) => Err(format!(
            "{range:?} of {len}: got {:?} bytes, expected {}",
            g.map(|g| g.len()),
            if in_range { "data" } else { "OutOfRange" }
        )),
        Err(e) => Err(format!("{range:?} of {len}: error {e}")),
    }
}
