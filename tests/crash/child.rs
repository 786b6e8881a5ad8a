//! Child processes: the test binary run again as `crash_child` (see main.rs), its messages to
//! the parent, and killing it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

pub const CHILD_TEST: &str = "crash_child";
pub const CHILD_DIR_VAR: &str = "PODSTORE_CRASH_CHILD";
pub const CHILD_JOB_VAR: &str = "PODSTORE_CRASH_JOB";
/// Marks the child's messages among libtest's own output.
pub const MARK: &str = "@@";
/// Longest wait for one message from a child.
pub const CHILD_TIMEOUT: Duration = Duration::from_secs(30);

/// Sends one message line to the parent, flushed before returning, in one write (a pipe takes
/// it whole): a kill cannot leave half of it.
pub fn emit(msg: &str) {
    let line = format!("{MARK}{msg}\n");
    let mut out = std::io::stdout().lock();
    out.write_all(line.as_bytes())
        .and_then(|()| out.flush())
        .expect("write to the parent");
}

/// A running child, its messages read by a thread. Dropping it kills the child.
pub struct ChildProc {
    pub child: Child,
    messages: Receiver<String>,
    _stdin: ChildStdin,
}

impl ChildProc {
    pub fn spawn(dir: &Path, job: &str) -> ChildProc {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_DIR_VAR, dir)
            .env(CHILD_JOB_VAR, job)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn crash child");
        let stdout = child.stdout.take().unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, messages) = mpsc::channel();
        std::thread::spawn(move || {
            let mut out = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                // A line without its newline was cut by the kill: it was never sent.
                match out.read_until(b'\n', &mut line) {
                    Ok(_) if line.last() == Some(&b'\n') => {}
                    _ => break,
                }
                let line = String::from_utf8_lossy(&line[..line.len() - 1]);
                // libtest may print "test crash_child ... " in front of the first message.
                if let Some(at) = line.find(MARK)
                    && tx.send(line[at + MARK.len()..].to_string()).is_err()
                {
                    break;
                }
            }
        });
        ChildProc {
            child,
            messages,
            _stdin: stdin,
        }
    }

    /// The child's next message; `None` once its output has ended (it exited or was killed).
    pub fn next_message(&mut self) -> Option<String> {
        match self.messages.recv_timeout(CHILD_TIMEOUT) {
            Ok(m) => Some(m),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                panic!("crash child sent nothing for {CHILD_TIMEOUT:?}")
            }
        }
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill crash child");
        self.child.wait().expect("reap crash child");
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
