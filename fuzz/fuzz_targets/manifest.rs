//! The remote manifest: `format::manifest::decode` on arbitrary bytes, and on valid manifests
//! built from the input then damaged.
//!
//! Input: the raw bytes (seeds: valid manifests); the same bytes then drive an `Unstructured`
//! that builds a manifest, checks its round trip, changes one byte or cuts it, and checks that
//! the damage is refused, never decoded into another manifest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podstore::FileKind;
use podstore::format::manifest::{MANIFEST_VERSION, Manifest, ManifestFile, decode, encode};
use podstore_fuzz::{Unstructured, arbitrary};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = structured(&mut Unstructured::new(data));
});

fn raw(data: &[u8]) {
    if let Ok(m) = decode(data) {
        // What decoded is exactly what encodes to these bytes; a version-1 manifest (read,
        // never written) encodes as version 2 and decodes to the same manifest.
        if data[4..8] == MANIFEST_VERSION.to_le_bytes() {
            assert_eq!(encode(&m), data);
        } else {
            assert_eq!(decode(&encode(&m)), Ok(m));
        }
    }
}

fn kind(u: &mut Unstructured<'_>) -> arbitrary::Result<FileKind> {
    Ok(if u.arbitrary()? {
        FileKind::Blob
    } else {
        FileKind::Log
    })
}

fn structured(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let n: usize = u.int_in_range(0..=40)?;
    let mut id = 0u64;
    let mut files = Vec::with_capacity(n);
    let mut inline = std::collections::BTreeMap::new();
    for _ in 0..n {
        id += u.int_in_range(1..=1000)?;
        let mut f = ManifestFile {
            id,
            kind: kind(u)?,
            length: u.arbitrary()?,
            crc: u.arbitrary()?,
            epoch: u.arbitrary()?,
        };
        // Some files carried in the manifest (version 3), their length and crc32 theirs.
        if u.ratio(1, 4)? {
            let len: usize = u.int_in_range(0..=300)?;
            let bytes: Vec<u8> = u.bytes(len)?.to_vec();
            f.length = bytes.len() as u64;
            f.crc = crc32fast::hash(&bytes);
            inline.insert(id, std::sync::Arc::<[u8]>::from(bytes));
        }
        files.push(f);
    }
    let evicted = if u.arbitrary()? {
        Some((u.arbitrary()?, kind(u)?, u.int_in_range(1..=u64::MAX)?))
    } else {
        None
    };
    let mut m = Manifest {
        number: u.arbitrary()?,
        epoch: u.arbitrary()?,
        writer: u.arbitrary()?,
        max_seq: u.arbitrary()?,
        next_file_id: id + u.int_in_range(1..=1000)?,
        evicted,
        files,
        inline,
        ..Manifest::default()
    };
    // The flags as a writer sets them: closed, or a claim (made after a close or not).
    match u.int_in_range(0..=3u8)? {
        1 => m.closed = true,
        2 => m.claim = true,
        3 => (m.claim, m.after_close) = (true, true),
        _ => {}
    }
    let good = encode(&m);
    assert_eq!(decode(&good).as_ref(), Ok(&m));
    let mut bad = good.clone();
    if u.arbitrary()? {
        let at: usize = u.int_in_range(0..=bad.len() - 1)?;
        bad[at] ^= u.int_in_range(1..=255)?;
    } else {
        let len: usize = u.int_in_range(0..=bad.len() - 1)?;
        bad.truncate(len);
    }
    assert!(decode(&bad).is_err());
    Ok(())
}
