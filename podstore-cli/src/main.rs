//! `podstore`: look inside a podstore store, read and write its values, compact it, take
//! checkpoints of it, and restore it from or check it against its remote tier (`restore`,
//! `verify --remote`, `stats --remote`: remote.rs). `podstore --help` lists the subcommands;
//! README.md, "Command line", shows each one.
//!
//! Exit codes: 0 success; 1 damage found (`verify`, `verify --remote`, or a store that open
//! refuses as damaged);
//! 2 wrong arguments (and a directory that holds other files and no store); 3 not found (no
//! store, no such key, no such file or directory); 4 the store is open in another process (a
//! command that writes; or it changed under every attempt to read it beside its writer); 5 any
//! other error. Errors are one line on stderr.
//!
//! `stats`, `ls`, `get` and `verify` work on a store another process has open: when its lock is
//! refused they read it beside its writer (`Options::alongside_writer`), as of the moment they
//! open it, and say so in one line on stderr.

mod inspect;

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use podstore::{Error, Options, Store};

mod remote;
mod stats;
mod time;
mod verify;
use stats::stats;
use verify::verify;

/// Look inside a podstore store, read and write its values, compact it, take checkpoints,
/// restore it from its remote (an object store) and check the remote.
///
/// Exit codes: 0 success, 1 damage found, 2 wrong arguments (or a directory that holds other
/// files and no store), 3 not found (store, key, file or directory), 4 the store is open in
/// another process (put, rm, compact, checkpoint), 5 any other error.
///
/// stats, ls, get and verify also work on a store another process has open: they read it as of
/// the moment they open it, without its lock, and say so on stderr.
#[derive(Parser)]
#[command(name = "podstore", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// How the commands that take or show keys spell them.
#[derive(Args)]
struct KeyFormat {
    /// Keys on the command line and in the output are hex (default: UTF-8, with non-printable
    /// bytes escaped in the output).
    #[arg(long)]
    hex: bool,
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
        /// Also the store's remote (s3://bucket/prefix, file:///dir/prefix): its newest
        /// manifest, and the local sealed files not in it yet. Read only: the store writing
        /// the prefix is not disturbed.
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
    },
    /// Check every checksum of every file (opens it read-only; exit 0 clean, 1 damaged).
    /// With --remote: every object of the remote's newest manifest, and the manifest.
    Verify {
        /// The store directory (optional with --remote: then its files are also compared with
        /// the remote's).
        #[arg(required_unless_present = "remote")]
        dir: Option<PathBuf>,
        /// Check the remote (s3://bucket/prefix, file:///dir/prefix; credentials from the
        /// environment as object_store reads them: AWS_ACCESS_KEY_ID, AWS_ENDPOINT...): each
        /// object the newest manifest names is there, of its length and crc32.
        #[arg(long, value_name = "URL")]
        remote: Option<String>,
        #[command(flatten)]
        keys: KeyFormat,
    },
    /// Rebuild a store from its remote's newest manifest into DIR (new or empty). The
    /// restored store takes the prefix: a store still writing it is fenced.
    Restore {
        /// Where the store goes: a new or empty directory.
        dir: PathBuf,
        /// The remote (s3://bucket/prefix, file:///dir/prefix; credentials from the
        /// environment as object_store reads them).
        remote: String,
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
        /// With --records: keys in hex (default: UTF-8, non-printable bytes escaped).
        #[arg(long)]
        hex: bool,
    },
    /// The keys, in the library's order.
    Ls {
        /// The store directory.
        dir: PathBuf,
        /// Only keys that start with this.
        #[arg(long)]
        prefix: Option<String>,
        /// With each value's length and when it expires (UTC; `-`: never).
        #[arg(long)]
        long: bool,
        #[command(flatten)]
        keys: KeyFormat,
    },
    /// Write a value (or a byte range of it) to stdout or a file.
    Get {
        /// The store directory.
        dir: PathBuf,
        /// The key.
        key: String,
        /// Bytes A..B of the value (B excluded; A.. and ..B too), or A..+N: N bytes from A.
        /// An end past the value is clamped to it.
        #[arg(long, value_name = "A..B|A..+N")]
        range: Option<String>,
        /// Write to this new file (refused if it exists) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
        #[command(flatten)]
        keys: KeyFormat,
    },
    /// Store a value read from a file or stdin, streamed (durable when it returns).
    Put {
        /// The store directory.
        dir: PathBuf,
        /// The key.
        key: String,
        /// The file to read; `-` or nothing: stdin.
        file: Option<PathBuf>,
        /// The value expires this long after it is stored: `90s`, `15m`, `1h30m`, `7d` (units
        /// ms, s, m, h, d, w). An expired value is absent to every read.
        #[arg(long, value_name = "DURATION", value_parser = time::parse_duration)]
        ttl: Option<std::time::Duration>,
        /// Create the store if there is none at DIR (in a new or empty directory).
        #[arg(long)]
        create: bool,
        /// With --create: create the store in a directory that holds other files (they are
        /// left alone). Without it, such a directory is refused.
        #[arg(long, requires = "create")]
        allow_foreign_files: bool,
        #[command(flatten)]
        keys: KeyFormat,
    },
    /// Delete keys (exit 3 if one of them had no value).
    Rm {
        /// The store directory.
        dir: PathBuf,
        /// The keys.
        #[arg(required = true)]
        keys: Vec<String>,
        #[command(flatten)]
        format: KeyFormat,
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
        /// Where the copy goes: a new directory, in one that exists (none is created).
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
            Error::RemoteCorruption { .. } => DAMAGED,
            Error::NotFound { .. } => NOT_FOUND,
            Error::Io { source, .. } if source.kind() == io::ErrorKind::NotFound => NOT_FOUND,
            Error::Locked { .. } | Error::StoreChanged { .. } => LOCKED,
            Error::InvalidOptions(_) | Error::EmptyKey | Error::KeyTooLarge { .. } => USAGE,
            Error::OutOfRange { .. } | Error::ForeignFiles { .. } => USAGE,
            Error::RemoteMismatch { .. } => USAGE,
            _ => OTHER,
        };
        // The library's words name its API; a shell user gets the command's.
        let message = match &e {
            Error::NotFound { path } => format!("no store at {}", path.display()),
            Error::Locked { path } => format!(
                "store {0} is open in another process (a writer excludes everyone, readers \
                 exclude a writer): stop that process or let it close the store, then retry; \
                 `lsof {0}` shows which process has it",
                path.display()
            ),
            Error::ForeignFiles { path, names, total } => format!(
                "{} holds files that are not a podstore store's ({}); nothing was written: use \
                 a new or empty directory, or pass --allow-foreign-files to create the store \
                 beside them",
                path.display(),
                foreign_names(names, *total)
            ),
            _ => e.to_string(),
        };
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
    match cli.command {
        Command::Stats { dir, json, remote } => stats(&dir, json, remote.as_deref()),
        Command::Verify {
            dir,
            remote: Some(url),
            keys,
        } => remote::verify_remote(&url, dir.as_deref(), keys.hex),
        Command::Verify {
            dir: Some(dir),
            keys,
            ..
        } => verify(&dir, keys.hex),
        Command::Verify { .. } => Err(Failure::new(USAGE, "verify: give DIR or --remote URL")),
        Command::Restore { dir, remote } => remote::restore(&dir, &remote),
        Command::Inspect {
            records: Some(file),
            json,
            hex,
            ..
        } => inspect::records(&file, json, hex),
        // (clap's `requires` lets it pass when PATH is given.)
        Command::Inspect { hex: true, .. } => Err(Failure::new(
            USAGE,
            "inspect: --hex goes with --records FILE (a store's files show no keys)",
        )),
        Command::Inspect {
            path: Some(path),
            json,
            ..
        } => inspect::inspect_path(&path, json),
        Command::Inspect { .. } => Err(Failure::new(
            USAGE,
            "inspect: give a PATH or --records FILE",
        )),
        Command::Ls {
            dir,
            prefix,
            long,
            keys: KeyFormat { hex },
        } => {
            let prefix = prefix.map(|p| parse_key(&p, hex)).transpose()?;
            ls(&dir, prefix.as_deref(), long, hex)
        }
        Command::Get {
            dir,
            key,
            range,
            output,
            keys: KeyFormat { hex },
        } => get(
            &dir,
            &parse_key(&key, hex)?,
            range.as_deref(),
            output.as_deref(),
            hex,
        ),
        Command::Put {
            dir,
            key,
            file,
            ttl,
            create,
            allow_foreign_files,
            keys: KeyFormat { hex },
        } => {
            let create = create.then_some(Create {
                allow_foreign_files,
            });
            let key = parse_key(&key, hex)?;
            put(&dir, &key, file.as_deref(), ttl, create, hex)
        }
        Command::Rm {
            dir,
            keys,
            format: KeyFormat { hex },
        } => {
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

/// Opens an existing store: read-only for the commands that only read. A store another process
/// has open (its lock refused) is read beside its writer instead
/// ([`Options::alongside_writer`]): a view as of now, said in one line on stderr.
fn open(dir: &Path, read_only: bool) -> Result<Store, Failure> {
    // One command, then close: warming the cache would only read segments nobody asked for.
    let opts = Options::default()
        .create(false)
        .read_only(read_only)
        .warm_cache(false);
    let opened = match Store::open_with(dir, opts.clone()) {
        Err(Error::Locked { .. }) if read_only => {
            eprintln!(
                "podstore: {} is in use by another process: reading it beside its writer, as of \
                 now (writes made after this are not shown)",
                dir.display()
            );
            Store::open_with(dir, opts.alongside_writer(true))
        }
        opened => opened,
    };
    match opened {
        // A directory with a `LOCK` among other files (another program's): no store, and these
        // commands create none, so nothing to allow.
        Err(Error::ForeignFiles { path, names, total }) => Err(Failure::new(
            NOT_FOUND,
            format!(
                "no store at {} (it holds other files: {})",
                path.display(),
                foreign_names(&names, total)
            ),
        )),
        opened => Ok(opened?),
    }
}

/// The names of an `Error::ForeignFiles`: "a, b and 3 more".
fn foreign_names(names: &[String], total: usize) -> String {
    let mut shown = names.join(", ");
    if total > names.len() {
        shown.push_str(&format!(" and {} more", total - names.len()));
    }
    shown
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

/// A key for the output: hex, or its text, with what is not printable text escaped (control
/// characters as `\n`, `\u{7f}`..., bytes that are not UTF-8 as `\xNN`, and `\` as `\\`, so
/// that an escape is never mistaken for the key's own characters).
fn show_key(key: &[u8], hex: bool) -> String {
    if hex {
        return key.iter().map(|b| format!("{b:02x}")).collect();
    }
    let mut shown = String::with_capacity(key.len());
    for chunk in key.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' || c.is_control() {
                shown.extend(c.escape_default());
            } else {
                shown.push(c);
            }
        }
        for b in chunk.invalid() {
            shown.push_str(&format!("\\x{b:02x}"));
        }
    }
    shown
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

fn ls(dir: &Path, prefix: Option<&[u8]>, long: bool, hex: bool) -> Result<(), Failure> {
    let store = open(dir, true)?;
    let mut out = io::stdout().lock();
    // In ascending byte order: the store lists keys sorted.
    for key in store.prefix(prefix.unwrap_or_default()) {
        let key = key?;
        let written = if long {
            // A value that expired since it was listed has no metadata: skipped.
            let Some(meta) = store.metadata(&key)? else {
                continue;
            };
            let expires = meta.expires_at().map_or("-".to_string(), time::utc);
            let len = meta.len();
            writeln!(out, "{len:>12}  {expires:<20}  {}", show_key(&key, hex))
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

/// `A..B`, `A..`, `..B`: byte offsets, the end excluded; `A..+N`: `N` bytes from `A`.
fn parse_range(text: &str) -> Result<(u64, Option<u64>), Failure> {
    let bad = |why: String| Failure::new(USAGE, format!("--range {text:?}: {why}"));
    let (a, b) = text.split_once("..").ok_or_else(|| {
        bad("expected A..B, A.., ..B (byte offsets, B excluded) or A..+N (N bytes from A)".into())
    })?;
    let offset = |part: &str| {
        part.parse::<u64>().map_err(|_| {
            let part = part.strip_prefix('=').unwrap_or(part);
            if text.contains("..=") {
                bad("A..=B is not taken: give A..B, whose end B is excluded".into())
            } else if part.starts_with('-') {
                bad(format!("{part:?} is negative: offsets start at 0"))
            } else {
                bad(format!("{part:?} is not a byte offset (a whole number)"))
            }
        })
    };
    let start = if a.is_empty() { 0 } else { offset(a)? };
    let end = match b.strip_prefix('+') {
        // A length, not an end: `+10` is ten bytes from the start, not the offset 10.
        Some(n) => Some(
            start
                .checked_add(offset(n)?)
                .ok_or_else(|| bad(format!("{start}+{n} is past the largest offset")))?,
        ),
        None if b.is_empty() => None,
        None => Some(offset(b)?),
    };
    if let Some(end) = end
        && end < start
    {
        return Err(bad(format!(
            "the end ({end}) is before the start ({start})"
        )));
    }
    Ok((start, end))
}

fn get(
    dir: &Path,
    key: &[u8],
    range: Option<&str>,
    output: Option<&Path>,
    hex: bool,
) -> Result<(), Failure> {
    let (start, end) = range.map(parse_range).transpose()?.unwrap_or((0, None));
    let store = open(dir, true)?;
    let Some(mut reader) = store.reader(key)? else {
        return Err(Failure::new(
            NOT_FOUND,
            format!("no value for key {}", show_key(key, hex)),
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

/// `put --create`, and what it may create a store beside.
struct Create {
    allow_foreign_files: bool,
}

fn put(
    dir: &Path,
    key: &[u8],
    file: Option<&Path>,
    ttl: Option<std::time::Duration>,
    create: Option<Create>,
    hex: bool,
) -> Result<(), Failure> {
    let put_opts = match ttl {
        Some(d) => podstore::PutOptions::new().ttl(d),
        None => podstore::PutOptions::new(),
    };
    let mut input: Box<dyn Read> = match file {
        Some(path) if path != Path::new("-") => Box::new(
            File::open(path)
                .map_err(|e| Failure::new(NOT_FOUND, format!("{}: {e}", path.display())))?,
        ),
        _ => Box::new(io::stdin().lock()),
    };
    let opts = Options::default()
        .create(create.is_some())
        .warm_cache(false)
        .allow_foreign_files(create.is_some_and(|c| c.allow_foreign_files));
    let store = match Store::open_with(dir, opts) {
        Err(Error::NotFound { path }) => {
            return Err(Failure::new(
                NOT_FOUND,
                format!(
                    "no store at {} (nothing created; pass --create to make one)",
                    path.display()
                ),
            ));
        }
        opened => opened?,
    };
    let mut head = Vec::new();
    (&mut input).take(SMALL_INPUT + 1).read_to_end(&mut head)?;
    let n = if head.len() as u64 <= SMALL_INPUT {
        store.put_with(key, &head, &put_opts)?;
        head.len() as u64
    } else {
        let mut writer = store.writer_with(key, &put_opts)?;
        writer.write_all(&head)?;
        let rest = io::copy(&mut input, &mut writer)?;
        writer.finish()?;
        head.len() as u64 + rest
    };
    store.close()?;
    eprintln!("stored {} under {}", size(n), show_key(key, hex));
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
    // Said before the store is opened for writing (the library refuses it too).
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !parent.is_dir() {
        return Err(Failure::new(
            NOT_FOUND,
            format!(
                "checkpoint: {} is not a directory; create it first (podstore creates no \
                 parent directories)",
                parent.display()
            ),
        ));
    }
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
        assert!(matches!(
            parse_range("1000000..+10"),
            Ok((1_000_000, Some(1_000_010)))
        ));
        assert!(matches!(parse_range("..+4"), Ok((0, Some(4)))));
        assert!(matches!(parse_range("7..+0"), Ok((7, Some(7)))));
        assert!(parse_range("1..+-2").is_err());
        assert!(parse_range("18446744073709551615..+1").is_err());
        assert!(parse_range("5..5").is_ok());
        for (range, says) in [
            ("5..2", "the end (2) is before the start (5)"),
            ("x..3", "\"x\" is not a byte offset"),
            ("3..y", "\"y\" is not a byte offset"),
            ("-3..", "\"-3\" is negative"),
            ("1..=3", "A..=B is not taken"),
            ("7", "expected A..B, A.., ..B"),
        ] {
            let message = parse_range(range).err().unwrap().message;
            assert!(message.contains(says), "{range}: {message}");
        }
        assert_eq!(parse_key("00ff10", true).ok(), Some(vec![0, 255, 16]));
        // Text as text; only what is not printable escaped, unambiguously.
        assert_eq!(
            show_key("photos/été.jpg".as_bytes(), false),
            "photos/été.jpg"
        );
        assert_eq!(show_key(b"a\nb\\c\x7f", false), "a\\nb\\\\c\\u{7f}");
        assert_eq!(show_key(b"k\xff\x00", false), "k\\xff\\u{0}");
        assert_eq!(show_key(b"k\xff", true), "6bff");
        assert!(parse_key("0", true).is_err());
        assert!(parse_key("zz", true).is_err());
        assert_eq!(show_key(&[0, 255], true), "00ff");
        assert_eq!(show_key(b"a\n", false), "a\\n");
    }
}
