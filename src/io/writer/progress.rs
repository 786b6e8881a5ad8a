//! What the flush thread has done so far ([`ProgressState`]: durable sequence numbers, jobs in
//! flight, the failure that poisoned the store), and the condition variable every writer waits
//! on for it ([`Progress`]).

use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::Error;

/// What the flush thread has done so far; shared with every writer.
#[derive(Debug)]
pub struct ProgressState {
    /// Every record appended to the log (not written to a blob file of its own) with a sequence
    /// number up to this is on stable storage.
    pub durable_seq: u64,
    /// Jobs handed to the flush thread and not yet finished.
    pub inflight: usize,
    /// The first failed write or sync: the store is poisoned from then on.
    pub failure: Option<FailureKind>,
    /// Jobs with an fdatasync completed so far (see [`WriteBuffer::sync_ticket`]).
    pub syncs_done: u64,
    /// Threads in [`Progress::wait`] now: [`Progress::notify`] wakes nobody (and makes no
    /// syscall) when there are none, as after a lone durable writer's own sync.
    waiters: usize,
}

/// The kind of the failure that poisoned the store, kept to answer later callers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The disk was full.
    StorageFull,
    /// Any other I/O error.
    Io,
}

impl FailureKind {
    pub(super) fn of(e: &Error) -> FailureKind {
        match e {
            Error::StorageFull { .. } => FailureKind::StorageFull,
            _ => FailureKind::Io,
        }
    }

    /// The error returned to writers that find the store poisoned.
    pub fn to_error(self) -> Error {
        match self {
            FailureKind::StorageFull => Error::StorageFull { path: None },
            FailureKind::Io => Error::Poisoned,
        }
    }
}

/// [`ProgressState`] with the condition variable that announces every change of it (and every
/// publication of index updates).
#[derive(Debug)]
pub struct Progress {
    state: Mutex<ProgressState>,
    changed: Condvar,
}

impl Progress {
    /// Progress of a store whose records up to `durable_seq` are durable.
    pub fn new(durable_seq: u64) -> Progress {
        Progress {
            state: Mutex::new(ProgressState {
                durable_seq,
                inflight: 0,
                failure: None,
                syncs_done: 0,
                waiters: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// Locks the state.
    pub fn lock(&self) -> MutexGuard<'_, ProgressState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for the next change.
    pub fn wait<'a>(
        &self,
        mut guard: MutexGuard<'a, ProgressState>,
    ) -> MutexGuard<'a, ProgressState> {
        guard.waiters += 1;
        let mut guard = self.changed.wait(guard).unwrap_or_else(|p| p.into_inner());
        guard.waiters -= 1;
        guard
    }

    /// Poisons the store after a failure outside the flush thread (a failed directory fsync):
    /// writers get the failure's error until the store is reopened.
    pub fn poison(&self, e: &Error) {
        self.lock().failure.get_or_insert(FailureKind::of(e));
        self.notify();
    }

    /// Wakes every waiter (after a change made outside the state, e.g. a publication).
    pub fn notify(&self) {
        // Taking the lock orders this notification after any waiter's check-then-wait: a
        // waiter counts itself under the lock before it waits, so one that has not yet
        // checked will see the change, and one that waits is counted. With nobody waiting
        // (a lone durable writer that synced its own group), no futex wake per put.
        let waiting = self.lock().waiters > 0;
        if waiting {
            self.changed.notify_all();
        }
    }
}
