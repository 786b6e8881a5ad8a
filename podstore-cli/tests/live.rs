//! `podstore stats`, `ls`, `get` and `verify` on a store another process has open and keeps
//! writing and compacting (issue 40): the real binary, run again and again while the writer
//! runs. Every value `get` prints is one the writer wrote for that key, `verify` never calls the
//! store damaged, the writer never sees an error, and its store then reopens with no recovery
//! scan and nothing lost.
//!
//! The writer is this test binary run again (`PODSTORE_LIVE_WRITER=<dir>`): it writes rounds of
//! values until its stdin closes, then closes the store and prints what it wrote last. Hence
//! `harness = false`: `main` is either the writer or the test.
//!
//! `PODSTORE_TEST_LONG=1` runs the tools for 30 s instead of 3 (and at least 4 rounds).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use podstore::{CompactOptions, Options, Store};

const WRITER_VAR: &str = "PODSTORE_LIVE_WRITER";
const KEYS: usize = 30;

fn key(i: usize) -> String {
    if i % 10 == 9 {
        format!("big/{i:02}")
    } else {
        format!("key/{i:02}")
    }
}

/// Key `i`'s value at `round`: names its key and round, so that any value read can be checked
/// to be one the writer wrote for that key, whole. Keys ending in 9 are large enough for a blob
/// file of their own.
fn value(i: usize, round: u64) -> Vec<u8> {
    let head = format!("{}#{round}#", key(i));
    let len = if i % 10 == 9 {
        70_000 + (round as usize * 977) % 20_000
    } else {
        300 + (i * 131 + round as usize * 17) % 6_000
    };
    head.bytes().cycle().take(len).collect()
}

/// Keys the writer deletes now and then (and writes again in the next round).
fn deletable(i: usize) -> bool {
    i.is_multiple_of(7)
}

fn writer_options() -> Options {
    Options::default()
        .segment_size(1 << 20)
        .large_value_threshold(64 << 10)
        .background_compaction(false)
}

/// The writer process: rounds of puts (and a few deletes), 10 ms apart, a compaction every
/// fourth round, until stdin closes; then a clean close and, on stdout, each key's last round
/// (`-` for deleted). Any error is printed and exits 1.
fn writer(dir: &Path) {
    let run = || -> podstore::Result<(BTreeMap<usize, Option<u64>>, u64, usize)> {
        let store = Store::open_with(dir, writer_options())?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let _ = std::io::stdin().read_to_end(&mut Vec::new());
                stop.store(true, Ordering::SeqCst);
            });
        }
        let mut last = BTreeMap::new();
        let mut compacted = 0;
        let mut round = 0;
        while round == 0 || !stop.load(Ordering::SeqCst) {
            round += 1;
            for i in 0..KEYS {
                if round % 5 == 0 && deletable(i) {
                    store.delete(key(i))?;
                    last.insert(i, None);
                } else {
                    store.put(key(i), value(i, round))?;
                    last.insert(i, Some(round));
                }
            }
            if round == 1 {
                println!("ready");
            }
            // The tools get the other core's share: the machine may have two.
            std::thread::sleep(Duration::from_millis(10));
            if round % 4 == 0 {
                let r = store.compact_with(CompactOptions::new().threshold(0.2))?;
                compacted += r.segments_compacted + r.blob_files_removed;
            }
        }
        store.close()?;
        Ok((last, round, compacted))
    };
    match run() {
        Ok((last, rounds, compacted)) => {
            println!("rounds {rounds} compacted {compacted}");
            for (i, r) in last {
                match r {
                    Some(r) => println!("{i} {r}"),
                    None => println!("{i} -"),
                }
            }
        }
        Err(e) => {
            println!("error {e}");
            std::process::exit(1);
        }
    }
}

fn podstore(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_podstore"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Runs a tool and checks it succeeded and said, in one line, that it read beside a writer.
#[track_caller]
fn tool(args: &[&str]) -> Vec<u8> {
    let o = podstore(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains("in use by another process"), "{args:?}: {err}");
    o.stdout
}

/// Panics unless `got` is a value the writer wrote for key `i`.
fn check_value(i: usize, got: &[u8]) {
    let text = String::from_utf8_lossy(&got[..got.len().min(40)]).into_owned();
    let mut parts = text.splitn(3, '#');
    let (name, round) = (parts.next().unwrap(), parts.next());
    assert_eq!(name, key(i), "key {i}: another key's value: {text:?}");
    let round: u64 = round
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("key {i}: not a value the writer wrote: {text:?}"));
    assert!(
        got == value(i, round),
        "key {i}: round {round}'s value, not whole"
    );
}

fn live_tools_on_a_store_being_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let d = dir.to_str().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(WRITER_VAR, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready", "the writer failed to start: {line}");
    // The store is locked: a write is refused as before.
    let refused = podstore(&["rm", d, "key/01"]);
    assert_eq!(refused.status.code(), Some(4));

    let long = std::env::var("PODSTORE_TEST_LONG").is_ok_and(|v| !v.is_empty() && v != "0");
    let until = Instant::now() + Duration::from_secs(if long { 30 } else { 3 });
    let (mut runs, mut gets) = (0, 0);
    let mut n = 0usize;
    while runs < 4 || Instant::now() < until {
        n += 1;
        let stats = String::from_utf8(tool(&["stats", d])).unwrap();
        assert!(stats.contains("keys"), "{stats}");
        let listed = String::from_utf8(tool(&["ls", d])).unwrap();
        let listed: Vec<&str> = listed.lines().collect();
        for i in 0..KEYS {
            assert!(
                deletable(i) || listed.contains(&key(i).as_str()),
                "ls left out {}: {listed:?}",
                key(i)
            );
        }
        for i in [n % KEYS, (n * 7 + 3) % KEYS, 9 + 10 * (n % 3)] {
            let o = podstore(&["get", d, &key(i)]);
            match o.status.code() {
                Some(0) => check_value(i, &o.stdout),
                // Deleted in this view.
                Some(3) if deletable(i) => {}
                other => panic!(
                    "get {}: {other:?}: {}",
                    key(i),
                    String::from_utf8_lossy(&o.stderr)
                ),
            }
            gets += 1;
        }
        let verified = String::from_utf8(tool(&["verify", d])).unwrap();
        assert!(verified.ends_with("clean\n"), "{verified}");
        runs += 1;
    }

    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the writer failed: {rest}");
    let mut lines = rest.lines();
    let summary = lines.next().unwrap();
    eprintln!(
        "live: {runs} rounds of stats/ls/get/verify ({gets} gets) beside a writer: {summary}"
    );
    let compacted: usize = summary.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(compacted > 0, "the writer never compacted: {summary}");

    // The writer's store opens with no recovery scan and every last value.
    let store = Store::open_with(&dir, writer_options()).unwrap();
    let r = store.recovery();
    assert!(
        r.recovered.is_empty() && r.lost.is_empty() && r.quarantined.is_empty(),
        "{r:?}"
    );
    for l in lines {
        let (i, round) = l.split_once(' ').unwrap();
        let i: usize = i.parse().unwrap();
        let expected = round.parse().ok().map(|r| value(i, r));
        assert_eq!(store.get(key(i)).unwrap(), expected, "key {i}");
    }
}

fn main() {
    if let Some(dir) = std::env::var_os(WRITER_VAR) {
        writer(Path::new(&dir));
        return;
    }
    // `cargo test -- NAME` filters: this binary has one test.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let name = "live_tools_on_a_store_being_written";
    if filter.is_some_and(|f| !name.contains(&f)) {
        return;
    }
    live_tools_on_a_store_being_written();
    println!("test {name} ... ok");
}
