//! The memory budget (store/budget.rs): the default budget is sized from a real cgroup v1 memory
//! limit, within which a store larger than the limit runs without reaching it. The store runs in
//! a child process, moved into the cgroup before it starts. (The resident-memory test is in
//! tests/resident.rs, a binary of its own: its measure is the whole process's.)

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::memory::{resident_bytes, write_and_read};
use podstore::{Durability, IoMode, Options, Store};

const MIB: u64 = 1 << 20;

/// The v1 memory cgroup directory of this process, if the v1 memory controller is mounted at its
/// usual place.
fn own_v1_memory_cgroup() -> Option<PathBuf> {
    let mount = Path::new("/sys/fs/cgroup/memory");
    if !mount.join("memory.limit_in_bytes").exists() {
        return None;
    }
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let path = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then(|| path.trim_start_matches('/').to_string())
    })?;
    let dir = mount.join(path);
    dir.join("memory.limit_in_bytes").exists().then_some(dir)
}

/// A cgroup made for the test, removed when dropped (its processes have ended by then).
struct TestCgroup(PathBuf);

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir(&self.0) {
            eprintln!("could not remove {}: {e}", self.0.display());
        }
    }
}

const CHILD_ENV: &str = "PODSTORE_MEMORY_TEST_CHILD";
const LIMIT: u64 = 128 * MIB;

#[test]
fn the_default_cache_fits_a_real_cgroup_v1_memory_limit() {
    let Some(parent) = own_v1_memory_cgroup() else {
        eprintln!("skipped: needs the cgroup v1 memory controller at /sys/fs/cgroup/memory");
        return;
    };
    let path = parent.join(format!("podstore-test-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir(&path) {
        eprintln!("skipped: cannot create a cgroup ({e}): needs root");
        return;
    }
    let cgroup = TestCgroup(path);
    std::fs::write(cgroup.0.join("memory.limit_in_bytes"), LIMIT.to_string()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The shell moves itself into the cgroup, then becomes this test binary, running the child.
    let output = Command::new("/bin/sh")
        .arg("-c")
        .arg(r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#)
        .arg("sh")
        .arg(&cgroup.0)
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_in_a_memory_limit",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let failcnt = std::fs::read_to_string(cgroup.0.join("memory.failcnt")).unwrap();
    let peak: u64 = std::fs::read_to_string(cgroup.0.join("memory.max_usage_in_bytes"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        output.status.success(),
        "the child failed ({:?}; killed by the OOM killer if by signal 9), peak {} MiB:\n{stdout}\n{stderr}",
        output.status,
        peak / MIB
    );
    let figure = |name: &str| -> u64 {
        let line = stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in the child's output:\n{stdout}"));
        line.trim().parse().unwrap()
    };
    // The machine has more memory available than the limit: the limit is what the store sees.
    assert_eq!(figure("memory_available"), LIMIT, "{stdout}");
    let index_at_open = figure("index_bytes_at_open");
    assert_eq!(figure("cache_capacity"), LIMIT / 2 - index_at_open);
    assert!(
        figure("cache_bytes") > LIMIT / 4,
        "the cache filled: {stdout}"
    );
    // The cgroup never reached its limit (which would have made the kernel reclaim, and then
    // kill): a cache sized from the machine's memory would have.
    assert!(
        peak < LIMIT,
        "peak {peak} of {LIMIT}, failcnt {failcnt}:\n{stdout}"
    );
    eprintln!(
        "cgroup limit {} MiB: peak {} MiB, {stdout}",
        LIMIT / MIB,
        peak / MIB
    );
}

/// Run by `the_default_cache_fits_a_real_cgroup_v1_memory_limit` in a process inside the
/// cgroup: a store at the default options, 1.5 times the limit of values written and read back.
#[test]
#[ignore = "run by the_default_cache_fits_a_real_cgroup_v1_memory_limit, in a memory cgroup"]
fn child_in_a_memory_limit() {
    let dir = PathBuf::from(std::env::var_os(CHILD_ENV).expect("run by the cgroup test"));
    let opts = Options::default()
        .durability(Durability::Buffered)
        .background_compaction(false);
    let store = Store::open_with(&dir, opts).unwrap();
    assert_eq!(
        store.io_mode(),
        IoMode::Direct,
        "the test directory takes O_DIRECT"
    );
    let at_open = store.stats();
    let stats = write_and_read(&store, 24_000, 8192, 1);
    println!("memory_available={}", at_open.memory_available.unwrap_or(0));
    println!("index_bytes_at_open={}", at_open.index_bytes);
    println!("cache_capacity={}", stats.cache_capacity);
    println!("cache_bytes={}", stats.cache_bytes);
    println!("index_bytes={}", stats.index_bytes);
    println!("resident_bytes={}", resident_bytes());
    store.close().unwrap();
}
