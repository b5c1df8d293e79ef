//! Joins: a player who logs in while no transition runs streams before it gets a pawn
//! (docs/spec/sessions.md S5; docs/spec/transitions.md T1: a pawn must never appear before the
//! level it stands on, on any machine).
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
//!
//! The game asks after every step for the earliest client-ready deadline and the joins to
//! release, so both are indexes kept as joins change (no scan of every join per step): the
//! joins still streaming ordered by when they were shown, and the joins loaded.

use std::collections::{BTreeMap, BTreeSet};
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
    /// The joins neither loaded nor lapsed, by when they were shown: their deadlines in order.
    awaiting: BTreeSet<(Instant, PlayerId)>,
    /// The joins whose client streamed its node.
    loaded: BTreeSet<PlayerId>,
    /// Players whose join started or ended since the pause sync last took them: the only
    /// players outside a transition whose effects can be out of step (the sync visits only
    /// these).
    touched: BTreeSet<PlayerId>,
    next_id: u64,
    /// Joins visited by walks over every join (the complexity tests read it).
    visits: std::cell::Cell<u64>,
}

impl Default for Joins {
    fn default() -> Self {
        Joins {
            joins: BTreeMap::new(),
            awaiting: BTreeSet::new(),
            loaded: BTreeSet::new(),
            touched: BTreeSet::new(),
            next_id: 1,
            visits: std::cell::Cell::new(0),
        }
    }
}

impl Joins {
    /// Starts the join of `player` towards `node` at `now`; returns its id.
    pub(crate) fn start(&mut self, player: PlayerId, node: NodeId, now: Instant) -> JoinId {
        let id = JoinId(self.next_id);
        self.next_id += 1;
        let join = Join { id, node, shown_at: now };
        if let Some(old) = self.joins.insert(player.clone(), join) {
            self.unindex(&player, &old);
        }
        self.touched.insert(player.clone());
        self.awaiting.insert((now, player));
        id
    }

    /// `JoinReady` from `player` for `id`.
    pub(crate) fn report(&mut self, player: &PlayerId, id: JoinId) -> JoinReport {
        if id.0 >= self.next_id {
            return JoinReport::NeverIssued;
        }
        match self.joins.get(player) {
            Some(join) if join.id == id && !self.loaded.contains(player) => {
                self.awaiting.remove(&(join.shown_at, player.clone()));
                self.loaded.insert(player.clone());
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
        self.joins.keys().inspect(|_| self.visits.set(self.visits.get().wrapping_add(1)))
    }

    /// Joins the walks over every join visited so far (for the complexity tests).
    #[cfg(test)]
    pub(crate) fn visits(&self) -> u64 {
        self.visits.get()
    }

    /// How many joins are in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.joins.len()
    }

    /// The joins whose client streamed its node, for the release check.
    pub(crate) fn loaded(&self) -> impl Iterator<Item = (&PlayerId, JoinId)> {
        self.loaded.iter().filter_map(|p| self.joins.get(p).map(|j| (p, j.id)))
    }

    /// Ends the join of `player` (released, or the player left); returns it.
    pub(crate) fn remove(&mut self, player: &PlayerId) -> Option<Join> {
        let join = self.joins.remove(player)?;
        self.unindex(player, &join);
        self.touched.insert(player.clone());
        Some(join)
    }

    /// A transition started: every join is superseded. Returns how many there were.
    pub(crate) fn supersede_all(&mut self) -> usize {
        self.awaiting.clear();
        self.loaded.clear();
        let joins = std::mem::take(&mut self.joins);
        let superseded = joins.len();
        self.touched.extend(joins.into_keys());
        superseded
    }

    /// The players whose join started or ended since the last call, for the pause sync.
    pub(crate) fn take_touched(&mut self) -> BTreeSet<PlayerId> {
        std::mem::take(&mut self.touched)
    }

    /// The earliest client-ready deadline of a join not streamed yet.
    pub(crate) fn ready_deadline(&self, timeout: Duration) -> Option<Instant> {
        self.awaiting.first().map(|(shown_at, _)| *shown_at + timeout)
    }

    /// The joiners whose client-ready deadline passed at `now` without a report: only those are
    /// examined, and the first one still in time.
    pub(crate) fn late(&self, now: Instant, timeout: Duration) -> Vec<PlayerId> {
        self.awaiting
            .iter()
            .take_while(|(shown_at, _)| *shown_at + timeout <= now)
            .map(|(_, p)| p.clone())
            .collect()
    }

    /// `player` missed its deadline and stays (the `proceed` policy): no deadline any more.
    pub(crate) fn lapse(&mut self, player: &PlayerId) {
        if let Some(join) = self.joins.get(player) {
            self.awaiting.remove(&(join.shown_at, player.clone()));
        }
    }

    /// Drops `player`'s `join` from the indexes.
    fn unindex(&mut self, player: &PlayerId, join: &Join) {
        self.awaiting.remove(&(join.shown_at, player.clone()));
        self.loaded.remove(player);
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

    /// The deadlines come from the joins still streaming, earliest shown first: a report, a
    /// lapse or a departure takes a join out; a restarted join counts from its new show.
    #[test]
    fn the_ready_deadline_and_the_late_joiners_follow_the_joins_still_streaming() {
        let t0 = Instant::now();
        let (second, timeout) = (Duration::from_secs(1), Duration::from_secs(10));
        let harbor = NodeId::new("harbor").unwrap();
        let mut joins = Joins::default();
        let ids: Vec<JoinId> = (0..5)
            .map(|i| joins.start(pid(&format!("p{i}")), harbor.clone(), t0 + second * i))
            .collect();
        assert_eq!(joins.ready_deadline(timeout), Some(t0 + timeout));
        assert_eq!(joins.late(t0 + timeout + second, timeout), vec![pid("p0"), pid("p1")]);
        joins.report(&pid("p0"), ids[0]);
        joins.lapse(&pid("p1"));
        assert_eq!(joins.ready_deadline(timeout), Some(t0 + second * 2 + timeout));
        joins.remove(&pid("p2"));
        joins.start(pid("p3"), harbor.clone(), t0 + second * 9);
        assert_eq!(joins.ready_deadline(timeout), Some(t0 + second * 4 + timeout), "p4 now");
        assert_eq!(joins.late(t0 + second * 30, timeout), vec![pid("p4"), pid("p3")]);
        assert_eq!(joins.loaded().map(|(p, _)| p.clone()).collect::<Vec<_>>(), vec![pid("p0")]);
        joins.remove(&pid("p0"));
        assert_eq!(joins.loaded().count(), 0);
        joins.supersede_all();
        assert_eq!(
            (joins.ready_deadline(timeout), joins.late(t0 + second * 99, timeout)),
            (None, vec![])
        );
    }
}
