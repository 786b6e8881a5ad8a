//! `podstore restore`, `verify --remote` and `stats --remote`, run as real processes against a
//! remote in a directory (a file:// URL) and on a real S3 server on 127.0.0.1 (an s3:// URL,
//! credentials from the environment): what they print, their exit codes, and what they find
//! when objects are missing or damaged.

#[path = "../../podstore-remote/tests/common/s3.rs"]
mod s3;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use podstore::{Options, Store};
use podstore_remote::ObjectStoreRemote;
use s3::S3Server;

fn podstore(args: &[&str], env: &[(&str, String)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_podstore"));
    cmd.args(args).stdin(Stdio::null());
    // Only what a test gives: no AWS_* settings of the machine's.
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_")) {
        cmd.env_remove(k);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.output().unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().expect("exited")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[track_caller]
fn ok(args: &[&str], env: &[(&str, String)]) -> String {
    let o = podstore(args, env);
    assert_eq!(code(&o), 0, "{args:?}: {}{}", out(&o), err(&o));
    out(&o)
}

/// The value of `key` in the store at `dir`, as `podstore get` writes it.
#[track_caller]
fn get(dir: &Path, key: &str) -> Vec<u8> {
    let o = podstore(&["get", p(dir), key], &[]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    o.stdout
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

fn value(i: u32) -> Vec<u8> {
    // Key 2 is 2 MiB: a blob file of its own.
    let len = if i == 2 {
        2 << 20
    } else {
        100 + i as usize * 7
    };
    (0..len).map(|b| (b as u32 ^ (i * 13)) as u8).collect()
}

/// A store in `dir` with `bucket` as its remote under `prefix`: keys k0..k20 flushed to the
/// remote, then `late` written and sealed into a blob file, not flushed.
fn store_with_remote(dir: &Path, bucket: Arc<dyn ObjectStore>, prefix: &str) {
    let remote = Arc::new(ObjectStoreRemote::new(bucket).unwrap());
    let opts = Options::default()
        .segment_size(1 << 20)
        .remote(remote, prefix)
        .remote_flush_interval(None);
    let store = Store::open_with(dir, opts).unwrap();
    for i in 0..20 {
        store.put(format!("k{i}"), value(i)).unwrap();
    }
    // The first flush's manifest carries the files (a flush of one round trip) while they
    // are uploaded; the second names their objects, which `verify --remote` then checks.
    assert!(store.flush_remote().unwrap().files_in_manifest > 0);
    assert_eq!(store.flush_remote().unwrap().files_in_manifest, 0);
    store.put("late", vec![9u8; 1 << 20]).unwrap();
    drop(store);
}

/// The files of the objects under `dir` whose names contain `part`.
fn objects(dir: &Path, part: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(d).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.to_string_lossy().contains(part) {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn restore_verify_and_stats_against_a_file_url() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, bucket) = (tmp.path().join("store"), tmp.path().join("bucket"));
    std::fs::create_dir(&bucket).unwrap();
    let local = Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap());
    store_with_remote(&dir, local, "stores/a");
    let url = format!("file://{}/stores/a", bucket.display());

    // stats: the newest manifest (3: the flush's, written again as the store closed), and the
    // sealed file written after it.
    let shown = ok(&["stats", p(&dir), "--remote", &url], &[]);
    let line = shown
        .lines()
        .find(|l| l.starts_with("remote"))
        .expect(&shown);
    assert!(
        line.contains(&format!(
            "{url}: manifest 4 (epoch 1, written as its writer closed), "
        )),
        "{shown}"
    );
    // (The later blob file at least; closing may have rewritten the small segment too.)
    assert!(shown.contains(" local sealed files ("), "{shown}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["stats", "--json", p(&dir), "--remote", &url], &[])).unwrap();
    assert_eq!(json["remote"]["manifest"], 4);
    assert_eq!(json["remote"]["closed"], true);
    assert!(json["remote"]["waiting_files"].as_u64().unwrap() >= 1);
    assert!(json["remote"]["waiting_bytes"].as_u64().unwrap() >= 1 << 20);
    assert_eq!(json["live_keys"], 21);

    // verify: the manifest and every object it names, one line each.
    let checked = ok(&["verify", "--remote", &url], &[]);
    let files = json["remote"]["files"].as_u64().unwrap() as usize;
    assert_eq!(
        checked.lines().filter(|l| l.starts_with("ok: ")).count(),
        files
    );
    assert!(checked.ends_with("clean\n"), "{checked}");
    // With the directory: its files are the objects' bytes, and it verifies.
    let both = ok(&["verify", "--remote", &url, p(&dir)], &[]);
    assert!(!both.contains("differs"), "{both}");

    // restore: the keys the remote flush covered; not the later one.
    let restored = tmp.path().join("restored");
    let said = ok(&["restore", p(&restored), &url], &[]);
    assert!(said.starts_with(&format!(
        "restored {} from {url}: manifest 4 (",
        p(&restored)
    )));
    assert!(said.trim_end().ends_with("20 keys"), "{said}");
    assert!(get(&restored, "k2") == value(2));
    let late = podstore(&["get", p(&restored), "late"], &[]);
    assert_eq!(code(&late), 3);

    // A directory that is not empty is refused, and left as it was.
    let o = podstore(&["restore", p(&dir), &url], &[]);
    assert_eq!(code(&o), 2, "{}", err(&o));
    assert!(
        err(&o).contains("is not empty; nothing was written"),
        "{}",
        err(&o)
    );
    // A prefix without a manifest: no store there, and nothing created.
    let o = podstore(
        &["restore", p(&tmp.path().join("x")), &format!("{url}-typo")],
        &[],
    );
    assert_eq!(code(&o), 3, "{}", err(&o));
    assert!(err(&o).contains("no store at"), "{}", err(&o));
    assert!(!tmp.path().join("x").exists());
    assert!(!bucket.join("stores/a-typo").exists());

    // A directory that is another store: its files differ from the remote's.
    let other = tmp.path().join("other");
    let s = Store::open_with(&other, Options::default().segment_size(1 << 20)).unwrap();
    // (The same file ids as the remote's: the active segment 1, then blob file 2.)
    s.put("k0", "x").unwrap();
    s.put("k2", vec![1u8; 2 << 20]).unwrap();
    s.close().unwrap();
    let o = podstore(&["verify", "--remote", &url, p(&other)], &[]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    assert!(out(&o).contains("differs: "), "{}", out(&o));
}

#[test]
fn verify_remote_names_missing_cut_and_damaged_objects_and_a_damaged_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, bucket) = (tmp.path().join("store"), tmp.path().join("bucket"));
    std::fs::create_dir(&bucket).unwrap();
    let local = Arc::new(LocalFileSystem::new_with_prefix(&bucket).unwrap());
    store_with_remote(&dir, local, "p");
    let url = format!("file://{}/p", bucket.display());
    let data = objects(&bucket.join("p/data"), ".pod");
    assert!(data.len() >= 2, "{data:?}");
    // One object flipped, one gone.
    let mut bytes = std::fs::read(&data[0]).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&data[0], bytes).unwrap();
    std::fs::remove_file(&data[1]).unwrap();
    let o = podstore(&["verify", "--remote", &url], &[]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    // (A file:// URL's objects are named by their whole path, without the leading `/`.)
    let name = |path: &Path| path.strip_prefix("/").unwrap().display().to_string();
    let shown = out(&o);
    assert!(
        shown.contains(&format!("damaged: {}: crc32 ", name(&data[0]))),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("missing: {}", name(&data[1]))),
        "{shown}"
    );
    assert!(
        err(&o).contains("1 missing object(s), 1 damaged"),
        "{}",
        err(&o)
    );
    // Cut short: its length is not the manifest's.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&data[0])
        .unwrap();
    f.set_len(50).unwrap();
    let shown = out(&podstore(&["verify", "--remote", &url], &[]));
    assert!(
        shown.contains(&format!(
            "damaged: {}: 50 bytes, the manifest says ",
            name(&data[0])
        )),
        "{shown}"
    );
    // The manifest itself.
    let manifests = objects(&bucket.join("p/manifest"), "000");
    let newest = manifests.last().unwrap();
    let mut bytes = std::fs::read(newest).unwrap();
    bytes[30] ^= 1;
    std::fs::write(newest, bytes).unwrap();
    let o = podstore(&["verify", "--remote", &url], &[]);
    assert_eq!(code(&o), 1, "{}", out(&o));
    assert!(out(&o).starts_with("damaged: "), "{}", out(&o));
    assert!(out(&o).contains(&name(newest)), "{}", out(&o));
}

#[test]
fn urls_that_cannot_name_a_remote_are_wrong_arguments() {
    for (url, says) in [
        ("memory:///p", "memory:// lives inside one process"),
        ("s3://bucket", "names no prefix"),
        ("not a url", "relative URL without a base"),
    ] {
        let o = podstore(&["verify", "--remote", url], &[]);
        assert_eq!(code(&o), 2, "{url}: {}", err(&o));
        assert!(err(&o).contains(says), "{url}: {}", err(&o));
    }
    let o = podstore(&["verify"], &[]);
    assert_eq!(code(&o), 2);
}

/// README.md's "Remote tier" commands, run as shown against the S3 server (its endpoint and
/// key pair in the environment, as a local server needs them): the bucket and directories
/// replaced by the test's.
#[test]
fn the_readmes_remote_commands_run_against_s3() {
    let readme = include_str!("../../README.md");
    let section = &readme[readme.find("\n## Remote tier").unwrap() + 1..];
    let section = &section[..section.find("\n## ").unwrap()];
    let block = section.split("```sh\n").nth(1).expect("the commands");
    let block = &block[..block.find("```").unwrap()];
    let commands: Vec<&str> = block
        .lines()
        .filter(|l| l.starts_with("podstore "))
        .collect();
    assert_eq!(commands.len(), 3, "{block}");

    let tmp = tempfile::tempdir().unwrap();
    let server = S3Server::start(&tmp.path().join("s3"));
    let dir = tmp.path().join("blobs");
    store_with_remote(&dir, server.store(), "stores/photos");
    let env = server.env();
    let new = tmp.path().join("new");
    for command in commands {
        let command = command
            .replace("s3://blobs/", &format!("s3://{}/", s3::BUCKET))
            .replace("/var/lib/myapp/blobs", p(&dir))
            .replace("/new/disk/blobs", p(&new));
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let shown = ok(&args, &env);
        assert!(!shown.is_empty(), "{command}");
    }
    assert!(get(&new, "k19") == value(19));

    // Without the key pair the server refuses: said in one line, exit 5.
    let without: Vec<_> = env
        .iter()
        .filter(|(k, _)| *k != "AWS_SECRET_ACCESS_KEY")
        .cloned()
        .chain([("AWS_SECRET_ACCESS_KEY", "wrong".to_string())])
        .collect();
    let url = format!("s3://{}/stores/photos", s3::BUCKET);
    let o = podstore(&["verify", "--remote", &url], &without);
    assert_eq!(code(&o), 5, "{}", err(&o));
    assert_eq!(err(&o).lines().count(), 1, "{}", err(&o));
}
