//! Values that expire (issue 39): [`PutOptions`], what a put says about its value's life, and
//! the clock expiries are judged by.
//!
//! A record holds its expiry as an instant (milliseconds since the Unix epoch, see
//! docs/design.md, "Record"), so a time to live is turned into an instant when the write is
//! made. **A value is gone from the instant it expires**: at a clock reading of exactly its
//! expiry and after, every read treats it as absent ([`is_expired`]), whatever compaction has
//! reclaimed yet.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};
use crate::format::record::MAX_EXPIRES_AT_MS;

/// How a put's value expires: with [`Store::put_with`](crate::Store::put_with),
/// [`Batch::put_with`](crate::Batch::put_with), [`Store::writer_with`](crate::Store::writer_with),
/// [`Store::put_if_absent_with`](crate::Store::put_if_absent_with) and
/// [`Store::put_if_with`](crate::Store::put_if_with).
///
/// Without a setting, a value expires as [`Options::default_ttl`](crate::Options::default_ttl)
/// says (by default, never). An expired value is absent to every read, listing and conditional
/// write at once; compaction reclaims its space later.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// use podstore::PutOptions;
/// use std::time::Duration;
/// store.put_with("thumb/1", b"...", &PutOptions::new().ttl(Duration::from_secs(3600)))?;
/// let meta = store.metadata("thumb/1")?.unwrap();
/// assert!(meta.expires_at().is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PutOptions {
    expiry: Expiry,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum Expiry {
    /// As `Options::default_ttl` says.
    #[default]
    Default,
    /// Never, whatever the default.
    Never,
    /// This long after the write.
    After(Duration),
    /// At this instant.
    At(SystemTime),
}

impl PutOptions {
    /// Options that say nothing: the store's default time to live applies.
    pub fn new() -> PutOptions {
        PutOptions::default()
    }

    /// The value expires `ttl` after the write (rounded up to a whole millisecond). A zero
    /// `ttl` writes a value that is expired at once.
    pub fn ttl(mut self, ttl: Duration) -> PutOptions {
        self.expiry = Expiry::After(ttl);
        self
    }

    /// The value expires at `at` (rounded up to a whole millisecond). An instant in the past
    /// writes a value that is expired at once; one past the end of the year 9999 is refused
    /// with [`Error::InvalidOptions`](crate::Error::InvalidOptions) when the put is made.
    pub fn expires_at(mut self, at: SystemTime) -> PutOptions {
        self.expiry = Expiry::At(at);
        self
    }

    /// The value never expires, whatever [`Options::default_ttl`](crate::Options::default_ttl)
    /// says.
    pub fn no_expiry(mut self) -> PutOptions {
        self.expiry = Expiry::Never;
        self
    }

    /// The expiry of a value written at `now_ms()` (milliseconds since the epoch; read only for a
    /// value that expires) with these options and the store's `default_ttl`, in milliseconds.
    pub(crate) fn expiry_ms(
        &self,
        now_ms: impl FnOnce() -> u64,
        default_ttl: Option<Duration>,
    ) -> Result<Option<u64>> {
        let at = match self.expiry {
            Expiry::Never => return Ok(None),
            Expiry::Default => match default_ttl {
                None => return Ok(None),
                Some(ttl) => now_ms().saturating_add(ceil_ms(ttl)),
            },
            Expiry::After(ttl) => now_ms().saturating_add(ceil_ms(ttl)),
            Expiry::At(t) => match t.duration_since(UNIX_EPOCH) {
                Ok(d) => ceil_ms(d),
                Err(_) => 0, // before the epoch: long expired
            },
        };
        if at > MAX_EXPIRES_AT_MS {
            return Err(Error::InvalidOptions(
                "an expiry must be before the end of the year 9999",
            ));
        }
        // The format's smallest expiry is 1 ms after the epoch: an instant at or before it is
        // just as expired.
        Ok(Some(at.max(1)))
    }
}

/// `d` in whole milliseconds, rounded up (a value never expires before the time asked for),
/// saturating.
fn ceil_ms(d: Duration) -> u64 {
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(ms).unwrap_or(u64::MAX)
}

/// An expiry in milliseconds since the epoch as a [`SystemTime`].
pub(crate) fn to_system_time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

/// The clock expiries are judged by: the system clock, shifted by a test's offset (the
/// `testing` feature's [`MockClock`]).
#[derive(Debug, Clone, Default)]
pub(crate) struct Clock {
    #[cfg(any(test, feature = "testing"))]
    mock: Option<MockClock>,
}

impl Clock {
    /// A clock that reads the system's time shifted by `mock`'s offset.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn mocked(mock: MockClock) -> Clock {
        Clock { mock: Some(mock) }
    }

    /// Now, in milliseconds since the Unix epoch (0 for a clock set before it).
    pub(crate) fn now_ms(&self) -> u64 {
        let real = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        #[cfg(any(test, feature = "testing"))]
        if let Some(m) = &self.mock {
            return real.saturating_add_signed(m.offset_ms());
        }
        real
    }
}

#[cfg(any(test, feature = "testing"))]
pub use mock::MockClock;

#[cfg(any(test, feature = "testing"))]
mod mock {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::time::Duration;

    /// Test machinery (the `testing` feature): a clock for expiries that a test moves, given to
    /// a store with [`Options::testing_clock`](crate::Options::testing_clock). It reads the
    /// system clock plus an offset; clones share the offset. Per store, not global, so that
    /// tests running in parallel threads do not move each other's clocks.
    #[derive(Debug, Clone, Default)]
    pub struct MockClock {
        offset_ms: Arc<AtomicI64>,
    }

    impl MockClock {
        /// A clock at the system's time (offset 0).
        pub fn new() -> MockClock {
            MockClock::default()
        }

        /// Moves the clock forward by `by`.
        pub fn advance(&self, by: Duration) {
            self.offset_ms
                .fetch_add(by.as_millis() as i64, Ordering::SeqCst);
        }

        /// Sets the offset from the system clock, in milliseconds (negative: behind it).
        pub fn set_offset_ms(&self, ms: i64) {
            self.offset_ms.store(ms, Ordering::SeqCst);
        }

        /// The offset from the system clock, in milliseconds.
        pub fn offset_ms(&self) -> i64 {
            self.offset_ms.load(Ordering::SeqCst)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_and_instants_become_milliseconds_rounded_up() {
        let o = PutOptions::new();
        assert_eq!(o.expiry_ms(|| 1000, None).unwrap(), None);
        assert_eq!(
            o.expiry_ms(|| 1000, Some(Duration::from_secs(2))).unwrap(),
            Some(3000)
        );
        let o = PutOptions::new().ttl(Duration::from_micros(1500));
        assert_eq!(o.expiry_ms(|| 1000, None).unwrap(), Some(1002));
        assert_eq!(
            PutOptions::new()
                .no_expiry()
                .expiry_ms(|| 1000, Some(Duration::from_secs(1)))
                .unwrap(),
            None
        );
        let at = UNIX_EPOCH + Duration::from_millis(5);
        assert_eq!(
            PutOptions::new()
                .expires_at(at)
                .expiry_ms(|| 1000, None)
                .unwrap(),
            Some(5)
        );
        // Before the epoch and at it: the smallest expiry the format holds, long past.
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            PutOptions::new()
                .expires_at(before)
                .expiry_ms(|| 0, None)
                .unwrap(),
            Some(1)
        );
        assert_eq!(
            PutOptions::new()
                .ttl(Duration::ZERO)
                .expiry_ms(|| 0, None)
                .unwrap(),
            Some(1)
        );
        // Past the year 9999: refused.
        let far = UNIX_EPOCH + Duration::from_millis(MAX_EXPIRES_AT_MS + 1);
        assert!(matches!(
            PutOptions::new().expires_at(far).expiry_ms(|| 0, None),
            Err(Error::InvalidOptions(_))
        ));
        assert!(
            PutOptions::new()
                .ttl(Duration::MAX)
                .expiry_ms(|| 1, None)
                .is_err()
        );
    }
}
