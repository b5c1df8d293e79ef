//! gatehouse-server: the authoritative dedicated game server.
//!
//! - [`config`]: `server.toml` and `world.toml`, parsed once into checked types.
//! - [`game`]: the sans-IO authoritative core (`handle` / `poll_output` / `poll_timeout`).
//! - [`net`]: the UDP socket, the QUIC endpoint and every connection in one driver task on the
//!   network's thread, authentication; it reports connection events to the game task and
//!   imports nothing from it.
//! - [`model`]: the save model (player and session saves, load outcomes), pure data the core
//!   and the store share.
//! - [`store`]: player and session saves, and the worker that runs them off the game task.
//! - [`admin`]: the operator HTTP endpoint (probes, state, metrics, travel).
//! - [`metrics`]: the server's metric families, one registry per [`Server`].
//! - [`ops`]: what the binary runs besides the server: the admin probe, the saves printer, the
//!   log installation and the signals.
//! - [`fleet`]: the orchestrator that runs the server (Agones, with the `agones` feature), told
//!   Ready, Health from the game loop, the connected players and Shutdown.
//! - `start_check`: what `config check` reads besides the config and the world
//!   ([`check_start`]): the TLS identity, the store's files, the data dir, the fleet directory.
//! - `shell`: the game task, the one task that owns the [`game::Game`]: it feeds it
//!   connection events and its own events (streaming, store replies, operator requests) and
//!   carries its outputs out.
//! - [`world`]: the [`World`](world::World) a game supplies (level streaming, spawn points, the
//!   pawns' bodies) behind one trait; [`world::SimulatedWorld`], a timer from the world map, is
//!   the default (docs/embedding.md).
//!
//! Data flows one way: net → game → outputs. [`Server`] is the whole server; the binary only
//! parses the CLI, loads config, installs tracing and calls [`Server::bind`] then
//! [`Server::run`].

#![forbid(unsafe_code)]

/// The game core, a crate of its own (`gatehouse-game`): the compiler keeps it free of the
/// network, the store and the runtime.
pub use gatehouse_game as game;
/// The save model the core and the store share (`gatehouse_game::model`).
pub use gatehouse_game::model;
use gatehouse_game::{fields, rate};

pub mod admin;
pub mod config;
pub mod fleet;
pub mod metrics;
pub mod net;
pub mod ops;
mod probes;
mod shell;
mod start_check;
pub mod store;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gatehouse_protocol::ticket::{TicketCheck, TicketLimits};
use gatehouse_protocol::token::{TokenCheck, TokenKey};
use gatehouse_protocol::{CloseCode, NodeId};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use config::{ServerConfig, WorldMap};
use fleet::{FleetLink, FleetPolicy, Orchestrator};
use game::Game;
use metrics::Metrics;
use net::{ConnectionEvent, NetError, Network};
use probes::Probes;
pub use shell::GameHandle;
pub use shell::world;
use shell::world::{SimulatedWorld, World};
use shell::{Effects, ShellEvent};
pub use start_check::check_start;
use store::{Store, StoreError, StoreHandle, StoreSettings, StoreWorker};

/// How long shutdown waits for connections to deliver their close, then for the endpoint.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(3);

/// Events queued for the game task, per queue, before their senders wait (backpressure on the
/// connection readers).
const EVENT_QUEUE: usize = 8192;

/// Why the server could not start, or why it stopped badly.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// A configuration file was refused.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The network side could not start.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The player store could not be opened (the message names its URL, password redacted).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The orchestrator `[fleet]` names could not be reached.
    #[error(transparent)]
    Fleet(#[from] fleet::FleetError),
    /// The admin endpoint could not bind.
    #[error("cannot bind the admin endpoint on TCP {addr}: {source}")]
    Admin {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The game task ended without being asked to (it panicked): the server stopped accepting,
    /// drained what it could and stopped, but the players' last state may not be saved.
    #[error("the game task failed: {0}")]
    GameTask(String),
    /// The world could not be loaded: `game.max_failed_transitions` transitions in a row failed
    /// at their hard maximum. Every client was closed with `WorldUnavailable` and the server
    /// drained and stopped (docs/protocol.md 5, "Every transition is bounded").
    #[error("the world is unavailable: {0}")]
    WorldUnavailable(String),
}

/// A bound server, ready to run.
#[derive(Debug)]
pub struct Server {
    /// The socket and the QUIC endpoint, started by `run`.
    network: Network,
    /// Where the network driver runs; stopped after every connection has drained.
    drivers: net::DriverThread,
    game: Game,
    /// Connection events, from the network driver.
    from_net: mpsc::Receiver<ConnectionEvent>,
    /// The game task's own events; their sender is in `effects`.
    events: mpsc::Receiver<ShellEvent>,
    effects: Effects,
    store: Store,
    store_handle: StoreHandle,
    store_task: tokio::task::JoinHandle<()>,
    store_drain: Duration,
    admin: Option<admin::AdminListener>,
    nodes: BTreeSet<NodeId>,
    metrics: Metrics,
    probes: Arc<Probes>,
    /// The orchestrator, and what the game loop tells it when (`[fleet]`).
    orchestrator: Arc<dyn Orchestrator>,
    fleet_policy: FleetPolicy,
}

impl Server {
    /// Opens the store (running its migrations), loads the certificate, binds the endpoint
    /// and the admin endpoint, builds the game core (which asks for the session save and
    /// starts its boot travel), and last connects to the orchestrator `[fleet]` names (the
    /// Agones SDK sidecar waits up to 30 s).
    ///
    /// # Errors
    /// [`ServerError`] naming what could not be opened or bound.
    pub async fn bind(config: &ServerConfig, world: WorldMap) -> Result<Server, ServerError> {
        let simulated = SimulatedWorld::new(Arc::new(world.clone()));
        Self::bind_with_world(config, world, simulated).await
    }

    /// [`Server::bind`] with a game's own [`World`] in place of the simulated one: it streams
    /// the levels `map` names and hears of every pawn (docs/embedding.md).
    ///
    /// # Errors
    /// [`ServerError`] naming what could not be opened or bound.
    pub async fn bind_with_world(
        config: &ServerConfig,
        world: WorldMap,
        game_world: impl World,
    ) -> Result<Server, ServerError> {
        prepare_process(config);
        // Ports first: a port in use fails the start before anything is written to disk.
        let (socket, admin) = bind_ports(config).await?;
        // The fleet directory's files are read as `config check` reads them, before anything is
        // written (a development certificate); travels ask it (docs/spec/travel.md V12, V13).
        config.check_world(&world)?;
        let directory = start_check::fleet_directory(config)?;
        let (server_config, fingerprint, certificate_sha256) = load_certificate(config)?;
        // The peer link's other half: the links this server dials, and its answers to those
        // other servers open (docs/spec/travel.md V14).
        let links = fleet::PeerSettings::from_config(config, certificate_sha256)?
            .map(fleet::PeerLinks::new);
        let drivers = net::DriverThread::start()?;
        let store = Store::open(&config.store.url, &config.data_dir).await?;
        tracing::info!(store = %store.location(), "player store open");
        let (metrics, probes) = (Metrics::new(), Arc::new(Probes::default()));
        probes.set_store_open(true);
        let (events_tx, events) = mpsc::channel(EVENT_QUEUE);
        let (store_handle, store_task) = StoreWorker::spawn_measured(
            store.clone(),
            StoreSettings::from(&config.store),
            metrics.store().clone(),
            events_tx.clone(),
            ShellEvent::Store,
        );
        let (net_tx, from_net) = mpsc::channel(EVENT_QUEUE);
        let network = prepare_network(config, socket, server_config, net_tx, &metrics, &drivers)?;
        let travels = travels(config, directory, events_tx.clone())?;
        let effects = Effects {
            events: events_tx,
            world: shell::WorldSlot(Box::new(game_world)),
            store: store_handle.clone(),
            session: config.store.session.clone(),
            max_frame_len: config.network.max_frame_len,
            metrics: metrics.clone(),
            probes: probes.clone(),
            replication_interval: config.network.replication_interval,
            replication_writes_per_s: config.network.replication_writes_per_s,
            links,
            travels,
        };
        let nodes = world.nodes.iter().map(|n| n.id.clone()).collect();
        let rules = gatehouse_game::GameRules {
            server: config.fleet_server()?,
            ..crate::config::game_rules(&config.game, &config.auth, &config.network, &config.fleet)
        };
        let game = Game::new(rules, Arc::new(world), tokio::time::Instant::now().into_std());
        let orchestrator = connect_fleet(config, &fingerprint, &metrics).await?;
        Ok(Server {
            network,
            drivers,
            game,
            from_net,
            events,
            effects,
            store,
            store_handle,
            store_task,
            store_drain: config.store.drain_timeout,
            admin,
            nodes,
            metrics,
            probes,
            orchestrator,
            fleet_policy: FleetPolicy::from_config(&config.fleet),
        })
    }

    /// The bound UDP address (useful with port 0).
    ///
    /// # Errors
    /// The OS error if the socket address cannot be read.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.network.local_addr())
    }

    /// The bound admin address, if the admin endpoint is enabled.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// A handle to ask the running game for a snapshot or a travel.
    pub fn handle(&self) -> GameHandle {
        GameHandle { events: self.effects.events.clone() }
    }

    /// The server's metrics (what `GET /metrics` encodes).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Serves until `shutdown` is cancelled, then drains, every step bounded (the admin
    /// endpoint answers throughout, `/ready` with 503 from the start of the drain):
    /// 1. stop accepting; connections that have not logged in close with `ShuttingDown` and a
    ///    `Hello` still to come is refused;
    /// 2. the game task (which sees `shutdown` too, so 1 and 2 start together) saves every
    ///    player and the session, closes every connection with `ShuttingDown` through its
    ///    writer, and ends;
    /// 3. connections get 3 s to deliver their close;
    /// 4. the store gets `store.drain_timeout` to finish pending saves, its worker 3 s to stop,
    ///    then it closes;
    /// 5. the endpoint closes with `ShuttingDown` and waits (3 s) until the peers know;
    /// 6. the orchestrator is told Shutdown (under Agones: the SDK's Shutdown, bounded by three
    ///    times `fleet.sdk_timeout_ms`), since Agones then stops the pod;
    /// 7. last, the admin endpoint gets 3 s to finish its requests, then is stopped: until
    ///    then `/ready` answers 503 (draining).
    ///
    /// The game task tells the orchestrator Ready once the boot transition has ended (the
    /// endpoint accepts from the start of `run`), pings its Health from the game loop and
    /// reports players as they log in and leave (see [`fleet`]).
    ///
    /// If the game task ends first (it panicked), `shutdown` is cancelled so the same drain
    /// runs at once.
    ///
    /// # Errors
    /// [`ServerError::GameTask`] if the game task panicked or was cancelled, after the drain.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServerError> {
        let Server {
            network,
            drivers,
            game,
            from_net,
            events,
            effects,
            store,
            store_handle,
            store_task,
            store_drain,
            admin,
            nodes,
            metrics,
            probes,
            orchestrator,
            fleet_policy,
        } = self;
        let mut network = network.start(&drivers, shutdown.clone());
        tracing::info!(addr = %network.local_addr(), "listening");
        // The admin endpoint outlives the drain: it stops last, on its own token.
        let stop_admin = CancellationToken::new();
        let admin_task = admin.map(|listener| {
            let context = admin::AdminContext {
                game: GameHandle { events: effects.events.clone() },
                nodes,
                metrics,
                probes: probes.clone(),
                draining: shutdown.clone(),
            };
            tokio::spawn(admin::serve(listener, context, stop_admin.clone()))
        });
        probes.mark_listening();
        let link = FleetLink::new(orchestrator.clone(), fleet_policy, tokio::time::Instant::now());
        let game_task =
            tokio::spawn(shell::run_game(game, from_net, events, effects, link, shutdown.clone()));
        // 1. and 2. (the network driver sees `shutdown` too). A game task that ends on its own
        // (a panic) leaves nothing to serve: stop as if asked.
        let game_ended = game_task.await;
        shutdown.cancel();
        if let Err(e) = &game_ended {
            tracing::error!(error = %e, "the game task failed; stopping");
        }
        // 3.
        if !network.wait_closed(DRAIN_TIMEOUT).await {
            tracing::warn!("connections still open after the drain timeout; closing the endpoint");
        }
        // 4.
        let left = store_handle.drain(store_drain).await;
        tracing::info!(left, "store drained");
        drop(store_handle);
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, store_task).await;
        store.close().await;
        probes.set_store_open(false);
        // 5.
        network.shut(CloseCode::ShuttingDown, DRAIN_TIMEOUT).await;
        drop(drivers);
        // 6.
        orchestrator.shutdown().await;
        // 7.
        stop_admin.cancel();
        if let Some(mut task) = admin_task {
            // An admin client that never finishes its request must not hold the process.
            if tokio::time::timeout(DRAIN_TIMEOUT, &mut task).await.is_err() {
                tracing::warn!("admin endpoint still busy after the drain timeout; stopping it");
                task.abort();
            }
        }
        tracing::info!("stopped");
        match game_ended {
            Ok(shell::GameEnd::Stopped) => Ok(()),
            Ok(shell::GameEnd::WorldUnavailable(detail)) => {
                Err(ServerError::WorldUnavailable(detail))
            }
            Err(e) => Err(ServerError::GameTask(e.to_string())),
        }
    }
}

/// Logs the config's exposure warnings, then raises the open-files limit: before anything
/// opens a file, since the endpoints, the store and the network share it.
fn prepare_process(config: &ServerConfig) {
    for warning in config.exposure_warnings() {
        tracing::warn!("{warning}");
    }
    match admin::raise_open_files_limit() {
        Ok(limit) => tracing::info!(limit, "open-files limit"),
        Err(e) => tracing::warn!(error = %e, "the open-files limit could not be raised"),
    }
}

/// Binds the UDP socket and, if enabled, the admin endpoint's TCP listener.
async fn bind_ports(
    config: &ServerConfig,
) -> Result<(std::net::UdpSocket, Option<admin::AdminListener>), ServerError> {
    let socket = net::bind_socket(config.network.bind, config.network.udp_buffer_bytes)?;
    let admin = match config.admin.enabled {
        true => Some(
            admin::bind(&config.admin)
                .await
                .map_err(|source| ServerError::Admin { addr: config.admin.bind, source })?,
        ),
        false => None,
    };
    Ok((socket, admin))
}

/// Loads the certificate (the configured one, or the development one in the data directory)
/// and builds the QUIC endpoint's configuration from it, offering the peer link beside the
/// client protocol in a fleet (docs/spec/travel.md V14); returns it with the certificate's
/// SHA-256 fingerprint, as text and as bytes.
fn load_certificate(
    config: &ServerConfig,
) -> Result<(quinn::ServerConfig, String, [u8; 32]), ServerError> {
    // A configured file's error names its key and where its value came from.
    let identity = net::tls::load_identity(&config.tls, &config.data_dir)
        .map_err(|e| start_check::blame_tls_file(config, e))?;
    let (origin, fingerprint, generated) =
        (identity.origin.clone(), identity.fingerprint(), identity.generated);
    let sha256 = identity.sha256();
    let peer_link = fleet::offers_peer_link(config);
    let server_config = net::server_config(identity, &config.network, peer_link)
        .map_err(|e| start_check::blame_tls_pair(config, e))?;
    // Logged once, here: a development certificate is trusted by clients
    // with `--server-cert`, a configured one by its chain.
    tracing::info!(certificate = %origin.display(), %fingerprint,
        development = config.tls.certificate.is_none(), generated, peer_link, "certificate loaded");
    Ok((server_config, fingerprint, sha256))
}

/// What the game task needs to move players to other servers: with a directory (which the
/// configuration checks come with the ticket key), none otherwise: a server with the key and
/// no directory only receives travellers (docs/spec/travel.md V12).
///
/// # Errors
/// [`ServerError::Config`] when this server's id is not one.
fn travels(
    config: &ServerConfig,
    directory: Option<Arc<dyn fleet::FleetDirectory>>,
    events: mpsc::Sender<ShellEvent>,
) -> Result<Option<shell::Travels>, ServerError> {
    let (Some(directory), Some(key)) = (directory, &config.fleet.ticket_key) else {
        return Ok(None);
    };
    let server = config.server_id()?;
    let key = TokenKey::new(key.as_bytes());
    Ok(Some(shell::Travels::new(server, key, config.fleet.ticket_lifetime_s, directory, events)))
}

/// Prepares the network side on the bound socket (`run` starts it): its socket registered
/// with the driver thread, each `Hello`'s token checked with `auth.token_key`, connection
/// events sent to the game task on `net_tx`.
fn prepare_network(
    config: &ServerConfig,
    socket: std::net::UdpSocket,
    server_config: quinn::ServerConfig,
    net_tx: mpsc::Sender<ConnectionEvent>,
    metrics: &Metrics,
    drivers: &net::DriverThread,
) -> Result<Network, ServerError> {
    let sessions = TokenCheck {
        key: TokenKey::new(config.auth.token_key.as_bytes()),
        limits: config.auth.token_limits(),
    };
    // In a fleet, a `Hello` may carry a travel ticket, checked with the fleet's key and good at
    // this server only (docs/spec/travel.md V8, V9).
    let tickets = match (&config.fleet.ticket_key, fleet::offers_peer_link(config)) {
        (Some(key), true) => {
            let limits = TicketLimits {
                max_lifetime_s: config.fleet.ticket_lifetime_s,
                clock_skew_s: config.auth.token_limits().clock_skew_s,
            };
            let check = TicketCheck { key: TokenKey::new(key.as_bytes()), limits };
            Some((check, config.server_id().map_err(ServerError::Config)?))
        }
        _ => None,
    };
    let tokens = net::HelloCheck { tokens: sessions, tickets };
    Ok(Network::new(
        socket,
        server_config,
        &config.network,
        tokens,
        net_tx,
        metrics.net().clone(),
        drivers,
    )?)
}

/// Connects to the orchestrator `[fleet]` names, giving it the certificate's `fingerprint` to
/// publish.
async fn connect_fleet(
    config: &ServerConfig,
    fingerprint: &str,
    metrics: &Metrics,
) -> Result<Arc<dyn Orchestrator>, ServerError> {
    Ok(fleet::connect(&config.fleet, fingerprint, metrics.fleet().clone()).await?)
}
