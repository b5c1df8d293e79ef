//! gatehouse-server: the authoritative dedicated game server.
//!
//! - [`config`]: `server.toml` and `world.toml`, parsed once into checked types.
//! - [`game`]: the sans-IO authoritative core (`handle` / `poll_output` / `poll_timeout`).
//! - [`net`]: the QUIC endpoint, one task per connection, authentication.
//! - [`store`]: player and session saves, and the worker that runs them off the game task.
//! - [`admin`]: the operator HTTP endpoint (health, state, metrics, travel).
//! - `shell`: the one task that owns the [`game::Game`] and carries its outputs out.
//!
//! Data flows one way: net → game → outputs. [`Server`] is the whole server; the binary only
//! parses the CLI, loads config, installs tracing and calls [`Server::bind`] then
//! [`Server::run`].

#![forbid(unsafe_code)]

pub mod admin;
pub mod config;
pub mod game;
pub mod net;
mod shell;
pub mod store;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{CloseCode, NodeId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use config::{ServerConfig, WorldMap};
use game::{ConnectionId, Game, GameRules};
use net::{Admission, ConnectionContext, NetError};
pub use shell::GameHandle;
use store::{Store, StoreError, StoreHandle, StoreSettings, StoreWorker};

/// How long shutdown waits for connections to deliver their close, then for the endpoint.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Events queued for the game task before connection readers wait (backpressure).
const EVENT_QUEUE: usize = 8192;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A configuration file was refused.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The network shell could not start.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The player store could not be opened (the message names its URL, password redacted).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The admin endpoint could not bind.
    #[error("cannot bind the admin endpoint on TCP {addr}: {source}")]
    Admin {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    game: Game,
    context: Arc<ConnectionContext>,
    events: mpsc::Receiver<shell::ShellEvent>,
    store: Store,
    store_handle: StoreHandle,
    store_task: tokio::task::JoinHandle<()>,
    store_drain: Duration,
    session: String,
    admin: Option<admin::AdminListener>,
    nodes: BTreeSet<NodeId>,
    admission: Admission,
    max_frame_len: usize,
}

impl Server {
    /// Opens the store (running its migrations), loads the certificate, binds the endpoint
    /// and the admin endpoint, and builds the game core (which asks for the session save and
    /// starts its boot travel).
    ///
    /// # Errors
    /// [`ServerError`] naming what could not be opened or bound.
    pub async fn bind(config: &ServerConfig, world: WorldMap) -> Result<Server, ServerError> {
        if config.auth.is_development_key() {
            tracing::warn!(
                "auth.token_key is the shipped development key: anyone can mint tokens; set your own key for production"
            );
        }
        let network = &config.network;
        // Ports first: a port in use fails the start before anything is written to disk.
        let socket = net::bind_socket(network.bind, network.udp_buffer_bytes)?;
        let admin = match config.admin.enabled {
            true => Some(
                admin::bind(&config.admin)
                    .await
                    .map_err(|source| ServerError::Admin { addr: config.admin.bind, source })?,
            ),
            false => None,
        };
        let identity = net::tls::load_identity(&config.tls, &config.data_dir)?;
        let (origin, fingerprint) = (identity.origin.clone(), identity.fingerprint());
        let server_config = net::server_config(identity, network)?;
        tracing::info!(certificate = %origin.display(), %fingerprint, "certificate accepted");
        let endpoint = net::server_endpoint(socket, network.bind, server_config)?;
        let store = Store::open(&config.store.url, &config.data_dir).await?;
        tracing::info!(store = %store.location(), "player store open");
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (store_handle, store_task) = StoreWorker::spawn(
            store.clone(),
            StoreSettings::from(&config.store),
            events_tx.clone(),
            shell::ShellEvent::Store,
        );
        let context = Arc::new(ConnectionContext {
            token_key: TokenKey::new(config.auth.token_key.as_bytes()),
            max_frame_len: network.max_frame_len,
            hello_timeout: network.hello_timeout,
            send_queue_frames: network.send_queue_frames,
            events: events_tx,
            draining: CancellationToken::new(),
        });
        let nodes = world.nodes.iter().map(|n| n.id.clone()).collect();
        let rules = GameRules::from_config(&config.game, network.max_players);
        let game = Game::new(rules, Arc::new(world), tokio::time::Instant::now().into_std());
        Ok(Server {
            endpoint,
            game,
            context,
            events,
            store,
            store_handle,
            store_task,
            store_drain: config.store.drain_timeout,
            session: config.store.session.clone(),
            admin,
            nodes,
            admission: Admission::new(network.max_pending_connections, network.max_pending_per_ip),
            max_frame_len: network.max_frame_len,
        })
    }

    /// The bound UDP address (useful with port 0).
    ///
    /// # Errors
    /// The OS error if the socket address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.endpoint.local_addr()
    }

    /// The bound admin address, if the admin endpoint is enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// A handle to ask the running game for a snapshot or a travel.
    pub fn handle(&self) -> GameHandle {
        GameHandle { events: self.context.events.clone() }
    }

    /// Serves until `shutdown` is cancelled, then drains:
    /// 1. the game saves every player and the session, and closes every connection with
    ///    `ShuttingDown` through its writer;
    /// 2. connections get a bounded time to deliver their close;
    /// 3. the store gets a bounded time to finish pending saves, then closes;
    /// 4. the endpoint closes and waits (bounded) until the peers know.
    pub async fn run(self, shutdown: CancellationToken) {
        let Server {
            endpoint,
            game,
            context,
            events,
            store,
            store_handle,
            store_task,
            store_drain,
            session,
            admin,
            nodes,
            admission,
            max_frame_len,
        } = self;
        match endpoint.local_addr() {
            Ok(addr) => tracing::info!(%addr, "listening"),
            Err(e) => tracing::warn!(error = %e, "listening on an address the OS will not name"),
        }
        let admin_task = admin.map(|listener| {
            let game = GameHandle { events: context.events.clone() };
            tokio::spawn(admin::serve(listener, game, nodes, shutdown.clone()))
        });
        let effects = shell::Effects {
            events: context.events.clone(),
            store: store_handle.clone(),
            session,
            max_frame_len,
        };
        let game_task = tokio::spawn(shell::run_game(game, events, effects, shutdown.clone()));
        let connections = TaskTracker::new();
        let next_id = AtomicU64::new(1);
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
            let id = ConnectionId(next_id.fetch_add(1, Ordering::Relaxed));
            let context = context.clone();
            let span =
                tracing::info_span!("connection", id = id.0, remote = %incoming.remote_address());
            connections.spawn(tracing::Instrument::instrument(
                async move {
                    // One deadline, from accept, for the handshake, the stream and the Hello: a
                    // pending slot is held at most one hello timeout.
                    let deadline = tokio::time::Instant::now() + context.hello_timeout;
                    match tokio::time::timeout_at(deadline, incoming).await {
                        Ok(Ok(connection)) => {
                            net::serve_connection(connection, id, context, slot, deadline).await
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "handshake failed"),
                        Err(_) => {
                            tracing::debug!("handshake not finished within the hello timeout")
                        }
                    }
                },
                span,
            ));
        }
        context.draining.cancel();
        let _ = game_task.await;
        connections.close();
        drop(context);
        if tokio::time::timeout(DRAIN_TIMEOUT, connections.wait()).await.is_err() {
            tracing::warn!("connections still open after the drain timeout; closing the endpoint");
        }
        let left = store_handle.drain(store_drain).await;
        tracing::info!(left, "store drained");
        drop(store_handle);
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, store_task).await;
        store.close().await;
        if let Some(mut task) = admin_task {
            // An admin client that never finishes its request must not hold the process.
            if tokio::time::timeout(DRAIN_TIMEOUT, &mut task).await.is_err() {
                tracing::warn!("admin endpoint still busy after the drain timeout; stopping it");
                task.abort();
            }
        }
        endpoint.close(
            quinn::VarInt::from_u32(CloseCode::ShuttingDown.code()),
            CloseCode::ShuttingDown.reason().as_bytes(),
        );
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, endpoint.wait_idle()).await;
        tracing::info!("stopped");
    }
}
