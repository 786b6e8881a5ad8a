//! Segment and blob files: their names (`names`), the catalog that lists them (`catalog`), opening one at store open (`open`: from its
//! footer, by recovery, or into quarantine), reading verified value ranges (`read`), and writing
//! blob files (`blob`, and `stream` for a value that streams in).

mod blob;
mod catalog;
mod names;
mod open;
mod read;
mod stream;

pub use blob::*;
pub use catalog::*;
pub use names::*;
pub use open::*;
pub use read::*;
pub use stream::BlobStream;
