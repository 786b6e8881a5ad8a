//! The basics: open, put, get, overwrite, delete, an atomic batch, iterate, close, reopen.
//!
//! Run: `cargo run --example basic [DIR]` (default: a fresh directory under the system temp dir).

use podstore::{Batch, Options, Store};

fn main() -> podstore::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("podstore-basic-{}", std::process::id()))
        });

    let store = Store::open_with(&dir, Options::default())?;
    println!("opened {} using {:?} I/O", dir.display(), store.io_mode());

    // Every put is durable when it returns (Durability::Sync is the default).
    store.put(b"fruit/apple", b"red")?;
    store.put(b"fruit/banana", b"yellow")?;
    store.put(b"fruit/apple", b"green")?; // overwrite: the last write wins
    println!(
        "apple  = {:?}",
        String::from_utf8(store.get(b"fruit/apple")?.unwrap())
    );
    println!(
        "banana is {} bytes",
        store.value_len(b"fruit/banana")?.unwrap()
    );

    println!("deleted banana: {}", store.delete(b"fruit/banana")?);
    println!("deleted banana again: {}", store.delete(b"fruit/banana")?);
    println!("missing key gives {:?}", store.get(b"fruit/cherry")?);

    // Several changes at once, all-or-nothing even across a crash.
    let mut batch = Batch::new();
    batch
        .put(b"fruit/cherry", b"dark red")
        .put(b"fruit/date", b"brown")
        .delete(b"fruit/apple");
    store.write(&batch)?;
    println!("after the batch: {} key(s)", store.len());
    store.put(b"fruit/apple", b"green")?;

    for key in store.keys() {
        println!("live key: {}", String::from_utf8_lossy(&key));
    }
    store.close()?; // seals the active segment; dropping the store does the same

    let store = Store::open(&dir)?;
    println!(
        "reopened: {} key(s), apple = {:?}",
        store.len(),
        String::from_utf8(store.get(b"fruit/apple")?.unwrap())
    );
    drop(store);
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
