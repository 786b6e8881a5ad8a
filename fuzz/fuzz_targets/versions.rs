//! `VERSIONS`: `format::versions::decode_file` on arbitrary bytes, and on valid files with two
//! reservations, one slot then damaged.
//!
//! Input: the raw file bytes (seeds: valid files); the same bytes then drive an `Unstructured`
//! that picks two reservations and a damage, and checks that a damaged slot is passed over for
//! the other one (the torn-write argument of docs/design.md, "Versions"), never trusted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::format::versions::{
    Reservation, SLOT_LEN, SLOT_STRIDE, VERSIONS_FILE_LEN, decode_file, decode_slot, encode_file,
    encode_slot,
};
use podstore_fuzz::{Unstructured, arbitrary};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = structured(&mut Unstructured::new(data));
});

fn raw(data: &[u8]) {
    if let Ok((slot, r)) = decode_file(data) {
        assert!(slot < 2);
        // What decoded is exactly what the slot encodes.
        let at = slot * SLOT_STRIDE;
        assert_eq!(&data[at..at + SLOT_LEN], &encode_slot(r));
    }
}

fn structured(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let older = Reservation {
        generation: u.int_in_range(0..=u64::MAX - 1)?,
        reserved_through: u.arbitrary()?,
    };
    let newer = Reservation {
        generation: older.generation + 1,
        reserved_through: u.arbitrary()?,
    };
    let newer_slot: usize = u.int_in_range(0..=1)?;
    let mut file = encode_file(older);
    if newer_slot == 0 {
        file[SLOT_STRIDE..SLOT_STRIDE + SLOT_LEN].copy_from_slice(&encode_slot(older));
    }
    let at = newer_slot * SLOT_STRIDE;
    file[at..at + SLOT_LEN].copy_from_slice(&encode_slot(newer));
    assert_eq!(decode_file(&file), Ok((newer_slot, newer)));
    assert_eq!(file.len(), VERSIONS_FILE_LEN);
    // Damage the newer slot: one byte changed, or a torn prefix (the rest as before: zero).
    let byte: usize = u.int_in_range(0..=SLOT_LEN - 1)?;
    let torn: bool = u.arbitrary()?;
    if torn {
        for b in &mut file[at + byte..at + SLOT_LEN] {
            *b = 0;
        }
    } else {
        file[at + byte] ^= u.int_in_range(1..=255)?;
    }
    match decode_slot(&file[at..at + SLOT_LEN]) {
        // Zeroes written over bytes that were zero already: the slot is unchanged. Any real
        // change is caught by the crc (every change of up to 32 consecutive bits).
        Ok(Some(r)) => assert_eq!(r, newer),
        _ => assert_eq!(decode_file(&file), Ok((1 - newer_slot, older))),
    }
    Ok(())
}
