//! Flipped and zeroed bytes in sealed segments: reported as `Error::Corruption`, never returned
//! as data.

use std::io::{Read, Seek, SeekFrom};

use podstore::format::footer::TRAILER_LEN;
use podstore::format::record::RECORD_HEADER_LEN;
use podstore::{Durability, Error, IoMode, Store};
use tempfile::TempDir;

use crate::common::files::{read_segments, segment_name, store_with};
use crate::common::records::{CHUNK, Rec, footer_start, scan_records, trailer};
use crate::common::store::{MODES, mode_name, show_key};
use crate::support::{
    BLOCK, assert_corrupt, assert_reads, check_options, describe, open, options, value_for,
};

/// Index in `Fixture::values` of the multi-chunk value.
const BIG: usize = 2;

/// A closed store of one sealed segment and a copy of its bytes.
struct Fixture {
    mode: IoMode,
    segment: u64,
    bytes: Vec<u8>,
    values: Vec<(Vec<u8>, Vec<u8>)>,
    recs: Vec<Rec>,
}

impl Fixture {
    fn new(mode: IoMode) -> Fixture {
        let sizes: [(&str, usize); 5] = [
            ("alpha", 100),
            ("beta", 5000),
            ("big", 12 * CHUNK as usize + 100),
            ("empty", 0),
            ("omega", 3000),
        ];
        let values: Vec<(Vec<u8>, Vec<u8>)> = sizes
            .iter()
            .map(|&(k, len)| (k.as_bytes().to_vec(), value_for(k.as_bytes(), 0, len)))
            .collect();
        let dir = TempDir::new().unwrap();
        let store = open(dir.path(), mode);
        for (k, v) in &values {
            store.put(k, v).unwrap();
        }
        store.close().unwrap();
        let mut segments = read_segments(dir.path());
        assert_eq!(segments.len(), 1);
        let (segment, bytes) = segments.pop().unwrap();
        let recs = scan_records(segment, &bytes);
        assert_eq!(recs.len(), values.len());
        Fixture {
            mode,
            segment,
            bytes,
            values,
            recs,
        }
    }

    /// A store directory holding the segment with `damage` applied to its bytes.
    fn damaged(&self, damage: impl FnOnce(&mut [u8])) -> TempDir {
        let mut bytes = self.bytes.clone();
        damage(&mut bytes);
        store_with([(self.segment, &bytes[..])])
    }

    /// The store with byte `at` flipped.
    fn flipped(&self, at: u64) -> TempDir {
        self.damaged(|b| b[at as usize] ^= 0x10)
    }

    fn ctx(&self, what: &str) -> String {
        format!("{}: {what}", mode_name(self.mode))
    }

    /// Asserts every value except `except` reads back intact.
    fn assert_others_intact(&self, store: &Store, except: usize, ctx: &str) {
        for (i, (k, v)) in self.values.iter().enumerate() {
            if i != except {
                assert_reads(store, k, Some(v), ctx);
            }
        }
    }

    /// Asserts that value `i`, whose chunk `bad` is damaged, fails with Corruption pointing
    /// inside its record, that range reads of the other chunks succeed and range reads touching
    /// `bad` fail, and that every other value reads back intact.
    fn assert_chunk_detected(&self, store: &Store, i: usize, bad: u64, ctx: &str) {
        let (key, value) = &self.values[i];
        let rec = &self.recs[i];
        let offset = assert_corrupt(store.get(key), self.segment, rec.offset, rec.end, ctx);
        assert_eq!(
            offset,
            rec.value_offset + bad * CHUNK,
            "{ctx}: offset of the damaged chunk"
        );
        let len = rec.value_len;
        for c in 0..rec.chunks() {
            let range = c * CHUNK..((c + 1) * CHUNK).min(len);
            let got = store.get_range(key, range.clone());
            let ctx = format!("{ctx}: get_range {range:?}");
            if c == bad {
                assert_corrupt(got, self.segment, rec.offset, rec.end, &ctx);
            } else {
                let got = got.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                let want = &value[range.start as usize..range.end as usize];
                assert!(got.as_deref() == Some(want), "{ctx}: wrong bytes");
            }
        }
        // A small range reaching into the damaged chunk from the one before it.
        let start = (bad * CHUNK).saturating_sub(3);
        let range = start..(bad * CHUNK + 3).min(len);
        let ctx2 = format!("{ctx}: get_range {range:?}");
        assert_corrupt(
            store.get_range(key, range),
            self.segment,
            rec.offset,
            rec.end,
            &ctx2,
        );
        self.assert_others_intact(store, i, ctx);
    }

    /// Asserts that no key reads back wrong; returns the keys whose damage was detected.
    fn assert_never_wrong(&self, store: &Store, ctx: &str) -> Vec<String> {
        let mut detected = Vec::new();
        for (k, v) in &self.values {
            match store.get(k) {
                Ok(Some(got)) if got == *v => {}
                Err(Error::Corruption { segment, .. }) if segment == self.segment => {
                    detected.push(show_key(k))
                }
                Ok(got) => panic!(
                    "{ctx}: key {} read back WRONG: {} instead of {}",
                    show_key(k),
                    describe(got.as_deref()),
                    describe(Some(v))
                ),
                Err(e) => panic!("{ctx}: key {}: unexpected error {e}", show_key(k)),
            }
        }
        detected
    }
}

#[test]
fn flipped_value_byte_is_reported_as_corruption() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let big = &fx.recs[BIG];
        let cases = [
            (0, 0, fx.recs[0].value_offset + 50),
            (1, 1, fx.recs[1].value_offset + CHUNK + 7),
            (BIG, 3, big.value_offset + 3 * CHUNK + 123),
            (BIG, 0, big.value_offset),
            (BIG, 12, big.table_offset - 1),
        ];
        for (i, chunk, at) in cases {
            let ctx = fx.ctx(&format!("value byte {at} of record {i} flipped"));
            let dir = fx.flipped(at);
            let store = open(dir.path(), mode);
            fx.assert_chunk_detected(&store, i, chunk, &ctx);
        }
    }
}

#[test]
fn flipped_chunk_crc_is_reported_as_corruption() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        for (i, chunk, byte) in [(BIG, 2, 1), (BIG, 12, 3), (1, 1, 0), (0, 0, 2)] {
            let at = fx.recs[i].table_offset + 4 * chunk + byte;
            let ctx = fx.ctx(&format!(
                "crc of chunk {chunk} of record {i} flipped at {at}"
            ));
            let dir = fx.flipped(at);
            let store = open(dir.path(), mode);
            fx.assert_chunk_detected(&store, i, chunk, &ctx);
        }
    }
}

/// Reads verify the value chunks (bound to the segment and record offset) but not the record
/// header, which the index does not need (it comes from the footer). A flipped header byte in a
/// sealed segment may therefore go unnoticed by `get`; what is guaranteed is that no wrong bytes
/// are returned.
#[test]
fn flipped_record_header_byte_never_returns_wrong_bytes() {
    let fields: [(&str, u64); 9] = [
        ("magic", 0),
        ("version", 4),
        ("kind", 5),
        ("flags", 6),
        ("key length", 8),
        ("header crc", 12),
        ("value length", 16),
        ("sequence", 24),
        ("key", RECORD_HEADER_LEN as u64 + 1),
    ];
    for mode in MODES {
        let fx = Fixture::new(mode);
        for i in [1, BIG] {
            for (field, off) in fields {
                let at = fx.recs[i].offset + off;
                let ctx = fx.ctx(&format!("{field} of record {i} flipped at {at}"));
                let dir = fx.flipped(at);
                let store = open(dir.path(), mode);
                let detected = fx.assert_never_wrong(&store, &ctx);
                if detected.is_empty() {
                    eprintln!("note: {ctx}: not detected by get (values intact)");
                } else {
                    eprintln!("note: {ctx}: detected for {detected:?}");
                }
            }
        }
    }
}

#[test]
fn flipped_footer_or_trailer_byte_is_rescanned_or_reported() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let len = fx.bytes.len() as u64;
        let trailer = trailer(&fx.bytes).unwrap();
        let table = trailer.table_offset;
        let trailer_at = len - TRAILER_LEN as u64;
        let places = [
            ("key section magic", footer_start(&fx.bytes)),
            ("first key block's count", footer_start(&fx.bytes) + 8),
            ("first key", footer_start(&fx.bytes) + 11),
            ("fence-key tree root", table - 1),
            ("table magic", table),
            ("first entry's record offset", table + 8),
            ("first entry's value length", table + 16),
            ("middle of the table", table + trailer.table_len / 2),
            ("last key byte of the table", table + trailer.table_len - 1),
            ("trailer magic", trailer_at),
            ("trailer segment id", trailer_at + 8),
            ("trailer entry count", trailer_at + 16),
            ("trailer table offset", trailer_at + 24),
            ("trailer data end", trailer_at + 40),
            ("trailer table crc", trailer_at + 48),
            ("trailer crc", len - 1),
        ];
        for (what, at) in places {
            let ctx = fx.ctx(&format!("{what} flipped at {at}"));
            let dir = fx.flipped(at);
            match Store::open_with(dir.path(), check_options(mode)) {
                Ok(store) => {
                    // An invalid footer is ignored and rebuilt by a scan of intact records.
                    let report = store.recovery();
                    assert_eq!(report.recovered.len(), 1, "{ctx}: {report:?}");
                    assert_eq!(report.recovered[0].segment, fx.segment, "{ctx}");
                    let last_end = fx.recs.last().unwrap().end;
                    assert_eq!(report.recovered[0].data_end, last_end, "{ctx}");
                    fx.assert_others_intact(&store, usize::MAX, &ctx);
                    assert_eq!(store.len(), fx.values.len(), "{ctx}");
                    store.close().unwrap();
                    let store = open(dir.path(), mode);
                    assert!(
                        store.recovery().recovered.is_empty(),
                        "{ctx}: rebuilt footer"
                    );
                    fx.assert_others_intact(&store, usize::MAX, &format!("{ctx}, reopened"));
                }
                Err(Error::Corruption { segment, .. }) => {
                    assert_eq!(segment, fx.segment, "{ctx}");
                    eprintln!("note: {ctx}: open refused with Corruption");
                }
                Err(e) => panic!("{ctx}: unexpected error {e}"),
            }
        }
    }
}

/// A sealed segment that is not the newest was not being written at a crash: the next segment
/// got data only after this one's footer was written. If its footer and one of its records are
/// both damaged, the default open refuses the store (its catalog lists the segment as sealed);
/// salvage must not drop the intact records after the damaged one (nor cut them off the file):
/// the damaged key reads as Corruption and every other key as written.
#[test]
fn damaged_footer_and_record_in_an_older_segment_lose_no_intact_record() {
    for mode in MODES {
        let dir = TempDir::new().unwrap();
        let values: Vec<(Vec<u8>, Vec<u8>)> = (0..14)
            .map(|i| {
                let key = format!("s{i:02}").into_bytes();
                let value = value_for(&key, 0, 100_000);
                (key, value)
            })
            .collect();
        let store = open(dir.path(), mode);
        for (k, v) in &values {
            store.put(k, v).unwrap();
        }
        store.close().unwrap();
        let segments = read_segments(dir.path());
        assert!(segments.len() >= 2, "the values should fill two segments");
        let (id, bytes) = &segments[0];
        let recs = scan_records(*id, bytes);
        let victim = &recs[recs.len() / 2];
        let mut damaged = bytes.clone();
        damaged[(victim.value_offset + 10) as usize] ^= 0x10;
        damaged[bytes.len() - TRAILER_LEN + 20] ^= 0x10;
        std::fs::write(dir.path().join(segment_name(*id)), &damaged).unwrap();

        let ctx = format!(
            "{}: trailer and record {} ({}) of older segment {id} flipped",
            mode_name(mode),
            recs.len() / 2,
            show_key(&victim.key)
        );
        // Two faults in a file the catalog lists as sealed: the default open refuses the store;
        // salvage keeps every intact record and reports the file.
        let store = crate::common::store::open_salvaging(
            dir.path(),
            check_options(mode),
            &[(segment_name(*id), podstore::FileProblem::FooterDamaged)],
        );
        for (k, v) in values.iter().filter(|(k, _)| *k != victim.key) {
            assert_reads(&store, k, Some(v), &ctx);
        }
        let got = store.get(&victim.key);
        assert_corrupt(got, *id, victim.offset, victim.end, &ctx);
    }
}

#[test]
fn zeroed_block_inside_a_big_value_fails_get_and_reader() {
    for mode in MODES {
        let fx = Fixture::new(mode);
        let rec = &fx.recs[BIG];
        let (key, value) = &fx.values[BIG];
        let zero_at = (rec.value_offset + 5 * CHUNK).next_multiple_of(BLOCK);
        assert!(zero_at + BLOCK <= rec.table_offset);
        let first_bad = (zero_at - rec.value_offset) / CHUNK;
        let last_bad = (zero_at + BLOCK - 1 - rec.value_offset) / CHUNK;
        let ctx = fx.ctx(&format!(
            "block at {zero_at} zeroed (chunks {first_bad}..={last_bad})"
        ));
        let dir = fx.damaged(|b| b[zero_at as usize..(zero_at + BLOCK) as usize].fill(0));
        let store = open(dir.path(), mode);

        let offset = assert_corrupt(store.get(key), fx.segment, rec.offset, zero_at + 1, &ctx);
        assert_eq!(offset, rec.value_offset + first_bad * CHUNK, "{ctx}");
        fx.assert_others_intact(&store, BIG, &ctx);
        let before = 0..first_bad * CHUNK;
        let after = (last_bad + 1) * CHUNK..rec.value_len;
        for range in [before.clone(), after.clone()] {
            let got = store.get_range(key, range.clone()).unwrap();
            let want = &value[range.start as usize..range.end as usize];
            assert!(got.as_deref() == Some(want), "{ctx}: get_range {range:?}");
        }

        // A reader streams the chunks before the damage, then fails with InvalidData.
        let mut reader = store.reader(key).unwrap().unwrap();
        let mut buf = vec![0u8; CHUNK as usize];
        for c in 0..first_bad {
            reader.read_exact(&mut buf).unwrap();
            let at = (c * CHUNK) as usize;
            assert!(
                buf == value[at..at + CHUNK as usize],
                "{ctx}: reader chunk {c}"
            );
        }
        let err = reader
            .read(&mut buf)
            .expect_err("read over the zeroed block");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{ctx}: {err}");
        let inner = err.get_ref().and_then(|e| e.downcast_ref::<Error>());
        assert!(
            matches!(inner, Some(Error::Corruption { segment, .. }) if *segment == fx.segment),
            "{ctx}: reader error {err:?}"
        );
        // Reading the whole value in one go fails the same way.
        let mut whole = store.reader(key).unwrap().unwrap();
        let err = std::io::copy(&mut whole, &mut std::io::sink()).expect_err("copy");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{ctx}: {err}");
        // After the damage the reader works again.
        reader.seek(SeekFrom::Start(after.start)).unwrap();
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert!(
            rest == value[after.start as usize..],
            "{ctx}: reader after the damage"
        );
    }
}

/// A footer whose crcs verify but which this build cannot decode was written whole, by another
/// writer: opening refuses with Corruption rather than taking the file for unsealed (which, for a
/// blob file, would remove it).
#[test]
fn a_whole_footer_that_does_not_decode_refuses_to_open() {
    use podstore::format::footer::{decode_footer, key_section, v1::encode_footer_v1};
    let dir = TempDir::new().unwrap();
    let opts = options(IoMode::Direct, Durability::Sync).large_value_threshold(64 << 10);
    let store = Store::open_with(dir.path(), opts.clone()).unwrap();
    store.put(b"big", vec![9u8; 100 << 10]).unwrap();
    store.close().unwrap();
    let blob = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("blob-")
        })
        .expect("the large value has a blob file");
    let mut bytes = std::fs::read(&blob).unwrap();
    let len = bytes.len() as u64;
    let t = trailer(&bytes).unwrap();
    let table = &bytes[t.table_offset as usize..(t.table_offset + t.table_len) as usize];
    let (start, _) = key_section(&t, table)
        .unwrap()
        .expect("a footer of version 2");
    let mut entries = decode_footer(&t, &bytes[start as usize..], start).unwrap();
    // A footer of version 1 (which stores flags whole) with a flag no writer sets: both its
    // crcs verify.
    entries[0].flags = 0x8000;
    let footer = encode_footer_v1(t.segment, t.data_end, start, t.block_size, &entries);
    assert_eq!(start + footer.len() as u64, len);
    bytes[start as usize..].copy_from_slice(&footer);
    std::fs::write(&blob, &bytes).unwrap();

    match Store::open_with(dir.path(), opts) {
        Err(Error::Corruption { segment, .. }) => assert_eq!(segment, t.segment),
        other => panic!("expected Corruption, got {other:?}"),
    }
    assert!(blob.exists(), "the blob file must not be removed");
}
