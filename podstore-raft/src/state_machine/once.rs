//! Writes applied at most once per request id ([`Request::Once`]).
//!
//! For each client the state machine keeps, in its own store (so snapshots carry it, and every
//! node holds the same), a head (`r/h` + client: the highest sequence number it has applied
//! and the log index of its latest applied write) and a ring of [`REQUEST_ID_WINDOW`] slots
//! (`r/s` + client + seq mod the window): the record of a request id in the window below the
//! highest (its seq, the log index of the first request, a digest of the request, and what it
//! answered) is in its slot. A request id is:
//!
//! - above the client's highest, or in the window without a record: applied, and recorded in
//!   its slot, over the record of the id `REQUEST_ID_WINDOW` below it (which leaves the window
//!   as the highest moves up, or has left it): no delete, no look-up of the old record. When
//!   the highest jumps by more than one, the slots of the ids jumped over hold records that
//!   left the window: those are deleted in the same batch, so a client never has more than
//!   [`REQUEST_ID_WINDOW`] records, all within its window;
//! - in the window with a record of the same request (same digest): answered with the record
//!   ([`Response::Replayed`]), nothing applied;
//! - in the window with a record of another request, or below the window: refused
//!   ([`Response::RequestIdRefused`]), nothing applied.
//!
//! Clients are bounded too ([`REQUEST_ID_CLIENTS`]): `r/n` counts the clients, and each has one
//! order key, `r/o` + index + client, for finding the client whose latest write is the oldest.
//! The order key is written when a client is first counted and moved only when it is found
//! out of date: a write changes only the client's head. A write from a client not yet counted,
//! once there are `REQUEST_ID_CLIENTS`, first forgets the oldest client: it takes the smallest
//! order key; if that key's index is not its client's latest (the client wrote since), the
//! key moves to the latest and the search goes on, else that client is forgotten (its order
//! key, its head, its records), in the same batch. So the client forgotten is exactly the one
//! whose latest write is the oldest, as if the order were updated at every write. (Clients
//! recorded before the order existed are counted when they next write.)
//!
//! A request id may cover a [`Request::Many`] (the writes of a client's coalesced request,
//! `POST /writes` with a request id): the `Many` is applied at most once as a whole, and its
//! record holds every write's answer ([`Response::Many`]). One record for the request where
//! each write under its own id wrote one: a put then costs one record in the store, not two.
//! Its writes may carry request ids of their own (the client's `Client::put_with`),
//! each recorded as any other when the `Many` is applied.
//!
//! Every decision reads only what the entries before it left (the chunk's own writes through
//! [`Remembered`], ahead of the store), so it does not depend on how a node's entries were cut
//! into chunks: every node decides alike.
//!
//! A store written by an earlier build holds the previous layout (`r/m` + client: the highest;
//! `r/l` + client: the latest index; `r/i` + client + seq: a record): [`upgrade`] rewrites it
//! into this one when the state machine opens it or installs a snapshot holding it.

use std::collections::HashMap;
use std::io;

#[cfg(test)]
use podstore::Store;

use super::Writes;
use crate::{
    Expect, Op, REQUEST_ID_CLIENTS, REQUEST_ID_WINDOW, Request, RequestId, Response, decode,
    encode, io_err,
};

mod upgrade;

pub(super) use upgrade::upgrade;

/// The request-id records written by a chunk, ahead of the store (`None`: deleted).
///
/// A client's head is rewritten by each of its writes; in the chunk's batch it is put once,
/// at the end ([`Remembered::put_heads`]): a chunk of 50 writes from one client (a coalesced
/// request, [`Request::Many`]) overwrites its head once, not 50 times. Each overwrite costs
/// podstore a look at the record it replaces (a read, unless cached); the batch is written
/// whole or not at all, so what it leaves is the same.
///
/// Heads are kept decoded, by client: a write under a request id reads its client's head and
/// writes it back, and the keys and encodings were four allocations a write.
#[derive(Default)]
pub(super) struct Remembered {
    records: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// The heads the chunk wrote, by client (`None`: deleted), each with whether it is yet to
    /// be put in the chunk's batch.
    heads: HashMap<u64, (Option<Head>, bool)>,
}

impl Remembered {
    pub(super) fn new() -> Remembered {
        Remembered::default()
    }

    fn get(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.records.get(key)
    }

    /// Puts the heads written since the last call in `batch`, as they are now: before the
    /// batch is written.
    pub(super) fn put_heads(&mut self, batch: &mut podstore::Batch) -> io::Result<()> {
        for (client, (head, unput)) in &mut self.heads {
            if std::mem::take(unput) {
                match head {
                    Some(h) => batch.put(head_key(*client), h.encode()?),
                    None => batch.delete(head_key(*client)),
                };
            }
        }
        Ok(())
    }
}

/// A client's head: `r/h` + client.
const HEAD: &[u8] = b"r/h";
/// A client's slots: `r/s` + client + slot.
const SLOT: &[u8] = b"r/s";

fn head_key(client: u64) -> Vec<u8> {
    let mut k = HEAD.to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k
}

/// The slot of `seq` among `client`'s: `r/s` + client + (seq mod the window) (u16 BE).
fn slot_key(client: u64, seq: u64) -> Vec<u8> {
    const _: () = assert!(REQUEST_ID_WINDOW <= 1 << 16);
    let mut k = SLOT.to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k.extend_from_slice(&((seq % REQUEST_ID_WINDOW) as u16).to_be_bytes());
    k
}

/// A client's head: its highest applied sequence number, and the log index of its latest
/// applied write (`None` for a client recorded before the order of clients existed: not
/// counted yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Head {
    highest: u64,
    latest: Option<u64>,
}

impl Head {
    fn encode(&self) -> io::Result<Vec<u8>> {
        encode(&(self.highest, self.latest))
    }

    fn decode(bytes: &[u8]) -> io::Result<Head> {
        let (highest, latest) = decode(bytes)?;
        Ok(Head { highest, latest })
    }
}

/// A slot's record: the request id's seq, the log index of its first request, the request's
/// digest, and what it answered.
type Record = (u64, u64, u64, Response);

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

/// A digest of `request`: crc32 of its fields with their lengths, and its total length. A
/// retry carries the same bytes; a different request under the same id is told apart unless
/// both its length and its crc32 collide. Computed over the fields, not an encoding of the
/// request (which would copy the value).
pub(super) fn digest(request: &Request) -> u64 {
    let mut d = Digest {
        h: crc32fast::Hasher::new(),
        len: 0,
    };
    d.request(request);
    (u64::from(d.h.finalize()) << 32) ^ d.len
}

/// The state of a [`digest`]: the crc32 so far and the bytes fed.
struct Digest {
    h: crc32fast::Hasher,
    len: u64,
}

impl Digest {
    fn field(&mut self, bytes: &[u8]) {
        self.h.update(&(bytes.len() as u64).to_le_bytes());
        self.h.update(bytes);
        self.len += bytes.len() as u64 + 8;
    }

    fn request(&mut self, request: &Request) {
        match request {
            Request::Put { key, value } => {
                self.field(b"put");
                self.field(key);
                self.field(value);
            }
            Request::Delete { key } => {
                self.field(b"delete");
                self.field(key);
            }
            Request::PutIfAbsent { key, value } => {
                self.field(b"put_if_absent");
                self.field(key);
                self.field(value);
            }
            Request::PutIf { key, value, expect } => {
                self.field(b"put_if");
                self.field(key);
                self.field(value);
                match expect {
                    Expect::Absent => self.field(b"absent"),
                    Expect::Present => self.field(b"present"),
                    Expect::Version(v) => self.field(&v.to_le_bytes()),
                }
            }
            Request::DeleteIf { key, version } => {
                self.field(b"delete_if");
                self.field(key);
                self.field(&version.to_le_bytes());
            }
            Request::Batch(ops) => {
                self.field(b"batch");
                for op in ops {
                    match op {
                        Op::Put { key, value } => {
                            self.field(b"put");
                            self.field(key);
                            self.field(value);
                        }
                        Op::Delete { key } => {
                            self.field(b"delete");
                            self.field(key);
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
                self.field(b"commit");
                self.field(key);
                self.field(&chunks.to_le_bytes());
                self.field(&len.to_le_bytes());
                self.field(&crc.to_le_bytes());
                match expect {
                    None => self.field(b"always"),
                    Some(Expect::Absent) => self.field(b"absent"),
                    Some(Expect::Present) => self.field(b"present"),
                    Some(Expect::Version(v)) => self.field(&v.to_le_bytes()),
                }
            }
            Request::Chunk {
                upload,
                index,
                bytes,
            } => {
                self.field(b"chunk");
                self.field(&upload.term.to_le_bytes());
                self.field(&upload.nonce.to_le_bytes());
                self.field(&index.to_le_bytes());
                self.field(bytes);
            }
            Request::Abort { upload } => {
                self.field(b"abort");
                self.field(&upload.term.to_le_bytes());
                self.field(&upload.nonce.to_le_bytes());
            }
            // In a `Many` (a `Once` directly on a `Once` is refused before a digest is taken).
            Request::Once { id, request } => {
                self.field(b"once");
                self.field(&id.client.to_le_bytes());
                self.field(&id.seq.to_le_bytes());
                self.request(request);
            }
            // Under a request id, the writes of a coalesced request (each with its own fields:
            // its lengths are in the digest, so no two lists of writes feed it the same bytes).
            Request::Many(writes) => {
                self.field(b"many");
                self.field(&(writes.len() as u64).to_le_bytes());
                for write in writes.iter() {
                    self.request(write);
                }
            }
        }
    }
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
        self.remembered.records.insert(key, value);
    }

    /// A client's head, put in the batch once, when it is written ([`Remembered`]).
    fn remember_head(&mut self, client: u64, head: Option<Head>) {
        self.remembered.heads.insert(client, (head, true));
    }

    fn head(&self, client: u64) -> io::Result<Option<Head>> {
        if let Some((head, _)) = self.remembered.heads.get(&client) {
            return Ok(*head);
        }
        self.store
            .get(head_key(client))
            .map_err(io_err)?
            .map(|b| Head::decode(&b))
            .transpose()
    }

    /// Applies `request` under request id `id` (see the module docs).
    pub(super) fn apply_once(&mut self, id: RequestId, request: &Request) -> io::Result<Response> {
        if matches!(request, Request::Once { .. }) {
            return Ok(Response::Rejected("a request id on a request id".into()));
        }
        let digest = digest(request);
        let head = self.head(id.client)?;
        if let Some(Head { highest: h, .. }) = head {
            if id.seq.saturating_add(REQUEST_ID_WINDOW) <= h {
                return Ok(Response::RequestIdRefused(format!(
                    "request {}:{} is older than the {REQUEST_ID_WINDOW} ids remembered for its \
                     client (the newest is {h}): whether it was applied is not known",
                    id.client, id.seq
                )));
            }
            if id.seq <= h
                && let Some(record) = self.remembered(&slot_key(id.client, id.seq))?
            {
                let (seq, index, first, response): Record = decode(&record)?;
                // The slot may hold an id that left the window (seq - k × window): not this one.
                if seq == id.seq {
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
        }
        let response = self.apply(request)?;
        // The writes of a `Many` under ids of their own, of this client's, have moved its head
        // (and counted it, if new): what follows starts from where they left it, else their
        // records would be taken for ids jumped over, and the client counted twice.
        let head = match request {
            Request::Many(_) => self.head(id.client)?,
            _ => head,
        };
        if head.is_none_or(|h| h.latest.is_none()) {
            self.count_new_client_order(id.client)?;
        }
        let record = encode(&(id.seq, self.version, digest, &response))?;
        self.remember(slot_key(id.client, id.seq), Some(record));
        let highest = match head {
            Some(Head { highest: h, .. }) if id.seq <= h => h,
            Some(Head { highest: h, .. }) => {
                // Jumped over ids h+1..seq-1: their slots hold ids that left the window (at
                // most one per slot: the first `REQUEST_ID_WINDOW` of them cover every slot).
                let jumped = (h + 1..id.seq).take(REQUEST_ID_WINDOW as usize);
                for seq in jumped.filter(|s| s % REQUEST_ID_WINDOW != id.seq % REQUEST_ID_WINDOW) {
                    let key = slot_key(id.client, seq);
                    if self.remembered(&key)?.is_some() {
                        self.remember(key, None);
                    }
                }
                id.seq
            }
            None => id.seq,
        };
        let head = Head {
            highest,
            latest: Some(self.version),
        };
        self.remember_head(id.client, Some(head));
        Ok(response)
    }

    /// Counts a client not counted yet, whose write is applied at this entry's index: its
    /// order key, and one more client, or first the client whose latest write is the oldest
    /// forgotten if there are [`REQUEST_ID_CLIENTS`] already.
    fn count_new_client_order(&mut self, client: u64) -> io::Result<()> {
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
        self.remember(
            order_key(self.version, client),
            Some(client.to_be_bytes().to_vec()),
        );
        Ok(())
    }

    /// The smallest order key as this chunk left it, above `after` if given (every order key
    /// up to `after` is deleted): the chunk's own (not yet in the store), or the store's first
    /// that the chunk has not deleted.
    fn oldest_order_key(&self, after: Option<&[u8]>) -> io::Result<Option<Vec<u8>>> {
        let mut oldest = self
            .remembered
            .records
            .iter()
            .filter(|(k, v)| k.starts_with(ORDER) && v.is_some())
            .map(|(k, _)| k)
            .min()
            .cloned();
        let start = match after {
            Some(a) => std::ops::Bound::Excluded(a),
            None => std::ops::Bound::Included(ORDER),
        };
        let range = (start, std::ops::Bound::Excluded(ORDER_END));
        for key in self.store.range::<[u8]>(range) {
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
        Ok(oldest)
    }

    /// Forgets the client whose latest write is the oldest: its order key, its head and its
    /// records. Order keys found out of date on the way (their client wrote since) move to
    /// their client's latest write.
    fn forget_oldest_client(&mut self) -> io::Result<()> {
        let mut after: Option<Vec<u8>> = None;
        loop {
            let Some(key) = self.oldest_order_key(after.as_deref())? else {
                return Ok(());
            };
            let index = u64::from_be_bytes(
                key[ORDER.len()..ORDER.len() + 8]
                    .try_into()
                    .expect("8 bytes"),
            );
            let client = u64::from_be_bytes(key[key.len() - 8..].try_into().expect("8 bytes"));
            self.remember(key.clone(), None);
            after = Some(key);
            let head = self.head(client)?;
            match head {
                Some(Head {
                    latest: Some(latest),
                    ..
                }) if latest > index => {
                    // Out of date: the client wrote since. In its place, and on.
                    self.remember(
                        order_key(latest, client),
                        Some(client.to_be_bytes().to_vec()),
                    );
                }
                Some(Head { highest, .. }) => {
                    self.remember_head(client, None);
                    for seq in (highest + 1).saturating_sub(REQUEST_ID_WINDOW).max(1)..=highest {
                        let key = slot_key(client, seq);
                        if self.remembered(&key)?.is_some() {
                            self.remember(key, None);
                        }
                    }
                    return Ok(());
                }
                // An order key without a client (not written by this crate): dropped.
                None => {}
            }
        }
    }
}

/// The number of request-id records (all clients) in `store`: for tests.
#[cfg(test)]
pub(super) fn records_in(store: &Store) -> usize {
    store
        .range::<Vec<u8>>(SLOT.to_vec()..b"r/t".to_vec())
        .entries()
        .count()
}

/// The clients with request ids remembered in `store`: for tests.
#[cfg(test)]
pub(super) fn clients_in(store: &Store) -> Vec<u64> {
    store
        .range::<Vec<u8>>(HEAD.to_vec()..b"r/i".to_vec())
        .map(|k| u64::from_be_bytes(k.unwrap()[3..].try_into().unwrap()))
        .collect()
}

#[cfg(test)]
mod tests;
