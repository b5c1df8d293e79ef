//! The async shell: many simulated clients, each a [`ClientSession`] on its own QUIC
//! connection, sharing one client endpoint.
//!
//! Per client: connect, open the control stream, send `Hello` with a development token, then
//! feed every decoded server message to the session, write what it wants sent, wake it at its
//! deadline, until the run's duration is over; then `Leave`.
//!
//! A client that was welcomed once and then loses its connection as a real game client would
//! survive it (the connection timed out or was reset because the network went away, the server
//! closed it with `ShuttingDown` for a restart, or with `HelloTimeout` because its `Hello` was
//! lost on the way, or gave up on a handshake a lossy path kept from finishing) reconnects
//! with the same player id,
//! retrying while the server is unreachable, until the run ends; only a loss it never recovers
//! from is an error.
//!
//! A session's game side (router, registry) is single-threaded by design, like a game thread,
//! so sessions are not `Send`. The clients therefore run as local tasks on one dedicated thread
//! with its own current-thread runtime; [`run_swarm_outcomes`] stays an ordinary `Send` future
//! that waits for that thread's result, so callers can spawn it anywhere.
//!
//! The QUIC side never waits for the sessions (issue 11, "The connections are always driven"):
//! the client endpoints and every connection's driver (keep-alives, acknowledgements, loss
//! recovery) run on a runtime of their own ([`DriverRuntime`]), so however long the sessions'
//! thread is busy, no connection idles out. Clients share an endpoint per
//! [`CLIENTS_PER_ENDPOINT`], each socket with explicit buffers, and dial at
//! [`SwarmConfig::connect_rate`] per second.
//!
//! Of the clients, [`SwarmConfig::full_clients`] run the whole client lifecycle; the rest are
//! thin (protocol duties and the session checks only), so a thousand of them stay cheap.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_client::ConnectError;
use gatehouse_client::net::quic_config;
use gatehouse_client::quic::{DriverRuntime, endpoint_config};
use gatehouse_conditioner::proxy::ProxyHandle;
use gatehouse_protocol::token::{self, SessionClaims, TokenKey};
use gatehouse_protocol::{ClientMessage, CloseCode, FrameDecoder, PlayerId, ServerMessage};
use tokio::time::Instant;

use crate::SimError;
use crate::figures::{MarkKind, ScreenKind, SessionStats, WireFigures};
use crate::interval::{IntervalFigures, IntervalReport};
use crate::misbehaviour::{Misbehaviour, misbehaviour_of};
use crate::report::{ClientOutcome, SwarmReport};
use crate::session::{ClientSession, SessionConfig};
use rand::rngs::SmallRng;
use rand::{RngExt as _, SeedableRng as _};

/// How long a leaving client waits for the server to close.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// The most a client reads from its stream at once, bytes.
const READ_CHUNK: usize = 16 * 1024;

/// Pause between a client vanishing and its relaunch.
const RELAUNCH_PAUSE: Duration = Duration::from_millis(200);

/// No relaunch starts this close to the end of the run: longer than the server's default hello
/// timeout (5 s) and a login after it, so a relaunch whose `Hello` a lossy path held up past
/// that timeout can still log in again and be placed before the run ends.
const RELAUNCH_QUIET: Duration = Duration::from_secs(10);

/// Pause between attempts to reach the server again after a lost connection.
const RECONNECT_PAUSE: Duration = Duration::from_millis(500);

/// Clients per client endpoint (one UDP socket each): a thousand clients use ten sockets, so a
/// transition's burst to them has ten receive queues to land in.
pub const CLIENTS_PER_ENDPOINT: usize = 100;

/// Worker threads driving the clients' QUIC endpoints and connections. One: on two cores beside
/// the server, a second one drains the clients' sockets faster than the server's endpoint can
/// take their acknowledgements, and the drops move to the server's socket (measured at 1,000
/// clients).
const QUIC_THREADS: usize = 1;

/// Receive and send buffer asked of each client socket, bytes (the server asks the same).
const SOCKET_BUFFER: usize = 8 << 20;
/// How a swarm runs.
#[derive(Debug, Clone)]
pub struct SwarmConfig {
    /// The server's UDP address.
    pub server: SocketAddr,
    /// The name the server certificate is checked against.
    pub server_name: String,
    /// The certificate to trust (DER or PEM), e.g. the server's `dev-cert.der`.
    pub server_cert: PathBuf,
    /// How many clients.
    pub clients: usize,
    /// Index of the first client; client `i` is player `sim-{i:04}`, stable across runs.
    pub first_index: usize,
    /// How long each client stays.
    pub duration: Duration,
    /// The key development tokens are signed with (the server's `auth.token_key`).
    pub token_key: TokenKey,
    /// How each client behaves; each gets its own seed derived from this one and its index.
    pub session: SessionConfig,
    /// Largest frame body accepted from the server, bytes.
    pub max_frame_len: usize,
    /// Bound on connecting (handshake and stream), so a dead server fails the client instead of
    /// hanging the run.
    pub connect_timeout: Duration,
    /// Disconnect abruptly and relaunch with the same player id about this often (uniformly
    /// between half and one and a half times it); `None`: never.
    pub relaunch_every: Option<Duration>,
    /// At the end of the run, how long a client may wait to be placed (no loading screen, an
    /// acknowledged pawn) before it leaves anyway.
    pub settle_grace: Duration,
    /// How many of the clients run the whole client lifecycle (spread evenly over the indices);
    /// the rest are thin. `session.full` is ignored: this decides.
    pub full_clients: usize,
    /// Clients dialling per second at the start (client `i` dials `i / rate` seconds in);
    /// `None`: all at once.
    pub connect_rate: Option<f64>,
    /// Live counts for a progress display, updated as the run goes; `None`: not kept.
    pub progress: Option<Arc<Progress>>,
    /// A network conditioner between the clients and the server (issue 13 item 1): the clients
    /// dial its address instead of `server`, each from a UDP socket of its own registered under
    /// the client's index, so a client's drops depend on the seed and its index alone.
    /// `None`: straight to the server.
    pub conditioner: Option<ProxyHandle>,
    /// How many of the clients misbehave (issue 13 item 4), spread over the indices from the
    /// last one (see [`misbehaviour_of`]); a misbehaving client is always thin. 0: none.
    pub misbehaving: usize,
    /// The kinds the misbehaving clients are given, in turn; empty: none misbehaves.
    /// `session.misbehaviour` is ignored: this and `misbehaving` decide.
    pub misbehaviours: Vec<Misbehaviour>,
}

/// Live counts of a running swarm, for a progress line (issue 11, "Progress"), and the figures
/// of the current interval ([`IntervalFigures`]): updated by the clients as they go, read by
/// whoever displays them.
#[derive(Debug, Default)]
pub struct Progress {
    connected: AtomicU64,
    placed: AtomicU64,
    transitions: AtomicU64,
    errors: AtomicU64,
    interval: Mutex<IntervalFigures>,
}

/// A moment of a [`Progress`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Clients connected and welcomed now.
    pub connected: u64,
    /// Clients placed now (a possessed, acknowledged pawn; no loading screen).
    pub placed: u64,
    /// Transitions ended so far, as the client that saw the most counts them.
    pub transitions: u64,
    /// Errors recorded so far, over all clients.
    pub errors: u64,
}

impl Progress {
    /// The figures of the interval ending at `now`, `at_s` seconds into the run; the next
    /// interval starts.
    pub fn take_interval(&self, now: std::time::Instant, at_s: u64) -> IntervalReport {
        self.interval().take(now, at_s)
    }

    /// The current interval's figures, to record into (a client that panicked holding them
    /// left them usable: they are counts).
    fn interval(&self) -> std::sync::MutexGuard<'_, IntervalFigures> {
        self.interval.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The counts now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        ProgressSnapshot {
            connected: self.connected.load(Ordering::Relaxed),
            placed: self.placed.load(Ordering::Relaxed),
            transitions: self.transitions.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }
}

/// What one connection last told its [`Progress`], so each change is counted once and a
/// connection's end takes back what it added.
#[derive(Debug)]
struct Reported {
    /// The client's index.
    index: usize,
    connected: bool,
    placed: bool,
    errors: usize,
    /// How many of the session's screens that came down were counted already.
    screens_down: usize,
    /// The loading screen up at the last update: its kind and when it went up.
    screen: Option<(ScreenKind, std::time::Instant)>,
}

impl Reported {
    fn new(index: usize) -> Self {
        Reported {
            index,
            connected: false,
            placed: false,
            errors: 0,
            screens_down: 0,
            screen: None,
        }
    }

    fn update(&mut self, progress: Option<&Progress>, session: &ClientSession) {
        let Some(progress) = progress else { return };
        let up = session.screen_up();
        let screens = &session.stats().screens;
        if self.screen != up || screens.len() > self.screens_down {
            let mut interval = progress.interval();
            // Every screen that came down since, each at its own instants: one that went up
            // and down between two updates too.
            for screen in screens.iter().skip(self.screens_down) {
                if let Some(ended) = screen.ended {
                    interval.screen_down(self.index, screen.kind, screen.shown, ended, false);
                }
            }
            self.screens_down = screens.len();
            if let Some((_, raised)) = up {
                interval.screen_up(self.index, raised);
            }
            self.screen = up;
        }
        let flip = |counter: &AtomicU64, was: &mut bool, now: bool| {
            if *was != now {
                match now {
                    true => counter.fetch_add(1, Ordering::Relaxed),
                    false => counter.fetch_sub(1, Ordering::Relaxed),
                };
                *was = now;
            }
        };
        flip(&progress.connected, &mut self.connected, session.player().is_some());
        flip(&progress.placed, &mut self.placed, session.is_placed());
        let stats = session.stats();
        let errors = stats.errors.len();
        if errors > self.errors {
            progress.errors.fetch_add((errors - self.errors) as u64, Ordering::Relaxed);
            self.errors = errors;
        }
        progress.transitions.fetch_max(stats.transitions_ended.len() as u64, Ordering::Relaxed);
    }

    /// The connection is gone: it is neither connected nor placed any more, and a screen it
    /// had up was cut short.
    fn end(&mut self, progress: Option<&Progress>) {
        let Some(progress) = progress else { return };
        if let Some((kind, raised)) = self.screen.take() {
            let now = std::time::Instant::now();
            progress.interval().screen_down(self.index, kind, raised, now, true);
        }
        if std::mem::take(&mut self.connected) {
            progress.connected.fetch_sub(1, Ordering::Relaxed);
        }
        if std::mem::take(&mut self.placed) {
            progress.placed.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Counts `errors` connection-level errors (refused, lost, unreachable) into `progress`, beside
/// the sessions' own that [`Reported`] counts.
fn count_errors(progress: Option<&Progress>, errors: usize) {
    if let Some(progress) = progress {
        progress.errors.fetch_add(errors as u64, Ordering::Relaxed);
    }
}

/// Whether client `offset` (0-based within the swarm) of `clients` is one of the `full` full
/// clients: `full` of them, spread evenly over the indices, the first among them.
pub fn is_full_client(offset: usize, clients: usize, full: usize) -> bool {
    let full = full.min(clients);
    clients > 0 && (offset * full) % clients < full
}

/// The player id of client `index`.
pub fn player_id(index: usize) -> PlayerId {
    // "sim-" and decimal digits always satisfy the name rule.
    #[allow(clippy::expect_used)]
    PlayerId::new(format!("sim-{index:04}")).expect("a valid generated player id")
}

/// Mints a development token for `player`, valid for a day.
pub fn mint_token(key: &TokenKey, player: PlayerId) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    token::mint(key, &SessionClaims { uid: player, exp: now + 86_400, iat: Some(now), usn: None })
}

/// Builds a client endpoint that trusts `server_cert`, driven on the caller's tokio runtime.
///
/// # Errors
/// [`SimError`] if the certificate cannot be read or the socket cannot be bound.
pub fn client_endpoint(
    server: SocketAddr,
    server_cert: &std::path::Path,
) -> Result<(quinn::Endpoint, quinn::ClientConfig), SimError> {
    let config = client_config(server_cert)?;
    Ok((bind_client_endpoint(server, Arc::new(quinn::TokioRuntime))?, config))
}

/// The client configuration: TLS 1.3 trusting `server_cert` (DER or PEM), the gatehouse ALPN,
/// keep-alives every 3 s and a 10 s idle timeout.
///
/// # Errors
/// [`SimError::Certificate`] if the certificate cannot be read or trusted, [`SimError::Tls`] if
/// TLS cannot be set up.
pub fn client_config(server_cert: &std::path::Path) -> Result<quinn::ClientConfig, SimError> {
    let certificate = |why: String| SimError::Certificate { path: server_cert.to_owned(), why };
    let trust = std::fs::read(server_cert).map_err(|e| certificate(e.to_string()))?;
    // The library's transport, as a game's client has it.
    quic_config(&trust, Duration::from_secs(3), Duration::from_secs(10)).map_err(|e| match e {
        ConnectError::Certificate(why) => certificate(why),
        other => SimError::Tls(other.to_string()),
    })
}

/// Binds a client endpoint on the wildcard address of `server`'s family, its socket given
/// explicit 8 MiB buffers (the kernel may cap them at `net.core.rmem_max`/`wmem_max`), driven by
/// `runtime`.
///
/// # Errors
/// [`SimError::Bind`] if the socket cannot be bound.
pub fn bind_client_endpoint(
    server: SocketAddr,
    runtime: Arc<dyn quinn::Runtime>,
) -> Result<quinn::Endpoint, SimError> {
    let bind: SocketAddr = if server.is_ipv6() { "[::]:0" } else { "0.0.0.0:0" }
        .parse()
        .map_err(|_| SimError::Tls("bad wildcard address".into()))?;
    let socket =
        std::net::UdpSocket::bind(bind).map_err(|source| SimError::Bind { addr: bind, source })?;
    let socket = socket2::Socket::from(socket);
    // Many clients share this socket: give it room for their bursts. A refusal leaves the
    // system default, which the log shows.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    tracing::debug!(
        recv_buffer = socket.recv_buffer_size().unwrap_or(0),
        send_buffer = socket.send_buffer_size().unwrap_or(0),
        "client socket bound"
    );
    quinn::Endpoint::new(endpoint_config(), None, socket.into(), runtime)
        .map_err(|source| SimError::Bind { addr: bind, source })
}

/// Runs the swarm for its duration and reports.
///
/// # Errors
/// [`SimError`] if the endpoint cannot be built; per-client failures are in the report.
pub async fn run_swarm(config: SwarmConfig) -> Result<SwarmReport, SimError> {
    Ok(SwarmReport::from_outcomes(&run_swarm_outcomes(config).await?))
}

/// Runs the swarm for its duration and returns each client's outcome, in index order.
///
/// # Errors
/// [`SimError`] if the endpoint cannot be built; per-client failures are in the outcomes.
pub async fn run_swarm_outcomes(config: SwarmConfig) -> Result<Vec<ClientOutcome>, SimError> {
    let (done, result) = tokio::sync::oneshot::channel();
    // The QUIC side: workers of its own, apart from the sessions' thread.
    let driver = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(QUIC_THREADS)
        .thread_name("gatehouse-sim-quic")
        .enable_all()
        .build()
        .map_err(|e| SimError::Runtime(e.to_string()))?;
    std::thread::Builder::new()
        .name("gatehouse-sim-clients".into())
        .spawn(move || {
            let quic = Arc::new(DriverRuntime::new(driver.handle().clone()));
            let outcome = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => {
                    tokio::task::LocalSet::new().block_on(&runtime, run_clients(config, quic))
                }
                Err(e) => Err(SimError::Runtime(e.to_string())),
            };
            // Every endpoint is idle by now; whatever is left (a closed connection's last
            // driver) is not waited for.
            driver.shutdown_background();
            // The receiver is gone only if the caller stopped waiting; nothing to tell then.
            let _ = done.send(outcome);
        })
        .map_err(|e| SimError::Runtime(e.to_string()))?;
    result
        .await
        .map_err(|_| SimError::Runtime("the client thread ended without a result".into()))?
}

/// Runs every client as a local task on the current thread (inside a `LocalSet`), their QUIC
/// endpoints driven by `quic`.
async fn run_clients(
    config: SwarmConfig,
    quic: Arc<DriverRuntime>,
) -> Result<Vec<ClientOutcome>, SimError> {
    let client_config = client_config(&config.server_cert)?;
    // Behind a conditioner every client has a socket (a flow) of its own.
    let per_endpoint = if config.conditioner.is_some() { 1 } else { CLIENTS_PER_ENDPOINT };
    let endpoints = (0..config.clients.div_ceil(per_endpoint).max(1))
        .map(|_| bind_client_endpoint(config.server, quic.clone()))
        .collect::<Result<Vec<_>, _>>()?;
    // Each client's flow is keyed by its index, and the clients dial the conditioner.
    let mut config = config;
    if let Some(conditioner) = config.conditioner.clone() {
        for (i, endpoint) in endpoints.iter().enumerate() {
            let port = endpoint
                .local_addr()
                .map_err(|source| SimError::Bind { addr: conditioner.addr(), source })?;
            conditioner.register(port.port(), (config.first_index + i) as u64);
        }
        config.server = conditioner.addr();
    }
    let start = Instant::now();
    let until = start + config.duration;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..config.clients {
        let index = config.first_index + i;
        let endpoint = endpoints[i / per_endpoint].clone();
        let client_config = client_config.clone();
        let mut config = config.clone();
        config.session.misbehaviour =
            misbehaviour_of(i, config.clients, config.misbehaving, &config.misbehaviours);
        // A misbehaving client's lifecycle is not judged: it runs thin.
        let full = is_full_client(i, config.clients, config.full_clients)
            && config.session.misbehaviour.is_none();
        config.session.full = full;
        let dial_at = config.connect_rate.filter(|rate| *rate > 0.0).map_or(start, |rate| {
            start + Duration::from_secs_f64(i as f64 / rate).min(config.duration)
        });
        let client = move || async move {
            tokio::time::sleep_until(dial_at).await;
            run_client(&endpoint, client_config, &config, index, until).await
        };
        if full {
            let outcome = on_own_thread(index, client)?;
            tasks.spawn_local(async move {
                let lost =
                    || ClientOutcome::failed(index, true, "the client's thread ended".into());
                outcome.await.unwrap_or_else(|_| lost())
            });
        } else {
            tasks.spawn_local(client());
        }
    }
    let mut outcomes = Vec::with_capacity(config.clients);
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(outcome) => outcomes.push(outcome),
            Err(e) => tracing::error!(error = %e, "a client task failed"),
        }
    }
    outcomes.sort_by_key(|o| o.index);
    for endpoint in endpoints {
        endpoint.wait_idle().await;
    }
    Ok(outcomes)
}

/// Runs the future `client` makes (a full client's whole run) on a thread of its own, with a
/// current-thread runtime: a full client's game side does O(players) work at every travel and UI rebuild, and
/// on the sessions' thread every other client's reply would wait behind it; on its own thread
/// the system's scheduler interleaves it with the rest. Returns the receiver of its outcome.
///
/// # Errors
/// [`SimError::Runtime`] if the thread cannot be started.
fn on_own_thread<F: Future<Output = ClientOutcome>>(
    index: usize,
    client: impl FnOnce() -> F + Send + 'static,
) -> Result<tokio::sync::oneshot::Receiver<ClientOutcome>, SimError> {
    let (done, outcome) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name(format!("gatehouse-sim-full-{index}"))
        .spawn(move || {
            let outcome = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(runtime) => tokio::task::LocalSet::new().block_on(&runtime, client()),
                Err(e) => ClientOutcome::failed(index, true, format!("client runtime: {e}")),
            };
            // The receiver is gone only if the swarm stopped waiting; nothing to tell then.
            let _ = done.send(outcome);
        })
        .map_err(|e| SimError::Runtime(e.to_string()))?;
    Ok(outcome)
}

/// One client from connect to leave, relaunching (disconnect, reconnect with the same player
/// id) as often as the configuration says. The future is not `Send` (a session's game side is
/// single-threaded): run it as a local task, as [`run_swarm_outcomes`] does.
pub async fn run_client(
    endpoint: &quinn::Endpoint,
    client_config: quinn::ClientConfig,
    config: &SwarmConfig,
    index: usize,
    until: Instant,
) -> ClientOutcome {
    let mut outcome = ClientOutcome {
        index,
        full: config.session.full,
        connected: false,
        placed: false,
        own_pawns: 0,
        stats: Default::default(),
        errors: Vec::new(),
        misbehaviour: config.session.misbehaviour,
        server_close: None,
    };
    let seed = config.session.seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut rng = SmallRng::seed_from_u64(seed);
    // No relaunch in the last stretch of the run, so every client can settle before leaving.
    let relaunch_cutoff = until.checked_sub(RELAUNCH_QUIET).unwrap_or(until);
    // Whether the previous life ended dead: the server keeps the player state, so the next one
    // starts dead too, and that death was already counted.
    let mut dead = false;
    // The loss this client is reconnecting after, if any.
    let mut lost: Option<String> = None;
    for life in 0u64.. {
        let relaunch_at = config.relaunch_every.and_then(|every| {
            let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(2);
            let at = Instant::now() + Duration::from_millis(rng.random_range(ms / 2..=ms + ms / 2));
            (at < relaunch_cutoff).then_some(at)
        });
        let session_config =
            SessionConfig { seed: seed.wrapping_add(life), ..config.session.clone() };
        let end = match relaunch_at {
            Some(at) => LifeEnd::Relaunch(at),
            None => LifeEnd::Leave(until),
        };
        let mut life_outcome =
            run_life(endpoint, client_config.clone(), config, index, session_config, end, dead)
                .await;
        dead = life_outcome.ended_dead;
        outcome.server_close = life_outcome.server_close.or(outcome.server_close);
        // Once welcomed, a client keeps trying while the server is unreachable (restarting, or
        // the network cut) until the run ends.
        if life_outcome.unreachable && outcome.connected {
            if Instant::now() + RECONNECT_PAUSE < until {
                tokio::time::sleep(RECONNECT_PAUSE).await;
                continue;
            }
            if let Some(why) = lost.take() {
                life_outcome.errors.push(format!("{why}; no reconnect before the end of the run"));
                life_outcome.stats.marks.push((Instant::now().into_std(), MarkKind::Error));
            }
        }
        if let Some(why) = life_outcome.lost.take() {
            if Instant::now() < until {
                tracing::warn!(player = %player_id(index), reason = %why, "connection lost; reconnecting");
                // As at a relaunch, the session ended at an arbitrary moment: its pending waits are
                // counted only. A death it was respawning from stays with the player state the
                // server keeps, so the next life continues it (`dead`).
                life_outcome.stats.gates.set_aside_pending_waits();
                life_outcome.stats.marks.push((Instant::now().into_std(), MarkKind::Reconnect));
                outcome.connected |= life_outcome.connected;
                outcome.stats.absorb(life_outcome.stats);
                count_errors(config.progress.as_deref(), life_outcome.errors.len());
                outcome.errors.extend(life_outcome.errors);
                lost = Some(why);
                tokio::time::sleep(RELAUNCH_PAUSE).await;
                continue;
            }
            life_outcome.errors.push(why);
        }
        if life_outcome.connected {
            lost = None;
        }
        if !life_outcome.failed && matches!(end, LifeEnd::Relaunch(_)) {
            // A relaunch ends the session at an arbitrary moment, mid-travel as often as not:
            // its pending waits are counted, and only the final session's are listed.
            life_outcome.stats.gates.set_aside_pending_waits();
        }
        if !life_outcome.errors.is_empty() {
            life_outcome.stats.marks.push((Instant::now().into_std(), MarkKind::Error));
        }
        outcome.connected |= life_outcome.connected;
        outcome.stats.absorb(life_outcome.stats);
        count_errors(config.progress.as_deref(), life_outcome.errors.len());
        outcome.errors.extend(life_outcome.errors);
        if life_outcome.failed || !matches!(end, LifeEnd::Relaunch(_)) {
            outcome.placed = life_outcome.placed;
            outcome.own_pawns = life_outcome.own_pawns;
            break;
        }
        outcome.stats.relaunches += 1;
        outcome.stats.marks.push((Instant::now().into_std(), MarkKind::Relaunch));
        tokio::time::sleep(RELAUNCH_PAUSE).await;
    }
    outcome
}

/// How one connection of a client ends.
#[derive(Debug, Clone, Copy)]
enum LifeEnd {
    /// Drop the connection abruptly at this instant and relaunch.
    Relaunch(Instant),
    /// The run is over at this instant: settle (bounded), then `Leave`.
    Leave(Instant),
}

/// What one connection saw.
struct Life {
    connected: bool,
    placed: bool,
    own_pawns: usize,
    failed: bool,
    /// The session ended dead or waiting for its respawn.
    ended_dead: bool,
    stats: SessionStats,
    errors: Vec<String>,
    /// No connection could be made: connecting failed or timed out.
    unreachable: bool,
    /// The connection was lost in a way a game client recovers from (see [`is_recoverable`]).
    lost: Option<String>,
    /// The server closed the connection with this code of ours.
    server_close: Option<CloseCode>,
}

async fn run_life(
    endpoint: &quinn::Endpoint,
    client_config: quinn::ClientConfig,
    config: &SwarmConfig,
    index: usize,
    session_config: SessionConfig,
    end: LifeEnd,
    dead: bool,
) -> Life {
    let mut life = Life {
        connected: false,
        placed: false,
        own_pawns: 0,
        failed: true,
        ended_dead: dead,
        stats: SessionStats::default(),
        errors: Vec::new(),
        unreachable: false,
        lost: None,
        server_close: None,
    };
    let dialled = Instant::now();
    let token = mint_token(&config.token_key, player_id(index));
    let mut session =
        ClientSession::new(dialled.into_std(), SessionConfig { token, ..session_config });
    session.continue_dead(dead);
    let mut welcomed = false;
    let mut reported = Reported::new(index);
    let progress = config.progress.as_deref();
    let connected = tokio::time::timeout(config.connect_timeout, async {
        let connection = endpoint
            .connect_with(client_config, config.server, &config.server_name)
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| e.to_string())?;
        let (send, recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
        Ok::<_, String>((connection, send, recv))
    })
    .await;
    let (connection, mut send, mut recv) = match connected {
        Ok(Ok(parts)) => parts,
        Ok(Err(e)) => {
            life.errors.push(format!("connect failed: {e}"));
            life.unreachable = true;
            return life;
        }
        Err(_) => {
            life.errors.push("connect timed out".into());
            life.unreachable = true;
            return life;
        }
    };
    let mut decoder = FrameDecoder::new(config.max_frame_len);
    let mut closed_by_server = false;
    // The session's first output is its `Hello`.
    let sent = match session.poll_output() {
        Some(hello) => write(&mut send, &hello, config.max_frame_len).await.is_ok(),
        None => false,
    };
    if !sent {
        life.errors.push("could not send Hello".into());
        return life;
    }
    let (stop_at, settle) = match end {
        LifeEnd::Relaunch(at) => (at, false),
        LifeEnd::Leave(at) => (at, true),
    };
    let give_up = stop_at + config.settle_grace;
    // A silent client writes nothing more, not even its `Leave`.
    let mut silent = false;
    // When the QUIC driver last found the stream readable: what a reply is timed from.
    let readable = Arc::new(ReadStamp::default());
    // After a full chunk more may wait in the stream, readable since the same wake: the next
    // read's cause unless a newer wake stamps it.
    let mut carried: Option<std::time::Instant> = None;
    loop {
        let now = Instant::now();
        // Every death gets its respawn before the client goes: a leaving client also waits
        // until it is placed (bounded by the grace).
        // A misbehaving client is not waited for: it may never be placed.
        let settled = !session.is_dead_or_respawning()
            && (!settle || session.is_placed() || session.misbehaviour().is_some());
        if now >= stop_at && (settled || now >= give_up) {
            break;
        }
        let wake = session.poll_timeout().map(Instant::from_std);
        let tick = if now >= stop_at { give_up } else { stop_at };
        // What this turn's replies answer: a message, from when it was readable, or a deadline.
        let mut cause: Option<std::time::Instant> = None;
        tokio::select! {
            _ = tokio::time::sleep_until(tick) => {}
            _ = sleep_until(wake) => {
                cause = wake.map(Instant::into_std);
                session.handle_timeout(Instant::now().into_std());
            }
            chunk = stamped(recv.read_chunk(READ_CHUNK, true), &readable) => match chunk {
                Ok(Some(chunk)) => {
                    let since = readable.take().or(carried.take());
                    cause = Some(since.unwrap_or_else(std::time::Instant::now));
                    if chunk.bytes.len() == READ_CHUNK {
                        carried = cause;
                    }
                    decoder.extend(&chunk.bytes);
                    loop {
                        match decoder.next_message::<ServerMessage>() {
                            Ok(Some(message)) => {
                                let now = Instant::now();
                                if let ServerMessage::Welcome { max_frame_len, .. } = &message {
                                    // The server's limit, both ways (docs/protocol.md 2).
                                    decoder.set_max_len(*max_frame_len as usize);
                                }
                                session.handle(now.into_std(), message);
                                if !welcomed && session.player().is_some() {
                                    welcomed = true;
                                    session.record_connect_to_welcome(now - dialled);
                                }
                            }
                            Ok(None) => break,
                            Err(e) => {
                                life.errors.push(format!("bad frame from the server: {e}"));
                                closed_by_server = true;
                                break;
                            }
                        }
                    }
                    if closed_by_server {
                        break;
                    }
                }
                Ok(None) | Err(_) => {
                    closed_by_server = true;
                    break;
                }
            },
        }
        let turn = wake_chunk(&mut session, Instant::now().into_std(), config.max_frame_len);
        if !turn.chunk.is_empty() {
            // A failed write is seen as the connection's close by the next read.
            let _ = send.write_all(&turn.chunk).await;
        }
        // The replies are out: timed now, before the game side's share of this turn runs.
        if turn.answers
            && let Some(cause) = turn.due.into_iter().chain(cause).min()
        {
            let delay = std::time::Instant::now().saturating_duration_since(cause);
            session.record_reply_delay(delay);
            if let Some(progress) = progress {
                progress.interval().reply(delay);
            }
        }
        reported.update(progress, &session);
        session.run_game_side();
        if let Some(kind) = session.take_transport_misbehaviour(Instant::now().into_std()) {
            match misbehave(kind, &connection, &mut send, stop_at).await {
                Misbehaved::Wrote => {}
                Misbehaved::Closed => {
                    closed_by_server = true;
                    break;
                }
                Misbehaved::StayedSilent => {
                    silent = true;
                    break;
                }
            }
        }
    }
    // A turn the loop left early did not run its game side's share, nor report.
    session.run_game_side();
    reported.update(progress, &session);
    reported.end(progress);
    life.connected = session.player().is_some();
    life.placed = session.is_placed();
    life.own_pawns = session.player().map_or(0, |me| session.pawns_owned_by(me));
    if closed_by_server {
        // Why: from the `Closing` the server sent last on the stream, or else from the close
        // frame, given time to arrive.
        let (why, recoverable, code) = match session.closing() {
            Some((code, reason)) => {
                let number = u64::from(code);
                let code = CloseCode::from_code(number).ok_or(number);
                (describe_code(code, reason), code.is_ok_and(reconnects_after), code.ok())
            }
            None => {
                let _ = tokio::time::timeout(LEAVE_TIMEOUT, connection.closed()).await;
                let code = server_close_code(&connection);
                (describe_close(&connection), is_recoverable(&connection), code)
            }
        };
        life.server_close = code;
        match recoverable {
            true => life.lost = Some(why),
            false => life.errors.push(why),
        }
    } else if silent {
        // Its run ended while it kept the connection without a word: it vanishes.
        connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"silent");
        life.failed = false;
    } else if settle {
        session.leave(Instant::now().into_std());
        while let Some(leave) = session.poll_output() {
            let _ = write(&mut send, &leave, config.max_frame_len).await;
        }
        let _ = send.finish();
        let _ = tokio::time::timeout(LEAVE_TIMEOUT, connection.closed()).await;
        connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"leave");
        life.failed = false;
    } else {
        // A relaunch: the client vanishes without a word, as a crashed game would.
        connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"relaunch");
        life.failed = false;
    }
    life.ended_dead = session.is_dead_or_respawning();
    life.stats = session.finish(Instant::now().into_std());
    life.stats.wire = wire_figures(&connection.stats());
    life
}

/// What a transport misbehaviour came to.
enum Misbehaved {
    /// The bad bytes were written; the session goes on until the server closes.
    Wrote,
    /// The server closed the connection meanwhile.
    Closed,
    /// The client kept the connection without reading or writing until its run ended.
    StayedSilent,
}

/// Carries out a transport misbehaviour (issue 13 item 4) on the control stream: a frame whose
/// body does not decode, a header announcing a body far above any maximum frame length, or
/// silence (no read, no write; QUIC keeps the connection alive) until the server closes the
/// connection or `until` passes.
async fn misbehave(
    kind: Misbehaviour,
    connection: &quinn::Connection,
    send: &mut quinn::SendStream,
    until: Instant,
) -> Misbehaved {
    let bytes: Vec<u8> = match kind {
        // A frame of 4 bytes that is no message.
        Misbehaviour::GarbageFrame => vec![4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff],
        // A header announcing 16 MiB, and the first KiB of it.
        Misbehaviour::OversizedFrame => {
            let mut bytes = (16u32 << 20).to_le_bytes().to_vec();
            bytes.resize(4 + 1024, 0xab);
            bytes
        }
        Misbehaviour::Silent => {
            return tokio::select! {
                _ = connection.closed() => Misbehaved::Closed,
                _ = tokio::time::sleep_until(until) => Misbehaved::StayedSilent,
            };
        }
        // The session carries out the others.
        _ => return Misbehaved::Wrote,
    };
    match send.write_all(&bytes).await {
        Ok(()) => Misbehaved::Wrote,
        Err(_) => Misbehaved::Closed,
    }
}

/// The close code of ours the server closed `connection` with, if it did.
fn server_close_code(connection: &quinn::Connection) -> Option<CloseCode> {
    match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            CloseCode::from_code(close.error_code.into_inner())
        }
        _ => None,
    }
}

/// What a connection carried, from quinn's own statistics.
fn wire_figures(stats: &quinn::ConnectionStats) -> WireFigures {
    WireFigures {
        bytes_sent: stats.udp_tx.bytes,
        bytes_received: stats.udp_rx.bytes,
        datagrams_sent: stats.udp_tx.datagrams,
        datagrams_received: stats.udp_rx.datagrams,
        lost_packets: stats.path.lost_packets,
        lost_bytes: stats.path.lost_bytes,
        congestion_events: stats.path.congestion_events,
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn write(
    send: &mut quinn::SendStream,
    message: &ClientMessage,
    max: usize,
) -> Result<(), ()> {
    let frame = gatehouse_protocol::encode_frame(message, max).map_err(|_| ())?;
    send.write_all(&frame).await.map_err(|_| ())
}

/// What one wake of a session writes ([`wake_chunk`]).
struct Turn {
    /// Every message the session had to send, framed, in order.
    chunk: Vec<u8>,
    /// Whether one of them answers the server (`TransitionShown`, `TransitionReady`, `JoinReady`,
    /// `PossessionAcknowledged`): a reply, timed from its cause.
    answers: bool,
    /// The deadline handled first, if one was due.
    due: Option<std::time::Instant>,
}

/// What one wake of a session writes, as one chunk: first the deadlines already due at `now`
/// are handled (a zero-length stream's ready), then every message the session has to send is
/// framed, in order. So a client ready at once answers a `ShowTransition` with one datagram,
/// as the server writes one chunk per wake (issue 12 item 1). A message that cannot be framed
/// within `max` bytes is dropped and logged.
fn wake_chunk(session: &mut ClientSession, now: std::time::Instant, max: usize) -> Turn {
    let due = session.poll_timeout().filter(|at| *at <= now);
    if due.is_some() {
        session.handle_timeout(now);
    }
    let mut turn = Turn { chunk: Vec::new(), answers: false, due };
    while let Some(message) = session.poll_output() {
        turn.answers |= is_answer(&message);
        if let Err(e) = gatehouse_protocol::encode_frame_into(&message, max, &mut turn.chunk) {
            tracing::warn!(error = %e, "a message of the session could not be framed; not sent");
        }
    }
    turn
}

/// Whether `message` answers something the server sent or asked (what the reply delay times).
fn is_answer(message: &ClientMessage) -> bool {
    matches!(
        message,
        ClientMessage::TransitionShown { .. }
            | ClientMessage::TransitionReady { .. }
            | ClientMessage::JoinReady { .. }
            | ClientMessage::PossessionAcknowledged { .. }
    )
}

/// When the QUIC driver woke a read of the control stream that had nothing to give: the data
/// became readable then, and waited from then until the sessions' thread took it. Set by the
/// first wake after the read last found nothing to read. A wake that lands between the read
/// finding nothing and the stamp's reset is lost: that reply is timed from when it was read, a
/// little short.
#[derive(Debug, Default)]
struct ReadStamp {
    /// The first wake not yet taken.
    woken: Mutex<Option<std::time::Instant>>,
    /// The waker of the read's task, to wake in turn.
    task: Mutex<Option<Waker>>,
}

impl ReadStamp {
    /// The first wake since the last take, if any.
    fn take(&self) -> Option<std::time::Instant> {
        self.woken.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Wake for ReadStamp {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(std::time::Instant::now);
        if let Some(task) = self.task.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            task.wake_by_ref();
        }
    }
}

/// Runs `read` with its wakes stamped ([`ReadStamp`]) before they reach the task.
async fn stamped<F: Future>(read: F, stamp: &Arc<ReadStamp>) -> F::Output {
    let mut read = std::pin::pin!(read);
    std::future::poll_fn(|cx| {
        {
            let mut task = stamp.task.lock().unwrap_or_else(PoisonError::into_inner);
            if !task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *task = Some(cx.waker().clone());
            }
        }
        let waker = Waker::from(stamp.clone());
        let polled = read.as_mut().poll(&mut Context::from_waker(&waker));
        if polled.is_pending() {
            // Woken with nothing readable in order (a datagram ahead of a lost one, say): the
            // network's delay, not the client's. The stamp starts from the next wake.
            stamp.take();
        }
        polled
    })
    .await
}

/// Whether a closed connection is one a game client reconnects after: it timed out or was reset
/// (the network went away, the server was killed), or the server closed it with a code a client
/// reconnects after ([`reconnects_after`]).
fn is_recoverable(connection: &quinn::Connection) -> bool {
    is_recoverable_reason(connection.close_reason().as_ref())
}

/// [`is_recoverable`] on the reason a connection closed. Besides a timeout, a reset and the
/// codes of [`reconnects_after`]: the server gave up on a handshake it never saw finish (on a
/// lossy path the client's last handshake flight can be lost until the server's handshake
/// timeout), which reaches the client as QUIC's `APPLICATION_ERROR` during the handshake.
fn is_recoverable_reason(reason: Option<&quinn::ConnectionError>) -> bool {
    match reason {
        Some(quinn::ConnectionError::TimedOut | quinn::ConnectionError::Reset) => true,
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            CloseCode::from_code(close.error_code.into_inner()).is_some_and(reconnects_after)
        }
        Some(quinn::ConnectionError::ConnectionClosed(close)) => {
            close.error_code == quinn::TransportErrorCode::APPLICATION_ERROR
        }
        _ => false,
    }
}

/// Whether a game client logs in again after the server closed its connection with `code`:
/// the server is shutting down (a restart), or it did not get the client's `Hello` in time (on
/// a bad network, lost on the way: the login failed, not the client). Every other close says
/// something about the client, and ends it.
fn reconnects_after(code: CloseCode) -> bool {
    matches!(code, CloseCode::ShuttingDown | CloseCode::HelloTimeout)
}

/// "closed by the server (ReadyTimeout): client ready timeout": a code of ours by name, an
/// unknown one by number.
fn describe_code(code: Result<CloseCode, u64>, reason: &str) -> String {
    let code = code.map_or_else(|n| n.to_string(), |c| format!("{c:?}"));
    format!("closed by the server ({code}): {reason}")
}

fn describe_close(connection: &quinn::Connection) -> String {
    match connection.close_reason() {
        Some(quinn::ConnectionError::ApplicationClosed(close)) => {
            let number = close.error_code.into_inner();
            let code = CloseCode::from_code(number).ok_or(number);
            describe_code(code, &String::from_utf8_lossy(&close.reason))
        }
        Some(other) => format!("connection lost: {other}"),
        None => "stream ended while the connection stayed open".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 11, item 1: `--full-clients K` makes exactly K of N clients full, spread over the
    /// indices, the first among them; K above N makes them all full, 0 none.
    #[test]
    fn k_full_clients_are_spread_over_the_swarm() {
        let full: Vec<usize> = (0..1000).filter(|&i| is_full_client(i, 1000, 16)).collect();
        assert_eq!(full.len(), 16);
        assert_eq!(full[0], 0);
        assert!(full.windows(2).all(|w| w[1] - w[0] >= 50), "spread: {full:?}");
        assert_eq!((0..8).filter(|&i| is_full_client(i, 8, 16)).count(), 8);
        assert_eq!((0..8).filter(|&i| is_full_client(i, 8, 0)).count(), 0);
        assert_eq!((0..7).filter(|&i| is_full_client(i, 7, 3)).count(), 3);
    }

    /// Issue 12 item 1, on the client's side: a client that streams nothing answers a
    /// `ShowTransition` with its `TransitionShown` and its `TransitionReady` in one chunk (one
    /// datagram for the server to read), the ready's zero-length deadline handled in the same
    /// wake; with a stream to wait for, the wake carries the `TransitionShown` alone.
    #[test]
    fn a_client_ready_at_once_answers_a_show_in_one_chunk() {
        use gatehouse_protocol::{FrameDecoder, LevelName, NodeId, TransitionId};
        let answers = |stream_time: Duration| {
            let config = SessionConfig {
                full: false,
                stream_time: (stream_time, stream_time),
                ..Default::default()
            };
            let now = std::time::Instant::now();
            let mut session = ClientSession::new(now, config);
            assert!(matches!(session.poll_output(), Some(ClientMessage::Hello { .. })));
            let me = PlayerId::new("sim-0000").unwrap();
            session.handle(
                now,
                ServerMessage::Welcome { player_id: me, current_node: None, max_frame_len: 65_536 },
            );
            session.handle(
                now,
                ServerMessage::ShowTransition {
                    transition_id: TransitionId(4),
                    target_node: NodeId::new("harbor").unwrap(),
                    levels: vec![LevelName::new("harbor_docks").unwrap()],
                    rooms: Vec::new(),
                },
            );
            let mut decoder = FrameDecoder::new(1024);
            let turn = wake_chunk(&mut session, now, 1024);
            assert!(turn.answers, "a TransitionShown at least: a reply");
            assert_eq!(turn.due.is_some(), stream_time.is_zero(), "the ready's deadline was due");
            decoder.extend(&turn.chunk);
            let mut messages = Vec::new();
            while let Ok(Some(message)) = decoder.next_message::<ClientMessage>() {
                messages.push(message);
            }
            messages
        };
        let shown = ClientMessage::TransitionShown { transition_id: TransitionId(4) };
        let ready = ClientMessage::TransitionReady { transition_id: TransitionId(4) };
        assert_eq!(answers(Duration::ZERO), vec![shown.clone(), ready]);
        assert_eq!(answers(Duration::from_millis(50)), vec![shown]);
    }

    /// A client logs in again after a restart's close or a login whose `Hello` did not reach
    /// the server in time; any other close of the server ends it.
    #[test]
    fn a_client_reconnects_after_a_restart_or_a_login_lost_on_the_way() {
        assert!(reconnects_after(CloseCode::ShuttingDown));
        assert!(reconnects_after(CloseCode::HelloTimeout));
        for code in [CloseCode::ReadyTimeout, CloseCode::Abuse, CloseCode::Replaced] {
            assert!(!reconnects_after(code), "{code:?}");
        }
    }

    /// A handshake the server gave up on (QUIC's `APPLICATION_ERROR` before the handshake
    /// ended, as quinn reports it) is recovered from like a timeout; another transport error,
    /// or a close for a cause the client made, is not.
    #[test]
    fn a_client_reconnects_after_the_server_gave_up_on_its_handshake() {
        let transport = |code| {
            quinn::ConnectionError::ConnectionClosed(quinn_proto::ConnectionClose {
                error_code: code,
                frame_type: None,
                reason: bytes::Bytes::new(),
            })
        };
        let gave_up = transport(quinn::TransportErrorCode::APPLICATION_ERROR);
        assert!(is_recoverable_reason(Some(&gave_up)));
        assert!(is_recoverable_reason(Some(&quinn::ConnectionError::TimedOut)));
        let violation = transport(quinn::TransportErrorCode::PROTOCOL_VIOLATION);
        assert!(!is_recoverable_reason(Some(&violation)));
        let abuse = quinn::ConnectionError::ApplicationClosed(quinn_proto::ApplicationClose {
            error_code: quinn::VarInt::from_u32(CloseCode::Abuse.code()),
            reason: bytes::Bytes::new(),
        });
        assert!(!is_recoverable_reason(Some(&abuse)));
        assert!(!is_recoverable_reason(None));
    }

    /// Only what answers the server is timed as a reply: a restart request, a leave or a
    /// hello is the client's own initiative.
    #[test]
    fn only_answers_to_the_server_are_timed_as_replies() {
        use gatehouse_protocol::{JoinId, PawnId, TransitionId};
        let id = TransitionId(1);
        let answers = [
            ClientMessage::TransitionShown { transition_id: id },
            ClientMessage::TransitionReady { transition_id: id },
            ClientMessage::JoinReady { join_id: JoinId(2) },
            ClientMessage::PossessionAcknowledged { pawn_id: PawnId(3) },
        ];
        assert!(answers.iter().all(is_answer));
        let own = [ClientMessage::RestartRequest, ClientMessage::Leave];
        assert!(!own.iter().any(is_answer));
    }

    /// A read that is pending until its test says so, keeping the waker it was last given.
    struct Gate {
        open: std::rc::Rc<std::cell::Cell<bool>>,
        waker: std::rc::Rc<std::cell::RefCell<Option<Waker>>>,
    }

    impl Future for Gate {
        type Output = ();

        fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> std::task::Poll<()> {
            if self.open.get() {
                return std::task::Poll::Ready(());
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            std::task::Poll::Pending
        }
    }

    /// The read stamp keeps the first wake since the read last found nothing: the instant its
    /// data became readable. A wake after which the read still finds nothing (a datagram ahead
    /// of a lost one) is the network's delay, and is forgotten.
    #[test]
    fn a_read_stamp_keeps_the_first_wake_since_the_read_last_found_nothing() {
        let stamp = Arc::new(ReadStamp::default());
        let open = std::rc::Rc::new(std::cell::Cell::new(false));
        let waker = std::rc::Rc::new(std::cell::RefCell::new(None::<Waker>));
        let gate = Gate { open: open.clone(), waker: waker.clone() };
        let mut read = std::pin::pin!(stamped(gate, &stamp));
        let mut cx = Context::from_waker(Waker::noop());
        let mut poll = || read.as_mut().poll(&mut cx).is_ready();
        assert!(!poll());
        let wake = || waker.borrow().as_ref().expect("the read's waker").wake_by_ref();
        // Woken with nothing readable in order: forgotten at the next poll.
        wake();
        assert!(stamp.woken.lock().unwrap().is_some(), "the wake is stamped");
        assert!(!poll());
        assert_eq!(stamp.take(), None, "a wake that brought nothing is the network's");
        // Woken twice, then readable: the first wake is when the data was.
        let before = std::time::Instant::now();
        wake();
        let first = *stamp.woken.lock().unwrap();
        wake();
        open.set(true);
        assert!(poll());
        let taken = stamp.take();
        assert_eq!(taken, first, "the first wake is kept");
        assert!(taken.is_some_and(|at| at >= before));
        assert_eq!(stamp.take(), None, "taken once");
    }

    /// Issue 11, item 4: the progress counts follow each connection, and a connection's end
    /// takes back what it added.
    #[test]
    fn progress_counts_connections_and_takes_them_back_at_the_end() {
        let progress = Progress::default();
        let now = std::time::Instant::now();
        let thin = SessionConfig { full: false, ..Default::default() };
        let mut session = ClientSession::new(now, thin);
        let mut reported = Reported::new(0);
        let me = PlayerId::new("sim-0000").unwrap();
        session.handle(
            now,
            ServerMessage::Welcome { player_id: me, current_node: None, max_frame_len: 65_536 },
        );
        session.handle(
            now,
            ServerMessage::EndTransition { transition_id: gatehouse_protocol::TransitionId(9) },
        );
        reported.update(Some(&progress), &session);
        reported.update(Some(&progress), &session);
        let seen = progress.snapshot();
        assert_eq!((seen.connected, seen.placed, seen.errors), (1, 0, 1), "{seen:?}");
        reported.end(Some(&progress));
        assert_eq!(progress.snapshot().connected, 0);
        assert_eq!(progress.snapshot().errors, 1, "errors stay counted");
    }

    /// Each client's loading screen reaches the interval figures: up while it is up, down when
    /// it comes down, cut short (counted toward the longest, not as down) when the connection
    /// ends with it up.
    #[test]
    fn the_progress_follows_each_clients_screen_into_the_interval() {
        use gatehouse_protocol::{LevelName, NodeId, TransitionId};
        let progress = Progress::default();
        let show = |id| ServerMessage::ShowTransition {
            transition_id: TransitionId(id),
            target_node: NodeId::new("harbor").unwrap(),
            levels: vec![LevelName::new("harbor_docks").unwrap()],
            rooms: Vec::new(),
        };
        let start = std::time::Instant::now();
        let mut runs = Vec::new();
        for cut in [false, true] {
            let thin = SessionConfig { full: false, ..Default::default() };
            let mut session = ClientSession::new(start, thin);
            let mut reported = Reported::new(7);
            let me = PlayerId::new("sim-0007").unwrap();
            session.handle(
                start,
                ServerMessage::Welcome { player_id: me, current_node: None, max_frame_len: 65_536 },
            );
            session.handle(start, show(1));
            reported.update(Some(&progress), &session);
            let up = progress.take_interval(std::time::Instant::now(), 1);
            assert_eq!((up.screens_up, up.screens_down), (1, 0), "{up:?}");
            if cut {
                reported.end(Some(&progress));
            } else {
                // Placed in it, so its end drops the screen.
                let possessed = ServerMessage::Possessed { pawn_id: gatehouse_protocol::PawnId(1) };
                session.handle(start, possessed);
                session
                    .handle(start, ServerMessage::EndTransition { transition_id: TransitionId(1) });
                reported.update(Some(&progress), &session);
            }
            runs.push(progress.take_interval(std::time::Instant::now(), 2));
        }
        let (down, cut) = (&runs[0], &runs[1]);
        assert_eq!((down.screens_up, down.screens_down, down.shown_to_ended.count), (0, 1, 1));
        assert_eq!((cut.screens_up, cut.screens_down, cut.shown_to_ended.count), (0, 0, 0));
        assert!(cut.longest_loading_screen_ms <= start.elapsed().as_millis() as u64);
        // A screen that goes up and comes down between two updates is counted all the same,
        // with its own instants.
        let thin = SessionConfig { full: false, ..Default::default() };
        let mut session = ClientSession::new(start, thin);
        let mut reported = Reported::new(8);
        let me = PlayerId::new("sim-0008").unwrap();
        session.handle(
            start,
            ServerMessage::Welcome { player_id: me, current_node: None, max_frame_len: 65_536 },
        );
        reported.update(Some(&progress), &session);
        session.handle(start, show(2));
        let ended = start + Duration::from_millis(1500);
        let possessed = ServerMessage::Possessed { pawn_id: gatehouse_protocol::PawnId(2) };
        session.handle(start, possessed);
        session.handle(ended, ServerMessage::EndTransition { transition_id: TransitionId(2) });
        reported.update(Some(&progress), &session);
        let quick = progress.take_interval(ended, 3);
        assert_eq!((quick.screens_up, quick.screens_down), (0, 1), "{quick:?}");
        assert_eq!(quick.shown_to_ended.max_us / 1000, 1500, "{quick:?}");
    }
}
