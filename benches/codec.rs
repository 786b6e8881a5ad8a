//! Micro-benchmarks of the pure codecs on the hot paths: record encode/decode, chunk checksums,
//! footer decode. Run: `cargo bench --bench codec`. (Index lookups and the copy into the write
//! buffer are in `benches/store.rs`.)

use divan::{Bencher, black_box};
use podstore::format::CHUNK_SIZE;
use podstore::format::footer::{
    FooterEntry, TRAILER_LEN, Trailer, decode_footer, decode_locations, encode_footer,
};
use podstore::format::record::{
    RecordKind, RecordPlace, chunk_crc, decode_record, encode_record, verify_chunks,
};

const PLACE: RecordPlace = RecordPlace {
    segment: 1,
    offset: 4096,
};

fn main() {
    divan::main();
}

#[divan::bench(args = [0, 1024, 4096, 65536, 1 << 20])]
fn encode(bencher: Bencher, len: usize) {
    let value = vec![0x5au8; len];
    bencher
        .counter(divan::counter::BytesCount::new(len))
        .bench(|| {
            encode_record(
                PLACE,
                RecordKind::Put,
                1,
                black_box(b"some/key/of/medium/length"),
                black_box(&value),
            )
        });
}

#[divan::bench(args = [0, 1024, 4096, 65536, 1 << 20])]
fn decode_and_verify(bencher: Bencher, len: usize) {
    let bytes = encode_record(
        PLACE,
        RecordKind::Put,
        1,
        b"some/key/of/medium/length",
        &vec![0x5au8; len],
    );
    bencher
        .counter(divan::counter::BytesCount::new(len))
        .bench(|| decode_record(black_box(&bytes), PLACE).unwrap().value.len());
}

/// Verifying the one chunk that a 4 KiB range read touches.
#[divan::bench]
fn verify_one_chunk(bencher: Bencher) {
    let bytes = encode_record(PLACE, RecordKind::Put, 1, b"k", &vec![1u8; 1 << 20]);
    let value_at = 32 + 1;
    let table_at = value_at + (1 << 20);
    bencher.bench(|| {
        verify_chunks(
            PLACE,
            100,
            black_box(&bytes[value_at + 100 * 4096..value_at + 101 * 4096]),
            black_box(&bytes[table_at + 400..table_at + 404]),
        )
        .unwrap()
    });
}

/// The checksums alone: the crc32 of every 4 KiB chunk of a value, as a put computes them for
/// its chunk table and a whole-value get verifies them.
#[divan::bench(args = [4096, 1 << 20])]
fn chunk_checksums(bencher: Bencher, len: usize) {
    let value = vec![0x5au8; len];
    bencher
        .counter(divan::counter::BytesCount::new(len))
        .bench(|| {
            black_box(&value)
                .chunks(CHUNK_SIZE as usize)
                .enumerate()
                .fold(0u32, |acc, (i, c)| acc ^ chunk_crc(PLACE, i as u64, c))
        });
}

/// The footer entry of the `i`th record of a segment of 1 KiB values, its key `key`.
fn footer_entry(key: Vec<u8>, i: u64) -> FooterEntry {
    FooterEntry {
        key,
        kind: RecordKind::Put,
        flags: 0,
        offset: 64 + i * 1100,
        stored_len: 1024,
        value_len: 1024,
        seq: i + 1,
        expires_at: None,
    }
}

/// `n` footer entries of 1 KiB values, keys `{prefix}{i:012}`.
fn footer_entries(n: u64, prefix: &str) -> Vec<FooterEntry> {
    (0..n)
        .map(|i| footer_entry(format!("{prefix}{i:012}").into_bytes(), i))
        .collect()
}

/// Encoding a footer of n entries in write order (keys in no order: a hash of the index):
/// what a seal does under the append lock, its sort first.
#[divan::bench(args = [1_000, 100_000])]
fn footer_encode(bencher: Bencher, n: u64) {
    let entries = footer_entries(n, "user");
    // Shuffled: i ↦ i·k mod n is a permutation, k being a prime that does not divide n.
    let k = 2_654_435_761usize;
    let shuffled: Vec<FooterEntry> = (0..entries.len())
        .map(|i| entries[i.wrapping_mul(k) % entries.len()].clone())
        .collect();
    let data_end = 64 + n * 1100;
    bencher
        .counter(divan::counter::ItemsCount::new(n as usize))
        .bench(|| encode_footer(1, data_end, data_end, 4096, black_box(&shuffled)).len());
}

/// [`footer_encode`] with keys as applications name them: paths whose parts vary early and
/// late (`tenant-{t}/photos/{album}/{i}.jpg`), so that the 8 bytes after the prefix all keys
/// share often tie, and a key a replicated store adds to each write (podstore-raft's state
/// machine: `d` + the key, and `r/s` + a client's slot).
#[divan::bench(args = [1_000, 100_000])]
fn footer_encode_paths(bencher: Bencher, n: u64) {
    let entries: Vec<FooterEntry> = (0..n)
        .map(|i| {
            let h = i.wrapping_mul(2_654_435_761) % n;
            let key = if i % 8 == 7 {
                let mut k = b"r/s".to_vec();
                k.extend_from_slice(&(h % 64).to_be_bytes());
                k.extend_from_slice(&((h % 1024) as u16).to_be_bytes());
                k
            } else {
                format!("dtenant-{}/photos/{}/{h}.jpg", h % 7, h % 1000).into_bytes()
            };
            footer_entry(key, i)
        })
        .collect();
    let data_end = 64 + n * 1100;
    bencher
        .counter(divan::counter::ItemsCount::new(n as usize))
        .bench(|| encode_footer(1, data_end, data_end, 4096, black_box(&entries)).len());
}

/// Decoding a footer of n entries: what opening a store does per segment.
#[divan::bench(args = [1_000, 100_000])]
fn footer_decode(bencher: Bencher, n: u64) {
    let entries = footer_entries(n, "object/");
    let data_end = 64 + n * 1100;
    let footer = encode_footer(1, data_end, data_end, 4096, &entries);
    let file_len = data_end + footer.len() as u64;
    bencher
        .counter(divan::counter::ItemsCount::new(n as usize))
        .bench(|| {
            let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
            decode_footer(&t, black_box(&footer[..]), data_end)
                .unwrap()
                .len()
        });
}

/// What open reads: the location table alone (no keys).
#[divan::bench(args = [1_000, 100_000])]
fn footer_decode_locations(bencher: Bencher, n: u64) {
    let entries = footer_entries(n, "key-");
    let data_end = 64 + n * 1100;
    let footer = encode_footer(1, data_end, data_end, 4096, &entries);
    let file_len = data_end + footer.len() as u64;
    bencher
        .counter(divan::counter::ItemsCount::new(n as usize))
        .bench(|| {
            let t = Trailer::decode(&footer[footer.len() - TRAILER_LEN..], file_len).unwrap();
            let at = (t.table_offset - data_end) as usize;
            decode_locations(&t, black_box(&footer[at..]))
                .unwrap()
                .len()
        });
}
