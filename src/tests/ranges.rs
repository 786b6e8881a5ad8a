//! Bytes read from the storage seam by range reads of large values (issue 37): a random 4 KiB
//! range reads the chunks it touches and little else, whether the value was read before or not,
//! with the read cache on or off; the same ranges read again read nothing; a stream of ranges
//! reads each piece once. Counted by the simulator (`SimStats::read_bytes`: what the reads
//! moved, whole aligned blocks as a direct read moves them), not timed.

use super::{new_sim, open, options};
use crate::Durability;
use crate::io::sim::{OpKind, Sim, SimConfig};

const KIB: u64 = 1 << 10;
const CHUNK: u64 = 4 * KIB;
/// The direct-read alignment of the simulated disk.
const SECTOR: u64 = 512;
const VALUES: u64 = 8;
const LEN: u64 = 3 << 20;

fn value(tag: u64) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ tag.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    (0..LEN)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn read_bytes(sim: &Sim) -> u64 {
    sim.stats().read_bytes
}

fn read_calls(sim: &Sim) -> u64 {
    let calls = sim.stats().calls;
    [OpKind::Read, OpKind::ReadEach]
        .iter()
        .map(|k| calls.get(k).copied().unwrap_or(0))
        .sum()
}

/// A store of [`VALUES`] values of [`LEN`] bytes (in blob files, kept in pieces by a 16 MiB
/// cache), closed and opened again: cold, no warm-up.
fn store(cache: u64) -> (Sim, crate::Store, Vec<Vec<u8>>) {
    let sim = new_sim(SimConfig::default());
    let opts = options(Durability::Sync)
        .cache_capacity(cache)
        .warm_cache(false);
    let store = open(&sim, opts.clone()).unwrap();
    let values: Vec<Vec<u8>> = (0..VALUES).map(value).collect();
    for (i, v) in values.iter().enumerate() {
        // Keys of several lengths: values start at several offsets from a sector.
        store.put(format!("v{i}{}", "k".repeat(i * 37)), v).unwrap();
    }
    store.close().unwrap();
    (sim.clone(), open(&sim, opts).unwrap(), values)
}

fn key(i: u64) -> String {
    format!("v{i}{}", "k".repeat(i as usize * 37))
}

/// A random trace of `n` 4 KiB ranges, at chunk boundaries when `aligned`; none in a value's
/// last 16 KiB, whose ranges read their crcs in the same read as their chunks, with the up to
/// 3 KiB of the table before them (`segment::value_reads`: one read, not two).
fn trace(n: usize, aligned: bool, seed: u64) -> Vec<(u64, u64)> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = (x >> 8) % (LEN - 16 * KIB);
            (x % VALUES, if aligned { at / CHUNK * CHUNK } else { at })
        })
        .collect()
}

/// Reads every range of `trace`, checks its bytes, and returns the most bytes any one read
/// moved and the total, leaving out (and counting) the reads that the store may take as part
/// of a stream: those whose value's two reads before them each started within 64 KiB of where
/// the read before ended (docs/design.md, "The read cache": the documented rule, modelled here
/// from the traces alone: `last` is, per value, where its last read ended and the run of near
/// reads up to it).
fn run(
    sim: &Sim,
    store: &crate::Store,
    values: &[Vec<u8>],
    trace: &[(u64, u64)],
    last: &mut [Option<(u64, u32)>],
) -> (u64, u64, usize) {
    let (mut most, mut total, mut streams) = (0, 0, 0);
    for &(i, at) in trace {
        let before = read_bytes(sim);
        let got = store.get_range(key(i), at..at + 4 * KIB).unwrap().unwrap();
        assert_eq!(
            got,
            values[i as usize][at as usize..(at + 4 * KIB) as usize]
        );
        let read = read_bytes(sim) - before;
        let run = match last[i as usize] {
            Some((end, run)) if at.abs_diff(end) <= 64 * KIB => run + 1,
            _ => 0,
        };
        last[i as usize] = Some((at + 4 * KIB, run));
        if run >= 2 {
            streams += 1;
            continue;
        }
        most = most.max(read);
        total += read;
    }
    (most, total, streams)
}

/// Random 4 KiB ranges, cold and read again, cache on and off: a range inside one chunk reads
/// at most 8 KiB (the chunk, a sector of crcs, the record's header and key, the sector the
/// unaligned chunk spills into); one across two chunks reads those two and at most four
/// sectors (the two crcs may lie in two). With the cache on, the same ranges again read
/// nothing.
#[test]
fn random_4k_ranges_read_their_chunks_and_no_more() {
    for cache in [16 << 20, 0] {
        for aligned in [true, false] {
            let (sim, store, values) = store(cache);
            let trace = trace(300, aligned, 0x5EED ^ cache);
            let bound = if aligned {
                8 * KIB
            } else {
                2 * CHUNK + 4 * SECTOR
            };
            let last = &mut vec![None; values.len()];
            let (most, total, streams) = run(&sim, &store, &values, &trace, last);
            let what = format!(
                "cache {cache}, aligned {aligned}: mean {} B, {streams} taken as streams",
                total / 300
            );
            assert!(most <= bound, "{what}: a read moved {most} B");
            // Random ranges of 3 MiB values land near twice in a row about once in 570 reads.
            assert!(streams <= 3, "{what}");
            // Read again: the values were read before; the reads stay as small.
            let (most, again, _) = run(&sim, &store, &values, &trace, last);
            if cache == 0 {
                assert!(most <= bound, "{what}: again, a read moved {most} B");
            } else {
                assert_eq!(again, 0, "{what}: the same ranges again read {again} B");
            }
            // New random ranges of values read before: as small as the first.
            let (most, _, _) = run(&sim, &store, &values, &self::trace(300, aligned, 77), last);
            assert!(most <= bound, "{what}: new ranges, a read moved {most} B");
        }
    }
}

/// A stream of 4 KiB ranges, each where the last ended, through 1 MiB of a value: read a piece
/// (64 KiB) at a time once the stream is seen, so in about one read call per piece, moving
/// about the bytes streamed; with the cache off, a read per range, each as small as its chunks.
#[test]
fn a_stream_of_ranges_reads_a_piece_at_a_time() {
    let (sim, store, values) = store(16 << 20);
    let start = 100 * KIB + 123;
    let streamed = 1 << 20;
    let (calls, bytes) = (read_calls(&sim), read_bytes(&sim));
    let trace: Vec<(u64, u64)> = (0..streamed / (4 * KIB))
        .map(|n| (3, start + n * 4 * KIB))
        .collect();
    run(&sim, &store, &values, &trace, &mut vec![None; values.len()]);
    let (calls, bytes) = (read_calls(&sim) - calls, read_bytes(&sim) - bytes);
    let pieces = streamed / (64 * KIB);
    assert!(
        // Pieces 1 to 17, a crc sector per 512 KiB, and the first reads (the record's header
        // and key, before the stream is seen).
        calls <= pieces + 10,
        "{calls} read calls for {} ranges ({pieces} pieces)",
        trace.len()
    );
    assert!(
        bytes <= streamed + 2 * 64 * KIB + 16 * KIB,
        "{bytes} B read for {streamed} B streamed"
    );
}

/// A value streamed out in 8 KiB reads (what `std::io::copy` does into a writer that is not a
/// `Vec`: a file, a socket) through a `ValueReader` reads ahead in windows growing to 1 MiB
/// (the cache's pieces where it keeps the value in pieces, else the reader's own buffer): a few dozen
/// read calls for 3 MiB, where a read per piece made 58 and one (or two, with its crcs) per
/// 8 KiB 768; and every byte is right.
#[test]
fn a_value_reader_streams_in_growing_windows() {
    // 16 MiB keeps the 3 MiB values in pieces, 256 MiB would keep them whole (they are not in
    // it yet: read ahead into the reader's buffer), 0 keeps nothing.
    for cache in [16 << 20, 256 << 20, 0] {
        let (sim, store, values) = store(cache);
        let calls = read_calls(&sim);
        let mut reader = store.reader(key(5)).unwrap().unwrap();
        let (mut out, mut buf) = (Vec::new(), [0u8; 8192]);
        loop {
            let n = std::io::Read::read(&mut reader, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, values[5]);
        let calls = read_calls(&sim) - calls;
        // Windows of 64 KiB, 128 KiB ... 1 MiB: 7 for 3 MiB, each its chunks and its crcs.
        assert!(calls <= 24, "cache {cache}: {calls} read calls");
    }
}
