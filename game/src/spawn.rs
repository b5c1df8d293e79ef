//! The spawn queue (Unreal's `UPlayerSpawnManager`): pending spawn requests, oldest first.
//!
//! Outside the Completing phase of a transition, spawn requests queue; `OnReadyToSpawn` (or a
//! late ready callback inside Completing) processes them. A request whose node has no
//! registered spawn point yet stays queued with a retry; a spawn refused by the level-ready
//! gate stays queued too and is never counted as done (docs/spec/transitions.md T2). A
//! player has at most one pending request.
//!
//! [`SpawnQueue`] owns the requests and whether something woke it since the last processing
//! (a queued request, a ready callback, a settled load, OnReadyToSpawn, the retry timer): the
//! game's advance pass processes the queue only then. The attempts themselves, which need the
//! roster and the world-map gate, are in `placement.rs`.

use gatehouse_protocol::{NodeId, PlayerId};

/// What a spawn request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SpawnKind {
    /// The possession-time spawn of a player who joined during a transition; it captures the
    /// node known at login, which may be stale (docs/spec/transitions.md T4).
    Initial,
    /// A player joining while no transition runs, or the death-respawn fallback.
    LateJoin,
    /// A player who already has a pawn moves to the transition's node: a teleport, never a
    /// second pawn.
    LevelTransition,
}

impl std::fmt::Display for SpawnKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpawnKind::Initial => "initial",
            SpawnKind::LateJoin => "late_join",
            SpawnKind::LevelTransition => "level_transition",
        })
    }
}

/// One queued spawn request.
#[derive(Debug, Clone)]
pub(crate) struct SpawnRequest {
    pub(crate) player: PlayerId,
    pub(crate) kind: SpawnKind,
    pub(crate) node: NodeId,
    /// When it was queued (for [`Observation::SpawnPlaced`](super::Observation)).
    pub(crate) queued: std::time::Instant,
    /// The request's span: every attempt at it logs inside it, so its story reads in one place.
    span: tracing::Span,
}

impl SpawnRequest {
    /// A request to spawn `player`'s pawn on `node`, for `kind`'s reason, queued at `queued`.
    pub(crate) fn new(
        player: PlayerId,
        kind: SpawnKind,
        node: NodeId,
        queued: std::time::Instant,
    ) -> Self {
        // A debug span, as the events of an attempt are (the one info event names its player):
        // every transition makes one per player, and at the default level an info span costs
        // each of them a registry entry and its fields formatted, 4,000 at a time.
        let span =
            tracing::debug_span!("spawn_request", player = %player, kind = %kind, node = %node);
        SpawnRequest { player, kind, node, queued, span }
    }

    /// The request's span: every attempt at it logs inside it.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }
}

/// Pending spawn requests, oldest first.
#[derive(Debug, Default)]
pub(crate) struct SpawnQueue {
    pending: Vec<SpawnRequest>,
    /// Something that can let a request through happened since the queue was last processed.
    woken: bool,
}

impl SpawnQueue {
    /// Queues `request`, unless its player already has one pending: a player has at most one.
    pub(crate) fn queue(&mut self, request: SpawnRequest) {
        if !self.has_request_for(&request.player) {
            self.pending.push(request);
        }
    }

    /// Queues requests known to be for players without one (`EnsureSpawnsQueuedForAllPlayers`).
    pub(crate) fn extend(&mut self, requests: Vec<SpawnRequest>) {
        self.pending.extend(requests);
    }

    /// Takes every request out for an attempt; each that cannot be placed yet goes back with
    /// [`SpawnQueue::keep`], in order.
    pub(crate) fn take_all(&mut self) -> Vec<SpawnRequest> {
        std::mem::take(&mut self.pending)
    }

    /// Puts back a request that could not be placed yet.
    pub(crate) fn keep(&mut self, request: SpawnRequest) {
        self.pending.push(request);
    }

    /// Asks the next advance pass to process the queue.
    pub(crate) fn wake(&mut self) {
        self.woken = true;
    }

    /// Whether the queue was woken since the last call.
    pub(crate) fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.woken)
    }

    /// Pending spawn requests.
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// The players with a pending request, oldest request first.
    pub(crate) fn players(&self) -> impl Iterator<Item = &PlayerId> {
        self.pending.iter().map(|r| &r.player)
    }

    /// Whether a spawn request for `player` is pending (of any kind).
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

    /// The pending spawn requests, oldest first.
    pub(crate) fn requests(&self) -> impl Iterator<Item = &SpawnRequest> {
        self.pending.iter()
    }

    /// Drops every request for `player` (it left).
    pub(crate) fn remove_player(&mut self, player: &PlayerId) {
        self.pending.retain(|r| &r.player != player);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    fn request(player: &str, kind: SpawnKind, node: &str) -> SpawnRequest {
        let (player, node) = (PlayerId::new(player).unwrap(), NodeId::new(node).unwrap());
        SpawnRequest::new(player, kind, node, Instant::now())
    }

    /// The discards return how many requests they dropped (what the counters add), and keep
    /// the rest.
    #[test]
    fn discards_return_how_many_they_dropped() {
        let mut queue = SpawnQueue::default();
        queue.extend(vec![
            request("a", SpawnKind::Initial, "harbor"),
            request("b", SpawnKind::LateJoin, "forest"),
            request("c", SpawnKind::LevelTransition, "harbor"),
        ]);
        assert_eq!(queue.discard_not_for(&NodeId::new("harbor").unwrap()), 1);
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.discard_pending(SpawnKind::Initial), 1);
        let left: Vec<&str> = queue.requests().map(|r| r.player.as_str()).collect();
        assert_eq!(left, ["c"]);
    }
}
