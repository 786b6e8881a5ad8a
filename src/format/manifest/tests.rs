use proptest::prelude::*;

use super::*;

fn file(id: u64, kind: FileKind, length: u64, crc: u32, epoch: u64) -> ManifestFile {
    ManifestFile {
        id,
        kind,
        length,
        crc,
        epoch,
    }
}

fn sample() -> Manifest {
    Manifest {
        number: 7,
        epoch: 3,
        writer: 0x1234_5678_9abc_def0,
        max_seq: 1_700_000_000_000_123,
        next_file_id: 42,
        evicted: Some((9, FileKind::Blob, 1_700_000_000_000_001)),
        files: vec![
            file(1, FileKind::Log, 4 << 20, 0xdead_beef, 1),
            file(5, FileKind::Blob, 3 << 20, 7, 3),
            file(41, FileKind::Log, 8192, 0, 2),
        ],
        closed: true,
        claim: false,
        after_close: false,
        inline: BTreeMap::new(),
    }
}

/// [`sample`] with the bytes of a fourth file in the manifest.
fn sample_inline() -> Manifest {
    let mut m = sample();
    let bytes: Arc<[u8]> = (0..300u32).map(|i| (i * 7) as u8).collect();
    m.files.push(file(
        41,
        FileKind::Log,
        bytes.len() as u64,
        crc32fast::hash(&bytes),
        3,
    ));
    m.files[2].id = 40;
    m.inline.insert(41, bytes);
    m
}

fn arb_manifest() -> impl Strategy<Value = Manifest> {
    let files = proptest::collection::btree_map(
        0u64..1000,
        (
            any::<bool>(),
            any::<u64>(),
            any::<u32>(),
            any::<u64>(),
            // Some: the file's bytes, in the manifest.
            prop::option::weighted(0.3, proptest::collection::vec(any::<u8>(), 0..64)),
        ),
        0..20,
    );
    (
        any::<[u64; 4]>(),
        prop::option::of((any::<u64>(), any::<bool>(), 1u64..)),
        files,
        // (closed, claim, after a close): the combinations a writer makes.
        prop::sample::select(vec![
            (false, false, false),
            (true, false, false),
            (false, true, false),
            (false, true, true),
        ]),
    )
        .prop_map(
            |([number, epoch, writer, max_seq], evicted, files, (closed, claim, after_close))| {
                let mut inline = BTreeMap::new();
                Manifest {
                    number,
                    epoch,
                    writer,
                    max_seq,
                    next_file_id: 1000,
                    evicted: evicted.map(|(id, blob, w)| {
                        (id, if blob { FileKind::Blob } else { FileKind::Log }, w)
                    }),
                    files: files
                        .into_iter()
                        .map(|(id, (blob, length, crc, epoch, bytes))| {
                            let kind = if blob { FileKind::Blob } else { FileKind::Log };
                            match bytes {
                                Some(bytes) => {
                                    let f = file(
                                        id,
                                        kind,
                                        bytes.len() as u64,
                                        crc32fast::hash(&bytes),
                                        epoch,
                                    );
                                    inline.insert(id, Arc::from(bytes));
                                    f
                                }
                                None => file(id, kind, length, crc, epoch),
                            }
                        })
                        .collect(),
                    closed,
                    claim,
                    after_close,
                    inline,
                }
            },
        )
}

#[test]
fn a_manifest_round_trips_and_has_the_documented_length() {
    let m = sample();
    let bytes = encode(&m);
    assert_eq!(
        bytes.len(),
        MANIFEST_HEADER_LEN + 3 * MANIFEST_ENTRY_LEN + MANIFEST_TRAILER_LEN
    );
    assert_eq!(decode(&bytes), Ok(m));
    let empty = Manifest {
        number: 1,
        epoch: 1,
        next_file_id: 1,
        ..Manifest::default()
    };
    assert_eq!(decode(&encode(&empty)), Ok(empty));
    let m = sample_inline();
    let bytes = encode(&m);
    assert_eq!(
        bytes.len(),
        MANIFEST_HEADER_LEN + 4 * MANIFEST_ENTRY_LEN + 300 + MANIFEST_TRAILER_LEN
    );
    assert_eq!(
        bytes[MANIFEST_HEADER_LEN + 3 * MANIFEST_ENTRY_LEN + entry::FLAGS],
        1
    );
    assert_eq!(decode(&bytes), Ok(m));
}

#[test]
fn a_manifest_under_another_number_is_refused_and_the_newest_name_is_found() {
    let m = sample();
    let bytes = encode(&m);
    assert_eq!(decode_numbered(&bytes, m.number), Ok(m.clone()));
    assert!(matches!(
        decode_numbered(&bytes, m.number + 1),
        Err(Corruption::InvalidField { value, .. }) if value == m.number
    ));
    let under = "p/manifest/";
    let listed = [
        ("p/manifest/00000000000000000007", 70),
        ("p/manifest/00000000000000000012", 120),
        ("p/manifest/12", 1), // not 20 digits
        ("p/manifest/0000000000000000009x", 1),
        ("p/data/00000000000000000099", 1),
    ];
    assert_eq!(newest_listed(listed, under), Some((12, 120)));
    assert_eq!(newest_listed([("p/manifest/x", 1)], under), None);
}

/// `b` with its trailer's crc32 made right again.
fn reseal(mut b: Vec<u8>) -> Vec<u8> {
    let n = b.len() - MANIFEST_TRAILER_LEN;
    let crc = crc32fast::hash(&b[..n]);
    b[n..].copy_from_slice(&crc.to_le_bytes());
    b
}

#[test]
fn version_1_and_2_manifests_are_read() {
    // Versions 1 and 2 have version 3's layout without files in the manifest
    // (docs/design-remote.md, "Fencing", "Files in the manifest"); a prefix written before
    // opens.
    let m = Manifest {
        closed: false,
        ..sample()
    };
    let b = encode(&m);
    assert_eq!(b[header::VERSION..header::VERSION + 4], 3u32.to_le_bytes());
    for version in [1u32, 2] {
        let mut b = b.clone();
        b[header::VERSION..header::VERSION + 4].copy_from_slice(&version.to_le_bytes());
        assert_eq!(decode(&reseal(b)), Ok(m.clone()));
    }
}

#[test]
fn a_file_in_the_manifest_is_checked_against_its_entry() {
    let m = sample_inline();
    let good = encode(&m);
    let data = MANIFEST_HEADER_LEN + 4 * MANIFEST_ENTRY_LEN;
    // Its bytes changed, the manifest's own crc32 made right: the entry's crc32 catches it.
    let mut b = good.clone();
    b[data + 10] ^= 1;
    assert!(matches!(
        decode(&reseal(b)),
        Err(Corruption::ChecksumMismatch { .. })
    ));
    // One byte short or long.
    let mut b = good.clone();
    b.remove(data);
    assert!(decode(&reseal(b)).is_err());
    let mut b = good.clone();
    b.insert(data, 0);
    assert!(decode(&reseal(b)).is_err());
    // Carried by a version that has no such files.
    let mut b = good;
    b[header::VERSION] = 2;
    assert!(decode(&reseal(b)).is_err());
}

#[test]
fn every_flipped_bit_is_caught() {
    for good in [encode(&sample()), encode(&sample_inline())] {
        for bit in 0..good.len() * 8 {
            let mut b = good.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&b).is_err(), "bit {bit}");
        }
    }
}

#[test]
fn every_cut_and_every_extension_is_caught() {
    for good in [encode(&sample()), encode(&sample_inline())] {
        for len in 0..good.len() {
            assert!(decode(&good[..len]).is_err(), "cut at {len}");
        }
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; MANIFEST_ENTRY_LEN]);
        assert!(decode(&longer).is_err());
        // Longer, with the crc32 made right: bytes after the last file's are refused.
        let mut longer = good.clone();
        longer.insert(good.len() - MANIFEST_TRAILER_LEN, 0);
        assert!(decode(&reseal(longer)).is_err());
    }
}

/// Bytes that a writer never produces, each with a valid crc: the decoder checks the fields,
/// not only the checksum.
#[test]
fn fields_no_writer_produces_are_refused_even_under_a_valid_crc() {
    let good = encode(&sample());
    let first = MANIFEST_HEADER_LEN;
    let second = MANIFEST_HEADER_LEN + MANIFEST_ENTRY_LEN;
    type Change = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Change)> = vec![
        ("version 0", Box::new(|b| b[header::VERSION] = 0)),
        ("unknown flag", Box::new(|b| b[header::FLAGS] = 8)),
        (
            "a claim written at close",
            Box::new(|b| b[header::FLAGS] = FLAG_CLOSED | FLAG_CLAIM),
        ),
        (
            "after a close, not a claim",
            Box::new(|b| b[header::FLAGS] = FLAG_AFTER_CLOSE),
        ),
        (
            "a flag in version 1",
            Box::new(|b| {
                b[header::VERSION] = 1;
                b[header::FLAGS] = FLAG_CLAIM;
            }),
        ),
        ("padding", Box::new(|b| b[header::PAD + 1] = 1)),
        ("version 4", Box::new(|b| b[header::VERSION] = 4)),
        (
            "unknown entry flag",
            Box::new(move |b| b[first + entry::FLAGS] = 2),
        ),
        (
            "an entry flag in version 2",
            Box::new(move |b| {
                b[header::VERSION] = 2;
                b[first + entry::FLAGS] = ENTRY_IN_MANIFEST;
            }),
        ),
        ("header padding", Box::new(|b| b[header::PAD + 1] = 1)),
        ("count", Box::new(|b| b[header::COUNT] = 4)),
        ("huge count", Box::new(|b| b[header::COUNT + 3] = 0xff)),
        ("eviction kind", Box::new(|b| b[header::EVICTED_KIND] = 3)),
        (
            "watermark without file",
            Box::new(|b| b[header::EVICTED_KIND] = 0),
        ),
        ("entry kind", Box::new(move |b| b[first + entry::KIND] = 0)),
        (
            "entry padding",
            Box::new(move |b| b[first + entry::PAD] = 9),
        ),
        // The second entry's id equal to the first's: ids must grow.
        ("id order", Box::new(move |b| b[second + entry::ID] = 1)),
        // An id at or above the next file id.
        ("id range", Box::new(|b| b[header::NEXT_ID] = 41)),
    ];
    for (what, change) in cases {
        let mut b = good.clone();
        change(&mut b);
        assert!(decode(&reseal(b)).is_err(), "{what}");
    }
}

proptest! {
    #[test]
    fn any_manifest_round_trips(m in arb_manifest()) {
        prop_assert_eq!(decode(&encode(&m)), Ok(m));
    }

    #[test]
    fn any_damage_is_detected(
        m in arb_manifest(),
        at in any::<prop::sample::Index>(),
        xor in 1u8..,
    ) {
        let mut b = encode(&m);
        let i = at.index(b.len());
        b[i] ^= xor;
        prop_assert!(decode(&b).is_err());
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = decode(&b);
    }
}
