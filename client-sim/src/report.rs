//! The swarm report: what every simulated client saw, summed, as readable text and JSON.

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

use crate::figures::{EndedBeforeGate, GateStats, RouteCounts, RouterFigures, SessionStats};

/// What one client ended with.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// The client's index in the swarm.
    pub index: usize,
    /// Whether it was welcomed.
    pub connected: bool,
    /// Whether at the end it had a pawn whose possession it acknowledged and no loading screen.
    pub placed: bool,
    /// Pawns it saw owned by itself at the end (1 when all is well).
    pub own_pawns: usize,
    /// Times it disconnected and relaunched.
    pub relaunches: u64,
    /// What its session saw.
    pub stats: SessionStats,
    /// Connection-level errors (refused, closed by the server, unreachable).
    pub errors: Vec<String>,
}

/// Min, median, p99 and max of a set of durations, in ms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// How many samples.
    pub count: usize,
    /// Smallest, ms.
    pub min: u64,
    /// Median, ms.
    pub median: u64,
    /// 99th percentile (nearest rank), ms.
    pub p99: u64,
    /// Largest, ms.
    pub max: u64,
}

impl Percentiles {
    /// Percentiles of `samples` (nearest-rank); all zero when empty.
    pub fn of(mut samples: Vec<u64>) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[i - 1]
        };
        Percentiles {
            count: samples.len(),
            min: samples[0],
            median: rank(0.5),
            p99: rank(0.99),
            max: samples[samples.len() - 1],
        }
    }
}

/// The whole run's report.
#[derive(Debug, Clone, Serialize)]
pub struct SwarmReport {
    /// Clients started.
    pub clients: usize,
    /// Clients the server welcomed.
    pub clients_connected: usize,
    /// Clients placed at the end.
    pub clients_placed: usize,
    /// Distinct transitions that clients saw end.
    pub transitions_completed: usize,
    /// Transitions superseded while a client's screen was up (summed over clients).
    pub transitions_superseded: u64,
    /// Times a transition ended before a client had acknowledged its pawn (must be 0).
    pub ended_before_placed: u64,
    /// Deaths (summed over clients).
    pub deaths: u64,
    /// Respawns (summed over clients).
    pub respawns: u64,
    /// Relaunches (summed over clients).
    pub relaunches: u64,
    /// Times a client owned two live pawns at once (must be 0).
    pub double_pawns: u64,
    /// Kit grants naming a kit already granted (must be 0).
    pub double_grants: u64,
    /// Own pawns placed on a node other than the expected one (must be 0).
    pub spawns_at_stale_node: u64,
    /// Errors over all clients.
    pub errors: usize,
    /// The first few errors, for reading.
    pub error_samples: Vec<String>,
    /// From a client first seeing a transition to its end, over all clients, ms.
    pub transition_ms: Percentiles,
    /// Longest time any client spent under the loading screen, ms.
    pub longest_loading_screen_ms: u64,
    /// The lifecycle gates over all clients (seed 000's runtime expectations).
    pub gates: GatesSection,
    /// What the clients' routers carried (seed 002: every notification went through them).
    pub router: RouterSection,
    /// Every gate wait still pending when a session ended, with what blocks it.
    pub pending_waits: Vec<String>,
}

/// The lifecycle gates, summed over clients.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GatesSection {
    /// `Lifecycle.Gate.Character.LocalReady` opened.
    pub local_ready_opened: u64,
    /// `Lifecycle.Gate.Character.RemoteReady` opened.
    pub remote_ready_opened: u64,
    /// `Lifecycle.Gate.LocalPlayer.WidgetControllerAndTeamReady` opened (one per readiness
    /// period).
    pub widget_controller_and_team_ready_opened: u64,
    /// Pawn generations scoped: local (own pawns) and remote (others', per viewer).
    pub pawn_generations: RouteCounts,
    /// Generations that ended before their gate could open (not violations), local.
    pub local_ended_before_gate_opened: EndedBeforeGate,
    /// Generations that ended before their gate could open (not violations), remote.
    pub remote_ended_before_gate_opened: EndedBeforeGate,
    /// Whether, for each route, gates opened plus generations ended before opening equals the
    /// generations seen: a gate opened for every pawn generation that lived long enough.
    pub every_generation_accounted: bool,
    /// Generations still waiting at the end after waiting over 5 s in a playing world.
    pub stuck_at_end: u64,
    /// Public gate subscriptions registered (nameplates, one per generation).
    pub subscriptions_registered: u64,
    /// Public gate subscriptions delivered.
    pub subscriptions_fired: u64,
    /// Raw team changes seen by clients.
    pub team_changes: u64,
    /// Presentation-only team changes sent.
    pub team_presentations: u64,
    /// Pawn team presentations dispatched (`DispatchTeamPresentation`).
    pub pawn_team_presentations: u64,
    /// Woken pawn team presentations refused by live state (not dispatched, registered again).
    pub pawn_team_presentations_refused: u64,
    /// Blueprint RepNotifies of remote pawns sent as they arrived, their gate open.
    pub rep_notifies_delivered: u64,
    /// Blueprint RepNotifies deferred while their remote gate had not released.
    pub rep_notifies_deferred: u64,
    /// Deferred RepNotifies that replaced an earlier one of the same kind (the bound).
    pub rep_notifies_coalesced: u64,
    /// Deferred RepNotifies replayed at their gate's release, before RemoteReady.
    pub rep_notifies_replayed: u64,
    /// Deferred RepNotifies discarded with a generation retired before its release.
    pub rep_notifies_discarded: u64,
    /// Deferred RepNotifies still waiting when their sessions ended.
    pub rep_notifies_deferred_at_end: u64,
    /// UI tracking resets.
    pub ui_resets: u64,
    /// Worlds created (one per client login and travel).
    pub worlds_created: u64,
    /// From a generation's scope to its gate, ms.
    pub gate_wait_ms: Percentiles,
    /// Waits still pending when the final sessions ended (each listed in `pending_waits`).
    pub pending_waits_at_end: usize,
    /// Waits still pending when relaunches ended earlier sessions (counted only).
    pub pending_waits_at_relaunch: u64,
    /// Violations of the runtime expectations (must be 0).
    pub gate_violations: u64,
    /// The first violations, described.
    pub violation_samples: Vec<String>,
}

/// The routers' figures, summed over sessions (listener counts: the largest of any session).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RouterSection {
    /// Notifications and delegates broadcast.
    pub broadcasts: u64,
    /// Listener callbacks run.
    pub deliveries: u64,
    /// Payload type mismatches (must be 0).
    pub mismatches: u64,
    /// Refused broadcasts and registrations (must be 0).
    pub refused: u64,
    /// Game-instance listeners of one client (the floor under every world).
    pub listeners_baseline: usize,
    /// Most listeners any client held at once: the baseline plus one world's, however many
    /// travels.
    pub listeners_max: usize,
    /// Most listeners any client held at its end.
    pub listeners_at_end: usize,
    /// World lifetimes retired at travel.
    pub world_lifetimes_retired: u64,
    /// Listeners removed with them.
    pub world_listeners_retired: u64,
    /// Lifecycle scopes retired with their worlds.
    pub world_scopes_retired: u64,
}

impl GatesSection {
    fn of(gates: &GateStats) -> GatesSection {
        let accounted = gates.accounted();
        GatesSection {
            local_ready_opened: gates.local_ready_opened,
            remote_ready_opened: gates.remote_ready_opened,
            widget_controller_and_team_ready_opened: gates.widget_controller_and_team_ready_opened,
            pawn_generations: gates.pawn_generations,
            local_ended_before_gate_opened: gates.local_ended_before_gate,
            remote_ended_before_gate_opened: gates.remote_ended_before_gate,
            every_generation_accounted: accounted == gates.pawn_generations,
            stuck_at_end: gates.stuck_at_end,
            subscriptions_registered: gates.subscriptions_registered,
            subscriptions_fired: gates.subscriptions_fired,
            team_changes: gates.team_changes,
            team_presentations: gates.team_presentations,
            pawn_team_presentations: gates.pawn_team_presentations,
            pawn_team_presentations_refused: gates.pawn_team_presentations_refused,
            rep_notifies_delivered: gates.rep_notifies_delivered,
            rep_notifies_deferred: gates.rep_notifies_deferred,
            rep_notifies_coalesced: gates.rep_notifies_coalesced,
            rep_notifies_replayed: gates.rep_notifies_replayed,
            rep_notifies_discarded: gates.rep_notifies_discarded,
            rep_notifies_deferred_at_end: gates.rep_notifies_deferred_at_end,
            ui_resets: gates.ui_resets,
            worlds_created: gates.worlds_created,
            gate_wait_ms: Percentiles::of(gates.gate_wait_ms.clone()),
            pending_waits_at_end: gates.pending_waits.len(),
            pending_waits_at_relaunch: gates.pending_waits_at_relaunch,
            gate_violations: gates.gate_violations,
            violation_samples: gates.violation_samples.clone(),
        }
    }
}

impl RouterSection {
    fn of(router: &RouterFigures) -> RouterSection {
        RouterSection {
            broadcasts: router.broadcasts,
            deliveries: router.deliveries,
            mismatches: router.mismatches,
            refused: router.refused,
            listeners_baseline: router.listeners_baseline,
            listeners_max: router.listeners_max,
            listeners_at_end: router.listeners_at_end,
            world_lifetimes_retired: router.world_lifetimes_retired,
            world_listeners_retired: router.world_listeners_retired,
            world_scopes_retired: router.world_scopes_retired,
        }
    }
}

/// Errors kept verbatim in the report.
const ERROR_SAMPLES: usize = 20;

impl SwarmReport {
    /// Sums client outcomes.
    pub fn from_outcomes(outcomes: &[ClientOutcome]) -> Self {
        let mut ended = BTreeSet::new();
        let mut samples = Vec::new();
        let mut errors = Vec::new();
        let mut gates = GateStats::default();
        let mut pending_waits = Vec::new();
        for o in outcomes {
            ended.extend(o.stats.transitions_ended.iter().copied());
            samples.extend(o.stats.transition_ms.iter().copied());
            for e in o.errors.iter().chain(&o.stats.errors) {
                errors.push(format!("client {}: {e}", o.index));
            }
            for wait in &o.stats.gates.pending_waits {
                pending_waits.push(format!("client {}: {wait}", o.index));
            }
            let mut client_gates = o.stats.gates.clone();
            for violation in &mut client_gates.violation_samples {
                *violation = format!("client {}: {violation}", o.index);
            }
            gates.absorb(client_gates);
        }
        SwarmReport {
            clients: outcomes.len(),
            clients_connected: outcomes.iter().filter(|o| o.connected).count(),
            clients_placed: outcomes.iter().filter(|o| o.placed).count(),
            transitions_completed: ended.len(),
            transitions_superseded: outcomes.iter().map(|o| o.stats.transitions_superseded).sum(),
            ended_before_placed: outcomes.iter().map(|o| o.stats.ended_before_placed).sum(),
            deaths: outcomes.iter().map(|o| o.stats.deaths).sum(),
            respawns: outcomes.iter().map(|o| o.stats.respawns).sum(),
            relaunches: outcomes.iter().map(|o| o.relaunches).sum(),
            double_pawns: outcomes.iter().map(|o| o.stats.double_pawns).sum(),
            double_grants: outcomes.iter().map(|o| o.stats.double_grants).sum(),
            spawns_at_stale_node: outcomes.iter().map(|o| o.stats.spawns_at_stale_node).sum(),
            errors: errors.len(),
            error_samples: errors.into_iter().take(ERROR_SAMPLES).collect(),
            transition_ms: Percentiles::of(samples),
            longest_loading_screen_ms: outcomes
                .iter()
                .map(|o| o.stats.longest_screen_ms)
                .max()
                .unwrap_or(0),
            gates: GatesSection::of(&gates),
            router: RouterSection::of(&gates.router),
            pending_waits,
        }
    }
}

impl fmt::Display for SwarmReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.transition_ms;
        writeln!(f, "gatehouse-sim report")?;
        writeln!(f, "  clients connected     {}/{}", self.clients_connected, self.clients)?;
        writeln!(f, "  clients placed        {}/{}", self.clients_placed, self.clients)?;
        writeln!(f, "  transitions completed {}", self.transitions_completed)?;
        writeln!(f, "  transitions superseded {}", self.transitions_superseded)?;
        writeln!(
            f,
            "  shown -> ended (ms)   min {} / median {} / p99 {} / max {} over {}",
            t.min, t.median, t.p99, t.max, t.count
        )?;
        writeln!(f, "  longest loading screen {} ms", self.longest_loading_screen_ms)?;
        writeln!(f, "  ended before placed   {}", self.ended_before_placed)?;
        writeln!(f, "  deaths / respawns     {} / {}", self.deaths, self.respawns)?;
        writeln!(f, "  relaunches            {}", self.relaunches)?;
        writeln!(f, "  double pawns          {}", self.double_pawns)?;
        writeln!(f, "  double grants         {}", self.double_grants)?;
        writeln!(f, "  spawns at stale node  {}", self.spawns_at_stale_node)?;
        writeln!(f, "  errors                {}", self.errors)?;
        for e in &self.error_samples {
            writeln!(f, "    {e}")?;
        }
        let g = &self.gates;
        let (generations, local_ended, remote_ended) = (
            g.pawn_generations,
            g.local_ended_before_gate_opened,
            g.remote_ended_before_gate_opened,
        );
        writeln!(f, "  lifecycle gates")?;
        writeln!(
            f,
            "    local ready         {} opened / {} local pawn generations ({} ended before opening)",
            g.local_ready_opened,
            generations.local,
            local_ended.total()
        )?;
        writeln!(
            f,
            "    remote ready        {} opened / {} remote pawn generations ({} ended before opening)",
            g.remote_ready_opened,
            generations.remote,
            remote_ended.total()
        )?;
        writeln!(f, "    every generation accounted {}", g.every_generation_accounted)?;
        writeln!(
            f,
            "    widget+team ready   {} readiness periods ({} UI resets, {} worlds)",
            g.widget_controller_and_team_ready_opened, g.ui_resets, g.worlds_created
        )?;
        writeln!(
            f,
            "    subscriptions       {} fired / {} registered",
            g.subscriptions_fired, g.subscriptions_registered
        )?;
        writeln!(
            f,
            "    team changes        {} raw / {} presented",
            g.team_changes, g.team_presentations
        )?;
        writeln!(
            f,
            "    pawn team           {} presented ({} refused by live state)",
            g.pawn_team_presentations, g.pawn_team_presentations_refused
        )?;
        writeln!(
            f,
            "    rep notifies        {} live / {} replayed at release ({} deferred: {} coalesced, {} discarded, {} waiting at end)",
            g.rep_notifies_delivered,
            g.rep_notifies_replayed,
            g.rep_notifies_deferred,
            g.rep_notifies_coalesced,
            g.rep_notifies_discarded,
            g.rep_notifies_deferred_at_end
        )?;
        let w = &g.gate_wait_ms;
        writeln!(
            f,
            "    scope -> gate (ms)  min {} / median {} / p99 {} / max {} over {}",
            w.min, w.median, w.p99, w.max, w.count
        )?;
        writeln!(f, "    stuck at end        {}", g.stuck_at_end)?;
        writeln!(f, "    gate violations     {}", g.gate_violations)?;
        for v in &g.violation_samples {
            writeln!(f, "      {v}")?;
        }
        let r = &self.router;
        writeln!(f, "  router")?;
        writeln!(
            f,
            "    broadcasts / deliveries {} / {} (mismatches {}, refused {})",
            r.broadcasts, r.deliveries, r.mismatches, r.refused
        )?;
        writeln!(
            f,
            "    listeners           baseline {} / max {} / at end {}; {} world lifetimes retired {} listeners",
            r.listeners_baseline,
            r.listeners_max,
            r.listeners_at_end,
            r.world_lifetimes_retired,
            r.world_listeners_retired
        )?;
        writeln!(
            f,
            "  pending gate waits at end {} (and {} left by relaunches)",
            self.pending_waits.len(),
            g.pending_waits_at_relaunch
        )?;
        for wait in &self.pending_waits {
            writeln!(f, "    {wait}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let p = Percentiles::of((1..=100).collect());
        assert_eq!((p.min, p.median, p.p99, p.max, p.count), (1, 50, 99, 100, 100));
        assert_eq!(Percentiles::of(vec![]), Percentiles::default());
        assert_eq!(Percentiles::of(vec![7]).p99, 7);
    }
}
