//! The memory budget: how large the read cache is when [`Options::cache_capacity`] is not set.
//!
//! The default cache is sized from the memory the process may use, read at open:
//!
//! - **available memory** is the smallest of the cgroup limits that apply to the process (v2
//!   `memory.max` and `memory.high`, v1 `memory.limit_in_bytes`, on its own cgroup and every
//!   ancestor up to the hierarchy's mount, "max" and v1's near-2^63 "unlimited" ignored) and the
//!   machine's `MemAvailable` (`/proc/meminfo`; `MemTotal` on kernels without it). Available
//!   rather than total: the store shares the machine with its own application and others, and
//!   `MemAvailable` is the kernel's estimate of what a process can take without pushing anyone
//!   into swap (free memory plus the page cache and slab it can reclaim).
//! - **the budget** is half of that, less what the index takes at open (23 bytes per key, all of
//!   it resident), and at least a sixteenth of it. Half, because the other half is for the
//!   application the store is embedded in, the index's growth after open, the write and read
//!   buffers, the allocator's slack, and the kernel (its own page cache of directories, the
//!   files other programs use). With direct I/O the store needs no page cache for its data: that
//!   share of memory, which a buffered engine leaves to the kernel, is the cache's.
//! - **with buffered I/O** (`IoMode::Buffered`, or `Auto` falling back where `O_DIRECT` is
//!   refused) the page cache already keeps what was read and written, sized to the machine by the
//!   kernel; the store's cache would hold a second copy of the same bytes (on tmpfs, where the
//!   page cache is the file itself, one that is never reclaimed). So the budget stays at most
//!   [`BUFFERED_MAX`] (64 MiB, the default before this budget): enough to spare the hottest
//!   values their `pread` and crc check.
//! - **nothing readable** (no `/proc`): [`FALLBACK`], 64 MiB.
//!
//! The cache allocates only as it fills (quick_cache grows its table and slab from empty; the
//! values are the store's own buffers), so an idle store's budget costs nothing. The budget is per
//! store: a process that opens several stores sets `Options::cache_capacity` on them.
//!
//! [`Options::cache_capacity`]: crate::Options::cache_capacity

/// The budget when nothing says how much memory there is.
pub(super) const FALLBACK: u64 = 64 << 20;

/// The largest default budget with buffered I/O (the page cache keeps the data already).
pub(super) const BUFFERED_MAX: u64 = 64 << 20;

/// v1 reports "no limit" as the largest page-aligned `i64` (9 223 372 036 854 771 712); anything
/// this large is no limit (no machine has an exbibyte).
const NO_LIMIT: u64 = 1 << 60;

/// The cache's default capacity: half of `available` less the index's `index_bytes`, at least a
/// sixteenth of `available`; at most [`BUFFERED_MAX`] unless `direct`; [`FALLBACK`] when the
/// available memory is unknown.
pub(super) fn cache_budget(available: Option<u64>, index_bytes: u64, direct: bool) -> u64 {
    let Some(available) = available else {
        return FALLBACK;
    };
    let share = (available / 2)
        .saturating_sub(index_bytes)
        .max(available / 16);
    if direct {
        share
    } else {
        share.min(BUFFERED_MAX)
    }
}

/// The memory available to this process, read from the system's files.
pub(super) fn system_available() -> Option<u64> {
    available_memory(&|path| std::fs::read_to_string(path).ok())
}

/// The memory available to this process, as a store sizes its default read cache from it
/// (see [`Options::cache_capacity`](crate::Options::cache_capacity)): the smallest of the
/// cgroup memory limits that apply to the process and the machine's `MemAvailable`; `None`
/// when neither can be read. For a process that opens several stores and shares this memory
/// out among their caches itself (the default budget is per store).
///
/// ```
/// let available = podstore::memory_available();
/// let cache = available.map_or(64 << 20, |a| a / 8);
/// let opts = podstore::Options::default().cache_capacity(cache);
/// # let _ = opts;
/// ```
pub fn memory_available() -> Option<u64> {
    system_available()
}

/// The memory available to the process: the smallest cgroup limit that applies and the
/// machine's available memory, from the files `read` returns (by absolute path; `None`: not
/// readable). `None` when neither is known.
pub(super) fn available_memory(read: &dyn Fn(&str) -> Option<String>) -> Option<u64> {
    let machine = read("/proc/meminfo").and_then(|s| meminfo_available(&s));
    let cgroup = read("/proc/self/cgroup").and_then(|c| {
        let mounts = read("/proc/self/mountinfo").unwrap_or_default();
        cgroup_limit(&c, &mounts, read)
    });
    match (cgroup, machine) {
        (Some(c), Some(m)) => Some(c.min(m)),
        (c, m) => c.or(m),
    }
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes (`MemTotal` if it has none).
fn meminfo_available(meminfo: &str) -> Option<u64> {
    let field = |name: &str| {
        meminfo.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            let mut words = rest.split_whitespace();
            let n: u64 = words.next()?.parse().ok()?;
            match words.next() {
                Some("kB") => n.checked_mul(1024),
                None => Some(n),
                Some(_) => None,
            }
        })
    };
    field("MemAvailable").or_else(|| field("MemTotal"))
}

/// The cgroup versions, by the file that holds a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// The smallest memory limit of the process's cgroups (v1 memory controller and v2), from the
/// text of `/proc/self/cgroup` and `/proc/self/mountinfo` (empty: the usual mount points
/// assumed), on the process's cgroup and each ancestor up to its hierarchy's mount.
fn cgroup_limit(
    cgroups: &str,
    mountinfo: &str,
    read: &dyn Fn(&str) -> Option<String>,
) -> Option<u64> {
    let mut least: Option<u64> = None;
    for line in cgroups.lines() {
        // hierarchy-id:controllers:path (the path may hold ':' itself).
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let version = if id == "0" && controllers.is_empty() {
            Version::V2
        } else if controllers.split(',').any(|c| c == "memory") {
            Version::V1
        } else {
            continue;
        };
        let (root, mount) = mount_of(mountinfo, version).unwrap_or(match version {
            Version::V1 => ("/".into(), "/sys/fs/cgroup/memory".into()),
            Version::V2 => ("/".into(), "/sys/fs/cgroup".into()),
        });
        for dir in levels(path, &root, &mount) {
            let files: &[&str] = match version {
                Version::V1 => &["memory.limit_in_bytes"],
                Version::V2 => &["memory.max", "memory.high"],
            };
            for file in files {
                if let Some(limit) = read(&format!("{dir}/{file}")).and_then(|s| parse_limit(&s)) {
                    least = Some(least.map_or(limit, |l| l.min(limit)));
                }
            }
        }
    }
    least
}

/// A limit file's value in bytes; `None` for "max", a v1 "unlimited" or anything unreadable.
fn parse_limit(text: &str) -> Option<u64> {
    let n: u64 = text.trim().parse().ok()?;
    (n < NO_LIMIT).then_some(n)
}

/// The root and mount point of the hierarchy of `version` in the text of `/proc/self/mountinfo`
/// (fields: id, parent, device, root, mount point, options, optional fields, "-", type, source,
/// super options).
fn mount_of(mountinfo: &str, version: Version) -> Option<(String, String)> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let (fstype, _source, options) = (after.next()?, after.next()?, after.next()?);
        let wanted = match version {
            Version::V2 => fstype == "cgroup2",
            Version::V1 => fstype == "cgroup" && options.split(',').any(|o| o == "memory"),
        };
        (wanted && fields.len() >= 5).then(|| (unescape(fields[3]), unescape(fields[4])))
    })
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b.get(i + 1..i + 4).and_then(|d| {
            let s = std::str::from_utf8(d).ok()?;
            u8::from_str_radix(s, 8).ok()
        });
        match (b[i], octal) {
            (b'\\', Some(c)) => {
                out.push(c);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directories of cgroup `path` and of each of its ancestors down to the hierarchy's mount,
/// deepest first. The path is relative to the hierarchy's root; the mount shows the hierarchy
/// from `root` (a container's mount may show only its own subtree). A path outside `root` (the
/// mount shows none of its ancestors): the mount point alone.
fn levels(path: &str, root: &str, mount: &str) -> Vec<String> {
    let mount = mount.trim_end_matches('/');
    let root = root.trim_end_matches('/');
    // A path with ".." (a process outside its cgroup namespace's root) is outside too.
    let Some(inside) = path
        .strip_prefix(root)
        .filter(|i| !i.split('/').any(|p| p == ".."))
    else {
        return vec![mount.to_string()];
    };
    if !inside.is_empty() && !inside.starts_with('/') {
        // `root` is "/a" and the path "/ab": not inside.
        return vec![mount.to_string()];
    }
    let mut dirs = vec![mount.to_string()];
    let mut dir = mount.to_string();
    for part in inside.split('/').filter(|p| !p.is_empty()) {
        dir.push('/');
        dir.push_str(part);
        dirs.push(dir.clone());
    }
    dirs.reverse();
    dirs
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;

    const MEMINFO: &str = "MemTotal:       24684092 kB\nMemFree:        22004032 kB\n\
                           MemAvailable:   24162912 kB\nBuffers:          102400 kB\n";
    const V1_CGROUP: &str = "9:name=systemd:/\n5:devices:/\n4:memory:/process_api/abc\n\
                             2:cpu,cpuacct:/\n0::/\n";
    const V1_MOUNTS: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
        35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
        32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n\
        41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
    const V1_UNLIMITED: &str = "9223372036854771712\n";

    /// A file system of the given files.
    fn files(list: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = list
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect();
        move |path| map.get(path).cloned()
    }

    #[test]
    fn meminfo_gives_mem_available_in_bytes_else_mem_total() {
        assert_eq!(meminfo_available(MEMINFO), Some(24162912 * 1024));
        let old_kernel = "MemTotal:  2048 kB\nMemFree:  1024 kB\n";
        assert_eq!(meminfo_available(old_kernel), Some(2048 * 1024));
        assert_eq!(meminfo_available("MemTotalish: 5 kB\n"), None);
        assert_eq!(meminfo_available("MemAvailable: lots kB\n"), None);
        assert_eq!(meminfo_available(""), None);
    }

    #[test]
    fn limit_files_ignore_max_and_v1_unlimited() {
        assert_eq!(parse_limit("1073741824\n"), Some(GIB));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit(V1_UNLIMITED), None);
        assert_eq!(parse_limit(""), None);
    }

    #[test]
    fn a_v1_memory_limit_of_the_process_cgroup_is_found_through_mountinfo() {
        let fs = files(&[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/cgroup", V1_CGROUP),
            ("/proc/self/mountinfo", V1_MOUNTS),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", V1_UNLIMITED),
            (
                "/sys/fs/cgroup/memory/process_api/memory.limit_in_bytes",
                V1_UNLIMITED,
            ),
            (
                "/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes",
                "1073741824\n",
            ),
        ]);
        assert_eq!(available_memory(&fs), Some(GIB));
    }

    #[test]
    fn an_ancestors_limit_applies_and_the_smallest_wins() {
        let fs = files(&[
            ("/proc/self/cgroup", "0::/service/worker\n"),
            (
                "/proc/self/mountinfo",
                "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n",
            ),
            ("/sys/fs/cgroup/service/worker/memory.max", "max\n"),
            ("/sys/fs/cgroup/service/worker/memory.high", "max\n"),
            ("/sys/fs/cgroup/service/memory.max", "2147483648\n"),
            ("/sys/fs/cgroup/service/memory.high", "1610612736\n"),
        ]);
        // memory.high of the parent (1.5 GiB): below its memory.max; no meminfo.
        assert_eq!(available_memory(&fs), Some(3 * GIB / 2));
    }

    #[test]
    fn the_machine_bounds_a_cgroup_limit_larger_than_itself() {
        let fs = files(&[
            ("/proc/meminfo", MEMINFO),
            ("/proc/self/cgroup", "0::/big\n"),
            ("/sys/fs/cgroup/big/memory.max", "107374182400\n"), // 100 GiB
        ]);
        // No mountinfo: the usual mount point assumed.
        assert_eq!(available_memory(&fs), Some(24162912 * 1024));
    }

    #[test]
    fn a_container_mount_shows_its_own_subtree() {
        // The mount's root is the container's cgroup: its limit is at the mount point itself.
        let fs = files(&[
            ("/proc/self/cgroup", "4:memory:/docker/f00d\n"),
            (
                "/proc/self/mountinfo",
                "50 40 0:40 /docker/f00d /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n",
            ),
            ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n"),
            (
                "/sys/fs/cgroup/memory/docker/f00d/memory.limit_in_bytes",
                "1\n", // not this one: the path is relative to the mount's root
            ),
        ]);
        assert_eq!(available_memory(&fs), Some(512 * MIB));
    }

    #[test]
    fn levels_go_from_the_cgroup_to_the_mount() {
        assert_eq!(
            levels("/a/b", "/", "/sys/fs/cgroup"),
            ["/sys/fs/cgroup/a/b", "/sys/fs/cgroup/a", "/sys/fs/cgroup"]
        );
        assert_eq!(levels("/", "/", "/m/"), ["/m"]);
        assert_eq!(levels("/ab/c", "/a", "/m"), ["/m"]);
        assert_eq!(levels("/../../y", "/", "/m"), ["/m"]);
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"C:\path"), r"C:\path");
    }

    #[test]
    fn nothing_readable_falls_back_cleanly() {
        let nothing = files(&[]);
        assert_eq!(available_memory(&nothing), None);
        assert_eq!(cache_budget(None, 0, true), FALLBACK);
        assert_eq!(cache_budget(None, 5 * GIB, false), FALLBACK);
        // Garbage everywhere, and cgroup files that do not exist.
        let garbage = files(&[
            ("/proc/meminfo", "what\n"),
            ("/proc/self/cgroup", "no colons here\n4:memory\n"),
            ("/proc/self/mountinfo", "garbage - \n"),
        ]);
        assert_eq!(available_memory(&garbage), None);
        // Only the machine's figure: used.
        let machine = files(&[("/proc/meminfo", MEMINFO), ("/proc/self/cgroup", V1_CGROUP)]);
        assert_eq!(available_memory(&machine), Some(24162912 * 1024));
    }

    #[test]
    fn the_budget_is_half_less_the_index_and_small_with_buffered_io() {
        assert_eq!(cache_budget(Some(GIB), 0, true), GIB / 2);
        assert_eq!(cache_budget(Some(GIB), 100 * MIB, true), 412 * MIB);
        // An index of more than half: a sixteenth still.
        assert_eq!(cache_budget(Some(GIB), GIB, true), 64 * MIB);
        assert_eq!(cache_budget(Some(24 * GIB), 0, false), BUFFERED_MAX);
        assert_eq!(cache_budget(Some(64 * MIB), 0, false), 32 * MIB);
    }

    #[test]
    fn this_machine_is_readable() {
        // Linux has /proc/meminfo: a figure, never more than the machine has.
        let here = system_available().expect("/proc/meminfo is readable on Linux");
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
        let total = meminfo_available(&meminfo.replace("MemAvailable", "Ignored")).unwrap();
        assert!(here > 0 && here <= total, "{here} of {total}");
    }
}
