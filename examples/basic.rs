//! The basics: open, put, get, overwrite, delete, an atomic batch, iterate, close, reopen.
//!
//! Run: `cargo run --example basic [DIR]`
//!
//! Without DIR the store lives in a fresh temporary directory, removed at the end. A given DIR
//! must be new, empty or a podstore store; the store is left there.

mod common;

use common::{Args, Failure, finish, show};
use podstore::{Batch, Options};

const USAGE: &str = "basic [DIR]";

fn main() -> std::process::ExitCode {
    finish(run())
}

fn run() -> Result<(), Failure> {
    let dir = Args::parse(USAGE, &[], &[], 1)?.store_dir("basic")?;
    let store = dir.open(Options::default())?;
    println!(
        "opened {} ({:?} I/O)",
        dir.path().display(),
        store.io_mode()
    );

    // Every put is durable when it returns (Durability::Sync is the default).
    store.put(b"fruit/apple", b"red")?;
    store.put(b"fruit/banana", b"yellow")?;
    store.put(b"fruit/apple", b"green")?; // overwrite: the last write wins
    let apple = store.get(b"fruit/apple")?.expect("just written");
    println!("fruit/apple = {}", show(&apple));
    let banana_len = store.value_len(b"fruit/banana")?.expect("just written");
    println!("fruit/banana is {banana_len} bytes long");

    // `delete` says whether there was a value; a missing key reads as `None`, not an error.
    println!(
        "delete fruit/banana: {}",
        deleted(store.delete(b"fruit/banana")?)
    );
    println!(
        "delete fruit/banana again: {}",
        deleted(store.delete(b"fruit/banana")?)
    );
    match store.get(b"fruit/cherry")? {
        Some(v) => println!("fruit/cherry = {}", show(&v)),
        None => println!("fruit/cherry: no such key"),
    }

    // Several changes at once, all-or-nothing even across a crash.
    let mut batch = Batch::new();
    batch
        .put(b"fruit/cherry", b"dark red")
        .put(b"fruit/date", b"brown")
        .delete(b"fruit/apple");
    store.write(&batch)?;
    println!("after the batch: {} keys", store.len());
    store.put(b"fruit/apple", b"green")?;

    print!("live keys:");
    for key in store.keys() {
        let key = key?;
        print!(" {}", show(&key));
    }
    println!();
    store.close()?; // seals the active segment; dropping the store does the same

    let store = dir.open(Options::default())?;
    let apple = store.get(b"fruit/apple")?.expect("durable");
    println!(
        "reopened: {} keys, fruit/apple = {}",
        store.len(),
        show(&apple)
    );
    store.close()?;
    println!("{}", dir.farewell());
    Ok(())
}

fn deleted(existed: bool) -> &'static str {
    if existed {
        "deleted"
    } else {
        "there was nothing to delete"
    }
}
