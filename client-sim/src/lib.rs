//! gatehouse-client-sim: simulated game clients.
//!
//! - [`session`]: one client as a sans-IO state machine following the server's transitions.
//! - [`swarm`]: the async shell running many sessions over real QUIC.
//! - [`report`]: what they saw, as text and JSON.

#![forbid(unsafe_code)]

pub mod report;
pub mod session;
pub mod swarm;

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// The server certificate could not be read or trusted.
    #[error("server certificate {path}: {why}")]
    Certificate {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// TLS setup failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The client socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}
