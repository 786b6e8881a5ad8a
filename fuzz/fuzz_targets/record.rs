//! Records: `RecordHeader::decode` and `decode_record` on arbitrary bytes, and the round trip
//! `encode_record` → `decode_record` with single-byte corruption and truncation.
//!
//! Input, read twice:
//! * raw: bytes 0..8 segment id, 8..16 record offset (the place every checksum is bound to),
//!   16.. the record (seeds: a valid record encoded for that place);
//! * structured: the same bytes drive an `Unstructured` that builds a record to round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::CHUNK_SIZE;
use podstore::format::record::{
    EXPIRES_LEN, KNOWN_FLAGS, RECORD_HEADER_LEN, RecordHeader, RecordKind, RecordPlace,
    chunk_count, decode_record, encode_record, encode_record_as,
};
use podstore::{Corruption, MAX_KEY_LEN, MAX_VALUE_LEN};
use podstore_fuzz::{Unstructured, arb_key, arb_value_len, arbitrary, fill, u64_at};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = round_trip(&mut Unstructured::new(data));
});

fn raw(data: &[u8]) {
    let place = RecordPlace {
        segment: u64_at(data, 0),
        offset: u64_at(data, 8),
    };
    let bytes = data.get(16..).unwrap_or(&[]);
    let _ = RecordHeader::decode(data);
    let header = RecordHeader::decode(bytes);
    if let Ok(h) = &header {
        assert!(h.key_len >= 1 && h.key_len as usize <= MAX_KEY_LEN);
        assert!(h.value_len <= MAX_VALUE_LEN);
        assert!(h.kind == RecordKind::Put || h.value_len == 0);
        assert_eq!(h.flags & !KNOWN_FLAGS, 0);
        // An expiring record's expiry field follows its fixed header.
        let expiry = if h.expires_at.is_some() {
            EXPIRES_LEN as u64
        } else {
            0
        };
        assert_eq!(
            h.encoded_len(),
            RECORD_HEADER_LEN as u64
                + expiry
                + h.key_len as u64
                + h.value_len
                + 4 * chunk_count(h.value_len)
        );
    }
    let Ok(rec) = decode_record(bytes, place) else {
        return;
    };
    assert_eq!(header.as_ref(), Ok(&rec.header));
    let h = rec.header;
    assert_eq!(rec.key.len(), h.key_len as usize);
    assert_eq!(rec.value.len() as u64, h.value_len);
    let total = h.encoded_len() as usize;
    assert!(total <= bytes.len());
    // The encoding is canonical: every header byte is a checked field or covered by the crc,
    // so a record that verifies is exactly what the encoder produces for its contents.
    assert_eq!(
        encode_record_as(&h, place, rec.key, rec.value),
        &bytes[..total],
        "decoded record does not re-encode to its own bytes"
    );
}

fn round_trip(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let place = RecordPlace {
        segment: u.arbitrary()?,
        offset: u.arbitrary()?,
    };
    let kind = if u.ratio(1u8, 5)? {
        RecordKind::Tombstone
    } else {
        RecordKind::Put
    };
    let seq: u64 = u.arbitrary()?;
    let key = arb_key(u, 64)?;
    let value = match kind {
        RecordKind::Tombstone => Vec::new(),
        RecordKind::Put => {
            let len = arb_value_len(u, false)?;
            fill(u, len)?
        }
    };
    let mut bytes = encode_record(place, kind, seq, &key, &value);
    let expected_len =
        RECORD_HEADER_LEN + key.len() + value.len() + 4 * value.len().div_ceil(CHUNK_SIZE as usize);
    assert_eq!(bytes.len(), expected_len);

    let rec = decode_record(&bytes, place).expect("a freshly encoded record must decode");
    assert_eq!(rec.key, &key[..]);
    assert_eq!(rec.value, &value[..]);
    assert_eq!(rec.header.seq, seq);
    assert_eq!(rec.header.kind, kind);
    assert_eq!(rec.header.encoded_len(), bytes.len() as u64);

    // Bytes after the record are not part of it.
    let len = bytes.len();
    let tail = u.int_in_range(0..=8usize)?;
    bytes.extend(std::iter::repeat_n(0xA5u8, tail));
    let rec = decode_record(&bytes, place).expect("trailing bytes must be ignored");
    assert_eq!((rec.key, rec.value), (&key[..], &value[..]));
    bytes.truncate(len);

    // Every truncation is reported as such.
    let cut = u.int_in_range(0..=len - 1)?;
    assert!(
        matches!(
            decode_record(&bytes[..cut], place),
            Err(Corruption::Truncated { .. })
        ),
        "record of {len} bytes cut at {cut} not reported as truncated"
    );

    // Changing any one byte is detected: every byte is a checked field, a crc, or covered by
    // one (crc32 detects every error burst of up to 32 bits).
    let pos = u.int_in_range(0..=len - 1)?;
    let mask = u.int_in_range(1..=255u8)?;
    bytes[pos] ^= mask;
    let res = decode_record(&bytes, place);
    assert!(
        res.is_err(),
        "byte {pos} of {len} xor {mask:#04x} undetected: {res:?}"
    );
    Ok(())
}
