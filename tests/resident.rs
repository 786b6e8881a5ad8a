//! The memory budget (`Options::cache_capacity`): the store's resident memory stays under its
//! cache's budget and its index. Alone in its test binary, because it measures the whole
//! process's resident memory (another test's memory, or a panic's, would count).

mod common;

use common::memory::{resident_bytes, write_and_read};
use podstore::{Durability, IoMode, Options, Store};

const MIB: u64 = 1 << 20;

#[test]
fn resident_memory_stays_under_the_budget_and_the_index() {
    const BUDGET: u64 = 16 * MIB;
    let dir = tempfile::tempdir().unwrap();
    // Direct I/O, so that the page cache holds nothing of the store's data (it is not counted in
    // the process's resident memory anyway, but buffered I/O would also shrink the default).
    let opts = Options::default()
        .io_mode(IoMode::Direct)
        .durability(Durability::Buffered)
        .cache_capacity(BUDGET)
        .background_compaction(false);
    let before = resident_bytes();
    let store = Store::open_with(dir.path(), opts).unwrap();
    // 96 MiB of values, six times the budget, each read back twice: the cache fills and evicts.
    let stats = write_and_read(&store, 24_000, 4096, 2);
    let grown = resident_bytes().saturating_sub(before);
    assert_eq!(stats.cache_capacity, BUDGET);
    assert_eq!(stats.memory_available, None, "set by the options");
    assert!(stats.cache_bytes <= BUDGET, "{stats:?}");
    assert!(
        stats.cache_bytes > BUDGET / 2,
        "the cache filled: {stats:?}"
    );
    assert!(stats.cache_evictions > 0, "{stats:?}");
    // The store's own memory besides the cache and the index: two write buffers (1 MiB each),
    // the read bounce buffers (1 MiB each, one per reading thread), its threads' stacks as far
    // as they were touched, and the allocator's slack: well under 16 MiB.
    let slack = 16 * MIB;
    assert!(
        grown <= BUDGET + stats.index_bytes + slack,
        "resident memory grew by {} MiB: over the budget ({} MiB) + the index ({} MiB) + {} MiB",
        grown / MIB,
        BUDGET / MIB,
        stats.index_bytes / MIB,
        slack / MIB,
    );
    store.close().unwrap();
}
