//! [`FaultyRemote`]: a [`Remote`] wrapper that injects seeded faults, for tests (the `testing`
//! feature).

use std::ops::Range;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::{ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind};

/// What a [`FaultyRemote`] injects. Rates are fractions of calls, in `0.0..=1.0`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct Faults {
    /// Calls refused with a transient error before they do anything (throttling, a 503).
    pub error_rate: f64,
    /// Calls that are carried out but answered with a transient error (a reply lost on the
    /// way back, a timeout after the write): a retry finds the work done.
    pub lost_reply_rate: f64,
    /// Each call first sleeps a random time up to this.
    pub max_delay: Duration,
}

impl Faults {
    /// No faults.
    pub fn none() -> Self {
        Self::default()
    }

    /// `error_rate` of calls refused, `lost_reply_rate` answered with an error after they
    /// were carried out, each delayed up to `max_delay`.
    pub fn new(error_rate: f64, lost_reply_rate: f64, max_delay: Duration) -> Self {
        Faults {
            error_rate,
            lost_reply_rate,
            max_delay,
        }
    }
}

/// A [`Remote`] that passes calls to another and injects [`Faults`], drawn from a seeded
/// generator, so that a failing run can be repeated (test machinery: the `testing` feature).
#[derive(Debug)]
pub struct FaultyRemote {
    inner: Arc<dyn Remote>,
    faults: Mutex<Faults>,
    rng: Mutex<u64>,
    injected: AtomicU64,
}

impl FaultyRemote {
    /// Wraps `inner`, injecting `faults` drawn from `seed`.
    pub fn new(inner: Arc<dyn Remote>, faults: Faults, seed: u64) -> Self {
        FaultyRemote {
            inner,
            faults: Mutex::new(faults),
            // xorshift needs a nonzero state.
            rng: Mutex::new(seed | 1),
            injected: AtomicU64::new(0),
        }
    }

    /// Changes the faults injected from now on.
    pub fn set_faults(&self, faults: Faults) {
        *self.faults.lock().unwrap_or_else(|p| p.into_inner()) = faults;
    }

    /// Errors injected so far (refused calls and lost replies).
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// A uniform draw in `[0, 1)`.
    fn draw(&self) -> f64 {
        let mut s = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Runs `call` with the faults: a delay, maybe a refusal, maybe a lost reply.
    fn call<T>(
        &self,
        what: &str,
        call: impl FnOnce() -> Result<T, RemoteError>,
    ) -> Result<T, RemoteError> {
        let faults = *self.faults.lock().unwrap_or_else(|p| p.into_inner());
        if !faults.max_delay.is_zero() {
            std::thread::sleep(faults.max_delay.mul_f64(self.draw()));
        }
        let fault = |how: &str| {
            self.injected.fetch_add(1, Ordering::Relaxed);
            Err(RemoteError::new(
                RemoteErrorKind::Transient,
                format!("injected fault: {what} {how}"),
            ))
        };
        if self.draw() < faults.error_rate {
            return fault("refused");
        }
        let result = call()?;
        if self.draw() < faults.lost_reply_rate {
            return fault("done, reply lost");
        }
        Ok(result)
    }
}

impl Remote for FaultyRemote {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        self.call("put", || self.inner.put(name, body))
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.call("put_if_absent", || self.inner.put_if_absent(name, bytes))
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        self.call("get_range", || self.inner.get_range(name, range))
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        self.call("list", || self.inner.list(prefix))
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.call("delete", || self.inner.delete(name))
    }
}
