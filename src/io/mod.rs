//! Everything that touches the operating system: aligned buffers, files, the double-buffered
//! writer. The format module never does I/O; this module never interprets bytes.

// The one module that needs `unsafe`: aligned allocations for direct I/O.
#[allow(unsafe_code)]
pub mod aligned;
pub mod file;
#[cfg(any(test, feature = "testing"))]
pub mod sim;
pub mod storage;
pub mod stream;
pub mod writer;
