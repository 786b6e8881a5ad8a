//! The model property test (filled in below).
