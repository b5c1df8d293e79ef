//! The driver against a quinn-proto client over an in-memory wire, on an explicit clock: every
//! datagram, timer and wake is stepped by the caller, as the driver's `select!` would step it.
//! The driver's tests use it, and so does the connection fuzz target (`net::fuzzing`).

// A harness: a setup that fails is a failed test or fuzz run, never a server's error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::OnceLock;

use bytes::BytesMut;
use gatehouse_protocol::token::{self, SessionClaims, TokenCheck, TokenKey, TokenLimits};
use gatehouse_protocol::{ClientMessage, FrameDecoder, PlayerId, ServerMessage};
use quinn::crypto::rustls::QuicClientConfig;
use quinn_proto::{ConnectionError, Dir, Event, StreamId, VarInt};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::*;
use crate::metrics::Metrics;
use crate::net::event::SendQueue;
use crate::net::tls::{self, ServerIdentity};

/// The server's address on the wire.
pub(crate) const SERVER: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4433);
/// The client's address on the wire.
pub(crate) const CLIENT: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 50_000);

/// Steps that settle without reaching quiet mean a wake that keeps itself awake: a bug.
pub(crate) const MAX_STEPS: usize = 10_000;

/// The server's socket: datagrams the test delivers, datagrams the driver sent.
#[derive(Default)]
pub(crate) struct MemWire {
    /// Datagrams for the driver, oldest first.
    pub(crate) inbox: VecDeque<Datagram>,
    /// Datagrams the driver sent, each its whole contents, for the client to take.
    pub(crate) sent: RefCell<Vec<Vec<u8>>>,
    /// Transmits the socket took.
    pub(crate) transmits: Cell<usize>,
    /// The socket refuses sends (`WouldBlock`) while set.
    pub(crate) full: Cell<bool>,
    /// Sends that fail next with another error than a full queue (an ICMP error, say).
    pub(crate) fail_next: Cell<usize>,
    /// Reads asked of it, whether or not a datagram waited.
    pub(crate) reads: usize,
}

impl Wire for MemWire {
    fn recv(&mut self, out: &mut Vec<Datagram>) -> io::Result<()> {
        self.reads += 1;
        if self.inbox.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        out.extend(self.inbox.drain(..));
        Ok(())
    }

    fn send(&self, transmit: &quinn_proto::Transmit, contents: &[u8]) -> io::Result<()> {
        if self.full.get() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if self.fail_next.get() > 0 {
            self.fail_next.set(self.fail_next.get() - 1);
            return Err(io::ErrorKind::ConnectionRefused.into());
        }
        let segment = transmit.segment_size.unwrap_or(contents.len()).max(1);
        self.sent.borrow_mut().extend(contents.chunks(segment).map(<[u8]>::to_vec));
        self.transmits.set(self.transmits.get() + 1);
        Ok(())
    }

    fn max_segments(&self) -> usize {
        1
    }
}

/// The client: its endpoint, its connection, its stream and what it read.
pub(crate) struct Client {
    /// The client's QUIC endpoint.
    pub(crate) endpoint: quinn_proto::Endpoint,
    /// The client's side of the connection.
    pub(crate) quic: quinn_proto::Connection,
    /// The bidirectional stream it opened, once it did.
    pub(crate) stream: Option<StreamId>,
    /// Whether it reads what the server writes.
    pub(crate) reading: bool,
    /// Cut off: no datagram reaches either side.
    pub(crate) cut: bool,
    /// The next datagrams to cross, either way, that are lost.
    pub(crate) lose_next: usize,
    /// Decodes what the server wrote.
    pub(crate) decoder: FrameDecoder,
    /// The messages the server wrote, in order.
    pub(crate) read: Vec<ServerMessage>,
    /// Why the connection was lost, once it was.
    pub(crate) lost: Option<ConnectionError>,
}

/// How a harness is set up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    /// Events the game's queue holds.
    pub(crate) events: usize,
    /// What the client lets the server send ahead on its stream and connection, bytes.
    pub(crate) client_window: Option<u32>,
    /// The server's initial congestion window, bytes (else quinn's default).
    pub(crate) server_congestion_window: Option<u64>,
    /// `network.handshake_timeout` (else its default).
    pub(crate) handshake_timeout: Option<Duration>,
    /// `network.stream_receive_window`, bytes: what the client may send ahead of what the
    /// server read (else its default).
    pub(crate) server_stream_window: Option<u32>,
    /// The server offers the peer link's ALPN beside the client protocol's.
    pub(crate) offer_peer_link: bool,
    /// The client dials with the peer link's ALPN (another server of the fleet), not a
    /// player's.
    pub(crate) dial_peer_link: bool,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            events: 16,
            client_window: None,
            server_congestion_window: None,
            handshake_timeout: None,
            server_stream_window: None,
            offer_peer_link: false,
            dial_peer_link: false,
        }
    }
}

/// A network driver and one client over an in-memory wire, on an explicit clock.
pub(crate) struct Harness {
    /// The driver under test.
    pub(super) driver: Driver<MemWire>,
    /// The client (a new one for each dial).
    pub(crate) client: Client,
    /// The game task's end of the driver's queue of connection events.
    pub(crate) events: mpsc::Receiver<ConnectionEvent>,
    /// The clock: every call into the driver or the client is at this instant.
    pub(crate) now: Instant,
    /// The metrics the driver counts closes, refusals and pending connections in.
    pub(crate) metrics: Metrics,
    /// The driver's network configuration.
    pub(crate) network: NetworkConfig,
    /// How it was set up.
    pub(crate) setup: Setup,
    /// The server's certificate, which the clients trust.
    pub(crate) cert: CertificateDer<'static>,
}

impl Client {
    /// A client that has begun to connect at `now` (nothing sent yet), trusting `cert`; `seed`
    /// seeds its endpoint.
    pub(crate) fn dial(
        cert: &CertificateDer<'static>,
        setup: Setup,
        now: Instant,
        network: &NetworkConfig,
        seed: u8,
    ) -> Client {
        let crypto = match setup.dial_peer_link {
            true => client_crypto_for(cert, gatehouse_protocol::fleet::PEER_ALPN),
            false => client_crypto(cert),
        };
        let mut client_config = quinn_proto::ClientConfig::new(crypto);
        if let Some(window) = setup.client_window {
            let mut transport = quinn_proto::TransportConfig::default();
            transport.stream_receive_window(VarInt::from_u32(window));
            transport.receive_window(VarInt::from_u32(window));
            client_config.transport_config(Arc::new(transport));
        }
        let mut endpoint = quinn_proto::Endpoint::new(
            Arc::new(endpoint::endpoint_config()),
            None,
            true,
            Some([seed; 32]),
        );
        let (_, quic) = endpoint.connect(now, client_config, SERVER, "localhost").unwrap();
        Client {
            endpoint,
            quic,
            stream: None,
            reading: true,
            cut: false,
            lose_next: 0,
            decoder: FrameDecoder::new(network.max_frame_len),
            read: Vec::new(),
            lost: None,
        }
    }

    /// Whether the datagram crossing now is lost: always while cut off, else while
    /// `lose_next` counts down.
    fn loses(&mut self) -> bool {
        if self.lose_next > 0 {
            self.lose_next -= 1;
            return true;
        }
        self.cut
    }
}

impl Harness {
    /// A driver as `setup` says, and a client that has connected and opened its stream.
    pub(crate) fn new(setup: Setup) -> Harness {
        let mut harness = Harness::dialing(setup);
        harness.handshake();
        harness
    }

    /// Runs the client's handshake to its end and opens its stream.
    pub(crate) fn handshake(&mut self) {
        self.run_for(Duration::from_millis(50));
        assert!(!self.client.quic.is_handshaking(), "the handshake ends");
        let stream = self.client.quic.streams().open(Dir::Bi).unwrap();
        self.client.stream = Some(stream);
    }

    /// A driver as `setup` says, and a client that has only begun to connect: nothing has
    /// crossed the wire yet.
    pub(crate) fn dialing(setup: Setup) -> Harness {
        let mut network = NetworkConfig::default();
        if let Some(timeout) = setup.handshake_timeout {
            network.handshake_timeout = timeout;
        }
        if let Some(window) = setup.server_stream_window {
            network.stream_receive_window = window;
        }
        let identity = identity();
        let cert = identity.chain[0].clone();
        let mut server_config =
            endpoint::server_config(identity, &network, setup.offer_peer_link).unwrap();
        if let Some(window) = setup.server_congestion_window {
            let mut transport = endpoint::transport_config(&network);
            let mut cubic = quinn_proto::congestion::CubicConfig::default();
            cubic.initial_window(window);
            transport.congestion_controller_factory(Arc::new(cubic));
            server_config.transport_config(Arc::new(transport));
        }
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(endpoint::endpoint_config()),
            Some(Arc::new(server_config)),
            true,
            Some([1; 32]),
        );
        let metrics = Metrics::new();
        let net = metrics.net().clone();
        let settings = Settings {
            tokens: test_tokens().into(),
            max_frame_len: network.max_frame_len,
            handshake_timeout: network.handshake_timeout,
            hello_timeout: network.hello_timeout,
            send_queue_frames: network.send_queue_frames,
            message_budget: network.message_budget(),
            metrics: net.clone(),
        };
        let admission = Admission::new(AdmissionRules::of(&network), net);
        let (events_tx, events_rx) = mpsc::channel(setup.events);
        let driver = Driver::new(endpoint, MemWire::default(), settings, admission, events_tx);

        let now = Instant::now();
        let client = Client::dial(&cert, setup, now, &network, 2);
        Harness { driver, client, events: events_rx, now, metrics, network, setup, cert }
    }

    /// A client the server accepted (after its stateless retry), the server's first flight
    /// taken by the client, before the server's side of the handshake ends.
    pub(crate) fn accepted(setup: Setup) -> Harness {
        let mut harness = Harness::dialing(setup);
        for _ in 0..MAX_STEPS {
            if !harness.driver.connections.is_empty() {
                break;
            }
            harness.client_out();
            harness.driver.turn(harness.now, &mut Vec::new());
            harness.client_in();
        }
        assert!(harness.connection().quic.is_handshaking(), "the server's side is not done");
        harness
    }

    /// As [`Harness::accepted`], then cut off.
    pub(crate) fn accepted_then_cut(setup: Setup) -> Harness {
        let mut harness = Harness::accepted(setup);
        harness.client.cut = true;
        harness
    }

    /// As [`Harness::new`], then logged in as `p1`: the game's end of its queue and its id.
    pub(crate) fn logged_in(setup: Setup) -> (Harness, SendQueue, ConnectionId) {
        let mut harness = Harness::new(setup);
        let (outbound, connection) = harness.log_in();
        (harness, outbound, connection)
    }

    /// Sends `p1`'s `Hello`: the game's end of the queue and the connection's id.
    pub(crate) fn log_in(&mut self) -> (SendQueue, ConnectionId) {
        self.send(&hello());
        self.settle();
        match self.events.try_recv() {
            Ok(ConnectionEvent::Login { connection, player, outbound, .. }) => {
                assert_eq!(player.as_str(), "p1");
                (outbound, connection)
            }
            other => panic!("expected a login, got {other:?}"),
        }
    }

    /// A new client in place of the old one (a reconnect), logged in as `p1`.
    pub(crate) fn reconnect(&mut self, seed: u8) -> (SendQueue, ConnectionId) {
        self.client = Client::dial(&self.cert, self.setup, self.now, &self.network, seed);
        self.handshake();
        self.log_in()
    }

    /// Queues `message` on the client's stream.
    pub(crate) fn send(&mut self, message: &ClientMessage) {
        let frame = gatehouse_protocol::encode_frame(message, self.network.max_frame_len).unwrap();
        let id = self.client.stream.unwrap();
        let written = self.client.quic.send_stream(id).write(&frame).unwrap();
        assert_eq!(written, frame.len());
    }

    /// Settles again and again, taking the game's events after each time as a game that keeps
    /// up would (readers paused for room resume as it does): every event it took.
    pub(crate) fn settle_as_the_game_takes_events(&mut self) -> Vec<ConnectionEvent> {
        let mut heard = Vec::new();
        for _ in 0..20 {
            self.settle();
            heard.extend(self.take_events());
        }
        heard
    }

    /// Every event the game's queue holds now.
    pub(crate) fn take_events(&mut self) -> Vec<ConnectionEvent> {
        std::iter::from_fn(|| self.events.try_recv().ok()).collect()
    }

    /// Whether the driver's `select!` has a branch ready now (beside its timer).
    pub(crate) fn driver_wakes(&self) -> bool {
        let driver = &self.driver;
        !driver.socket.inbox.is_empty()
            || (driver.sending.blocked.is_some() && !driver.socket.full.get())
            || (!driver.common.outbox.is_empty() && driver.events.capacity() > 0)
            || !driver.rings.is_empty()
            || driver.has_work_left()
    }

    /// Runs both sides at `now` until neither has anything to do without time passing.
    pub(crate) fn settle(&mut self) {
        for _ in 0..MAX_STEPS {
            let client_sent = self.client_out();
            if self.driver_wakes() {
                self.driver.turn(self.now, &mut Vec::new());
            }
            let server_sent = self.client_in();
            if !client_sent && !server_sent && !self.driver_wakes() {
                return;
            }
        }
        panic!("no quiet within {MAX_STEPS} steps");
    }

    /// Runs both sides for `span` of the test's clock, each timer at its deadline.
    pub(crate) fn run_for(&mut self, span: Duration) {
        let until = self.now + span;
        for _ in 0..MAX_STEPS {
            self.settle();
            let next =
                [self.driver.timers.first().map(|(at, _)| *at), self.client.quic.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
            match next {
                Some(at) if at <= until => {
                    self.now = self.now.max(at);
                    if self.client.quic.poll_timeout().is_some_and(|at| at <= self.now) {
                        self.client.quic.handle_timeout(self.now);
                    }
                    // The driver's own timer branch.
                    self.driver.turn(self.now, &mut Vec::new());
                }
                _ => {
                    self.now = until;
                    self.settle();
                    return;
                }
            }
        }
        panic!("no end of {span:?} within {MAX_STEPS} steps");
    }

    /// The client's datagrams to the driver's socket (lost while cut off, or as `lose_next`
    /// says); whether there were any.
    pub(crate) fn client_out(&mut self) -> bool {
        let client = &mut self.client;
        while let Some(event) = client.quic.poll_endpoint_events() {
            if let Some(answer) =
                client.endpoint.handle_event(quinn_proto::ConnectionHandle(0), event)
            {
                client.quic.handle_event(answer);
            }
        }
        let mut any = false;
        let mut buffer = Vec::new();
        while let Some(transmit) = client.quic.poll_transmit(self.now, 1, &mut buffer) {
            if client.loses() {
                buffer.clear();
                continue;
            }
            self.driver.socket.inbox.push_back(Datagram {
                remote: CLIENT,
                local_ip: None,
                ecn: None,
                data: BytesMut::from(&buffer[..transmit.size]),
            });
            buffer.clear();
            any = true;
        }
        any
    }

    /// The driver's datagrams to the client (lost while cut off, or as `lose_next` says), then
    /// what the client makes of them; whether there were any.
    pub(crate) fn client_in(&mut self) -> bool {
        let mut sent = std::mem::take(&mut *self.driver.socket.sent.borrow_mut());
        let any = !sent.is_empty();
        let client = &mut self.client;
        sent.retain(|_| !client.loses());
        let mut response = Vec::new();
        for datagram in sent {
            let event = client.endpoint.handle(
                self.now,
                SERVER,
                None,
                None,
                BytesMut::from(&datagram[..]),
                &mut response,
            );
            if let Some(DatagramEvent::ConnectionEvent(_, event)) = event {
                client.quic.handle_event(event);
            }
        }
        while let Some(event) = client.quic.poll() {
            if let Event::ConnectionLost { reason } = event {
                client.lost = Some(reason);
            }
        }
        if let (Some(id), true) = (client.stream, client.reading) {
            let mut recv = client.quic.recv_stream(id);
            if let Ok(mut chunks) = recv.read(true) {
                while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
                    client.decoder.extend(&chunk.bytes);
                }
                let _ = chunks.finalize();
            }
            while let Ok(Some(message)) = client.decoder.next_message::<ServerMessage>() {
                client.read.push(message);
            }
        }
        any
    }

    /// The application close code the server closed the client's connection with.
    pub(crate) fn closed_with(&self) -> Option<u64> {
        match &self.client.lost {
            Some(ConnectionError::ApplicationClosed(close)) => Some(close.error_code.into_inner()),
            _ => None,
        }
    }

    /// The value of the metrics series `series` (its name and labels), 0 if it is not there.
    pub(crate) fn metric(&self, series: &str) -> u64 {
        let text = self.metrics.encode().unwrap();
        let prefix = format!("{series} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map_or(0, |value| value.trim().parse().unwrap())
    }

    /// A new client in place of the old one, which vanishes without a word, with its stream
    /// open if its handshake ends within 50 ms (the server may refuse it).
    pub(crate) fn dial_again(&mut self, seed: u8) {
        self.client = Client::dial(&self.cert, self.setup, self.now, &self.network, seed);
        self.run_for(Duration::from_millis(50));
        if !self.client.quic.is_handshaking() {
            self.client.stream = self.client.quic.streams().open(Dir::Bi);
        }
    }

    /// What the driver holds now: connections, those counted open, timers armed.
    pub(crate) fn held(&self) -> Held {
        Held {
            connections: self.driver.connections.len(),
            open: self.driver.open_count,
            timers: self.driver.timers.len(),
        }
    }

    /// The driver's one connection.
    pub(crate) fn connection(&self) -> &Connection {
        let mut connections = self.driver.connections.values();
        let connection = connections.next().expect("a connection");
        assert!(connections.next().is_none(), "one connection");
        connection
    }
}

/// What a driver holds (`Harness::held`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    /// Connections in its table, whatever their state.
    pub(crate) connections: usize,
    /// Those it counts open (not closed by either side, not lost).
    pub(crate) open: usize,
    /// Timers armed.
    pub(crate) timers: usize,
}

/// The harness's token check: its key, the default limits.
pub(crate) fn test_tokens() -> TokenCheck {
    TokenCheck { key: TokenKey::new("test key"), limits: TokenLimits::DEFAULT }
}

/// `p1`'s `Hello`, with a token the harness's key signs, issued now for an hour (a token's
/// expiry is checked against the system clock).
pub(crate) fn hello() -> ClientMessage {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let claims = SessionClaims {
        uid: PlayerId::new("p1").unwrap(),
        exp: now + 3_600,
        iat: Some(now),
        usn: None,
    };
    ClientMessage::Hello {
        protocol_version: gatehouse_protocol::PROTOCOL_VERSION,
        token: token::mint(&TokenKey::new("test key"), &claims),
    }
}

/// The clients' TLS configuration, trusting `cert`: built once per process for the harness's
/// one certificate (building it is a good part of a fuzz run's cost).
fn client_crypto(cert: &CertificateDer<'static>) -> Arc<QuicClientConfig> {
    static BUILT: OnceLock<(CertificateDer<'static>, Arc<QuicClientConfig>)> = OnceLock::new();
    let build = || client_crypto_for(cert, gatehouse_protocol::ALPN);
    let (for_cert, crypto) = BUILT.get_or_init(|| (cert.clone(), build()));
    if for_cert == cert { crypto.clone() } else { build() }
}

/// A client's TLS trusting `cert`, offering `alpn` only.
fn client_crypto_for(cert: &CertificateDer<'static>, alpn: &[u8]) -> Arc<QuicClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    crypto.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(QuicClientConfig::try_from(crypto).unwrap())
}

/// A development identity, generated once per process (generating one is the slowest part of a
/// harness) and copied for each driver.
fn identity() -> ServerIdentity {
    static GENERATED: OnceLock<(Vec<u8>, Vec<u8>)> = OnceLock::new();
    let (cert, key) = GENERATED.get_or_init(|| tls::generate_development().unwrap());
    ServerIdentity {
        chain: vec![CertificateDer::from(cert.clone())],
        key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.clone())),
        origin: "generated by the harness".into(),
        generated: true,
    }
}
