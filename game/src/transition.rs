//! The phased transition (docs/spec/transitions.md T3 and T7).
//!
//! ```text
//! None ─start─> Freezing ─destination resolved─> Loading ─node streamed─> WaitingForClients
//!   ^                                                                          │ all ready
//!   └──────── every player placed, or settle timeout with nothing loading ── Completing
//! ```
//!
//! Phases are server-side only; clients see `FreezeCharacters` (freeze, raise the loading
//! screen), `ShowTransition` (destination known: stream these levels) and `EndTransition`
//! (unfreeze, hide). A travel arriving in any phase supersedes the transition in flight: a new
//! id, ready tracking restarted, the loading screen kept up, and nothing that names the old id
//! or its loads applied to the new one.
//!
//! [`Transitions`] owns the transition in flight, the ids it hands out, the route schedule
//! (a route travel that comes due while a transition is in flight waits for its end) and the
//! players the last settle timeout ended a transition without, and the timings of the last
//! [`TIMINGS_KEPT`] transitions that ended ([`TransitionTiming`]). A [`Transition`] owns its
//! ready and excused sets, when each player was shown it, and its deadlines: the client-ready
//! deadline is WaitingForClients' start plus the timeout, the settle deadline is the Completing
//! phase's data. Phases are types: each [`Phase`] variant holds only its own data,
//! and a phase step consumes the old phase and returns the next. Nothing here sees the roster
//! or emits outputs; the game tells it who is present (the players at the start, then each
//! login and each departure) and acts on what these methods return.
//!
//! # Progress (docs/protocol.md 4.2)
//!
//! Once a transition waits for its clients (WaitingForClients, then Completing), the players it
//! waits for only leave the set: a login then, whether a first login, a relaunch or a reconnect
//! of a player it waited for, is an *arrival* ([`Transition::arrivals`]), shown the transition
//! and spawned in its window if its ready report comes in time, but awaited by nothing. So
//! every player whose report it awaits was shown it before WaitingForClients began, and one
//! deadline covers them all: the phase's start plus the client-ready timeout. Churn can only
//! take players out of the wait (a departure), never put one back in. Completing holds for the
//! placements awaited when it began, and those only leave too: a player it was not waiting for
//! that gets a new pawn in the window (a respawn, a client set aside coming back) is placed
//! there but not waited for. It holds at most a settle timeout, extended only by the
//! transition's own loads (the game's `is_transition_load_in_flight`), each bounded; and a
//! transition that fails at its hard maximum travels back without waiting for the players that
//! held it (the game's `handle_transition_limit`). The bounds that follow, with clients that
//! answer and with clients that do not, are stated in docs/protocol.md 4.2 and tested by the
//! harness's property `every_transition_ends_within_its_bound_under_churn_and_loss`.
//!
//! Cost: the present players that still owe a ready report are kept in one ordered set, so a
//! ready report, the client-ready deadline and the all-ready check are O(log N) in the number
//! of players, never a scan of all of them (a scan per report made each transition O(N²) on the
//! game task).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use gatehouse_protocol::{NodeId, PlayerId, TransitionId};
use serde::Serialize;

use super::observe::{Observation, Observations, TransitionOutcome};
use crate::world::TravelRoute;

/// Where a travel goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Destination {
    /// The session's current node, known once the session save settles
    /// (`TravelToCurrentNode`: the boot travel; docs/spec/transitions.md T4).
    SessionNode,
    /// A named node (route travel, operator travel).
    Node(NodeId),
}

/// Server-side transition phases; each holds only its own data.
#[derive(Debug)]
pub(crate) enum Phase {
    /// Characters frozen, loading screen up; the destination is being resolved.
    Freezing(Freezing),
    /// The destination's levels stream.
    Loading(Loading),
    /// Waiting for every client to report ready.
    WaitingForClients(WaitingForClients),
    /// The spawn window: spawns run directly; the screen holds until everyone is placed.
    Completing(Completing),
    /// The destination is another server's: its moving players are seated there, handed off,
    /// and each released once placed or sent back (docs/spec/travel.md V2; the game's
    /// `Outbound` holds where each stands).
    Moving(Moving),
}

/// Freezing: the travel waits until the session save and every player save in flight when the
/// transition started settled.
#[derive(Debug)]
pub(crate) struct Freezing {
    /// What to resolve.
    destination: Destination,
    /// The player saves in flight at the start (player, load ticket), not yet seen settled.
    /// A save a later login asks for is not waited for: at 200 logins/s some save is always
    /// loading, and waiting for each held the travel until logins stopped (3.8 s at 2,000
    /// clients).
    saves: VecDeque<(PlayerId, u64)>,
}

/// Loading: the destination (the transition's target) streams.
#[derive(Debug)]
pub(crate) struct Loading;

/// WaitingForClients.
#[derive(Debug)]
pub(crate) struct WaitingForClients {
    /// When the phase began: the client-ready deadline counts from here (every player that
    /// owes a report was shown the transition by then).
    since: Instant,
}

/// Completing: the settle-hold.
#[derive(Debug)]
pub(crate) struct Completing {
    /// When the settle-hold gives up if nothing is loading.
    settle_deadline: Instant,
    /// When every client was ready (or excused): the phase began.
    since: Instant,
}

/// Moving: the players travel to another server.
#[derive(Debug)]
pub(crate) struct Moving;

impl Freezing {
    /// The destination is resolved: its levels stream next.
    fn resolved(self) -> Loading {
        Loading
    }

    /// The destination is another server's: the players move there.
    fn remote(self) -> Moving {
        Moving
    }
}

impl Loading {
    /// The target node streamed at `now`: clients get until their deadline to report ready.
    fn streamed(self, now: Instant) -> WaitingForClients {
        WaitingForClients { since: now }
    }
}

impl WaitingForClients {
    /// Every client is ready at `now`: the spawn window opens, held at most until
    /// `settle_deadline`.
    fn all_ready(self, now: Instant, settle_deadline: Instant) -> Completing {
        Completing { settle_deadline, since: now }
    }
}

impl Phase {
    /// The phase's name, for operators.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Phase::Freezing(_) => "Freezing",
            Phase::Loading(_) => "Loading",
            Phase::WaitingForClients(_) => "WaitingForClients",
            Phase::Completing(_) => "Completing",
            Phase::Moving(_) => "Moving",
        }
    }
}

/// The transition in flight.
#[derive(Debug)]
pub(crate) struct Transition {
    pub(crate) id: TransitionId,
    /// Where it goes: the resolved destination once past Freezing.
    pub(crate) target: NodeId,
    pub(crate) phase: Phase,
    /// Players that reported ready for this id, kept from the moment the report arrives even
    /// if the server has not reached WaitingForClients yet.
    ready: BTreeSet<PlayerId>,
    /// Players the transition proceeds without (they missed the client-ready timeout under the
    /// `proceed` policy).
    excused: BTreeSet<PlayerId>,
    /// Players that missed the response timeout: nothing in this transition waits for them
    /// until a ready report of theirs brings them back.
    set_aside: BTreeSet<PlayerId>,
    /// Players who logged in once the transition waited for its clients (WaitingForClients or
    /// Completing), whether for the first time or as a relaunch or reconnect of a player it
    /// waited for: shown it, and placed in its spawn window if their ready report comes in
    /// time, but waited for by nothing (neither the ready reports nor the placements), so
    /// neither a stream of logins nor churn can hold the transition open (docs/protocol.md
    /// 4.2); one still pawnless at the end gets a join.
    arrivals: BTreeSet<PlayerId>,
    /// When each present player was shown this transition (at its start, or at login during
    /// it); a departure removes its entry.
    shown: BTreeMap<PlayerId, Instant>,
    /// The present players that owe a ready report (neither ready, excused, set aside nor
    /// arrivals). Each was shown the transition before it waited for its clients, so they share
    /// one client-ready deadline.
    owing: BTreeSet<PlayerId>,
    /// Entries of `owing` the queries examined (tests pin that it stays flat as players grow).
    #[cfg(test)]
    visits: std::cell::Cell<usize>,
    /// When it started: the hard maximum (`[game] transition_max_ms`) counts from here.
    pub(crate) started: Instant,
    /// When its current phase began (for [`Observation::PhaseEnded`]).
    phase_since: Instant,
    /// When its destination resolved and `ShowTransition` went out, once it has.
    resolved_at: Option<Instant>,
    /// A root span: every decision about this transition logs inside it.
    pub(crate) span: tracing::Span,
}

impl Transition {
    /// Whether spawning must wait for `OnReadyToSpawn` (`IsTransitionInProgress`: Completing
    /// deliberately counts as spawnable, docs/spec/transitions.md T6).
    fn blocks_spawns(&self) -> bool {
        !matches!(self.phase, Phase::Completing(_))
    }

    /// Whether `player` still owes a ready report.
    fn awaits(&self, player: &PlayerId) -> bool {
        !self.ready.contains(player)
            && !self.excused.contains(player)
            && !self.set_aside.contains(player)
            && !self.arrivals.contains(player)
    }

    /// The present players that still owe a ready report, in id order.
    pub(crate) fn owing(&self) -> impl Iterator<Item = &PlayerId> {
        self.owing.iter()
    }

    /// The present players not set aside: those `ShowTransition` asks an answer of.
    pub(crate) fn asked_to_answer(&self) -> impl Iterator<Item = &PlayerId> {
        self.shown.keys().filter(|p| !self.set_aside.contains(*p))
    }

    /// Whether `player` was set aside (it missed the response timeout).
    pub(crate) fn is_set_aside(&self, player: &PlayerId) -> bool {
        self.set_aside.contains(player)
    }

    /// Whether `player` is one of its arrivals (see [`Transition::arrivals`]).
    pub(crate) fn is_arrival(&self, player: &PlayerId) -> bool {
        self.arrivals.contains(player)
    }

    /// The players the transition did not wait for: those set aside, then the arrivals.
    pub(crate) fn not_waited_for(&self) -> impl Iterator<Item = &PlayerId> {
        self.set_aside.iter().chain(self.arrivals.iter().filter(|p| !self.set_aside.contains(*p)))
    }

    /// Counts `n` entries of [`Transition::owing`] examined by a query (in tests only).
    #[inline]
    fn visited(&self, n: usize) {
        #[cfg(test)]
        self.visits.set(self.visits.get() + n);
        #[cfg(not(test))]
        let _ = n;
    }

    /// Puts a present `player` in [`Transition::owing`] or takes it out, as it owes a report or
    /// not.
    fn update_owing(&mut self, player: &PlayerId) {
        if !self.shown.contains_key(player) {
            return;
        }
        if self.awaits(player) {
            self.owing.insert(player.clone());
        } else {
            self.owing.remove(player);
        }
    }

    /// The client-ready deadline, in WaitingForClients: `timeout` from the phase's start. Every
    /// player that owes a report was shown the transition by then (a later login is an
    /// arrival), so no show time is later.
    fn ready_deadline(&self, timeout: Duration) -> Option<Instant> {
        let Phase::WaitingForClients(WaitingForClients { since }) = self.phase else {
            return None;
        };
        Some(since + timeout)
    }
}

/// How many [`TransitionTiming`]s the game keeps: the most recent ones.
pub(crate) const TIMINGS_KEPT: usize = 256;

/// How long one transition that ended took, as the server's core saw it, from the `now` it was
/// given (the core never reads a clock). In the admin endpoint's `GET /state` under
/// `recent_transition_timings`, oldest first; the load benchmark (`deploy/load.sh`) reads the
/// last-ready → ended figure from it (docs/performance.md, "The load benchmark").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TransitionTiming {
    /// The transition.
    pub transition_id: TransitionId,
    /// Players logged in when it ended; for a travel to another server, its moving players
    /// (docs/spec/travel.md V2), whether placed there or sent back.
    pub players: usize,
    /// From its start to every client ready: when the all-ready check passed (the last ready
    /// report or excuse, a departure, or the node streamed if every report came earlier), µs.
    pub started_to_all_ready_us: u64,
    /// From every client ready to its end (`EndTransition` sent), µs: spawns, possession and
    /// the players' acknowledgements, the settle-hold's share.
    pub all_ready_to_ended_us: u64,
    /// From its start to its end, µs.
    pub whole_us: u64,
    /// Whether it ended at the settle timeout with players unplaced rather than with every
    /// player placed.
    pub settle_timed_out: bool,
}

/// `to - from` in whole µs, 0 if `to` is earlier, saturating at `u64::MAX`.
fn micros(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_micros()).unwrap_or(u64::MAX)
}

/// What a ready report came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadyReport {
    /// Kept for the transition in flight.
    Kept,
    /// No transition is in flight: stale.
    NoTransition,
    /// It names a superseded transition: stale.
    Superseded,
    /// It names a transition never started: refused.
    NeverIssued,
}

/// Where the route stands.
#[derive(Debug, Default)]
struct RouteSchedule {
    /// Index into the travel route of the next route travel.
    next: usize,
    /// A route travel came due; it starts once no transition is in flight.
    due: bool,
}

/// The transition sub-state of the game.
#[derive(Debug)]
pub(crate) struct Transitions {
    current: Option<Transition>,
    /// The id of the next transition.
    next_id: u64,
    route: RouteSchedule,
    /// The players a settle timeout last ended a transition without (for operators).
    last_unplaced: Vec<PlayerId>,
    /// The target of the last transition that ended (not failed): where a failed transition's
    /// recovery travels.
    last_good: Option<NodeId>,
    /// Transitions in a row that failed at their hard maximum, since the last that ended.
    failed_in_a_row: u32,
    /// Set once the world is unavailable (`max_failed_transitions` transitions in a row
    /// failed), with what failed: no transition starts and no login is admitted again.
    unavailable: Option<String>,
    /// The timings of the last [`TIMINGS_KEPT`] transitions that ended, oldest first.
    timings: VecDeque<TransitionTiming>,
    /// Phase and transition durations, ready reports, for the shell's metrics.
    observations: Observations,
}

impl Default for Transitions {
    fn default() -> Self {
        Transitions {
            current: None,
            next_id: 1,
            route: RouteSchedule::default(),
            last_unplaced: Vec::new(),
            last_good: None,
            failed_in_a_row: 0,
            unavailable: None,
            timings: VecDeque::new(),
            observations: Observations::default(),
        }
    }
}

impl Transitions {
    /// What made the world unavailable, once it is: no transition starts after that.
    pub(crate) fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    /// The world is unavailable from now on, because of `detail`.
    pub(crate) fn declare_unavailable(&mut self, detail: String) {
        self.unavailable = Some(detail);
    }

    /// The transition in flight.
    pub(crate) fn current(&self) -> Option<&Transition> {
        self.current.as_ref()
    }

    /// The span of the transition in flight (a disabled span when there is none).
    pub(crate) fn span(&self) -> tracing::Span {
        self.current.as_ref().map_or_else(tracing::Span::none, |t| t.span.clone())
    }

    /// Whether the transition in flight is in Completing (its spawn window is open).
    pub(crate) fn is_completing(&self) -> bool {
        self.current.as_ref().is_some_and(|t| matches!(t.phase, Phase::Completing(_)))
    }

    /// Whether a transition in flight owns spawning (any phase but Completing).
    pub(crate) fn blocks_spawns(&self) -> bool {
        self.current.as_ref().is_some_and(Transition::blocks_spawns)
    }

    /// `StartTransition`'s bookkeeping: a new transition in Freezing towards `destination`
    /// (provisionally `target`), shown to `players` (everyone present) at `now`. Returns its id
    /// and the transition it supersedes, if any.
    pub(crate) fn start<'a>(
        &mut self,
        now: Instant,
        destination: Destination,
        target: NodeId,
        players: impl Iterator<Item = &'a PlayerId>,
    ) -> (TransitionId, Option<Transition>) {
        let id = TransitionId(self.next_id);
        self.next_id += 1;
        let superseded = self.current.take();
        if let Some(old) = &superseded {
            self.observe_end(old, now, TransitionOutcome::Superseded);
        }
        // A root span: a transition that supersedes another is its sibling, not its child.
        let span = tracing::info_span!(parent: None, "transition", transition = id.0, node = tracing::field::Empty);
        let shown: BTreeMap<PlayerId, Instant> = players.map(|p| (p.clone(), now)).collect();
        let owing = shown.keys().cloned().collect();
        self.current = Some(Transition {
            id,
            target,
            phase: Phase::Freezing(Freezing { destination, saves: VecDeque::new() }),
            ready: BTreeSet::new(),
            excused: BTreeSet::new(),
            set_aside: BTreeSet::new(),
            arrivals: BTreeSet::new(),
            shown,
            owing,
            #[cfg(test)]
            visits: std::cell::Cell::new(0),
            started: now,
            phase_since: now,
            resolved_at: None,
            span,
        });
        (id, superseded)
    }

    /// Records that `player` was shown the transition in flight at `now` (a login during it,
    /// first or again): it is present from now on. Returns whether it is an arrival the
    /// transition does not wait for: it logged in once the transition waited for its clients
    /// (see [`Transition::arrivals`]; the module documentation, "Progress"). False with no
    /// transition in flight.
    pub(crate) fn show(&mut self, player: &PlayerId, now: Instant) -> bool {
        let Some(t) = &mut self.current else { return false };
        let arrival = matches!(t.phase, Phase::WaitingForClients(_) | Phase::Completing(_));
        if arrival {
            t.arrivals.insert(player.clone());
        }
        t.shown.insert(player.clone(), now);
        t.update_owing(player);
        arrival
    }

    /// `Server_ReportTransitionReady` at `now`: keeps a report for the current id whatever the
    /// phase. A player's first report after `ShowTransition` is observed with how long it took
    /// ([`Observation::ClientReady`]).
    pub(crate) fn record_ready(
        &mut self,
        player: &PlayerId,
        id: TransitionId,
        now: Instant,
    ) -> ReadyReport {
        let t = match self.named(id) {
            Ok(t) => t,
            Err(report) => return report,
        };
        let first = t.ready.insert(player.clone());
        // A ready report brings a client that was set aside back in: it has streamed the
        // destination after all.
        t.set_aside.remove(player);
        t.update_owing(player);
        let shown = t.resolved_at.zip(t.shown.get(player)).map(|(r, s)| r.max(*s));
        if let Some(shown) = shown.filter(|_| first) {
            let waited = now.saturating_duration_since(shown);
            self.observations.push(Observation::ClientReady { waited });
        }
        ReadyReport::Kept
    }

    /// The transition in flight if `id` names it; otherwise what a report naming `id` is: stale
    /// (no transition, or a superseded one) or never issued.
    fn named(&mut self, id: TransitionId) -> Result<&mut Transition, ReadyReport> {
        if !self.was_issued(id) {
            return Err(ReadyReport::NeverIssued);
        }
        match &mut self.current {
            None => Err(ReadyReport::NoTransition),
            Some(t) if t.id != id => Err(ReadyReport::Superseded),
            Some(t) => Ok(t),
        }
    }

    /// `player` left: it is no longer waited for, and its ready report (or excuse) belonged to
    /// the connection that left, so a relaunch reports for itself (docs/spec/sessions.md S10:
    /// readiness belongs to the connection).
    pub(crate) fn forget(&mut self, player: &PlayerId) {
        if let Some(t) = &mut self.current {
            t.ready.remove(player);
            t.excused.remove(player);
            t.set_aside.remove(player);
            t.arrivals.remove(player);
            t.shown.remove(player);
            t.owing.remove(player);
        }
    }

    /// The target of the transition in flight once resolved (past Freezing): what a ready
    /// report says the client streamed.
    pub(crate) fn resolved_target(&self) -> Option<&NodeId> {
        self.current.as_ref().filter(|t| !matches!(t.phase, Phase::Freezing(_))).map(|t| &t.target)
    }

    /// When the transition in flight reaches the hard maximum `max`.
    pub(crate) fn limit_deadline(&self, max: Duration) -> Option<Instant> {
        self.current.as_ref().map(|t| t.started + max)
    }

    /// The target of the last transition that ended (not failed).
    pub(crate) fn last_good(&self) -> Option<&NodeId> {
        self.last_good.as_ref()
    }

    /// Whether `id` was ever allocated (docs/protocol.md 5: an id above the largest allocated
    /// was never issued).
    pub(crate) fn was_issued(&self, id: TransitionId) -> bool {
        id.0 < self.next_id
    }

    /// What a `TransitionShown` naming `id` is: for the transition in flight (kept whatever
    /// the phase: it may come before `ShowTransition`, from the id in `FreezeCharacters`),
    /// stale, or never issued. The answer itself is the responses' (`responses.rs`).
    pub(crate) fn classify(&mut self, id: TransitionId) -> ReadyReport {
        match self.named(id) {
            Ok(_) => ReadyReport::Kept,
            Err(report) => report,
        }
    }

    /// Sets `player` aside from the transition in flight: it is asked nothing more and the
    /// transition no longer waits for its ready report.
    pub(crate) fn set_aside(&mut self, player: &PlayerId) {
        if let Some(t) = &mut self.current {
            t.set_aside.insert(player.clone());
            t.update_owing(player);
        }
    }

    /// Whether `player` is set aside from the transition in flight.
    pub(crate) fn is_set_aside(&self, player: &PlayerId) -> bool {
        self.current.as_ref().is_some_and(|t| t.is_set_aside(player))
    }

    /// Whether `player` is an arrival of the transition in flight (see
    /// [`Transition::arrivals`]).
    pub(crate) fn is_arrival(&self, player: &PlayerId) -> bool {
        self.current.as_ref().is_some_and(|t| t.is_arrival(player))
    }

    /// The transition proceeds without `player` (the `proceed` policy).
    pub(crate) fn excuse(&mut self, player: PlayerId) {
        if let Some(t) = &mut self.current {
            t.excused.insert(player.clone());
            t.update_owing(&player);
        }
    }

    /// While Freezing: waits for `saves` (player, load ticket), the player saves in flight when
    /// the transition started, as well.
    pub(crate) fn await_saves(&mut self, saves: VecDeque<(PlayerId, u64)>) {
        if let Some(Phase::Freezing(freezing)) = self.current.as_mut().map(|t| &mut t.phase) {
            freezing.saves = saves;
        }
    }

    /// While Freezing: whether every awaited save has settled, `loading` telling whether a
    /// player's load with that ticket is still in flight. Settled saves are dropped from the
    /// front as they are seen, so each is asked about until it settles and never again
    /// (amortised O(1) per call).
    pub(crate) fn awaited_saves_settled(
        &mut self,
        loading: impl Fn(&PlayerId, u64) -> bool,
    ) -> bool {
        let Some(Phase::Freezing(freezing)) = self.current.as_mut().map(|t| &mut t.phase) else {
            return true;
        };
        while let Some((player, ticket)) = freezing.saves.front() {
            if loading(player, *ticket) {
                return false;
            }
            freezing.saves.pop_front();
        }
        true
    }

    /// What the transition in flight resolves, while it is in Freezing.
    pub(crate) fn destination(&self) -> Option<&Destination> {
        match &self.current.as_ref()?.phase {
            Phase::Freezing(freezing) => Some(&freezing.destination),
            _ => None,
        }
    }

    /// Freezing → Loading at `now`: the destination resolved to `target` (`ShowTransition`
    /// goes out now).
    pub(crate) fn resolve(&mut self, target: NodeId, now: Instant) -> bool {
        self.resolve_to(target, now, |freezing| Phase::Loading(freezing.resolved()))
    }

    /// Freezing → `next(freezing)` at `now`, the destination resolved to `target`.
    fn resolve_to(
        &mut self,
        target: NodeId,
        now: Instant,
        next: impl FnOnce(Freezing) -> Phase,
    ) -> bool {
        let Some(t) = self.current.as_mut().filter(|t| matches!(t.phase, Phase::Freezing(_)))
        else {
            return false;
        };
        t.span.record("node", tracing::field::display(&target));
        t.target = target;
        t.resolved_at = Some(now);
        self.step(now, |phase| match phase {
            Phase::Freezing(freezing) => Ok(next(freezing)),
            other => Err(other),
        })
    }

    /// Loading → WaitingForClients at `now`, if `node` is what the transition in flight loads.
    pub(crate) fn node_streamed(&mut self, node: &NodeId, now: Instant) -> bool {
        if self.current.as_ref().is_none_or(|t| t.target != *node) {
            return false;
        }
        self.step(now, |phase| match phase {
            Phase::Loading(loading) => Ok(Phase::WaitingForClients(loading.streamed(now))),
            other => Err(other),
        })
    }

    /// Whether the transition in flight is in WaitingForClients and every present player
    /// reported ready or is excused.
    pub(crate) fn all_ready(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|t| matches!(t.phase, Phase::WaitingForClients(_)) && t.owing.is_empty())
    }

    /// WaitingForClients → Completing at `now` (every client ready), held at most until
    /// `settle_deadline`.
    pub(crate) fn complete(&mut self, now: Instant, settle_deadline: Instant) -> bool {
        self.step(now, |phase| match phase {
            Phase::WaitingForClients(waiting) => {
                Ok(Phase::Completing(waiting.all_ready(now, settle_deadline)))
            }
            other => Err(other),
        })
    }

    /// How many players reported ready so far.
    pub(crate) fn ready_count(&self) -> usize {
        self.current.as_ref().map_or(0, |t| t.ready.len())
    }

    /// The client-ready deadline, in WaitingForClients while a present player still owes a
    /// report: one for all of them (the module documentation, "Progress").
    pub(crate) fn client_ready_deadline(&self, timeout: Duration) -> Option<Instant> {
        let t = self.current.as_ref()?;
        if t.owing.is_empty() {
            return None;
        }
        t.visited(1);
        t.ready_deadline(timeout)
    }

    /// The present players that still owe a report at `now`, in id order, once the client-ready
    /// deadline passed; none before. Visits only those.
    pub(crate) fn late_players(&self, now: Instant, timeout: Duration) -> Vec<PlayerId> {
        let Some(t) = &self.current else { return Vec::new() };
        if t.ready_deadline(timeout).is_none_or(|at| at > now) {
            return Vec::new();
        }
        t.visited(t.owing.len());
        t.owing.iter().cloned().collect()
    }

    /// The settle deadline, in Completing.
    pub(crate) fn settle_deadline(&self) -> Option<Instant> {
        match self.current.as_ref()?.phase {
            Phase::Completing(Completing { settle_deadline, .. }) => Some(settle_deadline),
            _ => None,
        }
    }

    /// Holds the settle-hold at least until `at`, in Completing.
    pub(crate) fn hold_until(&mut self, at: Instant) {
        if let Some(Transition { phase: Phase::Completing(completing), .. }) = &mut self.current {
            completing.settle_deadline = completing.settle_deadline.max(at);
        }
    }

    /// Ends the transition in flight (Completing → none) at `now`, with `players` logged in;
    /// returns it. Its target is the last good node from now on, and its timing is kept.
    pub(crate) fn finish(
        &mut self,
        now: Instant,
        players: usize,
        settle_timed_out: bool,
    ) -> Option<Transition> {
        let t = self.current.take()?;
        let outcome = match settle_timed_out {
            true => TransitionOutcome::SettleTimeout,
            false => TransitionOutcome::Completed,
        };
        self.observe_end(&t, now, outcome);
        self.last_good = Some(t.target.clone());
        self.failed_in_a_row = 0;
        // Only Completing ends; were it anything else, every client counts as ready at the end.
        let all_ready = match t.phase {
            Phase::Completing(Completing { since, .. }) => since,
            _ => now,
        };
        self.keep_timing(&t, players, all_ready, now, settle_timed_out);
        Some(t)
    }

    /// Keeps the timing of `t`, which ended at `now` with `players` logged in, every client
    /// ready at `all_ready`: the oldest of [`TIMINGS_KEPT`] goes.
    fn keep_timing(
        &mut self,
        t: &Transition,
        players: usize,
        all_ready: Instant,
        now: Instant,
        settle_timed_out: bool,
    ) {
        if self.timings.len() == TIMINGS_KEPT {
            self.timings.pop_front();
        }
        self.timings.push_back(TransitionTiming {
            transition_id: t.id,
            players,
            started_to_all_ready_us: micros(t.started, all_ready),
            all_ready_to_ended_us: micros(all_ready, now),
            whole_us: micros(t.started, now),
            settle_timed_out,
        });
    }

    /// Freezing → Moving at `now`: the destination `target` is a remote node.
    pub(crate) fn resolve_remote(&mut self, target: NodeId, now: Instant) -> bool {
        self.resolve_to(target, now, |freezing| Phase::Moving(freezing.remote()))
    }

    /// Ends the travel to another server in flight at `now`, which set out to move `players`;
    /// returns it. It moved nobody when `failed`: counted as a failure, but not towards
    /// `max_failed_transitions` (this world still loads, docs/spec/travel.md V7); either way
    /// the last good node stays the one this server stands on.
    pub(crate) fn finish_move(
        &mut self,
        now: Instant,
        players: usize,
        failed: bool,
    ) -> Option<Transition> {
        let t = self.current.take_if(|t| matches!(t.phase, Phase::Moving(_)))?;
        let outcome = if failed { TransitionOutcome::Failed } else { TransitionOutcome::Completed };
        self.observe_end(&t, now, outcome);
        // Nobody here reports ready for a move: its clients are elsewhere.
        self.keep_timing(&t, players, now, now, false);
        Some(t)
    }

    /// The timings of the last [`TIMINGS_KEPT`] transitions that ended, oldest first.
    pub(crate) fn timings(&self) -> impl Iterator<Item = &TransitionTiming> {
        self.timings.iter()
    }

    /// Fails the transition in flight at `now` (it reached the hard maximum); returns it, and
    /// how many transitions in a row have failed now, this one included.
    pub(crate) fn fail(&mut self, now: Instant) -> Option<(Transition, u32)> {
        let t = self.current.take()?;
        self.observe_end(&t, now, TransitionOutcome::Failed);
        self.failed_in_a_row += 1;
        Some((t, self.failed_in_a_row))
    }

    /// Observes the end of `t` at `now`: its last phase's duration, then the whole.
    fn observe_end(&mut self, t: &Transition, now: Instant, outcome: TransitionOutcome) {
        let phase = t.phase.name();
        let duration = now.saturating_duration_since(t.phase_since);
        self.observations.push(Observation::PhaseEnded { phase, duration });
        let duration = now.saturating_duration_since(t.started);
        self.observations.push(Observation::TransitionEnded { outcome, duration });
    }

    /// The oldest observation not yet taken (phase and transition durations, ready reports).
    pub(crate) fn poll_observation(&mut self) -> Option<Observation> {
        self.observations.pop()
    }

    /// Records the players a settle timeout ended a transition without.
    pub(crate) fn record_unplaced(&mut self, unplaced: Vec<PlayerId>) {
        self.last_unplaced = unplaced;
    }

    /// The players the last settle timeout ended a transition without.
    pub(crate) fn last_unplaced(&self) -> &[PlayerId] {
        &self.last_unplaced
    }

    /// A route travel came due.
    pub(crate) fn route_came_due(&mut self) {
        self.route.due = true;
    }

    /// The node of a due route travel, once no transition is in flight: a scheduled travel
    /// never supersedes (an operator's does), so a client that never reports ready or never
    /// acknowledges is bounded by the client-ready and settle timeouts instead of having its
    /// clock reset by every route travel.
    pub(crate) fn take_due_route_travel(&mut self, route: &TravelRoute) -> Option<NodeId> {
        if !self.route.due || self.current.is_some() {
            return None;
        }
        self.route.due = false;
        let node = route.route.get(self.route.next % route.route.len().max(1))?.clone();
        self.route.next = (self.route.next + 1) % route.route.len().max(1);
        Some(node)
    }

    /// A phase step: hands the phase of the transition in flight, by value, to `step`, which
    /// consumes it and returns the next phase (`Ok`), or gives it back (`Err`: no step).
    /// Returns whether the phase changed; a change at `now` is observed with the old phase's
    /// duration ([`Observation::PhaseEnded`]).
    fn step(&mut self, now: Instant, step: impl FnOnce(Phase) -> Result<Phase, Phase>) -> bool {
        let Some(mut t) = self.current.take() else { return false };
        let old = t.phase.name();
        let (phase, stepped) = match step(t.phase) {
            Ok(next) => (next, true),
            Err(old) => (old, false),
        };
        t.phase = phase;
        if stepped {
            let duration = now.saturating_duration_since(t.phase_since);
            self.observations.push(Observation::PhaseEnded { phase: old, duration });
            t.phase_since = now;
        }
        self.current = Some(t);
        stepped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    fn pid(s: &str) -> PlayerId {
        PlayerId::new(s).unwrap()
    }

    /// The phase machine steps only from the phase each step names.
    #[test]
    fn each_phase_step_applies_only_to_its_own_phase() {
        let t0 = Instant::now();
        let mut ts = Transitions::default();
        let players = [pid("a")];
        ts.start(t0, Destination::SessionNode, node("a"), players.iter());
        assert!(!ts.node_streamed(&node("a"), t0), "not loading yet");
        assert!(!ts.complete(t0, t0), "not waiting yet");
        assert!(ts.resolve(node("b"), t0));
        assert!(!ts.resolve(node("c"), t0), "resolved once");
        assert!(!ts.node_streamed(&node("a"), t0), "another node's load");
        assert!(ts.node_streamed(&node("b"), t0));
        assert!(!ts.all_ready());
        assert_eq!(ts.record_ready(&pid("a"), TransitionId(1), t0), ReadyReport::Kept);
        assert!(ts.all_ready());
        assert!(ts.complete(t0, t0 + Duration::from_secs(15)));
        assert_eq!(ts.settle_deadline(), Some(t0 + Duration::from_secs(15)));
        assert!(ts.finish(t0, 1, false).is_some());
        assert!(ts.current().is_none());
    }

    /// Progress (docs/protocol.md 4.2): a relaunch while the server loads is waited for again,
    /// one once the transition waits for its clients is an arrival; either way the one
    /// client-ready deadline, from WaitingForClients, stays where it was.
    #[test]
    fn a_relaunch_once_clients_are_awaited_is_an_arrival_and_the_deadline_stays() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(30);
        let s = Duration::from_secs(1);
        let mut ts = Transitions::default();
        let (a, b, c) = (pid("a"), pid("b"), pid("c"));
        ts.start(t0, Destination::Node(node("a")), node("a"), [a.clone(), b.clone()].iter());
        let id = ts.current().map(|t| t.id).unwrap();
        ts.resolve(node("a"), t0);
        // c relaunches while the server loads: waited for again.
        ts.forget(&c);
        assert!(!ts.show(&c, t0 + s), "a relaunch while loading is waited for");
        let streamed = t0 + s * 2;
        ts.node_streamed(&node("a"), streamed);
        // b relaunches once clients are awaited: an arrival, owing nothing.
        ts.forget(&b);
        assert!(ts.show(&b, streamed + s * 5), "a relaunch once clients are awaited is an arrival");
        assert!(ts.is_arrival(&b) && !ts.is_arrival(&c));
        assert_eq!(ts.client_ready_deadline(timeout), Some(streamed + timeout));
        assert_eq!(ts.late_players(streamed + timeout, timeout), vec![a.clone(), c.clone()]);
        assert_eq!(ts.record_ready(&a, id, streamed + s), ReadyReport::Kept);
        assert_eq!(ts.record_ready(&c, id, streamed + s), ReadyReport::Kept);
        assert!(ts.all_ready(), "the arrival's report is not awaited");
        assert_eq!(ts.client_ready_deadline(timeout), None);
    }

    /// A ready report, the client-ready deadline, the late players and the all-ready check
    /// examine the same few entries at 10 players as at 2,000 (a scan of every player per
    /// report made each transition O(N²) on the game task).
    #[test]
    fn ready_tracking_examines_a_flat_number_of_players_per_report() {
        let timeout = Duration::from_secs(30);
        let per_report = |players: usize| {
            let t0 = Instant::now();
            let mut ts = Transitions::default();
            let ids: Vec<PlayerId> = (0..players).map(|i| pid(&format!("p{i:05}"))).collect();
            ts.start(t0, Destination::Node(node("a")), node("a"), ids.iter());
            ts.resolve(node("a"), t0);
            ts.node_streamed(&node("a"), t0);
            let (id, mut visits) = (ts.current().map(|t| t.id).unwrap(), Vec::new());
            for (n, player) in ids.iter().enumerate() {
                let before = ts.current().unwrap().visits.get();
                assert!(!ts.all_ready(), "{n} of {players} reported");
                assert_eq!(ts.record_ready(player, id, t0), ReadyReport::Kept);
                let deadline = ts.client_ready_deadline(timeout);
                assert_eq!(deadline, (n + 1 < players).then_some(t0 + timeout));
                assert!(
                    ts.late_players(t0 + timeout - Duration::from_millis(1), timeout).is_empty()
                );
                visits.push(ts.current().unwrap().visits.get() - before);
            }
            assert!(ts.all_ready());
            visits.into_iter().max().unwrap_or_default()
        };
        // One entry for the deadline; none for the late players while none is late.
        assert_eq!(per_report(10), 1);
        assert_eq!(per_report(2_000), 1);
    }

    /// The late players are the present ones that still owe a report, in id order, however
    /// they were shown; a departed player is not waited for, and a relaunch while the server
    /// loads owes its own report.
    #[test]
    fn late_players_are_the_present_ones_still_owing_a_report() {
        let t0 = Instant::now();
        let timeout = Duration::from_secs(30);
        let s = Duration::from_secs(1);
        let mut ts = Transitions::default();
        let (a, b, c, d) = (pid("a"), pid("b"), pid("c"), pid("d"));
        ts.start(t0, Destination::Node(node("a")), node("a"), [d.clone(), b.clone()].iter());
        let id = ts.current().map(|t| t.id).unwrap();
        ts.show(&c, t0 + s * 2);
        ts.show(&a, t0 + s);
        ts.resolve(node("a"), t0 + s * 2);
        let streamed = t0 + s * 3;
        ts.node_streamed(&node("a"), streamed);
        let end = streamed + timeout;
        assert!(ts.late_players(end - s, timeout).is_empty(), "none late before the deadline");
        assert_eq!(ts.late_players(end, timeout), vec![a.clone(), b.clone(), c.clone(), d.clone()]);
        ts.record_ready(&b, id, streamed);
        ts.forget(&d);
        assert_eq!(ts.late_players(end, timeout), vec![a.clone(), c.clone()]);
        assert_eq!(ts.client_ready_deadline(timeout), Some(end));
        ts.excuse(a.clone());
        ts.record_ready(&c, id, streamed);
        assert!(ts.all_ready());
        assert_eq!(ts.client_ready_deadline(timeout), None);
        assert!(ts.late_players(end, timeout).is_empty());
    }

    /// A ready report names the transition it is for.
    #[test]
    fn ready_reports_are_kept_stale_or_refused_by_id() {
        let t0 = Instant::now();
        let mut ts = Transitions::default();
        let a = pid("a");
        assert_eq!(ts.record_ready(&a, TransitionId(1), t0), ReadyReport::NeverIssued);
        ts.start(t0, Destination::SessionNode, node("a"), std::iter::empty());
        ts.start(t0, Destination::SessionNode, node("a"), std::iter::empty());
        assert_eq!(ts.record_ready(&a, TransitionId(1), t0), ReadyReport::Superseded);
        assert_eq!(ts.record_ready(&a, TransitionId(2), t0), ReadyReport::Kept);
        assert_eq!(ts.record_ready(&a, TransitionId(3), t0), ReadyReport::NeverIssued);
        ts.finish(t0, 0, false);
        assert_eq!(ts.record_ready(&a, TransitionId(2), t0), ReadyReport::NoTransition);
    }

    /// Only the last [`TIMINGS_KEPT`] timings are kept, oldest first.
    #[test]
    fn transition_timings_keep_only_the_most_recent() {
        let t0 = Instant::now();
        let mut ts = Transitions::default();
        let total = TIMINGS_KEPT as u64 + 10;
        for _ in 0..total {
            ts.start(t0, Destination::SessionNode, node("a"), std::iter::empty());
            ts.finish(t0, 0, false);
        }
        let ids: Vec<u64> = ts.timings().map(|t| t.transition_id.0).collect();
        assert_eq!(ids.len(), TIMINGS_KEPT);
        assert_eq!(ids.first(), Some(&11));
        assert_eq!(ids.last(), Some(&total));
    }
}
