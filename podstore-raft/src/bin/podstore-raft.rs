//! One podstore-raft node per process, serving the Raft RPCs and the client API over HTTP
//! (see the `http` module of the library for the routes).
//!
//! ```text
//! podstore-raft --id 1 --dir /var/lib/pod/n1 --addr 127.0.0.1:21001
//! ```
//!
//! A new cluster is started by `POST /cluster/init` to one node with every member's address;
//! a node restarted with the same directory rejoins by itself.
//!
//! `--snapshot-logs <n>` builds a snapshot every `n` applied entries (default 10 000) and
//! `--keep-logs <n>` keeps `n` entries of the log behind the snapshot (default 1 000): a
//! follower further behind than that catches up by a snapshot. `--max-value <bytes>` is the
//! largest value a `PUT` takes (default 1 GiB; `413` beyond; a value over 1 MiB is streamed
//! and replicated in chunks, a few MiB of memory whatever its size).
//!
//! `SIGTERM` or `SIGINT` (Ctrl-C) stops it cleanly: it stops accepting connections, lets the
//! requests in flight finish (for up to [`DRAIN`]), stops Raft, flushes its stores and exits
//! with 0. A second signal meanwhile exits at once (130).
//!
//! It logs to stderr through `tracing`, filtered by `RUST_LOG` (default `info`: its start,
//! elections and leader changes, membership changes, snapshots sent, built and installed,
//! failed requests; openraft's own `info` lines are left out unless `RUST_LOG` names it,
//! e.g. `RUST_LOG=info,openraft=info`).

use std::process::ExitCode;
use std::time::Duration;

use podstore_raft::http::{DEFAULT_MAX_VALUE, HttpNetwork, router_with_max_value};
use podstore_raft::{Node, default_config};
use tokio::signal::unix::{SignalKind, signal};

const USAGE: &str = "usage: podstore-raft --id <u64> --dir <directory> --addr <host:port> \
                     [--snapshot-logs <n>] [--keep-logs <n>] [--max-value <bytes>]";

/// How long a shutdown waits for the requests in flight before it stops Raft anyway.
const DRAIN: Duration = Duration::from_secs(10);

/// The log filter when `RUST_LOG` is not set: this crate's lines, openraft's warnings.
const DEFAULT_FILTER: &str = "info,openraft=warn";

/// Fixes glibc's threshold above which an allocation is its own memory map (returned to the
/// system when freed) at 256 KiB. glibc raises it, by default, to the size of each mapped
/// block freed (up to 32 MiB): after the first 1 MiB buffer of a streamed value (a chunk, a
/// read, a request body) was freed, later ones came from the heaps of the runtime's threads,
/// which kept them once freed. Measured with a 256 MiB PUT into three nodes: peak RSS per
/// node 90-108 MiB and 72-89 MiB after, against 70-81 and 48-55 with the threshold fixed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn fix_mmap_threshold() {
    // SAFETY: `mallopt` only sets an allocator parameter; it is called first thing in `main`,
    // before this process starts a thread or allocates concurrently.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn fix_mmap_threshold() {}

fn main() -> ExitCode {
    fix_mmap_threshold();
    let mut args = std::env::args().skip(1);
    let (mut id, mut dir, mut addr) = (None, None, None);
    let mut config = default_config();
    let mut max_value = DEFAULT_MAX_VALUE;
    while let Some(flag) = args.next() {
        let value = args.next();
        let ok = match (flag.as_str(), value) {
            ("--id", Some(v)) => {
                id = v.parse::<u64>().ok();
                id.is_some()
            }
            ("--dir", Some(v)) => {
                dir = Some(v);
                true
            }
            ("--addr", Some(v)) => {
                addr = Some(v);
                true
            }
            ("--snapshot-logs", Some(v)) => match v.parse::<u64>() {
                Ok(n) if n > 0 => {
                    config.snapshot_policy = openraft::SnapshotPolicy::LogsSinceLast(n);
                    true
                }
                _ => false,
            },
            ("--max-value", Some(v)) => match v.parse::<usize>() {
                Ok(n) => {
                    max_value = n;
                    true
                }
                Err(_) => false,
            },
            ("--keep-logs", Some(v)) => match v.parse::<u64>() {
                Ok(n) => {
                    config.max_in_snapshot_log_to_keep = n;
                    true
                }
                Err(_) => false,
            },
            _ => false,
        };
        if !ok {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    }
    let (Some(id), Some(dir), Some(addr)) = (id, dir, addr) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours on a terminal only, not in a file or the journal.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("podstore-raft: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(id, &dir, &addr, config, max_value)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("podstore-raft: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The signals that stop a node, caught from when this is made.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn catch() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }

    /// Waits for `SIGTERM` or `SIGINT`; returns its name.
    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
        }
    }
}

async fn run(
    id: u64,
    dir: &str,
    addr: &str,
    config: openraft::Config,
    max_value: usize,
) -> std::io::Result<()> {
    // Caught before the node opens: a signal during the open (a long log replay) is not lost.
    let mut signals = Signals::catch()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let node = Node::open(id, dir, config, HttpNetwork::new().source(id)).await?;
    tracing::info!(node = id, dir, "serving on http://{addr}");
    let (drained_tx, drained_rx) = tokio::sync::oneshot::channel::<()>();
    let app = router_with_max_value(node.clone(), max_value);
    // Stops accepting on `drained_tx`, then waits for the requests in flight.
    let mut server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = drained_rx.await;
            })
            .into_future(),
    );
    let name = tokio::select! {
        name = signals.next() => name,
        served = &mut server => {
            // The server ended by itself (its listener failed).
            served.map_err(std::io::Error::other)??;
            return Err(std::io::Error::other("the server stopped"));
        }
    };
    tracing::info!(node = id, "{name}: stopping (draining requests, then Raft)");
    tokio::spawn(async move {
        let name = signals.next().await;
        eprintln!("podstore-raft: {name} again: exiting at once");
        std::process::exit(130);
    });
    let _ = drained_tx.send(());
    match tokio::time::timeout(DRAIN, server).await {
        Ok(served) => served.map_err(std::io::Error::other)??,
        Err(_) => tracing::warn!(node = id, "requests still in flight after {DRAIN:?}"),
    }
    node.shutdown().await.map_err(std::io::Error::other)?;
    Ok(())
}
