//! A small file system of its own for a test: an ext4 image loop-mounted in a temporary
//! directory (root only), unmounted when dropped. Tests that need it skip with a message when
//! it cannot be had (not root, no mkfs.ext4, no loop device).

use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// A mounted ext4 file system; unmounted (and its image removed) on drop.
pub struct LoopFs {
    mnt: PathBuf,
    mounted: bool,
    // Holds the image and the mount point; removed after the unmount.
    _tmp: TempDir,
}

fn run(cmd: &mut Command) -> Result<(), String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("{cmd:?}: {e}")),
    }
}

impl LoopFs {
    /// A fresh ext4 of `mib` MiB, mounted with `options` (e.g. "loop" or "loop,ro"); `None`
    /// (and a message on stderr) where that is not possible.
    pub fn new(mib: u64, test: &str) -> Option<LoopFs> {
        let uid = Command::new("id").arg("-u").output().ok()?;
        if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
            eprintln!("{test}: skipped: needs root to mount a loop file system");
            return None;
        }
        let tmp = TempDir::new().unwrap();
        let img = tmp.path().join("fs.img");
        let mnt = tmp.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let made = run(Command::new("truncate")
            .arg("-s")
            .arg(format!("{mib}M"))
            .arg(&img))
        .and_then(|()| run(Command::new("mkfs.ext4").arg("-q").arg(&img)))
        .and_then(|()| {
            run(Command::new("mount")
                .arg("-o")
                .arg("loop")
                .arg(&img)
                .arg(&mnt))
        });
        if let Err(e) = made {
            eprintln!("{test}: skipped: cannot mount a loop file system: {e}");
            return None;
        }
        Some(LoopFs {
            mnt,
            mounted: true,
            _tmp: tmp,
        })
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// Remounts it read-only (`ro: true`) or read-write.
    pub fn remount(&self, ro: bool) {
        let opt = if ro { "remount,ro" } else { "remount,rw" };
        run(Command::new("mount").arg("-o").arg(opt).arg(&self.mnt)).unwrap();
    }

    /// Fills the file system: writes a file of 1 MiB chunks, then of 4 KiB ones, until ENOSPC.
    /// Returns its path (removing it frees the space).
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.mnt.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        for chunk in [1 << 20, 4096, 1] {
            let buf = vec![0xa5u8; chunk];
            while f.write_all(&buf).is_ok() {}
        }
        let _ = f.sync_all();
        path
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            if run(Command::new("umount").arg(&self.mnt)).is_err() {
                // Busy (a file still open): detach it now, the kernel finishes later.
                let _ = run(Command::new("umount").arg("-l").arg(&self.mnt));
            }
            self.mounted = false;
        }
    }
}
