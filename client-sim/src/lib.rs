//! gatehouse-client-sim: simulated game clients.
//!
//! - [`session`]: one simulated client: a `gatehouse-client` session (every protocol duty is
//!   the library's) plus simulated streaming and restarts; it drives a [`client::Client`] (the
//!   example game) and feeds the session checks.
//! - [`misbehaving`]: a misbehaving client as a wrapper that rewrites a well-behaved session's
//!   outputs.
//! - [`client`]: the client's game side, sans-IO, where its layers are put together: the
//!   replication of server messages into the [`domain`] objects, each change announced on a
//!   `gatehouse_messaging` router ([`notifications`]); the feature [`adapters`] that listen there
//!   and publish facts into a `gatehouse_lifecycle` registry; the public [`gates`] and their
//!   dispatch; and the live [`checks`] of the gates' contract (docs/spec/gates.md) and of the
//!   session contract.
//! - [`swarm`]: the async shell running many sessions over real QUIC.
//! - [`report`]: what they saw, as text and JSON, from the [`figures`] every layer counts;
//!   [`interval`]: the swarm's figures over each interval of a long run.
//! - [`misbehaviour`]: which clients of a swarm misbehave and how (docs/testing.md, "Misbehaving
//!   clients"); the session and the swarm carry the kinds out, the report keeps those clients
//!   apart.
//!
//! Beside it, crates of their own: the network conditioner (`gatehouse-conditioner`, in process
//! in front of the swarm with `gatehouse-sim --impair`, or alone with `gatehouse-sim proxy`) and
//! the bare QUIC floor benchmark (`gatehouse-floor`).
//!
//! The layers, bottom to top; each module imports only from the lines above it (docs/spec/gates.md
//! G13: the domain knows neither the registry nor the router):
//!
//! | layer | modules | imports |
//! |---|---|---|
//! | foundation | [`ids`], [`figures`], [`misbehaviour`] | nothing of the crate |
//! | misbehaving | [`misbehaving`] | misbehaviour |
//! | interval figures | [`interval`] | figures |
//! | domain | [`domain`], [`notifications`] | `ids` |
//! | adapters | [`adapters`] (with the shared [`adapters::ClientState`] and the outbox) | domain, notifications, ids, figures |
//! | gates | [`gates`] (with the outbox pump) | adapters, domain, ids |
//! | checks | [`checks`] | gates, adapters, domain, notifications, ids, figures |
//! | game side | `replication`, [`client`] | all of the above |
//! | transport | [`session`] (over `gatehouse_client::Session`) | client, checks, figures, misbehaving |
//! | shell | [`swarm`], [`report`], [`wait`], the `gatehouse-sim` binary | session, figures |
//!
//! Replication writes the domain and announces; adapters read the domain and write the
//! registry; gates perform what the adapters' gate callbacks left in the outbox; checks read the
//! registry and the router and keep their own account. Nothing in the game side uses tokio or
//! reads a clock: time is passed in.

#![forbid(unsafe_code)]

pub mod adapters;
pub mod checks;
pub mod client;
pub mod domain;
pub mod figures;
mod game_side;
pub mod gates;
pub use gatehouse_client::gates::ids;
pub mod interval;
pub mod misbehaving;
pub mod misbehaviour;
pub mod notifications;
mod replication;
pub mod report;
pub mod session;
pub mod swarm;
pub mod timeline;
pub mod wait;

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
    /// `--server-fingerprint`: the server presents a certificate that does not match the pin
    /// (docs/simulator.md).
    #[error("server certificate pin: {0}")]
    Pin(String),
    /// The clients' thread or runtime could not be started, or ended without a result.
    #[error("client runtime: {0}")]
    Runtime(String),
    /// `--wait`: no server answered in time.
    #[error("no server answered at {server} within {limit:?} ({last})")]
    NoServer {
        /// Where it was asked.
        server: SocketAddr,
        /// How long it was waited for.
        limit: std::time::Duration,
        /// Why the last try failed.
        last: String,
    },
    /// The client socket could not be bound.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}
