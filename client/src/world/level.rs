//! The world: the level instance this client plays in, from its creation for a travel
//! destination through begin-play to its teardown when the client travels on.
//!
//! Owns the world's identity, destination and phase. It does not know which scopes or listeners
//! live under it; whoever scoped them retires them when it is torn down
//! ([`super::Notice::WorldTornDown`]).

use std::time::Instant;

use gatehouse_protocol::{NodeId, TransitionId};

use super::WorldId;

/// Where a world is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldPhase {
    /// Created; its levels are streaming.
    Loading,
    /// Began play at this instant.
    Playing {
        /// When it began play.
        since: Instant,
    },
}

/// The client's current world.
#[derive(Debug, Clone)]
pub struct World {
    id: WorldId,
    node: Option<NodeId>,
    transition: Option<TransitionId>,
    phase: WorldPhase,
    created_at: Instant,
}

impl World {
    pub(crate) fn new(
        id: WorldId,
        node: Option<NodeId>,
        transition: Option<TransitionId>,
        now: Instant,
    ) -> World {
        World { id, node, transition, phase: WorldPhase::Loading, created_at: now }
    }

    /// Its serial.
    pub fn id(&self) -> WorldId {
        self.id
    }

    /// The world-map node it holds, if known.
    pub fn node(&self) -> Option<&NodeId> {
        self.node.as_ref()
    }

    /// The transition that created it (`None` for the world entered at login).
    pub fn transition(&self) -> Option<TransitionId> {
        self.transition
    }

    /// Its phase.
    pub fn phase(&self) -> WorldPhase {
        self.phase
    }

    /// Whether it has begun play.
    pub fn is_playing(&self) -> bool {
        matches!(self.phase, WorldPhase::Playing { .. })
    }

    /// When it was created.
    pub fn created_at(&self) -> Instant {
        self.created_at
    }

    /// Begins play; returns false if it already plays.
    pub(crate) fn begin_play(&mut self, now: Instant) -> bool {
        if self.is_playing() {
            return false;
        }
        self.phase = WorldPhase::Playing { since: now };
        true
    }
}
