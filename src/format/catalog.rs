//! The catalog: the store's list of its own files, an append-only log of fixed-size edits.
//!
//! Layout: docs/design.md, "Catalog" (offsets checked against it by a test). The file is a
//! sequence of 32-byte slots: slot 0 is the header, every later slot an [`Edit`] or zero. The
//! writer fills the file with zero slots ahead of the edits (so that an edit is written into
//! space the file already has, even on a full disk), and the log ends at the first all-zero
//! slot. Replaying the edits in order gives each file's state ([`CatalogState`]).

use std::collections::BTreeMap;

use super::{check_crc, get_u32, get_u64, magic_at, need, reserved_zero};
use crate::error::{Corruption, FileKind};

/// Magic number of a catalog.
pub const CATALOG_MAGIC: [u8; 4] = *b"PODC";
/// Version of a catalog that holds no eviction edit: what every catalog was before the size
/// cap, and what a store that never evicts keeps writing, so that older builds still open it.
pub const CATALOG_VERSION: u8 = 1;
/// Version of a catalog that may hold eviction edits ([`Op::Evict`], op 4). A build that knows
/// only version 1 refuses it as [`Corruption::UnsupportedVersion`] instead of taking op 4 for
/// damage; this build reads both.
pub const CATALOG_VERSION_EVICT: u8 = 2;
/// Version of a catalog that may hold remote edits ([`Op::Remote`], op 5: a sealed file whose
/// data is in the remote only, issue 38). A build that knows only versions 1 and 2 refuses it as
/// [`Corruption::UnsupportedVersion`]; this build reads all three.
pub const CATALOG_VERSION_REMOTE: u8 = 3;
/// Size of the header and of every edit.
pub const SLOT_LEN: usize = 32;

mod off {
    // Header.
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const HEADER_CRC: usize = 28;
    // Edit.
    pub const OP: usize = 0;
    pub const KIND: usize = 1;
    pub const FILE_ID: usize = 8;
    pub const LENGTH: usize = 16;
    pub const OBJECT_CRC: usize = 24;
    pub const EDIT_CRC: usize = 28;
}

#[cfg(test)]
pub(crate) const HEADER_FIELDS: &[(usize, usize)] =
    &[(off::MAGIC, 4), (off::VERSION, 1), (off::HEADER_CRC, 4)];

#[cfg(test)]
pub(crate) const EDIT_FIELDS: &[(usize, usize)] = &[
    (off::OP, 1),
    (off::KIND, 1),
    (off::FILE_ID, 8),
    (off::LENGTH, 8),
    (off::OBJECT_CRC, 4),
    (off::EDIT_CRC, 4),
];

/// The header slot of a catalog of `version` ([`CATALOG_VERSION`], [`CATALOG_VERSION_EVICT`]
/// or [`CATALOG_VERSION_REMOTE`]).
pub fn encode_header(version: u8) -> [u8; SLOT_LEN] {
    debug_assert!((CATALOG_VERSION..=CATALOG_VERSION_REMOTE).contains(&version));
    let mut b = [0u8; SLOT_LEN];
    b[off::MAGIC..off::MAGIC + 4].copy_from_slice(&CATALOG_MAGIC);
    b[off::VERSION] = version;
    let crc = crc32fast::hash(&b[..off::HEADER_CRC]);
    b[off::HEADER_CRC..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Verifies a catalog's header slot; returns its version.
pub fn decode_header(bytes: &[u8]) -> Result<u8, Corruption> {
    need(bytes, SLOT_LEN)?;
    let magic = magic_at(bytes, off::MAGIC);
    if magic != CATALOG_MAGIC {
        return Err(Corruption::BadMagic {
            structure: "catalog header",
            found: magic,
        });
    }
    check_crc(
        crc32fast::hash(&bytes[..off::HEADER_CRC]),
        get_u32(bytes, off::HEADER_CRC),
    )?;
    let version = bytes[off::VERSION];
    if !(CATALOG_VERSION..=CATALOG_VERSION_REMOTE).contains(&version) {
        return Err(Corruption::UnsupportedVersion {
            found: version as u32,
        });
    }
    reserved_zero(
        &bytes[off::VERSION + 1..off::HEADER_CRC],
        "catalog reserved",
    )?;
    Ok(version)
}

/// The version a catalog holding `edits` must carry: [`CATALOG_VERSION_REMOTE`] if one of them
/// is a remote edit, else [`CATALOG_VERSION_EVICT`] if one is an eviction, else
/// [`CATALOG_VERSION`] (the oldest version that reads them all, so that a store keeps the
/// format of the builds before it as long as it uses nothing new).
pub fn version_for<'a>(edits: impl IntoIterator<Item = &'a Edit>) -> u8 {
    edits
        .into_iter()
        .map(|e| match e.op {
            Op::Remote { .. } => CATALOG_VERSION_REMOTE,
            Op::Evict { .. } => CATALOG_VERSION_EVICT,
            _ => CATALOG_VERSION,
        })
        .max()
        .unwrap_or(CATALOG_VERSION)
}

/// What an edit says about a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The file was created (its name is durable); it is not sealed yet.
    Create,
    /// The file is sealed: its footer is durable and it is `length` bytes long, for good.
    Seal {
        /// The file's length.
        length: u64,
    },
    /// The store removed the file (or is about to): it holds nothing the store needs.
    Remove,
    /// The store dropped the file whole to stay within its size cap (or is about to), and with
    /// it every record whose sequence number is at most `through`, in whatever file: open
    /// ignores those records (docs/design.md, "Eviction").
    Evict {
        /// The highest sequence number evicted.
        through: u64,
    },
    /// The sealed file's data is in the remote only (issue 38): named by a durable manifest as
    /// object `data/<epoch>/<file>` with crc32 `crc`, its local copy keeps only what a read
    /// needs to find a value (header, footer, crc tables; docs/design-remote.md, "Remote tier"). The
    /// file stays sealed, at its length.
    Remote(RemoteObject),
}

/// Where a remote-only file's bytes are: the epoch of the writer that uploaded it (its object
/// is `<prefix>/data/<epoch>/<file name>`) and the crc32 of the whole file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteObject {
    /// The upload epoch (at least 1).
    pub epoch: u64,
    /// crc32 of the whole file, as the manifest gives it.
    pub crc: u32,
}

/// One catalog edit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edit {
    /// The file's id.
    pub id: u64,
    /// The file's kind.
    pub kind: FileKind,
    /// What happened to it.
    pub op: Op,
}

impl Edit {
    /// Encodes the edit into one slot.
    pub fn encode(&self) -> [u8; SLOT_LEN] {
        let mut b = [0u8; SLOT_LEN];
        let (op, length, crc) = match self.op {
            Op::Create => (1, 0, 0),
            Op::Seal { length } => (2, length, 0),
            Op::Remove => (3, 0, 0),
            Op::Evict { through } => (4, through, 0),
            Op::Remote(o) => (5, o.epoch, o.crc),
        };
        b[off::OP] = op;
        b[off::KIND] = match self.kind {
            FileKind::Log => 1,
            FileKind::Blob => 2,
        };
        b[off::FILE_ID..off::FILE_ID + 8].copy_from_slice(&self.id.to_le_bytes());
        b[off::LENGTH..off::LENGTH + 8].copy_from_slice(&length.to_le_bytes());
        b[off::OBJECT_CRC..off::OBJECT_CRC + 4].copy_from_slice(&crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..off::EDIT_CRC]);
        b[off::EDIT_CRC..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and verifies one slot of a catalog of `version`: an eviction (op 4) is an edit
    /// of a version-2 (or later) catalog only, and in a version-1 catalog an unknown op, as it
    /// is to the builds that know only version 1; a remote edit (op 5), of a version-3 one.
    pub fn decode(bytes: &[u8], version: u8) -> Result<Edit, Corruption> {
        need(bytes, SLOT_LEN)?;
        check_crc(
            crc32fast::hash(&bytes[..off::EDIT_CRC]),
            get_u32(bytes, off::EDIT_CRC),
        )?;
        reserved_zero(&bytes[off::KIND + 1..off::FILE_ID], "catalog edit reserved")?;
        let is_remote = bytes[off::OP] == 5 && version >= CATALOG_VERSION_REMOTE;
        if !is_remote {
            reserved_zero(
                &bytes[off::OBJECT_CRC..off::EDIT_CRC],
                "catalog edit reserved",
            )?;
        }
        let length = get_u64(bytes, off::LENGTH);
        let op = match bytes[off::OP] {
            1 => Op::Create,
            2 => Op::Seal { length },
            3 => Op::Remove,
            4 if version >= CATALOG_VERSION_EVICT => Op::Evict { through: length },
            5 if is_remote && length > 0 => Op::Remote(RemoteObject {
                epoch: length,
                crc: get_u32(bytes, off::OBJECT_CRC),
            }),
            other => {
                return Err(Corruption::InvalidField {
                    field: "catalog edit op",
                    value: other as u64,
                });
            }
        };
        if !matches!(op, Op::Seal { .. } | Op::Evict { .. } | Op::Remote(_)) && length != 0 {
            return Err(Corruption::InvalidField {
                field: "catalog edit length",
                value: length,
            });
        }
        let kind = match bytes[off::KIND] {
            1 => FileKind::Log,
            2 => FileKind::Blob,
            other => {
                return Err(Corruption::InvalidField {
                    field: "catalog edit file kind",
                    value: other as u64,
                });
            }
        };
        let id = get_u64(bytes, off::FILE_ID);
        if id == 0 {
            return Err(Corruption::InvalidField {
                field: "catalog edit file id",
                value: 0,
            });
        }
        Ok(Edit { id, kind, op })
    }
}

/// What the catalog says about one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// Created, not (yet known to be) sealed.
    Created,
    /// Sealed, `length` bytes long.
    Sealed {
        /// Its length.
        length: u64,
    },
    /// Removed by the store.
    Removed,
}

/// A file the catalog lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CatalogFile {
    /// Its kind.
    pub kind: FileKind,
    /// Its state after the last edit.
    pub state: FileState,
}

/// A replayed catalog.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CatalogState {
    /// Every file an edit names, by id, in its state after the last edit.
    pub files: BTreeMap<u64, CatalogFile>,
    /// The slot after the last edit: where the next edit goes.
    pub end_slot: u64,
    /// The highest id any edit names (0: none). Ids are never reused: the next new file's id
    /// is above it.
    pub max_id: u64,
    /// Where a torn edit (the last slot written, whose write a crash interrupted) was found and
    /// ignored, if any.
    pub torn_at: Option<u64>,
    /// The highest sequence number an eviction dropped, and the id of the file whose edit says
    /// so (`None`: nothing was ever evicted). Open ignores every record at or below it.
    pub evicted: Option<(u64, FileKind, u64)>,
    /// The header's version ([`CATALOG_VERSION`], [`CATALOG_VERSION_EVICT`] once the catalog
    /// may hold evictions, [`CATALOG_VERSION_REMOTE`] once it may hold remote edits; 0 in a
    /// state not read from or written to a file).
    pub version: u8,
    /// The sealed files whose data is in the remote only, by id ([`Op::Remote`]).
    pub remote: BTreeMap<u64, RemoteObject>,
}

impl CatalogState {
    /// Applies one edit. Edits that contradict the state (a file created twice, created or
    /// sealed after its removal, sealed again with another length, or named with another kind)
    /// are corruption: the store never writes them. Repeating a seal or a removal is not (a
    /// retried removal whose first unlink failed).
    pub fn apply(&mut self, edit: Edit) -> Result<(), Corruption> {
        let bad = |value| Corruption::InvalidField {
            field: "catalog edit (contradicts an earlier edit of the file)",
            value,
        };
        self.max_id = self.max_id.max(edit.id);
        if let Op::Evict { through } = edit.op
            && self.evicted.is_none_or(|(_, _, t)| t <= through)
        {
            self.evicted = Some((edit.id, edit.kind, through));
        }
        match (self.files.get(&edit.id).copied(), edit.op) {
            (Some(f), _) if f.kind != edit.kind => return Err(bad(edit.id)),
            (
                Some(CatalogFile {
                    state: FileState::Removed,
                    ..
                }),
                Op::Create | Op::Seal { .. },
            ) => return Err(bad(edit.id)),
            (Some(_), Op::Create) => return Err(bad(edit.id)),
            (
                Some(CatalogFile {
                    state: FileState::Sealed { length: had },
                    ..
                }),
                Op::Seal { length },
            ) if had != length => return Err(bad(edit.id)),
            _ => {}
        }
        let state = match edit.op {
            Op::Create => FileState::Created,
            Op::Seal { length } => FileState::Sealed { length },
            Op::Remove | Op::Evict { .. } => {
                self.remote.remove(&edit.id);
                FileState::Removed
            }
            // Only a sealed file's data goes to the remote alone, and to one object; the file
            // stays sealed.
            Op::Remote(o) => {
                let sealed = self
                    .files
                    .get(&edit.id)
                    .is_some_and(|f| matches!(f.state, FileState::Sealed { .. }));
                if !sealed || self.remote.get(&edit.id).is_some_and(|had| *had != o) {
                    return Err(bad(edit.id));
                }
                self.remote.insert(edit.id, o);
                return Ok(());
            }
        };
        self.files.insert(
            edit.id,
            CatalogFile {
                kind: edit.kind,
                state,
            },
        );
        Ok(())
    }
}

/// Where a catalog decode failed: the slot, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogError {
    /// Byte offset of the slot in the file.
    pub offset: u64,
    /// What is wrong.
    pub kind: Corruption,
}

/// Replays a whole catalog file.
///
/// The log ends at the first all-zero slot (or the end of the bytes; a partial last slot is
/// ignored). One slot that does not verify, followed by nothing but zero slots, is the torn
/// last edit of a crash: its append was not acknowledged (an edit counts once its fdatasync
/// returned), so it is ignored ([`CatalogState::torn_at`]) and the next edit overwrites it. A
/// slot that does not verify with an edit after it, or a contradiction, is damage.
pub fn replay(bytes: &[u8]) -> Result<CatalogState, CatalogError> {
    let version = decode_header(bytes).map_err(|kind| CatalogError { offset: 0, kind })?;
    let mut state = CatalogState {
        version,
        ..CatalogState::default()
    };
    let slots = bytes.len() / SLOT_LEN;
    let slot = |i: usize| &bytes[i * SLOT_LEN..(i + 1) * SLOT_LEN];
    let mut i = 1;
    while i < slots {
        let s = slot(i);
        if s.iter().all(|&b| b == 0) {
            break;
        }
        match Edit::decode(s, version) {
            Ok(edit) => state.apply(edit).map_err(|kind| CatalogError {
                offset: (i * SLOT_LEN) as u64,
                kind,
            })?,
            Err(kind) => {
                let rest_zero = (i + 1..slots).all(|j| slot(j).iter().all(|&b| b == 0));
                if !rest_zero {
                    return Err(CatalogError {
                        offset: (i * SLOT_LEN) as u64,
                        kind,
                    });
                }
                state.torn_at = Some((i * SLOT_LEN) as u64);
                break;
            }
        }
        i += 1;
    }
    state.end_slot = i as u64;
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(id: u64, op: Op) -> Edit {
        Edit {
            id,
            kind: FileKind::Log,
            op,
        }
    }

    fn file(edits: &[Edit], zero_slots: usize) -> Vec<u8> {
        let mut b = encode_header(version_for(edits)).to_vec();
        for e in edits {
            b.extend_from_slice(&e.encode());
        }
        b.resize(b.len() + zero_slots * SLOT_LEN, 0);
        b
    }

    #[test]
    fn edits_round_trip_and_every_flip_is_detected() {
        for e in [
            edit(1, Op::Create),
            Edit {
                id: u64::MAX >> 1,
                kind: FileKind::Blob,
                op: Op::Seal { length: 12345 },
            },
            edit(7, Op::Remove),
            edit(9, Op::Evict { through: 1 << 50 }),
            edit(
                11,
                Op::Remote(RemoteObject {
                    epoch: 3,
                    crc: 0xdead_beef,
                }),
            ),
        ] {
            let b = e.encode();
            assert_eq!(Edit::decode(&b, CATALOG_VERSION_REMOTE), Ok(e));
            for i in 0..b.len() {
                for bit in 0..8 {
                    let mut bad = b;
                    bad[i] ^= 1 << bit;
                    assert!(
                        Edit::decode(&bad, CATALOG_VERSION_REMOTE).is_err(),
                        "{e:?}: flip {i}.{bit}"
                    );
                }
            }
        }
        for version in [
            CATALOG_VERSION,
            CATALOG_VERSION_EVICT,
            CATALOG_VERSION_REMOTE,
        ] {
            let h = encode_header(version);
            assert_eq!(decode_header(&h), Ok(version));
            for i in 0..h.len() {
                let mut bad = h;
                bad[i] ^= 1;
                assert!(decode_header(&bad).is_err(), "header flip {i}");
            }
        }
    }

    #[test]
    fn an_eviction_is_an_edit_of_a_version_2_catalog_only() {
        let evict = edit(2, Op::Evict { through: 7 });
        // Version 1 takes op 4 for an unknown op, as the builds before version 2 do.
        assert_eq!(
            Edit::decode(&evict.encode(), CATALOG_VERSION),
            Err(Corruption::InvalidField {
                field: "catalog edit op",
                value: 4
            })
        );
        let mut v1 = encode_header(CATALOG_VERSION).to_vec();
        for e in [edit(1, Op::Create), evict, edit(3, Op::Create)] {
            v1.extend_from_slice(&e.encode());
        }
        assert_eq!(replay(&v1).unwrap_err().offset, 2 * SLOT_LEN as u64);
        // The same edits under a version-2 header replay, and say their version.
        v1[..SLOT_LEN].copy_from_slice(&encode_header(CATALOG_VERSION_EVICT));
        let s = replay(&v1).unwrap();
        assert_eq!(s.version, CATALOG_VERSION_EVICT);
        assert_eq!(s.evicted, Some((2, FileKind::Log, 7)));
        // Only a catalog holding an eviction needs version 2.
        assert_eq!(version_for(&[edit(1, Op::Create)]), CATALOG_VERSION);
        assert_eq!(
            version_for(&[edit(1, Op::Create), evict]),
            CATALOG_VERSION_EVICT
        );
        assert_eq!(
            replay(&file(&[edit(1, Op::Create)], 1)).unwrap().version,
            CATALOG_VERSION
        );
        // A version after 3 is refused as such, never as damage.
        let mut b = encode_header(CATALOG_VERSION_EVICT);
        b[4] = 4;
        let crc = crc32fast::hash(&b[..28]);
        b[28..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            decode_header(&b),
            Err(Corruption::UnsupportedVersion { found: 4 })
        );
    }

    #[test]
    fn a_remote_edit_is_of_a_version_3_catalog_and_of_a_sealed_file_only() {
        let o = RemoteObject { epoch: 2, crc: 7 };
        let remote = edit(1, Op::Remote(o));
        // Refused by versions 1 and 2 (its crc in their reserved bytes, an unknown op).
        for version in [CATALOG_VERSION, CATALOG_VERSION_EVICT] {
            assert!(matches!(
                Edit::decode(&remote.encode(), version),
                Err(Corruption::InvalidField { .. })
            ));
        }
        // Epoch 0 names no writer: refused.
        let zero = edit(1, Op::Remote(RemoteObject { epoch: 0, crc: 7 }));
        assert!(Edit::decode(&zero.encode(), CATALOG_VERSION_REMOTE).is_err());
        let sealed = [
            edit(1, Op::Create),
            edit(1, Op::Seal { length: 8192 }),
            remote,
        ];
        assert_eq!(version_for(&sealed), CATALOG_VERSION_REMOTE);
        let s = replay(&file(&sealed, 2)).unwrap();
        assert_eq!(s.version, CATALOG_VERSION_REMOTE);
        assert_eq!(s.files[&1].state, FileState::Sealed { length: 8192 });
        assert_eq!(s.remote.get(&1), Some(&o));
        // Repeated: the same object only.
        let mut again = sealed.to_vec();
        again.push(remote);
        assert!(replay(&file(&again, 1)).is_ok());
        again.push(edit(1, Op::Remote(RemoteObject { epoch: 3, crc: 7 })));
        assert!(replay(&file(&again, 1)).is_err());
        // A file not sealed (or unknown, or removed) never goes remote.
        for edits in [
            vec![remote],
            vec![edit(1, Op::Create), remote],
            vec![edit(1, Op::Seal { length: 1 }), edit(1, Op::Remove), remote],
        ] {
            assert!(replay(&file(&edits, 1)).is_err(), "{edits:?}");
        }
        // A removal (or an eviction) ends it.
        let mut removed = sealed.to_vec();
        removed.push(edit(1, Op::Remove));
        assert!(replay(&file(&removed, 1)).unwrap().remote.is_empty());
    }

    #[test]
    fn replay_gives_each_files_last_state() {
        let edits = [
            edit(1, Op::Create),
            edit(2, Op::Create),
            edit(1, Op::Seal { length: 8192 }),
            edit(2, Op::Remove),
            edit(1, Op::Seal { length: 8192 }),
        ];
        let s = replay(&file(&edits, 4)).unwrap();
        assert_eq!(s.end_slot, 6);
        assert_eq!(s.max_id, 2);
        assert_eq!(s.torn_at, None);
        assert_eq!(s.files[&1].state, FileState::Sealed { length: 8192 });
        assert_eq!(s.files[&2].state, FileState::Removed);
    }

    #[test]
    fn an_eviction_removes_its_file_and_the_highest_watermark_wins() {
        let edits = [
            edit(1, Op::Create),
            edit(1, Op::Seal { length: 8192 }),
            edit(2, Op::Create),
            edit(2, Op::Seal { length: 8192 }),
            edit(3, Op::Create),
            edit(2, Op::Evict { through: 90 }),
            edit(1, Op::Evict { through: 40 }),
        ];
        let s = replay(&file(&edits, 2)).unwrap();
        assert_eq!(s.files[&1].state, FileState::Removed);
        assert_eq!(s.files[&2].state, FileState::Removed);
        assert_eq!(s.files[&3].state, FileState::Created);
        assert_eq!(s.evicted, Some((2, FileKind::Log, 90)));
        // An evicted file is never sealed or created again.
        let again = [edit(1, Op::Evict { through: 5 }), edit(1, Op::Create)];
        assert!(replay(&file(&again, 1)).is_err());
        // Nothing evicted: no watermark.
        assert_eq!(
            replay(&file(&[edit(1, Op::Remove)], 1)).unwrap().evicted,
            None
        );
    }

    #[test]
    fn a_torn_last_edit_is_ignored_and_damage_before_an_edit_is_not() {
        let edits = [edit(1, Op::Create), edit(2, Op::Create)];
        let mut b = file(&edits, 3);
        b[2 * SLOT_LEN + 9] ^= 1; // the last edit
        let s = replay(&b).unwrap();
        assert_eq!(s.torn_at, Some(2 * SLOT_LEN as u64));
        assert_eq!(s.end_slot, 2);
        assert!(!s.files.contains_key(&2));

        let mut b = file(&edits, 3);
        b[SLOT_LEN + 9] ^= 1; // an edit with another after it
        let e = replay(&b).unwrap_err();
        assert_eq!(e.offset, SLOT_LEN as u64);
    }

    #[test]
    fn contradictions_are_damage() {
        for edits in [
            vec![edit(1, Op::Create), edit(1, Op::Create)],
            vec![edit(1, Op::Remove), edit(1, Op::Seal { length: 1 })],
            vec![
                edit(1, Op::Seal { length: 1 }),
                edit(1, Op::Seal { length: 2 }),
            ],
            vec![
                edit(1, Op::Create),
                Edit {
                    id: 1,
                    kind: FileKind::Blob,
                    op: Op::Remove,
                },
            ],
        ] {
            assert!(replay(&file(&edits, 1)).is_err(), "{edits:?}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        for n in 0..2000 {
            let mut b = file(&[edit(1, Op::Create), edit(1, Op::Seal { length: 9 })], 2);
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = (seed as usize) % b.len();
            b[at] = (seed >> 32) as u8;
            b.truncate(b.len() - (n % 40));
            let _ = replay(&b);
        }
    }
}
