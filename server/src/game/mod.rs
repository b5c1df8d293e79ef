//! The authoritative game core: a sans-IO state machine (DESIGN §2).
//!
//! [`Game`] owns every piece of authoritative state: players and their player states, pawns,
//! world-map streaming, the phased transition and the spawn queue. It is driven in this order
//! (the quinn-proto `Connection` habit):
//!
//! 1. feed it inputs with [`Game::handle`] (`now` is passed in: it never reads a clock);
//! 2. drain what it wants done with [`Game::poll_output`] until `None`;
//! 3. wake it at [`Game::poll_timeout`] with [`Game::handle_timeout`], then drain again.
//!
//! It never sleeps, spawns tasks or touches a socket, so every ordering of the seeds can be
//! tested deterministically with explicit time.
//!
//! Modules, one concern each: `players` (roster, player states, pawns), `streaming` (simulated
//! level streaming and the world-map gate), `transition` (the phase machine and the
//! settle-hold), `spawn` (the spawn queue and pawn creation), `abilities` (a player state's
//! ability system and the kit latch), `hazards` (effects over time and death), `respawn`
//! (per-player death respawn), `persistence` (player and session saves), `timers` (named
//! deadlines).

mod abilities;
mod hazards;
mod persistence;
mod players;
mod respawn;
mod snapshot;
mod spawn;
mod streaming;
mod timers;
mod transition;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_protocol::{
    ClientMessage, CloseCode, ErrorCode, NodeId, PawnId, PlayerId, RejectReason, ServerMessage,
    TransitionId,
};

use crate::config::{ClientReadyPolicy, GameConfig, WorldMap};
use crate::store::{LoadOutcome, PlayerSave, SessionSave};

pub use snapshot::{GameSnapshot, PendingSpawn, PlayerSnapshot};
pub use spawn::SpawnKind;
pub use streaming::LoadId;

use hazards::HazardState;
use persistence::{RecentPlayers, SessionState};
use players::{Pawn, Player, RefusalVerdict, RefusalWindow};
use spawn::SpawnQueue;
use streaming::WorldStreaming;
use timers::{Timer, TimerTable};
use transition::Transition;

/// Identifies one network connection; assigned by the shell, never reused within a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId(pub u64);

/// The rules the core needs from configuration: limits and the timeouts of the contracts.
#[derive(Debug, Clone)]
pub struct GameRules {
    /// The settle-hold bound once nothing is loading (seed 001 `SpawnSettleTimeout`, 15 s).
    pub spawn_settle_timeout: Duration,
    /// Retry delay when spawn points have not registered (seed 001, 100 ms).
    pub spawn_retry: Duration,
    /// How long a client may take to report ready for a transition waiting for clients.
    pub client_ready_timeout: Duration,
    /// What happens to a client that misses the client-ready timeout.
    pub client_ready_policy: ClientReadyPolicy,
    /// Players logged in at once; a login beyond it is refused with `ServerFull`.
    pub max_players: usize,
}

impl GameRules {
    /// The rules from the `[game]` section plus the player cap.
    pub fn from_config(game: &GameConfig, max_players: usize) -> Self {
        Self {
            spawn_settle_timeout: game.spawn_settle_timeout,
            spawn_retry: game.spawn_retry,
            client_ready_timeout: game.client_ready_timeout,
            client_ready_policy: game.client_ready_policy,
            max_players,
        }
    }
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
    /// The spawn points of a streamed node registered.
    SpawnPointsRegistered {
        /// The request that streamed the node.
        load: LoadId,
    },
    /// An operator asked for a travel to `node` (admin endpoint).
    Travel {
        /// The destination.
        node: NodeId,
    },
    /// A player's save load finished (seed `OnLoadCompleted`).
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
    /// Simulate streaming: report [`Input::Streamed`] for `load` after `duration` plus up to
    /// `jitter` (uniformly at random), then, if `spawn_points_after` is set, report
    /// [`Input::SpawnPointsRegistered`] that much later.
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
    /// Load the session save and answer with [`Input::SessionLoaded`].
    LoadSession,
    /// Write the session save: the world stands on `node`.
    SaveSession {
        /// The world's node.
        node: NodeId,
        /// The version the session load found (0: none); the store worker rebases it.
        version: u64,
    },
}

/// A simulated streaming request (DESIGN §1: level streaming on the server is simulated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    /// Names the request in the completion input.
    pub load: LoadId,
    /// What streams, for logs.
    pub what: String,
    /// Stream time: the slowest of the levels streaming together.
    pub duration: Duration,
    /// Extra random delay, at most this much.
    pub jitter: Duration,
    /// Spawn points register this long after the levels stream; `None` for dungeon rooms.
    pub spawn_points_after: Option<Duration>,
}

/// Counters of decisions, for metrics and the admin endpoint (DESIGN §4: every decision is
/// observable).
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
    /// Settle deadlines pushed forward because a load was in flight.
    pub settle_extensions: u64,
    /// Clients that missed the client-ready timeout.
    pub ready_timeouts: u64,
    /// Pawns spawned.
    pub pawns_spawned: u64,
    /// Pawns teleported by a level-transition request.
    pub pawns_teleported: u64,
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
    /// Saves requested from the store.
    pub saves_requested: u64,
}

/// The authoritative game core. See the module documentation for how to drive it.
#[derive(Debug)]
pub struct Game {
    rules: GameRules,
    world: Arc<WorldMap>,
    /// Logged-in players, in id order so every iteration is deterministic.
    players: BTreeMap<PlayerId, Player>,
    /// Which player each logged-in connection is.
    connections: HashMap<ConnectionId, PlayerId>,
    pawns: BTreeMap<PawnId, Pawn>,
    streaming: WorldStreaming,
    transition: Option<Transition>,
    spawns: SpawnQueue,
    timers: TimerTable,
    /// The session's current node: where the world is, or was told to be. Captured by spawn
    /// requests made before a travel resolves its destination (seed 001, Stale-Node Discard).
    session_node: NodeId,
    /// Index into the travel route of the next route travel.
    route_next: usize,
    /// A route travel came due during a transition; it starts when that transition ends.
    route_due: bool,
    next_pawn: u64,
    next_transition: u64,
    next_ticket: u64,
    session: SessionState,
    recent: RecentPlayers,
    hazards: Vec<HazardState>,
    /// The players a settle timeout last ended a transition without (for operators).
    last_unplaced: Vec<PlayerId>,
    outputs: VecDeque<Output>,
    counters: Counters,
}

impl Game {
    /// A game on `world`, booting at `now`: it asks for the session save and starts the boot
    /// travel, which resolves its destination (the saved node, or the start node) once the
    /// session save settles.
    pub fn new(rules: GameRules, world: Arc<WorldMap>, now: Instant) -> Self {
        let session_node = world.start_node.clone();
        let hazards = world
            .hazards
            .iter()
            .map(|h| HazardState { next_exposure: now + h.exposure, cursor: 0 })
            .collect();
        let mut game = Game {
            rules,
            streaming: WorldStreaming::new(world.governs_session),
            world,
            players: BTreeMap::new(),
            connections: HashMap::new(),
            pawns: BTreeMap::new(),
            transition: None,
            spawns: SpawnQueue::default(),
            timers: TimerTable::default(),
            session_node: session_node.clone(),
            route_next: 0,
            route_due: false,
            next_pawn: 1,
            next_transition: 1,
            next_ticket: 1,
            session: SessionState::Loading,
            recent: RecentPlayers::default(),
            hazards,
            last_unplaced: Vec::new(),
            outputs: VecDeque::new(),
            counters: Counters::default(),
        };
        if let Some(route) = &game.world.travel {
            game.timers.set(Timer::RouteTravel, now + route.interval);
        }
        game.rearm_effects_timer();
        game.outputs.push_back(Output::LoadSession);
        game.start_transition(now, transition::Destination::SessionNode);
        game
    }

    /// Feeds one input.
    pub fn handle(&mut self, now: Instant, input: Input) {
        let span = self.transition_span();
        let _entered = span.enter();
        match input {
            Input::Login { connection, player } => self.handle_login(now, connection, player),
            Input::Disconnected { connection } => self.handle_disconnect(now, connection),
            Input::Message { connection, message } => self.handle_message(now, connection, message),
            Input::Streamed { load } => self.handle_streamed(now, load),
            Input::SpawnPointsRegistered { load } => self.streaming.spawn_points_registered(load),
            Input::Travel { node } => {
                if self.world.node(&node).is_some() {
                    self.start_transition(now, transition::Destination::Node(node));
                } else {
                    tracing::warn!(%node, "travel refused: no such node");
                }
            }
            Input::PlayerLoaded { player, ticket, outcome } => {
                self.handle_player_loaded(now, &player, ticket, outcome)
            }
            Input::SessionLoaded { outcome } => self.handle_session_loaded(now, outcome),
        }
    }

    /// Handles every timer due at `now`. Call it when [`Game::poll_timeout`] has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let span = self.transition_span();
        let _entered = span.enter();
        for timer in self.timers.take_expired(now) {
            match timer {
                Timer::SpawnRetry => self.process_pending_spawns(now),
                Timer::SpawnSettle => self.try_finish_transition(now),
                Timer::ClientReady => self.handle_client_ready_timeouts(now),
                Timer::RouteTravel => self.travel_route(now),
                Timer::Effects => self.handle_effects(now),
            }
        }
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the core next needs [`Game::handle_timeout`], if ever.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Decision counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Logged-in players.
    pub fn player_count(&self) -> usize {
        self.players.len()
    }

    /// The id of the transition in flight, if any.
    pub fn transition_id(&self) -> Option<TransitionId> {
        self.transition.as_ref().map(|t| t.id)
    }

    fn transition_span(&self) -> tracing::Span {
        self.transition.as_ref().map_or_else(tracing::Span::none, |t| t.span.clone())
    }

    fn send(&mut self, connection: ConnectionId, message: ServerMessage) {
        self.outputs.push_back(Output::Send { connection, message });
    }

    fn broadcast(&mut self, message: ServerMessage) {
        self.outputs.push_back(Output::Broadcast { message });
    }

    /// Refuses a client message: an `Error` to the sender only, rate-limited per player.
    fn refuse(&mut self, now: Instant, connection: ConnectionId, code: ErrorCode, detail: String) {
        self.counters.client_errors += 1;
        tracing::debug!(connection = connection.0, ?code, %detail, "client message refused");
        let verdict = self
            .connections
            .get(&connection)
            .and_then(|id| self.players.get_mut(id))
            .map_or(RefusalVerdict::Answer, |p| p.refusals.record(now));
        match verdict {
            RefusalVerdict::Answer => self.send(connection, ServerMessage::Error { code, detail }),
            RefusalVerdict::Limit => self.send(
                connection,
                ServerMessage::Error {
                    code: ErrorCode::RateLimited,
                    detail: format!(
                        "more than {} refused requests in {} s; further ones are dropped",
                        RefusalWindow::ANSWERED,
                        RefusalWindow::WINDOW.as_secs()
                    ),
                },
            ),
            RefusalVerdict::Drop => {}
            RefusalVerdict::Close => {
                tracing::warn!(connection = connection.0, "too many refused requests; closing");
                self.outputs.push_back(Output::Close { connection, code: CloseCode::Abuse });
                self.remove_player(now, connection);
            }
        }
    }

    fn handle_login(&mut self, now: Instant, connection: ConnectionId, id: PlayerId) {
        // A relaunch of a player still connected replaces the old connection entirely.
        if let Some(old) = self.players.get(&id).map(|p| p.connection) {
            self.counters.logins_replaced += 1;
            tracing::info!(player = %id, "login replaces an older connection of the same player");
            self.outputs.push_back(Output::Close { connection: old, code: CloseCode::Replaced });
            self.remove_player(now, old);
        }
        if self.players.len() >= self.rules.max_players {
            self.counters.logins_refused_full += 1;
            self.send(
                connection,
                ServerMessage::Rejected {
                    reason: RejectReason::ServerFull,
                    detail: format!(
                        "the server holds its cap of {} players",
                        self.rules.max_players
                    ),
                },
            );
            self.outputs.push_back(Output::Close { connection, code: CloseCode::ServerFull });
            return;
        }
        self.counters.logins += 1;
        let ticket = self.begin_player_load(&id);
        let mut player = Player::new(
            id.clone(),
            connection,
            self.pick_team(),
            ticket,
            self.world.max_health,
            now,
        );
        // A relaunch remembers its class, so it can spawn before its save reloads.
        player.character_def = self.recent.recall(&id);
        tracing::info!(player = %id, connection = connection.0, "player logged in");
        self.send(
            connection,
            ServerMessage::Welcome {
                player_id: id.clone(),
                current_node: self.streaming.streamed_node().cloned(),
            },
        );
        self.replicate_world_to(connection);
        let view = player.view();
        self.players.insert(id.clone(), player);
        self.connections.insert(connection, id.clone());
        self.broadcast(ServerMessage::PlayerStateUpdated(view));
        self.admit_player(now, &id);
    }

    /// Sends a newly connected client everything already replicated: player states and pawns.
    fn replicate_world_to(&mut self, connection: ConnectionId) {
        let states: Vec<_> = self.players.values().map(Player::view).collect();
        for view in states {
            self.send(connection, ServerMessage::PlayerStateUpdated(view));
        }
        let pawns: Vec<_> = self.pawns.values().map(Pawn::view).collect();
        for view in pawns {
            let dead = !view.alive;
            let pawn_id = view.pawn_id;
            self.send(connection, ServerMessage::PawnSpawned(view));
            if dead {
                self.send(connection, ServerMessage::PawnDied { pawn_id });
            }
        }
    }

    fn handle_disconnect(&mut self, now: Instant, connection: ConnectionId) {
        if self.connections.contains_key(&connection) {
            self.remove_player(now, connection);
        }
    }

    /// Removes the player on `connection` and its pawns, and re-evaluates anything that was
    /// waiting for it, so no departed client can wedge a transition (DESIGN §4).
    fn remove_player(&mut self, now: Instant, connection: ConnectionId) {
        let Some(id) = self.connections.get(&connection).cloned() else { return };
        let node = self
            .players
            .get(&id)
            .and_then(|p| p.pawn)
            .and_then(|pawn| self.pawns.get(&pawn))
            .map(|pawn| pawn.node.clone());
        self.save_player(&id, node);
        self.connections.remove(&connection);
        let Some(player) = self.players.remove(&id) else { return };
        tracing::info!(player = %id, "player left");
        if let Some(def) = &player.character_def {
            self.recent.remember(id.clone(), def.clone());
        }
        self.spawns.remove_player(&id);
        let owned: Vec<PawnId> =
            self.pawns.values().filter(|p| p.owner == id).map(|p| p.id).collect();
        for pawn_id in owned {
            self.pawns.remove(&pawn_id);
            self.broadcast(ServerMessage::PawnDestroyed { pawn_id });
        }
        self.broadcast(ServerMessage::PlayerLeft { player_id: id });
        self.on_player_removed(now);
    }

    fn handle_message(&mut self, now: Instant, connection: ConnectionId, message: ClientMessage) {
        let Some(id) = self.connections.get(&connection).cloned() else {
            // Not logged in (or already removed): the shell only forwards logged-in traffic,
            // so this is a late message from a closing connection.
            return;
        };
        match message {
            ClientMessage::Hello { .. } => self.refuse(
                now,
                connection,
                ErrorCode::UnexpectedMessage,
                "Hello is only valid as the first message".into(),
            ),
            ClientMessage::TransitionReady { transition_id } => {
                self.handle_transition_ready(now, connection, &id, transition_id)
            }
            ClientMessage::PossessionAcknowledged { pawn_id } => {
                self.handle_possession_acknowledged(now, connection, &id, pawn_id)
            }
            ClientMessage::RestartRequest => self.handle_restart_request(now, connection, &id),
            ClientMessage::Leave => {
                self.outputs.push_back(Output::Close { connection, code: CloseCode::Leave });
                self.remove_player(now, connection);
            }
        }
    }

    fn handle_possession_acknowledged(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: &PlayerId,
        pawn_id: PawnId,
    ) {
        let Some(player) = self.players.get_mut(id) else {
            return;
        };
        if player.pawn == Some(pawn_id) {
            player.acknowledged = Some(pawn_id);
            player.placement_excused = false;
            tracing::debug!(player = %id, pawn = %pawn_id, "possession acknowledged");
            self.try_finish_transition(now);
        } else if pawn_id.0 < self.next_pawn {
            // An acknowledgement for a pawn this player no longer possesses: stale, ignore.
            self.counters.stale_ignored += 1;
        } else {
            self.refuse(
                now,
                connection,
                ErrorCode::UnknownPawn,
                format!("pawn {pawn_id} was never possessed for this player"),
            );
        }
    }

    /// Balances teams: the smaller of team 1 and team 2.
    fn pick_team(&self) -> gatehouse_protocol::TeamId {
        let on = |t: u8| self.players.values().filter(|p| p.team.0 == t).count();
        gatehouse_protocol::TeamId(if on(1) <= on(2) { 1 } else { 2 })
    }

    /// The route's next travel. A route travel due while a transition is in flight waits for
    /// it to end: a scheduled travel never supersedes (an operator's does), so a client that
    /// never reports ready or never acknowledges is bounded by the client-ready and settle
    /// timeouts instead of having its clock reset by every route travel.
    fn travel_route(&mut self, now: Instant) {
        let Some(route) = self.world.travel.clone() else {
            return;
        };
        if self.transition.is_some() {
            self.route_due = true;
            return;
        }
        self.route_due = false;
        let node = route.route[self.route_next % route.route.len()].clone();
        self.route_next = (self.route_next + 1) % route.route.len();
        self.timers.set(Timer::RouteTravel, now + route.interval);
        tracing::info!(%node, "route travel");
        self.start_transition(now, transition::Destination::Node(node));
    }
}
