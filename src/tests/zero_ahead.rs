//! The zero-ahead (`io::writer`, zeroes written and synced ahead of a segment's data, so that a
//! lone durable writer's fdatasyncs do not allocate) follows only the syncs a write waits for.
//! The store's own syncs (the background flush of buffered writes, eviction, compaction) start
//! none: zeroes ahead of them were written over by the buffered data that followed, and a disk
//! cache of 1 KiB values wrote 1.34 bytes per byte inserted where 1.11 was its due
//! (docs/benchmarks.md, "A disk cache against foyer").

use std::time::Duration;

use super::{new_sim, open, options};
use crate::Durability;
use crate::io::sim::SimConfig;

/// Bytes the simulation saw written, and the store's record bytes (`user_bytes_written`), for
/// `puts` values of `len` bytes in `durability`, the background flush every millisecond.
fn written(durability: Durability, puts: u64, len: usize, pause_every: u64) -> (u64, u64) {
    let sim = new_sim(SimConfig::default());
    let store = open(
        &sim,
        options(durability).flush_interval(Some(Duration::from_millis(1))),
    )
    .unwrap();
    for i in 0..puts {
        store
            .put(format!("key-{i:06}"), vec![i as u8; len])
            .unwrap();
        if i % pause_every == pause_every - 1 {
            // The background flush syncs the few writes since the last one, and the flush
            // thread is idle: what used to start the zero-ahead.
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let user = store.stats().user_bytes_written;
    store.close().unwrap();
    (sim.stats().written_bytes, user)
}

#[test]
fn the_background_flush_of_buffered_writes_starts_no_zero_ahead() {
    // 3 MiB of 2 KiB values in 1 MiB segments, a pause every 16 values (32 KiB).
    let (written, user) = written(Durability::Buffered, 1_500, 2048, 16);
    // Records, the footers, padding after each background sync (a block per 32 KiB), the
    // catalog: well under 1.3 times the records. Zeroes ahead would add up to a segment each.
    assert!(
        written < user + user * 3 / 10,
        "{written} bytes written for {user} bytes of records"
    );
}

#[test]
fn a_lone_durable_writer_still_gets_its_zero_ahead() {
    // 200 durable 2 KiB puts, each synced alone: the flush thread zeroes ahead of them.
    let (written, user) = written(Durability::Sync, 200, 2048, 10);
    // Each put is a block of its own (4 KiB for about 2 KiB of record), and zeroes ahead
    // of them: more than twice the records' bytes, and at least one zeroed megabyte.
    assert!(
        written > 2 * user + (1 << 20),
        "{written} bytes written for {user} bytes of records: no zeroes ahead"
    );
}
