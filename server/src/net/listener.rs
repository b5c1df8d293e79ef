//! The accept loop: which incoming connections get a task, and how long they may take to log in.
//!
//! For each incoming connection, in order:
//! 1. an address not yet proven gets a stateless retry (no state kept), so spoofed packets
//!    cannot take pending slots;
//! 2. it needs a pending slot ([`Admission`]: per server and per address), or it is refused;
//! 3. it gets a [`ConnectionId`], never reused within the process, and its own task;
//! 4. the handshake timeout, counted from accept, bounds its QUIC handshake; then the hello
//!    timeout, counted from the handshake's end, bounds its stream and its `Hello` (separate
//!    budgets: a handshake slowed by loss does not eat the `Hello`'s).
//!
//! When accepting stops, every connection that has not logged in is closed with
//! `ShuttingDown` and a `Hello` still to come is refused; logged-in connections are closed by
//! the game task.

use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::token::TokenKey;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::admission::Admission;
use super::connection::{ConnectionContext, serve_connection};
use super::event::ConnectionEvent;
use crate::config::NetworkConfig;
use crate::game::ConnectionId;
use crate::metrics::{CloseSide, NetMetrics};

/// Accepts connections and starts their tasks; see the module doc.
#[derive(Debug)]
pub(crate) struct Listener {
    context: Arc<ConnectionContext>,
    admission: Admission,
}

/// The tasks of the connections a [`Listener`] accepted.
#[derive(Debug)]
pub(crate) struct Connections {
    tasks: TaskTracker,
}

impl Listener {
    /// A listener for connections under `network` (its pending caps, hello timeout, frame
    /// limit and send queue), authenticated with `token_key`, whose tasks report to `events`
    /// and count closes, refusals and pending connections in `metrics`.
    pub(crate) fn new(
        network: &NetworkConfig,
        token_key: TokenKey,
        events: mpsc::Sender<ConnectionEvent>,
        metrics: NetMetrics,
    ) -> Self {
        let admission = Admission::new(
            network.max_pending_connections,
            network.max_pending_per_ip,
            metrics.clone(),
        );
        Listener {
            context: Arc::new(ConnectionContext::new(token_key, network, events, metrics)),
            admission,
        }
    }

    /// Accepts connections on `endpoint` until `shutdown` is cancelled or the endpoint closes;
    /// then closes every connection that has not logged in and refuses later `Hello`s. Returns
    /// the connection tasks, still running.
    pub(crate) async fn accept_until(
        self,
        endpoint: &quinn::Endpoint,
        shutdown: &CancellationToken,
    ) -> Connections {
        let Listener { context, admission } = self;
        let tasks = TaskTracker::new();
        let mut next_id = 1;
        loop {
            let incoming = tokio::select! {
                _ = shutdown.cancelled() => break,
                incoming = endpoint.accept() => incoming,
            };
            let Some(incoming) = incoming else { break };
            // Prove the address first (a stateless retry) so spoofed packets cannot take slots.
            if !incoming.remote_address_validated() {
                let _ = incoming.retry();
                continue;
            }
            let Some(slot) = admission.admit(incoming.remote_address().ip()) else {
                incoming.refuse();
                continue;
            };
            let id = ConnectionId(next_id);
            next_id += 1;
            let context = context.clone();
            let span =
                tracing::info_span!("connection", id = id.0, remote = %incoming.remote_address());
            // Accepted here, not in the task: a task keeps what it captured for as long as it
            // lives, and an `Incoming` is 384 bytes where the handshake it becomes is 32 (issue
            // 12 item 7).
            let connecting = match incoming.accept() {
                Ok(connecting) => connecting,
                Err(e) => {
                    span.in_scope(|| tracing::debug!(error = %e, "handshake failed"));
                    continue;
                }
            };
            tasks.spawn(tracing::Instrument::instrument(
                async move {
                    // A pending slot is held at most one handshake timeout plus one hello
                    // timeout.
                    match tokio::time::timeout(context.handshake_timeout, connecting).await {
                        Ok(Ok(connection)) => {
                            let hello_deadline =
                                tokio::time::Instant::now() + context.hello_timeout;
                            let watched = connection.clone();
                            let metrics = context.metrics.clone();
                            serve_connection(connection, id, context, slot, hello_deadline).await;
                            count_client_close(&metrics, &watched);
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "handshake failed"),
                        Err(_) => {
                            tracing::debug!("handshake not finished within the handshake timeout")
                        }
                    }
                },
                span,
            ));
        }
        context.draining.cancel();
        tasks.close();
        Connections { tasks }
    }
}

/// Counts a connection the client closed (or that timed out) once its task ended; one the
/// server closed was counted as it closed it. A connection still open when its task ends (the
/// task saw the client's `Leave` or its finished stream, and the close is still on its way) is
/// counted when it closes, by a task that waits for that: every connection is counted once.
fn count_client_close(metrics: &NetMetrics, connection: &quinn::Connection) {
    match connection.close_reason() {
        Some(reason) => count_reason(metrics, &reason),
        None => {
            let (metrics, connection) = (metrics.clone(), connection.clone());
            tokio::spawn(async move {
                let reason = connection.closed().await;
                count_reason(&metrics, &reason);
            });
        }
    }
}

/// Counts a close the client made, or a timeout; the server's own closes are counted by
/// `close`.
fn count_reason(metrics: &NetMetrics, reason: &quinn::ConnectionError) {
    use quinn::ConnectionError;
    match reason {
        ConnectionError::LocallyClosed => {}
        ConnectionError::ApplicationClosed(close) => {
            match gatehouse_protocol::CloseCode::from_code(close.error_code.into_inner()) {
                Some(code) => metrics.count_close(code, CloseSide::Client),
                None => metrics.count_close_named("other", CloseSide::Client),
            }
        }
        ConnectionError::TimedOut => metrics.count_close_named("timed_out", CloseSide::Client),
        _ => metrics.count_close_named("other", CloseSide::Client),
    }
}

impl Connections {
    /// Waits up to `timeout` for every connection task to end (each has delivered its close or
    /// given up); false if some are still running.
    pub(crate) async fn wait(self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.tasks.wait()).await.is_ok()
    }
}
