//! Sealed files put into the remote whole (same bytes, footer included), a few at a time, each
//! retried with backoff; and the consistent set of files a remote flush names.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::manifest::data_name;
use super::{RemoteTier, TierState, retry};
use crate::error::{Error, FileKind, Result};
use crate::format::manifest::ManifestFile;
use crate::io::file::SegmentFile;
use crate::io::remote::ObjectBody;
use crate::store::inner::Inner;
use crate::store::read::Reader;

/// Bytes read per call while computing a file's crc32.
const READ_CHUNK: usize = 1 << 20;

/// The most bytes of files one flush's manifest carries ([`carried`]): a flush with more
/// waiting uploads them first. Enough for a flush after a put of a few MiB; a manifest is
/// read whole by restores, readers and deletion passes, so not more.
pub(super) const CARRY_MAX: u64 = 4 << 20;

/// A sealed file of the store, held open: a compaction that removes it meanwhile leaves it
/// readable (the inode lives while the handle does).
#[derive(Clone)]
pub(super) struct SealedFile {
    kind: FileKind,
    len: u64,
    file: Arc<SegmentFile>,
}

/// The files a remote flush names, and what its manifest says besides.
pub(super) struct Snapshot {
    /// Every sealed file, by id.
    pub(super) files: Vec<(u64, SealedFile)>,
    /// No record in them has a higher sequence number.
    pub(super) max_seq: u64,
    /// The last sequence number given when the snapshot was taken.
    pub(super) last_seq: u64,
    /// Above every file id used so far.
    pub(super) next_file_id: u64,
    /// The catalog's eviction watermark.
    pub(super) evicted: Option<(u64, FileKind, u64)>,
}

/// The store's files at a point where the sealed ones hold every record written before it:
/// compaction and eviction held off (they move records into the active segment before they
/// remove a file), the active segment sealed and synced, then the sealed files listed. The
/// set is what a clean close leaves, so a store restored from it holds every write made
/// before this call, each key's newest first, and nothing a delete or an eviction dropped.
pub(super) fn snapshot(inner: &Inner) -> Result<Snapshot> {
    let _paused = inner.compactor.pause();
    let sealed = inner.log.lock().seal_active()?;
    if sealed {
        inner.log.sync_all()?;
    }
    let syncs_done = inner.log.progress().lock().syncs_done;
    let files = sealed_files(inner, syncs_done)?;
    let (next_file_id, max_seq, last_seq) = {
        let app = inner.log.lock();
        let last = app.last_seq();
        (app.next_file_id(), app.reserved_through().max(last), last)
    };
    Ok(Snapshot {
        files,
        max_seq,
        last_seq,
        next_file_id,
        evicted: inner.shared.catalog.state().evicted,
    })
}

/// The files whose footer is durable after `syncs_done` syncs, held open.
fn sealed_files(inner: &Inner, syncs_done: u64) -> Result<Vec<(u64, SealedFile)>> {
    let mut out = Vec::new();
    for (id, h) in inner.shared.segments.sealed_by(syncs_done) {
        let len = h.file.len()?;
        out.push((
            id,
            SealedFile {
                kind: h.kind,
                len,
                file: h.file,
            },
        ));
    }
    Ok(out)
}

/// The sealed files of the store now, as `(id, length)`: for the figures.
pub(in crate::store) fn sealed_lengths(inner: &Inner) -> Vec<(u64, u64)> {
    let syncs_done = inner.log.progress().lock().syncs_done;
    sealed_files(inner, syncs_done)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, f)| (id, f.len))
        .collect()
}

/// A sealed file as the body of a put: positional reads through its open handle, with the
/// crc32 of what the put read, when it read the file once from start to end in order.
struct FileBody<'a> {
    file: &'a SealedFile,
    reader: &'a Reader,
    read_align: u64,
    reads: Mutex<CrcOfReads>,
}

/// The crc32 of a body's reads so far, while they follow one another from offset 0 (a read
/// at 0 starts again: a retried put); `broken` once one does not.
#[derive(Default)]
struct CrcOfReads {
    hasher: crc32fast::Hasher,
    next: u64,
    broken: bool,
}

impl CrcOfReads {
    /// Notes a read of `bytes` at `offset`.
    fn note(&mut self, offset: u64, bytes: &[u8]) {
        if offset == 0 {
            *self = CrcOfReads::default();
        }
        if self.broken {
            return;
        }
        if offset == self.next {
            self.hasher.update(bytes);
            self.next += bytes.len() as u64;
        } else {
            self.broken = true;
        }
    }

    /// The crc32 of bytes `0..len`, if the reads since the last one at 0 were exactly those,
    /// in order.
    fn whole(&self, len: u64) -> Option<u32> {
        (!self.broken && self.next == len).then(|| self.hasher.clone().finalize())
    }
}

impl ObjectBody for FileBody<'_> {
    fn len(&self) -> u64 {
        self.file.len
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.file.len) {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        self.file
            .file
            .read_exact_at(offset, buf, self.reader.pool(), self.read_align)?;
        self.reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .note(offset, buf);
        Ok(())
    }
}

impl<'a> FileBody<'a> {
    fn new(file: &'a SealedFile, reader: &'a Reader, read_align: u64) -> Self {
        FileBody {
            file,
            reader,
            read_align,
            reads: Mutex::default(),
        }
    }

    /// The crc32 of the whole file as the last put read it, if it read it once in order (the
    /// bytes it sent, without reading the file again).
    fn crc_of_reads(&self) -> Option<u32> {
        self.reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .whole(self.file.len)
    }

    /// crc32 of the whole file.
    /// (Read in order from 0, so that [`CrcOfReads`] hashes it, as it does a put's reads.)
    fn crc(&self) -> std::io::Result<u32> {
        *self.reads.lock().unwrap_or_else(|p| p.into_inner()) = CrcOfReads::default();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut at = 0;
        while at < self.file.len {
            let n = (self.file.len - at).min(READ_CHUNK as u64) as usize;
            self.read_exact_at(at, &mut buf[..n])?;
            at += n as u64;
        }
        self.crc_of_reads()
            .ok_or_else(|| std::io::Error::other("a sealed file's reads for its crc32 overlapped"))
    }
}

/// Uploads the files not in the remote yet: those of `only` (a flush's snapshot), or the
/// oldest few sealed files of the store now (the background thread's pass: as many as there
/// are upload threads, so that a close waits for one round at most). At most
/// [`Options::remote_upload_threads`] at once; the others' uploads go on when one fails, and
/// the first error is returned. Returns the files and bytes uploaded.
///
/// [`Options::remote_upload_threads`]: crate::Options::remote_upload_threads
pub(super) fn pass(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    only: Option<&[(u64, SealedFile)]>,
    carried: &Carried,
) -> Result<(usize, u64)> {
    let all;
    let files = match only {
        Some(files) => files,
        None => {
            let syncs_done = inner.log.progress().lock().syncs_done;
            all = sealed_files(inner, syncs_done)?;
            &all
        }
    };
    note_remote_only(inner, tier, state, files);
    let threads = tier.config.upload_threads;
    let mut todo = waiting(state, files);
    if only.is_none() {
        todo.truncate(threads);
    }
    if todo.is_empty() {
        return Ok((0, 0));
    }
    // Taken from the end: the lowest ids first.
    todo.reverse();
    let epoch = state.epoch;
    let threads = threads.min(todo.len());
    let todo: Vec<_> = todo
        .into_iter()
        .map(|(id, f)| {
            let bytes = carried.get(id).cloned();
            (*id, f, state.inherited.get(id).copied(), bytes)
        })
        .collect();
    let queue = Mutex::new(todo);
    let done = Mutex::new(Vec::new());
    let first_error: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    if tier.check_fenced().is_err() {
                        return;
                    }
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                    let Some((id, file, inherited, bytes)) = next else {
                        return;
                    };
                    match upload_one(inner, tier, epoch, (id, file, bytes), inherited) {
                        Ok(uploaded) => done
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push(uploaded),
                        Err(e) => {
                            let mut first = first_error.lock().unwrap_or_else(|p| p.into_inner());
                            first.get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    let done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    let (mut files, mut bytes) = (0, 0);
    for &(f, put) in &done {
        if put {
            files += 1;
            bytes += f.length;
        }
        state.inherited.remove(&f.id);
        tier.uploaded(state, f);
    }
    match first_error.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        // Fenced, the threads stopped before the last files.
        None => tier.check_fenced().map(|()| (files, bytes)),
    }
}

/// Notes each of `files` whose data is in the remote only as uploaded: it is there, as the
/// catalog says (never read again to be compared or uploaded: its local copy has no data).
fn note_remote_only(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    files: &[(u64, SealedFile)],
) {
    for (id, f) in files {
        if !state.uploaded.contains_key(id)
            && let Some(o) = inner.shared.catalog.remote_of(*id)
        {
            let entry = ManifestFile {
                id: *id,
                kind: f.kind,
                length: f.len,
                crc: o.crc,
                epoch: o.epoch,
            };
            state.inherited.remove(id);
            tier.uploaded(state, entry);
        }
    }
}

/// The files of `files` whose bytes no object holds yet (not uploaded, or uploaded at another
/// length or kind).
fn waiting<'a>(state: &TierState, files: &'a [(u64, SealedFile)]) -> Vec<&'a (u64, SealedFile)> {
    files
        .iter()
        .filter(|(id, f)| {
            state
                .uploaded
                .get(id)
                .is_none_or(|u| u.length != f.len || u.kind != f.kind)
        })
        .collect()
}

/// A file a manifest carries: its entry and its bytes.
pub(super) type CarriedFile = (ManifestFile, Arc<[u8]>);

/// Files a manifest carries, by id ([`carried`]).
pub(super) type Carried = BTreeMap<u64, CarriedFile>;

/// Bytes in memory as the body of a put.
struct Held(Arc<[u8]>);

impl ObjectBody for Held {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.0[..].read_exact_at(offset, buf)
    }
}

/// The files of a flush's snapshot that its manifest carries, with their bytes (a flush of
/// one round trip: docs/design-remote.md, "Files in the manifest"): every file not in the
/// remote yet, read whole, when they come to at most [`CARRY_MAX`] bytes together and none
/// is inherited (to be compared with the manifest taken over, not sent again). Empty
/// otherwise: the flush then uploads them before it writes its manifest.
pub(super) fn carried(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    files: &[(u64, SealedFile)],
) -> Result<Carried> {
    note_remote_only(inner, tier, state, files);
    let todo = waiting(state, files);
    let total: u64 = todo.iter().map(|(_, f)| f.len).sum();
    let mut out = BTreeMap::new();
    if total > CARRY_MAX || todo.iter().any(|(id, _)| state.inherited.contains_key(id)) {
        return Ok(out);
    }
    for &(id, ref f) in todo {
        let body = FileBody::new(f, &inner.reader, inner.shared.profile.read_align);
        let bytes = body
            .to_vec()
            .map_err(|e| Error::io("remote: read a sealed file", Some(f.file.path().into()), e))?;
        let entry = ManifestFile {
            id,
            kind: f.kind,
            length: f.len,
            crc: crc32fast::hash(&bytes),
            epoch: state.epoch,
        };
        out.insert(id, (entry, Arc::from(bytes)));
    }
    Ok(out)
}

/// Puts file `id` under this writer's epoch, with retries, unless `inherited` (the entry of
/// the manifest this writer took over) already holds its bytes (same kind, length and crc32).
/// Its entry for the manifest, and whether it was put.
fn upload_one(
    inner: &Inner,
    tier: &RemoteTier,
    epoch: u64,
    (id, file, bytes): (u64, &SealedFile, Option<CarriedFile>),
    inherited: Option<ManifestFile>,
) -> Result<(ManifestFile, bool)> {
    let name = data_name(&tier.config.prefix, epoch, file.kind, id);
    let put = |body: &dyn ObjectBody| {
        retry(&tier.config, "remote: upload", &name, |_| {
            tier.config.remote.put(&name, body)
        })
    };
    // Its entry once put, counted.
    let uploaded = |crc| {
        tier.bytes_uploaded
            .fetch_add(file.len, std::sync::atomic::Ordering::Relaxed);
        tier.files_uploaded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let entry = ManifestFile {
            id,
            kind: file.kind,
            length: file.len,
            crc,
            epoch,
        };
        (entry, true)
    };
    // Carried by the manifest written beside this upload: its bytes are in memory already.
    if let Some((carried, bytes)) = bytes.filter(|(f, _)| f.length == file.len) {
        put(&Held(bytes))?;
        return Ok(uploaded(carried.crc));
    }
    let body = FileBody::new(file, &inner.reader, inner.shared.profile.read_align);
    let read_error = |e| {
        Error::io(
            "remote: read a sealed file",
            Some(file.file.path().into()),
            e,
        )
    };
    // The crc32 is read before the put only to compare with an inherited entry; otherwise it
    // is taken from the put's own reads (one read of the file, not two), or read after.
    let mut crc = None;
    if let Some(f) = inherited.filter(|f| f.kind == file.kind && f.length == file.len) {
        let found = body.crc().map_err(read_error)?;
        if f.crc == found {
            return Ok((f, false));
        }
        crc = Some(found);
    }
    put(&body)?;
    let crc = match crc.or_else(|| body.crc_of_reads()) {
        Some(crc) => crc,
        None => body.crc().map_err(read_error)?,
    };
    Ok(uploaded(crc))
}

#[cfg(test)]
mod tests {
    use super::CrcOfReads;

    fn reads(data: &[u8], at: &[(u64, usize)]) -> Option<u32> {
        let mut c = CrcOfReads::default();
        for &(offset, len) in at {
            c.note(offset, &data[offset as usize..offset as usize + len]);
        }
        c.whole(data.len() as u64)
    }

    /// A put's reads give the file's crc32 only when they covered it once, in order, since
    /// their last start at 0; otherwise the caller reads the file again.
    #[test]
    fn the_crc_of_a_puts_reads_is_the_files_only_when_they_read_it_in_order() {
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = crc32fast::hash(&data);
        assert_eq!(reads(&data, &[(0, 10_000)]), Some(whole));
        assert_eq!(
            reads(&data, &[(0, 4096), (4096, 4096), (8192, 1808)]),
            Some(whole)
        );
        // A retry starts again at 0.
        assert_eq!(
            reads(&data, &[(0, 4096), (0, 6000), (6000, 4000)]),
            Some(whole)
        );
        // Parts read out of order, a gap, a part read twice, or not to the end: no crc.
        assert_eq!(reads(&data, &[(4096, 5904), (0, 4096)]), None);
        assert_eq!(reads(&data, &[(0, 4096), (5000, 5000)]), None);
        assert_eq!(reads(&data, &[(0, 4096), (4096, 4096), (4096, 4096)]), None);
        assert_eq!(reads(&data, &[(0, 8192)]), None);
        assert_eq!(reads(&[], &[]), Some(crc32fast::hash(&[])));
    }
}
