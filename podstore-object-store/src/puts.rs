//! Unconditional puts of small objects, batched: a few threads of the backend's own take every
//! put queued since their last batch and write them with one [`Store::write_with_versions`].
//!
//! Why: the store is synchronous, so each call must leave the async runtime. Through
//! `spawn_blocking`, one put is two thread hand-offs (to the blocking pool and back) and one
//! append and acknowledgement of its own; on a small machine the hand-offs cost several times
//! the put. Here a put is a push onto a queue and a wakeup back; a thread that wakes finds the
//! puts queued while it was busy, and writes them as one group of records: one append lock,
//! one group commit (with `Durability::Sync`, one fsync for the batch).
//!
//! Semantics are those of one `Store::put` per object: each put is acknowledged (its future
//! resolves) only after the batch holding it was written with the store's durability, and gets
//! its own version (its e-tag). A batch is all-or-nothing; if it fails (a key or value the
//! store refuses, a store that takes no more writes) each of its puts is tried again alone, so
//! that each gets its own result and one bad put fails no other. Puts in one batch are in queue
//! order, so of two puts of one key in a batch the later wins, with the higher version.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use bytes::Bytes;
use object_store::path::Path;
use object_store::{Error, Result};
use podstore::{Batch, Store, Version};
use tokio::sync::oneshot;

use crate::convert::{STORE, generic, key, key_ref};

/// Payloads up to this size are batched; larger ones are put alone (a batch copies its values,
/// and a large value is one write anyway; with `Durability::Sync` the store writes values from
/// 1 MiB (its default threshold) to files of their own, which a batch never does).
pub(crate) const BATCHED_MAX: usize = 256 << 10;
/// A batch stops growing at this many puts or this many bytes of values. A batch is written
/// into one log segment (it never spans two); 1 MiB is the smallest segment size, so that a
/// batch rarely seals a segment early or outgrows one.
const BATCH_OPS: usize = 256;
const BATCH_BYTES: usize = 1 << 20;
/// At most this many put threads. More than one: with `Durability::Sync` a thread waits for
/// its batch's fsync, and the next batch is gathered and appended meanwhile by another. More
/// than a few would only contend for the append lock.
const THREADS: usize = 4;

/// One queued put and where its outcome goes.
struct Pending {
    key: Vec<u8>,
    value: Bytes,
    done: oneshot::Sender<podstore::Result<Version>>,
}

struct State {
    queue: VecDeque<Pending>,
    /// Threads waiting for work.
    idle: usize,
    threads: usize,
    closed: bool,
}

struct Shared {
    store: Arc<Store>,
    state: Mutex<State>,
    work: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the queue consistent (pushes and drains are
        // single calls): go on.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The put threads of one backend (shared by its clones). Threads start on the first put and
/// stop, after writing what is queued, when the last clone of the backend is dropped.
pub(crate) struct PutQueue {
    shared: Arc<Shared>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    /// Puts are written on the calling task (a store with `Durability::Buffered`): see
    /// [`PutQueue::put`].
    inline: bool,
    /// The first put went through the queue (it creates the store's active segment).
    first_done: std::sync::atomic::AtomicBool,
}

impl PutQueue {
    pub(crate) fn new(store: Arc<Store>) -> PutQueue {
        let store_is_buffered = store.durability() == podstore::Durability::Buffered;
        PutQueue {
            shared: Arc::new(Shared {
                store,
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    idle: 0,
                    threads: 0,
                    closed: false,
                }),
                work: Condvar::new(),
            }),
            handles: Mutex::new(Vec::new()),
            inline: store_is_buffered,
            first_done: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Puts `value` under `key`; resolves once it is written (with the store's durability) to
    /// its version, or the store's error for this put.
    ///
    /// On a store with `Durability::Buffered` the put is written on the calling task, with no
    /// hand-off: a buffered put copies into the store's write buffer and returns without
    /// waiting for the disk, except when both write buffers are full (the writer's
    /// back-pressure), when it opens a new log segment (a file and a directory fsync, once per
    /// 256 MiB of log by default), or when it extends the store's reservation of version numbers
    /// (one 32-byte fdatasync per second of writes). The first put of a backend still goes
    /// through the put threads (on a new store it creates the first segment). A hand-off to a
    /// thread and back costs several times such a put on a small machine (the crate docs,
    /// "Threading").
    pub(crate) async fn put(&self, location: &Path, value: Bytes) -> Result<Version> {
        use std::sync::atomic::Ordering;
        if self.inline && self.first_done.load(Ordering::Relaxed) {
            // The key as a slice of the path: the store copies it into its record anyway.
            return self
                .shared
                .store
                .put(key_ref(location), &value)
                .map_err(generic);
        }
        let result = self.queued(key(location), value).await;
        self.first_done.store(true, Ordering::Relaxed);
        result
    }

    /// [`PutQueue::put`] through the put threads.
    async fn queued(&self, key: Vec<u8>, value: Bytes) -> Result<Version> {
        let (done, outcome) = oneshot::channel();
        let spawn = {
            let mut state = self.shared.lock();
            state.queue.push_back(Pending { key, value, done });
            if state.idle > 0 {
                // Only a thread that waits needs a wakeup (a futex call); a busy one takes the
                // put with its next batch.
                self.shared.work.notify_one();
                false
            } else if state.threads < THREADS {
                state.threads += 1;
                true
            } else {
                false
            }
        };
        if spawn {
            self.spawn();
        }
        match outcome.await {
            Ok(result) => result.map_err(generic),
            // No thread could be started, or one died (a panic in the store) before answering.
            Err(_) => Err(Error::Generic {
                store: STORE,
                source: "no put thread wrote the put".into(),
            }),
        }
    }

    fn spawn(&self) {
        let shared = self.shared.clone();
        let spawned = std::thread::Builder::new()
            .name("podstore-os-put".to_string())
            .spawn(move || run(&shared));
        let mut handles = self.handles.lock().unwrap_or_else(|p| p.into_inner());
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(_) => {
                // No thread: fail what is queued (dropping its senders) unless another thread
                // will take it.
                let mut state = self.shared.lock();
                state.threads -= 1;
                if state.threads == 0 {
                    state.queue.clear();
                }
            }
        }
    }
}

impl Drop for PutQueue {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        // Joined, so that once the backend is gone its store is no longer held by a thread
        // (the caller may unwrap its `Arc` and close it). A thread exits as soon as the queue
        // is empty; nothing can queue more, the last handle being dropped.
        let handles = std::mem::take(self.handles.get_mut().unwrap_or_else(|p| p.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }
}

/// Counts a put thread out when it ends, by returning or by a panic in the store (then the puts
/// it held get an error, their senders dropped, and the next put starts another thread).
struct Leaving<'a>(&'a Shared);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        let mut state = self.0.lock();
        state.threads -= 1;
        if !state.queue.is_empty() {
            // Left by a panic with puts queued: another thread, if one waits, takes them.
            self.0.work.notify_one();
        }
    }
}

/// A put thread: waits for puts, takes a batch of them, writes it, answers each.
fn run(shared: &Shared) {
    let _leaving = Leaving(shared);
    let mut batch = Batch::new();
    let mut taken = Vec::new();
    loop {
        {
            let mut state = shared.lock();
            while state.queue.is_empty() {
                if state.closed {
                    return;
                }
                state.idle += 1;
                state = shared.work.wait(state).unwrap_or_else(|p| p.into_inner());
                state.idle -= 1;
            }
            let mut bytes = 0;
            while let Some(p) = state.queue.front() {
                if taken.len() == BATCH_OPS || (bytes > 0 && bytes + p.value.len() > BATCH_BYTES) {
                    break;
                }
                bytes += p.value.len();
                taken.extend(state.queue.pop_front());
            }
        }
        write(&shared.store, &mut batch, &mut taken);
    }
}

/// Writes the puts `taken` (emptied) and answers each.
fn write(store: &Store, batch: &mut Batch, taken: &mut Vec<Pending>) {
    if let [one] = taken.as_slice() {
        // Alone: a put, without the batch's copy of the value.
        let result = store.put(&one.key, &one.value);
        if let Some(p) = taken.pop() {
            let _ = p.done.send(result);
        }
        return;
    }
    batch.clear();
    for p in taken.iter() {
        batch.put(&p.key, &p.value);
    }
    match store.write_with_versions(batch) {
        Ok(versions) => {
            for (p, v) in taken.drain(..).zip(versions) {
                // A caller that stopped waiting (its future dropped) still had its put written.
                let _ = p.done.send(Ok(v));
            }
        }
        Err(_) => {
            // Nothing of the batch was written: each put alone, for its own result.
            for p in taken.drain(..) {
                let _ = p.done.send(store.put(&p.key, &p.value));
            }
        }
    }
}
