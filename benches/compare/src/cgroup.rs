//! A memory cgroup of one's own, for the `memlimit` workload: a memory limit that counts the
//! page cache as well as the process's own memory (the kernel's cgroup documentation offers it
//! as an alternative to booting with `mem=`).
//!
//! cgroup v1 (the `memory` controller mounted at /sys/fs/cgroup/memory): `memory.limit_in_bytes`,
//! peak `memory.max_usage_in_bytes` (reset by writing 0), OOM kills in `memory.oom_control`'s
//! `oom_kill` line. cgroup v2 (one hierarchy at /sys/fs/cgroup with the memory controller):
//! `memory.max`, `memory.swap.max` 0, peak `memory.peak` (kernels from 6.12 reset it for the
//! file descriptor that writes to it; older ones give the peak since the cgroup was made), OOM
//! kills in `memory.events`. The cgroup is made below the one this process runs in (which keeps
//! accounting for it), and removed by [`Cgroup::remove`] or on drop once no process is left in
//! it. Making one needs root.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// The cgroup hierarchy the memory controller is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    pub fn name(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }
}

/// A memory cgroup made by this process.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    version: Version,
    removed: bool,
}

/// The controller's hierarchy and the cgroup this process is in, from /proc/self/cgroup.
fn own_cgroup() -> Result<(Version, PathBuf), String> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let v1 = Path::new("/sys/fs/cgroup/memory");
    for line in text.lines() {
        // hierarchy-id:controllers:path
        let mut f = line.splitn(3, ':');
        let (_, ctrl, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if ctrl.split(',').any(|c| c == "memory") && v1.join("memory.limit_in_bytes").exists() {
            return Ok((Version::V1, v1.join(path.trim_start_matches('/'))));
        }
    }
    let v2 = Path::new("/sys/fs/cgroup");
    let controllers = std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
    if controllers.split_whitespace().any(|c| c == "memory")
        && let Some(path) = text.lines().find_map(|l| l.strip_prefix("0::"))
    {
        return Ok((Version::V2, v2.join(path.trim_start_matches('/'))));
    }
    Err(
        "no cgroup memory controller found (neither v1 at /sys/fs/cgroup/memory nor v2 with \
         `memory` in /sys/fs/cgroup/cgroup.controllers)"
            .into(),
    )
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("write {text:?} to {}: {e}", path.display()))
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The number after `key` on a `key value` line of a flat-keyed cgroup file.
fn keyed(path: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Why a memory cgroup cannot be made here (`None`: it can, as far as can be told without
/// making one: root and a memory controller).
pub fn unavailable() -> Option<String> {
    if !rustix::process::geteuid().is_root() {
        return Some(
            "needs root: the mode runs each engine in a memory cgroup of its own, and making \
             one needs root"
                .into(),
        );
    }
    own_cgroup().err()
}

impl Cgroup {
    /// Makes a memory cgroup below this process's own, limited to `limit` bytes (page cache
    /// included, no swap).
    pub fn create(limit: u64) -> Result<Cgroup, String> {
        if let Some(why) = unavailable() {
            return Err(why);
        }
        let (version, parent) = own_cgroup()?;
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "podstore-compare-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        if version == Version::V2 {
            // The memory controller must be enabled for the children of `parent`; cgroup v2
            // refuses that for a cgroup that has processes of its own (other than the root).
            let ctl = parent.join("cgroup.subtree_control");
            let on = std::fs::read_to_string(&ctl).unwrap_or_default();
            if !on.split_whitespace().any(|c| c == "memory") {
                write(&ctl, "+memory").map_err(|e| {
                    format!(
                        "cgroup v2: cannot enable the memory controller below {} ({e}): run \
                         the harness from a cgroup with no other processes, or on cgroup v1",
                        parent.display()
                    )
                })?;
            }
        }
        let path = parent.join(name);
        std::fs::create_dir(&path)
            .map_err(|e| format!("cannot make the cgroup {}: {e}", path.display()))?;
        let cg = Cgroup {
            path,
            version,
            removed: false,
        };
        match version {
            Version::V1 => write(&cg.path.join("memory.limit_in_bytes"), &limit.to_string())?,
            Version::V2 => {
                write(&cg.path.join("memory.max"), &limit.to_string())?;
                // No swap either (a machine without swap has no such file to write).
                let swap = cg.path.join("memory.swap.max");
                if swap.exists() {
                    write(&swap, "0")?;
                }
            }
        }
        Ok(cg)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn version(&self) -> Version {
        self.version
    }

    /// The file a process writes its id into to move into the cgroup.
    pub fn procs_file(&self) -> PathBuf {
        self.path.join("cgroup.procs")
    }

    /// The limit as the kernel holds it (it rounds down to pages).
    pub fn limit(&self) -> Option<u64> {
        match self.version {
            Version::V1 => read_u64(&self.path.join("memory.limit_in_bytes")),
            Version::V2 => read_u64(&self.path.join("memory.max")),
        }
    }

    /// Memory charged to the cgroup now (its processes' memory and its page cache).
    pub fn usage(&self) -> Option<u64> {
        match self.version {
            Version::V1 => read_u64(&self.path.join("memory.usage_in_bytes")),
            Version::V2 => read_u64(&self.path.join("memory.current")),
        }
    }

    /// Processes the kernel's OOM killer has killed in the cgroup since it was made.
    pub fn oom_kills(&self) -> Option<u64> {
        match self.version {
            Version::V1 => keyed(&self.path.join("memory.oom_control"), "oom_kill"),
            Version::V2 => keyed(&self.path.join("memory.events"), "oom_kill"),
        }
    }

    /// Starts measuring the peak memory use from now: see [`PeakWatch::peak`].
    pub fn watch_peak(&self) -> PeakWatch {
        match self.version {
            Version::V1 => {
                let file = self.path.join("memory.max_usage_in_bytes");
                let reset = write(&file, "0").is_ok();
                PeakWatch {
                    file,
                    fd: None,
                    since_creation: !reset,
                }
            }
            Version::V2 => {
                let file = self.path.join("memory.peak");
                // From Linux 6.12, a write to memory.peak resets the peak seen through that
                // file descriptor.
                let fd = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&file)
                    .ok()
                    .and_then(|mut f| f.write_all(b"reset\n").ok().map(|()| f));
                PeakWatch {
                    since_creation: fd.is_none(),
                    file,
                    fd,
                }
            }
        }
    }

    /// Removes the cgroup (it must hold no process; the page cache charged to it goes to its
    /// parent).
    pub fn remove(mut self) -> Result<(), String> {
        self.removed = true;
        remove_dir(&self.path)
    }
}

/// rmdir, retried for a moment: the kernel may still be tearing down a process that was just
/// reaped.
fn remove_dir(path: &Path) -> Result<(), String> {
    let mut last = None;
    for _ in 0..50 {
        match std::fs::remove_dir(path) {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Err(format!(
        "cannot remove the cgroup {}: {}",
        path.display(),
        last.map_or_else(String::new, |e| e.to_string())
    ))
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        if !self.removed
            && let Err(e) = remove_dir(&self.path)
        {
            eprintln!("compare: {e}");
        }
    }
}

/// The peak memory use of a cgroup from the moment [`Cgroup::watch_peak`] was called.
pub struct PeakWatch {
    file: PathBuf,
    fd: Option<File>,
    /// The kernel could not reset the peak: it is the peak since the cgroup was made.
    pub since_creation: bool,
}

impl PeakWatch {
    /// The highest memory use (process memory and page cache) seen by the kernel.
    pub fn peak(&mut self) -> Option<u64> {
        match &mut self.fd {
            Some(f) => {
                let mut s = String::new();
                f.seek(SeekFrom::Start(0)).ok()?;
                f.read_to_string(&mut s).ok()?;
                s.trim().parse().ok()
            }
            None => read_u64(&self.file),
        }
    }
}

/// The dirty page cache charged to the cgroup at `dir` (v1 `memory.stat` `dirty`, v2
/// `file_dirty`).
pub fn dirty_bytes(dir: &Path) -> Option<u64> {
    let stat = dir.join("memory.stat");
    keyed(&stat, "dirty").or_else(|| keyed(&stat, "file_dirty"))
}

/// Moves the calling process into the cgroup whose `cgroup.procs` is `procs` (before it opens
/// anything it should be charged for).
pub fn enter(procs: &Path) -> Result<(), String> {
    write(procs, &std::process::id().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_lines() {
        let dir = std::env::temp_dir().join(format!("compare-cgroup-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("memory.oom_control");
        std::fs::write(&f, "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n").unwrap();
        assert_eq!(keyed(&f, "oom_kill"), Some(3));
        assert_eq!(keyed(&f, "under_oom"), Some(0));
        assert_eq!(keyed(&f, "oom"), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Where this machine allows it (root, a memory controller): a cgroup is made with the
    /// limit asked, a process moved in is charged to it, and it is removed.
    #[test]
    fn make_enter_and_remove() {
        if let Some(why) = unavailable() {
            eprintln!("skipped: {why}");
            return;
        }
        let cg = Cgroup::create(64 << 20).unwrap();
        let limit = cg.limit().unwrap();
        assert!(limit <= 64 << 20 && limit > 60 << 20, "{limit}");
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        write(&cg.procs_file(), &child.id().to_string()).unwrap();
        let procs = std::fs::read_to_string(cg.procs_file()).unwrap();
        assert!(
            procs.lines().any(|l| l == child.id().to_string()),
            "{procs}"
        );
        assert_eq!(cg.oom_kills(), Some(0));
        let mut w = cg.watch_peak();
        assert!(w.peak().is_some());
        child.kill().unwrap();
        child.wait().unwrap();
        let path = cg.path().to_path_buf();
        cg.remove().unwrap();
        assert!(!path.exists());
    }
}
