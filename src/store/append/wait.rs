//! Waiting for writes: acknowledgement under a durability, flushes, and the group commit a
//! waiting writer leads when nothing is in flight (the module doc of `store/append` says how
//! groups form).

use super::Log;
use crate::error::Result;
use crate::options::Durability;

impl Log {
    /// Returns once the writes `first..=last` are acknowledged under `durability`: applied to
    /// the index, and for `Sync` durable.
    pub(in crate::store) fn acknowledge(
        &self,
        first: u64,
        last: u64,
        durability: Durability,
    ) -> Result<()> {
        self.wait(first, last, durability == Durability::Sync)
    }

    /// Makes every write so far durable.
    pub(in crate::store) fn flush(&self) -> Result<()> {
        let last = self.lock().last_seq();
        self.flush_to(last)
    }

    /// Makes every write numbered up to `last` durable.
    pub(in crate::store) fn flush_to(&self, last: u64) -> Result<()> {
        self.wait(last, last, true)
    }

    /// Whether some write is not durable yet.
    pub(in crate::store) fn has_unflushed(&self) -> bool {
        let last = self.lock().last_seq();
        self.progress.lock().durable_seq < last
    }

    /// Waits until no write in `first..=last` is pending for the index and, with `durable`,
    /// until log records up to `last` are on stable storage, leading a group commit when they
    /// are not and no write is in flight.
    pub(in crate::store) fn wait(&self, first: u64, last: u64, durable: bool) -> Result<()> {
        loop {
            {
                let mut st = self.progress.lock();
                loop {
                    let need_sync = durable && st.durable_seq < last;
                    if !need_sync && !self.shared.pending.any_pending(first, last) {
                        return Ok(());
                    }
                    if let Some(f) = st.failure {
                        return Err(f.to_error());
                    }
                    if need_sync && st.inflight == 0 {
                        break;
                    }
                    st = self.progress.wait(st);
                }
            }
            let mut app = self.lock();
            {
                let st = self.progress.lock();
                if st.failure.is_some() || st.durable_seq >= last || st.inflight > 0 {
                    continue;
                }
            }
            // Nothing in flight: lead the group. Write and sync it in this thread if no log I/O
            // runs (the flush thread may be zeroing ahead: then hand it over as usual).
            let io = app.app.wb.io_order();
            let Some(mut turn) = io.try_lock() else {
                app.submit_group()?;
                continue;
            };
            let Some(job) = app.take_own_group(&turn)? else {
                // Nothing appended since the last hand-off: a sync alone, by the flush thread.
                drop(turn);
                app.submit_group()?;
                continue;
            };
            // Others append to the other buffer meanwhile: the next group.
            drop(app);
            if io.run(&mut turn, job) {
                drop(turn);
                self.lock().app.wb.wake_flusher();
            }
        }
    }

    /// Makes every byte appended so far durable, copies included (which `flush` would not
    /// wait for: they reuse old sequence numbers), and applies the index updates it covers.
    pub(in crate::store) fn sync_all(&self) -> Result<()> {
        self.sync_all_active().map(|_| ())
    }

    /// [`Log::sync_all`], returning the active segment as it was when the sync was asked for:
    /// its id and the end of its records, all durable once this returns.
    pub(in crate::store) fn sync_all_active(&self) -> Result<Option<(u64, u64)>> {
        let (ticket, active) = {
            let mut app = self.lock();
            // The store's own sync (eviction, compaction, the background flush...): no write
            // waits for it, so it starts no zero-ahead (`io::writer`).
            app.submit_group_quietly()?;
            let active = app.active().map(|a| (a.id, a.data_end));
            (app.app.wb.sync_ticket(), active)
        };
        self.wait_for_sync(ticket)?;
        Ok(active)
    }

    /// Waits until sync `ticket` has completed.
    pub(super) fn wait_for_sync(&self, ticket: u64) -> Result<()> {
        let mut st = self.progress.lock();
        loop {
            if let Some(f) = st.failure {
                return Err(f.to_error());
            }
            if st.syncs_done >= ticket {
                return Ok(());
            }
            st = self.progress.wait(st);
        }
    }
}
