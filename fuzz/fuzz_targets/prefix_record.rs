//! `REMOTE-PREFIX`: `format::prefix_record::decode` on arbitrary bytes. A record that decodes is
//! exactly what `encode` writes for its prefix (nothing else is accepted: a directory's prefix
//! is compared with the one it is opened with, so a second spelling of one prefix would be
//! refused, and a damaged record taken for another prefix's would be refused as a mismatch);
//! every prefix round-trips.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::prefix_record::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(prefix) = decode(data) {
        assert_eq!(encode(&prefix), data);
    }
    // Any bytes that are text make a prefix that round-trips.
    if let Ok(text) = std::str::from_utf8(data) {
        assert_eq!(decode(&encode(text)).as_deref(), Ok(text));
    }
});
