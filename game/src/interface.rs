//! What crosses the core's boundary: the inputs it handles, the outputs it asks for, the rules
//! it is configured with and the counters it reports. Nothing here holds state of the game.

use std::time::Duration;

use gatehouse_protocol::fleet::PeerMessage;
use gatehouse_protocol::{
    ClientMessage, CloseCode, LevelName, NodeId, PlayerId, ServerId, ServerMessage, TransitionId,
};

use super::LoadId;
use crate::model::{LoadOutcome, PlayerSave, SessionSave};

/// Identifies one network connection; assigned by the network driver as it accepts, never reused
/// within a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

/// The rules the core needs from configuration: limits and the timeouts of the contracts.
#[derive(Debug, Clone)]
pub struct GameRules {
    /// The settle-hold bound once nothing is loading (`[game] spawn_settle_timeout_ms`, 15 s;
    /// docs/spec/transitions.md T7).
    pub spawn_settle_timeout: Duration,
    /// Retry delay when spawn points have not registered (`[game] spawn_retry_ms`, 100 ms;
    /// docs/spec/transitions.md T2).
    pub spawn_retry: Duration,
    /// How long a client may take to report ready for a transition waiting for clients.
    pub client_ready_timeout: Duration,
    /// What happens to a client that misses the client-ready timeout.
    pub client_ready_policy: ClientReadyPolicy,
    /// How long a client may take to answer what needs no streaming (`TransitionShown`,
    /// `PossessionAcknowledged`) before nothing waits for it (`[game]
    /// client_response_timeout_ms`, docs/spec/transitions.md T9).
    pub client_response_timeout: Duration,
    /// The crowd rule's floor (`[game] client_response_crowd_floor_ms`, docs/spec/transitions.md
    /// T9): when set, once nine in ten of the clients shown a transition have answered it, the
    /// rest, and every possession acknowledgement awaited meanwhile, may take twice as long as
    /// the slowest of those answers took, but at least this (and at most
    /// `client_response_timeout`).
    /// `None`: the response timeout alone.
    pub client_response_crowd_floor: Option<Duration>,
    /// Players logged in at once; a login beyond it is refused with `ServerFull`.
    pub max_players: usize,
    /// The hard bound on one transition, extensions included; reaching it fails the
    /// transition (`[game] transition_max_ms`).
    pub transition_max: Duration,
    /// How long a leaving player's player state is kept for a relaunch
    /// (`[game] player_state_retention_ms`).
    pub player_state_retention: Duration,
    /// Logins one player may make in a row (`[auth] login_burst`, docs/protocol.md 4,
    /// "Session tokens").
    pub login_burst: u32,
    /// Past the burst, one login per this long per player (`[auth] login_interval_ms`).
    pub login_interval: Duration,
    /// The largest frame body, bytes (`[network] max_frame_len`), told to each client in its
    /// `Welcome` (docs/protocol.md 2).
    pub max_frame_len: u32,
    /// Transitions in a row that may fail at `transition_max` before the world is unavailable
    /// (`[game] max_failed_transitions`, at least 1).
    pub max_failed_transitions: u32,
    /// How long a seat granted to another server's travel waits for its confirmation, then for
    /// its redemption, and for its traveller's relaunch after a disconnect (`fleet.seat_hold_ms`,
    /// 10 s; docs/spec/travel.md V9, V10, V16).
    pub seat_hold: Duration,
    /// How long a source waits for a candidate's answer to `ReserveSeats` before it asks the
    /// next (`fleet.peer_timeout_ms`, 2 s; docs/spec/travel.md V12, V16).
    pub peer_timeout: Duration,
    /// How long a source may take to find a destination that grants every seat
    /// (`fleet.resolve_timeout_ms`, 5 s; docs/spec/travel.md V7, V16).
    pub resolve_timeout: Duration,
    /// This server's id in its fleet (`fleet.server_id`), or `None` for a server in no fleet
    /// (without the fleet key, `fleet.ticket_key`): every save names it as the store row's
    /// holder, and a session-token login that loads a row another server holds takes the
    /// player (docs/spec/travel.md V17). `None`: saves name no holder, and nothing is taken.
    pub server: Option<ServerId>,
}

/// What to do with a client that never reports ready (`[game] client_ready_policy`,
/// docs/spec/transitions.md T9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientReadyPolicy {
    /// Disconnect it with close code `ReadyTimeout`; the transition proceeds without it.
    Kick,
    /// Keep it connected and proceed without its report; it still gets a pawn.
    Proceed,
}

/// Something that happened outside the core.
#[derive(Debug, Clone)]
pub enum Input {
    /// A connection authenticated as `player` (its token verified, its protocol version right).
    Login {
        /// The connection.
        connection: ConnectionId,
        /// The player id from the token.
        player: PlayerId,
    },
    /// A connection closed, for whatever reason.
    Disconnected {
        /// The connection.
        connection: ConnectionId,
        /// Why it ended, for the `player left` log.
        departure: Departure,
    },
    /// A logged-in connection sent a message.
    Message {
        /// The connection.
        connection: ConnectionId,
        /// The decoded message.
        message: ClientMessage,
    },
    /// A streaming request finished (its levels are in).
    Streamed {
        /// The request, as named in [`StreamRequest::load`].
        load: LoadId,
    },
    /// The spawn points of a streamed node registered: spawns waiting for them run now, no retry
    /// poll (docs/spec/transitions.md T2). A report for another load than the streamed node's is
    /// ignored.
    SpawnPointsRegistered {
        /// The request that streamed the node.
        load: LoadId,
    },
    /// An operator asked for a travel to `node` (admin endpoint).
    Travel {
        /// The destination.
        node: NodeId,
    },
    /// A player's save load finished.
    PlayerLoaded {
        /// Whose.
        player: PlayerId,
        /// The ticket of [`Output::LoadPlayer`].
        ticket: u64,
        /// What the store found.
        outcome: LoadOutcome<PlayerSave>,
    },
    /// The session save load finished.
    SessionLoaded {
        /// What the store found.
        outcome: LoadOutcome<SessionSave>,
    },
    /// A message of another server of the fleet, over a peer link that proved the fleet key
    /// (docs/spec/travel.md V14; the link's own `Hello` and `Welcome` stay in the shell). The
    /// core answers a destination's part: `ReserveSeats`, `SeatConfirmed`, `ReleaseSeats`
    /// (V9, V12); a source's part is ignored until the travel to another server is written.
    Peer {
        /// The server whose link it came over.
        from: ServerId,
        /// The message.
        message: PeerMessage,
    },
    /// The peer link to `server` is gone (silent `fleet.peer_idle_timeout_ms`, closed, or its
    /// dial failed): a source recalls every player it moves there and has not seen placed
    /// (docs/spec/travel.md V7).
    PeerLost {
        /// The server.
        server: ServerId,
    },
    /// The answer to [`Output::FindDestination`]: the server to ask for seats next, or none
    /// (the directory has no other candidate, or failed).
    DestinationFound {
        /// The travel, as [`Output::FindDestination`] named it.
        transition: TransitionId,
        /// The candidate, if any.
        server: Option<ServerId>,
    },
    /// The answer to [`Output::SaveHandoff`], always given: the version the store acknowledged,
    /// or none when the save failed or timed out.
    HandoffSaved {
        /// Whose.
        player: PlayerId,
        /// The ticket of [`Output::SaveHandoff`].
        ticket: u64,
        /// The stored version.
        version: Option<u64>,
    },
    /// The answer to [`Output::Handover`], always given.
    HandoverDecided {
        /// Whose.
        player: PlayerId,
        /// The ticket of [`Output::Handover`].
        ticket: u64,
        /// What the store decided.
        outcome: HandoverOutcome,
    },
    /// A player save ([`Output::SavePlayer`], or one of [`Output::SavePlayers`]) was refused
    /// as a conflict: another server wrote the player since the version it was based on
    /// (docs/spec/travel.md V17). Give it for every such refusal; the core matches it to the
    /// connection it was for by `found`: a conflict that found a version no newer than the one
    /// the player's current connection loaded (or took) answered a save of an older
    /// connection, and changes nothing.
    PlayerSaveConflicted {
        /// Whose.
        player: PlayerId,
        /// The version the store held instead; `None` when it held none.
        found: Option<u64>,
    },
    /// A connection presented a travel ticket whose signature, times and destination held
    /// (docs/spec/travel.md V8); the core checks the seat it names (V9).
    TravellerLogin {
        /// The connection.
        connection: ConnectionId,
        /// The player the ticket names.
        player: PlayerId,
        /// The seat the ticket names.
        seat: TicketedSeat,
    },
}

/// The seat a travel ticket names (docs/spec/travel.md V8, V9): the claims the destination's
/// core checks against its seat book.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketedSeat {
    /// The source server (`src`).
    pub source: ServerId,
    /// The source's transition (`trn`).
    pub travel: TransitionId,
    /// The handoff save's version (`ver`).
    pub version: u64,
    /// The seat generation (`gen`).
    pub generation: u32,
}

/// Which side writes a [`Output::Handover`] (docs/spec/travel.md V5, V17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverSide {
    /// The destination takes the player: its traveller acknowledged its pawn.
    Claim,
    /// The source takes the player back: its move failed after its ticket.
    Recall,
    /// A session-token login here loaded a save another server holds: this server takes the
    /// player, so that server's later saves of it conflict (docs/spec/travel.md V17).
    Take,
}

impl HandoverSide {
    /// `claim`, `recall` or `take`, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            HandoverSide::Claim => "claim",
            HandoverSide::Recall => "recall",
            HandoverSide::Take => "take",
        }
    }
}

/// What the store decided about a claim or a recall (docs/spec/travel.md V5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverOutcome {
    /// Written: the stored version is now `version`, and the player is this server's.
    Won {
        /// The new stored version.
        version: u64,
    },
    /// The stored version was not the handoff's: the other side's write came first.
    Lost,
    /// The store did not answer within its attempts: undecided.
    Failed,
}

/// Something the core wants the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send one message to one connection. After a `Welcome`, the shell sends the world as
    /// clients know it ([`crate::KnownWorld`] of every replicated broadcast so far;
    /// docs/protocol.md 4.5): the core does not.
    Send {
        /// The connection.
        connection: ConnectionId,
        /// The message.
        message: ServerMessage,
    },
    /// Send one message to every logged-in connection. A replicated change
    /// ([`gatehouse_protocol::ReplicatedChange`]) may be batched with others of the same
    /// replication interval (docs/protocol.md 4.4).
    Broadcast {
        /// The message.
        message: ServerMessage,
    },
    /// Close a connection after the messages queued for it before this output are delivered.
    Close {
        /// The connection.
        connection: ConnectionId,
        /// Why.
        code: CloseCode,
    },
    /// Stream a node's levels or a dungeon's rooms (the game's world does it, docs/embedding.md):
    /// answered with [`Input::Streamed`] for its `load`, then, for a node's levels,
    /// [`Input::SpawnPointsRegistered`].
    Stream(StreamRequest),
    /// Load a player's save and answer with [`Input::PlayerLoaded`] carrying `ticket`, always:
    /// a failure or timeout is [`LoadOutcome::Failed`].
    LoadPlayer {
        /// Whose.
        player: PlayerId,
        /// Echo it in the answer.
        ticket: u64,
    },
    /// Write a player's save (retrying on failure); saves of one player apply in order, and a
    /// later load of that player sees them.
    SavePlayer(PlayerSave),
    /// Write many players' saves, each as [`Output::SavePlayer`] would: a transition's end and
    /// the shutdown drain save every player with one output, carried to the store as one
    /// request.
    SavePlayers(Vec<PlayerSave>),
    /// Load the session save and answer with [`Input::SessionLoaded`].
    LoadSession,
    /// The world cannot be loaded: `max_failed_transitions` transitions in a row failed at
    /// their hard maximum. Every connection was told to close with `WorldUnavailable` (the
    /// [`Output::Close`]s before this); the shell stops the server with an error, and the core
    /// starts no transition and admits no login from now on.
    WorldUnavailable {
        /// What failed, for the operator.
        detail: String,
    },
    /// Write the session save: the world stands on `node`.
    SaveSession {
        /// The world's node.
        node: NodeId,
        /// The version the session load found (0: none); the store worker rebases it.
        version: u64,
    },
    /// Send `message` to the server `to` over its peer link (docs/spec/travel.md V14): a
    /// destination's answers about its seats.
    Peer {
        /// The server.
        to: ServerId,
        /// The message.
        message: PeerMessage,
    },
    /// Ask the fleet directory for a server hosting `node` with room for `seats` players, not
    /// one of `asked` (docs/spec/travel.md V12); answered with [`Input::DestinationFound`],
    /// always. The shell links to the server it names before carrying [`Output::Peer`] to it.
    FindDestination {
        /// The travel (the source's transition).
        transition: TransitionId,
        /// The remote node.
        node: NodeId,
        /// How many seats the travel needs.
        seats: usize,
        /// The servers this travel asked already, which refused or did not answer.
        asked: Vec<ServerId>,
    },
    /// Write a moving player's handoff save, in order with its other saves (the store worker
    /// bases it as any save), and answer with [`Input::HandoffSaved`] carrying `ticket`,
    /// always (docs/spec/travel.md V2).
    SaveHandoff {
        /// The save, its `handoff` set.
        save: PlayerSave,
        /// Echo it in the answer.
        ticket: u64,
    },
    /// A claim or a recall (docs/spec/travel.md V5), or a login's take (V17): write `save` only
    /// if the stored version is exactly `save.version` (the handoff save's, or the one the
    /// login loaded), never rebased nor retried after a conflict, and answer with
    /// [`Input::HandoverDecided`] carrying `ticket`, always.
    Handover {
        /// Which side writes.
        side: HandoverSide,
        /// The save, at the handoff version.
        save: PlayerSave,
        /// Echo it in the answer.
        ticket: u64,
    },
    /// Send the client on `connection` its `TravelTo` (docs/spec/travel.md V3, V15): the shell
    /// mints the ticket (`uid` `player`, `src` itself, `dst` `server`, `trn`, `node`, `ver`,
    /// `gen`; its key and wall clock) and fills the address, server name and certificate of
    /// `server` from the directory and the peer link.
    TravelTo {
        /// The moving player's connection.
        connection: ConnectionId,
        /// The moving player.
        player: PlayerId,
        /// The travel.
        transition: TransitionId,
        /// The remote node.
        node: NodeId,
        /// The destination.
        server: ServerId,
        /// The handoff save's version.
        version: u64,
        /// The seat generation.
        generation: u32,
        /// How long the seat is held for the ticket's redemption.
        valid: Duration,
    },
}

/// A streaming request: which levels of which node the world must stream (docs/embedding.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// Names the request in the reports that answer it.
    pub load: LoadId,
    /// The world-map node.
    pub node: NodeId,
    /// Its levels, or its rooms (a dungeon's, once its levels are in).
    pub part: StreamPart,
    /// The levels to stream, in the world map's order; they stream together.
    pub levels: Vec<LevelName>,
    /// What streams, for logs ("node harbor", "dungeon rooms of crypt").
    pub what: String,
}

/// Which part of a node a [`StreamRequest`] streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamPart {
    /// The node's levels: once in, the node's spawn points register.
    Levels,
    /// A dungeon's rooms, streamed after its levels; they register no spawn points.
    Rooms,
}

/// Declares [`Counters`] once: each counter is a field, and its doc comment is also the `HELP`
/// of its metric (`gatehouse_<name>_total`, docs/operations.md "Metrics"), so the two cannot
/// drift apart.
macro_rules! counters {
    ($($(#[doc = $doc:literal])+ $name:ident,)+) => {
        /// Counters of decisions, for metrics and the admin endpoint: every decision is
        /// observable (docs/operations.md, "Metrics").
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
        pub struct Counters {
            $($(#[doc = $doc])+ pub $name: u64,)+
        }

        impl Counters {
            /// How many counters there are.
            pub const COUNT: usize = [$(stringify!($name)),+].len();

            /// Every counter as `(field name, description, value)`, in declaration order: what
            /// `/metrics` reports as `gatehouse_<field>_total` with the description (the
            /// field's doc comment, on one line) as its `HELP`.
            pub fn described(&self) -> [(&'static str, &'static str, u64); Self::COUNT] {
                [$((stringify!($name), concat!($($doc),+).trim_ascii_start(), self.$name),)+]
            }
        }
    };
}

counters! {
    /// Players that logged in.
    logins,
    /// Logins refused because the server was full.
    logins_refused_full,
    /// Logins that replaced an older connection of the same player.
    logins_replaced,
    /// Transitions started.
    transitions_started,
    /// Transitions superseded by a newer travel before they ended.
    transitions_superseded,
    /// Transitions that ended with every player placed.
    transitions_completed,
    /// Transitions that ended at the settle timeout with players unplaced.
    settle_timeouts,
    /// Transitions that reached the hard maximum and failed (`TransitionFailed`).
    transitions_failed,
    /// Joins started: players who logged in while no transition ran, streaming before their
    /// pawn.
    joins_started,
    /// Joins that ended with the joiner placed.
    joins_completed,
    /// Relaunches whose kept player state was restored.
    player_states_restored,
    /// Settle deadlines pushed forward because a load was in flight.
    settle_extensions,
    /// Clients that missed the client-ready timeout.
    ready_timeouts,
    /// Clients set aside from a transition: they did not answer `ShowTransition` within the
    /// response timeout (docs/spec/transitions.md T9).
    clients_set_aside,
    /// Possessions not acknowledged within the response timeout: their players were excused
    /// from placement (docs/spec/transitions.md T9).
    acknowledgements_late,
    /// Pawns spawned.
    pawns_spawned,
    /// Pawns teleported by a level-transition request.
    pawns_teleported,
    /// Pawns withdrawn (destroyed) as a transition ended because they stood on a level no
    /// longer streamed: a kept pawn whose teleport never ran (a settle timeout, or its client
    /// set aside) and a dead pawn left there; their players each get a join
    /// (docs/spec/transitions.md T7, T9).
    pawns_withdrawn,
    /// Spawns refused by the level-ready gate and kept queued (honest refusal).
    spawn_refusals,
    /// Spawn attempts that found no registered spawn point and scheduled a retry.
    spawn_point_retries,
    /// Initial-spawn requests discarded before a travel (stale node).
    initial_spawns_discarded,
    /// Messages or completions ignored because they named a superseded transition or an old
    /// pawn or load.
    stale_ignored,
    /// Client messages refused with an `Error`.
    client_errors,
    /// Players that died.
    deaths,
    /// Respawns accepted.
    respawns,
    /// Kit grants sent (each a distinct set of kits, at most once per kit per session).
    kit_grants,
    /// Save loads that failed or timed out.
    load_failures,
    /// Player saves requested from the store (each save of a `SavePlayers` counts).
    saves_requested,
    /// Players this server moved to another server and saw placed there (docs/spec/travel.md
    /// V6).
    players_travelled,
    /// Moving players sent back from a travel to another server (docs/spec/travel.md V7).
    travellers_sent_back,
    /// Travellers from other servers placed here, their claims committed (docs/spec/travel.md
    /// V4, V5).
    travellers_placed,
    /// Tickets refused: stale or used (docs/spec/travel.md V9); the metric adds those refused
    /// at the Hello.
    tickets_refused,
    /// Recalls the store did not confirm: the player was sent back anyway
    /// (docs/spec/travel.md V7).
    recalls_unconfirmed,
    /// Players a session-token login here took from another server that held their save
    /// (docs/spec/travel.md V17).
    players_taken,
    /// Players closed `Replaced` and dropped unsaved because another server took them: a save
    /// of theirs conflicted, or that server said so (docs/spec/travel.md V17).
    players_replaced_elsewhere,
}

/// Why a player's connection ended, as `player left` logs it (docs/operations.md): the close code
/// when the connection was closed with one (by the server or by the client), and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    /// The application close code, if the connection was closed with one.
    pub code: Option<CloseCode>,
    /// What happened, in words, e.g. `idle timeout: nothing from the client within
    /// network.idle_timeout_ms`.
    pub reason: String,
}

impl Departure {
    /// Closed with `code`, for the reason the code stands for.
    pub fn closed(code: CloseCode) -> Departure {
        Departure { code: Some(code), reason: code.reason().to_owned() }
    }

    /// Closed with `code`, for `reason`.
    pub fn closed_because(code: CloseCode, reason: impl Into<String>) -> Departure {
        Departure { code: Some(code), reason: reason.into() }
    }

    /// Ended without a close code (the network, a reset, a stream finished), for `reason`.
    pub fn lost(reason: impl Into<String>) -> Departure {
        Departure { code: None, reason: reason.into() }
    }

    /// The close code for a log field: its number, or no field when the connection ended
    /// without one.
    pub(crate) fn code_field(&self) -> Option<u32> {
        self.code.map(CloseCode::code)
    }
}

#[cfg(test)]
mod tests {
    use super::Counters;

    /// Each counter's doc comment is its metric's `HELP`: one line, no leading space, a
    /// sentence; and every field is described once, by its own name, with its own value.
    #[test]
    fn every_counter_is_described_once_by_its_doc_comment() {
        let counters = Counters { settle_timeouts: 7, ..Counters::default() };
        let described = counters.described();
        assert_eq!(described.len(), Counters::COUNT);
        let mut names: Vec<&str> = described.iter().map(|(name, _, _)| *name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Counters::COUNT, "a counter described twice");
        for (name, help, _) in described {
            assert!(!help.starts_with(' ') && !help.contains('\n'), "{name}: {help:?}");
            assert!(help.ends_with('.'), "{name}: {help:?}");
        }
        let settle = described.iter().find(|(name, _, _)| *name == "settle_timeouts");
        assert_eq!(
            settle.map(|(_, help, value)| (*help, *value)),
            Some(("Transitions that ended at the settle timeout with players unplaced.", 7))
        );
    }
}
