//! A network partition between real node processes on one machine: a TCP proxy in front of
//! each node, whose address is the node's in the membership, forwards what it is sent unless
//! the link it belongs to is cut.
//!
//! A connection's link is (sender, node): the sender is named by the first request's
//! `x-podstore-raft-source` header, which every Raft RPC of the node binary carries
//! (`podstore_raft::http::SOURCE_HEADER`); a connection whose first request names none (a
//! client's) is never cut. A node's pooled connection to a peer carries only its own RPCs, so
//! its first request names it for all. A cut link stalls both ways, as a partition that drops
//! packets would: the sender's request times out, nothing is refused; when the link heals,
//! what was held goes on (a late delivery, which Raft must bear anyway).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// The links cut, both ways: (sender, node).
#[derive(Default)]
pub struct Links(Mutex<HashSet<(u64, u64)>>);

impl Links {
    /// Cuts node `a` off from each of `others`, both ways.
    pub fn cut(&self, a: u64, others: &[u64]) {
        let mut cut = self.0.lock().unwrap();
        for &b in others {
            cut.insert((a, b));
            cut.insert((b, a));
        }
    }

    /// Heals every link.
    pub fn heal(&self) {
        self.0.lock().unwrap().clear();
    }

    fn is_cut(&self, from: u64, to: u64) -> bool {
        self.0.lock().unwrap().contains(&(from, to))
    }

    /// Returns once the link (`from`, `to`) is not cut.
    async fn open(&self, from: u64, to: u64) {
        while self.is_cut(from, to) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

/// Proxies connections to `listener` for node `node` to `upstream` (the node's own address),
/// through `links`, until the runtime ends.
pub fn spawn(node: u64, listener: std::net::TcpListener, upstream: String, links: Arc<Links>) {
    listener.set_nonblocking(true).unwrap();
    let listener = TcpListener::from_std(listener).unwrap();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let (upstream, links) = (upstream.clone(), links.clone());
            tokio::spawn(async move {
                let _ = forward(node, inbound, &upstream, &links).await;
            });
        }
    });
}

/// The sender a request head names in `x-podstore-raft-source` (0: none).
fn source(head: &[u8]) -> u64 {
    String::from_utf8_lossy(head)
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("x-podstore-raft-source")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0)
}

async fn forward(
    node: u64,
    inbound: TcpStream,
    upstream: &str,
    links: &Links,
) -> std::io::Result<()> {
    inbound.set_nodelay(true)?;
    let (mut from_client, to_client) = inbound.into_split();
    // The first request's head, to learn the sender.
    let mut head = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 64 << 10 {
        let n = from_client.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    let sender = source(&head);
    let out = TcpStream::connect(upstream).await?;
    out.set_nodelay(true)?;
    let (from_node, mut to_node) = out.into_split();
    links.open(sender, node).await;
    to_node.write_all(&head).await?;
    let up = pipe(from_client, to_node, buf, links, sender, node);
    let down = pipe(
        from_node,
        to_client,
        vec![0u8; 64 << 10],
        links,
        node,
        sender,
    );
    let _ = tokio::join!(up, down);
    Ok(())
}

/// Copies `from` to `to` while the link (`sender`, `node`) is open; holds what it reads while
/// the link is cut.
async fn pipe(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut buf: Vec<u8>,
    links: &Links,
    sender: u64,
    node: u64,
) -> std::io::Result<()> {
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return to.shutdown().await;
        }
        links.open(sender, node).await;
        to.write_all(&buf[..n]).await?;
    }
}
