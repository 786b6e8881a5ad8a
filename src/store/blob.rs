//! Large values: each in a blob file of its own, written and made durable by the putting thread
//! beside the shared log buffer, so that small writers never queue behind it.
//!
//! Blob files are created ahead, a few per directory fsync, so that a put itself needs no
//! directory fsync: a spare that is never written has no footer and is removed at the next
//! open (or at close).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::append::{AppendGuard, Log};
use super::compress::StoredValue;
use super::read::{Look, Reader};
use super::resolve::{self, Check};
use super::segments::{FileSummary, SegmentHandle};
use super::shared::Shared;
use crate::error::{Error, Result};
use crate::format::record::{FLAG_EXPIRES, record_len_for};
use crate::index::{IndexEntry, KEPT_FLAGS, Seen};
use crate::io::file::SegmentFile;
use crate::meta::{Condition, Version};
use crate::segment::{self, BlobStream, SegmentKind};

/// A blob file taken for a put: a spare, or the first of `new_ids`, to be created.
struct Reserved {
    id: u64,
    spare: Option<SegmentFile>,
    new_ids: std::ops::Range<u64>,
}

/// Blob files created per directory fsync when none is spare.
const BLOB_FILES_PER_CREATE: u64 = 8;

/// The blob-file writer.
pub(super) struct Blobs {
    shared: Shared,
    log: Arc<Log>,
    /// Reads the records a put's key may replace (`resolve`).
    reader: Arc<Reader>,
    /// Blob files created ahead (empty, names durable), for large puts to come.
    spares: Mutex<Vec<(u64, SegmentFile)>>,
    /// A large put is creating spare blob files: the others create only their own.
    creating: AtomicBool,
    /// Smallest sequence number of a blob put that failed in this process (`u64::MAX`: none):
    /// its file may still be on disk, or come back after a crash, with a whole record.
    abandoned_seq: AtomicU64,
}

impl Blobs {
    /// The blob-file writer of a store.
    pub(super) fn new(shared: Shared, log: Arc<Log>, reader: Arc<Reader>) -> Blobs {
        Blobs {
            shared,
            log,
            reader,
            spares: Mutex::new(Vec::new()),
            creating: AtomicBool::new(false),
            abandoned_seq: AtomicU64::new(u64::MAX),
        }
    }

    /// Smallest sequence number of a blob put that failed in this process (`u64::MAX`: none).
    /// Until the next open, tombstones older than it must stay: its file may linger.
    pub(super) fn oldest_abandoned(&self) -> u64 {
        self.abandoned_seq.load(Ordering::Relaxed)
    }

    /// Writes a large value to a blob file of its own. Takes the append lock (held by the
    /// caller, who may have checked something under it) only to number the write.
    pub(super) fn put(
        &self,
        mut app: AppendGuard<'_>,
        key: &[u8],
        value: &StoredValue<'_>,
        (hash, seen): &(u64, Seen),
    ) -> Result<u64> {
        if let Some(e) = self.log.failure() {
            return Err(e);
        }
        let shared = &self.shared;
        let reserved = self.reserve_file(&mut app)?;
        // Numbered after the file id: a refused allocation spends no sequence number.
        let seq = app.take_seq()?;
        let entry = IndexEntry {
            segment: reserved.id,
            offset: segment::BLOB_RECORD_OFFSET,
            value_len: value.value_len,
            stored_len: value.stored_len(),
            key_len: key.len() as u32,
            flags: value.flags() & KEPT_FLAGS,
            expires_at: value.expires_at,
        };
        let resolved = shared
            .pending
            .push(seq, key, *hash, Some(entry), true, seen, &shared.index);
        drop(app);
        if !resolved {
            resolve::settle(shared, &self.reader, &[(seq, key, true)]);
        }
        let id = reserved.id;
        let blob = segment::BlobValue {
            stored: &value.bytes,
            value_len: value.value_len,
            flags: value.flags(),
            expires_at: value.expires_at,
        };
        let written = self.open_reserved(reserved).and_then(|file| {
            segment::write_blob(&shared.dir, file, id, seq, key, blob, &shared.profile)
                .map(Arc::new)
        });
        self.publish(
            seq,
            id,
            record_len_for(value.flags(), key.len() as u64, value.stored_len()),
            written,
        )
    }

    /// Starts a streamed put of `key` (`Store::writer`): a blob file of its own, written as the
    /// bytes come; nothing is numbered or visible before [`Blobs::finish_stream`].
    pub(super) fn start_stream(&self, key: &[u8], expires_at: Option<u64>) -> Result<BlobStream> {
        if let Some(e) = self.log.failure() {
            return Err(e);
        }
        let reserved = self.reserve_file(&mut self.log.lock())?;
        let id = reserved.id;
        let file = self.open_reserved(reserved)?;
        Ok(BlobStream::new(
            file,
            id,
            key,
            &self.shared.profile,
            expires_at,
        ))
    }

    /// Commits a streamed put of a value of `value_len` bytes, stored as the stream's bytes with
    /// record flags `flags`: numbers it, writes the record's head and footer (durable), and
    /// publishes it; returns its sequence number. With `flush_first` (buffered durability),
    /// every write numbered before it is made durable first, so that a crash still loses only
    /// a suffix of the writes. With a condition, the key's current version is checked under
    /// the append lock, as the write is numbered ([`resolve::check`]); if it fails, the stream
    /// is abandoned and nothing is written.
    pub(super) fn finish_stream(
        &self,
        key: &[u8],
        stream: BlobStream,
        (flags, value_len): (u16, u64),
        flush_first: bool,
        condition: Option<Condition>,
    ) -> Result<u64> {
        let shared = &self.shared;
        if let Some(e) = self.log.failure() {
            stream.abandon(&shared.dir);
            return Err(e);
        }
        let stored_len = stream.stored_len();
        let expires_at = stream.expires_at();
        let kept_flags = (flags
            | if expires_at.is_some() {
                FLAG_EXPIRES
            } else {
                0
            })
            & KEPT_FLAGS;
        // A conditional write needs the key's true newest entry: read, never lazy.
        let look = match condition {
            Some(_) => Look::First,
            None => resolve::put_look(shared),
        };
        let mut looked = resolve::seen(shared, &self.reader, key, look);
        let (before, seq, id, resolved) = loop {
            let (hash, seen) = match looked {
                Ok(s) => s,
                Err(e) => {
                    stream.abandon(&shared.dir);
                    return Err(e);
                }
            };
            let mut app = self.log.lock();
            if let Some(condition) = condition {
                match resolve::check(shared, key, hash, &seen) {
                    Check::Current(current) if condition.holds(current.map(Version)) => {}
                    Check::Current(current) => {
                        drop(app);
                        stream.abandon(&shared.dir);
                        return Err(Error::ConditionFailed {
                            key: key.to_vec(),
                            current: current.map(Version),
                        });
                    }
                    Check::Wait(pending) => {
                        drop(app);
                        if let Err(e) = self.log.wait(pending, pending, false) {
                            stream.abandon(&shared.dir);
                            return Err(e);
                        }
                        looked = resolve::seen(shared, &self.reader, key, look);
                        continue;
                    }
                    Check::Again => {
                        drop(app);
                        looked = resolve::seen(shared, &self.reader, key, look);
                        continue;
                    }
                }
            }
            let before = app.last_seq();
            let seq = app.take_seq()?;
            let id = stream.id();
            let entry = IndexEntry {
                segment: id,
                offset: segment::BLOB_RECORD_OFFSET,
                value_len,
                stored_len,
                key_len: key.len() as u32,
                flags: kept_flags,
                expires_at,
            };
            let resolved =
                shared
                    .pending
                    .push(seq, key, hash, Some(entry), true, &seen, &shared.index);
            break (before, seq, id, resolved);
        };
        if !resolved {
            resolve::settle(shared, &self.reader, &[(seq, key, true)]);
        }
        let flushed = if flush_first {
            // Not `flush`: it would wait for this put too.
            self.log.flush_to(before)
        } else {
            Ok(())
        };
        let written = match flushed {
            Ok(()) => stream.finish(&shared.dir, seq, flags, value_len),
            Err(e) => {
                stream.abandon(&shared.dir);
                Err(e)
            }
        };
        let len = record_len_for(kept_flags, key.len() as u64, stored_len);
        self.publish(seq, id, len, written)
    }

    /// Takes a blob file for a put: a spare, or the first of a few new ids (created by
    /// [`Blobs::open_reserved`], outside the append lock).
    fn reserve_file(&self, app: &mut AppendGuard<'_>) -> Result<Reserved> {
        let spare = self.lock_spares().pop();
        match spare {
            Some((id, file)) => Ok(Reserved {
                id,
                spare: Some(file),
                new_ids: 0..0,
            }),
            None => {
                // One creator of spares at a time; under a burst of large puts the others
                // create just their own file (their directory fsyncs share a journal commit).
                let creator = !self.creating.swap(true, Ordering::AcqRel);
                let count = if creator { BLOB_FILES_PER_CREATE } else { 1 };
                let ids = app.take_file_ids(count).inspect_err(|_| {
                    if creator {
                        self.creating.store(false, Ordering::Release);
                    }
                })?;
                Ok(Reserved {
                    id: ids.start,
                    spare: None,
                    new_ids: ids,
                })
            }
        }
    }

    /// The file of a reserved blob: the spare, or created now with a few spares for later puts,
    /// with one directory fsync.
    fn open_reserved(&self, reserved: Reserved) -> Result<SegmentFile> {
        if let Some(file) = reserved.spare {
            return Ok(file);
        }
        let shared = &self.shared;
        let ids = reserved.new_ids;
        let spares = ids.end - ids.start > 1;
        let created = segment::create_blob_files(&shared.dir, ids, &shared.profile);
        if spares {
            self.creating.store(false, Ordering::Release);
        }
        // Listed in the catalog before a put writes to them (see `Blobs::publish` for why a
        // listed, unsealed blob file is never mistaken for a lost one).
        let created = created.and_then(|f| {
            let listed: Vec<_> = f.iter().map(|(id, _)| (*id, SegmentKind::Blob)).collect();
            shared.catalog.created(&listed).map(|()| f)
        });
        created.map(|mut f| {
            let mine = f.remove(0).1;
            self.lock_spares().extend(f);
            mine
        })
    }

    /// Publishes blob put `seq` (file `id`, a record of `record_bytes`) once its file is
    /// written and sealed, or drops its queued update if that failed.
    fn publish(
        &self,
        seq: u64,
        id: u64,
        record_bytes: u64,
        written: Result<Arc<SegmentFile>>,
    ) -> Result<u64> {
        let shared = &self.shared;
        // The put is acknowledged only once its seal is in the catalog: open then refuses a
        // store in which the file of an acknowledged put is missing or cut, and treats a blob
        // file the catalog does not list as sealed as a put that never returned (removed if it
        // is not whole, forgotten if it is gone).
        let written = written.and_then(|file| {
            let sealed = file
                .len()
                .and_then(|len| shared.catalog.sealed(id, SegmentKind::Blob, len));
            // On failure the file stays: whether the seal reached the catalog is unknown (a
            // failed sync), and a sealed file must never go missing. Whole and sealed, it may
            // be loaded at the next open, like any blob put that failed after its footer.
            sealed.map(|()| file)
        });
        match written {
            Ok(file) => {
                shared.counters.add_user_bytes(record_bytes);
                let summary = FileSummary {
                    min_put_seq: seq,
                    max_seq: seq,
                    ..FileSummary::default()
                };
                shared
                    .segments
                    .insert(id, SegmentHandle::sealed(file, SegmentKind::Blob, summary));
                shared.counters.file_made();
                shared.pending.ready_one(seq, &shared.index);
                self.log.progress().notify();
                self.log.wait(seq, seq, false).map(|()| seq)
            }
            Err(e) => {
                // Its file may outlive the failure (removal is best effort and not made durable),
                // and a blob file whose record is whole is kept at open: until then, tombstones
                // older than this put must stay.
                self.abandoned_seq.fetch_min(seq, Ordering::Relaxed);
                shared.pending.abandon(seq, &shared.index);
                self.log.progress().notify();
                Err(e)
            }
        }
    }

    fn lock_spares(&self) -> MutexGuard<'_, Vec<(u64, SegmentFile)>> {
        self.spares.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Removes the blob files created ahead and not used.
    pub(super) fn remove_spares(&self) -> Result<()> {
        let spares = std::mem::take(&mut *self.lock_spares());
        if spares.is_empty() {
            return Ok(());
        }
        let files: Vec<_> = spares
            .into_iter()
            .map(|(id, file)| {
                drop(file);
                (id, SegmentKind::Blob)
            })
            .collect();
        self.shared.catalog.remove(&files, true)
    }
}
