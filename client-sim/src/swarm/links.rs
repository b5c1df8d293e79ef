//! A life's links (docs/spec/travel.md V3): the connection it dialled first and, while its client
//! moves to another server, the destination's, each with its control stream; what the session
//! asks of them ([`LinkAction`]) carried out on real QUIC.
//!
//! A move's destination is dialled from the life's endpoint ([`gatehouse_client::net::open_link`],
//! the library's own dial: the address resolved, the handshake and the stream within the connect
//! timeout), pinned when its `TravelTo` names a certificate, else trusted as the first
//! connection was. What the session sends on it before it is open waits, framed, until it is.
//! A link the session is done with is closed in the background: what was written goes first,
//! its server is given [`LINK_LINGER`] to close it (the source's `Travelled`), then the client
//! closes it. At most two links are open at once (the session closes the server it leaves before
//! it dials the next one), so a client holds a second connection only during a move.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use gatehouse_client::net::{open_link, quic_config_pinned};
use gatehouse_client::{CertificatePin, Dial, LinkId};
use gatehouse_protocol::{CloseCode, FrameDecoder};
use tokio::time::Instant;

use super::Target;
use super::stream::{Inbound, LinkAction, Read};
use crate::figures::WireFigures;
use crate::session::ClientSession;

/// How long a closed link waits for its server to close the connection after the client
/// finished its stream, before the client closes it.
const LINK_LINGER: Duration = Duration::from_secs(2);

/// The most links a life holds at once: the server played on and a move's other end.
const MAX_LINKS: usize = 2;

/// One open link: its connection and control stream, and where it goes.
pub(super) struct Wire {
    /// The session's link.
    pub(super) id: LinkId,
    /// Where it was dialled: where a relaunch goes back to.
    pub(super) target: Target,
    pub(super) connection: quinn::Connection,
    pub(super) send: quinn::SendStream,
    pub(super) inbound: Inbound,
}

/// An opened link's connection and control stream.
pub(super) type Opened = Result<(quinn::Connection, quinn::SendStream, quinn::RecvStream), String>;

/// A link being opened for a move, and what the session sent on it meanwhile.
struct Dialling {
    id: LinkId,
    dial: Dial,
    /// Frames to write once it is open.
    pending: Vec<u8>,
    opening: Pin<Box<dyn Future<Output = Opened>>>,
}

/// What a life needs to open a move's destination.
pub(super) struct Dialer {
    /// The life's endpoint: every link of a client leaves from it.
    pub(super) endpoint: quinn::Endpoint,
    /// How the first link was trusted: an unpinned destination is trusted the same way.
    pub(super) trust: quinn::ClientConfig,
    /// The bound on a dial (resolving, the handshake, the stream).
    pub(super) connect_timeout: Duration,
    /// The largest frame body read on a link before its `Welcome` says its server's.
    pub(super) max_frame_len: usize,
}

/// A life's open links and the one being dialled.
pub(super) struct Links {
    dialer: Dialer,
    wires: Vec<Wire>,
    dialling: Option<Dialling>,
    /// What the connections already closed carried.
    closed: WireFigures,
}

/// What happened on a life's links ([`Links::next`]).
pub(super) enum LinkEvent {
    /// Open link `index` read `chunk` (`None`: its stream ended or failed).
    Read {
        /// The link's index among the open ones.
        index: usize,
        /// What was read.
        chunk: Option<bytes::Bytes>,
    },
    /// The dial in flight ended.
    Dialled(Opened),
}

/// A link whose stream ended (read closed), taken out of the life's links.
pub(super) struct Ended {
    /// The link.
    pub(super) id: LinkId,
    /// Its connection, for its close reason.
    pub(super) connection: quinn::Connection,
    /// Where it went.
    pub(super) target: Target,
    /// A frame from it that does not decode, if that ended it.
    pub(super) error: Option<String>,
}

impl Links {
    /// The links of a life whose first link is `first`; `dialer` opens the others.
    pub(super) fn new(first: Wire, dialer: Dialer) -> Links {
        Links { dialer, wires: vec![first], dialling: None, closed: WireFigures::default() }
    }

    /// The open link `id`, if it is open.
    pub(super) fn wire(&mut self, id: LinkId) -> Option<&mut Wire> {
        self.wires.iter_mut().find(|wire| wire.id == id)
    }

    /// Whether nothing is open or being opened: the life has nowhere left to play.
    pub(super) fn is_empty(&self) -> bool {
        self.wires.is_empty() && self.dialling.is_none()
    }

    /// The next thing that happens on the links: a chunk read on an open link (with the link's
    /// index; `None` once its stream ended), or the dial in flight's end. Pending while nothing
    /// happens (or nothing is open). Cancel-safe.
    pub(super) async fn next(&mut self) -> LinkEvent {
        let dialled = async {
            match &mut self.dialling {
                Some(dialling) => dialling.opening.as_mut().await,
                None => std::future::pending().await,
            }
        };
        let read = async {
            match self.wires.as_mut_slice() {
                [] => std::future::pending().await,
                [first] => (0, first.inbound.next_chunk().await),
                [first, second, ..] => tokio::select! {
                    read = first.inbound.next_chunk() => (0, read),
                    read = second.inbound.next_chunk() => (1, read),
                },
            }
        };
        tokio::select! {
            (index, chunk) = read => LinkEvent::Read { index, chunk },
            opened = dialled => LinkEvent::Dialled(opened),
        }
    }

    /// Hands what link `index` read to `session`; a link whose stream ended is taken out
    /// ([`Ended`]) and the session told ([`ClientSession::link_lost`]) by the caller.
    pub(super) fn feed(
        &mut self,
        session: &mut ClientSession,
        index: usize,
        chunk: Option<bytes::Bytes>,
    ) -> Result<Read, Box<Ended>> {
        let Some(wire) = self.wires.get_mut(index) else {
            return Ok(Read::Messages { since: std::time::Instant::now() });
        };
        match wire.inbound.feed(session, chunk) {
            Read::Closed(error) => {
                let wire = self.wires.remove(index);
                self.closed.absorb_figures(&super::life::wire_figures(&wire.connection.stats()));
                Err(Box::new(Ended {
                    id: wire.id,
                    connection: wire.connection,
                    target: wire.target,
                    error,
                }))
            }
            read => Ok(read),
        }
    }

    /// The dial in flight came to `opened`: the link is open (what the session sent on it
    /// meanwhile is written now), or `session` hears it could not be opened.
    pub(super) async fn opened(&mut self, session: &mut ClientSession, opened: Opened) {
        let Some(dialling) = self.dialling.take() else { return };
        let now = Instant::now();
        match opened {
            Ok((connection, mut send, recv)) => {
                let decoder = FrameDecoder::new(self.dialer.max_frame_len);
                let inbound = Inbound::new(dialling.id, recv, decoder, now, false);
                let target = Target {
                    server: connection.remote_address(),
                    server_name: dialling.dial.server_name,
                    pin: dialling.dial.pin,
                };
                // A failed write is seen as the link's end by its next read.
                let _ = send.write_all(&dialling.pending).await;
                self.wires.push(Wire { id: dialling.id, target, connection, send, inbound });
            }
            Err(why) => session.link_lost(now.into_std(), dialling.id, why),
        }
    }

    /// Carries out what the session asked, in order: frames written on their link (held while it
    /// is dialled, dropped for a link no longer held), dials started, links closed. A dial that
    /// cannot start is told to `session` at once.
    pub(super) async fn carry(&mut self, session: &mut ClientSession, actions: Vec<LinkAction>) {
        for action in actions {
            match action {
                LinkAction::Write { link, chunk } => {
                    if let Some(wire) = self.wire(link) {
                        // A failed write is seen as the link's end by its next read.
                        let _ = wire.send.write_all(&chunk).await;
                    } else if let Some(dialling) = self.dialling.as_mut().filter(|d| d.id == link) {
                        dialling.pending.extend_from_slice(&chunk);
                    }
                }
                LinkAction::Dial { link, dial } => {
                    if let Err(why) = self.dial(link, dial) {
                        session.link_lost(std::time::Instant::now(), link, why);
                    }
                }
                LinkAction::Close { link } => self.close(link),
            }
        }
    }

    /// Starts opening `link` as `dial` says (any earlier dial given up).
    ///
    /// # Errors
    /// Why it cannot start: two links are open already, or the pin's TLS setup failed.
    fn dial(&mut self, link: LinkId, dial: Dial) -> Result<(), String> {
        self.dialling = None;
        if self.wires.len() >= MAX_LINKS {
            return Err(format!(
                "the swarm holds at most {MAX_LINKS} connections per client (docs/simulator.md)"
            ));
        }
        let quic = match dial.pin {
            Some(pin) => pinned(pin)?,
            None => self.dialer.trust.clone(),
        };
        let (endpoint, timeout) = (self.dialer.endpoint.clone(), self.dialer.connect_timeout);
        let opening = Box::pin(open_link(endpoint, quic, dial.clone(), timeout));
        self.dialling = Some(Dialling { id: link, dial, pending: Vec::new(), opening });
        Ok(())
    }

    /// Closes `link` in the background (module docs), or gives up its dial.
    pub(super) fn close(&mut self, link: LinkId) {
        if self.dialling.as_ref().is_some_and(|d| d.id == link) {
            self.dialling = None;
        }
        let Some(index) = self.wires.iter().position(|wire| wire.id == link) else { return };
        let Wire { connection, mut send, .. } = self.wires.remove(index);
        self.closed.absorb_figures(&super::life::wire_figures(&connection.stats()));
        let _ = send.finish();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(LINK_LINGER, connection.closed()).await;
            connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), b"leave");
        });
    }

    /// Takes the open link `id` out as ended by its server (counted), if it is open.
    pub(super) fn end(&mut self, id: LinkId) -> Option<Ended> {
        let wire = self.take(id)?;
        self.count(&wire.connection);
        Some(Ended { id: wire.id, connection: wire.connection, target: wire.target, error: None })
    }

    /// Takes the open link `id` out, to end it as the life ends.
    pub(super) fn take(&mut self, id: LinkId) -> Option<Wire> {
        let index = self.wires.iter().position(|wire| wire.id == id)?;
        Some(self.wires.remove(index))
    }

    /// Ends the life's links: every one still open vanishes (closed at once, `why` its reason),
    /// the dial in flight is given up; what every connection of the life carried, summed.
    pub(super) fn finish(mut self, why: &'static [u8]) -> WireFigures {
        for wire in self.wires.drain(..) {
            self.closed.absorb_figures(&super::life::wire_figures(&wire.connection.stats()));
            wire.connection.close(quinn::VarInt::from_u32(CloseCode::Leave.code()), why);
        }
        self.closed
    }

    /// Counts what `connection` carried into the life's figures (a link ended outside these).
    pub(super) fn count(&mut self, connection: &quinn::Connection) {
        self.closed.absorb_figures(&super::life::wire_figures(&connection.stats()));
    }
}

/// The client configuration trusting exactly `pin`'s certificate, the transport as the first
/// link's (keep-alives every 3 s, a 10 s idle timeout).
fn pinned(pin: CertificatePin) -> Result<quinn::ClientConfig, String> {
    quic_config_pinned(pin, Duration::from_secs(3), Duration::from_secs(10))
        .map_err(|e| e.to_string())
}
