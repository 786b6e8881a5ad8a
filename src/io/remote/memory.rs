//! [`MemoryRemote`]: a [`Remote`] in memory, for tests (the `testing` feature).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use super::{ObjectBody, ObjectInfo, PutOutcome, Remote, RemoteError, RemoteErrorKind};

/// A [`Remote`] that keeps its objects in memory (test machinery: the `testing` feature). Its
/// conditional create is atomic (one lock), as a real object store's is. Tests may look at and
/// change its objects ([`MemoryRemote::object`], [`MemoryRemote::set_object`]) to damage them.
/// Each object is dated by the remote's own clock (the system's plus an offset a test moves
/// forward with [`MemoryRemote::advance_clock`]), as [`Remote::list`] reports it.
#[derive(Debug, Default)]
pub struct MemoryRemote {
    objects: Mutex<BTreeMap<String, (Vec<u8>, SystemTime)>>,
    requests: AtomicU64,
    deletes: AtomicU64,
    /// Nanoseconds added to the system's clock.
    clock_offset: AtomicU64,
}

impl MemoryRemote {
    /// An empty remote.
    pub fn new() -> Self {
        Self::default()
    }

    /// The bytes of object `name`, if it exists.
    pub fn object(&self, name: &str) -> Option<Vec<u8>> {
        self.lock().get(name).map(|(bytes, _)| bytes.clone())
    }

    /// Replaces (or creates) object `name`: a test damages what the store wrote.
    pub fn set_object(&self, name: &str, bytes: Vec<u8>) {
        let now = self.now();
        self.lock().insert(name.to_string(), (bytes, now));
    }

    /// Moves the remote's clock forward by `by`: objects written from now on are dated that
    /// much later (a test makes the objects written before look old).
    pub fn advance_clock(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.clock_offset.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Calls to [`Remote::delete`] made so far.
    pub fn deletes(&self) -> u64 {
        self.deletes.load(Ordering::Relaxed)
    }

    /// The total size of the objects whose names start with `prefix`, and their count.
    pub fn usage(&self, prefix: &str) -> (usize, u64) {
        let objects = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        objects
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .fold((0, 0), |(n, b), (_, (v, _))| (n + 1, b + v.len() as u64))
    }

    /// The remote's clock now.
    fn now(&self) -> SystemTime {
        SystemTime::now() + Duration::from_nanos(self.clock_offset.load(Ordering::Relaxed))
    }

    /// Every object's name, in byte order.
    pub fn names(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// Calls made so far, of every kind.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Vec<u8>, SystemTime)>> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn not_found(name: &str) -> RemoteError {
    RemoteError::new(RemoteErrorKind::NotFound, format!("no object {name}"))
}

impl Remote for MemoryRemote {
    fn put(&self, name: &str, body: &dyn ObjectBody) -> Result<(), RemoteError> {
        let bytes = body.to_vec().map_err(|e| {
            RemoteError::new(RemoteErrorKind::Other, "reading the body failed").with_source(e)
        })?;
        let now = self.now();
        self.lock().insert(name.to_string(), (bytes, now));
        Ok(())
    }

    fn put_if_absent(&self, name: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        let now = self.now();
        let mut objects = self.lock();
        if objects.contains_key(name) {
            return Ok(PutOutcome::AlreadyExists);
        }
        objects.insert(name.to_string(), (bytes.to_vec(), now));
        Ok(PutOutcome::Created)
    }

    fn get_range(&self, name: &str, range: Range<u64>) -> Result<Vec<u8>, RemoteError> {
        let objects = self.lock();
        let (object, _) = objects.get(name).ok_or_else(|| not_found(name))?;
        let (start, end) = (range.start as usize, range.end as usize);
        object.get(start..end).map(<[u8]>::to_vec).ok_or_else(|| {
            RemoteError::new(
                RemoteErrorKind::Other,
                format!(
                    "range {start}..{end} of {name}, which has {} bytes",
                    object.len()
                ),
            )
        })
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, RemoteError> {
        Ok(self
            .lock()
            .range(prefix.to_string()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, (v, at))| ObjectInfo::new(k.clone(), v.len() as u64).with_modified(*at))
            .collect())
    }

    fn delete(&self, name: &str) -> Result<(), RemoteError> {
        self.deletes.fetch_add(1, Ordering::Relaxed);
        self.lock().remove(name);
        Ok(())
    }
}
