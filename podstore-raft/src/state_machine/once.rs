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
mod tests;
