//! Deterministic scenario tests of the game core: explicit time, no sleeps, no sockets.
//!
//! [`Harness`] drives a [`Game`] the way the shell does, but with simulated time that jumps
//! straight to the next deadline, and with every streaming completion delivered by hand so each
//! test chooses the arrival order.

mod arrivals;
mod complexity;
mod crowd;
mod edges;
mod flow;
mod persistence;
mod progress;
mod properties;
mod respawn;
mod responses;
mod seats;
mod spawning;
mod transitions;
mod travel;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_protocol::{
    ClientMessage, CloseCode, NodeId, PawnId, PlayerId, ServerMessage, TransitionId,
};

use super::{ConnectionId, Departure, Game, GameRules, Input, LoadId, Output, StreamRequest};
use crate::ClientReadyPolicy;
use crate::model::LoadOutcome;
use crate::world::WorldMap;

/// Two plain nodes and a dungeon; spawn points register 50 ms after a node streams. The file is
/// the test worlds' one home (`tests/worlds/`), shared with every other test crate.
pub(super) const WORLD: &str = include_str!("../../../tests/worlds/core.toml");

/// A poison hazard on `harbor` that kills a 100-health player: 50 damage every 100 ms for
/// 300 ms, exposing someone every 500 ms.
pub(super) const HARBOR_POISON: &str = "[[hazard]]\nnode = \"harbor\"\neffect = \"Effect.DamageOverTime.Poison\"\ndamage_per_tick = 50\ntick_ms = 100\nduration_ms = 300\nexposure_ms = 500\n";

/// `world` with a travel route: `route`'s nodes in turn, one every `interval_ms`.
pub(super) fn with_route(world: &str, route: &[&str], interval_ms: u64) -> String {
    let route: Vec<String> = route.iter().map(|n| format!("{n:?}")).collect();
    format!("{world}\n[travel]\nroute = [{}]\ninterval_ms = {interval_ms}\n", route.join(", "))
}

/// `world` with the hazard `hazard` (a `[[hazard]]` table).
pub(super) fn with_hazard(world: &str, hazard: &str) -> String {
    format!("{world}\n{hazard}")
}

pub(super) fn node(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

pub(super) fn pid(s: &str) -> PlayerId {
    PlayerId::new(s).unwrap()
}

pub(super) fn rules() -> GameRules {
    GameRules {
        spawn_settle_timeout: Duration::from_secs(15),
        spawn_retry: Duration::from_millis(100),
        client_ready_timeout: Duration::from_secs(30),
        client_ready_policy: ClientReadyPolicy::Kick,
        // Longer than every other bound: only the tests of the response timeout meet it.
        client_response_timeout: Duration::from_secs(60),
        client_response_crowd_floor: None,
        max_players: 64,
        transition_max: Duration::from_secs(120),
        player_state_retention: Duration::from_secs(300),
        login_burst: 5,
        login_interval: Duration::from_secs(2),
        max_frame_len: 65_536,
        max_failed_transitions: 3,
        seat_hold: Duration::from_secs(10),
        peer_timeout: Duration::from_secs(2),
        resolve_timeout: Duration::from_secs(5),
        server: None,
    }
}

/// Drives a [`Game`] with simulated time.
pub(super) struct Harness {
    pub(super) game: Game,
    pub(super) now: Instant,
    /// Every output so far, in order.
    pub(super) log: Vec<Output>,
    /// Streaming requests not yet completed by the test.
    pub(super) streams: Vec<StreamRequest>,
    /// Whether loads are answered `NotFound` at once (the default) or kept for the test.
    pub(super) auto_load: bool,
    /// Player loads not yet answered (when `auto_load` is off).
    pub(super) loads: Vec<(PlayerId, u64)>,
    /// Whether the session load is unanswered (when `auto_load` is off).
    pub(super) session_load: bool,
    next_connection: u64,
}

impl Harness {
    pub(super) fn new() -> Self {
        Self::with(WORLD, rules())
    }

    pub(super) fn with(world: &str, rules: GameRules) -> Self {
        Self::build(world, rules, true)
    }

    /// A harness whose loads wait for the test to answer them.
    pub(super) fn holding_loads(world: &str) -> Self {
        Self::build(world, rules(), false)
    }

    fn build(world: &str, rules: GameRules, auto_load: bool) -> Self {
        let world = WorldMap::from_toml(world).unwrap();
        let now = Instant::now();
        let game = Game::new(rules, Arc::new(world), now);
        let mut h = Harness {
            game,
            now,
            log: Vec::new(),
            streams: Vec::new(),
            auto_load,
            loads: Vec::new(),
            session_load: false,
            next_connection: 1,
        };
        h.drain();
        h
    }

    /// Drains outputs into the log; streaming requests are kept for the test to complete, and
    /// loads are answered `NotFound` at once unless the harness holds them.
    pub(super) fn drain(&mut self) {
        loop {
            let mut answers = Vec::new();
            while let Some(out) = self.game.poll_output() {
                match &out {
                    Output::Stream(req) => self.streams.push(req.clone()),
                    Output::LoadPlayer { player, ticket } if self.auto_load => {
                        answers.push(Input::PlayerLoaded {
                            player: player.clone(),
                            ticket: *ticket,
                            outcome: LoadOutcome::NotFound,
                        });
                    }
                    Output::LoadPlayer { player, ticket } => {
                        self.loads.push((player.clone(), *ticket))
                    }
                    Output::LoadSession if self.auto_load => {
                        answers.push(Input::SessionLoaded { outcome: LoadOutcome::NotFound });
                    }
                    Output::LoadSession => self.session_load = true,
                    _ => {}
                }
                self.log.push(out);
            }
            if answers.is_empty() {
                break;
            }
            for input in answers {
                self.game.handle(self.now, input);
            }
        }
    }

    /// Answers the held load of `player`.
    pub(super) fn answer_load(
        &mut self,
        player: &str,
        outcome: LoadOutcome<crate::model::PlayerSave>,
    ) {
        let i = self.loads.iter().position(|(p, _)| p.as_str() == player).expect("a held load");
        let (player, ticket) = self.loads.remove(i);
        self.input(Input::PlayerLoaded { player, ticket, outcome });
    }

    /// Answers the held session load.
    pub(super) fn answer_session(&mut self, outcome: LoadOutcome<crate::model::SessionSave>) {
        assert!(std::mem::take(&mut self.session_load), "a held session load");
        self.input(Input::SessionLoaded { outcome });
    }

    pub(super) fn input(&mut self, input: Input) {
        self.game.handle(self.now, input);
        self.after_step();
    }

    /// After every step: the outputs are drained, and each player's effects are paused exactly
    /// while its character is frozen (the pause sync visits only what a step touched; this
    /// walks everyone to check it missed nothing).
    fn after_step(&mut self) {
        self.drain();
        assert!(self.game.effect_pauses_in_sync(), "effect pauses out of step at {:?}", self.now);
    }

    /// Moves time forward by `by`, firing every deadline on the way, in order.
    pub(super) fn advance(&mut self, by: Duration) {
        let end = self.now + by;
        while let Some(at) = self.game.poll_timeout().filter(|&at| at <= end) {
            self.now = self.now.max(at);
            self.game.handle_timeout(self.now);
            self.after_step();
        }
        self.now = end;
    }

    pub(super) fn login(&mut self, name: &str) -> ConnectionId {
        let connection = self.connect();
        self.input(Input::Login { connection, player: pid(name) });
        connection
    }

    /// A new connection id, as the network driver assigns one.
    pub(super) fn connect(&mut self) -> ConnectionId {
        let connection = ConnectionId(self.next_connection);
        self.next_connection += 1;
        connection
    }

    pub(super) fn send(&mut self, connection: ConnectionId, message: ClientMessage) {
        self.input(Input::Message { connection, message });
    }

    pub(super) fn disconnect(&mut self, connection: ConnectionId) {
        self.input(Input::Disconnected { connection, departure: Departure::lost("test") });
    }

    /// Completes the oldest pending streaming request whose description contains `what`.
    pub(super) fn finish_stream(&mut self, what: &str) -> LoadId {
        let i = self
            .streams
            .iter()
            .position(|s| s.what.contains(what))
            .unwrap_or_else(|| panic!("no pending stream for {what:?}: {:?}", self.streams));
        let req = self.streams.remove(i);
        self.input(Input::Streamed { load: req.load });
        req.load
    }

    /// Completes a node load and registers its spawn points at once.
    pub(super) fn stream_node(&mut self, name: &str) -> LoadId {
        let load = self.finish_stream(&format!("node {name}"));
        self.input(Input::SpawnPointsRegistered { load });
        load
    }

    pub(super) fn transition(&self) -> TransitionId {
        self.game.transition_id().expect("a transition in flight")
    }

    pub(super) fn ready(&mut self, connection: ConnectionId) {
        let transition_id = self.transition();
        self.send(connection, ClientMessage::TransitionReady { transition_id });
    }

    /// Messages sent to `connection` (directly or by broadcast while it was logged in).
    pub(super) fn received(&self, connection: ConnectionId) -> Vec<ServerMessage> {
        let mut logged_in = false;
        let mut out = Vec::new();
        for o in &self.log {
            match o {
                Output::Send { connection: c, message } if *c == connection => {
                    if matches!(message, ServerMessage::Welcome { .. }) {
                        logged_in = true;
                    }
                    out.push(message.clone());
                }
                Output::Broadcast { message } if logged_in => out.push(message.clone()),
                Output::Close { connection: c, .. } if *c == connection => logged_in = false,
                _ => {}
            }
        }
        out
    }

    /// The pawn most recently possessed for `connection`.
    pub(super) fn possessed(&self, connection: ConnectionId) -> Option<PawnId> {
        self.received(connection).iter().rev().find_map(|m| match m {
            ServerMessage::Possessed { pawn_id } => Some(*pawn_id),
            _ => None,
        })
    }

    /// Acknowledges the pawn most recently possessed for `connection`.
    pub(super) fn ack(&mut self, connection: ConnectionId) {
        let pawn_id = self.possessed(connection).expect("a possessed pawn to acknowledge");
        self.send(connection, ClientMessage::PossessionAcknowledged { pawn_id });
    }

    pub(super) fn ended(&self, id: TransitionId) -> bool {
        self.log.iter().any(|o| {
            matches!(o, Output::Broadcast { message: ServerMessage::EndTransition { transition_id } } if *transition_id == id)
        })
    }

    pub(super) fn closed(&self, connection: ConnectionId) -> Option<CloseCode> {
        self.log.iter().find_map(|o| match o {
            Output::Close { connection: c, code } if *c == connection => Some(*code),
            _ => None,
        })
    }

    pub(super) fn pawns_of(&self, player: &str) -> usize {
        self.game.roster.pawns().filter(|p| p.owner.as_str() == player).count()
    }

    /// The player named `name`.
    pub(super) fn player(&self, name: &str) -> &super::players::Player {
        self.game.roster.player(&pid(name)).expect("a logged-in player")
    }

    /// Kills `name` through the real effect path: a damage-over-time effect that kills at its
    /// first tick (10 ms) and is still active afterwards (it lasts 10 s), as the DoT that killed
    /// a player is when the restart comes.
    pub(super) fn kill(&mut self, name: &str) {
        let burn = gatehouse_tags::catalog::EFFECT_DAMAGE_OVER_TIME_BURN;
        self.afflict(name, burn, Duration::from_millis(10), 1000, Duration::from_secs(10));
        self.advance(Duration::from_millis(10));
        assert!(self.player(name).is_dead(), "{name} died");
    }

    /// Applies to `name`, now, a damage-over-time effect `tag` of `damage` per `tick` (the
    /// first one `tick` from now) that lasts `lasts`, and re-arms the effects timer.
    pub(super) fn afflict(
        &mut self,
        name: &str,
        tag: gatehouse_tags::GameplayTag,
        tick: Duration,
        damage: u32,
        lasts: Duration,
    ) {
        let now = self.now;
        let mut player = self.game.roster.player_mut(&pid(name)).expect("a logged-in player");
        player.abilities.apply(super::abilities::ActiveEffect {
            tag,
            duration: super::abilities::EffectDuration::Finite {
                expires: now + lasts,
                next_tick: now + tick,
                tick,
                damage,
            },
        });
        drop(player);
        self.game.rearm_effects_timer();
    }

    /// Every broadcast so far.
    pub(super) fn broadcasts(&self) -> Vec<ServerMessage> {
        self.log
            .iter()
            .filter_map(|o| match o {
                Output::Broadcast { message } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// Index in the log of the first output matching `f`.
    pub(super) fn position(&self, f: impl Fn(&Output) -> bool) -> Option<usize> {
        self.log.iter().position(f)
    }

    /// Records that `name`'s client streamed `node` (for tests of the server's own gate).
    pub(super) fn client_streamed(&mut self, name: &str, node_name: &str) {
        self.game.roster.player_mut(&pid(name)).expect("a logged-in player").loaded =
            Some(node(node_name));
    }

    /// The join most recently shown to `connection`.
    pub(super) fn shown_join(
        &self,
        connection: ConnectionId,
    ) -> Option<gatehouse_protocol::JoinId> {
        self.received(connection).iter().rev().find_map(|m| match m {
            ServerMessage::ShowJoin { join_id, .. } => Some(*join_id),
            _ => None,
        })
    }

    /// Reports the join most recently shown to `connection` streamed.
    pub(super) fn join_ready(&mut self, connection: ConnectionId) {
        let join_id = self.shown_join(connection).expect("a join to report ready for");
        self.send(connection, ClientMessage::JoinReady { join_id });
    }

    /// Logs in `name` and, if it was shown a join (no transition ran), reports the join
    /// streamed: its pawn follows once the node is ready.
    pub(super) fn joined(&mut self, name: &str) -> ConnectionId {
        let c = self.login(name);
        if self.shown_join(c).is_some() {
            self.join_ready(c);
        }
        c
    }

    /// Logs in `name`, and places it (a late join after boot: it streams, then gets its pawn).
    pub(super) fn placed(&mut self, name: &str) -> ConnectionId {
        let c = self.login(name);
        self.join_ready(c);
        self.ack(c);
        assert!(self.player(name).is_placed());
        c
    }

    /// A harness whose loads wait for the test, booted: the session load answered (no save),
    /// the start node streamed, no players.
    pub(super) fn booted_holding_loads() -> Self {
        let mut h = Harness::holding_loads(WORLD);
        h.answer_session(LoadOutcome::NotFound);
        h.stream_node("harbor");
        h
    }

    /// Logs in `name` while no transition runs, answers its held save load (none found) and
    /// places it through its join.
    pub(super) fn placed_answering_load(&mut self, name: &str) -> ConnectionId {
        let c = self.login(name);
        self.answer_load(name, LoadOutcome::NotFound);
        self.join_ready(c);
        self.ack(c);
        assert!(self.player(name).is_placed());
        c
    }

    /// Boots: streams the start node and ends the boot transition (no players).
    pub(super) fn booted() -> Self {
        let mut h = Harness::new();
        let boot = h.transition();
        h.stream_node("harbor");
        assert!(h.ended(boot), "an empty boot transition ends once its node streamed");
        h
    }
}
