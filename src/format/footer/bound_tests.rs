//! [`FooterBound`] against the encoder: never below what a footer takes, and close to it for
//! the common small entries (what it reserves is room a segment does not fill).

use super::*;
use proptest::prelude::*;

/// The footer of `entries` (records ending at `data_end`, block-aligned as at a seal) and the
/// bound [`FooterBound`] gives for them.
fn footer_and_bound(entries: &[FooterEntry], data_end: u64, block: u64) -> (u64, u64) {
    let at = align_up(data_end, block);
    let (footer, _) = encode_footer_with_blocks(9, data_end, at, block as u32, entries);
    let mut bound = FooterBound::default();
    for e in entries {
        bound.add(e);
    }
    // What the footer adds to the file: the padding after the records, then itself.
    (at - data_end + footer.len() as u64, bound.footer_len(block))
}

fn entry(key: Vec<u8>, i: u64, stored_len: u64, expires: bool, compressed: bool) -> FooterEntry {
    FooterEntry {
        key,
        kind: if stored_len == 0 {
            RecordKind::Tombstone
        } else {
            RecordKind::Put
        },
        flags: (if compressed { FLAG_COMPRESSED } else { 0 })
            | (if expires { FLAG_EXPIRES } else { 0 }),
        offset: 64 + i * (stored_len + 40),
        stored_len,
        value_len: if compressed {
            stored_len * 3
        } else {
            stored_len
        },
        seq: 1_000_000 + i,
        expires_at: expires.then_some(1_800_000_000_000 + i),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(if crate::tests::long::long() { 512 } else { 64 }))]

    /// Random keys (short, long, up to the longest allowed, repeated), fields and block sizes.
    #[test]
    fn the_bound_is_never_below_the_footer(
        keys in prop::collection::vec(
            prop_oneof![
                4 => prop::collection::vec(any::<u8>(), 1..24),
                1 => prop::collection::vec(any::<u8>(), 24..600),
                1 => prop::collection::vec(any::<u8>(), MAX_KEY_LEN - 8..=MAX_KEY_LEN),
            ],
            1..400,
        ),
        stored in 0u64..100_000,
        flags in 0u8..4,
        block_shift in 9u32..13,
        pad in 0u64..4096,
    ) {
        let entries: Vec<FooterEntry> = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| entry(k, i as u64, stored, flags & 1 != 0, flags & 2 != 0))
            .collect();
        let data_end = entries.last().unwrap().offset + stored + 40 + pad;
        let (footer, bound) = footer_and_bound(&entries, data_end, 1 << block_shift);
        prop_assert!(footer <= bound, "footer {footer} > bound {bound}");
    }

    /// `with_key` (an entry whose fields are not known yet) bounds whatever entry comes.
    #[test]
    fn a_key_counted_ahead_bounds_its_entry(
        key in prop::collection::vec(any::<u8>(), 1..=MAX_KEY_LEN),
        offset in any::<u64>(),
        stored in any::<u32>(),
        expires in any::<bool>(),
    ) {
        let mut e = entry(key, 0, u64::from(stored), expires, true);
        e.offset = offset;
        e.seq = u64::MAX;
        e.value_len = MAX_VALUE_LEN;
        let ahead = FooterBound::default().with_key(e.key.len());
        let mut known = FooterBound::default();
        known.add(&e);
        prop_assert!(known.footer_len(4096) <= ahead.footer_len(4096));
    }
}

/// 100,000 entries of 16-byte keys, as a segment of small values holds: the bound is within 10 %
/// of the footer (plus its fixed part), so a segment keeps nearly all of its size for records.
#[test]
fn the_bound_of_many_small_entries_is_close() {
    let entries: Vec<FooterEntry> = (0..100_000u64)
        .map(|i| entry(format!("user{i:012}").into_bytes(), i, 100, false, false))
        .collect();
    let data_end = entries.last().unwrap().offset + 140;
    let (footer, bound) = footer_and_bound(&entries, data_end, 4096);
    assert!(footer <= bound, "footer {footer} > bound {bound}");
    assert!(
        bound <= footer + footer / 10 + 3 * 4096,
        "footer {footer}, bound {bound}"
    );
}
