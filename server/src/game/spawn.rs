//! The spawn queue and pawn creation (seed 001, `UPlayerSpawnManager`).
//!
//! Outside the Completing phase of a transition, spawn requests queue; `OnReadyToSpawn` (or a
//! late ready callback inside Completing) processes them. A request whose node has no
//! registered spawn point yet stays queued with a retry; a spawn refused by the level-ready
//! gate stays queued too and is never counted as done (seed 001, Honest Spawn Refusal). A
//! player has at most one pending request.

use std::time::Instant;

use gatehouse_protocol::{NodeId, PawnId, PlayerId, ServerMessage};

use super::Game;
use super::players::Pawn;
use super::timers::Timer;

/// What a spawn request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SpawnKind {
    /// The possession-time spawn of a player who joined during a transition; it captures the
    /// node known at login, which may be stale (seed 001, Stale-Node Discard).
    Initial,
    /// A player joining while no transition runs, or the death-respawn fallback (seed 001
    /// `GetLateJoinContext`).
    LateJoin,
    /// A player who already has a pawn moves to the transition's node: a teleport, never a
    /// second pawn.
    LevelTransition,
}

/// One queued spawn request.
#[derive(Debug, Clone)]
pub(crate) struct SpawnRequest {
    pub(crate) player: PlayerId,
    pub(crate) kind: SpawnKind,
    pub(crate) node: NodeId,
    /// The request's span: every attempt at it logs inside it (DESIGN §4).
    span: tracing::Span,
}

impl SpawnRequest {
    fn new(player: PlayerId, kind: SpawnKind, node: NodeId) -> Self {
        let span =
            tracing::info_span!("spawn_request", player = %player, kind = ?kind, node = %node);
        SpawnRequest { player, kind, node, span }
    }
}

/// Pending spawn requests, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SpawnQueue {
    pending: Vec<SpawnRequest>,
}

impl SpawnQueue {
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    pub(crate) fn has_request_for(&self, player: &PlayerId) -> bool {
        self.pending.iter().any(|r| &r.player == player)
    }

    /// Drops every request of `kind`; returns how many.
    pub(crate) fn discard_pending(&mut self, kind: SpawnKind) -> usize {
        let before = self.pending.len();
        self.pending.retain(|r| r.kind != kind);
        before - self.pending.len()
    }

    /// Drops every request for a node other than `node`; returns how many.
    pub(crate) fn discard_not_for(&mut self, node: &NodeId) -> usize {
        let before = self.pending.len();
        self.pending.retain(|r| &r.node == node);
        before - self.pending.len()
    }

    pub(crate) fn requests(&self) -> impl Iterator<Item = &SpawnRequest> {
        self.pending.iter()
    }

    pub(crate) fn remove_player(&mut self, player: &PlayerId) {
        self.pending.retain(|r| &r.player != player);
    }
}

/// The outcome of one attempt at a request.
enum Attempt {
    Done,
    /// Keep it; the node is not streamed or the gate refused: a ready callback retries.
    Wait,
    /// Keep it; spawn points are not registered yet: retry after `spawn_retry`.
    Retry,
}

impl Game {
    /// `QueueSpawnRequest`: queue, and process at once unless a transition owns spawning.
    pub(crate) fn queue_spawn_request(
        &mut self,
        now: Instant,
        player: PlayerId,
        kind: SpawnKind,
        node: NodeId,
    ) {
        if self.spawns.has_request_for(&player) {
            tracing::debug!(%player, ?kind, "spawn request not queued: one is already pending");
        } else {
            tracing::debug!(%player, ?kind, %node, "spawn request queued");
            self.spawns.pending.push(SpawnRequest::new(player, kind, node));
        }
        if !self.transition.as_ref().is_some_and(|t| t.blocks_spawns()) {
            self.process_pending_spawns(now);
        }
    }

    /// `OnReadyToSpawn`: make sure every player has a request for the transition's node, then
    /// spawn.
    pub(crate) fn on_ready_to_spawn(&mut self, now: Instant) {
        self.ensure_spawns_queued_for_all_players();
        self.process_pending_spawns(now);
    }

    /// `EnsureSpawnsQueuedForAllPlayers`: a request for every player without one that is
    /// pawnless (initial spawn) or whose pawn stands on another node (level transition).
    /// Players with a pending request are skipped.
    pub(crate) fn ensure_spawns_queued_for_all_players(&mut self) {
        let node = self.transition.as_ref().map_or(&self.session_node, |t| &t.target).clone();
        let mut new = Vec::new();
        for player in self.players.values() {
            if self.spawns.has_request_for(&player.id) {
                continue;
            }
            match player.pawn.and_then(|p| self.pawns.get(&p)) {
                None => {
                    new.push(SpawnRequest::new(player.id.clone(), SpawnKind::Initial, node.clone()))
                }
                Some(pawn) if pawn.node != node => new.push(SpawnRequest::new(
                    player.id.clone(),
                    SpawnKind::LevelTransition,
                    node.clone(),
                )),
                Some(_) => {}
            }
        }
        self.spawns.pending.extend(new);
    }

    /// `ProcessPendingSpawns`: attempts every request in order, keeping those that cannot be
    /// placed yet. Does nothing while a transition outside Completing owns spawning.
    pub(crate) fn process_pending_spawns(&mut self, now: Instant) {
        if self.transition.as_ref().is_some_and(|t| t.blocks_spawns()) {
            return;
        }
        let requests = std::mem::take(&mut self.spawns.pending);
        let mut retry = false;
        for request in requests {
            let span = request.span.clone();
            let attempt = span.in_scope(|| self.attempt_spawn(&request));
            match attempt {
                Attempt::Done => {}
                Attempt::Wait => self.spawns.pending.push(request),
                Attempt::Retry => {
                    retry = true;
                    self.spawns.pending.push(request);
                }
            }
        }
        if retry {
            self.counters.spawn_point_retries += 1;
            self.timers.set_earliest(Timer::SpawnRetry, now + self.rules.spawn_retry);
        }
        self.try_finish_transition(now);
    }

    fn attempt_spawn(&mut self, request: &SpawnRequest) -> Attempt {
        let Some(player) = self.players.get(&request.player) else {
            return Attempt::Done;
        };
        if player.character_def.is_none() {
            // The pawn class is unknown until the save loads; the load's completion retries.
            return Attempt::Wait;
        }
        let current = player.pawn.and_then(|p| self.pawns.get(&p));
        // A request for a player who has a pawn is a teleport, whatever it was queued as.
        if let Some(pawn) = current {
            if pawn.node == request.node {
                return Attempt::Done;
            }
        }
        match self.streaming.spawn_points_on(&request.node) {
            None => return Attempt::Wait,
            Some(false) => return Attempt::Retry,
            Some(true) => {}
        }
        if let Some(pawn_id) = current.map(|p| p.id) {
            return if self.teleport_pawn(pawn_id, &request.node) {
                Attempt::Done
            } else {
                Attempt::Wait
            };
        }
        // Honest refusal: check that a pawn actually resulted instead of assuming it.
        match self.restart_player_at_player_start(&request.player, &request.node) {
            Some(_) => Attempt::Done,
            None => {
                self.counters.spawn_refusals += 1;
                tracing::info!(player = %request.player, node = %request.node,
                    "spawn refused by the level-ready gate; kept queued");
                Attempt::Wait
            }
        }
    }

    /// `RestartPlayerAtPlayerStart`: the engine's restart, which goes through the default-pawn
    /// gate and may silently produce nothing.
    pub(crate) fn restart_player_at_player_start(
        &mut self,
        player: &PlayerId,
        node: &NodeId,
    ) -> Option<PawnId> {
        let pawn = self.spawn_default_pawn_for(player, node)?;
        self.possess(player, pawn);
        Some(pawn)
    }

    /// `SpawnDefaultPawnFor`: creates a pawn, or returns `None` while the level-ready gate says
    /// no (seed 001, The World-Map Gate: the first line of defence).
    fn spawn_default_pawn_for(&mut self, player: &PlayerId, node: &NodeId) -> Option<PawnId> {
        if !self.streaming.is_level_ready_for_spawn(node) {
            return None;
        }
        let character_def = self.players.get(player)?.character_def.clone()?;
        let id = PawnId(self.next_pawn);
        self.next_pawn += 1;
        let pawn =
            Pawn { id, owner: player.clone(), character_def, node: node.clone(), alive: true };
        tracing::info!(%player, pawn = %id, %node, "pawn spawned");
        self.counters.pawns_spawned += 1;
        self.broadcast(ServerMessage::PawnSpawned(pawn.view()));
        self.pawns.insert(id, pawn);
        Some(id)
    }

    /// `PossessedBy`: the player now controls `pawn` (its client must acknowledge), the
    /// ability system initialises (`InitAbilityActorInfo`: the kit latch's possession side), and
    /// a dead pawn waiting for this replacement is destroyed, last.
    fn possess(&mut self, player: &PlayerId, pawn: PawnId) {
        let startup = self.world.startup_kits.clone();
        let Some(p) = self.players.get_mut(player) else { return };
        p.pawn = Some(pawn);
        p.acknowledged = None;
        let composed = p.preset.as_ref().map(|preset| preset.kits.clone());
        let granted = p.abilities.init_ability_actor_info(&startup, composed.as_deref());
        let (connection, dead) = (p.connection, p.dead_pawn.take());
        self.send(connection, ServerMessage::Possessed { pawn_id: pawn });
        if !granted.is_empty() {
            self.counters.kit_grants += 1;
            self.send(connection, ServerMessage::KitsGranted { kits: granted });
        }
        if let Some(dead) = dead {
            if self.pawns.remove(&dead).is_some() {
                tracing::info!(%player, pawn = %dead, "dead pawn destroyed after its replacement exists");
                self.broadcast(ServerMessage::PawnDestroyed { pawn_id: dead });
            }
        }
    }

    /// A level-transition request: move the existing pawn; never a second pawn.
    fn teleport_pawn(&mut self, pawn_id: PawnId, node: &NodeId) -> bool {
        if !self.streaming.is_level_ready_for_spawn(node) {
            self.counters.spawn_refusals += 1;
            return false;
        }
        let Some(pawn) = self.pawns.get_mut(&pawn_id) else {
            return false;
        };
        pawn.node = node.clone();
        self.counters.pawns_teleported += 1;
        tracing::info!(pawn = %pawn_id, %node, "pawn teleported");
        self.broadcast(ServerMessage::PawnTeleported { pawn_id, node: node.clone() });
        true
    }
}
