//! The swarm report: what every simulated client saw, summed, as readable text, as JSON, and as
//! the `--check` verdict.
//!
//! The counts come from the figure lists of [`crate::figures`]: the report's top level and its
//! `gates` section are declared from the same lists as the live stats, so each figure is a field
//! and a JSON key here without being written out again, and the printed lines and the `--check`
//! conditions walk the lists' [`Figure`] tables. What is declared here is only what is not a
//! count of one client: the clients connected and placed, the transitions completed, the errors
//! and samples, the percentiles, and whether every generation is accounted for.

use std::fmt;

use gatehouse_protocol::CloseCode;
use serde::Serialize;

mod misbehaving;

pub use misbehaving::{KindSection, MisbehavingSection};

use crate::figures::{
    Admission, Check, EndedBeforeGate, Figure, GateStats, RouteCounts, RouterFigures, SessionStats,
    TimingSummary, Timings, WireFigures, gate_figures, session_figures,
};
use gatehouse_conditioner::proxy::ProxyStats;

/// What one client ended with.
#[derive(Debug, Clone)]
pub struct ClientOutcome {
    /// The client's index in the swarm.
    pub index: usize,
    /// Whether it ran the whole client lifecycle (a full client) or only its protocol duties (a
    /// thin one).
    pub full: bool,
    /// Whether it was welcomed.
    pub connected: bool,
    /// Whether at the end it had a pawn whose possession it acknowledged and no loading screen.
    pub placed: bool,
    /// Pawns it saw owned by itself at the end (1 when all is well).
    pub own_pawns: usize,
    /// What its sessions saw, summed over its relaunches (`stats.relaunches` counts them).
    pub stats: SessionStats,
    /// Connection-level errors (refused, closed by the server, unreachable).
    pub errors: Vec<String>,
    /// How it misbehaved, if it did: its figures then go to the report's `misbehaving` section
    /// only.
    pub misbehaviour: Option<crate::misbehaviour::Misbehaviour>,
    /// The close code of ours the server last closed one of its connections with, if any.
    pub server_close: Option<CloseCode>,
    /// When it first dialled, was first welcomed and first placed, over its lives.
    pub admission: Admission,
}

impl ClientOutcome {
    /// Client `index` (full or thin) that could not run at all, for `why`.
    pub fn failed(index: usize, full: bool, why: String) -> ClientOutcome {
        ClientOutcome {
            index,
            full,
            connected: false,
            placed: false,
            own_pawns: 0,
            stats: SessionStats::default(),
            errors: vec![why],
            misbehaviour: None,
            server_close: None,
            admission: Admission::default(),
        }
    }
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

impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Percentiles { count, min, median, p99, max } = self;
        write!(f, "min {min} / median {median} / p99 {p99} / max {max} over {count}")
    }
}

session_figures! {
    /// The whole run's report: the session figures summed over every client, and the run's own.
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct SwarmReport {
        /// Well-behaved clients started: every figure of the report but `misbehaving` is theirs.
        pub clients: usize,
        /// Of them, thin clients: protocol duties and the session checks only.
        pub thin_clients: usize,
        /// Of them, full clients: the whole client lifecycle; the `gates` and `router` sections
        /// are theirs alone.
        pub full_clients: usize,
        /// Clients the server welcomed.
        pub clients_connected: usize,
        /// Clients placed at the end.
        pub clients_placed: usize,
        /// Distinct transitions that clients saw end.
        pub transitions_completed: usize,
        [figures]
        /// Errors over all clients.
        pub errors: usize,
        /// The first few errors, for reading.
        pub error_samples: Vec<String>,
        /// The client-side phase timings over all clients, thin and full, µs.
        pub timings: TimingsSection,
        /// How long the swarm took to be let in (first dial to the last first welcome and the
        /// last first placement).
        pub admission: AdmissionSection,
        /// What all clients' connections carried.
        pub wire: WireFigures,
        /// What the network conditioner between the clients and the server did to their datagrams
        /// (docs/testing.md, "A bad network"), beside `wire`'s losses as quinn saw them; absent
        /// without one.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub network: Option<ProxyStats>,
        /// The lifecycle gates over the full clients (the gates' contract, docs/spec/gates.md).
        pub gates: GatesSection,
        /// What the full clients' routers carried (docs/spec/router.md R13: every notification went
        /// through them).
        pub router: RouterFigures,
        /// Every gate wait still pending when a session ended, with what blocks it.
        pub pending_waits: Vec<String>,
        /// What the misbehaving clients got, apart from every figure above.
        pub misbehaving: MisbehavingSection,
    }
}

gate_figures! {
    /// The lifecycle gates, summed over clients.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
    pub struct GatesSection {
        [figures]
        /// Pawn generations scoped: local (own pawns) and remote (others', per viewer).
        pub pawn_generations: RouteCounts,
        /// Generations that ended before their gate could open (not violations), local.
        pub local_ended_before_gate_opened: EndedBeforeGate,
        /// Generations that ended before their gate could open (not violations), remote.
        pub remote_ended_before_gate_opened: EndedBeforeGate,
        /// Whether, for each route, gates opened plus generations ended before opening equals the
        /// generations seen: a gate opened for every pawn generation that lived long enough.
        pub every_generation_accounted: bool,
        /// From a generation's scope to its gate, ms.
        pub gate_wait_ms: Percentiles,
        /// Waits still pending when the final sessions ended (each listed in `pending_waits`).
        pub pending_waits_at_end: usize,
        /// The first violations, described.
        pub violation_samples: Vec<String>,
    }
}

/// The client-side phase timings summed up (see [`Timings`]), µs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TimingsSection {
    /// From dialling the server to its `Welcome`.
    pub connect_to_welcome: TimingSummary,
    /// From dialling the server to the QUIC handshake done and the control stream open.
    pub connect_to_handshake: TimingSummary,
    /// From first seeing a transition to sending its `TransitionReady`.
    pub shown_to_ready_sent: TimingSummary,
    /// From `TransitionReady` to the own pawn possessed (or teleported).
    pub ready_to_possessed: TimingSummary,
    /// From the own pawn possessed to `EndTransition`.
    pub possessed_to_ended: TimingSummary,
    /// From first seeing a transition to its `EndTransition`.
    pub shown_to_ended: TimingSummary,
    /// A move to another server's whole loading screen, from the source to the destination.
    pub moved: TimingSummary,
    /// From a reply's cause (the message it answers readable, or the deadline it follows due)
    /// to the reply leaving the client: the swarm's own delay.
    pub reply_delay: TimingSummary,
}

impl TimingsSection {
    fn of(timings: &Timings) -> TimingsSection {
        TimingsSection {
            connect_to_welcome: timings.connect_to_welcome.summary(),
            connect_to_handshake: timings.connect_to_handshake.summary(),
            shown_to_ready_sent: timings.shown_to_ready_sent.summary(),
            ready_to_possessed: timings.ready_to_possessed.summary(),
            possessed_to_ended: timings.possessed_to_ended.summary(),
            shown_to_ended: timings.shown_to_ended.summary(),
            moved: timings.moved.summary(),
            reply_delay: timings.reply_delay.summary(),
        }
    }

    /// Each phase with its printed label.
    fn phases(&self) -> [(&'static str, &TimingSummary); 8] {
        [
            ("connect -> Welcome", &self.connect_to_welcome),
            ("connect -> handshake done", &self.connect_to_handshake),
            ("shown -> ready sent", &self.shown_to_ready_sent),
            ("ready -> possessed", &self.ready_to_possessed),
            ("possessed -> ended", &self.possessed_to_ended),
            ("shown -> ended", &self.shown_to_ended),
            ("moved: source -> destination", &self.moved),
            ("reply delay", &self.reply_delay),
        ]
    }
}

/// How long the swarm took to be let in: from the first client's first dial to the last
/// client's first `Welcome`, and to the last client's first placement (a possessed, acknowledged
/// pawn and no loading screen), over the well-behaved clients; the load benchmark's admission
/// time (docs/performance.md, "The load benchmark").
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AdmissionSection {
    /// Clients welcomed at least once.
    pub welcomed: usize,
    /// From the first dial to the last of those first welcomes, µs (`null`: none welcomed).
    pub last_welcomed_us: Option<u64>,
    /// Clients placed at least once.
    pub placed: usize,
    /// From the first dial to the last of those first placements, µs (`null`: none placed).
    pub last_placed_us: Option<u64>,
}

impl AdmissionSection {
    fn of(outcomes: &[&ClientOutcome]) -> AdmissionSection {
        let first_dial = outcomes.iter().filter_map(|o| o.admission.dialled).min();
        let last = |instants: Vec<std::time::Instant>| {
            let (first, last) = (first_dial?, *instants.iter().max()?);
            Some(
                u64::try_from(last.saturating_duration_since(first).as_micros())
                    .unwrap_or(u64::MAX),
            )
        };
        let welcomed: Vec<_> = outcomes.iter().filter_map(|o| o.admission.welcomed).collect();
        let placed: Vec<_> = outcomes.iter().filter_map(|o| o.admission.placed).collect();
        AdmissionSection {
            welcomed: welcomed.len(),
            placed: placed.len(),
            last_welcomed_us: last(welcomed),
            last_placed_us: last(placed),
        }
    }

    /// Its printed line, for a swarm of `clients`: `the last welcomed 10.214 s, placed 10.530 s
    /// after the first dial (4000 / 4000 of 4000)`.
    fn line(&self, clients: usize) -> String {
        let s = |us: Option<u64>| us.map_or("n/a".into(), |us| format!("{:.3} s", us as f64 / 1e6));
        format!(
            "the last welcomed {}, placed {} after the first dial ({} / {} of {clients})",
            s(self.last_welcomed_us),
            s(self.last_placed_us),
            self.welcomed,
            self.placed
        )
    }
}

impl fmt::Display for TimingSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "p50 {:.3} / p90 {:.3} / p99 {:.3} / max {:.3} ms over {}",
            ms(self.p50_us),
            ms(self.p90_us),
            ms(self.p99_us),
            ms(self.max_us),
            self.count
        )
    }
}

impl GatesSection {
    fn of(gates: &GateStats) -> GatesSection {
        let mut section = GatesSection {
            pawn_generations: gates.pawn_generations,
            local_ended_before_gate_opened: gates.local_ended_before_gate,
            remote_ended_before_gate_opened: gates.remote_ended_before_gate,
            every_generation_accounted: gates.accounted() == gates.pawn_generations,
            gate_wait_ms: Percentiles::of(gates.gate_wait_ms.clone()),
            pending_waits_at_end: gates.pending_waits.len(),
            violation_samples: gates.violation_samples.clone(),
            ..GatesSection::default()
        };
        section.set_figure_values(gates.figure_values());
        section
    }
}

/// Errors kept verbatim in the report.
const ERROR_SAMPLES: usize = 20;

impl SwarmReport {
    /// Sums client outcomes: every well-behaved client's stats combined figure by figure, its
    /// errors, violations and pending waits labelled with its index; the misbehaving clients'
    /// outcomes go to the `misbehaving` section only.
    pub fn from_outcomes(all: &[ClientOutcome]) -> Self {
        let outcomes: Vec<&ClientOutcome> =
            all.iter().filter(|o| o.misbehaviour.is_none()).collect();
        let mut totals = SessionStats::default();
        for o in &outcomes {
            let label = |what: &String| format!("client {}: {what}", o.index);
            let mut stats = o.stats.clone();
            stats.errors = o.errors.iter().chain(&o.stats.errors).map(label).collect();
            let gates = &mut stats.gates;
            gates.violation_samples = gates.violation_samples.iter().map(label).collect();
            gates.pending_waits = gates.pending_waits.iter().map(label).collect();
            totals.absorb(stats);
        }
        let mut report = SwarmReport {
            clients: outcomes.len(),
            thin_clients: outcomes.iter().filter(|o| !o.full).count(),
            full_clients: outcomes.iter().filter(|o| o.full).count(),
            clients_connected: outcomes.iter().filter(|o| o.connected).count(),
            clients_placed: outcomes.iter().filter(|o| o.placed).count(),
            transitions_completed: totals.transitions_ended.len(),
            errors: totals.errors.len(),
            error_samples: totals.errors.iter().take(ERROR_SAMPLES).cloned().collect(),
            timings: TimingsSection::of(&totals.timings),
            admission: AdmissionSection::of(&outcomes),
            wire: totals.wire,
            gates: GatesSection::of(&totals.gates),
            router: totals.gates.router,
            pending_waits: totals.gates.pending_waits.clone(),
            misbehaving: MisbehavingSection::of(all),
            ..SwarmReport::default()
        };
        report.set_figure_values(totals.figure_values());
        report
    }

    /// The verdict of the run, the one `gatehouse-sim --check` exits on and the JSON report's
    /// `clean` and `problems` say: both read it here, so they cannot disagree.
    pub fn verdict(&self) -> Verdict {
        let problems = self.problems();
        Verdict { clean: problems.is_empty(), problems }
    }

    /// The report as `--report-json` writes it: [`Verdict`] and [`RunInfo`] at the top, then
    /// every field of the report (docs/simulator.md, "The JSON report").
    pub fn to_json(&self, run: &RunInfo) -> serde_json::Result<String> {
        let Verdict { clean, problems } = self.verdict();
        serde_json::to_string_pretty(&ReportFile { clean, problems, run, report: self })
    }

    /// What `gatehouse-sim --check` refuses, described (empty: the report is clean): a
    /// well-behaved client not connected or not placed at the end, any error, a death without
    /// its respawn, a figure declared [`Check::Zero`] above 0, a pawn generation not accounted
    /// for; a misbehaving client that ended otherwise than the protocol answers its kind, or saw
    /// an invariant broken.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut expect = |ok: bool, what: String| {
            if !ok {
                out.push(what);
            }
        };
        let (clients, connected, placed) =
            (self.clients, self.clients_connected, self.clients_placed);
        expect(connected == clients, format!("{connected}/{clients} clients connected"));
        expect(placed == clients, format!("{placed}/{clients} clients placed at the end"));
        expect(self.errors == 0, format!("{} errors", self.errors));
        expect(
            self.deaths == self.respawns + self.deaths_forgotten_by_server,
            format!(
                "{} deaths but {} respawns and {} forgotten by the server",
                self.deaths, self.respawns, self.deaths_forgotten_by_server
            ),
        );
        let figures = self.figures().chain(self.gates.figures()).chain(self.router.figures());
        for (figure, value) in figures {
            if figure.check == Check::Zero {
                expect(value == 0, format!("{} = {value}", figure.name));
            }
        }
        expect(
            self.gates.every_generation_accounted,
            "not every pawn generation is accounted for".into(),
        );
        // The conditioner's own drops are a fault of the tool, not an impairment asked for.
        let relay_dropped = self.network.map_or(0, |n| n.relay_dropped);
        expect(relay_dropped == 0, format!("the conditioner's relay dropped {relay_dropped}"));
        out.extend(self.misbehaving.problems());
        out
    }
}

/// Whether a run is clean, and if not, why: what `--check` exits on and what the JSON report
/// says at its top ([`SwarmReport::verdict`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    /// No problem found: `--check` exits 0.
    pub clean: bool,
    /// Each problem found, in plain words (`0/8 clients connected`, `gate_violations = 1`);
    /// empty when clean.
    pub problems: Vec<String>,
}

/// How a run was made, for a reader of the JSON report that was not there: what ran, with which
/// options, against which server, when and for how long. The binary reads the clock and the
/// command line; the swarm itself never does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunInfo {
    /// The simulator's version (its crate's).
    pub version: String,
    /// Every option of the run as it took effect, given or default, by its long name without
    /// dashes, as text (`"clients": "8"`, `"duration": "30s"`).
    pub options: std::collections::BTreeMap<String, String>,
    /// The command line as given, program name first.
    pub argv: Vec<String>,
    /// The seed of the clients' draws (`--seed`).
    pub seed: u64,
    /// The seed of the network conditioner's draws, when `--impair` runs one.
    pub impair_seed: Option<u64>,
    /// The server's address the clients dialled, as resolved (`127.0.0.1:7777`).
    pub server: String,
    /// When the run started, RFC 3339 in UTC to the second (`2026-12-06T16:08:41Z`).
    pub started_at: String,
    /// How long the run took, start to the last client's end, in milliseconds.
    pub duration_ms: u64,
}

impl RunInfo {
    /// The run metadata of a run that started at `started` (the wall clock, read by the
    /// caller) and took `took`; `options`, `argv`, seeds and server as [`RunInfo`] says.
    pub fn new(
        options: std::collections::BTreeMap<String, String>,
        argv: Vec<String>,
        seeds: (u64, Option<u64>),
        server: std::net::SocketAddr,
        started: std::time::SystemTime,
        took: std::time::Duration,
    ) -> RunInfo {
        RunInfo {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            options,
            argv,
            seed: seeds.0,
            impair_seed: seeds.1,
            server: server.to_string(),
            started_at: humantime::format_rfc3339_seconds(started).to_string(),
            duration_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// The JSON report's top level: the verdict and the run first, then the report's own fields.
#[derive(Serialize)]
struct ReportFile<'a> {
    clean: bool,
    problems: Vec<String>,
    run: &'a RunInfo,
    #[serde(flatten)]
    report: &'a SwarmReport,
}

/// Writes one line per figure: its label padded to `width`, then its value.
fn figure_lines<'a>(
    f: &mut fmt::Formatter<'_>,
    indent: &str,
    width: usize,
    figures: impl Iterator<Item = (&'a Figure, u64)>,
) -> fmt::Result {
    for (figure, value) in figures {
        writeln!(f, "{indent}{:<width$} {value}", figure.label)?;
    }
    Ok(())
}

/// A group of figures on one line: `local 3 / remote 5`.
fn inline<'a>(figures: impl Iterator<Item = (&'a Figure, u64)>) -> String {
    let parts: Vec<String> = figures.map(|(f, v)| format!("{} {v}", f.label)).collect();
    parts.join(" / ")
}

/// The longest of `labels`.
fn width<'a>(labels: impl IntoIterator<Item = &'a str>) -> usize {
    labels.into_iter().map(str::len).max().unwrap_or(0)
}

impl fmt::Display for SwarmReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "gatehouse-sim report")?;
        let (thin, full) = (self.thin_clients, self.full_clients);
        match self.misbehaving.clients {
            0 => writeln!(f, "  {} clients: {thin} thin, {full} full", self.clients)?,
            bad => writeln!(
                f,
                "  {} well-behaved clients: {thin} thin, {full} full; {bad} misbehaving (below)",
                self.clients
            )?,
        }
        writeln!(f, "  session figures and timings: every client, thin and full")?;
        let top =
            ["clients connected", "clients placed", "transitions completed", "errors", "admission"];
        let phases = self.timings.phases();
        let top = top.into_iter().chain(phases.iter().map(|(label, _)| *label));
        let w = width(top.chain(SwarmReport::FIGURES.iter().map(|f| f.label)));
        let clients = self.clients;
        writeln!(f, "  {:<w$} {}/{clients}", "clients connected", self.clients_connected)?;
        writeln!(f, "  {:<w$} {}/{clients}", "clients placed", self.clients_placed)?;
        writeln!(f, "  {:<w$} {}", "transitions completed", self.transitions_completed)?;
        figure_lines(f, "  ", w, self.figures())?;
        for (label, timing) in phases {
            writeln!(f, "  {label:<w$} {timing}")?;
        }
        writeln!(f, "  {:<w$} {}", "admission", self.admission.line(clients))?;
        writeln!(f, "  wire: {}", inline(self.wire.figures()))?;
        if let Some(network) = &self.network {
            for line in network.to_string().lines() {
                writeln!(f, "  {line}")?;
            }
        }
        writeln!(f, "  {:<w$} {}", "errors", self.errors)?;
        for e in &self.error_samples {
            writeln!(f, "    {e}")?;
        }

        let g = &self.gates;
        writeln!(f, "  lifecycle gates ({full} full clients)")?;
        let breakdown = [
            "pawn generations",
            "local ended before opening",
            "remote ended before opening",
            "every generation accounted",
            "scope -> gate (ms)",
        ];
        let w = width(breakdown.into_iter().chain(GatesSection::FIGURES.iter().map(|f| f.label)));
        let [generations, local_ended, remote_ended, accounted, wait] = breakdown;
        writeln!(f, "    {generations:<w$} {}", inline(g.pawn_generations.figures()))?;
        let ended = &g.local_ended_before_gate_opened;
        writeln!(f, "    {local_ended:<w$} {} ({})", ended.total(), inline(ended.figures()))?;
        let ended = &g.remote_ended_before_gate_opened;
        writeln!(f, "    {remote_ended:<w$} {} ({})", ended.total(), inline(ended.figures()))?;
        writeln!(f, "    {accounted:<w$} {}", g.every_generation_accounted)?;
        writeln!(f, "    {wait:<w$} {}", g.gate_wait_ms)?;
        figure_lines(f, "    ", w, g.figures())?;
        for v in &g.violation_samples {
            writeln!(f, "      {v}")?;
        }

        writeln!(f, "  router ({full} full clients)")?;
        let w = width(RouterFigures::FIGURES.iter().map(|f| f.label));
        figure_lines(f, "    ", w, self.router.figures())?;

        writeln!(f, "  pending gate waits at end {}", self.pending_waits.len())?;
        for wait in &self.pending_waits {
            writeln!(f, "    {wait}")?;
        }
        if self.misbehaving.clients > 0 {
            write!(f, "{}", self.misbehaving)?;
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

    /// Every key of the JSON report, with the kind of its value, as `deploy/soak.sh`, the e2e
    /// tests and any reader of `--report-json` know them.
    const JSON_KEYS: &str = "\
admission.last_placed_us number
admission.last_welcomed_us number
admission.placed number
admission.welcomed number
clients number
clients_connected number
clients_placed number
deaths number
double_grants number
double_pawns number
ended_before_placed number
error_samples array
errors number
full_clients number
gates.every_generation_accounted bool
gates.gate_violations number
gates.gate_wait_ms.count number
gates.gate_wait_ms.max number
gates.gate_wait_ms.median number
gates.gate_wait_ms.min number
gates.gate_wait_ms.p99 number
gates.local_ended_before_gate_opened.destroyed number
gates.local_ended_before_gate_opened.rerouted number
gates.local_ended_before_gate_opened.session_ended number
gates.local_ended_before_gate_opened.unpossessed number
gates.local_ended_before_gate_opened.world_torn_down number
gates.local_ready_opened number
gates.pawn_generations.local number
gates.pawn_generations.remote number
gates.pawn_team_presentations number
gates.pawn_team_presentations_refused number
gates.pending_waits_at_end number
gates.pending_waits_at_relaunch number
gates.remote_ended_before_gate_opened.destroyed number
gates.remote_ended_before_gate_opened.rerouted number
gates.remote_ended_before_gate_opened.session_ended number
gates.remote_ended_before_gate_opened.unpossessed number
gates.remote_ended_before_gate_opened.world_torn_down number
gates.remote_ready_opened number
gates.rep_notifies_coalesced number
gates.rep_notifies_deferred number
gates.rep_notifies_deferred_at_end number
gates.rep_notifies_delivered number
gates.rep_notifies_discarded number
gates.rep_notifies_replayed number
gates.stuck_at_end number
gates.subscriptions_fired number
gates.subscriptions_registered number
gates.team_changes number
gates.team_presentations number
gates.ui_resets number
gates.violation_samples array
gates.widget_controller_and_team_ready_opened number
gates.worlds_created number
longest_loading_screen_ms number
misbehaving.clients number
misbehaving.invariant_violations number
misbehaving.unexpected_ends number
misbehaving.unexpected_samples array
pending_waits array
relaunches number
respawns number
router.broadcasts number
router.deliveries number
router.listeners_at_end number
router.listeners_baseline number
router.listeners_max number
router.mismatches number
router.refused number
router.world_lifetimes_retired number
router.world_listeners_retired number
router.world_scopes_retired number
spawns_at_stale_node number
thin_clients number
timings.connect_to_handshake.count number
timings.connect_to_handshake.max_us number
timings.connect_to_handshake.min_us number
timings.connect_to_handshake.p50_us number
timings.connect_to_handshake.p90_us number
timings.connect_to_handshake.p99_us number
timings.connect_to_welcome.count number
timings.connect_to_welcome.max_us number
timings.connect_to_welcome.min_us number
timings.connect_to_welcome.p50_us number
timings.connect_to_welcome.p90_us number
timings.connect_to_welcome.p99_us number
timings.moved.count number
timings.moved.max_us number
timings.moved.min_us number
timings.moved.p50_us number
timings.moved.p90_us number
timings.moved.p99_us number
timings.possessed_to_ended.count number
timings.possessed_to_ended.max_us number
timings.possessed_to_ended.min_us number
timings.possessed_to_ended.p50_us number
timings.possessed_to_ended.p90_us number
timings.possessed_to_ended.p99_us number
timings.ready_to_possessed.count number
timings.ready_to_possessed.max_us number
timings.ready_to_possessed.min_us number
timings.ready_to_possessed.p50_us number
timings.ready_to_possessed.p90_us number
timings.ready_to_possessed.p99_us number
timings.reply_delay.count number
timings.reply_delay.max_us number
timings.reply_delay.min_us number
timings.reply_delay.p50_us number
timings.reply_delay.p90_us number
timings.reply_delay.p99_us number
timings.shown_to_ended.count number
timings.shown_to_ended.max_us number
timings.shown_to_ended.min_us number
timings.shown_to_ended.p50_us number
timings.shown_to_ended.p90_us number
timings.shown_to_ended.p99_us number
timings.shown_to_ready_sent.count number
timings.shown_to_ready_sent.max_us number
timings.shown_to_ready_sent.min_us number
timings.shown_to_ready_sent.p50_us number
timings.shown_to_ready_sent.p90_us number
timings.shown_to_ready_sent.p99_us number
transitions_completed number
transitions_superseded number
wire.bytes_received number
wire.bytes_sent number
wire.datagrams_received number
wire.datagrams_sent number
wire.lost_packets number
";

    fn outcome(index: usize) -> ClientOutcome {
        let mut stats = SessionStats::default();
        stats.timings.shown_to_ended.record(std::time::Duration::from_millis(5));
        stats.timings.shown_to_ended.record(std::time::Duration::from_millis(7));
        stats.errors.push("e".into());
        stats.gates.gate_wait_ms.push(3);
        stats.gates.pending_waits.push("w".into());
        stats.gates.violation_samples.push("v".into());
        let dialled = std::time::Instant::now();
        let admission = Admission {
            dialled: Some(dialled),
            welcomed: Some(dialled + std::time::Duration::from_millis(3)),
            placed: Some(dialled + std::time::Duration::from_millis(9)),
        };
        ClientOutcome {
            index,
            full: true,
            connected: true,
            placed: true,
            own_pawns: 1,
            stats,
            errors: vec![],
            misbehaviour: None,
            server_close: None,
            admission,
        }
    }

    fn keys(value: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    keys(value, &path, out);
                }
            }
            serde_json::Value::Bool(_) => out.push(format!("{path} bool")),
            serde_json::Value::Number(_) => out.push(format!("{path} number")),
            serde_json::Value::String(_) => out.push(format!("{path} string")),
            serde_json::Value::Array(_) => out.push(format!("{path} array")),
            serde_json::Value::Null => out.push(format!("{path} null")),
        }
    }

    /// The report keeps every key it had, with its kind; a key it did not have is a figure
    /// declared since (a number at the top level, in `gates` or in `router`).
    #[test]
    fn the_json_report_keeps_every_key_and_its_shape() {
        let report = SwarmReport::from_outcomes(&[outcome(0)]);
        let mut found = Vec::new();
        keys(&serde_json::to_value(&report).unwrap(), "", &mut found);
        let expected: Vec<&str> = JSON_KEYS.lines().collect();
        assert_eq!(expected.len(), 129);
        for key in &expected {
            assert!(found.iter().any(|f| f == key), "{key} missing from {found:#?}");
        }
        let declared: Vec<String> =
            (SwarmReport::FIGURES.iter().map(|f| format!("{} number", f.name)))
                .chain(GatesSection::FIGURES.iter().map(|f| format!("gates.{} number", f.name)))
                .chain(RouterFigures::FIGURES.iter().map(|f| format!("router.{} number", f.name)))
                .chain(WireFigures::FIGURES.iter().map(|f| format!("wire.{} number", f.name)))
                .collect();
        for key in &found {
            assert!(expected.contains(&key.as_str()) || declared.contains(key), "{key} unexpected");
        }
    }

    #[test]
    fn figures_are_summed_over_clients_and_labelled_by_client() {
        let mut a = outcome(0);
        a.stats.deaths = 2;
        a.stats.gates.rep_notifies_coalesced = 1;
        a.stats.gates.router.listeners_max = 9;
        let mut b = outcome(1);
        b.stats.deaths = 1;
        b.stats.gates.rep_notifies_coalesced = 4;
        b.stats.gates.router.listeners_max = 4;
        b.stats.longest_loading_screen_ms = 300;
        let report = SwarmReport::from_outcomes(&[a, b]);
        assert_eq!(report.deaths, 3);
        assert_eq!(report.longest_loading_screen_ms, 300);
        assert_eq!(report.gates.rep_notifies_coalesced, 5);
        assert_eq!(report.router.listeners_max, 9);
        assert_eq!(report.errors, 2);
        assert_eq!(report.error_samples, ["client 0: e", "client 1: e"]);
        assert_eq!(report.pending_waits, ["client 0: w", "client 1: w"]);
        assert_eq!(report.gates.pending_waits_at_end, 2);
        assert_eq!(report.timings.shown_to_ended.count, 4);
        assert_eq!((report.full_clients, report.thin_clients), (2, 0));
    }

    /// The admission runs from the first dial of any client to the last first welcome and the
    /// last first placement; a client never placed is not waited for, and is counted out.
    #[test]
    fn the_admission_runs_from_the_first_dial_to_the_last_placement() {
        let (a, mut b, mut never) = (outcome(0), outcome(1), outcome(2));
        let dialled = a.admission.dialled.unwrap();
        let ms = std::time::Duration::from_millis;
        b.admission.dialled = Some(dialled + ms(100));
        b.admission.welcomed = Some(dialled + ms(150));
        b.admission.placed = Some(dialled + ms(400));
        never.admission.placed = None;
        let section = SwarmReport::from_outcomes(&[a, b, never]).admission;
        let expected = AdmissionSection {
            welcomed: 3,
            last_welcomed_us: Some(150_000),
            placed: 2,
            last_placed_us: Some(400_000),
        };
        assert_eq!(section, expected);
        assert_eq!(
            section.line(3),
            "the last welcomed 0.150 s, placed 0.400 s after the first dial (3 / 2 of 3)"
        );
        assert_eq!(AdmissionSection::of(&[]).line(0).matches("n/a").count(), 2);
    }

    fn run_info() -> RunInfo {
        let options = [("clients", "1"), ("duration", "30s"), ("seed", "7")];
        RunInfo::new(
            options.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
            vec!["gatehouse-sim".into(), "--clients".into(), "1".into()],
            (7, Some(9)),
            "127.0.0.1:7777".parse().unwrap(),
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_573_321),
            std::time::Duration::from_micros(30_250_900),
        )
    }

    fn clean_outcome() -> ClientOutcome {
        let mut clean = outcome(0);
        clean.stats.errors.clear();
        clean.stats.gates.violation_samples.clear();
        clean
    }

    #[test]
    fn the_report_says_clean_when_check_passes() {
        let report = SwarmReport::from_outcomes(&[clean_outcome()]);
        assert_eq!(report.verdict(), Verdict { clean: true, problems: vec![] });
        let json: serde_json::Value =
            serde_json::from_str(&report.to_json(&run_info()).unwrap()).unwrap();
        assert_eq!(json["clean"], true);
        assert_eq!(json["problems"], serde_json::json!([]));
        assert_eq!(json["clients_placed"], 1, "the report's own fields stay at the top");
    }

    #[test]
    fn the_report_lists_the_problems_check_finds() {
        let mut broken = clean_outcome();
        broken.placed = false;
        broken.stats.gates.gate_violations = 1;
        let report = SwarmReport::from_outcomes(&[broken]);
        let verdict = report.verdict();
        assert!(!verdict.clean);
        assert_eq!(verdict.problems, ["0/1 clients placed at the end", "gate_violations = 1"]);
        assert_eq!(verdict.problems, report.problems(), "--check reads the same list");
        let json: serde_json::Value =
            serde_json::from_str(&report.to_json(&run_info()).unwrap()).unwrap();
        assert_eq!(json["clean"], false);
        assert_eq!(json["problems"], serde_json::json!(verdict.problems));
    }

    #[test]
    fn the_report_carries_the_run_metadata() {
        let report = SwarmReport::from_outcomes(&[clean_outcome()]);
        let json: serde_json::Value =
            serde_json::from_str(&report.to_json(&run_info()).unwrap()).unwrap();
        let run = &json["run"];
        assert_eq!(run["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(run["started_at"], "2026-12-06T16:08:41Z");
        assert_eq!(run["duration_ms"], 30_250);
        assert_eq!(run["seed"], 7);
        assert_eq!(run["impair_seed"], 9);
        assert_eq!(run["server"], "127.0.0.1:7777");
        assert_eq!(run["options"]["duration"], "30s");
        assert_eq!(run["argv"], serde_json::json!(["gatehouse-sim", "--clients", "1"]));
    }

    /// `--check` refuses every figure declared `Check::Zero` above 0, by its JSON name, and
    /// prints every figure by its label.
    #[test]
    fn check_and_print_follow_the_declarations() {
        let mut clean = outcome(0);
        clean.stats.errors.clear();
        clean.stats.gates.violation_samples.clear();
        let report = SwarmReport::from_outcomes(&[clean.clone()]);
        assert_eq!(report.problems(), Vec::<String>::new());

        let mut broken = clean;
        broken.stats.spawns_at_stale_node = 2;
        broken.stats.gates.gate_violations = 1;
        let report = SwarmReport::from_outcomes(&[broken]);
        assert_eq!(report.problems(), ["spawns_at_stale_node = 2", "gate_violations = 1"]);
        let text = report.to_string();
        let all = SwarmReport::FIGURES.iter().chain(GatesSection::FIGURES);
        for figure in all.chain(RouterFigures::FIGURES) {
            assert!(text.contains(figure.label), "{} missing from:\n{text}", figure.label);
        }
    }
}
