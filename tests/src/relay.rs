//! A UDP relay on loopback that slows one QUIC handshake down: it passes the client's first
//! datagrams (its Initial, and its Initial again with the server's Retry token: the server
//! accepts the connection on that one), then holds every later client datagram (the ones that
//! finish the handshake, and their retransmissions) for a while before passing them all on.
//! Server datagrams always pass at once. One client per relay.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::time::Instant;

/// A running relay; it stops when dropped.
#[derive(Debug)]
pub struct HandshakeRelay {
    /// Where the client connects.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl HandshakeRelay {
    /// Relays to `server`, passing the client's first `pass` datagrams and holding the ones
    /// after them for `hold` from the first one held.
    pub async fn start(server: SocketAddr, pass: usize, hold: Duration) -> HandshakeRelay {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let front = Arc::new(UdpSocket::bind(loopback).await.expect("a relay socket"));
        let back = Arc::new(UdpSocket::bind(loopback).await.expect("a relay socket"));
        back.connect(server).await.expect("the server address");
        let addr = front.local_addr().expect("the relay address");
        let task = tokio::spawn(relay(front, back, pass, hold));
        HandshakeRelay { addr, task }
    }
}

impl Drop for HandshakeRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(front: Arc<UdpSocket>, back: Arc<UdpSocket>, pass: usize, hold: Duration) {
    let (mut from_client, mut from_server) = (vec![0u8; 65536], vec![0u8; 65536]);
    let mut client: Option<SocketAddr> = None;
    let (mut passed, mut held): (usize, Vec<Vec<u8>>) = (0, Vec::new());
    let mut release: Option<Instant> = None;
    loop {
        let release_at = release.filter(|_| !held.is_empty());
        tokio::select! {
            received = front.recv_from(&mut from_client) => {
                let Ok((len, peer)) = received else { return };
                client = Some(peer);
                let datagram = &from_client[..len];
                let released = release.is_some_and(|at| Instant::now() >= at);
                if passed < pass || released {
                    passed += 1;
                    let _ = back.send(datagram).await;
                } else {
                    release.get_or_insert_with(|| Instant::now() + hold);
                    held.push(datagram.to_vec());
                }
            }
            received = back.recv(&mut from_server) => {
                let Ok(len) = received else { return };
                if let Some(client) = client {
                    let _ = front.send_to(&from_server[..len], client).await;
                }
            }
            () = async {
                match release_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            } => {
                for datagram in held.drain(..) {
                    let _ = back.send(&datagram).await;
                }
            }
        }
    }
}
