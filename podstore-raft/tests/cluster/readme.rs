//! README.md's "Replication" section, run as written: every command of its `sh` blocks (the
//! three-node start, `cluster/init`, the `curl` requests, the learner and voters changes) runs
//! with `sh` against real node processes, and its output is checked against what the
//! README's comment on it says. A README edit that breaks a command fails this test.
//!
//! The substitutions, all in [`localize`], so that the commands can run on a shared machine:
//! the ports `2100N` become `PPPPN` for a free four-digit prefix `PPPP`, `/tmp/pod` a
//! temporary directory, `target/release/podstore-raft` the binary cargo built for this test
//! (`cargo build --release -p podstore-raft` is not run: cargo test built that binary from the
//! same package). Each command runs in the temporary directory, which holds the `photo.jpg` and
//! `new.jpg` it sends. A variable a command sets (`etag=$(...)`) is passed to the following
//! commands through the environment, as a shell session would keep it. Between commands the
//! test waits where a person typing them would (for a node to serve, for a leader, for a
//! follower to apply a write), and it runs three commands a second time to see their other
//! outcome (a stale `If-Match`, `If-None-Match: *` on a key that exists, a `DELETE` of a key
//! already deleted), and the status command once more after the voters change.
//!
//! Skipped (with a SKIPPED line) where `curl` is not installed; CI installs it (`.ci/run`).

use crate::common;

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::procs::{status, wait_for};
use podstore_raft::http::Status;
use serde_json::Value;

const README: &str = include_str!("../../../README.md");

/// The README's own build command, which this test does not run (see the module's doc).
const BUILD: &str = "cargo build --release -p podstore-raft";

/// The commands of the `sh` blocks of README.md's "## Replication" section, in order: a line
/// ending in `\` continues on the next one, and a `for` loop runs to its `done`.
fn replication_commands() -> Vec<String> {
    let section = &README[README
        .find("\n## Replication\n")
        .expect("a Replication section")..];
    let section = &section[1..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut commands = Vec::new();
    for block in section.split("```sh\n").skip(1) {
        let block = &block[..block.find("```").expect("a closed block")];
        let mut current = String::new();
        let mut depth = 0usize;
        for line in block.lines() {
            let word = line.split_whitespace().next().unwrap_or("");
            match word {
                "for" | "while" => depth += 1,
                "done" | "done;" => depth = depth.checked_sub(1).expect("a done after a for"),
                _ => {}
            }
            current.push_str(line);
            current.push('\n');
            if depth == 0 && !line.ends_with('\\') && !current.trim().is_empty() {
                commands.push(std::mem::take(&mut current).trim_end().to_string());
            }
        }
        assert!(
            current.trim().is_empty(),
            "an unfinished command: {current}"
        );
    }
    commands
}

/// A four-digit prefix `p` such that ports `p1` to `p4` (as `2100` in `21001` to `21004`) are
/// free now, below the kernel's ephemeral range (so that no client connection takes one).
fn free_prefix() -> u16 {
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768);
    let top = (low / 10).clamp(1001, 6554) - 1;
    let mut x = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
    for _ in 0..1000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let prefix = 1000 + ((x >> 33) % u64::from(top - 1000)) as u16;
        let held: Vec<_> = (1..=4)
            .map_while(|i| TcpListener::bind(("127.0.0.1", prefix * 10 + i)).ok())
            .collect();
        if held.len() == 4 {
            return prefix;
        }
    }
    panic!("no four free ports PPPP1..PPPP4 below {low}");
}

/// `s` quoted for `sh`.
fn quoted(s: &Path) -> String {
    format!("'{}'", s.display().to_string().replace('\'', r"'\''"))
}

/// The README's command `command` made to run here: the only changes it gets.
fn localize(command: &str, prefix: u16, pod: &Path, bin: &Path) -> String {
    command
        .replace("127.0.0.1:2100", &format!("127.0.0.1:{prefix}"))
        .replace("/tmp/pod", &quoted(pod))
        .replace("target/release/podstore-raft", &quoted(bin))
}

/// What a command printed.
struct Output {
    stdout: Vec<u8>,
    stderr: String,
}

impl Output {
    /// Its standard output as text.
    fn text(&self) -> &str {
        std::str::from_utf8(&self.stdout).expect("text")
    }
}

/// Runs commands with `sh` in one directory, each in a process group of its own (the nodes a
/// command starts with `&` stay in it), and SIGKILLs every such group when dropped: the nodes
/// are killed at the end of the test, or when it panics.
struct Shell {
    dir: PathBuf,
    /// Variables set by earlier commands.
    vars: Vec<(String, String)>,
    groups: Vec<u32>,
    runs: usize,
}

impl Shell {
    /// Runs `script`; panics if it fails or takes more than 30 s.
    fn run(&mut self, script: &str) -> Output {
        self.runs += 1;
        let out = self.dir.join(format!(".out{}", self.runs));
        let err = self.dir.join(format!(".err{}", self.runs));
        let mut command = Command::new("sh");
        if std::env::var_os("RUST_LOG").is_none() {
            command.env("RUST_LOG", "error");
        }
        let mut child = command
            .arg("-c")
            .arg(script)
            .current_dir(&self.dir)
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap())
            .spawn()
            .expect("run sh");
        self.groups.push(child.id());
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "`{script}` still runs after 30 s"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let output = Output {
            stdout: std::fs::read(&out).unwrap(),
            stderr: std::fs::read_to_string(&err).unwrap(),
        };
        assert!(
            status.success(),
            "`{script}`: {status}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            output.stderr
        );
        output
    }

    /// Runs `command`; if it sets a variable (`name=...`), keeps its value for the commands
    /// that follow.
    fn run_command(&mut self, command: &str) -> Output {
        let name: String = command
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() || !command[name.len()..].starts_with('=') {
            return self.run(command);
        }
        let out = self.run(&format!("{command}\nprintf '%s' \"${name}\""));
        self.vars.push((name, out.text().to_string()));
        out
    }
}

impl Shell {
    /// Waits until the nodes at `addrs`, started by the last command, answer their status;
    /// panics with what that command wrote to stderr if one does not within 30 s, or as soon
    /// as every process the command started has exited (a node that refused its arguments).
    async fn serving(&self, http: &reqwest::Client, addrs: &[String]) {
        let group = format!("-{}", self.groups.last().expect("a command"));
        let err = self.dir.join(format!(".err{}", self.runs));
        let start = Instant::now();
        for a in addrs {
            while status(http, a).await.is_none() {
                let alive = Command::new("kill")
                    .args(["-0", "--", &group])
                    .stderr(Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(
                    alive && start.elapsed() < Duration::from_secs(30),
                    "{a} does not serve; the command's stderr: {}",
                    std::fs::read_to_string(&err).unwrap_or_default()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

impl Drop for Shell {
    fn drop(&mut self) {
        for g in &self.groups {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{g}")])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The commands, taken in order, each checked to be the one the test expects next.
struct Steps {
    commands: std::vec::IntoIter<String>,
    prefix: u16,
    pod: PathBuf,
    bin: PathBuf,
}

impl Steps {
    /// The next README command, which must contain `what`, as it runs here; and the README's
    /// comment on it (after ` # `), if any.
    fn next(&mut self, what: &str) -> (String, String) {
        let command = self
            .commands
            .next()
            .unwrap_or_else(|| panic!("README.md's Replication section has no `{what}` left"));
        assert!(
            command.contains(what),
            "README.md's Replication section: expected a command with `{what}` next, found \
             `{command}` (a command added or moved: give it a check here)"
        );
        let comment = command
            .lines()
            .last()
            .and_then(|l| l.split_once("  # "))
            .map_or(String::new(), |(_, c)| c.trim().to_string());
        (
            localize(&command, self.prefix, &self.pod, &self.bin),
            comment,
        )
    }
}

/// The JSON a command printed.
fn json(out: &Output) -> Value {
    serde_json::from_str(out.text())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", out.text(), out.stderr))
}

/// A PUT's answer: `{"version": v, "etag": "\"v\"", "len": len}`; returns `v`.
fn put_answer(out: &Output, len: usize) -> u64 {
    let v = json(out);
    let version = v["version"].as_u64().unwrap_or_else(|| panic!("{v}"));
    assert_eq!(v["etag"], format!("\"{version}\""), "{v}");
    assert_eq!(v["len"], len, "{v}");
    version
}

/// A JSON error with code `code`.
fn error_answer(out: &Output, code: &str) {
    let v = json(out);
    assert_eq!(v["error"], code, "{v}");
}

fn status_answer(out: &Output) -> Status {
    serde_json::from_str(out.text())
        .unwrap_or_else(|e| panic!("not a status ({e}): {}\n{}", out.text(), out.stderr))
}

/// The first number after `after` in `text` (a README comment).
fn number_after(text: &str, after: &str) -> u64 {
    let rest = &text[text
        .find(after)
        .unwrap_or_else(|| panic!("`{after}` in `{text}`"))
        + after.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after `{after}` in `{text}`"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_replication_commands_run_as_shown() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("SKIPPED: curl is not installed (the README's commands use it)");
        return;
    }
    let commands = replication_commands();
    assert_eq!(commands.first().map(String::as_str), Some(BUILD));
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    // Under 1 MiB, one log entry: the version the README shows. (A larger value's chunks
    // take log entries before the one that publishes it, and its version is that last one's.)
    let photo: Vec<u8> = (0..600_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let new: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(work.join("photo.jpg"), &photo).unwrap();
    std::fs::write(work.join("new.jpg"), &new).unwrap();
    let prefix = free_prefix();
    let addr = |i: u64| format!("127.0.0.1:{prefix}{i}");
    let http = reqwest::Client::new();
    let mut steps = Steps {
        commands: commands.into_iter(),
        prefix,
        pod: tmp.path().join("pod"),
        bin: PathBuf::from(env!("CARGO_BIN_EXE_podstore-raft")),
    };
    let mut sh = Shell {
        dir: work.clone(),
        vars: Vec::new(),
        groups: Vec::new(),
        runs: 0,
    };
    steps.next(BUILD);

    // Three nodes, made a cluster.
    sh.run_command(&steps.next("for i in 1 2 3").0);
    sh.serving(&http, &[addr(1), addr(2), addr(3)]).await;
    let init = sh.run_command(&steps.next("/cluster/init").0);
    let s = status_answer(&init);
    assert_eq!(
        (s.id, &s.voters[..]),
        (1, &[1, 2, 3][..]),
        "{}",
        init.text()
    );
    // The README writes to node 1 as "the leader": it is the node that was told to init.
    wait_for("node 1 to lead", async || {
        (status(&http, &addr(1)).await?.leader == Some(1)).then_some(())
    })
    .await;

    // Writes and reads.
    let (put, comment) = steps.next("--data-binary @photo.jpg");
    let version = put_answer(&sh.run_command(&put), photo.len());
    assert_eq!(version, number_after(&comment, "\"version\":"), "{comment}");
    // A follower serves what it has applied: wait for node 2 to apply the write.
    wait_for("node 2 to apply the PUT", async || {
        (status(&http, &addr(2)).await?.last_applied >= Some(version)).then_some(())
    })
    .await;
    let (range, _) = steps.next("start=0&end=4096");
    let got = sh.run_command(&range);
    assert_eq!(got.stdout.len(), 4096, "{}", got.stderr);
    assert!(
        got.stdout == photo[..4096],
        "other bytes than the file's first 4096"
    );
    let got = sh.run_command(&steps.next("linearizable=1").0);
    assert!(
        got.stdout == photo,
        "the linearizable GET: {} bytes",
        got.stdout.len()
    );
    let (etag, comment) = steps.next("etag=$(");
    let etag = sh.run_command(&etag).text().to_string();
    assert_eq!(etag, format!("\"{version}\""));
    assert!(comment.starts_with(&etag), "{comment}");
    let (if_match, _) = steps.next("If-Match: $etag");
    let newer = put_answer(&sh.run_command(&if_match), new.len());
    assert!(newer > version);
    // Again: `$etag` is now stale.
    error_answer(&sh.run_command(&if_match), "precondition_failed");
    let (absent, _) = steps.next("If-None-Match: *");
    put_answer(&sh.run_command(&absent), 5);
    // Again: the key has a value now.
    error_answer(&sh.run_command(&absent), "precondition_failed");
    let listing = json(&sh.run_command(&steps.next("/kv?prefix=").0));
    assert_eq!(
        listing,
        serde_json::json!({"keys": [{"key": "notes/1", "len": 5}], "next": null})
    );
    let (delete, _) = steps.next("-X DELETE");
    let deleted = sh.run_command(&delete);
    assert_eq!(deleted.text(), "", "a 204 has no body");
    // Again: nothing left to delete.
    error_answer(&sh.run_command(&delete), "not_found");
    let (status_command, _) = steps.next("/cluster/status");
    let s = status_answer(&sh.run_command(&status_command));
    assert_eq!((s.id, s.leader), (1, Some(1)));
    assert_eq!(s.voters, [1, 2, 3]);
    let metrics = sh.run_command(&steps.next("/metrics").0);
    let metrics = metrics.text();
    assert!(
        metrics.contains("\npodstore_raft_is_leader 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE podstore_raft_term gauge"),
        "{metrics}"
    );
    assert!(
        metrics.ends_with("# EOF\n"),
        "not OpenMetrics text: {metrics}"
    );

    // A fourth node, added as a learner, then made a voter.
    sh.run_command(&steps.next("--id 4").0);
    sh.serving(&http, &[addr(4)]).await;
    let s = status_answer(&sh.run_command(&steps.next("/cluster/learner").0));
    assert_eq!((&s.voters[..], &s.learners[..]), (&[1, 2, 3][..], &[4][..]));
    let caught_up = s.replication.as_ref().and_then(|r| r.get(&4)?.matched);
    assert!(caught_up >= Some(newer), "{:?}", s.replication);
    let s = status_answer(&sh.run_command(&steps.next("/cluster/voters").0));
    assert_eq!(s.voters, [1, 2, 3, 4]);
    assert!(s.learners.is_empty(), "{:?}", s.learners);
    let s = status_answer(&sh.run_command(&status_command));
    assert_eq!(s.voters, [1, 2, 3, 4]);
    assert!(
        steps.commands.next().is_none(),
        "a README command with no check here"
    );
    drop(sh);
}
