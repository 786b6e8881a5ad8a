//! What the store knows about a value besides its bytes ([`ValueMeta`]: length, version, time of
//! the write), and the conditions a write can be made on ([`Condition`]).
//!
//! A value's [`Version`] is the sequence number of the record that wrote it. Sequence numbers
//! are taken from the clock: each write gets the current time in microseconds since the Unix
//! epoch, or one more than the last number given if that is not larger (docs/design.md,
//! "Record", says why). So the version is also the time of the write, and needs no byte of its
//! own on disk: records, footers and the index are as they were.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Sequence numbers below this (2001-09-09 01:46:40 UTC, in microseconds since the epoch) were
/// given by a counter, by releases before versions were times: they tell no time, and their
/// values report [`UNIX_EPOCH`] as [`ValueMeta::written_at`]. A counter reaching it would have
/// taken 10^15 writes.
pub(crate) const CLOCK_SEQ_START: u64 = 1_000_000_000_000_000;

/// The system clock in microseconds since the Unix epoch (0 for a clock set before it).
pub(crate) fn clock_micros() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    #[cfg(test)]
    let now = now.saturating_add_signed(CLOCK_SHIFT.with(|c| c.get()));
    now
}

#[cfg(test)]
thread_local! {
    /// Microseconds added to the clock on this thread (crate tests only): a clock stepped back
    /// or forward, for the numbers a test's own thread takes.
    pub(crate) static CLOCK_SHIFT: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
}

/// The time a write numbered `seq` was accepted (see [`CLOCK_SEQ_START`]).
pub(crate) fn seq_time(seq: u64) -> SystemTime {
    if seq < CLOCK_SEQ_START {
        UNIX_EPOCH
    } else {
        UNIX_EPOCH + Duration::from_micros(seq)
    }
}

/// The version of a key's value: it changes on every write of the key and never repeats for a
/// key, also across reopens and compaction (it describes the write, not where the record
/// lives), and across crashes whatever the system clock does: the store keeps a durable
/// reservation of the numbers it gives (`VERSIONS`; docs/design.md, "Versions"), so a write lost
/// in a crash, whose version a reader may have seen, never has its version given again.
/// Versions of one store are ordered: a later write has a larger version.
///
/// It is shown (and parsed back) as 16 lowercase hex digits, a ready-made ETag.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// let v1 = store.put("k", "one")?;
/// let v2 = store.put("k", "two")?;
/// assert!(v2 > v1);
/// let etag = v2.to_string();
/// assert_eq!(etag.len(), 16);
/// assert_eq!(etag.parse::<podstore::Version>()?, v2);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub(crate) u64);

impl Version {
    /// The version as a number (the record's sequence number).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// let v = store.put("k", "v")?;
    /// assert_eq!(format!("{:016x}", v.get()), v.to_string());
    /// # Ok(()) }
    /// ```
    pub fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// A string that is not a [`Version`]: not exactly 16 hex digits.
///
/// ```
/// assert!("0123".parse::<podstore::Version>().is_err());
/// assert!("0123456789abcdeg".parse::<podstore::Version>().is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseVersionError {
    input: String,
}

impl fmt::Display for ParseVersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"{}\" is not a version (16 hex digits)",
            self.input.escape_default()
        )
    }
}

impl std::error::Error for ParseVersionError {}

impl FromStr for Version {
    type Err = ParseVersionError;

    /// Parses 16 hex digits (either case), as [`Version`]'s `Display` writes them.
    fn from_str(s: &str) -> Result<Version, ParseVersionError> {
        let bad = || ParseVersionError {
            input: s.chars().take(64).collect(),
        };
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        u64::from_str_radix(s, 16).map(Version).map_err(|_| bad())
    }
}

/// What the store knows about a value besides its bytes: its length, its version, and when it
/// was written. Returned by [`Store::metadata`](crate::Store::metadata),
/// [`Store::get_with_metadata`](crate::Store::get_with_metadata) and
/// [`ValueReader::metadata`](crate::ValueReader::metadata).
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// let before = std::time::SystemTime::now();
/// let version = store.put("k", "hello")?;
/// let meta = store.metadata("k")?.expect("present");
/// assert_eq!(meta.len(), 5);
/// assert_eq!(meta.version(), version);
/// assert!(meta.written_at() >= before - std::time::Duration::from_secs(1));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueMeta {
    len: u64,
    version: Version,
    /// Milliseconds since the Unix epoch.
    expires_at: Option<u64>,
}

impl ValueMeta {
    pub(crate) fn new(len: u64, seq: u64) -> ValueMeta {
        ValueMeta {
            len,
            version: Version(seq),
            expires_at: None,
        }
    }

    /// This metadata, of a value that expires at `expires_at` (milliseconds since the Unix
    /// epoch) if given.
    pub(crate) fn expiring(mut self, expires_at: Option<u64>) -> ValueMeta {
        self.expires_at = expires_at;
        self
    }

    /// When the value expires (to the millisecond), if it does: set by its put
    /// ([`PutOptions`](crate::PutOptions)) or the store's
    /// [`Options::default_ttl`](crate::Options::default_ttl). From that instant on the value is
    /// absent to every read.
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = podstore::Store::open(dir.path())?;
    /// use std::time::{Duration, SystemTime};
    /// let at = SystemTime::now() + Duration::from_secs(60);
    /// store.put_with("k", "v", &podstore::PutOptions::new().expires_at(at))?;
    /// let expires = store.metadata("k")?.unwrap().expires_at().unwrap();
    /// assert!(expires >= at && expires < at + Duration::from_millis(1));
    /// store.put("plain", "v")?;
    /// assert_eq!(store.metadata("plain")?.unwrap().expires_at(), None);
    /// # Ok(()) }
    /// ```
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at.map(crate::expiry::to_system_time)
    }

    /// The value's length in bytes (as it was put, whether or not it is stored compressed).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// When the write was accepted by the store, to the microsecond (the clock when the write
    /// took its place in the log; a write that came within a microsecond of the one before it,
    /// or after the clock stepped back, gets a microsecond after that one's; the first writes
    /// after a crash can be up to a second ahead of the clock, above the numbers reserved before
    /// it: docs/design.md, "Versions"). Kept by compaction, checkpoints and reopens.
    ///
    /// Values written by earlier builds, before versions were times (see the changelog), report
    /// [`UNIX_EPOCH`]: their time was never recorded.
    pub fn written_at(&self) -> SystemTime {
        seq_time(self.version.0)
    }

    /// The value's version: see [`Version`].
    pub fn version(&self) -> Version {
        self.version
    }
}

/// The condition of a conditional write ([`Store::put_if`](crate::Store::put_if),
/// [`ValueWriter::finish_if`](crate::ValueWriter::finish_if),
/// [`Batch::put_if`](crate::Batch::put_if)).
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// use podstore::{Condition, Error};
/// let v1 = store.put_if("k", "one", Condition::Absent)?;
/// let v2 = store.put_if("k", "two", Condition::Version(v1))?;
/// // A writer still holding v1 lost the race: its write is refused.
/// let lost = store.put_if("k", "stale", Condition::Version(v1));
/// assert!(matches!(lost, Err(Error::ConditionFailed { current: Some(v), .. }) if v == v2));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Condition {
    /// The key has no value.
    Absent,
    /// The key's value has this version.
    Version(Version),
}

impl Condition {
    /// Whether the condition holds for a key whose current version is `current`.
    pub(crate) fn holds(self, current: Option<Version>) -> bool {
        match self {
            Condition::Absent => current.is_none(),
            Condition::Version(v) => current == Some(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_text_round_trips() {
        for n in [0u64, 1, 0xabc, CLOCK_SEQ_START, u64::MAX] {
            let v = Version(n);
            let s = v.to_string();
            assert_eq!(s.len(), 16);
            assert_eq!(s, s.to_lowercase());
            assert_eq!(s.parse::<Version>().unwrap(), v);
        }
        assert_eq!("00000000000000FF".parse::<Version>().unwrap(), Version(255));
        for bad in [
            "",
            "ff",
            "+00000000000000f",
            "0x000000000000ff",
            "00000000000000ff0",
        ] {
            assert!(bad.parse::<Version>().is_err(), "{bad}");
        }
    }

    #[test]
    fn times_of_old_and_new_sequence_numbers() {
        assert_eq!(seq_time(1), UNIX_EPOCH);
        assert_eq!(seq_time(CLOCK_SEQ_START - 1), UNIX_EPOCH);
        let now = clock_micros();
        let t = seq_time(now);
        let d = t.duration_since(UNIX_EPOCH).unwrap();
        assert_eq!(d.as_micros() as u64, now);
    }

    #[test]
    fn conditions() {
        let v = Version(7);
        assert!(Condition::Absent.holds(None));
        assert!(!Condition::Absent.holds(Some(v)));
        assert!(Condition::Version(v).holds(Some(v)));
        assert!(!Condition::Version(v).holds(Some(Version(8))));
        assert!(!Condition::Version(v).holds(None));
    }
}
