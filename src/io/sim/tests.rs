//! Unit tests of the simulator's model: what a crash keeps, faults, direct-I/O checks.

use super::*;
use crate::io::aligned::AlignedBuf;

const DIR: &str = "/sim";

fn sim() -> Sim {
    let sim = Sim::new(SimConfig::default());
    sim.create_dir_all(Path::new(DIR)).unwrap();
    sim
}

fn block(fill: u8) -> AlignedBuf {
    let mut b = AlignedBuf::zeroed(4096, 4096);
    b.fill(fill);
    b
}

fn content(sim: &Sim, name: &str) -> Option<Vec<u8>> {
    let f = sim
        .open(&Path::new(DIR).join(name), OpenMode::Existing, false)
        .ok()?;
    let mut buf = vec![0u8; f.len().unwrap() as usize];
    assert_eq!(f.read_at(&mut buf, 0).unwrap(), buf.len());
    Some(buf)
}

#[test]
fn synced_data_and_names_survive_and_unsynced_do_not() {
    let sim = sim();
    let dir = Path::new(DIR);
    let a = sim.open(&dir.join("a"), OpenMode::CreateNew, true).unwrap();
    a.write_at(&block(1), 0).unwrap();
    a.sync_data().unwrap();
    // Synced data, but the name was never made durable: lost with the file.
    assert_eq!(content(&sim.after_crash(Survival::DropAll, 1), "a"), None);
    sim.sync_dir(dir).unwrap();
    a.write_at(&block(2), 4096).unwrap();
    let after = sim.after_crash(Survival::DropAll, 1);
    assert_eq!(content(&after, "a").unwrap(), vec![1u8; 4096]);
    // Everything pending kept: the live state.
    let all = sim.after_crash(Survival::TearLast { tear_align: 4096 }, 1);
    assert_eq!(
        content(&all, "a").unwrap().len(),
        4096,
        "the only pending write is torn"
    );
    // A removal is undone by a crash until the directory is synced.
    sim.remove_file(&dir.join("a")).unwrap();
    assert!(content(&sim, "a").is_none());
    assert_eq!(
        content(&sim.after_crash(Survival::DropAll, 1), "a").unwrap(),
        vec![1u8; 4096]
    );
    sim.sync_dir(dir).unwrap();
    assert_eq!(content(&sim.after_crash(Survival::DropAll, 1), "a"), None);
}

#[test]
fn rename_is_durable_after_the_directory_sync() {
    let sim = sim();
    let dir = Path::new(DIR);
    let f = sim
        .open(&dir.join("t"), OpenMode::CreateNew, false)
        .unwrap();
    f.write_at(b"x", 0).unwrap();
    f.sync_data().unwrap();
    sim.sync_dir(dir).unwrap();
    sim.rename(&dir.join("t"), &dir.join("u")).unwrap();
    let lost = sim.after_crash(Survival::DropAll, 1);
    assert_eq!(content(&lost, "t").unwrap(), b"x");
    assert_eq!(content(&lost, "u"), None);
    sim.sync_dir(dir).unwrap();
    let kept = sim.after_crash(Survival::DropAll, 1);
    assert_eq!(content(&kept, "u").unwrap(), b"x");
    assert_eq!(content(&kept, "t"), None);
}

#[test]
fn modes_keep_what_they_say() {
    let sim = sim();
    let dir = Path::new(DIR);
    let f = sim.open(&dir.join("f"), OpenMode::CreateNew, true).unwrap();
    sim.sync_dir(dir).unwrap();
    for i in 0..4u8 {
        f.write_at(&block(i + 1), i as u64 * 4096).unwrap();
    }
    let mut seen_prefixes = BTreeSet::new();
    let mut seen_partial = false;
    for seed in 0..64 {
        // Prefix: whole writes, in order, and nothing after a missing one.
        let c = content(&sim.after_crash(Survival::Prefix, seed), "f").unwrap();
        assert!(c.len().is_multiple_of(4096));
        for (i, b) in c.chunks(4096).enumerate() {
            assert_eq!(b, &*block(i as u8 + 1));
        }
        seen_prefixes.insert(c.len());
        // Torn: the first three whole, the fourth a 512-byte multiple short of whole.
        let c = content(
            &sim.after_crash(Survival::TearLast { tear_align: 512 }, seed),
            "f",
        )
        .unwrap();
        assert!(c.len() >= 3 * 4096 && c.len() < 4 * 4096 && c.len().is_multiple_of(512));
        // Random sectors: each sector is either its data or zero.
        let c = content(&sim.after_crash(Survival::RandomSectors, seed), "f").unwrap();
        for (i, s) in c.chunks(SECTOR).enumerate() {
            let want = (i * SECTOR / 4096) as u8 + 1;
            assert!(s.iter().all(|&b| b == want) || s.iter().all(|&b| b == 0));
            seen_partial |= s[0] == 0;
        }
    }
    assert_eq!(seen_prefixes.len(), 5, "0 to 4 writes kept");
    assert!(seen_partial);
}

#[test]
fn unaligned_direct_io_is_refused_and_recorded() {
    let sim = sim();
    let f = sim
        .open(&Path::new(DIR).join("d"), OpenMode::CreateNew, true)
        .unwrap();
    let b = block(1);
    assert!(f.write_at(&b[..4096], 512).is_err(), "offset");
    assert!(f.write_at(&b[..512], 0).is_err(), "length below the block");
    assert!(f.write_at(&b[1..4097 - 512], 0).is_err());
    let mut r = AlignedBuf::zeroed(8192, 4096);
    assert!(f.read_at(&mut r[1..513], 0).is_err(), "address");
    assert_eq!(sim.violations().len(), 4);
    f.write_at(&b, 0).unwrap();
    assert_eq!(f.read_at(&mut r[..512], 512).unwrap(), 512);
    assert_eq!(sim.violations().len(), 4);
}

#[test]
fn crash_point_freezes_and_faults_fire_once_or_stick() {
    let sim = sim();
    let f = sim
        .open(&Path::new(DIR).join("f"), OpenMode::CreateNew, false)
        .unwrap();
    sim.inject(Fault {
        kind: OpKind::Write,
        nth: 1,
        error: FaultError::Enospc,
        sticky: false,
    });
    f.write_at(b"a", 0).unwrap();
    let e = f.write_at(b"b", 1).unwrap_err();
    assert_eq!(
        e.raw_os_error(),
        Some(rustix::io::Errno::NOSPC.raw_os_error())
    );
    f.write_at(b"c", 1).unwrap();
    sim.inject(Fault {
        kind: OpKind::Write,
        nth: 3,
        error: FaultError::Short,
        sticky: true,
    });
    assert_eq!(f.write_at(b"dddd", 2).unwrap(), 2);
    assert_eq!(f.write_at(b"eeee", 4).unwrap(), 2);
    sim.clear_faults();
    assert_eq!(f.write_at(b"ffff", 6).unwrap(), 4);
    sim.crash_at(CrashOn::Sync, 1);
    f.sync_data().unwrap();
    assert!(f.sync_data().is_err());
    assert!(sim.crashed());
    assert!(f.write_at(b"g", 0).is_err());
    let after = sim.after_crash(Survival::DropAll, 0);
    assert_eq!(content(&after, "f"), None, "the name was never synced");
}

#[test]
fn a_durable_write_survives_every_crash_and_makes_nothing_else_durable() {
    let sim = sim();
    let dir = Path::new(DIR);
    let f = sim.open(&dir.join("f"), OpenMode::CreateNew, true).unwrap();
    sim.sync_dir(dir).unwrap();
    // Two unsynced writes before it, one of them under the durable write's range.
    f.write_at(&block(1), 0).unwrap();
    f.write_at(&block(3), 4096).unwrap();
    assert_eq!(f.write_at_durable(&block(2), 4096).unwrap(), 4096);
    for mode in Survival::ALL {
        for seed in 0..16 {
            let c = content(&sim.after_crash(mode, seed), "f").unwrap();
            assert_eq!(
                c.len(),
                8192,
                "{mode:?}: the durable write's size is durable"
            );
            // Its bytes, never the older pending write's beneath it.
            assert_eq!(&c[4096..], &*block(2), "{mode:?} seed {seed}");
            // The earlier write before it: kept, lost or (random sectors) partly kept, as
            // any unsynced write; nothing of it under DropAll.
            for s in c[..4096].chunks(SECTOR) {
                assert!(s.iter().all(|&b| b == 1) || s.iter().all(|&b| b == 0));
            }
            if mode == Survival::DropAll {
                assert!(
                    c[..4096].iter().all(|&b| b == 0),
                    "the earlier write was not synced"
                );
            }
        }
    }
    // A later fdatasync makes everything durable, as always.
    f.sync_data().unwrap();
    let c = content(&sim.after_crash(Survival::DropAll, 0), "f").unwrap();
    assert_eq!((&c[..4096], &c[4096..]), (&*block(1), &*block(2)));
    // It counts as a write and a sync.
    let calls = sim.stats().calls;
    assert_eq!((calls[&OpKind::Write], calls[&OpKind::Sync]), (3, 2));
}

#[test]
fn a_crash_inside_a_durable_write_leaves_it_like_an_unsynced_write() {
    let sim = sim();
    let dir = Path::new(DIR);
    let f = sim.open(&dir.join("f"), OpenMode::CreateNew, true).unwrap();
    f.write_at_durable(&block(1), 0).unwrap();
    sim.sync_dir(dir).unwrap();
    // The power goes at its sync: written, not synced.
    sim.crash_at(CrashOn::Sync, 0);
    let mut two = AlignedBuf::zeroed(8192, 4096);
    two.fill(2);
    assert!(f.write_at_durable(&two, 4096).is_err());
    assert!(sim.crashed());
    let dropped = content(&sim.after_crash(Survival::DropAll, 0), "f").unwrap();
    assert_eq!(dropped, *block(1), "dropped whole");
    let mut torn_seen = false;
    for seed in 0..16 {
        let c = content(
            &sim.after_crash(Survival::TearLast { tear_align: 4096 }, seed),
            "f",
        )
        .unwrap();
        assert_eq!(&c[..4096], &*block(1), "the first durable write stays");
        assert!(c.len() < 4096 + 8192, "torn: never whole");
        assert!(c[4096..].iter().all(|&b| b == 2));
        torn_seen |= c.len() == 8192;
    }
    assert!(torn_seen, "some tear keeps half of it");
    // A fault in its sync fails it as a failed fdatasync fails.
    let sim = self::sim();
    let f = sim
        .open(&dir.join("g"), OpenMode::CreateNew, false)
        .unwrap();
    sim.inject(Fault {
        kind: OpKind::Sync,
        nth: 0,
        error: FaultError::Eio,
        sticky: false,
    });
    let e = f.write_at_durable(b"x", 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(rustix::io::Errno::IO.raw_os_error()));
}

#[test]
fn a_directory_is_removed_only_when_empty_as_rmdir_does() {
    let sim = sim();
    let sub = Path::new(DIR).join("staging");
    let gone = |e: io::Error| e.raw_os_error();
    assert_eq!(
        sim.remove_dir(&sub).map_err(gone),
        Err(Some(rustix::io::Errno::NOENT.raw_os_error()))
    );
    sim.create_dir_all(&sub.join("inner")).unwrap();
    // A directory in it, then a file in it: both keep it.
    assert_eq!(
        sim.remove_dir(&sub).map_err(gone),
        Err(Some(rustix::io::Errno::NOTEMPTY.raw_os_error()))
    );
    sim.remove_dir(&sub.join("inner")).unwrap();
    sim.open(&sub.join("f"), OpenMode::CreateNew, false)
        .unwrap();
    assert_eq!(
        sim.remove_dir(&sub).map_err(gone),
        Err(Some(rustix::io::Errno::NOTEMPTY.raw_os_error()))
    );
    sim.remove_file(&sub.join("f")).unwrap();
    sim.remove_dir(&sub).unwrap();
    assert!(sim.list_dir(&sub).is_err(), "the directory is gone");
    // A file can no longer be made in it.
    assert!(
        sim.open(&sub.join("g"), OpenMode::CreateNew, false)
            .is_err()
    );
}
