//! Shipping a snapshot: its files as a stream of frames, each file's bytes in chunks followed
//! by the crc32 of the whole file, so that memory stays bounded whatever the size (at most
//! [`CHANNEL_FRAMES`] chunks of [`CHUNK`] bytes in flight) and a damaged file is refused.
//!
//! Frames, in order: `Begin` (the leader's vote and the snapshot's metadata), then for each
//! file `File` (name, length), `Data`... and `FileEnd` (crc32), then `End`. The receiver writes
//! them into `<snapshots>/snap-...partial/data/`, checks every length and crc, syncs, and
//! renames the directory to its final name: a snapshot directory is never partial.
//!
//! On a byte stream (HTTP), each frame is preceded by its length (u32, little-endian):
//! [`framed`] and [`Deframer`].

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::PathBuf;

use futures::{Stream, StreamExt};
use openraft::alias::{SnapshotMetaOf, VoteOf};
use serde::{Deserialize, Serialize};

use crate::fsutil::remove_dir;
use crate::snapshot::{SnapshotDir, Snapshots};
use crate::{TypeConfig, decode, encode};

/// Bytes of file data per frame.
pub const CHUNK: usize = 1 << 20;
/// Frames the sending side reads ahead.
pub const CHANNEL_FRAMES: usize = 4;
/// The largest frame a receiver accepts (a chunk and its header, or the metadata).
const MAX_FRAME: usize = CHUNK + (64 << 10);

type Meta = SnapshotMetaOf<TypeConfig>;
type Vote = VoteOf<TypeConfig>;

#[derive(Serialize, Deserialize)]
enum Frame {
    Begin { vote: Vote, meta: Meta },
    File { name: String, len: u64 },
    Data(Vec<u8>),
    FileEnd { crc: u32 },
    End,
}

/// The frames (each encoded) that ship `snapshot` with `vote`. Files are read on a blocking
/// thread, at most [`CHANNEL_FRAMES`] frames ahead of the consumer.
pub fn frames(
    snapshot: SnapshotDir,
    vote: VoteOf<TypeConfig>,
    meta: SnapshotMetaOf<TypeConfig>,
) -> impl Stream<Item = io::Result<Vec<u8>>> + Send + Unpin + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<Vec<u8>>>(CHANNEL_FRAMES);
    tokio::task::spawn_blocking(move || {
        let send = |f: io::Result<Frame>| -> bool {
            let bytes = f.and_then(|f| encode(&f));
            let failed = bytes.is_err();
            tx.blocking_send(bytes).is_ok() && !failed
        };
        let result = (|| -> io::Result<bool> {
            if !send(Ok(Frame::Begin { vote, meta })) {
                return Ok(false);
            }
            let mut names: Vec<(String, PathBuf)> = Vec::new();
            for e in fs::read_dir(snapshot.data())? {
                let e = e?;
                if e.file_type()?.is_file() {
                    names.push((e.file_name().to_string_lossy().into_owned(), e.path()));
                }
            }
            names.sort();
            for (name, path) in names {
                let mut file = File::open(&path)?;
                let len = file.metadata()?.len();
                if !send(Ok(Frame::File { name, len })) {
                    return Ok(false);
                }
                let mut crc = crc32fast::Hasher::new();
                let mut left = len;
                while left > 0 {
                    let mut buf = vec![0u8; CHUNK.min(left as usize)];
                    file.read_exact(&mut buf)?;
                    crc.update(&buf);
                    left -= buf.len() as u64;
                    if !send(Ok(Frame::Data(buf))) {
                        return Ok(false);
                    }
                }
                if !send(Ok(Frame::FileEnd {
                    crc: crc.finalize(),
                })) {
                    return Ok(false);
                }
            }
            Ok(send(Ok(Frame::End)))
        })();
        if let Err(e) = result {
            let _ = tx.blocking_send(Err(e));
        }
    });
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|f| (f, rx)) }).boxed()
}

/// Prefixes each frame with its length, for a byte stream.
pub fn framed(
    frames: impl Stream<Item = io::Result<Vec<u8>>> + Send + Unpin + 'static,
) -> impl Stream<Item = io::Result<Vec<u8>>> + Send + Unpin + 'static {
    frames.map(|f| {
        f.map(|f| {
            let mut out = Vec::with_capacity(f.len() + 4);
            out.extend_from_slice(&(f.len() as u32).to_le_bytes());
            out.extend_from_slice(&f);
            out
        })
    })
}

/// Splits a byte stream back into frames ([`framed`]'s inverse).
#[derive(Debug, Default)]
pub struct Deframer {
    buf: Vec<u8>,
}

impl Deframer {
    /// Adds bytes received; returns the frames they complete.
    pub fn push(&mut self, bytes: &[u8]) -> io::Result<Vec<Vec<u8>>> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        let mut at = 0;
        while self.buf.len() - at >= 4 {
            let len =
                u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes")) as usize;
            if len > MAX_FRAME {
                return Err(bad("snapshot frame too large"));
            }
            if self.buf.len() - at - 4 < len {
                break;
            }
            out.push(self.buf[at + 4..at + 4 + len].to_vec());
            at += 4 + len;
        }
        self.buf.drain(..at);
        Ok(out)
    }

    /// Whether no partial frame is left.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

fn bad(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// The file being received.
struct Receiving {
    file: File,
    name: String,
    len: u64,
    got: u64,
    crc: crc32fast::Hasher,
}

/// Receives frames into a new snapshot of `snapshots`: returns the vote and the snapshot once
/// `End` arrived and every file checked out. On any error the partial directory is removed.
pub(crate) async fn receive(
    snapshots: &Snapshots,
    mut frames: impl Stream<Item = io::Result<Vec<u8>>> + Unpin,
) -> io::Result<(Vote, Meta, SnapshotDir)> {
    let first = frames
        .next()
        .await
        .ok_or_else(|| bad("empty snapshot stream"))??;
    let Frame::Begin { vote, meta } = decode(&first)? else {
        return Err(bad("snapshot stream does not begin with Begin"));
    };
    let (tmp, dest) = snapshots.staging_for(&meta);
    fs::create_dir(&tmp)?;
    fs::create_dir(tmp.join("data"))?;
    let data = tmp.join("data");
    let result = async {
        let mut current: Option<Receiving> = None;
        loop {
            let bytes = frames
                .next()
                .await
                .ok_or_else(|| bad("snapshot stream ended before End"))??;
            let data = data.clone();
            // Decoding and file writes are blocking work: off the runtime.
            let (cur, end) = tokio::task::spawn_blocking(move || -> io::Result<_> {
                let frame: Frame = decode(&bytes)?;
                step(&data, current, frame)
            })
            .await
            .map_err(io::Error::other)??;
            current = cur;
            if end {
                return Ok::<(), io::Error>(());
            }
        }
    }
    .await;
    let committed = result.and_then(|()| snapshots.commit(&tmp, &dest, &meta));
    if let Err(e) = committed {
        let _ = remove_dir(&tmp);
        return Err(e);
    }
    Ok((vote, meta, SnapshotDir::new(dest)))
}

/// Applies one frame; returns the file still being received and whether the stream ended.
fn step(
    data: &std::path::Path,
    current: Option<Receiving>,
    frame: Frame,
) -> io::Result<(Option<Receiving>, bool)> {
    match (current, frame) {
        (None, Frame::File { name, len }) => {
            let valid = !name.is_empty()
                && !name.contains('/')
                && name != "."
                && name != ".."
                && !name.contains('\0');
            if !valid {
                return Err(bad(format!("bad file name in snapshot: {name:?}")));
            }
            let file = File::create_new(data.join(&name))?;
            Ok((
                Some(Receiving {
                    file,
                    name,
                    len,
                    got: 0,
                    crc: crc32fast::Hasher::new(),
                }),
                false,
            ))
        }
        (Some(mut r), Frame::Data(bytes)) => {
            r.got += bytes.len() as u64;
            if r.got > r.len {
                return Err(bad(format!("{}: more bytes than announced", r.name)));
            }
            r.crc.update(&bytes);
            r.file.write_all(&bytes)?;
            Ok((Some(r), false))
        }
        (Some(r), Frame::FileEnd { crc }) => {
            if r.got != r.len {
                return Err(bad(format!("{}: {} of {} bytes", r.name, r.got, r.len)));
            }
            if r.crc.finalize() != crc {
                return Err(bad(format!("{}: crc mismatch", r.name)));
            }
            r.file.sync_all()?;
            Ok((None, false))
        }
        (None, Frame::End) => Ok((None, true)),
        _ => Err(bad("snapshot frames out of order")),
    }
}
