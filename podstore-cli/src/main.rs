//! `podstore`: look inside a podstore store, read and write its values, compact it, and take
//! checkpoints of it. `podstore --help` lists the subcommands; README.md, "Command line", shows
//! each one.
//!
//! Exit codes: 0 success; 1 damage found (`verify`, or a store that open refuses as damaged);
//! 2 wrong arguments; 3 not found (no store, no such key, no such file); 4 the store is open in
//! another process; 5 any other error. Errors are one line on stderr.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use podstore::inspect::{self, FileInfo, Listed, RecordType};
use podstore::{Error, FileKind, Options, Store};
use serde_json::json;

mod stats;
use stats::stats;

/// Look inside a podstore store, read and write its values, compact it, take checkpoints.
///
/// Exit codes: 0 success, 1 damage found, 2 wrong arguments, 3 not found (store, key or
/// file), 4 the store is open in another process, 5 any other error.
#[derive(Parser)]
#[command(name = "podstore", version, about, long_about)]
struct Cli {
    /// Keys on the command line and in the output are hex (default: UTF-8, with non-printable
    /// bytes escaped in the output).
    #[arg(long, global = true)]
    hex: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What the store holds: keys, bytes live and dead, files (opens it read-only).
    Stats {
        /// The store directory.
        dir: PathBuf,
        /// One JSON object, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check every checksum of every file (opens it read-only; exit 0 clean, 1 damaged).
    Verify {
        /// The store directory.
        dir: PathBuf,
    },
    /// The catalog and every segment and blob file of a store, or one file (a lone copy works).
    Inspect {
        /// A store directory, a segment or blob file, or a CATALOG file.
        #[arg(required_unless_present = "records")]
        path: Option<PathBuf>,
        /// List the records of this file (a segment or blob file) one by one.
        #[arg(long, value_name = "FILE", conflicts_with = "path")]
        records: Option<PathBuf>,
        /// JSON, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// The keys, in the library's order.
    Ls {
        /// The store directory.
        dir: PathBuf,
        /// Only keys that start with this.
        #[arg(long)]
        prefix: Option<String>,
        /// With each value's length.
        #[arg(long)]
        long: bool,
    },
    /// Write a value (or a byte range of it) to stdout or a file.
    Get {
        /// The store directory.
        dir: PathBuf,
        /// The key.
        key: String,
        /// Bytes A..B of the value (A.., ..B too); an end past the value is clamped to it.
        #[arg(long, value_name = "A..B")]
        range: Option<String>,
        /// Write to this new file (refused if it exists) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Store a value read from a file or stdin, streamed (durable when it returns).
    Put {
        /// The store directory.
        dir: PathBuf,
        /// The key.
        key: String,
        /// The file to read; `-` or nothing: stdin.
        file: Option<PathBuf>,
        /// Create the store if there is none at DIR.
        #[arg(long)]
        create: bool,
    },
    /// Delete keys (exit 3 if one of them had no value).
    Rm {
        /// The store directory.
        dir: PathBuf,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
    },
    /// Give back the space of overwritten and deleted values now.
    Compact {
        /// The store directory.
        dir: PathBuf,
        /// Rewrite the log segments at least this fraction dead (above 0, at most 1), instead
        /// of the store's threshold (0.5): `stats` shows what a lower one gives back.
        #[arg(long, value_name = "FRACTION")]
        threshold: Option<f64>,
    },
    /// Write a consistent copy of the store to DEST (a new directory): sealed files are
    /// hard-linked, the rest copied.
    Checkpoint {
        /// The store directory.
        dir: PathBuf,
        /// Where the copy goes; must not exist.
        dest: PathBuf,
    },
}

/// A failure: its message and exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

const DAMAGED: u8 = 1;
const USAGE: u8 = 2;
const NOT_FOUND: u8 = 3;
const LOCKED: u8 = 4;
const OTHER: u8 = 5;

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match &e {
            Error::Damaged { .. } | Error::Corruption { .. } => DAMAGED,
            Error::NotFound { .. } => NOT_FOUND,
            Error::Locked { .. } => LOCKED,
            Error::InvalidOptions(_) | Error::EmptyKey | Error::KeyTooLarge { .. } => USAGE,
            Error::OutOfRange { .. } => USAGE,
            _ => OTHER,
        };
        let mut message = e.to_string();
        if let Error::Locked { .. } = e {
            message.push_str(
                " (a store open for writing excludes every other opener; stop it, or take a \
                 checkpoint from inside it with Store::checkpoint)",
            );
        }
        Failure::new(code, message)
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        let code = match e.kind() {
            io::ErrorKind::NotFound => NOT_FOUND,
            _ => OTHER,
        };
        Failure::new(code, e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // A closed stdout (`podstore get ... | head`) is not an error worth a message.
            if !f.message.is_empty() {
                eprintln!("podstore: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    let hex = cli.hex;
    match cli.command {
        Command::Stats { dir, json } => stats(&dir, json),
        Command::Verify { dir } => verify(&dir),
        Command::Inspect {
            records: Some(file),
            json,
            ..
        } => records(&file, json, hex),
        Command::Inspect {
            path: Some(path),
            json,
            ..
        } => inspect_path(&path, json),
        Command::Inspect { .. } => Err(Failure::new(
            USAGE,
            "inspect: give a PATH or --records FILE",
        )),
        Command::Ls { dir, prefix, long } => {
            let prefix = prefix.map(|p| parse_key(&p, hex)).transpose()?;
            ls(&dir, prefix.as_deref(), long, hex)
        }
        Command::Get {
            dir,
            key,
            range,
            output,
        } => get(
            &dir,
            &parse_key(&key, hex)?,
            range.as_deref(),
            output.as_deref(),
        ),
        Command::Put {
            dir,
            key,
            file,
            create,
        } => put(&dir, &parse_key(&key, hex)?, file.as_deref(), create),
        Command::Rm { dir, keys } => {
            let keys = keys
                .iter()
                .map(|k| parse_key(k, hex))
                .collect::<Result<Vec<_>, _>>()?;
            rm(&dir, &keys, hex)
        }
        Command::Compact { dir, threshold } => compact(&dir, threshold),
        Command::Checkpoint { dir, dest } => checkpoint(&dir, &dest),
    }
}

/// Opens an existing store: read-only for the commands that only read.
fn open(dir: &Path, read_only: bool) -> Result<Store, Failure> {
    let opts = Options::default().create(false).read_only(read_only);
    Ok(Store::open_with(dir, opts)?)
}

fn parse_key(text: &str, hex: bool) -> Result<Vec<u8>, Failure> {
    if !hex {
        return Ok(text.as_bytes().to_vec());
    }
    let digits = text.as_bytes();
    if !digits.len().is_multiple_of(2) {
        return Err(Failure::new(
            USAGE,
            format!("{text:?}: an odd number of hex digits"),
        ));
    }
    digits
        .chunks(2)
        .map(|pair| {
            std::str::from_utf8(pair)
                .ok()
                .and_then(|p| u8::from_str_radix(p, 16).ok())
                .ok_or_else(|| Failure::new(USAGE, format!("{text:?} is not hex")))
        })
        .collect()
}

fn show_key(key: &[u8], hex: bool) -> String {
    if hex {
        key.iter().map(|b| format!("{b:02x}")).collect()
    } else {
        key.escape_ascii().to_string()
    }
}

fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn verify(dir: &Path) -> Result<(), Failure> {
    // A store whose catalog lists missing or cut files is refused by the default open: those
    // files are reported, and what is left is opened (read-only, changing nothing) in salvage
    // mode and checked too.
    let mut refused = Vec::new();
    let store = match open(dir, true) {
        Err(Failure { code: DAMAGED, .. }) => {
            let opts = Options::default()
                .create(false)
                .read_only(true)
                .recovery_mode(podstore::RecoveryMode::Salvage);
            let store = Store::open_with(dir, opts)?;
            for f in &store.recovery().lost {
                println!("damaged file: {f}");
                refused.push(f.clone());
            }
            store
        }
        other => other?,
    };
    let bar = if io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "verify {bar:40} {bytes}/{total_bytes} ({eta})",
            )
            .expect("a valid template"),
        );
        Some(bar)
    } else {
        None
    };
    let report = store.verify_with_progress(|done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    println!(
        "{} files, {} records, {} checked",
        report.segments,
        report.records,
        size(report.bytes_checked)
    );
    for d in &report.damage {
        println!("damaged: {}", d.to_error());
    }
    for key in &report.affected_keys {
        println!("unreadable key: {}", show_key(key, false));
    }
    // The catalog check of verify finds the files open refused again: each is said once.
    for f in &report.files {
        if !refused.iter().any(|r| r.name == f.name) {
            println!("damaged file: {f}");
            refused.push(f.clone());
        }
    }
    store.close()?;
    if report.damage.is_empty() && report.affected_keys.is_empty() && refused.is_empty() {
        println!("clean");
        Ok(())
    } else {
        Err(Failure::new(
            DAMAGED,
            format!(
                "{} is damaged: {} damaged place(s), {} unreadable key(s), {} missing or cut file(s)",
                dir.display(),
                report.damage.len(),
                report.affected_keys.len(),
                refused.len()
            ),
        ))
    }
}

fn kind_name(kind: FileKind) -> &'static str {
    match kind {
        FileKind::Log => "log",
        FileKind::Blob => "blob",
        _ => "other",
    }
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
    let id = f.id.map_or_else(|| "?".to_string(), |id| format!("{id:x}"));
    let sealed = if f.sealed { "sealed" } else { "unsealed" };
    let mut line = format!(
        "{:<26} {:<4} id {id:<6} {sealed:<8} {:>10}",
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

fn inspect_path(path: &Path, as_json: bool) -> Result<(), Failure> {
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

fn print_catalog(listed: &[inspect::CatalogEntry], as_json: bool) {
    if as_json {
        let v: Vec<_> = listed
            .iter()
            .map(|e| {
                let (state, len) = match e.listed {
                    Listed::Created => ("created", None),
                    Listed::Sealed { len } => ("sealed", Some(len)),
                    Listed::Removed => ("removed", None),
                    _ => ("other", None),
                };
                json!({"name": e.name, "id": e.id, "kind": kind_name(e.kind), "state": state, "len": len})
            })
            .collect();
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
        let catalog = listed.as_ref().map(|l| {
            l.iter()
                .map(|e| json!({"name": e.name, "state": format!("{:?}", e.listed)}))
                .collect::<Vec<_>>()
        });
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

fn records(file: &Path, as_json: bool, hex: bool) -> Result<(), Failure> {
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

fn ls(dir: &Path, prefix: Option<&[u8]>, long: bool, hex: bool) -> Result<(), Failure> {
    let store = open(dir, true)?;
    let mut out = io::stdout().lock();
    // In ascending byte order: the store lists keys sorted.
    for key in store.prefix(prefix.unwrap_or_default()) {
        let key = key?;
        let written = if long {
            let len = store.value_len(&key)?.unwrap_or(0);
            writeln!(out, "{len:>12}  {}", show_key(&key, hex))
        } else {
            writeln!(out, "{}", show_key(&key, hex))
        };
        if let Err(e) = written {
            return quiet_pipe(e);
        }
    }
    drop(out);
    store.close()?;
    Ok(())
}

/// A closed stdout (`| head`) ends the output quietly; another write error is reported.
fn quiet_pipe(e: io::Error) -> Result<(), Failure> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        Err(Failure::new(0, ""))
    } else {
        Err(e.into())
    }
}

/// `A..B`, `A..`, `..B`.
fn parse_range(text: &str) -> Result<(u64, Option<u64>), Failure> {
    let bad = || {
        Failure::new(
            USAGE,
            format!("--range {text:?}: expected A..B, A.. or ..B"),
        )
    };
    let (a, b) = text.split_once("..").ok_or_else(bad)?;
    let start = if a.is_empty() {
        0
    } else {
        a.parse().map_err(|_| bad())?
    };
    let end = if b.is_empty() {
        None
    } else {
        Some(b.parse().map_err(|_| bad())?)
    };
    if end.is_some_and(|e| e < start) {
        return Err(bad());
    }
    Ok((start, end))
}

fn get(dir: &Path, key: &[u8], range: Option<&str>, output: Option<&Path>) -> Result<(), Failure> {
    let (start, end) = range.map(parse_range).transpose()?.unwrap_or((0, None));
    let store = open(dir, true)?;
    let Some(mut reader) = store.reader(key)? else {
        return Err(Failure::new(
            NOT_FOUND,
            format!("no value for key {}", key.escape_ascii()),
        ));
    };
    let len = reader.len();
    if range.is_some() && start >= len && !(start == 0 && len == 0) {
        return Err(Failure::new(
            USAGE,
            format!("range starts at {start}, past the value's {len} bytes"),
        ));
    }
    let end = end.unwrap_or(len).min(len);
    reader.seek(SeekFrom::Start(start))?;
    let mut limited = reader.take(end - start);
    let copied = match output {
        Some(path) => {
            let mut f = File::create_new(path)
                .map_err(|e| Failure::new(OTHER, format!("{}: {e}", path.display())))?;
            let n = io::copy(&mut limited, &mut f)?;
            f.sync_all()?;
            Ok(n)
        }
        None => io::copy(&mut limited, &mut io::stdout().lock()),
    };
    if let Err(e) = copied {
        return quiet_pipe(e);
    }
    store.close()?;
    Ok(())
}

/// Inputs up to this long are read whole and stored with one `put` (in the shared log);
/// longer ones are streamed through `Store::writer` into a blob file of their own.
const SMALL_INPUT: u64 = 1 << 20;

fn put(dir: &Path, key: &[u8], file: Option<&Path>, create: bool) -> Result<(), Failure> {
    let mut input: Box<dyn Read> = match file {
        Some(path) if path != Path::new("-") => Box::new(
            File::open(path)
                .map_err(|e| Failure::new(NOT_FOUND, format!("{}: {e}", path.display())))?,
        ),
        _ => Box::new(io::stdin().lock()),
    };
    let store = Store::open_with(dir, Options::default().create(create))?;
    let mut head = Vec::new();
    (&mut input).take(SMALL_INPUT + 1).read_to_end(&mut head)?;
    let n = if head.len() as u64 <= SMALL_INPUT {
        store.put(key, &head)?;
        head.len() as u64
    } else {
        let mut writer = store.writer(key)?;
        writer.write_all(&head)?;
        let rest = io::copy(&mut input, &mut writer)?;
        writer.finish()?;
        head.len() as u64 + rest
    };
    store.close()?;
    eprintln!("stored {} under {}", size(n), key.escape_ascii());
    Ok(())
}

fn rm(dir: &Path, keys: &[Vec<u8>], hex: bool) -> Result<(), Failure> {
    let store = open(dir, false)?;
    let mut missing = Vec::new();
    for key in keys {
        if !store.delete(key)? {
            missing.push(show_key(key, hex));
        }
    }
    store.close()?;
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Failure::new(
            NOT_FOUND,
            format!("no value for key(s) {}", missing.join(", ")),
        ))
    }
}

fn compact(dir: &Path, threshold: Option<f64>) -> Result<(), Failure> {
    let mut opts = podstore::CompactOptions::new();
    if let Some(t) = threshold {
        // Checked before the store is opened: closing it compacts too.
        if !(t > 0.0 && t <= 1.0) {
            return Err(Failure::new(
                USAGE,
                "--threshold must be above 0 and at most 1",
            ));
        }
        opts = opts.threshold(t);
    }
    let store = open(dir, false)?;
    let r = store.compact_with(opts)?;
    store.close()?;
    println!(
        "{} segments rewritten, {} blob files removed, {} copied, {} freed",
        r.segments_compacted,
        r.blob_files_removed,
        size(r.bytes_copied),
        size(r.bytes_freed)
    );
    Ok(())
}

fn checkpoint(dir: &Path, dest: &Path) -> Result<(), Failure> {
    let store = open(dir, false)?;
    let r = store.checkpoint(dest)?;
    store.close()?;
    println!(
        "checkpoint {}: {} files linked, {} copied ({})",
        r.path.display(),
        r.files_linked,
        r.files_copied,
        size(r.bytes_copied)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_hex_keys_parse() {
        assert!(matches!(parse_range("3..9"), Ok((3, Some(9)))));
        assert!(matches!(parse_range("3.."), Ok((3, None))));
        assert!(matches!(parse_range("..9"), Ok((0, Some(9)))));
        assert!(parse_range("9..3").is_err());
        assert!(parse_range("x..3").is_err());
        assert_eq!(parse_key("00ff10", true).ok(), Some(vec![0, 255, 16]));
        assert!(parse_key("0", true).is_err());
        assert!(parse_key("zz", true).is_err());
        assert_eq!(show_key(&[0, 255], true), "00ff");
        assert_eq!(show_key(b"a\n", false), "a\\n");
    }
}
