//! A sealed file whose data is in the remote only (issue 38, phase 2): one more
//! [`StorageFile`], so that the layers above read it like any other. Its local copy keeps the
//! bytes a read needs to find a value (the segment header, a blob's record header and key, the
//! crc tables at the end of the data, the footer); every read that touches the rest is one
//! ranged GET of exactly the bytes asked for (docs/design-remote.md, "Remote tier").

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Remote, RemoteError, retry_transient};
use crate::format::footer::{TRAILER_LEN, Trailer};
use crate::format::{CHUNK_SIZE, align_down, align_up};
use crate::io::storage::{OpenMode, ReadAt, Storage, StorageFile};

/// Bytes at the start of an evicted file that stay local: the segment header (64), a record
/// header (at most 40) and a key (at most 4096) fit, so a blob file's range read finds its
/// record's header and key locally.
const HEAD_KEPT: u64 = 8192;

/// Remote reads issued together ([`StorageFile::read_each`]) whose gap is at most this are
/// fetched by one GET (a range read's header, chunks and crcs within one record).
const JOIN_GAP: u64 = 64 << 10;

/// The requests and bytes of the reads of evicted files (for `Stats`).
#[derive(Debug, Default)]
pub(crate) struct RemoteReads {
    /// Ranged GETs made (each attempt of a retried one counts).
    pub(crate) gets: AtomicU64,
    /// Bytes they returned.
    pub(crate) bytes: AtomicU64,
}

/// Where an evicted file's bytes are: the remote, its object's name, how often a transient
/// failure is retried, and the counters its reads add to.
#[derive(Debug, Clone)]
pub(crate) struct RemoteSource {
    /// The object store.
    pub(crate) remote: Arc<dyn Remote>,
    /// The object holding the file, byte for byte.
    pub(crate) object: String,
    /// Attempts of a call failing with a transient error.
    pub(crate) attempts: u32,
    /// Counters.
    pub(crate) reads: Arc<RemoteReads>,
}

/// A read of an evicted file that the remote failed (after retries): carried in the
/// `io::Error` so that the store reports it as [`Error::Remote`](crate::Error::Remote),
/// naming the object.
#[derive(Debug)]
pub(crate) struct RemoteReadError {
    /// The object.
    pub(crate) object: String,
    /// The remote's error.
    pub(crate) source: RemoteError,
}

impl std::fmt::Display for RemoteReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "remote object {}: {}", self.object, self.source)
    }
}

impl std::error::Error for RemoteReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The bytes of a sealed file whose data ends at `data_end` (its trailer's) that an eviction
/// drops locally (and [`RemoteFile`] reads from the remote), in blocks of `block`: all but the
/// first [`HEAD_KEPT`] bytes and the last crc tables' worth of the data (a blob's crc table is
/// at most 4 bytes per 4 KiB of its data). Empty when that leaves nothing worth dropping.
pub(crate) fn evicted_span(data_end: u64, block: u64) -> Range<u64> {
    let block = block.max(4096);
    let head = align_up(HEAD_KEPT, block);
    let crcs = data_end.div_ceil(CHUNK_SIZE) * 4;
    let tail = align_down(data_end.saturating_sub(crcs), block);
    if tail > head { head..tail } else { 0..0 }
}

/// The trailer of the sealed file `local` (`len` bytes long).
pub(crate) fn read_trailer(local: &dyn StorageFile, len: u64) -> io::Result<Trailer> {
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    if len < TRAILER_LEN as u64 {
        return Err(bad(format!("a sealed file of {len} bytes has no trailer")));
    }
    let mut tail = [0u8; TRAILER_LEN];
    let at = len - TRAILER_LEN as u64;
    let mut done = 0;
    while done < TRAILER_LEN {
        match local.read_at(&mut tail[done..], at + done as u64)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => done += n,
        }
    }
    Trailer::decode(&tail, len).map_err(|k| bad(format!("trailer: {k}")))
}

/// A sealed file whose data is in the remote only.
#[derive(Debug)]
pub(crate) struct RemoteFile {
    /// The local copy (buffered reads: only its kept bytes are read).
    local: Box<dyn StorageFile>,
    source: RemoteSource,
    /// The bytes read from the remote.
    span: Range<u64>,
    len: u64,
}

impl RemoteFile {
    /// The evicted file at `path` (its local copy), its data in `source`'s object. Reads its
    /// trailer (local) for the span the remote serves.
    pub(crate) fn open(
        storage: &dyn Storage,
        path: &Path,
        read_only: bool,
        source: RemoteSource,
    ) -> io::Result<RemoteFile> {
        let mode = if read_only {
            OpenMode::ReadOnly
        } else {
            OpenMode::Existing
        };
        let local = storage.open(path, mode, false)?;
        let len = local.len()?;
        let trailer = read_trailer(&*local, len)?;
        let span = evicted_span(trailer.data_end, u64::from(trailer.block_size));
        Ok(RemoteFile {
            local,
            source,
            span,
            len,
        })
    }

    /// The bytes the remote serves (the local copy holds no data there).
    pub(crate) fn span(&self) -> Range<u64> {
        self.span.clone()
    }

    /// Whether `[from, to)` lies (in part) where the local copy holds no data.
    fn is_remote(&self, from: u64, to: u64) -> bool {
        from < self.span.end && self.span.start < to
    }

    /// Bytes `range` of the object: one GET (retried while transient), its length checked.
    fn get(&self, range: Range<u64>) -> io::Result<Vec<u8>> {
        let s = &self.source;
        let want = range.end - range.start;
        let got = retry_transient(s.attempts, |_| {
            s.reads.gets.fetch_add(1, Ordering::Relaxed);
            s.remote.get_range(&s.object, range.clone())
        })
        .map_err(|source| {
            io::Error::new(
                source.io_kind(),
                RemoteReadError {
                    object: s.object.clone(),
                    source,
                },
            )
        })?;
        s.reads.bytes.fetch_add(got.len() as u64, Ordering::Relaxed);
        if got.len() as u64 != want {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "remote object {}: {} bytes returned for a range of {want}",
                    s.object,
                    got.len()
                ),
            ));
        }
        Ok(got)
    }
}

fn read_only_file() -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        "a file whose data is in the remote only is never written",
    )
}

impl StorageFile for RemoteFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        if offset >= self.len || buf.is_empty() {
            return Ok(0);
        }
        let end = (offset + buf.len() as u64).min(self.len);
        if !self.is_remote(offset, end) {
            return self.local.read_at(buf, offset);
        }
        let got = self.get(offset..end)?;
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }

    fn write_at(&self, _buf: &[u8], _offset: u64) -> io::Result<usize> {
        Err(read_only_file())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }

    fn set_len(&self, _len: u64) -> io::Result<()> {
        Err(read_only_file())
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.len)
    }

    /// The local reads one after the other; the remote ones sorted and joined where they are
    /// close ([`JOIN_GAP`]), each group one GET, the groups' GETs in flight together (a
    /// thread each but the first, which runs on the caller's): a range read's header, chunks
    /// and crcs half a record apart cost one round trip, not three.
    fn read_each(&self, reads: &mut [ReadAt]) -> io::Result<()> {
        let mut remote: Vec<usize> = Vec::new();
        for (i, r) in reads.iter_mut().enumerate() {
            let end = (r.offset + r.len as u64).min(self.len);
            if r.offset < self.len && self.is_remote(r.offset, end) {
                remote.push(i);
            } else {
                super::super::storage::read_in_turn(self, std::slice::from_mut(r));
            }
        }
        remote.sort_unstable_by_key(|&i| reads[i].offset);
        // The groups: (the bytes one GET fetches, the reads it serves: `remote[at..last]`).
        let mut groups: Vec<(Range<u64>, Range<usize>)> = Vec::new();
        let mut at = 0;
        while at < remote.len() {
            let first = &reads[remote[at]];
            let from = first.offset;
            let mut to = (first.offset + first.len as u64).min(self.len);
            let mut last = at + 1;
            while last < remote.len() {
                let r = &reads[remote[last]];
                if r.offset > to + JOIN_GAP {
                    break;
                }
                to = to.max((r.offset + r.len as u64).min(self.len));
                last += 1;
            }
            groups.push((from..to, at..last));
            at = last;
        }
        let fetched: Vec<io::Result<Vec<u8>>> = match groups.len() {
            0 => return Ok(()),
            1 => vec![self.get(groups[0].0.clone())],
            _ => std::thread::scope(|scope| {
                // A thread the system refuses (out of threads or memory): that GET is made
                // on this one, after the others, rather than failing the read.
                let others: Vec<_> = groups[1..]
                    .iter()
                    .map(|(bytes, _)| {
                        std::thread::Builder::new()
                            .name("podstore-remote-get".into())
                            .spawn_scoped(scope, || self.get(bytes.clone()))
                            .map_err(|_| bytes.clone())
                    })
                    .collect();
                let mut all = vec![self.get(groups[0].0.clone())];
                all.extend(others.into_iter().map(|spawned| {
                    match spawned {
                        Ok(h) => h
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                        Err(bytes) => self.get(bytes),
                    }
                }));
                all
            }),
        };
        for ((bytes_at, members), got) in groups.into_iter().zip(fetched) {
            let from = bytes_at.start;
            match got {
                Ok(bytes) => {
                    for &i in &remote[members] {
                        let r = &mut reads[i];
                        let s = (r.offset - from) as usize;
                        let n = r.len.min(bytes.len().saturating_sub(s));
                        r.buf[..n].copy_from_slice(&bytes[s..s + n]);
                        r.got = n;
                    }
                }
                Err(e) => {
                    for &i in &remote[members] {
                        reads[i].error = Some(io::Error::new(e.kind(), e.to_string()));
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_span_keeps_the_head_and_the_crc_tables_and_is_block_aligned() {
        // A 100 MiB blob: data ends after 100 MiB + 100 KiB of crcs (+ header).
        let data_end = 64 + 40 + 16 + (100 << 20) + (100 << 20) / 1024;
        let s = evicted_span(data_end, 4096);
        assert_eq!(s.start, 8192);
        assert!(s.start.is_multiple_of(4096) && s.end.is_multiple_of(4096));
        // The crc table (the last 102400 bytes of the data) is outside it.
        assert!(s.end <= data_end - 102_400);
        assert!(data_end - s.end < 102_400 + 2 * 4096 + 4096);
        // A small file: nothing to drop.
        assert_eq!(evicted_span(12_000, 4096), 0..0);
        // A 64 KiB block.
        let s = evicted_span(10 << 20, 65536);
        assert_eq!(s.start, 65536);
        assert!(s.end.is_multiple_of(65536));
    }
}
