//! The peer link between the servers of one fleet (docs/spec/travel.md V14): [`PeerLinks`],
//! which the game task owns, dials destinations and answers sources on the game port.
//!
//! | file | owns |
//! |---|---|
//! | `mod` | [`PeerLinks`]: the links both ways, the requests awaiting an answer, the [`PeerEvent`]s up |
//! | `rules` | what each side checks of what it hears: the version, the proof, each message's way, the list bound |
//! | `dial` | a link this server dials (the source): one task on quinn's async API per destination |
//! | `trust` | the dialler's trust in the destination's certificate |
//!
//! Both halves prove the fleet key (`fleet.ticket_key`): each side's proof is an HMAC, under
//! the key, of its role and the connection's TLS exporter value (`gatehouse_protocol::fleet`).
//!
//! - **Dialled** (this server is the source): [`PeerLinks::send`] to a [`Candidate`] starts
//!   its link if none is up (`dial.rs`); what is sent before the `Welcome` waits in the link's
//!   queue ([`LINK_QUEUE`] messages).
//! - **Accepted** (this server is the destination): the network driver hands up a connection
//!   that agreed on ALPN `gatehouse-fleet/1` with its first message and its exporter value, and
//!   reads nothing more from it until its `Welcome` is written
//!   ([`crate::net::PeerConnectionEvent`]); here the `Hello` is checked and answered with the
//!   `Welcome` (this server's id, the name it was dialled as, its certificate's SHA-256, its
//!   proof), or the link is closed. [`PeerLinks::reply`] answers on it.
//!
//! `Hello` and `Welcome` never leave this module: the game task hears [`PeerEvent`]s. A wrong
//! proof, another version, a message the wrong way or a list above 1,024 players closes the
//! link, logged with the reason and the peer. Bounds on what a peer controls: a frame is at most
//! `network.max_frame_len` bytes; an accepted link takes the client path's handshake and hello
//! budgets and pending slots until its first message is here; at most [`MAX_PEER_LINKS`] links
//! each way (one per server: a newer link from the same source replaces the older); a
//! `ReserveSeats` unanswered within `fleet.peer_timeout_ms` is reported
//! ([`PeerEvent::Unanswered`]). It never touches the core's state and never blocks: every
//! method but [`PeerLinks::next`] returns at once.

mod dial;
mod rules;
mod trust;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gatehouse_protocol::fleet::{
    PEER_PROTOCOL_VERSION, PeerMessage, PeerProof, PeerRole, Sha256Digest,
};
use gatehouse_protocol::token::TokenKey;
use gatehouse_protocol::{CloseCode, ServerId, TransitionId, encode_frame};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::config::{ConfigError, ServerConfig};
use crate::fleet::Candidate;
use crate::game::ConnectionId;
use crate::net::{PeerConnectionEvent, QueueError, SendQueue};
use rules::Refusal;

/// The most links each way: dialled, and accepted (one per server of the fleet).
pub const MAX_PEER_LINKS: usize = 256;

/// Messages a dialled link queues (waiting for its `Welcome`, or for the stream to take them)
/// before it counts as stuck and is closed.
pub const LINK_QUEUE: usize = 4096;

/// Reports from the dialled links' tasks queued for the game task before a task waits (and
/// stops reading its link).
const REPORT_QUEUE: usize = 1024;

/// What a peer link needs of this server's configuration (docs/spec/travel.md V14).
#[derive(Clone)]
pub struct PeerSettings {
    /// This server's id in the fleet (`fleet.server_id`), in its `Hello` and `Welcome`.
    pub server: ServerId,
    /// The fleet key (`fleet.ticket_key`) the proofs are made and checked with.
    pub key: TokenKey,
    /// The SHA-256 of this server's certificate, in its `Welcome`, for clients to pin.
    pub certificate_sha256: Option<Sha256Digest>,
    /// `network.max_frame_len`: the largest frame body either way, bytes.
    pub max_frame_len: usize,
    /// `fleet.peer_timeout_ms`: a dial's bound (to its `Welcome`) and a request's.
    pub peer_timeout: Duration,
    /// `fleet.peer_idle_timeout_ms`: a dialled link silent this long is lost.
    pub peer_idle_timeout: Duration,
}

impl std::fmt::Debug for PeerSettings {
    // The key never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSettings")
            .field("server", &self.server)
            .field("peer_timeout", &self.peer_timeout)
            .field("peer_idle_timeout", &self.peer_idle_timeout)
            .finish_non_exhaustive()
    }
}

impl PeerSettings {
    /// The settings of a server in a fleet: `None` when no fleet key is set (the server offers
    /// no peer link, and dials none); `certificate_sha256` is this server's own.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for a `fleet.server_id` (or `store.session`) that is not a
    /// server id.
    pub fn from_config(
        config: &ServerConfig,
        certificate_sha256: Sha256Digest,
    ) -> Result<Option<PeerSettings>, ConfigError> {
        let fleet = &config.fleet;
        let Some(key) = fleet.ticket_key.as_ref().filter(|_| offers_peer_link(config)) else {
            return Ok(None);
        };
        Ok(Some(PeerSettings {
            server: config.server_id()?,
            key: TokenKey::new(key.as_bytes()),
            certificate_sha256: Some(certificate_sha256),
            max_frame_len: config.network.max_frame_len,
            peer_timeout: fleet.peer_timeout,
            peer_idle_timeout: fleet.peer_idle_timeout,
        }))
    }
}

/// Whether this server offers the peer link on its game port: it is in a fleet, which is to
/// hold the fleet key (`fleet.ticket_key`), whatever its directory: a server that only receives
/// travellers needs no directory (docs/spec/travel.md V12, V14).
pub fn offers_peer_link(config: &ServerConfig) -> bool {
    config.in_fleet()
}

/// What the game task hears of the peer links.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PeerEvent {
    /// A link this server dialled is up: `server` proved the fleet key. What its `Welcome`
    /// says its clients dial and pin.
    Linked {
        /// The destination.
        server: ServerId,
        /// The name its certificate is checked against (the candidate's, when the `Welcome`
        /// names none).
        server_name: String,
        /// Its certificate's SHA-256, checked against the one its handshake presented.
        certificate_sha256: Option<Sha256Digest>,
    },
    /// A link another server opened is up: `server` proved the fleet key, and was welcomed.
    Accepted {
        /// The source.
        server: ServerId,
    },
    /// A message from a server over its link (checked: it goes this way, within its bounds).
    Message {
        /// The server it came from.
        from: ServerId,
        /// The message (never `Hello` nor `Welcome`).
        message: PeerMessage,
    },
    /// A `ReserveSeats` sent to `server` for travel `trn` was not answered within
    /// `fleet.peer_timeout_ms` (from [`PeerLinks::send`]), or its link was lost first: count it
    /// refused (docs/spec/travel.md V12). A later answer still comes as a `Message`.
    Unanswered {
        /// The server asked.
        server: ServerId,
        /// The travel.
        trn: TransitionId,
    },
    /// A link ended: closed by either side, silent past its idle timeout, a dial that failed
    /// or timed out, a proof refused. The next [`PeerLinks::send`] dials again.
    Lost {
        /// The other server.
        server: ServerId,
        /// This server's role on the link: `Source` if it dialled.
        role: PeerRole,
        /// Why, in words (also logged).
        why: String,
    },
}

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PeerSendError {
    /// The message does not go this way, or is the link's own `Hello` or `Welcome`, or its
    /// list is above 1,024 players (docs/spec/travel.md V14).
    #[error("not sent to {server}: {why}")]
    Refused {
        /// Whom it was for.
        server: ServerId,
        /// What is wrong with it.
        why: String,
    },
    /// Its frame would be above `network.max_frame_len`.
    #[error("not sent to {server}: {why}")]
    TooLarge {
        /// Whom it was for.
        server: ServerId,
        /// The codec's error.
        why: String,
    },
    /// No link to that server is up to take it: for [`PeerLinks::reply`], none it opened; for
    /// [`PeerLinks::send`], links that ended as they were handed it, twice.
    #[error("no peer link from {0} to answer on")]
    NoLink(ServerId),
    /// The link's queue was full: the link is closed and reported lost.
    #[error("the peer link to {0} could not take more: closed")]
    Stuck(ServerId),
    /// [`MAX_PEER_LINKS`] links are dialled already.
    #[error("not sent to {0}: {MAX_PEER_LINKS} peer links are up already")]
    TooManyLinks(ServerId),
}

/// What a dialled link's task reports.
#[derive(Debug)]
enum Report {
    /// Its `Welcome` was checked.
    Linked {
        id: u64,
        server: ServerId,
        server_name: String,
        certificate_sha256: Option<Sha256Digest>,
    },
    /// A message came, checked.
    Message { id: u64, server: ServerId, message: PeerMessage },
    /// It ended, and why.
    Ended { id: u64, server: ServerId, why: String },
}

/// A link this server dialled, as the game task holds it.
#[derive(Debug)]
struct Dialled {
    /// Its number: reports of an older link to the same server are told apart by it.
    id: u64,
    /// What it dialled; a candidate that changed (a new address) is dialled anew.
    candidate: Candidate,
    /// Its queue of encoded frames; dropping it closes the link.
    frames: mpsc::Sender<Bytes>,
}

/// A link another server opened, once its proof held.
#[derive(Debug)]
struct Accepted {
    /// The source.
    server: ServerId,
    /// Its writer's queue in the network driver.
    outbound: SendQueue,
}

/// The peer links of this server, both ways (the module docs). Owned by the game task.
#[derive(Debug)]
pub struct PeerLinks {
    settings: Arc<PeerSettings>,
    dialled: HashMap<ServerId, Dialled>,
    accepted: HashMap<ConnectionId, Accepted>,
    /// `ReserveSeats` awaiting their answer, by server and travel: when each is due.
    asks: BTreeMap<(ServerId, TransitionId), Instant>,
    /// Events not yet taken.
    ready: VecDeque<PeerEvent>,
    reports: mpsc::Receiver<Report>,
    report_to: mpsc::Sender<Report>,
    next_id: u64,
}

impl PeerLinks {
    /// No links yet, under `settings`. The dialled links' tasks are spawned on the current
    /// tokio runtime when they are first needed.
    pub fn new(settings: PeerSettings) -> PeerLinks {
        let (report_to, reports) = mpsc::channel(REPORT_QUEUE);
        PeerLinks {
            settings: Arc::new(settings),
            dialled: HashMap::new(),
            accepted: HashMap::new(),
            asks: BTreeMap::new(),
            ready: VecDeque::new(),
            reports,
            report_to,
            next_id: 0,
        }
    }

    /// Sends `message` to `to` over the link this server dials (docs/spec/travel.md V14),
    /// dialling it first when no link to that server is up (or its candidate changed): the
    /// message waits in the link's queue until its `Welcome`. A `ReserveSeats` is awaited
    /// `fleet.peer_timeout_ms` from now ([`PeerEvent::Unanswered`]).
    ///
    /// # Errors
    /// [`PeerSendError::Refused`] for a message that does not go from a source, or whose list
    /// is above 1,024 players; [`PeerSendError::TooLarge`] for one above the frame limit;
    /// [`PeerSendError::TooManyLinks`]; [`PeerSendError::Stuck`] when the link's queue is full
    /// (the link is closed, and [`PeerEvent::Lost`] follows).
    ///
    /// # Panics
    /// Outside a tokio runtime, when it has a link to dial (it spawns the link's task there).
    pub fn send(&mut self, to: &Candidate, message: PeerMessage) -> Result<(), PeerSendError> {
        let server = &to.server;
        let mut frame = self.frame(server, PeerRole::Source, &message)?;
        // Twice at most: a link whose task ended just now (its report on its way) is dialled
        // anew; a link just dialled takes its first frame.
        for _ in 0..2 {
            if self.dialled.get(server).is_some_and(|link| link.candidate != *to) {
                // The directory moved it: a new link (the older closes as its queue goes).
                self.dialled.remove(server);
            }
            if !self.dialled.contains_key(server) {
                if self.dialled.len() >= MAX_PEER_LINKS {
                    return Err(PeerSendError::TooManyLinks(server.clone()));
                }
                self.dial(to);
            }
            let Some(link) = self.dialled.get(server) else { break };
            match link.frames.try_send(frame) {
                Ok(()) => {
                    if let PeerMessage::ReserveSeats { trn, .. } = message {
                        let due = Instant::now() + self.settings.peer_timeout;
                        self.asks.insert((server.clone(), trn), due);
                    }
                    return Ok(());
                }
                Err(mpsc::error::TrySendError::Closed(unsent)) => {
                    self.dialled.remove(server);
                    frame = unsent;
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // A link that takes nothing for this long is stuck (closed as its queue
                    // goes).
                    self.dialled.remove(server);
                    let why = format!("its queue of {LINK_QUEUE} messages is full");
                    tracing::warn!(peer = %server, reason = %why, "peer link closed");
                    self.lost(server.clone(), PeerRole::Source, why);
                    return Err(PeerSendError::Stuck(server.clone()));
                }
            }
        }
        Err(PeerSendError::NoLink(server.clone()))
    }

    /// Sends `message` to `server` over the link it opened to this server (answers to a
    /// source: `SeatsGranted`, `SeatsRefused`, `Placed`, `SeatLost`).
    ///
    /// # Errors
    /// [`PeerSendError::Refused`] for a message that does not go from a destination;
    /// [`PeerSendError::TooLarge`]; [`PeerSendError::NoLink`] when `server` has no link open
    /// to this server; [`PeerSendError::Stuck`] when its queue is full (the link is closed,
    /// and [`PeerEvent::Lost`] follows).
    pub fn reply(&mut self, server: &ServerId, message: PeerMessage) -> Result<(), PeerSendError> {
        let frame = self.frame(server, PeerRole::Destination, &message)?;
        let Some((&connection, link)) =
            self.accepted.iter().find(|(_, link)| link.server == *server)
        else {
            return Err(PeerSendError::NoLink(server.clone()));
        };
        match link.outbound.try_send_frames(frame, 1) {
            Ok(()) => Ok(()),
            // Closing: its end is on its way from the driver.
            Err(QueueError::Closed) => Err(PeerSendError::NoLink(server.clone())),
            Err(QueueError::Full) => {
                link.outbound.close_now(CloseCode::SlowConsumer);
                self.accepted.remove(&connection);
                let why = "it does not read what this server sends (its queue is full)";
                tracing::warn!(peer = %server, reason = why, "peer link closed");
                self.lost(server.clone(), PeerRole::Destination, why.to_owned());
                Err(PeerSendError::Stuck(server.clone()))
            }
        }
    }

    /// What the network driver reports of a link another server opened: its first message
    /// (checked here, answered with the `Welcome` or closed), its messages, its end.
    pub(crate) fn handle_connection(&mut self, event: PeerConnectionEvent) {
        match event {
            PeerConnectionEvent::Opened {
                connection,
                exporter,
                server_name,
                first,
                outbound,
                span,
            } => {
                span.in_scope(|| {
                    self.accept(connection, &exporter, server_name, first, outbound);
                });
            }
            PeerConnectionEvent::Message { connection, message } => {
                let Some(link) = self.accepted.get(&connection) else {
                    // Refused or closed by this server: nothing it sent is carried.
                    return;
                };
                let server = link.server.clone();
                if let Err(refusal) = rules::check_carried(PeerRole::Source, &message) {
                    tracing::warn!(peer = %server, reason = %refusal, "peer link closed");
                    link.outbound.close_now(refusal.code());
                    self.accepted.remove(&connection);
                    self.lost(server, PeerRole::Destination, refusal.to_string());
                    return;
                }
                self.ready.push_back(PeerEvent::Message { from: server, message });
            }
            PeerConnectionEvent::Gone { connection, departure } => {
                if let Some(link) = self.accepted.remove(&connection) {
                    tracing::info!(peer = %link.server, reason = %departure.reason, "peer link lost");
                    self.lost(link.server, PeerRole::Destination, departure.reason);
                }
            }
        }
    }

    /// The next event, waiting for one; cancel-safe (the game task's `select!` may drop it
    /// between events).
    pub async fn next(&mut self) -> PeerEvent {
        loop {
            if let Some(event) = self.poll_event(Instant::now()) {
                return event;
            }
            let due = self.poll_timeout();
            tokio::select! {
                report = self.reports.recv() => {
                    // Never `None`: this holds a sender.
                    if let Some(report) = report {
                        self.handle_report(report);
                    }
                }
                () = sleep_until(due) => {}
            }
        }
    }

    /// The next event ready at `now`, if one is: reports taken, requests past their bound
    /// reported.
    pub fn poll_event(&mut self, now: Instant) -> Option<PeerEvent> {
        while self.ready.is_empty() {
            match self.reports.try_recv() {
                Ok(report) => self.handle_report(report),
                Err(_) => break,
            }
        }
        if self.ready.is_empty() {
            self.expire(now);
        }
        self.ready.pop_front()
    }

    /// When the earliest request awaiting its answer is due.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.asks.values().min().copied()
    }

    /// How many links are up or being made: dialled, accepted.
    pub fn link_count(&self) -> (usize, usize) {
        (self.dialled.len(), self.accepted.len())
    }

    /// The server drains: every link closes (`ShuttingDown`), nothing more is reported.
    pub fn close_all(&mut self) {
        for (_, link) in self.accepted.drain() {
            link.outbound.close_now(CloseCode::ShuttingDown);
        }
        // Each dialled link's task closes once its queue is dropped.
        self.dialled.clear();
        self.asks.clear();
        self.ready.clear();
    }

    /// A source's first message: answered with the `Welcome` if it is a `Hello` whose proof
    /// holds, else the link is closed; logged either way.
    fn accept(
        &mut self,
        connection: ConnectionId,
        exporter: &[u8],
        server_name: Option<String>,
        first: PeerMessage,
        outbound: SendQueue,
    ) {
        let settings = Arc::clone(&self.settings);
        // Who it says it is, unproven: for the log of a refusal (the span has its address).
        let claimed = match &first {
            PeerMessage::Hello { server, .. } => Some(server.clone()),
            _ => None,
        };
        let server = match rules::check_hello(&settings.key, exporter, first) {
            Ok(server) => server,
            Err(refusal) => {
                tracing::warn!(peer = claimed.as_ref().map(ServerId::as_str), reason = %refusal,
                    "peer link refused");
                outbound.close_now(refusal.code());
                return;
            }
        };
        let older = self.accepted.iter().find(|(_, link)| link.server == server);
        if let Some(link) = older.map(|(&older, _)| older).and_then(|c| self.accepted.remove(&c)) {
            link.outbound.close_now(CloseCode::Replaced);
            let why = "replaced by a newer link from the same server";
            tracing::info!(peer = %server, reason = why, "peer link closed");
            self.lost(server.clone(), PeerRole::Destination, why.to_owned());
        }
        if self.accepted.len() >= MAX_PEER_LINKS {
            tracing::warn!(peer = %server, links = self.accepted.len(),
                "peer link refused: as many links as this server takes are up");
            outbound.close_now(CloseCode::ServerFull);
            return;
        }
        let welcome = PeerMessage::Welcome {
            version: PEER_PROTOCOL_VERSION,
            server: settings.server.clone(),
            server_name: server_name.unwrap_or_default(),
            certificate_sha256: settings.certificate_sha256,
            proof: PeerProof::new(&settings.key, PeerRole::Destination, exporter),
        };
        let sent =
            encode_frame(&welcome, settings.max_frame_len).map_err(|e| e.to_string()).and_then(
                |frame| outbound.try_send_frames(Bytes::from(frame), 1).map_err(|e| e.to_string()),
            );
        if let Err(why) = sent {
            tracing::warn!(peer = %server, reason = %why, "peer link's Welcome not sent");
            outbound.close_now(CloseCode::ShuttingDown);
            return;
        }
        tracing::info!(peer = %server, "peer link accepted");
        self.accepted.insert(connection, Accepted { server: server.clone(), outbound });
        self.ready.push_back(PeerEvent::Accepted { server });
    }

    /// `message` checked for its way and list, and encoded, for `server`.
    fn frame(
        &self,
        server: &ServerId,
        from: PeerRole,
        message: &PeerMessage,
    ) -> Result<Bytes, PeerSendError> {
        rules::check_carried(from, message).map_err(|refusal: Refusal| PeerSendError::Refused {
            server: server.clone(),
            why: refusal.to_string(),
        })?;
        encode_frame(message, self.settings.max_frame_len)
            .map(Bytes::from)
            .map_err(|e| PeerSendError::TooLarge { server: server.clone(), why: e.to_string() })
    }

    /// Starts the link to `candidate`.
    fn dial(&mut self, candidate: &Candidate) {
        let (frames, queue) = mpsc::channel(LINK_QUEUE);
        let id = self.next_id;
        self.next_id += 1;
        let task = dial::Dial {
            id,
            candidate: candidate.clone(),
            settings: Arc::clone(&self.settings),
            frames: queue,
            reports: self.report_to.clone(),
        };
        tokio::spawn(task.run());
        let link = Dialled { id, candidate: candidate.clone(), frames };
        self.dialled.insert(candidate.server.clone(), link);
    }

    /// A dialled link's report, as events; reports of a link replaced since are dropped.
    fn handle_report(&mut self, report: Report) {
        let current = |links: &HashMap<ServerId, Dialled>, server: &ServerId, id: u64| {
            links.get(server).is_some_and(|link| link.id == id)
        };
        match report {
            Report::Linked { id, server, server_name, certificate_sha256 } => {
                if current(&self.dialled, &server, id) {
                    self.ready.push_back(PeerEvent::Linked {
                        server,
                        server_name,
                        certificate_sha256,
                    });
                }
            }
            Report::Message { id, server, message } => {
                if !current(&self.dialled, &server, id) {
                    return;
                }
                if let PeerMessage::SeatsGranted { trn, .. }
                | PeerMessage::SeatsRefused { trn, .. } = &message
                {
                    self.asks.remove(&(server.clone(), *trn));
                }
                self.ready.push_back(PeerEvent::Message { from: server, message });
            }
            Report::Ended { id, server, why } => {
                if current(&self.dialled, &server, id) {
                    self.dialled.remove(&server);
                    self.lost(server, PeerRole::Source, why);
                }
            }
        }
    }

    /// A link lost: [`PeerEvent::Lost`], then, for a dialled one, each request it still
    /// awaited as [`PeerEvent::Unanswered`].
    fn lost(&mut self, server: ServerId, role: PeerRole, why: String) {
        self.ready.push_back(PeerEvent::Lost { server: server.clone(), role, why });
        if role == PeerRole::Source {
            let unanswered: Vec<_> =
                self.asks.keys().filter(|(asked, _)| *asked == server).cloned().collect();
            for key in unanswered {
                self.asks.remove(&key);
                let (server, trn) = key;
                self.ready.push_back(PeerEvent::Unanswered { server, trn });
            }
        }
    }

    /// Reports every request due by `now` as unanswered.
    fn expire(&mut self, now: Instant) {
        let due: Vec<_> =
            self.asks.iter().filter(|(_, at)| **at <= now).map(|(key, _)| key.clone()).collect();
        for key in due {
            self.asks.remove(&key);
            let (server, trn) = key;
            tracing::info!(peer = %server, trn = trn.0,
                "a seat request unanswered within fleet.peer_timeout_ms");
            self.ready.push_back(PeerEvent::Unanswered { server, trn });
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
