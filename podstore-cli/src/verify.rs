//! `podstore verify`: every checksum of every file of a store, and (`--remote`) every object
//! of its remote's newest manifest.

use std::io::{self, IsTerminal};
use std::path::Path;

use podstore::{Error, Options, Store};

use crate::{DAMAGED, Failure, open, show_key, size};

pub(crate) fn verify(dir: &Path, hex: bool) -> Result<(), Failure> {
    // A store whose catalog lists missing or cut files is refused by the default open: those
    // files are reported, and what is left is opened (read-only, changing nothing) in salvage
    // mode and checked too.
    let mut refused = Vec::new();
    let store = match open(dir, true) {
        Err(Failure { code: DAMAGED, .. }) => {
            let opts = Options::default()
                .create(false)
                .read_only(true)
                .warm_cache(false)
                .recovery_mode(podstore::RecoveryMode::Salvage);
            // Beside the writer again if the first open was (its lock is still refused).
            let store = match Store::open_with(dir, opts.clone()) {
                Err(Error::Locked { .. }) => Store::open_with(dir, opts.alongside_writer(true))?,
                other => other?,
            };
            for f in &store.recovery().lost {
                println!("damaged file: {f}");
                refused.push(f.clone());
            }
            store
        }
        other => other?,
    };
    let bar = if io::stderr().is_terminal() {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "verify {bar:40} {bytes}/{total_bytes} ({eta})",
            )
            .expect("a valid template"),
        );
        Some(bar)
    } else {
        None
    };
    let report = store.verify_with_progress(|done, total| {
        if let Some(bar) = &bar {
            bar.set_length(total);
            bar.set_position(done);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    println!(
        "{} files, {} records, {} checked",
        report.segments,
        report.records,
        size(report.bytes_checked)
    );
    for d in &report.damage {
        println!("damaged: {}", d.to_error());
    }
    for key in &report.affected_keys {
        println!("unreadable key: {}", show_key(key, hex));
    }
    // The catalog check of verify finds the files open refused again: each is said once.
    for f in &report.files {
        if !refused.iter().any(|r| r.name == f.name) {
            println!("damaged file: {f}");
            refused.push(f.clone());
        }
    }
    store.close()?;
    if report.damage.is_empty() && report.affected_keys.is_empty() && refused.is_empty() {
        println!("clean");
        Ok(())
    } else {
        Err(Failure::new(
            DAMAGED,
            format!(
                "{} is damaged: {} damaged place(s), {} unreadable key(s), {} missing or cut file(s)",
                dir.display(),
                report.damage.len(),
                report.affected_keys.len(),
                refused.len()
            ),
        ))
    }
}
