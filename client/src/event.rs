//! What the session tells the game, in the game's terms ([`Event`]), why a session ended
//! ([`CloseReason`]), and why the client gave up a move to another server ([`AbandonReason`]).

use gatehouse_protocol::{
    CloseCode, ErrorCode, LevelName, NodeId, PawnId, PawnIdRuns, PawnView, PlayerId,
    PlayerStateView, RejectReason, TransitionFailure, TransitionId,
};
use gatehouse_tags::GameplayTag;

use crate::screen::Load;

/// Something the game must do or know, in the order the server's messages caused it
/// (docs/client.md, "Events").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The server accepted the client as `player`. `node` is the world it enters (the node the
    /// server has streamed, if any): not an instruction to stream anything.
    Welcomed {
        /// The player id the token named.
        player: PlayerId,
        /// The server's current node, if it has one streamed.
        node: Option<NodeId>,
        /// The server's frame limit from now on, both ways (bytes; docs/protocol.md 2).
        max_frame_len: u32,
    },
    /// The server refused the login; [`Event::Closed`] follows.
    Rejected {
        /// Why.
        reason: RejectReason,
        /// The server's explanation, for a log (peer text: escape it before showing it).
        detail: String,
    },
    /// Raise the loading screen now. Nothing of the world may show until
    /// [`Event::HideLoadingScreen`].
    ShowLoadingScreen,
    /// A transition started (or a newer one replaced the one on screen): freeze every
    /// character locally (zero gravity, no input on the controlled pawn). The loading screen is
    /// up.
    TransitionStarted {
        /// The transition.
        transition: TransitionId,
        /// The transition it replaced on the screen, if one was.
        superseded: Option<TransitionId>,
    },
    /// Stream `levels`, then `rooms` (a dungeon's; empty otherwise), of `node`; then call
    /// [`crate::Session::levels_streamed`] with `load`.
    StreamLevels {
        /// What the streaming is for; name it back when done.
        load: Load,
        /// The node whose levels these are.
        node: NodeId,
        /// Its levels, streamed side by side.
        levels: Vec<LevelName>,
        /// Its rooms, after the levels.
        rooms: Vec<LevelName>,
    },
    /// Stop streaming for `load`: a newer load replaced it, or its transition failed. The
    /// loading screen stays up.
    CancelStreaming {
        /// The load given up.
        load: Load,
    },
    /// The transition failed. The loading screen stays up: a recovery travel follows (it hit
    /// the server's hard maximum, `TimedOut`), or a transition or join on this server (a move to
    /// another server failed, `DestinationUnavailable` or `DestinationLost`: the session left
    /// the destination and follows this server again, docs/spec/travel.md V7).
    TransitionFailed {
        /// The transition.
        transition: TransitionId,
        /// Why.
        reason: TransitionFailure,
        /// The server's explanation (peer text).
        detail: String,
    },
    /// You control `pawn` now: bind the camera and input to it (the session acknowledged it).
    Possessed {
        /// The pawn.
        pawn: PawnId,
    },
    /// You no longer control `pawn`.
    Unpossessed {
        /// The pawn.
        pawn: PawnId,
    },
    /// The transition on the screen ended: unfreeze the characters. [`Event::HideLoadingScreen`]
    /// follows at once, unless this client controls no pawn: then the screen stays up for the
    /// join of its own that follows (docs/protocol.md 4.2).
    TransitionEnded {
        /// The transition.
        transition: TransitionId,
    },
    /// Drop the loading screen of `load`, enable input (the characters are unfrozen).
    HideLoadingScreen {
        /// The load that ended.
        load: Load,
    },
    /// Your player died (its ability state holds `State.Dead`); call
    /// [`crate::Session::request_restart`] to play on.
    Died,
    /// Your player is alive again. `restarted`: after your restart request (the respawned
    /// pawn's possession follows); otherwise the server no longer holds the death.
    Revived {
        /// Whether a restart of this session's brought it back.
        restarted: bool,
    },
    /// Ability kits granted to your player, each at most once per player state; after a
    /// relaunch, every kit it already holds, once (docs/protocol.md 4.3).
    KitsGranted {
        /// The kits.
        kits: Vec<GameplayTag>,
    },
    /// The server refused one of the session's messages; only this client is affected.
    Refused {
        /// Why.
        code: ErrorCode,
        /// The server's explanation (peer text).
        detail: String,
    },
    /// A change of the replicated world, to apply to the game's copy.
    World(WorldChange),
    /// The transition on screen goes to `node`, which another server hosts: keep the loading
    /// screen up (the player sees neither world until the move ends). The session logs in
    /// there with a ticket over a link of its own (the shell dials `address`); nothing is asked
    /// of the game (docs/spec/travel.md V3).
    Travelling {
        /// The transition that moves the player (the server's it leaves).
        transition: TransitionId,
        /// The destination node.
        node: NodeId,
        /// The destination's game port, `host:port`.
        address: String,
        /// The name its certificate holds.
        server_name: String,
    },
    /// The session plays on another server from now: the destination of a move welcomed
    /// `player`, or a move that failed there brought the player back to the server it left.
    /// The world you knew ends: drop every player state, pawn and object of it (their
    /// lifetimes end, docs/spec/gates.md G7), and unfreeze nothing of it; a new world begins on
    /// `node`, its `World` changes following as after [`Event::Welcomed`] (after a way back:
    /// at once, the session kept them, then [`Event::Possessed`] for the pawn it controls
    /// there). The loading screen stays up: the destination's join (or the way back's
    /// transition) continues it.
    ServerChanged {
        /// The player that server welcomed this client as.
        player: PlayerId,
        /// That server's current node, if it has one streamed.
        node: Option<NodeId>,
        /// That server's frame limit (bytes; docs/protocol.md 2).
        max_frame_len: u32,
    },
    /// The client gave up the move of `transition` (the destination refused its ticket,
    /// closed, could not be reached or did not admit it in time): it told the server it was
    /// leaving (`TravelAbandoned`) and waits there, the loading screen up, for its
    /// `TransitionFailed` and the transition or join that follows (docs/spec/travel.md V3, V7).
    TravelAbandoned {
        /// The move given up.
        transition: TransitionId,
        /// Why.
        reason: AbandonReason,
    },
    /// The session is over; nothing follows. Close the connection if it is still open.
    Closed {
        /// Why.
        reason: CloseReason,
    },
}

/// A change of the replicated world (docs/protocol.md 5, the replicated messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorldChange {
    /// A player state appeared or changed.
    PlayerStateUpdated(PlayerStateView),
    /// That player is out of the world: drop its player state.
    PlayerLeft {
        /// The player.
        player: PlayerId,
    },
    /// A pawn exists: yours if `owner` is your player.
    PawnSpawned(PawnView),
    /// Those pawns moved to `node`.
    PawnsTeleported {
        /// The node.
        node: NodeId,
        /// The pawns, as runs of ids.
        pawns: PawnIdRuns,
    },
    /// That pawn's owner died; the pawn stays until replaced.
    PawnDied {
        /// The pawn.
        pawn: PawnId,
    },
    /// The pawn is gone.
    PawnDestroyed {
        /// The pawn.
        pawn: PawnId,
    },
    /// Every tag that player's ability state holds now (states and active effects).
    TagsChanged {
        /// The player.
        player: PlayerId,
        /// Its tags.
        tags: Vec<GameplayTag>,
    },
    /// That player's health now.
    HealthChanged {
        /// The player.
        player: PlayerId,
        /// Its health points.
        health: u32,
    },
}

/// Why a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// The server closed the connection with this application close code and reason
    /// (docs/protocol.md 6); `Closing` told it.
    Server {
        /// The close code's wire value.
        code: u32,
        /// The server's reason (peer text).
        reason: String,
    },
    /// The client left ([`crate::Session::leave`]) and the connection ended without the
    /// server's `Closing`, or the leave's linger ran out.
    Left,
    /// No `Welcome` came within [`crate::SessionConfig::welcome_timeout`].
    NoWelcome,
    /// The connection was lost below the protocol (the shell said so:
    /// [`crate::Session::connection_lost`]).
    Lost {
        /// What the transport said.
        why: String,
    },
}

/// Why the client gave up a move to another server ([`Event::TravelAbandoned`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AbandonReason {
    /// The destination could not be reached, or its link ended below the protocol before the
    /// move's end (the shell said so: [`crate::Session::link_lost`]).
    Unreachable {
        /// What the transport said.
        why: String,
    },
    /// The destination refused the login (`Rejected`: `TicketStale`, `TicketUsed`, or any
    /// other reason).
    Refused {
        /// Why.
        reason: RejectReason,
        /// The destination's explanation (peer text).
        detail: String,
    },
    /// The destination closed the link before the move's end (`Closing`: `Recalled` (12) when
    /// the server left took the player back, or another code).
    Closed {
        /// The close code's wire value (docs/protocol.md 6).
        code: u32,
        /// The destination's reason (peer text).
        reason: String,
    },
    /// The destination did not admit the client within
    /// [`crate::SessionConfig::connect_timeout`] (or the seat's hold, if shorter).
    TimedOut,
}

impl CloseReason {
    /// The server's close code, if the server closed with one of ours.
    pub fn close_code(&self) -> Option<CloseCode> {
        match self {
            CloseReason::Server { code, .. } => CloseCode::from_code(u64::from(*code)),
            _ => None,
        }
    }
}
