//! What a simulated client counts, for the report: plain figures, summed across relaunches and
//! then across clients. Every layer of the client records here (the adapters their deferrals and
//! refusals, the gates and the live checks what they saw and every violation, the session its
//! transport), so this module imports nothing from the crate; it observes and decides nothing.

use std::collections::BTreeSet;

use gatehouse_protocol::TransitionId;
use serde::Serialize;

/// A count per route.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RouteCounts {
    /// Local (own pawn) generations.
    pub local: u64,
    /// Remote (other players' pawns) generations.
    pub remote: u64,
}

impl RouteCounts {
    fn absorb(&mut self, other: RouteCounts) {
        self.local += other.local;
        self.remote += other.remote;
    }
}

/// Generations that ended before their gate opened, by why they ended. None of these is a
/// violation: the pawn was gone, or its world, or the session, before its facts all arrived.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EndedBeforeGate {
    /// Unpossessed (a respawn) before its gate opened.
    pub unpossessed: u64,
    /// Destroyed before its gate opened.
    pub destroyed: u64,
    /// Its role changed before its gate opened.
    pub rerouted: u64,
    /// Its world was torn down (travel) before its gate opened.
    pub world_torn_down: u64,
    /// The session ended (leave, relaunch, end of run) before its gate opened.
    pub session_ended: u64,
}

impl EndedBeforeGate {
    /// All of them.
    pub fn total(&self) -> u64 {
        self.unpossessed
            + self.destroyed
            + self.rerouted
            + self.world_torn_down
            + self.session_ended
    }

    fn absorb(&mut self, other: EndedBeforeGate) {
        self.unpossessed += other.unpossessed;
        self.destroyed += other.destroyed;
        self.rerouted += other.rerouted;
        self.world_torn_down += other.world_torn_down;
        self.session_ended += other.session_ended;
    }
}

/// What the router carried in one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RouterFigures {
    /// Broadcasts accepted.
    pub broadcasts: u64,
    /// Listener callbacks run.
    pub deliveries: u64,
    /// Listeners skipped for a payload type mismatch (must be 0).
    pub mismatches: u64,
    /// Broadcasts and registrations refused (must be 0).
    pub refused: u64,
    /// Listeners registered for the game instance (the baseline under every world).
    pub listeners_baseline: usize,
    /// Most listeners registered at once.
    pub listeners_max: usize,
    /// Listeners registered at the end.
    pub listeners_at_end: usize,
    /// World lifetimes retired at travel.
    pub world_lifetimes_retired: u64,
    /// Listeners those lifetimes removed.
    pub world_listeners_retired: u64,
    /// Scopes retired with their worlds.
    pub world_scopes_retired: u64,
}

impl RouterFigures {
    fn absorb(&mut self, other: RouterFigures) {
        self.broadcasts += other.broadcasts;
        self.deliveries += other.deliveries;
        self.mismatches += other.mismatches;
        self.refused += other.refused;
        self.listeners_baseline = self.listeners_baseline.max(other.listeners_baseline);
        self.listeners_max = self.listeners_max.max(other.listeners_max);
        self.listeners_at_end = self.listeners_at_end.max(other.listeners_at_end);
        self.world_lifetimes_retired += other.world_lifetimes_retired;
        self.world_listeners_retired += other.world_listeners_retired;
        self.world_scopes_retired += other.world_scopes_retired;
    }
}

/// Gate figures of one session (or, absorbed, of every session of a client).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GateStats {
    /// `Lifecycle.Gate.Character.LocalReady` dispatches.
    pub local_ready_opened: u64,
    /// `Lifecycle.Gate.Character.RemoteReady` dispatches.
    pub remote_ready_opened: u64,
    /// `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady` periods opened.
    pub widget_controller_and_team_ready_opened: u64,
    /// Pawn generations scoped, per route.
    pub pawn_generations: RouteCounts,
    /// Local generations that ended before their gate opened.
    pub local_ended_before_gate: EndedBeforeGate,
    /// Remote generations that ended before their gate opened.
    pub remote_ended_before_gate: EndedBeforeGate,
    /// Of those ended by the session's end: generations that had waited longer than the
    /// stuck threshold in a playing world (worth reading the pending waits for).
    pub stuck_at_end: u64,
    /// Public subscriptions registered by the nameplate consumer.
    pub subscriptions_registered: u64,
    /// Public subscriptions delivered.
    pub subscriptions_fired: u64,
    /// Presentation-only team changes sent.
    pub team_presentations: u64,
    /// Raw team changes.
    pub team_changes: u64,
    /// Pawn team presentations dispatched (`DispatchTeamPresentation`).
    pub pawn_team_presentations: u64,
    /// Woken pawn team presentations that live state refused: not dispatched, registered again.
    pub pawn_team_presentations_refused: u64,
    /// Blueprint RepNotifies of remote generations sent as they arrived (their gate open).
    pub rep_notifies_delivered: u64,
    /// Blueprint RepNotifies deferred because their generation's remote gate had not released.
    pub rep_notifies_deferred: u64,
    /// Of those, notices that replaced an earlier deferred one of the same kind.
    pub rep_notifies_coalesced: u64,
    /// Deferred RepNotifies replayed at their gate's release.
    pub rep_notifies_replayed: u64,
    /// Deferred RepNotifies discarded with a generation retired before its release.
    pub rep_notifies_discarded: u64,
    /// Deferred RepNotifies still waiting for their gate when the session ended: with the
    /// coalesced, replayed and discarded ones, every deferred notice is accounted for.
    pub rep_notifies_deferred_at_end: u64,
    /// UI tracking resets.
    pub ui_resets: u64,
    /// Worlds created.
    pub worlds_created: u64,
    /// From a generation's scope to its gate, ms.
    pub gate_wait_ms: Vec<u64>,
    /// Violations of the seed's runtime expectations (must be 0).
    pub gate_violations: u64,
    /// The first violations, described.
    pub violation_samples: Vec<String>,
    /// Waits still pending when the session ended, with what blocks them.
    pub pending_waits: Vec<String>,
    /// Waits still pending when a session was ended by a relaunch (counted, not listed).
    pub pending_waits_at_relaunch: u64,
    /// The router's figures.
    pub router: RouterFigures,
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
        self.local_ready_opened += other.local_ready_opened;
        self.remote_ready_opened += other.remote_ready_opened;
        self.widget_controller_and_team_ready_opened +=
            other.widget_controller_and_team_ready_opened;
        self.pawn_generations.absorb(other.pawn_generations);
        self.local_ended_before_gate.absorb(other.local_ended_before_gate);
        self.remote_ended_before_gate.absorb(other.remote_ended_before_gate);
        self.stuck_at_end += other.stuck_at_end;
        self.subscriptions_registered += other.subscriptions_registered;
        self.subscriptions_fired += other.subscriptions_fired;
        self.team_presentations += other.team_presentations;
        self.team_changes += other.team_changes;
        self.pawn_team_presentations += other.pawn_team_presentations;
        self.pawn_team_presentations_refused += other.pawn_team_presentations_refused;
        self.rep_notifies_delivered += other.rep_notifies_delivered;
        self.rep_notifies_deferred += other.rep_notifies_deferred;
        self.rep_notifies_coalesced += other.rep_notifies_coalesced;
        self.rep_notifies_replayed += other.rep_notifies_replayed;
        self.rep_notifies_discarded += other.rep_notifies_discarded;
        self.rep_notifies_deferred_at_end += other.rep_notifies_deferred_at_end;
        self.ui_resets += other.ui_resets;
        self.worlds_created += other.worlds_created;
        self.gate_wait_ms.extend(other.gate_wait_ms);
        self.gate_violations += other.gate_violations;
        let room = VIOLATION_SAMPLES.saturating_sub(self.violation_samples.len());
        self.violation_samples.extend(other.violation_samples.into_iter().take(room));
        self.pending_waits.extend(other.pending_waits);
        self.pending_waits_at_relaunch += other.pending_waits_at_relaunch;
        self.router.absorb(other.router);
    }

    /// Moves the listed pending waits into the relaunch count (a session ended by a relaunch).
    pub fn set_aside_pending_waits(&mut self) {
        self.pending_waits_at_relaunch += self.pending_waits.len() as u64;
        self.pending_waits.clear();
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

/// What one client saw, for the report.
#[derive(Debug, Clone, Default)]
pub struct SessionStats {
    /// Transitions this client saw end.
    pub transitions_ended: BTreeSet<TransitionId>,
    /// Per ended transition: from first seeing it to its end, ms.
    pub transition_ms: Vec<u64>,
    /// Longest time the loading screen stayed up, ms.
    pub longest_screen_ms: u64,
    /// Transitions this client saw superseded while its screen was up.
    pub transitions_superseded: u64,
    /// Times a transition ended while this client had not acknowledged a pawn.
    pub ended_before_placed: u64,
    /// Server-reported errors and client-detected protocol violations.
    pub errors: Vec<String>,
    /// Times this client's player died (gained `State.Dead`).
    pub deaths: u64,
    /// Respawns: a new pawn possessed after a restart request.
    pub respawns: u64,
    /// Times this client owned two live pawns at once (must be 0).
    pub double_pawns: u64,
    /// Kit grants naming a kit already granted this session (must be 0).
    pub double_grants: u64,
    /// Own pawns spawned or teleported onto a node other than the one the client expected:
    /// the destination of the transition on screen, or the world's current node (must be 0).
    pub spawns_at_stale_node: u64,
    /// The lifecycle gates: what opened, for which pawn generations, and every violation of the
    /// seed's runtime expectations.
    pub gates: GateStats,
}

impl SessionStats {
    /// Adds another session's stats (a relaunch of the same client).
    pub fn absorb(&mut self, other: SessionStats) {
        self.transitions_ended.extend(other.transitions_ended);
        self.transition_ms.extend(other.transition_ms);
        self.longest_screen_ms = self.longest_screen_ms.max(other.longest_screen_ms);
        self.transitions_superseded += other.transitions_superseded;
        self.ended_before_placed += other.ended_before_placed;
        self.errors.extend(other.errors);
        self.deaths += other.deaths;
        self.respawns += other.respawns;
        self.double_pawns += other.double_pawns;
        self.double_grants += other.double_grants;
        self.spawns_at_stale_node += other.spawns_at_stale_node;
        self.gates.absorb(other.gates);
    }
}
