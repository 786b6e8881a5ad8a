//! The size cap ([`Options::size_cap`]): a store that forgets its oldest files to stay within
//! it (issue 39).
//!
//! * `cap`: workloads that write 20 times the cap, checked by the file system (the directory's
//!   file sizes summed by a thread that watches throughout), with a reader verifying every
//!   value it gets (each value names its key and its write, and carries a checksum).
//! * `model`: a property test against a map: eviction may drop any value, but a get returns
//!   the map's current value or nothing, never an older or deleted one, across reopens.
//! * `beside`: compaction gives back expired values while steps run beside it.
//! * `reads`: every whole-value read (`get`, `get_into`, `get_bytes`) counts and earns a
//!   second chance.
//! * `resurrection`: the case that needs the catalog's watermark: a key's newest record
//!   evicted while a file that stays holds an older one.
//! * `cache`: the read-through cache README recommends (offers behind the doorkeeper, second
//!   chances) with values that expire, under concurrency: right values only, within the cap.

mod beside;
mod cache;
mod cap;
#[path = "../common/mod.rs"]
mod common;
mod model;
mod reads;
mod resurrection;
mod values;
