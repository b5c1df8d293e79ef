//! The endpoint's UDP socket: datagrams in by the batch (with the kernel's receive offload),
//! datagrams out by the send (with its segmentation offload), through quinn's UDP layer.
//!
//! It owns no QUIC state and never waits: [`UdpSocket::recv`] and [`UdpSocket::send`] answer
//! `WouldBlock` and the caller awaits [`UdpSocket::readable`] or [`UdpSocket::writable`].

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;

use bytes::BytesMut;
use quinn::udp::{BATCH_SIZE, EcnCodepoint, RecvMeta, Transmit, UdpSocketState};
use tokio::io::Interest;

/// Largest UDP payload read into one receive buffer per datagram the kernel coalesced.
const MAX_UDP_PAYLOAD: usize = 1500;

/// A datagram that arrived.
#[derive(Debug)]
pub(super) struct Datagram {
    /// Who sent it.
    pub(super) remote: SocketAddr,
    /// The local address it came to, where the kernel says.
    pub(super) local_ip: Option<std::net::IpAddr>,
    /// Its ECN marking.
    pub(super) ecn: Option<quinn_proto::EcnCodepoint>,
    /// Its bytes.
    pub(super) data: BytesMut,
}

/// The endpoint's socket and the receive buffers it reads a batch into.
#[derive(Debug)]
pub(super) struct UdpSocket {
    io: tokio::net::UdpSocket,
    state: UdpSocketState,
    /// `BATCH_SIZE` buffers of `gro_segments` datagrams each, one allocation.
    buffer: Vec<u8>,
    /// Bytes per receive buffer.
    slot: usize,
    /// Most datagrams one send may carry (segmentation offload), at least 1.
    max_segments: usize,
}

impl UdpSocket {
    /// Wraps `socket` (bound already, by [`super::bind_socket`]) for the current tokio runtime;
    /// sends carry at most `segments` datagrams (at least 1, at most what the kernel offers).
    ///
    /// # Errors
    /// The OS error when the socket cannot be made non-blocking or registered.
    pub(super) fn new(socket: std::net::UdpSocket, segments: usize) -> io::Result<UdpSocket> {
        socket.set_nonblocking(true)?;
        let state = UdpSocketState::new((&socket).into())?;
        let io = tokio::net::UdpSocket::from_std(socket)?;
        let slot = MAX_UDP_PAYLOAD * state.gro_segments().max(1);
        let max_segments = segments.clamp(1, state.max_gso_segments().max(1));
        Ok(UdpSocket { io, state, buffer: vec![0; slot * BATCH_SIZE], slot, max_segments })
    }

    /// The bound address.
    ///
    /// # Errors
    /// The OS error.
    pub(super) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.io.local_addr()
    }

    /// Most datagrams one transmit may carry.
    pub(super) fn max_segments(&self) -> usize {
        self.max_segments
    }

    /// Whether the kernel may fragment what is sent (then path MTU discovery is off).
    pub(super) fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    /// Waits until a receive may succeed.
    pub(super) async fn readable(&self) -> io::Result<()> {
        self.io.readable().await
    }

    /// Waits until a send may succeed.
    pub(super) async fn writable(&self) -> io::Result<()> {
        self.io.writable().await
    }

    /// Reads one batch of datagrams into `out`, split where the kernel coalesced several;
    /// `WouldBlock` when none is waiting.
    ///
    /// # Errors
    /// The OS error (`WouldBlock` included).
    pub(super) fn recv(&mut self, out: &mut Vec<Datagram>) -> io::Result<()> {
        let mut meta = [RecvMeta::default(); BATCH_SIZE];
        let UdpSocket { io, state, buffer, slot, .. } = self;
        let io = &*io;
        let mut bufs: Vec<IoSliceMut<'_>> = buffer.chunks_mut(*slot).map(IoSliceMut::new).collect();
        let count =
            io.try_io(Interest::READABLE, || state.recv(io.into(), &mut bufs, &mut meta))?;
        for (meta, buf) in meta.iter().zip(bufs.iter()).take(count) {
            let mut data = BytesMut::from(&buf[..meta.len.min(buf.len())]);
            let stride = meta.stride.max(1);
            while !data.is_empty() {
                let datagram = data.split_to(stride.min(data.len()));
                out.push(Datagram {
                    remote: meta.addr,
                    local_ip: meta.dst_ip,
                    ecn: meta.ecn.and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8)),
                    data: datagram,
                });
            }
        }
        Ok(())
    }

    /// Sends `transmit`, whose bytes are `contents`; `WouldBlock` when the socket is full.
    ///
    /// # Errors
    /// The OS error (`WouldBlock` included).
    pub(super) fn send(&self, transmit: &quinn_proto::Transmit, contents: &[u8]) -> io::Result<()> {
        let udp = Transmit {
            destination: transmit.destination,
            ecn: transmit.ecn.and_then(|e| EcnCodepoint::from_bits(e as u8)),
            contents,
            segment_size: transmit.segment_size,
            src_ip: transmit.src_ip,
        };
        self.io.try_io(Interest::WRITABLE, || self.state.try_send((&self.io).into(), &udp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Datagrams sent to the socket come out of one receive, each whole, with their sender;
    /// a receive with nothing waiting is `WouldBlock`.
    #[tokio::test]
    async fn datagrams_arrive_whole_with_their_sender() {
        let bound = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut socket = UdpSocket::new(bound, 10).unwrap();
        let mut out = Vec::new();
        assert_eq!(socket.recv(&mut out).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = socket.local_addr().unwrap();
        for payload in [&b"one"[..], b"two", b"three"] {
            peer.send_to(payload, to).unwrap();
        }
        let mut got = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < 3 {
            tokio::time::timeout_at(deadline, socket.readable()).await.unwrap().unwrap();
            match socket.recv(&mut out) {
                Ok(()) => got.append(&mut out),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        let payloads: Vec<&[u8]> = got.iter().map(|d| &d.data[..]).collect();
        assert_eq!(payloads, [&b"one"[..], b"two", b"three"]);
        assert!(got.iter().all(|d| d.remote == peer.local_addr().unwrap()));
    }

    /// A transmit goes to its destination; at most the configured segments per send, never
    /// fewer than one.
    #[tokio::test]
    async fn a_transmit_reaches_its_destination() {
        let socket = UdpSocket::new(std::net::UdpSocket::bind("127.0.0.1:0").unwrap(), 0).unwrap();
        assert_eq!(socket.max_segments(), 1);
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let transmit = quinn_proto::Transmit {
            destination: peer.local_addr().unwrap(),
            ecn: None,
            size: 5,
            segment_size: None,
            src_ip: None,
        };
        socket.writable().await.unwrap();
        socket.send(&transmit, b"hello").unwrap();
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let mut buf = [0; 16];
        let (len, from) = peer.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..len], from), (&b"hello"[..], socket.local_addr().unwrap()));
    }
}
