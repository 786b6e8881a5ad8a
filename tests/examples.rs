//! The examples, run as a user runs them, and proven harmless: with no directory they work in a
//! temporary one and leave nothing behind; given a directory holding an unrelated file they
//! refuse it and change nothing; given a new directory they put their store there and create
//! nothing anywhere else; `verify` opens existing stores only.
//!
//! The example binaries are the ones `cargo test` builds (into target/<profile>/examples/, next
//! to this test's deps/ directory). A test whose binary is missing (`cargo test --test
//! examples` alone does not build examples) says so and passes.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::tree::{self, Tree, snapshot};
use tempfile::TempDir;

/// The built binary of example `name`, if there is one.
fn example_binary(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/examples-<hash> -> target/<profile>/examples/<name>
    let bin = exe.parent()?.parent()?.join("examples").join(name);
    if bin.is_file() {
        Some(bin)
    } else {
        eprintln!(
            "SKIPPED: {} is not built (run `cargo test`, which builds the examples)",
            bin.display()
        );
        None
    }
}

/// A place to run an example in: its own `$TMPDIR` and working directory (both must stay
/// empty), and `root`, a directory holding a file that is not the example's.
struct Sandbox {
    tmpdir: TempDir,
    cwd: TempDir,
    root: TempDir,
}

const UNRELATED: &str = "notes.txt";

impl Sandbox {
    fn new() -> Sandbox {
        let sandbox = Sandbox {
            tmpdir: tempfile::tempdir().unwrap(),
            cwd: tempfile::tempdir().unwrap(),
            root: tempfile::tempdir().unwrap(),
        };
        std::fs::write(sandbox.root().join(UNRELATED), b"mine, not the example's").unwrap();
        sandbox
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    /// Runs `bin` with `args`, in the sandbox's working directory and `$TMPDIR`; checks that it
    /// exited with `status` and left both empty.
    fn run(&self, bin: &Path, args: &[&str], status: i32) -> Output {
        let out = Command::new(bin)
            .args(args)
            .current_dir(self.cwd.path())
            .env("TMPDIR", self.tmpdir.path())
            .output()
            .unwrap();
        let what = format!(
            "{} {args:?}\n--- stdout\n{}--- stderr\n{}",
            bin.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(status), "exit status of {what}");
        for (dir, name) in [(&self.tmpdir, "$TMPDIR"), (&self.cwd, "working directory")] {
            let left = snapshot(dir.path());
            assert!(left.is_empty(), "{what}\nleft in {name}: {:?}", left.keys());
        }
        out
    }
}

/// Checks that `after` is `before` with, at most, paths under `inside` added.
fn only_added_under(before: &Tree, after: &Tree, inside: &Path) {
    assert_eq!(tree::changed(before, after), Vec::<PathBuf>::new());
    for path in tree::added(before, after) {
        assert!(path.starts_with(inside), "{} created", path.display());
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The three runs every store-making example gets: no directory (a temporary one, removed), a
/// directory with an unrelated file (refused, untouched), a new directory (the store is put
/// there and left; nothing else is created; a second run reuses it; `verify` finds it clean).
fn check_example(name: &str, extra: &[&str]) {
    let Some(bin) = example_binary(name) else {
        return;
    };
    let sandbox = Sandbox::new();

    let out = sandbox.run(&bin, extra, 0);
    assert!(stdout(&out).contains("removed"), "{}", stdout(&out));

    let root = sandbox.root().to_str().unwrap();
    let before = snapshot(sandbox.root());
    let out = sandbox.run(&bin, &[extra, &[root]].concat(), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing"), "{stderr}");
    assert_eq!(snapshot(sandbox.root()), before);

    let store = sandbox.root().join("store");
    let store_arg = store.to_str().unwrap();
    for _ in 0..2 {
        sandbox.run(&bin, &[extra, &[store_arg]].concat(), 0);
        only_added_under(&before, &snapshot(sandbox.root()), Path::new("store"));
    }
    assert!(store.join("LOCK").exists());
    if let Some(verify) = example_binary("verify") {
        let out = sandbox.run(&verify, &[store_arg], 0);
        assert!(stdout(&out).ends_with("clean\n"), "{}", stdout(&out));
    }
    only_added_under(&before, &snapshot(sandbox.root()), Path::new("store"));
}

#[test]
fn basic() {
    check_example("basic", &[]);
}

#[test]
fn content_addressed() {
    check_example("content_addressed", &[]);
}

#[test]
fn disk_cache() {
    check_example("disk_cache", &["--requests", "600"]);
}

#[test]
fn range_read() {
    check_example("range_read", &["--mib", "1"]);
}

#[test]
fn verify_opens_existing_stores_only() {
    let Some(bin) = example_binary("verify") else {
        return;
    };
    let sandbox = Sandbox::new();
    let before = snapshot(sandbox.root());

    let out = sandbox.run(&bin, &[], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: verify"));

    let missing = sandbox.root().join("mistyped/store");
    for path in [
        missing.as_path(),
        &sandbox.root().join("mistyped"),
        sandbox.root(),
    ] {
        let out = sandbox.run(&bin, &[path.to_str().unwrap()], 2);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("no store at"), "{stderr}");
        assert_eq!(snapshot(sandbox.root()), before, "{}", path.display());
    }
    let file = sandbox.root().join(UNRELATED);
    sandbox.run(&bin, &[file.to_str().unwrap()], 2);
    assert_eq!(snapshot(sandbox.root()), before);

    // The demo damages a store of its own, in a temporary directory it removes.
    let out = sandbox.run(&bin, &["--demo"], 1);
    assert!(
        stdout(&out).contains("unreadable key: b"),
        "{}",
        stdout(&out)
    );
    assert_eq!(snapshot(sandbox.root()), before);
}

#[test]
fn every_example_is_checked_here() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names: Vec<String> = std::fs::read_dir(examples)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            Some(name.strip_suffix(".rs")?.to_string())
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "basic",
            "content_addressed",
            "disk_cache",
            "range_read",
            "verify"
        ],
        "a new example needs its run in tests/examples.rs"
    );
}
