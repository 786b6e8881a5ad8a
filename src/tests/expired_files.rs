//! A sealed segment whose records have all expired is removed whole without its values being
//! read or rewritten (issue 39): compaction reads its footer, copies nothing, writes no
//! tombstone when no older record of its keys is left elsewhere, and unlinks it. Counted by the
//! simulator (`SimStats::read_bytes`, `written_bytes`), not timed.

use std::time::Duration;

use super::{DIR, new_sim, open, options};
use crate::expiry::MockClock;
use crate::io::sim::SimConfig;
use crate::{Durability, PutOptions};

const HOUR: Duration = Duration::from_secs(3600);

fn segments(sim: &crate::io::sim::Sim) -> Vec<String> {
    use crate::io::storage::Storage;
    let mut names = sim.list_dir(std::path::Path::new(DIR)).unwrap();
    names.retain(|n| n.starts_with("seg-"));
    names.sort();
    names
}

#[test]
fn a_segment_whose_records_all_expired_goes_whole_without_its_values_read() {
    let sim = new_sim(SimConfig::default());
    let clock = MockClock::new();
    let opts = options(Durability::Sync)
        .testing_clock(clock.clone())
        .cache_capacity(0)
        .warm_cache(false);
    let store = open(&sim, opts).unwrap();
    // About 2.4 MiB of expiring values (segments of 1 MiB: two sealed, the third sealed below).
    // Nothing older is left anywhere, so no tombstone is needed for any of them (a value put
    // before them, in another file, would make each dropped put leave one: the tombstone rule,
    // conservative, does not look at keys).
    let value = vec![7u8; 6000];
    let ttl = PutOptions::default().ttl(HOUR);
    for i in 0..400 {
        store.put_with(format!("e{i:03}"), &value, &ttl).unwrap();
    }
    store.seal().unwrap();
    let expiring = segments(&sim);
    let data: u64 = 400 * 6000;
    clock.advance(HOUR);

    let before = sim.stats();
    let report = store.compact().unwrap();
    let after = sim.stats();
    let (read, written) = (
        after.read_bytes - before.read_bytes,
        after.written_bytes - before.written_bytes,
    );
    assert_eq!(report.expired_dropped, 400, "{report:?}");
    assert_eq!(report.records_copied, 0, "{report:?}");
    assert_eq!(report.tombstones_copied, 0, "{report:?}");
    // Footers only (a location table of 400 keys, the key block): a few KiB against 2.4 MB of
    // values.
    assert!(read < data / 50, "compaction read {read} bytes of {data}");
    // No copy, no tombstone: the catalog's edits and a directory sync at most.
    assert!(written < 64 << 10, "compaction wrote {written} bytes");
    let left = segments(&sim);
    for name in &expiring {
        assert!(!left.contains(name), "{name} is still there: {left:?}");
    }
    assert_eq!(store.get("e000").unwrap(), None);
    assert_eq!(store.len(), 0);
    // Gone for good: a reopen finds none of them.
    store.close().unwrap();
    let store = open(&sim, options(Durability::Sync).testing_clock(clock)).unwrap();
    assert_eq!(store.get("e399").unwrap(), None);
    assert_eq!(store.stats().expired_keys, 0);
}
