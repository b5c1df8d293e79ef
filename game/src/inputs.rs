//! The handlers of inputs and client messages: login (a join of its own, or the transition in
//! flight), departure, ready reports, join reports, possession acknowledgements, travels and
//! streaming completions.
//!
//! A handler records what happened (state changes in the sub-states, outputs) and returns; it
//! never runs a re-check. `Game::handle` runs the advance pass after it, which moves the
//! transition and the spawn queue on (the `game` module documentation, "One step").

use std::time::Instant;

use gatehouse_protocol::{
    ClientMessage, CloseCode, ErrorCode, JoinId, NodeId, PawnId, PlayerId, RejectReason,
    ServerMessage,
};

use super::joins::JoinReport;
use super::pass::level_names;
use super::persistence::{self, PlayerLoad};
use super::players::{Player, RefusalVerdict, RefusalWindow};
use super::spawn::SpawnKind;
use super::streaming::{SpawnPoints, SpawnPointsOn, Streamed};
use super::transition::{Destination, Phase, ReadyReport};
use super::{ConnectionId, Departure, Game, LoadId, LoginRefusal, Observation, Output, StreamPart};
use crate::model::{LoadOutcome, PlayerSave, SessionSave};

impl Game {
    /// A login of a player still connected on `old`: that connection is closed and its player
    /// removed (a relaunch replaces the old connection entirely).
    pub(crate) fn replace_connection(&mut self, now: Instant, old: ConnectionId) {
        self.out.counters.logins_replaced += 1;
        if let Some(player) = self.roster.player_on(old) {
            tracing::debug!(%player, "login replaces an older connection of the same player");
        }
        self.out.push(Output::Close { connection: old, code: CloseCode::Replaced });
        self.remove_player(now, old, Departure::closed(CloseCode::Replaced));
    }

    /// Whether `id` may log in on `connection` now (`logins.rs`); a login past its rate is
    /// answered `Rejected { TooManyLogins }` and closed, before it changes anything.
    pub(crate) fn admit_login(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: &PlayerId,
    ) -> bool {
        let Err(wait) = self.roster.admit_login(id, now) else {
            return true;
        };
        self.out.observe(Observation::LoginRefused { reason: LoginRefusal::TooManyLogins });
        tracing::info!(player = %id, connection = connection.0,
            retry_after_ms = crate::fields::millis(wait), "login refused: too many logins");
        self.send(
            connection,
            ServerMessage::Rejected {
                reason: RejectReason::TooManyLogins,
                detail: format!(
                    "player {id} logged in more than {} times in a row; try again in {} ms",
                    self.rules.login_burst,
                    crate::fields::millis(wait).max(1)
                ),
            },
        );
        self.out.push(Output::Close { connection, code: CloseCode::Rejected });
        false
    }

    /// A connection authenticated as `id`: refused when the server is full; otherwise the
    /// player joins (with the player state it left, if it relaunches within the retention), is
    /// welcomed (the shell greets it with the world clients know, [`crate::KnownWorld`]), and
    /// is admitted. Its one INFO line is logged in
    /// `caller`, the span [`Game::handle`] was called in.
    pub(crate) fn handle_login(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: PlayerId,
        caller: &tracing::Span,
    ) {
        if self.transition.unavailable().is_some() {
            // The server is stopping: nothing to join.
            self.send(
                connection,
                ServerMessage::Rejected {
                    reason: RejectReason::ShuttingDown,
                    detail: "the world is unavailable and the server is stopping".into(),
                },
            );
            self.out.push(Output::Close { connection, code: CloseCode::ShuttingDown });
            return;
        }
        // A relaunch of a traveller whose seat is redeemed takes it: its seat held its room
        // (docs/spec/travel.md V9, V10).
        if self.seats.take(&id, connection).is_some() {
            tracing::debug!(player = %id, "relaunch of a traveller: it takes its seat");
            self.log_in(now, connection, id, caller, true);
            return;
        }
        // A seat granted to another server's travel holds its room until its traveller comes
        // (docs/spec/travel.md V9).
        if self.roster.len() + self.seats.holding_room() >= self.rules.max_players {
            self.out.counters.logins_refused_full += 1;
            self.out.observe(Observation::LoginRefused { reason: LoginRefusal::ServerFull });
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
            self.out.push(Output::Close { connection, code: CloseCode::ServerFull });
            return;
        }
        self.log_in(now, connection, id.clone(), caller, false);
        // A moving player's relaunch here is sent on again (docs/spec/travel.md V9).
        self.mover_relaunched(&id);
    }

    /// Logs a player in on `connection` once nothing refused it: its save asked for, its
    /// player state kept from a recent departure restored (not a traveller's: its state comes
    /// with its handoff save, docs/spec/travel.md V4), welcomed and admitted.
    pub(crate) fn log_in(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: PlayerId,
        caller: &tracing::Span,
        traveller: bool,
    ) {
        self.out.counters.logins += 1;
        // `WillAutoLoad`: the player's save is asked for now.
        let ticket = self.roster.allocate_ticket();
        self.out.push(Output::LoadPlayer { player: id.clone(), ticket });
        let mut player = Player::new(
            id.clone(),
            connection,
            self.roster.smaller_team(),
            ticket,
            self.world.max_health,
        );
        // A relaunch gets back the player state it left: death, effects, latches, team, and its
        // class, so it can spawn before its save reloads. Only RestartRequest clears death.
        let kept = self.session.take_kept(&id, now, self.rules.player_state_retention);
        let kept = kept.filter(|_| !traveller);
        let restored = kept.is_some();
        if let Some(kept) = kept {
            self.out.counters.player_states_restored += 1;
            tracing::debug!(player = %id, dead = kept.abilities.is_dead(),
                "relaunch: the kept player state is restored");
            player.restore(kept);
        }
        // The login's one INFO line (docs/operations.md, "Logs"), in the caller's span: the
        // server's is the connection's, which adds the client's address. Its other steps are
        // DEBUG.
        // A relaunch also says whether it comes back dead and the class it spawns as; a new
        // player's class comes with its save (`preset resolved`, DEBUG).
        let class = player.character_def.as_ref().map(tracing::field::display);
        tracing::info!(parent: caller, player = %id, connection = connection.0,
            relaunch = restored, dead = player.abilities.is_dead(), character_def = class,
            "player logged in");
        self.send(
            connection,
            ServerMessage::Welcome {
                player_id: id.clone(),
                current_node: self.streaming.streamed_node().cloned(),
                max_frame_len: self.rules.max_frame_len,
            },
        );
        // The shell follows the Welcome with the world as clients know it (KnownWorld,
        // docs/protocol.md 4.5); the core does not build it for every login.
        let view = player.view();
        let (tags, health) = (player.abilities.tags(), player.abilities.health());
        let kits = player.abilities.granted_kits();
        // A relaunch that kept its class is announced now; anyone else once its save loads, in
        // one `PlayerStateUpdated` with its class (docs/spec/sessions.md S13).
        let announced = player.is_announced();
        self.roster.join(player);
        if announced {
            self.broadcast(ServerMessage::PlayerStateUpdated(view));
            if restored {
                self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
                self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
            }
        }
        // The kits its player holds, which are never granted again: a relaunched client
        // rebuilds its kit state from this (docs/protocol.md 4.3).
        if restored && !kits.is_empty() {
            self.send(connection, ServerMessage::KitsGranted { kits });
        }
        self.admit_player(now, &id);
    }

    /// A player joined: shown the transition in flight and queued for its spawn window, or
    /// taken through a join of its own (late join: it streams before it gets a pawn).
    fn admit_player(&mut self, now: Instant, id: &PlayerId) {
        let node = self.session.node().clone();
        let Some(connection) = self.roster.connection_of(id) else { return };
        let Some(t) = self.transition.current() else {
            self.start_join(now, id.clone());
            return;
        };
        let (transition_id, target) = (t.id, t.target.clone());
        // While its players move to another server there is nothing to show here: it follows
        // the transition that ends the travel (docs/spec/travel.md V2).
        let freezing = matches!(t.phase, Phase::Freezing(_) | Phase::Moving(_));
        let arrival = self.transition.show(id, now);
        if !freezing {
            // `ShowTransition` goes to it now; past Freezing it went to the others already.
            self.responses.ask_shown(id, now);
        }
        self.send(connection, ServerMessage::FreezeCharacters { transition_id });
        if !freezing {
            let (levels, rooms) = self
                .world
                .node(&target)
                .map(|n| (level_names(&n.levels), level_names(&n.rooms)))
                .unwrap_or_default();
            self.send(
                connection,
                ServerMessage::ShowTransition { transition_id, target_node: target, levels, rooms },
            );
        }
        if arrival {
            // The transition already waits for its clients (or its spawn window is open). A
            // stream of arrivals must not hold it open (docs/spec/sessions.md S7), so nothing
            // waits for this one: its ready report, if it comes in time, queues its spawn in
            // the window; otherwise a join places it after the end.
            if let Some(mut p) = self.roster.player_mut(id) {
                p.placement_excused = true;
            }
            return;
        }
        // The possession-time initial spawn captures the node known now.
        self.queue_spawn_request(now, id.clone(), SpawnKind::Initial, node);
    }

    /// The join of a player who logged in while no transition runs: its loading screen goes
    /// up and it streams the world's current node (levels, then rooms for a dungeon); its pawn
    /// comes once it reports them streamed. Nobody else is frozen for it.
    pub(crate) fn start_join(&mut self, now: Instant, id: PlayerId) {
        let Some(connection) = self.roster.connection_of(&id) else { return };
        let node = self.current_spawn_node();
        let (levels, rooms) = self
            .world
            .node(&node)
            .map(|n| (level_names(&n.levels), level_names(&n.rooms)))
            .unwrap_or_default();
        let join_id = self.joins.start(id.clone(), node.clone(), now);
        self.out.counters.joins_started += 1;
        tracing::debug!(player = %id, join = join_id.0, %node, "join: streaming before its pawn");
        self.send(connection, ServerMessage::ShowJoin { join_id, node, levels, rooms });
    }

    /// `Input::Disconnected`: a logged-in player on `connection` leaves (see `remove_player`);
    /// a connection that never logged in leaves nothing behind.
    pub(crate) fn handle_disconnect(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        departure: Departure,
    ) {
        if self.roster.player_on(connection).is_some() {
            self.remove_player(now, connection, departure);
        }
    }

    /// Removes the player on `connection` (saved first) and its pawns; its player state is
    /// kept for a relaunch. The advance pass then re-evaluates everything that waited for it
    /// (its save load, its ready report, its placement), so no departed client can wedge a
    /// transition (docs/spec/transitions.md T9).
    pub(crate) fn remove_player(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        departure: Departure,
    ) {
        self.depart(now, connection, departure, true);
    }

    /// Removes the player on `connection` as [`Game::remove_player`] says, keeping its player
    /// state for a relaunch only if `keep` (a player that moved to another server, or a
    /// traveller sent back to its source, is held elsewhere: docs/spec/travel.md V6, V7).
    pub(crate) fn depart(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        departure: Departure,
        keep: bool,
    ) {
        let Some(id) = self.roster.player_on(connection).cloned() else { return };
        let node = self.roster.possessed_pawn(&id).map(|pawn| pawn.node.clone());
        self.save_player(&id, node);
        let Some((player, pawns)) = self.roster.leave(connection, now) else { return };
        let announced = player.is_announced();
        tracing::info!(player = %id, connection = connection.0, close_code = departure.code_field(),
            reason = %departure.reason, "player left");
        // Its ready report belonged to the connection that left.
        self.transition.forget(&id);
        self.joins.remove(&id);
        self.responses.left(&id);
        self.mover_left(&id);
        self.traveller_left(now, &id, connection);
        self.takes.left(connection);
        if keep {
            self.session.keep(id.clone(), player.keep(now), self.rules.player_state_retention);
        }
        self.spawns.remove_player(&id);
        for pawn_id in pawns {
            self.broadcast(ServerMessage::PawnDestroyed { pawn_id });
        }
        // Clients were never told of a player that leaves before its class is known (S13).
        if announced {
            self.broadcast(ServerMessage::PlayerLeft { player_id: id });
        }
    }

    /// `Input::Message`: one client message from `connection`, dispatched to its handler
    /// (refused if the connection's state does not allow it).
    pub(crate) fn handle_message(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        message: ClientMessage,
    ) {
        let Some(id) = self.roster.player_on(connection).cloned() else {
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
                self.out.push(Output::Close { connection, code: CloseCode::Leave });
                self.remove_player(now, connection, Departure::closed(CloseCode::Leave));
            }
            ClientMessage::JoinReady { join_id } => {
                self.handle_join_ready(now, connection, &id, join_id)
            }
            ClientMessage::TransitionShown { transition_id } => {
                self.handle_transition_shown(now, connection, &id, transition_id)
            }
            ClientMessage::TravelAbandoned { transition_id } => {
                self.handle_travel_abandoned(now, connection, &id, transition_id)
            }
        }
    }

    /// `TravelAbandoned`: the client gave up the travel of a `TravelTo`: for the travel in
    /// flight, the player comes back (docs/spec/travel.md V7); an id of another transition is
    /// ignored, and an id never issued refused (V15).
    fn handle_travel_abandoned(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        id: gatehouse_protocol::TransitionId,
    ) {
        if self.abandon_travel_of(player, id) {
            return;
        }
        if self.transition.was_issued(id) {
            self.out.counters.stale_ignored += 1;
            tracing::debug!(player = %player, stale = id.0, "TravelAbandoned for a transition that is no travel ignored");
        } else {
            self.refuse(
                now,
                connection,
                ErrorCode::UnknownTransition,
                format!("transition {id} was never started"),
            );
        }
    }

    /// `Server_RestartLevel`: a dead player's respawn (docs/spec/transitions.md T13 and T14).
    /// No transition and no loading screen: no level is changing.
    ///
    /// ```text
    /// RestartRequest (gated on State.Dead)
    ///     ResetForRespawn        clear State.Dead, strip finite effects
    ///     Unpossess              the dead pawn lingers
    ///     RestartPlayer ── no pawn? ──> queue through the spawn manager (late-join, current node)
    ///     destroy the dead pawn  last: once its replacement exists
    /// ```
    fn handle_restart_request(&mut self, now: Instant, connection: ConnectionId, id: &PlayerId) {
        let Some(mut player) = self.roster.player_mut(id) else { return };
        if !player.is_dead() {
            drop(player);
            self.refuse(
                now,
                connection,
                ErrorCode::RestartRejected,
                "restart is accepted only while the player holds State.Dead".into(),
            );
            return;
        }
        // ResetForRespawn runs before UnPossess, so the new pawn is possessed by an ability
        // system already cleared of death state.
        player.abilities.reset_for_respawn();
        let (tags, health) = (player.abilities.tags(), player.abilities.health());
        // In the spawn window, the placements awaited only leave (docs/protocol.md 4.2,
        // "Progress"): a player the transition was not waiting for (placed, or excused) is
        // respawned in it, but its acknowledgement is not awaited.
        if self.transition.is_completing() && player.is_placed_or_excused() {
            player.placement_excused = true;
        }
        let dead = player.pawn.take();
        player.acknowledged = None;
        if dead.is_some() {
            player.dead_pawn = dead;
        }
        drop(player);
        self.out.counters.respawns += 1;
        tracing::info!(player = %id, dead_pawn = dead.map(|p| p.0), "respawn requested");
        self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
        self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
        if let Some(pawn_id) = dead {
            self.send(connection, ServerMessage::Unpossessed { pawn_id });
        }
        let node = self.current_spawn_node();
        let registered = SpawnPointsOn::Streamed(SpawnPoints::Registered);
        // Outside a transition's spawn window the spawn queue owns spawning
        // (docs/spec/transitions.md T6): the respawn waits there for OnReadyToSpawn.
        let restarted = if !self.transition.blocks_spawns()
            && self.streaming.spawn_points_on(&node) == registered
        {
            self.restart_player_at_player_start(now, id, &node)
        } else {
            None
        };
        if restarted.is_none() {
            // RestartPlayer has no retry of its own: hand the request to the one component
            // that does.
            tracing::info!(player = %id, %node, "respawn refused for now; queued through the spawn manager");
            self.queue_spawn_request(now, id.clone(), SpawnKind::LateJoin, node);
        }
        self.rearm_effects_timer();
    }

    /// Refuses a client message: an `Error` to the sender only, rate-limited per player.
    pub(crate) fn refuse(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        code: ErrorCode,
        detail: String,
    ) {
        self.out.counters.client_errors += 1;
        tracing::debug!(connection = connection.0, %code, %detail, "client message refused");
        // Per player, not per connection: a reconnect does not reset the window.
        let verdict = match self.roster.player_on(connection).cloned() {
            Some(player) => self.roster.record_refusal(&player, now),
            None => RefusalVerdict::Answer,
        };
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
                self.out.push(Output::Close { connection, code: CloseCode::Abuse });
                self.remove_player(now, connection, Departure::closed(CloseCode::Abuse));
            }
        }
    }

    /// `TransitionShown`: the client answered `ShowTransition`, so the transition does not set
    /// it aside (the response timeout, docs/spec/transitions.md T9). Superseded ids are
    /// ignored, ids never issued refused (docs/spec/sessions.md S12).
    fn handle_transition_shown(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        id: gatehouse_protocol::TransitionId,
    ) {
        match self.transition.classify(id) {
            ReadyReport::Kept => {
                self.responses.answer_shown(player, now);
                self.responses.heard_from(player);
            }
            ReadyReport::NoTransition | ReadyReport::Superseded => {
                self.out.counters.stale_ignored += 1;
                tracing::debug!(player = %player, stale = id.0, "TransitionShown for a transition no longer in flight ignored");
            }
            ReadyReport::NeverIssued => self.refuse(
                now,
                connection,
                ErrorCode::UnknownTransition,
                format!("transition {id} was never started"),
            ),
        }
    }

    /// `Server_ReportTransitionReady`: keeps reports for the current id whatever the phase,
    /// ignores superseded ids, refuses ids never issued. A report from a client set aside
    /// brings it back into the transition, which places it again; one from an arrival queues
    /// its spawn in the window, and nothing waits for it (docs/protocol.md 4.2).
    fn handle_transition_ready(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        id: gatehouse_protocol::TransitionId,
    ) {
        let arrival = self.transition.is_arrival(player);
        let returning = self.transition.is_set_aside(player) && !arrival;
        match self.transition.record_ready(player, id, now) {
            ReadyReport::Kept => {
                // A ready report answers `ShowTransition` too.
                self.responses.answer_shown(player, now);
                self.responses.heard_from(player);
                // Back in: its placement is waited for again, unless the spawn window is open
                // (there the placements awaited only leave, docs/protocol.md 4.2: it is placed
                // in the window, but not waited for).
                if returning
                    && !self.transition.is_completing()
                    && let Some(mut p) = self.roster.player_mut(player)
                {
                    p.placement_excused = false;
                }
                // Its client streamed the destination: a pawn may be placed for it there (a
                // spawn that waited for this report, in Completing, goes now).
                let target = self.transition.resolved_target().cloned();
                if let (Some(target), Some(mut p)) =
                    (target.clone(), self.roster.player_mut(player))
                {
                    p.loaded = Some(target);
                    drop(p);
                    self.spawns.wake();
                }
                if let Some(target) = target.filter(|_| returning || arrival) {
                    if returning {
                        tracing::info!(%player, "client set aside reported ready; back in the transition");
                    }
                    let kind = match self.roster.possessed_pawn(player) {
                        Some(_) => SpawnKind::LevelTransition,
                        None => SpawnKind::Initial,
                    };
                    self.queue_spawn_request(now, player.clone(), kind, target);
                }
            }
            ReadyReport::NoTransition => self.out.counters.stale_ignored += 1,
            ReadyReport::Superseded => {
                self.out.counters.stale_ignored += 1;
                tracing::debug!(player = %player, stale = id.0, "ready report for a superseded transition ignored");
            }
            ReadyReport::NeverIssued => self.refuse(
                now,
                connection,
                ErrorCode::UnknownTransition,
                format!("transition {id} was never started"),
            ),
        }
    }

    /// `AcknowledgePossession`: the player is placed once its client acknowledged the pawn it
    /// possesses (docs/spec/transitions.md T8: placed means acknowledged).
    fn handle_possession_acknowledged(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: &PlayerId,
        pawn_id: PawnId,
    ) {
        let Some(mut player) = self.roster.player_mut(id) else {
            return;
        };
        if player.pawn == Some(pawn_id) {
            player.acknowledge(pawn_id);
            drop(player);
            self.responses.heard_from(id);
            self.responses.forget_acknowledgement(id);
            tracing::debug!(player = %id, pawn = pawn_id.0, "possession acknowledged");
            return;
        }
        let stale = player.possessed.contains(&pawn_id);
        drop(player);
        if stale {
            // An acknowledgement for a pawn this player no longer possesses: stale, ignore.
            self.out.counters.stale_ignored += 1;
        } else {
            // Another player's pawn, or one never issued.
            self.refuse(
                now,
                connection,
                ErrorCode::UnknownPawn,
                format!("pawn {pawn_id} was never possessed for this player"),
            );
        }
    }

    /// `JoinReady`: the joiner streamed its node; its spawn request is queued now (and placed
    /// only there). A report for a join no longer in flight is ignored, an id never issued
    /// refused.
    fn handle_join_ready(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        join_id: JoinId,
    ) {
        match self.joins.report(player, join_id) {
            JoinReport::Loaded(node) => {
                tracing::debug!(%player, join = join_id.0, "joiner streamed its node");
                self.responses.heard_from(player);
                if let Some(mut p) = self.roster.player_mut(player) {
                    p.loaded = Some(node.clone());
                }
                self.queue_spawn_request(now, player.clone(), SpawnKind::LateJoin, node);
            }
            JoinReport::Stale => {
                self.out.counters.stale_ignored += 1;
                tracing::debug!(%player, stale = join_id.0, "report for a join no longer in flight ignored");
            }
            JoinReport::NeverIssued => self.refuse(
                now,
                connection,
                ErrorCode::UnknownJoin,
                format!("join {join_id} was never started"),
            ),
        }
    }

    /// `OnLoadCompleted` for a player (`persistence.rs`): its preset resolved; what clients
    /// were told is replicated where it changed, and the queue is woken (the class is known
    /// now: a spawn that waited for it can go).
    pub(crate) fn handle_player_loaded(
        &mut self,
        now: Instant,
        id: &PlayerId,
        ticket: u64,
        outcome: LoadOutcome<PlayerSave>,
    ) {
        // A traveller's save must be its handoff (docs/spec/travel.md V4).
        let Some(outcome) = self.traveller_loaded(now, id, ticket, outcome) else { return };
        if self.reload_failed(now, id, ticket, matches!(outcome, LoadOutcome::Failed(_))) {
            return;
        }
        let announced = self.roster.player(id).is_some_and(|p| p.is_announced());
        let load =
            persistence::apply_player_load(&self.world, &mut self.roster, id, ticket, outcome);
        self.hold_for_claim(id);
        self.hold_mover(id);
        let PlayerLoad::Applied { failed, holder, connection, view, tags, granted } = load else {
            self.out.counters.stale_ignored += 1;
            return;
        };
        // A save another server holds is taken now, unless a move of the player to here is in
        // flight (docs/spec/travel.md V17).
        if !self.await_the_traveller(id) {
            self.take_if_held_elsewhere(id, holder);
        }
        if failed {
            self.out.counters.load_failures += 1;
        }
        if announced {
            if let Some(view) = view {
                self.broadcast(ServerMessage::PlayerStateUpdated(view));
            }
            if let Some(tags) = tags {
                self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
            }
        } else {
            // Its class is known now: clients are told of it for the first time (S13), as a
            // snapshot would tell them, tags and health only where not the defaults.
            self.announce(id);
        }
        if !granted.is_empty() {
            self.out.counters.kit_grants += 1;
            self.send(connection, ServerMessage::KitsGranted { kits: granted });
        }
        self.spawns.wake();
    }

    /// Tells every client of player `id` (docs/spec/sessions.md S13): its player state, then its
    /// ability tags if it holds any and its health if it is not the world's maximum
    /// (docs/protocol.md 5, `HealthChanged`). Nothing for a player not in the roster.
    fn announce(&mut self, id: &PlayerId) {
        let Some(player) = self.roster.player(id) else { return };
        let (view, tags, health) =
            (player.view(), player.abilities.tags(), player.abilities.health());
        self.broadcast(ServerMessage::PlayerStateUpdated(view));
        if !tags.is_empty() {
            self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
        }
        if health != self.world.max_health {
            self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
        }
    }

    /// `OnLoadCompleted` for the session (`persistence.rs`): the world's node is known now.
    pub(crate) fn handle_session_loaded(&mut self, outcome: LoadOutcome<SessionSave>) {
        let Some(failed) = self.session.apply_load(&self.world, outcome) else { return };
        if failed {
            self.out.counters.load_failures += 1;
        }
        self.spawns.wake();
    }

    /// An operator's travel: it supersedes any transition in flight.
    pub(crate) fn handle_travel(&mut self, now: Instant, node: NodeId) {
        if self.world.node(&node).is_some() {
            self.start_transition(now, Destination::Node(node));
        } else {
            tracing::warn!(%node, "travel refused: no such node");
        }
    }

    /// A streaming request finished. The transition's node moves it to WaitingForClients; any
    /// other finished load is a ready callback.
    pub(crate) fn handle_streamed(&mut self, now: Instant, load: LoadId) {
        match self.streaming.complete(load) {
            Streamed::Stale => {
                self.out.counters.stale_ignored += 1;
                tracing::debug!(load = load.0, "stale streaming completion ignored");
            }
            Streamed::Node(node) => {
                tracing::info!(%node, "node streamed");
                if let Some(spec) = self.world.node(&node).filter(|n| n.is_dungeon()).cloned() {
                    let rooms = self.streaming.begin_rooms();
                    let what = format!("dungeon rooms of {node}");
                    self.stream(rooms, node.clone(), StreamPart::Rooms, &spec.rooms, what);
                }
                if self.transition.node_streamed(&node, now) {
                    tracing::info!(
                        early_ready = self.transition.ready_count(),
                        "waiting for clients"
                    );
                } else {
                    // A fixed level finishing outside a transition is a ready callback too.
                    self.on_level_ready(now);
                }
            }
            Streamed::Rooms => {
                tracing::info!("dungeon rooms streamed");
                self.on_level_ready(now);
            }
        }
    }

    /// A ready callback (dungeon rooms ready, a fixed level streamed): every player gets a
    /// request, and the queue is woken. In Completing that spawns directly rather than
    /// deferring to an OnReadyToSpawn that already happened (docs/spec/transitions.md T6); a
    /// finished load also pushes the settle deadline forward.
    fn on_level_ready(&mut self, now: Instant) {
        self.ensure_spawns_queued_for_all_players(now);
        self.spawns.wake();
        self.transition.hold_until(now + self.rules.spawn_settle_timeout);
    }
}
