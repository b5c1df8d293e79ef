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
//! The QUIC side never waits for the sessions, or a busy sessions' thread would idle them out:
//! the client endpoints and every connection's driver (keep-alives, acknowledgements, loss
//! recovery) run on a runtime of their own ([`DriverRuntime`]), so however long the sessions'
//! thread is busy, no connection idles out. Clients share an endpoint per
//! [`CLIENTS_PER_ENDPOINT`], each socket with explicit buffers, and dial at
//! [`SwarmConfig::connect_rate`] per second.
//!
//! Of the clients, [`SwarmConfig::full_clients`] run the whole client lifecycle; the rest are
//! thin (protocol duties and the session checks only), so a thousand of them stay cheap.
//!
//! A client follows its server's moves to other servers (docs/spec/travel.md V3): for a
//! session's `Output::Dial` it opens a second connection from the same endpoint to the
//! destination, pinned when the `TravelTo` names a certificate, else trusted as the swarm trusts
//! its server ([`SwarmConfig::server_cert`] and [`SwarmConfig::also_trust`], or
//! [`SwarmConfig::server_pin`]); what arrives there goes to the session on that link, and the
//! connection is closed when the session is done with it. A move's destination is dialled
//! directly, never through the [`SwarmConfig::conditioner`]. A relaunch or a reconnect dials the
//! server the client last played on, and the swarm's server when that one cannot be reached.

mod life;
mod links;
mod progress;
mod stream;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gatehouse_client::net::{quic_config_pinned, quic_config_trusting};
use gatehouse_client::quic::{DriverRuntime, endpoint_config};
use gatehouse_client::{CertificatePin, ConnectError};
use gatehouse_conditioner::proxy::ProxyHandle;
use gatehouse_protocol::PlayerId;
use gatehouse_protocol::token::{self, SessionClaims, TokenKey};
use tokio::time::Instant;

pub use life::run_client;
pub use progress::{Progress, ProgressSnapshot};

use crate::SimError;
use crate::misbehaviour::{Misbehaviour, misbehaviour_of};
use crate::report::{ClientOutcome, SwarmReport};
use crate::session::SessionConfig;

/// How long a leaving client waits for the server to close.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the swarm waits, once every client has ended, for its endpoints' closed connections
/// to drain (each lasts three probe timeouts, seconds on a path a struggling server made slow):
/// the report does not wait longer for them.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// The certificate to trust (DER or PEM), e.g. the server's `dev-cert.der`; not read when
    /// `server_pin` is set.
    pub server_cert: PathBuf,
    /// Trust exactly the server certificate with this SHA-256 fingerprint instead of
    /// `server_cert` (`--server-fingerprint`; docs/simulator.md). `None`: the file.
    pub server_pin: Option<CertificatePin>,
    /// Further certificates (DER or PEM) trusted beside `server_cert` (`--trust-cert`): the
    /// other servers of a fleet, which a move's `TravelTo` may name without a pin. Not read
    /// when `server_pin` is set (an unpinned destination is then trusted by that pin, as the
    /// first connection). Empty: `server_cert` alone.
    pub also_trust: Vec<PathBuf>,
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
    /// A network conditioner between the clients and the server (loss, lag, reordering): the
    /// clients dial its address instead of `server`, each from a UDP socket of its own registered
    /// under the client's index, so a client's drops depend on the seed and its index alone.
    /// `None`: straight to the server.
    pub conditioner: Option<ProxyHandle>,
    /// How many of the clients misbehave (as hostile clients would), spread over the indices
    /// from the last one (see [`misbehaviour_of`]); a misbehaving client is always thin. 0: none.
    pub misbehaving: usize,
    /// The kinds the misbehaving clients are given, in turn; empty: none misbehaves.
    /// `session.misbehaviour` is ignored: this and `misbehaving` decide.
    pub misbehaviours: Vec<Misbehaviour>,
}

impl SwarmConfig {
    /// `clients` clients (the first is index 0) against the server at `server`, trusting the
    /// certificate file `server_cert` under the name `localhost`, staying `duration`: the
    /// default client session, the shipped development token key, every client full, all
    /// dialling at once, no relaunches, conditioner or misbehaviour, a 10 s connect bound and
    /// a 5 s settle grace. Change the fields for anything else.
    pub fn new(
        server: SocketAddr,
        server_cert: PathBuf,
        clients: usize,
        duration: Duration,
    ) -> SwarmConfig {
        SwarmConfig {
            server,
            server_name: "localhost".into(),
            server_cert,
            server_pin: None,
            also_trust: Vec::new(),
            clients,
            first_index: 0,
            duration,
            token_key: TokenKey::new(gatehouse_protocol::token::DEV_TOKEN_KEY),
            session: SessionConfig::default(),
            max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
            connect_timeout: Duration::from_secs(10),
            relaunch_every: None,
            settle_grace: Duration::from_secs(5),
            full_clients: clients,
            connect_rate: None,
            progress: None,
            conditioner: None,
            misbehaving: 0,
            misbehaviours: Vec::new(),
        }
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
    trusting_client_config(&[server_cert.to_owned()])
}

/// As [`client_config`], trusting every certificate of every file of `certs` (a fleet's
/// servers, each with its own).
///
/// # Errors
/// As [`client_config`], naming the file that cannot be read or trusted.
fn trusting_client_config(certs: &[PathBuf]) -> Result<quinn::ClientConfig, SimError> {
    let mut trust = Vec::with_capacity(certs.len());
    for path in certs {
        let certificate = |why: String| SimError::Certificate { path: path.to_owned(), why };
        let bytes = std::fs::read(path).map_err(|e| certificate(e.to_string()))?;
        // Each file on its own first, so a refusal names its file.
        quic_config_trusting(&[&bytes], Duration::from_secs(3), Duration::from_secs(10)).map_err(
            |e| match e {
                ConnectError::Certificate(why) => certificate(why),
                other => SimError::Tls(other.to_string()),
            },
        )?;
        trust.push(bytes);
    }
    let blobs: Vec<&[u8]> = trust.iter().map(Vec::as_slice).collect();
    // The library's transport, as a game's client has it.
    quic_config_trusting(&blobs, Duration::from_secs(3), Duration::from_secs(10))
        .map_err(|e| SimError::Tls(e.to_string()))
}

/// The client configuration of a swarm: trusting `server_cert` and every file of `also_trust`
/// ([`client_config`]), or, with a `pin`, exactly the certificate it names (the library's
/// [`quic_config_pinned`]; no file is read).
///
/// # Errors
/// As [`client_config`].
pub fn swarm_client_config(
    server_cert: &std::path::Path,
    also_trust: &[PathBuf],
    pin: Option<CertificatePin>,
) -> Result<quinn::ClientConfig, SimError> {
    match pin {
        Some(pin) => quic_config_pinned(pin, Duration::from_secs(3), Duration::from_secs(10))
            .map_err(|e| SimError::Tls(e.to_string())),
        None => {
            let certs: Vec<PathBuf> =
                std::iter::once(server_cert.to_owned()).chain(also_trust.iter().cloned()).collect();
            trusting_client_config(&certs)
        }
    }
}

/// Where a client's link goes: a server's address, the name its certificate is checked against
/// and, for a server a move reached, the pin its `TravelTo` named.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    server: SocketAddr,
    server_name: String,
    pin: Option<CertificatePin>,
}

impl Target {
    /// The swarm's own server, trusted as the swarm trusts it.
    fn home(config: &SwarmConfig) -> Target {
        Target { server: config.server, server_name: config.server_name.clone(), pin: None }
    }
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
    let client_config =
        swarm_client_config(&config.server_cert, &config.also_trust, config.server_pin)?;
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
    drain(&endpoints).await;
    Ok(outcomes)
}

/// Waits, at most [`DRAIN_TIMEOUT`] in all, for every endpoint's closed connections to drain.
async fn drain(endpoints: &[quinn::Endpoint]) {
    // They drain side by side: waiting on each in turn takes as long as the slowest.
    let idle = async {
        for endpoint in endpoints {
            endpoint.wait_idle().await;
        }
    };
    if tokio::time::timeout(DRAIN_TIMEOUT, idle).await.is_err() {
        tracing::debug!("closed connections still draining; not waited for");
    }
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

/// A session of `config`, welcomed as `player` at `now` with no node (its `Hello` still to be
/// taken), for the swarm's tests.
#[cfg(test)]
fn welcomed(
    now: std::time::Instant,
    config: SessionConfig,
    player: &str,
) -> crate::session::ClientSession {
    use gatehouse_protocol::ServerMessage;
    let mut session = crate::session::ClientSession::new(now, config);
    // A test's own fixed, valid player id.
    #[allow(clippy::unwrap_used)]
    let player_id = PlayerId::new(player).unwrap();
    session.handle(
        now,
        ServerMessage::Welcome { player_id, current_node: None, max_frame_len: 65_536 },
    );
    session
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fleet's certificates are trusted together (`--trust-cert`), and one that cannot be read
    /// is named: the swarm never starts trusting less than it was told.
    #[test]
    fn every_certificate_of_the_trust_list_is_read_and_a_missing_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let cert = |name: &str| {
            let path = dir.path().join(name);
            let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
            std::fs::write(&path, key.cert.der()).unwrap();
            path
        };
        let (hub, dungeon) = (cert("hub.der"), cert("dungeon.der"));
        assert!(swarm_client_config(&hub, std::slice::from_ref(&dungeon), None).is_ok());
        let missing = dir.path().join("missing.der");
        let err = swarm_client_config(&hub, &[dungeon, missing.clone()], None).unwrap_err();
        assert!(matches!(&err, SimError::Certificate { path, .. } if *path == missing), "{err}");
    }

    /// `--full-clients K` makes exactly K of N clients full, spread over the indices, the first
    /// among them; K above N makes them all full, 0 none.
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
}
