//! The trace of a simulated run: every delivery, input, timeout and output, with the simulated
//! time it happened at (an offset from the run's start, so two runs compare equal) and the
//! server it happened at (connection ids are a server's own).
//!
//! Owns nothing but the record; the simulation appends to it and tests read it.

use std::fmt;
use std::time::Duration;

use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{ClientMessage, CloseCode, NodeId, PlayerId, ServerId, ServerMessage};
use gatehouse_server::game::{ConnectionId, HandoverOutcome, LoadId, Output};

use super::ClientId;

/// One thing that happened, at `at` after the start of the run, at `server`.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// Simulated time since the run started.
    pub at: Duration,
    /// The server it happened at: whose core, or whose end of a connection (a client's events
    /// name the server of the link they happened on).
    pub server: ServerId,
    /// What happened.
    pub event: Event,
}

/// What happened.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A client opened a connection (its first, or one its session dialled); its `Hello` is on
    /// the way.
    Connect {
        /// The client.
        client: ClientId,
        /// Its connection.
        connection: ConnectionId,
        /// The player its token names.
        player: PlayerId,
    },
    /// The `Hello` arrived: the server logged the connection in (`Input::Login`).
    Login {
        /// The connection.
        connection: ConnectionId,
    },
    /// A client sent a message (it is in flight, or held).
    ClientSent {
        /// The sender's connection.
        connection: ConnectionId,
        /// The message.
        message: ClientMessage,
    },
    /// A client message reached the server (`Input::Message`).
    ToServer {
        /// The sender's connection.
        connection: ConnectionId,
        /// The message.
        message: ClientMessage,
    },
    /// The core asked for something: every output, in the order it was polled.
    Output(Output),
    /// A server message reached a client.
    ToClient {
        /// The receiver's connection.
        connection: ConnectionId,
        /// The message.
        message: ServerMessage,
    },
    /// The server's close reached a client, after everything queued before it.
    Closed {
        /// The connection.
        connection: ConnectionId,
        /// Why the server closed it.
        code: CloseCode,
    },
    /// A client dropped its connection (no close from the server).
    Dropped {
        /// The connection.
        connection: ConnectionId,
    },
    /// A client closed a connection its session was done with (`Output::Close`).
    LinkClosed {
        /// The connection.
        connection: ConnectionId,
    },
    /// A client noticed that the server at the other end of a connection is gone (it
    /// crashed): the session's `link_lost`.
    LinkLost {
        /// The connection.
        connection: ConnectionId,
    },
    /// A `Hello` with a travel ticket arrived and the ticket held its signature, times and
    /// destination: the server logged the connection in as a traveller
    /// (`Input::TravellerLogin`).
    TravellerLogin {
        /// The connection.
        connection: ConnectionId,
    },
    /// A peer message reached this server (`Input::Peer`).
    Peer {
        /// The server it came from.
        from: ServerId,
        /// The message.
        message: PeerMessage,
    },
    /// The peer link to `server` was reported lost (`Input::PeerLost`).
    PeerLost {
        /// The other server.
        server: ServerId,
    },
    /// The peer link to `server` was cut: nothing crosses it until it is healed.
    PeerCut {
        /// The other server.
        server: ServerId,
    },
    /// The server crashed: its core stops, its connections and peer links go silent.
    Crashed,
    /// The directory answered (`Input::DestinationFound`).
    DestinationFound {
        /// The server it named, if any.
        server: Option<ServerId>,
    },
    /// The store answered a handoff save (`Input::HandoffSaved`).
    HandoffSaved {
        /// Whose.
        player: PlayerId,
        /// The version written, if it was.
        version: Option<u64>,
    },
    /// The store answered a claim or a recall (`Input::HandoverDecided`).
    HandoverDecided {
        /// Whose.
        player: PlayerId,
        /// What it decided.
        outcome: HandoverOutcome,
    },
    /// The store refused a player save as a conflict (`Input::PlayerSaveConflicted`,
    /// docs/spec/travel.md V17).
    SaveConflicted {
        /// Whose.
        player: PlayerId,
        /// The version it met.
        found: Option<u64>,
    },
    /// The server learnt the connection ended (`Input::Disconnected`).
    Disconnected {
        /// The connection.
        connection: ConnectionId,
    },
    /// A message matched a hold and was kept back.
    Held {
        /// The connection it was for or from.
        connection: ConnectionId,
    },
    /// A hold ended: what it kept back is sent now, in order.
    Released {
        /// The connection.
        connection: ConnectionId,
        /// How many messages it kept back.
        count: usize,
    },
    /// Simulated streaming finished (`Input::Streamed`).
    Streamed {
        /// The request.
        load: LoadId,
    },
    /// The streamed node's spawn points registered (`Input::SpawnPointsRegistered`).
    SpawnPointsRegistered {
        /// The request.
        load: LoadId,
    },
    /// The store answered a player load (`Input::PlayerLoaded`).
    PlayerLoaded {
        /// Whose.
        player: PlayerId,
        /// Whether a save was found.
        found: bool,
    },
    /// The store answered the session load (`Input::SessionLoaded`).
    SessionLoaded {
        /// Whether a session save was found.
        found: bool,
    },
    /// An operator travel (`Input::Travel`).
    Travel {
        /// The destination.
        node: NodeId,
    },
    /// The core's timers fired (`Game::handle_timeout`).
    ServerTimeout,
    /// A client's timers fired (`ClientSession::handle_timeout`).
    ClientTimeout {
        /// The client's connection.
        connection: ConnectionId,
    },
}

impl fmt::Display for TraceEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:>9.3}s  {}  {:?}", self.at.as_secs_f64(), self.server, self.event)
    }
}
