//! A content-addressed store: values keyed by a digest of their bytes, written with
//! `put_if_absent` ("already there" is success), garbage-collected with `delete`, and the space
//! given back by compaction, watched through `Store::stats`.
//!
//! Run: `cargo run --example content_addressed [DIR]` (default: a fresh directory under the
//! system temp dir).
//!
//! The digest here is a 64-bit FNV-1a, enough for an example; a real content-addressed store
//! uses a cryptographic hash (SHA-256, BLAKE3) so that distinct contents never share a key.

use podstore::{Options, Store};

fn digest(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

fn main() -> podstore::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("podstore-cas-{}", std::process::id()))
        });
    // Small segments so that this small example has sealed segments to compact.
    let store = Store::open_with(&dir, Options::default().segment_size(1 << 20))?;

    // Ingest 200 chunks of 16 KiB, each twice: the second put of a content finds it there.
    let mut keys = Vec::new();
    let (mut written, mut deduplicated) = (0, 0);
    for round in 0..2 {
        for i in 0..200u32 {
            let chunk: Vec<u8> = (0..16 << 10).map(|j| (i * 31 + j) as u8).collect();
            let key = digest(&chunk);
            if store.put_if_absent(key.as_bytes(), &chunk)? {
                written += 1;
                keys.push(key);
            } else {
                deduplicated += 1;
            }
        }
        println!(
            "after round {round}: {written} chunks written, {deduplicated} found already there"
        );
    }

    // Garbage-collect nine chunks in ten (no longer referenced by anything).
    for key in keys.iter().filter(|k| !k.ends_with('0')).take(180) {
        store.delete(key.as_bytes())?;
    }
    let before = store.stats();
    println!(
        "after deletes: {} keys, {} KiB live, {} KiB dead, {} KiB on disk",
        before.live_keys,
        before.live_bytes >> 10,
        before.dead_bytes >> 10,
        before.disk_bytes >> 10
    );

    // The background compactor would get to it; `compact` does it now.
    let report = store.compact()?;
    let after = store.stats();
    println!(
        "compacted {} segments ({} KiB copied): {} KiB on disk, write amplification {:.2}",
        report.segments_compacted,
        report.bytes_copied >> 10,
        after.disk_bytes >> 10,
        after.write_amplification()
    );
    for key in &keys {
        if let Some(chunk) = store.get(key.as_bytes())? {
            assert_eq!(digest(&chunk), *key, "a chunk is addressed by its content");
        }
    }
    store.close()?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
