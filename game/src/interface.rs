//! What crosses the core's boundary: the inputs it handles, the outputs it asks for, the rules
//! it is configured with and the counters it reports. Nothing here holds state of the game.

use std::time::Duration;

use gatehouse_protocol::{ClientMessage, CloseCode, LevelName, NodeId, PlayerId, ServerMessage};

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
}

/// What to do with a client that never reports ready (`[game] client_ready_policy`,
/// docs/spec/transitions.md T9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
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
}

/// Something the core wants the shell to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send one message to one connection.
    Send {
        /// The connection.
        connection: ConnectionId,
        /// The message.
        message: ServerMessage,
    },
    /// Send one message to every logged-in connection.
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

/// Counters of decisions, for metrics and the admin endpoint: every decision is observable
/// (docs/operations.md, "Metrics").
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Players that logged in.
    pub logins: u64,
    /// Logins refused because the server was full.
    pub logins_refused_full: u64,
    /// Logins that replaced an older connection of the same player.
    pub logins_replaced: u64,
    /// Transitions started.
    pub transitions_started: u64,
    /// Transitions superseded by a newer travel before they ended.
    pub transitions_superseded: u64,
    /// Transitions that ended with every player placed.
    pub transitions_completed: u64,
    /// Transitions that ended at the settle timeout with players unplaced.
    pub settle_timeouts: u64,
    /// Transitions that reached the hard maximum and failed (`TransitionFailed`).
    pub transitions_failed: u64,
    /// Joins started: players who logged in while no transition ran, streaming before their
    /// pawn.
    pub joins_started: u64,
    /// Joins that ended with the joiner placed.
    pub joins_completed: u64,
    /// Relaunches whose kept player state was restored.
    pub player_states_restored: u64,
    /// Settle deadlines pushed forward because a load was in flight.
    pub settle_extensions: u64,
    /// Clients that missed the client-ready timeout.
    pub ready_timeouts: u64,
    /// Clients set aside from a transition: they did not answer `ShowTransition` within the
    /// response timeout (docs/spec/transitions.md T9).
    pub clients_set_aside: u64,
    /// Possessions not acknowledged within the response timeout: their players were excused
    /// from placement (docs/spec/transitions.md T9).
    pub acknowledgements_late: u64,
    /// Pawns spawned.
    pub pawns_spawned: u64,
    /// Pawns teleported by a level-transition request.
    pub pawns_teleported: u64,
    /// Pawns withdrawn (destroyed) as a transition ended because they stood on a level no
    /// longer streamed: a kept pawn whose teleport never ran (a settle timeout, or its client
    /// set aside) and a dead pawn left there; their players each get a join
    /// (docs/spec/transitions.md T7, T9).
    pub pawns_withdrawn: u64,
    /// Spawns refused by the level-ready gate and kept queued (honest refusal).
    pub spawn_refusals: u64,
    /// Spawn attempts that found no registered spawn point and scheduled a retry.
    pub spawn_point_retries: u64,
    /// Initial-spawn requests discarded before a travel (stale node).
    pub initial_spawns_discarded: u64,
    /// Messages or completions ignored because they named a superseded transition or an old
    /// pawn or load.
    pub stale_ignored: u64,
    /// Client messages refused with an `Error`.
    pub client_errors: u64,
    /// Players that died.
    pub deaths: u64,
    /// Respawns accepted.
    pub respawns: u64,
    /// Kit grants sent (each a distinct set of kits, at most once per kit per session).
    pub kit_grants: u64,
    /// Save loads that failed or timed out.
    pub load_failures: u64,
    /// Player saves requested from the store (each save of an [`Output::SavePlayers`] counts).
    pub saves_requested: u64,
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

    /// The close code for a log field: its number, or `none`.
    pub(crate) fn code_field(&self) -> crate::fields::OrNone<u32> {
        crate::fields::OrNone(self.code.map(CloseCode::code))
    }
}

impl Counters {
    /// Every counter as `(field name, description, value)`, in declaration order: what
    /// `/metrics` reports as `gatehouse_<field>_total` with the description as its `HELP`
    /// (docs/operations.md, "Metrics").
    pub fn described(&self) -> [(&'static str, &'static str, u64); 28] {
        [
            ("logins", "Players that logged in.", self.logins),
            (
                "logins_refused_full",
                "Logins refused because the server was full.",
                self.logins_refused_full,
            ),
            (
                "logins_replaced",
                "Logins that replaced an older connection of the same player.",
                self.logins_replaced,
            ),
            ("transitions_started", "Transitions started.", self.transitions_started),
            (
                "transitions_superseded",
                "Transitions superseded by a newer travel before they ended.",
                self.transitions_superseded,
            ),
            (
                "transitions_completed",
                "Transitions that ended with every player placed.",
                self.transitions_completed,
            ),
            (
                "settle_timeouts",
                "Transitions that ended at the settle timeout with players unplaced.",
                self.settle_timeouts,
            ),
            (
                "transitions_failed",
                "Transitions that reached the hard maximum and failed (`TransitionFailed`).",
                self.transitions_failed,
            ),
            (
                "joins_started",
                "Joins started: players who logged in while no transition ran, streaming before their pawn.",
                self.joins_started,
            ),
            ("joins_completed", "Joins that ended with the joiner placed.", self.joins_completed),
            (
                "player_states_restored",
                "Relaunches whose kept player state was restored.",
                self.player_states_restored,
            ),
            (
                "settle_extensions",
                "Settle deadlines pushed forward because a load was in flight.",
                self.settle_extensions,
            ),
            (
                "ready_timeouts",
                "Clients that missed the client-ready timeout.",
                self.ready_timeouts,
            ),
            (
                "clients_set_aside",
                "Clients set aside from a transition: no TransitionShown within the response timeout.",
                self.clients_set_aside,
            ),
            (
                "acknowledgements_late",
                "Possessions not acknowledged within the response timeout (excused from placement).",
                self.acknowledgements_late,
            ),
            ("pawns_spawned", "Pawns spawned.", self.pawns_spawned),
            (
                "pawns_teleported",
                "Pawns teleported by a level-transition request.",
                self.pawns_teleported,
            ),
            (
                "pawns_withdrawn",
                "Pawns withdrawn as a transition ended because they stood on a level no longer streamed.",
                self.pawns_withdrawn,
            ),
            (
                "spawn_refusals",
                "Spawns refused by the level-ready gate and kept queued (honest refusal).",
                self.spawn_refusals,
            ),
            (
                "spawn_point_retries",
                "Spawn attempts that found no registered spawn point and scheduled a retry.",
                self.spawn_point_retries,
            ),
            (
                "initial_spawns_discarded",
                "Initial-spawn requests discarded before a travel (stale node).",
                self.initial_spawns_discarded,
            ),
            (
                "stale_ignored",
                "Messages or completions ignored because they named a superseded transition or an old pawn or load.",
                self.stale_ignored,
            ),
            ("client_errors", "Client messages refused with an `Error`.", self.client_errors),
            ("deaths", "Players that died.", self.deaths),
            ("respawns", "Respawns accepted.", self.respawns),
            (
                "kit_grants",
                "Kit grants sent (each a distinct set of kits, at most once per kit per session).",
                self.kit_grants,
            ),
            ("load_failures", "Save loads that failed or timed out.", self.load_failures),
            (
                "saves_requested",
                "Player saves requested from the store (each save of an `SavePlayers` counts).",
                self.saves_requested,
            ),
        ]
    }
}
