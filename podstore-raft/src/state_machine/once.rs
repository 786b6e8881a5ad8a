//! Writes applied at most once per request id ([`Request::Once`]).
//!
//! For each client the state machine keeps, in its own store (so snapshots carry it, and every
//! node holds the same), the highest sequence number it has applied (`r/m` + client) and a
//! record per request id in the window below it (`r/i` + client + seq: the log index of the
//! first request, a digest of the request, and what it answered). A request id is:
//!
//! - above the client's highest, or in the window without a record: applied, and recorded;
//!   records that fall out of the window as the highest moves up are deleted in the same batch,
//!   so a client never has more than [`REQUEST_ID_WINDOW`] of them;
//! - in the window with a record of the same request (same digest): answered with the record
//!   ([`Response::Replayed`]), nothing applied;
//! - in the window with a record of another request, or below the window: refused
//!   ([`Response::RequestIdRefused`]), nothing applied.
//!
//! Clients are bounded too ([`REQUEST_ID_CLIENTS`]): each client's latest applied log index
//! (`r/l` + client) and the same pairs ordered by index (`r/o` + index + client) say which
//! client's latest write is the oldest; `r/n` counts the clients. A write from a client not
//! yet counted, once there are `REQUEST_ID_CLIENTS`, first forgets that oldest client (its
//! highest, its records, its place in the order), in the same batch. (Clients recorded before
//! this order existed are counted when they next write.)
//!
//! Every decision reads only what the entries before it left (the chunk's own writes through
//! [`Remembered`], ahead of the store), so it does not depend on how a node's entries were cut
//! into chunks: every node decides alike.

use std::collections::HashMap;
use std::io;

#[cfg(test)]
use podstore::Store;

use super::Writes;
use crate::{
    Expect, Op, REQUEST_ID_CLIENTS, REQUEST_ID_WINDOW, Request, RequestId, Response, decode,
    encode, io_err,
};

/// The request-id records written by a chunk, ahead of the store (`None`: deleted).
pub(super) type Remembered = HashMap<Vec<u8>, Option<Vec<u8>>>;

fn highest_key(client: u64) -> Vec<u8> {
    let mut k = b"r/m".to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k
}

/// The log index of `client`'s latest applied write.
fn last_key(client: u64) -> Vec<u8> {
    let mut k = b"r/l".to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k
}

/// The clients in the order of their latest applied write: `r/o` + index + client.
const ORDER: &[u8] = b"r/o";
const ORDER_END: &[u8] = b"r/p";

fn order_key(index: u64, client: u64) -> Vec<u8> {
    let mut k = ORDER.to_vec();
    k.extend_from_slice(&index.to_be_bytes());
    k.extend_from_slice(&client.to_be_bytes());
    k
}

/// The number of clients in the order.
const CLIENTS_KEY: &[u8] = b"r/n";

fn record_key(client: u64, seq: u64) -> Vec<u8> {
    let mut k = b"r/i".to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k.extend_from_slice(&seq.to_be_bytes());
    k
}

/// A digest of `request`: crc32 of its fields with their lengths, and its total length. A
/// retry carries the same bytes; a different request under the same id is told apart unless
/// both its length and its crc32 collide. Computed over the fields, not an encoding of the
/// request (which would copy the value).
pub(super) fn digest(request: &Request) -> u64 {
    let mut h = crc32fast::Hasher::new();
    let mut len = 0u64;
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
        len += bytes.len() as u64 + 8;
    };
    match request {
        Request::Put { key, value } => {
            field(b"put");
            field(key);
            field(value);
        }
        Request::Delete { key } => {
            field(b"delete");
            field(key);
        }
        Request::PutIfAbsent { key, value } => {
            field(b"put_if_absent");
            field(key);
            field(value);
        }
        Request::PutIf { key, value, expect } => {
            field(b"put_if");
            field(key);
            field(value);
            match expect {
                Expect::Absent => field(b"absent"),
                Expect::Present => field(b"present"),
                Expect::Version(v) => field(&v.to_le_bytes()),
            }
        }
        Request::DeleteIf { key, version } => {
            field(b"delete_if");
            field(key);
            field(&version.to_le_bytes());
        }
        Request::Batch(ops) => {
            field(b"batch");
            for op in ops {
                match op {
                    Op::Put { key, value } => {
                        field(b"put");
                        field(key);
                        field(value);
                    }
                    Op::Delete { key } => {
                        field(b"delete");
                        field(key);
                    }
                }
            }
        }
        // Of the upload's value, not of its id: a retry streams the value again, as another
        // upload.
        Request::Commit {
            key,
            chunks,
            len,
            crc,
            expect,
            ..
        } => {
            field(b"commit");
            field(key);
            field(&chunks.to_le_bytes());
            field(&len.to_le_bytes());
            field(&crc.to_le_bytes());
            match expect {
                None => field(b"always"),
                Some(Expect::Absent) => field(b"absent"),
                Some(Expect::Present) => field(b"present"),
                Some(Expect::Version(v)) => field(&v.to_le_bytes()),
            }
        }
        Request::Chunk {
            upload,
            index,
            bytes,
        } => {
            field(b"chunk");
            field(&upload.term.to_le_bytes());
            field(&upload.nonce.to_le_bytes());
            field(&index.to_le_bytes());
            field(bytes);
        }
        Request::Abort { upload } => {
            field(b"abort");
            field(&upload.term.to_le_bytes());
            field(&upload.nonce.to_le_bytes());
        }
        // Refused before a digest is taken.
        Request::Once { .. } => field(b"once"),
    }
    (u64::from(h.finalize()) << 32) ^ len
}

impl Writes<'_> {
    /// A record of the chunk or the store.
    fn remembered(&self, key: &[u8]) -> io::Result<Option<Vec<u8>>> {
        match self.remembered.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.store.get(key).map_err(io_err),
        }
    }

    fn remember(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) {
        match &value {
            Some(v) => self.batch.put(&key, v),
            None => self.batch.delete(&key),
        };
        self.remembered.insert(key, value);
    }

    /// Applies `request` under request id `id` (see the module docs).
    pub(super) fn apply_once(&mut self, id: RequestId, request: Request) -> io::Result<Response> {
        if matches!(request, Request::Once { .. }) {
            return Ok(Response::Rejected("a request id on a request id".into()));
        }
        let digest = digest(&request);
        let highest = self
            .remembered(&highest_key(id.client))?
            .map(|b| decode::<u64>(&b))
            .transpose()?;
        if let Some(h) = highest {
            if id.seq.saturating_add(REQUEST_ID_WINDOW) <= h {
                return Ok(Response::RequestIdRefused(format!(
                    "request {}:{} is older than the {REQUEST_ID_WINDOW} ids remembered for its \
                     client (the newest is {h}): whether it was applied is not known",
                    id.client, id.seq
                )));
            }
            if id.seq <= h
                && let Some(record) = self.remembered(&record_key(id.client, id.seq))?
            {
                let (index, first, response): (u64, u64, Response) = decode(&record)?;
                return Ok(if first == digest {
                    Response::Replayed {
                        index,
                        response: Box::new(response),
                    }
                } else {
                    Response::RequestIdRefused(format!(
                        "request {}:{} was used for another request (at index {index})",
                        id.client, id.seq
                    ))
                });
            }
        }
        self.seen(id.client)?;
        let response = self.apply(request)?;
        let record = encode(&(self.version, digest, &response))?;
        self.remember(record_key(id.client, id.seq), Some(record));
        if highest.is_none_or(|h| id.seq > h) {
            self.remember(highest_key(id.client), Some(encode(&id.seq)?));
            // The records that leave the window: those of seqs up to `id.seq - WINDOW`, of
            // which only those above the old window can exist.
            if let Some(h) = highest {
                let first = (h + 1).saturating_sub(REQUEST_ID_WINDOW).max(1);
                let last = id.seq.saturating_sub(REQUEST_ID_WINDOW).min(h);
                for seq in first..=last {
                    let key = record_key(id.client, seq);
                    if self.remembered(&key)?.is_some() {
                        self.remember(key, None);
                    }
                }
            }
        }
        Ok(response)
    }

    /// Puts `client` last in the order of clients (its write is applied at this entry's
    /// index), first forgetting the client whose latest write is the oldest if `client` is one
    /// more than [`REQUEST_ID_CLIENTS`].
    fn seen(&mut self, client: u64) -> io::Result<()> {
        let last = last_key(client);
        match self.remembered(&last)? {
            Some(b) => {
                let index: u64 = decode(&b)?;
                self.remember(order_key(index, client), None);
            }
            None => {
                let count = self
                    .remembered(CLIENTS_KEY)?
                    .map(|b| decode::<u64>(&b))
                    .transpose()?
                    .unwrap_or(0);
                if count >= REQUEST_ID_CLIENTS {
                    self.forget_oldest_client()?;
                } else {
                    self.remember(CLIENTS_KEY.to_vec(), Some(encode(&(count + 1))?));
                }
            }
        }
        self.remember(last, Some(encode(&self.version)?));
        self.remember(
            order_key(self.version, client),
            Some(client.to_be_bytes().to_vec()),
        );
        Ok(())
    }

    /// Forgets the client first in the order: its place, its highest id and its records.
    fn forget_oldest_client(&mut self) -> io::Result<()> {
        // The smallest order key as this chunk left it: the chunk's own (not yet in the store),
        // or the store's first that the chunk has not deleted.
        let mut oldest = self
            .remembered
            .iter()
            .filter(|(k, v)| k.starts_with(ORDER) && v.is_some())
            .map(|(k, _)| k.clone())
            .min();
        for key in self.store.range(ORDER..ORDER_END) {
            let key = key.map_err(io_err)?;
            if oldest.as_ref().is_some_and(|o| key >= *o) {
                break;
            }
            if matches!(self.remembered.get(&key), Some(None)) {
                continue;
            }
            oldest = Some(key);
            break;
        }
        let Some(key) = oldest else {
            return Ok(());
        };
        let client = u64::from_be_bytes(key[key.len() - 8..].try_into().expect("8 bytes"));
        self.remember(key, None);
        self.remember(last_key(client), None);
        let highest = highest_key(client);
        if let Some(b) = self.remembered(&highest)? {
            let h: u64 = decode(&b)?;
            for seq in (h + 1).saturating_sub(REQUEST_ID_WINDOW).max(1)..=h {
                let key = record_key(client, seq);
                if self.remembered(&key)?.is_some() {
                    self.remember(key, None);
                }
            }
            self.remember(highest, None);
        }
        Ok(())
    }
}

/// The number of request-id records (all clients) in `store`: for tests.
#[cfg(test)]
pub(super) fn records_in(store: &Store) -> usize {
    store
        .range::<Vec<u8>>(b"r/i".to_vec()..b"r/j".to_vec())
        .entries()
        .count()
}

/// The clients with request ids remembered in `store`: for tests.
#[cfg(test)]
pub(super) fn clients_in(store: &Store) -> Vec<u64> {
    store
        .range::<Vec<u8>>(b"r/m".to_vec()..b"r/n".to_vec())
        .map(|k| u64::from_be_bytes(k.unwrap()[3..].try_into().unwrap()))
        .collect()
}

#[cfg(test)]
mod tests {
    use openraft::RaftTypeConfig;
    use openraft::alias::{EntryOf, LogIdOf};
    use openraft::entry::RaftEntry;
    use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
    use openraft::vote::RaftLeaderIdExt;

    use super::*;
    use crate::TypeConfig;
    use crate::state_machine::{StateMachine, apply_entries};

    fn entry(index: u64, client: u64, seq: u64, request: Request) -> EntryOf<TypeConfig> {
        let log_id = LogIdOf::<TypeConfig>::new(
            <TypeConfig as RaftTypeConfig>::LeaderId::new_committed(1, 1),
            index,
        );
        let id = RequestId { client, seq };
        let request = Box::new(request);
        EntryOf::<TypeConfig>::new_normal(log_id, Request::Once { id, request })
    }

    fn put(key: &str, value: &str) -> Request {
        Request::Put {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
        }
    }

    fn open(dir: &std::path::Path) -> StateMachine {
        StateMachine::open(dir.join("sm"), dir.join("snapshots")).unwrap()
    }

    /// Every key and value of the store but the applied id (the same entries applied in other
    /// chunks leave the same store).
    fn contents(store: &Store) -> Vec<(Vec<u8>, Vec<u8>)> {
        store
            .range::<Vec<u8>>(..)
            .entries()
            .map(|e| {
                let e = e.unwrap();
                let value = store.get(e.key()).unwrap().unwrap();
                (e.into_key(), value)
            })
            .filter(|(k, _)| k.as_slice() != b"m/applied")
            .collect()
    }

    /// A retry under the same id answers the first outcome (its index too) and applies nothing;
    /// another request under it is refused; the answers and the store are the same whether the
    /// entries are applied in one chunk, one by one, or cut anywhere.
    #[test]
    fn a_request_id_is_applied_once_whatever_the_chunking() {
        let absent = |k: &str| Request::PutIf {
            key: k.as_bytes().to_vec(),
            value: b"x".to_vec(),
            expect: Expect::Absent,
        };
        let delete = |k: &str| Request::Delete {
            key: k.as_bytes().to_vec(),
        };
        let entries = vec![
            entry(1, 7, 1, put("a", "first")),
            entry(2, 7, 1, put("a", "first")),
            entry(3, 7, 1, put("a", "another")),
            entry(4, 7, 2, absent("x")),
            entry(5, 7, 2, absent("x")),
            entry(6, 8, 1, absent("x")),
            entry(7, 7, 3, delete("a")),
            entry(8, 7, 3, delete("a")),
            entry(9, 8, 2, delete("a")),
        ];
        let replayed = |index, response| Response::Replayed {
            index,
            response: Box::new(response),
        };
        let want = vec![
            Response::Done,
            replayed(1, Response::Done),
            Response::RequestIdRefused(String::new()),
            Response::Done,
            replayed(4, Response::Done),
            Response::ConditionFailed { current: Some(4) },
            Response::Existed(true),
            replayed(7, Response::Existed(true)),
            Response::Existed(false),
        ];
        let mut stores = Vec::new();
        for cut in [vec![], vec![1, 2, 3, 4, 5, 6, 7, 8], vec![2], vec![5, 7]] {
            let dir = tempfile::tempdir().unwrap();
            let sm = open(dir.path());
            let store = sm.store();
            let mut got = Vec::new();
            let mut from = 0;
            for end in cut.iter().copied().chain([entries.len()]) {
                got.extend(apply_entries(&store, entries[from..end].to_vec()).unwrap());
                from = end;
            }
            for (g, w) in got.iter().zip(&want) {
                match (g, w) {
                    (Response::RequestIdRefused(_), Response::RequestIdRefused(_)) => {}
                    _ => assert_eq!(g, w, "cut at {cut:?}"),
                }
            }
            assert_eq!(got.len(), want.len());
            assert_eq!(sm.get(b"a").unwrap(), None);
            assert_eq!(sm.get_versioned(b"x").unwrap().unwrap().1, 4);
            stores.push(contents(&store));
            drop(dir);
        }
        assert!(stores.windows(2).all(|w| w[0] == w[1]));
    }

    /// A client's records stay within the window as its sequence numbers move up (one by one,
    /// or by a jump); an id below the window is refused, one within it still replayed; and the
    /// records are in snapshots: a node that installed one answers a retry as the first did.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_window_is_bounded_and_survives_a_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let mut sm = open(dir.path());
        let store = sm.store();
        let n = REQUEST_ID_WINDOW + 10;
        let entries: Vec<_> = (1..=n).map(|s| entry(s, 3, s, put("k", "v"))).collect();
        for e in entries {
            apply_entries(&store, vec![e]).unwrap();
        }
        assert_eq!(records_in(&store), REQUEST_ID_WINDOW as usize);
        let late = apply_entries(&store, vec![entry(n + 1, 3, 5, put("k", "v"))]).unwrap();
        assert!(
            matches!(&late[0], Response::RequestIdRefused(_)),
            "{late:?}"
        );
        let retry = apply_entries(&store, vec![entry(n + 2, 3, n, put("k", "v"))]).unwrap();
        assert_eq!(
            retry[0],
            Response::Replayed {
                index: n,
                response: Box::new(Response::Done)
            }
        );
        // A jump far ahead: the whole old window leaves.
        let jump = 10 * REQUEST_ID_WINDOW;
        apply_entries(&store, vec![entry(n + 3, 3, jump, put("k", "w"))]).unwrap();
        assert_eq!(records_in(&store), 1);
        // Another client's ids are its own.
        apply_entries(&store, vec![entry(n + 4, 4, 1, put("j", "v"))]).unwrap();
        assert_eq!(records_in(&store), 2);

        let snap = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        let other_dir = tempfile::tempdir().unwrap();
        let mut other = open(other_dir.path());
        other
            .install_snapshot(&snap.meta, snap.snapshot)
            .await
            .unwrap();
        let retry = apply_entries(&other.store(), vec![entry(n + 5, 4, 1, put("j", "v"))]).unwrap();
        assert_eq!(
            retry[0],
            Response::Replayed {
                index: n + 4,
                response: Box::new(Response::Done)
            }
        );
    }

    /// Clients are bounded: one more than [`REQUEST_ID_CLIENTS`] makes the state machine forget
    /// the client whose latest write is the oldest (a retry from it is then applied again); a
    /// client that keeps writing is never forgotten, and a retry within its window still
    /// answers the first outcome. The same whether the entries are applied in one chunk, one by
    /// one, or cut elsewhere: every node forgets the same clients.
    #[test]
    fn clients_are_bounded_by_forgetting_the_least_recent_alike_on_every_node() {
        let n = REQUEST_ID_CLIENTS + 6;
        // Client 0 writes (seq 1, 2, ...) before every tenth new client; clients 1..=n once.
        let mut entries = Vec::new();
        let (mut steady, mut steady_index) = (0, 0);
        for c in 1..=n {
            if c % 10 == 1 {
                steady += 1;
                let index = entries.len() as u64 + 1;
                steady_index = index;
                entries.push(entry(index, 0, steady, put("steady", &steady.to_string())));
            }
            let index = entries.len() as u64 + 1;
            entries.push(entry(index, c, 1, put(&format!("k{c}"), "v")));
        }
        let last = entries.len() as u64;
        // Retries: client 1's first write (forgotten: applied again), the newest client's and
        // client 0's latest (remembered: replayed).
        let retries = vec![
            entry(last + 1, n, 1, put(&format!("k{n}"), "v")),
            entry(last + 2, 0, steady, put("steady", &steady.to_string())),
            entry(last + 3, 1, 1, put("k1", "v")),
        ];
        let mut stores = Vec::new();
        let one_by_one: Vec<usize> = (1..entries.len()).collect();
        for cut in [vec![], vec![700], vec![1, 2, 1030], one_by_one] {
            let dir = tempfile::tempdir().unwrap();
            let sm = open(dir.path());
            let store = sm.store();
            let mut from = 0;
            for end in cut.iter().copied().chain([entries.len()]) {
                apply_entries(&store, entries[from..end].to_vec()).unwrap();
                from = end;
            }
            let clients = clients_in(&store);
            assert_eq!(
                clients.len() as u64,
                REQUEST_ID_CLIENTS,
                "cut at {:?}",
                cut.first()
            );
            // The oldest new clients went: one per client past the bound (client 0 stayed).
            let forgotten: Vec<u64> = (1..=n).filter(|c| !clients.contains(c)).collect();
            assert_eq!(forgotten, (1..=7).collect::<Vec<_>>());
            assert!(clients.contains(&0));
            // No records of a forgotten client are left.
            assert_eq!(
                records_in(&store) as u64,
                REQUEST_ID_CLIENTS - 1 + steady.min(REQUEST_ID_WINDOW)
            );
            let got = apply_entries(&store, retries.clone()).unwrap();
            let replayed = |index| Response::Replayed {
                index,
                response: Box::new(Response::Done),
            };
            assert_eq!(got[0], replayed(last));
            assert_eq!(got[1], replayed(steady_index));
            assert_eq!(
                got[2],
                Response::Done,
                "a forgotten client's retry is applied anew"
            );
            stores.push(contents(&store));
        }
        assert!(stores.windows(2).all(|w| w[0] == w[1]));
    }
}
