//! The catalog: `format::catalog::replay` on arbitrary bytes, and on valid catalogs built from
//! legal edit sequences, then damaged.
//!
//! Input: the raw catalog bytes (seeds: valid catalogs); the same bytes then drive an
//! `Unstructured` that builds a legal sequence of edits (creations, seals, removals, evictions:
//! a catalog with one is version 2; remote edits of sealed files: version 3), checks that replay gives each file the state of its last
//! edit and the highest eviction watermark, and that a changed byte in an edit with
//! another after it is reported at that slot, while the same change in the last edit is a torn
//! append (ignored).
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use podstore::FileKind;
use podstore::format::catalog::{
    Edit, FileState, Op, RemoteObject, SLOT_LEN, encode_header, replay, version_for,
};
use podstore_fuzz::{Unstructured, arbitrary};

fuzz_target!(|data: &[u8]| {
    raw(data);
    let _ = structured(&mut Unstructured::new(data));
});

fn raw(data: &[u8]) {
    let Ok(state) = replay(data) else { return };
    assert!(state.end_slot as usize * SLOT_LEN <= data.len().max(SLOT_LEN));
    assert!(state.files.keys().all(|&id| id >= 1 && id <= state.max_id));
    if let Some(at) = state.torn_at {
        assert_eq!(at, state.end_slot * SLOT_LEN as u64);
    }
}

fn structured(u: &mut Unstructured<'_>) -> arbitrary::Result<()> {
    let mut model: BTreeMap<u64, (FileKind, FileState)> = BTreeMap::new();
    let mut remote: BTreeMap<u64, RemoteObject> = BTreeMap::new();
    let mut edits = Vec::new();
    let mut next_id = 1u64;
    for _ in 0..u.int_in_range(1..=40)? {
        let existing: Vec<u64> = model
            .iter()
            .filter(|(_, (_, s))| *s != FileState::Removed)
            .map(|(&id, _)| id)
            .collect();
        let sealed: Vec<u64> = model
            .iter()
            .filter(|(_, (_, s))| matches!(s, FileState::Sealed { .. }))
            .map(|(&id, _)| id)
            .collect();
        let edit = match u.int_in_range(0..=4u8)? {
            // A sealed file's data in the remote alone: the file stays sealed; a second remote
            // edit of it names the same object.
            4 if !sealed.is_empty() => {
                let id = *u.choose(&sealed)?;
                let object = match remote.get(&id) {
                    Some(o) => *o,
                    None => RemoteObject {
                        epoch: u.int_in_range(1..=1u64 << 40)?,
                        crc: u.arbitrary()?,
                    },
                };
                Edit {
                    id,
                    kind: model[&id].0,
                    op: Op::Remote(object),
                }
            }
            3 if !existing.is_empty() => {
                let id = *u.choose(&existing)?;
                Edit {
                    id,
                    kind: model[&id].0,
                    op: Op::Evict {
                        through: u.int_in_range(1..=1u64 << 60)?,
                    },
                }
            }
            1 if !existing.is_empty() => {
                let id = *u.choose(&existing)?;
                let (kind, state) = model[&id];
                let length = match state {
                    FileState::Sealed { length } => length,
                    _ => u.int_in_range(64..=1u64 << 40)?,
                };
                Edit {
                    id,
                    kind,
                    op: Op::Seal { length },
                }
            }
            2 if !existing.is_empty() => {
                let id = *u.choose(&existing)?;
                Edit {
                    id,
                    kind: model[&id].0,
                    op: Op::Remove,
                }
            }
            _ => {
                next_id += u.int_in_range(0..=3)?;
                let kind = if u.arbitrary()? {
                    FileKind::Log
                } else {
                    FileKind::Blob
                };
                let e = Edit {
                    id: next_id,
                    kind,
                    op: Op::Create,
                };
                next_id += 1;
                e
            }
        };
        let state = match edit.op {
            Op::Create => FileState::Created,
            Op::Seal { length } => FileState::Sealed { length },
            Op::Remove | Op::Evict { .. } => {
                remote.remove(&edit.id);
                FileState::Removed
            }
            Op::Remote(o) => {
                remote.insert(edit.id, o);
                model[&edit.id].1
            }
        };
        model.insert(edit.id, (edit.kind, state));
        edits.push(edit);
    }
    let watermark = edits
        .iter()
        .filter_map(|e| match e.op {
            Op::Evict { through } => Some(through),
            _ => None,
        })
        .max();
    let version = version_for(&edits);
    let mut bytes = encode_header(version).to_vec();
    for e in &edits {
        bytes.extend_from_slice(&e.encode());
    }
    bytes.resize(bytes.len() + u.int_in_range(0..=4usize)? * SLOT_LEN, 0);
    let state = replay(&bytes).expect("a legal catalog replays");
    assert_eq!(state.end_slot as usize, 1 + edits.len());
    assert_eq!(state.torn_at, None);
    let got: BTreeMap<u64, (FileKind, FileState)> = state
        .files
        .iter()
        .map(|(&id, f)| (id, (f.kind, f.state)))
        .collect();
    assert_eq!(got, model);
    assert_eq!(state.remote, remote);
    assert_eq!(state.evicted.map(|(_, _, through)| through), watermark);
    // One changed byte in edit `i`.
    let i = u.int_in_range(1..=edits.len())?;
    let at = i * SLOT_LEN + u.int_in_range(0..=SLOT_LEN - 1)?;
    let mask = u.int_in_range(1..=255u8)?;
    let mut bad = bytes.clone();
    bad[at] ^= mask;
    match replay(&bad) {
        Err(e) => assert_eq!(e.offset, (i * SLOT_LEN) as u64),
        Ok(s) => {
            // Only the last edit may be taken for a torn append, and then it is ignored.
            assert_eq!(
                i,
                edits.len(),
                "damage in edit {i} of {} undetected",
                edits.len()
            );
            assert_eq!(s.torn_at, Some((i * SLOT_LEN) as u64));
            assert_eq!(s.end_slot as usize, i);
        }
    }
    Ok(())
}
