//! The first hour of a new user: README.md's quickstart, run as written. The code in the
//! `quickstart` module below is the README's, word for word, with its two paths
//! (`"/var/lib/myapp/blobs"`, `"photo.jpg"`) replaced by `store_dir()` and `photo_path()`, which
//! point into a temporary directory; `readme_quickstart_is_the_code_run_here` checks that, so
//! the README cannot drift from the code.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use podstore::Store;

thread_local! {
    /// This test's (store directory, photo file).
    static PLACE: RefCell<(PathBuf, PathBuf)> = RefCell::default();
}

fn store_dir() -> PathBuf {
    PLACE.with(|p| p.borrow().0.clone())
}

fn photo_path() -> PathBuf {
    PLACE.with(|p| p.borrow().1.clone())
}

mod quickstart {
    use super::{photo_path, store_dir};

    // README quickstart begin
    use podstore::{Options, Store};

    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        let store = Store::open_with(store_dir(), Options::default())?;
        let photo = std::fs::read(photo_path())?;
        store.put("photo/42", &photo)?; // durable when it returns; keys and values: any bytes

        let whole = store.get("photo/42")?; // Some(bytes); None for a missing key
        assert_eq!(whole.as_deref(), Some(&photo[..]));
        let head = store.get_range("photo/42", 0..4096)?.unwrap(); // reads ~4 KiB from disk
        assert_eq!(head, photo[..photo.len().min(4096)]); // a range past the end is clamped
        let mut stream = store.reader("photo/42")?.unwrap(); // impl Read + Seek
        std::io::copy(&mut stream, &mut std::io::sink())?;

        // A value too large to hold in memory: stream it in (and out again with `reader`).
        let mut writer = store.writer("photo/42/original")?; // impl Write
        std::io::copy(&mut std::fs::File::open(photo_path())?, &mut writer)?;
        writer.finish()?; // visible and durable at once, or not at all

        store.delete("photo/42")?;
        store.close()?; // or just drop it
        Ok(())
    }
    // README quickstart end
}

/// Runs the quickstart in `root` with a photo of `photo_len` bytes; returns the store directory.
fn run_quickstart(
    root: &Path,
    photo_len: usize,
) -> (PathBuf, Result<(), Box<dyn std::error::Error>>) {
    let dir = root.join("var/lib/myapp/blobs");
    let file = root.join("photo.jpg");
    let bytes: Vec<u8> = (0..photo_len).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(&file, bytes).unwrap();
    PLACE.with(|p| *p.borrow_mut() = (dir.clone(), file));
    (dir.clone(), quickstart::main())
}

/// Whitespace runs as one space: rustfmt may align the module's comments differently.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn readme_quickstart_is_the_code_run_here() {
    let readme = include_str!("../README.md");
    let block = readme
        .split("```rust,no_run\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("README.md has a quickstart (a rust,no_run block)");
    let this = include_str!("first_hour.rs");
    let begin = "// README quickstart begin\n";
    let code = &this[this.find(begin).unwrap() + begin.len()..];
    let code = &code[..code.find("// README quickstart end").unwrap()];
    let readme_code = block
        .replace("\"/var/lib/myapp/blobs\"", "store_dir()")
        .replace("\"photo.jpg\"", "photo_path()")
        .replace("fn main()", "pub fn main()");
    assert_eq!(
        words(&readme_code),
        words(code),
        "tests/first_hour.rs must run README.md's quickstart as written"
    );
}

/// Until podstore is on crates.io the README promises no registry version and no docs.rs page:
/// it says so, depends by path, and sends the reader to `cargo doc --open`. (When the crate is
/// published, the README and this test change together.)
#[test]
fn readme_depends_by_path_until_published_and_states_the_rust_version() {
    let readme = include_str!("../README.md");
    assert!(
        words(readme).contains("podstore is not on crates.io yet"),
        "README.md should say the crate is not published yet"
    );
    assert!(
        readme.contains("[dependencies]\npodstore = { path = \"../podstore\" }"),
        "README.md should show a path dependency"
    );
    for promise in ["podstore = \"", "docs.rs/podstore"] {
        assert!(
            !readme.contains(promise),
            "README.md promises `{promise}`, which does not exist before the crate is published"
        );
    }
    assert!(
        readme.contains("cargo doc --open"),
        "README.md should say how to read the API docs"
    );
    let rust = env!("CARGO_PKG_RUST_VERSION");
    assert!(
        words(readme).contains(&format!("Rust {rust} or newer")),
        "README.md should say it needs Rust {rust} (rust-version) or newer"
    );
}

#[test]
fn quickstart_runs_on_a_photo() {
    let root = tempfile::tempdir().unwrap();
    let (dir, result) = run_quickstart(root.path(), 300 << 10);
    result.unwrap();
    let store = Store::open(&dir).unwrap();
    assert_eq!(store.get(b"photo/42").unwrap(), None, "deleted");
    let original = store
        .get("photo/42/original")
        .unwrap()
        .expect("streamed in");
    assert_eq!(
        original,
        std::fs::read(root.path().join("photo.jpg")).unwrap()
    );
    assert_eq!(store.len(), 1);
}

#[test]
fn quickstart_on_a_photo_of_4_kib_exactly() {
    let root = tempfile::tempdir().unwrap();
    run_quickstart(root.path(), 4096).1.unwrap();
}

#[test]
fn quickstart_on_a_photo_under_4_kib() {
    // The quickstart reads `0..4096` of the photo: on a photo under 4 KiB the range is clamped to
    // the value's end (HTTP/S3 semantics), so it reads the whole photo rather than failing.
    let root = tempfile::tempdir().unwrap();
    run_quickstart(root.path(), 267).1.unwrap();
}
