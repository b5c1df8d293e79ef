//! gatehouse-server: the authoritative dedicated game server.
//!
//! - [`config`]: `server.toml` and `world.toml`, parsed once into checked types.
//! - [`game`]: the sans-IO authoritative core (`handle` / `poll_output` / `poll_timeout`).
//! - [`net`]: the QUIC endpoint, one task per connection, authentication.
//! - `shell`: the one task that owns the [`game::Game`] and carries its outputs out.
//!
//! Data flows one way: net → game → outputs. [`Server`] is the whole server; the binary only
//! parses the CLI, loads config, installs tracing and calls [`Server::bind`] then
//! [`Server::run`].

#![forbid(unsafe_code)]

pub mod config;
pub mod game;
pub mod net;
pub mod store;
mod shell;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use gatehouse_protocol::CloseCode;
use gatehouse_protocol::token::TokenKey;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use config::{ServerConfig, WorldMap};
use game::{ConnectionId, Game, GameRules};
use net::{ConnectionContext, NetError};
pub use shell::GameHandle;

/// Connections allowed to be handshaking beyond the player cap before new ones are refused at
/// the QUIC level.
const HANDSHAKE_SLACK: usize = 64;

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
}

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    game: Game,
    context: Arc<ConnectionContext>,
    events: mpsc::Receiver<shell::ShellEvent>,
    max_players: usize,
    max_frame_len: usize,
}

impl Server {
    /// Loads the certificate, binds the endpoint and builds the game core (which starts its
    /// boot travel).
    ///
    /// # Errors
    /// [`ServerError::Net`] if the certificate cannot be loaded or the address cannot be bound.
    pub fn bind(config: &ServerConfig, world: WorldMap) -> Result<Server, ServerError> {
        if config.auth.is_development_key() {
            tracing::warn!(
                "auth.token_key is the shipped development key: anyone can mint tokens; set your own key for production"
            );
        }
        let network = &config.network;
        let identity = net::tls::load_identity(&config.tls, &config.data_dir)?;
        let server_config = net::server_config(identity, network)?;
        let endpoint = net::server_endpoint(network.bind, network.udp_buffer_bytes, server_config)?;
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let context = Arc::new(ConnectionContext {
            token_key: TokenKey::new(config.auth.token_key.as_bytes()),
            max_frame_len: network.max_frame_len,
            hello_timeout: network.hello_timeout,
            send_queue_frames: network.send_queue_frames,
            events: events_tx,
        });
        let rules = GameRules::from_config(&config.game, network.max_players);
        let game = Game::new(
            rules,
            Arc::new(world),
            tokio::time::Instant::now().into_std(),
        );
        Ok(Server {
            endpoint,
            game,
            context,
            events,
            max_players: network.max_players,
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

    /// A handle to ask the running game for its counters or a travel.
    pub fn handle(&self) -> GameHandle {
        GameHandle {
            events: self.context.events.clone(),
        }
    }

    /// Serves until `shutdown` is cancelled, then drains: every connection is closed with
    /// `ShuttingDown` and the endpoint waits (bounded) until the peers know.
    pub async fn run(self, shutdown: CancellationToken) {
        let Server {
            endpoint,
            game,
            context,
            events,
            max_players,
            max_frame_len,
        } = self;
        match endpoint.local_addr() {
            Ok(addr) => tracing::info!(%addr, "listening"),
            Err(e) => tracing::warn!(error = %e, "listening on an address the OS will not name"),
        }
        let game_task = tokio::spawn(shell::run_game(
            game,
            events,
            context.events.clone(),
            max_frame_len,
            shutdown.clone(),
        ));
        let connections = TaskTracker::new();
        let slots = Arc::new(Semaphore::new(max_players + HANDSHAKE_SLACK));
        let next_id = AtomicU64::new(1);
        loop {
            let incoming = tokio::select! {
                _ = shutdown.cancelled() => break,
                incoming = endpoint.accept() => incoming,
            };
            let Some(incoming) = incoming else { break };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(remote = %incoming.remote_address(), "refusing a connection: too many at once");
                incoming.refuse();
                continue;
            };
            let id = ConnectionId(next_id.fetch_add(1, Ordering::Relaxed));
            let context = context.clone();
            let span =
                tracing::info_span!("connection", id = id.0, remote = %incoming.remote_address());
            connections.spawn(tracing::Instrument::instrument(
                async move {
                    let _slot = slot;
                    match incoming.await {
                        Ok(connection) => net::serve_connection(connection, id, context).await,
                        Err(e) => tracing::debug!(error = %e, "handshake failed"),
                    }
                },
                span,
            ));
        }
        // Drain: the game task closes every connection with ShuttingDown through its writer.
        let _ = game_task.await;
        connections.close();
        drop(context);
        if tokio::time::timeout(DRAIN_TIMEOUT, connections.wait())
            .await
            .is_err()
        {
            tracing::warn!("connections still open after the drain timeout; closing the endpoint");
        }
        endpoint.close(
            quinn::VarInt::from_u32(CloseCode::ShuttingDown.code()),
            CloseCode::ShuttingDown.reason().as_bytes(),
        );
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, endpoint.wait_idle()).await;
        tracing::info!("stopped");
    }
}
