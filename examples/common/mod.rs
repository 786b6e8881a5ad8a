//! What the examples share: their command line, where they keep their store, and how they end.
//!
//! An example works in a fresh temporary directory, removed when it ends, unless it is given a
//! directory. A given directory must be new (its parent must exist), empty, or hold a podstore
//! store; the example leaves the store there and never removes anything. Anything else (a file,
//! a directory holding other files) is refused with exit status 2 before anything is written.
#![allow(dead_code)] // each example uses part of it

use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use podstore::{Error, Options, Store};

/// Why an example stopped early: a message for stderr and the exit status.
pub struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// A wrong command line, or a directory the example will not use: exit status 2.
    pub fn usage(message: impl Display) -> Failure {
        Failure {
            message: message.to_string(),
            code: 2,
        }
    }

    /// Anything else that went wrong: exit status 1.
    pub fn other(message: impl Display) -> Failure {
        Failure {
            message: message.to_string(),
            code: 1,
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::other(e)
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Failure {
        Failure::other(e)
    }
}

/// The exit status of a run: 0, or the failure's status after printing it to stderr.
pub fn finish(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

/// The command-line arguments: `options` are the `--name value` options the example takes,
/// `switches` its `--name` flags; the rest is at most `max_positional` positional arguments.
/// `-h`/`--help` prints `usage` and exits; anything else unexpected is a usage failure.
pub struct Args {
    /// The positional arguments, in order.
    pub positional: Vec<String>,
    options: Vec<(String, String)>,
    switches: Vec<String>,
}

impl Args {
    pub fn parse(
        usage: &str,
        options: &[&str],
        switches: &[&str],
        max_positional: usize,
    ) -> Result<Args, Failure> {
        let usage_error = |what: String| Failure::usage(format!("{what}\nusage: {usage}"));
        let mut args = Args {
            positional: Vec::new(),
            options: Vec::new(),
            switches: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            if arg == "-h" || arg == "--help" {
                println!("usage: {usage}");
                std::process::exit(0);
            } else if options.contains(&arg.as_str()) {
                let value = it
                    .next()
                    .ok_or_else(|| usage_error(format!("{arg} needs a value")))?;
                args.options.push((arg, value));
            } else if switches.contains(&arg.as_str()) {
                args.switches.push(arg);
            } else if arg.starts_with('-') {
                return Err(usage_error(format!("unknown option {arg}")));
            } else {
                args.positional.push(arg);
            }
        }
        if args.positional.len() > max_positional {
            return Err(usage_error("too many arguments".to_string()));
        }
        Ok(args)
    }

    /// The value of the option `--flag`, parsed; `default` when it is absent.
    pub fn option<T: std::str::FromStr>(&self, flag: &str, default: T) -> Result<T, Failure> {
        match self.options.iter().rev().find(|(f, _)| f == flag) {
            None => Ok(default),
            Some((_, v)) => v
                .parse()
                .map_err(|_| Failure::usage(format!("{flag}: cannot use {v:?}"))),
        }
    }

    /// True when the switch `--flag` was given.
    pub fn switch(&self, flag: &str) -> bool {
        self.switches.iter().any(|s| s == flag)
    }

    /// The store directory: the first positional argument, or a fresh temporary directory.
    pub fn store_dir(&self, example: &str) -> Result<StoreDir, Failure> {
        match self.positional.first() {
            Some(dir) => Ok(StoreDir::given(dir)),
            None => StoreDir::temporary(example),
        }
    }
}

/// Where an example keeps its store: a temporary directory (removed when this is dropped) or the
/// directory given on the command line (never removed).
pub struct StoreDir {
    path: PathBuf,
    temp: Option<tempfile::TempDir>,
}

impl StoreDir {
    /// A fresh directory under the system's temporary directory (`$TMPDIR`).
    pub fn temporary(example: &str) -> Result<StoreDir, Failure> {
        let temp = tempfile::Builder::new()
            .prefix(&format!("podstore-{example}-"))
            .tempdir()
            .map_err(|e| Failure::other(format!("create a temporary directory: {e}")))?;
        Ok(StoreDir {
            path: temp.path().to_path_buf(),
            temp: Some(temp),
        })
    }

    /// The directory the user gave.
    pub fn given(path: impl Into<PathBuf>) -> StoreDir {
        StoreDir {
            path: path.into(),
            temp: None,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens (or creates) the store, refusing a given directory that holds something else.
    ///
    /// A given path that does not exist is created, without its parents (a mistyped parent is
    /// refused, not created); an empty directory gets a new store; a directory holding a store
    /// opens it; anything else is refused before anything is written.
    pub fn open(&self, opts: Options) -> Result<Store, Failure> {
        if self.temp.is_some() {
            return Ok(Store::open_with(&self.path, opts)?);
        }
        let shown = self.path.display();
        match std::fs::metadata(&self.path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&self.path)
                    .map_err(|e| Failure::usage(format!("cannot create {shown}: {e}")))?;
                return Ok(Store::open_with(&self.path, opts)?);
            }
            Err(e) => return Err(Failure::usage(format!("cannot use {shown}: {e}"))),
            Ok(meta) if !meta.is_dir() => {
                return Err(Failure::usage(format!(
                    "{shown} is not a directory; give a new or empty directory, or none for a \
                     temporary one"
                )));
            }
            Ok(_) => {}
        }
        // The library refuses a directory that holds other files and no store, before it
        // writes anything (`Options::allow_foreign_files` stays off).
        match Store::open_with(&self.path, opts) {
            Err(Error::ForeignFiles { names, .. }) => Err(Failure::usage(format!(
                "{shown} holds files and no podstore store ({}): refusing to write there; give \
                 a new or empty directory, or none for a temporary one",
                names.join(", ")
            ))),
            opened => Ok(opened?),
        }
    }

    /// A line saying where the store is now.
    pub fn farewell(&self) -> String {
        match self.temp {
            Some(_) => format!(
                "the temporary directory {} is removed now",
                self.path.display()
            ),
            None => format!(
                "the store stays in {0}; check it with `cargo run --example verify {0}`",
                self.path.display()
            ),
        }
    }
}

/// `bytes` as text, non-printable bytes escaped (`\xff`).
pub fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// A byte count with a binary unit: "512 B", "24.0 KiB", "3.5 MiB".
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
