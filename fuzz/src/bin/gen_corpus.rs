//! Writes seed corpora built from valid encoded structures into `<dir>/<target>/seed-*`
//! (default dir: fuzz/corpus), so that fuzzing starts from valid records, footers, headers and
//! segments rather than from nothing. Deterministic; rerunning overwrites the same files.
//!
//! By hand, from fuzz/: `cargo run --no-default-features --bin gen_corpus [DIR]`. fuzz/run.sh
//! runs the copy that `cargo fuzz build` builds with the targets.

use std::fs;
use std::path::{Path, PathBuf};

use podstore::format::record::{RecordKind, RecordPlace, encode_record};
use podstore::format::segment_header::SegmentHeader;
use podstore_fuzz::{BLOCK_SIZES, Rec, seal, segment_image};

fn main() -> std::io::Result<()> {
    let dir = std::env::args_os().nth(1).map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        PathBuf::from,
    );
    let mut total = 0;
    for (target, seeds) in [
        ("record", record_seeds()),
        ("footer", footer_seeds()),
        ("segment_header", header_seeds()),
        ("scan", scan_seeds()),
        ("frames", frames_seeds()),
        ("catalog", catalog_seeds()),
        ("versions", versions_seeds()),
        ("manifest", manifest_seeds()),
        ("prefix_record", prefix_record_seeds()),
    ] {
        let d = dir.join(target);
        fs::create_dir_all(&d)?;
        for (i, seed) in seeds.iter().enumerate() {
            fs::write(d.join(format!("seed-{i:02}")), seed)?;
        }
        println!(
            "{:>16}: {:>3} seeds in {}",
            target,
            seeds.len(),
            d.display()
        );
        total += seeds.len();
    }
    println!("{total} seeds written");
    Ok(())
}

/// Catalogs: empty, and with creations, seals and removals of both kinds, with zero slots after;
/// and a version-2 catalog with an eviction edit.
fn catalog_seeds() -> Vec<Vec<u8>> {
    use podstore::FileKind;
    use podstore::format::catalog::{
        CATALOG_VERSION, CATALOG_VERSION_EVICT, Edit, Op, SLOT_LEN, encode_header,
    };
    let edit = |id, kind, op| Edit { id, kind, op }.encode();
    let mut seeds = vec![encode_header(CATALOG_VERSION).to_vec()];
    let mut b = encode_header(CATALOG_VERSION).to_vec();
    for e in [
        edit(1, FileKind::Log, Op::Create),
        edit(2, FileKind::Blob, Op::Create),
        edit(2, FileKind::Blob, Op::Seal { length: 1 << 20 }),
        edit(1, FileKind::Log, Op::Seal { length: 8192 }),
        edit(3, FileKind::Log, Op::Create),
        edit(1, FileKind::Log, Op::Remove),
    ] {
        b.extend_from_slice(&e);
        seeds.push(b.clone());
    }
    b.resize(b.len() + 4 * SLOT_LEN, 0);
    seeds.push(b);
    let mut v2 = encode_header(CATALOG_VERSION_EVICT).to_vec();
    for e in [
        edit(1, FileKind::Log, Op::Create),
        edit(1, FileKind::Log, Op::Seal { length: 8192 }),
        edit(2, FileKind::Log, Op::Create),
        edit(1, FileKind::Log, Op::Evict { through: 77 }),
    ] {
        v2.extend_from_slice(&e);
    }
    seeds.push(v2);
    seeds
}

/// `VERSIONS` files: one reservation, and two with either slot the newer.
fn prefix_record_seeds() -> Vec<Vec<u8>> {
    use podstore::format::prefix_record::encode;
    ["tenant/store", "", "a/b/c/", "ünï/cödé"]
        .iter()
        .map(|p| encode(p))
        .collect()
}

fn versions_seeds() -> Vec<Vec<u8>> {
    use podstore::format::versions::{
        Reservation, SLOT_LEN, SLOT_STRIDE, encode_file, encode_slot,
    };
    let r = |generation, reserved_through| Reservation {
        generation,
        reserved_through,
    };
    let one = encode_file(r(1, 1_800_000_000_000_000));
    let mut two = one.clone();
    two[SLOT_STRIDE..SLOT_STRIDE + SLOT_LEN]
        .copy_from_slice(&encode_slot(r(2, 1_800_000_001_000_000)));
    let mut three = two.clone();
    three[..SLOT_LEN].copy_from_slice(&encode_slot(r(3, 1_800_000_000_500_000)));
    vec![one, two, three]
}

/// Remote manifests: the claim of a new prefix (no files), and one with files and an
/// eviction watermark.
fn manifest_seeds() -> Vec<Vec<u8>> {
    use podstore::FileKind;
    use podstore::format::manifest::{Manifest, ManifestFile, encode};
    let empty = Manifest {
        number: 1,
        epoch: 1,
        next_file_id: 1,
        ..Manifest::default()
    };
    let file = |id, kind, length, epoch| ManifestFile {
        id,
        kind,
        length,
        crc: pattern(id, 4).iter().fold(0, |c, &b| c << 8 | u32::from(b)),
        epoch,
    };
    let full = Manifest {
        number: 9,
        epoch: 3,
        writer: 0x5eed_5eed_0000_0003,
        max_seq: 1_800_000_000_000_000,
        next_file_id: 40,
        evicted: Some((4, FileKind::Log, 1_799_999_999_000_000)),
        files: vec![
            file(5, FileKind::Log, 1 << 20, 1),
            file(12, FileKind::Blob, (3 << 20) + 4096, 2),
            file(39, FileKind::Log, 8192, 3),
        ],
        closed: true,
        claim: false,
        after_close: false,
        inline: Default::default(),
    };
    // Version 3: the bytes of a file in the manifest itself.
    let mut carrying = full.clone();
    let bytes = pattern(40, 700);
    carrying.next_file_id = 41;
    carrying.files.push(ManifestFile {
        id: 40,
        kind: FileKind::Log,
        length: bytes.len() as u64,
        crc: crc32fast::hash(&bytes),
        epoch: 3,
    });
    carrying.inline.insert(40, bytes.into());
    vec![encode(&empty), encode(&full), encode(&carrying)]
}

/// A deterministic byte pattern (xorshift), for values and for unstructured seeds.
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn put(key: &[u8], value_len: usize, seed: u64) -> Rec {
    Rec {
        kind: RecordKind::Put,
        key: key.to_vec(),
        value: pattern(seed, value_len),
    }
}

fn tombstone(key: &[u8]) -> Rec {
    Rec {
        kind: RecordKind::Tombstone,
        key: key.to_vec(),
        value: Vec::new(),
    }
}

/// Segment contents used for the footer and scan seeds: (segment id, block size, groups).
fn segments() -> Vec<(u64, u32, Vec<Vec<Rec>>)> {
    vec![
        (1, 512, vec![vec![put(b"a", 1, 1)]]),
        (
            3,
            512,
            vec![
                vec![put(b"a", 1, 2), put(b"bb", 5000, 3)],
                vec![put(b"c", 0, 4)],
                vec![tombstone(b"a"), put(b"d", 4, 5)],
            ],
        ),
        (
            7,
            4096,
            vec![
                vec![put(b"photo/1", 100, 6), put(b"photo/2", 4096, 7)],
                vec![put(b"photo/1", 8193, 8), tombstone(b"photo/2")],
            ],
        ),
        (
            0x0123_4567_89ab_cdef,
            1024,
            (0..6)
                .map(|g| vec![put(format!("key-{g}").as_bytes(), 3 * g, g as u64)])
                .collect(),
        ),
        (
            9,
            512,
            vec![vec![put(&[0xff; 64], 4095, 9), put(b"z", 4097, 10)]],
        ),
    ]
}

fn record_seeds() -> Vec<Vec<u8>> {
    let cases: &[(u64, u64, RecordKind, &[u8], usize)] = &[
        (1, 64, RecordKind::Put, b"k", 0),
        (1, 64, RecordKind::Put, b"key", 1),
        (7, 4096, RecordKind::Put, b"some-key", 100),
        (7, 4096, RecordKind::Tombstone, b"gone", 0),
        (3, 100_000, RecordKind::Put, b"chunk", 4096),
        (3, 100_000, RecordKind::Put, b"chunks", 4097),
        (u64::MAX, u64::MAX - 1, RecordKind::Put, &[0xAB; 64], 9000),
    ];
    let mut seeds: Vec<Vec<u8>> = cases
        .iter()
        .enumerate()
        .map(|(i, &(segment, offset, kind, key, len))| {
            let place = RecordPlace { segment, offset };
            let mut s = Vec::new();
            s.extend_from_slice(&segment.to_le_bytes());
            s.extend_from_slice(&offset.to_le_bytes());
            s.extend(encode_record(
                place,
                kind,
                1000 + i as u64,
                key,
                &pattern(i as u64, len),
            ));
            s
        })
        .collect();
    seeds.extend((0..4).map(|i| pattern(100 + i, 16 + 40 * i as usize)));
    seeds
}

fn footer_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = segments()
        .iter()
        .map(|(id, block, groups)| seal(*id, *block, &segment_image(*id, *block, 1, groups)))
        .collect();
    // The same trailer behind an explicit file length (the target's second reading).
    let last = seeds[1].clone();
    let mut s = (last.len() as u64).to_le_bytes().to_vec();
    s.extend_from_slice(&last[last.len() - 64..]);
    seeds.push(s);
    seeds.extend((0..4).map(|i| pattern(200 + i, 32 + 64 * i as usize)));
    seeds
}

fn header_seeds() -> Vec<Vec<u8>> {
    BLOCK_SIZES
        .iter()
        .enumerate()
        .map(|(i, &block_size)| {
            SegmentHeader {
                segment: [0, 1, 42, u64::MAX][i % 4],
                block_size,
            }
            .encode()
            .to_vec()
        })
        .collect()
}

fn scan_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for (id, block, groups) in segments() {
        let image = segment_image(id, block, 1, &groups);
        // Unsealed, torn in the middle of the last record, and sealed.
        let torn = image.written.last().map_or(64, |w| (w.offset + w.end) / 2);
        seeds.push(image.bytes[..torn as usize].to_vec());
        seeds.push(seal(id, block, &image));
        seeds.push(image.bytes);
    }
    seeds.extend((0..4).map(|i| pattern(300 + i, 64 + 300 * i as usize)));
    seeds
}

/// Stored bytes of compressed values (text and random, in both frame table layouts), for the
/// frame decoders.
fn frames_seeds() -> Vec<Vec<u8>> {
    use podstore::format::frames::{encode_framed, to_leading_layout};
    let mut out = Vec::new();
    for (len, frame) in [
        (1usize, 4096u32),
        (4095, 4096),
        (4097, 4096),
        (20_000, 4096),
        (70_000, 65536),
    ] {
        let text: Vec<u8> = (0..len).map(|i| b"the quick brown fox "[i % 20]).collect();
        let random: Vec<u8> = (0..len as u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect();
        for value in [text, random] {
            let trailing = encode_framed(&value, frame);
            let leading = to_leading_layout(&trailing);
            for stored in [trailing, leading] {
                let mut seed = (stored.len() as u64).to_le_bytes().to_vec();
                seed.extend_from_slice(&(1u64 << 16 | 0).to_le_bytes()); // frames 0..1
                seed.extend_from_slice(&stored);
                out.push(seed);
            }
        }
    }
    out
}
