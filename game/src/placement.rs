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
//!
//! [`Placement`] borrows the roster (it creates, moves and destroys pawns) and reads the
//! streaming state and the world; it returns what happened ([`Attempt`], [`Spawned`]) and the
//! game replicates, counts and awaits the acknowledgement.

use gatehouse_protocol::{NodeId, PawnId, PawnView, PlayerId};
use gatehouse_tags::GameplayTag;

use super::ConnectionId;
use super::roster::Roster;
use super::spawn::SpawnRequest;
use super::streaming::{SpawnPoints, SpawnPointsOn, WorldStreaming};
use crate::world::WorldMap;

/// The outcome of one attempt at a request.
pub(crate) enum Attempt {
    /// Nothing left to do (the player left, or its pawn already stands there).
    Done,
    /// A pawn was spawned and possessed.
    Spawned(Spawned),
    /// The player's pawn moved to the request's node; the caller replicates every pawn moved
    /// by one pass in one `PawnsTeleported`, not a frame per pawn.
    Teleported(PawnId),
    /// Keep it; the node is not streamed, the player's class or client is not ready: an event
    /// wakes the queue.
    Wait,
    /// Keep it; the level-ready gate refused (counted as a spawn refusal): a ready callback
    /// retries.
    Refused,
    /// Keep it; spawn points are not registered and nothing will announce them: retry after
    /// `spawn_retry`.
    Retry,
}

/// A pawn spawned and possessed, for the game to replicate.
#[derive(Debug)]
pub(crate) struct Spawned {
    /// Who possesses it.
    pub(crate) player: PlayerId,
    /// Its player's connection (the possession and kit grants go there).
    pub(crate) connection: ConnectionId,
    /// The new pawn as every client sees it (dead if the player's restored state is dead).
    pub(crate) pawn: PawnView,
    /// Kits granted at this possession (`InitAbilityActorInfo`).
    pub(crate) granted: Vec<GameplayTag>,
    /// The dead pawn that waited for this replacement, destroyed now.
    pub(crate) replaced: Option<PawnId>,
}

/// The spawn manager's view of the game: what a spawn reads and changes.
pub(crate) struct Placement<'a> {
    /// Players and pawns: pawns are created, moved and destroyed here.
    pub(crate) roster: &'a mut Roster,
    /// What is streamed: the level-ready gate and the spawn points.
    pub(crate) streaming: &'a WorldStreaming,
    /// The startup kits possession grants.
    pub(crate) world: &'a WorldMap,
}

impl Placement<'_> {
    /// One attempt at `request`.
    pub(crate) fn attempt(&mut self, request: &SpawnRequest) -> Attempt {
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
            return self.teleport(pawn_id, &request.node);
        }
        // Honest refusal: check that a pawn actually resulted instead of assuming it.
        match self.restart_at_player_start(&request.player, &request.node) {
            Some(spawned) => Attempt::Spawned(spawned),
            None => {
                tracing::debug!(player = %request.player, node = %request.node,
                    "spawn refused by the level-ready gate; kept queued");
                Attempt::Refused
            }
        }
    }

    /// `RestartPlayerAtPlayerStart`: the engine's restart, which goes through the default-pawn
    /// gate and may silently produce nothing.
    pub(crate) fn restart_at_player_start(
        &mut self,
        player: &PlayerId,
        node: &NodeId,
    ) -> Option<Spawned> {
        let pawn = self.spawn_default_pawn_for(player, node)?;
        self.possess(player, pawn)
    }

    /// Whether `player`'s client reported `node` streamed.
    fn client_streamed(&self, player: &PlayerId, node: &NodeId) -> bool {
        self.roster.player(player).is_some_and(|p| p.loaded.as_ref() == Some(node))
    }

    /// `SpawnDefaultPawnFor`: creates a pawn, or returns `None` while the level-ready gate says
    /// no (docs/spec/transitions.md T1: the first line of defence) or the player's client has
    /// not streamed the node. A player whose restored player state holds `State.Dead` gets a
    /// dead pawn: only `RestartRequest` clears death.
    fn spawn_default_pawn_for(&mut self, player: &PlayerId, node: &NodeId) -> Option<PawnView> {
        if !self.streaming.is_level_ready_for_spawn(node) || !self.client_streamed(player, node) {
            return None;
        }
        let p = self.roster.player(player)?;
        let (character_def, alive) = (p.character_def.clone()?, !p.is_dead());
        let view = self.roster.create_pawn(player, character_def, node, alive).view();
        tracing::debug!(%player, pawn = view.pawn_id.0, %node, alive, "pawn spawned");
        Some(view)
    }

    /// `PossessedBy`: the player now controls `pawn` (its client must acknowledge), the
    /// ability system initialises (`InitAbilityActorInfo`: the kit latch's possession side), and
    /// a dead pawn waiting for this replacement is destroyed, last.
    fn possess(&mut self, player: &PlayerId, pawn: PawnView) -> Option<Spawned> {
        let mut p = self.roster.player_mut(player)?;
        let (granted, dead) = p.possess(pawn.pawn_id, &self.world.startup_kits);
        let connection = p.connection;
        drop(p);
        let replaced = dead.filter(|dead| self.roster.destroy_pawn(*dead));
        if let Some(dead) = replaced {
            tracing::info!(%player, pawn = dead.0, "dead pawn destroyed after its replacement exists");
        }
        Some(Spawned { player: player.clone(), connection, pawn, granted, replaced })
    }

    /// A level-transition request: move the existing pawn; never a second pawn. Replicating
    /// the move is the caller's (it batches them).
    fn teleport(&mut self, pawn_id: PawnId, node: &NodeId) -> Attempt {
        if !self.streaming.is_level_ready_for_spawn(node) {
            return Attempt::Refused;
        }
        let Some(pawn) = self.roster.pawn_mut(pawn_id) else {
            return Attempt::Wait;
        };
        pawn.node = node.clone();
        tracing::debug!(pawn = pawn_id.0, %node, "pawn teleported");
        Attempt::Teleported(pawn_id)
    }
}
