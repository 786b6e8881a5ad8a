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
//! largest value a `PUT` takes (default 64 MiB; `413` beyond).

use std::process::ExitCode;

use podstore_raft::http::{DEFAULT_MAX_VALUE, HttpNetwork, router_with_max_value};
use podstore_raft::{Node, default_config};

const USAGE: &str = "usage: podstore-raft --id <u64> --dir <directory> --addr <host:port> \
                     [--snapshot-logs <n>] [--keep-logs <n>] [--max-value <bytes>]";

fn main() -> ExitCode {
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
            eprintln!("podstore-raft: {e}");
            ExitCode::FAILURE
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
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let node = Node::open(id, dir, config, HttpNetwork::new()).await?;
    println!("podstore-raft: node {id} serving on http://{addr}, data in {dir}");
    axum::serve(listener, router_with_max_value(node.clone(), max_value))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    node.shutdown().await.map_err(std::io::Error::other)?;
    Ok(())
}
