//! Moving a file to `quarantine/` at open is crash-safe: a power loss at any point of the move
//! (and of the open around it) leaves the file under at least one of its names, with its
//! bytes, and the next open works and finishes the move.

use std::path::Path;

use super::{DIR, new_sim, open, options};
use crate::Durability;
use crate::io::sim::{CrashOn, SimConfig, Survival};
use crate::io::storage::{OpenMode, Storage};

#[test]
fn a_crash_while_a_file_is_quarantined_never_loses_it() {
    let name = "blob-0000000000000007.pod";
    let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
    let dir = Path::new(DIR);
    let qdir = dir.join("quarantine");
    let copies = |sim: &crate::io::sim::Sim| -> usize {
        let mut n = 0;
        for (d, prefix) in [(dir, name.to_string()), (qdir.as_path(), name.to_string())] {
            for f in sim.file_names(d) {
                if f.starts_with(&prefix) {
                    let file = sim.open(&d.join(&f), OpenMode::Existing, false).unwrap();
                    let mut got = vec![0u8; bytes.len() + 1];
                    let len = file.read_at(&mut got, 0).unwrap();
                    assert_eq!(&got[..len], &bytes[..], "{}", d.join(&f).display());
                    n += 1;
                }
            }
        }
        n
    };
    let mut crashes = 0;
    for n in 1.. {
        let sim = new_sim(SimConfig::default());
        {
            let f = sim
                .open(&dir.join(name), OpenMode::CreateNew, false)
                .unwrap();
            assert_eq!(f.write_at(&bytes, 0).unwrap(), bytes.len());
            f.sync_data().unwrap();
            sim.sync_dir(dir).unwrap();
        }
        sim.crash_at(CrashOn::Mutation, n);
        let opened = open(&sim, options(Durability::Sync));
        if !sim.crashed() {
            let store = opened.unwrap_or_else(|e| panic!("{e}: {:?}", sim.violations()));
            assert_eq!(store.recovery().quarantined.len(), 1);
            store.close().unwrap();
            break;
        }
        drop(opened);
        crashes += 1;
        for (i, mode) in Survival::ALL.into_iter().enumerate() {
            let after = sim.after_crash(mode, n * 10 + i as u64);
            assert!(
                copies(&after) >= 1,
                "crash at {n}, {mode:?}: the file is lost"
            );
            let store = open(&after, options(Durability::Sync))
                .unwrap_or_else(|e| panic!("crash at {n}, {mode:?}: reopen failed: {e}"));
            store.close().unwrap();
            assert!(
                !after.file_names(dir).iter().any(|f| f == name),
                "crash at {n}, {mode:?}: still in the store directory"
            );
            assert!(
                copies(&after) >= 1,
                "crash at {n}, {mode:?}: lost at reopen"
            );
        }
    }
    assert!(crashes >= 3, "{crashes}");
}
