//! The source's part of a travel to another server (docs/spec/travel.md V2, V6, V7, V11): who
//! moves, where the seats stand, and each moving player's step.
//!
//! ```text
//! Resolving: FindDestination ──> a candidate ──> ReserveSeats (all or none) ──> every seat granted
//!     refused, or silent peer_timeout ──> the next candidate, within resolve_timeout
//!     refused Busy ──> the next candidate; none left: asked again a retry delay later
//!     refused Busy by a server this one refused Busy (a mutual travel) ──> not asked again by
//!         the server whose id sorts after the other's, which gives up; the other waits
//! Seated:  per moving player: Waiting ──SaveHandoff──> Saving ──saved at v──> Ticketed (TravelTo)
//!                                  Ticketed ──Placed──> released (closed Travelled)
//!                                  Ticketed ──seat lost, link lost, abandoned──> Recalling
//!                                  Recalling ──recall won or undecided──> sent back
//!                                  Recalling ──recall lost──> released (the destination has it)
//! ```
//!
//! A player leaves the book once released or sent back; the travel ends when the book is
//! empty. A recall outlives its travel (a newer travel superseded it, or its hard maximum
//! failed it): recalls are kept apart until the store answers. [`Outbound`] owns the travel's
//! book and the recalls in flight; it sees no roster and emits nothing: the game acts on what
//! its methods return.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gatehouse_protocol::{NodeId, PlayerId, ServerId, TransitionFailure, TransitionId};

use crate::model::PlayerSave;

/// Where a travel's seats stand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stage {
    /// No candidate has granted every seat yet.
    Resolving {
        /// The candidates asked so far in this travel, which refused or did not answer.
        asked: Vec<ServerId>,
        /// The candidate being asked, once the directory named one.
        asking: Option<Asking>,
        /// The candidates among `asked` that refused `Busy`: asked again once the directory
        /// has none other to name (docs/spec/travel.md V7).
        busy: Vec<ServerId>,
        /// When the `busy` candidates are asked again: set once the directory named none
        /// other, a retry delay later.
        retry: Option<Instant>,
        /// The servers whose own seat requests this server refused `Busy` meanwhile (it is in
        /// this travel) and gives way to (their id sorts first): one of them refusing this
        /// travel `Busy` too is a mutual travel, which this side does not wait for; the other
        /// side waits for this one to give up (docs/spec/travel.md V7).
        turned_away: Vec<ServerId>,
        /// When the travel gives up finding one (`resolve_timeout` from the first ask).
        deadline: Instant,
    },
    /// `server` granted every seat.
    Seated {
        /// The destination.
        server: ServerId,
        /// How long it holds each seat for its confirmation and its redemption.
        hold: Duration,
    },
}

/// A candidate asked for the travel's seats.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asking {
    /// The candidate.
    pub(crate) server: ServerId,
    /// `ReserveSeats` messages sent (one per `MAX_PLAYERS_PER_PEER_MESSAGE` players).
    pub(crate) requests: usize,
    /// How many of them it granted.
    pub(crate) granted: usize,
    /// When it counts as silent (`peer_timeout` from the ask).
    pub(crate) deadline: Instant,
}

/// One moving player's step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Mover {
    /// Waiting for the seats.
    Waiting,
    /// Its seat granted, its handoff save in flight under `ticket`.
    Saving {
        /// The save's ticket.
        ticket: u64,
        /// The save, at the version the player's load found.
        save: PlayerSave,
    },
    /// Its handoff save stands at `save.version`; its client was sent `TravelTo`.
    Ticketed {
        /// The handoff save, what a recall writes back.
        save: PlayerSave,
        /// The seat generation its ticket names.
        generation: u32,
    },
    /// Ticketed, and taken back: its recall is in flight.
    Recalling(Recall),
}

/// A recall in flight: the source takes a moving player back (docs/spec/travel.md V5, V7).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recall {
    /// The travel it left.
    pub(crate) travel: TransitionId,
    /// The recall's ticket.
    pub(crate) ticket: u64,
    /// The handoff save's version.
    pub(crate) version: u64,
    /// Why it comes back, for its `TransitionFailed`; none when a newer transition took it
    /// back (the client follows that one).
    pub(crate) reason: Option<TransitionFailure>,
}

/// A travel to another server in flight.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Travel {
    /// The source's transition.
    pub(crate) id: TransitionId,
    /// The remote node.
    pub(crate) node: NodeId,
    /// Where its seats stand.
    pub(crate) stage: Stage,
    /// The moving players not yet released nor sent back (nor recalling).
    pub(crate) movers: BTreeMap<PlayerId, Mover>,
    /// The moving players it set out with (`recent_transition_timings`' `players` for a move).
    pub(crate) moving: usize,
    /// Moving players released so far: placed at the destination.
    pub(crate) placed: usize,
    /// Moving players sent back so far (recalls included once they are answered).
    pub(crate) sent_back: usize,
}

impl Travel {
    /// The destination, once every seat was granted.
    pub(crate) fn destination(&self) -> Option<&ServerId> {
        match &self.stage {
            Stage::Seated { server, .. } => Some(server),
            Stage::Resolving { .. } => None,
        }
    }

    /// The server asked or seated: the one whose link the travel depends on.
    pub(crate) fn peer(&self) -> Option<&ServerId> {
        match &self.stage {
            Stage::Seated { server, .. } => Some(server),
            Stage::Resolving { asking, .. } => asking.as_ref().map(|a| &a.server),
        }
    }
}

/// The source's travels to other servers: the one in flight, and the recalls left over.
#[derive(Debug, Default)]
pub(crate) struct Outbound {
    travel: Option<Travel>,
    recalls: BTreeMap<PlayerId, Recall>,
}

impl Outbound {
    /// Starts the travel `id` to `node` for `movers` at `now`: resolving, for at most
    /// `resolve_timeout`. A travel still in flight must have been taken first.
    pub(crate) fn start(
        &mut self,
        id: TransitionId,
        node: NodeId,
        movers: impl IntoIterator<Item = PlayerId>,
        now: Instant,
        resolve_timeout: Duration,
    ) {
        let movers: BTreeMap<PlayerId, Mover> =
            movers.into_iter().map(|p| (p, Mover::Waiting)).collect();
        let stage = Stage::Resolving {
            asked: Vec::new(),
            asking: None,
            busy: Vec::new(),
            retry: None,
            turned_away: Vec::new(),
            deadline: now + resolve_timeout,
        };
        let moving = movers.len();
        self.travel = Some(Travel { id, node, stage, movers, moving, placed: 0, sent_back: 0 });
    }

    /// The travel in flight.
    pub(crate) fn travel(&self) -> Option<&Travel> {
        self.travel.as_ref()
    }

    /// The travel in flight, whatever its id.
    pub(crate) fn current_mut(&mut self) -> Option<&mut Travel> {
        self.travel.as_mut()
    }

    /// The travel in flight, if it is `id`.
    pub(crate) fn travel_mut(&mut self, id: TransitionId) -> Option<&mut Travel> {
        self.travel.as_mut().filter(|t| t.id == id)
    }

    /// Ends the travel in flight; returns it.
    pub(crate) fn take(&mut self) -> Option<Travel> {
        self.travel.take()
    }

    /// The recall of `player` under `ticket`, wherever it is kept: taken out of the travel's
    /// book or the recalls left over.
    pub(crate) fn take_recall_answered(
        &mut self,
        player: &PlayerId,
        ticket: u64,
    ) -> Option<Recall> {
        if let Some(travel) = self.travel.as_mut()
            && let Some(Mover::Recalling(recall)) = travel.movers.get(player)
            && recall.ticket == ticket
        {
            let recall = recall.clone();
            travel.movers.remove(player);
            return Some(recall);
        }
        self.take_recall(player, ticket)
    }

    /// Keeps a recall in flight for `player`.
    pub(crate) fn recalling(&mut self, player: PlayerId, recall: Recall) {
        self.recalls.insert(player, recall);
    }

    /// The recall of `player` under `ticket` left over from an earlier travel, taken.
    fn take_recall(&mut self, player: &PlayerId, ticket: u64) -> Option<Recall> {
        let recall = self.recalls.get(player).filter(|r| r.ticket == ticket)?.clone();
        self.recalls.remove(player);
        Some(recall)
    }

    /// The recall of `player` in flight for `travel`, taken: the destination placed it first.
    pub(crate) fn take_recall_of(
        &mut self,
        player: &PlayerId,
        travel: TransitionId,
    ) -> Option<Recall> {
        let recall = self.recalls.get(player).filter(|r| r.travel == travel)?.clone();
        self.recalls.remove(player);
        Some(recall)
    }

    /// The earliest deadline of the travel: its candidate's silence, the retry of the
    /// candidates that were busy, or the resolve bound.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match &self.travel.as_ref()?.stage {
            Stage::Resolving { asking: Some(asking), deadline, .. } => {
                Some(asking.deadline.min(*deadline))
            }
            Stage::Resolving { asking: None, retry: Some(retry), deadline, .. } => {
                Some((*retry).min(*deadline))
            }
            Stage::Resolving { asking: None, deadline, .. } => Some(*deadline),
            Stage::Seated { .. } => None,
        }
    }
}
