//! A peer link this server dials, as the source (docs/spec/travel.md V14): one task on quinn's
//! async API per destination (a server has few), which reports to [`super::PeerLinks`].
//!
//! 1. Within `fleet.peer_timeout_ms` from its start: resolve the candidate's address, dial it
//!    as its `server_name` with ALPN `gatehouse-fleet/1` (trusting as `trust.rs` says), open the
//!    stream, send `Hello` with the source's proof of this connection's exporter value, and read
//!    the `Welcome`, checked (`rules::check_welcome`). Frames queued meanwhile wait.
//! 2. Linked: the queued frames go out, then each as it comes; each message read is checked
//!    (`rules::check_carried`) and reported.
//! 3. It ends when the link closes (either side, or `fleet.peer_idle_timeout_ms` of silence,
//!    with keep-alives every second), when a check fails (closed with its code and reason), or
//!    when [`super::PeerLinks`] drops the link's queue (closed `ShuttingDown`), and reports why.
//!
//! Every refusal and loss is logged here, in the link's span (`peer`, `address`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_protocol::fleet::{
    PEER_ALPN, PEER_EXPORTER_LABEL, PEER_EXPORTER_LEN, PEER_PROTOCOL_VERSION, PeerMessage,
    PeerProof, PeerRole,
};
use gatehouse_protocol::{CloseCode, FrameDecoder, encode_frame};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ConnectionError, ReadError, VarInt, WriteError};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::rules::{self, Refusal};
use super::trust::{self, PeerVerifier};
use super::{PeerSettings, Report};
use crate::fleet::Candidate;
use crate::net::endpoint_config;

/// The keep-alive of a peer link (docs/spec/travel.md V14).
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(1);

/// Most bytes read from the stream at once.
const READ_CHUNK: usize = 16 * 1024;

/// How long a closing link waits for its close to go out before its endpoint is dropped.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// One dialled link's task: its candidate, its queue of encoded frames, where it reports.
pub(super) struct Dial {
    /// The link's number in [`super::PeerLinks`] (a newer link to the same server has another).
    pub(super) id: u64,
    /// Whom it dials.
    pub(super) candidate: Candidate,
    /// The fleet's settings.
    pub(super) settings: Arc<PeerSettings>,
    /// Frames to send, encoded; closed when the link is no longer wanted.
    pub(super) frames: mpsc::Receiver<Bytes>,
    /// Where it reports.
    pub(super) reports: mpsc::Sender<Report>,
}

/// A link whose `Welcome` was checked.
struct Open {
    endpoint: quinn::Endpoint,
    connection: quinn::Connection,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    decoder: FrameDecoder,
}

impl Dial {
    /// Runs the link to its end (the module's steps), then reports why it ended.
    pub(super) async fn run(mut self) {
        let span = tracing::info_span!("peer_link", peer = %self.candidate.server,
            address = %self.candidate.address);
        let why = self.link().instrument(span).await;
        let report = Report::Ended { id: self.id, server: self.candidate.server.clone(), why };
        // A game task that is gone hears nothing more.
        let _ = self.reports.send(report).await;
    }

    /// Steps 1 to 3; why the link ended.
    async fn link(&mut self) -> String {
        let bound = self.settings.peer_timeout;
        let mut open = match tokio::time::timeout(bound, self.open()).await {
            Ok(Ok(open)) => open,
            Ok(Err(NotMade { why, pin: Some(pin) })) => {
                tracing::warn!(reason = %why, pinned = %trust::Hex(&pin.pinned),
                    presented = %trust::Hex(&pin.presented), "peer link not made");
                return why;
            }
            Ok(Err(NotMade { why, pin: None })) => {
                tracing::warn!(reason = %why, "peer link not made");
                return why;
            }
            Err(_) => {
                let why = format!(
                    "not linked within fleet.peer_timeout_ms ({} ms): no Welcome",
                    bound.as_millis()
                );
                tracing::warn!(reason = %why, "peer link not made");
                return why;
            }
        };
        tracing::info!("peer link up");
        let why = self.carry(&mut open).await;
        if tokio::time::timeout(CLOSE_WAIT, open.endpoint.wait_idle()).await.is_err() {
            tracing::debug!("the peer link's close still going out; dropping it");
        }
        why
    }

    /// Step 1: dials, says `Hello`, checks the `Welcome` and reports the link up.
    async fn open(&mut self) -> Result<Open, NotMade> {
        let candidate = &self.candidate;
        let address = resolve(&candidate.address).await?;
        let bind = match address {
            SocketAddr::V4(_) => SocketAddr::from(([0u8; 4], 0)),
            SocketAddr::V6(_) => SocketAddr::from(([0u16; 8], 0)),
        };
        let socket = std::net::UdpSocket::bind(bind)
            .map_err(|e| format!("cannot bind a UDP socket to dial from: {e}"))?;
        let runtime = Arc::new(quinn::TokioRuntime);
        let endpoint = quinn::Endpoint::new(endpoint_config(), None, socket, runtime)
            .map_err(|e| format!("cannot start a QUIC endpoint to dial from: {e}"))?;
        let (config, verifier) = client_config(candidate.certificate_sha256, &self.settings)?;
        let connection = endpoint
            .connect_with(config, address, &candidate.server_name)
            .map_err(|e| format!("cannot dial {address} as {:?}: {e}", candidate.server_name))?
            .await
            .map_err(|e| match verifier.mismatch() {
                // rustls words it in `Debug`; the log has the fingerprints as fields.
                Some(pin) => NotMade { why: pin.to_string(), pin: Some(pin) },
                None => NotMade::from(describe(&e, &self.settings)),
            })?;
        let (mut send, mut recv) =
            connection.open_bi().await.map_err(|e| describe(&e, &self.settings))?;
        let mut exporter = [0; PEER_EXPORTER_LEN];
        connection
            .export_keying_material(&mut exporter, PEER_EXPORTER_LABEL.as_bytes(), &[])
            .map_err(|_| "no TLS exporter value on this connection".to_owned())?;
        let presented = presented_sha256(&connection);
        let settings = &self.settings;
        let hello = PeerMessage::Hello {
            version: PEER_PROTOCOL_VERSION,
            server: settings.server.clone(),
            proof: PeerProof::new(&settings.key, PeerRole::Source, &exporter),
        };
        let frame = encode_frame(&hello, settings.max_frame_len)
            .map_err(|e| format!("cannot encode the Hello: {e}"))?;
        send.write_all(&frame).await.map_err(|e| describe_write(&e, settings))?;
        let mut decoder = FrameDecoder::new(settings.max_frame_len);
        let answer = read_message(&mut recv, &mut decoder, settings).await?;
        let checked =
            rules::check_welcome(&settings.key, &exporter, &candidate.server, presented, answer);
        let welcomed = match checked {
            Ok(welcomed) => welcomed,
            Err(refusal) => return Err(refuse(&connection, &refusal).into()),
        };
        let server_name = if welcomed.server_name.is_empty() {
            candidate.server_name.clone()
        } else {
            welcomed.server_name
        };
        let linked = Report::Linked {
            id: self.id,
            server: candidate.server.clone(),
            server_name,
            certificate_sha256: welcomed.certificate_sha256,
        };
        self.reports.send(linked).await.map_err(|_| "the game task is gone".to_owned())?;
        Ok(Open { endpoint, connection, send, recv, decoder })
    }

    /// Step 2 until step 3: the queued frames out, the messages read up; why it ended.
    async fn carry(&mut self, open: &mut Open) -> String {
        loop {
            tokio::select! {
                frame = self.frames.recv() => {
                    let Some(frame) = frame else {
                        close(&open.connection, CloseCode::ShuttingDown, "closed by this server");
                        return "closed by this server".to_owned();
                    };
                    if let Err(e) = open.send.write_all(&frame).await {
                        let why = describe_write(&e, &self.settings);
                        tracing::warn!(reason = %why, "peer link lost");
                        return why;
                    }
                }
                chunk = open.recv.read_chunk(READ_CHUNK, true) => {
                    let why = match chunk {
                        Ok(Some(chunk)) => {
                            open.decoder.extend(&chunk.bytes);
                            match self.report_messages(open).await {
                                Ok(()) => continue,
                                Err(why) => why,
                            }
                        }
                        Ok(None) => "the peer finished its stream".to_owned(),
                        Err(e) => describe_read(&e, &self.settings),
                    };
                    tracing::warn!(reason = %why, "peer link lost");
                    return why;
                }
            }
        }
    }

    /// Reports every whole message decoded, each checked; why the link ends if one fails.
    async fn report_messages(&mut self, open: &mut Open) -> Result<(), String> {
        loop {
            let message = match open.decoder.next_message::<PeerMessage>() {
                Ok(Some(message)) => message,
                Ok(None) => return Ok(()),
                Err(e) => {
                    let why = format!("a frame that does not decode: {e}");
                    close(&open.connection, CloseCode::ProtocolViolation, &why);
                    return Err(why);
                }
            };
            if let Err(refusal) = rules::check_carried(PeerRole::Destination, &message) {
                return Err(refuse(&open.connection, &refusal));
            }
            let report =
                Report::Message { id: self.id, server: self.candidate.server.clone(), message };
            self.reports.send(report).await.map_err(|_| "the game task is gone".to_owned())?;
        }
    }
}

/// The quinn configuration of a dialled link: TLS 1.3 trusting as `trust.rs` says, ALPN
/// `gatehouse-fleet/1`, keep-alive 1 s, idle timeout `fleet.peer_idle_timeout_ms`, and no
/// stream the destination may open.
fn client_config(
    pin: Option<[u8; 32]>,
    settings: &PeerSettings,
) -> Result<(quinn::ClientConfig, Arc<PeerVerifier>), String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = Arc::new(PeerVerifier::new(pin, Arc::clone(&provider)));
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("TLS setup: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::clone(&verifier) as _)
        .with_no_client_auth();
    crypto.alpn_protocols = vec![PEER_ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(crypto).map_err(|e| format!("TLS setup: {e}"))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    let mut transport = quinn::TransportConfig::default();
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    // The configuration keeps it between 2 and 60 s, well within QUIC's range.
    transport.max_idle_timeout(quinn::IdleTimeout::try_from(settings.peer_idle_timeout).ok());
    transport.max_concurrent_bidi_streams(0u32.into());
    transport.max_concurrent_uni_streams(0u32.into());
    transport.datagram_receive_buffer_size(None);
    config.transport_config(Arc::new(transport));
    Ok((config, verifier))
}

/// Why a dialled link was not made: the words for the log and the core, and the fingerprints
/// when the certificate was not the one pinned (logged as fields of their own).
struct NotMade {
    why: String,
    pin: Option<trust::PinMismatch>,
}

impl From<String> for NotMade {
    fn from(why: String) -> Self {
        NotMade { why, pin: None }
    }
}

/// The first address `address` (`host:port`) resolves to.
async fn resolve(address: &str) -> Result<SocketAddr, String> {
    let mut found = tokio::net::lookup_host(address)
        .await
        .map_err(|e| format!("cannot resolve {address:?}: {e}"))?;
    found.next().ok_or_else(|| format!("{address:?} resolves to no address"))
}

/// The SHA-256 of the leaf certificate the handshake presented.
fn presented_sha256(connection: &quinn::Connection) -> Option<[u8; 32]> {
    let chain = connection
        .peer_identity()?
        .downcast::<Vec<rustls::pki_types::CertificateDer<'static>>>()
        .ok()?;
    chain.first().map(|leaf| trust::sha256(leaf.as_ref()))
}

/// Reads until one whole message is decoded.
async fn read_message(
    recv: &mut quinn::RecvStream,
    decoder: &mut FrameDecoder,
    settings: &PeerSettings,
) -> Result<PeerMessage, String> {
    loop {
        match decoder.next_message::<PeerMessage>() {
            Ok(Some(message)) => return Ok(message),
            Ok(None) => {}
            Err(e) => return Err(format!("a frame that does not decode: {e}")),
        }
        match recv.read_chunk(READ_CHUNK, true).await {
            Ok(Some(chunk)) => decoder.extend(&chunk.bytes),
            Ok(None) => return Err("the peer finished its stream before its Welcome".into()),
            Err(e) => return Err(describe_read(&e, settings)),
        }
    }
}

/// Closes the link for `refusal`, with its code and reason; the reason, for the log.
fn refuse(connection: &quinn::Connection, refusal: &Refusal) -> String {
    let why = refusal.to_string();
    close(connection, refusal.code(), &why);
    why
}

/// Closes `connection` with `code` and `reason` (cut to fit a packet).
fn close(connection: &quinn::Connection, code: CloseCode, reason: &str) {
    let reason = &reason.as_bytes()[..reason.len().min(200)];
    connection.close(VarInt::from_u32(code.code()), reason);
}

/// Why a link ended, from quinn's error, in words naming the key that bounds it.
fn describe(error: &ConnectionError, settings: &PeerSettings) -> String {
    match error {
        ConnectionError::TimedOut => format!(
            "silent for fleet.peer_idle_timeout_ms ({} ms)",
            settings.peer_idle_timeout.as_millis()
        ),
        ConnectionError::ApplicationClosed(close) => {
            let words = crate::fields::PeerText::of_bytes(&close.reason);
            match CloseCode::from_code(close.error_code.into_inner()) {
                Some(code) => format!("closed by the peer with {code:?}: {words}"),
                None => format!("closed by the peer with code {}: {words}", close.error_code),
            }
        }
        ConnectionError::ConnectionClosed(close)
            if close.error_code == quinn::TransportErrorCode::crypto(120) =>
        {
            "the peer refused the handshake: it offers no peer link (ALPN gatehouse-fleet/1; \
             it holds no fleet.ticket_key)"
                .to_owned()
        }
        ConnectionError::ConnectionClosed(close) => {
            let words = crate::fields::PeerText(&close.to_string()).to_string();
            format!("closed by the peer's QUIC: {words}")
        }
        ConnectionError::LocallyClosed => "closed by this server".to_owned(),
        other => other.to_string(),
    }
}

fn describe_read(error: &ReadError, settings: &PeerSettings) -> String {
    match error {
        ReadError::ConnectionLost(e) => describe(e, settings),
        other => format!("the stream failed: {other}"),
    }
}

fn describe_write(error: &WriteError, settings: &PeerSettings) -> String {
    match error {
        WriteError::ConnectionLost(e) => describe(e, settings),
        other => format!("the stream failed: {other}"),
    }
}
