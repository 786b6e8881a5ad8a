//! The log store's own tests (openraft's suite is tests/cluster/suite.rs).

use super::*;
use openraft::RaftLogReader;
use openraft::storage::IOFlushed;

fn entry(term: u64, index: u64) -> Entry {
    Entry::new_normal(
        openraft::testing::log_id::<TypeConfig>(term, 1, index),
        crate::Request::Put {
            key: format!("k{index}").into_bytes(),
            value: format!("term {term}").into_bytes(),
        },
    )
}

async fn read(log: &mut LogStore, from: u64, to: u64) -> Vec<LogId> {
    let entries = log.try_get_log_entries(from..to).await.unwrap();
    entries.iter().map(|e| e.log_id()).collect()
}

/// More entries than the in-memory tail holds: reads that span the store and the tail,
/// after a truncation (the new term's entries, never the cut ones) and after a purge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_span_the_store_and_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    let n = TAIL_ENTRIES as u64 + 100;
    for from in (1..=n).step_by(500) {
        let entries: Vec<Entry> = (from..(from + 500).min(n + 1))
            .map(|i| entry(1, i))
            .collect();
        log.append(entries, IOFlushed::noop()).await.unwrap();
    }
    assert!(log.shared.tail().len() <= TAIL_ENTRIES);
    assert!(log.shared.tail().first().unwrap() > 1);
    let ids = read(&mut log, 1, n + 1).await;
    assert_eq!(
        ids,
        (1..=n).map(|i| entry(1, i).log_id()).collect::<Vec<_>>()
    );

    // Cut the last 50, append them again in term 2.
    log.truncate_after(Some(entry(1, n - 50).log_id()))
        .await
        .unwrap();
    assert_eq!(read(&mut log, n - 52, n + 1).await.len(), 3);
    let again: Vec<Entry> = (n - 49..=n).map(|i| entry(2, i)).collect();
    log.append(again, IOFlushed::noop()).await.unwrap();
    let ids = read(&mut log, n - 51, n + 1).await;
    let want: Vec<LogId> = (n - 51..=n)
        .map(|i| entry(if i > n - 50 { 2 } else { 1 }, i).log_id())
        .collect();
    assert_eq!(ids, want);

    // Purged up to an entry inside the tail: reads start after it.
    log.purge(entry(1, n - 60).log_id()).await.unwrap();
    let ids = read(&mut log, 1, n + 1).await;
    assert_eq!(ids.first(), Some(&entry(1, n - 59).log_id()));
    assert_eq!(ids.len(), 60);

    // Reopened: no tail, the same entries from the store.
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(read(&mut log, 1, n + 1).await, ids);
}

/// Appends on a current-thread runtime (written on the calling task), read back from the
/// tail; ranges outside the log, or empty, read nothing.
#[tokio::test]
async fn appends_on_the_task_are_read_back_and_empty_ranges_read_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    assert!(read(&mut log, 0, 10).await.is_empty());
    // The first append on a blocking thread (it creates the store's segment), then inline.
    assert!(!log.shared.written.load(Ordering::Relaxed));
    log.append(vec![entry(1, 1)], IOFlushed::noop())
        .await
        .unwrap();
    assert!(log.shared.written.load(Ordering::Relaxed));
    let entries: Vec<Entry> = (2..=10).map(|i| entry(1, i)).collect();
    log.append(entries, IOFlushed::noop()).await.unwrap();
    let all: Vec<LogId> = (1..=10).map(|i| entry(1, i).log_id()).collect();
    assert_eq!(read(&mut log, 0, 100).await, all);
    assert_eq!(read(&mut log, 4, 6).await, all[3..5]);
    assert!(read(&mut log, 11, 20).await.is_empty());
    assert!(read(&mut log, 6, 4).await.is_empty());
    assert!(read(&mut log, 5, 5).await.is_empty());
    // Reopened (no tail): the same entries from the store.
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(read(&mut log, 0, 100).await, all);
}

fn append_all(from: u64, to: u64, term: u64) -> Vec<Entry> {
    (from..=to).map(|i| entry(term, i)).collect()
}

/// Appends `entries` and waits until the log's flush thread reports them flushed, so that no
/// flush this append asked for comes later (one that did took the next test's pending appends
/// in two records: CI, 2026-12-06).
async fn append_flushed(log: &mut LogStore, entries: Vec<Entry>) {
    use openraft::type_config::TypeConfigExt;
    let (tx, rx) = TypeConfig::oneshot();
    log.append(entries, IOFlushed::signal(tx)).await.unwrap();
    rx.await.unwrap().unwrap();
}

/// The extents of the records in the store, from their keys.
fn records(log: &LogStore) -> Vec<(u64, u64)> {
    log.store()
        .range(&bound(0)[..]..END)
        .map(|k| extent(&k.unwrap()).unwrap())
        .collect()
}

/// The appends a flush covers are one record whatever their number of entries (an append
/// alone, or several pending together); the committed id is written by no `save_committed`
/// but carried by the next append's record, by a truncation and at close, and open recovers
/// the newest of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_record_per_flush_and_the_committed_id_rides_on_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    append_flushed(&mut log, append_all(1, 10, 1)).await;
    append_flushed(&mut log, append_all(11, 11, 1)).await;
    assert_eq!(records(&log), vec![(1, 10), (11, 11)]);

    let c8 = entry(1, 8).log_id();
    log.save_committed(Some(c8)).await.unwrap();
    assert_eq!(
        log.store().get(COMMITTED).unwrap(),
        None,
        "no write of its own"
    );
    // Three appends pending (as between two flushes), readable before they are written, then
    // written as one record.
    for (from, to) in [(12, 12), (13, 17), (18, 20)] {
        log.shared
            .append_pending(append_all(from, to, 1), Some(c8))
            .unwrap();
    }
    assert_eq!(records(&log), vec![(1, 10), (11, 11)]);
    assert_eq!(read(&mut log, 11, 21).await.len(), 10);
    log.flush().unwrap();
    assert_eq!(records(&log), vec![(1, 10), (11, 11), (12, 20)]);
    // Reopened: the newest record's committed id (nothing pending at close).
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.store().get(COMMITTED).unwrap(), None);
    assert_eq!(log.read_committed().await.unwrap(), Some(c8));
    assert_eq!(
        read(&mut log, 0, 100).await,
        (1..=20).map(|i| entry(1, i).log_id()).collect::<Vec<_>>()
    );

    // Saved and not carried by any append: written at close.
    let c11 = entry(1, 11).log_id();
    log.save_committed(Some(c11)).await.unwrap();
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.read_committed().await.unwrap(), Some(c11));

    // A truncation inside the last record rewrites it up to the cut (its header carries the
    // older committed id c8) and writes the newer one beside it.
    log.truncate_after(Some(entry(1, 15).log_id()))
        .await
        .unwrap();
    assert_eq!(records(&log), vec![(1, 10), (11, 11), (12, 15)]);
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.read_committed().await.unwrap(), Some(c11));
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(entry(1, 15).log_id()));
    assert_eq!(read(&mut log, 14, 100).await.len(), 2);
    // Truncated at a record's boundary, then to nothing.
    log.truncate_after(Some(entry(1, 10).log_id()))
        .await
        .unwrap();
    assert_eq!(records(&log), vec![(1, 10)]);
    log.truncate_after(None).await.unwrap();
    assert!(records(&log).is_empty());
    assert!(read(&mut log, 0, 100).await.is_empty());
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(log.get_log_state().await.unwrap().last_log_id, None);
    assert_eq!(log.read_committed().await.unwrap(), Some(c11));
}

/// A purge point inside a record: the record stays (its entries after the point are read, from
/// the tail and, reopened, from the store), the records wholly before it are reclaimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_inside_a_record_keeps_it_and_reclaims_those_before() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    for (from, to) in [(1, 10), (11, 20), (21, 30)] {
        log.append(append_all(from, to, 1), IOFlushed::noop())
            .await
            .unwrap();
        log.flush().unwrap();
    }
    log.purge(entry(1, 15).log_id()).await.unwrap();
    let want: Vec<LogId> = (16..=30).map(|i| entry(1, i).log_id()).collect();
    assert_eq!(read(&mut log, 0, 100).await, want);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while records(&log) != vec![(11, 20), (21, 30)] {
        assert!(std::time::Instant::now() < deadline, "{:?}", records(&log));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(read(&mut log, 0, 100).await, want);
    assert_eq!(read(&mut log, 16, 18).await, want[..2]);
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(entry(1, 15).log_id()));
    assert_eq!(state.last_log_id, Some(entry(1, 30).log_id()));
    // Appends go on after the straddling record.
    log.append(append_all(31, 31, 2), IOFlushed::noop())
        .await
        .unwrap();
    assert_eq!(read(&mut log, 30, 32).await.len(), 2);

    // Purged past the last entry: empty, and reopened still empty with the purge point last.
    log.purge(entry(2, 31).log_id()).await.unwrap();
    assert!(read(&mut log, 0, 100).await.is_empty());
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(entry(2, 31).log_id()));
    assert!(read(&mut log, 0, 100).await.is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !records(&log).is_empty() {
        assert!(std::time::Instant::now() < deadline, "{:?}", records(&log));
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// An append of more than `RECORD_BYTES` is cut into several records, written in one batch,
/// read back whole from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_append_is_several_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    let big = |i: u64| {
        Entry::new_normal(
            openraft::testing::log_id::<TypeConfig>(1, 1, i),
            crate::Request::Put {
                key: format!("k{i}").into_bytes(),
                value: vec![i as u8; 300 << 10],
            },
        )
    };
    log.append((1..=8).map(big).collect::<Vec<_>>(), IOFlushed::noop())
        .await
        .unwrap();
    let recs = records(&log);
    assert!(recs.len() > 1, "{recs:?}");
    assert_eq!(recs.first().unwrap().0, 1);
    assert_eq!(recs.last().unwrap().1, 8);
    assert!(recs.windows(2).all(|w| w[0].1 + 1 == w[1].0), "{recs:?}");
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    let got = log.try_get_log_entries(3..7).await.unwrap();
    assert_eq!(got, (3..7).map(big).collect::<Vec<_>>());
}

/// A log written one record per entry (9-byte keys, before records) is refused with an error
/// that says so, not misread.
#[test]
fn a_log_of_the_earlier_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path()).unwrap();
        store.put(bound(1), encode(&entry(1, 1)).unwrap()).unwrap();
    }
    let err = LogStore::open(dir.path()).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    assert!(err.to_string().contains("earlier podstore-raft"), "{err}");
}

/// A record whose entries do not match its key's extent is an error, never a short read.
#[test]
fn a_record_not_matching_its_key_is_an_error() {
    let mut b = record::Builder::new(None, Vec::new());
    for i in 5..=7 {
        b.push(&entry(1, i)).unwrap();
    }
    let recs = b.finish();
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    let parsed = Parsed::new(&r.key, &r.value).unwrap();
    let mut out = Vec::new();
    parsed
        .decode_range(0, 100, &mut out, &mut { usize::MAX })
        .unwrap();
    assert_eq!(out, (5..=7).map(|i| entry(1, i)).collect::<Vec<_>>());
    let cut = parsed.prefix(6).unwrap();
    assert_eq!(extent(&cut.key).unwrap(), (5, 6));
    // The cut record under the full record's key: fewer entries than the key says.
    let short = Parsed::new(&r.key, &cut.value).unwrap();
    assert!(
        short
            .decode_range(0, 100, &mut Vec::new(), &mut { usize::MAX })
            .is_err()
    );
    // The full record under the cut one's key: more.
    let long = Parsed::new(&cut.key, &r.value).unwrap();
    assert!(
        long.decode_range(0, 100, &mut Vec::new(), &mut { usize::MAX })
            .is_err()
    );
    // An unknown format byte.
    let mut other = r.value.clone();
    other[0] = 9;
    assert!(Parsed::new(&r.key, &other).is_err());
}

/// Appends pending when a truncation, a purge or a vote comes are written before it, in
/// order: truncated or purged like the others, and the log reopened after a vote (which is
/// synced) holds them; a streamed value's chunk is written at once, after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_appends_are_written_before_a_truncation_a_purge_or_a_vote() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = LogStore::open(dir.path()).unwrap();
    log.append(append_all(1, 1, 1), IOFlushed::noop())
        .await
        .unwrap();
    log.flush().unwrap();
    log.shared
        .append_pending(append_all(2, 10, 1), None)
        .unwrap();
    log.truncate_after(Some(entry(1, 6).log_id()))
        .await
        .unwrap();
    assert_eq!(records(&log), vec![(1, 1), (2, 6)]);
    assert_eq!(read(&mut log, 0, 100).await.len(), 6);

    log.shared
        .append_pending(append_all(7, 12, 2), None)
        .unwrap();
    log.purge(entry(1, 3).log_id()).await.unwrap();
    assert!(records(&log).contains(&(7, 12)), "{:?}", records(&log));

    log.shared
        .append_pending(append_all(13, 14, 2), None)
        .unwrap();
    let chunk = Entry::new_normal(
        openraft::testing::log_id::<TypeConfig>(2, 1, 15),
        crate::Request::Chunk {
            upload: crate::UploadId { term: 2, nonce: 1 },
            index: 0,
            bytes: vec![7; 1000],
        },
    );
    log.append(vec![chunk], IOFlushed::noop()).await.unwrap();
    assert!(
        records(&log).ends_with(&[(13, 14), (15, 15)]),
        "{:?}",
        records(&log)
    );

    log.shared
        .append_pending(append_all(16, 20, 2), None)
        .unwrap();
    let vote = openraft::testing::log_id::<TypeConfig>(2, 1, 0);
    let vote =
        openraft::alias::VoteOf::<TypeConfig>::new_committed(vote.committed_leader_id().term, 1);
    log.save_vote(&vote).await.unwrap();
    // Written before the vote's synced write, which makes them durable with it.
    assert!(records(&log).ends_with(&[(16, 20)]), "{:?}", records(&log));
    drop(log);
    let mut log = LogStore::open(dir.path()).unwrap();
    assert_eq!(read(&mut log, 0, 100).await.len(), 17);
}
