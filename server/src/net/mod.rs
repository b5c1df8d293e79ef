//! The network side: the UDP socket, the QUIC endpoint and every connection, driven by one task
//! on the network's own thread (quinn-proto's state machines, without quinn's per-connection
//! tasks, which cost memory per idle client).
//!
//! | file | owns |
//! |---|---|
//! | `endpoint` | transport parameters, TLS 1.3 configuration (ALPN `gatehouse/1`, and the peer link's `gatehouse-fleet/1` in a fleet), connection ids, the UDP socket's buffers |
//! | `socket` | the UDP socket: batched receive (GRO), segmented send (GSO), ECN |
//! | `driver` | the thread the network runs on, apart from the game task |
//! | `network` | the driver task: datagrams to connections, timers, admission (stateless retry, pending-connection caps, connection ids), transmits out, events to the game |
//! | `admission` | the pending-connection counts behind those caps |
//! | `connection` | one connection: the handshake and hello budgets, its `Hello` (or a peer link's first message and TLS exporter value), frames read up, frames written down, its close |
//! | `tls` | the server certificate (configured, or a development one in the data dir) |
//! | `fuzzing` | (the `fuzzing` feature) one client against the driver over an in-memory wire, for the fuzz target |
//! | `event` | what crosses to the game task (`ConnectionEvent`, a peer link's `PeerConnectionEvent`) and back (`SendQueue`, its doorbell) |
//!
//! Data flows one way: the driver sends `ConnectionEvent`s up the channel whose sender the
//! `Network` is given; the game task owns the core and queues encoded frames on each logged-in
//! connection's `SendQueue`, which rings the driver. Nothing here imports the game task or feeds
//! the core (the one game type used is `ConnectionId`); the driver owns only the QUIC state and
//! buffers, never game state. Bad bytes from a peer close only that peer's connection, with a
//! reason naming the error.
//!
//! Another server of the fleet dials the same port with the peer link's ALPN
//! (docs/spec/travel.md V14): its connection is reported as `ConnectionEvent::Peer`, with its TLS
//! exporter value, never as a login; the fleet's peer module (`crate::fleet`) checks its proof
//! with the fleet key, which the driver never holds.

mod admission;
mod connection;
mod driver;
mod endpoint;
mod event;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod metrics;
mod network;
mod socket;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use connection::HelloCheck;
pub use driver::DriverThread;
pub use endpoint::{
    CONNECTION_ID_LEN, bind_socket, endpoint_config, server_config, transport_config,
};
pub(crate) use event::{ConnectionEvent, PeerConnectionEvent, QueueError, SendQueue};
#[cfg(test)]
pub(crate) use event::{Outbound, QueueKey, SendQueueRx, test_queue};
#[cfg(test)]
pub(crate) use metrics::ALL_CLOSE_CODES;
pub use metrics::{CloseSide, NetMetrics, QuicSample, RTT_BUCKETS, close_code_name};
pub(crate) use network::Network;

/// Why the network side could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetError {
    /// A certificate or key file (or the data dir holding the development ones) could not be
    /// read, parsed, generated or written.
    #[error("TLS file {path}: {why}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// TLS configuration was refused (e.g. the key does not match the certificate).
    #[error("TLS configuration refused: {0}")]
    Tls(String),
    /// The network's thread could not be started.
    #[error("cannot start the QUIC driver thread: {0}")]
    DriverThread(std::io::Error),
    /// The UDP socket could not be created or bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}
