//! Answers the game awaits from clients, and the bounds on each (docs/spec/transitions.md T9:
//! no client can wedge a transition). Each list is an [`Awaited`] index, so the earliest
//! deadline is found without a scan of every player. It sees no roster and emits nothing: the
//! game asks it who is late and acts on the answer.
//!
//! | list | asked when | answered by | late after | then |
//! |---|---|---|---|---|
//! | `shown` | `ShowTransition` goes out | `TransitionShown` or a ready report | the answer timeout | set aside |
//! | `prompt` | a pawn is possessed | `AcknowledgePossession` | the answer timeout | excused from placement |
//! | `settle` | a pawn is possessed | `AcknowledgePossession` | the settle timeout | the client-ready policy |
//! | `unresponsive` | set aside, or held a failed transition | anything it sends | the client-ready timeout | the client-ready policy |
//!
//! The answer timeout is the response timeout, cut by the crowd rule while the transition in
//! flight has a crowd answer time (see [`RESPONSE_QUORUM`]): the same clients answer
//! `ShowTransition` and a possession on the same paths.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use gatehouse_protocol::PlayerId;

use super::awaited::Awaited;

/// The crowd rule's quorum (docs/spec/transitions.md T9), as (part, whole): once this share of the
/// players asked to answer a transition have answered it, the crowd's answer time is known (the
/// slowest of those measured answers, about the 90th percentile), and the rest are late at
/// [`RESPONSE_CROWD_FACTOR`] times it. On loopback the slowest well-behaved answer came within 1.3
/// times that percentile in every measured transition (`deploy/misbehave.sh`); a client that
/// answers nothing is set aside about when its peers' slowest would have answered, not a fixed
/// timeout later. When more than one in ten never answer (a partition, say), the quorum is never
/// reached and the plain response timeout applies.
pub(crate) const RESPONSE_QUORUM: (usize, usize) = (9, 10);

/// How many times the crowd's answer time a client may take to answer under the crowd rule
/// (see [`RESPONSE_QUORUM`]).
pub(crate) const RESPONSE_CROWD_FACTOR: u32 = 2;

/// The answers awaited from clients (the module documentation's table).
#[derive(Debug, Default)]
pub(crate) struct Responses {
    /// The transition in flight's `ShowTransition` answers and the crowd rule over them.
    shown: ShownAnswers,
    /// Possessions awaiting their client's acknowledgement, for the answer timeout.
    prompt: Awaited,
    /// The same, for the settle timeout (the client-ready policy).
    settle: Awaited,
    /// Clients set aside (or held by a failed transition) and silent since: nothing waits for
    /// them, in this transition or any later one, until they send anything.
    unresponsive: Awaited,
}

/// The answers to the transition in flight's `ShowTransition`.
#[derive(Debug, Default)]
struct ShownAnswers {
    /// Players that answered it (`TransitionShown`, or a ready report).
    answered: BTreeSet<PlayerId>,
    /// Players shown it whose answer is awaited, by when it went to them.
    unanswered: Awaited,
    /// Players whose answer came while it was awaited, so how long it took is known (not an
    /// answer that came before `ShowTransition`, nor one from a player set aside).
    measured: BTreeSet<PlayerId>,
    /// The longest of those measured answers.
    slowest: Duration,
    /// The slowest measured answer when the measured answers reached [`RESPONSE_QUORUM`] of
    /// those asked: the crowd's answer time.
    crowd: Option<Duration>,
}

impl Responses {
    /// A transition started or ended: the `ShowTransition` answers and the crowd's answer time
    /// were its own.
    pub(crate) fn forget_shown(&mut self) {
        self.shown = ShownAnswers::default();
    }

    /// `ShowTransition` went to `player` at `now`: its answer is awaited, unless it answered
    /// already (from the id in `FreezeCharacters`).
    pub(crate) fn ask_shown(&mut self, player: &PlayerId, now: Instant) {
        if !self.shown.answered.contains(player) {
            self.shown.unanswered.ask(player, now);
        }
    }

    /// `player` answered `ShowTransition` at `now`. The first answer that brings the measured
    /// answers to [`RESPONSE_QUORUM`] of those asked sets the crowd's answer time: the slowest
    /// measured answer, so players asked at different times (joiners, relaunches) do not leave
    /// it to one fast answer.
    pub(crate) fn answer_shown(&mut self, player: &PlayerId, now: Instant) {
        let shown = &mut self.shown;
        shown.answered.insert(player.clone());
        let Some(asked) = shown.unanswered.forget(player) else { return };
        shown.measured.insert(player.clone());
        shown.slowest = shown.slowest.max(now.saturating_duration_since(asked));
        let (part, whole) = RESPONSE_QUORUM;
        let measured = shown.measured.len();
        let quorum = measured * whole >= (measured + shown.unanswered.len()) * part;
        if shown.crowd.is_none() && quorum {
            shown.crowd = Some(shown.slowest);
        }
    }

    /// `player` was set aside from the transition in flight: it is asked nothing more.
    pub(crate) fn set_aside(&mut self, player: &PlayerId) {
        self.shown.unanswered.forget(player);
    }

    /// `player` was possessed a pawn at `now`: its acknowledgement is awaited (both bounds).
    pub(crate) fn possessed(&mut self, player: &PlayerId, now: Instant) {
        self.prompt.ask(player, now);
        self.settle.ask(player, now);
    }

    /// `player`'s acknowledgement is awaited no more: it came, or its pawn was withdrawn.
    pub(crate) fn forget_acknowledgement(&mut self, player: &PlayerId) {
        self.prompt.forget(player);
        self.settle.forget(player);
    }

    /// `player` held a transition that failed, or was set aside, at `now`: it is unresponsive
    /// until it sends anything, and the client-ready timeout runs from now.
    pub(crate) fn unresponsive_from(&mut self, player: &PlayerId, now: Instant) {
        self.unresponsive.ask(player, now);
    }

    /// `player` answered what it was sent (a `TransitionShown` or ready report for the
    /// transition in flight, a report for its join, an acknowledgement of its pawn): it follows
    /// the protocol again, so it is no longer unresponsive and later transitions ask it again.
    /// A stale or unknown id proves nothing: a client that only ever sends those stays
    /// unresponsive and is kicked on time.
    pub(crate) fn heard_from(&mut self, player: &PlayerId) {
        self.unresponsive.forget(player);
    }

    /// The players unresponsive now, in id order: a transition starting sets them aside.
    pub(crate) fn unresponsive(&self) -> impl Iterator<Item = &PlayerId> {
        self.unresponsive.players()
    }

    /// `player` left: nothing is awaited from it any more.
    pub(crate) fn left(&mut self, player: &PlayerId) {
        self.shown.answered.remove(player);
        self.shown.measured.remove(player);
        self.shown.unanswered.forget(player);
        self.forget_acknowledgement(player);
        self.unresponsive.forget(player);
    }

    /// How long a client may take to answer what needs no streaming now: `timeout`, or under
    /// the crowd rule (`crowd_floor` set, the quorum reached) [`RESPONSE_CROWD_FACTOR`] times
    /// the crowd's answer time, at least `crowd_floor` and at most `timeout`.
    pub(crate) fn answer_timeout(
        &self,
        timeout: Duration,
        crowd_floor: Option<Duration>,
    ) -> Duration {
        match (self.shown.crowd, crowd_floor) {
            (Some(crowd), Some(floor)) => (crowd * RESPONSE_CROWD_FACTOR).max(floor).min(timeout),
            _ => timeout,
        }
    }

    /// The earliest answer-timeout deadline (`ShowTransition` answers and prompt
    /// acknowledgements), `answer` after the oldest question still open.
    pub(crate) fn answer_deadline(&self, answer: Duration) -> Option<Instant> {
        let shown = self.shown.unanswered.deadline(answer);
        shown.into_iter().chain(self.prompt.deadline(answer)).min()
    }

    /// The earliest settle-timeout deadline of an acknowledgement.
    pub(crate) fn settle_deadline(&self, settle: Duration) -> Option<Instant> {
        self.settle.deadline(settle)
    }

    /// The earliest client-ready deadline of an unresponsive client.
    pub(crate) fn unresponsive_deadline(&self, ready: Duration) -> Option<Instant> {
        self.unresponsive.deadline(ready)
    }

    /// The players whose `ShowTransition` answer is `answer` or more late at `now`, oldest
    /// first (the game sets each aside, which forgets it).
    pub(crate) fn late_shown(&self, now: Instant, answer: Duration) -> Vec<PlayerId> {
        self.shown.unanswered.late(now, answer)
    }

    /// The players whose acknowledgement is `answer` or more late at `now`, oldest first:
    /// no longer awaited within the answer timeout (the settle timeout still runs).
    pub(crate) fn take_late_prompt(&mut self, now: Instant, answer: Duration) -> Vec<PlayerId> {
        let late = self.prompt.late(now, answer);
        for player in &late {
            self.prompt.forget(player);
        }
        late
    }

    /// The players whose acknowledgement is `settle` or more late at `now`, oldest first.
    pub(crate) fn late_settle(&self, now: Instant, settle: Duration) -> Vec<PlayerId> {
        self.settle.late(now, settle)
    }

    /// `player`'s settle deadline is spent (the policy excused it until it acknowledges).
    pub(crate) fn settle_spent(&mut self, player: &PlayerId) {
        self.settle.forget(player);
    }

    /// The unresponsive players whose client-ready deadline (`ready` after they became so)
    /// passed at `now`: their deadline is spent, whatever the policy does with them.
    pub(crate) fn take_late_unresponsive(
        &mut self,
        now: Instant,
        ready: Duration,
    ) -> Vec<PlayerId> {
        let late = self.unresponsive.late(now, ready);
        for player in &late {
            self.unresponsive.forget(player);
        }
        late
    }

    /// Whether `player`'s acknowledgement is awaited within the settle timeout.
    #[cfg(test)]
    pub(crate) fn awaits_acknowledgement(&self, player: &PlayerId) -> bool {
        self.settle.is_awaited(player)
    }
}
