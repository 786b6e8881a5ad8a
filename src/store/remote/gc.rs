//! Deletion in the remote ([`Options::remote_retention`]; docs/design-remote.md, "Deletion"):
//! the manifests replaced longer than the retention ago, then the data objects that no
//! manifest left names and that the store does not hold. Run by the writer holding the prefix
//! (never by one that finds itself fenced), under the tier's lock (no upload or flush runs
//! meanwhile), on the background thread after a flush and by
//! [`Store::collect_remote_garbage`], at most [`GC_BATCH`] deletions per pass.
//!
//! [`Options::remote_retention`]: crate::Options::remote_retention

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::manifest::{self, data_name, manifest_name, parse_data_name};
use super::{RemoteTier, TierState, retry};
use crate::error::{Error, Result};
use crate::store::Store;
use crate::store::inner::Inner;

/// Most objects one pass deletes, so that a background tick (and a close waiting for it) stays
/// short after a long outage; the next tick goes on.
pub(super) const GC_BATCH: usize = 1000;

/// What deletion in the remote did ([`Store::collect_remote_garbage`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteGcReport {
    /// Manifests deleted (replaced longer than the retention ago).
    pub manifests_deleted: u64,
    /// Data objects deleted (named by no manifest left, not held by the store).
    pub objects_deleted: u64,
    /// Bytes of the objects deleted, manifests included.
    pub bytes_deleted: u64,
    /// Requests made to the remote: listings, manifests read, deletions.
    pub requests: u64,
}

impl RemoteGcReport {
    fn deleted(&self) -> u64 {
        self.manifests_deleted + self.objects_deleted
    }

    fn add(&mut self, other: &RemoteGcReport) {
        self.manifests_deleted += other.manifests_deleted;
        self.objects_deleted += other.objects_deleted;
        self.bytes_deleted += other.bytes_deleted;
        self.requests += other.requests;
    }
}

/// How long the background waits after a deletion pass that left nothing before the next:
/// a sixtieth of the retention, at most a minute (`None`: no wait). A manifest becomes
/// deletable a retention after it was replaced, so passes more often than that find the same
/// manifests young; a zero retention (the tests') waits for nothing.
pub(super) fn interval(retention: Option<Duration>) -> Option<Duration> {
    let wait = (retention? / 60).min(Duration::from_secs(60));
    (!wait.is_zero()).then_some(wait)
}

/// One pass, at most `budget` deletions. Returns what it did and whether garbage is left
/// (the budget ran out, or the pass gave way to a remote flush).
///
/// A pass holds the tier's lock, which a flush needs: between its requests it stops, as if its
/// budget had run out, when a flush is waiting for the lock ([`RemoteTier::flush_waiting`]),
/// so that a flush waits for one request of a pass at most, not for all of them (a pass is a
/// few round trips, more with deletions). Every step is one a pass may stop after (the budget
/// stops it there too). After [`GIVE_WAY_MAX`] passes in a row that gave way, the next does
/// not: flushes that never stop coming cannot hold deletion off for good.
///
/// Steps (the crash argument of each is in docs/design-remote.md, "Deletion"):
/// 1. list the manifests; one numbered above the newest this writer wrote means another writer
///    took the prefix: fenced, nothing deleted;
/// 2. the expired ones: the oldest manifests, each replaced (its successor dated) longer than
///    the retention before the newest was written, all by the remote's clock; never the
///    newest; of those, the marks (claims not made after a close) stay for good, as what
///    fences the writer before them ([`manifest::write`]), but no longer keep their files;
/// 3. the files every manifest kept names (each manifest read once: they never change);
/// 4. the other expired manifests deleted, oldest first;
/// 5. `data/` listed; an object is deleted unless a kept manifest names it, or it is of a
///    newer epoch, or of this writer's epoch and its file is still in the store (uploaded,
///    not named yet), or it is the object the store reads or will name a file of its own by
///    (an inherited or remote-only file), or its name is not one the store writes.
pub(super) fn pass(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    budget: usize,
) -> Result<(RemoteGcReport, bool)> {
    let gave_way = state.gc_gave_way;
    let out = pass_steps(inner, tier, state, budget);
    if state.gc_gave_way == gave_way {
        state.gc_gave_way = 0;
    }
    out
}

/// Passes in a row that may give way to a flush ([`pass`]).
const GIVE_WAY_MAX: u32 = 4;

/// [`pass`]'s steps.
fn pass_steps(
    inner: &Inner,
    tier: &RemoteTier,
    state: &mut TierState,
    budget: usize,
) -> Result<(RemoteGcReport, bool)> {
    let mut report = RemoteGcReport::default();
    // Due again only after the next manifest, or when this pass stops at its budget: a pass
    // that fails (deletions refused by the bucket's policy, an outage) is not repeated on
    // every tick.
    state.gc_due = false;
    let Some(retention) = tier.config.retention else {
        return Ok((report, false));
    };
    tier.check_fenced()?;
    let config = &tier.config;
    let prefix = &config.prefix;
    let listed = manifest::list(config)?;
    report.requests += 1;
    let ours = tier.manifest.load(Ordering::Acquire);
    let Some(newest) = listed.last().copied() else {
        log::warn!("podstore: remote {prefix}: no manifest listed; nothing deleted");
        return Ok((report, false));
    };
    if newest.number > ours {
        // Our own, if a flush created it but did not learn so (its reply lost, its retries
        // spent, or the listing after it failed): the next flush passes over it. Nothing is
        // deleted until then.
        let m = manifest::read(config, newest.number, newest.size)?;
        report.requests += 1;
        if m.epoch == state.epoch && m.writer == state.writer {
            return Ok((report, false));
        }
        // Another writer took the prefix: what it names, uploads or will inherit is not ours
        // to judge. Fenced from now on, as its next manifest would find.
        tier.fence(newest.number);
        return Err(Error::Fenced {
            prefix: prefix.clone(),
            manifest: newest.number,
        });
    }
    if newest.number < ours {
        // Our own newest manifest is gone: something else deletes under this prefix.
        log::warn!(
            "podstore: remote {prefix}: manifest {ours} is not listed (newest {}); nothing deleted",
            newest.number
        );
        return Ok((report, false));
    }
    let expired = listed
        .windows(2)
        .take_while(|w| match (newest.modified, w[1].modified) {
            (Some(now), Some(replaced)) => now
                .duration_since(replaced)
                .is_ok_and(|age| age >= retention),
            // A remote that does not date its objects: nothing is old enough.
            _ => false,
        })
        .count();
    // Stops the pass, garbage left, when a flush waits for the tier.
    macro_rules! give_way {
        () => {
            if state.gc_gave_way < GIVE_WAY_MAX && tier.flush_waiting() {
                state.gc_gave_way += 1;
                state.gc_due = true;
                return Ok((report, true));
            }
        };
    }
    let (gone, kept) = listed.split_at(expired);
    let kept_numbers: HashSet<u64> = kept.iter().map(|l| l.number).collect();
    state.manifests.retain(|n, _| kept_numbers.contains(n));
    // Which expired manifests are marks (each read once: they never change), which stay (a
    // mark's files are not kept for it: it is never read).
    let listed_numbers: HashSet<u64> = listed.iter().map(|l| l.number).collect();
    state.marks.retain(|n, _| listed_numbers.contains(n));
    for l in gone {
        if !state.marks.contains_key(&l.number) {
            give_way!();
        }
        if let std::collections::btree_map::Entry::Vacant(e) = state.marks.entry(l.number) {
            report.requests += 1;
            e.insert(manifest::read(config, l.number, l.size)?.is_mark());
        }
    }
    let mut keep: HashSet<String> = HashSet::new();
    for l in kept {
        if !state.manifests.contains_key(&l.number) {
            give_way!();
        }
        let files = match state.manifests.entry(l.number) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => {
                report.requests += 1;
                let m = manifest::read(config, l.number, l.size)?;
                state.marks.insert(l.number, m.is_mark());
                e.insert(m.files)
            }
        };
        for f in files.iter() {
            keep.insert(data_name(prefix, f.epoch, f.kind, f.id));
        }
    }
    for l in gone.iter().filter(|l| !state.marks[&l.number]) {
        give_way!();
        if report.deleted() >= budget as u64 {
            state.gc_due = true;
            return Ok((report, true));
        }
        let name = manifest_name(prefix, l.number);
        delete(tier, &name, l.size, &mut report)?;
        report.manifests_deleted += 1;
    }
    // The files the store holds (sealed or not, every id it has not removed): the objects it
    // uploaded or inherited for them, or reads them from, stay.
    let table = inner.shared.segments.snapshot();
    let held: HashSet<u64> = table.iter().map(|(id, _)| *id).collect();
    for (id, h) in &table {
        if let Some(f) = state.uploaded.get(id) {
            keep.insert(data_name(prefix, f.epoch, f.kind, *id));
        }
        if let Some(o) = inner.shared.catalog.remote_of(*id) {
            keep.insert(data_name(prefix, o.epoch, h.kind, *id));
        }
    }
    // (The handles let go: an evicted file is punched only once no one holds its old one.)
    drop(table);
    // A file the store removed is never named again (ids are not reused): forget it.
    state.uploaded.retain(|id, _| held.contains(id));
    tier.in_remote
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|id, _| held.contains(id));
    give_way!();
    let under = format!("{prefix}/data/");
    let objects = retry(config, "remote: list files", &under, |_| {
        config.remote.list(&under)
    })?;
    report.requests += 1;
    for o in objects {
        let Some((epoch, _, id)) = parse_data_name(prefix, &o.name) else {
            continue;
        };
        let needed = keep.contains(&o.name)
            || epoch > state.epoch
            || (epoch == state.epoch && held.contains(&id));
        if needed {
            continue;
        }
        give_way!();
        if report.deleted() >= budget as u64 {
            state.gc_due = true;
            return Ok((report, true));
        }
        delete(tier, &o.name, o.size, &mut report)?;
        report.objects_deleted += 1;
    }
    Ok((report, false))
}

/// Deletes object `name` of `size` bytes (retried while transient), counted.
fn delete(tier: &RemoteTier, name: &str, size: u64, report: &mut RemoteGcReport) -> Result<()> {
    let config = &tier.config;
    retry(config, "remote: delete", name, |_| {
        config.remote.delete(name)
    })?;
    report.requests += 1;
    report.bytes_deleted += size;
    tier.deleted_objects.fetch_add(1, Ordering::Relaxed);
    tier.deleted_bytes.fetch_add(size, Ordering::Relaxed);
    Ok(())
}

impl Store {
    /// Deletes from the store's [remote](crate::Options::remote) what no one may need any
    /// more, now rather than on the background thread's next pass: the manifests replaced
    /// longer than [`remote_retention`](crate::Options::remote_retention) ago, then the
    /// uploaded files that no manifest left names and that the store does not hold. The newest
    /// manifest and every file it names stay, and so does each writer's first manifest (its
    /// claim, the mark that fences the writer before it: docs/design-remote.md, "Fencing"),
    /// though not its files, unless the writer before it closed. With
    /// `remote_retention(None)` nothing is deleted.
    ///
    /// Errors: [`Error::InvalidOptions`] without a remote; [`Error::Fenced`] when another
    /// writer took the prefix (found by the listing: nothing is deleted, and the store refuses
    /// writes from then on); [`Error::Remote`] when the remote keeps failing (what was deleted
    /// stays deleted, every manifest left still names only whole objects: call again).
    ///
    /// ```
    /// # fn main() -> podstore::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let remote = std::sync::Arc::new(podstore::remote::MemoryRemote::new());
    /// let opts = podstore::Options::default()
    ///     .remote(remote.clone(), "db")
    ///     .remote_retention(Some(std::time::Duration::ZERO));
    /// let store = podstore::Store::open_with(dir.path(), opts)?;
    /// store.put("k", "v1")?;
    /// store.flush_remote()?;
    /// store.put("k", "v2")?;
    /// store.flush_remote()?;
    /// store.collect_remote_garbage()?;
    /// // Only the newest manifest is left, with the claim of this store's open (manifest 1),
    /// // and the files the newest names.
    /// let manifests: Vec<String> =
    ///     remote.names().into_iter().filter(|n| n.starts_with("db/manifest/")).collect();
    /// assert_eq!(manifests, ["db/manifest/00000000000000000001", "db/manifest/00000000000000000003"]);
    /// # Ok(()) }
    /// ```
    pub fn collect_remote_garbage(&self) -> Result<RemoteGcReport> {
        let inner = &self.inner;
        let Some(tier) = &inner.remote else {
            return Err(Error::InvalidOptions(
                "collect_remote_garbage needs a store opened with Options::remote",
            ));
        };
        let mut total = RemoteGcReport::default();
        loop {
            let (report, more) = pass(inner, tier, &mut tier.lock(), GC_BATCH)?;
            total.add(&report);
            if !more {
                return Ok(total);
            }
            // A pass that gave way to a flush: the flush takes the lock before the next pass.
            while tier.flush_waiting() {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

#[cfg(test)]
mod interval_tests {
    use super::*;

    #[test]
    fn passes_wait_a_sixtieth_of_the_retention_at_most_a_minute_and_none_at_zero() {
        let s = Duration::from_secs;
        assert_eq!(interval(None), None);
        assert_eq!(interval(Some(Duration::ZERO)), None);
        assert_eq!(interval(Some(s(600))), Some(s(10)));
        assert_eq!(interval(Some(s(3600))), Some(s(60)));
        assert_eq!(interval(Some(s(86_400))), Some(s(60)));
    }
}
