//! `gatehouse-sim --wait`: wait until the server answers before the swarm starts
//! (docs/simulator.md), so a server started in the background a moment earlier is not a race. It
//! waits for the server's certificate file (a first start writes it) and then for one QUIC
//! handshake to complete, retrying every [`RETRY`], all within the limit.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use crate::SimError;
use crate::swarm::client_endpoint;

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
    let started = Instant::now();
    let deadline = started + limit;
    loop {
        let last = match try_once(server, server_name, server_cert, deadline).await {
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
    server_cert: &Path,
    deadline: Instant,
) -> Result<(), TryError> {
    if !server_cert.exists() {
        return Err(TryError::NotYet(format!("{} does not exist yet", server_cert.display())));
    }
    let (endpoint, config) = match client_endpoint(server, server_cert) {
        Ok(pair) => pair,
        // The file may be half-written by a server starting right now.
        Err(SimError::Certificate { why, .. }) => return Err(TryError::NotYet(why)),
        Err(e) => return Err(TryError::Fatal(e)),
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
            Err(TryError::Fatal(SimError::Certificate {
                path: server_cert.to_owned(),
                why: format!(
                    "the server at {server} presents a certificate it does not verify ({e})"
                ),
            }))
        }
        Ok(Err(e)) => Err(TryError::NotYet(format!("handshake failed: {e}"))),
        Err(_) => Err(TryError::NotYet("no handshake answer".into())),
    };
    endpoint.close(0u32.into(), b"");
    result
}
