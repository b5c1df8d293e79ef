//! The network side: the QUIC endpoint, the accept loop and one task per connection.
//!
//! | file | owns |
//! |---|---|
//! | `endpoint` | transport parameters, TLS 1.3 configuration, the UDP socket and the endpoint |
//! | `driver` | the thread quinn's drivers run on, apart from the game and the connection tasks |
//! | `tls` | the server certificate (configured, or a development one in the data dir) |
//! | `listener` | the accept loop: stateless retry, pending-connection caps, connection ids, the handshake and hello budgets, pre-login connections closed on drain |
//! | `admission` | the pending-connection counts behind those caps |
//! | `connection` | one connection's task: authenticate its `Hello`, read frames up, write frames down |
//! | `event` | what crosses to the game task (`ConnectionEvent`) and back (`Outbound`) |
//!
//! Data flows one way: connection tasks send `ConnectionEvent`s up the channel whose sender
//! the `Listener` is given; the game task owns the core and sends encoded frames down each
//! logged-in connection's `Outbound` queue. Nothing here imports the game task or feeds the
//! core (the one game type used is `ConnectionId`); connection tasks own only their streams and
//! buffers, never game state. Bad bytes from a peer close only that peer's connection, with a
//! reason naming the error.

mod admission;
mod connection;
mod driver;
mod endpoint;
mod event;
mod listener;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;

pub(crate) use connection::close;
pub use driver::DriverThread;
pub use endpoint::{
    CONNECTION_ID_LEN, bind_socket, endpoint_config, server_config, server_endpoint,
    transport_config,
};
pub(crate) use event::{ConnectionEvent, QueueError, SendQueue};
#[cfg(test)]
pub(crate) use event::{Outbound, SendQueueRx, send_queue};
pub(crate) use listener::Listener;

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
    /// The thread for quinn's drivers could not be started.
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
