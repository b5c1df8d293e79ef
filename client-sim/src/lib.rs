//! gatehouse-client-sim: simulated game clients.
//!
//! - [`session`]: one client's transport duties as a sans-IO state machine following the
//!   server's transitions; it drives a [`client::Client`].
//! - [`client`]: the client's game side, sans-IO: the replication of server messages into
//!   the [`domain`] objects, each change announced on a `gatehouse_messaging` router
//!   ([`notifications`]); the feature [`adapters`] that listen there and publish facts into a
//!   `gatehouse_lifecycle` registry; the public [`gates`]; and the live [`checks`] of seed 000's
//!   runtime expectations.
//! - [`swarm`]: the async shell running many sessions over real QUIC.
//! - [`report`]: what they saw, as text and JSON.
//!
//! The dependency direction is one way (seed 000, "System boundary"): the domain knows neither
//! the registry nor the router; replication writes the domain and announces; adapters read the
//! domain and write the registry; gates and checks read the registry and the router. Nothing in
//! the game side uses tokio or reads a clock: time is passed in.

#![forbid(unsafe_code)]

pub mod adapters;
pub mod checks;
pub mod client;
pub mod core;
mod dispatch;
pub mod domain;
pub mod gates;
pub mod ids;
pub mod notifications;
mod replication;
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
    /// The clients' thread or runtime could not be started, or ended without a result.
    #[error("client runtime: {0}")]
    Runtime(String),
    /// The client socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}
