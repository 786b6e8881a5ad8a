//! The ranges [`Store::get_range`](crate::Store::get_range) accepts, and the rule that turns one
//! into the bytes it reads.

use std::ops::{Bound, Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

use crate::error::{Error, Result};

mod sealed {
    pub trait Sealed {}
}

/// A range of value bytes, for [`Store::get_range`](crate::Store::get_range): any of Rust's
/// range types (`a..b`, `a..`, `..b`, `a..=b`, `..=b`, `..`, and a pair of [`Bound`]s) over
/// `u64`, `usize`, `u32`, `u16` or `u8`, so that an offset computed as a `usize` needs no cast.
///
/// `i32` is accepted too, only so that a range of unsuffixed literals (`0..4096`, which Rust
/// types as `i32` when nothing else decides) compiles; a negative bound is
/// [`Error::OutOfRange`].
///
/// Sealed: implemented by podstore only.
///
/// ```
/// # fn main() -> podstore::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// # let store = podstore::Store::open(dir.path())?;
/// store.put("k", "0123456789")?;
/// let from: usize = 2;
/// assert_eq!(store.get_range("k", from..from + 3)?.unwrap(), b"234");
/// assert_eq!(store.get_range("k", 2u32..=4)?.unwrap(), b"234");
/// assert_eq!(store.get_range("k", 8u64..)?.unwrap(), b"89");
/// assert_eq!(store.get_range("k", ..)?.unwrap(), b"0123456789");
/// # Ok(()) }
/// ```
pub trait ValueRange: sealed::Sealed {
    /// The range's bounds as byte offsets; `None` for a bound no value can have (negative).
    #[doc(hidden)]
    fn byte_bounds(&self) -> Option<(Bound<u64>, Bound<u64>)>;
}

fn map_bound<T: Copy>(b: Bound<&T>, f: impl Fn(T) -> Option<u64>) -> Option<Bound<u64>> {
    Some(match b {
        Bound::Included(&v) => Bound::Included(f(v)?),
        Bound::Excluded(&v) => Bound::Excluded(f(v)?),
        Bound::Unbounded => Bound::Unbounded,
    })
}

macro_rules! value_range {
    ($($t:ty),*) => {$(
        value_range!(@one $t, Range<$t>, RangeFrom<$t>, RangeTo<$t>, RangeInclusive<$t>,
            RangeToInclusive<$t>, (Bound<$t>, Bound<$t>));
    )*};
    (@one $t:ty, $($r:ty),*) => {$(
        impl sealed::Sealed for $r {}
        impl ValueRange for $r {
            fn byte_bounds(&self) -> Option<(Bound<u64>, Bound<u64>)> {
                use std::ops::RangeBounds;
                let to = |v: $t| u64::try_from(v).ok();
                Some((map_bound(self.start_bound(), to)?, map_bound(self.end_bound(), to)?))
            }
        }
    )*};
}

value_range!(u8, u16, u32, u64, usize, i32);

impl sealed::Sealed for RangeFull {}
impl ValueRange for RangeFull {
    fn byte_bounds(&self) -> Option<(Bound<u64>, Bound<u64>)> {
        Some((Bound::Unbounded, Bound::Unbounded))
    }
}

/// The bytes `[start, end)` that `range` reads of the value of `key`, `len` bytes long, by the
/// rule of HTTP and S3 range requests: an end past the value is clamped to its end; a start past
/// the end (`start > len`), an end before the start, or a negative bound is
/// [`Error::OutOfRange`]. A start at the end (`start == len`) reads nothing.
pub(crate) fn resolve(range: &impl ValueRange, len: u64, key: &[u8]) -> Result<(u64, u64)> {
    let out_of_range = |start: u64, end: u64| Error::OutOfRange {
        key: key.to_vec(),
        start,
        end,
        len,
    };
    let Some((start, end)) = range.byte_bounds() else {
        return Err(out_of_range(u64::MAX, u64::MAX));
    };
    let start = match start {
        Bound::Included(s) => Some(s),
        Bound::Excluded(s) => s.checked_add(1),
        Bound::Unbounded => Some(0),
    };
    // An end that overflows is past every value's end: clamped like any other.
    let end = match end {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => e,
        Bound::Unbounded => len,
    };
    match start {
        Some(s) if s <= len && s <= end => Ok((s, end.min(len))),
        s => Err(out_of_range(s.unwrap_or(u64::MAX), end)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(range: impl ValueRange, len: u64) -> Option<(u64, u64)> {
        resolve(&range, len, b"k").ok()
    }

    #[test]
    fn http_rule() {
        assert_eq!(r(0..4096, 267), Some((0, 267)));
        assert_eq!(r(0usize..10, 10), Some((0, 10)));
        assert_eq!(r(10u32..20, 10), Some((10, 10)));
        assert_eq!(r(11u64..20, 10), None);
        assert_eq!(r(11u64.., 10), None);
        assert_eq!(r(10u64.., 10), Some((10, 10)));
        assert_eq!(r((Bound::Included(5u8), Bound::Excluded(3u8)), 10), None);
        assert_eq!(r(..=u64::MAX, 10), Some((0, 10)));
        assert_eq!(r(-1..3, 10), None);
        assert_eq!(r(.., 0), Some((0, 0)));
        assert_eq!(
            r((Bound::Excluded(2u16), Bound::Included(4u16)), 10),
            Some((3, 5))
        );
        assert_eq!(r((Bound::Excluded(u64::MAX), Bound::Unbounded), 10), None);
    }
}
