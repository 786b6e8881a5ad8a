//! The apply logic of streamed values: a commit assembles its chunks whole and removes them;
//! incomplete, abandoned and other terms' uploads are refused or dropped; entries applied
//! again after a crash come to the same state; a snapshot carries a staged upload to a node
//! that installs it, which can then apply the rest; and any split of a random run of entries
//! into applies (a leader's one by one, a follower's in batches) answers alike and leaves
//! the same store.

use std::path::Path;

use openraft::RaftTypeConfig;
use openraft::alias::{EntryOf, LogIdOf};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::vote::RaftLeaderIdExt;

use podstore::Batch;

use super::super::{StateMachine, apply_entries};
use super::*;

type Entry = EntryOf<TypeConfig>;
use crate::TypeConfig;

fn log_id(term: u64, index: u64) -> LogIdOf<TypeConfig> {
    LogIdOf::<TypeConfig>::new(
        <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(term, 1),
        index,
    )
}

fn upload(term: u64, nonce: u64) -> UploadId {
    UploadId { term, nonce }
}

/// Chunk `i` of a test value: 1000 bytes that differ from chunk to chunk.
fn piece(i: u64) -> Vec<u8> {
    (0..1000u64).map(|b| (b * 7 + i * 13) as u8).collect()
}

fn value(chunks: u64) -> Vec<u8> {
    (0..chunks).flat_map(piece).collect()
}

fn chunk(term: u64, index: u64, up: UploadId, i: u64) -> Entry {
    Entry::new_normal(
        log_id(term, index),
        Request::Chunk {
            upload: up,
            index: i,
            bytes: piece(i),
        },
    )
}

fn commit(term: u64, index: u64, up: UploadId, key: &str, chunks: u64) -> Entry {
    commit_if(term, index, up, key, chunks, None)
}

fn commit_if(
    term: u64,
    index: u64,
    up: UploadId,
    key: &str,
    chunks: u64,
    expect: Option<Expect>,
) -> Entry {
    let v = value(chunks);
    Entry::new_normal(
        log_id(term, index),
        Request::Commit {
            upload: up,
            key: key.as_bytes().to_vec(),
            chunks,
            len: v.len() as u64,
            crc: crc32fast::hash(&v),
            expect,
        },
    )
}

fn open(dir: &Path) -> StateMachine {
    StateMachine::open(dir.join("sm"), dir.join("snapshots")).unwrap()
}

#[test]
fn commit_assembles_the_chunks_and_removes_them_in_one_apply_or_several() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let store = sm.store();
    // All in one apply (the commit writes the chunks' batch first), ...
    let up = upload(1, 0);
    let mut entries: Vec<Entry> = (0..3).map(|i| chunk(1, i + 1, up, i)).collect();
    entries.push(commit(1, 4, up, "one", 3));
    let r = apply_entries(&store, entries).unwrap();
    assert_eq!(r, vec![Response::Done; 4]);
    assert_eq!(sm.get(b"one").unwrap(), Some(value(3)));
    assert_eq!(sm.get_versioned(b"one").unwrap().unwrap().1, 4);
    assert_eq!(staged_in(&store), 0);
    // ... or over several (each chunk its own batch), with a put between.
    let up = upload(1, 1);
    for i in 0..4 {
        apply_entries(&store, vec![chunk(1, 5 + i, up, i)]).unwrap();
    }
    assert_eq!(staged_in(&store), 4);
    let put = Entry::new_normal(
        log_id(1, 9),
        Request::Put {
            key: b"small".to_vec(),
            value: b"v".to_vec(),
        },
    );
    let r = apply_entries(&store, vec![put, commit(1, 10, up, "two", 4)]).unwrap();
    assert_eq!(r, vec![Response::Done, Response::Done]);
    assert_eq!(sm.get(b"two").unwrap(), Some(value(4)));
    assert_eq!(sm.get(b"small").unwrap(), Some(b"v".to_vec()));
    assert_eq!(staged_in(&store), 0);
    assert_eq!(sm.applied_index().unwrap(), Some(10));
    // A list shows the values, never the staged chunks.
    let (listed, _) = sm.list(b"", None, 100).unwrap();
    let keys: Vec<_> = listed.iter().map(|l| l.key.clone()).collect();
    assert_eq!(
        keys,
        vec![b"one".to_vec(), b"small".to_vec(), b"two".to_vec()]
    );
}

#[test]
fn an_incomplete_or_mismatched_upload_is_refused_and_its_chunks_removed() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let store = sm.store();
    // Chunk 1 of 3 missing.
    let up = upload(1, 0);
    let entries = vec![
        chunk(1, 1, up, 0),
        chunk(1, 2, up, 2),
        commit(1, 3, up, "k", 3),
    ];
    let r = apply_entries(&store, entries).unwrap();
    assert!(
        matches!(&r[2], Response::Rejected(e) if e.contains("2 of its 3")),
        "{r:?}"
    );
    assert_eq!(sm.get(b"k").unwrap(), None);
    assert_eq!(staged_in(&store), 0);
    // Whole, but not the bytes the commit names (its crc is of another value).
    let up = upload(1, 1);
    let mut bad = commit(1, 6, up, "k", 2);
    if let openraft::EntryPayload::Normal(Request::Commit { crc, .. }) = &mut bad.payload {
        *crc ^= 1;
    }
    let r = apply_entries(&store, vec![chunk(1, 4, up, 0), chunk(1, 5, up, 1), bad]).unwrap();
    assert!(
        matches!(&r[2], Response::Rejected(e) if e.contains("crc32")),
        "{r:?}"
    );
    assert_eq!(sm.get(b"k").unwrap(), None);
    assert_eq!(staged_in(&store), 0);
    // A condition that fails writes nothing and removes the chunks too.
    let up = upload(1, 2);
    let entries = vec![
        chunk(1, 7, up, 0),
        commit_if(1, 8, up, "k", 1, Some(Expect::Present)),
    ];
    let r = apply_entries(&store, entries).unwrap();
    assert_eq!(r[1], Response::ConditionFailed { current: None });
    assert_eq!(sm.get(b"k").unwrap(), None);
    assert_eq!(staged_in(&store), 0);
}

#[test]
fn abandoned_uploads_are_dropped_by_an_abort_or_by_the_next_terms_blank_entry() {
    let dir = tempfile::tempdir().unwrap();
    let sm = open(dir.path());
    let store = sm.store();
    // An abort drops its own upload only.
    let (a, b) = (upload(1, 0), upload(1, 1));
    let entries = vec![
        chunk(1, 1, a, 0),
        chunk(1, 2, b, 0),
        chunk(1, 3, a, 1),
        Entry::new_normal(log_id(1, 4), Request::Abort { upload: a }),
    ];
    assert_eq!(
        apply_entries(&store, entries).unwrap(),
        vec![Response::Done; 4]
    );
    assert_eq!(staged_in(&store), 1);
    // Term 2's leader: its blank entry drops every upload of term 1 (b), not its own.
    let c = upload(2, 0);
    apply_entries(
        &store,
        vec![Entry::new_blank(log_id(2, 5)), chunk(2, 6, c, 0)],
    )
    .unwrap();
    assert_eq!(staged_in(&store), 1);
    // A chunk of b that comes late (in term 2's log) is refused, not staged; b's commit fails.
    let r = apply_entries(&store, vec![chunk(2, 7, b, 1), commit(2, 8, b, "b", 2)]).unwrap();
    assert!(
        matches!(&r[0], Response::Rejected(e) if e.contains("term")),
        "{r:?}"
    );
    assert!(matches!(&r[1], Response::Rejected(_)), "{r:?}");
    assert_eq!(sm.get(b"b").unwrap(), None);
    // c, of the current term, still commits.
    let r = apply_entries(&store, vec![commit(2, 9, c, "c", 1)]).unwrap();
    assert_eq!(r, vec![Response::Done]);
    assert_eq!(sm.get(b"c").unwrap(), Some(value(1)));
    assert_eq!(staged_in(&store), 0);
}

/// A crash after the commit's value was written but before the batch that records its applied
/// id (and removes its chunks): openraft applies the commit again; it finds its own value
/// (version = its index), takes its condition as held, and does not write it again. And chunks
/// applied again (the same bytes under the same key) change nothing.
#[test]
fn entries_applied_again_after_a_crash_come_to_the_same_state() {
    let dir = tempfile::tempdir().unwrap();
    {
        let sm = open(dir.path());
        let store = sm.store();
        let old = Entry::new_normal(
            log_id(1, 1),
            Request::Put {
                key: b"k".to_vec(),
                value: b"old".to_vec(),
            },
        );
        let up = upload(1, 0);
        let entries = vec![old, chunk(1, 2, up, 0), chunk(1, 3, up, 1)];
        apply_entries(&store, entries).unwrap();
        // The commit's writes, as `apply_entries` makes them, its batch then lost.
        let mut batch = Batch::new();
        let (mut overlay, mut remembered) = (Some(Default::default()), Default::default());
        let (mut key_buf, mut value_buf) = (Vec::new(), Vec::new());
        let mut w = Writes {
            store: &store,
            batch: &mut batch,
            overlay: &mut overlay,
            key_buf: &mut key_buf,
            value_buf: &mut value_buf,
            remembered: &mut remembered,
            version: 4,
            term: 1,
        };
        let v = value(2);
        let crc = crc32fast::hash(&v);
        let expect = Some(Expect::Version(1));
        let r = w.commit(up, b"k", 2, v.len() as u64, crc, expect).unwrap();
        assert_eq!(r, Response::Done);
        drop(batch);
        assert_eq!(sm.get(b"k").unwrap(), Some(value(2)));
        assert_eq!(sm.applied_index().unwrap(), Some(3));
        assert_eq!(staged_in(&store), 2);
    }
    // Restarted: the chunks and the commit applied again (under a request id, as a client's
    // retrying write would be).
    let sm = open(dir.path());
    let store = sm.store();
    let up = upload(1, 0);
    let once = |e: Entry| {
        let openraft::EntryPayload::Normal(request) = e.payload else {
            unreachable!()
        };
        Entry::new_normal(
            e.log_id,
            Request::Once {
                id: crate::RequestId { client: 7, seq: 1 },
                request: Box::new(request),
            },
        )
    };
    let again = vec![
        chunk(1, 2, up, 0),
        chunk(1, 3, up, 1),
        once(commit_if(1, 4, up, "k", 2, Some(Expect::Version(1)))),
    ];
    let r = apply_entries(&store, again).unwrap();
    assert_eq!(r, vec![Response::Done; 3]);
    assert_eq!(
        sm.get_versioned(b"k")
            .unwrap()
            .map(|(v, n)| (v.to_vec(), n)),
        Some((value(2), 4))
    );
    assert_eq!(staged_in(&store), 0);
    assert_eq!(sm.applied_index().unwrap(), Some(4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_carries_a_staged_upload_to_the_node_that_installs_it() {
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = open(leader_dir.path());
    let up = upload(1, 0);
    apply_entries(
        &leader.store(),
        vec![chunk(1, 1, up, 0), chunk(1, 2, up, 1)],
    )
    .unwrap();
    let snap = leader
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let mut follower = open(follower_dir.path());
    follower
        .install_snapshot(&snap.meta, snap.snapshot)
        .await
        .unwrap();
    let store = follower.store();
    assert_eq!(staged_in(&store), 2);
    // The rest of the upload, from the log after the snapshot.
    let r = apply_entries(&store, vec![chunk(1, 3, up, 2), commit(1, 4, up, "k", 3)]).unwrap();
    assert_eq!(r, vec![Response::Done; 2]);
    assert_eq!(follower.get(b"k").unwrap(), Some(value(3)));
    assert_eq!(staged_in(&store), 0);
}

/// A small deterministic generator (xorshift64*) for the entry sequences below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random run of entries over a few terms: puts, deletes and conditional puts of a few keys,
/// uploads (of this term or a stale one) chunked, committed (whole or not, with or without a
/// condition), aborted or left, a new leader's blank entry now and then, some writes under
/// request ids (some of them sent again).
fn random_entries(seed: u64, count: usize) -> Vec<Entry> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut term = 1u64;
    let mut entries = vec![Entry::new_blank(log_id(term, 1))];
    let mut uploads: Vec<(UploadId, u64)> = Vec::new();
    let mut nonce = 0;
    let mut seqs = [0u64; 2];
    let mut last_once: Option<Request> = None;
    let key = |rng: &mut Rng| format!("k{}", rng.below(3));
    while entries.len() < count {
        // The last index so far; the next entry's is one more.
        let index = entries.len() as u64;
        let request = match rng.below(11) {
            0 => {
                term += 1;
                entries.push(Entry::new_blank(log_id(term, index + 1)));
                continue;
            }
            1 | 2 => Request::Put {
                key: key(&mut rng).into_bytes(),
                value: format!("v{index}").into_bytes(),
            },
            3 => Request::Delete {
                key: key(&mut rng).into_bytes(),
            },
            4 => Request::PutIf {
                key: key(&mut rng).into_bytes(),
                value: format!("if{index}").into_bytes(),
                expect: match rng.below(3) {
                    0 => Expect::Absent,
                    1 => Expect::Present,
                    _ => Expect::Version(1 + rng.below(index + 1)),
                },
            },
            5 => {
                // Mostly this term's, sometimes one a deposed leader still streams.
                let t = if rng.below(4) == 0 && term > 1 {
                    term - 1
                } else {
                    term
                };
                uploads.push((upload(t, nonce), 0));
                nonce += 1;
                continue;
            }
            6..=8 if !uploads.is_empty() => {
                let u = rng.below(uploads.len() as u64) as usize;
                let (up, n) = &mut uploads[u];
                *n += 1;
                Request::Chunk {
                    upload: *up,
                    index: *n - 1,
                    bytes: piece(*n - 1),
                }
            }
            9 if !uploads.is_empty() => {
                let u = rng.below(uploads.len() as u64) as usize;
                let (up, n) = uploads.swap_remove(u);
                // Now and then a commit that counts one chunk too many.
                let chunks = n + u64::from(rng.below(5) == 0);
                let expect = match rng.below(4) {
                    0 => Some(Expect::Absent),
                    1 => Some(Expect::Version(1 + rng.below(index + 1))),
                    _ => None,
                };
                let openraft::EntryPayload::Normal(r) =
                    commit_if(term, 0, up, &key(&mut rng), chunks, expect).payload
                else {
                    unreachable!()
                };
                r
            }
            10 if !uploads.is_empty() => {
                let u = rng.below(uploads.len() as u64) as usize;
                Request::Abort {
                    upload: uploads.swap_remove(u).0,
                }
            }
            _ => continue,
        };
        // A third of the writes under a request id; now and then the last one sent again.
        let request = match rng.below(6) {
            0 | 1 => {
                let client = rng.below(2) as usize;
                seqs[client] += 1;
                let once = Request::Once {
                    id: crate::RequestId {
                        client: client as u64 + 1,
                        seq: seqs[client],
                    },
                    request: Box::new(request),
                };
                last_once = Some(once.clone());
                once
            }
            2 => last_once.clone().unwrap_or(request),
            _ => request,
        };
        entries.push(Entry::new_normal(log_id(term, index + 1), request));
    }
    entries
}

/// Every key of `sm`'s store with its stored bytes (staged chunks, request ids and metadata
/// included).
fn dump(sm: &StateMachine) -> Vec<(Vec<u8>, Vec<u8>)> {
    let store = sm.store();
    let keys: Vec<Vec<u8>> = store.range::<Vec<u8>>(..).map(|k| k.unwrap()).collect();
    keys.into_iter()
        .map(|k| {
            let v = store.get(&k).unwrap().unwrap();
            (k, v)
        })
        .collect()
}

/// A leader applies entries as they commit, often one at a time; a follower gets them in
/// batches: every split of one run of entries into applies must answer alike and leave the
/// same store (issue 40: the reads a commit, an abort or a blank entry makes of staged chunks,
/// and the overlay of the conditional writes, across the batch written before them).
#[test]
fn any_split_of_the_entries_into_applies_comes_to_the_same_state() {
    let mut seen = [0usize; 5];
    for seed in 0..40 {
        let entries = random_entries(seed, 120);
        let one_by_one_dir = tempfile::tempdir().unwrap();
        let one_by_one = open(one_by_one_dir.path());
        let mut answers = Vec::new();
        for e in entries.clone() {
            answers.extend(apply_entries(&one_by_one.store(), vec![e]).unwrap());
        }
        let batched_dir = tempfile::tempdir().unwrap();
        let batched = open(batched_dir.path());
        let mut rng = Rng(seed + 1000);
        let mut rest = entries.clone();
        let mut batched_answers = Vec::new();
        while !rest.is_empty() {
            let n = (1 + rng.below(30) as usize).min(rest.len());
            let now: Vec<Entry> = rest.drain(..n).collect();
            batched_answers.extend(apply_entries(&batched.store(), now).unwrap());
        }
        for (i, (a, b)) in answers.iter().zip(&batched_answers).enumerate() {
            assert_eq!(
                a,
                b,
                "seed {seed}: entry {} ({:?}) answered differently",
                i + 1,
                entries[i].payload
            );
        }
        assert_eq!(dump(&one_by_one), dump(&batched), "seed {seed}");
        for (e, r) in entries.iter().zip(&answers) {
            let openraft::EntryPayload::Normal(request) = &e.payload else {
                continue;
            };
            let request = match request {
                Request::Once { request, .. } => request,
                r => r,
            };
            let kind = match (request, r) {
                (Request::Commit { .. }, Response::Done) => 0,
                (Request::Commit { .. }, Response::Rejected(_)) => 1,
                (Request::Commit { .. }, Response::ConditionFailed { .. }) => 2,
                (Request::Chunk { .. }, Response::Rejected(_)) => 3,
                (_, Response::Replayed { .. }) => 4,
                _ => continue,
            };
            seen[kind] += 1;
        }
    }
    // Each case happened (the generator is not degenerate): commits published, refused and
    // failing their condition, chunks of a stale term refused, request ids replayed.
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}
