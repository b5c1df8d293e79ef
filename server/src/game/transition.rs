//! The phased transition (seed 001, "Transition Lifecycle" and "Loading-Screen Settle-Hold").
//!
//! ```text
//! None ─start─> Freezing ─destination resolved─> Loading ─node streamed─> WaitingForClients
//!   ^                                                                          │ all ready
//!   └──────── every player placed, or settle timeout with nothing loading ── Completing
//! ```
//!
//! Phases are server-side only; clients see `FreezeCharacters` (freeze, raise the loading
//! screen), `ShowTransition` (destination known: stream these levels) and `EndTransition`
//! (unfreeze, hide). A travel arriving in any phase supersedes the transition in flight: a new
//! id, ready tracking restarted, the loading screen kept up, and nothing that names the old id
//! or its loads applied to the new one.

use std::collections::BTreeSet;
use std::time::Instant;

use gatehouse_protocol::{ErrorCode, NodeId, PlayerId, ServerMessage, TransitionId};

use super::spawn::SpawnKind;
use super::streaming::Streamed;
use super::timers::Timer;
use super::{ConnectionId, Game, Output, StreamRequest};
use crate::config::ClientReadyPolicy;

/// The transition in flight.
#[derive(Debug)]
pub(crate) struct Transition {
    pub(crate) id: TransitionId,
    pub(crate) target: NodeId,
    pub(crate) phase: Phase,
    /// Players that reported ready for this id, kept from the moment the report arrives even
    /// if the server has not reached WaitingForClients yet.
    pub(crate) ready: BTreeSet<PlayerId>,
    /// Players the transition proceeds without (they missed the client-ready timeout under the
    /// `proceed` policy).
    pub(crate) excused: BTreeSet<PlayerId>,
    pub(crate) span: tracing::Span,
}

/// Where a travel goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// The session's current node, known once the session save settles (the seed's
    /// `TravelToCurrentNode`: the boot travel).
    SessionNode,
    /// A named node (route travel, operator travel).
    Node(NodeId),
}

/// Server-side transition phases; each holds only its own data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Characters frozen, loading screen up; the destination is being resolved: the travel
    /// waits until the session save and every player's save settled.
    Freezing {
        /// What to resolve.
        destination: Destination,
    },
    /// The destination's levels stream.
    Loading,
    /// Waiting for every client to report ready.
    WaitingForClients {
        /// When the phase began: client-ready deadlines count from here (or from the player's
        /// own show time if later).
        since: Instant,
    },
    /// The spawn window: spawns run directly; the screen holds until everyone is placed.
    Completing {
        /// When the settle-hold gives up if nothing is loading.
        settle_deadline: Instant,
    },
}

impl Transition {
    /// Whether spawning must wait for `OnReadyToSpawn` (seed 001 `IsTransitionInProgress`:
    /// Completing deliberately counts as spawnable).
    pub(crate) fn blocks_spawns(&self) -> bool {
        !matches!(self.phase, Phase::Completing { .. })
    }
}

impl Game {
    /// `StartTransition`: freeze, raise the loading screen, resolve the destination.
    pub(crate) fn start_transition(&mut self, now: Instant, destination: Destination) {
        let target = match &destination {
            Destination::Node(node) => node.clone(),
            Destination::SessionNode => self.session_node.clone(),
        };
        let id = TransitionId(self.next_transition);
        self.next_transition += 1;
        self.counters.transitions_started += 1;
        if let Some(old) = self.transition.take() {
            self.counters.transitions_superseded += 1;
            tracing::info!(old = %old.id, new = %id, node = %target, phase = ?old.phase,
                "travel supersedes the transition in flight; the loading screen stays up");
        }
        self.timers.stop(Timer::SpawnSettle);
        self.timers.stop(Timer::ClientReady);
        // A root span: a transition that supersedes another is its sibling, not its child.
        let span = tracing::info_span!(parent: None, "transition", id = id.0, node = tracing::field::Empty);
        let _entered = span.enter();
        tracing::info!("transition started");
        self.transition = Some(Transition {
            id,
            target: target.clone(),
            phase: Phase::Freezing { destination },
            ready: BTreeSet::new(),
            excused: BTreeSet::new(),
            span: span.clone(),
        });
        for player in self.players.values_mut() {
            player.shown = Some((id, now));
        }
        self.broadcast(ServerMessage::FreezeCharacters { transition_id: id });
        self.rebalance_teams(id);
        self.try_resolve_destination();
    }

    /// A team change at every travel, so the presentation path of clients is exercised: teams
    /// are evened out, then one pair swaps sides.
    fn rebalance_teams(&mut self, id: TransitionId) {
        use gatehouse_protocol::TeamId;
        let on = |game: &Game, t: u8| -> Vec<PlayerId> {
            game.players.values().filter(|p| p.team == TeamId(t)).map(|p| p.id.clone()).collect()
        };
        let mut changed = Vec::new();
        loop {
            let (one, two) = (on(self, 1), on(self, 2));
            let (from, to) = if one.len() > two.len() + 1 {
                (one, 2)
            } else if two.len() > one.len() + 1 {
                (two, 1)
            } else {
                break;
            };
            if let Some(p) = from.last().and_then(|p| self.players.get_mut(p)) {
                p.team = TeamId(to);
                changed.push(p.id.clone());
            }
        }
        let (one, two) = (on(self, 1), on(self, 2));
        if !one.is_empty() && !two.is_empty() {
            let pick = |v: &Vec<PlayerId>| v[id.0 as usize % v.len()].clone();
            let (a, b) = (pick(&one), pick(&two));
            if let Some(p) = self.players.get_mut(&a) {
                p.team = TeamId(2);
            }
            if let Some(p) = self.players.get_mut(&b) {
                p.team = TeamId(1);
            }
            changed.extend([a, b]);
        }
        for id in changed {
            if let Some(view) = self.players.get(&id).map(|p| p.view()) {
                self.broadcast(ServerMessage::PlayerStateUpdated(view));
            }
        }
    }

    /// Freezing → Loading once the destination is known. Right before travelling, pending
    /// initial spawns are discarded: they captured a node that may be stale, and OnReadyToSpawn
    /// re-queues every pawnless player against the resolved node (seed 001, Stale-Node Discard).
    pub(crate) fn try_resolve_destination(&mut self) {
        let Some(t) = &self.transition else { return };
        let Phase::Freezing { destination } = &t.phase else { return };
        if !self.persistence_settled() {
            return;
        }
        let target = match destination {
            Destination::Node(node) => node.clone(),
            Destination::SessionNode => self.session_node.clone(),
        };
        let id = t.id;
        if let Some(t) = &mut self.transition {
            t.target = target.clone();
            t.span.record("node", tracing::field::display(&target));
        }
        let discarded = self.spawns.discard_pending(SpawnKind::Initial);
        if discarded > 0 {
            self.counters.initial_spawns_discarded += discarded as u64;
            tracing::info!(discarded, "discarded stale initial spawn requests before travel");
        }
        // Requests a superseded transition (or the world before this travel) left for another
        // node would never be placed: drop them too; OnReadyToSpawn re-queues their players.
        let superseded = self.spawns.discard_not_for(&target);
        if superseded > 0 {
            self.counters.stale_ignored += superseded as u64;
            tracing::info!(superseded, "dropped spawn requests for another node before travel");
        }
        self.session_node = target.clone();
        let Some(spec) = self.world.node(&target).cloned() else {
            // Travel targets are checked against the world before a transition starts.
            tracing::error!(node = %target, "transition target is not a world node");
            return;
        };
        let load = self.streaming.begin_node(target.clone());
        self.outputs.push_back(Output::Stream(StreamRequest {
            load,
            what: format!("node {target}"),
            duration: spec.levels.iter().map(|l| l.stream).max().unwrap_or_default(),
            jitter: spec.jitter,
            spawn_points_after: Some(spec.spawn_points_register),
        }));
        if let Some(t) = &mut self.transition {
            t.phase = Phase::Loading;
        }
        self.broadcast(ServerMessage::ShowTransition {
            transition_id: id,
            target_node: target,
            levels: spec.levels.iter().map(|l| l.name.clone()).collect(),
        });
    }

    /// A streaming request finished.
    pub(crate) fn handle_streamed(&mut self, now: Instant, load: super::LoadId) {
        match self.streaming.complete(load) {
            Streamed::Stale => {
                self.counters.stale_ignored += 1;
                tracing::debug!(?load, "stale streaming completion ignored");
            }
            Streamed::Node(node) => {
                tracing::info!(%node, "node streamed");
                if let Some(spec) = self.world.node(&node).filter(|n| n.is_dungeon()).cloned() {
                    let rooms = self.streaming.begin_rooms();
                    self.outputs.push_back(Output::Stream(StreamRequest {
                        load: rooms,
                        what: format!("dungeon rooms of {node}"),
                        duration: spec.rooms.iter().map(|r| r.stream).max().unwrap_or_default(),
                        jitter: spec.jitter,
                        spawn_points_after: None,
                    }));
                }
                let loading = self
                    .transition
                    .as_ref()
                    .is_some_and(|t| t.phase == Phase::Loading && t.target == node);
                if loading {
                    self.enter_waiting_for_clients(now);
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

    /// A ready callback (dungeon rooms ready, a fixed level streamed). In Completing it spawns
    /// directly rather than deferring to an OnReadyToSpawn that already happened (seed 001, The
    /// Spawn Window); a finished load also pushes the settle deadline forward.
    fn on_level_ready(&mut self, now: Instant) {
        self.ensure_spawns_queued_for_all_players();
        self.process_pending_spawns(now);
        let settle = self.rules.spawn_settle_timeout;
        if let Some(Transition { phase: Phase::Completing { settle_deadline }, .. }) =
            &mut self.transition
        {
            *settle_deadline = (*settle_deadline).max(now + settle);
            self.timers.set(Timer::SpawnSettle, *settle_deadline);
        }
        self.try_finish_transition(now);
    }

    fn enter_waiting_for_clients(&mut self, now: Instant) {
        let Some(t) = &mut self.transition else {
            return;
        };
        t.phase = Phase::WaitingForClients { since: now };
        tracing::info!(early_ready = t.ready.len(), "waiting for clients");
        self.rearm_client_ready_timer();
        self.check_all_clients_ready(now);
    }

    /// `Server_ReportTransitionReady`: keeps reports for the current id whatever the phase,
    /// ignores superseded ids, refuses ids never issued.
    pub(crate) fn handle_transition_ready(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        player: &PlayerId,
        id: gatehouse_protocol::TransitionId,
    ) {
        if id.0 >= self.next_transition {
            self.refuse(
                now,
                connection,
                ErrorCode::UnknownTransition,
                format!("transition {id} was never started"),
            );
            return;
        }
        let Some(t) = &mut self.transition else {
            self.counters.stale_ignored += 1;
            return;
        };
        if id != t.id {
            self.counters.stale_ignored += 1;
            tracing::debug!(player = %player, stale = %id, "ready report for a superseded transition ignored");
            return;
        }
        t.ready.insert(player.clone());
        if matches!(t.phase, Phase::WaitingForClients { .. }) {
            self.rearm_client_ready_timer();
            self.check_all_clients_ready(now);
        }
    }

    /// WaitingForClients → Completing when every present player reported ready or is excused.
    fn check_all_clients_ready(&mut self, now: Instant) {
        let Some(t) = &self.transition else { return };
        if !matches!(t.phase, Phase::WaitingForClients { .. }) {
            return;
        }
        let all_ready = self.players.keys().all(|p| t.ready.contains(p) || t.excused.contains(p));
        if all_ready {
            self.complete_transition(now);
        }
    }

    /// Arms the client-ready timer at the earliest deadline of a player still not ready.
    fn rearm_client_ready_timer(&mut self) {
        self.timers.stop(Timer::ClientReady);
        let Some(t) = &self.transition else { return };
        let Phase::WaitingForClients { since } = t.phase else {
            return;
        };
        let timeout = self.rules.client_ready_timeout;
        let earliest = self
            .players
            .values()
            .filter(|p| !t.ready.contains(&p.id) && !t.excused.contains(&p.id))
            .map(|p| p.shown.map_or(since, |(_, at)| at.max(since)) + timeout)
            .min();
        if let Some(at) = earliest {
            self.timers.set(Timer::ClientReady, at);
        }
    }

    /// Applies the client-ready policy to every player whose deadline passed.
    pub(crate) fn handle_client_ready_timeouts(&mut self, now: Instant) {
        let Some(t) = &self.transition else { return };
        let Phase::WaitingForClients { since } = t.phase else {
            return;
        };
        let timeout = self.rules.client_ready_timeout;
        let late: Vec<(PlayerId, ConnectionId)> = self
            .players
            .values()
            .filter(|p| !t.ready.contains(&p.id) && !t.excused.contains(&p.id))
            .filter(|p| p.shown.map_or(since, |(_, at)| at.max(since)) + timeout <= now)
            .map(|p| (p.id.clone(), p.connection))
            .collect();
        for (player, connection) in late {
            self.counters.ready_timeouts += 1;
            match self.rules.client_ready_policy {
                ClientReadyPolicy::Kick => {
                    tracing::warn!(%player, "client never reported ready; kicked");
                    self.outputs.push_back(Output::Close {
                        connection,
                        code: gatehouse_protocol::CloseCode::ReadyTimeout,
                    });
                    self.remove_player(now, connection);
                }
                ClientReadyPolicy::Proceed => {
                    tracing::warn!(%player, "client never reported ready; proceeding without it");
                    if let Some(t) = &mut self.transition {
                        t.excused.insert(player);
                    }
                }
            }
        }
        self.rearm_client_ready_timer();
        self.check_all_clients_ready(now);
    }

    /// `CompleteTransition`: enter the spawn window, broadcast OnReadyToSpawn (spawn while
    /// characters are still frozen), start the settle-hold.
    fn complete_transition(&mut self, now: Instant) {
        let settle_deadline = now + self.rules.spawn_settle_timeout;
        let Some(t) = &mut self.transition else {
            return;
        };
        t.phase = Phase::Completing { settle_deadline };
        tracing::info!("every client ready; completing");
        self.timers.stop(Timer::ClientReady);
        self.timers.set(Timer::SpawnSettle, settle_deadline);
        self.on_ready_to_spawn(now);
        self.try_finish_transition(now);
    }

    /// `TryFinishTransition`: end when placed; otherwise hold, extending while a load is in
    /// flight; at the deadline with nothing loading, end anyway and name the unplaced players.
    /// Called on every event that can change the answer, and at the settle deadline.
    pub(crate) fn try_finish_transition(&mut self, now: Instant) {
        let Some(t) = &self.transition else { return };
        let Phase::Completing { settle_deadline } = t.phase else {
            return;
        };
        if self.are_players_placed() {
            self.finish_transition(now, false);
            return;
        }
        if now < settle_deadline {
            return;
        }
        if self.streaming.is_load_in_flight() || self.is_save_load_in_flight() {
            // A slow load is progress, not a wedge.
            let pushed = now + self.rules.spawn_settle_timeout;
            self.counters.settle_extensions += 1;
            if let Some(Transition { phase: Phase::Completing { settle_deadline }, .. }) =
                &mut self.transition
            {
                *settle_deadline = pushed;
            }
            self.timers.set(Timer::SpawnSettle, pushed);
            return;
        }
        self.finish_transition(now, true);
    }

    /// `ArePlayersPlaced`: no pending spawn request and every player placed.
    pub(crate) fn are_players_placed(&self) -> bool {
        self.spawns.is_empty()
            && self.players.values().all(|p| p.is_placed() || p.placement_excused)
    }

    fn finish_transition(&mut self, now: Instant, timed_out: bool) {
        let Some(t) = self.transition.take() else {
            return;
        };
        let _entered = t.span.enter();
        self.timers.stop(Timer::SpawnSettle);
        if timed_out {
            self.counters.settle_timeouts += 1;
            let unplaced: Vec<PlayerId> =
                self.players.values().filter(|p| !p.is_placed()).map(|p| p.id.clone()).collect();
            let names: Vec<&str> = unplaced.iter().map(PlayerId::as_str).collect();
            tracing::warn!(unplaced = ?names, pending_spawns = self.spawns.len(),
                "settle timeout with nothing loading: ending the transition with players unplaced");
            self.last_unplaced = unplaced;
        } else {
            self.counters.transitions_completed += 1;
            tracing::info!("every player placed; transition ended");
        }
        self.broadcast(ServerMessage::EndTransition { transition_id: t.id });
        self.save_all(t.target.clone());
        if timed_out {
            self.handle_unacknowledged_possessions(now);
        }
        drop(_entered);
        if self.route_due {
            self.travel_route(now);
        }
    }

    /// After a settle timeout: a client that was possessed a pawn and never acknowledged it for
    /// the whole timeout is handled by the client-ready policy, so it cannot hold every later
    /// transition for a settle timeout each: kicked, or excused from placement until it
    /// acknowledges a pawn. Players the server could not give a pawn are not at fault.
    fn handle_unacknowledged_possessions(&mut self, now: Instant) {
        let silent: Vec<(PlayerId, ConnectionId)> = self
            .players
            .values()
            .filter(|p| p.pawn.is_some() && !p.is_placed())
            .map(|p| (p.id.clone(), p.connection))
            .collect();
        for (player, connection) in silent {
            self.counters.ready_timeouts += 1;
            match self.rules.client_ready_policy {
                ClientReadyPolicy::Kick => {
                    tracing::warn!(%player, "client never acknowledged its pawn; kicked");
                    self.outputs.push_back(Output::Close {
                        connection,
                        code: gatehouse_protocol::CloseCode::ReadyTimeout,
                    });
                    self.remove_player(now, connection);
                }
                ClientReadyPolicy::Proceed => {
                    tracing::warn!(%player,
                        "client never acknowledged its pawn; transitions no longer wait for it");
                    if let Some(p) = self.players.get_mut(&player) {
                        p.placement_excused = true;
                    }
                }
            }
        }
    }

    /// A player joined: shown the transition in flight, or spawned at once (late join).
    pub(crate) fn admit_player(&mut self, now: Instant, id: &PlayerId) {
        let node = self.session_node.clone();
        if let Some(t) = &self.transition {
            let (tid, target, phase) = (t.id, t.target.clone(), t.phase.clone());
            let Some(player) = self.players.get_mut(id) else {
                return;
            };
            player.shown = Some((tid, now));
            let connection = player.connection;
            self.send(connection, ServerMessage::FreezeCharacters { transition_id: tid });
            if !matches!(phase, Phase::Freezing { .. }) {
                let levels = self
                    .world
                    .node(&target)
                    .map(|n| n.levels.iter().map(|l| l.name.clone()).collect())
                    .unwrap_or_default();
                self.send(
                    connection,
                    ServerMessage::ShowTransition {
                        transition_id: tid,
                        target_node: target,
                        levels,
                    },
                );
            }
            // The possession-time initial spawn captures the node known now.
            self.queue_spawn_request(now, id.clone(), SpawnKind::Initial, node);
            self.rearm_client_ready_timer();
        } else {
            self.queue_spawn_request(now, id.clone(), SpawnKind::LateJoin, node);
        }
    }

    /// After a player left: nothing may wait for it any more (its save load, its ready report,
    /// its placement).
    pub(crate) fn on_player_removed(&mut self, now: Instant) {
        self.try_resolve_destination();
        self.rearm_client_ready_timer();
        self.check_all_clients_ready(now);
        self.try_finish_transition(now);
    }
}
