//! Everything that touches the operating system: aligned buffers, files, the double-buffered
//! writer. The format module never does I/O; this module never interprets bytes.

pub mod aligned;
pub mod file;
#[cfg(test)]
pub mod sim;
pub mod storage;
pub mod stream;
pub mod writer;
