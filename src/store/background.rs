//! Background threads: the flush ticker ([`Options::flush_interval`](crate::Options)) and the
//! compactor. Each wakes every interval, does its work, and stops when told or when the store
//! is gone.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};

/// A background thread and the flag that stops it.
pub(super) struct Ticker {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: JoinHandle<()>,
}

impl Ticker {
    /// Starts thread `name`, which calls `tick` every `interval` until [`Ticker::stop`] is
    /// called or `tick` returns `false`. `tick` gets a function that says whether a stop was
    /// asked for meanwhile, to end long work early.
    pub(super) fn start(
        name: &str,
        interval: Duration,
        mut tick: impl FnMut(&dyn Fn() -> bool) -> bool + Send + 'static,
    ) -> Result<Ticker> {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let thread_stop = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let (flag, cv) = &*thread_stop;
                let stopped = || *flag.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    {
                        let guard = flag.lock().unwrap_or_else(|p| p.into_inner());
                        let (guard, _) = cv
                            .wait_timeout(guard, interval)
                            .unwrap_or_else(|p| p.into_inner());
                        if *guard {
                            return;
                        }
                    }
                    if !tick(&stopped) {
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("start background thread", None, e))?;
        Ok(Ticker { stop, handle })
    }

    /// Stops the thread and waits for it (work it is in the middle of ends early, as `tick`'s
    /// stop function tells it).
    pub(super) fn stop(self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        let _ = self.handle.join();
    }
}
