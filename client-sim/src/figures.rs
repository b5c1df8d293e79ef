//! Every figure a simulated client counts, each declared once.
//!
//! A figure is a count kept while a client runs, combined across its relaunches and then across
//! clients into the swarm's report. Each is one row of a figure list below: its name (the field
//! in the live stats and in the report, and the report's JSON key), how two sessions' values
//! combine, its printed label, and what `gatehouse-sim --check` requires of it. Everything else
//! derives from that row: the live field the layers count into, the report's field and JSON key
//! (the report is declared from the same list), the printed line and the `--check` condition
//! (both walk [`Figure`] tables). Adding a figure is its row here and the line that counts it.
//!
//! The lists: `session_figures!` (the session's own figures, in [`SessionStats`] and the
//! report's top level), `gate_figures!` (the game side's, in [`GateStats`] and the report's
//! `gates`), and the plain groups [`RouterFigures`], [`RouteCounts`] and [`EndedBeforeGate`].
//! What is not a count (samples behind percentiles, verbatim errors and violations, the pending
//! waits, the transitions seen) is an ordinary field next to the figures.
//!
//! Every layer of the client records here (the adapters their deferrals and refusals, the gates
//! and the live checks what they saw and every violation, the session its transport), so this
//! module imports nothing from the crate; it observes and decides nothing.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use gatehouse_protocol::TransitionId;
use hdrhistogram::Histogram;
use serde::Serialize;

/// How two sessions' values of a figure combine: a relaunch's into its client's, then every
/// client's into the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Added up.
    Sum,
    /// The larger is kept.
    Max,
}

impl Combine {
    /// `a` and `b` combined.
    pub fn apply(self, a: u64, b: u64) -> u64 {
        match self {
            Combine::Sum => a.saturating_add(b),
            Combine::Max => a.max(b),
        }
    }
}

/// What `gatehouse-sim --check` requires of a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the figure is reported only.
    Any,
    /// It must be 0 over the whole run: it counts a broken contract.
    Zero,
}

/// One figure's declaration, as its row gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Figure {
    /// The field name, which is also the JSON key.
    pub name: &'static str,
    /// The label of its printed line.
    pub label: &'static str,
    /// How two sessions' values combine.
    pub combine: Combine,
    /// What `--check` requires of it.
    pub check: Check,
}

/// Declares a struct from a figure list: the fields written before `[figures]`, one `pub u64`
/// per row, then the fields written after it; and, on the struct, the rows' [`Figure`] table
/// (`FIGURES`), their values in row order, and their combination with another value of the
/// struct. Two structs declared from the same list (the live stats and the report) carry the
/// same figures, in the same order.
macro_rules! declare_figures {
    (
        rows {
            $( $(#[$doc:meta])* $figure:ident: $combine:ident, $label:literal, $check:ident; )*
        }
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$before_meta:meta])* pub $before:ident: $before_ty:ty, )*
            [figures]
            $( $(#[$after_meta:meta])* pub $after:ident: $after_ty:ty, )*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $( $(#[$before_meta])* pub $before: $before_ty, )*
            $( $(#[$doc])* pub $figure: u64, )*
            $( $(#[$after_meta])* pub $after: $after_ty, )*
        }

        impl $name {
            /// The declaration of each figure, in row order.
            pub const FIGURES: &'static [$crate::figures::Figure] = &[$(
                $crate::figures::Figure {
                    name: stringify!($figure),
                    label: $label,
                    combine: $crate::figures::Combine::$combine,
                    check: $crate::figures::Check::$check,
                },
            )*];

            /// Each figure's value, in row order.
            pub fn figure_values(&self) -> [u64; [$(stringify!($figure)),*].len()] {
                [$(self.$figure),*]
            }

            /// Each figure's declaration with its value, in row order.
            pub fn figures(&self) -> impl Iterator<Item = (&'static $crate::figures::Figure, u64)> {
                Self::FIGURES.iter().zip(self.figure_values())
            }

            /// Sets every figure from `values`, in row order: the values of another struct
            /// declared from the same list.
            #[allow(dead_code)] // Only the report's structs are filled from another.
            pub(crate) fn set_figure_values(
                &mut self,
                values: [u64; [$(stringify!($figure)),*].len()],
            ) {
                let [$($figure),*] = values;
                $( self.$figure = $figure; )*
            }

            /// Combines `other`'s figures into these, each by its rule.
            #[allow(dead_code)] // The report's structs are filled, never combined.
            pub(crate) fn absorb_figures(&mut self, other: &Self) {
                $(
                    self.$figure =
                        $crate::figures::Combine::$combine.apply(self.$figure, other.$figure);
                )*
            }
        }
    };
}

/// Declares a struct carrying the session's figures: what the transport saw and what the
/// session checks found (one client, summed over its relaunches; over the run in the report).
macro_rules! session_figures {
    ($($definition:tt)*) => {
        $crate::figures::declare_figures! {
            rows {
                /// Transitions this client saw superseded while its loading screen was up.
                transitions_superseded: Sum, "transitions superseded", Any;
                /// Times a transition ended while this client had not acknowledged its pawn.
                ended_before_placed: Sum, "ended before placed", Zero;
                /// Times this client's player died (gained `State.Dead`).
                deaths: Sum, "deaths", Any;
                /// Respawns: a new pawn possessed after a restart request.
                respawns: Sum, "respawns", Any;
                /// Deaths the server ended without a respawn: it no longer had the player state
                /// that held them (a server restart; a kept player state outliving its
                /// retention), so the player came back alive. Every death is a respawn or one of
                /// these.
                deaths_forgotten_by_server: Sum, "deaths forgotten by the server", Any;
                /// Times this client disconnected abruptly and relaunched (counted by the swarm).
                relaunches: Sum, "relaunches", Any;
                /// Times this client owned two live pawns at once.
                double_pawns: Sum, "double pawns", Zero;
                /// Kit grants naming a kit already granted in the same session.
                double_grants: Sum, "double grants", Zero;
                /// Own pawns spawned or teleported onto a node other than the one the client
                /// expected: the destination of the transition on screen, or the world's current
                /// node.
                spawns_at_stale_node: Sum, "spawns at stale node", Zero;
                /// Own pawns spawned or teleported onto a node this client had not streamed (its
                /// join's, or the transition's it reported ready for): a pawn before its level.
                pawns_on_unloaded_node: Sum, "own pawns on unstreamed node", Zero;
                /// Joins this client streamed for (it logged in while no transition ran).
                joins: Sum, "joins", Any;
                /// Transitions the server reported failed (`TransitionFailed`).
                transitions_failed: Sum, "transitions failed", Any;
                /// Ids the server sent going backwards within a session: a transition or join id
                /// below one already shown, or a new own pawn whose id is not above every own
                /// pawn before it.
                ids_backwards: Sum, "ids going backwards", Zero;
                /// Moves to another server this client was sent (`TravelTo`).
                travels: Sum, "travels to another server", Any;
                /// Times this client began playing on another server: a move's destination
                /// welcomed it, or a move that failed there brought it back to the source.
                server_changes: Sum, "server changes", Any;
                /// Moves this client gave up (the destination refused it, closed, could not be
                /// reached or did not admit it in time) and told the source so.
                travels_abandoned: Sum, "travels abandoned", Any;
                /// Longest time the loading screen stayed up, ms.
                longest_loading_screen_ms: Max, "longest loading screen (ms)", Any;
            }
            $($definition)*
        }
    };
}

/// Declares a struct carrying the game side's figures: the lifecycle gates, the adapters'
/// deferrals and presentations, and every violation of the gates' contract (docs/spec/gates.md).
macro_rules! gate_figures {
    ($($definition:tt)*) => {
        $crate::figures::declare_figures! {
            rows {
                /// `Lifecycle.Gate.Character.LocalReady` dispatches.
                local_ready_opened: Sum, "local ready opened", Any;
                /// `Lifecycle.Gate.Character.RemoteReady` dispatches.
                remote_ready_opened: Sum, "remote ready opened", Any;
                /// `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady` opened (one per
                /// readiness period).
                widget_controller_and_team_ready_opened: Sum, "widget+team ready opened", Any;
                /// Generations still waiting when the session ended, after waiting longer than
                /// the stuck threshold in a world that existed that long (worth reading the
                /// pending waits for).
                stuck_at_end: Sum, "stuck at end", Any;
                /// Public subscriptions registered by the nameplate consumer (one per
                /// generation).
                subscriptions_registered: Sum, "subscriptions registered", Any;
                /// Public subscriptions delivered.
                subscriptions_fired: Sum, "subscriptions fired", Any;
                /// Raw team changes.
                team_changes: Sum, "team changes", Any;
                /// Presentation-only team changes sent.
                team_presentations: Sum, "team presentations", Any;
                /// Pawn team presentations dispatched (`DispatchTeamPresentation`).
                pawn_team_presentations: Sum, "pawn team presented", Any;
                /// Woken pawn team presentations that live state refused: not dispatched,
                /// registered again.
                pawn_team_presentations_refused: Sum, "pawn team refused", Any;
                /// Blueprint RepNotifies of remote generations sent as they arrived (their gate
                /// open).
                rep_notifies_delivered: Sum, "rep notifies live", Any;
                /// Blueprint RepNotifies deferred because their generation's remote gate had not
                /// released.
                rep_notifies_deferred: Sum, "rep notifies deferred", Any;
                /// Of those, notices that replaced an earlier deferred one of the same kind.
                rep_notifies_coalesced: Sum, "rep notifies coalesced", Any;
                /// Deferred RepNotifies replayed at their gate's release, before RemoteReady.
                rep_notifies_replayed: Sum, "rep notifies replayed", Any;
                /// Deferred RepNotifies discarded with a generation retired before its release.
                rep_notifies_discarded: Sum, "rep notifies discarded", Any;
                /// Deferred RepNotifies still waiting for their gate when the session ended:
                /// with the coalesced, replayed and discarded ones, every deferred notice is
                /// accounted for.
                rep_notifies_deferred_at_end: Sum, "rep notifies waiting at end", Any;
                /// UI tracking resets.
                ui_resets: Sum, "UI resets", Any;
                /// Worlds created (one per login and per travel).
                worlds_created: Sum, "worlds created", Any;
                /// Waits still pending when a session was ended by a relaunch (counted, not
                /// listed).
                pending_waits_at_relaunch: Sum, "waits left by relaunches", Any;
                /// Violations of the gates' contract (docs/spec/gates.md).
                gate_violations: Sum, "gate violations", Zero;
            }
            $($definition)*
        }
    };
}

pub(crate) use {declare_figures, gate_figures, session_figures};

declare_figures! {
    rows {
        /// Local (own pawn) generations.
        local: Sum, "local", Any;
        /// Remote (other players' pawns) generations.
        remote: Sum, "remote", Any;
    }
    /// A count per route.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
    pub struct RouteCounts {
        [figures]
    }
}

declare_figures! {
    rows {
        /// Unpossessed (a respawn) before its gate opened.
        unpossessed: Sum, "unpossessed", Any;
        /// Destroyed before its gate opened.
        destroyed: Sum, "destroyed", Any;
        /// Its role changed before its gate opened.
        rerouted: Sum, "rerouted", Any;
        /// Its world was torn down (travel) before its gate opened.
        world_torn_down: Sum, "world torn down", Any;
        /// The session ended (leave, relaunch, end of run) before its gate opened.
        session_ended: Sum, "session ended", Any;
    }
    /// Generations that ended before their gate opened, by why they ended. None of these is a
    /// violation: the pawn was gone, or its world, or the session, before its facts all arrived.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
    pub struct EndedBeforeGate {
        [figures]
    }
}

impl EndedBeforeGate {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.figure_values().iter().sum()
    }
}

declare_figures! {
    rows {
        /// Broadcasts accepted.
        broadcasts: Sum, "broadcasts", Any;
        /// Listener callbacks run.
        deliveries: Sum, "deliveries", Any;
        /// Listeners skipped for a payload type mismatch (must be 0).
        mismatches: Sum, "mismatches", Any;
        /// Broadcasts and registrations refused (must be 0; each is also a gate violation).
        refused: Sum, "refused", Any;
        /// Listeners registered for the game instance (the floor under every world).
        listeners_baseline: Max, "listeners baseline", Any;
        /// Most listeners registered at once: the baseline plus one world's, however many
        /// travels.
        listeners_max: Max, "listeners max", Any;
        /// Listeners registered at the end.
        listeners_at_end: Max, "listeners at end", Any;
        /// World lifetimes retired at travel.
        world_lifetimes_retired: Sum, "world lifetimes retired", Any;
        /// Listeners those lifetimes removed.
        world_listeners_retired: Sum, "world listeners retired", Any;
        /// Scopes retired with their worlds.
        world_scopes_retired: Sum, "world scopes retired", Any;
    }
    /// What the router carried (listener counts: the largest of any session).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
    pub struct RouterFigures {
        [figures]
    }
}

gate_figures! {
    /// The game side's figures of one session (or, absorbed, of every session of a client).
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
    pub struct GateStats {
        [figures]
        /// Pawn generations scoped, per route.
        pub pawn_generations: RouteCounts,
        /// Local generations that ended before their gate opened.
        pub local_ended_before_gate: EndedBeforeGate,
        /// Remote generations that ended before their gate opened.
        pub remote_ended_before_gate: EndedBeforeGate,
        /// From a generation's scope to its gate, ms.
        pub gate_wait_ms: Vec<u64>,
        /// The first violations, described.
        pub violation_samples: Vec<String>,
        /// Waits still pending when the session ended, with what blocks them.
        pub pending_waits: Vec<String>,
        /// The router's figures.
        pub router: RouterFigures,
    }
}

/// Violations kept verbatim per session.
const VIOLATION_SAMPLES: usize = 20;

impl GateStats {
    /// Records a violation of a runtime expectation: counted, logged, and kept verbatim while
    /// there is room.
    pub(crate) fn violation(&mut self, what: String) {
        tracing::warn!(violation = %what, "lifecycle gate violation");
        self.gate_violations += 1;
        if self.violation_samples.len() < VIOLATION_SAMPLES {
            self.violation_samples.push(what);
        }
    }

    /// Adds another session's figures (a relaunch of the same client).
    pub fn absorb(&mut self, other: GateStats) {
        self.absorb_figures(&other);
        self.pawn_generations.absorb_figures(&other.pawn_generations);
        self.local_ended_before_gate.absorb_figures(&other.local_ended_before_gate);
        self.remote_ended_before_gate.absorb_figures(&other.remote_ended_before_gate);
        self.gate_wait_ms.extend(other.gate_wait_ms);
        let room = VIOLATION_SAMPLES.saturating_sub(self.violation_samples.len());
        self.violation_samples.extend(other.violation_samples.into_iter().take(room));
        self.pending_waits.extend(other.pending_waits);
        self.router.absorb_figures(&other.router);
    }

    /// Moves the listed pending waits into the relaunch count (a session ended by a relaunch).
    pub fn set_aside_pending_waits(&mut self) {
        self.pending_waits_at_relaunch += self.pending_waits.len() as u64;
        self.pending_waits.clear();
    }

    /// The figures declared [`Check::Zero`] above 0, described (`gate_violations = 2`): empty
    /// when the game side kept every contract. The single-session half of what
    /// `gatehouse-sim --check` refuses.
    pub fn problems(&self) -> Vec<String> {
        nonzero(self.figures().chain(self.router.figures()))
    }

    /// Opened plus ended-before-open, per route: equal to the generations when every generation
    /// is accounted for.
    pub fn accounted(&self) -> RouteCounts {
        RouteCounts {
            local: self.local_ready_opened + self.local_ended_before_gate.total(),
            remote: self.remote_ready_opened + self.remote_ended_before_gate.total(),
        }
    }
}

declare_figures! {
    rows {
        /// UDP payload bytes the client's connections sent (quinn's connection stats).
        bytes_sent: Sum, "bytes sent", Any;
        /// UDP payload bytes they received.
        bytes_received: Sum, "bytes received", Any;
        /// UDP datagrams they sent.
        datagrams_sent: Sum, "datagrams sent", Any;
        /// UDP datagrams they received.
        datagrams_received: Sum, "datagrams received", Any;
        /// Packets quinn declared lost (their frames are sent again: quinn's retransmissions).
        lost_packets: Sum, "packets lost", Any;
        /// Bytes of those packets.
        lost_bytes: Sum, "bytes lost", Any;
        /// Times quinn's congestion controller cut its window for a loss.
        congestion_events: Sum, "congestion events", Any;
    }
    /// What the client's QUIC connections carried, from quinn's own connection statistics
    /// (docs/performance.md, "The load benchmark": bytes on the wire per client per transition).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
    pub struct WireFigures {
        [figures]
    }
}

/// A latency distribution in µs at microsecond resolution: an HDR histogram (3 significant
/// figures, 1 µs to an hour), so a thousand clients' samples are counted, not stored and sorted
/// (docs/simulator.md, "Reading the report").
///
/// A session records a handful of samples per transition, and each has several of these: the
/// first [`KEPT_SAMPLES`] are kept as they are, and the histogram (a quarter of a megabyte of
/// counters, zeroed) is made only when they overflow. One per session made at login cost the
/// swarm's session thread seconds of page faults at 200 logins per second.
#[derive(Debug, Clone, Default)]
pub struct Micros {
    /// The samples while there are at most [`KEPT_SAMPLES`], µs; empty once spilled.
    kept: Vec<u64>,
    /// Every sample, once there were more than [`KEPT_SAMPLES`].
    spilled: Option<Histogram<u64>>,
}

/// The largest duration a [`Micros`] tells apart, µs (an hour); longer ones count as it.
const MICROS_HIGH: u64 = 3_600_000_000;

/// How many samples a [`Micros`] keeps before it makes its histogram.
const KEPT_SAMPLES: usize = 256;

/// An empty histogram with the bounds of every [`Micros`].
fn micros_histogram() -> Histogram<u64> {
    // Constant bounds that hdrhistogram accepts (low ≥ 1, high ≥ 2 × low, 3 figures).
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, MICROS_HIGH, 3).expect("valid histogram bounds")
}

impl Micros {
    /// Counts one sample.
    pub fn record(&mut self, sample: Duration) {
        let us = u64::try_from(sample.as_micros()).unwrap_or(u64::MAX);
        self.record_us(us.min(MICROS_HIGH));
    }

    /// Counts one sample of `us` µs (at most [`MICROS_HIGH`]).
    fn record_us(&mut self, us: u64) {
        if let Some(h) = &mut self.spilled {
            h.saturating_record(us);
            return;
        }
        self.kept.push(us);
        if self.kept.len() > KEPT_SAMPLES {
            self.spilled = Some(self.to_histogram());
            self.kept = Vec::new();
        }
    }

    /// Counts one sample from `from` to `to` (0 if `to` is earlier).
    pub fn record_between(&mut self, from: Instant, to: Instant) {
        self.record(to.saturating_duration_since(from));
    }

    /// Adds another distribution's samples.
    pub fn absorb(&mut self, other: &Micros) {
        match &other.spilled {
            Some(theirs) => {
                let mut mine = self.spilled.take().unwrap_or_else(|| self.to_histogram());
                // Both have the same bounds, so every value fits: addition cannot fail.
                let _ = mine.add(theirs);
                self.spilled = Some(mine);
                self.kept = Vec::new();
            }
            None => other.kept.iter().for_each(|&us| self.record_us(us)),
        }
    }

    /// How many samples.
    pub fn count(&self) -> u64 {
        self.spilled.as_ref().map_or(self.kept.len() as u64, Histogram::len)
    }

    /// The samples as a histogram, e.g. to draw it: the one kept, or one made from the
    /// samples.
    pub fn histogram(&self) -> Cow<'_, Histogram<u64>> {
        match &self.spilled {
            Some(h) => Cow::Borrowed(h),
            None => Cow::Owned(self.to_histogram()),
        }
    }

    /// A new histogram of the kept samples.
    fn to_histogram(&self) -> Histogram<u64> {
        let mut h = micros_histogram();
        self.kept.iter().for_each(|&us| h.saturating_record(us));
        h
    }

    /// Count, min, p50, p90, p99 and max, µs (all 0 when empty).
    pub fn summary(&self) -> TimingSummary {
        if self.count() == 0 {
            return TimingSummary::default();
        }
        let h = self.histogram();
        TimingSummary {
            count: h.len(),
            min_us: h.min(),
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        }
    }
}

/// A [`Micros`] summed up for the report: each value in µs, to the histogram's 3 significant
/// figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TimingSummary {
    /// How many samples.
    pub count: u64,
    /// Smallest, µs.
    pub min_us: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

/// The client-side phases of a loading screen and of a login, as a client sees them
/// (docs/simulator.md, "Reading the report"). A transition counts into each phase it went through:
/// one superseded or still up at the end counts only its completed phases; a kept pawn's teleport
/// stands in for its possession.
#[derive(Debug, Clone, Default)]
pub struct Timings {
    /// From dialling the server to its `Welcome`.
    pub connect_to_welcome: Micros,
    /// From dialling the server to the QUIC handshake done and the control stream open, as the
    /// client saw it: the part of connect → `Welcome` before the client can send `Hello`.
    pub connect_to_handshake: Micros,
    /// From first seeing a transition (`FreezeCharacters` or `ShowTransition`) to sending its
    /// `TransitionReady`: the streaming.
    pub shown_to_ready_sent: Micros,
    /// From `TransitionReady` to the own pawn possessed (or teleported) in the destination.
    pub ready_to_possessed: Micros,
    /// From the own pawn possessed to `EndTransition`.
    pub possessed_to_ended: Micros,
    /// From first seeing a transition to its `EndTransition`.
    pub shown_to_ended: Micros,
    /// A move to another server's whole loading screen, as the player saw it: from the screen
    /// going up at the source to its drop at the destination (docs/spec/travel.md V3, V16).
    pub moved: Micros,
    /// From a reply's cause to the reply leaving the client: from when the message it answers
    /// was readable on the stream (`ShowTransition` → `TransitionShown`, `Possessed` → its
    /// acknowledgement), or when the deadline it follows was due (streaming done → ready). The
    /// client's own delay: no streaming, no network.
    pub reply_delay: Micros,
}

impl Timings {
    /// Adds another session's samples.
    pub fn absorb(&mut self, other: &Timings) {
        self.connect_to_welcome.absorb(&other.connect_to_welcome);
        self.connect_to_handshake.absorb(&other.connect_to_handshake);
        self.shown_to_ready_sent.absorb(&other.shown_to_ready_sent);
        self.ready_to_possessed.absorb(&other.ready_to_possessed);
        self.possessed_to_ended.absorb(&other.possessed_to_ended);
        self.shown_to_ended.absorb(&other.shown_to_ended);
        self.moved.absorb(&other.moved);
        self.reply_delay.absorb(&other.reply_delay);
    }
}

/// When a client first dialled, was first welcomed and was first placed (a possessed,
/// acknowledged pawn and no loading screen), over all its lives: what the swarm's admission time
/// is taken from (docs/simulator.md, "Reading the report").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Admission {
    /// Its first dial.
    pub dialled: Option<Instant>,
    /// Its first `Welcome`, as the turn that took it ended.
    pub welcomed: Option<Instant>,
    /// Its first placement, as the turn that placed it ended.
    pub placed: Option<Instant>,
}

impl Admission {
    /// Notes `now` as the welcome and the placement, each the first time it holds.
    pub fn note(&mut self, now: Instant, welcomed: bool, placed: bool) {
        if welcomed && self.welcomed.is_none() {
            self.welcomed = Some(now);
        }
        if placed && self.placed.is_none() {
            self.placed = Some(now);
        }
    }

    /// Adds another life's: the earliest of each instant.
    pub fn absorb(&mut self, other: Admission) {
        self.dialled = earliest(self.dialled, other.dialled);
        self.welcomed = earliest(self.welcomed, other.welcomed);
        self.placed = earliest(self.placed, other.placed);
    }
}

/// The earlier of two instants, either of which may be missing.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Which kind of loading screen (docs/simulator.md, "The timeline").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum ScreenKind {
    /// A transition's screen (docs/spec/transitions.md T3).
    Transition,
    /// A join's screen: a player who logged in while no transition ran (docs/spec/sessions.md S5).
    Join,
    /// A move to another server's screen: one loading screen across both servers, from the
    /// source's freeze to the destination's end (docs/spec/travel.md V3).
    Travel,
}

/// Something that happened to a client at one instant (docs/simulator.md, "The timeline").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum MarkKind {
    /// Its player gained `State.Dead`.
    Death,
    /// A new pawn possessed after its restart request.
    Respawn,
    /// It vanished and relaunched with the same player id.
    Relaunch,
    /// It lost its connection and reconnected.
    Reconnect,
    /// It began playing on another server: a move's destination welcomed it, or a move that
    /// failed there brought it back (docs/spec/travel.md V3).
    ServerChange,
    /// An error was recorded (a broken contract, a rejection, a lost connection).
    Error,
}

/// One loading screen's instants as the session saw them, for the run's picture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScreenTimes {
    /// Transition or join.
    pub kind: ScreenKind,
    /// The screen went up.
    pub shown: Instant,
    /// Ready reported (`TransitionReady` or `JoinReady`).
    pub ready_sent: Option<Instant>,
    /// The own pawn possessed (or teleported, for a kept pawn).
    pub possessed: Option<Instant>,
    /// The screen came down, or the session ended with it up (a relaunch, a lost connection,
    /// the run's end); `None` only while the session runs.
    pub ended: Option<Instant>,
}

session_figures! {
    /// What one client saw, for the report.
    #[derive(Debug, Clone, Default)]
    pub struct SessionStats {
        /// Transitions this client saw end.
        pub transitions_ended: BTreeSet<TransitionId>,
        /// The client-side phase timings.
        pub timings: Timings,
        /// Every loading screen, in order, for the run's picture.
        pub screens: Vec<ScreenTimes>,
        /// Deaths, respawns, relaunches, reconnects and errors, with when, for the run's picture.
        pub marks: Vec<(Instant, MarkKind)>,
        /// Server-reported errors and client-detected protocol violations.
        pub errors: Vec<String>,
        /// The server's `Error` messages by code name (`UnknownPawn`, `RateLimited`, …).
        pub server_errors: BTreeMap<String, u64>,
        /// What its connections carried.
        pub wire: WireFigures,
        [figures]
        /// The lifecycle gates: what opened, for which pawn generations, and every violation of the
        /// gates' contract (docs/spec/gates.md).
        pub gates: GateStats,
    }
}

impl SessionStats {
    /// Adds another session's stats (a relaunch of the same client).
    pub fn absorb(&mut self, other: SessionStats) {
        self.absorb_figures(&other);
        self.transitions_ended.extend(other.transitions_ended);
        self.timings.absorb(&other.timings);
        self.wire.absorb_figures(&other.wire);
        self.screens.extend(other.screens);
        self.marks.extend(other.marks);
        self.errors.extend(other.errors);
        for (code, n) in other.server_errors {
            *self.server_errors.entry(code).or_default() += n;
        }
        self.gates.absorb(other.gates);
    }

    /// What one session's stats break, described (empty: clean): any error, then every figure
    /// declared [`Check::Zero`] above 0 (`double_pawns = 1`), its own and its gates'
    /// ([`GateStats::problems`]). The single-session counterpart of the swarm report's
    /// `problems`; the gates of a live session are its client's until the session finishes.
    pub fn problems(&self) -> Vec<String> {
        let mut out: Vec<String> = self.errors.iter().map(|e| format!("error: {e}")).collect();
        out.extend(nonzero(self.figures()));
        out.extend(self.gates.problems());
        out
    }
}

/// Each figure of `figures` declared [`Check::Zero`] whose value is above 0, as `name = value`.
fn nonzero<'a>(figures: impl Iterator<Item = (&'a Figure, u64)>) -> Vec<String> {
    figures
        .filter(|(figure, value)| figure.check == Check::Zero && *value > 0)
        .map(|(figure, value)| format!("{} = {value}", figure.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's admission keeps the first dial, welcome and placement over its lives, each
    /// noted once.
    #[test]
    fn an_admission_keeps_the_first_of_each_instant() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut first = Admission { dialled: Some(at(0)), ..Admission::default() };
        first.note(at(5), false, false);
        first.note(at(10), true, false);
        first.note(at(20), true, true);
        first.note(at(30), true, true);
        assert_eq!((first.welcomed, first.placed), (Some(at(10)), Some(at(20))));
        let mut relaunched = Admission { dialled: Some(at(40)), ..Admission::default() };
        relaunched.note(at(50), true, false);
        relaunched.absorb(first);
        assert_eq!(relaunched, Admission { dialled: Some(at(0)), ..first });
    }

    /// Every figure's row gives its field its JSON key, once per list.
    #[test]
    fn each_figure_is_declared_once_with_its_field_name() {
        let lists = [
            SessionStats::FIGURES,
            GateStats::FIGURES,
            RouterFigures::FIGURES,
            RouteCounts::FIGURES,
            EndedBeforeGate::FIGURES,
        ];
        for list in lists {
            let mut names: Vec<_> = list.iter().map(|f| f.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), list.len(), "{list:?}");
        }
        let stats = GateStats { rep_notifies_coalesced: 3, ..GateStats::default() };
        let found = stats.figures().find(|(f, _)| f.name == "rep_notifies_coalesced");
        assert_eq!(found.map(|(_, v)| v), Some(3));
    }

    #[test]
    fn session_problems_name_each_nonzero_must_be_zero_figure_and_each_error() {
        assert!(SessionStats::default().problems().is_empty());
        let mut stats = SessionStats {
            double_pawns: 1,
            deaths: 4,
            errors: vec!["refused".into()],
            ..SessionStats::default()
        };
        stats.gates.gate_violations = 2;
        stats.gates.team_changes = 9;
        assert_eq!(stats.problems(), ["error: refused", "double_pawns = 1", "gate_violations = 2"]);
        assert_eq!(stats.gates.problems(), ["gate_violations = 2"]);
    }

    #[test]
    fn figures_combine_by_their_rule() {
        let mut a =
            SessionStats { deaths: 2, longest_loading_screen_ms: 900, ..Default::default() };
        let b = SessionStats { deaths: 3, longest_loading_screen_ms: 400, ..Default::default() };
        a.absorb(b);
        assert_eq!((a.deaths, a.longest_loading_screen_ms), (5, 900));
        let mut r = RouterFigures { broadcasts: 1, listeners_max: 7, ..Default::default() };
        r.absorb_figures(&RouterFigures { broadcasts: 2, listeners_max: 5, ..Default::default() });
        assert_eq!((r.broadcasts, r.listeners_max), (3, 7));
    }

    /// A latency histogram counts each sample at microsecond resolution, summarises it in µs,
    /// combines with another, and sums up to all zeros when empty.
    #[test]
    fn micros_count_and_summarise_samples_in_microseconds() {
        let mut a = Micros::default();
        assert_eq!((a.count(), a.summary()), (0, TimingSummary::default()));
        a.record(Duration::from_micros(250));
        a.record(Duration::from_micros(1_000));
        let mut b = Micros::default();
        b.record(Duration::from_micros(40));
        a.absorb(&b);
        let summary = a.summary();
        assert_eq!((a.count(), summary.count), (3, 3));
        assert_eq!((summary.min_us, summary.p50_us), (40, 250));
        assert!((1_000..=1_001).contains(&summary.max_us), "{summary:?}");
        let start = Instant::now();
        a.record_between(start + Duration::from_millis(5), start);
        assert_eq!((a.count(), a.summary().min_us), (4, 0), "a negative span counts as 0");
    }

    /// A distribution keeps its first samples as they are and makes its histogram only when they
    /// overflow; either way, and combined either way, it sums up the same.
    #[test]
    fn micros_make_their_histogram_only_past_the_kept_samples() {
        let (mut few, mut many) = (Micros::default(), Micros::default());
        for us in 1..=(KEPT_SAMPLES as u64) {
            few.record(Duration::from_micros(us));
        }
        assert!(few.spilled.is_none(), "{KEPT_SAMPLES} samples are kept as they are");
        for us in 1..=(KEPT_SAMPLES as u64 + 1) {
            many.record(Duration::from_micros(us));
        }
        assert!(many.spilled.is_some() && many.kept.is_empty(), "one more makes the histogram");
        assert_eq!((few.count(), many.count()), (256, 257));
        assert_eq!(many.summary().max_us, 257);
        let mut into_few = few.clone();
        into_few.absorb(&many);
        let mut into_many = many.clone();
        into_many.absorb(&few);
        assert_eq!(into_few.count(), 513);
        assert_eq!(into_few.summary(), into_many.summary(), "the order of absorbing is moot");
        assert_eq!(into_few.summary().p50_us, 129, "the 257th of 1, 1, 2, 2, …, 256, 256, 257");
    }
}
