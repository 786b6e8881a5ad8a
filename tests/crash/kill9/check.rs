//! What the parent checks after each kill: every key against the acknowledged operations, the
//! all-or-nothing of the one in flight, and what open found and did.

use super::*;

/// Asserts the state of one key of the kill -9 workload.
pub fn assert_key_state(store: &Store, key: &str, state: KeyState, ctx: &str) {
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
pub(super) struct KillStats {
    pub(super) rounds: u64,
    pub(super) acks: usize,
    /// In-flight operations found applied, found not applied, or that read the same either way.
    pub(super) in_flight_applied: usize,
    pub(super) in_flight_absent: usize,
    pub(super) in_flight_either: usize,
    /// In-flight batches found whole, found absent.
    pub(super) batches_applied: usize,
    pub(super) batches_absent: usize,
    /// Recovered segments that held the first records of a batch after their last whole one:
    /// batches cut by the kill, which recovery dropped.
    pub(super) torn_batches: usize,
    pub(super) recovered_segments: usize,
    pub(super) removed_blobs: usize,
    /// Files removed by an open with the catalog because it listed them as removed (compaction
    /// was killed between recording their removal and unlinking them).
    pub(super) garbage_removed: usize,
    /// Log segments compacted and dead blob files removed by the child ([`Mix::Compact`]).
    pub(super) segments_compacted: usize,
    pub(super) blobs_removed_by_compaction: usize,
}

/// Checks the keys of thread `t` against its acknowledged operations `acks` (replayed from
/// `ops`), and the all-or-nothing of the operation after them; records what was found in `model`.
pub(super) fn verify_thread(
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
pub(super) fn verify_model(store: &Store, model: &HashMap<String, KeyState>, ctx: &str) {
    for (key, s) in model {
        assert_key_state(store, key, *s, ctx);
    }
    let live = live_keys(model);
    let keys = listed_keys(store);
    if keys != live {
        panic!(
            "{ctx}: the store's keys:{}",
            listing_diagnosis(store, &keys, &live)
        );
    }
    assert_eq!(store.len(), live.len(), "{ctx}: len");
}

fn listed_keys(store: &Store) -> HashSet<String> {
    store
        .keys()
        .map(|k| String::from_utf8(k.unwrap()).unwrap())
        .collect()
}

/// What a listing that disagrees with the model is told with: each key listed and not live, or
/// live and not listed, with whether a second listing agrees, what `get` finds, and every record
/// of it in the store's files (footers and records as the files hold them now); then what the
/// background compaction had done. A listing that is wrong only while compaction runs and one
/// whose footers disagree with the index then read differently.
fn listing_diagnosis(store: &Store, keys: &HashSet<String>, live: &HashSet<String>) -> String {
    let again = listed_keys(store);
    let mut out = String::new();
    let odd = keys.symmetric_difference(live);
    let files = store_paths(store.path());
    for key in odd {
        out += &format!(
            "\n  {key}: listed {}, live {}, listed again {}, get {}",
            keys.contains(key),
            live.contains(key),
            again.contains(key),
            describe_found(store.get(key.as_bytes()).ok().flatten().as_deref()),
        );
        for path in &files {
            let Ok(records) = podstore::inspect::file_records(path) else {
                continue;
            };
            let sealed = podstore::inspect::inspect_file(path).map(|i| i.sealed);
            for r in records.records.iter().filter(|r| r.key == key.as_bytes()) {
                out += &format!(
                    "\n    {} (sealed {sealed:?}): offset {} seq {} {:?} len {} batch_continues {}",
                    path.file_name().unwrap().to_string_lossy(),
                    r.offset,
                    r.seq,
                    r.kind,
                    r.value_len,
                    r.batch_continues
                );
            }
        }
    }
    // The files as they are now (the store's directory is a temporary one), to open again.
    let kept = tempfile::Builder::new()
        .prefix("podstore-kill9-listing-")
        .tempdir()
        .map(|d| d.keep())
        .and_then(|kept| copy_dir_to(store.path(), &kept).map(|()| kept));
    out += &format!("\n  the store's files copied to {kept:?}");
    let s = store.stats();
    out + &format!(
        "\n  compaction since open: {} segments, {} files removed, {} bytes written",
        s.segments_compacted, s.files_removed, s.compaction_bytes_written
    )
}

pub(super) fn live_keys(model: &HashMap<String, KeyState>) -> HashSet<String> {
    model
        .iter()
        .filter(|(_, s)| s.is_some())
        .map(|(k, _)| k.clone())
        .collect()
}

/// Whether the whole records of a batch follow the last record recovery kept in segment
/// `segment` (bytes as the kill left them): records of a batch whose last one never reached the
/// file, which recovery dropped.
pub(super) fn batch_cut_after(segment: u64, bytes: &[u8], data_end: u64) -> bool {
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

/// Store files by id and kind.
type Files = [(u64, FileKind)];

/// What opening a killed store may find and do, all in files new in this round: at most one log
/// segment left unsealed (the footer of the previous one is written before anything of the next
/// one), recovered; at most one log segment without a whole record and one unsealed blob file
/// per writing thread, removed; and, opened with its catalog, the files it lists as removed
/// (`garbage`), removed too. `before`: the files when the round started; `found`: when the
/// store was opened; `after`: once it was.
pub(super) fn check_kill_report(
    store: &Store,
    before: &[(u64, FileKind)],
    (found, garbage): (&Files, &Files),
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
    // The files the catalog lists as removed go as its open finds them; no other old file.
    let removed: Vec<(u64, FileKind)> = found
        .iter()
        .filter(|f| !after.contains(f) && !garbage.contains(f))
        .copied()
        .collect();
    let garbage_removed = found
        .iter()
        .filter(|f| !after.contains(f) && garbage.contains(f))
        .count();
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
    // Gone from the store directory: removed (nothing but zeroes: spares, an unwritten
    // segment) or set aside in quarantine/ (a torn put's bytes), never unlinked.
    assert_eq!(
        report.removed_segments + report.quarantined.len(),
        removed.len() + garbage_removed,
        "{ctx}: {report:?}"
    );
    for q in &report.quarantined {
        assert!(
            q.moved_to.as_ref().is_some_and(|p| p.exists()),
            "{ctx}: {report:?}"
        );
        assert!(
            !matches!(q.reason, podstore::QuarantineReason::Misnamed { .. }),
            "{ctx}: {report:?}"
        );
    }
    assert_eq!(
        report.sealed_segments
            + report.recovered.len()
            + report.removed_segments
            + report.quarantined.len(),
        found.len(),
        "{ctx}: {report:?}"
    );
    stats.recovered_segments += report.recovered.len();
    stats.removed_blobs += removed_blobs;
    stats.garbage_removed += garbage_removed;
}

/// The store files that the catalog of `dir` lists as removed (none without a catalog).
pub(super) fn removed_in_catalog(dir: &Path) -> Vec<(u64, FileKind)> {
    let listed = podstore::inspect::read_catalog(dir)
        .unwrap_or_else(|e| panic!("read the catalog of {}: {e}", dir.display()));
    listed
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.listed == podstore::inspect::Listed::Removed)
        .map(|f| {
            let kind = match f.kind {
                podstore::FileKind::Blob => FileKind::Blob,
                _ => FileKind::Log,
            };
            (f.id, kind)
        })
        .collect()
}
