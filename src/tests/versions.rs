//! `VERSIONS`, the durable reservation of sequence numbers: a version a reader saw is never given
//! again, even when the crash lost its record and the clock reads earlier after the restart.

use std::path::Path;

use super::{DIR, new_sim, open, options};
use crate::error::{DamagedFile, Error, FileProblem};
use crate::format::versions::{
    Reservation, SLOT_LEN, SLOT_STRIDE, VERSIONS_NAME, decode_file, encode_slot,
};
use crate::io::sim::{Sim, SimConfig, Survival};
use crate::io::storage::{OpenMode, Storage};
use crate::meta::CLOCK_SHIFT;
use crate::options::RecoveryMode;
use crate::segment::RESERVE_AHEAD;
use crate::{Durability, Version};

/// Steps this thread's clock by `micros` (negative: back) for the rest of the test.
fn shift_clock(micros: i64) {
    CLOCK_SHIFT.with(|c| c.set(c.get() + micros));
}

struct ClockReset;
impl Drop for ClockReset {
    fn drop(&mut self) {
        CLOCK_SHIFT.with(|c| c.set(0));
    }
}

fn versions_path() -> std::path::PathBuf {
    Path::new(DIR).join(VERSIONS_NAME)
}

fn read_versions(sim: &Sim) -> Vec<u8> {
    let f = sim
        .open(&versions_path(), OpenMode::Existing, false)
        .expect("VERSIONS exists");
    let mut buf = vec![0u8; f.len().unwrap() as usize];
    let n = f.read_at(&mut buf, 0).unwrap();
    buf.truncate(n);
    buf
}

fn write_versions(sim: &Sim, at: usize, bytes: &[u8]) {
    let f = sim
        .open(&versions_path(), OpenMode::Existing, false)
        .unwrap();
    assert_eq!(f.write_at(bytes, at as u64).unwrap(), bytes.len());
    f.sync_data().unwrap();
}

#[test]
fn a_version_lost_in_a_crash_is_not_given_again_with_the_clock_stepped_back() {
    let _reset = ClockReset;
    for (m, mode) in Survival::ALL.into_iter().enumerate() {
        let sim = new_sim(SimConfig::default());
        let store = open(&sim, options(Durability::Buffered)).unwrap();
        // Seen by a reader, never made durable: the crash loses its record.
        let seen = store.put("k", "lost").unwrap();
        assert_eq!(store.metadata("k").unwrap().unwrap().version(), seen);
        sim.crash_now();
        drop(store);
        let after = sim.after_crash(mode, 11 + m as u64);
        // The restart took less than the clock was stepped back by.
        shift_clock(-10_000_000);
        let store = open(&after, options(Durability::Sync)).unwrap();
        assert!(
            store.get("k").unwrap().is_none(),
            "{mode:?}: the record was lost"
        );
        let again = store.put("k", "new").unwrap();
        assert!(
            again > seen,
            "{mode:?}: {again} given after {seen}, which a reader saw before the crash"
        );
        // And a blob put (numbered outside the log) too.
        let blob = store.put("b", vec![7u8; super::LARGE].as_slice()).unwrap();
        assert!(blob > again, "{mode:?}");
        drop(store);
        CLOCK_SHIFT.with(|c| c.set(0));
        assert!(after.violations().is_empty(), "{:?}", after.violations());
    }
}

#[test]
fn a_clean_close_gives_the_unused_reservation_back() {
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, options(Durability::Sync)).unwrap();
    let v1 = store.put("k", "one").unwrap();
    let (_, open_res) = decode_file(&read_versions(&sim)).unwrap();
    assert!(
        open_res.reserved_through >= v1.0 + RESERVE_AHEAD,
        "a reservation reaches ahead: {open_res:?}, {v1}"
    );
    store.close().unwrap();
    let (_, closed) = decode_file(&read_versions(&sim)).unwrap();
    assert_eq!(closed.reserved_through, v1.0, "given back at close");
    assert!(closed.generation > open_res.generation);
    // Reopened at once: numbered from the clock, not from a second ahead of it.
    let store = open(&sim, options(Durability::Sync)).unwrap();
    let v2 = store.put("k", "two").unwrap();
    let now = crate::meta::clock_micros();
    assert!(v2 > v1 && v2.0 <= now, "{v1} {v2} {now}");
    // A store opened and closed without a write rewrites nothing more.
    store.close().unwrap();
    let before = read_versions(&sim);
    open(&sim, options(Durability::Sync))
        .unwrap()
        .close()
        .unwrap();
    assert_eq!(read_versions(&sim), before);
}

#[test]
fn a_torn_newest_slot_falls_back_to_the_reservation_before_it() {
    let _reset = ClockReset;
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, options(Durability::Sync)).unwrap();
    store.put("k", "one").unwrap();
    // Past the first reservation: a second one, in the other slot.
    shift_clock(2 * RESERVE_AHEAD as i64);
    let v2 = store.put("k", "two").unwrap();
    let (slot, r) = decode_file(&read_versions(&sim)).unwrap();
    assert_eq!((slot, r.generation), (1, 2));
    assert!(r.reserved_through > v2.0);
    // A crash tore the next write of slot 0 (whatever it held is garbage now).
    write_versions(&sim, 0, &[0xA5; SLOT_LEN]);
    sim.crash_now();
    drop(store);
    let after = sim.after_crash(Survival::DropAll, 5);
    shift_clock(-20_000_000);
    let store = open(&after, options(Durability::Sync)).unwrap();
    let v3 = store.put("k", "three").unwrap();
    assert!(v3.0 > r.reserved_through, "{v3} after {r:?}");
    // The torn slot was the one written next: the reservation is whole again.
    let (slot, r3) = decode_file(&read_versions(&after)).unwrap();
    assert_eq!((slot, r3.generation), (0, 3));
}

#[test]
fn a_versions_file_without_a_valid_slot_refuses_open_and_salvage_replaces_it() {
    let sim = new_sim(SimConfig::default());
    let store = open(&sim, options(Durability::Sync)).unwrap();
    let v1 = store.put("k", "one").unwrap();
    store.close().unwrap();
    let mut bad = encode_slot(Reservation {
        generation: 9,
        reserved_through: 1,
    });
    bad[20] ^= 1;
    write_versions(&sim, 0, &bad);
    write_versions(&sim, SLOT_STRIDE, &bad);
    match open(&sim, options(Durability::Sync)) {
        Err(Error::Damaged { files, .. }) => assert!(
            matches!(
                files.as_slice(),
                [DamagedFile { name, problem: FileProblem::VersionsCorrupt { .. } }]
                    if name == VERSIONS_NAME
            ),
            "{files:?}"
        ),
        other => panic!("open of a store with a damaged VERSIONS: {other:?}"),
    }
    // Nothing was changed by the refused open.
    assert_eq!(&read_versions(&sim)[..SLOT_LEN], &bad);
    let store = open(
        &sim,
        options(Durability::Sync).recovery_mode(RecoveryMode::Salvage),
    )
    .unwrap();
    assert!(
        store
            .recovery()
            .lost
            .iter()
            .any(|d| d.name == VERSIONS_NAME)
    );
    assert_eq!(store.get("k").unwrap().unwrap(), b"one");
    let v2 = store.put("k", "two").unwrap();
    assert!(v2 > v1);
    store.close().unwrap();
    let (_, r) = decode_file(&read_versions(&sim)).unwrap();
    assert_eq!(r.reserved_through, v2.0);
    // A clean store again.
    open(&sim, options(Durability::Sync)).unwrap();
}

#[test]
fn a_checkpoint_carries_a_reservation_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let store = crate::Store::open(&src).unwrap();
    let mut last = Version(0);
    for i in 0..10u32 {
        last = store.put(format!("k{i}"), "v").unwrap();
    }
    let dest = dir.path().join("cp");
    store.checkpoint(&dest).unwrap();
    let bytes = std::fs::read(dest.join(VERSIONS_NAME)).unwrap();
    let (_, r) = decode_file(&bytes).unwrap();
    assert!(r.reserved_through >= last.0, "{r:?} {last}");
    // Its own file, not a link to the source's (which is rewritten in place).
    let src_bytes = std::fs::read(src.join(VERSIONS_NAME)).unwrap();
    store.close().unwrap();
    assert_ne!(std::fs::read(src.join(VERSIONS_NAME)).unwrap(), src_bytes);
    assert_eq!(std::fs::read(dest.join(VERSIONS_NAME)).unwrap(), bytes);
    let cp = crate::Store::open(&dest).unwrap();
    assert!(cp.put("k0", "w").unwrap() > last);
}

#[test]
fn a_directory_holding_only_versions_is_not_foreign() {
    assert!(!crate::segment::is_foreign(VERSIONS_NAME));
    assert!(!crate::segment::is_foreign(
        crate::format::versions::VERSIONS_TMP
    ));
    // The record of the hot set, written at close, is the store's too; so is the record of
    // its remote prefix, written at its first open with a remote.
    for name in [
        crate::format::hotset::HOTSET_NAME,
        crate::format::hotset::HOTSET_TMP,
        crate::format::prefix_record::PREFIX_RECORD_NAME,
        crate::format::prefix_record::PREFIX_RECORD_TMP,
    ] {
        assert!(!crate::segment::is_foreign(name), "{name}");
    }
}
