//! Everything that touches the operating system: aligned buffers, files, the double-buffered
//! writer. The format module never does I/O; this module never interprets bytes.

// The one module that needs `unsafe`: aligned allocations for direct I/O.
#[allow(unsafe_code)]
pub mod aligned;
pub mod file;
pub mod remote;
// The power-loss simulator: crate-internal tests only, never in a user's build.
#[cfg(test)]
pub mod sim;
pub mod storage;
pub mod stream;
// io_uring's submission takes raw buffer pointers: one `unsafe` push, argued there.
#[allow(unsafe_code)]
mod uring;
pub mod writer;
