//! `compare`: podstore against other embedded stores and the raw-I/O floor.
//!
//! ```text
//! compare run --engine E --workload W [--dir D] [params]   one run, one JSON line on stdout
//! compare suite [--quick] [--out FILE] [--dir D] [--reps N] [--engines a,b] [--workloads x,y]
//! compare report --from FILE.jsonl [--out FILE.md] [--charts-dir DIR]   rebuild a suite's report
//! compare engines                                          engines compiled in, and settings
//! ```
//!
//! See benches/compare/README.md.

mod cache;
mod cgroup;
mod charts;
mod engines;
mod memlimit;
mod memlimit_report;
mod ranges;
#[cfg(feature = "slatedb")]
mod remote;
mod report;
mod scale;
mod suite;
mod sys;
mod values;
mod workloads;
mod ycsb;

use std::collections::HashMap;
use std::process::ExitCode;

const USAGE: &str = "\
usage:
  compare run --engine ENGINE --workload WORKLOAD [--dir DIR] [params...]
      workloads and their params (sizes take K/M/G suffixes, binary):
        put      --size 4K --threads 16 [--ops 20000] [--max-bytes 256M] [--secs 1.5]
        get      --size 1K --threads 16 --cache cold|warm [--dataset 128M] [--ops 20000] [--secs 1]
        range    --size 1M --range whole|OFF+LEN (OFF may be end-4K) [--ops 12] [--keys N] [--secs 3]
        ranges   [--size 10M] [--keys 100] [--ops 3000]
                 (random 4 KiB ranges after a cold open: a pass, the same ranges again, and a
                 mixed pass, 90 % in 32 hot 64 KiB regions of 4 values)
        seqwrite --size 256K [--total 2G] [--secs 20]
        mix      --size 1M --threads 16 [--dataset 512M] [--ops 600] [--secs 10]
                 (50 % durable puts of fresh keys, 50 % gets of random loaded keys)
        oldest   --size 1M --threads 16 [--dataset 512M] [--ops 600] [--oldest-pct 5]
                 (durable puts alternating with gets from the oldest 5 % of the keys)
        ycsb     --mix a|b|c|f [--records 200000] [--ops 400000] [--threads 8] [--size 1K] [--secs 60]
                 [--distribution zipfian|uniform]
                 (YCSB core workloads, scrambled zipfian keys, unsynced updates, the run phase in
                 a fresh process after the load)
        memlimit [--mem-limit 1G] [--records 4194304] [--size 1K] [--ops 400000] [--threads 8]
                 [--secs 120] [--phases c,c-uniform,b,a,f] [--cache-cap LIMIT/2]
                 [--load-timeout 3600]
                 (larger than memory: load and YCSB phases inside a memory cgroup that counts the
                 page cache, each phase in a fresh process; needs root; skipped otherwise)
                 --engine device [--file-size 4G] [--threads 8] [--secs 20]: the device's floor,
                 fio 4 KiB random O_DIRECT reads (skipped when fio is missing)
        reopen   [--keys 1000000] [--size 100] [--key-len 16]
  compare cache --engine podstore|foyer --dir DIR [--value-size 16K] [--threads 1]
        [--memory 64M] [--disk 1G] [--ops 4*disk/value-size] [--second-chance] [--chance-budget F] [--offer [--admission]] [--write-buffer 1M] [--compaction-rate 64M, 0: none]
        [--foyer-buffered] (foyer's file device buffered, its default; direct otherwise)
      (a read-through disk cache, issue 39: zipfian gets over 10x the disk capacity, each miss
      filled by an insert; a warm-up of --ops, then --ops measured; hit ratio, ops/s, p50/p99,
      write amplification; foyer needs --features foyer)
      common: [--load-threads 16] [--seed 1] [--keep] [--key-len 16] (keys padded to it)
              [--write-buffer SIZE] (podstore engines: Options::write_buffer_size, for experiments)
              [--cache-capacity SIZE] (podstore engines: Options::cache_capacity, 0 = off)
              [--warm-cache 0|1] (podstore engines: Options::warm_cache, the warm restart)
  compare remote --object-store local|s3 [--latency-ms 20] [--reps 2] [--dir DIR]
        [--groups put,read,restore,upload] [--engines podstore,slatedb] [--keep]
        [--put-engines podstore,podstore-sync,slatedb]
        [--put-batches 32] [--put-threads 8] [--small-keys 20000] [--large-values 32] [--warm-ops 20000]
        [--cold-ops 300] [--range-ops 100] [--restore-keys 1000000] [--restore-size 256]
        [--upload-mib 256]
      (issue 38: podstore's remote tier against SlateDB on one ObjectStore, LocalFileSystem or
      an in-process s3s-fs server, with a client-side latency before every request; requests
      and bytes per op counted; needs --features slatedb; see src/remote/mod.rs)
  compare suite [--quick] [--out FILE] [--jsonl FILE] [--charts-dir DIR] [--dir DIR] [--reps N]
                [--engines a,b,...] [--workloads put,get,range,seqwrite,mix,oldest,reopen,ycsb,memlimit]
                [--mem-limit SIZE --memlimit-records N --memlimit-ops N] (shrink the memlimit mode)
  compare report --from FILE.jsonl [--out FILE.md] [--charts-dir DIR]
      rebuilds a suite's markdown report and SVG charts from the .jsonl it saved; --out
      defaults to FILE.md. Charts go to --charts-dir, else docs/charts/ when the report is
      under ./docs/, else charts/ next to the report.
  compare engines

  DIR defaults to $PODSTORE_BENCH_DIR, else /tmp; it must be on a real disk (not tmpfs).
  engines: podstore podstore-buffered fjall redb heed rocksdb files raw
  (rocksdb only when built with --features rocksdb)";

/// `--key value` pairs and bare `--flag`s.
#[derive(Debug, Default, Clone)]
pub struct Args {
    pub map: HashMap<String, String>,
    pub flags: Vec<String>,
}

/// Flags that take no value.
const BARE: &[&str] = &[
    "quick",
    "keep",
    "help",
    "second-chance",
    "offer",
    "admission",
    "foyer-buffered",
];

impl Args {
    pub fn parse(items: &[String]) -> Result<Args, String> {
        let mut a = Args::default();
        let mut it = items.iter();
        while let Some(s) = it.next() {
            let Some(name) = s.strip_prefix("--") else {
                return Err(format!("unexpected argument {s:?}"));
            };
            if let Some((k, v)) = name.split_once('=') {
                a.map.insert(k.to_string(), v.to_string());
            } else if BARE.contains(&name) {
                a.flags.push(name.to_string());
            } else {
                let v = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
                a.map.insert(name.to_string(), v.clone());
            }
        }
        Ok(a)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.map.get(name).map(String::as_str)
    }

    pub fn need(&self, name: &str) -> Result<&str, String> {
        self.str(name)
            .ok_or_else(|| format!("--{name} is required"))
    }

    pub fn size(&self, name: &str, default: u64) -> Result<u64, String> {
        self.str(name).map_or(Ok(default), sys::parse_size)
    }

    pub fn num(&self, name: &str, default: u64) -> Result<u64, String> {
        self.str(name).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| format!("--{name}: not a number: {s:?}"))
        })
    }

    pub fn secs(&self, name: &str, default: f64) -> Result<f64, String> {
        self.str(name).map_or(Ok(default), |s| {
            s.parse()
                .map_err(|_| format!("--{name}: not a number: {s:?}"))
        })
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let Some(cmd) = argv.get(1) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let args = match Args::parse(&argv[2..]) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("compare: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.flag("help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match args.num("key-len", 16) {
        Ok(n) => values::set_key_len(n as usize),
        Err(e) => {
            eprintln!("compare: {e}");
            return ExitCode::from(2);
        }
    }
    let result = match cmd.as_str() {
        "run" => workloads::run(&args).map(|line| println!("{line}")),
        "probe-open" => workloads::probe_open(&args).map(|line| println!("{line}")),
        "memlimit-phase" => memlimit::phase(&args).map(|line| println!("{line}")),
        "ycsb-phase" => ycsb::phase_child(&args).map(|line| println!("{line}")),
        "cache" => cache::run(&args).map(|line| println!("{line}")),
        #[cfg(feature = "slatedb")]
        "remote" => remote::run(&args),
        #[cfg(not(feature = "slatedb"))]
        "remote" => Err("compare remote needs --features slatedb".into()),
        "suite" => suite::suite(&args, &argv),
        "report" => report::report(&args, &argv),
        "engines" => {
            for e in engines::ALL {
                let state = if engines::available(e) {
                    "built"
                } else {
                    "not compiled in"
                };
                println!("{e} ({state}): {}\n", engines::settings(e));
            }
            println!("podstore defaults: {}", engines::podstore_defaults());
            Ok(())
        }
        "help" | "-h" | "--help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command {other:?}\n\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare: {e}");
            ExitCode::FAILURE
        }
    }
}
