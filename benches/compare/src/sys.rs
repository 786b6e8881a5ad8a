//! What the harness asks of the OS: /proc counters, dropping the page cache, machine facts,
//! aligned buffers for O_DIRECT.

use std::alloc::{Layout, dealloc};
use std::path::{Path, PathBuf};

/// Block size used for O_DIRECT offsets, lengths and buffer addresses.
pub const ALIGN: usize = 4096;

pub fn round_up(n: u64, to: u64) -> u64 {
    n.div_ceil(to) * to
}

/// Bytes this process (all its threads, live or gone) has made the block layer read and write,
/// from /proc/self/io: `read_bytes` counts reads that went to storage (page-cache misses,
/// readahead, O_DIRECT), not reads served from the cache. That includes the process's own code
/// paged in again after `drop_caches`, which can outweigh a small measured read: `rchar` counts
/// only the bytes its read system calls returned (`read`, `pread`, ..., from the cache or not,
/// the reads of /proc/self/io itself included), not page faults.
#[derive(Debug, Clone, Copy, Default)]
pub struct IoCounters {
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub rchar: u64,
}

pub fn io_counters() -> IoCounters {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let mut c = IoCounters::default();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            let v: u64 = v.trim().parse().unwrap_or(0);
            match k {
                "read_bytes" => c.read_bytes = v,
                "write_bytes" => c.write_bytes = v,
                "rchar" => c.rchar = v,
                _ => {}
            }
        }
    }
    c
}

impl IoCounters {
    pub fn since(self, before: IoCounters) -> IoCounters {
        IoCounters {
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
            rchar: self.rchar.saturating_sub(before.rchar),
        }
    }
}

/// The sizes of the regular files under `dir`, recursively (apparent sizes: what a store holds,
/// not what the file system allocated).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// The 1, 5 and 15 minute load averages (/proc/loadavg), as the file has them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|t| t.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// Resident set size of this process, in bytes (VmRSS of /proc/self/status).
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// The highest resident set size this process has had, in bytes (VmHWM).
pub fn rss_peak_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// sync(2), then `echo 3 > /proc/sys/vm/drop_caches`. Returns whether the cache was dropped
/// (it needs root; it drops the whole machine's clean page cache, dentries and inodes).
pub fn drop_caches() -> bool {
    rustix::fs::sync();
    let ok = std::fs::write("/proc/sys/vm/drop_caches", b"3\n").is_ok();
    if ok {
        // This process's own code was dropped too: faulted back in while a run is measured, it
        // would count as the engine's disk reads (up to ~200 KiB per op in a row of 4 ops, and
        // 1.6 MB in a listing, were seen). A child reads the executable files back into the
        // page cache (its reads are its own), so that only the engine's data is cold.
        rewarm_own_code();
        // Every process on the machine now faults its code and data back in: let that burst of
        // reads pass before measuring.
        std::thread::sleep(std::time::Duration::from_millis(SETTLE_MS));
    }
    ok
}

/// Reads every file this process has mapped executable (itself, its libraries) in a child
/// process, so that the page cache holds them again.
fn rewarm_own_code() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut paths: Vec<&str> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let perms = f.nth(1)?;
            let path = f.nth(3)?;
            (perms.contains('x') && path.starts_with('/')).then_some(path)
        })
        .collect();
    paths.sort_unstable();
    paths.dedup();
    if paths.is_empty() {
        return;
    }
    let _ = std::process::Command::new("cat")
        .args(&paths)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Pause after dropping the page cache.
pub const SETTLE_MS: u64 = 100;

/// A heap buffer aligned to [`ALIGN`], for O_DIRECT.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is owned memory with no thread affinity.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// A zeroed buffer of `len` bytes (rounded up to [`ALIGN`]).
    pub fn zeroed(len: usize) -> AlignedBuf {
        let len = round_up(len.max(1) as u64, ALIGN as u64) as usize;
        let layout = Layout::from_size_align(len, ALIGN).expect("layout");
        // SAFETY: layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "out of memory allocating {len} bytes");
        AlignedBuf { ptr, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: ptr is valid and initialised for len bytes, owned by self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, ALIGN).expect("layout");
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, layout) }
    }
}

/// Facts about the machine, for the report.
#[derive(Debug, Clone)]
pub struct Machine {
    pub nproc: usize,
    pub mem_total: String,
    pub kernel: String,
    pub cpu: String,
}

#[derive(Debug, Clone, Default)]
pub struct MountInfo {
    pub mount_point: String,
    pub fstype: String,
    pub source: String,
    pub options: String,
}

pub fn machine() -> Machine {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|r| r.trim_start_matches([' ', '\t', ':']).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    Machine {
        nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
        mem_total: format!("{:.1} GiB", mem_kib as f64 / (1024.0 * 1024.0)),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
        cpu,
    }
}

/// The mount that holds `dir` (longest mount point that prefixes its canonical path), from
/// /proc/self/mountinfo.
pub fn mount_of(dir: &Path) -> MountInfo {
    let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let path = path.to_string_lossy().into_owned();
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best: Option<MountInfo> = None;
    for line in text.lines() {
        // id parent major:minor root mount_point options [optional...] - fstype source superopts
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 6 || r.len() < 2 {
            continue;
        }
        let mp = l[4].replace("\\040", " ");
        let covers = mp == "/"
            || path == mp
            || (path.starts_with(&mp) && path.as_bytes().get(mp.len()) == Some(&b'/'));
        if covers
            && best
                .as_ref()
                .is_none_or(|b| mp.len() >= b.mount_point.len())
        {
            best = Some(MountInfo {
                mount_point: mp,
                fstype: r[0].to_string(),
                source: r[1].to_string(),
                options: l[5].to_string(),
            });
        }
    }
    best.unwrap_or_default()
}

/// The benchmark base directory: `--dir`, else $PODSTORE_BENCH_DIR, else /tmp.
pub fn base_dir(arg: Option<&str>) -> PathBuf {
    arg.map(PathBuf::from)
        .or_else(|| std::env::var_os("PODSTORE_BENCH_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// Fails when `dir` is on a memory file system: the harness measures disks.
pub fn check_real_disk(dir: &Path) -> Result<MountInfo, String> {
    let m = mount_of(dir);
    if matches!(
        m.fstype.as_str(),
        "tmpfs" | "ramfs" | "devtmpfs" | "overlay" | ""
    ) {
        return Err(format!(
            "{} is on {:?} ({}), not a real disk: pass --dir or set PODSTORE_BENCH_DIR to a \
             directory on the disk to measure",
            dir.display(),
            m.fstype,
            m.mount_point
        ));
    }
    Ok(m)
}

/// Today's date and time in UTC, `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (proleptic Gregorian calendar, 400-year eras).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Parses `4096`, `4K`, `4KiB`, `1M`, `100MiB`, `2G`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("bad size {s:?}"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        _ => return Err(format!("bad size unit in {s:?}")),
    };
    Ok(n * mult)
}

/// `4096` → `4 KiB`, `1048576` → `1 MiB`, `1536` → `1.5 KiB`.
pub fn fmt_size(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (m, u) in UNITS {
        if n >= m {
            return if n.is_multiple_of(m) {
                format!("{} {u}", n / m)
            } else {
                format!("{:.1} {u}", n as f64 / m as f64)
            };
        }
    }
    format!("{n} B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_trip() {
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("100MiB").unwrap(), 100 << 20);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(fmt_size(4096), "4 KiB");
        assert_eq!(fmt_size(100), "100 B");
        assert_eq!(fmt_size(1536), "1.5 KiB");
    }

    #[test]
    fn date_is_plausible() {
        let d = utc_now();
        assert!(d.starts_with("20"), "{d}");
        assert_eq!(d.len(), "2025-01-01 00:00:00 UTC".len());
    }
}
