//! The `VERSIONS` file's I/O: loading the newest reservation at open, reserving numbers ahead
//! under the append lock, giving back what was not used at a clean close, and writing a copy
//! into a checkpoint. The layout and the torn-write argument are in `format::versions`; why the
//! file exists in docs/design.md, "Versions".

use std::path::{Path, PathBuf};

use crate::error::{DamagedFile, Error, FileProblem, Result};
use crate::format::versions::{
    Reservation, SLOT_STRIDE, VERSIONS_NAME, VERSIONS_TMP, decode_file, encode_file, encode_slot,
};
use crate::io::file::{self, IoProfile, PlainFile};

/// How far past the number being given a reservation reaches, in microseconds (sequence numbers
/// are clock microseconds): one sync of `VERSIONS` per second of writes at most. After a crash
/// the first numbers may run up to this far ahead of the clock (a value's `written_at` up to a
/// second in the future) until the clock catches up; a clean close gives the unused part back.
pub const RESERVE_AHEAD: u64 = 1_000_000;

/// The store's reservation of sequence numbers.
#[derive(Debug)]
pub struct Versions {
    dir: PathBuf,
    profile: IoProfile,
    /// `VERSIONS`, once it exists.
    file: Option<PlainFile>,
    /// The newest reservation, and the slot that holds it.
    current: Option<(usize, Reservation)>,
}

impl Versions {
    /// Reads `VERSIONS` in `dir`, if there is one. A file whose slots both fail to verify is
    /// [`Error::Damaged`], unless `salvage`: then it is reported in `lost` and replaced at the
    /// first reservation (numbers given before the damage may then be given again, as before
    /// this file existed: above every number in a record, and at least the clock).
    pub fn load(
        dir: &Path,
        profile: &IoProfile,
        salvage: bool,
        lost: &mut Vec<DamagedFile>,
    ) -> Result<Versions> {
        let mut v = Versions {
            dir: dir.to_path_buf(),
            profile: profile.clone(),
            file: None,
            current: None,
        };
        let Some(f) = PlainFile::open(&dir.join(VERSIONS_NAME), profile)? else {
            return Ok(v);
        };
        match decode_file(&f.read_all()?) {
            Ok((slot, r)) => {
                v.file = Some(f);
                v.current = Some((slot, r));
            }
            Err(kind) => {
                let damaged = DamagedFile {
                    name: VERSIONS_NAME.to_string(),
                    problem: FileProblem::VersionsCorrupt { kind },
                };
                if !salvage {
                    return Err(Error::Damaged {
                        dir: dir.to_path_buf(),
                        files: vec![damaged],
                    });
                }
                log::warn!("podstore: {}: {damaged}; replaced", dir.display());
                lost.push(damaged);
            }
        }
        Ok(v)
    }

    /// No number above this was given before open (0: no reservation known).
    pub fn reserved(&self) -> u64 {
        self.current.map_or(0, |(_, r)| r.reserved_through)
    }

    /// Makes a reservation through `through` durable: written into the slot that does not hold
    /// the newest one and synced (a torn write leaves the newest one whole), or, the first time,
    /// a whole new file written, synced and renamed into place. Until it returns no number above
    /// the previous reservation may be given; when it fails, none is (a retry writes the same
    /// slot again).
    pub fn reserve(&mut self, through: u64) -> Result<()> {
        let profile = &self.profile;
        match (&self.file, self.current) {
            (Some(f), Some((slot, cur))) => {
                let next = Reservation {
                    generation: cur.generation + 1,
                    reserved_through: through,
                };
                let other = 1 - slot;
                f.write_all_at(&encode_slot(next), (other * SLOT_STRIDE) as u64)?;
                f.sync_data()?;
                self.current = Some((other, next));
            }
            _ => {
                let r = Reservation {
                    generation: self.current.map_or(0, |(_, r)| r.generation) + 1,
                    reserved_through: through,
                };
                write_new(&self.dir, profile, r)?;
                self.file = PlainFile::open(&self.dir.join(VERSIONS_NAME), profile)?;
                self.current = Some((0, r));
            }
        }
        Ok(())
    }

    /// At a clean close, once every number given is durable: lowers the reservation to `last`,
    /// the last number given, so that the next open does not start up to [`RESERVE_AHEAD`]
    /// ahead of the clock. Nothing is written when nothing was reserved past it.
    pub fn give_back(&mut self, last: u64) -> Result<()> {
        if self.file.is_some() && last < self.reserved() {
            self.reserve(last)?;
        }
        Ok(())
    }
}

/// Writes a new `VERSIONS` holding `r` into `dir`, crash-atomically: `VERSIONS.tmp` (a left-over
/// one is the store's own unfinished copy, replaced) written and synced, its name made durable,
/// renamed over `VERSIONS` and the rename made durable. Also used by `checkpoint` for its copy
/// (the live file is rewritten in place, so a copy is written, not linked).
pub fn write_new(dir: &Path, profile: &IoProfile, r: Reservation) -> Result<()> {
    let tmp = dir.join(VERSIONS_TMP);
    match file::remove_file(profile, &tmp) {
        Ok(()) => file::sync_dir(profile, dir)?,
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let f = PlainFile::create_new(&tmp, profile)?;
    f.write_all_at(&encode_file(r), 0)?;
    f.sync_data()?;
    drop(f);
    file::sync_dir(profile, dir)?;
    file::rename(profile, &tmp, &dir.join(VERSIONS_NAME))?;
    file::sync_dir(profile, dir)
}
