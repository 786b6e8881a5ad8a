//! Compression on the write path (whether and how a value is compressed) and framed reads (which
//! frames a range needs, reading them as verified stored bytes, decompressing them).
//!
//! The byte layout and its decoders are pure and live in [`crate::format::frames`]; this module
//! holds the policy and the I/O around them.

use std::borrow::Cow;

use crate::MAX_VALUE_LEN;
use crate::error::{Corruption, Error, Result};
use crate::format::frames::{
    FRAME_ENTRY_LEN, FRAME_TABLE_HEADER_LEN, FrameEntry, FrameTableHeader, decode_entries,
    decode_frame, decode_header, encode_framed,
};
use crate::format::record::FLAG_COMPRESSED;
use crate::format::{CHUNK_SIZE, align_down, align_up};
use crate::index::IndexEntry;
use crate::options::{Compression, Options};

/// A value as it goes into a record: its stored bytes (raw, or a frame table and frames) and the
/// length readers see.
#[derive(Debug)]
pub struct StoredValue<'a> {
    /// The record's value bytes.
    pub bytes: Cow<'a, [u8]>,
    /// The value's length as put.
    pub value_len: u64,
    /// Whether `bytes` are framed.
    pub compressed: bool,
    /// When the value expires (milliseconds since the Unix epoch), if it does.
    pub expires_at: Option<u64>,
}

impl<'a> StoredValue<'a> {
    /// `value` stored as it is.
    pub fn raw(value: &'a [u8]) -> StoredValue<'a> {
        StoredValue {
            bytes: Cow::Borrowed(value),
            value_len: value.len() as u64,
            compressed: false,
            expires_at: None,
        }
    }

    /// `value` stored as the options say: raw, or compressed.
    pub fn encode(value: &'a [u8], opts: &Options) -> StoredValue<'a> {
        if value.is_empty() {
            return StoredValue::raw(value);
        }
        let frame_size = opts.compression_frame_size;
        let min_saving = match opts.compression {
            Compression::None => return StoredValue::raw(value),
            Compression::Lz4 => None,
            Compression::Auto => {
                if estimated_saving(value, frame_size) < opts.compression_min_saving {
                    return StoredValue::raw(value);
                }
                Some(opts.compression_min_saving)
            }
        };
        let framed = encode_framed(value, frame_size);
        let saving = 1.0 - framed.len() as f64 / value.len() as f64;
        if framed.len() as u64 > MAX_VALUE_LEN || min_saving.is_some_and(|m| saving < m) {
            return StoredValue::raw(value);
        }
        StoredValue {
            bytes: Cow::Owned(framed),
            value_len: value.len() as u64,
            compressed: true,
            expires_at: None,
        }
    }

    /// These bytes, expiring at `expires_at` (milliseconds since the Unix epoch) if given.
    pub fn expiring(mut self, expires_at: Option<u64>) -> StoredValue<'a> {
        self.expires_at = expires_at;
        self
    }

    /// The record flags that describe these bytes (compressed, expires).
    pub fn flags(&self) -> u16 {
        let compressed = if self.compressed { FLAG_COMPRESSED } else { 0 };
        let expires = if self.expires_at.is_some() {
            crate::format::record::FLAG_EXPIRES
        } else {
            0
        };
        compressed | expires
    }

    /// Length of the stored bytes.
    pub fn stored_len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// Whether a streamed value (`Store::writer`) is compressed, decided from `sample`, its first
/// frame: always with `Lz4`, never with `None`, and with `Auto` when the sample's estimated
/// saving reaches `Options::compression_min_saving`. (A value that ends before its first frame
/// is full is stored as [`StoredValue::encode`] says, like a put.)
pub fn compress_stream(sample: &[u8], opts: &Options) -> bool {
    match opts.compression {
        Compression::None => false,
        Compression::Lz4 => true,
        Compression::Auto => {
            estimated_saving(sample, opts.compression_frame_size) >= opts.compression_min_saving
        }
    }
}

/// Bytes per sample slice of [`estimated_saving`].
const SAMPLE_SLICE: usize = 4096;
/// Number of sample slices.
const SAMPLES: usize = 8;

/// The fraction of `value`'s size that framing it would save, estimated by compressing up to
/// [`SAMPLES`] slices of [`SAMPLE_SLICE`] bytes spread evenly over it (the whole value when it is
/// that small), and counting the frame table. Each slice is compressed on its own, with less
/// history than a frame has, so the estimate errs on the side of storing raw.
pub fn estimated_saving(value: &[u8], frame_size: u32) -> f64 {
    if value.is_empty() {
        return 0.0;
    }
    let mut out = vec![0u8; lz4_flex::block::get_maximum_output_size(SAMPLE_SLICE * SAMPLES)];
    let mut compressed_size = |slice: &[u8]| match lz4_flex::block::compress_into(slice, &mut out) {
        Ok(n) => n.min(slice.len()),
        Err(_) => slice.len(),
    };
    let (sampled, compressed) = if value.len() <= SAMPLE_SLICE * SAMPLES {
        (value.len(), compressed_size(value))
    } else {
        let step = (value.len() - SAMPLE_SLICE) / (SAMPLES - 1);
        let compressed = (0..SAMPLES)
            .map(|i| compressed_size(&value[i * step..i * step + SAMPLE_SLICE]))
            .sum();
        (SAMPLE_SLICE * SAMPLES, compressed)
    };
    let header = FrameTableHeader::new(value.len() as u64, frame_size);
    let estimate =
        compressed as f64 / sampled as f64 * value.len() as f64 + header.table_len() as f64;
    1.0 - estimate / value.len() as f64
}

/// What a reader of one compressed value keeps between reads: the frame table header, the
/// encoded entries of the chunks it read last, and the last frame it decompressed but did not
/// hand out whole. [`ValueReader`](crate::ValueReader) keeps one so that a stream of small reads
/// reads and decompresses every frame once; a one-off read starts from an empty one.
#[derive(Debug, Default)]
pub struct FrameCache {
    header: Option<FrameTableHeader>,
    /// Encoded entries of frames `entries_first..entries_first + entries.len() / 16`.
    entries_first: u64,
    entries: Vec<u8>,
    /// A decompressed frame and its index.
    frame: Option<(u64, Vec<u8>)>,
}

impl FrameCache {
    /// True once the value's frame table header is known.
    pub fn has_table(&self) -> bool {
        self.header.is_some()
    }

    /// Keeps the encoded entries that lie whole in `bytes`, stored bytes read from offset `at`:
    /// at most a chunk of them (the last ones), which bounds what a [`CachedTable`] holds.
    fn keep_entries(&mut self, header: &FrameTableHeader, bytes: &[u8], at: u64) {
        let entries_at = header.entries_at();
        let entry = FRAME_ENTRY_LEN as u64;
        let end = at + bytes.len() as u64;
        let last = (end.saturating_sub(entries_at) / entry).min(header.frame_count);
        let first = at
            .saturating_sub(entries_at)
            .div_ceil(entry)
            .max(last.saturating_sub(CHUNK_SIZE / entry));
        self.entries.clear();
        self.entries_first = first.min(last);
        if first < last {
            let from = (header.entry_offset(first) - at) as usize;
            let to = (header.entry_offset(last) - at) as usize;
            self.entries.extend_from_slice(&bytes[from..to]);
        }
    }

    fn entries_cover(&self, frames: &std::ops::Range<u64>) -> bool {
        let end = self.entries_first + (self.entries.len() / FRAME_ENTRY_LEN) as u64;
        frames.start >= self.entries_first && frames.end <= end
    }
}

/// Verified frame table bytes of one value, as the read cache keeps them
/// ([`Part::Frames`](super::cache::Part::Frames)): the header and at most one 4 KiB chunk of
/// entries. With them, a range read of a value read before goes straight to its frames; without,
/// every range read first reads the chunks that hold the table header (the last two of the
/// stored bytes; the first one in older stores) and their checksums.
#[derive(Debug)]
pub(super) struct CachedTable {
    header: FrameTableHeader,
    entries_first: u64,
    entries: Vec<u8>,
}

impl CachedTable {
    /// Bytes it takes (for the cache's weight).
    pub(super) fn bytes(&self) -> u64 {
        (std::mem::size_of::<CachedTable>() + self.entries.len()) as u64
    }

    /// What `cache` learned about a table, if it read one.
    pub(super) fn of(cache: &FrameCache) -> Option<CachedTable> {
        Some(CachedTable {
            header: cache.header?,
            entries_first: cache.entries_first,
            entries: cache.entries.clone(),
        })
    }

    /// Fills `cache` with this table.
    pub(super) fn seed(&self, cache: &mut FrameCache) {
        cache.header = Some(self.header);
        cache.entries_first = self.entries_first;
        cache.entries.clear();
        cache.entries.extend_from_slice(&self.entries);
    }
}

/// Reads uncompressed bytes `[start, start + dst.len())` of the compressed value `entry` into
/// `dst`. `read_stored(offset, buf)` reads verified stored bytes of the value (chunk crcs
/// checked: see `segment::read_value`).
///
/// Reads the frame table header (trailing: with the last two 4 KiB chunks, which a verified read
/// fetches whole anyway, and which hold the entries of up to 254 frames; leading, in older
/// stores: with the first chunk), the entries of the frames the range touches (unless they came
/// with it), and those frames' stored bytes in one read; decompresses only those frames and
/// checks each one's crc.
pub fn read_framed(
    entry: &IndexEntry,
    start: u64,
    dst: &mut [u8],
    cache: &mut FrameCache,
    mut read_stored: impl FnMut(u64, &mut [u8]) -> Result<()>,
) -> Result<()> {
    let stored_len = entry.stored_len;
    let corrupt = |at: u64, kind: Corruption| Error::Corruption {
        // The entry does not say; the reader that holds the file names it (`in_file`).
        file: crate::error::FileKind::Log,
        segment: entry.segment,
        offset: entry.value_offset() + at,
        kind,
    };
    let header = match cache.header {
        Some(h) => h,
        None => {
            // A trailing table's header is in the last 24 stored bytes: read the chunk that
            // holds them and the one before (a verified read fetches whole chunks anyway, and
            // their crcs are adjacent too: the same disk reads as one chunk), so that a table of
            // up to 254 frames is read whole even when it straddles a chunk boundary. A leading
            // table (older stores) is in the first chunk instead.
            let lo = align_down(
                stored_len.saturating_sub(FRAME_TABLE_HEADER_LEN as u64),
                CHUNK_SIZE,
            )
            .saturating_sub(CHUNK_SIZE);
            let mut tail = vec![0u8; (stored_len - lo) as usize];
            // Damage there is the table's if the table is trailing; if it is leading (an older
            // store), it is the last frames', which must not fail reads of the others.
            let tail_read = match read_stored(lo, &mut tail) {
                Err(e) if lo == 0 => return Err(e),
                r => r,
            };
            let tail_ok = if tail_read.is_ok() { &tail[..] } else { &[] };
            let mut head = None;
            let h = decode_header(tail_ok, stored_len, Some(entry.value_len), || {
                let mut bytes = if lo == 0 {
                    tail.clone()
                } else {
                    vec![0u8; stored_len.min(CHUNK_SIZE) as usize]
                };
                if lo != 0 {
                    read_stored(0, &mut bytes)?;
                }
                let h = FrameTableHeader::decode(&bytes, stored_len);
                head = Some(bytes);
                Ok::<_, Error>(h)
            })?;
            let h = match (h, tail_read) {
                (Ok(h), _) => h,
                (Err(_), Err(e)) => return Err(e),
                (Err(k), Ok(())) => return Err(corrupt(0, k)),
            };
            if h.value_len != entry.value_len {
                return Err(corrupt(
                    0,
                    Corruption::InvalidField {
                        field: "frame table value length",
                        value: h.value_len,
                    },
                ));
            }
            let (bytes, at) = match head {
                Some(head) => (head, 0),
                None => (tail, lo),
            };
            cache.keep_entries(&h, &bytes, at);
            cache.header = Some(h);
            h
        }
    };
    let end = start + dst.len() as u64;
    let frames = header.frames_for(start, end);
    if frames.is_empty() {
        return Ok(());
    }
    // Copy out of the frame kept from the last read; decode the others.
    let mut todo = frames.clone();
    if let Some((i, buf)) = &cache.frame
        && frames.contains(i)
    {
        copy_overlap(&header, *i, buf, start, dst);
        if *i == todo.start {
            todo.start += 1;
        } else if *i + 1 == todo.end {
            todo.end -= 1;
        }
    }
    if todo.is_empty() {
        return Ok(());
    }
    if !cache.entries_cover(&todo) {
        // Read the entries of every frame whose entry lies in the chunks the needed entries
        // touch: the disk read is the same, and a stream of reads then needs no more for a
        // while.
        let entries_at = header.entries_at();
        let lo = align_down(header.entry_offset(todo.start), CHUNK_SIZE).max(entries_at);
        let first = (lo - entries_at).div_ceil(FRAME_ENTRY_LEN as u64);
        let hi = align_up(header.entry_offset(todo.end), CHUNK_SIZE)
            .min(header.entry_offset(header.frame_count));
        let last = (hi - entries_at) / FRAME_ENTRY_LEN as u64;
        let mut bytes = std::mem::take(&mut cache.entries);
        bytes.resize(((last - first) as usize) * FRAME_ENTRY_LEN, 0);
        read_stored(header.entry_offset(first), &mut bytes)?;
        cache.entries_first = first;
        cache.entries = bytes;
    }
    let from = (todo.start - cache.entries_first) as usize * FRAME_ENTRY_LEN;
    let entries: Vec<FrameEntry> =
        decode_entries(&header, todo.clone(), &cache.entries[from..], stored_len)
            .map_err(|k| corrupt(header.entry_offset(todo.start), k))?;
    let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
        return Ok(());
    };
    let s0 = first.offset;
    let mut stored = vec![0u8; (last.end() - s0) as usize];
    read_stored(s0, &mut stored)?;
    for (k, e) in entries.iter().enumerate() {
        let i = todo.start + k as u64;
        let src = &stored[(e.offset - s0) as usize..(e.end() - s0) as usize];
        let fs = header.frame_start(i);
        let fl = header.frame_len(i);
        if fs >= start && fs + fl <= end {
            // Wanted whole: straight into the caller's buffer.
            let at = (fs - start) as usize;
            decode_frame(&header, i, e, src, &mut dst[at..at + fl as usize])
                .map_err(|c| corrupt(e.offset, c))?;
        } else {
            let mut buf = cache.frame.take().map(|(_, b)| b).unwrap_or_default();
            buf.resize(fl as usize, 0);
            decode_frame(&header, i, e, src, &mut buf).map_err(|c| corrupt(e.offset, c))?;
            copy_overlap(&header, i, &buf, start, dst);
            cache.frame = Some((i, buf));
        }
    }
    Ok(())
}

/// Copies the part of frame `index` (decompressed in `frame`) that falls in
/// `[start, start + dst.len())` to its place in `dst`.
fn copy_overlap(header: &FrameTableHeader, index: u64, frame: &[u8], start: u64, dst: &mut [u8]) {
    let fs = header.frame_start(index);
    let a = fs.max(start);
    let b = (fs + frame.len() as u64).min(start + dst.len() as u64);
    if a < b {
        dst[(a - start) as usize..(b - start) as usize]
            .copy_from_slice(&frame[(a - fs) as usize..(b - fs) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::frames::MIN_FRAME_SIZE;
    use crate::format::frames::test_data::{self, text};

    fn random(len: usize) -> Vec<u8> {
        test_data::random(len, 0x1234_5678_9abc_def1)
    }

    /// A stored value in memory, read the way the store reads one, counting reads.
    struct Fixture {
        stored: Vec<u8>,
        entry: IndexEntry,
    }

    impl Fixture {
        fn new(value: &[u8], frame_size: u32) -> Fixture {
            Fixture::with_stored(value, encode_framed(value, frame_size))
        }

        /// The value in both layouts: trailing (as written now) and leading (older stores).
        fn both(value: &[u8], frame_size: u32) -> [Fixture; 2] {
            let trailing = encode_framed(value, frame_size);
            let leading = crate::format::frames::to_leading_layout(&trailing);
            [
                Fixture::with_stored(value, trailing),
                Fixture::with_stored(value, leading),
            ]
        }

        /// Bytes of the stored value that are not frames.
        fn table_bytes(&self) -> u64 {
            let (h, _) =
                crate::format::frames::decode_table(&self.stored, self.stored.len() as u64)
                    .unwrap();
            h.table_len()
        }

        fn with_stored(value: &[u8], stored: Vec<u8>) -> Fixture {
            let entry = IndexEntry {
                segment: 1,
                offset: 64,
                value_len: value.len() as u64,
                stored_len: stored.len() as u64,
                key_len: 1,
                flags: FLAG_COMPRESSED,
                expires_at: None,
            };
            Fixture { stored, entry }
        }

        fn read(&self, start: u64, len: usize, cache: &mut FrameCache) -> (Result<Vec<u8>>, u64) {
            let mut out = vec![0u8; len];
            let mut bytes_read = 0;
            let r = read_framed(&self.entry, start, &mut out, cache, |off, buf| {
                bytes_read += buf.len() as u64;
                buf.copy_from_slice(&self.stored[off as usize..off as usize + buf.len()]);
                Ok(())
            });
            (r.map(|()| out), bytes_read)
        }
    }

    #[test]
    fn every_range_around_frame_boundaries() {
        let f = MIN_FRAME_SIZE as u64;
        let value = text(5 * f as usize + 123);
        let points = [0, 1, f - 1, f, f + 1, 2 * f, 3 * f - 2, 5 * f, 5 * f + 122];
        for (fx, &a) in Fixture::both(&value, MIN_FRAME_SIZE)
            .iter()
            .flat_map(|fx| points.iter().map(move |a| (fx, a)))
        {
            for &b in points.iter().chain(&[value.len() as u64]) {
                if a > b {
                    continue;
                }
                let (got, _) = fx.read(a, (b - a) as usize, &mut FrameCache::default());
                assert_eq!(got.unwrap(), &value[a as usize..b as usize], "{a}..{b}");
            }
        }
    }

    #[test]
    fn a_small_range_reads_its_frames_and_the_chunks_of_its_table() {
        let f = MIN_FRAME_SIZE as u64;
        let value = text(250 * f as usize);
        for fx in Fixture::both(&value, MIN_FRAME_SIZE) {
            let start = 123 * f + 1000;
            let (got, bytes_read) = fx.read(start, 4096, &mut FrameCache::default());
            assert_eq!(got.unwrap(), &value[start as usize..start as usize + 4096]);
            let s = fx.stored.len() as u64;
            let (header, all) = crate::format::frames::decode_table(&fx.stored, s).unwrap();
            // The range straddles frames 123 and 124.
            let frames: u64 = all[123..125].iter().map(|e| e.stored_len as u64).sum();
            // The chunk holding the last 24 bytes, where a trailing table's header is, and the
            // one before: the whole table of these 250 frames. A leading table is in the first
            // chunk, read after the last two showed no trailing header.
            let tail = s - align_down(s - 24, 4096) + 4096;
            let table = match header.layout {
                crate::format::frames::FrameLayout::Trailing => tail,
                crate::format::frames::FrameLayout::Leading => tail + 4096,
            };
            assert_eq!(bytes_read, table + frames, "{:?}", header.layout);
        }
    }

    #[test]
    fn a_stream_of_small_reads_decodes_each_frame_once() {
        let f = MIN_FRAME_SIZE as usize;
        let value = text(300 * f + 17);
        for fx in Fixture::both(&value, MIN_FRAME_SIZE) {
            let mut cache = FrameCache::default();
            let mut total_read = 0;
            let mut pos = 0;
            while pos < value.len() {
                let n = 1000.min(value.len() - pos);
                let (got, r) = fx.read(pos as u64, n, &mut cache);
                assert_eq!(got.unwrap(), &value[pos..pos + n]);
                total_read += r;
                pos += n;
            }
            // Each frame's stored bytes once, the entries once per 4 KiB chunk of them, and
            // the chunk of the table header.
            let frames_stored = fx.stored.len() as u64 - fx.table_bytes();
            assert!(
                total_read <= frames_stored + 3 * 4096 + 4096,
                "read {total_read} for {frames_stored} stored frame bytes"
            );
        }
    }

    #[test]
    fn a_value_length_that_disagrees_with_the_table_is_corruption() {
        let value = text(10_000);
        for mut fx in Fixture::both(&value, MIN_FRAME_SIZE) {
            fx.entry.value_len = 9_999;
            let (got, _) = fx.read(0, 10, &mut FrameCache::default());
            assert!(matches!(
                got,
                Err(Error::Corruption {
                    kind: Corruption::InvalidField { .. },
                    ..
                })
            ));
        }
    }

    #[test]
    fn a_damaged_frame_fails_only_the_reads_that_touch_it() {
        let f = MIN_FRAME_SIZE as u64;
        let value = text(4 * f as usize);
        for mut fx in Fixture::both(&value, MIN_FRAME_SIZE) {
            let (header, entries) =
                crate::format::frames::decode_table(&fx.stored, fx.stored.len() as u64).unwrap();
            let victim = entries[2];
            fx.stored[(victim.offset + 3) as usize] ^= 0x55;
            for (a, b) in [(0, f), (f, 2 * f), (3 * f, 4 * f), (2 * f - 1, 2 * f)] {
                let (got, _) = fx.read(a, (b - a) as usize, &mut FrameCache::default());
                assert_eq!(got.unwrap(), &value[a as usize..b as usize]);
            }
            for (a, b) in [(2 * f, 2 * f + 1), (2 * f - 1, 2 * f + 1), (0, 4 * f)] {
                let (got, _) = fx.read(a, (b - a) as usize, &mut FrameCache::default());
                match got {
                    Err(Error::Corruption {
                        segment: 1, offset, ..
                    }) => assert_eq!(offset, fx.entry.value_offset() + victim.offset),
                    other => panic!("{a}..{b}: {other:?}"),
                }
            }
            assert_eq!(header.frame_count, 4);
        }
    }

    #[test]
    fn a_kept_table_skips_the_table_chunks() {
        let f = MIN_FRAME_SIZE as u64;
        let value = text(40 * f as usize);
        let fx = Fixture::new(&value, MIN_FRAME_SIZE);
        let mut cache = FrameCache::default();
        assert!(CachedTable::of(&cache).is_none());
        let (_, cold) = fx.read(20 * f, 10, &mut cache);
        let kept = CachedTable::of(&cache).expect("a table was read");
        let mut cache = FrameCache::default();
        kept.seed(&mut cache);
        assert!(cache.has_table());
        let (got, warm) = fx.read(20 * f, 10, &mut cache);
        assert_eq!(got.unwrap(), &value[20 * f as usize..20 * f as usize + 10]);
        let frame = crate::format::frames::decode_table(&fx.stored, fx.stored.len() as u64)
            .unwrap()
            .1[20];
        assert_eq!(
            warm, frame.stored_len as u64,
            "only the frame: no table read again"
        );
        assert!(cold > warm);
    }

    #[test]
    fn damage_at_the_end_of_an_older_value_fails_only_the_reads_of_its_frames() {
        // Leading layout: the last chunk holds the last frames, not the table. A read of the
        // first frames probes it (for a trailing table) and must not fail because of it.
        let f = MIN_FRAME_SIZE as u64;
        let value = text(20 * f as usize);
        let [_, fx] = Fixture::both(&value, MIN_FRAME_SIZE);
        let bad = align_down(fx.stored.len() as u64 - 1, CHUNK_SIZE);
        let read = |start: u64, len: usize| {
            let mut out = vec![0u8; len];
            let mut cache = FrameCache::default();
            read_framed(&fx.entry, start, &mut out, &mut cache, |off, buf| {
                if off + buf.len() as u64 > bad {
                    return Err(Error::Corruption {
                        file: crate::error::FileKind::Log,
                        segment: 1,
                        offset: bad,
                        kind: Corruption::ChecksumMismatch {
                            got: 0,
                            expected: 1,
                        },
                    });
                }
                let at = off as usize;
                buf.copy_from_slice(&fx.stored[at..at + buf.len()]);
                Ok(())
            })
            .map(|()| out)
        };
        assert_eq!(read(0, 100).unwrap(), &value[..100]);
        assert_eq!(
            read(5 * f, 10).unwrap(),
            &value[5 * f as usize..5 * f as usize + 10]
        );
        assert!(read(20 * f - 10, 10).is_err());
    }

    #[test]
    fn auto_estimates() {
        assert!(estimated_saving(&text(1 << 20), 65536) > 0.4);
        assert!(estimated_saving(&random(1 << 20), 65536) < 0.0);
        assert!(estimated_saving(&[0u8; 1000], 65536) > 0.9);
        assert!(estimated_saving(&random(100), 65536) < 0.0);
        assert_eq!(estimated_saving(&[], 65536), 0.0);
        let opts = Options::default().compression(Compression::Auto);
        assert!(StoredValue::encode(&text(100_000), &opts).compressed);
        assert!(!StoredValue::encode(&random(100_000), &opts).compressed);
        assert!(!StoredValue::encode(&[], &opts).compressed);
        let lz4 = Options::default().compression(Compression::Lz4);
        let r = random(100_000);
        let s = StoredValue::encode(&r, &lz4);
        assert!(s.compressed && s.stored_len() > 100_000);
        assert!(!StoredValue::encode(&text(100_000), &Options::default()).compressed);
        // A saving just below the bar is stored raw.
        let t = text(100_000);
        let framed = encode_framed(&t, 65536).len() as f64;
        let real_saving = 1.0 - framed / 100_000.0;
        let strict = Options::default()
            .compression(Compression::Auto)
            .compression_min_saving(real_saving + 0.01);
        assert!(!StoredValue::encode(&t, &strict).compressed);
    }
}
