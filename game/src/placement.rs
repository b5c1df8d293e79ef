//! Spawn attempts: the spawn manager's work over the roster, the spawn queue and the world-map
//! gate (docs/spec/transitions.md T1 and T2).
//!
//! A spawn goes through the default-pawn gate and may silently produce nothing; the attempt
//! checks that a pawn actually resulted instead of assuming it. A request for a player who
//! already has a pawn is a teleport, never a second pawn. Possession initialises the ability
//! system (the kit latch's possession side) and destroys, last, a dead pawn that waited for
//! its replacement.
//!
//! A pawn is placed for a player only on the node its client reported streamed (its join, or
//! the transition in flight): never a pawn before its level, on any machine
//! (docs/spec/transitions.md T1). The report wakes the queue.

use std::time::Instant;

use gatehouse_protocol::{NodeId, PawnId, PlayerId, ServerMessage};

use super::spawn::{SpawnKind, SpawnRequest};
use super::streaming::{SpawnPoints, SpawnPointsOn};
use super::{Game, Observation, SpawnRefusal};

/// The outcome of one attempt at a request.
pub(crate) enum Attempt {
    /// Nothing left to do (the player left, or its pawn already stands there).
    Done,
    /// A pawn was spawned and possessed.
    Spawned,
    /// The player's pawn moved to the request's node; the caller replicates every pawn moved
    /// by one pass in one `PawnsTeleported`, not a frame per pawn.
    Teleported(PawnId),
    /// Keep it; the node is not streamed or the gate refused: a ready callback retries.
    Wait,
    /// Keep it; spawn points are not registered and nothing will announce them: retry after
    /// `spawn_retry`.
    Retry,
}

impl Game {
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

    /// One attempt at `request`.
    pub(crate) fn attempt_spawn(&mut self, now: Instant, request: &SpawnRequest) -> Attempt {
        let Some(player) = self.roster.player(&request.player) else {
            return Attempt::Done;
        };
        if player.character_def.is_none() {
            // The pawn class is unknown until the save loads; the load's completion retries.
            return Attempt::Wait;
        }
        let current = self.roster.possessed_pawn(&request.player);
        // A request for a player who has a pawn is a teleport, whatever it was queued as.
        if let Some(pawn) = current
            && pawn.node == request.node
        {
            return Attempt::Done;
        }
        if !self.client_streamed(&request.player, &request.node) {
            // Its client has not streamed the node yet: its report wakes the queue.
            return Attempt::Wait;
        }
        match self.streaming.spawn_points_on(&request.node) {
            // Their registration (or the node's streaming) is an event that wakes the queue.
            SpawnPointsOn::NotStreamed | SpawnPointsOn::Streamed(SpawnPoints::Announced) => {
                return Attempt::Wait;
            }
            SpawnPointsOn::Streamed(SpawnPoints::Unannounced) => return Attempt::Retry,
            SpawnPointsOn::Streamed(SpawnPoints::Registered) => {}
        }
        if let Some(pawn_id) = current.map(|p| p.id) {
            return if self.teleport_pawn(pawn_id, &request.node) {
                Attempt::Teleported(pawn_id)
            } else {
                Attempt::Wait
            };
        }
        // Honest refusal: check that a pawn actually resulted instead of assuming it.
        match self.restart_player_at_player_start(now, &request.player, &request.node) {
            Some(_) => Attempt::Spawned,
            None => {
                self.out.counters.spawn_refusals += 1;
                self.out.observe(Observation::SpawnRefused { cause: SpawnRefusal::LevelNotReady });
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
        now: Instant,
        player: &PlayerId,
        node: &NodeId,
    ) -> Option<PawnId> {
        let pawn = self.spawn_default_pawn_for(player, node)?;
        self.possess(now, player, pawn);
        Some(pawn)
    }

    /// Whether `player`'s client reported `node` streamed.
    fn client_streamed(&self, player: &PlayerId, node: &NodeId) -> bool {
        self.roster.player(player).is_some_and(|p| p.loaded.as_ref() == Some(node))
    }

    /// `SpawnDefaultPawnFor`: creates a pawn, or returns `None` while the level-ready gate says
    /// no (docs/spec/transitions.md T1: the first line of defence) or the player's client has
    /// not streamed the node. A player whose restored player state holds `State.Dead` gets a
    /// dead pawn: only `RestartRequest` clears death.
    fn spawn_default_pawn_for(&mut self, player: &PlayerId, node: &NodeId) -> Option<PawnId> {
        if !self.streaming.is_level_ready_for_spawn(node) || !self.client_streamed(player, node) {
            return None;
        }
        let p = self.roster.player(player)?;
        let (character_def, alive) = (p.character_def.clone()?, !p.is_dead());
        let view = self.roster.create_pawn(player, character_def, node, alive).view();
        tracing::info!(%player, pawn = %view.pawn_id, %node, alive, "pawn spawned");
        self.out.counters.pawns_spawned += 1;
        let id = view.pawn_id;
        self.broadcast(ServerMessage::PawnSpawned(view));
        if !alive {
            self.broadcast(ServerMessage::PawnDied { pawn_id: id });
        }
        Some(id)
    }

    /// `PossessedBy`: the player now controls `pawn` (its client must acknowledge), the
    /// ability system initialises (`InitAbilityActorInfo`: the kit latch's possession side), and
    /// a dead pawn waiting for this replacement is destroyed, last. Its acknowledgement is
    /// awaited from `now`.
    fn possess(&mut self, now: Instant, player: &PlayerId, pawn: PawnId) {
        let Some(mut p) = self.roster.player_mut(player) else { return };
        let (granted, dead) = p.possess(pawn, &self.world.startup_kits);
        let connection = p.connection;
        drop(p);
        self.responses.possessed(player, now);
        self.send(connection, ServerMessage::Possessed { pawn_id: pawn });
        if !granted.is_empty() {
            self.out.counters.kit_grants += 1;
            self.send(connection, ServerMessage::KitsGranted { kits: granted });
        }
        if let Some(dead) = dead
            && self.roster.destroy_pawn(dead)
        {
            tracing::info!(%player, pawn = %dead, "dead pawn destroyed after its replacement exists");
            self.broadcast(ServerMessage::PawnDestroyed { pawn_id: dead });
        }
    }

    /// A level-transition request: move the existing pawn; never a second pawn. Replicating
    /// the move is the caller's (it batches them).
    fn teleport_pawn(&mut self, pawn_id: PawnId, node: &NodeId) -> bool {
        if !self.streaming.is_level_ready_for_spawn(node) {
            self.out.counters.spawn_refusals += 1;
            self.out.observe(Observation::SpawnRefused { cause: SpawnRefusal::LevelNotReady });
            return false;
        }
        let Some(pawn) = self.roster.pawn_mut(pawn_id) else {
            return false;
        };
        pawn.node = node.clone();
        self.out.counters.pawns_teleported += 1;
        tracing::debug!(pawn = %pawn_id, %node, "pawn teleported");
        true
    }
}
