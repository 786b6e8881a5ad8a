//! [`ReadAhead`]: a [`ByteSource`] that serves a scan's small reads from a window read in one
//! go.
//!
//! Why: a scan (recovery of a segment without a footer, a read-only opener listing the
//! writer's unsealed segment, `verify`) walks a segment's records in file order and reads each
//! one's header and value separately, a few hundred bytes at a time. Through an O_DIRECT handle
//! each of those is a device read (two per record: ~300,000 reads of 512 bytes to list a
//! 6,000-record segment twenty times, 15 s in `tests/list_meta.rs` before this), where one read
//! of a window serves a thousand small records. Reads at least as long as the window (a large
//! value's bytes being checked) go to the source as they are: copying them through the window
//! would only add a copy.
//!
//! The window holds what the source returned when it was read: a scan of a file another
//! process is appending to sees the file as of that read, as it would have with a read per
//! record issued at that moment (a record not whole yet ends the scan either way). A file can
//! also get shorter than the length the scan began with (a seal cuts off the zeroes written
//! ahead of a segment's data; `verify` walks the segment being written): a window read that
//! meets the end falls back to the read asked for, which fails only where a read per record
//! would have (found by `tests/corruption.rs`'s `verify_beside_concurrent_writers_finds_nothing`).

use std::cell::RefCell;
use std::io;

use super::cursor::ByteSource;

/// Bytes a [`ReadAhead`] reads at once by default: 1 MiB, a few milliseconds of a disk's
/// sequential rate, and memory a scan can afford.
pub const SCAN_WINDOW: usize = 1 << 20;

/// Alignment of a window's start: a direct-I/O source reads whole blocks anyway.
const WINDOW_ALIGN: u64 = 4096;

/// Serves reads of `src` from a window of `window` bytes read in one call (see the module).
/// Single-threaded (a scan is), hence the `RefCell`.
pub struct ReadAhead<'a, S: ByteSource + ?Sized> {
    src: &'a S,
    window: usize,
    /// Offset of `buf`'s first byte in the source, and the bytes read there.
    held: RefCell<(u64, Vec<u8>)>,
}

impl<'a, S: ByteSource + ?Sized> ReadAhead<'a, S> {
    /// A read-ahead over `src` reading `window` bytes at a time (at least one block).
    pub fn new(src: &'a S, window: usize) -> Self {
        Self {
            src,
            window: window.max(WINDOW_ALIGN as usize),
            held: RefCell::new((0, Vec::new())),
        }
    }
}

impl<S: ByteSource + ?Sized> ByteSource for ReadAhead<'_, S> {
    fn len(&self) -> u64 {
        self.src.len()
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset
            .checked_add(buf.len() as u64)
            .ok_or(io::ErrorKind::UnexpectedEof)?;
        let mut held = self.held.borrow_mut();
        let (at, bytes) = &mut *held;
        if offset >= *at && end <= *at + bytes.len() as u64 {
            let from = (offset - *at) as usize;
            buf.copy_from_slice(&bytes[from..from + buf.len()]);
            return Ok(());
        }
        if buf.len() >= self.window / 2 {
            // A long read: straight from the source, the window kept for what follows it.
            return self.src.read_exact_at(offset, buf);
        }
        let len = self.src.len();
        if end > len {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let start = offset - offset % WINDOW_ALIGN;
        let stop = (start + self.window as u64).min(len).max(end);
        bytes.resize((stop - start) as usize, 0);
        if let Err(e) = self.src.read_exact_at(start, bytes) {
            bytes.clear();
            // The file got shorter than its length when the scan began: a writer sealing the
            // segment being scanned cuts off the zeroes written ahead of its data. The window
            // reached past the new end; the read asked for may not: it alone decides.
            if e.kind() == io::ErrorKind::UnexpectedEof {
                return self.src.read_exact_at(offset, buf);
            }
            return Err(e);
        }
        *at = start;
        let from = (offset - start) as usize;
        buf.copy_from_slice(&bytes[from..from + buf.len()]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A source that counts the reads it serves.
    struct Counting<'a> {
        bytes: &'a [u8],
        reads: Cell<usize>,
    }

    impl ByteSource for Counting<'_> {
        fn len(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.set(self.reads.get() + 1);
            self.bytes.read_exact_at(offset, buf)
        }
    }

    #[test]
    fn reads_match_the_source_and_small_ones_share_a_window() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let src = Counting {
            bytes: &data,
            reads: Cell::new(0),
        };
        let ra = ReadAhead::new(&src, 64 << 10);
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut small = 0;
        for _ in 0..2_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Mostly small reads walking forward, some long ones, some past the end.
            let at = state % 210_000;
            let len = if state.is_multiple_of(17) {
                40_000
            } else {
                (state >> 20) as usize % 600
            };
            let mut got = vec![0u8; len];
            let want = data.get(at as usize..at as usize + len);
            match (ra.read_exact_at(at, &mut got), want) {
                (Ok(()), Some(w)) => assert_eq!(got, w, "{len} bytes at {at}"),
                (Err(e), None) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
                (r, w) => panic!(
                    "{len} bytes at {at}: {r:?} against {:?}",
                    w.map(<[u8]>::len)
                ),
            }
            small += usize::from(len < 32 << 10);
        }
        assert!(small > 1_000);
        // A walk in file order: one source read per window.
        let before = src.reads.get();
        let mut at = 0u64;
        while at + 300 <= data.len() as u64 {
            let mut got = [0u8; 300];
            ra.read_exact_at(at, &mut got).unwrap();
            assert_eq!(&got[..], &data[at as usize..at as usize + 300]);
            at += 300;
        }
        let windows = data.len().div_ceil(64 << 10) + 1;
        assert!(
            src.reads.get() - before <= windows,
            "{} source reads for {windows} windows",
            src.reads.get() - before
        );
    }

    /// A source that got shorter than the length it reports (a file cut while it is scanned).
    struct Cut<'a> {
        bytes: &'a [u8],
        reported: u64,
    }

    impl ByteSource for Cut<'_> {
        fn len(&self) -> u64 {
            self.reported
        }
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
            self.bytes.read_exact_at(offset, buf)
        }
    }

    #[test]
    fn a_window_past_a_files_new_end_falls_back_to_the_read_asked_for() {
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        let src = Cut {
            bytes: &data,
            reported: 1 << 20,
        };
        let ra = ReadAhead::new(&src, 64 << 10);
        let mut b = [0u8; 100];
        ra.read_exact_at(9_000, &mut b).unwrap();
        assert_eq!(&b[..], &data[9_000..9_100]);
        let err = ra.read_exact_at(9_950, &mut b).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_failed_window_read_is_the_callers_error_and_is_not_kept() {
        struct Failing;
        impl ByteSource for Failing {
            fn len(&self) -> u64 {
                1 << 20
            }
            fn read_exact_at(&self, _: u64, _: &mut [u8]) -> io::Result<()> {
                Err(io::Error::other("device gone"))
            }
        }
        let ra = ReadAhead::new(&Failing, SCAN_WINDOW);
        let mut b = [0u8; 16];
        assert_eq!(
            ra.read_exact_at(100, &mut b).unwrap_err().to_string(),
            "device gone"
        );
        assert!(ra.held.borrow().1.is_empty());
        assert!(ra.read_exact_at(100, &mut b).is_err());
    }
}
