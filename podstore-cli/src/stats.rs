//! `podstore stats`: what the store holds, and why its dead bytes are still there.

use std::path::Path;

use serde_json::json;

use crate::remote::remote_side;
use crate::{Failure, open, size};

/// What an index entry costs, as `podstore::Stats::index_bytes` documents it.
const INDEX_ENTRY_BYTES: u64 = 23;

/// Prints the store's [`podstore::Stats`], for humans or (`as_json`) as one JSON object; with
/// `remote` (a URL), its remote's newest manifest and how the local files compare with it.
pub(crate) fn stats(dir: &Path, as_json: bool, remote: Option<&str>) -> Result<(), Failure> {
    let store = open(dir, true)?;
    let s = store.stats();
    let remote = remote.map(|url| remote_side(&store, url)).transpose()?;
    if as_json {
        let mut v = json!({
            "path": dir.display().to_string(),
            "live_keys": s.live_keys,
            "live_bytes": s.live_bytes,
            "tombstones": s.tombstones,
            "tombstone_bytes": s.tombstone_bytes,
            "dead_bytes": s.dead_bytes,
            "compaction_threshold": s.compaction_threshold,
            "reclaimable_bytes": s.reclaimable_bytes,
            "below_threshold_bytes": s.below_threshold_bytes,
            "active_dead_bytes": s.active_dead_bytes,
            "blob_overhead_bytes": s.blob_overhead_bytes,
            "preallocated_bytes": s.preallocated_bytes,
            "disk_bytes": s.disk_bytes,
            "log_segments": s.log_segments,
            "blob_files": s.blob_files,
            "io_mode": format!("{:?}", s.io_mode),
            "index_entries": s.index_entries,
            "index_bytes": s.index_bytes,
            "evicted_through": s.evicted_through,
            "evicted_files": s.evicted_files,
            "evicted_bytes": s.evicted_bytes,
            "evicted_values": s.evicted_values,
            "expired_keys": s.expired_keys,
            "expired_bytes": s.expired_bytes,
            "expired_reclaimed_bytes": s.expired_reclaimed_bytes,
        });
        if let Some(r) = &remote {
            v["remote"] = json!({
                "url": r.url,
                "manifest": r.manifest,
                "epoch": r.epoch,
                "closed": r.closed,
                "files": r.files,
                "bytes": r.bytes,
                "waiting_files": r.waiting_files,
                "waiting_bytes": r.waiting_bytes,
                "remote_only_files": r.remote_only_files,
            });
        }
        println!("{v}");
    } else {
        println!("store       {}", dir.display());
        println!("keys        {}", s.live_keys);
        println!("live        {}", size(s.live_bytes));
        println!("tombstones  {} ({})", s.tombstones, size(s.tombstone_bytes));
        if s.expired_keys > 0 || s.expired_reclaimed_bytes > 0 {
            // Expired values are absent to reads; their records wait for compaction (and count
            // in `live` until then).
            println!(
                "expired     {} ({} of live, given back by compact; {} reclaimed since open)",
                s.expired_keys,
                size(s.expired_bytes),
                size(s.expired_reclaimed_bytes)
            );
        }
        // Why the dead bytes are still there (the parts that are not zero).
        let why: Vec<String> = [
            (s.reclaimable_bytes, "reclaimable by compact".to_string()),
            (
                s.below_threshold_bytes,
                format!(
                    "in segments under the {} threshold (compact --threshold takes them)",
                    s.compaction_threshold
                ),
            ),
            (s.active_dead_bytes, "in the active segment".to_string()),
            (s.blob_overhead_bytes, "blob file overhead".to_string()),
        ]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{} {what}", size(n)))
        .collect();
        if why.is_empty() {
            println!("dead        {}", size(s.dead_bytes));
        } else {
            println!("dead        {} ({})", size(s.dead_bytes), why.join("; "));
        }
        println!("on disk     {}", size(s.disk_bytes));
        println!(
            "files       {} log segments, {} blob files",
            s.log_segments, s.blob_files
        );
        // The tool opens the store without a cap, so it evicts nothing itself: what it can
        // tell is the watermark the catalog keeps (every value written up to it is gone).
        if s.evicted_through > 0 {
            println!(
                "evicted     values up to version {} (dropped whole to stay within a size cap)",
                s.evicted_through
            );
        }
        // Most of a small store's index is its shard table, allocated whole at open
        // (`Stats::index_bytes`: 23 bytes per entry, and the table); without a word, 2.5 MiB
        // for five keys reads as a leak.
        let per_key = s.index_entries * INDEX_ENTRY_BYTES;
        println!(
            "index       {} in memory ({} for {} keys at {INDEX_ENTRY_BYTES} B each; the rest is \
             its shard table, allocated whole when the store opens, however few the keys)",
            size(s.index_bytes),
            size(per_key.min(s.index_bytes)),
            s.index_entries
        );
        if let Some(r) = &remote {
            println!(
                "remote      {}: manifest {} (epoch {}{}), {} files, {}",
                r.url,
                r.manifest,
                r.epoch,
                if r.closed {
                    ", written as its writer closed"
                } else {
                    ""
                },
                r.files,
                size(r.bytes)
            );
            println!(
                "            {} local sealed files ({}) not in it; {} of its files not in the \
                 directory",
                r.waiting_files,
                size(r.waiting_bytes),
                r.remote_only_files
            );
        }
    }
    store.close()?;
    Ok(())
}
