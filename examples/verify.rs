//! Checks a store: opens it, reports what recovery did, runs `Store::verify` and prints every
//! damaged place and every key that can no longer be read.
//!
//! Run: `cargo run --example verify DIR` (the store must not be open elsewhere), or
//! `cargo run --example verify -- --demo` to see a report of damage: it builds a small store in
//! a fresh temporary directory, flips one byte of a value in it, checks it and removes it.
//!
//! It opens existing stores only (`Options::create(false)`): a missing or mistyped path is an
//! error, not a new empty store. It opens them read-only (`Options::read_only(true)`): the check
//! writes nothing to what it checks (a segment left unsealed by a crash is checked as it is, not
//! sealed), and works on a read-only directory or mount.
//!
//! Exit status: 0 clean, 1 damaged, 2 wrong arguments or no store to check.

mod common;

use common::{Args, Failure, StoreDir, finish, show, size};
use podstore::{Options, Store};

const USAGE: &str = "verify DIR | verify --demo";

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let args = Args::parse(USAGE, &[], &["--demo"], 1)?;
    let dir = match (args.positional.first(), args.switch("--demo")) {
        (Some(dir), false) => StoreDir::given(dir),
        (None, true) => demo_store()?,
        _ => {
            let what = "give the directory of a store, or --demo";
            return Err(Failure::usage(format!("{what}\nusage: {USAGE}")));
        }
    };
    let opts = Options::default().create(false).read_only(true);
    let store = Store::open_with(dir.path(), opts).map_err(|e| {
        // A store whose catalog lists files that are missing or cut is damaged, not a usage
        // error: the message names every such file.
        match e.is_corruption() || matches!(e, podstore::Error::Damaged { .. }) {
            true => Failure::other(format!("damaged: {e}")),
            false => Failure::usage(e),
        }
    })?;
    let recovery = store.recovery();
    println!(
        "{}: {} keys; {} segments opened from their footer, {} recovered by a scan",
        dir.path().display(),
        store.len(),
        recovery.sealed_segments,
        recovery.recovered.len()
    );
    let report = store.verify()?;
    println!(
        "verify: {} files, {} records, {} checked",
        report.segments,
        report.records,
        size(report.bytes_checked)
    );
    for d in &report.damage {
        let key = d.key.as_deref().map_or("unknown".to_string(), show);
        println!("  damaged {:?} (key {key}): {}", d.structure, d.to_error());
    }
    for key in &report.affected_keys {
        println!("  unreadable key: {}", show(key));
    }
    for f in &report.files {
        println!("  {f}");
    }
    store.close()?;
    if report.is_clean() {
        println!("clean");
        Ok(())
    } else {
        Err(Failure::other(format!(
            "the store is damaged: {} damaged place(s), {} unreadable key(s), {} missing or \
             cut file(s)",
            report.damage.len(),
            report.affected_keys.len(),
            report.files.len()
        )))
    }
}

/// A temporary store with three values, one of them with a flipped byte in its value.
fn demo_store() -> Result<StoreDir, Failure> {
    let dir = StoreDir::temporary("verify")?;
    let store = dir.open(Options::default())?;
    store.put(b"a", [b'a'; 10_000])?;
    store.put(b"b", [b'b'; 10_000])?;
    store.put(b"c", [b'c'; 10_000])?;
    store.close()?;
    let seg = dir.path().join("seg-0000000000000001.pod");
    let mut bytes = std::fs::read(&seg)?;
    // The second value's bytes are the only long run of b'b' (a lone 0x62 can be a byte of a
    // header or a checksum before it, which differ from store to store); flip one of them.
    let at = bytes
        .windows(64)
        .position(|w| w.iter().all(|&x| x == b'b'))
        .expect("value b")
        + 5000;
    bytes[at] ^= 0x01;
    std::fs::write(&seg, &bytes)?;
    println!("demo: flipped one byte of the value of key b");
    Ok(dir)
}
