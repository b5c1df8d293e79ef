//! `config/server.toml`: network, TLS, authentication, game timings, storage.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::StoreUrl;
use super::admin::{AdminToken, ConnectionLimits};
use super::env::{self, Environment};
use super::{
    ConfigError, Sources, ValueSource, beside, millis, optional_millis, parse_layered, seconds,
    ser_millis, ser_optional_millis, ser_secret,
};
pub use gatehouse_game::ClientReadyPolicy;

use super::servers::{ServerEntryError, StaticServer, check_servers};

use gatehouse_protocol::ServerId;
use gatehouse_protocol::ticket::{MAX_TICKET_LIFETIME_S, MIN_TICKET_LIFETIME_S};
pub use gatehouse_protocol::token::DEV_TOKEN_KEY;
use gatehouse_protocol::token::TokenLimits;

/// The smallest `network.max_frame_len`: a `Hello` carrying the longest token accepted
/// ([`gatehouse_protocol::token::MAX_TOKEN_LEN`], 4 KiB) must fit, and so must the server's own
/// messages, since the limit applies both ways.
pub const MIN_FRAME_LEN: usize = 8 * 1024;

/// The most `network.gso_segments`: quinn 0.11 never sends more datagrams at once (its
/// `MAX_TRANSMIT_SEGMENTS`), so a larger setting would do nothing.
const MAX_GSO_SEGMENTS: usize = 10;

/// The longest `network.replication_interval_ms`: state replicated later than a second behind
/// is no longer live state.
pub(crate) const MAX_REPLICATION_INTERVAL: Duration = Duration::from_secs(1);

/// A duration as the checks' messages show it, in whole milliseconds (`250 ms`).
fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// The whole server configuration (`config/server.toml`), checked.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// `[network]`: the QUIC endpoint.
    #[serde(default)]
    pub network: NetworkConfig,
    /// `[tls]`: the certificate; without one a development certificate is generated.
    #[serde(default)]
    pub tls: TlsConfig,
    /// `[auth]`: session-token verification.
    #[serde(default)]
    pub auth: AuthConfig,
    /// `[game]`: the world file and the timeouts of the contracts.
    #[serde(default)]
    pub game: GameConfig,
    /// `[store]`: where player saves live, and the store worker's timings.
    #[serde(default)]
    pub store: StoreConfig,
    /// `[admin]`: the operator HTTP endpoint.
    #[serde(default)]
    pub admin: AdminConfig,
    /// `[fleet]`: the orchestrator told Ready, Health, the players and Shutdown.
    #[serde(default)]
    pub fleet: FleetConfig,
    /// `data_dir`: where the development certificate and the embedded store live.
    #[serde(default = "default_data_dir")]
    pub data_dir: PathBuf,
    /// `log_format`: `human` or `json`.
    #[serde(default)]
    pub log_format: LogFormat,
    /// Where each value came from (the file's lines, then the overrides), for errors.
    #[serde(skip)]
    sources: Sources,
}

/// `[admin]`: the operator HTTP endpoint (health, state, metrics, travel).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// `enabled`: serve it at all.
    pub enabled: bool,
    /// `bind`: TCP address; loopback by default, since it can start travels.
    pub bind: SocketAddr,
    /// `token`: the bearer token `POST /travel` and `GET /state` require (overridden by
    /// `GATEHOUSE_ADMIN_TOKEN`). Required whenever `bind` is beyond loopback; optional on
    /// loopback, where it is enforced once set. `/health`, `/ready` and `/metrics` never need
    /// it.
    pub token: Option<AdminToken>,
    /// `max_connections`: open connections at once (default 64); a few more are kept for
    /// loopback, so a health check is answered while remote peers hold these (docs/security.md).
    pub max_connections: usize,
    /// `header_timeout_ms`: how long a connection may take to send a request head, and stay
    /// idle between requests (default 5 s).
    #[serde(
        rename = "header_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub header_timeout: Duration,
    /// `connection_timeout_ms`: how long one connection may last, whatever it does (default
    /// 30 s).
    #[serde(
        rename = "connection_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub connection_timeout: Duration,
}

impl Default for AdminConfig {
    fn default() -> Self {
        let limits = ConnectionLimits::default();
        Self {
            enabled: true,
            bind: SocketAddr::from(([127, 0, 0, 1], 7778)),
            token: None,
            max_connections: limits.max_connections,
            header_timeout: limits.header_timeout,
            connection_timeout: limits.connection_timeout,
        }
    }
}

impl AdminConfig {
    /// The bounds on the endpoint's connections.
    pub fn limits(&self) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: self.max_connections,
            header_timeout: self.header_timeout,
            connection_timeout: self.connection_timeout,
        }
    }

    /// Whether the endpoint is served on an address other hosts or containers can reach
    /// (anything but a loopback address, `0.0.0.0` and `::` included).
    pub fn is_exposed(&self) -> bool {
        self.enabled && !self.bind.ip().is_loopback()
    }

    /// Checks that an exposed endpoint has a token: the server refuses to start otherwise.
    /// Run once every override is applied, since the token usually comes from the environment.
    ///
    /// # Errors
    /// What is missing, naming `admin.token` and `GATEHOUSE_ADMIN_TOKEN`.
    pub fn check_exposure(&self) -> Result<(), String> {
        if self.is_exposed() && self.token.is_none() {
            return Err(format!(
                "a loopback address, or a bearer token for POST /travel beyond loopback: set \
                 admin.token in the config file or GATEHOUSE_ADMIN_TOKEN in the environment (at \
                 least {} characters), or bind admin.bind to 127.0.0.1",
                AdminToken::MIN_LEN
            ));
        }
        Ok(())
    }
}

/// `[fleet]`: the orchestrator that runs this server, if any (docs/operations.md).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// `orchestrator`: `none` (default) or `agones` (needs the `agones` cargo feature).
    /// Overridden by `--orchestrator` / `GATEHOUSE_ORCHESTRATOR`.
    pub orchestrator: OrchestratorKind,
    /// `health_interval_ms`: how often the game loop pings the orchestrator's health check
    /// (default 2000 ms; keep it well below the Fleet's `health.periodSeconds`).
    #[serde(
        rename = "health_interval_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub health_interval: Duration,
    /// `agones_sdk_port`: TCP port of the Agones SDK sidecar on localhost; unset, the SDK
    /// reads `AGONES_SDK_GRPC_PORT` (which Agones sets in the pod), else 9357. 1 to 65535.
    #[serde(deserialize_with = "optional_port")]
    pub agones_sdk_port: Option<u16>,
    /// `sdk_timeout_ms`: the bound on each call to the orchestrator (default 5000 ms); the
    /// Shutdown at the end of a drain waits at most three times this.
    #[serde(rename = "sdk_timeout_ms", deserialize_with = "millis", serialize_with = "ser_millis")]
    pub sdk_timeout: Duration,
    /// `allocation`: who moves the server from Ready to Allocated (docs/operations.md,
    /// "Allocation"): `self` (default: the server, when its first player logs in) or
    /// `matchmaker` (only a `GameServerAllocation`).
    pub allocation: Allocation,
    /// `when_empty`: what the server does once it has had players and none has been logged in
    /// for `empty_linger_ms` (docs/operations.md, "Allocation"): `ready` (default: back to the
    /// pool), `shutdown` (drain and exit; the orchestrator replaces it) or `stay`.
    pub when_empty: WhenEmpty,
    /// `empty_linger_ms`: how long the server waits, empty, before `when_empty` applies
    /// (default 60000 ms); a login during it cancels it.
    #[serde(
        rename = "empty_linger_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub empty_linger: Duration,
    /// `publish_certificate_fingerprint`: under Agones, set the annotation
    /// `agones.dev/sdk-gatehouse-certificate-sha256` to the SHA-256 fingerprint of the
    /// server's certificate before Ready, for clients that pin it (default true;
    /// docs/security.md, "Trust in a fleet").
    pub publish_certificate_fingerprint: bool,
    /// `server_id`: this server's id in the fleet, a [`gatehouse_protocol::ServerId`]; unset,
    /// `store.session` ([`ServerConfig::server_id`]; docs/spec/travel.md V12).
    pub server_id: Option<String>,
    /// `seat_hold_ms`: how long a seat granted to a travel is held for each of its steps
    /// (confirmation, redemption, a relaunch), 1000 to 120000 ms (default 10000;
    /// docs/spec/travel.md V9, V16). The core's `GameRules::seat_hold`.
    #[serde(rename = "seat_hold_ms", deserialize_with = "millis", serialize_with = "ser_millis")]
    pub seat_hold: Duration,
    /// `ticket_key`: the fleet's HS256 key travel tickets are signed with, at least
    /// [`FleetKey::MIN_LEN`] bytes and never `auth.token_key` (overridden by
    /// `GATEHOUSE_TICKET_KEY`); required when `directory` is not `none`, and all a server that
    /// only receives travellers needs (it verifies their tickets and its sources' peer proofs
    /// with it; docs/spec/travel.md V8, V12, V14).
    pub ticket_key: Option<FleetKey>,
    /// `ticket_lifetime_s`: the longest life a travel ticket may claim, seconds,
    /// [`MIN_TICKET_LIFETIME_S`] to [`MAX_TICKET_LIFETIME_S`] (default 30; V8).
    #[serde(deserialize_with = "seconds")]
    pub ticket_lifetime_s: u64,
    /// `directory`: where a travel to a node another server hosts finds it: `none` (default),
    /// `static` (`servers`) or `agones` (the allocator keys); anything but `none` needs a
    /// `postgres://` store and `ticket_key` (docs/spec/travel.md V12, V13).
    pub directory: DirectoryKind,
    /// `[[fleet.servers]]`: the servers a `static` directory offers, in order (V12); each entry
    /// checked whatever the directory, and one listing each remote node of the world required
    /// ([`ServerConfig::check_world`]).
    pub servers: Vec<StaticServer>,
    /// `allocator_url`: the Agones allocator service, `https://host[:port][/prefix]`; required
    /// for the `agones` directory (V13).
    pub allocator_url: Option<String>,
    /// `allocator_namespace`: the namespace of the Fleets to allocate from (default
    /// `default`).
    pub allocator_namespace: String,
    /// `allocator_labels`: labels every allocation selector matches beside the node's (e.g.
    /// `agones.dev/fleet`); default none.
    pub allocator_labels: BTreeMap<String, String>,
    /// `allocator_certificate`: the client certificate chain presented to the allocator, PEM or
    /// DER, relative to this config file; required for the `agones` directory.
    pub allocator_certificate: Option<PathBuf>,
    /// `allocator_private_key`: its private key, PEM or DER (PKCS #8); required for `agones`.
    pub allocator_private_key: Option<PathBuf>,
    /// `allocator_ca`: the only certificate the allocator's is checked against, PEM or DER;
    /// required for `agones`.
    pub allocator_ca: Option<PathBuf>,
    /// `allocator_timeout_ms`: the bound on one allocation call, connection and TLS included,
    /// 100 to 60000 ms (default 3000).
    #[serde(
        rename = "allocator_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub allocator_timeout: Duration,
    /// `allocation_attempts`: allocations one travel may ask for, 1 to 10 (default 3).
    pub allocation_attempts: u32,
    /// `peer_timeout_ms`: how long a request on the peer link (a `ReserveSeats`, the dial that
    /// carries it included) waits for its answer before it counts as refused and the next
    /// candidate is asked, 100 to 60000 ms (default 2000; docs/spec/travel.md V12, V14, V16).
    #[serde(
        rename = "peer_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub peer_timeout: Duration,
    /// `resolve_timeout_ms`: the bound on finding a destination that grants a travel's seats,
    /// every candidate asked included, 1000 to 120000 ms and at least `peer_timeout_ms`
    /// (default 5000; V7, V12, V16).
    #[serde(
        rename = "resolve_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub resolve_timeout: Duration,
    /// `peer_idle_timeout_ms`: a peer link silent this long is lost, 2000 to 60000 ms (default
    /// 3000; keep-alives go every second; V7, V14, V16). A link another server opened times out
    /// at the one its dialler asks for, at most `network.idle_timeout_ms`.
    #[serde(
        rename = "peer_idle_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub peer_idle_timeout: Duration,
}

/// The fleet's ticket key (`fleet.ticket_key`, or `GATEHOUSE_TICKET_KEY`): the HS256 key travel
/// tickets are signed with (docs/spec/travel.md V8). `Debug` and serialisation never show it.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct FleetKey(String);

impl FleetKey {
    /// The shortest key accepted, in bytes.
    pub const MIN_LEN: usize = 32;

    /// The key's bytes, as the ticket's HS256 signs with them.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

/// Serialises as `<redacted>`: a serialised config never carries the key (`config show`).
impl Serialize for FleetKey {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(super::REDACTED)
    }
}

impl std::fmt::Debug for FleetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FleetKey(<redacted>)")
    }
}

/// Where a travel finds the server hosting a remote node (`fleet.directory`;
/// docs/spec/travel.md V12).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DirectoryKind {
    /// `none`: no other server is known; a travel stays within this server.
    #[default]
    None,
    /// `static`: the `[[fleet.servers]]` listed in config ([`crate::fleet::StaticDirectory`]).
    Static,
    /// `agones`: a `GameServerAllocation` through the Agones allocator
    /// ([`crate::fleet::AgonesAllocator`], V13).
    Agones,
}

impl DirectoryKind {
    /// The name the config file writes.
    pub fn name(self) -> &'static str {
        match self {
            DirectoryKind::None => "none",
            DirectoryKind::Static => "static",
            DirectoryKind::Agones => "agones",
        }
    }
}

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            orchestrator: OrchestratorKind::None,
            health_interval: Duration::from_secs(2),
            agones_sdk_port: None,
            sdk_timeout: Duration::from_secs(5),
            allocation: Allocation::OnFirstLogin,
            when_empty: WhenEmpty::Ready,
            empty_linger: Duration::from_secs(60),
            publish_certificate_fingerprint: true,
            server_id: None,
            seat_hold: Duration::from_secs(10),
            ticket_key: None,
            ticket_lifetime_s: 30,
            directory: DirectoryKind::None,
            servers: Vec::new(),
            allocator_url: None,
            allocator_namespace: "default".to_owned(),
            allocator_labels: BTreeMap::new(),
            allocator_certificate: None,
            allocator_private_key: None,
            allocator_ca: None,
            allocator_timeout: Duration::from_secs(3),
            allocation_attempts: 3,
            peer_timeout: Duration::from_secs(2),
            resolve_timeout: Duration::from_secs(5),
            peer_idle_timeout: Duration::from_secs(3),
        }
    }
}

/// Who moves the server from Ready to Allocated (`fleet.allocation`; docs/operations.md,
/// "Allocation"). Under Agones, an Allocated game server is never removed by a scale-down or a
/// rolling update.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Allocation {
    /// `self`: the server allocates itself when its first player logs in (and again after
    /// each return to Ready); a matchmaker may allocate it first, which changes nothing.
    #[default]
    #[serde(rename = "self")]
    OnFirstLogin,
    /// `matchmaker`: only a `GameServerAllocation` allocates the server; it never calls
    /// Allocate itself, so a player who dials a Ready server directly does not protect it.
    #[serde(rename = "matchmaker")]
    Matchmaker,
}

/// What an empty server does once `fleet.empty_linger_ms` has passed with no player logged in
/// (`fleet.when_empty`; docs/operations.md, "Allocation").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WhenEmpty {
    /// Back to the pool: under Agones, Ready again (a scale-down may then remove it, and a
    /// matchmaker may allocate it again). A persistent world's choice.
    #[default]
    Ready,
    /// Drain and exit (under Agones, Shutdown at the end of the drain; the Fleet replaces it
    /// with a fresh server). A session's or a match's choice.
    Shutdown,
    /// Nothing: the server stays as it is (Allocated, under Agones).
    Stay,
}

/// Deserialises a TCP port, 1 to 65535, for a key that may be left out (`None` then).
fn optional_port<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u16>, D::Error> {
    d.deserialize_any(PortVisitor).map(Some)
}

/// Reads a port: a whole number from 1 to 65535.
struct PortVisitor;

impl serde::de::Visitor<'_> for PortVisitor {
    type Value = u16;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a port, 1 to 65535")
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<u16, E> {
        match u16::try_from(n) {
            Ok(port) if port != 0 => Ok(port),
            _ => Err(E::invalid_value(serde::de::Unexpected::Unsigned(n), &self)),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<u16, E> {
        match u64::try_from(n) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::invalid_value(serde::de::Unexpected::Signed(n), &self)),
        }
    }
}

/// A key whose value is one of a few names: read from a string only, and any other value
/// (`1`, `true`) refused naming every allowed name, as a wrong name is.
trait Named: Sized + Copy + 'static {
    /// Each name as the config file writes it, with its value.
    const NAMES: &'static [(&'static str, Self)];
}

impl Named for Allocation {
    const NAMES: &'static [(&'static str, Self)] =
        &[("self", Allocation::OnFirstLogin), ("matchmaker", Allocation::Matchmaker)];
}

impl Named for WhenEmpty {
    const NAMES: &'static [(&'static str, Self)] = &[
        ("ready", WhenEmpty::Ready),
        ("shutdown", WhenEmpty::Shutdown),
        ("stay", WhenEmpty::Stay),
    ];
}

/// Reads a [`Named`] value, naming the allowed names whatever was found.
struct NamedVisitor<T>(std::marker::PhantomData<T>);

impl<T: Named> serde::de::Visitor<'_> for NamedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = T::NAMES.iter().map(|(name, _)| format!("`{name}`")).collect();
        write!(f, "one of {}", names.join(", "))
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<T, E> {
        match T::NAMES.iter().find(|(name, _)| *name == text) {
            Some((_, value)) => Ok(*value),
            None => Err(E::invalid_value(serde::de::Unexpected::Str(text), &self)),
        }
    }
}

impl Named for DirectoryKind {
    const NAMES: &'static [(&'static str, Self)] = &[
        ("none", DirectoryKind::None),
        ("static", DirectoryKind::Static),
        ("agones", DirectoryKind::Agones),
    ];
}

impl<'de> Deserialize<'de> for DirectoryKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NamedVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for Allocation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NamedVisitor(std::marker::PhantomData))
    }
}

impl<'de> Deserialize<'de> for WhenEmpty {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NamedVisitor(std::marker::PhantomData))
    }
}

/// Which orchestrator runs the server (`fleet.orchestrator`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OrchestratorKind {
    /// None: nothing is told (a server run by hand or by a plain container runtime).
    #[default]
    None,
    /// Agones: Ready, Health, the `players` List and Shutdown through the SDK sidecar. Needs a
    /// server built with the `agones` cargo feature.
    Agones,
}

impl OrchestratorKind {
    /// Whether this build can run under it.
    pub fn is_built(self) -> bool {
        match self {
            OrchestratorKind::None => true,
            OrchestratorKind::Agones => cfg!(feature = "agones"),
        }
    }
}

/// `[network]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkConfig {
    /// `bind`: UDP address of the QUIC endpoint.
    pub bind: SocketAddr,
    /// `idle_timeout_ms`: a connection silent this long is closed.
    #[serde(
        rename = "idle_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub idle_timeout: Duration,
    /// `keep_alive_ms`: ping interval; must be below the idle timeout.
    #[serde(rename = "keep_alive_ms", deserialize_with = "millis", serialize_with = "ser_millis")]
    pub keep_alive: Duration,
    /// `handshake_timeout_ms`: a QUIC handshake not finished this long after accept is
    /// abandoned (a budget of its own: a handshake slowed by loss does not eat the `Hello`'s).
    #[serde(
        rename = "handshake_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub handshake_timeout: Duration,
    /// `hello_timeout_ms`: a connection that has not sent its stream and `Hello` this long after
    /// its handshake finished is closed (`HelloTimeout`).
    #[serde(
        rename = "hello_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub hello_timeout: Duration,
    /// `max_players`: logged-in players at once, 1 to 65,536 (a transition's teleports name every
    /// pawn in one set of ids, protocol 6); beyond it `Hello` is refused (server full).
    pub max_players: usize,
    /// `max_frame_len`: largest control frame body, bytes.
    pub max_frame_len: usize,
    /// `udp_buffer_bytes`: socket send and receive buffer size, bytes.
    pub udp_buffer_bytes: usize,
    /// `stream_receive_window`: per-stream flow-control window, bytes.
    pub stream_receive_window: u32,
    /// `connection_receive_window`: per-connection flow-control window, bytes.
    pub connection_receive_window: u32,
    /// `send_queue_frames`: frames queued for one client, not yet taken by its writer, before it
    /// is closed as a slow consumer (one game step's frames always go to an empty queue).
    pub send_queue_frames: usize,
    /// `gso_segments`: most datagrams handed to the kernel in one send (segmentation offload),
    /// 1 to 10 (quinn 0.11 builds at most 10 at once); the network driver builds every
    /// connection's datagrams in one shared buffer, so it costs no memory per connection.
    pub gso_segments: usize,
    /// `replication_interval_ms`: how long a broadcast of replicated player or pawn state may
    /// wait to share a write with the next ones to its client (docs/protocol.md §4.4), 0 to
    /// 1,000 ms; 0 writes it at the end of the game step that made it.
    #[serde(
        rename = "replication_interval_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub replication_interval: Duration,
    /// `replication_writes_per_s`: writes of replicated state per second, over every
    /// connection, that the replication interval stretches to stay within (docs/protocol.md
    /// §4.4): with more than `replication_interval × this` players the interval is
    /// `players / this` seconds, at most 1 s. Default 10,000: 50 ms up to 500 players, 400 ms
    /// at 4,000. 0 never stretches it.
    pub replication_writes_per_s: u32,
    /// `max_pending_connections`: connections that have not logged in yet, at once; beyond it
    /// new ones are refused at the QUIC level.
    pub max_pending_connections: usize,
    /// `max_pending_per_ip`: of those, from one IP address.
    pub max_pending_per_ip: usize,
    /// `handshake_burst`: handshakes one address group (an IPv4 address, an IPv6 /64) may
    /// start in a row (default 128) before it is held to `handshakes_per_ip_per_s`; past that
    /// a new connection is refused before its handshake (docs/security.md).
    pub handshake_burst: u32,
    /// `handshakes_per_ip_per_s`: past the burst, handshakes per second one address group may
    /// start (default 100).
    pub handshakes_per_ip_per_s: u32,
    /// `message_burst`: messages a logged-in client may send in a row (default 500) before
    /// it is held to `message_rate_per_s`; past that the connection is closed with `Abuse`.
    /// Ignored messages count too (docs/security.md).
    pub message_burst: u32,
    /// `message_rate_per_s`: past the burst, messages per second a client may send (default
    /// 100; a real client sends a few a second).
    pub message_rate_per_s: u32,
}

impl NetworkConfig {
    /// One connection's message budget: `message_burst` in a row, then `message_rate_per_s`.
    pub(crate) fn message_budget(&self) -> crate::rate::Rate {
        crate::rate::Rate {
            burst: self.message_burst,
            interval: Duration::from_secs(1) / self.message_rate_per_s.max(1),
        }
    }
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            bind: SocketAddr::from(([127, 0, 0, 1], 7777)),
            idle_timeout: Duration::from_secs(10),
            keep_alive: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(10),
            hello_timeout: Duration::from_secs(5),
            max_players: 256,
            max_frame_len: gatehouse_protocol::codec::DEFAULT_MAX_FRAME_LEN,
            udp_buffer_bytes: 4 << 20,
            stream_receive_window: 256 * 1024,
            connection_receive_window: 512 * 1024,
            send_queue_frames: 4096,
            replication_interval: Duration::from_millis(50),
            replication_writes_per_s: 10_000,
            gso_segments: 4,
            max_pending_connections: 256,
            max_pending_per_ip: 64,
            handshake_burst: 128,
            handshakes_per_ip_per_s: 100,
            message_burst: 500,
            message_rate_per_s: 100,
        }
    }
}

/// `[tls]`.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// `certificate`: DER or PEM certificate chain file; with `private_key`, used as given.
    pub certificate: Option<PathBuf>,
    /// `private_key`: DER or PEM private key file.
    pub private_key: Option<PathBuf>,
}

/// `[auth]`.
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `token_key`: the HS256 key session tokens are signed with (the issuer's key).
    #[serde(serialize_with = "ser_secret")]
    pub token_key: String,
    /// `insecure_development_key`: serve with the shipped development key on an address other
    /// hosts can reach (`network.bind` not loopback), where anyone can mint a token for any
    /// player. Off by default: the server refuses to start so (docs/security.md).
    pub insecure_development_key: bool,
    /// `max_token_lifetime_s`: the longest life a session token may claim, seconds (default a
    /// day); a leaked token is worth no more (docs/protocol.md 4, "Session tokens").
    #[serde(deserialize_with = "seconds")]
    pub max_token_lifetime_s: u64,
    /// `clock_skew_s`: how far the token issuer's clock may be from this server's, seconds
    /// (default 60).
    #[serde(deserialize_with = "seconds")]
    pub clock_skew_s: u64,
    /// `login_burst`: how many logins one player may make in a row (default 5) before it is
    /// held to one per `login_interval_ms`; more are refused `TooManyLogins` and change
    /// nothing (docs/protocol.md 4, "Session tokens").
    pub login_burst: u32,
    /// `login_interval_ms`: past the burst, one login per this long per player (default 2 s).
    #[serde(
        rename = "login_interval_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub login_interval: Duration,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            token_key: DEV_TOKEN_KEY.to_owned(),
            insecure_development_key: false,
            max_token_lifetime_s: TokenLimits::DEFAULT.max_lifetime_s,
            clock_skew_s: TokenLimits::DEFAULT.clock_skew_s,
            login_burst: 5,
            login_interval: Duration::from_secs(2),
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("token_key", &"<redacted>")
            .field("insecure_development_key", &self.insecure_development_key)
            .field("max_token_lifetime_s", &self.max_token_lifetime_s)
            .field("clock_skew_s", &self.clock_skew_s)
            .field("login_burst", &self.login_burst)
            .field("login_interval", &self.login_interval)
            .finish()
    }
}

impl AuthConfig {
    /// Whether the shipped development key is in use.
    pub fn is_development_key(&self) -> bool {
        self.token_key == DEV_TOKEN_KEY
    }

    /// The bounds on a token's times (docs/protocol.md 4, "Session tokens").
    pub fn token_limits(&self) -> TokenLimits {
        TokenLimits { max_lifetime_s: self.max_token_lifetime_s, clock_skew_s: self.clock_skew_s }
    }
}

/// `[game]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct GameConfig {
    /// `world`: the world-map file, relative to this config file.
    pub world: PathBuf,
    /// `spawn_settle_timeout_ms`: the settle-hold bound once nothing is loading (default 15 s;
    /// docs/spec/transitions.md T7).
    #[serde(
        rename = "spawn_settle_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub spawn_settle_timeout: Duration,
    /// `spawn_retry_ms`: retry delay when a node's spawn points are not registered and no event
    /// will announce them (default 100 ms); an announced registration runs waiting spawns at
    /// once (docs/spec/transitions.md T2, T11).
    #[serde(rename = "spawn_retry_ms", deserialize_with = "millis", serialize_with = "ser_millis")]
    pub spawn_retry: Duration,
    /// `client_ready_timeout_ms`: how long a client may take to report ready once it was shown a
    /// transition that is waiting for clients.
    #[serde(
        rename = "client_ready_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub client_ready_timeout: Duration,
    /// `client_ready_policy`: `kick` or `proceed`.
    pub client_ready_policy: ClientReadyPolicy,
    /// `client_response_timeout_ms`: how long a client may take to answer what needs no
    /// streaming: `TransitionShown` after `ShowTransition`, `PossessionAcknowledged` after
    /// `Possessed` (default 2 s). A client that misses it is not waited for: set aside from the
    /// transition, or excused from placement; the longer timeouts still apply the policy
    /// (docs/spec/transitions.md T9).
    #[serde(
        rename = "client_response_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub client_response_timeout: Duration,
    /// `client_response_crowd_floor_ms`: unset by default. When set, the crowd rule cuts the
    /// response timeout: once nine in ten of the clients shown a transition have answered it,
    /// the rest (and every possession acknowledgement awaited meanwhile) may take twice as long
    /// as the slowest of those answers took, but at least this and at most
    /// `client_response_timeout_ms`. For crowds on alike paths (one region, a LAN, loopback),
    /// where a client far behind its peers is silent, not slow; a player on a much longer path
    /// than the rest would be set aside at every transition (docs/spec/transitions.md T9).
    #[serde(
        rename = "client_response_crowd_floor_ms",
        deserialize_with = "optional_millis",
        serialize_with = "ser_optional_millis"
    )]
    pub client_response_crowd_floor: Option<Duration>,
    /// `transition_max_ms`: the hard bound on one transition, from its start, whatever its
    /// phase and however often its settle-hold was extended; a transition that reaches it fails
    /// (`TransitionFailed`) and the server travels back to the last node a transition reached
    /// (default 120 s; above `spawn_settle_timeout_ms`).
    #[serde(
        rename = "transition_max_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub transition_max: Duration,
    /// `max_failed_transitions`: transitions in a row that may fail at `transition_max_ms` (a
    /// travel and its recovery travels) before the world is unavailable: every client is closed
    /// with `WorldUnavailable` and the server stops with an error (docs/protocol.md 5, "Every
    /// transition is bounded"; default 3, at least 1).
    pub max_failed_transitions: u32,
    /// `player_state_retention_ms`: how long a leaving player's player state (team, ability
    /// tags and effects, health, kit latches, class) is kept for a relaunch, as engines keep
    /// inactive player states (default 300 s; 0 keeps nothing).
    #[serde(
        rename = "player_state_retention_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub player_state_retention: Duration,
}

impl Default for GameConfig {
    fn default() -> Self {
        Self {
            world: PathBuf::from("world.toml"),
            spawn_settle_timeout: Duration::from_secs(15),
            spawn_retry: Duration::from_millis(100),
            client_ready_timeout: Duration::from_secs(30),
            client_ready_policy: ClientReadyPolicy::Kick,
            client_response_timeout: Duration::from_secs(2),
            client_response_crowd_floor: None,
            transition_max: Duration::from_secs(120),
            max_failed_transitions: 3,
            player_state_retention: Duration::from_secs(300),
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// `url`: `sqlite:PATH` for the embedded store (a relative path is inside `data_dir`;
    /// default `sqlite:saves.db`) or `postgres://USER:PASSWORD@HOST:PORT/DB` for a PostgreSQL
    /// database several server processes share. Overridden by `GATEHOUSE_STORE_URL`.
    pub url: StoreUrl,
    /// `session`: the name of this server world's session save (default `main`).
    pub session: String,
    /// `load_timeout_ms`: a load not answered this long after it was asked for fails (the
    /// player plays unsaved); also bounds each save attempt.
    #[serde(
        rename = "load_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub load_timeout: Duration,
    /// `save_retry_ms`: delay between attempts of a failed save.
    #[serde(rename = "save_retry_ms", deserialize_with = "millis", serialize_with = "ser_millis")]
    pub save_retry: Duration,
    /// `save_attempts`: attempts per save, the first included, before it is given up (logged).
    pub save_attempts: u32,
    /// `drain_timeout_ms`: how long shutdown waits for pending saves.
    #[serde(
        rename = "drain_timeout_ms",
        deserialize_with = "millis",
        serialize_with = "ser_millis"
    )]
    pub drain_timeout: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: StoreUrl::default(),
            session: "main".to_owned(),
            load_timeout: Duration::from_secs(5),
            save_retry: Duration::from_millis(500),
            save_attempts: 5,
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Readable lines for a terminal.
    #[default]
    Human,
    /// One JSON object per line, for log collectors.
    Json,
}

fn default_data_dir() -> PathBuf {
    PathBuf::from("data")
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            network: NetworkConfig::default(),
            tls: TlsConfig::default(),
            auth: AuthConfig::default(),
            game: GameConfig::default(),
            store: StoreConfig::default(),
            admin: AdminConfig::default(),
            fleet: FleetConfig::default(),
            data_dir: default_data_dir(),
            log_format: LogFormat::default(),
            sources: Sources::default(),
        }
    }
}

impl ServerConfig {
    /// Reads and checks `path`. The world path and TLS paths are resolved against the file's
    /// directory.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file and key.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::parse(path, &super::read_text(path)?)
    }

    /// Parses and checks config text as if read from `path`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key, its line in `path`, and what was expected and found.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let config = Self::parse_with_environment(path, text, &Environment::new())?;
        config.check()?;
        Ok(config)
    }

    /// Parses config text as if read from `path`, with every `GATEHOUSE_<SECTION>__<KEY>`
    /// variable of `env` over the file's keys (docs/operations.md, "Configuration"), without
    /// the cross-key checks ([`Self::check`]). Paths from the file are resolved against its
    /// directory; paths from a variable are used as given.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key and where its value came from (the file's line, or the
    /// variable): an unknown variable, a legacy variable set with its new name, a value refused.
    pub fn parse_with_environment(
        path: &Path,
        text: &str,
        env: &Environment,
    ) -> Result<Self, ConfigError> {
        let overlay = env::config_variables(env)?;
        let mut sources = Sources::of_file(path, text);
        for entry in &overlay {
            sources.set_written(&entry.key(), entry.source(), &entry.value);
        }
        let mut config: ServerConfig = parse_layered(path, text, &overlay, &sources)?;
        config.sources = sources;
        let from_file = |config: &ServerConfig, key: &str| {
            !matches!(config.sources.of(key), ValueSource::Env { .. } | ValueSource::Flag { .. })
        };
        if from_file(&config, "game.world") {
            config.game.world = beside(path, &config.game.world);
        }
        if from_file(&config, "tls.certificate") {
            config.tls.certificate = config.tls.certificate.map(|p| beside(path, &p));
        }
        if from_file(&config, "tls.private_key") {
            config.tls.private_key = config.tls.private_key.map(|p| beside(path, &p));
        }
        let resolved =
            |config: &ServerConfig, key: &str, file: &Option<PathBuf>| match from_file(config, key)
            {
                true => file.as_ref().map(|p| beside(path, p)),
                false => file.clone(),
            };
        let f = &config.fleet;
        let certificate =
            resolved(&config, "fleet.allocator_certificate", &f.allocator_certificate);
        let private_key =
            resolved(&config, "fleet.allocator_private_key", &f.allocator_private_key);
        let ca = resolved(&config, "fleet.allocator_ca", &f.allocator_ca);
        config.fleet.allocator_certificate = certificate;
        config.fleet.allocator_private_key = private_key;
        config.fleet.allocator_ca = ca;
        Ok(config)
    }

    /// Records that `key` (dotted, e.g. `network.bind`) was overridden by `source` (a flag or an
    /// environment variable), so an error about it blames that source.
    pub fn set_source(&mut self, key: &str, source: ValueSource) {
        self.sources.set(key, source);
    }

    /// Where `key`'s value came from: the file's line, an override, or the default.
    pub fn source_of(&self, key: &str) -> ValueSource {
        self.sources.of(key)
    }

    /// The admin endpoint's exposure check ([`AdminConfig::check_exposure`]) as a config error
    /// that blames wherever `admin.bind` came from (a flag, a variable, a file line).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for `admin.bind` beyond loopback without a token.
    pub fn check_admin_exposure(&self) -> Result<(), ConfigError> {
        self.admin.check_exposure().map_err(|why| {
            self.invalid(
                "admin.bind",
                why,
                format!("{} without admin.token or GATEHOUSE_ADMIN_TOKEN", self.admin.bind),
            )
        })
    }

    /// A world with a node another server hosts (`remote = true`) needs a fleet to find that
    /// server: `fleet.directory` other than `none`, and under `static` an entry of
    /// `[[fleet.servers]]` that lists the node (docs/spec/travel.md V12). A world with none
    /// needs neither: a server that only receives travellers needs the fleet key alone.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for `fleet.directory` or `fleet.servers`, naming the remote node.
    pub fn check_world(&self, world: &gatehouse_game::world::WorldMap) -> Result<(), ConfigError> {
        let remote = world.nodes.iter().find(|n| n.remote);
        match (remote, self.fleet.directory) {
            (Some(node), DirectoryKind::None) => Err(self.invalid(
                "fleet.directory",
                format!(
                    "`static` or `agones`: the world's node {} is remote (another server hosts it), and only a fleet directory finds that server",
                    node.id
                ),
                "\"none\"",
            )),
            (_, DirectoryKind::Static) => {
                // A static list must name a server for every remote node, or a travel there
                // can only fail; this server's own entry does not count (it is skipped).
                let me = self.server_id().ok();
                let listed = |node: &str| {
                    let others = self.fleet.servers.iter();
                    let mut others = others.filter(|s| me.as_ref().is_none_or(|me| s.id != me.as_str()));
                    others.any(|s| s.nodes.iter().any(|n| n == node))
                };
                match world.nodes.iter().find(|n| n.remote && !listed(n.id.as_str())) {
                    Some(node) => Err(self.invalid(
                        "fleet.servers",
                        format!(
                            "an entry of another server whose `nodes` lists {}, the world's remote node",
                            node.id
                        ),
                        "none",
                    )),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// Refuses the shipped development key on an address other hosts can reach, unless
    /// `auth.insecure_development_key` says so (docs/security.md). Run once every
    /// override is applied: the key usually comes from the environment.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for `auth.token_key`, naming the bind and the way out.
    pub fn check_key_exposure(&self) -> Result<(), ConfigError> {
        let bind = self.network.bind;
        if self.auth.is_development_key()
            && !bind.ip().is_loopback()
            && !self.auth.insecure_development_key
        {
            return Err(self.invalid(
                "auth.token_key",
                format!(
                    "your token issuer's key, since network.bind {bind} is not loopback: with \
                     the shipped development key anyone can mint a token for any player (set \
                     auth.token_key or GATEHOUSE_TOKEN_KEY; auth.insecure_development_key = \
                     true serves it anyway)"
                ),
                "the shipped development key",
            ));
        }
        Ok(())
    }

    /// What an operator must hear at start about this configuration's exposure: the shipped
    /// development key or the generated development certificate in use (docs/operations.md,
    /// "Security").
    pub fn exposure_warnings(&self) -> Vec<String> {
        let bind = self.network.bind;
        let mut warnings = Vec::new();
        if self.auth.is_development_key() {
            warnings.push(format!(
                "auth.token_key is the shipped development key: anyone can mint tokens{}",
                if bind.ip().is_loopback() {
                    String::new()
                } else {
                    format!(", and network.bind {bind} is not loopback (INSECURE)")
                }
            ));
        }
        if self.tls.certificate.is_none() && !bind.ip().is_loopback() {
            warnings.push(format!(
                "network.bind {bind} is not loopback and no tls.certificate is set: clients can \
                 only trust the generated development certificate by its file or fingerprint; \
                 mount a real certificate and set tls.certificate and tls.private_key"
            ));
        }
        warnings
    }

    /// A [`ConfigError::Invalid`] for `key`, blaming wherever its value came from.
    pub fn invalid(
        &self,
        key: &str,
        expected: impl Into<String>,
        found: impl Into<String>,
    ) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_owned(),
            origin: self.sources.of(key),
            expected: expected.into(),
            found: found.into(),
        }
    }

    /// Cross-key checks; run again after the overrides (flags, environment) are applied.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key, where its value came from, what was expected
    /// and what was found.
    pub fn check(&self) -> Result<(), ConfigError> {
        self.check_network()?;
        self.check_tls()?;
        self.check_admin()?;
        self.check_auth()?;
        self.check_game()?;
        self.check_fleet()?;
        self.check_store()
    }

    /// `[network]` checks: timeouts, sizes, admission and rate limits, the send path, then
    /// the flow-control windows (the first refusal wins, so this order is the errors' order).
    fn check_network(&self) -> Result<(), ConfigError> {
        self.check_network_timeouts()?;
        self.check_network_sizes()?;
        self.check_network_admission()?;
        self.check_network_sending()?;
        self.check_network_windows()
    }

    /// `[network]` timeouts: each above 0, and the keep-alive below the idle timeout (a ping
    /// sent no sooner would let a quiet but live connection close).
    fn check_network_timeouts(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        if n.idle_timeout.is_zero() {
            return Err(self.invalid("network.idle_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if n.keep_alive.is_zero() || n.keep_alive >= n.idle_timeout {
            return Err(self.invalid(
                "network.keep_alive_ms",
                format!(
                    "more than 0 ms and less than network.idle_timeout_ms ({})",
                    ms(n.idle_timeout)
                ),
                ms(n.keep_alive),
            ));
        }
        if n.hello_timeout.is_zero() {
            return Err(self.invalid("network.hello_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if n.handshake_timeout.is_zero() {
            return Err(self.invalid("network.handshake_timeout_ms", "more than 0 ms", "0 ms"));
        }
        Ok(())
    }

    /// `[network]` sizes: the player cap, the frame length and the socket buffer, each within
    /// what the protocol can carry and the server needs.
    fn check_network_sizes(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        // One transition's teleports name every player's pawn in one set of pawn ids, which a
        // client refuses past `MAX_PAWNS_PER_SET` (protocol 6).
        let most = gatehouse_protocol::runs::MAX_PAWNS_PER_SET;
        if n.max_players == 0 || n.max_players as u64 > most {
            return Err(self.invalid(
                "network.max_players",
                format!("between 1 and {most} players"),
                n.max_players.to_string(),
            ));
        }
        let hard = gatehouse_protocol::codec::HARD_MAX_FRAME_LEN;
        if n.max_frame_len < MIN_FRAME_LEN || n.max_frame_len > hard {
            return Err(self.invalid(
                "network.max_frame_len",
                format!("between {MIN_FRAME_LEN} and {hard} bytes"),
                format!("{} bytes", n.max_frame_len),
            ));
        }
        if n.udp_buffer_bytes < 64 * 1024 {
            return Err(self.invalid(
                "network.udp_buffer_bytes",
                "at least 65536 bytes",
                format!("{} bytes", n.udp_buffer_bytes),
            ));
        }
        Ok(())
    }

    /// `[network]` admission and rate limits: each pending-connection cap and burst admits at
    /// least one, and each rate is between 1 and a million a second.
    fn check_network_admission(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        if n.max_pending_connections == 0 {
            return Err(self.invalid("network.max_pending_connections", "at least 1", "0"));
        }
        if n.handshake_burst == 0 {
            return Err(self.invalid("network.handshake_burst", "at least 1", "0"));
        }
        if !(1..=1_000_000).contains(&n.handshakes_per_ip_per_s) {
            return Err(self.invalid(
                "network.handshakes_per_ip_per_s",
                "between 1 and 1000000 handshakes a second",
                n.handshakes_per_ip_per_s.to_string(),
            ));
        }
        if n.message_burst == 0 {
            return Err(self.invalid("network.message_burst", "at least 1", "0"));
        }
        if !(1..=1_000_000).contains(&n.message_rate_per_s) {
            return Err(self.invalid(
                "network.message_rate_per_s",
                "between 1 and 1000000 messages a second",
                n.message_rate_per_s.to_string(),
            ));
        }
        if n.max_pending_per_ip == 0 {
            return Err(self.invalid("network.max_pending_per_ip", "at least 1", "0"));
        }
        Ok(())
    }

    /// `[network]` send path: a send queue of at least one frame, a GSO batch quinn can build,
    /// and a replication interval of at most a second.
    fn check_network_sending(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        if n.send_queue_frames == 0 {
            return Err(self.invalid("network.send_queue_frames", "at least 1 frame", "0"));
        }
        if n.gso_segments == 0 || n.gso_segments > MAX_GSO_SEGMENTS {
            return Err(self.invalid(
                "network.gso_segments",
                format!("between 1 and {MAX_GSO_SEGMENTS} datagrams"),
                n.gso_segments.to_string(),
            ));
        }
        if n.replication_interval > MAX_REPLICATION_INTERVAL {
            return Err(self.invalid(
                "network.replication_interval_ms",
                "at most 1000 ms",
                ms(n.replication_interval),
            ));
        }
        Ok(())
    }

    /// `[network]` flow-control windows: a stream window of at least 4 KiB, and a connection
    /// window no smaller than one stream's (or the connection's would cap every stream).
    fn check_network_windows(&self) -> Result<(), ConfigError> {
        let n = &self.network;
        if n.stream_receive_window < 4096 {
            return Err(self.invalid(
                "network.stream_receive_window",
                "at least 4096 bytes",
                format!("{} bytes", n.stream_receive_window),
            ));
        }
        if n.connection_receive_window < n.stream_receive_window {
            return Err(self.invalid(
                "network.connection_receive_window",
                format!(
                    "at least network.stream_receive_window ({} bytes)",
                    n.stream_receive_window
                ),
                format!("{} bytes", n.connection_receive_window),
            ));
        }
        Ok(())
    }

    /// `[tls]` checks: the certificate and its private key are given together or not at all.
    fn check_tls(&self) -> Result<(), ConfigError> {
        if self.tls.certificate.is_some() != self.tls.private_key.is_some() {
            let (set, unset) = match self.tls.certificate {
                Some(_) => ("tls.certificate", "tls.private_key"),
                None => ("tls.private_key", "tls.certificate"),
            };
            return Err(self.invalid(
                unset,
                format!("a path, since {set} is set (give both or neither)"),
                "nothing",
            ));
        }
        Ok(())
    }

    /// `[admin]` checks: at least one connection, a header timeout within the connection
    /// timeout, and a token (if set) that `AdminToken::check` accepts.
    fn check_admin(&self) -> Result<(), ConfigError> {
        let admin = &self.admin;
        if admin.max_connections == 0 {
            return Err(self.invalid("admin.max_connections", "at least 1", "0"));
        }
        if admin.header_timeout.is_zero() || admin.header_timeout > admin.connection_timeout {
            return Err(self.invalid(
                "admin.header_timeout_ms",
                format!(
                    "more than 0 ms and at most admin.connection_timeout_ms ({} ms)",
                    admin.connection_timeout.as_millis()
                ),
                ms(admin.header_timeout),
            ));
        }
        if let Some(token) = &self.admin.token {
            // Never quoted: the found part says what is wrong, not what it is.
            token.check().map_err(|why| self.invalid("admin.token", why, ""))?;
        }
        Ok(())
    }

    /// `[auth]` checks: token lifetime, clock skew, the login rate and the token key's length.
    fn check_auth(&self) -> Result<(), ConfigError> {
        let a = &self.auth;
        if a.max_token_lifetime_s == 0 {
            return Err(self.invalid("auth.max_token_lifetime_s", "more than 0 s", "0 s"));
        }
        if a.clock_skew_s > 3_600 {
            return Err(self.invalid(
                "auth.clock_skew_s",
                "at most 3600 s",
                format!("{} s", a.clock_skew_s),
            ));
        }
        if a.login_burst == 0 {
            return Err(self.invalid("auth.login_burst", "at least 1 login", "0"));
        }
        if a.login_interval.is_zero() {
            return Err(self.invalid("auth.login_interval_ms", "more than 0 ms", "0 ms"));
        }
        if self.auth.token_key.len() < 16 {
            return Err(self.invalid(
                "auth.token_key",
                "a key of at least 16 bytes",
                format!("{} bytes", self.auth.token_key.len()),
            ));
        }
        Ok(())
    }

    /// `[game]` checks: each timeout above 0, the crowd floor within the response timeout, a
    /// transition maximum above the settle timeout, and at least one failed transition allowed.
    fn check_game(&self) -> Result<(), ConfigError> {
        let g = &self.game;
        if g.spawn_retry.is_zero() {
            return Err(self.invalid("game.spawn_retry_ms", "more than 0 ms", "0 ms"));
        }
        if g.spawn_settle_timeout.is_zero() {
            return Err(self.invalid("game.spawn_settle_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if g.client_ready_timeout.is_zero() {
            return Err(self.invalid("game.client_ready_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if g.client_response_timeout.is_zero() {
            return Err(self.invalid("game.client_response_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if let Some(floor) = g.client_response_crowd_floor
            && (floor.is_zero() || floor > g.client_response_timeout)
        {
            return Err(self.invalid(
                "game.client_response_crowd_floor_ms",
                format!(
                    "more than 0 ms and at most game.client_response_timeout_ms ({})",
                    ms(g.client_response_timeout)
                ),
                ms(floor),
            ));
        }
        if g.transition_max <= g.spawn_settle_timeout {
            return Err(self.invalid(
                "game.transition_max_ms",
                format!(
                    "more than game.spawn_settle_timeout_ms ({}), or every settle timeout would \
                     fail its transition",
                    ms(g.spawn_settle_timeout)
                ),
                ms(g.transition_max),
            ));
        }
        if g.max_failed_transitions == 0 {
            return Err(self.invalid(
                "game.max_failed_transitions",
                "at least 1 (the first failed transition's recovery travel)",
                "0",
            ));
        }
        Ok(())
    }

    /// `[fleet]` checks.
    fn check_fleet(&self) -> Result<(), ConfigError> {
        let f = &self.fleet;
        if !f.orchestrator.is_built() {
            return Err(self.invalid(
                "fleet.orchestrator",
                "\"none\", or \"agones\" in a gatehouse-server built with the `agones` cargo \
                 feature (cargo build -p gatehouse-server --features agones)",
                "\"agones\" in a build without that feature",
            ));
        }
        if f.health_interval.is_zero() {
            return Err(self.invalid("fleet.health_interval_ms", "more than 0 ms", "0 ms"));
        }
        if f.sdk_timeout.is_zero() {
            return Err(self.invalid("fleet.sdk_timeout_ms", "more than 0 ms", "0 ms"));
        }
        self.check_travel_keys()?;
        self.check_directory()
    }

    /// This server's id in the fleet: `fleet.server_id`, else `store.session`
    /// (docs/spec/travel.md V12).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `fleet.server_id` (or `store.session`, when it stands for
    /// it) for a name that is not a server id.
    pub fn server_id(&self) -> Result<ServerId, ConfigError> {
        let (key, id) = match &self.fleet.server_id {
            Some(id) => ("fleet.server_id", id.as_str()),
            None => ("store.session", self.store.session.as_str()),
        };
        ServerId::new(id).map_err(|e| {
            self.invalid(
                key,
                format!("a server id: 1 to 64 ASCII letters, digits or `_ . : -` ({e})"),
                format!("{id:?}"),
            )
        })
    }

    /// Whether this server is in a fleet: it holds the fleet key (`fleet.ticket_key`),
    /// whatever its directory; it then offers the peer link and checks tickets, and a server
    /// that only receives travellers needs no directory (docs/spec/travel.md V12, V14).
    pub fn in_fleet(&self) -> bool {
        self.fleet.ticket_key.is_some()
    }

    /// This server's id when it is in a fleet ([`ServerConfig::in_fleet`]), which every player
    /// save names as the store row's holder; `None` in no fleet, whose saves name none
    /// (docs/spec/travel.md V12, V17).
    ///
    /// # Errors
    /// As [`ServerConfig::server_id`].
    pub fn fleet_server(&self) -> Result<Option<ServerId>, ConfigError> {
        if !self.in_fleet() {
            return Ok(None);
        }
        self.server_id().map(Some)
    }

    /// The travel's own `[fleet]` keys: the server id, the seat hold, the peer link's bounds,
    /// the ticket lifetime and the ticket key (docs/spec/travel.md V8, V14, V16).
    fn check_travel_keys(&self) -> Result<(), ConfigError> {
        let f = &self.fleet;
        if f.server_id.is_some() {
            self.server_id()?;
        }
        let hold = Duration::from_secs(1)..=Duration::from_secs(120);
        if !hold.contains(&f.seat_hold) {
            return Err(self.invalid(
                "fleet.seat_hold_ms",
                "between 1000 and 120000 ms",
                ms(f.seat_hold),
            ));
        }
        self.check_peer_bounds()?;
        let lifetime = MIN_TICKET_LIFETIME_S..=MAX_TICKET_LIFETIME_S;
        if !lifetime.contains(&f.ticket_lifetime_s) {
            return Err(self.invalid(
                "fleet.ticket_lifetime_s",
                format!("between {MIN_TICKET_LIFETIME_S} and {MAX_TICKET_LIFETIME_S} s"),
                format!("{} s", f.ticket_lifetime_s),
            ));
        }
        let Some(key) = &f.ticket_key else { return Ok(()) };
        // Never quoted: the found part says what is wrong, not what it is.
        if key.as_bytes().len() < FleetKey::MIN_LEN {
            return Err(self.invalid(
                "fleet.ticket_key",
                format!("a key of at least {} bytes", FleetKey::MIN_LEN),
                format!("{} bytes", key.as_bytes().len()),
            ));
        }
        if key.as_bytes() == self.auth.token_key.as_bytes() {
            return Err(self.invalid(
                "fleet.ticket_key",
                format!(
                    "a key of the fleet's own, not auth.token_key (from {}): with it, the \
                     session-token issuer could mint travel tickets, moving any player to any \
                     server",
                    self.source_of("auth.token_key")
                ),
                "the same key as auth.token_key",
            ));
        }
        Ok(())
    }

    /// The peer link's bounds: `peer_timeout_ms`, `resolve_timeout_ms` (which holds at least
    /// one ask) and `peer_idle_timeout_ms` (which holds at least two keep-alives of 1 s;
    /// docs/spec/travel.md V14, V16).
    fn check_peer_bounds(&self) -> Result<(), ConfigError> {
        let f = &self.fleet;
        let ranges = [
            ("fleet.peer_timeout_ms", f.peer_timeout, 100, 60_000),
            ("fleet.resolve_timeout_ms", f.resolve_timeout, 1_000, 120_000),
            ("fleet.peer_idle_timeout_ms", f.peer_idle_timeout, 2_000, 60_000),
        ];
        for (key, value, low, high) in ranges {
            let range = Duration::from_millis(low)..=Duration::from_millis(high);
            if !range.contains(&value) {
                return Err(self.invalid(key, format!("between {low} and {high} ms"), ms(value)));
            }
        }
        if f.resolve_timeout < f.peer_timeout {
            return Err(self.invalid(
                "fleet.resolve_timeout_ms",
                format!(
                    "at least fleet.peer_timeout_ms ({}, from {}): a travel asks one candidate \
                     at least",
                    ms(f.peer_timeout),
                    self.source_of("fleet.peer_timeout_ms")
                ),
                ms(f.resolve_timeout),
            ));
        }
        Ok(())
    }

    /// `fleet.directory` and what it needs: a `postgres://` store and a ticket key for any
    /// directory, the allocator's keys for `agones`; and every `[[fleet.servers]]` entry, built
    /// as the static directory builds it (V12, V13). A `static` directory may list no server:
    /// the world's remote nodes, if any, need theirs ([`ServerConfig::check_world`]).
    fn check_directory(&self) -> Result<(), ConfigError> {
        let f = &self.fleet;
        let range = Duration::from_millis(100)..=Duration::from_secs(60);
        if !range.contains(&f.allocator_timeout) {
            return Err(self.invalid(
                "fleet.allocator_timeout_ms",
                "between 100 and 60000 ms",
                ms(f.allocator_timeout),
            ));
        }
        if !(1..=10).contains(&f.allocation_attempts) {
            return Err(self.invalid(
                "fleet.allocation_attempts",
                "between 1 and 10 attempts",
                f.allocation_attempts.to_string(),
            ));
        }
        if !f.servers.is_empty() {
            check_servers(&self.server_id()?, &f.servers).map_err(|e| self.refused_server(e))?;
        }
        let name = f.directory.name();
        let since = || format!("since fleet.directory is \"{name}\"");
        if f.directory == DirectoryKind::None {
            return Ok(());
        }
        if self.store.url.is_embedded() {
            return Err(self.invalid(
                "fleet.directory",
                format!(
                    "\"none\" with an embedded store: a fleet's servers share one PostgreSQL \
                     store, so store.url must be postgres://... (from {})",
                    self.source_of("store.url")
                ),
                format!("\"{name}\" with store.url {}", self.store.url),
            ));
        }
        if f.ticket_key.is_none() {
            return Err(self.invalid(
                "fleet.ticket_key",
                format!(
                    "a key of at least {} bytes (or GATEHOUSE_TICKET_KEY), {}: travel tickets \
                     are signed with it",
                    FleetKey::MIN_LEN,
                    since()
                ),
                "nothing",
            ));
        }
        match f.directory {
            DirectoryKind::Agones => {
                let missing = [
                    ("fleet.allocator_url", f.allocator_url.is_none(), "an https:// URL"),
                    ("fleet.allocator_certificate", f.allocator_certificate.is_none(), "a path"),
                    ("fleet.allocator_private_key", f.allocator_private_key.is_none(), "a path"),
                    ("fleet.allocator_ca", f.allocator_ca.is_none(), "a path"),
                ];
                match missing.iter().find(|(_, unset, _)| *unset) {
                    Some((key, _, what)) => {
                        Err(self.invalid(key, format!("{what}, {}", since()), "nothing"))
                    }
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }

    /// A [`ConfigError::Invalid`] for `key` inside a key's value (a list's entry
    /// `fleet.servers[1]`, a table's key), blaming wherever that value came from.
    pub fn invalid_nested(&self, key: &str, expected: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.to_owned(),
            origin: self.sources.of_nested(key),
            expected: expected.into(),
            found: String::new(),
        }
    }

    /// A refused `[[fleet.servers]]` entry, naming its place and where it was written.
    pub fn refused_server(&self, e: ServerEntryError) -> ConfigError {
        let ServerEntryError { index, server, why } = e;
        self.invalid_nested(&format!("fleet.servers[{index}]"), format!("id {server:?}: {why}"))
    }

    /// `[store]` checks.
    fn check_store(&self) -> Result<(), ConfigError> {
        let s = &self.store;
        let name_ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-');
        if s.session.is_empty() || s.session.len() > 64 || !s.session.chars().all(name_ok) {
            return Err(self.invalid(
                "store.session",
                "1 to 64 ASCII letters, digits or `_ . : -`",
                format!("{:?}", s.session),
            ));
        }
        if s.load_timeout.is_zero() {
            return Err(self.invalid("store.load_timeout_ms", "more than 0 ms", "0 ms"));
        }
        if s.save_retry.is_zero() {
            return Err(self.invalid("store.save_retry_ms", "more than 0 ms", "0 ms"));
        }
        if s.save_attempts == 0 || s.save_attempts > 100 {
            return Err(self.invalid(
                "store.save_attempts",
                "between 1 and 100 attempts",
                s.save_attempts.to_string(),
            ));
        }
        if s.drain_timeout.is_zero() {
            return Err(self.invalid("store.drain_timeout_ms", "more than 0 ms", "0 ms"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ServerConfig, ConfigError> {
        ServerConfig::parse(Path::new("conf/server.toml"), text)
    }

    /// docs/spec/travel.md V12: a server that only receives travellers (its world has no
    /// remote node) is accepted with the fleet key and no directory (`none`, or `static` with
    /// no entry); it offers the peer link and checks tickets.
    #[test]
    fn a_destination_only_server_needs_the_fleet_key_and_no_directory() {
        let base = include_str!("../../../tests/worlds/core.toml");
        let local = gatehouse_game::world::WorldMap::from_toml(base).unwrap();
        for directory in ["", "directory = \"none\"\n", "directory = \"static\"\n"] {
            let c = parse(&format!("{PG}[fleet]\n{directory}{KEY}")).unwrap();
            c.check_world(&local).unwrap();
            assert!(crate::fleet::offers_peer_link(&c), "{directory:?}");
            assert!(c.fleet.servers.is_empty());
        }
    }

    /// docs/spec/travel.md V17: a server in a fleet (the fleet key, whatever its directory)
    /// names itself as its saves' holder; one without the key names none.
    #[test]
    fn a_server_with_the_fleet_key_names_itself_holder_whatever_its_directory() {
        for directory in ["", "directory = \"none\"\n"] {
            let keyed = parse(&format!("{PG}[fleet]\nserver_id = \"isle-1\"\n{directory}{KEY}"));
            let holder = keyed.unwrap().fleet_server().unwrap();
            assert_eq!(holder.map(|s| s.to_string()), Some("isle-1".into()), "{directory:?}");
        }
        let alone = parse(&format!("{PG}[fleet]\nserver_id = \"isle-1\"\n")).unwrap();
        assert_eq!(alone.fleet_server().unwrap(), None);
    }

    /// docs/spec/travel.md V12: a world with a remote node still needs a directory, the fleet
    /// key or not: refused naming `fleet.directory` and where its value came from.
    #[test]
    fn a_world_with_a_remote_node_and_no_directory_is_refused_naming_the_key_and_its_origin() {
        let base = include_str!("../../../tests/worlds/core.toml");
        let remote = format!("{base}\n[[node]]\nid = \"isle\"\nremote = true\n");
        let world = gatehouse_game::world::WorldMap::from_toml(&remote).unwrap();
        let keyed = parse(&format!("{PG}[fleet]\n{KEY}")).unwrap();
        let err = keyed.check_world(&world).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.directory"),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.starts_with("invalid fleet.directory from the default"), "{text}");
        assert!(text.contains("isle is remote"), "{text}");
        let written = parse(&format!("{PG}[fleet]\ndirectory = \"none\"\n{KEY}")).unwrap();
        let text = written.check_world(&world).unwrap_err().to_string();
        assert!(text.starts_with("invalid fleet.directory from conf/server.toml:4"), "{text}");
    }

    /// docs/spec/travel.md V12: a world with a remote node starts only in a fleet.
    #[test]
    fn a_world_with_a_remote_node_needs_a_fleet_directory() {
        let base = include_str!("../../../tests/worlds/core.toml");
        let remote = format!("{base}\n[[node]]\nid = \"isle\"\nremote = true\n");
        let world = gatehouse_game::world::WorldMap::from_toml(&remote).unwrap();
        let err = parse("").unwrap().check_world(&world).unwrap_err().to_string();
        assert!(err.starts_with("invalid fleet.directory"), "{err}");
        assert!(err.contains("isle is remote"), "{err}");
        let local = gatehouse_game::world::WorldMap::from_toml(base).unwrap();
        parse("").unwrap().check_world(&local).unwrap();
        let mut fleet = parse("").unwrap();
        fleet.fleet.directory = DirectoryKind::Static;
        let err = fleet.check_world(&world).unwrap_err().to_string();
        assert!(err.starts_with("invalid fleet.servers"), "no entry hosts isle: {err}");
        fleet.fleet.servers = vec![StaticServer {
            id: "isle-1".into(),
            address: "127.0.0.1:7777".into(),
            server_name: "localhost".into(),
            certificate_sha256: None,
            nodes: vec!["isle".into()],
        }];
        fleet.check_world(&world).unwrap();
        // This server's own entry is skipped by the directory: it hosts no remote node.
        fleet.fleet.server_id = Some("isle-1".into());
        let err = fleet.check_world(&world).unwrap_err().to_string();
        assert!(err.contains("an entry of another server"), "its own entry only: {err}");
    }

    #[test]
    fn an_empty_file_gives_the_defaults() {
        let c = parse("").unwrap();
        assert_eq!(c.network.idle_timeout, Duration::from_secs(10));
        assert_eq!(c.game.world, Path::new("conf/world.toml"));
        assert!(c.auth.is_development_key());
    }

    #[test]
    fn an_unknown_key_is_named() {
        let err = parse("[network]\nidle_timeout = 5\n").unwrap_err().to_string();
        assert!(err.contains("idle_timeout"), "{err}");
        assert!(err.contains("conf/server.toml"), "{err}");
    }

    #[test]
    fn a_wrong_type_is_named_with_its_key() {
        let err = parse("[network]\nmax_players = \"many\"\n").unwrap_err().to_string();
        assert!(err.contains("max_players"), "{err}");
    }

    #[test]
    fn a_wrong_type_names_its_dotted_key_line_and_plain_words_on_one_line() {
        let err = parse("# gatehouse\n[network]\nmax_players = \"many\"\n").unwrap_err();
        let text = err.to_string();
        assert_eq!(
            text,
            "invalid network.max_players from conf/server.toml:3: expected a whole number (0 or \
             more), found the string \"many\""
        );
        assert!(!text.contains('\n') && !text.contains("usize"), "{text}");
    }

    #[test]
    fn a_value_its_parser_refuses_says_what_was_expected_and_found() {
        let err = parse("[network]\nbind = \"xyz\"\n").unwrap_err().to_string();
        assert_eq!(
            err,
            "invalid network.bind from conf/server.toml:2: expected an address such as \
             0.0.0.0:7777 or 127.0.0.1:0, found \"xyz\""
        );
        let err = parse("[network]\nmax_players = 99999999999999999999999\n").unwrap_err();
        assert!(err.to_string().ends_with("found the number 99999999999999999999999"), "{err}");
    }

    #[test]
    fn a_value_refused_by_a_check_is_blamed_on_its_line_in_the_file() {
        let err = parse("[network]\n\nmax_players = 0\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid network.max_players from conf/server.toml:3: expected between 1 and 65536 \
             players, found 0"
        );
        parse("[network]\nmax_players = 65536\n").expect("the most one teleport can name");
        let err = parse("[network]\nmax_players = 65537\n").unwrap_err().to_string();
        assert!(err.ends_with("expected between 1 and 65536 players, found 65537"), "{err}");
    }

    #[test]
    fn a_value_set_by_an_override_is_blamed_on_the_override() {
        let mut c = parse("[network]\nmax_players = 8\n").unwrap();
        c.network.max_players = 0;
        c.set_source("network.max_players", ValueSource::Env { var: "GATEHOUSE_X".into() });
        let err = c.check().unwrap_err().to_string();
        assert!(err.contains("from environment variable GATEHOUSE_X"), "{err}");
        c.set_source("network.max_players", ValueSource::Flag { flag: "--x".into() });
        let err = c.check().unwrap_err().to_string();
        assert!(err.contains("from flag --x"), "{err}");
    }

    #[test]
    fn an_exposed_admin_endpoint_blames_where_its_bind_came_from() {
        let mut c = parse("").unwrap();
        c.admin.bind = "0.0.0.0:0".parse().unwrap();
        c.set_source("admin.bind", ValueSource::Flag { flag: "--admin-bind".into() });
        let err = c.check_admin_exposure().unwrap_err().to_string();
        assert!(err.starts_with("invalid admin.bind from flag --admin-bind: expected"), "{err}");
        assert!(err.contains("found 0.0.0.0:0 without admin.token"), "{err}");
        assert!(!err.contains("server.toml"), "{err}");
    }

    #[test]
    fn the_development_key_cannot_serve_beyond_loopback() {
        let mut c = parse("").unwrap();
        assert!(c.check_key_exposure().is_ok(), "loopback by default");
        c.network.bind = "0.0.0.0:7777".parse().unwrap();
        c.set_source("network.bind", ValueSource::Env { var: "GATEHOUSE_BIND".into() });
        let err = c.check_key_exposure().unwrap_err().to_string();
        assert!(err.starts_with("invalid auth.token_key"), "{err}");
        assert!(err.contains("network.bind 0.0.0.0:7777 is not loopback"), "{err}");
        assert!(err.contains("auth.insecure_development_key"), "{err}");
        assert!(err.contains("found the shipped development key"), "{err}");
        assert!(!err.contains(DEV_TOKEN_KEY), "the key is never printed: {err}");
        c.network.bind = "[::]:7777".parse().unwrap();
        assert!(c.check_key_exposure().is_err(), "nor on IPv6's any address");
        // The operator's own key, or an explicit insecure setting, starts.
        c.auth.token_key = "an-operator-key-of-enough-bytes".into();
        assert!(c.check_key_exposure().is_ok());
        let c =
            parse("[network]\nbind = \"0.0.0.0:7777\"\n[auth]\ninsecure_development_key = true\n")
                .unwrap();
        assert!(c.check_key_exposure().is_ok());
    }

    #[test]
    fn the_development_key_and_certificate_beyond_loopback_are_warned_of() {
        let c = parse("").unwrap();
        let warnings = c.exposure_warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(!warnings[0].contains("INSECURE"), "{warnings:?}");
        let c =
            parse("[network]\nbind = \"0.0.0.0:7777\"\n[auth]\ninsecure_development_key = true\n")
                .unwrap();
        let warnings = c.exposure_warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("INSECURE"), "{warnings:?}");
        assert!(warnings[1].contains("no tls.certificate"), "{warnings:?}");
        // One line of plain prose: no run of spaces from a broken line continuation.
        assert!(warnings.iter().all(|w| !w.contains("  ")), "{warnings:?}");
        let c = parse(
            "[network]\nbind = \"0.0.0.0:7777\"\n[auth]\ntoken_key = \"an-operator-key-of-enough-bytes\"\n\
             [tls]\ncertificate = \"c.pem\"\nprivate_key = \"k.pem\"\n",
        )
        .unwrap();
        assert!(c.exposure_warnings().is_empty());
    }

    #[test]
    fn token_limits_and_the_login_rate_are_read_and_checked() {
        let c = parse(
            "[auth]\nmax_token_lifetime_s = 600\nclock_skew_s = 5\nlogin_burst = 2\nlogin_interval_ms = 500\n",
        )
        .unwrap();
        assert_eq!(c.auth.token_limits(), TokenLimits { max_lifetime_s: 600, clock_skew_s: 5 });
        assert_eq!((c.auth.login_burst, c.auth.login_interval), (2, Duration::from_millis(500)));
        for (toml, key) in [
            ("max_token_lifetime_s = 0", "auth.max_token_lifetime_s"),
            ("clock_skew_s = 3601", "auth.clock_skew_s"),
            ("login_burst = 0", "auth.login_burst"),
            ("login_interval_ms = 0", "auth.login_interval_ms"),
        ] {
            let err = parse(&format!("[auth]\n{toml}\n")).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key: k, .. } if k == key),
                "{toml}: {err}"
            );
        }
        assert_eq!(parse("").unwrap().auth.token_limits(), TokenLimits::DEFAULT);
    }

    /// Found by the `config_toml` fuzz target: a quoted key holding `\r` made a refusal of
    /// two lines.
    #[test]
    fn a_key_with_a_control_character_is_refused_on_one_line() {
        let err = parse("[\"in\\r$=mg6\u{feff}\"]\n").unwrap_err().to_string();
        assert!(!err.contains('\r') && !err.contains('\n'), "{err:?}");
        assert!(err.contains("in\\r$=mg6"), "{err}");
    }

    #[test]
    fn a_refused_value_is_one_json_object_with_its_parts() {
        let err = parse("[store]\nsave_attempts = 0\n").unwrap_err();
        let json = err.to_json();
        assert_eq!(json["key"], "store.save_attempts");
        assert_eq!(json["origin"]["kind"], "file");
        assert_eq!(json["origin"]["line"], 2);
        assert_eq!(json["expected"], "between 1 and 100 attempts");
        assert_eq!(json["found"], "0");
        assert_eq!(json["message"], err.to_string());
    }

    #[test]
    fn a_file_that_is_not_toml_names_its_line() {
        let err = parse("[network]\nmax_players = = 3\n").unwrap_err().to_string();
        assert!(err.starts_with("invalid conf/server.toml:2: not TOML"), "{err}");
        assert!(!err.contains('\n'), "{err}");
    }

    #[test]
    fn keep_alive_must_be_below_idle_timeout() {
        let err = parse("[network]\nidle_timeout_ms = 1000\nkeep_alive_ms = 1000\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "network.keep_alive_ms"),
            "{err}"
        );
    }

    #[test]
    fn a_duration_beyond_one_day_is_refused_naming_its_key() {
        let err = parse("[game]\nspawn_settle_timeout_ms = 18446744073709551615\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("spawn_settle_timeout_ms") && err.contains("one day"), "{err}");
        let err = parse("[game]\nclient_response_timeout_ms = 86400001\n").unwrap_err().to_string();
        assert!(
            err.contains("client_response_timeout_ms")
                && err.contains("expected at most 86400000 ms (one day), found 86400001"),
            "{err}"
        );
    }

    #[test]
    fn a_zero_response_timeout_is_refused_naming_its_key() {
        let err = parse("[game]\nclient_response_timeout_ms = 0\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "game.client_response_timeout_ms"),
            "{err}"
        );
    }

    #[test]
    fn zero_max_failed_transitions_is_refused_naming_its_key() {
        assert_eq!(parse("").map(|c| c.game.max_failed_transitions).ok(), Some(3));
        let err = parse("[game]\nmax_failed_transitions = 0\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "game.max_failed_transitions"),
            "{err}"
        );
    }

    #[test]
    fn the_crowd_floor_is_off_unless_set_and_then_read_in_ms() {
        assert_eq!(parse("").map(|c| c.game.client_response_crowd_floor).ok(), Some(None));
        let config = parse("[game]\nclient_response_crowd_floor_ms = 30\n");
        assert_eq!(
            config.map(|c| c.game.client_response_crowd_floor).ok(),
            Some(Some(Duration::from_millis(30)))
        );
    }

    #[test]
    fn a_crowd_floor_above_the_response_timeout_or_zero_is_refused_naming_its_key() {
        let toml =
            "[game]\nclient_response_timeout_ms = 100\nclient_response_crowd_floor_ms = 101\n";
        let err = parse(toml).unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "game.client_response_crowd_floor_ms"),
            "{err}"
        );
        assert!(err.to_string().contains("101 ms"), "{err}");
        let at_most =
            "[game]\nclient_response_timeout_ms = 100\nclient_response_crowd_floor_ms = 100\n";
        assert!(parse(at_most).is_ok(), "a floor equal to the timeout is allowed");
        let err = parse("[game]\nclient_response_crowd_floor_ms = 0\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "game.client_response_crowd_floor_ms"),
            "{err}"
        );
    }

    #[test]
    fn certificate_without_key_is_refused() {
        let err = parse("[tls]\ncertificate = \"c.pem\"\n").unwrap_err();
        assert!(matches!(err, ConfigError::Invalid { ref key, .. } if key == "tls.private_key"));
    }

    #[test]
    fn the_shipped_config_states_the_store_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/server.toml");
        let shipped = ServerConfig::load(&path).unwrap().store;
        let defaults = StoreConfig::default();
        assert_eq!(shipped.url, defaults.url);
        assert_eq!(shipped.session, defaults.session);
        assert_eq!(shipped.load_timeout, defaults.load_timeout);
        assert_eq!(shipped.save_retry, defaults.save_retry);
        assert_eq!(shipped.save_attempts, defaults.save_attempts);
        assert_eq!(shipped.drain_timeout, defaults.drain_timeout);
    }

    #[test]
    fn the_store_defaults_to_the_embedded_file_in_the_data_dir() {
        let c = parse("").unwrap();
        assert!(c.store.url.is_embedded());
        assert_eq!(c.store.url.embedded_path(&c.data_dir), Some(PathBuf::from("data/saves.db")));
        assert_eq!(c.store.session, "main");
        assert_eq!(c.store.load_timeout, Duration::from_secs(5));
        assert_eq!(c.store.save_retry, Duration::from_millis(500));
        assert_eq!(c.store.save_attempts, 5);
        assert_eq!(c.store.drain_timeout, Duration::from_secs(5));
    }

    #[test]
    fn a_postgres_store_url_parses_and_never_shows_its_password() {
        let c = parse("[store]\nurl = \"postgres://gate:hunter2@127.0.0.1:5432/saves\"\n").unwrap();
        assert!(!c.store.url.is_embedded());
        assert!(!format!("{c:?}").contains("hunter2"));
    }

    #[test]
    fn a_bad_store_url_is_named() {
        let err = parse("[store]\nurl = \"mysql://h/db\"\n").unwrap_err().to_string();
        assert!(err.contains("url") && err.contains("sqlite:PATH"), "{err}");
    }

    /// 1 to 10 datagrams per send (quinn's own most), 4 by default.
    #[test]
    fn gso_segments_are_between_1_and_10() {
        assert_eq!(parse("").unwrap().network.gso_segments, 4);
        for good in [1, 10] {
            let text = format!("[network]\ngso_segments = {good}\n");
            assert_eq!(parse(&text).unwrap().network.gso_segments, good);
        }
        for bad in [0, 11] {
            let err = parse(&format!("[network]\ngso_segments = {bad}\n")).unwrap_err();
            assert!(
                matches!(err, ConfigError::Invalid { ref key, .. } if key == "network.gso_segments"),
                "{err}"
            );
        }
    }

    /// The replication interval is 0 (off) to 1,000 ms, 50 by default (docs/protocol.md 4.4).
    #[test]
    fn the_replication_interval_is_at_most_a_second() {
        assert_eq!(parse("").unwrap().network.replication_interval, Duration::from_millis(50));
        let off = parse("[network]\nreplication_interval_ms = 0\n").unwrap();
        assert_eq!(off.network.replication_interval, Duration::ZERO);
        let most = parse("[network]\nreplication_interval_ms = 1000\n").unwrap();
        assert_eq!(most.network.replication_interval, MAX_REPLICATION_INTERVAL);
        let err = parse("[network]\nreplication_interval_ms = 1001\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "network.replication_interval_ms"),
            "{err}"
        );
        assert!(err.to_string().contains("1001 ms"), "{err}");
    }

    #[test]
    fn store_timings_are_checked_by_key() {
        for (text, key) in [
            ("[store]\nsave_attempts = 0\n", "store.save_attempts"),
            ("[store]\nload_timeout_ms = 0\n", "store.load_timeout_ms"),
            ("[store]\nsave_retry_ms = 0\n", "store.save_retry_ms"),
            ("[store]\ndrain_timeout_ms = 0\n", "store.drain_timeout_ms"),
            ("[store]\nsession = \"\"\n", "store.session"),
            ("[store]\nsession = \"a b\"\n", "store.session"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(
                matches!(err, ConfigError::Invalid { key: ref k, .. } if k == key),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn an_admin_endpoint_beyond_loopback_needs_a_token() {
        let exposed = parse("[admin]\nbind = \"0.0.0.0:7778\"\n").unwrap().admin;
        assert!(exposed.is_exposed());
        let why = exposed.check_exposure().unwrap_err();
        assert!(why.contains("admin.token") && why.contains("GATEHOUSE_ADMIN_TOKEN"), "{why}");
        let with_token =
            parse("[admin]\nbind = \"0.0.0.0:7778\"\ntoken = \"0123456789abcdef-soak\"\n").unwrap();
        assert_eq!(with_token.admin.check_exposure(), Ok(()));
        let loopback = parse("").unwrap().admin;
        assert!(!loopback.is_exposed() && loopback.check_exposure().is_ok());
        let off = parse("[admin]\nenabled = false\nbind = \"0.0.0.0:7778\"\n").unwrap().admin;
        assert!(off.check_exposure().is_ok(), "a disabled endpoint exposes nothing");
    }

    #[test]
    fn a_short_admin_token_is_refused_naming_its_key_without_quoting_it() {
        let err = parse("[admin]\ntoken = \"hunter2\"\n").unwrap_err().to_string();
        assert!(err.contains("admin.token") && err.contains("at least 16"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn the_debug_output_never_shows_the_admin_token() {
        let c = parse("[admin]\ntoken = \"admin-secret-token-1234\"\n").unwrap();
        assert!(!format!("{c:?}").contains("admin-secret"));
    }

    /// The orchestrator key, and its refusal in a build without it.
    #[test]
    fn the_orchestrator_defaults_to_none_and_agones_needs_its_feature() {
        let c = parse("").unwrap();
        assert_eq!(c.fleet.orchestrator, OrchestratorKind::None);
        assert_eq!(c.fleet.health_interval, Duration::from_secs(2));
        let agones = parse("[fleet]\norchestrator = \"agones\"\nagones_sdk_port = 9400\n");
        if cfg!(feature = "agones") {
            let fleet = agones.unwrap().fleet;
            assert_eq!(
                (fleet.orchestrator, fleet.agones_sdk_port),
                (OrchestratorKind::Agones, Some(9400))
            );
        } else {
            let err = agones.unwrap_err().to_string();
            assert!(
                err.contains("fleet.orchestrator") && err.contains("--features agones"),
                "{err}"
            );
        }
        let err = parse("[fleet]\nhealth_interval_ms = 0\n").unwrap_err();
        assert!(
            matches!(err, ConfigError::Invalid { ref key, .. } if key == "fleet.health_interval_ms")
        );
        let err = parse("[fleet]\norchestrator = \"kubernetes\"\n").unwrap_err().to_string();
        assert!(err.contains("orchestrator") && err.contains("agones"), "{err}");
    }

    /// The seat hold, the ticket keys and the directory's keys, by default: nothing travels.
    #[test]
    fn the_travel_keys_default_to_no_directory() {
        let c = parse("").unwrap();
        let f = &c.fleet;
        assert_eq!(f.server_id, None);
        assert_eq!(c.server_id().unwrap().as_str(), "main", "store.session by default");
        assert_eq!(f.seat_hold, Duration::from_secs(10));
        assert!(f.ticket_key.is_none());
        assert_eq!(f.ticket_lifetime_s, 30);
        assert_eq!(f.directory, DirectoryKind::None);
        assert!(f.servers.is_empty() && f.allocator_labels.is_empty());
        assert_eq!(f.allocator_url, None);
        assert_eq!(f.allocator_namespace, "default");
        assert_eq!((f.allocator_certificate.clone(), f.allocator_ca.clone()), (None, None));
        assert_eq!(f.allocator_private_key, None);
        assert_eq!(f.allocator_timeout, Duration::from_secs(3));
        assert_eq!(f.allocation_attempts, 3);
        assert_eq!(f.peer_timeout, Duration::from_secs(2));
        assert_eq!(f.resolve_timeout, Duration::from_secs(5));
        assert_eq!(f.peer_idle_timeout, Duration::from_secs(3));
        assert!(crate::fleet::AllocatorSettings::from_config(f).is_none());
        assert!(!crate::fleet::offers_peer_link(&c), "no directory: no peer link");
        let rules = super::super::game_rules(&c.game, &c.auth, &c.network, &c.fleet);
        assert_eq!(rules.seat_hold, Duration::from_secs(10));
        let c = parse("[fleet]\nseat_hold_ms = \"2500ms\"\nserver_id = \"hub-1\"\n").unwrap();
        let rules = super::super::game_rules(&c.game, &c.auth, &c.network, &c.fleet);
        assert_eq!(rules.seat_hold, Duration::from_millis(2500), "game_rules reads the key");
        assert_eq!(c.server_id().unwrap().as_str(), "hub-1");
    }

    /// Each travel key's range: its bounds pass, one beyond each is refused naming the key.
    #[test]
    fn each_travel_key_is_held_to_its_range() {
        // The peer timeout's bounds with room for them in the resolve timeout.
        let roomy = "resolve_timeout_ms = 120000\n";
        for (key, good, bad, beside) in [
            ("seat_hold_ms", [1000, 120_000], [999, 120_001], ""),
            ("ticket_lifetime_s", [5, 120], [4, 121], ""),
            ("allocator_timeout_ms", [100, 60_000], [99, 60_001], ""),
            ("allocation_attempts", [1, 10], [0, 11], ""),
            ("peer_timeout_ms", [100, 60_000], [99, 60_001], roomy),
            ("resolve_timeout_ms", [1_000, 120_000], [999, 120_001], "peer_timeout_ms = 100\n"),
            ("peer_idle_timeout_ms", [2_000, 60_000], [1_999, 60_001], ""),
        ] {
            for value in good {
                parse(&format!("[fleet]\n{key} = {value}\n{beside}")).unwrap();
            }
            for value in bad {
                let err = parse(&format!("[fleet]\n\n{key} = {value}\n{beside}")).unwrap_err();
                let want = format!("fleet.{key}");
                assert!(
                    matches!(&err, ConfigError::Invalid { key: k, .. } if *k == want),
                    "{key} = {value}: {err}"
                );
                let text = err.to_string();
                assert!(text.contains("conf/server.toml:3") && text.contains("between"), "{text}");
                assert!(text.contains(&value.to_string()), "{text}");
            }
        }
    }

    /// `fleet.resolve_timeout_ms` holds one ask at least: below `fleet.peer_timeout_ms` it is
    /// refused, naming both keys and where the other came from.
    #[test]
    fn a_resolve_timeout_below_the_peer_timeout_is_refused_naming_both() {
        let text = "[fleet]\npeer_timeout_ms = 3000\nresolve_timeout_ms = 2500\n";
        let err = parse(text).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.resolve_timeout_ms"),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("conf/server.toml:3"), "blamed on its own line: {text}");
        assert!(
            text.contains("at least fleet.peer_timeout_ms (3000 ms, from conf/server.toml:2)"),
            "{text}"
        );
        assert!(text.contains("found 2500 ms"), "{text}");
        parse("[fleet]\npeer_timeout_ms = 3000\nresolve_timeout_ms = 3000\n").unwrap();
    }

    /// The peer link is offered in a fleet only: a directory and the fleet key
    /// (docs/spec/travel.md V14).
    #[test]
    fn the_peer_link_is_offered_only_in_a_fleet() {
        let text = format!("{PG}[fleet]\ndirectory = \"static\"\n{KEY}{SERVER}");
        let c = parse(&text).unwrap();
        assert!(crate::fleet::offers_peer_link(&c));
        let settings = crate::fleet::PeerSettings::from_config(&c, [4; 32]).unwrap().unwrap();
        assert_eq!(settings.certificate_sha256, Some([4; 32]));
        assert_eq!(settings.peer_idle_timeout, Duration::from_secs(3));
        let c = parse(&format!("{PG}[fleet]\n{KEY}")).unwrap();
        assert!(crate::fleet::offers_peer_link(&c), "a key alone: a destination only");
        assert!(crate::fleet::PeerSettings::from_config(&c, [4; 32]).unwrap().is_some());
        let c = parse(&format!("{PG}[fleet]\ndirectory = \"static\"\n{SERVER}")).unwrap_err();
        assert!(
            matches!(&c, ConfigError::Invalid { key, .. } if key == "fleet.ticket_key"),
            "a directory without the key: {c}"
        );
        let c = parse("").unwrap();
        assert!(!crate::fleet::offers_peer_link(&c), "no key: no fleet");
        assert!(crate::fleet::PeerSettings::from_config(&c, [4; 32]).unwrap().is_none());
    }

    #[test]
    fn a_server_id_that_is_not_one_is_refused_naming_its_key() {
        for bad in ["a b", "", "hub/1"] {
            let err = parse(&format!("[fleet]\nserver_id = {bad:?}\n")).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.server_id"),
                "{bad:?}: {err}"
            );
            assert!(err.to_string().contains("conf/server.toml:2"), "{err}");
        }
        let long = "s".repeat(65);
        let err = parse(&format!("[fleet]\nserver_id = \"{long}\"\n")).unwrap_err();
        assert!(err.to_string().contains("fleet.server_id"), "{err}");
    }

    /// `fleet.ticket_key`: 32 bytes at least, never the issuer's key, never quoted back.
    #[test]
    fn a_ticket_key_short_or_equal_to_the_token_key_is_refused() {
        let key = "k".repeat(32);
        let c = parse(&format!("[fleet]\nticket_key = \"{key}\"\n")).unwrap();
        assert_eq!(c.fleet.ticket_key.as_ref().map(FleetKey::as_bytes), Some(key.as_bytes()));
        assert!(!format!("{c:?}").contains(&key), "Debug never shows it");
        let short = "short-ticket-secret-31-bytes-xx";
        let err = parse(&format!("[fleet]\nticket_key = \"{short}\"\n")).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.ticket_key"),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("at least 32 bytes, found 31 bytes"), "{text}");
        assert!(!text.contains("short-ticket"), "{text}");
        let same = "the-issuers-own-key-of-32-bytes-or-more";
        let err =
            parse(&format!("[auth]\ntoken_key = \"{same}\"\n[fleet]\nticket_key = \"{same}\"\n"))
                .unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.ticket_key"),
            "{err}"
        );
        let text = err.to_string();
        assert!(text.contains("auth.token_key") && text.contains("mint travel tickets"), "{text}");
        assert!(text.contains("conf/server.toml:4") && !text.contains(same), "{text}");
        // The shipped development key is the token key by default: it cannot be the fleet's.
        let err = parse(&format!("[fleet]\nticket_key = \"{DEV_TOKEN_KEY}\"\n")).unwrap_err();
        assert!(err.to_string().contains("the same key as auth.token_key"), "{err}");
    }

    const PG: &str = "[store]\nurl = \"postgres://gate:pw@127.0.0.1/saves\"\n";
    const KEY: &str = "ticket_key = \"a-fleet-key-of-thirty-two-bytes-0\"\n";
    const SERVER: &str = "[[fleet.servers]]\nid = \"dungeon-1\"\naddress = \"10.0.0.2:7777\"\nserver_name = \"d\"\nnodes = [\"crypt\"]\n";

    /// A directory needs a shared PostgreSQL store and a ticket key, whichever it is.
    #[test]
    fn a_directory_needs_a_postgres_store_and_a_ticket_key() {
        for directory in ["static", "agones"] {
            let err = parse(&format!("[fleet]\ndirectory = \"{directory}\"\n{KEY}")).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.directory"),
                "{err}"
            );
            let text = err.to_string();
            assert!(text.contains("conf/server.toml:2"), "{text}");
            assert!(text.contains("store.url") && text.contains("postgres://"), "{text}");
            assert!(text.contains("one PostgreSQL store"), "{text}");
            let err = parse(&format!("{PG}[fleet]\ndirectory = \"{directory}\"\n")).unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.ticket_key"),
                "{err}"
            );
            assert!(err.to_string().contains(&format!("fleet.directory is \"{directory}\"")));
        }
        let err = parse("[fleet]\ndirectory = \"dns\"\n").unwrap_err().to_string();
        assert!(err.contains("\"none\", \"static\", \"agones\"") && err.contains("dns"), "{err}");
        // No directory needs neither.
        parse("[fleet]\ndirectory = \"none\"\n").unwrap();
    }

    #[test]
    fn a_static_directory_reads_its_servers() {
        let text = format!("{PG}[fleet]\ndirectory = \"static\"\n{KEY}");
        let c = parse(&format!("{text}{SERVER}")).unwrap();
        assert_eq!(c.fleet.servers.len(), 1);
        assert_eq!(c.fleet.servers[0].nodes, ["crypt"]);
        assert_eq!(c.fleet.directory, DirectoryKind::Static);
    }

    /// A bad `[[fleet.servers]]` entry is refused naming its place and its line, whatever the
    /// directory.
    #[test]
    fn a_bad_server_entry_is_refused_naming_its_place() {
        let twice = format!("{PG}[fleet]\ndirectory = \"static\"\n{KEY}{SERVER}{SERVER}");
        let err = parse(&twice).unwrap_err();
        assert!(
            matches!(&err, ConfigError::Invalid { key, .. } if key == "fleet.servers[1]"),
            "{err}"
        );
        assert_eq!(
            err.to_string(),
            "invalid fleet.servers[1] from conf/server.toml:11: id \"dungeon-1\": listed twice"
        );
        let bad = SERVER.replace("10.0.0.2:7777", "10.0.0.2");
        let err = parse(&format!("[fleet]\n{bad}")).unwrap_err().to_string();
        assert!(err.starts_with("invalid fleet.servers[0] from conf/server.toml:"), "{err}");
        assert!(err.contains("address:"), "{err}");
        let err = parse(&format!("[fleet]\n{}", SERVER.replace("nodes = [\"crypt\"]\n", "")));
        let err = err.unwrap_err().to_string();
        assert!(err.contains("fleet.servers[0].nodes") || err.contains("nodes"), "{err}");
        let err = parse(&format!("[fleet]\n{SERVER}port = 1\n")).unwrap_err().to_string();
        assert!(err.contains("port"), "an unknown key in an entry is named: {err}");
    }

    #[test]
    fn an_agones_directory_needs_its_allocator_keys() {
        let full = [
            "allocator_url = \"https://allocator.agones-system:443\"\n",
            "allocator_certificate = \"alloc/client.pem\"\n",
            "allocator_private_key = \"alloc/client.key\"\n",
            "allocator_ca = \"alloc/ca.pem\"\n",
        ];
        let head = format!("{PG}[fleet]\ndirectory = \"agones\"\n{KEY}");
        for (i, key) in
            ["allocator_url", "allocator_certificate", "allocator_private_key", "allocator_ca"]
                .iter()
                .enumerate()
        {
            let mut lines = full.to_vec();
            lines.remove(i);
            let err = parse(&format!("{head}{}", lines.concat())).unwrap_err();
            let want = format!("fleet.{key}");
            assert!(
                matches!(&err, ConfigError::Invalid { key: k, .. } if *k == want),
                "{key}: {err}"
            );
            assert!(err.to_string().contains("fleet.directory is \"agones\""), "{err}");
        }
        let text = format!(
            "{head}{}allocator_namespace = \"games\"\n[fleet.allocator_labels]\n\"agones.dev/fleet\" = \"crypt\"\n",
            full.concat()
        );
        let c = parse(&text).unwrap();
        let settings = crate::fleet::AllocatorSettings::from_config(&c.fleet).unwrap();
        assert_eq!(settings.url, "https://allocator.agones-system:443");
        assert_eq!(settings.namespace, "games");
        assert_eq!(settings.labels.get("agones.dev/fleet").map(String::as_str), Some("crypt"));
        // Paths from the file are beside it.
        assert_eq!(settings.certificate, Path::new("conf/alloc/client.pem"));
        assert_eq!(settings.private_key, Path::new("conf/alloc/client.key"));
        assert_eq!(settings.ca, Path::new("conf/alloc/ca.pem"));
        assert_eq!((settings.timeout, settings.attempts), (Duration::from_secs(3), 3));
    }

    #[test]
    fn the_debug_output_never_shows_the_token_key() {
        let c = parse("[auth]\ntoken_key = \"super-secret-key-1234\"\n").unwrap();
        assert!(!format!("{c:?}").contains("super-secret"));
    }
}

#[cfg(test)]
mod message_tests {
    use super::*;
    use crate::config::Overrides;

    /// `text` as `conf/server.toml` with `vars` as the environment, checked as at start.
    fn refused(text: &str, vars: &[(&str, &str)]) -> String {
        let env: Environment = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        let path = Path::new("conf/server.toml");
        let config = match ServerConfig::load_text(path, text, &Overrides::default(), &env) {
            Ok(config) => config,
            Err(e) => return e.to_string(),
        };
        match config.check_admin_exposure().and_then(|()| config.check_key_exposure()) {
            Ok(()) => panic!("accepted: {text} {vars:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// No refusal of the checks holds a run of spaces (a string continuation that kept the
    /// next line's indentation): one refusal per check, and the config module's sources read
    /// for a string literal with such a run.
    #[test]
    fn no_config_error_message_holds_two_spaces_in_a_row() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[("GATEHOUSE_NETWORK__BIND", "0.0.0.0:7777")]),
            ("", &[("GATEHOUSE_ADMIN__BIND", "0.0.0.0:7778")]),
            ("[network]\nidle_timeout_ms = 0\n", &[]),
            ("[network]\nkeep_alive_ms = 20000\n", &[]),
            ("[network]\nhello_timeout_ms = 0\n", &[]),
            ("[network]\nhandshake_timeout_ms = 0\n", &[]),
            ("[network]\nmax_players = 0\n", &[]),
            ("[network]\nmax_frame_len = 1\n", &[]),
            ("[network]\nudp_buffer_bytes = 1\n", &[]),
            ("[network]\nmax_pending_connections = 0\n", &[]),
            ("[network]\nhandshake_burst = 0\n", &[]),
            ("[network]\nhandshakes_per_ip_per_s = 0\n", &[]),
            ("[network]\nmessage_burst = 0\n", &[]),
            ("[network]\nmessage_rate_per_s = 0\n", &[]),
            ("[network]\nmax_pending_per_ip = 0\n", &[]),
            ("[network]\nsend_queue_frames = 0\n", &[]),
            ("[network]\ngso_segments = 11\n", &[]),
            ("[network]\nreplication_interval_ms = 2000\n", &[]),
            ("[network]\nstream_receive_window = 1\n", &[]),
            ("[network]\nconnection_receive_window = 4096\n", &[]),
            ("[tls]\ncertificate = \"c.pem\"\n", &[]),
            ("[admin]\nmax_connections = 0\n", &[]),
            ("[admin]\nheader_timeout_ms = 0\n", &[]),
            ("[admin]\ntoken = \"short\"\n", &[]),
            ("[auth]\nmax_token_lifetime_s = 0\n", &[]),
            ("[auth]\nclock_skew_s = 7200\n", &[]),
            ("[auth]\nlogin_burst = 0\n", &[]),
            ("[auth]\nlogin_interval_ms = 0\n", &[]),
            ("[auth]\ntoken_key = \"short\"\n", &[]),
            ("[auth]\nclock_skew_s = \"1500ms\"\n", &[]),
            ("[game]\nspawn_retry_ms = 0\n", &[]),
            ("[game]\nspawn_retry_ms = \"100us\"\n", &[]),
            ("[game]\nspawn_settle_timeout_ms = 0\n", &[]),
            ("[game]\nclient_ready_timeout_ms = 0\n", &[]),
            ("[game]\nclient_response_timeout_ms = 0\n", &[]),
            ("[game]\nclient_response_crowd_floor_ms = 0\n", &[]),
            ("[game]\ntransition_max_ms = 1\n", &[]),
            ("[game]\nmax_failed_transitions = 0\n", &[]),
            ("[fleet]\nhealth_interval_ms = 0\n", &[]),
            ("[fleet]\nsdk_timeout_ms = 0\n", &[]),
            ("[fleet]\nwhen_empty = 1\n", &[]),
            ("[fleet]\nagones_sdk_port = 70000\n", &[]),
            ("[store]\nsession = \"\"\n", &[]),
            ("[store]\nload_timeout_ms = 0\n", &[]),
            ("[store]\nsave_retry_ms = 0\n", &[]),
            ("[store]\nsave_attempts = 0\n", &[]),
            ("[store]\ndrain_timeout_ms = 0\n", &[]),
            ("[store]\nurl = \"mysql://u:p@h/db\"\n", &[]),
            ("[fleet]\nserver_id = \"a b\"\n", &[]),
            ("[fleet]\nseat_hold_ms = 1\n", &[]),
            ("[fleet]\nticket_lifetime_s = 1\n", &[]),
            ("[fleet]\nticket_key = \"short\"\n", &[]),
            ("", &[("GATEHOUSE_TICKET_KEY", DEV_TOKEN_KEY)]),
            ("[fleet]\ndirectory = \"static\"\n", &[]),
            ("[fleet]\nallocator_timeout_ms = 1\n", &[]),
            ("[fleet]\nallocation_attempts = 0\n", &[]),
            ("[fleet]\npeer_timeout_ms = 0\n", &[]),
            ("[fleet]\nresolve_timeout_ms = 1000\npeer_timeout_ms = 1500\n", &[]),
            ("[fleet]\npeer_idle_timeout_ms = 1000\n", &[]),
            (
                "[fleet]\nservers = [{ id = \"a\", address = \"h\", server_name = \"h\", nodes = [\"n\"] }]\n",
                &[],
            ),
        ];
        for (text, vars) in cases {
            let err = refused(text, vars);
            assert!(err.starts_with("invalid "), "{text}: {err}");
            assert!(!err.contains("  "), "two spaces in a row: {err}");
        }
        let sources = [
            include_str!("admin.rs"),
            include_str!("env.rs"),
            include_str!("mod.rs"),
            include_str!("overrides.rs"),
            include_str!("server.rs"),
            include_str!("source.rs"),
            include_str!("store_url.rs"),
            include_str!("world.rs"),
        ];
        let run = [" "; 3].concat();
        for line in sources.iter().flat_map(|text| text.lines()) {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            // A run of spaces inside a string literal: after a quote or a word, not indentation.
            let quoted = code.split('"').skip(1).step_by(2);
            for literal in quoted {
                assert!(!literal.contains(&run), "a run of spaces in a message: {line}");
            }
        }
    }

    /// A key that takes one of a few names says which, whatever type it was given.
    #[test]
    fn an_enum_key_of_the_wrong_type_lists_its_values() {
        let err = refused("", &[("GATEHOUSE_FLEET__WHEN_EMPTY", "1")]);
        assert!(err.contains("environment variable GATEHOUSE_FLEET__WHEN_EMPTY"), "{err}");
        assert!(err.contains("one of \"ready\", \"shutdown\", \"stay\""), "{err}");
        let err = refused("", &[("GATEHOUSE_FLEET__ALLOCATION", "true")]);
        assert!(err.contains("one of \"self\", \"matchmaker\""), "{err}");
        let err = refused("[fleet]\nwhen_empty = 1\n", &[]);
        assert!(err.contains("conf/server.toml:2") && err.contains("\"stay\""), "{err}");
        assert!(err.contains("found the number 1"), "{err}");
        let err = refused("[fleet]\nallocation = \"nobody\"\n", &[]);
        assert!(err.contains("\"matchmaker\"") && err.contains("nobody"), "{err}");
        let c = ServerConfig::parse(
            Path::new("s.toml"),
            "[fleet]\nwhen_empty = \"shutdown\"\nallocation = \"matchmaker\"\n",
        )
        .unwrap();
        assert_eq!(
            (c.fleet.when_empty, c.fleet.allocation),
            (WhenEmpty::Shutdown, Allocation::Matchmaker)
        );
        let shown = c.show();
        assert!(shown.contains("fleet.when_empty = \"shutdown\""), "{shown}");
    }

    /// `fleet.agones_sdk_port` is a port: 1 to 65535, and says so.
    #[test]
    fn the_agones_sdk_port_is_a_port_from_1_to_65535() {
        for value in ["70000", "0", "-1"] {
            let err = refused("", &[("GATEHOUSE_FLEET__AGONES_SDK_PORT", value)]);
            assert!(err.contains("expected a port, 1 to 65535, found"), "{value}: {err}");
        }
        let c = ServerConfig::parse(Path::new("s.toml"), "[fleet]\nagones_sdk_port = 65535\n");
        assert_eq!(c.unwrap().fleet.agones_sdk_port, Some(65535));
    }
}
