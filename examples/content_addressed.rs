//! A content-addressed store: values keyed by a digest of their bytes, written with
//! `put_if_absent` ("already there" is success), garbage-collected with `delete`, and the space
//! given back by compaction, watched through `Store::stats`.
//!
//! Run: `cargo run --example content_addressed [DIR]`
//!
//! Without DIR the store lives in a fresh temporary directory, removed at the end. A given DIR
//! must be new, empty or a podstore store; the store is left there.
//!
//! The digest here is a 64-bit FNV-1a, enough for an example; a real content-addressed store
//! uses a cryptographic hash (SHA-256, BLAKE3) so that distinct contents never share a key.

mod common;

use common::{Args, Failure, finish, size};
use podstore::{Options, Stats};

const USAGE: &str = "content_addressed [DIR]";

fn digest(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let dir = Args::parse(USAGE, &[], &[], 1)?.store_dir("content_addressed")?;
    // Small segments so that this small example has sealed segments to compact.
    let store = dir.open(Options::default().segment_size(1 << 20))?;

    // Ingest 200 chunks of 16 KiB, each twice: the second put of a content finds it there.
    let mut keys = Vec::new();
    let (mut written, mut deduplicated) = (0, 0);
    for round in 1..=2 {
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
            "round {round}: {written} chunks written so far, {deduplicated} found already there"
        );
    }

    // Garbage-collect nine chunks in ten (no longer referenced by anything).
    let doomed: Vec<&String> = keys
        .iter()
        .filter(|k| !k.ends_with('0'))
        .take(180)
        .collect();
    for key in &doomed {
        store.delete(key.as_bytes())?;
    }
    println!("deleted {} chunks", doomed.len());
    show_space("after the deletes", &store.stats());

    // The background compactor would get to it; `compact` does it now.
    let report = store.compact()?;
    println!(
        "compact(): {} segments compacted, {} of live records copied forward, {} of files freed",
        report.segments_compacted,
        size(report.bytes_copied),
        size(report.bytes_freed)
    );
    let after = store.stats();
    show_space("after compaction", &after);
    println!(
        "write amplification {:.2} (bytes compaction wrote per byte puts and deletes wrote, \
         since open: {} / {})",
        after.write_amplification(),
        size(after.compaction_bytes_written),
        size(after.user_bytes_written)
    );

    let mut checked = 0;
    for key in &keys {
        if let Some(chunk) = store.get(key.as_bytes())? {
            assert_eq!(digest(&chunk), *key, "a chunk is addressed by its content");
            checked += 1;
        }
    }
    println!("{checked} chunks left, each read back and matching its digest");
    store.close()?;
    println!("{}", dir.farewell());
    Ok(())
}

fn show_space(when: &str, stats: &Stats) {
    println!(
        "{when}: {} keys; {} live, {} dead, {} on disk",
        stats.live_keys,
        size(stats.live_bytes),
        size(stats.dead_bytes),
        size(stats.disk_bytes)
    );
}
