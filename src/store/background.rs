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
                        // The flag is checked before waiting, not only after: a stop asked for
                        // while the thread was starting or busy would otherwise wait out a whole
                        // interval (a `close` right after `open` took up to 500 ms).
                        let guard = flag.lock().unwrap_or_else(|p| p.into_inner());
                        let (guard, _) = cv
                            .wait_timeout_while(guard, interval, |stop| !*stop)
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Instant;

    use super::*;

    /// An interval no test waits out: a stop that waited for it would hang the test.
    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_stop_before_the_first_wait_does_not_wait_out_the_interval() {
        for _ in 0..20 {
            let ticker = Ticker::start("test-ticker", HOUR, |_| true).unwrap();
            let asked = Instant::now();
            ticker.stop();
            assert!(asked.elapsed() < HOUR / 60, "stop waited out the interval");
        }
    }

    #[test]
    fn a_stop_during_a_tick_ends_the_thread_after_it() {
        let ticks = Arc::new(AtomicU32::new(0));
        let seen = ticks.clone();
        let ticker = Ticker::start("test-ticker", Duration::from_millis(1), move |stopped| {
            seen.fetch_add(1, Ordering::SeqCst);
            // Busy until told to stop: the stop arrives while no wait is in progress.
            while !stopped() {
                std::thread::sleep(Duration::from_millis(1));
            }
            true
        })
        .unwrap();
        while ticks.load(Ordering::SeqCst) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        ticker.stop();
        assert_eq!(ticks.load(Ordering::SeqCst), 1, "no tick after the stop");
    }
}
