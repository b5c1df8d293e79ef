//! Joins: a player who logs in while no transition runs streams before it gets a pawn (seed 001,
//! "Why This Architecture": a pawn must never appear before the level it stands on, on any
//! machine).
//!
//! ```text
//! login ── ShowJoin{join, node, levels, rooms} ──> the joiner's loading screen goes up
//!       <── JoinReady{join} ─────────────────────  it streamed them: a spawn request is queued
//! PawnSpawned, Possessed ──> <── PossessionAcknowledged
//! EndJoin{join} ──────────────────────────────────>  placed: its screen drops
//! ```
//!
//! A join is the joiner's alone: players already in the world are not frozen for it. A
//! transition starting meanwhile supersedes every join (the joiner follows the transition, as a
//! player who logs in during one does). [`Joins`] owns the joins in flight and the join ids; it
//! sees no roster and emits nothing: the game acts on what its methods return.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gatehouse_protocol::{JoinId, NodeId, PlayerId};

/// One player's join.
#[derive(Debug, Clone)]
pub(crate) struct Join {
    pub(crate) id: JoinId,
    /// The node the joiner streams.
    pub(crate) node: NodeId,
    /// When it was shown: its client-ready deadline counts from here.
    shown_at: Instant,
    /// Whether its client reported the node streamed.
    loaded: bool,
    /// Whether it missed its client-ready deadline under the `proceed` policy: no deadline
    /// any more, it simply keeps its own loading screen.
    lapsed: bool,
}

/// What a join report came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JoinReport {
    /// The player's join in flight: its client streamed `node`.
    Loaded(NodeId),
    /// A join the server no longer runs (superseded, or already reported): ignored.
    Stale,
    /// A join id never issued: refused.
    NeverIssued,
}

/// The joins in flight.
#[derive(Debug)]
pub(crate) struct Joins {
    joins: BTreeMap<PlayerId, Join>,
    next_id: u64,
}

impl Default for Joins {
    fn default() -> Self {
        Joins { joins: BTreeMap::new(), next_id: 1 }
    }
}

impl Joins {
    /// Starts the join of `player` towards `node` at `now`; returns its id.
    pub(crate) fn start(&mut self, player: PlayerId, node: NodeId, now: Instant) -> JoinId {
        let id = JoinId(self.next_id);
        self.next_id += 1;
        self.joins.insert(player, Join { id, node, shown_at: now, loaded: false, lapsed: false });
        id
    }

    /// `JoinReady` from `player` for `id`.
    pub(crate) fn report(&mut self, player: &PlayerId, id: JoinId) -> JoinReport {
        if id.0 >= self.next_id {
            return JoinReport::NeverIssued;
        }
        match self.joins.get_mut(player) {
            Some(join) if join.id == id && !join.loaded => {
                join.loaded = true;
                JoinReport::Loaded(join.node.clone())
            }
            _ => JoinReport::Stale,
        }
    }

    /// Whether `player` is in a join.
    pub(crate) fn contains(&self, player: &PlayerId) -> bool {
        self.joins.contains_key(player)
    }

    /// The players in a join.
    pub(crate) fn players(&self) -> impl Iterator<Item = &PlayerId> {
        self.joins.keys()
    }

    /// How many joins are in flight.
    pub(crate) fn len(&self) -> usize {
        self.joins.len()
    }

    /// The joins whose client streamed its node, for the release check.
    pub(crate) fn loaded(&self) -> impl Iterator<Item = (&PlayerId, JoinId)> {
        self.joins.iter().filter(|(_, j)| j.loaded).map(|(p, j)| (p, j.id))
    }

    /// Ends the join of `player` (released, or the player left); returns it.
    pub(crate) fn remove(&mut self, player: &PlayerId) -> Option<Join> {
        self.joins.remove(player)
    }

    /// A transition started: every join is superseded. Returns how many there were.
    pub(crate) fn supersede_all(&mut self) -> usize {
        std::mem::take(&mut self.joins).len()
    }

    /// The earliest client-ready deadline of a join not streamed yet.
    pub(crate) fn ready_deadline(&self, timeout: Duration) -> Option<Instant> {
        self.awaiting().map(|j| j.shown_at + timeout).min()
    }

    /// The joiners whose client-ready deadline passed at `now` without a report.
    pub(crate) fn late(&self, now: Instant, timeout: Duration) -> Vec<PlayerId> {
        self.joins
            .iter()
            .filter(|(_, j)| !j.loaded && !j.lapsed && j.shown_at + timeout <= now)
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// `player` missed its deadline and stays (the `proceed` policy): no deadline any more.
    pub(crate) fn lapse(&mut self, player: &PlayerId) {
        if let Some(join) = self.joins.get_mut(player) {
            join.lapsed = true;
        }
    }

    /// The joins still streaming: neither loaded nor lapsed.
    fn awaiting(&self) -> impl Iterator<Item = &Join> {
        self.joins.values().filter(|j| !j.loaded && !j.lapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pid(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    /// A report names the join in flight; a second report, an older join or another
    /// player's join is stale, an id never issued is refused.
    #[test]
    fn only_the_players_own_join_in_flight_is_reported_loaded() {
        let t0 = Instant::now();
        let harbor = NodeId::new("harbor").unwrap();
        let mut joins = Joins::default();
        let a = joins.start(pid("a"), harbor.clone(), t0);
        let b = joins.start(pid("b"), harbor.clone(), t0);
        assert_eq!(joins.report(&pid("a"), b), JoinReport::Stale);
        assert_eq!(joins.report(&pid("a"), JoinId(9)), JoinReport::NeverIssued);
        assert_eq!(joins.report(&pid("a"), a), JoinReport::Loaded(harbor));
        assert_eq!(joins.report(&pid("a"), a), JoinReport::Stale);
        assert_eq!(joins.loaded().count(), 1);
        assert_eq!(joins.ready_deadline(Duration::from_secs(1)), Some(t0 + Duration::from_secs(1)));
        assert_eq!(joins.supersede_all(), 2);
        assert_eq!(joins.report(&pid("b"), b), JoinReport::Stale);
    }
}
