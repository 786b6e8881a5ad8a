//! The request-id table of an earlier build, rewritten into this one's layout.
//!
//! Before the ring of slots, a client's records were `r/m` + client (its highest seq),
//! `r/l` + client (the log index of its latest write; absent for a client recorded before the
//! order of clients existed) and `r/i` + client + seq (u64 BE each) holding (log index of the
//! first request, digest, answer); records leaving the window were deleted as the highest
//! moved up. The order keys (`r/o`) and the count (`r/n`) are the same in both layouts.
//!
//! [`upgrade`] rewrites each client in one batch (its head and slots put, its old keys
//! deleted): a crash part-way leaves some clients in the new layout and the others whole in
//! the old one, and the next open goes on with those. Every node rewrites the same state into
//! the same records, so nodes upgraded at different times still hold the same table.

use std::io;

use podstore::{Batch, Store};

use super::{Head, Record, head_key, slot_key};
use crate::{Response, decode, encode, io_err};

/// The previous layout's prefixes: the highest seq, the latest index, the records.
const OLD_HIGHEST: &[u8] = b"r/m";
const OLD_LATEST: &[u8] = b"r/l";
const OLD_RECORD: &[u8] = b"r/i";

fn old_key(prefix: &[u8], client: u64) -> Vec<u8> {
    let mut k = prefix.to_vec();
    k.extend_from_slice(&client.to_be_bytes());
    k
}

/// Rewrites the request-id records `store` holds in the previous layout, if any, into this
/// one; returns how many clients it rewrote. Call before anything is applied to `store`.
pub(in crate::state_machine) fn upgrade(store: &Store) -> io::Result<usize> {
    let clients: Vec<Vec<u8>> = store
        .prefix(OLD_HIGHEST)
        .collect::<podstore::Result<_>>()
        .map_err(io_err)?;
    for key in &clients {
        let client = match key.get(OLD_HIGHEST.len()..) {
            Some(c) if c.len() == 8 => u64::from_be_bytes(c.try_into().expect("8 bytes")),
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("request-id key {key:?} is not r/m + a client"),
                ));
            }
        };
        let mut batch = Batch::new();
        let get = |k: &[u8]| store.get(k).map_err(io_err);
        let highest: u64 = match get(key)? {
            Some(b) => decode(&b)?,
            None => continue,
        };
        let latest_key = old_key(OLD_LATEST, client);
        let latest: Option<u64> = get(&latest_key)?.map(|b| decode(&b)).transpose()?;
        let head = Head { highest, latest };
        batch.put(head_key(client), head.encode()?);
        batch.delete(key);
        if latest.is_some() {
            batch.delete(&latest_key);
        }
        for record in store.prefix(old_key(OLD_RECORD, client)).entries() {
            let record = record.map_err(io_err)?;
            let seq_bytes = &record.key()[OLD_RECORD.len() + 8..];
            let seq = u64::from_be_bytes(seq_bytes.try_into().map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidData, "request-id record key")
            })?);
            let (index, digest, response): (u64, u64, Response) =
                decode(&record.value().map_err(io_err)?)?;
            let slot: Record = (seq, index, digest, response);
            batch.put(slot_key(client, seq), encode(&slot)?);
            batch.delete(record.key());
        }
        store.write(&batch).map_err(io_err)?;
    }
    if !clients.is_empty() {
        tracing::info!(
            clients = clients.len(),
            store = %store.path().display(),
            "request-id records rewritten into the ring layout"
        );
    }
    Ok(clients.len())
}
