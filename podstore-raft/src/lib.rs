//! podstore-raft: a replicated key-value store. The Raft engine is
//! [openraft](https://docs.rs/openraft); its log, its state machine and its snapshots are podstore
//! stores, used through podstore's public API only.
//!
//! A node keeps everything in one directory:
//!
//! ```text
//! <node>/
//!   log/                    a podstore Store: the Raft log, the vote, the committed id
//!   sm/CURRENT              names the state machine's live data directory (replaced by rename)
//!   sm/sm-<gen>/            a podstore Store: the key-value data, the applied id, the membership
//!   snapshots/snap-<index>-<term>-<nonce>/
//!                           a snapshot: `meta` and `data/`, a sealed podstore checkpoint
//! ```
//!
//! - [`LogStore`] (src/log_store.rs): `append` is readable when it returns and acknowledged
//!   (openraft's `IOFlushed`) once a dedicated flusher thread has made it durable: appends that
//!   arrive while a flush runs share the next one (one fsync for many appends). An append is
//!   one podstore record, not one per entry (keyed by its first and last index; cut at 1 MiB),
//!   and the committed id rides on the next append's record instead of a write of its own
//!   (the format: src/log_store/record.rs and docs/design-replication.md, "Replication"; a log written
//!   one record per entry by an earlier build of this unreleased crate is refused at open).
//!   The newest entries are also kept in memory for the log's readers (replication reads what
//!   was just appended).
//! - [`StateMachine`] (src/state_machine.rs): applies [`Request`]s as podstore batches, the
//!   applied log id and membership in the same batch as the data they describe.
//!
//! # Where the work runs
//!
//! The log's fdatasyncs never run on the async runtime. Small appends (entries encoding to at
//! most 256 KiB), `save_committed` (which only keeps the id in memory), reads of the log's
//! in-memory tail, and applies of chunks that only write (at most 256 KiB of keys and values)
//! run on the task that calls them: they are buffered podstore writes, copies into the store's
//! write buffer that wait for the disk only when both buffers are full or a segment file is
//! created (the first write after a store is opened, which creates its active segment, goes to
//! a blocking thread; a later
//! segment roll-over, once per 256 MiB with podstore's defaults, syncs a directory on the
//! calling task, and at most once a second a write extends the store's reservation of version
//! numbers: a 32-byte fdatasync of its `VERSIONS` file, on the calling task). Larger
//! appends and applies,
//! applies that look keys up (delete, put_if_absent), reads of older entries, the vote and
//! truncations (synced writes), snapshots and reads that miss the read cache run on blocking
//! threads; every fdatasync of the log runs on its flusher thread, which alone reports entries
//! durable. A hop to a blocking thread and back cost more than such a write (docs/benchmarks.md,
//! "Replication").
//! - Snapshots (src/snapshot.rs): a [`podstore::Store::checkpoint`] (hard links, no copy),
//!   shipped as files in chunks with a crc32 per file ([`transfer`]), installed crash-atomically.
//! - [`Node`] (src/node.rs): a Raft node over these, with its client API (put, get, get_range,
//!   delete, conditional writes, linearizable reads, listings, membership); [`http`]
//!   (src/http/): a transport over HTTP, the client API and `/metrics`.
//! - Values over [`CHUNK_LEN`] (1 MiB) are streamed into the leader and replicated in chunks
//!   ([`Node::put_stream`], src/node/upload.rs; [`Request::Chunk`], [`Request::Commit`],
//!   [`Request::Abort`], src/state_machine/uploads.rs): memory per PUT is a few MiB whatever
//!   the value's size.
//! - Writes under a request id ([`Request::Once`], src/state_machine/once.rs) are applied once:
//!   the state machine remembers each client's last [`REQUEST_ID_WINDOW`] ids, for the last
//!   [`REQUEST_ID_CLIENTS`] clients to write, and answers a retry with the first outcome. The `client` feature's `client::Client` (src/client.rs)
//!   finds the leader, retries across elections and sends every write with a request id.
//!
//! # What is promised
//!
//! A write acknowledged by [`Node::write`] is in the logs of a majority of the voters, each made
//! durable (fdatasync) before that node said so: it survives the loss of any minority of the
//! nodes. [`Node::get`] reads the local state machine (any node, possibly stale);
//! [`Node::get_linearizable`] first confirms through the leader's read index that no newer
//! write was acknowledged anywhere.
//!
//! # Why openraft 0.10.0-alpha.37, pinned exactly
//!
//! openraft 0.9 (the semver-stable line) needs its `storage-v2` feature for these storage
//! traits and its core waits for each append's flush callback before it submits the next, so
//! every append costs a fsync of its own. The 0.10 alphas let `append` return once the entries
//! are readable and report durability later through `IOFlushed`: one fsync covers all the
//! appends that arrived while the previous one ran, which is what podstore's group commit is
//! for. The 0.10 alphas change their storage API between releases (databend and svix pin them
//! exactly for that reason), so this crate pins `=0.10.0-alpha.37` and keeps openraft's types
//! inside it: only [`Request`], [`Response`] and plain ids cross the public API, apart from the
//! [`TypeConfig`] a test or an embedder needs to drive openraft directly.
//!
//! # Encoding
//!
//! Log entries, votes, membership and snapshot metadata are encoded with postcard: a compact
//! binary serde format (varints, byte strings as length and bytes), where serde_json would
//! write a 1 KiB value as a JSON array of numbers (about 3.5 KiB). openraft's types avoid serde
//! features a non-self-describing format cannot read (`deserialize_any`), and the openraft
//! storage suite round-trips every kind of entry through it.
#![deny(missing_docs)]

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

#[cfg(feature = "client")]
pub mod client;
mod fsutil;
pub mod http;
mod log_store;
mod node;
mod snapshot;
mod state_machine;
#[cfg(feature = "testing")]
pub mod testing;
pub mod transfer;

pub use log_store::LogStore;
pub use node::{Node, NodeError, Written, default_config};
pub use snapshot::SnapshotDir;
pub use state_machine::{Listed, MAX_KEY_LEN, Read, StateMachine, ValueRead};

impl Request {
    /// The key a single-key write names (a put or a delete, conditional or not, under a
    /// request id or not); `None` for a batch, a streamed value's entries, a `Many`.
    pub(crate) fn key(&self) -> Option<&[u8]> {
        match self {
            Request::Put { key, .. }
            | Request::Delete { key }
            | Request::PutIfAbsent { key, .. }
            | Request::PutIf { key, .. }
            | Request::DeleteIf { key, .. } => Some(key),
            Request::Once { request, .. } => request.key(),
            _ => None,
        }
    }

    /// The bytes of keys and values it carries (what it costs to hold in memory, roughly).
    pub(crate) fn payload_len(&self) -> usize {
        match self {
            Request::Put { key, value }
            | Request::PutIfAbsent { key, value }
            | Request::PutIf { key, value, .. } => key.len() + value.len(),
            Request::Delete { key } | Request::DeleteIf { key, .. } => key.len(),
            Request::Batch(ops) => ops.iter().map(Op::payload_len).sum(),
            Request::Once { request, .. } => request.payload_len(),
            Request::Chunk { bytes, .. } => bytes.len(),
            Request::Commit { key, .. } => key.len(),
            Request::Abort { .. } => 0,
            Request::Many(writes) => writes.iter().map(Request::payload_len).sum(),
        }
    }
}

openraft::declare_raft_types!(
    /// openraft's type configuration for this crate: requests are [`Request`]s, node ids `u64`,
    /// a node's address an [`openraft::BasicNode`].
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
);

/// The id of a node in a cluster.
pub type NodeId = u64;

/// The Raft handle of a node of this crate.
pub type Raft = openraft::Raft<TypeConfig, StateMachine>;

/// One write of a [`Request::Batch`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
}

impl Op {
    /// The bytes of its key and value.
    pub(crate) fn payload_len(&self) -> usize {
        match self {
            Op::Put { key, value } => key.len() + value.len(),
            Op::Delete { key } => key.len(),
        }
    }
}

/// A write to the replicated key-value store: what a log entry carries.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Removes `key`; answers whether it existed.
    Delete {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
    },
    /// Sets `key` to `value` only if `key` has no value; answers whether it did.
    PutIfAbsent {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
    },
    /// Several writes applied all-or-nothing, in order.
    Batch(Vec<Op>),
    /// Sets `key` to `value` only if `expect` holds for the key's current value; answers
    /// [`Response::Done`], or [`Response::ConditionFailed`] with the key's current version.
    PutIf {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The value.
        #[serde(with = "serde_bytes")]
        value: Vec<u8>,
        /// The condition.
        expect: Expect,
    },
    /// Removes `key` only if its value has version `version`; answers [`Response::Existed`]
    /// (`true`), or [`Response::ConditionFailed`] with the key's current version.
    DeleteIf {
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// The version the value must have.
        version: u64,
    },
    /// `request`, applied at most once for its request id `id`: the state machine remembers the
    /// outcome of each client's last [`REQUEST_ID_WINDOW`] request ids (for the last
    /// [`REQUEST_ID_CLIENTS`] clients to write), and answers a request
    /// whose id it remembers with that first outcome ([`Response::Replayed`]) instead of
    /// applying it again. A client retries a write whose answer it lost (a leader killed after
    /// the commit, a connection cut) under the same id, and gets the first outcome.
    ///
    /// (Last of the variants: a log written before it existed still decodes.)
    Once {
        /// The request's id.
        id: RequestId,
        /// The write (not itself a `Once`), or a [`Request::Many`] of them.
        request: Box<Request>,
    },
    /// One piece of a value streamed in by the leader ([`Node::put_stream`]): staged in the
    /// state machine's store under an internal key until the [`Request::Commit`] of its upload
    /// publishes the value. Applied only if the entry's term is the upload's (see
    /// [`UploadId`]); answers [`Response::Done`], or [`Response::Rejected`] (nothing staged).
    ///
    /// (This and the next two variants come after `Once`: a log written before they existed
    /// still decodes.)
    Chunk {
        /// The upload it belongs to.
        upload: UploadId,
        /// Its place in the upload, from 0.
        index: u64,
        /// Its bytes (at most [`CHUNK_LEN`]).
        #[serde(with = "serde_bytes")]
        bytes: Vec<u8>,
    },
    /// Publishes the value staged by upload `upload` under `key`: the value is its `chunks`
    /// chunks in order, `len` bytes whose crc32 is `crc`; the staged chunks are removed. With
    /// `expect`, only if it holds for the key's current value (as [`Request::PutIf`]). Answers
    /// [`Response::Done`], [`Response::ConditionFailed`], or [`Response::Rejected`] when the
    /// upload is not whole (a chunk missing: dropped by a change of term) or does not match
    /// `len` and `crc`; the staged chunks are removed whatever it answers.
    Commit {
        /// The upload.
        upload: UploadId,
        /// The key.
        #[serde(with = "serde_bytes")]
        key: Vec<u8>,
        /// How many chunks the value is made of.
        chunks: u64,
        /// The value's length.
        len: u64,
        /// The crc32 of the value.
        crc: u32,
        /// The condition, if any.
        expect: Option<Expect>,
    },
    /// Drops what upload `upload` staged (the client went away, or the value was refused
    /// half-way); answers [`Response::Done`].
    Abort {
        /// The upload.
        upload: UploadId,
    },
    /// Independent writes in one log entry, each applied (or refused) on its own, in order;
    /// answers [`Response::Many`], one answer per write. Unlike [`Request::Batch`], one write's
    /// failure (a condition, a refused request id) does not undo the others. Every write in it
    /// that writes gets the entry's log index as its version, so no two of them may name the
    /// same key: a write to a key an earlier write of the same `Many` names is refused
    /// ([`Response::Rejected`]). Each is a put, a delete or a conditional one, or such a write
    /// under a request id ([`Request::Once`]); anything else (a batch, a chunk, a commit, a
    /// `Many`) is refused. The client's coalesced writes (`podstore_raft::client`, `POST /writes`),
    /// which are sent as a `Many` under one request id ([`Request::Once`] on the `Many`: applied
    /// at most once as a whole, one request-id record for all its writes).
    ///
    /// Shared, not owned: the log's in-memory tail hands the entry out once per follower it
    /// is replicated to and once more to be applied, and a copy of a `Many` would be one
    /// allocation per key and per value (the state machine applies it by reference).
    ///
    /// (Last of the variants: a log written before it existed still decodes.)
    Many(Arc<[Request]>),
}

/// The id of a streamed upload ([`Request::Chunk`]): the term of the leader that streams it
/// and a number that leader gives each of its uploads. Only one leader streams in a term, so
/// the pair is unique; and an upload can be finished only in its own term: a chunk applied
/// from an entry of another term is refused, and the first entry of each new leader's term
/// (the blank entry every leader appends when elected) drops every upload staged in an older
/// term. So an upload whose leader died, or lost its leadership, half-way does not stay
/// staged for ever.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UploadId {
    /// The term of the leader streaming it.
    pub term: u64,
    /// The upload's number among that leader's.
    pub nonce: u64,
}

/// The most bytes of a value one [`Request::Chunk`] carries (1 MiB): the leader holds at most
/// a few chunks of a streamed value in memory at a time, and so does every node that
/// replicates or applies them.
pub const CHUNK_LEN: usize = 1 << 20;

/// The id of a client's write ([`Request::Once`]): the client's id, chosen at random by the
/// client, and its sequence number, counting up from 1 in the order the client issues writes.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestId {
    /// The client.
    pub client: u64,
    /// The write's number among the client's (from 1).
    pub seq: u64,
}

/// How many of a client's request ids the state machine remembers (see [`Request::Once`]):
/// the ids from its highest sequence number down to `REQUEST_ID_WINDOW - 1` below it. An id
/// below that window is refused ([`Response::RequestIdRefused`]): the state machine cannot
/// tell any more whether it was applied. A client with more writes in flight at once than this
/// may see its oldest refused.
pub const REQUEST_ID_WINDOW: u64 = 1024;

/// How many clients the state machine remembers request ids for (see [`Request::Once`]): the
/// `REQUEST_ID_CLIENTS` whose latest write (with a request id) was applied last. A write from
/// one more client makes it forget the client whose latest write is the oldest, with all of its
/// ids: a retry from that client is then applied as a new write. Every node forgets the same
/// client at the same log index (the order is by log index), so their state machines agree. A
/// client that writes at least once in every `REQUEST_ID_CLIENTS` other clients' first writes
/// is never forgotten.
pub const REQUEST_ID_CLIENTS: u64 = 1024;

/// The condition of a [`Request::PutIf`], checked against the key's value when the entry is
/// applied: on every node against the same state, so every node decides alike.
///
/// A value's version is the index of the log entry that wrote it (see
/// [`StateMachine`]): the same on every node, unlike podstore's own `Version`, which each
/// node's store takes from its own clock.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The key has no value.
    Absent,
    /// The key has a value (any version).
    Present,
    /// The key's value has this version.
    Version(u64),
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Put { key, value } => {
                write!(f, "put {} ({} bytes)", key.escape_ascii(), value.len())
            }
            Request::Delete { key } => write!(f, "delete {}", key.escape_ascii()),
            Request::PutIfAbsent { key, value } => write!(
                f,
                "put_if_absent {} ({} bytes)",
                key.escape_ascii(),
                value.len()
            ),
            Request::Batch(ops) => write!(f, "batch of {}", ops.len()),
            Request::PutIf { key, value, expect } => write!(
                f,
                "put_if {} ({} bytes, {expect:?})",
                key.escape_ascii(),
                value.len()
            ),
            Request::DeleteIf { key, version } => {
                write!(f, "delete_if {} (version {version})", key.escape_ascii())
            }
            Request::Once { id, request } => {
                write!(f, "{request} (request {}:{})", id.client, id.seq)
            }
            Request::Chunk {
                upload,
                index,
                bytes,
            } => write!(
                f,
                "chunk {index} of upload {}:{} ({} bytes)",
                upload.term,
                upload.nonce,
                bytes.len()
            ),
            Request::Commit {
                upload, key, len, ..
            } => write!(
                f,
                "commit upload {}:{} as {} ({len} bytes)",
                upload.term,
                upload.nonce,
                key.escape_ascii()
            ),
            Request::Abort { upload } => {
                write!(f, "abort upload {}:{}", upload.term, upload.nonce)
            }
            Request::Many(writes) => write!(f, "{} writes", writes.len()),
        }
    }
}

/// What applying a [`Request`] answered.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// A put or a batch was applied.
    Done,
    /// A delete: whether the key existed.
    Existed(bool),
    /// A put_if_absent: whether the value was inserted.
    Inserted(bool),
    /// The request was refused by the state machine (a key or value podstore rejects); nothing
    /// of it was applied.
    Rejected(String),
    /// A [`Request::PutIf`] or [`Request::DeleteIf`] whose condition did not hold: nothing was
    /// written. `current` is the key's version (`None`: it has no value).
    ConditionFailed {
        /// The key's version when the request was applied.
        current: Option<u64>,
    },
    /// A [`Request::Once`] whose id the state machine remembers, for the same request: nothing
    /// was applied again; `response` is what the first one answered, at log index `index`
    /// (the version of what it wrote).
    Replayed {
        /// The log index of the first request.
        index: u64,
        /// What the first request answered.
        response: Box<Response>,
    },
    /// A [`Request::Once`] refused, nothing applied: its id was used for a different request,
    /// or is older than the state machine remembers ([`REQUEST_ID_WINDOW`]).
    RequestIdRefused(String),
    /// A [`Request::Many`]: what each of its writes answered, in order.
    ///
    /// (Last of the variants: a request-id record written before it existed still decodes.)
    Many(Vec<Response>),
}

/// An I/O error from a podstore error (openraft's storage traits speak `io::Error`).
pub(crate) fn io_err(e: podstore::Error) -> std::io::Error {
    std::io::Error::other(e)
}

/// Encodes `value` with postcard.
pub(crate) fn encode<T: Serialize>(value: &T) -> std::io::Result<Vec<u8>> {
    postcard::to_stdvec(value).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// Decodes a postcard value.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> std::io::Result<T> {
    postcard::from_bytes(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}
