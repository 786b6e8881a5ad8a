//! Segment and blob files: their names (`names`), the catalog that lists them (`catalog`), opening one at store open (`open`: from its
//! footer, by recovery, or into quarantine), reading verified value ranges (`read`), the sorted keys of a sealed file (`keys`), and writing
//! blob files (`blob`, and `stream` for a value that streams in); the reservation of version numbers (`versions`).

mod blob;
mod catalog;
mod keys;
mod names;
mod open;
mod quarantine;
mod read;
mod stream;
mod versions;

pub use blob::*;
pub use catalog::*;
pub use keys::{FooterSource, KeySeq, SortedKeys};
pub use names::*;
pub use open::*;
pub use quarantine::*;
pub use read::*;
pub use stream::BlobStream;
pub use versions::{RESERVE_AHEAD, Versions, write_new as write_versions};
