//! The segment header: `SegmentHeader::decode` on arbitrary bytes, and the round trip with
//! single-byte corruption and truncation.
//!
//! Input: the raw header bytes (seeds: valid headers); the same bytes then drive an
//! `Unstructured` that builds a header to round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::Corruption;
use podstore::format::segment_header::{SEGMENT_HEADER_LEN, SegmentHeader};
use podstore_fuzz::{BLOCK_SIZES, Unstructured, arbitrary};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = round_trip(&mut Unstructured::new(data));
});

/// Bytes of the header that are reserved (written as zero, covered by the crc, not checked).
fn reserved(i: usize) -> bool {
    (5..8).contains(&i) || (24..60).contains(&i)
}

fn raw(data: &[u8]) {
    let Ok(h) = SegmentHeader::decode(data) else {
        return;
    };
    assert!(data.len() >= SEGMENT_HEADER_LEN);
    assert!(h.block_size.is_power_of_two() && (512..=65536).contains(&h.block_size));
    let again = h.encode();
    assert_eq!(SegmentHeader::decode(&again), Ok(h));
    // With the reserved bytes zero, a header that decodes is exactly the encoder's output.
    if (0..SEGMENT_HEADER_LEN)
        .filter(|&i| reserved(i))
        .all(|i| data[i] == 0)
    {
        assert_eq!(&again[..], &data[..SEGMENT_HEADER_LEN]);
    }
}

fn round_trip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let segment: u64 = u.arbitrary()?;
    let block_size = if u.ratio(1u8, 4)? {
        u.arbitrary::<u32>()?
    } else {
        *u.choose(&BLOCK_SIZES)?
    };
    let h = SegmentHeader {
        segment,
        block_size,
    };
    let mut bytes = h.encode();
    let valid = BLOCK_SIZES.contains(&block_size);
    match SegmentHeader::decode(&bytes) {
        Ok(got) => {
            assert!(valid, "block size {block_size} accepted");
            assert_eq!(got, h);
        }
        Err(e) => {
            assert!(!valid, "valid header {h:?} rejected: {e:?}");
            assert!(matches!(e, Corruption::InvalidField { .. }), "{e:?}");
            return Ok(());
        }
    }
    let cut = u.int_in_range(0..=SEGMENT_HEADER_LEN - 1)?;
    assert!(matches!(
        SegmentHeader::decode(&bytes[..cut]),
        Err(Corruption::Truncated { .. })
    ));
    let pos = u.int_in_range(0..=SEGMENT_HEADER_LEN - 1)?;
    let mask = u.int_in_range(1..=255u8)?;
    bytes[pos] ^= mask;
    let res = SegmentHeader::decode(&bytes);
    assert!(
        res.is_err(),
        "byte {pos} xor {mask:#04x} undetected: {res:?}"
    );
    Ok(())
}
