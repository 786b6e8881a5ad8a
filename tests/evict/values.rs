//! Self-describing values: a value names its key and its write, and carries a checksum, so that
//! a reader can tell a right value from another key's bytes, a torn one or an older one.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The value of write number `counter` of key `key`, `len` bytes long (at least 24):
/// `counter` (8 bytes), the key's length (4), the key, filler derived from both, and a crc32 of
/// all that before it (4).
pub fn make(key: &[u8], counter: u64, len: usize) -> Vec<u8> {
    let len = len.max(16 + key.len());
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&counter.to_le_bytes());
    v.extend_from_slice(&(key.len() as u32).to_le_bytes());
    v.extend_from_slice(key);
    let mut x = counter ^ 0x9e37_79b9_7f4a_7c15 ^ key.len() as u64;
    while v.len() < len - 4 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    let crc = crc32fast::hash(&v);
    v.extend_from_slice(&crc.to_le_bytes());
    v
}

/// The write number a value of `key` names, after checking every byte of it: its checksum, its
/// key, and that it is exactly what [`make`] writes. Panics (naming what is wrong) otherwise.
pub fn check(key: &[u8], v: &[u8]) -> u64 {
    assert!(
        v.len() >= 16 + key.len(),
        "value of {} bytes: too short",
        v.len()
    );
    let (body, crc) = v.split_at(v.len() - 4);
    assert_eq!(
        crc32fast::hash(body).to_le_bytes(),
        crc,
        "checksum of a value of {:?}",
        String::from_utf8_lossy(key)
    );
    let counter = u64::from_le_bytes(v[..8].try_into().unwrap());
    let key_len = u32::from_le_bytes(v[8..12].try_into().unwrap()) as usize;
    assert_eq!(&v[12..12 + key_len], key, "another key's value");
    assert_eq!(v, make(key, counter, v.len()), "a value not as written");
    counter
}

/// Bytes of every file in `dir` (sizes as the file system reports them; subdirectories, which
/// the store makes only for quarantine, must not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    // A file removed between the listing and its stat is simply gone.
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if let Ok(m) = e.metadata() {
                assert!(!m.is_dir(), "a directory in the store: {:?}", e.file_name());
                total += m.len();
            }
        }
    }
    total
}

/// A thread that sums `dir`'s file sizes every 200 µs until `done`, and returns the most it
/// saw: the file system's view of a cap, throughout a run.
pub fn watch_dir_bytes(dir: PathBuf, done: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut most = 0;
        while !done.load(Ordering::Acquire) {
            most = most.max(dir_bytes(&dir));
            std::thread::sleep(Duration::from_micros(200));
        }
        most
    })
}
