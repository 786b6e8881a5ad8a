//! The `podstore` binary, run as a real process against real stores: every subcommand, its
//! output and its exit code.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use podstore::{Options, Store};

fn podstore(args: &[&str]) -> Output {
    run(args, None)
}

fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_podstore"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(bytes) = stdin {
        // A child that fails before reading its input closes the pipe: not the test's error.
        match child.stdin.take().unwrap().write_all(bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            other => other.unwrap(),
        }
    }
    child.wait_with_output().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(args: &[&str]) -> String {
    let o = podstore(args);
    assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
    stdout(&o)
}

/// A closed store with a few values, a blob file, a delete, and a sealed segment.
fn store() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path().join("store");
    let s = Store::open_with(&dir, Options::default().segment_size(1 << 20)).unwrap();
    s.put("photos/1", vec![1u8; 5000]).unwrap();
    s.put("photos/2", vec![2u8; 300]).unwrap();
    s.put("docs/a", "hello").unwrap();
    s.put("big", vec![7u8; 2 << 20]).unwrap();
    s.put([0u8, 255], "binary key").unwrap();
    s.put("gone", "x").unwrap();
    s.delete("gone").unwrap();
    s.close().unwrap();
    (tmp, dir)
}

/// The first log segment file of a store directory.
fn first_segment(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .unwrap()
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn stats_for_humans_and_for_scripts() {
    let (_tmp, dir) = store();
    let out = ok(&["stats", p(&dir)]);
    assert!(out.contains("keys        5"), "{out}");
    // The index's memory, and why it is mostly not the keys'.
    let index = out.lines().find(|l| l.starts_with("index")).unwrap();
    assert!(
        index.contains("(115 B for 5 keys at 23 B each; the rest is its shard table"),
        "{index}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&["stats", "--json", p(&dir)])).unwrap();
    assert_eq!(json["live_keys"], 5);
    assert_eq!(json["blob_files"], 1);
    assert!(json["disk_bytes"].as_u64().unwrap() > 2 << 20);
}

#[test]
fn stats_show_what_a_size_cap_evicted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let opts = Options::default()
        .segment_size(1 << 20)
        .size_cap(Some(2 << 20))
        .durability(podstore::Durability::Buffered);
    let s = Store::open_with(&dir, opts).unwrap();
    let mut first = None;
    for i in 0..400u32 {
        let v = s.put(format!("k{i}"), vec![7u8; 32 << 10]).unwrap();
        first.get_or_insert(v);
    }
    let evicted = s.stats().evicted_through;
    assert!(evicted >= first.unwrap().get(), "{evicted}");
    s.close().unwrap();
    let out = ok(&["stats", p(&dir)]);
    let line = out.lines().find(|l| l.starts_with("evicted")).expect(&out);
    assert_eq!(
        line,
        format!(
            "evicted     values up to version {evicted} (dropped whole to stay within a size cap)"
        )
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&["stats", "--json", p(&dir)])).unwrap();
    assert_eq!(json["evicted_through"], evicted);
    // A store that never evicted says nothing of it.
    let (_tmp, plain) = store();
    assert!(!ok(&["stats", p(&plain)]).contains("evicted"));
}

#[test]
fn ls_in_the_librarys_order_with_prefix_long_and_hex() {
    let (_tmp, dir) = store();
    let store = Store::open_with(&dir, Options::default().read_only(true)).unwrap();
    // Text as text; the one key that is not UTF-8 with its bytes escaped.
    let shown = |k: Vec<u8>| match k.as_slice() {
        [0, 255] => "\\u{0}\\xff".to_string(),
        _ => String::from_utf8(k).unwrap(),
    };
    let library: Vec<String> = store.keys().map(|k| shown(k.unwrap())).collect();
    drop(store);
    let out = ok(&["ls", p(&dir)]);
    assert_eq!(out.lines().collect::<Vec<_>>(), library);
    let photos = ok(&["ls", "--prefix", "photos/", "--long", p(&dir)]);
    // Length, expiry (`-`: never), key.
    let mut lines: Vec<Vec<&str>> = photos
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    lines.sort_by_key(|l| l.get(2).map(|k| k.to_string()));
    assert_eq!(
        lines,
        [["5000", "-", "photos/1"], ["300", "-", "photos/2"]],
        "{photos}"
    );
    let hex = ok(&["ls", "--hex", "--prefix", "00", p(&dir)]);
    assert_eq!(hex.trim(), "00ff");
}

#[test]
fn keys_show_as_text_with_only_what_is_not_printable_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let s = Store::open(&dir).unwrap();
    for k in ["photos/été.jpg", "tab\tkey", "back\\slash", "日本/1"] {
        s.put(k, "v").unwrap();
    }
    s.close().unwrap();
    let out = ok(&["ls", p(&dir)]);
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["back\\\\slash", "photos/été.jpg", "tab\\tkey", "日本/1"],
        "{out}"
    );
    let o = podstore(&["rm", p(&dir), "日本/2"]);
    assert_eq!(stderr(&o), "podstore: no value for key(s) 日本/2\n");
}

#[test]
fn get_whole_values_ranges_and_to_a_file() {
    let (tmp, dir) = store();
    let o = podstore(&["get", p(&dir), "docs/a"]);
    assert_eq!(o.stdout, b"hello");
    let o = podstore(&["get", "--range", "1..3", p(&dir), "docs/a"]);
    assert_eq!(o.stdout, b"el");
    // HTTP range semantics: an end past the value is clamped.
    let o = podstore(&["get", "--range", "3..100", p(&dir), "docs/a"]);
    assert_eq!(o.stdout, b"lo");
    // A..+N: N bytes from A (not up to the offset N).
    let o = podstore(&["get", "--range", "2..+2", p(&dir), "docs/a"]);
    assert_eq!(o.stdout, b"ll");
    let o = podstore(&["get", "--range", "..+3", p(&dir), "docs/a"]);
    assert_eq!(o.stdout, b"hel");
    let o = podstore(&["get", "--hex", p(&dir), "00ff"]);
    assert_eq!(o.stdout, b"binary key");
    let file = tmp.path().join("big.out");
    ok(&["get", "-o", p(&file), p(&dir), "big"]);
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 2 << 20]);
    // -o never replaces a file.
    let o = podstore(&["get", "-o", p(&file), p(&dir), "docs/a"]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert_eq!(std::fs::read(&file).unwrap().len(), 2 << 20);
    // Missing key: 3; a range past the end: 2; bad range syntax: 2.
    assert_eq!(code(&podstore(&["get", p(&dir), "nope"])), 3);
    assert_eq!(
        code(&podstore(&["get", "--range", "9..", p(&dir), "docs/a"])),
        2
    );
    assert_eq!(
        code(&podstore(&["get", "--range", "x", p(&dir), "docs/a"])),
        2
    );
}

#[test]
fn put_from_a_file_and_from_stdin_small_and_streamed() {
    let (tmp, dir) = store();
    let src = tmp.path().join("src");
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &big).unwrap();
    ok(&["put", p(&dir), "from-file", p(&src)]);
    let o = run(&["put", p(&dir), "from-stdin", "-"], Some(b"piped bytes"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(&["put", p(&dir), "stdin-default"], Some(&big));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let store = Store::open_with(&dir, Options::default().read_only(true)).unwrap();
    assert_eq!(store.get("from-file").unwrap(), Some(big.clone()));
    assert_eq!(
        store.get("from-stdin").unwrap().as_deref(),
        Some(&b"piped bytes"[..])
    );
    assert_eq!(store.get("stdin-default").unwrap(), Some(big));
    drop(store);
    // No store there: 3, nothing created, and the flag that creates one named; with
    // --create, a new store.
    let new = tmp.path().join("new");
    let o = run(&["put", p(&new), "k"], Some(b"v"));
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "podstore: no store at {} (nothing created; pass --create to make one)\n",
            new.display()
        )
    );
    assert!(!new.exists());
    let o = run(&["put", "--create", p(&new), "k"], Some(b"v"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(podstore(&["get", p(&new), "k"]).stdout, b"v");
    // A missing input file: 3.
    assert_eq!(code(&podstore(&["put", p(&dir), "k", "/no/such/file"])), 3);
}

#[test]
fn rm_deletes_and_says_which_keys_had_no_value() {
    let (_tmp, dir) = store();
    ok(&["rm", p(&dir), "photos/1", "photos/2"]);
    let o = podstore(&["rm", p(&dir), "docs/a", "never"]);
    assert_eq!(code(&o), 3);
    assert!(stderr(&o).contains("never"), "{}", stderr(&o));
    let left = ok(&["ls", p(&dir)]);
    assert!(
        !left.contains("photos") && !left.contains("docs/a"),
        "{left}"
    );
}

#[test]
fn compact_gives_space_back() {
    let (_tmp, dir) = store();
    let disk = |dir: &Path| {
        let json: serde_json::Value =
            serde_json::from_str(&ok(&["stats", "--json", p(dir)])).unwrap();
        json["disk_bytes"].as_u64().unwrap()
    };
    let before = disk(&dir);
    ok(&["rm", p(&dir), "big", "photos/1", "photos/2", "docs/a"]);
    let out = ok(&["compact", p(&dir)]);
    assert!(out.contains("freed"), "{out}");
    // The blob file (perhaps already at the close after `rm`) and the dead segment.
    assert!(
        disk(&dir) + (2 << 20) < before,
        "{before} -> {}",
        disk(&dir)
    );
}

#[test]
fn verify_clean_damaged_and_missing_files() {
    let (tmp, dir) = store();
    assert!(ok(&["verify", p(&dir)]).contains("clean"));
    // A flipped byte inside a value of a sealed segment: 1, and the damage is named.
    let seg = first_segment(&dir);
    let copy = tmp.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
    }
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = bytes
        .windows(5000)
        .position(|w| w.iter().all(|&b| b == 1))
        .unwrap();
    bytes[at + 100] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let o = podstore(&["verify", p(&dir)]);
    assert_eq!(code(&o), 1, "{}", stdout(&o));
    assert!(
        stdout(&o).contains("unreadable key: photos/1"),
        "{}",
        stdout(&o)
    );
    // A sealed file deleted: the open refuses the store as damaged, 1, naming the file.
    let name = seg.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::remove_file(copy.join(&name)).unwrap();
    let o = podstore(&["verify", p(&copy)]);
    assert_eq!(code(&o), 1);
    // Named, and the rest of the store checked (read-only: nothing changed).
    assert!(
        stdout(&o).contains(&format!("damaged file: {name} is missing")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("records"), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("1 missing or cut file"),
        "{}",
        stderr(&o)
    );
    assert!(!copy.join(&name).exists());
    let o = podstore(&["verify", p(&copy)]);
    assert_eq!(code(&o), 1, "still damaged: verify changed nothing");
    // No store: 3.
    assert_eq!(code(&podstore(&["verify", p(&tmp.path().join("none"))])), 3);
}

#[test]
fn reads_work_beside_a_read_only_opener_and_beside_a_writer_which_locks_out_writes() {
    let (_tmp, dir) = store();
    let reader = Store::open_with(&dir, Options::default().read_only(true)).unwrap();
    assert!(ok(&["verify", p(&dir)]).contains("clean"));
    assert_eq!(podstore(&["get", p(&dir), "docs/a"]).stdout, b"hello");
    drop(reader);
    let writer = Store::open(&dir).unwrap();
    writer.put("docs/b", "written by the writer").unwrap();
    // The commands that only read go on beside the writer, as of now, and say so once.
    for args in [
        &["verify", p(&dir)][..],
        &["stats", p(&dir)],
        &["ls", p(&dir)],
        &["get", p(&dir), "docs/b"],
    ] {
        let o = podstore(args);
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        let said = stderr(&o);
        assert_eq!(said.lines().count(), 1, "{said}");
        assert!(said.contains("in use by another process"), "{said}");
        assert!(said.contains("as of now"), "{said}");
    }
    assert_eq!(
        podstore(&["get", p(&dir), "docs/b"]).stdout,
        b"written by the writer"
    );
    assert!(ok(&["ls", p(&dir)]).contains("docs/b"));
    // A write is refused: 4.
    let o = podstore(&["rm", p(&dir), "docs/a"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).starts_with("podstore: "), "{}", stderr(&o));
    assert_eq!(stderr(&o).lines().count(), 1);
    // What a shell user can do, in a shell's words: no API names.
    let said = stderr(&o);
    assert!(said.contains("is open in another process"), "{said}");
    assert!(said.contains("stop that process"), "{said}");
    assert!(
        said.contains(&format!("`lsof {}`", dir.display())),
        "{said}"
    );
    assert!(!said.contains("Store::"), "{said}");
    // The writer noticed nothing.
    assert_eq!(
        writer.get("docs/a").unwrap().as_deref(),
        Some(&b"hello"[..])
    );
    writer.close().unwrap();
    assert!(Store::open(&dir).unwrap().recovery().recovered.is_empty());
}

#[test]
fn inspect_a_store_a_catalog_a_lone_file_and_its_records() {
    let (tmp, dir) = store();
    let out = ok(&["inspect", p(&dir)]);
    assert!(out.starts_with("catalog: "), "{out}");
    assert!(out.contains("blob-") && out.contains("seg-"), "{out}");
    assert!(out.contains("live "), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", "--json", p(&dir)])).unwrap();
    assert!(json["files"].as_array().unwrap().len() >= 2);
    let catalog = ok(&["inspect", p(&dir.join("CATALOG"))]);
    assert!(catalog.contains("sealed"), "{catalog}");
    // A lone file copied out of the store.
    let seg = first_segment(&dir);
    let lone = tmp.path().join("lone.pod");
    std::fs::copy(&seg, &lone).unwrap();
    let out = ok(&["inspect", p(&lone)]);
    assert!(
        out.contains("sealed") && out.contains("tombstones"),
        "{out}"
    );
    let recs = ok(&["inspect", "--records", p(&lone)]);
    assert!(recs.contains("photos/1") && recs.contains("del"), "{recs}");
    assert!(recs.contains("records; end at"), "{recs}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", "--records", p(&lone), "--json"])).unwrap();
    assert!(json["records"].as_array().unwrap().len() >= 5);
    // Not there: 3; nothing to inspect: 2.
    assert_eq!(code(&podstore(&["inspect", "/no/such/path"])), 3);
    assert_eq!(code(&podstore(&["inspect"])), 2);
}

#[test]
fn checkpoint_makes_an_openable_copy_and_refuses_an_existing_destination() {
    let (tmp, dir) = store();
    let dest = tmp.path().join("backup");
    let out = ok(&["checkpoint", p(&dir), p(&dest)]);
    assert!(out.contains("files linked"), "{out}");
    assert_eq!(podstore(&["get", p(&dest), "docs/a"]).stdout, b"hello");
    assert!(ok(&["verify", p(&dest)]).contains("clean"));
    let o = podstore(&["checkpoint", p(&dir), p(&dest)]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    // A missing parent: 3, said, and not created.
    let parent = tmp.path().join("missing/parent");
    let o = podstore(&["checkpoint", p(&dir), p(&parent.join("backup"))]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "podstore: checkpoint: {} is not a directory; create it first (podstore creates no \
             parent directories)\n",
            parent.display()
        )
    );
    assert!(!tmp.path().join("missing").exists());
}

#[test]
fn wrong_arguments_are_exit_2_with_one_line() {
    let o = podstore(&["get"]);
    assert_eq!(code(&o), 2);
    let o = podstore(&["get", "--hex", "/tmp", "abc"]);
    assert_eq!(code(&o), 2);
    assert_eq!(stderr(&o).lines().count(), 1, "{}", stderr(&o));
    assert_eq!(code(&podstore(&["frobnicate"])), 2);
    assert_eq!(code(&podstore(&["--help"])), 0);
}

/// Every name under `dir` with its bytes (directories as `None`).
fn tree(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            out.push((path.clone(), None));
            out.extend(tree(&path));
        } else {
            out.push((path.clone(), Some(std::fs::read(&path).unwrap())));
        }
    }
    out.sort();
    out
}

#[test]
fn put_create_refuses_a_directory_of_other_files_unless_told() {
    let tmp = tempfile::TempDir::new().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes.txt"), b"mine").unwrap();
    std::fs::write(home.join("cat.jpg"), b"meow").unwrap();
    let before = tree(&home);
    let o = run(&["put", "--create", p(&home), "k"], Some(b"v"));
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "podstore: {} holds files that are not a podstore store's (cat.jpg, notes.txt); \
             nothing was written: use a new or empty directory, or pass --allow-foreign-files to \
             create the store beside them\n",
            home.display()
        )
    );
    assert_eq!(tree(&home), before, "the refused directory changed");
    // The commands that create nothing call it no store, and name no flag.
    let o = podstore(&["ls", p(&home)]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!("podstore: no store at {}\n", home.display())
    );
    // Another program's LOCK among its files is no store either.
    std::fs::write(home.join("LOCK"), b"").unwrap();
    let before = tree(&home);
    let o = podstore(&["stats", p(&home)]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        format!(
            "podstore: no store at {} (it holds other files: cat.jpg, notes.txt)\n",
            home.display()
        )
    );
    assert_eq!(tree(&home), before);
    std::fs::remove_file(home.join("LOCK")).unwrap();
    // The flag means nothing without --create: a usage error.
    let o = run(&["put", "--allow-foreign-files", p(&home), "k"], Some(b"v"));
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("--create"), "{}", stderr(&o));
    // With both: a store beside the files, which stay as they were.
    let o = run(
        &["put", "--create", "--allow-foreign-files", p(&home), "k"],
        Some(b"v"),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(podstore(&["get", p(&home), "k"]).stdout, b"v");
    assert_eq!(std::fs::read(home.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(std::fs::read(home.join("cat.jpg")).unwrap(), b"meow");
    // An empty directory needs no flag.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let o = run(&["put", "--create", p(&empty), "k"], Some(b"v"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
}

#[test]
fn malformed_ranges_are_named_with_what_is_wrong() {
    let (_tmp, dir) = store();
    for (range, says) in [
        (
            "--range=5..2",
            "--range \"5..2\": the end (2) is before the start (5)",
        ),
        (
            "--range=x..3",
            "--range \"x..3\": \"x\" is not a byte offset (a whole number)",
        ),
        (
            "--range=-1..3",
            "--range \"-1..3\": \"-1\" is negative: offsets start at 0",
        ),
        (
            "--range=1..=3",
            "--range \"1..=3\": A..=B is not taken: give A..B, whose end B is excluded",
        ),
        (
            "--range=7",
            "--range \"7\": expected A..B, A.., ..B (byte offsets, B excluded) or A..+N (N bytes \
             from A)",
        ),
    ] {
        let o = podstore(&["get", range, p(&dir), "docs/a"]);
        assert_eq!(code(&o), 2, "{range}: {}", stderr(&o));
        assert_eq!(stderr(&o), format!("podstore: {says}\n"), "{range}");
        assert!(o.stdout.is_empty());
    }
    // An empty range is no error: no bytes.
    let o = podstore(&["get", "--range", "2..2", p(&dir), "docs/a"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(o.stdout.is_empty());
}

#[test]
fn inspect_json_states_are_words_and_numbers_and_ids_are_marked_hex() {
    let (_tmp, dir) = store();
    // Something removed, so that every state shows.
    ok(&["rm", p(&dir), "big"]);
    ok(&["compact", p(&dir)]);
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", "--json", p(&dir)])).unwrap();
    let catalog = json["catalog"].as_array().unwrap();
    assert!(!catalog.is_empty());
    let mut states = std::collections::BTreeSet::new();
    for e in catalog {
        let state = e["state"].as_str().unwrap();
        states.insert(state.to_string());
        match state {
            "sealed" => assert!(e["len"].as_u64().unwrap() > 0, "{e}"),
            "created" | "removed" => assert!(e["len"].is_null(), "{e}"),
            other => panic!("state {other:?} in {e}"),
        }
        assert!(e["name"].as_str().unwrap().ends_with(".pod"), "{e}");
        assert!(e["id"].is_u64(), "{e}");
    }
    assert!(
        states.contains("sealed") && states.contains("removed"),
        "{states:?}"
    );
    // The same entries as `inspect CATALOG --json`.
    let file: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", "--json", p(&dir.join("CATALOG"))])).unwrap();
    assert_eq!(&file, &json["catalog"]);
    // For people, ids in hex, marked: the file seg-...0a.pod is id 0xa.
    let out = ok(&["inspect", p(&dir)]);
    let line = out.lines().find(|l| l.starts_with("seg-")).unwrap();
    let name = line.split_whitespace().next().unwrap();
    let id = u64::from_str_radix(&name[4..20], 16).unwrap();
    assert!(line.contains(&format!(" id {id:#x} ")), "{line}");
}

#[test]
fn hex_is_offered_where_keys_are_taken_or_shown_only() {
    let (_tmp, dir) = store();
    for cmd in ["ls", "get", "put", "rm", "verify", "inspect"] {
        let help = ok(&[cmd, "--help"]);
        assert!(help.contains("--hex"), "{cmd}: {help}");
    }
    for cmd in ["stats", "compact", "checkpoint"] {
        let help = ok(&[cmd, "--help"]);
        assert!(!help.contains("--hex"), "{cmd}: {help}");
    }
    let o = podstore(&["compact", "--hex", p(&dir)]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    // Before the command it is no longer taken.
    assert_eq!(code(&podstore(&["--hex", "ls", p(&dir)])), 2);
    // inspect takes it with --records only (a file's keys).
    let o = podstore(&["inspect", "--hex", p(&dir)]);
    assert_eq!(code(&o), 2);
    assert_eq!(
        stderr(&o),
        "podstore: inspect: --hex goes with --records FILE (a store's files show no keys)\n"
    );
    let recs = ok(&["inspect", "--hex", "--records", p(&first_segment(&dir))]);
    assert!(recs.contains("00ff"), "{recs}");
    // Keys said in messages are in hex too.
    let o = podstore(&["get", "--hex", p(&dir), "abcd"]);
    assert_eq!(code(&o), 3);
    assert_eq!(stderr(&o), "podstore: no value for key abcd\n");
    let o = run(&["put", "--hex", p(&dir), "0001"], Some(b"x"));
    assert_eq!(stderr(&o), "stored 1 B under 0001\n");
}

#[test]
fn compact_with_a_threshold_takes_what_stats_says_the_default_leaves() {
    let tmp = tempfile::TempDir::new().unwrap();
    let dir = tmp.path().join("store");
    // About 15 % of one sealed segment dead: below the default threshold (0.5).
    let opts = Options::default()
        .durability(podstore::Durability::Buffered)
        .background_compaction(false);
    let s = Store::open_with(&dir, opts).unwrap();
    for i in 0..100u32 {
        s.put(i.to_be_bytes(), vec![1u8; 8000]).unwrap();
    }
    for i in (0..100u32).step_by(7) {
        s.delete(i.to_be_bytes()).unwrap();
    }
    s.close().unwrap();
    let stats = || -> serde_json::Value {
        serde_json::from_str(&ok(&["stats", "--json", p(&dir)])).unwrap()
    };
    let before = stats();
    assert_eq!(before["reclaimable_bytes"], 0, "{before}");
    assert!(
        before["below_threshold_bytes"].as_u64().unwrap() > 15 * 8000,
        "{before}"
    );
    let human = ok(&["stats", p(&dir)]);
    assert!(
        human.contains("in segments under the 0.5 threshold (compact --threshold"),
        "{human}"
    );

    let out = ok(&["compact", p(&dir)]);
    assert!(out.starts_with("0 segments rewritten"), "{out}");
    let out = ok(&["compact", p(&dir), "--threshold", "0.1"]);
    assert!(out.starts_with("1 segments rewritten"), "{out}");
    let after = stats();
    // Left: the new segment's header and footer, not one deleted value.
    assert!(after["dead_bytes"].as_u64().unwrap() < 8000, "{after}");
    assert!(after["disk_bytes"].as_u64() < before["disk_bytes"].as_u64());

    for bad in ["0", "1.5", "-1", "x"] {
        let o = podstore(&["compact", p(&dir), "--threshold", bad]);
        assert_eq!(code(&o), 2, "{bad}: {}", stderr(&o));
    }
}

/// Runs of 10 digits or more (sequence numbers: clock microseconds) as `N`.
fn without_clock(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    for c in text.chars().chain(std::iter::once('\0')) {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        out.push_str(if digits.len() >= 10 { "N" } else { &digits });
        digits.clear();
        if c != '\0' {
            out.push(c);
        }
    }
    out
}

/// README.md's "Command line" session, run as shown: each `$ ` line by `sh` (in a directory of
/// its own, with the `podstore` built here first on `PATH`, a 3,000,000-byte `cat.jpg` and a
/// `note.txt` holding `hello`), its stdout and stderr together exactly as the README shows them
/// (sequence numbers, which are clock microseconds, aside).
#[test]
fn the_readmes_command_line_session_runs_as_shown() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("\n## Command line\n").unwrap() + 1..];
    let section = &section[..section.find("\n## ").unwrap()];
    let block = section.split("```text\n").nth(1).expect("a session");
    let block = &block[..block.find("```").unwrap()];
    let mut steps: Vec<(&str, String)> = Vec::new();
    for line in block.lines() {
        match line.strip_prefix("$ ") {
            Some(command) => steps.push((command, String::new())),
            None => {
                let out = &mut steps.last_mut().expect("a command first").1;
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    assert!(steps.len() >= 13, "{} commands", steps.len());
    let tmp = tempfile::tempdir().unwrap();
    let cat: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(tmp.path().join("cat.jpg"), cat).unwrap();
    std::fs::write(tmp.path().join("note.txt"), "hello\n").unwrap();
    let bin = Path::new(env!("CARGO_BIN_EXE_podstore")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (command, shown) in steps {
        let o = Command::new("sh")
            .arg("-c")
            .arg(format!("{{ {command}\n}} 2>&1"))
            .current_dir(tmp.path())
            .env("PATH", &path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let mut got = String::from_utf8_lossy(&o.stdout).into_owned();
        // `get` writes the bytes asked for, without a newline of its own; a terminal's prompt
        // goes on the next line all the same.
        if !got.is_empty() && !got.ends_with('\n') {
            got.push('\n');
        }
        assert_eq!(
            without_clock(&got),
            without_clock(&shown),
            "`{command}` printed something else than README.md shows"
        );
    }
}

#[test]
fn put_with_a_ttl_shows_its_expiry_and_an_expired_value_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let before = std::time::SystemTime::now();
    let o = run(
        &["put", "--create", "--ttl", "1h30m", p(&dir), "thumb/1"],
        Some(b"jpeg"),
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = run(&["put", p(&dir), "plain"], Some(b"p"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // ls --long: the expiry in UTC, 90 minutes from the put (to the second).
    let long = ok(&["ls", "--long", p(&dir)]);
    let rows: Vec<Vec<&str>> = long
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows.len(), 2, "{long}");
    assert_eq!(rows[0][..], ["1", "-", "plain"], "{long}");
    let store = Store::open_with(&dir, Options::default().read_only(true)).unwrap();
    let at = store
        .metadata("thumb/1")
        .unwrap()
        .unwrap()
        .expires_at()
        .unwrap();
    drop(store);
    let secs = at.duration_since(before).unwrap().as_secs();
    assert!((5399..=5460).contains(&secs), "{secs}");
    assert_eq!(rows[1][0], "4", "{long}");
    assert!(
        rows[1][1].ends_with('Z') && rows[1][1].len() == 20,
        "{long}"
    );
    assert_eq!(rows[1][2], "thumb/1");
    // A value that expires a second after its put (the put's close, which compacts, finds it
    // live), a second later: not listed, counted by stats, missing to get.
    let o = run(&["put", "--ttl", "1s", p(&dir), "gone"], Some(b"x"));
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(ok(&["ls", p(&dir)]).lines().count(), 2);
    let json: serde_json::Value = serde_json::from_str(&ok(&["stats", "--json", p(&dir)])).unwrap();
    assert_eq!(json["live_keys"], 2);
    assert_eq!(json["expired_keys"], 1);
    assert!(json["expired_bytes"].as_u64().unwrap() > 40);
    let human = ok(&["stats", p(&dir)]);
    assert!(human.contains("expired     1 ("), "{human}");
    let o = podstore(&["get", p(&dir), "gone"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    // A TTL that is not a duration is a usage error.
    let o = run(&["put", "--ttl", "soon", p(&dir), "k"], Some(b"x"));
    assert_eq!(code(&o), 2, "{}", stderr(&o));
}
