//! `gatehouse-sim --wait`: wait until the server answers before the swarm starts
//! (docs/simulator.md), so a server started in the background a moment earlier is not a race. It
//! waits for the server's certificate file (a first start writes it) and then for one QUIC
//! handshake to complete, retrying every [`RETRY`], all within the limit. A client pinned to
//! the server's fingerprint (`--server-fingerprint`) reads no file and waits for the handshake
//! only.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_client::CertificatePin;
use tokio::time::Instant;

use crate::SimError;
use crate::swarm::{bind_client_endpoint, client_endpoint, swarm_client_config};

/// Between two tries.
pub const RETRY: Duration = Duration::from_millis(200);

/// Waits, at most `limit`, until the server at `server` (TLS name `server_name`) completes a
/// QUIC handshake with a client that trusts `server_cert`; the connection is then closed with
/// code 0 before any `Hello`. Returns how long it waited.
///
/// # Errors
/// [`SimError::NoServer`] naming the address, the limit and the last reason, when nothing
/// answered in time; [`SimError::Certificate`] at once when the server answers with a
/// certificate `server_cert` does not verify; [`SimError::Bind`] if no client socket can be
/// bound.
pub async fn wait_for_server(
    server: SocketAddr,
    server_name: &str,
    server_cert: &Path,
    limit: Duration,
) -> Result<Duration, SimError> {
    wait(server, server_name, Trusting::File(server_cert), limit).await
}

/// As [`wait_for_server`], for a client that trusts exactly the certificate `pin` names: no
/// file is waited for, only the handshake.
///
/// # Errors
/// [`SimError::NoServer`] as [`wait_for_server`]; [`SimError::Pin`] at once when the server
/// answers with a certificate that does not match the pin; [`SimError::Tls`] if TLS cannot be
/// set up; [`SimError::Bind`] if no client socket can be bound.
pub async fn wait_for_pinned_server(
    server: SocketAddr,
    server_name: &str,
    pin: CertificatePin,
    limit: Duration,
) -> Result<Duration, SimError> {
    wait(server, server_name, Trusting::Pin(pin), limit).await
}

/// What the waiting client trusts.
#[derive(Clone, Copy)]
enum Trusting<'a> {
    /// A certificate file, which a starting server may not have written yet.
    File(&'a Path),
    /// A fingerprint.
    Pin(CertificatePin),
}

async fn wait(
    server: SocketAddr,
    server_name: &str,
    trusting: Trusting<'_>,
    limit: Duration,
) -> Result<Duration, SimError> {
    let started = Instant::now();
    let deadline = started + limit;
    loop {
        let last = match try_once(server, server_name, trusting, deadline).await {
            Ok(()) => return Ok(started.elapsed()),
            Err(TryError::Fatal(e)) => return Err(e),
            Err(TryError::NotYet(why)) => why,
        };
        if Instant::now() + RETRY >= deadline {
            return Err(SimError::NoServer { server, limit, last });
        }
        tokio::time::sleep(RETRY).await;
    }
}

enum TryError {
    /// Worth another try: the certificate is not written yet, or the handshake failed.
    NotYet(String),
    /// No try can succeed.
    Fatal(SimError),
}

async fn try_once(
    server: SocketAddr,
    server_name: &str,
    trusting: Trusting<'_>,
    deadline: Instant,
) -> Result<(), TryError> {
    let (endpoint, config) = match trusting {
        Trusting::File(server_cert) => {
            if !server_cert.exists() {
                let why = format!("{} does not exist yet", server_cert.display());
                return Err(TryError::NotYet(why));
            }
            match client_endpoint(server, server_cert) {
                Ok(pair) => pair,
                // The file may be half-written by a server starting right now.
                Err(SimError::Certificate { why, .. }) => return Err(TryError::NotYet(why)),
                Err(e) => return Err(TryError::Fatal(e)),
            }
        }
        Trusting::Pin(pin) => {
            let config =
                swarm_client_config(Path::new(""), &[], Some(pin)).map_err(TryError::Fatal)?;
            let endpoint = bind_client_endpoint(server, Arc::new(quinn::TokioRuntime))
                .map_err(TryError::Fatal)?;
            (endpoint, config)
        }
    };
    let connecting = endpoint
        .connect_with(config, server, server_name)
        .map_err(|e| TryError::NotYet(format!("cannot connect: {e}")))?;
    // A try never outlives the whole wait, and one lost handshake does not eat all of it.
    let attempt = deadline.min(Instant::now() + Duration::from_secs(2));
    let result = match tokio::time::timeout_at(attempt, connecting).await {
        Ok(Ok(connection)) => {
            connection.close(0u32.into(), b"waited");
            Ok(())
        }
        // The server answered, with a certificate this one does not verify: waiting longer
        // cannot fix that (a certificate from another data dir, or another server).
        Ok(Err(e)) if e.to_string().contains("invalid peer certificate") => {
            let why =
                format!("the server at {server} presents a certificate it does not verify ({e})");
            Err(TryError::Fatal(match trusting {
                Trusting::File(server_cert) => {
                    SimError::Certificate { path: server_cert.to_owned(), why }
                }
                Trusting::Pin(_) => SimError::Pin(why),
            }))
        }
        Ok(Err(e)) => Err(TryError::NotYet(format!("handshake failed: {e}"))),
        Err(_) => Err(TryError::NotYet("no handshake answer".into())),
    };
    endpoint.close(0u32.into(), b"");
    result
}
