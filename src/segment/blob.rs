//! Blob files: created ahead, written with their one record, and sealed with a footer written
//! only after the record is durable.

use std::path::Path;

use super::names::{SegmentKind, path};
use crate::error::{Error, Result};
use crate::format::footer::{FooterEntry, encode_footer};
use crate::format::record::{RecordHeader, write_record};
use crate::format::record::{RecordKind, RecordPlace};
use crate::format::segment_header::SEGMENT_HEADER_LEN;
use crate::format::segment_header::SegmentHeader;
use crate::io::file::{IoProfile, SegmentFile, remove_file, sync_dir};
use crate::io::stream::AlignedStream;

/// Offset of the record in a blob file.
pub const BLOB_RECORD_OFFSET: u64 = SEGMENT_HEADER_LEN as u64;

/// Bytes copied per write when streaming a blob file.
pub(super) const BLOB_WRITE_CHUNK: usize = 1 << 20;

/// Creates empty blob files for `ids` and makes their names durable with one directory fsync.
/// A blob file is created ahead of its put, so that the put itself needs no directory fsync;
/// one that is never written has no footer and is removed at the next open.
pub fn create_blob_files(
    dir: &Path,
    ids: std::ops::Range<u64>,
    profile: &IoProfile,
) -> Result<Vec<(u64, SegmentFile)>> {
    let mut files = Vec::new();
    for id in ids {
        match SegmentFile::create(&path(dir, id, SegmentKind::Blob), profile) {
            Ok(f) => files.push((id, f)),
            Err(e) => {
                for (id, f) in files {
                    drop(f);
                    let _ = remove_file(profile, &path(dir, id, SegmentKind::Blob));
                }
                return Err(e);
            }
        }
    }
    sync_dir(profile, dir)?;
    Ok(files)
}

/// The value of a blob file's record, as stored.
#[derive(Debug, Clone, Copy)]
pub struct BlobValue<'a> {
    /// The stored bytes: the value, or its frame table and frames when `flags` has
    /// [`FLAG_COMPRESSED`](crate::format::record::FLAG_COMPRESSED).
    pub stored: &'a [u8],
    /// The value's length as put.
    pub value_len: u64,
    /// The record's flags.
    pub flags: u16,
    /// When the value expires (milliseconds since the Unix epoch), if it does.
    pub expires_at: Option<u64>,
}

/// Writes `value` (compressed or not) as the one record of the blob file `file` (created, name
/// durable, by [`create_blob_files`]) and makes it durable. On error the file is removed (best
/// effort).
pub fn write_blob(
    dir: &Path,
    file: SegmentFile,
    id: u64,
    seq: u64,
    key: &[u8],
    value: BlobValue<'_>,
    profile: &IoProfile,
) -> Result<SegmentFile> {
    match write_blob_record(&file, id, seq, key, value, profile) {
        Ok(()) => Ok(file),
        Err(e) => {
            drop(file);
            let _ = remove_file(profile, &path(dir, id, SegmentKind::Blob));
            Err(e)
        }
    }
}

/// Writes the header, the one record and the footer of blob file `id`, the footer after a sync.
pub(super) fn write_blob_record(
    file: &SegmentFile,
    id: u64,
    seq: u64,
    key: &[u8],
    value: BlobValue<'_>,
    profile: &IoProfile,
) -> Result<()> {
    let block = profile.block_size;
    let mut stream = AlignedStream::new(file, 0, BLOB_WRITE_CHUNK, profile.mem_align, block as u64);
    stream.append(
        &SegmentHeader {
            segment: id,
            block_size: block,
        }
        .encode(),
    )?;
    let header = blob_record_header(
        key,
        value.flags,
        value.stored.len() as u64,
        seq,
        value.expires_at,
    );
    let entry = write_record(
        &mut stream,
        blob_record_place(id),
        &header,
        key,
        value.stored,
        value.value_len,
    )?;
    // The record is durable before a footer names it: the blocks of unsynced writes reach
    // the disk in any order, and a footer that did while a record block did not would
    // make a put that was never acknowledged a sealed, damaged value that hides the key's
    // acknowledged one. The footer starts on a block of its own (`finish` pads to one): one
    // lost block cannot take both the end of the value and the footer, which would make the
    // file look like a torn put.
    let footer_at = stream.finish()?;
    write_blob_footer(file, id, entry, footer_at, profile)
}

/// Where the one record of blob file `id` is.
pub(super) fn blob_record_place(id: u64) -> RecordPlace {
    RecordPlace {
        segment: id,
        offset: BLOB_RECORD_OFFSET,
    }
}

/// The header of a blob file's put record.
pub(super) fn blob_record_header(
    key: &[u8],
    flags: u16,
    stored_len: u64,
    seq: u64,
    expires_at: Option<u64>,
) -> RecordHeader {
    RecordHeader {
        kind: RecordKind::Put,
        flags,
        key_len: key.len() as u32,
        pad_before: 0,
        value_len: stored_len,
        seq,
        expires_at,
    }
}

/// Seals blob file `id`, whose record (footer entry `entry`) is written up to `footer_at`: syncs
/// it, then writes the footer there, **without a sync of its own**: the caller records the
/// file's seal in the catalog (one fdatasync of the catalog) before the put is acknowledged,
/// and a footer that a power loss takes is rebuilt from the record at the next open (the
/// catalog's length says where it ends; see `segment::open`). One fdatasync per large put saved.
pub(super) fn write_blob_footer(
    file: &SegmentFile,
    id: u64,
    entry: FooterEntry,
    footer_at: u64,
    profile: &IoProfile,
) -> Result<()> {
    let block = profile.block_size;
    let data_end = BLOB_RECORD_OFFSET + entry.record_len();
    let footer = encode_footer(id, data_end, footer_at, block, &[entry]);
    file.sync_data()?;
    write_footer(file, footer_at, &footer, block, profile)
}

/// Writes `footer` at `footer_at` (a boundary of the write block `block`).
fn write_footer(
    file: &SegmentFile,
    footer_at: u64,
    footer: &[u8],
    block: u32,
    profile: &IoProfile,
) -> Result<()> {
    let mut stream = AlignedStream::new(
        file,
        footer_at,
        footer.len(),
        profile.mem_align,
        block as u64,
    );
    stream.append(footer)?;
    stream.finish()?;
    Ok(())
}

/// Makes everything written to `file` so far durable, then writes `footer` at `footer_at` (a
/// boundary of the segment's write block `block`) and makes it durable too: a footer never reaches the disk before the records
/// it names (the blocks of one unsynced write reach the disk in any order).
pub(super) fn write_footer_after_sync(
    file: &SegmentFile,
    footer_at: u64,
    footer: &[u8],
    block: u32,
    profile: &IoProfile,
) -> Result<(), FooterError> {
    file.sync_data().map_err(FooterError::Sync)?;
    write_footer(file, footer_at, footer, block, profile)
        .and_then(|()| file.sync_data())
        .map_err(FooterError::Footer)
}

/// Which step of [`write_footer_after_sync`] failed.
pub(super) enum FooterError {
    /// The sync of what was there before: those bytes may not be durable.
    Sync(Error),
    /// Writing or syncing the footer itself (the bytes before it are durable).
    Footer(Error),
}

impl From<FooterError> for Error {
    fn from(e: FooterError) -> Error {
        match e {
            FooterError::Sync(e) | FooterError::Footer(e) => e,
        }
    }
}
