//! Segment and blob files: their names (`names`), opening one at store open (`open`: from its
//! footer, by recovery, or into quarantine), reading verified value ranges (`read`), and writing
//! blob files (`blob`, and `stream` for a value that streams in).

mod blob;
mod names;
mod open;
mod read;
mod stream;

pub use blob::*;
pub use names::*;
pub use open::*;
pub use read::*;
pub use stream::BlobStream;
