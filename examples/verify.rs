//! Checks a store: opens it, reports what recovery did, runs `Store::verify` and prints every
//! damaged place and every key that can no longer be read. Exits with 1 if anything is damaged.
//!
//! Run: `cargo run --example verify DIR` (the store must not be open elsewhere).
//! Without DIR it builds a small store in a fresh directory, flips one byte of a value in it and
//! checks that.

use podstore::{Options, Store};

fn main() -> podstore::Result<()> {
    let dir = match std::env::args().nth(1) {
        Some(d) => std::path::PathBuf::from(d),
        None => demo_store()?,
    };
    let store = Store::open_with(&dir, Options::default())?;
    let recovery = store.recovery();
    println!(
        "{}: {} keys; {} segments opened sealed, {} recovered",
        dir.display(),
        store.len(),
        recovery.sealed_segments,
        recovery.recovered.len()
    );
    let report = store.verify()?;
    println!(
        "verify: {} segment files, {} records, {} bytes checked",
        report.segments, report.records, report.bytes_checked
    );
    for d in &report.damage {
        let key = d.key.as_deref().map(String::from_utf8_lossy);
        println!(
            "  damaged {:?}: {} (key {key:?})",
            d.structure,
            d.to_error()
        );
    }
    for key in &report.affected_keys {
        println!("  unreadable key: {}", String::from_utf8_lossy(key));
    }
    store.close()?;
    if !report.is_clean() {
        std::process::exit(1);
    }
    println!("clean");
    Ok(())
}

/// A store with three values, one of them with a flipped byte in its value.
fn demo_store() -> podstore::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("podstore-verify-{}", std::process::id()));
    let store = Store::open(&dir)?;
    store.put(b"a", [b'a'; 10_000])?;
    store.put(b"b", [b'b'; 10_000])?;
    store.put(b"c", [b'c'; 10_000])?;
    store.close()?;
    let seg = std::fs::read_dir(&dir)
        .expect("store directory")
        .map(|e| e.expect("entry").path())
        .find(|p| p.to_string_lossy().ends_with("0001.pod"))
        .expect("the first segment");
    let mut bytes = std::fs::read(&seg).expect("read segment");
    // The second value's bytes are the only run of b'b'; flip one of them.
    let at = bytes.iter().position(|&x| x == b'b').expect("value b") + 5000;
    bytes[at] ^= 0x01;
    std::fs::write(&seg, &bytes).expect("write segment");
    Ok(dir)
}
