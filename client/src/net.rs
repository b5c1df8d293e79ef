//! The async shell: one [`Session`] over real QUIC connections (quinn, on tokio).
//!
//! [`Client::connect`] dials the server, opens the control stream and starts a driver task
//! that owns the session's links: it feeds what arrives on each to the session, wakes it at its
//! deadlines, and writes what it says on the link it names. During a move to another server
//! (docs/spec/travel.md V3) the session asks for a second link ([`Output::Dial`]): the driver
//! resolves the destination's address and dials it from the same endpoint, trusting it as the
//! first connection was trusted unless the move names a pin, within the connect timeout, and
//! holds what the session sends on it until it is open; it closes each link the session is done
//! with ([`Output::Close`]), letting that server close it first (at most 2 s). The game reaches the session through the [`Client`]: events with
//! [`Client::poll_event`] (never blocks) or [`Client::next_event`], inputs with
//! [`Client::levels_streamed`], [`Client::request_restart`] and [`Client::leave`]. The session
//! sits behind a mutex that neither side holds across an await, so a game thread and the driver
//! task share it without a channel per input.
//!
//! The transport follows docs/protocol.md 1: TLS 1.3 trusting the certificate or CA given (or,
//! with a [`CertificatePin`], exactly the certificate it names), ALPN `gatehouse/1`, keep-alives
//! every 3 s and a 10 s idle timeout (the server's defaults).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use gatehouse_protocol::{
    ClientMessage, CloseCode, FrameDecoder, ServerMessage, encode_frame_into,
};
use quinn::crypto::rustls::QuicClientConfig;
use rustls::pki_types::CertificateDer;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::event::Event;
use crate::link::{Dial, LinkId, Output};
use crate::pin::{CertificatePin, PinVerifier};
use crate::screen::Load;
use crate::session::{InputError, Session, SessionConfig};

/// The frame limit before `Welcome` says the server's (bytes; docs/protocol.md 2).
const DEFAULT_MAX_FRAME: usize = 65_536;

/// Most bytes read from the control stream at once.
const READ_CHUNK: usize = 64 * 1024;

/// Where and how to connect.
#[derive(Clone)]
pub struct ConnectConfig {
    /// The server's UDP address.
    pub server: SocketAddr,
    /// The name the server's certificate must hold (`localhost` for the development one). With
    /// a [`pin`](Self::pin) it is only sent (TLS SNI), not checked, but must still be a valid
    /// DNS name or IP address.
    pub server_name: String,
    /// The certificate to trust, DER or PEM: the server's own (the development
    /// `data/dev-cert.der`) or the CA that signed it; several PEM certificates are all trusted.
    /// Ignored (and may be empty) when [`pin`](Self::pin) is set.
    pub trust: Vec<u8>,
    /// Trust exactly the server certificate with this SHA-256 fingerprint instead of `trust`:
    /// neither the chain nor the name is checked, the handshake's signature is (docs/client.md,
    /// "Pinning the server's certificate"). Default `None`.
    pub pin: Option<CertificatePin>,
    /// The session token (docs/protocol.md 4, "Session tokens").
    pub token: String,
    /// QUIC keep-alive interval; default 3 s, as the server expects.
    pub keep_alive: Duration,
    /// QUIC idle timeout; default 10 s, as the server's.
    pub idle_timeout: Duration,
    /// How long the handshake and the stream's opening may take; default 10 s. During a move to
    /// another server it bounds the destination's dial too, and the destination's admission
    /// ([`SessionConfig::connect_timeout`]).
    pub connect_timeout: Duration,
}

impl ConnectConfig {
    /// A config with the default timeouts.
    pub fn new(
        server: SocketAddr,
        server_name: impl Into<String>,
        trust: Vec<u8>,
        token: impl Into<String>,
    ) -> Self {
        ConnectConfig {
            server,
            server_name: server_name.into(),
            trust,
            pin: None,
            token: token.into(),
            keep_alive: Duration::from_secs(3),
            idle_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
        }
    }

    /// The same config, trusting exactly the certificate `pin` names (see
    /// [`pin`](Self::pin)).
    #[must_use]
    pub fn with_pin(mut self, pin: CertificatePin) -> Self {
        self.pin = Some(pin);
        self
    }
}

impl std::fmt::Debug for ConnectConfig {
    // The token is a credential: never in a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectConfig")
            .field("server", &self.server)
            .field("server_name", &self.server_name)
            .field("pin", &self.pin)
            .field("keep_alive", &self.keep_alive)
            .field("idle_timeout", &self.idle_timeout)
            .finish_non_exhaustive()
    }
}

/// Why [`Client::connect`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The certificate to trust could not be read as DER or PEM, or not trusted.
    #[error("certificate to trust: {0}")]
    Certificate(String),
    /// TLS or QUIC could not be set up with it.
    #[error("TLS setup: {0}")]
    Tls(String),
    /// The local UDP socket could not be bound.
    #[error("cannot bind a UDP socket: {0}")]
    Bind(std::io::Error),
    /// The server could not be reached, refused the handshake, or the stream could not open.
    #[error("cannot connect to {server}: {why}")]
    Connect {
        /// The server.
        server: SocketAddr,
        /// What quinn said.
        why: String,
    },
    /// With [`ConnectConfig::pin`]: the server presented a certificate whose fingerprint is not
    /// the pin (a stale pin, or another server at that address; docs/client.md, "Pinning the
    /// server's certificate").
    #[error(
        "the certificate of {server} does not match the pin: its SHA-256 is {presented}, the pin \
         is {pin}"
    )]
    PinMismatch {
        /// The server.
        server: SocketAddr,
        /// The pin the client was given.
        pin: CertificatePin,
        /// The fingerprint of the certificate the server presented.
        presented: CertificatePin,
    },
    /// No handshake within [`ConnectConfig::connect_timeout`].
    #[error("no answer from {0} within the connect timeout")]
    TimedOut(SocketAddr),
}

/// The quinn client configuration the protocol asks for: TLS 1.3 trusting `trust` (DER or
/// PEM), ALPN `gatehouse/1`, and the given keep-alive and idle timeout.
///
/// # Errors
/// [`ConnectError::Certificate`] if `trust` holds no usable certificate, [`ConnectError::Tls`]
/// if TLS cannot be set up.
pub fn quic_config(
    trust: &[u8],
    keep_alive: Duration,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, ConnectError> {
    quic_config_trusting(&[trust], keep_alive, idle_timeout)
}

/// As [`quic_config`], trusting every certificate of every blob of `trust` (each DER or PEM):
/// a client of a fleet whose servers each have a certificate of their own, which a move to
/// another server may reach unpinned (docs/spec/travel.md V3).
///
/// # Errors
/// As [`quic_config`], if a blob holds no usable certificate.
pub fn quic_config_trusting(
    trust: &[&[u8]],
    keep_alive: Duration,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, ConnectError> {
    let mut roots = rustls::RootCertStore::empty();
    for blob in trust {
        let certs: Vec<CertificateDer<'static>> = if blob.starts_with(b"-----BEGIN") {
            use rustls::pki_types::pem::PemObject;
            CertificateDer::pem_slice_iter(blob)
                .collect::<Result<_, _>>()
                .map_err(|e| ConnectError::Certificate(e.to_string()))?
        } else {
            vec![CertificateDer::from(blob.to_vec())]
        };
        for cert in certs {
            roots.add(cert).map_err(|e| ConnectError::Certificate(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ConnectError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    transport(crypto, keep_alive, idle_timeout)
}

/// As [`quic_config`], but trusting exactly the server certificate whose SHA-256 fingerprint is
/// `pin`: neither its chain nor its name is checked, the TLS 1.3 handshake signature is
/// (docs/client.md, "Pinning the server's certificate"). A server presenting another
/// certificate fails the handshake with an error saying it does not match the pin.
///
/// # Errors
/// [`ConnectError::Tls`] if TLS cannot be set up.
pub fn quic_config_pinned(
    pin: CertificatePin,
    keep_alive: Duration,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, ConnectError> {
    pinned(pin, keep_alive, idle_timeout).map(|(config, _)| config)
}

/// [`quic_config_pinned`] and its verifier, which tells afterwards whether it refused a
/// certificate.
fn pinned(
    pin: CertificatePin,
    keep_alive: Duration,
    idle_timeout: Duration,
) -> Result<(quinn::ClientConfig, Arc<PinVerifier>), ConnectError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(PinVerifier::new(pin, Arc::clone(&provider)));
    let crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ConnectError::Tls(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::clone(&verifier) as _)
        .with_no_client_auth();
    Ok((transport(crypto, keep_alive, idle_timeout)?, verifier))
}

/// The quinn configuration over the TLS one `crypto`: the gatehouse ALPN, the keep-alive and
/// the idle timeout.
fn transport(
    mut crypto: rustls::ClientConfig,
    keep_alive: Duration,
    idle_timeout: Duration,
) -> Result<quinn::ClientConfig, ConnectError> {
    crypto.alpn_protocols = vec![gatehouse_protocol::ALPN.to_vec()];
    let crypto =
        QuicClientConfig::try_from(crypto).map_err(|e| ConnectError::Tls(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(keep_alive));
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(idle_timeout).ok());
    config.transport_config(Arc::new(transport));
    Ok(config)
}

/// What the game and the driver task share.
#[derive(Debug)]
struct Shared {
    session: Mutex<Session>,
    /// The game gave an input: the driver has something to write.
    wake_driver: Notify,
    /// The driver handled something: the game may have events.
    wake_game: Notify,
}

impl Shared {
    fn session(&self) -> MutexGuard<'_, Session> {
        // A panic while holding the lock left the session as it was between two calls; every
        // call leaves it consistent, so it is still usable.
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connected client: the session over QUIC (module docs). Dropping it closes the connection.
#[derive(Debug)]
pub struct Client {
    shared: Arc<Shared>,
    driver: tokio::task::JoinHandle<()>,
}

impl Client {
    /// Connects to the server, sends `Hello` and starts the driver task on the current tokio
    /// runtime. `Welcome` (or the refusal) comes as the first events.
    ///
    /// # Errors
    /// [`ConnectError`] if the certificate, TLS, the socket or the handshake fails; with a pin,
    /// [`ConnectError::PinMismatch`] if the server's certificate is not the pinned one.
    pub async fn connect(config: ConnectConfig) -> Result<Client, ConnectError> {
        let (quic, verifier) = match config.pin {
            Some(pin) => {
                let (quic, verifier) = pinned(pin, config.keep_alive, config.idle_timeout)?;
                (quic, Some(verifier))
            }
            None => (quic_config(&config.trust, config.keep_alive, config.idle_timeout)?, None),
        };
        // A handshake the pin refused, told as such rather than as TLS's alert.
        let refused = |verifier: &Option<Arc<PinVerifier>>| {
            let presented = verifier.as_ref().and_then(|v| v.refused())?;
            let pin = config.pin?;
            Some(ConnectError::PinMismatch { server: config.server, pin, presented })
        };
        let bind: SocketAddr = if config.server.is_ipv6() {
            SocketAddr::from(([0u16; 8], 0))
        } else {
            SocketAddr::from(([0u8; 4], 0))
        };
        let socket = std::net::UdpSocket::bind(bind).map_err(ConnectError::Bind)?;
        let runtime = Arc::new(quinn::TokioRuntime);
        let endpoint = quinn::Endpoint::new(crate::quic::endpoint_config(), None, socket, runtime)
            .map_err(ConnectError::Bind)?;
        let server = config.server;
        let connecting = async {
            let connection = endpoint
                .connect_with(quic.clone(), server, &config.server_name)
                .map_err(|e| ConnectError::Connect { server, why: e.to_string() })?
                .await
                .map_err(|e| match e {
                    // No answer at all: the same error as the connect timeout's.
                    quinn::ConnectionError::TimedOut => ConnectError::TimedOut(server),
                    e => refused(&verifier)
                        .unwrap_or_else(|| ConnectError::Connect { server, why: e.to_string() }),
                })?;
            let (send, recv) = connection
                .open_bi()
                .await
                .map_err(|e| ConnectError::Connect { server, why: e.to_string() })?;
            Ok::<_, ConnectError>((connection, send, recv))
        };
        let (connection, send, recv) = tokio::time::timeout(config.connect_timeout, connecting)
            .await
            .map_err(|_| ConnectError::TimedOut(server))??;
        let session_config = SessionConfig {
            connect_timeout: config.connect_timeout,
            ..SessionConfig::new(config.token)
        };
        let session = Session::new(Instant::now().into_std(), session_config);
        let shared = Arc::new(Shared {
            session: Mutex::new(session),
            wake_driver: Notify::new(),
            wake_game: Notify::new(),
        });
        let trust = Trust {
            quic,
            keep_alive: config.keep_alive,
            idle_timeout: config.idle_timeout,
            connect_timeout: config.connect_timeout,
        };
        let first = LinkWire::new(LinkId::FIRST, connection, send, recv);
        let wire = Wire { endpoint, trust, links: vec![first], dialling: None };
        let driver = tokio::spawn(drive(Arc::clone(&shared), wire));
        Ok(Client { shared, driver })
    }

    /// The next event, if one is waiting; never blocks (a game loop calls it every frame).
    pub fn poll_event(&self) -> Option<Event> {
        self.shared.session().poll_event()
    }

    /// The next event, waiting for one; `None` once the session closed and every event was
    /// taken.
    pub async fn next_event(&self) -> Option<Event> {
        loop {
            {
                let mut session = self.shared.session();
                if let Some(event) = session.poll_event() {
                    return Some(event);
                }
                if session.is_closed() {
                    return None;
                }
            }
            self.shared.wake_game.notified().await;
        }
    }

    /// The game streamed `load` (docs: [`Session::levels_streamed`]).
    ///
    /// # Errors
    /// As [`Session::levels_streamed`].
    pub fn levels_streamed(&self, load: Load) -> Result<(), InputError> {
        self.input(|session| session.levels_streamed(load))
    }

    /// Asks to respawn (docs: [`Session::request_restart`]).
    ///
    /// # Errors
    /// As [`Session::request_restart`].
    pub fn request_restart(&self) -> Result<(), InputError> {
        self.input(Session::request_restart)
    }

    /// Leaves (docs: [`Session::leave`]); [`Event::Closed`] follows.
    pub fn leave(&self) {
        let now = Instant::now().into_std();
        let _ = self.input(|session| {
            session.leave(now);
            Ok(())
        });
    }

    /// Whether the session is over.
    pub fn is_closed(&self) -> bool {
        self.shared.session().is_closed()
    }

    fn input<T>(
        &self,
        give: impl FnOnce(&mut Session) -> Result<T, InputError>,
    ) -> Result<T, InputError> {
        let result = give(&mut self.shared.session());
        self.shared.wake_driver.notify_one();
        result
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        // The driver owns the connection; ending it closes the connection.
        self.driver.abort();
    }
}

/// How long a closed link waits for its server to close the connection after the client
/// finished its stream (a `Leave` answered, or the stream's end read as leaving) before the
/// client closes it: the server's close then carries its code, and what was written is not cut
/// off.
const LINK_LINGER: Duration = Duration::from_secs(2);

/// How the first link was trusted, and its transport settings: what a link to another server
/// is opened with when its `TravelTo` names no pin (docs/spec/travel.md V3).
struct Trust {
    quic: quinn::ClientConfig,
    keep_alive: Duration,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

/// The driver task's half: the endpoint, every open link, and the one being dialled.
struct Wire {
    /// Kept so the socket lives as long as the links.
    endpoint: quinn::Endpoint,
    trust: Trust,
    /// The open links: the first, and during a move the other server's.
    links: Vec<LinkWire>,
    /// A link being opened for a move, and what the session sent on it meanwhile.
    dialling: Option<Dialling>,
}

/// One open link: its connection, its control stream, what was read of it and what waits to
/// be written.
struct LinkWire {
    id: LinkId,
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
    /// The server's limit, both ways, once its `Welcome` said it.
    max_frame: usize,
    /// Frames to write.
    out: Vec<u8>,
}

impl LinkWire {
    fn new(
        id: LinkId,
        connection: quinn::Connection,
        send: quinn::SendStream,
        recv: quinn::RecvStream,
    ) -> LinkWire {
        let decoder = FrameDecoder::new(DEFAULT_MAX_FRAME);
        LinkWire {
            id,
            connection,
            send,
            recv,
            decoder,
            max_frame: DEFAULT_MAX_FRAME,
            out: Vec::new(),
        }
    }

    /// Frames `message` to be written. A message of ours always fits the server's limit; one
    /// that does not is dropped rather than sent broken.
    fn queue(&mut self, message: &ClientMessage) {
        let _ = encode_frame_into(message, self.max_frame, &mut self.out);
    }

    /// Writes what waits, finishes the stream and closes the connection once the server
    /// closed it, or after [`LINK_LINGER`].
    fn close(self) {
        let LinkWire { mut send, connection, out, .. } = self;
        tokio::spawn(async move {
            let _ = tokio::time::timeout(LINK_LINGER, send.write_all(&out)).await;
            let _ = send.finish();
            let _ = tokio::time::timeout(LINK_LINGER, connection.closed()).await;
            connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"leave");
        });
    }
}

/// A link being opened, and what waits to be written on it.
struct Dialling {
    id: LinkId,
    task: tokio::task::JoinHandle<Result<LinkParts, String>>,
    pending: Vec<ClientMessage>,
}

/// An opened link's connection and control stream.
type LinkParts = (quinn::Connection, quinn::SendStream, quinn::RecvStream);

/// The driver task: reads every link, wakes the session at its deadlines, writes what it says
/// and opens and closes the links it asks for, until the session closes.
async fn drive(shared: Arc<Shared>, mut wire: Wire) {
    let mut buffer = vec![0u8; READ_CHUNK];
    loop {
        // What the session has to say first: its `Hello`, then whatever the last wake caused.
        let closed = {
            let mut session = shared.session();
            while let Some(output) = session.poll_output() {
                wire.carry(output);
            }
            session.is_closed()
        };
        for link in &mut wire.links {
            if !link.out.is_empty() && link.send.write_all(&link.out).await.is_err() {
                let why = describe(&link.connection, "the control stream could not be written");
                shared.session().link_lost(link.id, why);
            }
            link.out.clear();
        }
        shared.wake_game.notify_one();
        if closed {
            if let Some(dialling) = wire.dialling.take() {
                dialling.task.abort();
            }
            for mut link in wire.links.drain(..) {
                let _ = link.send.finish();
                link.connection.close(quinn::VarInt::from_u32(0), b"leave");
            }
            wire.endpoint.wait_idle().await;
            return;
        }
        let wake = shared.session().poll_timeout().map(Instant::from_std);
        let dialled = async {
            match &mut wire.dialling {
                Some(dialling) => (&mut dialling.task).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            (index, read) = read_any(&mut wire.links, &mut buffer) => {
                wire.read(&shared, index, read, &buffer);
            }
            opened = dialled => wire.opened(&shared, opened),
            () = shared.wake_driver.notified() => {}
            () = sleep_until(wake) => shared.session().handle_timeout(Instant::now().into_std()),
        }
    }
}

impl Wire {
    /// Carries out one output of the session: a message onto its link (held while the link is
    /// dialled; dropped for a link no longer open), a dial, a close.
    fn carry(&mut self, output: Output) {
        match output {
            Output::Send { link, message } => {
                if let Some(open) = self.links.iter_mut().find(|open| open.id == link) {
                    open.queue(&message);
                } else if let Some(dialling) = self.dialling.as_mut().filter(|d| d.id == link) {
                    dialling.pending.push(message);
                }
            }
            Output::Dial { link, dial } => {
                if let Some(earlier) = self.dialling.take() {
                    earlier.task.abort();
                }
                let quic = match dial.pin {
                    Some(pin) => {
                        let (keep_alive, idle) = (self.trust.keep_alive, self.trust.idle_timeout);
                        match quic_config_pinned(pin, keep_alive, idle) {
                            Ok(quic) => quic,
                            Err(e) => {
                                let failed = Err(e.to_string());
                                let task = tokio::spawn(async move { failed });
                                self.dialling =
                                    Some(Dialling { id: link, task, pending: Vec::new() });
                                return;
                            }
                        }
                    }
                    None => self.trust.quic.clone(),
                };
                let endpoint = self.endpoint.clone();
                let timeout = self.trust.connect_timeout;
                let task = tokio::spawn(open_link(endpoint, quic, dial, timeout));
                self.dialling = Some(Dialling { id: link, task, pending: Vec::new() });
            }
            Output::Close { link } => {
                if self.dialling.as_ref().is_some_and(|d| d.id == link)
                    && let Some(dialling) = self.dialling.take()
                {
                    dialling.task.abort();
                }
                if let Some(index) = self.links.iter().position(|open| open.id == link) {
                    let closing = self.links.remove(index);
                    closing.close();
                }
            }
        }
    }

    /// What one read of link `index` gave: frames fed to the session, or the link's end.
    fn read(
        &mut self,
        shared: &Shared,
        index: usize,
        read: Result<usize, quinn::ReadError>,
        buffer: &[u8],
    ) {
        let Some(link) = self.links.get_mut(index) else { return };
        let mut session = shared.session();
        let ended = match read {
            Ok(0) => Some("the server finished the control stream".to_owned()),
            Ok(len) => {
                link.decoder.extend(&buffer[..len]);
                read_messages(&mut session, link)
            }
            Err(e) => Some(describe(&link.connection, &e.to_string())),
        };
        if let Some(why) = ended {
            let id = link.id;
            self.links.remove(index);
            session.link_lost(id, why);
        }
    }

    /// A dial ended: the link is open (what the session sent on it meanwhile is written next),
    /// or the session hears it could not be opened.
    fn opened(
        &mut self,
        shared: &Shared,
        opened: Result<Result<LinkParts, String>, tokio::task::JoinError>,
    ) {
        let Some(dialling) = self.dialling.take() else { return };
        match opened {
            Ok(Ok((connection, send, recv))) => {
                let mut link = LinkWire::new(dialling.id, connection, send, recv);
                for message in &dialling.pending {
                    link.queue(message);
                }
                self.links.push(link);
            }
            Ok(Err(why)) => shared.session().link_lost(dialling.id, why),
            Err(e) => shared.session().link_lost(dialling.id, format!("the dial stopped: {e}")),
        }
    }
}

/// Opens a link to a move's destination: resolves `dial.address` (the first address of the
/// endpoint's family), connects as `dial.server_name` with `quic` from `endpoint` and opens the
/// control stream, all within `timeout` (docs/spec/travel.md V3). What this shell does with an
/// [`Output::Dial`]; a shell of its own (client-sim's swarm) may call it too.
///
/// # Errors
/// What failed (the name, the handshake, the pin, the stream), or that it timed out.
pub async fn open_link(
    endpoint: quinn::Endpoint,
    quic: quinn::ClientConfig,
    dial: Dial,
    timeout: Duration,
) -> Result<(quinn::Connection, quinn::SendStream, quinn::RecvStream), String> {
    let address = dial.address.clone();
    let opening = async move {
        let ipv6 = endpoint.local_addr().map(|local| local.is_ipv6()).unwrap_or(false);
        let server = tokio::net::lookup_host(&dial.address)
            .await
            .map_err(|e| format!("cannot resolve {}: {e}", dial.address))?
            .find(|candidate| candidate.is_ipv6() == ipv6)
            .ok_or_else(|| format!("{} has no address this client can reach", dial.address))?;
        let connection = endpoint
            .connect_with(quic, server, &dial.server_name)
            .map_err(|e| format!("cannot connect to {server}: {e}"))?
            .await
            .map_err(|e| format!("cannot connect to {server}: {e}"))?;
        let (send, recv) =
            connection.open_bi().await.map_err(|e| format!("cannot open the stream: {e}"))?;
        Ok((connection, send, recv))
    };
    tokio::time::timeout(timeout, opening)
        .await
        .map_err(|_| format!("no answer from {address} within the connect timeout"))?
}

/// The first read of any of `links` that has something: the link's index and what it read into
/// `buffer` (0 bytes: the server finished the stream). Pending while none has; reading is
/// cancel-safe, so dropping this future loses nothing.
async fn read_any(
    links: &mut [LinkWire],
    buffer: &mut [u8],
) -> (usize, Result<usize, quinn::ReadError>) {
    std::future::poll_fn(|cx| {
        for (index, link) in links.iter_mut().enumerate() {
            if let std::task::Poll::Ready(read) = link.recv.poll_read(cx, buffer) {
                return std::task::Poll::Ready((index, read));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Feeds every whole frame `link` holds to the session. Returns why the link ends if a frame
/// does not decode.
fn read_messages(session: &mut Session, link: &mut LinkWire) -> Option<String> {
    let now = Instant::now().into_std();
    loop {
        match link.decoder.next_message::<ServerMessage>() {
            Ok(Some(message)) => {
                if let ServerMessage::Welcome { max_frame_len, .. } = &message {
                    // The server's limit from now on, both ways (docs/protocol.md 2).
                    link.max_frame = *max_frame_len as usize;
                    link.decoder.set_max_len(link.max_frame);
                }
                session.handle_on(now, link.id, message);
            }
            Ok(None) => return None,
            Err(e) => return Some(format!("a frame from the server does not decode: {e}")),
        }
    }
}

/// Why the connection ended, as the transport says, or `fallback`.
fn describe(connection: &quinn::Connection, fallback: &str) -> String {
    connection.close_reason().map_or_else(|| fallback.to_owned(), |reason| reason.to_string())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
