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
use super::segments::{FileSummary, SegmentHandle};
use super::shared::Shared;
use crate::error::Result;
use crate::format::record::record_len;
use crate::index::IndexEntry;
use crate::io::file::{self, SegmentFile};
use crate::segment::{self, SegmentKind};

/// Blob files created per directory fsync when none is spare.
const BLOB_FILES_PER_CREATE: u64 = 8;

/// The blob-file writer.
pub(super) struct Blobs {
    shared: Shared,
    log: Arc<Log>,
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
    pub(super) fn new(shared: Shared, log: Arc<Log>) -> Blobs {
        Blobs {
            shared,
            log,
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
    ) -> Result<()> {
        if let Some(e) = self.log.failure() {
            return Err(e);
        }
        let shared = &self.shared;
        let (seq, id, spare, new_ids) = {
            let spare = self.lock_spares().pop();
            let (id, new_ids) = match &spare {
                Some((id, _)) => (*id, 0..0),
                None => {
                    // One creator of spares at a time; under a burst of large puts the others
                    // create just their own file (their directory fsyncs share a journal commit).
                    let creator = !self.creating.swap(true, Ordering::AcqRel);
                    let count = if creator { BLOB_FILES_PER_CREATE } else { 1 };
                    let ids = match app.take_file_ids(count) {
                        Ok(ids) => ids,
                        Err(e) => {
                            if creator {
                                self.creating.store(false, Ordering::Release);
                            }
                            return Err(e);
                        }
                    };
                    (ids.start, ids)
                }
            };
            // Numbered after the ids: a refused allocation spends no sequence number.
            let seq = app.take_seq();
            let entry = IndexEntry {
                segment: id,
                offset: segment::BLOB_RECORD_OFFSET,
                value_len: value.value_len,
                stored_len: value.stored_len(),
                seq,
                key_len: key.len() as u32,
                flags: value.flags(),
            };
            shared.pending.push(seq, key, Some(entry), true);
            drop(app);
            (seq, id, spare, new_ids)
        };
        let file = match spare {
            Some((_, file)) => Ok(file),
            // None spare: create a few, with one directory fsync, and keep the others.
            None => {
                let spares = new_ids.end - new_ids.start > 1;
                let created = segment::create_blob_files(&shared.dir, new_ids, &shared.profile);
                if spares {
                    self.creating.store(false, Ordering::Release);
                }
                created.map(|mut f| {
                    let mine = f.remove(0).1;
                    self.lock_spares().extend(f);
                    mine
                })
            }
        };
        let blob = segment::BlobValue {
            stored: &value.bytes,
            value_len: value.value_len,
            flags: value.flags(),
        };
        let written = file.and_then(|file| {
            segment::write_blob(&shared.dir, file, id, seq, key, blob, &shared.profile)
        });
        match written {
            Ok(file) => {
                shared
                    .counters
                    .add_user_bytes(record_len(key.len() as u64, value.stored_len()));
                let summary = FileSummary {
                    min_put_seq: seq,
                    ..FileSummary::default()
                };
                shared.segments.insert(
                    id,
                    SegmentHandle::sealed(Arc::new(file), SegmentKind::Blob, summary),
                );
                shared.pending.ready_one(seq, &shared.index);
                self.log.progress().notify();
                self.log.wait(seq, seq, false)
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
        for (id, file) in spares {
            drop(file);
            let path = segment::path(&self.shared.dir, id, SegmentKind::Blob);
            file::remove_file(&self.shared.profile, &path)?;
        }
        file::sync_dir(&self.shared.profile, &self.shared.dir)
    }
}
