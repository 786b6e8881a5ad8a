//! Independent test cases run a few at a time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Threads for independent cases: bound by syncs and by a debug build's checksums, a few more
/// than the two cores of the machines the tests run on.
pub const WORKERS: usize = 4;

/// Runs `check` on every item, on [`WORKERS`] threads; a panic in any of them fails the
/// caller.
pub fn for_each_parallel<T: Sync>(items: &[T], check: impl Fn(&T) + Sync) {
    map_parallel(items, check);
}

/// `f` of every item, computed on [`WORKERS`] threads, in the order of `items`; a panic in any
/// of them fails the caller.
pub fn map_parallel<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..WORKERS.min(items.len()) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every item was run"))
        .collect()
}
