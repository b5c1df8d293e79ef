//! Per-player death respawn (docs/spec/transitions.md T13 and T14).
//!
//! ```text
//! RestartRequest (gated on State.Dead)
//!     ResetForRespawn        clear State.Dead, strip finite effects
//!     Unpossess              the dead pawn lingers
//!     RestartPlayer ── no pawn? ──> queue through the spawn manager (late-join, current node)
//!     destroy the dead pawn  last: once its replacement exists
//! ```
//!
//! No transition and no loading screen: no level is changing.

use std::time::Instant;

use gatehouse_protocol::{ErrorCode, PlayerId, ServerMessage};

use super::spawn::SpawnKind;
use super::streaming::{SpawnPoints, SpawnPointsOn};
use super::{ConnectionId, Game};
use crate::fields::OrNone;

impl Game {
    /// `Server_RestartLevel`.
    pub(crate) fn handle_restart_request(
        &mut self,
        now: Instant,
        connection: ConnectionId,
        id: &PlayerId,
    ) {
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
        tracing::info!(player = %id, dead_pawn = %OrNone(dead), "respawn requested");
        self.broadcast(ServerMessage::AbilityTagsChanged { player_id: id.clone(), tags });
        self.broadcast(ServerMessage::HealthChanged { player_id: id.clone(), health });
        if let Some(pawn_id) = dead {
            self.send(connection, ServerMessage::Unpossessed { pawn_id });
        }
        let node = self.current_spawn_node();
        let registered = SpawnPointsOn::Streamed(SpawnPoints::Registered);
        let restarted = if self.streaming.spawn_points_on(&node) == registered {
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

    /// The node a spawn outside a transition goes to (`GetCurrentSpawnNodeID`).
    pub(crate) fn current_spawn_node(&self) -> gatehouse_protocol::NodeId {
        self.streaming.streamed_node().cloned().unwrap_or_else(|| self.session.node().clone())
    }
}
