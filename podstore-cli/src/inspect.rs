//! `podstore inspect`: a store's catalog and files, one file, or one file's records, for people
//! (one line each) and for scripts (`--json`).

use std::path::Path;

use podstore::FileKind;
use podstore::inspect::{self, CatalogEntry, FileInfo, Listed, RecordType};
use serde_json::json;

use crate::{Failure, NOT_FOUND, open, show_key, size};

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Log => "log",
        FileKind::Blob => "blob",
        _ => "other",
    }
}

/// A file id as the store names files with it: hex, marked `0x`.
fn show_id(id: u64) -> String {
    format!("{id:#x}")
}

fn file_json(f: &FileInfo) -> serde_json::Value {
    json!({
        "name": f.name,
        "id": f.id,
        "kind": kind_name(f.kind),
        "len": f.len,
        "sealed": f.sealed,
        "footer_entries": f.footer_entries,
        "puts": f.puts,
        "tombstones": f.tombstones,
        "record_bytes": f.record_bytes,
        "value_bytes": f.value_bytes,
        "seq_range": f.seq_range.map(|(a, b)| [a, b]),
        "live_bytes": f.live_bytes,
        "dead_bytes": f.dead_bytes,
    })
}

fn print_file(f: &FileInfo) {
    let id = f.id.map_or_else(|| "?".to_string(), show_id);
    let sealed = if f.sealed { "sealed" } else { "unsealed" };
    let mut line = format!(
        "{:<26} {:<4} id {id:<8} {sealed:<8} {:>10}",
        f.name,
        kind_name(f.kind),
        size(f.len)
    );
    if f.sealed {
        line.push_str(&format!(
            "  {} records ({} puts, {} tombstones)",
            f.footer_entries, f.puts, f.tombstones
        ));
        if let Some((lo, hi)) = f.seq_range {
            line.push_str(&format!(", seq {lo}..={hi}"));
        }
    }
    if let (Some(live), Some(dead)) = (f.live_bytes, f.dead_bytes) {
        line.push_str(&format!("  live {}, dead {}", size(live), size(dead)));
    }
    println!("{line}");
}

pub(crate) fn inspect_path(path: &Path, as_json: bool) -> Result<(), Failure> {
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::new(NOT_FOUND, format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        return inspect_store(path, as_json);
    }
    if path.file_name().is_some_and(|n| n == "CATALOG") {
        let listed = inspect::read_catalog(path)?.unwrap_or_default();
        print_catalog(&listed, as_json);
        return Ok(());
    }
    let info = inspect::inspect_file(path)?;
    if as_json {
        println!("{}", file_json(&info));
    } else {
        print_file(&info);
    }
    Ok(())
}

/// A catalog entry for scripts: its state a word, a sealed file's length a number of its own.
fn catalog_entry_json(e: &CatalogEntry) -> serde_json::Value {
    let (state, len) = match e.listed {
        Listed::Created => ("created", None),
        Listed::Sealed { len } => ("sealed", Some(len)),
        Listed::Removed => ("removed", None),
        _ => ("other", None),
    };
    json!({"name": e.name, "id": e.id, "kind": kind_name(e.kind), "state": state, "len": len})
}

fn print_catalog(listed: &[CatalogEntry], as_json: bool) {
    if as_json {
        let v: Vec<_> = listed.iter().map(catalog_entry_json).collect();
        println!("{}", serde_json::Value::Array(v));
        return;
    }
    for e in listed {
        let state = match e.listed {
            Listed::Created => "created".to_string(),
            Listed::Sealed { len } => format!("sealed, {len} bytes"),
            Listed::Removed => "removed".to_string(),
            _ => "other".to_string(),
        };
        println!("catalog: {:<26} {state}", e.name);
    }
}

fn inspect_store(dir: &Path, as_json: bool) -> Result<(), Failure> {
    let listed = inspect::read_catalog(dir)?;
    let store = open(dir, true)?;
    let files = store.files()?;
    let recovery = store.recovery().clone();
    store.close()?;
    if as_json {
        let catalog = listed
            .as_ref()
            .map(|l| l.iter().map(catalog_entry_json).collect::<Vec<_>>());
        let v = json!({
            "catalog": catalog,
            "files": files.iter().map(file_json).collect::<Vec<_>>(),
            "quarantined": recovery.quarantined.iter().map(|q| q.name.clone()).collect::<Vec<_>>(),
        });
        println!("{v}");
        return Ok(());
    }
    match &listed {
        Some(l) => {
            let live = l.iter().filter(|e| e.listed != Listed::Removed).count();
            println!("catalog: {live} files listed ({} entries)", l.len());
        }
        None => println!("catalog: none (a store written by a version without one)"),
    }
    for f in &files {
        print_file(f);
    }
    for q in &recovery.quarantined {
        println!("not used: {} ({})", q.name, q.reason);
    }
    Ok(())
}

pub(crate) fn records(file: &Path, as_json: bool, hex: bool) -> Result<(), Failure> {
    let read = inspect::file_records(file)?;
    if as_json {
        let v: Vec<_> = read
            .records
            .iter()
            .map(|r| {
                json!({
                    "offset": r.offset,
                    "kind": if r.kind == RecordType::Put { "put" } else { "tombstone" },
                    "key": show_key(&r.key, hex),
                    "seq": r.seq,
                    "value_len": r.value_len,
                    "stored_len": r.stored_len,
                    "compressed": r.compressed,
                    "batch_continues": r.batch_continues,
                    "damage": r.damage.as_ref().map(|(at, k)| format!("at {at}: {k}")),
                })
            })
            .collect();
        println!(
            "{}",
            json!({"records": v, "end": read.end, "stopped_by": read.stopped_by.map(|c| c.to_string())})
        );
        return Ok(());
    }
    for r in &read.records {
        let kind = if r.kind == RecordType::Put {
            "put"
        } else {
            "del"
        };
        let mut line = format!(
            "{:>12}  {kind}  seq {:<8} {:>10}",
            r.offset,
            r.seq,
            size(r.value_len)
        );
        if r.compressed {
            line.push_str(&format!(" (stored {})", size(r.stored_len)));
        }
        if r.batch_continues {
            line.push_str(" batch+");
        }
        line.push_str(&format!("  {}", show_key(&r.key, hex)));
        if let Some((at, kind)) = &r.damage {
            line.push_str(&format!("  DAMAGED at {at}: {kind}"));
        }
        println!("{line}");
    }
    match &read.stopped_by {
        None => println!("{} records; end at {}", read.records.len(), read.end),
        Some(why) => println!(
            "{} records; stopped at {}: {why}",
            read.records.len(),
            read.end
        ),
    }
    Ok(())
}
