//! gatehouse-floor: the bare QUIC floor F(N) (docs/performance.md): what this machine's loopback,
//! quinn and tokio cost for one server round trip to N clients, with nothing of the game in
//! between. The load benchmark (`deploy/load.sh`) prints the product's transition times as
//! ratios to it.
//!
//! In one process:
//!
//! - a QUIC server on a tokio multi-thread runtime, as `gatehouse-server` runs (one task per
//!   connection; an orchestrating task in the place of the game task), on a UDP socket bound to
//!   `127.0.0.1:0` with explicit send and receive buffers, as the server's endpoint binds them;
//! - N clients: their QUIC endpoints (one or several sockets) driven on a dedicated thread's
//!   current-thread runtime, their per-connection tasks on a second thread's current-thread
//!   runtime, so however busy the clients are, QUIC keeps being driven (the swarm's shape).
//!
//! Each client connects (at `connect_rate` per second, or all at once), opens the one
//! bidirectional stream and sends a 1-byte hello; the server answers a 1-byte welcome: connect
//! time is from the client's connect call to the welcome. Then, per round, the server writes
//! `message_bytes` on every client's stream (the round number in the first 8 bytes), every
//! client echoes them, and the round time runs from the orchestrator starting the round to the
//! last reply reaching it. Rounds are separated by `pause`.
//!
//! With [`FloorConfig::clients_process`], the clients run in a child process instead
//! (`gatehouse-floor --clients-child`, told what to do as JSON on its stdin, answering what it
//! measured on its stdout), so this process is the server alone, and it reads its own VmRSS
//! before any client and after the rounds: the memory floor M(N), what quinn, rustls and tokio
//! cost per idle connection (docs/performance.md).
//!
//! With [`FloorConfig::impair`], the clients reach the server through the swarm's network
//! conditioner (`gatehouse_conditioner`, in the server's process): the floor of a round trip to
//! every client over that network, for the figures of an impaired run (`deploy/scale-soak.sh`).
//! Each client endpoint is a flow of its own: `client_endpoints = clients` draws each client's
//! losses apart.
//!
//! Everything is bounded: a client that does not get its welcome within `connect_timeout`, all
//! clients not connected within the connect budget, a round not answered within
//! `round_timeout`: each is a [`FloorError`] that says how far it got.

#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use hdrhistogram::Histogram;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch};

use gatehouse_client::quic::{DriverRuntime, endpoint_config};
use gatehouse_conditioner::Conditions;
use gatehouse_conditioner::cli::start_in_process;
use gatehouse_conditioner::proxy::ProxyStats;

/// ALPN of the floor's connections: nothing here speaks the game protocol.
const ALPN: &[u8] = b"gatehouse-floor/1";
/// The client's first byte on its stream.
const HELLO: u8 = b'H';
/// The server's answer to it: the client is connected.
const WELCOME: u8 = b'W';
/// The round number that tells the server's connection tasks to stop.
const STOP: u64 = u64::MAX;
/// How long the end of a run (stats, closes, idle endpoints) may take.
const WIND_DOWN: Duration = Duration::from_secs(5);
/// How long the clients' process may take to end once the server has closed its endpoint, above
/// a client's connect timeout (one still connecting may wait that long; the others see the
/// close, then the process's QUIC thread waits up to [`WIND_DOWN`]).
const CHILD_END: Duration = Duration::from_secs(15);
/// How long the server idles after the last round, every connection open, before its memory
/// is read: the last acknowledgements come and go.
const MEMORY_SETTLE: Duration = Duration::from_secs(1);
/// The longest the connect rate may take to start every client.
const MAX_SPREAD: Duration = Duration::from_secs(24 * 3600);
/// The longest connect or round timeout (longer ones would overflow the deadlines).
const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// What a floor run does (docs/performance.md, "The load benchmark").
#[derive(Debug, Clone)]
pub struct FloorConfig {
    /// Clients, N (at least 1).
    pub clients: usize,
    /// Measured rounds (at least 1).
    pub rounds: usize,
    /// Bytes the server writes to each client per round, and each client echoes (8 ..= 65536).
    pub message_bytes: usize,
    /// Pause before each round.
    pub pause: Duration,
    /// Connections opened per second; `None`: all at once.
    pub connect_rate: Option<f64>,
    /// Client QUIC endpoints (UDP sockets) the clients are spread over, round robin (at least 1).
    pub client_endpoints: usize,
    /// Send and receive buffer asked for every UDP socket, bytes (the kernel caps it at
    /// `net.core.rmem_max` / `wmem_max` and reports double what it grants).
    pub udp_buffer_bytes: usize,
    /// Worker threads of the server's runtime; `None`: tokio's default (one per core).
    pub server_threads: Option<usize>,
    /// How long one client may take from its connect call to the server's welcome.
    pub connect_timeout: Duration,
    /// How long one round may take.
    pub round_timeout: Duration,
    /// `Some(exe)`: the clients run in a child process, `exe --clients-child` (this same
    /// program), so this process is the server alone and the report gives its memory per
    /// connection; `None`: they run on threads of this process.
    pub clients_process: Option<PathBuf>,
    /// A network conditioner between the clients and the server, and its seed; `None`: the
    /// clients reach the server directly. Not with `clients_process` (the conditioner would
    /// count in the server's memory).
    pub impair: Option<(Conditions, u64)>,
}

impl FloorConfig {
    /// The defaults for `clients` clients: 50 rounds of 64 bytes 50 ms apart, all connecting
    /// at once on one client endpoint, 4 MiB socket buffers (the server's default
    /// `network.udp_buffer_bytes`), 10 s to connect, 10 s per round.
    pub fn new(clients: usize) -> Self {
        FloorConfig {
            clients,
            rounds: 50,
            message_bytes: 64,
            pause: Duration::from_millis(50),
            connect_rate: None,
            client_endpoints: 1,
            udp_buffer_bytes: 4 << 20,
            server_threads: None,
            connect_timeout: Duration::from_secs(10),
            round_timeout: Duration::from_secs(10),
            clients_process: None,
            impair: None,
        }
    }

    /// How long every client together may take to connect: the last one starts after
    /// `(clients - 1) / connect_rate`, then has its `connect_timeout`, plus a margin.
    pub fn connect_budget(&self) -> Duration {
        connect_spread(self.clients, self.connect_rate)
            .saturating_add(self.connect_timeout)
            .saturating_add(Duration::from_secs(2))
    }

    fn check(&self) -> Result<(), FloorError> {
        let bad = |what: String| Err(FloorError::Config(what));
        if self.clients == 0 || self.rounds == 0 || self.client_endpoints == 0 {
            return bad("clients, rounds and client endpoints must be at least 1".into());
        }
        if !(8..=65536).contains(&self.message_bytes) {
            return bad(format!("message bytes must be 8 ..= 65536, found {}", self.message_bytes));
        }
        if self.connect_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return bad("the connect rate must be a positive number per second".into());
        }
        if connect_spread(self.clients, self.connect_rate) > MAX_SPREAD {
            return bad(format!("connecting every client must take at most {MAX_SPREAD:?}"));
        }
        if self.server_threads == Some(0) {
            return bad("server threads must be at least 1".into());
        }
        if self.connect_timeout > MAX_TIMEOUT || self.round_timeout > MAX_TIMEOUT {
            return bad(format!("the connect and round timeouts must be at most {MAX_TIMEOUT:?}"));
        }
        if self.impair.is_some() && self.clients_process.is_some() {
            return bad(
                "an impaired floor measures time, not memory: not with a clients' process".into()
            );
        }
        Ok(())
    }
}

/// When the last of `clients` starts connecting at `rate` per second (`None`: all at once);
/// saturating, so an absurd rate is refused by the checks rather than overflowing.
fn connect_spread(clients: usize, rate: Option<f64>) -> Duration {
    let seconds = rate.map_or(0.0, |rate| clients.saturating_sub(1) as f64 / rate);
    Duration::try_from_secs_f64(seconds).unwrap_or(Duration::MAX)
}

/// Percentiles of a set of durations, µs (from an HDR histogram, 3 significant digits).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
    /// Mean, µs.
    pub mean_us: u64,
}

impl LatencySummary {
    fn of(histogram: &Histogram<u64>) -> Self {
        LatencySummary {
            count: histogram.len(),
            p50_us: histogram.value_at_quantile(0.5),
            p99_us: histogram.value_at_quantile(0.99),
            max_us: histogram.max(),
            mean_us: histogram.mean().round() as u64,
        }
    }
}

impl std::fmt::Display for LatencySummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let LatencySummary { count, p50_us, p99_us, max_us, mean_us } = self;
        write!(
            f,
            "p50 {p50_us} / p99 {p99_us} / max {max_us} µs (mean {mean_us} µs, {count} samples)"
        )
    }
}

/// Bytes on the wire during the rounds, from the server's quinn connection stats (UDP
/// payloads, so QUIC headers, acknowledgements and keep-alives included).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorWire {
    /// Sent by the server, per client per round.
    pub server_sent_bytes_per_client_per_round: f64,
    /// Received by the server, per client per round.
    pub server_received_bytes_per_client_per_round: f64,
}

/// The UDP socket buffers asked for and granted (as the kernel reports them: double what it
/// grants, capped at `net.core.rmem_max` / `wmem_max`), bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UdpBuffers {
    /// Asked for, send and receive alike.
    pub requested: usize,
    /// The server socket's send buffer.
    pub server_send: usize,
    /// The server socket's receive buffer.
    pub server_recv: usize,
    /// The (first) client socket's send buffer.
    pub client_send: usize,
    /// The (first) client socket's receive buffer.
    pub client_recv: usize,
}

/// What a floor run measured (docs/performance.md, "The load benchmark"). Serialised as the JSON of
/// `gatehouse-floor --json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FloorReport {
    /// Clients, N.
    pub clients: usize,
    /// Measured rounds.
    pub rounds: usize,
    /// Bytes per message, each way.
    pub message_bytes: usize,
    /// Client QUIC endpoints.
    pub client_endpoints: usize,
    /// Connections opened per second (`null`: all at once).
    pub connect_rate: Option<f64>,
    /// Worker threads of the server's runtime.
    pub server_threads: usize,
    /// From the first client's connect call to the last client's welcome, µs.
    pub connect_all_us: u64,
    /// Per client, its connect call to its welcome, µs.
    pub connect: LatencySummary,
    /// Per round, the server's start of the round to the last reply, µs: F(N).
    pub round: LatencySummary,
    /// Bytes on the wire during the rounds.
    pub wire: FloorWire,
    /// The UDP socket buffers.
    pub udp_buffers: UdpBuffers,
    /// The server's memory, when the clients ran in another process (`null` otherwise: the
    /// process's memory is both sides').
    pub server_memory: Option<ServerMemory>,
    /// What the network conditioner did, when the clients went through one (`null`
    /// otherwise).
    pub network: Option<ProxyStats>,
}

/// The server process's resident memory (`VmRSS`, KiB) with no client, then after the last
/// round with every connection open and idle: what quinn, rustls and tokio cost per connection
/// with nothing of the game, the floor of the product's memory per idle client.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerMemory {
    /// Before any client connected (the runtime and the endpoint up), KiB.
    pub rss_kib_before: u64,
    /// After the rounds and a settle of `MEMORY_SETTLE`, every connection open, KiB.
    pub rss_kib_idle: u64,
    /// The difference per connection, KiB.
    pub kib_per_connection: f64,
}

impl std::fmt::Display for FloorReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rate = self.connect_rate.map_or_else(|| "all at once".to_owned(), |r| format!("{r}/s"));
        writeln!(
            f,
            "floor F({}): {} clients on {} client endpoint(s), {} rounds of {} bytes, server on {} threads",
            self.clients,
            self.clients,
            self.client_endpoints,
            self.rounds,
            self.message_bytes,
            self.server_threads
        )?;
        writeln!(
            f,
            "  connect ({rate}): all in {:.1} ms; per client {}",
            self.connect_all_us as f64 / 1000.0,
            self.connect
        )?;
        writeln!(f, "  round: {}", self.round)?;
        writeln!(
            f,
            "  wire: server sent {:.1} / received {:.1} bytes per client per round",
            self.wire.server_sent_bytes_per_client_per_round,
            self.wire.server_received_bytes_per_client_per_round
        )?;
        let b = &self.udp_buffers;
        writeln!(
            f,
            "  UDP buffers: asked {}; server send {} / recv {}; client send {} / recv {}",
            b.requested, b.server_send, b.server_recv, b.client_send, b.client_recv
        )?;
        if let Some(m) = &self.server_memory {
            writeln!(
                f,
                "  server memory (clients in another process): VmRSS {} → {} KiB, every \
                 connection open after the rounds: {:.1} KiB per connection",
                m.rss_kib_before, m.rss_kib_idle, m.kib_per_connection
            )?;
        }
        if let Some(network) = &self.network {
            write!(f, "  through the {network}")?;
        }
        Ok(())
    }
}

/// Why a floor run could not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FloorError {
    /// The configuration is out of range.
    #[error("invalid floor configuration: {0}")]
    Config(String),
    /// The self-signed certificate or the TLS configuration could not be made.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A UDP socket could not be set up.
    #[error("cannot bind UDP {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// A runtime or thread could not be started, or a thread ended without a result.
    #[error("runtime: {0}")]
    Runtime(String),
    /// Not every client connected within the connect budget, or one failed to.
    #[error(
        "{connected} of {clients} clients connected within {within:?}; client errors: {errors}"
    )]
    Connect {
        /// Clients the server welcomed.
        connected: usize,
        /// Clients, N.
        clients: usize,
        /// The connect budget.
        within: Duration,
        /// The first client and server errors, `;`-separated (`none` if none).
        errors: String,
    },
    /// A round was not answered by every client in time.
    #[error("round {round}: {replies} of {clients} replies within {within:?}")]
    Round {
        /// The round, from 1.
        round: usize,
        /// Replies received.
        replies: usize,
        /// Clients, N.
        clients: usize,
        /// The round timeout.
        within: Duration,
    },
    /// A connection failed during the rounds.
    #[error("a connection failed during the rounds: {0}")]
    Connection(String),
}

/// Runs the floor: builds its runtimes and threads (or the clients' process), connects the
/// clients, runs the rounds, winds down (bounded) and reports.
///
/// # Errors
/// [`FloorError`]: a bad configuration, TLS or socket setup, a runtime, thread or process that
/// cannot start, or a connect, round or connection failure, each naming how far it got.
pub fn run_floor(config: &FloorConfig) -> Result<FloorReport, FloorError> {
    config.check()?;
    let (server_config, cert_der) = server_tls()?;
    let mut server_rt = tokio::runtime::Builder::new_multi_thread();
    server_rt.enable_all().thread_name("floor-server");
    if let Some(threads) = config.server_threads {
        server_rt.worker_threads(threads);
    }
    let server_rt = server_rt.build().map_err(|e| FloorError::Runtime(e.to_string()))?;
    let server_threads = server_rt.metrics().num_workers();
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let server_socket = bind_socket(loopback, config.udp_buffer_bytes)?;
    let (server_send, server_recv) = buffer_sizes(&server_socket);
    let server_endpoint = {
        let _entered = server_rt.enter();
        quinn::Endpoint::new(
            endpoint_config(),
            Some(server_config),
            server_socket,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|source| FloorError::Bind { addr: loopback, source })?
    };
    let server_addr = server_endpoint
        .local_addr()
        .map_err(|source| FloorError::Bind { addr: loopback, source })?;
    // The clients dial the conditioner, which lives as long as the run.
    let proxy = match config.impair {
        Some((conditions, seed)) => Some(
            server_rt
                .block_on(start_in_process(server_addr, conditions, seed))
                .map_err(|source| FloorError::Bind { addr: loopback, source })?,
        ),
        None => None,
    };
    let dial = proxy.as_ref().map_or(server_addr, |p| p.handle().addr());

    let order = ClientsOrder::new(config, dial, cert_der);
    let (clients, rss_kib_before) = match &config.clients_process {
        None => (Clients::on_threads(order)?, None),
        // Read before the child starts: nothing of any client is in this process yet.
        Some(exe) => {
            let before = rss_kib()?;
            (Clients::in_process(exe, &order)?, Some(before))
        }
    };

    let measure_memory = rss_kib_before.is_some();
    let served = server_rt.block_on(async {
        let task = tokio::spawn(serve(server_endpoint.clone(), config.clone(), measure_memory));
        let served = task.await.map_err(|e| FloorError::Runtime(format!("server task: {e}")));
        // Whatever happened, the clients get a close rather than an idle timeout.
        server_endpoint.close(0u32.into(), b"done");
        let _ = tokio::time::timeout(WIND_DOWN, server_endpoint.wait_idle()).await;
        served
    });
    let clients = clients.join();
    let network = proxy.map(|p| p.handle().stats());
    drop(server_rt);

    let served = match served.and_then(|s| s) {
        Ok(served) => served,
        Err(FloorError::Connect { connected, clients: n, within, errors }) => {
            let client_errors = match &clients {
                Ok(c) => c.errors.join("; "),
                Err(e) => e.to_string(),
            };
            let errors = [errors, client_errors]
                .into_iter()
                .filter(|e| !e.is_empty() && e != "none")
                .collect::<Vec<_>>()
                .join("; ");
            let errors = if errors.is_empty() { "none".to_owned() } else { errors };
            return Err(FloorError::Connect { connected, clients: n, within, errors });
        }
        // The clients' process may have died first: say so along with what the server saw.
        Err(e) => match clients {
            Err(clients) if config.clients_process.is_some() => {
                return Err(FloorError::Runtime(format!("{e}; {clients}")));
            }
            _ => return Err(e),
        },
    };
    let clients = clients?;
    let mut connect = histogram()?;
    for &us in &clients.connect_us {
        connect.saturating_record(us.max(1));
    }
    let per = (config.clients * config.rounds) as f64;
    let server_memory =
        rss_kib_before.zip(served.rss_kib_idle).map(|(before, idle)| ServerMemory {
            rss_kib_before: before,
            rss_kib_idle: idle,
            kib_per_connection: (idle as f64 - before as f64) / config.clients as f64,
        });
    Ok(FloorReport {
        clients: config.clients,
        rounds: config.rounds,
        message_bytes: config.message_bytes,
        client_endpoints: config.client_endpoints,
        connect_rate: config.connect_rate,
        server_threads,
        connect_all_us: clients.connect_all_us,
        connect: LatencySummary::of(&connect),
        round: LatencySummary::of(&served.rounds),
        wire: FloorWire {
            server_sent_bytes_per_client_per_round: served.sent_bytes as f64 / per,
            server_received_bytes_per_client_per_round: served.received_bytes as f64 / per,
        },
        udp_buffers: UdpBuffers {
            requested: config.udp_buffer_bytes,
            server_send,
            server_recv,
            client_send: clients.socket_buffers.0,
            client_recv: clients.socket_buffers.1,
        },
        server_memory,
        network,
    })
}

/// This process's resident memory, `VmRSS` from `/proc/self/status`, KiB (Linux).
///
/// # Errors
/// [`FloorError::Runtime`] if the file cannot be read or has no `VmRSS` line.
fn rss_kib() -> Result<u64, FloorError> {
    const STATUS: &str = "/proc/self/status";
    let status = std::fs::read_to_string(STATUS)
        .map_err(|e| FloorError::Runtime(format!("cannot read {STATUS}: {e}")))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| FloorError::Runtime(format!("{STATUS} has no VmRSS line in kB")))
}

/// A histogram of µs from 1 µs to an hour, 3 significant digits.
fn histogram() -> Result<Histogram<u64>, FloorError> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3)
        .map_err(|e| FloorError::Runtime(format!("histogram: {e}")))
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// A self-signed certificate for `localhost` (DER) and the server configuration that presents
/// it: TLS 1.3 only, the transport parameters of the game server.
fn server_tls() -> Result<(quinn::ServerConfig, Vec<u8>), FloorError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let tls = |e: &dyn std::fmt::Display| FloorError::Tls(e.to_string());
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).map_err(|e| tls(&e))?;
    let cert_der = generated.cert.der().to_vec();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls(&e))?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert_der.clone())], key)
        .map_err(|e| tls(&e))?;
    server.alpn_protocols = vec![ALPN.to_vec()];
    let server = QuicServerConfig::try_from(server).map_err(|e| tls(&e))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(server));
    // As gatehouse-server's defaults (server/src/net/endpoint.rs, `transport_config`).
    let mut transport = quinn::TransportConfig::default();
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(Duration::from_secs(10)).ok());
    transport.keep_alive_interval(Some(Duration::from_secs(3)));
    transport.max_concurrent_bidi_streams(1u32.into());
    transport.max_concurrent_uni_streams(0u32.into());
    transport.stream_receive_window(262_144u32.into());
    transport.receive_window(524_288u32.into());
    transport.send_window(1_048_576);
    transport.datagram_receive_buffer_size(None);
    server.transport_config(Arc::new(transport));
    Ok((server, cert_der))
}

/// The client configuration that trusts the certificate `cert_der` (the server's, from
/// [`server_tls`]): TLS 1.3 only, the transport parameters of the swarm's clients.
fn client_tls(cert_der: &[u8]) -> Result<quinn::ClientConfig, FloorError> {
    use rustls::pki_types::CertificateDer;
    let tls = |e: &dyn std::fmt::Display| FloorError::Tls(e.to_string());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from(cert_der.to_vec())).map_err(|e| tls(&e))?;
    let mut client = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.alpn_protocols = vec![ALPN.to_vec()];
    let client = QuicClientConfig::try_from(client).map_err(|e| tls(&e))?;
    let mut client = quinn::ClientConfig::new(Arc::new(client));
    // As the swarm's clients (swarm.rs, `client_endpoint`).
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(Duration::from_secs(3)));
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(Duration::from_secs(10)).ok());
    client.transport_config(Arc::new(transport));
    Ok(client)
}

/// A UDP socket bound to `addr` with `buffer_bytes` asked for both buffers, as the server's
/// endpoint binds its own (server/src/net/endpoint.rs, `bind_socket`).
fn bind_socket(addr: SocketAddr, buffer_bytes: usize) -> Result<std::net::UdpSocket, FloorError> {
    use socket2::{Domain, Protocol, Socket, Type};
    let err = |source| FloorError::Bind { addr, source };
    let socket =
        Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP)).map_err(err)?;
    socket.set_send_buffer_size(buffer_bytes).map_err(err)?;
    socket.set_recv_buffer_size(buffer_bytes).map_err(err)?;
    socket.bind(&addr.into()).map_err(err)?;
    Ok(socket.into())
}

/// The send and receive buffer sizes the kernel reports for `socket` (0 if it does not say).
fn buffer_sizes(socket: &std::net::UdpSocket) -> (usize, usize) {
    let socket = socket2::SockRef::from(socket);
    (socket.send_buffer_size().unwrap_or(0), socket.recv_buffer_size().unwrap_or(0))
}

/// What the server's tasks tell the orchestrator.
#[derive(Debug)]
enum Event {
    /// A client was welcomed.
    Joined,
    /// A client answered round `n`.
    Reply(u64),
    /// A connection ended with an error.
    Failed(String),
    /// A connection's UDP bytes sent and received from the first round to the stop.
    Wire { sent: u64, received: u64 },
}

/// What the server measured.
#[derive(Debug)]
struct Served {
    rounds: Histogram<u64>,
    sent_bytes: u64,
    received_bytes: u64,
    /// This process's `VmRSS` after the rounds, every connection open (when asked for), KiB.
    rss_kib_idle: Option<u64>,
}

/// The server: accepts the N clients (one task each), then runs the rounds as the orchestrator;
/// with `measure_memory`, reads this process's memory after the rounds.
async fn serve(
    endpoint: quinn::Endpoint,
    config: FloorConfig,
    measure_memory: bool,
) -> Result<Served, FloorError> {
    let n = config.clients;
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (round_tx, round_rx) = watch::channel(0u64);
    let accept = {
        let endpoint = endpoint.clone();
        let message_bytes = config.message_bytes;
        tokio::spawn(async move {
            for _ in 0..n {
                let Some(incoming) = endpoint.accept().await else { return };
                let events = events_tx.clone();
                let rounds = round_rx.clone();
                tokio::spawn(async move {
                    let failed = events.clone();
                    if let Err(e) = serve_connection(incoming, message_bytes, rounds, events).await
                    {
                        let _ = failed.send(Event::Failed(e));
                    }
                });
            }
        })
    };
    let served = orchestrate(&config, &mut events, &round_tx, measure_memory).await;
    accept.abort();
    // Every connection task stops at STOP (or has failed).
    let _ = round_tx.send(STOP);
    served
}

async fn orchestrate(
    config: &FloorConfig,
    events: &mut mpsc::UnboundedReceiver<Event>,
    round_tx: &watch::Sender<u64>,
    measure_memory: bool,
) -> Result<Served, FloorError> {
    let n = config.clients;
    let budget = config.connect_budget();
    let deadline = tokio::time::Instant::now() + budget;
    let mut joined = 0;
    let mut failures = Vec::new();
    while joined < n {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::Joined)) => joined += 1,
            Ok(Some(Event::Failed(e))) => failures.push(e),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                failures.truncate(5);
                let errors = if failures.is_empty() { "none".into() } else { failures.join("; ") };
                return Err(FloorError::Connect {
                    connected: joined,
                    clients: n,
                    within: budget,
                    errors,
                });
            }
        }
    }
    let mut rounds = histogram()?;
    for round in 1..=config.rounds {
        tokio::time::sleep(config.pause).await;
        let start = tokio::time::Instant::now();
        let deadline = start + config.round_timeout;
        let _ = round_tx.send(round as u64);
        let mut replies = 0;
        while replies < n {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(Event::Reply(r))) if r == round as u64 => replies += 1,
                Ok(Some(Event::Failed(e))) => return Err(FloorError::Connection(e)),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => {
                    return Err(FloorError::Round {
                        round,
                        replies,
                        clients: n,
                        within: config.round_timeout,
                    });
                }
            }
        }
        rounds.saturating_record(micros(start.elapsed()).max(1));
    }
    let rss_kib_idle = if measure_memory {
        tokio::time::sleep(MEMORY_SETTLE).await;
        Some(rss_kib()?)
    } else {
        None
    };
    let _ = round_tx.send(STOP);
    let (mut sent_bytes, mut received_bytes, mut reported) = (0, 0, 0);
    let deadline = tokio::time::Instant::now() + WIND_DOWN;
    while reported < n {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Ok(Some(Event::Wire { sent, received })) => {
                sent_bytes += sent;
                received_bytes += received;
                reported += 1;
            }
            Ok(Some(Event::Failed(e))) => return Err(FloorError::Connection(e)),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                return Err(FloorError::Connection(format!(
                    "{reported} of {n} connections reported their stats within {WIND_DOWN:?}"
                )));
            }
        }
    }
    Ok(Served { rounds, sent_bytes, received_bytes, rss_kib_idle })
}

/// One server connection: the handshake, the hello and welcome, then one message written and
/// one reply read per round, until the orchestrator says stop.
async fn serve_connection(
    incoming: quinn::Incoming,
    message_bytes: usize,
    mut rounds: watch::Receiver<u64>,
    events: mpsc::UnboundedSender<Event>,
) -> Result<(), String> {
    let connection = incoming.await.map_err(|e| format!("server handshake: {e}"))?;
    let (mut send, mut recv) =
        connection.accept_bi().await.map_err(|e| format!("server accept_bi: {e}"))?;
    let mut hello = [0u8; 1];
    recv.read_exact(&mut hello).await.map_err(|e| format!("server hello: {e}"))?;
    if hello[0] != HELLO {
        return Err(format!("server: a client sent {:#04x} instead of its hello", hello[0]));
    }
    send.write_all(&[WELCOME]).await.map_err(|e| format!("server welcome: {e}"))?;
    let _ = events.send(Event::Joined);
    let before = connection.stats();
    let mut message = vec![0u8; message_bytes];
    let mut reply = vec![0u8; message_bytes];
    loop {
        if rounds.changed().await.is_err() {
            break;
        }
        let round = *rounds.borrow_and_update();
        if round == STOP {
            break;
        }
        message[..8].copy_from_slice(&round.to_le_bytes());
        send.write_all(&message).await.map_err(|e| format!("server write: {e}"))?;
        recv.read_exact(&mut reply).await.map_err(|e| format!("server read: {e}"))?;
        if reply[..8] != message[..8] {
            return Err(format!("server: a reply to round {round} echoed another round"));
        }
        let _ = events.send(Event::Reply(round));
    }
    let after = connection.stats();
    let _ = events.send(Event::Wire {
        sent: after.udp_tx.bytes.saturating_sub(before.udp_tx.bytes),
        received: after.udp_rx.bytes.saturating_sub(before.udp_rx.bytes),
    });
    // The client closes once the stream finishes; the endpoint's close bounds the wait.
    let _ = send.finish();
    let _ = tokio::time::timeout(WIND_DOWN, connection.closed()).await;
    Ok(())
}

/// The thread that drives the client endpoints: a current-thread runtime that does nothing
/// else.
struct QuicThread {
    endpoints: Vec<quinn::Endpoint>,
    /// The first client socket's send and receive buffers.
    buffers: (usize, usize),
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl QuicThread {
    fn start(count: usize, buffer_bytes: usize) -> Result<Self, FloorError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| FloorError::Runtime(e.to_string()))?;
        let quinn_runtime = Arc::new(DriverRuntime::new(runtime.handle().clone()));
        let wildcard = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let mut endpoints = Vec::with_capacity(count);
        let mut buffers = (0, 0);
        for i in 0..count {
            let socket = bind_socket(wildcard, buffer_bytes)?;
            if i == 0 {
                buffers = buffer_sizes(&socket);
            }
            let endpoint =
                quinn::Endpoint::new(endpoint_config(), None, socket, quinn_runtime.clone())
                    .map_err(|source| FloorError::Bind { addr: wildcard, source })?;
            endpoints.push(endpoint);
        }
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let driven = endpoints.clone();
        let thread = std::thread::Builder::new()
            .name("floor-quic".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let _ = stopped.await;
                    for endpoint in &driven {
                        endpoint.close(0u32.into(), b"done");
                    }
                    let idle = async {
                        for endpoint in &driven {
                            endpoint.wait_idle().await;
                        }
                    };
                    let _ = tokio::time::timeout(WIND_DOWN, idle).await;
                });
            })
            .map_err(|e| FloorError::Runtime(format!("cannot start the QUIC thread: {e}")))?;
        Ok(QuicThread { endpoints, buffers, stop, thread })
    }

    /// Closes the endpoints and waits (bounded) for them to go idle.
    fn stop(self) {
        drop(self.endpoints);
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// What the clients measured: what a clients' process writes to its stdout, as JSON.
#[derive(Debug, Serialize, Deserialize)]
struct ClientsOutcome {
    /// Per welcomed client, its connect call to its welcome, µs.
    connect_us: Vec<u64>,
    /// The first connect call to the last welcome, µs.
    connect_all_us: u64,
    /// The first few client errors.
    errors: Vec<String>,
    /// The first client socket's send and receive buffers, bytes.
    socket_buffers: (usize, usize),
}

/// What the clients are to do: what a clients' process reads from its stdin, as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClientsOrder {
    /// The server's address.
    server: SocketAddr,
    /// The server's self-signed certificate, DER: the one the clients trust.
    cert_der: Vec<u8>,
    /// Clients, N.
    clients: usize,
    /// Bytes per message, each way.
    message_bytes: usize,
    /// Connections opened per second; `None`: all at once.
    connect_rate: Option<f64>,
    /// Client QUIC endpoints the clients are spread over.
    client_endpoints: usize,
    /// Send and receive buffer asked for every client socket, bytes.
    udp_buffer_bytes: usize,
    /// How long one client may take from its connect call to the welcome.
    connect_timeout: Duration,
}

impl ClientsOrder {
    /// What [`FloorConfig::check`] checks of the clients' part, for an order read from stdin.
    fn check(&self) -> Result<(), FloorError> {
        let bad = |what: &str| Err(FloorError::Config(format!("the clients' order: {what}")));
        if !(1..=100_000).contains(&self.clients) || !(1..=1024).contains(&self.client_endpoints) {
            return bad("clients must be 1 ..= 100000 and client endpoints 1 ..= 1024");
        }
        if !(8..=65536).contains(&self.message_bytes) {
            return bad("message bytes must be 8 ..= 65536");
        }
        if self.connect_rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return bad("the connect rate must be a positive number per second");
        }
        if connect_spread(self.clients, self.connect_rate) > MAX_SPREAD {
            return bad("connecting every client would take more than a day");
        }
        if self.connect_timeout > MAX_TIMEOUT {
            return bad("the connect timeout is too long");
        }
        Ok(())
    }

    fn new(config: &FloorConfig, server: SocketAddr, cert_der: Vec<u8>) -> Self {
        ClientsOrder {
            server,
            cert_der,
            clients: config.clients,
            message_bytes: config.message_bytes,
            connect_rate: config.connect_rate,
            client_endpoints: config.client_endpoints,
            udp_buffer_bytes: config.udp_buffer_bytes,
            connect_timeout: config.connect_timeout,
        }
    }
}

/// The clients of a floor run, on this process's threads or in a child process.
enum Clients {
    /// The QUIC thread and the clients' thread.
    Threads(QuicThread, ClientsThread),
    /// `gatehouse-floor --clients-child`, its order written to its stdin, and how long it may
    /// take to end once the server has.
    Process(std::process::Child, Duration),
}

impl Clients {
    fn on_threads(order: ClientsOrder) -> Result<Self, FloorError> {
        let quic = QuicThread::start(order.client_endpoints, order.udp_buffer_bytes)?;
        let client_config = client_tls(&order.cert_der)?;
        let clients = ClientsThread::start(order, quic.endpoints.clone(), client_config)?;
        Ok(Clients::Threads(quic, clients))
    }

    fn in_process(exe: &std::path::Path, order: &ClientsOrder) -> Result<Self, FloorError> {
        let failed = |e: &dyn std::fmt::Display| {
            FloorError::Runtime(format!("the clients' process {}: {e}", exe.display()))
        };
        let within = order.connect_timeout.saturating_add(CHILD_END);
        let mut child = Command::new(exe)
            .arg("--clients-child")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| failed(&e))?;
        let order = serde_json::to_vec(order).map_err(|e| failed(&e))?;
        // Dropping stdin after the write closes it: the child reads to its end.
        let written = match child.stdin.take() {
            Some(mut stdin) => stdin.write_all(&order).map_err(|e| failed(&e)),
            None => Err(failed(&"no stdin")),
        };
        if let Err(e) = written {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        Ok(Clients::Process(child, within))
    }

    /// Waits for the clients to end (each ends when the server finishes its stream or closes
    /// the endpoint, or at its idle timeout) and returns what they measured.
    fn join(self) -> Result<ClientsOutcome, FloorError> {
        match self {
            Clients::Threads(quic, clients) => {
                let mut outcome = clients.join();
                if let Ok(outcome) = &mut outcome {
                    outcome.socket_buffers = quic.buffers;
                }
                quic.stop();
                outcome
            }
            Clients::Process(mut child, within) => {
                // Its stdout is read on a thread, so the wait for it is bounded: a child that
                // has not ended `within` after the server did is killed.
                let (tx, rx) = std::sync::mpsc::channel();
                let stdout = child.stdout.take();
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    let read = stdout.map(|mut s| s.read_to_end(&mut out).map(|_| out));
                    let _ = tx.send(read);
                });
                let read = rx.recv_timeout(within);
                if read.is_err() {
                    let _ = child.kill();
                }
                let failed = |e: &dyn std::fmt::Display| {
                    FloorError::Runtime(format!("the clients' process: {e}"))
                };
                let status = child.wait().map_err(|e| failed(&e))?;
                let out = match read {
                    Ok(Some(Ok(out))) => out,
                    Ok(Some(Err(e))) => return Err(failed(&e)),
                    Ok(None) => return Err(failed(&"no stdout")),
                    Err(_) => {
                        return Err(failed(&format!("not ended {within:?} after the server")));
                    }
                };
                if !status.success() {
                    return Err(failed(&format!("ended with {status} (its errors are on stderr)")));
                }
                serde_json::from_slice(&out).map_err(|e| failed(&format!("no outcome: {e}")))
            }
        }
    }
}

/// The clients' side of a floor run with its clients in another process (`gatehouse-floor
/// --clients-child`): reads the clients' order as JSON from `input` to its end, checks it
/// against the bounds [`FloorConfig`] has, runs the clients on this process's threads until
/// the server ends the run, and writes the clients' outcome (connect times, errors, socket
/// buffers) as JSON to `output`.
///
/// # Errors
/// [`FloorError::Config`] if the order is not valid JSON or out of those bounds; otherwise as [`run_floor`]'s clients:
/// TLS or socket setup, or a runtime or thread that cannot start.
pub fn run_clients_child(mut input: impl Read, mut output: impl Write) -> Result<(), FloorError> {
    let mut order = Vec::new();
    input
        .read_to_end(&mut order)
        .map_err(|e| FloorError::Config(format!("cannot read the clients' order: {e}")))?;
    let order: ClientsOrder = serde_json::from_slice(&order)
        .map_err(|e| FloorError::Config(format!("the clients' order is not valid: {e}")))?;
    order.check()?;
    let outcome = Clients::on_threads(order)?.join()?;
    serde_json::to_writer(&mut output, &outcome)
        .map_err(|e| FloorError::Runtime(format!("cannot write the clients' outcome: {e}")))?;
    output.flush().map_err(|e| FloorError::Runtime(format!("cannot write the outcome: {e}")))
}

/// The thread that runs the clients' per-connection tasks on a current-thread runtime.
struct ClientsThread {
    thread: std::thread::JoinHandle<Result<ClientsOutcome, FloorError>>,
}

impl ClientsThread {
    fn start(
        order: ClientsOrder,
        endpoints: Vec<quinn::Endpoint>,
        client_config: quinn::ClientConfig,
    ) -> Result<Self, FloorError> {
        let thread = std::thread::Builder::new()
            .name("floor-clients".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| FloorError::Runtime(e.to_string()))?;
                Ok(runtime.block_on(run_clients(order, endpoints, client_config)))
            })
            .map_err(|e| FloorError::Runtime(format!("cannot start the clients' thread: {e}")))?;
        Ok(ClientsThread { thread })
    }

    fn join(self) -> Result<ClientsOutcome, FloorError> {
        self.thread
            .join()
            .map_err(|_| FloorError::Runtime("the clients' thread panicked".into()))?
    }
}

/// Starts every client at the connect rate and waits for all of them to end.
async fn run_clients(
    order: ClientsOrder,
    endpoints: Vec<quinn::Endpoint>,
    client_config: quinn::ClientConfig,
) -> ClientsOutcome {
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..order.clients {
        if let Some(rate) = order.connect_rate {
            tokio::time::sleep_until(start + Duration::from_secs_f64(i as f64 / rate)).await;
        }
        let Some(endpoint) = endpoints.get(i % endpoints.len()).cloned() else { break };
        tasks.spawn(run_client(
            endpoint,
            client_config.clone(),
            order.server,
            order.message_bytes,
            order.connect_timeout,
        ));
    }
    let mut outcome = ClientsOutcome {
        connect_us: Vec::new(),
        connect_all_us: 0,
        errors: Vec::new(),
        socket_buffers: (0, 0),
    };
    let mut last_welcome = None;
    while let Some(joined) = tasks.join_next().await {
        let (welcomed, error) = match joined {
            Ok(result) => result,
            Err(e) => (None, Some(format!("client task: {e}"))),
        };
        if let Some((took, at)) = welcomed {
            outcome.connect_us.push(micros(took));
            last_welcome = last_welcome.max(Some(at));
        }
        if let Some(e) = error.filter(|_| outcome.errors.len() < 5) {
            outcome.errors.push(e);
        }
    }
    outcome.connect_all_us = last_welcome.map_or(0, |at| micros(at.duration_since(start)));
    outcome
}

/// One client: connect, hello, welcome (bounded by `connect_timeout`), then echo every message
/// until the server finishes the stream. Returns how long it took to be welcomed and when, and
/// the error that ended it, if any.
async fn run_client(
    endpoint: quinn::Endpoint,
    client_config: quinn::ClientConfig,
    server: SocketAddr,
    message_bytes: usize,
    connect_timeout: Duration,
) -> (Option<(Duration, tokio::time::Instant)>, Option<String>) {
    let start = tokio::time::Instant::now();
    let connected = tokio::time::timeout(connect_timeout, async {
        let connection = endpoint
            .connect_with(client_config, server, "localhost")
            .map_err(|e| format!("client connect: {e}"))?
            .await
            .map_err(|e| format!("client handshake: {e}"))?;
        let (mut send, mut recv) =
            connection.open_bi().await.map_err(|e| format!("client open_bi: {e}"))?;
        send.write_all(&[HELLO]).await.map_err(|e| format!("client hello: {e}"))?;
        let mut welcome = [0u8; 1];
        recv.read_exact(&mut welcome).await.map_err(|e| format!("client welcome: {e}"))?;
        if welcome[0] != WELCOME {
            return Err(format!("client: the server sent {:#04x} instead of welcome", welcome[0]));
        }
        Ok::<_, String>((connection, send, recv))
    })
    .await;
    let (connection, mut send, mut recv) = match connected {
        Ok(Ok(connected)) => connected,
        Ok(Err(e)) => return (None, Some(e)),
        Err(_) => return (None, Some(format!("client: not welcomed within {connect_timeout:?}"))),
    };
    let welcomed = Some((start.elapsed(), tokio::time::Instant::now()));
    let mut message = vec![0u8; message_bytes];
    let error = loop {
        match recv.read_exact(&mut message).await {
            Ok(()) => {
                if let Err(e) = send.write_all(&message).await {
                    break Some(format!("client write: {e}"));
                }
            }
            // The server finished the stream: the run is over.
            Err(quinn::ReadExactError::FinishedEarly(0)) => break None,
            // The server closed the endpoint after the run (or after a failure it reports).
            Err(quinn::ReadExactError::ReadError(quinn::ReadError::ConnectionLost(
                quinn::ConnectionError::ApplicationClosed(_),
            ))) => break None,
            Err(e) => break Some(format!("client read: {e}")),
        }
    };
    connection.close(0u32.into(), b"done");
    (welcomed, error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small floor run completes every round and accounts for every client.
    #[test]
    fn a_floor_run_measures_every_round_for_every_client() {
        let mut config = FloorConfig::new(4);
        config.rounds = 3;
        config.pause = Duration::from_millis(1);
        config.client_endpoints = 2;
        config.server_threads = Some(1);
        let report = run_floor(&config).unwrap();
        assert_eq!(report.round.count, 3);
        assert_eq!(report.connect.count, 4);
        assert!(report.wire.server_sent_bytes_per_client_per_round >= 64.0, "{report:?}");
        // The whole connect phase spans every client's own (the histogram rounds to 0.1 %).
        assert!(report.connect_all_us as f64 >= report.connect.max_us as f64 * 0.99, "{report:?}");
    }

    /// Through the conditioner, every round still reaches every client, no round is faster
    /// than the lag both ways, and the report says what the conditioner did; a memory floor
    /// (clients in another process) is not measured through it.
    #[test]
    fn a_floor_through_the_conditioner_is_slowed_by_it_and_reports_it() {
        let lag = gatehouse_conditioner::Impairment {
            lag: Duration::from_millis(20),
            ..gatehouse_conditioner::Impairment::default()
        };
        let mut config = FloorConfig::new(4);
        config.rounds = 3;
        config.pause = Duration::from_millis(1);
        config.client_endpoints = 4;
        config.server_threads = Some(1);
        config.impair = Some((Conditions::both(lag), 7));
        let report = run_floor(&config).unwrap();
        assert_eq!((report.round.count, report.connect.count), (3, 4));
        assert!(report.round.p50_us >= 40_000, "20 ms each way: {report:?}");
        let network = report.network.unwrap();
        assert_eq!(network.flows, 4, "a flow per client endpoint");
        assert!(network.down.offered > 0 && network.up.offered > 0);
        config.clients_process = Some(PathBuf::from("gatehouse-floor"));
        assert!(matches!(run_floor(&config), Err(FloorError::Config(_))));
    }

    /// A configuration out of range is refused before anything starts.
    #[test]
    fn a_floor_without_clients_or_with_tiny_messages_is_refused() {
        let mut config = FloorConfig::new(0);
        assert!(matches!(run_floor(&config), Err(FloorError::Config(_))));
        config.clients = 1;
        config.message_bytes = 4;
        assert!(matches!(run_floor(&config), Err(FloorError::Config(_))));
    }
}
