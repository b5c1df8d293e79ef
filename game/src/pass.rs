//! The steps of the advance pass, in the order `Game::advance` runs them (the `game` module
//! documentation says why that order); the spawn queue's requests and the announcement of a
//! spawn; the start and end of a transition, its failure at the hard maximum; the timeouts of
//! the answers awaited from clients, and the client-ready policy.
//!
//! Only `Game::advance` calls the steps. Each one reads the sub-states, acts if its condition
//! holds, and records what it did; none calls another.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gatehouse_protocol::{
    CloseCode, JoinId, NodeId, PawnId, PawnIdRuns, PlayerId, ServerMessage, TransitionFailure,
    TransitionId,
};

use super::persistence;
use super::placement::{Attempt, Placement, Spawned};
use super::players::{Persistence, Player};
use super::spawn::SpawnKind;
use super::spawn::SpawnRequest;
use super::timers::Timer;
use super::transition::{Destination, Phase, Transition};
use super::{
    ConnectionId, Departure, Game, LoadId, Observation, Output, SpawnRefusal, StreamPart,
    StreamRequest,
};
use crate::world::LevelSpec;
use gatehouse_protocol::LevelName;

/// The names of `levels`, in order, as `ShowTransition` and `ShowJoin` carry them.
pub(super) fn level_names(levels: &[LevelSpec]) -> Vec<LevelName> {
    levels.iter().map(|l| l.name.clone()).collect()
}
use crate::ClientReadyPolicy;
use crate::fields::Joined;

/// Why a client falls under the client-ready policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lapse {
    /// It never reported ready for the transition within the client-ready timeout.
    NeverReady,
    /// It left the pawn it was possessed unacknowledged for a whole settle timeout.
    NeverAcknowledged,
}

impl Game {
    /// `StartTransition`: freeze, raise the loading screen (and, in a world that asks for it,
    /// rebalance the teams). Every join in flight is superseded (its joiner follows this
    /// transition), and every client's streamed node is forgotten: each streams the
    /// destination and reports it. The advance pass resolves the destination.
    pub(crate) fn start_transition(&mut self, now: Instant, destination: Destination) {
        if let Some(why) = self.transition.unavailable() {
            tracing::warn!(unavailable = %why, "no travel: the world is unavailable");
            return;
        }
        // A travel to another server in flight gives its seats back and recalls its ticketed
        // players, who follow this transition (docs/spec/travel.md V11).
        self.abandon_move(now);
        let target = self.target_of(&destination);
        let (id, superseded) =
            self.transition.start(now, destination, target.clone(), self.roster.ids());
        self.responses.forget_shown();
        self.out.counters.transitions_started += 1;
        if let Some(old) = superseded {
            self.end_excuses(&old);
            self.out.counters.transitions_superseded += 1;
            let duration_ms = crate::fields::millis(now.saturating_duration_since(old.started));
            tracing::info!(old = old.id.0, new = id.0, node = %target, phase = %old.phase.name(),
                outcome = %"superseded", duration_ms,
                "travel supersedes the transition in flight; the loading screen stays up");
        }
        // The player saves in flight now are waited for before the travel; later logins' are not.
        let saves = self
            .roster
            .players()
            .filter_map(|p| match p.persistence {
                Persistence::Loading { ticket } => Some((p.id.clone(), ticket)),
                _ => None,
            })
            .collect();
        self.transition.await_saves(saves);
        let span = self.transition.span();
        let _entered = span.enter();
        tracing::info!("transition started");
        let joins = self.joins.supersede_all();
        if joins > 0 {
            tracing::info!(joins, "the transition supersedes the joins in flight");
        }
        self.roster.forget_loaded_levels();
        // A client still unresponsive is not waited for again: set aside from the start.
        let unresponsive: Vec<PlayerId> = self.responses.unresponsive().cloned().collect();
        for player in &unresponsive {
            self.set_aside(player);
        }
        self.broadcast(ServerMessage::FreezeCharacters { transition_id: id });
        if self.world.rebalance_teams {
            self.rebalance_teams(id);
        }
    }

    /// Whether the player saves the transition in Freezing waits for (those in flight when it
    /// started) have settled: a player gone, or loaded under that ticket, settled it.
    fn awaited_saves_settled(&mut self) -> bool {
        let roster = &self.roster;
        self.transition.awaited_saves_settled(|player, ticket| {
            roster.player(player).is_some_and(|p| p.persistence == Persistence::Loading { ticket })
        })
    }

    /// The node `destination` names now (the session's node for `SessionNode`).
    fn target_of(&self, destination: &Destination) -> NodeId {
        match destination {
            Destination::Node(node) => node.clone(),
            Destination::SessionNode => self.session.node().clone(),
        }
    }

    /// Asks the world to stream `levels`, the `part` of `node`, as load `load` (described
    /// `what`).
    pub(super) fn stream(
        &mut self,
        load: LoadId,
        node: NodeId,
        part: StreamPart,
        levels: &[LevelSpec],
        what: String,
    ) {
        let levels = level_names(levels);
        self.out.push(Output::Stream(StreamRequest { load, node, part, levels, what }));
    }

    /// The world's `rebalance_teams` setting: a team change at every travel, so the
    /// presentation path of clients is exercised; every change is replicated.
    fn rebalance_teams(&mut self, id: TransitionId) {
        for player in self.roster.rebalance_teams(id) {
            // One not announced yet takes its new team into its announcement (S13).
            let announced = self.roster.player(&player).filter(|p| p.is_announced());
            if let Some(view) = announced.map(|p| p.view()) {
                self.broadcast(ServerMessage::PlayerStateUpdated(view));
            }
        }
    }

    /// Step 1, Freezing → Loading once the session save and every player save in flight at the
    /// start settled (docs/spec/transitions.md T4: the server travels only after persistence
    /// settles; a login's save asked for later is not waited for, so a stream of logins cannot
    /// hold the travel). Right before travelling, pending initial spawns are discarded: they
    /// captured a node that may be stale, and OnReadyToSpawn re-queues every pawnless player
    /// against the resolved node (T4 again).
    pub(super) fn resolve_destination(&mut self, now: Instant) {
        let Some(transition_id) = self.transition_id() else { return };
        if self.session.is_loading() || !self.awaited_saves_settled() {
            return;
        }
        let Some(destination) = self.transition.destination() else { return };
        let target = self.target_of(destination);
        let Some(spec) = self.world.node(&target).cloned() else {
            // Travel targets and saved nodes are checked against the world before they are used.
            tracing::error!(node = %target, "transition target is not a world node");
            return;
        };
        if spec.remote {
            // Another server hosts it: nothing streams here, the players move there
            // (docs/spec/travel.md V2).
            self.begin_move(now, transition_id, target);
            return;
        }
        if self.transition.resolve(target.clone(), now) {
            // `ShowTransition` goes to everyone present now: each owes an answer.
            let asked: Vec<PlayerId> = self
                .transition
                .current()
                .map(|t| t.asked_to_answer().cloned().collect())
                .unwrap_or_default();
            for player in &asked {
                self.responses.ask_shown(player, now);
            }
        }
        let discarded = self.spawns.discard_pending(SpawnKind::Initial);
        if discarded > 0 {
            self.out.counters.initial_spawns_discarded += discarded as u64;
            tracing::info!(discarded, "discarded stale initial spawn requests before travel");
        }
        // Requests a superseded transition (or the world before this travel) left for another
        // node would never be placed: drop them too; OnReadyToSpawn re-queues their players.
        let superseded = self.spawns.discard_not_for(&target);
        if superseded > 0 {
            self.out.counters.stale_ignored += superseded as u64;
            tracing::info!(superseded, "dropped spawn requests for another node before travel");
        }
        self.session.set_node(target.clone());
        let load = self.streaming.begin_node(target.clone());
        let what = format!("node {target}");
        self.stream(load, target.clone(), StreamPart::Levels, &spec.levels, what);
        self.broadcast(ServerMessage::ShowTransition {
            transition_id,
            target_node: target,
            levels: level_names(&spec.levels),
            rooms: level_names(&spec.rooms),
        });
    }

    /// Step 2, `CompleteTransition`: WaitingForClients → Completing once every present player
    /// reported ready or is excused. The spawn window opens while characters are still frozen,
    /// with OnReadyToSpawn (a request for every player, spawned by step 3), and the settle-hold
    /// starts.
    pub(super) fn check_clients_ready(&mut self, now: Instant) {
        if !self.transition.all_ready() {
            return;
        }
        self.transition.complete(now, now + self.rules.spawn_settle_timeout);
        tracing::info!("every client ready; completing");
        self.ensure_spawns_queued_for_all_players(now);
        self.spawns.wake();
    }

    /// Step 3, `ProcessPendingSpawns`, when something woke the queue: attempts every request in
    /// order, keeping those that cannot be placed yet. Does nothing while a transition outside
    /// Completing owns spawning (its OnReadyToSpawn wakes the queue again).
    pub(super) fn process_pending_spawns(&mut self, now: Instant) {
        if !self.spawns.take_wake() || self.transition.blocks_spawns() {
            return;
        }
        let mut retry = false;
        // Pawns moved by this pass, per destination in the order first reached.
        let mut teleported: Vec<(NodeId, Vec<PawnId>)> = Vec::new();
        for request in self.spawns.take_all() {
            let span = request.span().clone();
            match span.in_scope(|| self.placement().attempt(&request)) {
                Attempt::Done => {}
                Attempt::Spawned(spawned) => {
                    self.announce_spawn(now, spawned);
                    self.observe_placed(&request, now);
                }
                Attempt::Teleported(pawn) => {
                    self.out.counters.pawns_teleported += 1;
                    self.observe_placed(&request, now);
                    match teleported.iter_mut().find(|(n, _)| *n == request.node) {
                        Some((_, pawns)) => pawns.push(pawn),
                        None => teleported.push((request.node.clone(), vec![pawn])),
                    }
                }
                Attempt::Wait => self.spawns.keep(request),
                Attempt::Refused => {
                    self.out.counters.spawn_refusals += 1;
                    self.out
                        .observe(Observation::SpawnRefused { cause: SpawnRefusal::LevelNotReady });
                    self.spawns.keep(request);
                }
                Attempt::Retry => {
                    retry = true;
                    self.spawns.keep(request);
                }
            }
        }
        for (node, pawns) in teleported {
            let runs = PawnIdRuns::from_ids(pawns);
            tracing::info!(%node, pawns = runs.len(), runs = runs.runs().len(), "pawns teleported");
            for pawn_ids in runs.chunks(gatehouse_protocol::MAX_TELEPORT_RUNS_PER_MESSAGE) {
                self.broadcast(ServerMessage::PawnsTeleported { node: node.clone(), pawn_ids });
            }
        }
        if retry {
            self.out.counters.spawn_point_retries += 1;
            self.out.observe(Observation::SpawnRefused { cause: SpawnRefusal::NoSpawnPoint });
            self.timers.set_earliest(Timer::SpawnRetry, now + self.rules.spawn_retry);
        }
    }

    /// `QueueSpawnRequest`: queue, and wake the queue, which the advance pass processes unless a
    /// transition owns spawning.
    pub(crate) fn queue_spawn_request(
        &mut self,
        now: Instant,
        player: PlayerId,
        kind: SpawnKind,
        node: NodeId,
    ) {
        if self.spawns.has_request_for(&player) {
            tracing::debug!(%player, %kind, "spawn request not queued: one is already pending");
        } else if self.transition.is_set_aside(&player) {
            // Nothing in the transition waits for it: its join places it afterwards.
            tracing::debug!(%player, %kind, "spawn request not queued: set aside");
        } else {
            tracing::debug!(%player, %kind, %node, "spawn request queued");
            self.spawns.queue(SpawnRequest::new(player, kind, node, now));
        }
        self.spawns.wake();
    }

    /// `EnsureSpawnsQueuedForAllPlayers`: a request for every player without one that is
    /// pawnless (initial spawn) or whose pawn stands on another node than the transition's (or
    /// the session's) node (level transition).
    pub(crate) fn ensure_spawns_queued_for_all_players(&mut self, now: Instant) {
        let node =
            self.transition.current().map_or_else(|| self.session.node(), |t| &t.target).clone();
        let mut new = Vec::new();
        for player in self.roster.players() {
            // A client set aside is placed by a join of its own once the transition ends; an
            // arrival's request is queued by its own ready report, or a join places it too.
            if self.spawns.has_request_for(&player.id)
                || self.transition.is_set_aside(&player.id)
                || self.transition.is_arrival(&player.id)
            {
                continue;
            }
            match self.roster.possessed_pawn(&player.id) {
                None => new.push(SpawnRequest::new(
                    player.id.clone(),
                    SpawnKind::Initial,
                    node.clone(),
                    now,
                )),
                Some(pawn) if pawn.node != node => new.push(SpawnRequest::new(
                    player.id.clone(),
                    SpawnKind::LevelTransition,
                    node.clone(),
                    now,
                )),
                Some(_) => {}
            }
        }
        self.spawns.extend(new);
    }

    /// The spawn manager's view: the roster it places pawns in, the streaming state and the
    /// world it reads (`placement.rs`).
    fn placement(&mut self) -> Placement<'_> {
        Placement { roster: &mut self.roster, streaming: &self.streaming, world: &self.world }
    }

    /// `RestartPlayerAtPlayerStart` for `player` on `node` at `now`: the pawn it spawns, if the
    /// gates allowed one (announced as [`Game::announce_spawn`] says).
    pub(crate) fn restart_player_at_player_start(
        &mut self,
        now: Instant,
        player: &PlayerId,
        node: &NodeId,
    ) -> Option<PawnId> {
        let spawned = self.placement().restart_at_player_start(player, node)?;
        let pawn = spawned.pawn.pawn_id;
        self.announce_spawn(now, spawned);
        Some(pawn)
    }

    /// A pawn was spawned and possessed at `now`: every client hears of the pawn (and of its
    /// death, if its player is dead), its player's client of the possession and the kits it
    /// granted, and every client of the dead pawn it replaced; its acknowledgement is awaited.
    fn announce_spawn(&mut self, now: Instant, spawned: Spawned) {
        let Spawned { player, connection, pawn, granted, replaced } = spawned;
        self.out.counters.pawns_spawned += 1;
        let (pawn_id, alive) = (pawn.pawn_id, pawn.alive);
        self.broadcast(ServerMessage::PawnSpawned(pawn));
        if !alive {
            self.broadcast(ServerMessage::PawnDied { pawn_id });
        }
        self.responses.possessed(&player, now);
        self.send(connection, ServerMessage::Possessed { pawn_id });
        if !granted.is_empty() {
            self.out.counters.kit_grants += 1;
            self.send(connection, ServerMessage::KitsGranted { kits: granted });
        }
        if let Some(dead) = replaced {
            self.broadcast(ServerMessage::PawnDestroyed { pawn_id: dead });
        }
    }

    /// Observes that `request`, queued at its `queued`, was placed at `now`.
    fn observe_placed(&mut self, request: &SpawnRequest, now: Instant) {
        let waited = now.saturating_duration_since(request.queued);
        self.out.observe(Observation::SpawnPlaced { waited });
    }

    /// Step 4: a join ends once its joiner is placed (it acknowledged its pawn): `EndJoin`
    /// drops its loading screen.
    pub(super) fn release_placed_joiners(&mut self) {
        let placed: Vec<(PlayerId, JoinId)> = self
            .joins
            .loaded()
            .filter(|(p, _)| self.roster.player(p).is_some_and(Player::is_placed))
            // A traveller's join ends once its claim is decided (docs/spec/travel.md V5).
            .filter(|(p, _)| !self.inbound.holds(p))
            .map(|(p, id)| (p.clone(), id))
            .collect();
        for (player, join_id) in placed {
            self.joins.remove(&player);
            self.out.counters.joins_completed += 1;
            tracing::debug!(%player, join = join_id.0, "joiner placed; join ended");
            if let Some(connection) = self.roster.connection_of(&player) {
                self.send(connection, ServerMessage::EndJoin { join_id });
            }
        }
    }

    /// Step 5, `TryFinishTransition`: in Completing, end when every player is placed;
    /// otherwise hold, pushing the deadline while a load the transition waits for is in flight
    /// (its streaming, the save of a player it waits for; never an arrival's save); at the
    /// deadline with none loading, end anyway and name the unplaced players.
    pub(super) fn try_finish_transition(&mut self, now: Instant) {
        let Some(settle_deadline) = self.transition.settle_deadline() else { return };
        if self.are_players_placed() {
            self.finish_transition(now, false);
            return;
        }
        if now < settle_deadline {
            return;
        }
        if persistence::transition_load_in_flight(&self.roster, &self.streaming) {
            // A slow load of its own is progress, not a wedge; each is bounded (the shell's
            // streaming, the store's load timeout) and the set it can come from only shrinks.
            self.out.counters.settle_extensions += 1;
            self.transition.hold_until(now + self.rules.spawn_settle_timeout);
            return;
        }
        self.finish_transition(now, true);
    }

    /// `ArePlayersPlaced`: no pending spawn request and every player placed (or excused). An
    /// arrival's own request (waiting for its save, say) is not waited for either
    /// (docs/protocol.md 4.2): a join places it if the transition ends first.
    pub(crate) fn are_players_placed(&self) -> bool {
        self.spawns.players().all(|p| self.transition.is_arrival(p))
            && self.roster.all_placed_or_excused()
    }

    /// Completing → none: unfreeze, drop the loading screen, save everyone at the new node.
    /// After a settle timeout, a client that was possessed a pawn and never acknowledged it
    /// for the whole timeout falls under the client-ready policy, so it cannot hold every later
    /// transition for a settle timeout each. Players the server could not give a pawn are not
    /// at fault.
    fn finish_transition(&mut self, now: Instant, timed_out: bool) {
        let players = self.roster.len();
        let Some(t) = self.transition.finish(now, players, timed_out) else { return };
        self.responses.forget_shown();
        let _entered = t.span.enter();
        let duration_ms = crate::fields::millis(now.saturating_duration_since(t.started));
        // Who may have been left behind: anyone at a settle timeout; otherwise only the players
        // it did not wait for, set aside or arrivals (everyone else was placed on the target, or
        // the transition would not end).
        let candidates: Vec<PlayerId> = if timed_out {
            self.roster.ids().cloned().collect()
        } else {
            t.not_waited_for().cloned().collect()
        };
        // Nobody stands on the old level once the screen drops: a pawn whose teleport never ran
        // is withdrawn first.
        let withdrawn = self.withdraw_stranded_pawns(&candidates, &t.target);
        if timed_out {
            self.out.counters.settle_timeouts += 1;
            let unplaced: Vec<PlayerId> =
                self.roster.players().filter(|p| !p.is_placed()).map(|p| p.id.clone()).collect();
            let names: Vec<&str> = unplaced.iter().map(PlayerId::as_str).collect();
            tracing::warn!(unplaced = %Joined(&names), pending_spawns = self.spawns.len(),
                outcome = %"settle_timeout", duration_ms,
                "settle timeout with nothing loading: ending the transition with players unplaced");
            self.transition.record_unplaced(unplaced);
        } else {
            self.out.counters.transitions_completed += 1;
            tracing::info!(
                outcome = %"completed",
                duration_ms,
                players,
                "every player placed; transition ended"
            );
        }
        self.broadcast(ServerMessage::EndTransition { transition_id: t.id });
        self.save_all(t.target.clone());
        // A client that never streamed the destination (it was set aside, or an arrival that
        // did not report) was not given a pawn, nor was an arrival whose spawn still waited (for
        // its save, say), and one whose pawn was withdrawn has none: each gets a join of its own
        // now, under its own loading screen, and any request left for it is dropped (its join
        // queues its spawn after `JoinReady`). A client set aside is excused no more: from now
        // on its join waits for it, and nothing else does.
        let target = &t.target;
        let mut pawnless: BTreeSet<PlayerId> = candidates
            .iter()
            .filter(|id| {
                self.roster.player(id).is_some_and(|p| {
                    p.pawn.is_none() && (p.loaded.as_ref() != Some(target) || t.is_arrival(id))
                })
            })
            .cloned()
            .collect();
        pawnless.extend(withdrawn);
        self.end_excuses(&t);
        for player in pawnless {
            self.spawns.remove_player(&player);
            self.start_join(now, player);
        }
        if timed_out {
            let silent: Vec<PlayerId> = self
                .roster
                .players()
                .filter(|p| p.pawn.is_some() && !p.is_placed())
                .map(|p| p.id.clone())
                .collect();
            self.apply_client_ready_policy(now, silent, Lapse::NeverAcknowledged);
        }
    }

    /// Sets `player` aside from the transition in flight (one place for both ways in: a missed
    /// response timeout, or still unresponsive when the transition starts): nothing waits for
    /// its ready report, its spawn request or its placement; a join places it afterwards.
    fn set_aside(&mut self, player: &PlayerId) {
        self.transition.set_aside(player);
        self.responses.set_aside(player);
        self.spawns.remove_player(player);
        if let Some(mut p) = self.roster.player_mut(player) {
            p.placement_excused = true;
        }
    }

    /// A transition that did not wait for some players (set aside, or arrivals) is over (ended,
    /// superseded or failed): their excuse from placement ends with it. From now on a join, or
    /// the next transition, waits for them; one still unresponsive is set aside again from that
    /// transition's start.
    pub(super) fn end_excuses(&mut self, t: &Transition) {
        for player in t.not_waited_for() {
            let Some(mut p) = self.roster.player_mut(player) else { continue };
            // An arrival still owing the acknowledgement of its pawn stays excused: nothing
            // waited for it, and the next transition (which only teleports that pawn, asking
            // for none) must not either. Its acknowledgement, when it comes, ends the excuse.
            if t.is_arrival(player) && p.pawn.is_some() && !p.is_placed() {
                continue;
            }
            p.placement_excused = false;
        }
    }

    /// At the end of a transition: a kept pawn whose teleport to `target` never ran (a settle
    /// timeout with it pending, docs/spec/transitions.md T7; or its client set aside, T9)
    /// stands on a level no longer streamed, and the loading screen is about to drop. Its pawn
    /// is destroyed and its request dropped, so nobody stands in the void (T1: never a pawn
    /// on a level that is not streamed); the player is then unplaced (named with the
    /// others at a settle timeout) and placed by a join of its own.
    /// A dead pawn left there awaiting its replacement is destroyed too. Looks only at
    /// `candidates`; returns those whose possessed pawn was withdrawn.
    fn withdraw_stranded_pawns(
        &mut self,
        candidates: &[PlayerId],
        target: &NodeId,
    ) -> Vec<PlayerId> {
        let off_target = |pawn: Option<PawnId>| {
            pawn.filter(|id| self.roster.pawn(*id).is_some_and(|p| p.node != *target))
        };
        // (player, its possessed pawn if stranded, a dead pawn awaiting its replacement there)
        let stranded: Vec<(PlayerId, Option<PawnId>, Option<PawnId>)> = candidates
            .iter()
            .filter_map(|id| self.roster.player(id))
            .map(|p| (p.id.clone(), off_target(p.pawn), off_target(p.dead_pawn)))
            .filter(|(_, pawn, dead)| pawn.is_some() || dead.is_some())
            .collect();
        let mut withdrawn = Vec::with_capacity(stranded.len());
        for (player, pawn, dead) in stranded {
            if let Some(mut p) = self.roster.player_mut(&player) {
                if pawn.is_some() {
                    p.pawn = None;
                    p.acknowledged = None;
                }
                if dead.is_some() {
                    p.dead_pawn = None;
                }
            }
            for pawn_id in pawn.into_iter().chain(dead) {
                tracing::warn!(%player, pawn = pawn_id.0,
                    "transition ends with this pawn on a level no longer streamed: withdrawn");
                if self.roster.destroy_pawn(pawn_id) {
                    self.out.counters.pawns_withdrawn += 1;
                    self.broadcast(ServerMessage::PawnDestroyed { pawn_id });
                }
            }
            if pawn.is_some() {
                self.responses.forget_acknowledgement(&player);
                self.spawns.remove_player(&player);
                withdrawn.push(player);
            }
        }
        withdrawn
    }

    /// Step 6: the route's next travel, once it is due and no transition is in flight.
    /// Returns whether a travel started.
    pub(super) fn start_due_route_travel(&mut self, now: Instant) -> bool {
        let Some(route) = &self.world.travel else { return false };
        let interval = route.interval;
        let Some(node): Option<NodeId> = self.transition.take_due_route_travel(route) else {
            return false;
        };
        self.timers.set(Timer::RouteTravel, now + interval);
        tracing::info!(%node, "route travel");
        self.start_transition(now, Destination::Node(node));
        true
    }

    /// After the steps: the deadlines of the transition and the joins (the earliest
    /// client-ready deadline, the settle deadline, the hard maximum) into the timer table.
    pub(super) fn arm_transition_timers(&mut self) {
        let timeout = self.rules.client_ready_timeout;
        let ready = self.transition.client_ready_deadline(timeout);
        let joins = self.joins.ready_deadline(timeout);
        let unresponsive = self.responses.unresponsive_deadline(timeout);
        self.timers
            .arm(Timer::ClientReady, ready.into_iter().chain(joins).chain(unresponsive).min());
        self.timers.arm(Timer::SpawnSettle, self.transition.settle_deadline());
        let limit = self.transition.limit_deadline(self.rules.transition_max);
        self.timers.arm(Timer::TransitionLimit, limit);
        let acknowledgement = self.responses.settle_deadline(self.rules.spawn_settle_timeout);
        self.timers.arm(Timer::PossessionAck, acknowledgement);
        let answer = self.responses.answer_deadline(self.answer_timeout());
        self.timers.arm(Timer::ClientResponse, answer);
    }

    /// How long a client may take to answer what needs no streaming now: the response timeout,
    /// cut by the crowd rule while the transition in flight has a crowd answer time.
    fn answer_timeout(&self) -> Duration {
        let rules = &self.rules;
        self.responses
            .answer_timeout(rules.client_response_timeout, rules.client_response_crowd_floor)
    }

    /// The acknowledgement timer (docs/spec/transitions.md T9): the client-ready policy for every
    /// player whose client has not acknowledged the pawn it was possessed a settle timeout ago,
    /// wherever the possession happened (a join, a respawn, a transition). Dealt with where it
    /// was possessed, a client that never acknowledges cannot carry its unacknowledged pawn into
    /// the next transition and hold it for a settle timeout.
    pub(crate) fn handle_acknowledgement_timeouts(&mut self, now: Instant) {
        let late = self.responses.late_settle(now, self.rules.spawn_settle_timeout);
        self.apply_client_ready_policy(now, late, Lapse::NeverAcknowledged);
    }

    /// The response timer (docs/spec/transitions.md T9): what needs no streaming did not come
    /// within the response timeout (cut by the crowd rule while a transition in flight has a
    /// crowd answer time: the same clients answer on the same paths), so nothing waits for it
    /// any more, and the longer timeouts still apply the client-ready policy:
    /// - a client shown the transition that has not answered `TransitionShown` is set aside:
    ///   the transition no longer waits for its ready report nor places it; at its end, its
    ///   pawn, left on the old level, is withdrawn and a join of its own places it. A ready
    ///   report before then brings it back.
    /// - a client possessed a pawn that it has not acknowledged is excused from placement, so
    ///   no settle-hold waits for it; the settle timeout still applies the policy.
    pub(crate) fn handle_response_timeouts(&mut self, now: Instant) {
        let timeout = self.answer_timeout();
        let timeout_ms = crate::fields::millis(timeout);
        for player in self.responses.late_shown(now, timeout) {
            self.out.counters.clients_set_aside += 1;
            self.responses.unresponsive_from(&player, now);
            tracing::warn!(%player, timeout_ms,
                "client did not answer ShowTransition in time; set aside: nothing waits for it");
            self.set_aside(&player);
        }
        for player in self.responses.take_late_prompt(now, timeout) {
            self.out.counters.acknowledgements_late += 1;
            tracing::warn!(%player, timeout_ms,
                "client did not acknowledge its pawn in time; settle-holds no longer wait for it");
            if let Some(mut p) = self.roster.player_mut(&player) {
                p.placement_excused = true;
            }
        }
    }

    /// The client-ready timer: the policy for every player (in the transition, in a join, or
    /// unresponsive since it was set aside) whose deadline passed.
    pub(crate) fn handle_client_ready_timeouts(&mut self, now: Instant) {
        let timeout = self.rules.client_ready_timeout;
        let mut late: BTreeSet<PlayerId> =
            self.transition.late_players(now, timeout).into_iter().collect();
        late.extend(self.joins.late(now, timeout));
        // Their deadline is spent whatever the policy does with them.
        late.extend(self.responses.take_late_unresponsive(now, timeout));
        self.apply_client_ready_policy(now, late.into_iter().collect(), Lapse::NeverReady);
    }

    /// The transition in flight reached the hard maximum (`[game] transition_max_ms`),
    /// whatever its phase and however often its settle-hold was extended: it fails.
    ///
    /// 1. it ends without `EndTransition`: every client is told `TransitionFailed` with its id
    ///    and the reason, and nobody is spawned into its levels;
    /// 2. counted (`transitions_failed`) and logged, with its phase and what was loading;
    /// 3. the stated recovery: a travel back to the last node a transition reached (the start
    ///    node if none has), which keeps the loading screen up and re-places everyone;
    /// 4. the recovery cannot fail the same way (docs/protocol.md 4.2, "Progress"): the players
    ///    the failed transition still waited for (a ready report in WaitingForClients, a
    ///    placement in Completing) are unresponsive from now, so the recovery sets them aside
    ///    from its start, a join places each after it, and the client-ready timeout from now
    ///    applies the policy to one that stays silent; a failure on a load (a node that never
    ///    streamed) travels somewhere that streamed before.
    pub(crate) fn handle_transition_limit(&mut self, now: Instant) {
        // Its moving players come back with everyone (docs/spec/travel.md V7, V16).
        self.abandon_move(now);
        let loads = self.loads_in_flight();
        let held = self.players_held_by_the_transition();
        let Some((t, failed_in_a_row)) = self.transition.fail(now) else { return };
        self.responses.forget_shown();
        self.end_excuses(&t);
        for player in &held {
            self.responses.unresponsive_from(player, now);
        }
        let entered = t.span.enter();
        self.out.counters.transitions_failed += 1;
        let detail = format!(
            "transition {} to {} did not end within {} ms (phase {}; loading: {})",
            t.id,
            t.target,
            self.rules.transition_max.as_millis(),
            t.phase.name(),
            if loads.is_empty() { "nothing".to_owned() } else { loads.join(", ") },
        );
        self.broadcast(ServerMessage::TransitionFailed {
            transition_id: t.id,
            reason: TransitionFailure::TimedOut,
            detail: detail.clone(),
        });
        let duration_ms = crate::fields::millis(now.saturating_duration_since(t.started));
        if failed_in_a_row >= self.rules.max_failed_transitions {
            tracing::warn!(%detail, failed_in_a_row, outcome = %"failed", duration_ms,
                "transition failed at its hard maximum, the last the server tries");
            drop(entered);
            self.declare_world_unavailable(now, format!(
                "{failed_in_a_row} transitions in a row failed at game.transition_max_ms; the last: {detail}"
            ));
            return;
        }
        let recovery =
            self.transition.last_good().cloned().unwrap_or_else(|| self.world.start_node.clone());
        tracing::warn!(%detail, recovery = %recovery, failed_in_a_row, outcome = %"failed",
            duration_ms,
            "transition failed at its hard maximum; travelling back to the last good node");
        drop(entered);
        self.start_transition(now, Destination::Node(recovery));
    }

    /// The world cannot be loaded (docs/protocol.md 5, "Every transition is bounded"): rather
    /// than retrying a travel that keeps failing while clients sit behind their loading
    /// screens, every client is closed with `WorldUnavailable`, which it can show, and the
    /// shell stops the server with an error so its orchestrator replaces it and an operator
    /// hears of it. No transition starts and no login is admitted from now on. Every player
    /// leaves at once, as after a disconnect (saved, its player state kept, its pawns gone), so
    /// nothing stands on a level that is no longer streamed.
    fn declare_world_unavailable(&mut self, now: Instant, detail: String) {
        tracing::error!(%detail,
            "the world is unavailable: closing every client with WorldUnavailable and stopping");
        let connections: Vec<ConnectionId> = self.roster.players().map(|p| p.connection).collect();
        for connection in connections {
            self.out.push(Output::Close { connection, code: CloseCode::WorldUnavailable });
            self.remove_player(now, connection, Departure::closed(CloseCode::WorldUnavailable));
        }
        self.out.push(Output::WorldUnavailable { detail: detail.clone() });
        self.transition.declare_unavailable(detail);
    }

    /// The players the transition in flight waits for in its phase: those that owe a ready
    /// report in WaitingForClients, those neither placed nor excused in Completing; none while
    /// it loads. Scans the roster in Completing: asked only at the hard maximum.
    fn players_held_by_the_transition(&self) -> Vec<PlayerId> {
        let Some(t) = self.transition.current() else { return Vec::new() };
        match t.phase {
            Phase::WaitingForClients(_) => t.owing().cloned().collect(),
            Phase::Completing(_) => self
                .roster
                .players()
                .filter(|p| !p.is_placed_or_excused())
                .map(|p| p.id.clone())
                .collect(),
            Phase::Freezing(_) | Phase::Loading(_) | Phase::Moving(_) => Vec::new(),
        }
    }

    /// The client-ready policy (`[game] client_ready_policy`), the one place it is applied,
    /// for the client-ready timeout and the settle timeout alike: each of `players` is kicked
    /// (closed with `ReadyTimeout`), or the game proceeds without it: the transition no longer
    /// waits for its ready report ([`Lapse::NeverReady`]), or settle-holds no longer wait for
    /// its placement until it acknowledges a pawn ([`Lapse::NeverAcknowledged`]).
    fn apply_client_ready_policy(&mut self, now: Instant, players: Vec<PlayerId>, lapse: Lapse) {
        for player in players {
            let Some(connection) = self.roster.connection_of(&player) else { continue };
            self.out.counters.ready_timeouts += 1;
            match (self.rules.client_ready_policy, lapse) {
                (ClientReadyPolicy::Kick, _) => {
                    match lapse {
                        Lapse::NeverReady => {
                            tracing::warn!(%player, "client never reported ready; kicked")
                        }
                        Lapse::NeverAcknowledged => {
                            tracing::warn!(%player, "client never acknowledged its pawn; kicked")
                        }
                    }
                    self.out.push(Output::Close { connection, code: CloseCode::ReadyTimeout });
                    let why = match lapse {
                        Lapse::NeverReady => "client-ready timeout: never reported ready",
                        Lapse::NeverAcknowledged => {
                            "client-ready timeout: never acknowledged its pawn"
                        }
                    };
                    let departure = Departure::closed_because(CloseCode::ReadyTimeout, why);
                    self.remove_player(now, connection, departure);
                }
                (ClientReadyPolicy::Proceed, Lapse::NeverReady) if self.joins.contains(&player) => {
                    // Nothing waits for a joiner: it keeps its own loading screen, no pawn.
                    tracing::warn!(%player, "joiner never reported its node streamed; left waiting");
                    self.joins.lapse(&player);
                }
                (ClientReadyPolicy::Proceed, Lapse::NeverReady)
                    if self.transition.is_set_aside(&player) =>
                {
                    // Nothing waits for it already; it has streamed nothing, so no pawn is
                    // placed for it here: the join that follows the transition places it.
                    tracing::warn!(%player, "client set aside never reported ready; left to its join");
                }
                (ClientReadyPolicy::Proceed, Lapse::NeverReady) => {
                    tracing::warn!(%player, "client never reported ready; proceeding without it");
                    // Proceeding includes its spawn, as if it had streamed the destination.
                    let target = self.transition.resolved_target().cloned();
                    if let Some(mut p) = self.roster.player_mut(&player) {
                        p.loaded = target;
                    }
                    self.transition.excuse(player);
                }
                (ClientReadyPolicy::Proceed, Lapse::NeverAcknowledged) => {
                    tracing::warn!(%player,
                        "client never acknowledged its pawn; transitions no longer wait for it");
                    if let Some(mut p) = self.roster.player_mut(&player) {
                        p.placement_excused = true;
                    }
                    // Excused until it acknowledges: its deadline is spent.
                    self.responses.settle_spent(&player);
                }
            }
        }
    }
}
